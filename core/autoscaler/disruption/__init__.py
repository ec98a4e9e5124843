"""The autoscaler's disruption: scale-down, as cluster-autoscaler's core/scaledown and simulator/drain and
Karpenter's disruption controller. Which nodes are unneeded and removed (scale_down.py), which pods may
move and where they would go (drain.py). Imports the layers below autoscaler/ and autoscaler/simulation/;
never provisioning/ nor the reactor.
"""
