"""The autoscaler's simulation: its own snapshot of the cluster, as cluster-autoscaler's simulator/ and
ClusterSnapshot. What a node group's template node would hold (capacity.py, per policy: counts or the
DRA allocator), the claims of pods that do not exist yet (virtual_claims.py), and the snapshot's nodes,
ready and upcoming, with FilterOutSchedulable (nodes.py). Imports the layers below autoscaler/ only;
nothing else in autoscaler/ (provisioning/ and disruption/ build on it).
"""
