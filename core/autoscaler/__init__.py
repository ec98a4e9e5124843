"""cluster-autoscaler: the reactor (reactor.py, the scan loop) on top of its parts, split as the real
autoscalers split them: simulation/ (the snapshot), provisioning/ (scale-up, expanders, backoff,
ProvisioningRequests), disruption/ (scale-down, drain). Imports the layers below (kube/ .. scheduler/);
within: simulation/ <- provisioning/, disruption/ <- reactor.py.
"""
