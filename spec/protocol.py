"""The codes of the chip-to-chip protocol, defined once: what the network interface puts in a
packet (docs/pod.md, "Packets"), what the ISA's ``ici.*`` instructions name (their fields
carry these same codes), and what the golden pod simulator and the testbenches read.

Packets: a head flit (the ICI header, then the endpoint header: kind, space, op, format,
tag, semaphore, bytes, address) and its payload in whole flits after it. Requests (``WRITE``,
``READ``) travel in ICI class 0 on local port 0 (the collectives' - ring on port 2),
responses (``READ_DATA``, ``ACK``) in class 1 on local port 1.
"""

from .codes import Code

__all__ = ["PacketKind", "IciOp", "IciFmt", "IciSpace", "Collective", "RING_COLLECTIVES",
           "ADDR_BITS", "TAG_BITS", "SEM_BITS", "NO_SEM", "COLLECTIVE_SEM", "LENGTH_BITS",
           "REQUEST_CLASS", "RESPONSE_CLASS", "REQUEST_PORT", "RESPONSE_PORT", "MINUS_PORT",
           "LOCAL_PORTS", "STAGING_SLOTS", "FLIT_BITS", "ELEMENT_BYTES"]


class PacketKind(Code, width=2):
    """What a packet is."""

    WRITE = 0
    READ = 1
    READ_DATA = 2
    ACK = 3


class IciOp(Code, width=2):
    """What a ``WRITE`` (an ``ici.send``) does with its bytes at the destination."""

    STORE = 0
    ADD = 1         # add to the elements there, keep a partial (bfloat16: fp32 staging)
    ADD_FINAL = 2   # add and store the format's result


class IciFmt(Code, width=2):
    """Element format of an ICI add or a collective."""

    INT32 = 0
    FP32 = 1
    BF16 = 2


ELEMENT_BYTES = {IciFmt.INT32: 4, IciFmt.FP32: 4, IciFmt.BF16: 2}


class IciSpace(Code, width=1):
    """The memory an ICI operand is in: the chip's VMEM (the default) or its HBM."""

    VMEM = 0
    HBM = 1


class Collective(Code, width=3):
    """The collective an ``ici.coll`` (or a host's descriptor) runs (docs/pod.md)."""

    REDUCE_SCATTER = 0
    ALL_GATHER = 1
    ALL_REDUCE = 2
    ALL_TO_ALL = 3
    ALL_REDUCE_2D = 4


RING_COLLECTIVES = (Collective.REDUCE_SCATTER, Collective.ALL_GATHER, Collective.ALL_REDUCE)
"""The collectives that run along one torus dimension (their descriptor names it)."""

ADDR_BITS = 32
"""Byte address of a message in the destination's HBM or VMEM."""
TAG_BITS = 5
"""The sender's message slot, carried so responses find their request."""
SEM_BITS = 5
"""Semaphore number a message increments at its destination (the TensorCore's 0..30)."""
NO_SEM = 2 ** SEM_BITS - 1
"""Semaphore number meaning: none."""
COLLECTIVE_SEM = NO_SEM - 1
"""Semaphore of the collective engine's messages: their completions go to the engine."""
LENGTH_BITS = 24
"""Width of a collective's length in elements."""
REQUEST_CLASS = 0
"""ICI traffic class of requests."""
RESPONSE_CLASS = 1
"""ICI traffic class of responses."""
REQUEST_PORT = 0
"""Local port of a pod router that injects and ejects requests (ICI class 0): the messages
of the host and of the collectives' + ring."""
RESPONSE_PORT = 1
"""Local port of a pod router that injects and ejects responses (ICI class 1)."""
MINUS_PORT = 2
"""Local port of a pod router that injects and ejects the requests of the collectives' - ring,
so that a chip sends and takes a flit per cycle on each ring direction."""
LOCAL_PORTS = 3
STAGING_SLOTS = 4
"""Slots of the bfloat16 reductions' staging area: one per ring direction and step parity."""
FLIT_BITS = (64, 128, 256, 512, 1024)
"""Flit widths the network interface takes: a power-of-two number of bytes, so a packet's
beat count and a beat's byte strobe are shifts and masks."""
