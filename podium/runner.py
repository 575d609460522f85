"""Running a :class:`~podium.program.Program` on a backend: the one seam between compiled
programs and whatever executes them. A backend is a function ``(program, image, **options)
-> Result`` (podium/isasim.py's :class:`~podium.isasim.Result`: status, error, registers,
semaphores, VMEM, an ``hbm`` with ``read(address, length)``, counters); ``golden`` is the ISA
simulator; ``verilator`` (the RTL chip) is registered by sim/programs.py. ``run_pod`` runs a
program on every chip of a pod: on the golden pod simulator (podium/podsim.py) or a backend of
:data:`POD_BACKENDS`."""

from .isasim import TensorCoreSim
from .podsim import PodSim

__all__ = ["BACKENDS", "LIMITS", "POD_BACKENDS", "POD_LIMITS", "pod_sims", "run", "run_pod",
           "run_segments", "golden", "golden_pod", "register", "register_pod"]

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


POD_LIMITS = {"golden": ("steps", f"{GOLDEN_MAX_STEPS:,} steps")}
"""Each pod backend's ``max_steps``: its unit and its default, in words."""


def register_pod(name, backend, *, unit="cycles", default="the backend's"):
    """Make ``backend`` a pod backend named ``name``; its ``max_steps`` counts ``unit``,
    ``default`` says its default in words."""
    POD_BACKENDS[name] = backend
    POD_LIMITS[name] = (unit, default)


class _PodRun:
    """The golden pod's run as a pod backend returns it: ``results``, a Result per chip."""

    def __init__(self, results):
        self.results = results


def golden_pod(pod, programs, images, *, reads=None, max_steps=GOLDEN_MAX_STEPS, seed=None,
               hbm_capacity=1 << 20):
    """Run ``programs`` (instruction words, one list per chip) on the golden pod simulator
    (podium/podsim.py) of ``pod`` with HBM ``images`` (``{address: bytes}`` per chip) of
    ``hbm_capacity`` bytes; ``reads`` is accepted for the RTL backends' signature (every
    chip's whole HBM can be read); ``seed`` picks a random fair interleaving."""
    sim = PodSim(pod, seed=seed, hbm_capacity=hbm_capacity)
    for chip, words, image in zip(sim.chips, programs, images, strict=True):
        chip.load(words)
        for address, data in image.items():
            chip.hbm.write(address, data)
    return _PodRun(sim.run(max_steps=max_steps))


def pod_sims():
    """Every pod backend's name: ``golden`` and the RTL's of :data:`POD_BACKENDS`."""
    return ["golden", *sorted(POD_BACKENDS)]


def run_pod(program, pod, inputs, sim="golden", **options):
    """Run ``program`` on every chip of ``pod`` (a PodConfig whose chips have the program's
    TensorCore), chip ``k`` with ``inputs[k]`` (name -> array), on backend ``sim``
    (:func:`pod_sims`); returns ``(results, outputs)``: a Result per chip and each chip's
    outputs (name -> array; empty for a chip whose run did not finish)."""
    if sim not in pod_sims():
        raise ValueError(f"sim must be one of {', '.join(pod_sims())}, got {sim!r} (the RTL "
                         f"backends are registered by importing sim.programs)")
    if pod.tensorcore != program.config:
        raise ValueError("the pod's TensorCore configuration differs from the program's")
    if len(inputs) != pod.chips:
        raise ValueError(f"inputs: one mapping per chip ({pod.chips}), got {len(inputs)}")
    if program.hbm_capacity > pod.chip.hbm.capacity:
        raise ValueError(f"the program needs {program.hbm_capacity} bytes of HBM, the pod's "
                         f"chips have {pod.chip.hbm.capacity}")
    images = [program.image(i) for i in inputs]
    reads = [[(t.address, t.nbytes) for t in program.outputs.values()]] * pod.chips
    programs = [list(program.words)] * pod.chips
    if sim == "golden":
        run = golden_pod(pod, programs, images, hbm_capacity=program.hbm_capacity, **options)
    else:
        run = POD_BACKENDS[sim](pod, programs, images, reads=reads, **options)
    outputs = [program.read_outputs(r.hbm.read) if r.status == "done" else {}
               for r in run.results]
    return run.results, outputs
