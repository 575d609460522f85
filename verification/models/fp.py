"""Golden floating-point arithmetic, from IEEE 754 via numpy float32 and ml_dtypes.

The policy (docs/mxu.md, hdl/lib/fp.py): round to nearest even, subnormals kept, one canonical
NaN (fp32 ``0x7FC00000``, bfloat16 ``0x7FC0``). numpy float32 arithmetic on x86 is IEEE binary32
with subnormals; ml_dtypes converts the small formats exactly and rounds to nearest even. Values
travel as raw bit patterns (unsigned integers), the way they cross the hardware's ports.
"""

import ml_dtypes
import numpy as np

__all__ = ["DTYPES", "BITS", "to_float32", "from_float32", "canonical", "mul", "add", "to_bf16",
           "bits_of", "mul32", "max_min", "max32", "min32"]

DTYPES = {
    "bfloat16": ml_dtypes.bfloat16,
    "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
    "float8_e5m2": ml_dtypes.float8_e5m2,
}
BITS = {"bfloat16": np.uint16, "float8_e4m3fn": np.uint8, "float8_e5m2": np.uint8}
FP32_NAN = np.uint32(0x7FC00000)
BF16_NAN = np.uint16(0x7FC0)


def bits_of(values, fmt):
    """Raw bit patterns of ``values`` (any float array) converted to ``fmt``."""
    return np.asarray(values).astype(DTYPES[fmt]).view(BITS[fmt])


def to_float32(bits, fmt):
    """Exact float32 values of ``fmt`` bit patterns."""
    return np.asarray(bits, dtype=BITS[fmt]).view(DTYPES[fmt]).astype(np.float32)


def from_float32(values):
    """fp32 bit patterns of float32 ``values``, NaNs made canonical."""
    values = np.asarray(values, dtype=np.float32)
    return np.where(np.isnan(values), FP32_NAN, values.view(np.uint32)).astype(np.uint32)


def canonical(bits32):
    """fp32 bit patterns with every NaN replaced by the canonical one."""
    return from_float32(np.asarray(bits32, dtype=np.uint32).view(np.float32))


def mul(a_bits, b_bits, fmt):
    """fp32 bits of a * b for ``fmt`` operands (IEEE product, rounded to nearest even)."""
    with np.errstate(all="ignore"):
        return from_float32(to_float32(a_bits, fmt) * to_float32(b_bits, fmt))


def add(x_bits, y_bits):
    """fp32 bits of x + y for fp32 operands."""
    x = np.asarray(x_bits, dtype=np.uint32).view(np.float32)
    y = np.asarray(y_bits, dtype=np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        return from_float32(x + y)


def mul32(x_bits, y_bits):
    """fp32 bits of x * y for fp32 operands."""
    x = np.asarray(x_bits, dtype=np.uint32).view(np.float32)
    y = np.asarray(y_bits, dtype=np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        return from_float32(x * y)


def max_min(x, y, larger):
    """Elementwise max (``larger``) or min of float32 arrays: NaN if either is NaN, else the
    larger / smaller value with ``-0 < +0``."""
    nan = np.isnan(x) | np.isnan(y)
    if larger:
        pick_x = (x > y) | ((x == y) & ~np.signbit(x))
    else:
        pick_x = (x < y) | ((x == y) & np.signbit(x))
    return np.where(nan, np.float32(np.nan), np.where(pick_x, x, y)).astype(np.float32)


def max32(x_bits, y_bits):
    """fp32 bits of max(x, y) (see :func:`max_min`), NaN canonical."""
    x = np.asarray(x_bits, dtype=np.uint32).view(np.float32)
    y = np.asarray(y_bits, dtype=np.uint32).view(np.float32)
    return from_float32(max_min(x, y, True))


def min32(x_bits, y_bits):
    """fp32 bits of min(x, y) (see :func:`max_min`), NaN canonical."""
    x = np.asarray(x_bits, dtype=np.uint32).view(np.float32)
    y = np.asarray(y_bits, dtype=np.uint32).view(np.float32)
    return from_float32(max_min(x, y, False))


def to_bf16(x_bits):
    """bfloat16 bits of fp32 ``x`` rounded to nearest even, NaNs canonical."""
    x = np.asarray(x_bits, dtype=np.uint32).view(np.float32)
    narrow = x.astype(ml_dtypes.bfloat16).view(np.uint16)
    return np.where(np.isnan(x), BF16_NAN, narrow).astype(np.uint16)
