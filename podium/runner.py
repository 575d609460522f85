"""Running a :class:`~podium.program.Program` on a backend: the one seam between compiled
programs and whatever executes them. A backend is a function ``(program, image, **options)
-> Result`` (podium/isasim.py's :class:`~podium.isasim.Result`: status, error, registers,
semaphores, VMEM, an ``hbm`` with ``read(address, length)``, counters); ``golden`` is the ISA
simulator; ``verilator`` (the RTL chip) is registered by sim/programs.py."""

from .isasim import TensorCoreSim

__all__ = ["BACKENDS", "run", "golden", "register"]


def golden(program, image, *, max_steps=50_000_000, seed=None):
    """Run on the golden ISA simulator; ``seed`` picks a random fair interleaving."""
    sim = TensorCoreSim(program.config, hbm_capacity=program.hbm_capacity, seed=seed)
    for address, data in image.items():
        sim.hbm.write(address, data)
    sim.load(program.words)
    return sim.run(max_steps=max_steps)


def run(program, inputs=None, sim="golden", **options):
    """Run ``program`` with ``inputs`` (name -> array) on backend ``sim``; returns
    ``(result, outputs)``, outputs name -> array read from HBM after the run (only when the
    run finished: ``result.status == "done"``)."""
    if sim not in BACKENDS:
        raise ValueError(f"sim must be one of {', '.join(BACKENDS)}, got {sim!r} (the RTL "
                         f"backends are registered by importing sim.programs)")
    result = BACKENDS[sim](program, program.image(inputs or {}), **options)
    outputs = program.read_outputs(result.hbm.read) if result.status == "done" else {}
    return result, outputs


BACKENDS = {"golden": golden}
"""Every backend by name; the RTL's register themselves from above (sim/programs.py adds
``verilator``), so this software never imports a simulator."""


def register(name, backend):
    """Make ``backend`` runnable as ``run(..., sim=name)``."""
    BACKENDS[name] = backend
