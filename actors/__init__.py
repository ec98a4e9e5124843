"""Processes: the bus (Redis Streams, embedded, in memory), the reactor actors on Ray, the live driver and its
log, the recorder, faults played on real processes. Imports dralab.core only (never replay/ or the CLI).
"""
