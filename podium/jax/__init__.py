"""A JAX front end for the TensorCore (docs/jax.md): trace a function with
``jax.make_jaxpr``, lower its primitives to one :class:`~podium.program.Program`, run it on
the golden ISA simulator or the RTL chip.

    from podium.jax import jit, scan, pod_scan
    outputs, counters = jit(f)(x, w)                    # numpy outputs, the run's counters
    carry, ys, counters = scan(step, params, (xs, ys))  # N steps in one program
    carry, ys, counters = pod_scan(step, params, (xs, ys), pod="2x2", axis="batch")

``jax`` is imported here, when this package is imported, not by ``podium`` itself.
"""

from dataclasses import dataclass

import numpy as np

from spec.tensorcore import TensorCoreConfig

from ..runner import run as _run
from .lower import PRIMITIVES, Port, Unsupported, from_phys, lower, to_phys

__all__ = ["jit", "scan", "pod_scan", "pod_compile", "pod_config", "PODS", "compile_fn", "Compiled",
           "Unsupported", "PRIMITIVES", "DEFAULT_CONFIG"]


def _default_config():
    from ..workloads.vit import TENSORCORE
    return TENSORCORE


DEFAULT_CONFIG = None
"""None: the ViT's TensorCore (podium/workloads/vit.py ``TENSORCORE``, 16 x 16 bfloat16 MXU,
512 KiB VMEM), whose RTL build is shared with the transformer tests."""


@dataclass
class Compiled:
    """A lowered function: its program and how its pytrees map to the program's tensors."""

    program: object
    inputs: list          # Port per flat input
    outputs: list         # Port per flat output
    in_tree: object
    out_tree: object
    carry: int
    steps: int
    stacked: bool = False  # streamed inputs and outputs have a leading steps axis

    @property
    def L(self):
        return self.program.metadata["lanes"]

    def pack(self, flat_args):
        """Program inputs (name -> rows) of the flat arguments (carries: one value; streamed
        inputs: ``steps`` stacked along a new leading axis when compiled with ``steps``)."""
        image = {}
        for k, (p, a) in enumerate(zip(self.inputs, flat_args, strict=True)):
            a = np.asarray(a, np.float32)
            if k < self.carry or not self.stacked:
                if a.shape != p.shape:
                    raise ValueError(f"argument {k} has shape {a.shape}, traced as {p.shape}")
                image[p.name] = to_phys(a, p.R, p.C, self.L)
            else:
                if a.shape != (self.steps, *p.shape):
                    raise ValueError(f"argument {k} has shape {a.shape}, expected "
                                     f"{(self.steps, *p.shape)} (steps first)")
                image[p.name] = np.concatenate([to_phys(s, p.R, p.C, self.L) for s in a])
        return image

    def unpack(self, outputs):
        flat = []
        for k, p in enumerate(self.outputs):
            rows = outputs[p.name]
            if k < self.carry or not self.stacked:
                v = from_phys(rows, p.R, p.C, self.L).reshape(p.shape)
            else:
                n = len(rows) // self.steps
                v = np.stack([from_phys(rows[s * n:(s + 1) * n], p.R, p.C, self.L)
                              .reshape(p.shape) for s in range(self.steps)])
            flat.append(v.astype(p.dtype))
        return flat

    def run(self, flat_args, sim="golden", **options):
        """(flat outputs, counters) of a run on backend ``sim``."""
        if sim != "golden":
            import importlib
            importlib.import_module("sim.programs")   # registers the RTL backends
        result, outs = _run(self.program, self.pack(flat_args), sim=sim, **options)
        if result.status != "done":
            raise RuntimeError(f"the program ended with status {result.status} "
                               f"({result.error.name} at instruction {result.error_pc})")
        return self.unpack(outs), dict(result.counters)


def _user_line(tb):
    """``file:line (function)`` of the innermost frame of ``tb`` outside jax and this
    package: the user's call."""
    import os
    import traceback
    here = os.path.dirname(__file__)
    where = "?"
    for f in traceback.extract_tb(tb):
        path = f.filename
        if path.startswith(here) or "site-packages" in path or "/jax/_src/" in path:
            continue
        where = f"{os.path.basename(f.filename)}:{f.lineno} ({f.name})"
    return where


def _trace(fn, example_args, axis_env):
    import jax
    try:
        return jax.make_jaxpr(fn, return_shape=True, axis_env=axis_env)(*example_args)
    except NameError as e:
        if "axis name" not in str(e):
            raise
        axis = str(e).split("axis name:")[-1].split(".")[0].strip()
        inside = (f"the pod program's only axis is {axis_env[0][0]!r}" if axis_env else
                  "a single-chip program has no named axis (podium.jax.pod_scan runs a "
                  "data-parallel step on a pod; docs/jax.md)")
        raise Unsupported(f"{_user_line(e.__traceback__)}: psum: an all-reduce over axis "
                          f"{axis!r}: {inside}") from None


def compile_fn(fn, *example_args, config=None, carry=0, steps=None, pod=None, axis=None,
               segment=None):
    """Trace ``fn`` on ``example_args`` (arrays or ``jax.ShapeDtypeStruct``; pytrees) and
    lower it: a :class:`Compiled`. ``carry`` and ``steps``: see :func:`scan`; ``pod`` (a
    PodConfig) and ``axis``: see :func:`pod_scan` (``config`` is then the pod's
    TensorCore); ``segment``: see :func:`scan`."""
    if pod is not None:
        config = pod.tensorcore
    config = config or _default_config()
    if not isinstance(config, TensorCoreConfig):
        raise TypeError(f"config must be a TensorCoreConfig, got {type(config).__name__}")
    axis_env = [(axis, pod.chips)] if pod is not None else []
    closed, out_shape = _trace(fn, example_args, axis_env)
    return _compile_closed(fn, closed, out_shape, example_args, config, carry, steps, pod,
                           axis, segment)


def _compile_closed(fn, closed, out_shape, example_args, config, carry, steps, pod, axis,
                    segment=None):
    import jax
    flat, in_tree = jax.tree.flatten(example_args)
    out_flat, out_tree = jax.tree.flatten(out_shape)
    name = getattr(fn, "__name__", "fn")
    code = getattr(fn, "__code__", None)
    if code is not None:
        name = f"{code.co_filename}:{code.co_firstlineno} ({name})"
    program, ins, outs = lower(closed, config, carry=carry, steps=steps or 1, name=name,
                               pod=pod, axis=axis, segment=segment)
    return Compiled(program, ins, outs, in_tree, out_tree, carry, steps or 1,
                    stacked=steps is not None)


def _fn_name(fn):
    """``file:line (name)`` of the user's function (through wrappers such as shard_map's)."""
    import os
    inner = fn
    while getattr(inner, "__wrapped__", None) is not None:
        inner = inner.__wrapped__
    code = getattr(inner, "__code__", None)
    name = getattr(inner, "__name__", "fn")
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno} ({name})" if code \
        else name


def _shard_map_body(closed, axis, chips, carry, fn=None):
    """The per-chip jaxpr of a function that is one ``shard_map`` over the pod's axis
    (replicated carries in, inputs sharded along their first axis, replicated outputs), or
    None when the function is not a ``shard_map``."""
    from jax._src import source_info_util
    from jax.extend.core import ClosedJaxpr
    j = closed.jaxpr
    if not j.eqns or all(e.primitive.name != "shard_map" for e in j.eqns):
        return None
    e = next(e for e in j.eqns if e.primitive.name == "shard_map")
    where = source_info_util.summarize(e.source_info) or _fn_name(fn)

    def refuse(what):
        raise Unsupported(f"{where}: shard_map: {what} (docs/jax.md, \"Data parallel on the "
                          f"pod\")")
    if len(j.eqns) != 1 or list(e.invars) != list(j.invars) \
            or list(e.outvars) != list(j.outvars):
        refuse("the function must be the shard_map alone, on its inputs and outputs")
    mesh = dict(e.params["mesh"].shape)
    if mesh != {axis: chips}:
        refuse(f"a mesh of {mesh}; the pod's is {{{axis!r}: {chips}}}")

    def names(spec):
        return [p if not isinstance(p, tuple) else (p[0] if len(p) == 1 else p)
                for p in tuple(spec)]
    for k, spec in enumerate(e.params["in_specs"]):
        parts = names(spec)
        if k < carry and any(p is not None for p in parts):
            refuse(f"carry {k} has the spec {spec}; carries are replicated, P()")
        if k >= carry and (not parts or parts[0] != axis
                           or any(p is not None for p in parts[1:])):
            refuse(f"input {k} has the spec {spec}; a step's inputs are sharded along their "
                   f"first axis, P({axis!r})")
    for k, spec in enumerate(e.params["out_specs"]):
        if any(p is not None for p in names(spec)):
            refuse(f"output {k} has the spec {spec}; outputs are replicated, P() (psum them)")
    body = e.params["jaxpr"]
    return ClosedJaxpr(body, []) if not isinstance(body, ClosedJaxpr) else body


def jit(fn, sim="golden", config=None, **options):
    """``jit(fn)(*args)`` -> ``(outputs, counters)``: ``fn`` traced on ``args``, compiled to
    one program for ``config`` (default: the ViT's TensorCore) and run on ``sim``
    ("golden": the ISA simulator; "native": the RTL chip Verilated with a C++ testbench,
    sim/native.py, the fast path; "verilator": the RTL chip under cocotb, the same cycles,
    counters and outputs); ``outputs`` is ``fn``'s
    output pytree with numpy arrays, ``counters`` the run's counters (cycles, mxu_busy, ...).
    ``options`` go to the backend (``max_steps``). ``fn`` is traced and compiled once per
    structure, shapes and dtypes of the arguments; the last call's :class:`Compiled` is
    ``wrapped.last``."""
    import jax

    cache = {}

    def wrapped(*args):
        flat, tree = jax.tree.flatten(args)
        key = (tree, tuple((np.shape(a), np.asarray(a).dtype.str) for a in flat))
        if key not in cache:
            cache[key] = compile_fn(fn, *args, config=config)
        c = wrapped.last = cache[key]
        outs, counters = c.run(flat, sim=sim, **options)
        return jax.tree.unflatten(c.out_tree, outs), counters

    wrapped.last = None
    return wrapped


def scan(fn, init, xs, sim="golden", config=None, segment=None, **options):
    """Like ``jax.lax.scan(fn, init, xs)`` in one program: ``fn(carry, x) -> (carry, y)``
    runs once per leading index of ``xs``; the carry stays in VMEM across steps, each step's
    ``x`` is loaded from HBM and its ``y`` stored to HBM. Returns ``(carry, ys, counters)``
    with numpy arrays (``ys`` stacked along a leading axis). A program longer than the
    instruction memory runs as segments (docs/jax.md, "Segments"; ``counters["segments"]``);
    ``segment`` (instructions) segments it at that length even when it would fit."""
    import jax
    steps = {np.shape(a)[0] for a in jax.tree.leaves(xs)}
    if len(steps) != 1:
        raise ValueError(f"every leaf of xs must have the same leading length, got "
                         f"{sorted(steps)}")
    (steps,) = steps
    x0 = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a)[1:], np.asarray(a).dtype), xs)
    init_s = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype),
                          init)

    def flat_fn(carry, x):
        c, y = fn(carry, x)
        return c, y

    ncarry = len(jax.tree.leaves(init))
    c = compile_fn(flat_fn, init_s, x0, config=config, carry=ncarry, steps=steps,
                   segment=segment)
    scan.last = c
    args = [*jax.tree.leaves(init), *jax.tree.leaves(xs)]
    outs, counters = c.run(args, sim=sim, **options)
    res = jax.tree.unflatten(c.out_tree, outs)
    return res[0], res[1], counters


scan.last = None


def pod_config(dims, config=None, memory="axi"):
    """A pod of TensorCores (spec/pod.py ``PodConfig``) for the front end: a torus of
    ``dims`` chips (``(2, 2)``, ``(4,)``), each chip ``config`` (default: the ViT's
    TensorCore) with an ICI queue, flits of its VMEM rows, HBM (``memory`` "axi": a memory
    model's AXI4 ports; "hbm": the chip's HBM controller, two AXI4 ports a flit wide: HBM2
    pseudo-channels for 256-bit flits, legacy channels for 512-bit ones, the TensorCore's DMA
    then as wide)."""
    import dataclasses

    from spec.chip import ChipConfig
    from spec.hbm import HBMConfig
    from spec.ici import ICIConfig
    from spec.nic import NICConfig
    from spec.pod import PodConfig
    from spec.protocol import LOCAL_PORTS
    tc = config or _default_config()
    # a deadlock watch long enough for a neighbour's work (a chip waits for the collective)
    tc = dataclasses.replace(tc, ici=True, deadlock_cycles=max(tc.deadlock_cycles, 1 << 16))
    nic = NICConfig(ici=ICIConfig(dims=tuple(dims), classes=2, vcs=2, buffer_depth=8,
                                  flit_bits=8 * tc.row_bytes, max_packet=8,
                                  local_ports=LOCAL_PORTS))
    hbm = HBMConfig()
    if memory == "hbm":
        # the network interface's HBM port is a flit wide: pseudo-channels (256-bit AXI4)
        # or, for flits of 512 bits (the ViT's TensorCore), legacy channels (512-bit)
        hbm = HBMConfig(ports=2)
        if hbm.axi_data_width != 8 * tc.row_bytes:
            hbm = HBMConfig(ports=2, channel_mode="legacy")
            tc = dataclasses.replace(tc, axi_data_width=hbm.axi_data_width)
    return PodConfig(chip=ChipConfig(tensorcore=tc, memory=memory, hbm=hbm, nic=nic))


PODS = {"2x2": (2, 2), "1x4": (4,)}
"""The pods ``pod_scan`` takes by name: a 2x2 torus (the 2-D all-reduce) and a ring of
four (a ring all-reduce); any other pod as a PodConfig."""


def _pod(pod, config):
    from spec.pod import PodConfig
    if isinstance(pod, PodConfig):
        return pod
    if pod not in PODS:
        raise ValueError(f"pod must be one of {', '.join(PODS)} or a PodConfig, got {pod!r}")
    return pod_config(PODS[pod], config)


def _shard(a, n, c):
    a = np.asarray(a)
    if a.ndim < 2 or a.shape[1] % n:
        raise ValueError(f"every leaf of xs is sharded over the pod's {n} chips along its "
                         f"second axis (the batch, after the steps): got shape {a.shape}")
    k = a.shape[1] // n
    return a[:, c * k:(c + 1) * k]


def pod_compile(fn, init, xs, pod="2x2", axis="batch", config=None):
    """``(Compiled, PodConfig, per-chip flat arguments)`` of :func:`pod_scan`'s program (the
    same on every chip) and each chip's inputs (``Compiled.pack`` them)."""
    import jax
    podc = _pod(pod, config)
    n = podc.chips
    steps = {np.shape(a)[0] for a in jax.tree.leaves(xs)}
    if len(steps) != 1:
        raise ValueError(f"every leaf of xs must have the same leading length, got "
                         f"{sorted(steps)}")
    (steps,) = steps
    shards = [jax.tree.map(lambda a, c=c: _shard(a, n, c), xs) for c in range(n)]
    x0 = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a)[1:], np.asarray(a).dtype),
                      shards[0])
    init_s = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype),
                          init)
    ncarry = len(jax.tree.leaves(init))
    # A shard_map over the pod's axis, traced on the whole batch: its body is the chip's.
    xg = jax.tree.map(lambda a: jax.ShapeDtypeStruct(np.shape(a)[1:], np.asarray(a).dtype), xs)
    try:
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(init_s, xg)
    except Exception:       # a function of one chip (psum of an unbound axis, its shapes)
        closed = None
    body = _shard_map_body(closed, axis, n, ncarry, fn) if closed is not None else None
    if body is not None:
        c = _compile_closed(fn, body, out_shape, (init_s, x0), podc.tensorcore, ncarry, steps,
                            podc, axis)
    else:
        c = compile_fn(fn, init_s, x0, carry=ncarry, steps=steps, pod=podc, axis=axis)
    pod_scan.last = c
    return c, podc, [[*jax.tree.leaves(init), *jax.tree.leaves(s)] for s in shards]


def pod_scan(fn, init, xs, pod="2x2", axis="batch", sim="golden", config=None,
             max_steps=200_000_000, seed=None):
    """Data-parallel :func:`scan` on a pod: ``fn(carry, x) -> (carry, y)`` is the function
    of ONE chip (what ``shard_map`` or ``pmap`` maps), written with ``jax.lax.psum`` /
    ``pmean`` over the named ``axis`` (every chip of the pod); it is traced with that axis
    bound, compiled once, and the program runs on every chip: the carry ``init`` replicated,
    every leaf of ``xs`` (``steps x batch x ...``) split along the batch into one shard per
    chip (chip ``c`` takes the ``c``-th consecutive block), each ``psum`` an fp32 all-reduce
    through the ICI. Returns ``(carry, ys, counters)`` of chip 0 (``pod_scan.chips``: every
    chip's ``(carry, ys)``; ``pod_scan.counters``: every chip's counters; ``pod_scan.last``:
    the :class:`Compiled`). ``pod``: "2x2", "1x4" or a PodConfig; ``sim``: "golden"
    (podium/podsim.py, the golden pod simulator), "native" (the RTL pod, every chip with its
    HBM controller, in the native simulator: sim/pod_native.py) or "verilator" (the same RTL
    pod through cocotb); a named pod is then built with HBM controllers (``pod_config(...,
    memory="hbm")``), which the golden simulator runs the same way."""
    if sim not in POD_SIMS:
        raise ValueError(f"sim must be one of {', '.join(POD_SIMS)}, got {sim!r}")
    if sim != "golden" and isinstance(pod, str):
        _pod(pod, config)       # a name it knows
        pod = pod_config(PODS[pod], config, memory="hbm")
    c, podc, chip_args = pod_compile(fn, init, xs, pod, axis, config)
    import jax
    program = c.program
    if sim == "golden":
        from ..podsim import PodSim
        sim_ = PodSim(podc, seed=seed, hbm_capacity=program.hbm_capacity)
        for chip, args in zip(sim_.chips, chip_args, strict=True):
            for address, data in program.image(c.pack(args)).items():
                chip.hbm.write(address, data)
            chip.load(program.words)
        results = sim_.run(max_steps=max_steps)
    else:
        import importlib
        importlib.import_module("sim.programs")   # registers the RTL pod backends
        from ..runner import POD_BACKENDS
        if program.hbm_capacity > podc.chip.hbm.capacity:
            raise ValueError(f"the program needs {program.hbm_capacity} bytes of HBM, a chip "
                             f"of the pod has {podc.chip.hbm.capacity}")
        reads = [[(t.address, t.nbytes) for t in program.outputs.values()]] * podc.chips
        run = POD_BACKENDS[sim](podc, [program.words] * podc.chips,
                                [program.image(c.pack(args)) for args in chip_args],
                                reads=reads, max_steps=max_steps)
        results = run.results
        pod_scan.run = run
    per_chip = []
    for k, r in enumerate(results):
        if r.status != "done":
            raise RuntimeError(f"chip {k} ended with status {r.status} ({r.error.name} at "
                               f"instruction {r.error_pc})")
        res = jax.tree.unflatten(c.out_tree, c.unpack(program.read_outputs(r.hbm.read)))
        per_chip.append((res[0], res[1]))
    pod_scan.chips = per_chip
    pod_scan.counters = [dict(r.counters) for r in results]
    counters = dict(results[0].counters)
    return per_chip[0][0], per_chip[0][1], counters


POD_SIMS = ("golden", "native", "verilator")
"""The backends of :func:`pod_scan`."""


pod_scan.last = None
pod_scan.chips = None
pod_scan.counters = None
pod_scan.run = None
__all__ += ["Port"]
