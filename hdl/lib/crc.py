"""Cyclic redundancy checks as XOR networks: the error detection of link layers (ICI links).

The CRC is the remainder of the message (most significant bit first) divided by the generator
polynomial, register initialised to zero and no final XOR. With a zero initial value the CRC is
linear in the message, so each CRC bit is the XOR of a fixed set of message bits, computed here
once in Python and emitted as one masked reduction XOR per bit: one cycle, any message width.
"""

from amaranth.hdl import Cat
from amaranth.lib import memory

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


def crc_value(m, message, *, name, width=CRC16_CCITT[0], poly=CRC16_CCITT[1]):
    """Amaranth value: the CRC of ``message`` (any value; its width is the message length),
    with a ROM named ``name`` added to module ``m``. Call it outside any ``If``/``Switch`` of
    ``m`` (the ROM's read addresses are constant assignments).

    Each CRC bit is the parity of the message under a constant mask. The masks sit in a small
    ROM read at constant addresses: synthesis folds it into the same XOR network, while the
    simulator sees one word-wide AND and parity per CRC bit. (Written as ``message & Const``,
    Amaranth turns the AND into a concatenation of the selected bits and zeros, which Verilator
    assembles bit group by bit group: that was three quarters of the ICI router's simulated
    work.)
    """
    bits = len(message)
    masks = [sum(1 << i for i in taps) for taps in crc_taps(bits, width, poly)]
    m.submodules[name] = rom = memory.Memory(shape=bits, depth=width, init=masks)
    out = []
    for b in range(width):
        port = rom.read_port(domain="comb")
        m.d.comb += port.addr.eq(b)
        out.append((message & port.data).xor())
    return Cat(*out)
