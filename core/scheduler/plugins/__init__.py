"""kube-scheduler's plugins (pkg/scheduler/framework/plugins), each in a module named after the upstream
plugin it models. Imports the layers below the scheduler (kube/ .. cluster/), the framework's types
and the cycle state (cycle.py), and nothing of the reactor.
"""
