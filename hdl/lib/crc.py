"""Cyclic redundancy checks as XOR networks: the error detection of link layers (ICI links).

The CRC is the remainder of the message (most significant bit first) divided by the generator
polynomial, register initialised to zero and no final XOR: amaranth.lib.crc's algorithm with
``initial_crc=0``, no reflection and ``xor_output=0`` (:data:`CRC16_CCITT_ALGORITHM`), whose
software model (``Parameters.compute``) gives the taps here. With a zero initial value the CRC
is linear in the message, so each CRC bit is the XOR of a fixed set of message bits, computed
once in Python and emitted as one masked reduction XOR per bit: one cycle, any message width.

The hardware is not amaranth.lib.crc's ``Processor``, although it computes the same values
(verification/tests/test_crc.py compares both over random messages of every width the ICI
uses): ``Processor`` is a registered engine (``start``/``valid``, the CRC one cycle after its
data) where a link needs the CRC of a flit in the cycle it registers or receives it, so the
link's timing would change by a cycle each way; and its XOR network is a chain of single-bit
XORs as long as the message (Amaranth's own simulator needs a raised recursion limit to
compile it for the pod's 265-bit flits), bit selections that Verilator evaluates bit group by
bit group, the form :func:`crc_value` avoids (that was three quarters of the ICI router's
simulated work). The generated Verilog is the same as before the taps came from
amaranth.lib.crc's model (the masks are equal).
"""

from amaranth.hdl import Cat
from amaranth.lib import memory
from amaranth.lib.crc import Algorithm

__all__ = ["crc_bitwise", "crc_taps", "crc_value", "CRC16_CCITT", "CRC16_CCITT_ALGORITHM"]

CRC16_CCITT = (16, 0x1021)
"""Width and polynomial of CRC-16-CCITT: detects every error of 1, 2 or 3 bits, and every odd
number of bit errors, in messages up to 32751 bits."""
CRC16_CCITT_ALGORITHM = Algorithm(crc_width=16, polynomial=0x1021, initial_crc=0,
                                  reflect_input=False, reflect_output=False, xor_output=0)
"""The same CRC as amaranth.lib.crc names it (the catalog's ``CRC16_XMODEM``)."""


def _algorithm(width, poly):
    return Algorithm(crc_width=width, polynomial=poly, initial_crc=0, reflect_input=False,
                     reflect_output=False, xor_output=0)


def crc_bitwise(message, nbits, width, poly):
    """Reference CRC of the ``nbits``-bit integer ``message``, one bit at a time (an
    independent check of amaranth.lib.crc's model in the tests)."""
    mask = (1 << width) - 1
    crc = 0
    for i in reversed(range(nbits)):
        feedback = ((message >> i) & 1) ^ (crc >> (width - 1))
        crc = (crc << 1) & mask
        if feedback:
            crc ^= poly
    return crc


def crc_taps(nbits, width, poly):
    """For each CRC bit, the message bit positions whose XOR gives it (the CRC of each
    one-hot message, by amaranth.lib.crc's model with the message as one ``nbits`` word)."""
    model = _algorithm(width, poly)(data_width=nbits)
    columns = [model.compute([1 << i]) for i in range(nbits)]
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
