"""Running a :class:`~podium.program.Program` on a backend: the one seam between compiled
programs and whatever executes them. A backend is a function ``(program, image, **options)
-> Result`` (podium/isasim.py's :class:`~podium.isasim.Result`: status, error, registers,
semaphores, VMEM, an ``hbm`` with ``read(address, length)``, counters); ``golden`` is the ISA
simulator; ``verilator`` (the RTL chip) is registered by sim/programs.py."""

from .isasim import TensorCoreSim

__all__ = ["BACKENDS", "LIMITS", "POD_BACKENDS", "run", "golden", "register", "register_pod"]

GOLDEN_MAX_STEPS = 50_000_000


def golden(program, image, *, max_steps=GOLDEN_MAX_STEPS, seed=None):
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

LIMITS = {"golden": ("steps", f"{GOLDEN_MAX_STEPS:,} steps")}
"""Each backend's ``max_steps``: its unit and its default, in words. A run that reaches it
ends with status ``timeout``."""


def register(name, backend, *, unit="cycles", default="the backend's"):
    """Make ``backend`` runnable as ``run(..., sim=name)``; its ``max_steps`` counts
    ``unit``, ``default`` says its default in words."""
    BACKENDS[name] = backend
    LIMITS[name] = (unit, default)


POD_BACKENDS = {}
"""The RTL pod's backends by name (sim/pod_native.py adds ``native`` and ``verilator`` when
sim/programs.py is imported): ``(pod, programs, images, *, reads, max_steps) -> run`` with
``run.results``, one :class:`~podium.isasim.Result` per chip. The golden pod simulator is
podium/podsim.py."""


def register_pod(name, backend):
    """Make ``backend`` a pod backend named ``name``."""
    POD_BACKENDS[name] = backend
