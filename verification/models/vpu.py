"""Golden model of the VPU's arithmetic (docs/tensorcore.md, "VPU"), from IEEE 754 via numpy
and ml_dtypes, independent of the RTL.

Rows travel as numpy ``uint8`` arrays of shape ``(rows, row_bytes)``: the bytes of VMEM rows.
Elements are packed little endian from byte 0 (int32 / fp32 4 bytes, bfloat16 2, int8 1).
"""

import ml_dtypes
import numpy as np

from spec.isa import VOPS, Cast, DType, ROp, VOp
from verification.models import vmath
from verification.models.fp import BF16_NAN, FP32_NAN, max_min

__all__ = ["vop_rows", "vcast_rows", "vred_rows", "vtrans_rows", "tile_rows", "FP32_NAN",
           "BF16_NAN"]

_VIEW = {DType.INT32: np.int32, DType.FP32: np.float32, DType.BF16: ml_dtypes.bfloat16}
_BITS = {DType.INT32: np.uint32, DType.FP32: np.uint32, DType.BF16: np.uint16}


def _elements(rows, dtype):
    """The elements of ``rows`` as float32 (fp32, bfloat16 widened exactly) or int64 (int32)."""
    values = np.ascontiguousarray(rows).view(_VIEW[dtype])
    return values.astype(np.int64) if dtype == DType.INT32 else values.astype(np.float32)


def _pack(values, dtype, row_bytes):
    """Rows of ``values`` (int64 or float32 per element) in ``dtype``, NaNs canonical."""
    if dtype == DType.INT32:
        out = (values & 0xFFFFFFFF).astype(np.uint32)
    elif dtype == DType.FP32:
        f = values.astype(np.float32)
        out = np.where(np.isnan(f), FP32_NAN, f.view(np.uint32)).astype(np.uint32)
    else:
        f = values.astype(np.float32)
        out = np.where(np.isnan(f), BF16_NAN,
                       f.astype(ml_dtypes.bfloat16).view(np.uint16)).astype(np.uint16)
    return np.ascontiguousarray(out).view(np.uint8).reshape(-1, row_bytes)


def _relu(x, integer):
    if integer:
        return np.maximum(x, 0)
    return np.where(np.isnan(x), np.float32(np.nan),
                    np.where(x > 0, x, np.float32(0.0))).astype(np.float32)


def _apply(op, x, y, integer):
    with np.errstate(all="ignore"):
        if op == VOp.ADD:
            return x + y
        if op == VOp.SUB:
            return x - y
        if op == VOp.MUL:
            return (x * y) if not integer else ((x * y) & 0xFFFFFFFF)
        if op in (VOp.MAX, VOp.MIN):
            if integer:
                return np.maximum(x, y) if op == VOp.MAX else np.minimum(x, y)
            return max_min(x, y, op == VOp.MAX)
        if op == VOp.RELU:
            return _relu(x, integer)
        if op == VOp.COPY:
            return x
        if op == VOp.ABS:
            # int32: |x| modulo 2^32 (so -2^31 stays); floats: the sign cleared (IEEE abs),
            # NaN canonical on packing.
            return np.abs(x)
        if VOPS[op].latency == "vmath":
            # fp32 (bfloat16 widened) through the documented algorithm of docs/vmath.md;
            # bfloat16 results rounded once on packing
            bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
            return vmath.compute(op.name.lower(), bits).view(np.float32).reshape(x.shape)
    raise ValueError(f"op must be a VOp, got {op!r}")


def _wrap32(values):
    v = values & 0xFFFFFFFF
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def vop_rows(op, dtype, src1, src2=None, *, broadcast=False, scalar=None, group=None,
             relu=False):
    """``vop op.dtype``: the destination rows for ``src1`` (rows) and ``src2`` (rows, one row
    with ``broadcast``, or None with ``scalar``, a 32-bit pattern of the dtype's bits). With
    ``group`` (``src2=stat``), row ``i`` of ``src1`` takes word 0 of row ``i // group`` of
    ``src2`` in every element: an int32 for int32, an fp32 for fp32 and bfloat16 (a ``vred``
    statistic, fp32 also for bfloat16 rows: the operation is the fp32 one, then rounded)."""
    op, dtype = VOp(op), DType(dtype)
    src1 = np.asarray(src1, dtype=np.uint8)
    row_bytes = src1.shape[1]
    integer = dtype == DType.INT32
    x = _elements(src1, dtype)
    if VOPS[op].unary:
        y = x
    elif scalar is not None:
        bits = np.array([scalar & (0xFFFF if dtype == DType.BF16 else 0xFFFFFFFF)],
                        dtype=_BITS[dtype])
        y = np.broadcast_to(_elements(bits.view(np.uint8).reshape(1, -1), dtype)[0, 0],
                            x.shape)
    elif group is not None:
        words = np.ascontiguousarray(np.asarray(src2, dtype=np.uint8)[:, :4])
        stat = _elements(words, DType.INT32 if integer else DType.FP32)[:, 0]
        y = np.broadcast_to(np.repeat(stat, group)[:x.shape[0], None], x.shape)
    else:
        y = _elements(np.asarray(src2, dtype=np.uint8), dtype)
        if broadcast:
            y = np.broadcast_to(y[:1], x.shape)
    out = _apply(op, x, y, integer)
    if integer:
        out = _wrap32(out)
    if relu:
        out = _relu(out, integer)
    return _pack(out, dtype, row_bytes)


def vcast_rows(kind, src, *, scalar=0, shift=0):
    """``vcast kind``: destination rows, results packed from byte 0, the rest zero."""
    kind = Cast(kind)
    src = np.asarray(src, dtype=np.uint8)
    n, row_bytes = src.shape
    out = np.zeros((n, row_bytes), dtype=np.uint8)
    if kind == Cast.F32_BF16:
        packed = _pack(_elements(src, DType.FP32), DType.BF16, row_bytes // 2)
        out[:, : row_bytes // 2] = packed
    elif kind == Cast.BF16_F32:
        half = _elements(src[:, : row_bytes // 2], DType.BF16)
        out[:] = _pack(half, DType.FP32, row_bytes)
    elif kind == Cast.I32_I8:
        x = _elements(src, DType.INT32).astype(object)
        s = min(int(shift), 62)
        m = int(np.int64(np.int32(np.uint32(scalar & 0xFFFFFFFF))))
        rnd = (1 << (s - 1)) if s else 0
        y = np.vectorize(lambda v: max(-128, min(127, (int(v) * m + rnd) >> s)))(x)
        out[:, : row_bytes // 4] = y.astype(np.int8).view(np.uint8)
    else:
        q = src[:, : row_bytes // 4].view(np.int8).astype(np.int64)
        out[:] = _pack(q, DType.INT32, row_bytes)
    return out


def _tree(values, op, integer):
    """Pairwise tree over the last axis, level by level."""
    while values.shape[-1] > 1:
        values = _apply(op, values[..., 0::2], values[..., 1::2], integer)
        if integer:
            values = _wrap32(values)
    return values[..., 0]


def vred_rows(rop, dtype, src, span):
    """``vred rop.dtype`` over ``src`` (``count * span`` rows): ``count`` rows, the result in
    element 0 (fp32 for a bfloat16 reduction), the rest zero."""
    rop, dtype = ROp(rop), DType(dtype)
    src = np.asarray(src, dtype=np.uint8)
    row_bytes = src.shape[1]
    integer = dtype == DType.INT32
    op = VOp.ADD if rop == ROp.SUM else VOp.MAX
    x = _elements(src, dtype).reshape(-1, span, src.shape[1] // (2 if dtype == DType.BF16
                                                                  else 4))
    acc = x[:, 0]
    for t in range(1, span):
        acc = _apply(op, acc, x[:, t], integer)
        if integer:
            acc = _wrap32(acc)
    result = _tree(acc, op, integer)
    out_dtype = DType.INT32 if integer else DType.FP32
    out = np.zeros((len(result), row_bytes), dtype=np.uint8)
    out[:, :4] = _pack(result.reshape(-1, 1), out_dtype, 4)
    return out


def tile_rows(dtype, row_bytes):
    """Rows (and elements per row) of a ``vtrans`` tile: a row's elements of ``dtype``."""
    return row_bytes // (2 if DType(dtype) == DType.BF16 else 4)


def vtrans_rows(dtype, src):
    """``vtrans dtype`` over ``src`` (``count`` tiles of ``n`` rows, ``n`` the elements of a
    row): each tile transposed, element ``j`` of its row ``i`` to element ``i`` of row ``j``;
    the bits move unchanged (int32 and fp32 alike)."""
    src = np.asarray(src, dtype=np.uint8)
    row_bytes = src.shape[1]
    n = tile_rows(dtype, row_bytes)
    bits = np.ascontiguousarray(src).view(_BITS[DType(dtype)]).reshape(-1, n, n)
    return np.ascontiguousarray(bits.transpose(0, 2, 1)).view(np.uint8).reshape(-1, row_bytes)
