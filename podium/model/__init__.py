"""Analytic performance model of TPU-like systems, from one chip to slices joined over the
data-center network, calibrated on the benchmark results of Podium's own RTL.

- :mod:`.hardware`: chips, slices (tori), systems of slices, efficiency terms, published chips.
- :mod:`.workloads`: transformer training, MoE, inference and an SDXL-shaped UNet, reduced to
  the GEMMs and memory streams one chip executes.
- :mod:`.costs`: rooflines, collectives on torus axes and over the DCN, overlap, step times.
- :mod:`.calibrate`: the measured efficiency terms, read from docs/results/*.json.
- :mod:`.fit`: the two fitted software terms (overlap, DCN latency).
- :mod:`.presets`: ready-made systems and workloads.
- :mod:`.report`: docs/results/scaling.md, .json and plots; :mod:`.cli`: ``podium model``.

docs/model.md states the equations and every assumption.
"""

__all__ = ["hardware", "workloads", "costs", "calibrate", "fit", "presets", "report", "cli"]
