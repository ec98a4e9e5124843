"""Dynamic Resource Allocation (resource.k8s.io/v1): model, manifests, CEL, the structured allocator."""
