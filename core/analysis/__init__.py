"""What people read: metrics of a run, the summary, `dralab audit` and `schedule` over a cluster dump,
`dralab whatif`. Imports every layer below.
"""
