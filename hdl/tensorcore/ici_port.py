"""The TensorCore's ICI queue as its engine sees it (a TensorCore built with ``ici``, a pod
chip's): the command of an ``ici.send``, ``ici.read`` or ``ici.coll`` and the VMEM ports the
chip's ICI endpoint uses. The engine itself is the pod chip's (hdl/pod/tensor_node.py):
the TensorCore only checks an instruction's local operands, queues it and hands it out.
"""

from amaranth.lib import data, enum

from spec import protocol

from ..lib.codes import hw

__all__ = ["IciKind", "ici_command_layout", "ICI_READ_PORTS", "ICI_WRITE_PORTS"]

Collective, IciFmt = hw(protocol.Collective), hw(protocol.IciFmt)
IciOp, IciSpace = hw(protocol.IciOp), hw(protocol.IciSpace)

ICI_READ_PORTS = 4
"""VMEM read ports of the ICI endpoint: its + ring sends (shared with the host and the
messages), its - ring sends, its + ring adds (shared with the responses), its - ring adds."""
ICI_WRITE_PORTS = 2
"""VMEM write ports of the ICI endpoint: its + ring arrivals (shared with the host and the
read responses), its - ring arrivals."""


class IciKind(enum.Enum, shape=2):
    SEND = 0
    READ = 1
    COLL = 2


def ici_command_layout(cfg):
    """One ICI instruction, its local operands checked: ``local`` (byte address in memory
    ``lspace``: what a send reads, where a read lands, a collective's buffer or all-to-all
    table), ``remote`` (the other chip's byte address in memory ``rspace``), ``bytes`` (a
    send's or read's; a collective's ``length`` in elements), ``chip`` (the other chip),
    ``op`` / ``fmt`` / ``sem`` of a send (``sem``: the destination's semaphore) or of a read
    (``sem`` here), ``coll`` / ``dim`` / ``fmt`` of a collective; ``pc``, for an error the
    engine finds."""
    return data.StructLayout({
        "kind": IciKind, "local": 32, "remote": 32, "bytes": 32, "chip": 16,
        "op": IciOp, "fmt": IciFmt, "sem": 5, "coll": Collective, "dim": 2,
        "lspace": IciSpace, "rspace": IciSpace, "pc": 16,
    })
