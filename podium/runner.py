"""Running a :class:`~podium.program.Program` on a backend: the one seam between compiled
programs and whatever executes them. A backend is a function ``(program, image, **options)
-> Result`` (podium/isasim.py's :class:`~podium.isasim.Result`: status, error, registers,
semaphores, VMEM, an ``hbm`` with ``read(address, length)``, counters); ``golden`` is the ISA
simulator; ``verilator`` (the RTL chip) is registered by sim/programs.py."""

from .isasim import TensorCoreSim

__all__ = ["BACKENDS", "LIMITS", "POD_BACKENDS", "run", "run_segments", "golden", "register",
           "register_pod"]

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
    image = program.image(inputs or {})
    segments = program.segments()
    if len(segments) == 1:
        result = BACKENDS[sim](program, image, **options)
    else:
        result = run_segments(segments, image, BACKENDS[sim], **options)
    outputs = program.read_outputs(result.hbm.read) if result.status == "done" else {}
    return result, outputs


def run_segments(segments, image, backend, **options):
    """Run ``segments`` (:meth:`Program.segments`) one after another on ``backend``: each
    from the HBM the one before left (read back whole, ``hbm_capacity`` bytes, and given to
    the next run as its image); VMEM and the registers start afresh in each, as the program
    expects (docs/jax.md, "Segments"). Returns the last run's :class:`Result` with the
    counters of every run added up (``cycles``: the chip's cycles from each start to its
    done; the host's work between the runs, loading each segment's instructions, is not in
    them), ``segments`` the runs made; the first run that does not finish ends it.
    ``max_steps`` bounds each run."""
    import dataclasses
    total, result = {}, None
    for k, seg in enumerate(segments):
        result = backend(seg, image, **options)
        for name, v in result.counters.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                total[name] = total.get(name, 0) + v
            else:
                total[name] = v
        total["segments"] = k + 1
        if result.status != "done":
            break
        image = {0: bytes(result.hbm.read(0, seg.hbm_capacity))}
    return dataclasses.replace(result, counters=total)


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
