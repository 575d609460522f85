"""Cyclic redundancy checks as XOR networks: the error detection of link layers (ICI links).

The CRC is the remainder of the message (most significant bit first) divided by the generator
polynomial, register initialised to zero and no final XOR. With a zero initial value the CRC is
linear in the message, so each CRC bit is the XOR of a fixed set of message bits, computed here
once in Python and emitted as one masked reduction XOR per bit: one cycle, any message width.
"""

from amaranth.hdl import Cat, Const

__all__ = ["crc_bitwise", "crc_taps", "crc_value", "CRC16_CCITT"]

CRC16_CCITT = (16, 0x1021)
"""Width and polynomial of CRC-16-CCITT: detects every error of 1, 2 or 3 bits, and every odd
number of bit errors, in messages up to 32751 bits."""


def crc_bitwise(message, nbits, width, poly):
    """Reference CRC of the ``nbits``-bit integer ``message``, one bit at a time."""
    mask = (1 << width) - 1
    crc = 0
    for i in reversed(range(nbits)):
        feedback = ((message >> i) & 1) ^ (crc >> (width - 1))
        crc = (crc << 1) & mask
        if feedback:
            crc ^= poly
    return crc


def crc_taps(nbits, width, poly):
    """For each CRC bit, the message bit positions whose XOR gives it."""
    columns = [crc_bitwise(1 << i, nbits, width, poly) for i in range(nbits)]
    return [[i for i in range(nbits) if (columns[i] >> b) & 1] for b in range(width)]


def crc_value(message, width=CRC16_CCITT[0], poly=CRC16_CCITT[1]):
    """Amaranth value: the CRC of ``message`` (any value; its width is the message length).

    Each CRC bit is the reduction XOR of the message under a constant mask: one compact
    expression per bit in the Verilog, rather than a tree of two-input gates.
    """
    bits = len(message)
    out = []
    for taps in crc_taps(bits, width, poly):
        mask = sum(1 << i for i in taps)
        out.append((message & Const(mask, bits)).xor())
    return Cat(*out)
