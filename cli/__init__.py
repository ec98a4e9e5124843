"""dralab: an emulator of the Kubernetes control plane for accelerator workloads."""
__version__ = "0.1.0"
