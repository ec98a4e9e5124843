"""The reactor contract: a pure function of (view, now, seeded random) returning intents.
Imports the layers below (kube/ .. scenario/).
"""
