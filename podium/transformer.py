"""Transformer operations on the VPU: numerically stable softmax, LayerNorm and RMSNorm (fp32
statistics, learned scale and bias), GELU (tanh and erf forms), SiLU and residual adds, as
VPU instruction sequences on VMEM-resident blocks and as whole programs with HBM in and out
(docs/tensorcore.md, "Compiler: transformer operations").

Layout. A block of ``rows`` logical rows of ``features`` elements (fp32 or bfloat16) holds
each logical row in ``span = ceil(features * esize / row_bytes)`` consecutive VMEM rows; the
elements past ``features`` in the last of them are padding. Statistics (``vred`` results,
fp32 for both data types) take one VMEM row per logical row.

Composition. :class:`VpuOps` writes each operation into an ``_Asm`` of the compiler
(podium/compiler.py) for a block whose base addresses are registers or immediates and whose
row counts are registers, so a later compiler (the pre-LN encoder block) places its own
buffers and calls ``layernorm``, ``gelu``, ``softmax``, ``add`` on them between its
matmuls; for attention it has FlashAttention's online softmax (``online_start``,
``online_softmax`` per key block, ``divide_by_sum``). The functions :func:`softmax`,
:func:`layernorm`, :func:`rmsnorm`, :func:`gelu`, :func:`silu` and :func:`residual_add`
wrap one operation in a program: row tiles streamed
from HBM through two VMEM buffers (the DMA loads tile ``i + 1`` and stores tile ``i - 1``
while the VPU computes tile ``i``), constants (scale, bias, padding mask) loaded once and
replicated over a tile by a DMA with HBM stride 0.
"""

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from spec.tensorcore import TensorCoreConfig

from .compiler import (
    _HBM_ALIGN,
    CompileError,
    _Asm,
    _assemble_checked,
    _check_dim,
    _place,
    _roundup,
    _semaphores,
)
from .program import Program, Tensor

__all__ = ["VpuOps", "Block", "softmax", "layernorm", "rmsnorm", "gelu", "silu",
           "residual_add", "OPS", "DTYPES", "AS_7_1_26", "TOLERANCE", "vpu_passes"]

DTYPES = {"float32": ("fp32", 4), "bfloat16": ("bf16", 2)}
"""Data types of the operations: name -> (VPU dtype, element bytes)."""
OPS = ("softmax", "layernorm", "rmsnorm", "gelu_tanh", "gelu_erf", "silu", "add")

AS_7_1_26 = (0.3275911, (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))
"""Abramowitz and Stegun, Handbook of Mathematical Functions (1964), formula 7.1.26:
``erf(z) = 1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) exp(-z^2)``, ``t = 1 / (1 + p z)``,
``z >= 0``, absolute error at most 1.5e-7: ``(p, (a1 .. a5))``."""

TOLERANCE = {
    "softmax": (1e-6, 5e-3),
    "layernorm": (1e-6, 3e-2),
    "rmsnorm": (1e-6, 3e-2),
    "gelu_tanh": (1e-6, 1.5e-2),
    "gelu_erf": (1e-6, 1.5e-2),
    "silu": (1e-6, 1.5e-2),
    "add": (1e-6, 8e-3),
}
"""Documented bound of each operation's error against float64, ``|y - ref| / max(1, |ref|)``
for (fp32, bfloat16) data (docs/tensorcore.md, "Compiler: transformer operations": about
three times the maxima measured over seeded inputs N(0, 3^2))."""

_SQRT_2_PI = math.sqrt(2 / math.pi)
_GELU_C = 0.044715
_FP32_MAX_NEG = 0xFF7FFFFF          # -3.4028235e38: the floor of a softmax row's max
_FP32_MIN_NORMAL = 0x00800000       # 2**-126: the floor of a softmax row's sum
_FP32_NEG_INF = 0xFF800000


def _bits(value, vdtype):
    """The ``vpu.cfg`` scalar holding ``value`` in ``vdtype`` (bfloat16: rounded, low 16
    bits)."""
    if vdtype == "bf16":
        return int(np.array(value, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))
    return int(np.array(value, np.float32).view(np.uint32))


@dataclass(frozen=True)
class Block:
    """A VMEM-resident block: ``rows`` (a register) logical rows of ``span`` VMEM rows each,
    ``vrows`` (a register) = rows * span, elements of ``dtype`` ("fp32" or "bf16")."""

    rows: str
    vrows: str
    span: int
    dtype: str


class VpuOps:
    """VPU instruction sequences of the transformer operations, written into ``e`` (an
    ``_Asm``). Buffers are registers or integer VMEM addresses (loaded into ``temps`` as
    needed); every buffer of a block has its layout; statistics buffers hold a row per
    logical row. Each method leaves ``vpu.cfg`` changed."""

    def __init__(self, e, temps=("r12", "r13", "r14", "r15")):
        self.e, self.temps = e, temps

    def _reg(self, value, k):
        if isinstance(value, str):
            return value
        self.e.li(self.temps[k], value)
        return self.temps[k]

    def cfg(self, count, scalar=0):
        """``vpu.cfg count, scalar, 0`` (count a register)."""
        if scalar:
            self.e.li(self.temps[0], scalar)
        self.e(f"vpu.cfg {count}, {self.temps[0] if scalar else 'r0'}, r0")

    def vop(self, op, dtype, dst, src1, src2=None, mode=None):
        d, s1 = self._reg(dst, 1), self._reg(src1, 2)
        s2 = "r0" if src2 is None else self._reg(src2, 3)
        self.e(f"vop {op}.{dtype} {d}, {s1}, {s2}" + (f", src2={mode}" if mode else ""))

    def vred(self, op, dtype, dst, src, span):
        self.e.li(self.temps[3], span)
        self.e(f"vred {op}.{dtype} {self._reg(dst, 1)}, {self._reg(src, 2)}, {self.temps[3]}")

    def scalar_op(self, op, dtype, count, buf, value, src=None):
        """``buf = src op value`` (``src`` default ``buf``) over ``count`` rows, ``value`` a
        constant of ``dtype``."""
        self.cfg(count, _bits(value, dtype))
        self.vop(op, dtype, buf, buf if src is None else src, mode="scalar")

    def apply_stat(self, op, b, x, stat):
        """``x = x op stat`` with each logical row's statistic (fp32) over its span."""
        self.cfg(b.rows, b.span)
        self.vop(op, b.dtype, x, x, stat, mode="stat")

    # -- the operations ---------------------------------------------------------------

    def softmax(self, b, x, stat, mask=None):
        """``x = softmax(x)`` along each logical row, in place. ``mask`` (a block of 0 and
        -inf in the padding, optional when there is none) is added first. ``stat`` holds
        ``rows`` statistic rows. max (floored at -FLT_MAX, so an all -inf row gives 0s), x -
        max, exp, sum (floored at 2**-126), reciprocal, x * 1/sum."""
        dt = b.dtype
        if mask is not None:
            self.cfg(b.vrows)
            self.vop("add", dt, x, x, mask)
        self.cfg(b.rows, _FP32_MAX_NEG)
        self.vred("max", dt, stat, x, b.span)
        self.vop("max", "fp32", stat, stat, mode="scalar")
        self.apply_stat("sub", b, x, stat)
        self.cfg(b.vrows)
        self.vop("exp", dt, x, x)
        self.cfg(b.rows)
        self.vred("sum", dt, stat, x, b.span)
        self.divide_by_sum(b, x, stat)

    def online_start(self, b, m, total):
        """The running max ``m`` to -inf and the running sum ``total`` to +0 (statistic rows,
        whatever they held: integer operations on the bits)."""
        self.cfg(b.rows)
        self.vop("mul", "int32", m, m, mode="scalar")
        self.vop("mul", "int32", total, total, mode="scalar")
        self.cfg(b.rows, _FP32_NEG_INF)
        self.vop("add", "int32", m, m, mode="scalar")

    def online_softmax(self, b, x, m, total, alpha, tmp):
        """One key block of an online (FlashAttention) softmax, in place on the score block
        ``x``, with the running max ``m`` and sum ``total`` (statistic rows, from
        :meth:`online_start`): ``m' = max(m, rowmax x)`` (floored at -FLT_MAX), ``alpha =
        exp(m - m')``, ``x = exp(x - m')``, ``total = total * alpha + rowsum x``, ``m = m'``.
        The caller rescales its output rows by ``alpha`` (``apply_stat("mul", ...)``) before
        adding ``x @ V``, and after the last block calls :meth:`divide_by_sum`. ``alpha``
        and ``tmp`` are statistic rows."""
        dt = b.dtype
        self.cfg(b.rows, _FP32_MAX_NEG)
        self.vred("max", dt, tmp, x, b.span)
        self.vop("max", "fp32", tmp, tmp, m)
        self.vop("max", "fp32", tmp, tmp, mode="scalar")
        self.vop("sub", "fp32", alpha, m, tmp)
        self.vop("exp", "fp32", alpha, alpha)
        self.vop("copy", "fp32", m, tmp)
        self.vop("mul", "fp32", total, total, alpha)
        self.apply_stat("sub", b, x, m)
        self.cfg(b.vrows)
        self.vop("exp", dt, x, x)
        self.cfg(b.rows)
        self.vred("sum", dt, tmp, x, b.span)
        self.vop("add", "fp32", total, total, tmp)

    def divide_by_sum(self, b, x, total):
        """``x /= total`` per logical row, the sum floored at 2**-126 (a fully masked row,
        sum 0, gives zeros); ``total`` becomes its reciprocal."""
        self.cfg(b.rows, _FP32_MIN_NORMAL)
        self.vop("max", "fp32", total, total, mode="scalar")
        self.vop("reciprocal", "fp32", total, total)
        self.apply_stat("mul", b, x, total)

    def _normalize(self, b, x, stat, features, eps):
        """``stat`` (a sum of squares or of squared deviations) -> ``1 / sqrt(stat / features
        + eps)``, then ``x *= stat``."""
        self.scalar_op("mul", "fp32", b.rows, stat, 1.0 / features)
        if eps:
            self.scalar_op("add", "fp32", b.rows, stat, eps)
        self.cfg(b.rows)
        self.vop("rsqrt", "fp32", stat, stat)
        self.apply_stat("mul", b, x, stat)

    def _affine(self, b, x, gamma, beta):
        self.cfg(b.vrows)
        if gamma is not None:
            self.vop("mul", b.dtype, x, x, gamma)
        if beta is not None:
            self.vop("add", b.dtype, x, x, beta)

    def layernorm(self, b, x, stat, tmp, features, eps, gamma=None, beta=None, mask=None):
        """LayerNorm in place: mean from the fp32 row sum (padding must be zero), ``x -
        mean``, the padding zeroed again by ``mask`` (1 / 0, needed when there is padding),
        the variance from the fp32 sum of the squares (in ``tmp``, a block), ``x *
        rsqrt(var + eps)``, then ``x * gamma + beta`` (blocks, each optional)."""
        dt = b.dtype
        self.cfg(b.rows)
        self.vred("sum", dt, stat, x, b.span)
        self.scalar_op("mul", "fp32", b.rows, stat, 1.0 / features)
        self.apply_stat("sub", b, x, stat)
        self.cfg(b.vrows)
        if mask is not None:
            self.vop("mul", dt, x, x, mask)
        self.vop("mul", dt, tmp, x, x)
        self.cfg(b.rows)
        self.vred("sum", dt, stat, tmp, b.span)
        self._normalize(b, x, stat, features, eps)
        self._affine(b, x, gamma, beta)

    def rmsnorm(self, b, x, stat, tmp, features, eps, gamma=None, beta=None):
        """RMSNorm in place: ``x * rsqrt(mean(x^2) + eps)`` (fp32 sum of the squares, in
        ``tmp``; padding must be zero), then ``x * gamma + beta`` (each optional)."""
        self.cfg(b.vrows)
        self.vop("mul", b.dtype, tmp, x, x)
        self.cfg(b.rows)
        self.vred("sum", b.dtype, stat, tmp, b.span)
        self._normalize(b, x, stat, features, eps)
        self._affine(b, x, gamma, beta)

    def gelu_tanh(self, b, x, tmp):
        """``x * sigmoid(2 sqrt(2/pi) (x + 0.044715 x^3))`` in place, which is the tanh form
        ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` exactly (``(1 + tanh z) / 2 =
        sigmoid(2z)``): 6 passes per row."""
        dt, c = b.dtype, 2 * _SQRT_2_PI
        self.cfg(b.vrows)
        self.vop("mul", dt, tmp, x, x)
        self.scalar_op("mul", dt, b.vrows, tmp, c * _GELU_C)
        self.scalar_op("add", dt, b.vrows, tmp, c)
        self.cfg(b.vrows)
        self.vop("mul", dt, tmp, tmp, x)
        self.vop("sigmoid", dt, tmp, tmp)
        self.vop("mul", dt, x, x, tmp)

    def gelu_erf(self, b, x, tmps):
        """``x * Phi(x) = relu(x) - |x| Q`` with ``Q = 0.5 erfc(|x| / sqrt 2)`` from
        Abramowitz-Stegun 7.1.26 (:data:`AS_7_1_26`): ``t = 1 / (1 + p |x| / sqrt 2)``, ``Q =
        t (a1 + t (a2 + ...)) / 2 * exp(-x^2 / 2)``, in place with three temporary blocks:
        20 passes per row."""
        dt, (a, t, q) = b.dtype, tmps
        p, coef = AS_7_1_26
        n = b.vrows
        self.cfg(n)
        self.vop("abs", dt, a, x)
        self.scalar_op("mul", dt, n, t, p / math.sqrt(2), src=a)
        self.scalar_op("add", dt, n, t, 1.0)
        self.cfg(n)
        self.vop("reciprocal", dt, t, t)
        self.scalar_op("mul", dt, n, q, coef[4] / 2, src=t)
        for c in reversed(coef[:4]):
            self.scalar_op("add", dt, n, q, c / 2)
            self.cfg(n)
            self.vop("mul", dt, q, q, t)
        self.scalar_op("mul", dt, n, t, -0.5, src=a)
        self.cfg(n)
        self.vop("mul", dt, t, t, a)
        self.vop("exp", dt, t, t)
        self.vop("mul", dt, q, q, t)
        self.vop("mul", dt, q, q, a)
        self.vop("relu", dt, x, x)
        self.vop("sub", dt, x, x, q)

    def silu(self, b, x, tmp):
        """``x * sigmoid(x)`` in place: 2 passes per row."""
        self.cfg(b.vrows)
        self.vop("sigmoid", b.dtype, tmp, x)
        self.vop("mul", b.dtype, x, x, tmp)

    def add(self, b, x, other):
        """``x = x + other`` (a residual add): 1 pass per row."""
        self.cfg(b.vrows)
        self.vop("add", b.dtype, x, x, other)


_TEMPS_NEEDED = {"softmax": 0, "layernorm": 1, "rmsnorm": 1, "gelu_tanh": 1, "gelu_erf": 3,
                 "silu": 1, "add": 0}


def vpu_passes(op, span, dtype, features=None, affine=(True, True)):
    """The VPU passes of ``op`` per logical row of ``span`` VMEM rows: ``(row passes,
    statistic passes, reductions)``: elementwise passes over the data (each ``span`` VMEM
    rows, two passes per bfloat16 row), passes over the fp32 statistic rows, and ``vred``s
    of ``span`` rows (docs/tensorcore.md, "VPU hardware": ``span + log2 lanes`` passes,
    bfloat16 ``2 span + log2 lanes + 1``). Padding masks not counted (one row pass more)."""
    elementwise = {"softmax": 3, "layernorm": 3 + sum(affine), "rmsnorm": 2 + sum(affine),
                   "gelu_tanh": 6, "gelu_erf": 20, "silu": 2, "add": 1}[op]
    stat = {"softmax": 3, "layernorm": 4, "rmsnorm": 3}.get(op, 0)
    reductions = {"softmax": 2, "layernorm": 2, "rmsnorm": 1}.get(op, 0)
    return elementwise, stat, reductions


# ---------------------------------------------------------------------------------------
# Programs: one operation over an HBM tensor


_SEMS = ("const_full", "x_full", "x_done", "x_empty")


class _Plan:
    def __init__(self, config, op, rows, features, dtype, tm, consts):
        self.config, self.op, self.rows, self.features = config, op, rows, features
        self.vdtype, esize = DTYPES[dtype]
        rb = config.row_bytes
        self.span = -(-features * esize // rb)
        self.tm, self.Mt = tm, -(-rows // tm)
        self.ld = self.span * rb                         # HBM row = a logical row's span
        tile = tm * self.ld
        sizes = {"X0": tile, "X1": tile}
        if op == "add":
            sizes.update(R0=tile, R1=tile)
        for k in range(_TEMPS_NEEDED[op]):
            sizes[f"T{k}"] = tile
        for name in consts:
            sizes[name] = tile
        if op in ("softmax", "layernorm", "rmsnorm"):
            sizes["S"] = tm * rb
        self.sizes = sizes
        self.vmem = _place(config, sizes) if tm * self.span <= config.vmem_rows else None


def _constants(plan, dtype, gamma, beta):
    """name -> one logical row (``span`` VMEM rows of bytes) of each constant block."""
    np_dtype = np.float32 if dtype == "float32" else ml_dtypes.bfloat16
    pad = plan.span * plan.config.row_bytes // np.dtype(np_dtype).itemsize - plan.features
    rows = {}
    if pad and plan.op in ("softmax", "layernorm"):
        fill = -np.inf if plan.op == "softmax" else 0.0
        keep = 0.0 if plan.op == "softmax" else 1.0
        rows["MASK"] = np.concatenate([np.full(plan.features, keep), np.full(pad, fill)])
    for name, v in (("G", gamma), ("B", beta)):
        if v is not None:
            rows[name] = np.concatenate([np.asarray(v, np.float64), np.zeros(pad)])
    return {n: v.astype(np.float32).astype(np_dtype).view(np.uint8).tobytes()
            for n, v in rows.items()}


def _check_vector(name, value, features):
    if value is None:
        return None
    try:
        v = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        v = None
    if v is None or v.shape != (features,):
        raise CompileError(f"{name} must be a numeric vector of shape ({features},), got "
                           f"{np.shape(value) if v is None else v.shape}")
    return v


def _program(config, op, rows, features, dtype, gamma=None, beta=None, eps=None):
    if not isinstance(config, TensorCoreConfig):
        raise CompileError(f"config must be a TensorCoreConfig, got {config!r}")
    if not config.vmath and op not in ("add",):
        raise CompileError(f"config.vmath must be True for {op} (it needs the VPU's "
                           f"transcendental functions)")
    _check_dim("rows", rows)
    _check_dim("features", features)
    if dtype not in DTYPES:
        raise CompileError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if eps is not None and (not isinstance(eps, (int, float)) or not 0 <= eps < 1):
        raise CompileError(f"eps must be a number in [0, 1), got {eps!r}")
    gamma = _check_vector("gamma", gamma, features)
    beta = _check_vector("beta", beta, features)
    probe = _Plan(config, op, rows, features, dtype, 1, ())
    consts = _constants(probe, dtype, gamma, beta)
    plan = None
    for tm in sorted({min(rows, 1 << k) for k in range(17)} | {rows}, reverse=True):
        candidate = _Plan(config, op, rows, features, dtype, tm, consts)
        if candidate.vmem is not None:
            plan = candidate
            break
    if plan is None:
        limit = _max_features(config, op, dtype, gamma, beta)
        blocks = len(probe.sizes) - ("S" in probe.sizes) + len(consts)
        need = blocks * probe.ld + ("S" in probe.sizes) * config.row_bytes
        raise CompileError(f"features {features} of a {dtype} {op} do not fit vmem_bytes "
                           f"{config.vmem_bytes}: one row needs {need} bytes ({blocks} "
                           f"blocks of {probe.span} rows of {config.row_bytes} bytes"
                           f"{', a statistic row' if 'S' in probe.sizes else ''}); at most "
                           f"{limit} features")
    const_bytes = b"".join(consts.values())
    params = _roundup(len(const_bytes), _HBM_ALIGN) if const_bytes else 0
    x = Tensor(params, (rows, features), dtype, plan.ld)
    inputs, at = {"X": x}, _roundup(x.address + x.nbytes, _HBM_ALIGN)
    if op == "add":
        inputs["R"] = Tensor(at, (rows, features), dtype, plan.ld)
        at = _roundup(at + x.nbytes, _HBM_ALIGN)
    y = Tensor(at, (rows, features), dtype, plan.ld)
    if y.address + y.nbytes > 1 << 32:
        raise CompileError(f"rows {rows} x features {features} need {y.address + y.nbytes} "
                           f"bytes of HBM, past the 32-bit address space")
    sem = _semaphores(config, _SEMS)
    text = _Code(plan, consts, x.address, y.address, sem, eps).program()
    words = _assemble_checked(config, text)
    return Program(words=words, config=config,
                   hbm_capacity=_roundup(y.address + y.nbytes, _HBM_ALIGN),
                   hbm={0: const_bytes} if const_bytes else {}, inputs=inputs,
                   outputs={"Y": y},
                   metadata={"kind": op, "rows": rows, "features": features, "dtype": dtype,
                             "eps": eps, "tm": plan.tm, "span": plan.span,
                             "vmem": plan.vmem, "assembly": text})


def _max_features(config, op, dtype, gamma, beta):
    """The most features one logical row of ``op`` can have on ``config`` (with the constant
    blocks that many features need)."""
    def fits(features):
        probe = _Plan(config, op, 1, features, dtype, 1, ())
        names = _constants(probe, dtype, None if gamma is None else np.ones(features),
                           None if beta is None else np.ones(features))
        return _Plan(config, op, 1, features, dtype, 1, names).vmem is not None

    lo, hi = 0, 65535
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    # fitting is not monotonic where padding adds a mask: the largest n with every m <= n
    while lo and not all(fits(m) for m in range(max(1, lo - 64), lo + 1)):
        lo -= 1
    return lo


class _Code:
    """The program: constants loaded once, then the loop over row tiles (double-buffered)."""

    i, xb, rbuf, mt, vrows = "r1", "r2", "r3", "r4", "r5"

    def __init__(self, plan, consts, x_base, y_base, sem, eps):
        self.p, self.consts, self.sem, self.eps = plan, consts, sem, eps
        self.x_base, self.y_base = x_base, y_base
        self.r_base = _roundup(x_base + plan.rows * plan.ld, _HBM_ALIGN)
        self.e = _Asm()
        self.ops = VpuOps(self.e, ("r12", "r13", "r14", "r15"))

    def program(self):
        e, p, sem, vmem = self.e, self.p, self.sem, self.p.vmem
        t = ("r12", "r13", "r14")
        e.comment(f"{p.op} of {p.rows} x {p.features} {p.vdtype}, tiles of {p.tm} rows, "
                  f"{p.span} VMEM rows each")
        e.li(self.i, 0)
        e.li(self.xb, vmem["X0"])
        if p.op == "add":
            e.li(self.rbuf, vmem["R0"])
        if self.consts:
            at = 0
            for name, data in self.consts.items():
                e.dma_shape(len(data), [(p.tm, 0, p.ld)], t)
                e.li(t[0], at)
                e.li(t[1], vmem[name])
                e(f"dma.load {t[0]}, {t[1]}, {sem['const_full']}")
                at += len(data)
            for _ in self.consts:
                e(f"wait vpu, {sem['const_full']}")
        e(f"signal dma, {sem['x_empty']}")
        e(f"signal dma, {sem['x_empty']}")
        self._fetch(first=True)
        e.place("tile")
        e.tile_size(self.mt, self.i, p.tm, p.rows, t[0])
        e.li(t[0], p.span)
        e(f"mul {self.vrows}, {self.mt}, {t[0]}")
        # the next tile's load, into the other buffer
        e(f"addi {t[1]}, {self.i}, 1")
        e.li(t[0], p.Mt)
        e(f"beq {t[1]}, {t[0]}, compute")
        self._fetch(first=False)
        e.place("compute")
        e(f"wait vpu, {sem['x_full']}")
        if p.op == "add":
            e(f"wait vpu, {sem['x_full']}")
        self._compute()
        e(f"signal vpu, {sem['x_done']}")
        e(f"wait dma, {sem['x_done']}")
        e.dma_shape(p.ld, [(self.mt, p.ld, p.ld)], ("r12", "r13", "r14"))
        e.affine(t[0], self.y_base, [(self.i, p.tm * p.ld)], t[2])
        e(f"dma.store {t[0]}, {self.xb}, {sem['x_empty']}")
        e.toggle(self.xb, vmem["X0"], vmem["X1"], t[0])
        if p.op == "add":
            e.toggle(self.rbuf, vmem["R0"], vmem["R1"], t[0])
        e(f"addi {self.i}, {self.i}, 1")
        e.li(t[0], p.Mt)
        e(f"bne {self.i}, {t[0]}, tile")
        e("halt")
        return e.text()

    def _fetch(self, first):
        """Load tile 0 (``first``) or tile ``i + 1`` into the X buffer ``xb`` does not name
        (X0 for tile 0), and for ``add`` the residual tile into the matching R buffer."""
        e, p, sem, vmem = self.e, self.p, self.sem, self.p.vmem
        t = ("r12", "r13", "r14", "r15")
        e(f"wait dma, {sem['x_empty']}")
        if first:
            e.li(t[1], min(p.tm, p.rows))
        else:
            e(f"addi {t[3]}, {self.i}, 1")
            e.tile_size(t[1], t[3], p.tm, p.rows, t[2])
        e.dma_shape(p.ld, [(t[1], p.ld, p.ld)], (t[0], t[2], t[2]))
        for name, base in (("X", self.x_base), ("R", self.r_base)):
            if name == "R" and p.op != "add":
                break
            if first:
                e.li(t[0], base)
                e.li(t[1], vmem[f"{name}0"])
            else:
                e.affine(t[0], base, [(t[3], p.tm * p.ld)], t[2])
                e.li(t[1], vmem[f"{name}0"] + vmem[f"{name}1"])
                e(f"sub {t[1]}, {t[1]}, {self.xb if name == 'X' else self.rbuf}")
            e(f"dma.load {t[0]}, {t[1]}, {sem['x_full']}")

    def _compute(self):
        p, ops, vmem = self.p, self.ops, self.p.vmem
        b = Block(self.mt, self.vrows, p.span, p.vdtype)
        x = self.xb
        temps = [vmem[f"T{k}"] for k in range(_TEMPS_NEEDED[p.op])]
        mask, gamma, beta = (vmem.get(n) for n in ("MASK", "G", "B"))
        if p.op == "softmax":
            ops.softmax(b, x, vmem["S"], mask)
        elif p.op == "layernorm":
            ops.layernorm(b, x, vmem["S"], temps[0], p.features, self.eps, gamma, beta, mask)
        elif p.op == "rmsnorm":
            ops.rmsnorm(b, x, vmem["S"], temps[0], p.features, self.eps, gamma, beta)
        elif p.op == "gelu_tanh":
            ops.gelu_tanh(b, x, temps[0])
        elif p.op == "gelu_erf":
            ops.gelu_erf(b, x, temps)
        elif p.op == "silu":
            ops.silu(b, x, temps[0])
        else:
            ops.add(b, x, self.rbuf)


def softmax(config, rows, features, dtype="float32"):
    """A program: ``Y = softmax(X)`` along each row of X (rows x features)."""
    return _program(config, "softmax", rows, features, dtype)


def layernorm(config, rows, features, gamma=None, beta=None, eps=1e-5, dtype="float32"):
    """A program: ``Y = (X - mean) / sqrt(var + eps) * gamma + beta`` per row (biased
    variance, fp32 statistics)."""
    return _program(config, "layernorm", rows, features, dtype, gamma, beta, eps)


def rmsnorm(config, rows, features, gamma=None, beta=None, eps=1e-6, dtype="float32"):
    """A program: ``Y = X / sqrt(mean(X^2) + eps) * gamma + beta`` per row."""
    return _program(config, "rmsnorm", rows, features, dtype, gamma, beta, eps)


def gelu(config, rows, features, form="tanh", dtype="float32"):
    """A program: ``Y = GELU(X)``, ``form`` "tanh" (the tanh approximation) or "erf" (the
    exact GELU, erf from Abramowitz-Stegun 7.1.26)."""
    if form not in ("tanh", "erf"):
        raise CompileError(f"form must be one of tanh, erf, got {form!r}")
    return _program(config, f"gelu_{form}", rows, features, dtype)


def silu(config, rows, features, dtype="float32"):
    """A program: ``Y = X * sigmoid(X)``."""
    return _program(config, "silu", rows, features, dtype)


def residual_add(config, rows, features, dtype="float32"):
    """A program: ``Y = X + R``."""
    return _program(config, "add", rows, features, dtype)
