"""cluster-autoscaler: the scale-up loop and its simulated cluster, backoff, scale-down and drain,
ProvisioningRequests. Imports the layers below (kube/ .. scheduler/).
"""
