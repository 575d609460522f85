"""Golden model of the VPU's transcendental functions (docs/vmath.md): ``exp``,
``reciprocal``, ``rsqrt``, ``tanh``, ``sigmoid``, ``log`` on fp32 bit patterns, computing the
documented fixed-point algorithm with numpy integers, so its bits are the RTL's
(hdl/tensorcore/vpu_func.py). Only the constants and coefficient tables are shared
(spec/vmath.py); the arithmetic here is written on its own.

Also the float64 references and the ULP measure the accuracy tests and ``make bench vmath``
use.
"""

import numpy as np

from spec import vmath as V

__all__ = ["compute", "evaluate", "reference", "ulp_error", "dense_sample", "OPS"]

OPS = V.OPS
_I64 = np.int64
_TABLE = np.array([c for table in V.TABLES for c in table], dtype=_I64)   # (func*128+j, 3)
_NAN, _INF = 0x7FC00000, 0x7F800000
_ONE, _HALF = 0x3F800000, 0x3F000000


def _bitlen(v):
    """Bit length of each non-negative int64 in ``v`` (0 for 0)."""
    n = np.zeros(v.shape, dtype=_I64)
    for b in range(63):
        n += (v >> b) > 0
    return n


def _shr(v, s):
    """``v >> s`` (floor) for shift amounts ``s >= 0`` of any size."""
    return np.where(s > 62, np.where(v < 0, -1, 0), v >> np.minimum(s, 62))


def _decode(x):
    """Sign, normalised 24-bit significand (leading one at bit 23; 0 for zero), unbiased
    exponent of that leading one, and the class flags of fp32 bit patterns ``x``."""
    x = x.astype(_I64)
    sign = (x >> 31) & 1
    field = (x >> 23) & 0xFF
    man = x & 0x7FFFFF
    nan = (field == 255) & (man != 0)
    inf = (field == 255) & (man == 0)
    zero = (field == 0) & (man == 0)
    sig = np.where(field == 0, man, man | (1 << 23))
    e = np.where(field == 0, -126, field - 127)
    up = np.where(zero, 0, 24 - _bitlen(sig))
    return sign, sig << up, e - up, nan, inf, zero


def evaluate(func, u):
    """The piecewise quadratic of function number(s) ``func`` at ``u`` (units 2**-30)."""
    row = _TABLE[func * V.SEGMENTS + (u >> V.T_BITS)]
    t = (u & ((1 << V.T_BITS) - 1)) - (1 << (V.T_BITS - 1))
    b = row[:, 1] + ((row[:, 2] * t) >> V.C2_SHIFT)
    return np.minimum(row[:, 0] + ((b * t) >> V.C1_SHIFT), V.P_MAX)


def _exp2_parts(sig, e, negative):
    """``k``, ``P2`` with ``2**y ~= P2 * 2**(k - 30)`` for ``y = +-(sig * 2**(e-23)) *
    log2(e)`` (``-`` where ``negative``): y in fixed point with 30 fraction bits, the
    magnitude truncated, a negative y as the one's complement of its magnitude."""
    mag = _shr(sig * V.LOG2E, np.maximum(V.Y_SHIFT - e, 0))
    y = np.where(negative, ~mag, mag)
    return y >> V.U_BITS, evaluate(V.FUNC["exp2"], y & ((1 << V.U_BITS) - 1))


def _pack(sign, mag, scale):
    """fp32 bits of ``(-1)**sign * mag * 2**scale`` (``mag`` a non-negative int64), rounded to
    nearest even, subnormal or infinite as it falls; zero for ``mag == 0``."""
    lead = _bitlen(mag) - 1
    biased = lead + scale + 127
    shift = np.where(biased >= 1, lead - 23, lead - 23 + 1 - biased)
    base = np.where(biased >= 1, (biased - 1) << 23, 0)
    m = mag.astype(np.uint64)
    s = np.clip(shift, 1, 63).astype(np.uint64)
    q = m >> s
    rest = m & ((np.uint64(1) << s) - np.uint64(1))
    half = np.uint64(1) << (s - np.uint64(1))
    up = (rest > half) | ((rest == half) & ((q & np.uint64(1)) == 1))
    rounded = (q + up).astype(_I64)
    rounded = np.where(shift >= 64, 0, rounded)
    rounded = np.where(shift <= 0, mag << np.clip(-shift, 0, 62), rounded)
    bits = np.minimum(base + rounded, _INF)
    bits = np.where(mag == 0, 0, bits)
    return ((sign << 31) | bits).astype(np.uint32)


def compute(op, x):
    """fp32 bits of ``op`` (a name in ``OPS``) of the fp32 bit patterns ``x``."""
    x = np.asarray(x, dtype=np.uint32).ravel()
    sign, sig, e, nan, inf, zero = _decode(x)
    neg = sign == 1
    frac = sig & 0x7FFFFF
    if op == "exp":
        k, p2 = _exp2_parts(sig, e, neg)
        out = _pack(np.zeros_like(sign), p2, k - 30)
        big = e >= V.SATURATE_E
        out = np.where(big | inf, np.where(neg, 0, _INF), out)
        out = np.where(zero, _ONE, out)
    elif op == "reciprocal":
        p = evaluate(V.FUNC["recip"], frac << 7)
        out = _pack(sign, p, -30 - e)
        out = np.where(inf, sign << 31, np.where(zero, (sign << 31) | _INF, out))
    elif op == "rsqrt":
        p = evaluate(V.FUNC["rsqrt_even"] + (e & 1), frac << 7)
        out = _pack(sign, p, -30 - (e >> 1))
        out = np.where(inf, 0, np.where(zero, (sign << 31) | _INF, out))
        out = np.where(neg & ~zero, _NAN, out)
    elif op == "log":
        hi = frac < (1 << 22)
        q = evaluate(np.where(hi, V.FUNC["log_hi"], V.FUNC["log_lo"]),
                      (frac << 8) & ((1 << V.U_BITS) - 1))
        d = np.where(hi, frac << 1, frac - (1 << 23))
        total = np.where(hi, e, e + 1) * V.LN2_54 + d * q
        out = _pack((total < 0).astype(_I64), np.abs(total), np.full_like(e, -54))
        out = np.where(inf, _INF, np.where(zero, 0xFF800000, out))
        out = np.where(neg & ~zero, _NAN, out)
    elif op in ("sigmoid", "tanh"):
        twice = 1 if op == "tanh" else 0
        k, p2 = _exp2_parts(sig, e + twice, np.ones_like(neg))
        small = p2 >> np.minimum(-k, 62)                  # e**-|x| (sigmoid), e**-2|x| (tanh)
        r = evaluate(V.FUNC["recip"], small)              # 1 / (1 + small)
        if op == "sigmoid":
            out = np.where(neg, _pack(np.zeros_like(sign), p2 * r, k - 60),
                           _pack(np.zeros_like(sign), r, np.full_like(e, -30)))
            out = np.where((e >= V.SATURATE_E) | inf, np.where(neg, 0, _ONE), out)
            out = np.where(zero, _HALF, out)
        else:
            out = _pack(sign, ((1 << V.U_BITS) - small) * r, np.full_like(e, -60))
            a2 = _shr(sig * sig, np.maximum(6 - 2 * e, 0))          # x**2, units 2**-40
            a2h = a2 >> 12
            c = ((a2 * V.THIRD) >> 32) - ((a2h * a2h * V.TWO_15) >> 36)
            tiny = _pack(sign, sig * ((1 << 36) - (c >> 4)), e - 59)
            out = np.where(e <= V.TANH_SMALL_E, tiny, out)
            out = np.where((e >= V.SATURATE_E) | inf, (sign << 31) | _ONE, out)
            out = np.where(zero, sign << 31, out)
    else:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    return np.where(nan, _NAN, out).astype(np.uint32)


def reference(op, x):
    """float64 values of ``op`` of the fp32 bit patterns ``x`` (numpy; sigmoid as
    ``1 / (1 + exp(-x))``)."""
    with np.errstate(all="ignore"):
        v = np.asarray(x, dtype=np.uint32).view(np.float32).astype(np.float64)
        return {"exp": np.exp, "reciprocal": lambda a: 1 / a,
                "rsqrt": lambda a: 1 / np.sqrt(a), "tanh": np.tanh,
                "sigmoid": lambda a: 1 / (1 + np.exp(-a)), "log": np.log}[op](v)


def ulp_error(result_bits, ref, man_bits=23):
    """The error of results in units in the last place, at the float64 reference ``ref``, of
    a format with fp32's exponent range and ``man_bits`` fraction bits (23: fp32, 7:
    bfloat16, whose values ``result_bits`` then holds as fp32 bit patterns); at most 0.5 where
    the result is ``ref`` correctly rounded, 0 where both are the same infinity or both NaN,
    inf where only one is."""
    got = np.asarray(result_bits, dtype=np.uint32).view(np.float32).astype(np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    top = (2 - 2.0 ** -man_bits) * 2.0 ** 127
    with np.errstate(all="ignore"):
        mag = np.abs(ref)
        exp = np.clip(np.floor(np.log2(np.where(mag > 0, mag, 1.0))), -126, 127)
        ulp = np.exp2(exp - man_bits)
        rounded = np.round(mag / ulp) * ulp                 # to nearest, ties to even
        rounded = np.copysign(np.where(rounded > top, np.inf, rounded), ref)
        err = np.abs(got - ref) / ulp
    same = (got == rounded) | (np.isnan(got) & np.isnan(ref))
    err = np.where(same, np.minimum(np.nan_to_num(err, nan=0.0, posinf=0.0), 0.5), err)
    return np.where(same & np.isinf(got), 0.0, np.where(np.isnan(err), np.inf, err))


def dense_sample(rng, n):
    """``n`` fp32 bit patterns of every sign and every exponent where no op saturates (|x|
    below 128, subnormals included), uniform significands, then the values next to every
    power of two of that range (``2**e`` and 1 and 2 ULPs either side, both signs)."""
    field = rng.integers(0, 134, size=n).astype(np.uint32)
    x = ((rng.integers(0, 2, size=n).astype(np.uint32) << 31) | (field << 23)
         | rng.integers(0, 1 << 23, size=n).astype(np.uint32))
    powers = np.arange(1, 134, dtype=np.uint32) << 23
    near = np.concatenate([powers + d for d in (0, 1, 2)] + [powers - 1, powers - 2])
    return np.concatenate([x, near, near | np.uint32(0x80000000)])
