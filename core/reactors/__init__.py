"""The reactors: scheduler, autoscaler, cloud and node lifecycle (pure)."""
