"""Invariants: over a state, over the record stream, liveness, and all of them over a log.
Imports the layers below (kube/ .. run/).
"""
