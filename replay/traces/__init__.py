"""Real traces as runs: openb (and the FGD fragmentation experiment, with Go's random source), Philly,
Pollux. Imports dralab.core, replay/logs and replay/simulation.
"""
