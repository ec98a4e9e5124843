"""Dynamic Resource Allocation (resource.k8s.io/v1): the model, manifests (and older API versions converted),
CEL selectors, validation as the API server does it, and the structured allocator.
Imports kube/ only.
"""
