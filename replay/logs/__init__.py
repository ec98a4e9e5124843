"""The `.dralog` file (writer, streaming and seeking readers, the block format and its budget) and where
dralab writes files (output paths checked before any work). Imports dralab.core only.
"""
