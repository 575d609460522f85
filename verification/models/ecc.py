"""SECDED (72, 64) as the HBM controller stores words (docs/hbm.md, "ECC"), from its
definition: the 64 data bits take the Hamming positions 1..71 that are not powers of two, in
order; check bit ``c`` (``c`` < 7) is the parity of the data bits whose position has bit ``c``
set; check bit 7 is the parity of the 71 other bits. A codeword is the data in bits 0..63 and
the check bits in 64..71. Testbenches use it to put data into the device model directly (a
backdoor) and to read it back."""

import numpy as np

__all__ = ["encode", "decode", "check_bits"]

_POSITIONS = [p for p in range(1, 72) if p & (p - 1)]
_COVER = [sum(1 << i for i, p in enumerate(_POSITIONS) if p >> c & 1) for c in range(7)]


def _parity(x):
    return bin(x).count("1") & 1


def encode(data):
    """The 72-bit codeword of a 64-bit integer."""
    checks = sum(_parity(data & cover) << c for c, cover in enumerate(_COVER))
    word = data | checks << 64
    return word | _parity(word) << 71


def decode(word):
    """``(data, corrected, uncorrectable)`` of a 72-bit codeword."""
    data = word & ((1 << 64) - 1)
    syndrome = sum((_parity(data & cover) ^ (word >> (64 + c) & 1)) << c
                   for c, cover in enumerate(_COVER))
    overall = _parity(word)
    if syndrome == 0 and not overall:
        return data, False, False
    if overall and syndrome <= 71:
        if syndrome in _POSITIONS:
            data ^= 1 << _POSITIONS.index(syndrome)
        return data, True, False
    return data, False, True


def _parity64(x):
    """Parity of each element of a uint64 array."""
    for shift in (32, 16, 8, 4, 2, 1):
        x = x ^ (x >> np.uint64(shift))
    return x & np.uint64(1)


def check_bits(data):
    """Bits 64..71 of the codewords of a uint64 array (``encode(d) >> 64`` of each element,
    as a uint64 array): the backdoor of a large image without a Python integer per word."""
    data = np.asarray(data, dtype=np.uint64)
    checks = np.zeros_like(data)
    for c, cover in enumerate(_COVER):
        checks |= _parity64(data & np.uint64(cover)) << np.uint64(c)
    overall = _parity64(data) ^ _parity64(checks)
    return checks | overall << np.uint64(7)
