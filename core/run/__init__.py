"""A run's configuration (which reactors, with what settings) and a scenario as the run's external
inputs. Imports the layers below (kube/ .. controllers/).
"""
