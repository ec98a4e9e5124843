"""Kubernetes API helpers every layer above uses: quantities, durations, field-by-field checking of loaded
YAML, v1 Pod and Node manifests, Workloads, ProvisioningRequests, Kueue's objects, the input error.
Imports nothing of dralab.
"""
