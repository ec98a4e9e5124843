"""The autoscaler's provisioning: scale-up, as cluster-autoscaler's core/scaleup, estimator/ and expander/
and Karpenter's provisioner. The binpacking estimator (estimator.py), the expanders (expanders.py), each
group's scale-up option (scale_up.py), late nodes and backoff (backoff.py), ProvisioningRequests
(provreq_broker.py). Imports the layers below autoscaler/ and autoscaler/simulation/; never disruption/
nor the reactor.
"""
