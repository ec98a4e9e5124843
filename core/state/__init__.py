"""The cluster as a pure fold over the log (ClusterState and its parts), and its snapshots as bytes.
Imports kube/, dra/, log/.
"""
