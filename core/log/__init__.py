"""The event schema: every change to the cluster is one of these events, in records appended to the log.
Imports kube/ at most.
"""
