"""kube-scheduler: the scheduler reactor, its queue, its cycle state and its plugins (filters, the
DynamicResources plugin, gangs, fragmentation scoring). Imports the layers below (kube/ .. cluster/).
"""
