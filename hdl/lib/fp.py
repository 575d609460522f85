"""Floating-point arithmetic: the MXU's products and fp32 sums, the VPU's fp32 lanes.

Everything here is combinational and IEEE 754 binary32 with round-to-nearest-even:

* ``multiply_fp32(m, fmt, a, b)``: the product of two values of a small format (bfloat16, fp8),
  rounded to fp32. For the fp8 formats every product is exact in fp32; for bfloat16 only
  products that overflow fp32 (to infinity) or fall below its normal range (rounded to a
  subnormal or to zero) are inexact, and they are rounded exactly as IEEE (and numpy) do.
* ``add_fp32(m, x, y)``: the fp32 sum, rounded to nearest even.
* ``mul_fp32(m, x, y)``: the fp32 product of two fp32 values, rounded to nearest even
  (:class:`Fp32Multiplier` is the same unit split around its 24 x 24 significand product, for
  a caller that computes that product on an integer multiplier it shares).
* ``minmax_fp32(m, x, y)``: the smaller and the larger of two fp32 values, ``-0 < +0``.
* ``fp32_to_bf16(x)``: round to nearest even into bfloat16.

Policy, mirrored by the golden models: subnormal inputs and results are supported (no flush to
zero); an infinity has its sign; ``inf - inf``, ``0 * inf`` and any NaN input give the one
canonical NaN (``0x7FC00000`` in fp32, ``0x7FC0`` in bfloat16); an exact zero sum is ``+0``
unless both addends are ``-0``; a product's sign is the XOR of its operands' signs; ``min`` and
``max`` are NaN when either operand is.
"""

from amaranth.hdl import Cat, Const, Mux, Signal, signed

from spec.formats import BF16_NAN, FP32, FP32_INF, FP32_NAN

__all__ = ["multiply_fp32", "add_fp32", "mul_fp32", "Fp32Multiplier", "minmax_fp32",
           "fp32_is_nan", "fp32_to_bf16"]


def _sig(m, name, shape, value):
    s = Signal(shape, name=name)
    m.d.comb += s.eq(value)
    return s


def _decode(m, fmt, x, name):
    """Sign, effective exponent field (subnormals as 1), significand with its hidden bit, and
    the special-value flags of ``x``."""
    man = x[: fmt.man_bits]
    exp = x[fmt.man_bits: fmt.man_bits + fmt.exp_bits]
    sign = x[fmt.width - 1]
    exp_ones = exp == (1 << fmt.exp_bits) - 1
    if fmt.ieee:
        is_nan = exp_ones & (man != 0)
        is_inf = exp_ones & (man == 0)
    else:
        is_nan = exp_ones & (man == (1 << fmt.man_bits) - 1)
        is_inf = Const(0)
    eff_exp = _sig(m, f"{name}_exp", fmt.exp_bits, Mux(exp == 0, 1, exp))
    sig = _sig(m, f"{name}_sig", fmt.man_bits + 1, Cat(man, exp != 0))
    return sign, eff_exp, sig, is_nan, is_inf, (exp == 0) & (man == 0)


def _clz(value, width):
    """Leading zeros of ``value[:width]`` (``width`` when it is zero)."""
    count = Const(width, range(width + 1))
    for i in range(width):
        count = Mux(value[i], width - 1 - i, count)
    return count


def _shift_right_sticky(value, amount, width, max_amount):
    """``value >> amount`` with every bit shifted out OR-ed into bit 0."""
    bits = max_amount.bit_length()
    amount = Mux(amount > max_amount, max_amount, amount).as_unsigned()[:bits]
    shifted = (value >> amount)[:width]
    lost = (shifted << amount)[:width] != value
    return shifted | lost


def _normalize_round(m, name, sign, exp, sig, exp_lo, exp_hi, carry):
    """Pack ``sig`` (28 bits: carry at 27, leading bit at 26, guard/round/sticky at 2..0) with
    biased exponent ``exp`` (of bit 26, a signed value in ``exp_lo..exp_hi``) into fp32, rounding
    to nearest even. Handles a carry out of bit 26, leading zeros, subnormal results and
    overflow to infinity; a zero ``sig`` is not handled here."""
    if carry:
        exp_lo, exp_hi = exp_lo, exp_hi + 1
        over = sig[27]
        exp = Mux(over, exp + 1, exp)
        sig = Mux(over, Cat(sig[1] | sig[0], sig[2:28]), sig[:27])
    sig = _sig(m, f"{name}_s1", 27, sig[:27])
    exp = _sig(m, f"{name}_e1", signed(max(exp_hi.bit_length(), (-exp_lo).bit_length()) + 2),
               exp)
    lz = _sig(m, f"{name}_lz", range(28), _clz(sig, 27))

    # Normal: shift the leading one to bit 26. Not enough exponent for that: shift only down
    # to exponent 1 (subnormal). Exponent below 1: shift right into the subnormal range.
    left = Mux(exp - lz >= 1, lz, Mux(exp >= 1, exp - 1, 0)).as_unsigned()[:5]
    shifted = (sig << left)[:27]
    exp_after = Mux(exp >= 1, exp - left, 1)
    if exp_lo < 1:
        shifted = Mux(exp >= 1, shifted, _shift_right_sticky(sig, 1 - exp, 27, 27))
    norm = _sig(m, f"{name}_norm", 27, shifted)
    exp_field = Mux(norm[26], exp_after, 0)[:8]

    guard, round_, sticky, lsb = norm[2], norm[1], norm[0], norm[3]
    up = guard & (round_ | sticky | lsb)
    packed = _sig(m, f"{name}_packed", 31, Cat(norm[3:26], exp_field) + up)
    if exp_hi >= 255:
        packed = Mux(exp_after >= 255, FP32_INF, packed)
    return Cat(packed, sign)


def multiply_fp32(m, fmt, a, b, name="mul"):
    """fp32 bits of ``a * b`` for ``a``, ``b`` in ``fmt``, rounded to nearest even."""
    sa, ea, ma, nan_a, inf_a, zero_a = _decode(m, fmt, a, f"{name}_a")
    sb, eb, mb, nan_b, inf_b, zero_b = _decode(m, fmt, b, f"{name}_b")
    sign = sa ^ sb
    product = _sig(m, f"{name}_p", 2 * (fmt.man_bits + 1), ma * mb)
    # The product's top bit (2*man + 1) goes to bit 26; its biased fp32 exponent there is
    # ea + eb - 2*bias + 1 + 127.
    offset = 1 + 127 - 2 * fmt.bias
    exp = ea + eb + offset
    exp_lo = 2 + offset
    exp_hi = 2 * fmt.max_exp_field + offset
    sig = Cat(Const(0, 25 - 2 * fmt.man_bits), product, Const(0, 1))
    rounded = _normalize_round(m, name, sign, exp, sig, exp_lo, exp_hi, carry=False)
    nan = nan_a | nan_b | (inf_a & zero_b) | (inf_b & zero_a)
    return Mux(nan, FP32_NAN,
               Mux(inf_a | inf_b, Cat(Const(FP32_INF, 31), sign),
                   Mux(zero_a | zero_b, Cat(Const(0, 31), sign), rounded)))


def add_fp32(m, x, y, name="add"):
    """fp32 bits of ``x + y``, rounded to nearest even."""
    swap = y[:31] > x[:31]
    big = _sig(m, f"{name}_big", 32, Mux(swap, y, x))
    small = _sig(m, f"{name}_small", 32, Mux(swap, x, y))
    sb, eb, mb, nan_b, inf_b, _ = _decode(m, FP32, big, f"{name}_b")
    ss, es, ms, nan_s, inf_s, _ = _decode(m, FP32, small, f"{name}_s")
    subtract = sb ^ ss

    aligned = _sig(m, f"{name}_aligned", 27,
                   _shift_right_sticky(Cat(Const(0, 3), ms), eb - es, 27, 27))
    wide = Cat(Const(0, 3), mb)
    total = _sig(m, f"{name}_sum", 28, Mux(subtract, wide - aligned, wide + aligned))
    rounded = _normalize_round(m, name, sb, eb, total, 1, 254, carry=True)

    nan = nan_b | nan_s | (inf_b & inf_s & subtract)
    return Mux(nan, FP32_NAN,
               Mux(inf_b, big,
                   Mux(total == 0, Cat(Const(0, 31), sb & ss), rounded)))


class Fp32Multiplier:
    """fp32 bits of ``x * y`` for fp32 ``x``, ``y``, rounded to nearest even, built in two
    halves around the product of the significands.

    ``sig_x`` and ``sig_y`` are the operands' 24-bit significands, normalised (a subnormal's
    leading one shifted up to bit 23, its exponent lowered to match), so that their product
    has its leading one at bit 46 or 47 whatever the operands; ``result(product)`` rounds the
    48-bit ``sig_x * sig_y`` into the fp32 result. A caller that shares one integer multiplier
    between several kinds of product (the VPU's lanes) feeds the significands to it;
    :func:`mul_fp32` multiplies them here.
    """

    def __init__(self, m, x, y, name="fmul"):
        sx, ex, mx, nan_x, inf_x, zero_x = _decode(m, FP32, x, f"{name}_x")
        sy, ey, my, nan_y, inf_y, zero_y = _decode(m, FP32, y, f"{name}_y")
        lz_x = _sig(m, f"{name}_x_lz", range(25), _clz(mx, 24))
        lz_y = _sig(m, f"{name}_y_lz", range(25), _clz(my, 24))
        self.sig_x = _sig(m, f"{name}_x_norm", 24, (mx << lz_x)[:24])
        self.sig_y = _sig(m, f"{name}_y_norm", 24, (my << lz_y)[:24])
        self._m, self._name = m, name
        self._sign = sx ^ sy
        # Biased exponent of product bit 46: (ex - lz_x) + (ey - lz_y) - 127.
        self._exp = ex - lz_x + ey - lz_y - 127
        self._nan = nan_x | nan_y | (inf_x & zero_y) | (inf_y & zero_x)
        self._inf = inf_x | inf_y
        self._zero = zero_x | zero_y

    def result(self, product):
        """The rounded fp32 product, given ``product = sig_x * sig_y`` (its low 48 bits)."""
        # Bits 47..21 of the product become the rounder's 27 bits (carry at 47, the leading one
        # at 46, guard and round at 22 and 21); everything below is the sticky bit.
        sig = Cat(product[:21] != 0, product[21:48])
        rounded = _normalize_round(self._m, self._name, self._sign, self._exp, sig,
                                   2 * (1 - 23) - 127, 2 * 254 - 127, carry=True)
        sign = self._sign
        return Mux(self._nan, FP32_NAN,
                   Mux(self._inf, Cat(Const(FP32_INF, 31), sign),
                       Mux(self._zero, Cat(Const(0, 31), sign), rounded)))


def mul_fp32(m, x, y, name="fmul"):
    """fp32 bits of ``x * y`` for fp32 ``x``, ``y``, rounded to nearest even."""
    unit = Fp32Multiplier(m, x, y, name)
    return unit.result(unit.sig_x * unit.sig_y)


def fp32_is_nan(x):
    """Whether the fp32 bits ``x`` are a NaN (any payload, either sign)."""
    return (x[23:31] == 0xFF) & (x[:23] != 0)


def minmax_fp32(m, x, y, name="minmax"):
    """``(min, max)`` of fp32 ``x``, ``y``: the canonical NaN if either is a NaN, else the
    smaller and the larger value with ``-0 < +0``. One comparator serves both: flipping every
    bit of a negative value and the sign bit of a positive one maps fp32 order (``-0`` below
    ``+0``) onto unsigned integer order."""
    def key(v):
        return Mux(v[31], ~v, v | 0x80000000)

    less = _sig(m, f"{name}_less", 1, key(x) < key(y))
    nan = fp32_is_nan(x) | fp32_is_nan(y)
    return Mux(nan, FP32_NAN, Mux(less, x, y)), Mux(nan, FP32_NAN, Mux(less, y, x))


def fp32_to_bf16(x):
    """bfloat16 bits of fp32 ``x``, rounded to nearest even; NaN becomes the canonical NaN."""
    rounded = (x + 0x7FFF + x[16])[16:32]
    return Mux(fp32_is_nan(x), BF16_NAN, rounded)
