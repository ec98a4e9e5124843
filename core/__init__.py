"""dralab's pure domain, as a stack of layer folders, each importing only those below it:
kube -> dra -> log -> state -> scenario -> engine -> cluster -> scheduler -> autoscaler -> controllers -> run ->
checks -> analysis (docs/architecture.md draws them; tests/test_layers.py keeps the order). No clocks, sockets,
environment or unseeded randomness anywhere in here: a seed and the inputs decide everything.
"""
