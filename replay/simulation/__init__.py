"""The deterministic simulator (virtual time, seeded interleavings, runtime faults) and the tools
built on it: verify, time travel, what-if, shrink, chaos. Imports dralab.core and replay/logs.
"""
