"""`dralab report`: a run's log as data, plots and a self-contained HTML page.
Imports dralab.core and replay/logs.
"""
