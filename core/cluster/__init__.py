"""Pure helpers over the state that several reactors share: node operations, pods' claims from templates,
workload controllers' replacements, how faults read. Imports the layers below (kube/ .. engine/).
"""
