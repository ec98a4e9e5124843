"""Scenario files: the typed scenario, loading and checking it (with the DRA, cloud and fault parts).
Imports kube/, dra/, log/, state/.
"""
