"""Lowering a traced JAX function to a TensorCore :class:`~podium.program.Program`
(docs/jax.md).

The jaxpr of ``jax.make_jaxpr`` is flattened (``jit`` / ``pjit`` / ``closed_call`` /
``custom_jvp_call`` / ``custom_vjp_call`` bodies inlined), equations whose inputs are all
known are folded on the host (jax on CPU), dead equations dropped, and every other equation
lowered in order to VPU, MXU and DMA instructions, one engine at a time (each hand-over a
semaphore ``signal`` / ``wait``).

Layout. Every value is held as fp32 (bool and int values as 0/1 and whole numbers) in a
*physical matrix* of ``R x C`` elements: rank 2 ``(m, n)`` as ``(m, n)``, rank 1 ``(n,)`` as
a row ``(1, n)`` or a column ``(n, 1)`` (whichever its producer or consumer needs; a
``vtrans`` converts), rank 0 as ``(1, 1)``. The matrix is stored in ``ceil(C / L)`` column
chunks (``L = row_bytes / 4`` lanes), each ``ceil(R / L) * L`` consecutive VMEM rows, chunk
after chunk: a tile of ``L x L`` is what ``vtrans`` transposes and what a ``matmul`` takes as
one k-tile. Elements past ``R`` or ``C`` (padding) are zero after every operation: an
operation that would leave something else there multiplies by a 0/1 mask, and an operation
that is not finite at zero (``log``, ``rsqrt``, ``sqrt``, a reciprocal) first sets the
padding to one. A rank-3 value ``(b, m, n)`` is ``b`` slabs, each a rank-2 value (inputs and
outputs: the slabs' rows one after the other); its operations are lowered slab by slab
(:meth:`_Lower.lower_stacked`).

Loop. A program runs ``steps`` iterations of the function: *carry* inputs are loaded into
VMEM once, and the function's first outputs replace them after every step (they are the
program's outputs of the same names at the end); the other, *streamed*, inputs are loaded
from HBM for each step (step ``s`` reads its ``s``-th slice) and the per-step outputs are
stored to HBM for each step. ``jit`` is this with one step and no carry.
"""

import re
from dataclasses import dataclass

import numpy as np

from ..asm import assemble
from ..compiler import _HBM_ALIGN, CompileError, _Asm, _roundup
from ..program import Program, Tensor

__all__ = ["Unsupported", "lower", "PRIMITIVES", "INLINED"]

INLINED = ("pjit", "jit", "closed_call", "core_call", "custom_jvp_call", "custom_vjp_call",
           "custom_vjp_call_jaxpr", "remat", "checkpoint")
"""Primitives whose sub-jaxpr is inlined."""

_ELEMENTWISE = {"add": "add", "add_any": "add", "sub": "sub", "mul": "mul", "max": "max",
                "min": "min"}
_UNARY = ("neg", "exp", "log", "tanh", "logistic", "rsqrt", "sqrt", "abs", "integer_pow",
          "square", "stop_gradient", "convert_element_type", "copy")
_COMPARE = ("gt", "lt", "ge", "le", "eq", "ne")
PRIMITIVES = (tuple(_ELEMENTWISE) + ("div",) + _UNARY + _COMPARE
              + ("and", "or", "xor", "not", "select_n", "dot_general", "reduce_sum",
                 "reduce_max", "reduce_min", "argmax", "argmin",
                 "broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims",
                 "iota", "psum", "psum_invariant", "pvary"))
"""Primitives the front end lowers (``iota`` and every equation of known inputs are folded
on the host)."""

_SEM = {"dma": "s0", "mxu": "s1", "vpu": "s2", "ici": "s3"}

_POOL = tuple(f"r{i}" for i in range(2, 16))
"""The registers of the operands of the step's instructions (r1 counts the steps, r12..r15
are the loads' and stores'): each holds the last value loaded into it, reused while it is
known (a straight run of instructions, see :class:`_CachedAsm`)."""
_KEEP = {"signal", "wait", "vop", "vtrans", "vred", "vcast", "matmul", "mxu.stride",
         "mxu.shape", "dma.load", "dma.store", "dma.shape", "ici.coll", "vpu.cfg", "halt"}
"""Instructions that write no general register."""


_WRITES = {"vop": 0, "vred": 0, "vcast": 0, "vtrans": 0, "matmul": 2, "dma.load": 1,
           "ici.coll": None}
"""The instructions that write VMEM: which of their register operands holds the destination
(None: not known here)."""


class _CachedAsm(_Asm):
    """Assembly text that remembers what the operand registers (``_POOL``) and the VPU's
    ``vpu.cfg`` hold, so an operand already in a register takes no ``li`` and a
    configuration already set no ``vpu.cfg``. Forgotten at a label (a branch target) and
    after any instruction that may write a register (not in ``_KEEP``)."""

    def __init__(self):
        super().__init__()
        self.forget()
        self.writes = []        # VMEM byte addresses written (None: not known), see _WRITES

    def forget(self):
        self.held = {}          # register -> value
        self.order = []         # least recently used first
        self.pinned = set()     # registers of the instruction being built
        self.vcfg = None        # (count, scalar) of the last vpu.cfg, when known

    def __call__(self, line):
        op = line.split()[0]
        if op in _WRITES:
            k = _WRITES[op]
            regs = re.findall(r"\br\d+\b", line.split(None, 1)[1])
            value = self.held.get(regs[k]) if k is not None and k < len(regs) else None
            self.writes.append(value if isinstance(value, int) else None)
        super().__call__(line)
        self.pinned = set()
        if op == "li":
            self.held.pop(line.split()[1].rstrip(","), None)
        elif op not in _KEEP:
            self.forget()

    def place(self, label):
        super().place(label)
        self.forget()

    def reg(self, value):
        """A register of ``_POOL`` holding ``value`` (a ``li`` when none does)."""
        for r, v in self.held.items():
            if v == value:
                self.order.remove(r)
                self.order.append(r)
                self.pinned.add(r)
                return r
        free = [r for r in _POOL if r not in self.held]
        r = free[0] if free else next(r for r in self.order if r not in self.pinned)
        if r in self.held:
            self.order.remove(r)
        pinned = self.pinned
        self(f"li {r}, {value}")
        self.pinned = pinned | {r}
        self.held[r] = value
        self.order.append(r)
        return r
"""The semaphore of the hand-overs to each engine."""
_NEG_BIG = -3.4028234663852886e38      # fp32 lowest: the padding of a max reduction
_TWO_127 = 2.0 ** 127
_FLOAT = ("float32", "bfloat16", "float16")
_PSUM = ("psum", "psum_invariant")
"""All-reduces over a named axis (``jax.lax.psum``; ``psum_invariant`` under ``shard_map``):
lowered to the pod's fp32 all-reduce (``ici.coll``) when compiling for a pod."""


class Unsupported(CompileError):
    """A primitive or shape the front end cannot lower; the message names the primitive and
    the user's source line."""


_CONTEXT = {}
"""id(equation) -> the source line of the call it was inlined from (an equation of jax's
own code, such as cumsum's, has none of the user's)."""


def _where(eqn):
    from jax._src import source_info_util
    eqn = getattr(eqn, "orig", eqn)
    return source_info_util.summarize(eqn.source_info) or _CONTEXT.get(id(eqn), "?")


def _fail(eqn, what):
    raise Unsupported(f"{_where(eqn)}: {eqn.primitive.name}: {what}")


# ---------------------------------------------------------------------------------------
# Flattening and folding


def _is_literal(a):
    from jax.extend.core import Literal
    return isinstance(a, Literal)


def _sub_jaxpr(eqn):
    from jax.extend.core import ClosedJaxpr, Jaxpr
    for key in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        j = eqn.params.get(key)
        if isinstance(j, ClosedJaxpr):
            return j.jaxpr, list(j.consts)
        if isinstance(j, Jaxpr):
            return j, []
    return None


@dataclass
class _Eqn:
    prim: str
    ins: list        # names (str) or numpy constants
    outs: list       # names (None: dropped)
    params: dict
    eqn: object      # the jax equation (source info, primitive)


def _flatten(jaxpr, consts, env, out, fresh, context=""):
    """Append the equations of ``jaxpr`` to ``out`` with their operands renamed through
    ``env`` (var -> name or numpy constant); returns the outputs' names or constants."""
    for v, c in zip(jaxpr.constvars, consts, strict=True):
        env[v] = np.asarray(c)

    def read(a):
        return np.asarray(a.val) if _is_literal(a) else env[a]

    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if context:
            _CONTEXT[id(eqn)] = context
        sub = _sub_jaxpr(eqn) if name in INLINED else None
        if name in INLINED and sub is None:
            _fail(eqn, "a call whose body the front end cannot find")
        if sub is not None:
            sj, sc = sub
            ins = [read(a) for a in eqn.invars]
            # custom_vjp_call passes its residual functions' inputs first: take the last
            ins = ins[len(ins) - len(sj.invars):]
            senv = dict(zip(sj.invars, ins, strict=True))
            res = _flatten(sj, sc, senv, out, fresh, _where(eqn))
            for v, r in zip(eqn.outvars, res, strict=True):
                env[v] = r
            continue
        if name == "pvary":     # shard_map's mark of a value varying over an axis: no data
            for v, a in zip(eqn.outvars, eqn.invars, strict=True):
                env[v] = read(a)
            continue
        outs = []
        for v in eqn.outvars:
            n = fresh()
            env[v] = n
            outs.append(n)
        out.append(_Eqn(name, [read(a) for a in eqn.invars], outs, dict(eqn.params), eqn))
    return [read(a) for a in jaxpr.outvars]


def _fold(eqns):
    """Evaluate on the host every equation whose inputs are all constants; returns the
    remaining equations and the constants by name."""
    known, rest = {}, []
    for q in eqns:
        ins = [known.get(a, a) if isinstance(a, str) else a for a in q.ins]
        if all(not isinstance(a, str) for a in ins) and q.prim not in INLINED + _PSUM:
            vals = q.eqn.primitive.bind(*ins, **q.params)
            vals = vals if q.eqn.primitive.multiple_results else [vals]
            for n, v in zip(q.outs, vals, strict=True):
                known[n] = np.asarray(v)
            continue
        q.ins = ins
        rest.append(q)
    return rest, known


def _prune(eqns, needed):
    """The equations some output in ``needed`` (names) depends on."""
    live, keep = set(needed), []
    for q in reversed(eqns):
        if any(o in live for o in q.outs):
            keep.append(q)
            live.update(a for a in q.ins if isinstance(a, str))
    return keep[::-1]


# ---------------------------------------------------------------------------------------
# Values


@dataclass(eq=False)
class _Buf:
    addr: int
    rows: int
    fixed: bool = False     # a constant's or a carry's: never freed


@dataclass
class _Val:
    """A physical matrix ``R x C`` in VMEM at ``buf``."""

    R: int
    C: int
    buf: _Buf
    shape: tuple
    dtype: str
    B: int = 1      # a rank-3 input or output: B slabs of R x C one after the other


@dataclass(eq=False)
class _Stack:
    """A value whose leading axis is held as ``len(slabs)`` separate values of the trailing
    shape (a rank-3 value always; a rank-2 one a stacked lowering produced). Slabs may share
    buffers (a broadcast over the leading axis)."""

    slabs: list
    shape: tuple
    dtype: str


def _bufs(v):
    return [s.buf for s in v.slabs] if isinstance(v, _Stack) else [v.buf]


class _Aval:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


class _Var:
    def __init__(self, shape, dtype):
        self.aval = _Aval(shape, dtype)


@dataclass
class _Sub:
    """One slab's equation of a stacked equation (``orig``: the jax equation)."""

    primitive: object
    params: dict
    invars: list
    outvars: list
    source_info: object
    orig: object


_PER_SLAB = (tuple(_ELEMENTWISE) + ("div",) + _UNARY + _COMPARE
             + ("and", "or", "xor", "not", "select_n"))
"""Primitives lowered slab by slab on operands of the output's shape (or scalars)."""


class _Alloc:
    """First-fit VMEM allocation in rows."""

    def __init__(self, rows):
        self.free = [(0, rows)]
        self.rows = rows
        self.high = 0

    def get(self, n, what):
        for i, (a, m) in enumerate(self.free):
            if m >= n:
                self.free[i] = (a + n, m - n)
                self.high = max(self.high, a + n)
                return _Buf(a, n)
        raise CompileError(f"{what} does not fit VMEM ({self.rows} rows; "
                           f"{sum(m for _, m in self.free)} free, fragmented)")

    def put(self, buf):
        self.free.append((buf.addr, buf.rows))
        self.free.sort()
        merged = []
        for a, m in self.free:
            if merged and merged[-1][0] + merged[-1][1] == a:
                merged[-1] = (merged[-1][0], merged[-1][1] + m)
            elif m:
                merged.append((a, m))
        self.free = merged


# ---------------------------------------------------------------------------------------
# The lowering


class _Lower:
    def __init__(self, config, pod=None, axis=None):
        if config.mxu.fmt != "bfloat16":
            raise CompileError(f"the JAX front end needs a bfloat16 MXU (mxu.fmt "
                               f"'bfloat16'), the configuration's is {config.mxu.fmt!r}")
        if not config.vtrans:
            raise CompileError("the JAX front end needs a TensorCore with vtrans")
        if not config.vmath:
            raise CompileError("the JAX front end needs a TensorCore with vmath")
        self.config = config
        self.rb = config.row_bytes
        self.L = self.rb // 4
        if config.mxu.rows != self.L or config.mxu.cols != self.L:
            raise CompileError(f"the JAX front end needs an MXU of row_bytes / 4 = {self.L} "
                               f"rows and columns, the configuration's is "
                               f"{config.mxu.rows} x {config.mxu.cols}")
        self.e = _CachedAsm()
        self.alloc = _Alloc(config.vmem_bytes // self.rb)
        self.engine = None
        self.consts = {}       # key -> (_Val, float32 array of the physical matrix)
        self.hbm_consts = []   # (_Val, physical array), from the top of VMEM down
        self.const_top = 0
        self.t = ("r12", "r13", "r14", "r15")
        self.pod, self.axis = pod, axis

    # -- geometry --------------------------------------------------------------------

    def mp(self, R):
        return _roundup(R, self.L)

    def chunks(self, C):
        return -(-C // self.L)

    def nrows(self, R, C):
        return self.mp(R) * self.chunks(C)

    def new(self, R, C, shape=(), dtype="float32", what="a value"):
        return _Val(R, C, self.alloc.get(self.nrows(R, C), what), tuple(shape), dtype)

    def free(self, v):
        self.free_buf(v.buf)

    def free_buf(self, buf):
        if not buf.fixed and not getattr(buf, "freed", False):
            buf.freed = True
            self.alloc.put(buf)

    def addr(self, v, chunk=0, row=0):
        return (v.buf.addr + chunk * self.mp(v.R) + row) * self.rb

    # -- emission --------------------------------------------------------------------

    def use(self, engine):
        if self.engine is not None and self.engine != engine:
            # one semaphore per receiving queue: a wait can only take its own hand-over
            self.e(f"signal {self.engine}, {_SEM[engine]}")
            self.e(f"wait {engine}, {_SEM[engine]}")
        self.engine = engine

    def reg(self, value, k=None):
        return self.e.reg(value)

    def cfg(self, count, scalar=0):
        self.use("vpu")
        if self.e.vcfg == (count, scalar):
            return
        c = self.reg(count)
        s = self.reg(scalar) if scalar else "r0"
        self.e(f"vpu.cfg {c}, {s}, r0")
        self.e.vcfg = (count, scalar)

    def vop(self, op, dst, src1, src2=None, mode=None, count=None, scalar=0, relu=False):
        """``vop op.fp32`` on VMEM byte addresses, ``count`` rows."""
        self.cfg(count, scalar)
        d, s1 = self.reg(dst, 0), self.reg(src1, 1)
        s2 = "r0" if src2 is None or mode == "scalar" else self.reg(src2, 2)
        self.e(f"vop {op}.fp32 {d}, {s1}, {s2}" + (f", src2={mode}" if mode else "")
               + (", relu" if relu else ""))

    # whole-value helpers (every row of every chunk at once)

    def rows_of(self, v):
        return self.nrows(v.R, v.C) * v.B

    def op2(self, op, dst, a, b):
        self.vop(op, self.addr(dst), self.addr(a), self.addr(b), count=self.rows_of(dst))

    def op1(self, op, dst, a):
        self.vop(op, self.addr(dst), self.addr(a), count=self.rows_of(dst))

    def opk(self, op, dst, a, k):
        """``dst = a op k``, ``k`` a float constant."""
        bits = int(np.array(k, np.float32).view(np.uint32))
        self.vop(op, self.addr(dst), self.addr(a), mode="scalar", count=self.rows_of(dst),
                 scalar=bits)

    # -- constants ---------------------------------------------------------------------

    def const(self, key, R, C, fill):
        """A constant physical matrix (loaded into VMEM at the start): ``fill(phys)``
        writes the ``mp(R) x chunks*L`` array (as a matrix of logical rows, columns)."""
        if key in self.consts:
            return self.consts[key]
        n = self.nrows(R, C)
        self.const_top += n
        v = _Val(R, C, _Buf(self.config.vmem_bytes // self.rb - self.const_top, n, True),
                 (), "float32")
        v.buf.const = True
        full = np.zeros((self.mp(R), self.chunks(C) * self.L), np.float32)
        fill(full)
        self.hbm_consts.append((v, full))
        self.consts[key] = v
        return v

    def mask(self, R, C, kind="mask"):
        """1 inside ``R x C``, 0 outside (``mask``); 0 / 1 (``anti``); 0 / fp32 lowest
        (``neg``)."""
        inside, outside = {"mask": (1, 0), "anti": (0, 1), "neg": (0, _NEG_BIG)}[kind]

        def fill(a):
            a[:] = outside
            a[:R, :C] = inside
        return self.const((kind, R, C), R, C, fill)

    def array_const(self, arr, R, C, shape):
        arr = np.asarray(arr, np.float32).reshape(R, C)
        key = ("array", R, C, arr.tobytes())

        def fill(a):
            a[:R, :C] = arr
        v = self.const(key, R, C, fill)
        return _Val(v.R, v.C, v.buf, tuple(shape), "float32")

    def clean(self, v):
        """Zero ``v``'s padding."""
        if self.mp(v.R) == v.R and v.C % self.L == 0:
            return
        self.op2("mul", v, v, self.mask(v.R, v.C))

    def fix(self, dst, v):
        """``dst = v`` with padding one (for a function not finite at zero)."""
        if self.mp(v.R) == v.R and v.C % self.L == 0:
            if dst is not v:
                self.op1("copy", dst, v)
            return
        self.op2("add", dst, v, self.mask(v.R, v.C, "anti"))

    # -- vectors, transposes, broadcasts -------------------------------------------------

    def transpose(self, v, shape=None):
        """A new value holding ``v``'s physical matrix transposed, tile by tile."""
        out = self.new(v.C, v.R, shape if shape is not None else v.shape[::-1], v.dtype)
        self.cfg(1)
        for c in range(self.chunks(v.C)):
            for r in range(self.chunks(v.R)):
                d, s = self.reg(self.addr(out, r, c * self.L), 1), \
                    self.reg(self.addr(v, c, r * self.L), 2)
                self.e(f"vtrans fp32 {d}, {s}")
        return out

    def oriented(self, v, orient, temps):
        """``v`` (a value of rank 1) as a row (``orient`` "row") or a column."""
        want = (1, v.shape[0]) if orient == "row" else (v.shape[0], 1)
        if len(v.shape) != 1 or (v.R, v.C) == want:
            return v
        t = self.transpose(v, v.shape)
        temps.append(t)
        return t

    def bcast(self, out, x):
        """``out`` (allocated) = ``x`` broadcast: ``x`` physical (1, 1), (1, C) or
        (R, 1) of ``out``'s (R, C)."""
        m = self.mask(out.R, out.C)
        if (x.R, x.C) == (1, 1):
            self.vop("mul", self.addr(out), self.addr(m), self.addr(x), mode="stat",
                     count=1, scalar=self.rows_of(out))
        elif (x.R, x.C) == (1, out.C):
            for c in range(self.chunks(out.C)):
                self.vop("mul", self.addr(out, c), self.addr(m, c), self.addr(x, c),
                         mode="broadcast", count=self.mp(out.R))
        elif (x.R, x.C) == (out.R, 1):
            for c in range(self.chunks(out.C)):
                self.vop("mul", self.addr(out, c), self.addr(m, c), self.addr(x), mode="stat",
                         count=self.mp(out.R), scalar=1)
        else:
            raise CompileError(f"cannot broadcast {x.R} x {x.C} to {out.R} x {out.C}")

    # -- reductions ----------------------------------------------------------------------

    def reduce_lanes(self, v, op, shape):
        """(R, 1): ``op`` ("sum" / "max") over each row of ``v``."""
        temps = []
        src = v
        if op == "max" and not (self.mp(v.R) == v.R and v.C % self.L == 0):
            src = self.new(v.R, v.C, v.shape)
            temps.append(src)
            self.op2("add", src, v, self.mask(v.R, v.C, "neg"))
        vop = {"sum": "add", "max": "max"}[op]
        if self.chunks(v.C) > 1:
            acc = self.new(v.R, 1, v.shape)
            temps.append(acc)
            n = self.mp(v.R)
            self.vop(vop, self.addr(acc), self.addr(src, 0), self.addr(src, 1), count=n)
            for c in range(2, self.chunks(v.C)):
                self.vop(vop, self.addr(acc), self.addr(acc), self.addr(src, c), count=n)
            src = acc
        out = self.new(v.R, 1, shape)
        self.cfg(self.mp(v.R))
        d, s, span = self.reg(self.addr(out), 1), self.reg(self.addr(src), 2), self.reg(1, 3)
        self.e(f"vred {op}.fp32 {d}, {s}, {span}")
        if op == "max":
            self.clean(out)
        for t in temps:
            self.free(t)
        return out

    def reduce_rows(self, v, op, shape):
        """(1, C): ``op`` over each column of ``v``."""
        vop = {"sum": "add", "max": "max"}[op]
        t = self.new(v.R, v.C, v.shape)
        if op == "max":
            self.op2("add", t, v, self.mask(v.R, v.C, "neg"))
        else:
            self.op1("copy", t, v)
        for c in range(self.chunks(v.C)):
            n = self.mp(v.R)
            while n > 1:
                h = n // 2
                self.vop(vop, self.addr(t, c), self.addr(t, c), self.addr(t, c, n - h),
                         count=h)
                n -= h
        out = self.new(1, v.C, shape)
        m = self.mask(1, v.C)
        for c in range(self.chunks(v.C)):
            self.vop("mul", self.addr(out, c), self.addr(m, c), self.addr(t, c),
                     mode="broadcast", count=self.L)
        self.free(t)
        return out

    # -- comparisons -------------------------------------------------------------------

    def step(self, d):
        """``d = 1.0 where d > 0, else 0.0``, in place."""
        self.op1("relu", d, d)
        self.opk("mul", d, d, _TWO_127)
        self.opk("mul", d, d, _TWO_127)
        self.opk("min", d, d, 1.0)

    def one_minus(self, d):
        self.opk("mul", d, d, -1.0)
        self.opk("add", d, d, 1.0)
        self.clean(d)

    # -- matmul --------------------------------------------------------------------------

    def matmul(self, a, b, shape):
        """``a (m x k) @ b (k x n)``: bfloat16 operands (rounded to nearest even), fp32
        sums in the MXU."""
        ab = self.new(a.R, a.C, a.shape)
        bb = self.new(b.R, b.C, b.shape)
        for src, dst in ((a, ab), (b, bb)):
            self.cfg(self.rows_of(src))
            d, s = self.reg(self.addr(dst), 1), self.reg(self.addr(src), 2)
            self.e(f"vcast f32_bf16 {d}, {s}")
        out = self.new(a.R, b.C, shape)
        self.use("mxu")
        e = self.e
        r = self.reg(self.rb)
        e(f"mxu.stride {r}, {r}, {r}")
        M, tile = self.mp(a.R), min(self.cfg_acc(), self.mp(a.R))
        kcs, ncs = self.chunks(a.C), self.chunks(b.C)
        shape_m = None
        for m0 in range(0, M, tile):
            m = min(tile, M - m0)
            if m != shape_m:
                rm, rl = self.reg(m), self.reg(self.L)
                e(f"mxu.shape {rm}, {rl}, {rl}")
                shape_m = m
            for nc in range(ncs):
                for kc in range(kcs):
                    ra, rb = self.reg(self.addr(ab, kc, m0)), \
                        self.reg(self.addr(bb, nc, kc * self.L))
                    ro = self.reg(self.addr(out, nc, m0))
                    flags = (", accumulate" if kc else "") + (", emit" if kc == kcs - 1 else "")
                    e(f"matmul {ra}, {rb}, {ro}, 0{flags}")
        self.free(ab)
        self.free(bb)
        return out

    def cfg_acc(self):
        """Rows of a matmul: its ``m x L`` sums fit the accumulator."""
        return max(self.L, self.config.mxu.acc_depth // self.L * self.L)

    # -- equations -----------------------------------------------------------------------

    def phys(self, shape, orient="row"):
        if len(shape) == 0:
            return 1, 1
        if len(shape) == 1:
            return (1, shape[0]) if orient == "row" else (shape[0], 1)
        return tuple(shape)

    def operand(self, x, shape, temps, orient="row"):
        """The value of operand ``x`` (a name or a constant array) of logical ``shape``."""
        if isinstance(x, str):
            v = self.env[x]
            return self.oriented(v, orient, temps) if len(shape) == 1 else v
        R, C = self.phys(shape, orient)
        return self.array_const(np.broadcast_to(np.asarray(x, np.float32), shape), R, C,
                                shape)

    @staticmethod
    def uniform(x):
        """The float of a constant whose elements are all equal, else None."""
        if isinstance(x, str):
            return None
        a = np.asarray(x, np.float32)
        if a.size and np.all(a == a.flat[0]) and not np.isnan(a.flat[0]):
            return float(a.flat[0])
        return None

    def lower_eqn(self, q):
        name = q.prim
        out_avals = [v.aval for v in q.eqn.outvars]
        if any(len(v.aval.shape) > 2 for v in [*q.eqn.outvars, *q.eqn.invars]
               if hasattr(v, "aval")) or any(
                isinstance(x, str) and isinstance(self.env.get(x), _Stack) for x in q.ins):
            return self.lower_stacked(q)
        for av in [*out_avals, *(getattr(a, "aval", None) for a in q.eqn.invars)]:
            if av is not None and len(av.shape) > 2:
                _fail(q.eqn, f"shape {tuple(av.shape)} has rank {len(av.shape)}; the front "
                             f"end lowers ranks 0, 1 and 2")
        shape = tuple(out_avals[0].shape)
        dtype = str(out_avals[0].dtype)
        temps = []
        method = getattr(self, f"p_{name}", None)
        if method is None and name in _ELEMENTWISE:
            method = self.p_binary
        if method is None and name in _COMPARE:
            method = self.p_compare
        if method is None:
            _fail(q.eqn, f"primitive not supported by the JAX front end (supported: "
                         f"{', '.join(PRIMITIVES)}; docs/jax.md)")
        out = method(q, shape, dtype, temps)
        outs = out if isinstance(out, list) else [out]
        for n, o, av in zip(q.outs, outs, out_avals, strict=True):
            self.env[n] = _Val(o.R, o.C, o.buf, tuple(av.shape), str(av.dtype))
        for t in temps:
            self.free(t)

    def in_shape(self, q, k):
        return tuple(q.eqn.invars[k].aval.shape)

    def like(self, q, shape, temps):
        """The operands of an elementwise equation: values in the orientation of the first
        named one, uniform constants as floats, other constants as arrays."""
        orient = "row"
        for x in q.ins:
            if isinstance(x, str) and len(self.env[x].shape) == 1 and len(shape) == 1:
                v = self.env[x]
                orient = "row" if v.R == 1 and v.C == shape[0] else "col"
                break
        ops = []
        for k, x in enumerate(q.ins):
            u = self.uniform(x)
            if u is not None:
                ops.append(u)
                continue
            xs = self.in_shape(q, k)
            v = self.operand(x, xs, temps, orient)
            if xs != shape:
                # a rank-0 operand of a rank-n operation
                b = self.new(*self.phys(shape, orient), shape)
                temps.append(b)
                self.bcast(b, v)
                v = b
            ops.append(v)
        return ops, self.phys(shape, orient)

    def p_binary(self, q, shape, dtype, temps):
        op = _ELEMENTWISE[q.prim]
        (a, b), (R, C) = self.like(q, shape, temps)
        out = self.new(R, C, shape)
        if isinstance(a, float) and isinstance(b, float):
            _fail(q.eqn, "both operands constant")
        if isinstance(a, float):
            if op == "sub":          # k - b
                self.opk("mul", out, b, -1.0)
                self.opk("add", out, out, a)
                self.clean(out)
                return out
            a, b = b, a
        if isinstance(b, float):
            self.opk(op, out, a, b)
            if op in ("add", "sub", "max", "min") and b != 0:
                self.clean(out)
            return out
        self.op2(op, out, a, b)
        return out

    def p_div(self, q, shape, dtype, temps):
        if dtype not in _FLOAT:
            _fail(q.eqn, f"integer division ({dtype})")
        (a, b), (R, C) = self.like(q, shape, temps)
        out = self.new(R, C, shape)
        if isinstance(b, float):
            self.opk("mul", out, a, float(np.float32(1) / np.float32(b)))
            return out
        self.fix(out, b)
        self.op1("reciprocal", out, out)
        if isinstance(a, float):
            self.opk("mul", out, out, a)
            self.clean(out)
        else:
            self.op2("mul", out, out, a)
        return out

    def unary_in(self, q, temps):
        x = q.ins[0]
        v = self.operand(x, self.in_shape(q, 0), temps)
        return v, self.new(v.R, v.C, v.shape)

    def p_neg(self, q, shape, dtype, temps):
        v, out = self.unary_in(q, temps)
        self.opk("mul", out, v, -1.0)
        return out

    def _fn(self, op, fix, clean):
        def lower(q, shape, dtype, temps):
            v, out = self.unary_in(q, temps)
            if fix:
                self.fix(out, v)
                v = out
            for o in op:
                self.op1(o, out, v)
                v = out
            if clean:
                self.clean(out)
            return out
        return lower

    def p_exp(self, *a):
        return self._fn(["exp"], False, True)(*a)

    def p_logistic(self, *a):
        return self._fn(["sigmoid"], False, True)(*a)

    def p_tanh(self, *a):
        return self._fn(["tanh"], False, False)(*a)

    def p_abs(self, *a):
        return self._fn(["abs"], False, False)(*a)

    def p_log(self, *a):
        return self._fn(["log"], True, False)(*a)

    def p_rsqrt(self, *a):
        return self._fn(["rsqrt"], True, True)(*a)

    def p_sqrt(self, *a):
        return self._fn(["rsqrt", "reciprocal"], True, True)(*a)

    def p_square(self, q, shape, dtype, temps):
        v, out = self.unary_in(q, temps)
        self.op2("mul", out, v, v)
        return out

    def p_integer_pow(self, q, shape, dtype, temps):
        y = q.params["y"]
        v, out = self.unary_in(q, temps)
        n = abs(y)
        if n == 0:
            self.opk("mul", out, v, 0.0)
            self.opk("add", out, out, 1.0)
            self.clean(out)
            return out
        # square and multiply: out = v ** n
        p = self.new(v.R, v.C, v.shape)
        temps.append(p)
        self.op1("copy", p, v)
        first = True
        while n:
            if n & 1:
                if first:
                    self.op1("copy", out, p)
                    first = False
                else:
                    self.op2("mul", out, out, p)
            n >>= 1
            if n:
                self.op2("mul", p, p, p)
        if y < 0:
            self.fix(out, out)
            self.op1("reciprocal", out, out)
            self.clean(out)
        return out

    def alias(self, q, temps):
        x = q.ins[0]
        if not isinstance(x, str):
            return self.operand(x, self.in_shape(q, 0), temps)
        return self.env[x]

    def p_psum(self, q, shape, dtype, temps):
        """An all-reduce of every operand over the pod: a copy of the operand (padding
        included: zeros, so the sums of the padding stay zero), then the ICI queue's fp32
        all-reduce of its rows in place (the 2-D all-reduce on a 2-D pod, else a ring along
        each dimension of more than one chip), in pieces the network's messages hold."""
        axes = tuple(q.params.get("axes", ()))
        if self.pod is None:
            _fail(q.eqn, f"an all-reduce over axis {', '.join(map(str, axes))} outside a pod "
                         f"program (podium.jax.pod_scan with axis=...; docs/jax.md)")
        if axes != (self.axis,) or q.params.get("axis_index_groups") is not None:
            _fail(q.eqn, f"an all-reduce over {axes}: the pod program's only axis is "
                         f"{self.axis!r} (every chip)")
        outs = []
        for k, x in enumerate(q.ins):
            xs = self.in_shape(q, k)
            v = self.operand(x, xs, temps)
            out = self.new(v.R, v.C, xs)
            self.op1("copy", out, v)
            self.all_reduce(self.addr(out), self.rows_of(out) * self.L)
            outs.append(out)
        return outs

    p_psum_invariant = p_psum

    def all_reduce(self, address, length):
        pod = self.pod
        ici, fb = pod.ici, pod.chip.nic.flit_bytes
        dims = [d for d, k in enumerate(ici.dims) if k > 1]
        if not dims:
            return
        two_d = len(dims) == 2 and ici.ndims == 2
        # the largest piece the engine takes: ceil(ceil(grains / n) / 2) flits per message
        n = ici.dims[0] if two_d else min(ici.dims[d] for d in dims)
        piece = max(1, n * 2 * (pod.chip.nic.max_message // fb)) * (fb // 4)
        piece = min(piece, length)
        self.use("ici")
        for at in range(0, length, piece):
            m = min(piece, length - at)
            a, r = self.reg(address + 4 * at, 0), self.reg(m, 1)
            if two_d:
                self.e(f"ici.coll all_reduce_2d, 0, fp32, {a}, {r}")
            else:
                for d in dims:
                    self.e(f"ici.coll all_reduce, {d}, fp32, {a}, {r}")

    def p_stop_gradient(self, q, shape, dtype, temps):
        return self.alias(q, temps)

    p_copy = p_stop_gradient

    def p_convert_element_type(self, q, shape, dtype, temps):
        src = str(q.eqn.invars[0].aval.dtype)
        if dtype == "float32" or (dtype not in _FLOAT and src not in _FLOAT):
            return self.alias(q, temps)
        if dtype == "bfloat16" and src in _FLOAT:
            v, out = self.unary_in(q, temps)
            self.cfg(self.rows_of(v))
            d, s = self.reg(self.addr(out), 1), self.reg(self.addr(v), 2)
            self.e(f"vcast f32_bf16 {d}, {s}")
            self.e(f"vcast bf16_f32 {d}, {d}")
            return out
        if src in _FLOAT and dtype in ("int32", "bool", "int8", "int16", "int64",
                                       "uint8", "uint32"):
            _fail(q.eqn, f"conversion of {src} to {dtype} (the front end holds every value "
                         f"as fp32; a float to integer conversion is not lowered)")
        _fail(q.eqn, f"conversion of {src} to {dtype}")

    def p_compare(self, q, shape, dtype, temps):
        (a, b), (R, C) = self.like(q, shape, temps)

        def gt(x, y):
            d = self.new(R, C, shape)
            if isinstance(x, float):          # k - y
                self.opk("mul", d, y, -1.0)
                self.opk("add", d, d, x)
                self.clean(d)
            elif isinstance(y, float):
                self.opk("sub", d, x, y)
                self.clean(d)
            else:
                self.op2("sub", d, x, y)
            self.step(d)
            return d

        p = q.prim
        if p in ("gt", "lt", "ge", "le"):
            out = gt(a, b) if p in ("gt", "le") else gt(b, a)
            if p in ("ge", "le"):
                self.one_minus(out)
            return out
        out, other = gt(a, b), gt(b, a)
        self.op2("add", out, out, other)
        self.free(other)
        if p == "eq":
            self.one_minus(out)
        return out

    def p_select_n(self, q, shape, dtype, temps):
        if len(q.ins) != 3:
            _fail(q.eqn, f"select_n of {len(q.ins) - 1} cases (the front end lowers 2)")
        (p, a, b), (R, C) = self.like(q, shape, temps)
        if isinstance(p, float):
            return self.operand(q.ins[2 if p else 1], shape, temps)
        out = self.new(R, C, shape)
        nq = self.new(R, C, shape)
        temps.append(nq)
        self.op1("copy", nq, p)
        self.one_minus(nq)
        terms = [(a, nq), (b, p)]
        first = True
        for x, w in terms:
            if x == 0.0:
                continue
            dst = out if first else nq
            if isinstance(x, float):
                self.opk("mul", dst, w, x)
            else:
                self.op2("mul", dst, w, x)
            if not first:
                self.op2("add", out, out, nq)
            first = False
        if first:
            self.opk("mul", out, p, 0.0)
        return out

    def _reduce(self, q, shape, temps, op, v=None):
        x = q.ins[0]
        xs = self.in_shape(q, 0)
        axes = tuple(sorted(q.params["axes"]))
        v = v if v is not None else self.operand(x, xs, temps)
        if len(xs) == 1:
            return self.reduce_lanes(v, op, shape) if v.R == 1 else \
                self.reduce_rows(v, op, shape)
        if axes == (1,):
            return self.reduce_lanes(v, op, shape)
        if axes == (0,):
            return self.reduce_rows(v, op, shape)
        t = self.reduce_lanes(v, op, (xs[0],))
        temps.append(t)
        return self.reduce_rows(t, op, shape)

    def p_reduce_sum(self, q, shape, dtype, temps):
        return self._reduce(q, shape, temps, "sum")

    def p_reduce_max(self, q, shape, dtype, temps):
        return self._reduce(q, shape, temps, "max")

    def p_reduce_min(self, q, shape, dtype, temps):
        """``-max(-x)``."""
        xs = self.in_shape(q, 0)
        v = self.operand(q.ins[0], xs, temps)
        nv = self.new(v.R, v.C, v.shape)
        temps.append(nv)
        self.opk("mul", nv, v, -1.0)
        out = self._reduce(_Eqn(q.prim, [None], q.outs, q.params, q.eqn), shape, temps,
                           "max", nv)
        self.opk("mul", out, out, -1.0)
        return out

    def _logic(self, q, shape, dtype, op):
        if dtype != "bool":
            _fail(q.eqn, f"bitwise {q.prim} of {dtype} (the front end lowers it on bool)")
        return op

    def p_and(self, q, shape, dtype, temps):
        return self._bool2(q, shape, dtype, temps, "mul")

    def p_or(self, q, shape, dtype, temps):
        return self._bool2(q, shape, dtype, temps, "max")

    def p_xor(self, q, shape, dtype, temps):
        out = self._bool2(q, shape, dtype, temps, "sub")
        self.op1("abs", out, out)
        return out

    def _bool2(self, q, shape, dtype, temps, op):
        self._logic(q, shape, dtype, op)
        (a, b), (R, C) = self.like(q, shape, temps)
        out = self.new(R, C, shape)
        if isinstance(a, float):
            a, b = b, a
        if isinstance(b, float):
            self.opk(op, out, a, b)
            self.clean(out)
        else:
            self.op2(op, out, a, b)
        return out

    def p_not(self, q, shape, dtype, temps):
        self._logic(q, shape, dtype, None)
        v, out = self.unary_in(q, temps)
        self.op1("copy", out, v)
        self.one_minus(out)
        return out

    def p_argmin(self, q, shape, dtype, temps):
        return self.p_argmax(q, shape, dtype, temps, negate=True)

    def p_argmax(self, q, shape, dtype, temps, negate=False):
        xs = self.in_shape(q, 0)
        (axis,) = q.params["axes"]
        v = self.operand(q.ins[0], xs, temps)
        if negate:
            nv = self.new(v.R, v.C, v.shape)
            temps.append(nv)
            self.opk("mul", nv, v, -1.0)
            v = nv
        if len(xs) == 2 and axis == 0:
            v = self.transpose(v)
            temps.append(v)
        elif len(xs) == 1 and v.R != 1:
            v = self.oriented(v, "row", temps)
        R, C, n = v.R, v.C, v.C
        mx = self.reduce_lanes(v, "max", (R,))
        temps.append(mx)
        full = self.new(R, C, (R, C))
        temps.append(full)
        self.bcast(full, mx)
        eq = self.new(R, C, (R, C))
        temps.append(eq)
        # eq = 1 where v == max (v <= max everywhere: 1 - step(max - v))
        self.op2("sub", eq, full, v)
        self.step(eq)
        self.one_minus(eq)
        score = self.array_const(np.broadcast_to(n - np.arange(n, dtype=np.float32),
                                                 (R, n)), R, C, (R, C))
        self.op2("mul", eq, eq, score)
        r = self.reduce_lanes(eq, "max", (R,))
        self.opk("mul", r, r, -1.0)
        self.opk("add", r, r, float(n))
        self.clean(r)
        return r

    def p_broadcast_in_dim(self, q, shape, dtype, temps):
        x = q.ins[0]
        xs = self.in_shape(q, 0)
        dims = tuple(q.params["broadcast_dimensions"])
        if xs == shape:
            return self.alias(q, temps)
        orient = "row"
        if len(xs) == 1 and len(shape) == 2:
            orient = "row" if dims == (1,) else "col"
        elif len(xs) == 1 and len(shape) == 1:
            orient = "row"
        v = self.operand(x, xs, temps, orient)
        R, C = self.phys(shape, "row" if len(shape) != 1 or v.R == 1 else "col")
        if (v.R, v.C) == (R, C):
            return v
        out = self.new(R, C, shape)
        self.bcast(out, v)
        return out

    def p_reshape(self, q, shape, dtype, temps):
        x = q.ins[0]
        xs = self.in_shape(q, 0)
        v = self.operand(x, xs, temps) if not isinstance(x, str) else self.env[x]
        if len(shape) == 1:
            for orient in ("row", "col"):
                if self.phys(shape, orient) == (v.R, v.C):
                    return v
        elif self.phys(shape) == (v.R, v.C):
            return v
        if self.phys(shape)[::-1] == (v.R, v.C) and 1 in (v.R, v.C):
            t = self.transpose(v, shape)
            return t
        _fail(q.eqn, f"reshape {xs} -> {shape} moves elements between rows; the front end "
                     f"only adds or removes dimensions of size 1")

    p_squeeze = p_expand_dims = p_reshape

    def p_transpose(self, q, shape, dtype, temps):
        perm = tuple(q.params["permutation"])
        if perm == tuple(range(len(perm))):
            return self.alias(q, temps)
        v = self.operand(q.ins[0], self.in_shape(q, 0), temps)
        return self.transpose(v, shape)

    def p_dot_general(self, q, shape, dtype, temps):
        (lc, rc), (lb, rbatch) = q.params["dimension_numbers"]
        if len(lb) or len(rbatch):
            _fail(q.eqn, "batch dimensions of operands of rank <= 2 (the front end lowers "
                         "2-D by 2-D, matrix-vector and vector-vector products, and batch "
                         "dimension 0 of rank-3 operands)")
        ls, rs = self.in_shape(q, 0), self.in_shape(q, 1)
        if len(lc) != 1 or len(rc) != 1:
            _fail(q.eqn, f"contracting dimensions {tuple(lc)}, {tuple(rc)} (one each)")
        a = self.operand(q.ins[0], ls, temps, "row")
        b = self.operand(q.ins[1], rs, temps, "col")
        if len(ls) == 2 and tuple(lc) == (0,):
            a = self.transpose(a)
            temps.append(a)
        if len(rs) == 2 and tuple(rc) == (1,):
            b = self.transpose(b)
            temps.append(b)
        return self.matmul(a, b, shape)

    # -- rank 3: stacked values ------------------------------------------------------------

    def zeroed(self, R, C, shape, B=1):
        """A new value of zeros (its padding too)."""
        v = _Val(R, C, self.alloc.get(self.nrows(R, C) * B, "a value"), tuple(shape),
                 "float32", B)
        z = self.const(("zero", R, C), R, C, lambda a: None)
        for k in range(B):
            self.vop("copy", self.addr(v) + k * self.nrows(R, C) * self.rb, self.addr(z),
                     count=self.nrows(R, C))
        return v

    def row_of(self, v, k, shape):
        """Row ``k`` of the rank-2 value ``v`` as a new row vector."""
        out = self.new(1, v.C, shape)
        m = self.mask(1, v.C)
        for c in range(self.chunks(v.C)):
            self.vop("mul", self.addr(out, c), self.addr(m, c), self.addr(v, c, k),
                     mode="broadcast", count=self.L)
        return out

    def slab(self, q, x, xs, k, temps):
        """Slab ``k`` of operand ``x`` (logical shape ``xs``, leading axis 1 or more)."""
        kk = k if xs[0] > 1 else 0
        if not isinstance(x, str):
            return np.asarray(x)[kk]
        v = self.env[x]
        if isinstance(v, _Stack):
            return v.slabs[kk]
        if len(xs) == 2:
            r = self.row_of(v, kk, xs[1:])
            temps.append(r)
            return r
        _fail(q.eqn, f"a slab of a value of shape {xs}")

    def sub(self, q, ins, out_shape, params=None):
        """Lower one slab's equation: ``ins`` (value or constant, logical shape) pairs."""
        names, tmp = [], []
        for j, (x, _) in enumerate(ins):
            if isinstance(x, _Val):
                n = f"{q.outs[0]}~{j}"
                self.env[n] = x
                names.append(n)
                tmp.append(n)
            else:
                names.append(x)
        dts = [str(v.aval.dtype) for v in q.eqn.invars]
        out_dtype = str(q.eqn.outvars[0].aval.dtype)
        params = q.params if params is None else {**q.params, **params}
        invars = [_Var(s, d) for (_, s), d in zip(ins, dts, strict=True)]
        e = _Sub(q.eqn.primitive, params, invars, [_Var(out_shape, out_dtype)],
                 q.eqn.source_info, q.eqn)
        o = f"{q.outs[0]}~out"
        self.lower_eqn(_Eqn(q.prim, names, [o], params, e))
        for n in tmp:
            self.env.pop(n)
        return self.env.pop(o)

    def materialize(self, q, v):
        """A rank-2 stack (slabs of rank 1) as one ``b x n`` value; a rank-1 stack (slabs
        of scalars) as a column ``b x 1``."""
        if len(v.shape) == 1:
            (b,) = v.shape
            out = self.zeroed(b, 1, v.shape)
            for k, s in enumerate(v.slabs):
                self.vop("copy", self.addr(out, 0, k), self.addr(s, 0), count=1)
            return out
        b, n = v.shape
        out = self.zeroed(b, n, v.shape)
        temps = []
        for k, s in enumerate(v.slabs):
            r = self.oriented(s, "row", temps)
            for c in range(self.chunks(n)):
                self.vop("copy", self.addr(out, c, k), self.addr(r, c), count=1)
        for t in temps:
            self.free(t)
        return out

    def contiguous(self, v):
        """A rank-3 stack as ``b`` consecutive slabs (an output's layout)."""
        b, m, n = v.shape
        s0 = v.slabs[0]
        out = _Val(s0.R, s0.C, self.alloc.get(self.nrows(s0.R, s0.C) * b, "an output"),
                   v.shape, v.dtype, b)
        rows = self.nrows(s0.R, s0.C)
        for k, s in enumerate(v.slabs):
            self.vop("copy", self.addr(out) + k * rows * self.rb, self.addr(s), count=rows)
        return out

    def combine(self, q, slabs, op, shape):
        """``op`` ("add", "max", "min") of values of one shape, a new value."""
        temps = []
        first = slabs[0]
        if len(first.shape) == 1:
            orient = "row" if first.R == 1 else "col"
            slabs = [self.oriented(s, orient, temps) for s in slabs]
        out = self.new(first.R, first.C, shape)
        if len(slabs) == 1:
            self.op1("copy", out, first)
        else:
            self.op2(op, out, slabs[0], slabs[1])
            for s in slabs[2:]:
                self.op2(op, out, out, s)
        for t in temps:
            self.free(t)
        return out

    def lower_stacked(self, q):
        """An equation with a rank-3 operand or result, or a stacked operand: slab by slab
        along the leading axis (docs/jax.md "Rank 3")."""
        p = q.prim
        out_av = q.eqn.outvars[0].aval
        shape, dtype = tuple(out_av.shape), str(out_av.dtype)
        xs = [self.in_shape(q, k) for k in range(len(q.ins))]
        for s in [shape, *xs]:
            if len(s) > 3:
                _fail(q.eqn, f"shape {s} has rank {len(s)}; the front end lowers ranks 0 to 3")
        temps = []
        res = None
        if p in _PER_SLAB:
            if len(q.outs) != 1 or any(len(s) not in (0, len(shape)) for s in xs):
                _fail(q.eqn, f"operands of shapes {xs} for a result of shape {shape}")
            res = _Stack([self.sub(q, [(x, s) if not s else (self.slab(q, x, s, k, temps),
                                                             s[1:])
                                       for x, s in zip(q.ins, xs, strict=True)],
                                      shape[1:])
                          for k in range(shape[0])], shape, dtype)
        elif p == "broadcast_in_dim":
            dims = tuple(q.params["broadcast_dimensions"])
            if xs[0] == shape:
                res = self.env[q.ins[0]] if isinstance(q.ins[0], str) else None
            elif dims and dims[0] == 0:
                nd = {"broadcast_dimensions": tuple(d - 1 for d in dims[1:]),
                      "shape": shape[1:]}
                res = _Stack([self.sub(q, [(self.slab(q, q.ins[0], xs[0], k, temps),
                                            xs[0][1:])], shape[1:], nd)
                              for k in range(shape[0])], shape, dtype)
            elif not (isinstance(q.ins[0], str)
                      and isinstance(self.env[q.ins[0]], _Stack)):
                nd = {"broadcast_dimensions": tuple(d - 1 for d in dims), "shape": shape[1:]}
                x = self.env[q.ins[0]] if isinstance(q.ins[0], str) else q.ins[0]
                one = self.sub(q, [(x, xs[0])], shape[1:], nd)
                res = _Stack([one] * shape[0], shape, dtype)
        elif p in ("reduce_sum", "reduce_max", "reduce_min"):
            axes = tuple(sorted(q.params["axes"]))
            rest = tuple(a - 1 for a in axes if a)
            x, s = q.ins[0], xs[0]
            if rest:
                part = shape if 0 in axes else shape[1:]
                slabs = [self.sub(q, [(self.slab(q, x, s, k, temps), s[1:])], part,
                                  {"axes": rest}) for k in range(s[0])]
                temps.extend(sl for sl in slabs)
            else:
                slabs = [self.slab(q, x, s, k, temps) for k in range(s[0])]
                if any(not isinstance(sl, _Val) for sl in slabs):
                    res = None
                    slabs = None
            if slabs is None:
                pass
            elif 0 in axes:
                op = {"reduce_sum": "add", "reduce_max": "max", "reduce_min": "min"}[p]
                res = self.combine(q, slabs, op, shape)
            else:
                temps = [t for t in temps if all(t is not sl for sl in slabs)]
                res = _Stack(slabs, shape, dtype)
        elif p == "transpose":
            perm = tuple(q.params["permutation"])
            if perm[0] == 0:
                nd = {"permutation": tuple(a - 1 for a in perm[1:])}
                res = _Stack([self.sub(q, [(self.slab(q, q.ins[0], xs[0], k, temps),
                                            xs[0][1:])], shape[1:], nd)
                              for k in range(shape[0])], shape, dtype)
        elif p == "dot_general":
            (lc, rc), (lb, rbt) = q.params["dimension_numbers"]
            if tuple(lb) == (0,) and tuple(rbt) == (0,):
                nd = {"dimension_numbers": ((tuple(a - 1 for a in lc),
                                             tuple(a - 1 for a in rc)), ((), ()))}
                res = _Stack([self.sub(q, [(self.slab(q, x, s, k, temps), s[1:])
                                           for x, s in zip(q.ins, xs, strict=True)],
                                          shape[1:], nd)
                              for k in range(shape[0])], shape, dtype)
            elif not lb and not rbt and len(shape) <= 2 and all(len(s) <= 2 for s in xs):
                pass            # a stacked rank-2 operand: materialized below
            else:
                _fail(q.eqn, f"dimension numbers {q.params['dimension_numbers']}: the front "
                             f"end lowers batch dimension 0 of both operands (one), or none "
                             f"on operands of rank <= 2")
        elif p in ("reshape", "squeeze", "expand_dims"):
            res = self.reshape3(q, xs[0], shape, dtype, temps)
        if res is None and len(shape) <= 2 and all(len(s) <= 2 for s in xs):
            # a rank-2 stack into a primitive lowered on whole values
            names = []
            for j, x in enumerate(q.ins):
                if isinstance(x, str) and isinstance(self.env[x], _Stack):
                    n = f"{q.outs[0]}~m{j}"
                    self.env[n] = self.materialize(q, self.env[x])
                    temps.append(self.env[n])
                    names.append(n)
                else:
                    names.append(x)
            self.lower_eqn(_Eqn(q.prim, names, q.outs, q.params, q.eqn))
            for n in names:
                if isinstance(n, str) and "~m" in n:
                    self.env.pop(n)
            res = self.env[q.outs[0]]
        if res is None and p == "reshape" and len(shape) == 3 and xs and len(xs[0]) < 3 \
                and xs[0][:-1] == shape[:len(xs[0]) - 1]:
            _fail(q.eqn, f"{p} of shapes {xs} -> {shape}: splitting the last axis (into heads) "
                         f"is not lowered; keep the heads in the parameters (docs/jax.md, "
                         f"\"Training the ViT\")")
        if res is None:
            _fail(q.eqn, f"{p} of shapes {xs} -> {shape} (rank 3: the front end lowers "
                         f"elementwise operations, broadcasts, reductions, dot_general with "
                         f"batch dimension 0, transposes keeping axis 0 and reshapes of the "
                         f"leading axis; docs/jax.md)")
        if isinstance(res, _Val):
            res = _Val(res.R, res.C, res.buf, shape, dtype)
        keep = {id(b) for b in _bufs(res)}
        for t in temps:
            if id(t.buf) not in keep:
                self.free(t)
        self.env[q.outs[0]] = res

    def reshape3(self, q, xs, shape, dtype, temps):
        x = q.ins[0]
        if not isinstance(x, str):
            return None
        v = self.env[x]
        if xs == (1, *shape):                       # drop a leading 1
            return v.slabs[0] if isinstance(v, _Stack) else None
        if shape == (1, *xs) and not isinstance(v, _Stack):
            return _Stack([v], shape, dtype)
        if len(shape) == 3 and shape[0] == 1 and len(xs) < 3 and not isinstance(v, _Stack):
            # (n,) -> (1, 1, n) and the like (jnp's rank promotion): one slab
            return _Stack([self.sub(q, [(x, xs)], shape[1:], {"new_sizes": shape[1:],
                                                              "dimensions": None})],
                          shape, dtype)
        if len(xs) == 3 and xs[0] == 1 and len(shape) < 3 and isinstance(v, _Stack):
            return self.sub(q, [(v.slabs[0], xs[1:])], shape, {"new_sizes": shape,
                                                               "dimensions": None})
        if len(xs) >= 2 and len(shape) >= 2 and xs[0] == shape[0] and isinstance(v, _Stack):
            return _Stack([self.sub(q, [(s, xs[1:])], shape[1:], {"new_sizes": shape[1:],
                                                                  "dimensions": None})
                           for s in v.slabs], shape, dtype)
        if len(xs) == 3 and shape == (xs[0] * xs[1], xs[2]) and isinstance(v, _Stack):
            m, n = xs[1], xs[2]
            out = self.zeroed(*shape, shape)
            for k, s in enumerate(v.slabs):
                for c in range(self.chunks(n)):
                    self.vop("copy", self.addr(out, c, k * m), self.addr(s, c), count=m)
            return out
        if len(xs) == 2 and len(shape) == 3 and xs == (shape[0] * shape[1], shape[2]) \
                and not isinstance(v, _Stack):
            m, n = shape[1], shape[2]
            slabs = []
            for k in range(shape[0]):
                s = self.zeroed(m, n, shape[1:])
                for c in range(self.chunks(n)):
                    self.vop("copy", self.addr(s, c), self.addr(v, c, k * m), count=m)
                slabs.append(s)
            return _Stack(slabs, shape, dtype)
        return None


# ---------------------------------------------------------------------------------------
# The program


def to_phys(array, R, C, L):
    """The VMEM image (rows of ``L`` fp32) of a physical matrix ``R x C``; of a rank-3
    value ``(b, R, C)``: its ``b`` slabs' images one after the other."""
    mp, ch = _roundup(R, L), -(-C // L)
    array = np.asarray(array, np.float32)
    if array.size > R * C:
        return np.concatenate([to_phys(s, R, C, L) for s in array.reshape(-1, R, C)])
    a = np.zeros((mp, ch * L), np.float32)
    a[:R, :C] = np.asarray(array, np.float32).reshape(R, C)
    return a.reshape(mp, ch, L).transpose(1, 0, 2).reshape(ch * mp, L)


def from_phys(rows, R, C, L):
    mp, ch = _roundup(R, L), -(-C // L)
    if len(rows) > mp * ch:
        n = mp * ch
        return np.stack([from_phys(rows[k:k + n], R, C, L) for k in range(0, len(rows), n)])
    a = np.asarray(rows, np.float32).reshape(ch, mp, L).transpose(1, 0, 2).reshape(mp, ch * L)
    return a[:R, :C]


@dataclass
class Port:
    """An input or output of a lowered function: its logical shape and dtype, the physical
    matrix ``R x C`` it is held in, and its HBM tensor's name."""

    name: str
    shape: tuple
    dtype: str
    R: int
    C: int


class _TooLong(CompileError):
    """The program (or a segment of it) needs more instructions than the IMEM holds."""


_CUT = "#@cut"
_CONSTS = "#@consts"
_SCRATCH = re.compile(r"@S(\d+)@")


def lower(closed, config, *, carry=0, steps=1, name="fn", pod=None, axis=None, segment=None):
    """A :class:`Program` running ``steps`` iterations of the jaxpr ``closed``
    (``jax.make_jaxpr``'s): its first ``carry`` inputs are loaded once and replaced by its
    first ``carry`` outputs after every step; every other input ``k`` is streamed (input
    tensor ``x<k>`` holds every step's slice) and every other output ``k`` stored per step
    (tensor ``y<k>``); carries come back as tensors ``c<k>``. Returns ``(program, inputs,
    outputs)``, the ports in order. ``pod`` (a PodConfig whose TensorCore is ``config``) and
    ``axis``: the program runs on every chip of the pod, ``psum`` over ``axis`` lowered to
    the pod's all-reduce.

    A program longer than the instruction memory (``config.imem_depth``) is made of
    **segments** (docs/jax.md, "Segments"), each at most ``segment`` instructions (default
    ``imem_depth``; given, the program is segmented even when it would fit): the steps
    unrolled, each step cut between equations into segments that end with ``halt``; the
    host runs them one after another on the same HBM (podium/runner.py), VMEM's live values
    stored to an HBM scratch area at each cut and loaded back after it."""
    if segment is None:
        try:
            return _lower(closed, config, carry=carry, steps=steps, name=name, pod=pod,
                          axis=axis)
        except _TooLong as e:
            if pod is not None:
                raise CompileError(f"{e} (a pod program runs as one segment)") from None
        segment = config.imem_depth
    if pod is not None:
        raise CompileError("a pod program runs as one segment: segment must be None")
    if not 64 <= segment <= config.imem_depth:
        raise CompileError(f"segment must be in 64..{config.imem_depth} (config.imem_depth), "
                           f"got {segment}")
    margin = segment // 8     # room left for the next operation and the cut's loads
    while True:
        try:
            return _lower(closed, config, carry=carry, steps=steps, name=name, cut=(segment,
                                                                                 margin))
        except _TooLong as e:
            if margin >= segment // 2:
                raise CompileError(f"{name}: {e}: an operation's instructions do not fit a "
                                   f"segment of {segment}") from None
            margin = min(segment // 2, margin * 3 // 2)


def _lower(closed, config, *, carry=0, steps=1, name="fn", pod=None, axis=None, cut=None):
    count = [0]

    def fresh():
        count[0] += 1
        return f"v{count[0]}"

    jaxpr = closed.jaxpr
    _CONTEXT.clear()
    env = {}
    in_names = []
    for v in jaxpr.invars:
        n = fresh()
        env[v] = n
        in_names.append(n)
    eqns = []
    outs = _flatten(jaxpr, list(closed.consts), env, eqns, fresh)
    eqns, known = _fold(eqns)
    outs = [known.get(o, o) if isinstance(o, str) else o for o in outs]
    eqns = _prune(eqns, [o for o in outs if isinstance(o, str)])
    low = _Lower(config, pod, axis)
    L, rb = low.L, low.rb
    in_avals = [v.aval for v in jaxpr.invars]
    out_avals = [v.aval for v in jaxpr.outvars]
    for k, av in enumerate([*in_avals, *out_avals]):
        if len(av.shape) > 3:
            raise Unsupported(f"{name}: an input or output of shape {tuple(av.shape)}: the "
                              f"front end lowers ranks 0 to 3")
        if len(av.shape) == 3 and (k < carry or len(in_avals) <= k < len(in_avals) + carry):
            raise Unsupported(f"{name}: a carry of shape {tuple(av.shape)}: carries have "
                              f"rank 0, 1 or 2 (rank 3 is for streamed inputs and outputs)")
    if carry:
        for k in range(carry):
            if tuple(in_avals[k].shape) != tuple(out_avals[k].shape):
                raise CompileError(f"{name}: carry {k} goes in as {tuple(in_avals[k].shape)} "
                                   f"and comes out as {tuple(out_avals[k].shape)}")

    # last use of every name (outputs: the end of the body)
    last = {}
    for i, q in enumerate(eqns):
        for a in q.ins:
            if isinstance(a, str):
                last[a] = i
    end = len(eqns)
    for o in outs:
        if isinstance(o, str):
            last[o] = end

    # inputs: carries first (never freed), then this step's streamed inputs
    ports_in, bufs_in = [], []
    env_in = []
    for k, av in enumerate(in_avals):
        shape = tuple(av.shape)
        if len(shape) == 3:
            # b consecutive slabs, each a value of its own (kept for the whole step)
            B, (R, C) = shape[0], shape[1:]
            n = low.nrows(R, C)
            v = _Val(R, C, low.alloc.get(n * B, f"input {k}"), shape, str(av.dtype), B)
            v.buf.fixed = True
            env_in.append(_Stack([_Val(R, C, _Buf(v.buf.addr + j * n, n, True), shape[1:],
                                       str(av.dtype)) for j in range(B)], shape,
                                 str(av.dtype)))
        else:
            R, C = low.phys(shape)
            v = low.new(R, C, shape, what=f"input {k}")
            v.buf.fixed = k < carry
            env_in.append(v)
        bufs_in.append(v)
        ports_in.append(Port(("c" if k < carry else "x") + str(k), shape,
                             str(av.dtype), R, C))
    low.env = dict(zip(in_names, env_in, strict=True))

    body = low.e
    low.engine = "dma"
    run_of = {}     # id(asm) -> the DMA's run length as last set there, while known
    step_reg = "r1"

    def dma(e, kind, hbm_addr, vmem_addr, nbytes, per_step):
        # every DMA is one run: dimensions 1..3 of one iteration, set once per text (the
        # shape persists, docs/tensorcore.md), the run's length when it changes
        if id(e) not in run_of:
            one = e.reg(1)
            for d in (1, 2, 3):
                e(f"dma.shape {d}, {one}, r0, r0")
            run_of[id(e)] = None
        if run_of[id(e)] != nbytes:
            r = e.reg(nbytes)
            e(f"dma.shape 0, {r}, r0, r0")
            run_of[id(e)] = nbytes
        vm, hb = e.reg(vmem_addr), e.reg(hbm_addr)
        if per_step:
            n = e.reg(nbytes)
            x = next(r for r in _POOL if r not in (vm, hb, n))
            e(f"mul {x}, {step_reg}, {n}")
            e(f"add {x}, {x}, {hb}")
            hb = x
        e(f"dma.{kind} {hb}, {vm}, none")

    spilled = []    # the VMEM ranges (rows) each cut stores and loads back
    since = [0]     # the body's line at the last cut

    def weight(lines):
        """Instructions of assembly ``lines`` (one a line: ``li`` too, a 32-bit
        immediate)."""
        return sum(1 for ln in lines if (t := ln.strip()) and not t.startswith("#")
                   and not t.endswith(":"))

    def live_ranges(written=None):
        """The VMEM row ranges of the live values (``written``: of those holding one of
        these byte addresses; a None among them: all)."""
        bufs = {id(b): b for v in [*low.env.values(), *bufs_in] for b in _bufs(v)
                if not getattr(b, "const", False)}
        if written is not None and None not in written:
            hit = sorted(set(written))
            import bisect
            bufs = {k: b for k, b in bufs.items()
                    if bisect.bisect_left(hit, b.addr * rb) < len(hit)
                    and hit[bisect.bisect_left(hit, b.addr * rb)] < (b.addr + b.rows) * rb}
        ranges = []
        for a, n in sorted((b.addr, b.rows) for b in bufs.values()):
            if ranges and a <= ranges[-1][0] + ranges[-1][1]:
                ranges[-1] = (ranges[-1][0], max(ranges[-1][1], a + n - ranges[-1][0]))
            else:
                ranges.append((a, n))
        return ranges

    def segment_cut():
        # every engine drained (the DMA waits for the last engine's work, the stores for
        # the DMA's earlier work, halt for the stores), the live values stored (at the
        # step's first cut all of them, after it those written since the last cut: the
        # others' copies in the scratch area are current); after the cut nothing is known:
        # registers, the DMA's shape, the VPU's configuration
        ranges = live_ranges()
        stored = ranges if not spilled else live_ranges(body.writes)
        spilled.append((stored, ranges))
        low.use("dma")
        for a, n in stored:
            dma(body, "store", f"@S{a * rb}@", a * rb, n * rb, False)
        body("halt")
        body.lines.append(_CUT)
        body.forget()
        run_of.pop(id(body), None)
        body.lines.append(_CONSTS)
        for a, n in ranges:
            dma(body, "load", f"@S{a * rb}@", a * rb, n * rb, False)
        low.engine = "dma"
        since[0] = len(body.lines)
        body.writes = []

    for i, q in enumerate(eqns):
        if cut is not None and i and weight(body.lines[since[0]:]) > cut[0] - cut[1]:
            segment_cut()
        body.comment(f"{q.prim} -> {', '.join(q.outs)}  ({_where(q.eqn)})")
        if len(q.outs) != 1 and q.prim not in _PSUM:
            _fail(q.eqn, "more than one result")
        low.lower_eqn(q)
        for a in dict.fromkeys(x for x in [*q.ins, *q.outs] if isinstance(x, str)):
            if last.get(a, -1) <= i and a in low.env:
                gone = low.env.pop(a)
                live = {id(b) for v in low.env.values() for b in _bufs(v)}
                for buf in _bufs(gone):
                    if id(buf) not in live:
                        low.free_buf(buf)

    # outputs: the values (or constants) of the body's results
    out_vals = []
    for o, av in zip(outs, out_avals, strict=True):
        shape = tuple(av.shape)
        if isinstance(o, str):
            v = low.env[o] if o in low.env else low.env.get(o)
            if v is None:
                v = bufs_in[in_names.index(o)]
            if isinstance(v, _Stack):
                v = low.contiguous(v) if len(shape) == 3 else low.materialize(None, v)
        else:
            R, C = low.phys(shape)
            v = low.array_const(np.broadcast_to(np.asarray(o, np.float32), shape), R, C,
                                shape)
        out_vals.append(v)
    ports_out = []
    for k, (v, av) in enumerate(zip(out_vals, out_avals, strict=True)):
        if k < carry:
            v = bufs_in[k]
        ports_out.append(Port(("c" if k < carry else "y") + str(k), tuple(av.shape),
                              str(av.dtype), v.R, v.C))
    # per-step outputs to HBM, then the next step
    rows_out = [low.rows_of(bufs_in[k] if k < carry else v) for k, v in enumerate(out_vals)]
    rows_in = [low.rows_of(v) for v in bufs_in]
    # HBM: constants, carries, streamed inputs, per-step outputs
    blob = [_chunked(full, L) for _, full in low.hbm_consts][::-1]
    blob = np.concatenate(blob) if blob else np.zeros((0, L), np.float32)
    hbm = {0: blob.tobytes()} if len(blob) else {}
    at = _roundup(len(blob) * rb, _HBM_ALIGN)

    def tensor(rows):
        nonlocal at
        t = Tensor(at, (rows, L), "float32", rb)
        at = _roundup(at + t.nbytes, _HBM_ALIGN)
        return t

    tensors_in = {p.name: tensor(r * (1 if k < carry else steps))
                  for k, (p, r) in enumerate(zip(ports_in, rows_in, strict=True))}
    tensors_out = {p.name: tensor(r * (1 if k < carry else steps))
                   for k, (p, r) in enumerate(zip(ports_out, rows_out, strict=True))}
    if at > 1 << 32:
        raise CompileError(f"{name} needs {at} bytes of HBM, past the 32-bit address space")


    body = low.e
    low.use("dma")
    for k in range(carry, len(ports_out)):
        dma(body, "store", tensors_out[ports_out[k].name].address, low.addr(out_vals[k]),
            rows_out[k] * rb, True)
    # then the carries' new values into the carry buffers (a value that is another carry's old
    # one, as when carries swap, through a copy first)
    for k in range(carry):
        v = out_vals[k]
        if any(v.buf is c.buf for j, c in enumerate(bufs_in[:carry]) if j != k):
            tmp = low.new(v.R, v.C, v.shape, what="a carry's copy")
            low.op1("copy", tmp, v)
            out_vals[k] = tmp
    for k in range(carry):
        v, c = out_vals[k], bufs_in[k]
        if v.buf is not c.buf:
            if (v.R, v.C) != (c.R, c.C):
                v = low.oriented(v, "row" if c.R == 1 else "col", [])
            low.op1("copy", c, v)
    low.use("dma")
    const_rows = low.const_top
    total = config.vmem_bytes // rb
    if low.alloc.high + const_rows > total:
        raise CompileError(f"{name} needs {low.alloc.high + const_rows} VMEM rows of {rb} "
                           f"bytes ({low.alloc.high} for values, {const_rows} for "
                           f"constants); vmem_bytes {config.vmem_bytes} holds {total}")
    body(f"signal dma, {_SEM['dma']}")
    body(f"wait dma, {_SEM['dma']}")
    if cut is not None:
        return _segmented(locals())
    body(f"addi {step_reg}, {step_reg}, 1")
    body(f"bne {step_reg}, {body.reg(steps)}, step")
    for k in range(carry):
        dma(body, "store", tensors_out[ports_out[k].name].address, low.addr(bufs_in[k]),
            rows_out[k] * rb, False)
    body("halt")

    pro = _CachedAsm()
    pro.comment(f"{name}: {steps} step(s), {carry} carried value(s), {len(eqns)} operations; "
                f"VMEM rows: {low.alloc.high} values, {const_rows} constants")
    pro.li(step_reg, 0)
    if len(blob):
        dma(pro, "load", 0, (total - const_rows) * rb, len(blob) * rb, False)
    for k in range(carry):
        dma(pro, "load", tensors_in[ports_in[k].name].address, low.addr(bufs_in[k]),
            rows_in[k] * rb, False)
    pro.place("step")
    if id(pro) in run_of:
        run_of[id(pro)] = None      # at the loop's head: the body's last DMA set another run
    for k in range(carry, len(ports_in)):
        dma(pro, "load", tensors_in[ports_in[k].name].address, low.addr(bufs_in[k]),
            rows_in[k] * rb, True)
    text = pro.text() + body.text()
    words = assemble(text)
    if len(words) > config.imem_depth:
        raise _TooLong(f"the program needs {len(words)} instructions; config.imem_depth is "
                       f"{config.imem_depth}")
    ins = {p.name: tensors_in[p.name] for p in ports_in}
    program = Program(words=words, config=config, hbm_capacity=max(at, _HBM_ALIGN), hbm=hbm,
                      inputs=ins, outputs=tensors_out,
                      metadata={"kind": "jax", "function": name, "steps": steps,
                                "carry": carry, "operations": len(eqns),
                                "primitives": sorted({q.prim for q in eqns}),
                                "vmem_rows": {"values": low.alloc.high,
                                              "constants": const_rows},
                                "lanes": L,
                                "inputs": [vars(p) for p in ports_in],
                                "outputs": [vars(p) for p in ports_out],
                                "assembly": text})
    return program, ports_in, ports_out


def _segmented(f):
    """The segmented program of :func:`_lower`'s state ``f`` (its locals, the body lowered
    with its cuts): every step unrolled, each a run of segments; see :func:`lower`."""
    config, rb, low, body, dma = f["config"], f["rb"], f["low"], f["body"], f["dma"]
    carry, steps, name = f["carry"], f["steps"], f["name"]
    bufs_in, ports_in, ports_out = f["bufs_in"], f["ports_in"], f["ports_out"]
    tensors_in, tensors_out, rows_in = f["tensors_in"], f["tensors_out"], f["rows_in"]
    blob, hbm, const_rows, total = f["blob"], f["hbm"], f["const_rows"], f["total"]
    limit = f["cut"][0]
    # the scratch area: the VMEM rows of values, mirrored at one HBM address per row
    scratch = _roundup(f["at"], _HBM_ALIGN)
    at = _roundup(scratch + low.alloc.high * rb, _HBM_ALIGN)
    if at > 1 << 32:
        raise CompileError(f"{name} needs {at} bytes of HBM, past the 32-bit address space")

    made = []

    def asm():
        # kept alive: the DMA's run lengths are known by id(asm)
        made.append(_CachedAsm())
        return made[-1]

    def consts_text():
        e = asm()
        if len(blob):
            dma(e, "load", 0, (total - const_rows) * rb, len(blob) * rb, False)
        return e.text()

    def carries(kind, to_tensors):
        e = asm()
        for k in range(carry):
            t = (tensors_in[ports_in[k].name] if kind == "load" else
                 tensors_out[ports_out[k].name])
            a = low.addr(bufs_in[k])
            dma(e, kind, t.address if to_tensors else scratch + a, a, rows_in[k] * rb, False)
        return e.text()

    def head_text():
        e = asm()
        for k in range(carry, len(ports_in)):
            dma(e, "load", tensors_in[ports_in[k].name].address, low.addr(bufs_in[k]),
                rows_in[k] * rb, True)
        return e.text()

    consts = consts_text()
    parts = body.text().replace(_CONSTS, consts.rstrip("\n")).split(_CUT + "\n")
    parts = [_SCRATCH.sub(lambda m: str(scratch + int(m.group(1))), p) for p in parts]
    head = head_text()
    texts = []
    for s in range(steps):
        for i, part in enumerate(parts):
            text = f"        li r1, {s}\n"
            if i == 0:
                text += consts + carries("load", s == 0) + head
            text += part
            if i == len(parts) - 1:
                text += carries("store", s == steps - 1) + "        halt\n"
            texts.append(text)
    segments = [assemble(t) for t in texts]
    longest = max(len(w) for w in segments)
    if longest > limit:
        raise _TooLong(f"a segment needs {longest} instructions; segments hold {limit}")
    words = [w for seg in segments for w in seg]
    ins = {p.name: tensors_in[p.name] for p in ports_in}
    program = Program(words=words, config=config, hbm_capacity=max(at, _HBM_ALIGN), hbm=hbm,
                      inputs=ins, outputs=tensors_out,
                      metadata={"kind": "jax", "function": name, "steps": steps,
                                "carry": carry, "operations": len(f["eqns"]),
                                "primitives": sorted({q.prim for q in f["eqns"]}),
                                "vmem_rows": {"values": low.alloc.high,
                                              "constants": const_rows},
                                "lanes": low.L,
                                "inputs": [vars(p) for p in ports_in],
                                "outputs": [vars(p) for p in ports_out],
                                "segments": [len(w) for w in segments],
                                "segments_per_step": len(parts),
                                "scratch": {"address": scratch,
                                            "bytes": low.alloc.high * rb,
                                            "cuts": [{"stored": [list(r) for r in st],
                                                      "loaded": [list(r) for r in ld]}
                                                     for st, ld in f["spilled"]]},
                                "assembly": "".join(
                                    f"# segment {k}\n{t}" for k, t in enumerate(texts))})
    return program, ports_in, ports_out


def _chunked(full, L):
    """The VMEM rows of a constant's padded physical array (rows x chunks*L)."""
    mp, w = full.shape
    return full.reshape(mp, w // L, L).transpose(1, 0, 2).reshape(-1, L)
