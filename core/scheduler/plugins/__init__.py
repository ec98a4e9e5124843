"""kube-scheduler's plugins (pkg/scheduler/framework/plugins), each in a module named after the upstream
plugin it models. Imports the layers below the scheduler (kube/ .. cluster/) and nothing of the reactor.
"""
