"""Everything offline, over logs: logs/ (the .dralog file, output paths) -> simulation/ (the deterministic
simulator, verify, time travel, what-if, shrink, chaos) -> report/ and traces/. Imports dralab.core only (never
actors/ or the CLI); tests/test_layers.py keeps the order.
"""
