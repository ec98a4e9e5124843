"""The reactors: scheduler, autoscaler, cloud, node lifecycle, device drivers, claim controller (pure)."""
