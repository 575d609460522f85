"""SECDED over 64-bit words: the HBM controller's ECC (Hamming (71,64) plus overall parity).

The controller encodes each 64-bit word of write data into a 72-bit codeword (data in bits
0..63, check bits in 64..71, as HBM2 stores them in its ECC mode) and decodes every word it
reads: a single flipped bit (data or check) is corrected, two flipped bits are detected.

Construction: the 64 data bits take the Hamming positions 1..71 that are not powers of two, in
order; check bit ``i`` (``i`` < 7) is the parity of the data bits whose position has bit ``i``
set; check bit 7 is the parity of all 71 other bits. The syndrome of a received word is the
position of a single flipped bit (0 when the flip hit the overall parity bit).
"""

from amaranth.hdl import Cat, Const, Mux, Signal

__all__ = ["DATA_POSITIONS", "encode", "decode", "syndrome_table"]

DATA_POSITIONS = [p for p in range(1, 72) if p & (p - 1)]
assert len(DATA_POSITIONS) == 64


def _parity_masks():
    """For each of the 7 Hamming check bits, the data bit indices it covers."""
    return [[i for i, p in enumerate(DATA_POSITIONS) if p >> c & 1] for c in range(7)]


def encode(data):
    """72-bit codeword (Amaranth value) of a 64-bit ``data`` value."""
    checks = [_xor(data[i] for i in idx) for idx in _parity_masks()]
    partial = Cat(data, *checks)
    return Cat(partial, partial.xor())


def syndrome_table():
    """Hamming position (1..71) to codeword bit index (data 0..63, checks 64..70)."""
    table = {p: i for i, p in enumerate(DATA_POSITIONS)}
    table.update({1 << c: 64 + c for c in range(7)})
    return table


def decode(m, word, name):
    """Decode a 72-bit ``word``; returns ``(data, corrected, uncorrectable)`` signals.

    ``corrected``: one bit was flipped and has been fixed (the data is right).
    ``uncorrectable``: two (or an even number of) bits were flipped; the data is wrong.
    """
    data = word[:64]
    checks = word[64:71]
    syn = Signal(7, name=f"{name}_syn")
    m.d.comb += syn.eq(Cat(*[_xor([*(data[i] for i in idx), checks[c]])
                             for c, idx in enumerate(_parity_masks())]))
    overall = word.xor()
    # An odd number of flips with a syndrome past position 71 cannot be one flip.
    single = Signal(name=f"{name}_single")
    double = Signal(name=f"{name}_double")
    m.d.comb += [single.eq(overall & (syn <= 71)),
                 double.eq((~overall & (syn != 0)) | (overall & (syn > 71)))]
    flip = Signal(64, name=f"{name}_flip")
    with m.Switch(syn):
        for pos, bit in syndrome_table().items():
            if bit < 64:
                with m.Case(pos):
                    m.d.comb += flip.eq(Const(1 << bit, 64))
    fixed = Signal(64, name=f"{name}_data")
    m.d.comb += fixed.eq(Mux(single, data ^ flip, data))
    return fixed, single, double


def _xor(bits):
    bits = list(bits)
    return Cat(*bits).xor()
