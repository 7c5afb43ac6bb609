"""Calibration data and the accuracy search: what a conversion learns by running the float32 model.

``samples`` (the samples of a conversion), ``synthetic`` (the default seeded
float32 run, made within its budget), ``cost`` (what that run costs, in seconds
on this machine), ``tune`` (``--tune``: the fewest nodes kept
float32 that make validation pass), ``margin`` (what only the overflow
guard's margin keeps float32) and ``release`` (the release step: float32
islands tried back in LOW on the evidence). The float32 pass and the statistics it fills
are numerics' (``numerics.collect``, ``numerics.activations``); the planner
reads them as ``Calibration`` and ``SearchPins`` (``plan/search_pins.py``).
"""
