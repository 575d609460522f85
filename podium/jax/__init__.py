"""A JAX front end for the TensorCore (docs/jax.md): trace a function with
``jax.make_jaxpr``, lower its primitives to one :class:`~podium.program.Program`, run it on
the golden ISA simulator or the RTL chip.

    from podium.jax import jit, scan
    outputs, counters = jit(f)(x, w)                    # numpy outputs, the run's counters
    carry, ys, counters = scan(step, params, (xs, ys))  # N steps in one program

``jax`` is imported here, when this package is imported, not by ``podium`` itself.
"""

from dataclasses import dataclass

import numpy as np

from spec.tensorcore import TensorCoreConfig

from ..runner import run as _run
from .lower import PRIMITIVES, Port, Unsupported, from_phys, lower, to_phys

__all__ = ["jit", "scan", "compile_fn", "Compiled", "Unsupported", "PRIMITIVES",
           "DEFAULT_CONFIG"]


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


def compile_fn(fn, *example_args, config=None, carry=0, steps=None):
    """Trace ``fn`` on ``example_args`` (arrays or ``jax.ShapeDtypeStruct``; pytrees) and
    lower it: a :class:`Compiled`. ``carry`` and ``steps``: see :func:`scan`."""
    import jax
    config = config or _default_config()
    if not isinstance(config, TensorCoreConfig):
        raise TypeError(f"config must be a TensorCoreConfig, got {type(config).__name__}")
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*example_args)
    flat, in_tree = jax.tree.flatten(example_args)
    out_flat, out_tree = jax.tree.flatten(out_shape)
    name = getattr(fn, "__name__", "fn")
    code = getattr(fn, "__code__", None)
    if code is not None:
        name = f"{code.co_filename}:{code.co_firstlineno} ({name})"
    program, ins, outs = lower(closed, config, carry=carry, steps=steps or 1, name=name)
    return Compiled(program, ins, outs, in_tree, out_tree, carry, steps or 1,
                    stacked=steps is not None)


def jit(fn, sim="golden", config=None, **options):
    """``jit(fn)(*args)`` -> ``(outputs, counters)``: ``fn`` traced on ``args``, compiled to
    one program for ``config`` (default: the ViT's TensorCore) and run on ``sim``
    ("golden": the ISA simulator; "verilator": the RTL chip); ``outputs`` is ``fn``'s
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


def scan(fn, init, xs, sim="golden", config=None, **options):
    """Like ``jax.lax.scan(fn, init, xs)`` in one program: ``fn(carry, x) -> (carry, y)``
    runs once per leading index of ``xs``; the carry stays in VMEM across steps, each step's
    ``x`` is loaded from HBM and its ``y`` stored to HBM. Returns ``(carry, ys, counters)``
    with numpy arrays (``ys`` stacked along a leading axis)."""
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
    c = compile_fn(flat_fn, init_s, x0, config=config, carry=ncarry, steps=steps)
    scan.last = c
    args = [*jax.tree.leaves(init), *jax.tree.leaves(xs)]
    outs, counters = c.run(args, sim=sim, **options)
    res = jax.tree.unflatten(c.out_tree, outs)
    return res[0], res[1], counters


scan.last = None
__all__ += ["Port"]
