"""The other reactors: the cloud, node lifecycle (kubelet), device drivers, the resourceclaim
controller, Kueue's broker, chaos. Imports the layers below (kube/ .. autoscaler/).
"""
