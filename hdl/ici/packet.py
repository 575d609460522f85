"""Formats of the ICI: header of a head flit, flit and reverse messages on a link, the
ejection beat, and the link signature that joins two routers.

A packet is a head flit followed by ``length - 1`` body flits. The head's low bits hold the
header (fields below, least significant first); the rest of every flit is payload. On a link a
flit travels with its head/tail marks, its virtual channel, a link-layer sequence number and a
CRC-16 over all of those; the reverse direction carries, every cycle, the receiver's cumulative
acknowledgement, a retransmission request and cumulative credit counts, under its own CRC.
"""

from amaranth.hdl import Cat
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ..lib.crc import CRC16_CCITT, crc_value

__all__ = ["header_layout", "coord_layout", "node_number", "node_coordinates", "endpoint_number",
           "flit_layout", "wire_layout", "reverse_layout", "eject_layout", "link_signature",
           "wire_crc", "reverse_crc", "vc_bits", "CRC_BITS"]

CRC_BITS = CRC16_CCITT[0]


def header_layout(cfg):
    return data.StructLayout(dict(cfg.header_fields))


def coord_layout(cfg):
    return data.StructLayout({f"c{d}": b for d, b in enumerate(cfg.coord_bits)})


def node_number(cfg, coords):
    """The node number of coordinate values ``coords`` (one per dimension), in gateware: the
    numbering of spec/topology.py, dimension 0 the fastest."""
    n = 0
    for d in reversed(range(cfg.ndims)):
        n = n * cfg.dims[d] + coords[d]
    return n


def node_coordinates(cfg, node):
    """The coordinate values of node number ``node`` (the inverse of :func:`node_number`)."""
    out, stride = [], 1
    for k in cfg.dims:
        out.append((node // stride) % k)
        stride *= k
    return out


def endpoint_number(cfg, coords, port):
    """``node * local_ports + port``: the endpoint number of local port ``port`` of the node
    at ``coords``."""
    return node_number(cfg, coords) * cfg.local_ports + port


def vc_bits(cfg):
    """Width of a virtual channel number on a link."""
    return max(1, (cfg.total_vcs - 1).bit_length())


def flit_layout(cfg):
    """A flit inside a router (switch to link, link to input buffer): its data, head/tail
    marks and virtual channel."""
    return data.StructLayout({"data": cfg.flit_bits, "head": 1, "tail": 1, "vc": vc_bits(cfg)})


def wire_layout(cfg):
    """A flit on a link, as the sender drives it. ``crc`` covers every other field, ``valid``
    included: the sender's register keeps its last flit while idle, and a flipped ``valid``
    must not turn that stale copy into a frame the receiver would take."""
    return data.StructLayout({
        "valid": 1,
        "data": cfg.flit_bits,
        "head": 1,
        "tail": 1,
        "vc": vc_bits(cfg),
        "seq": cfg.seq_bits,
        "crc": CRC_BITS,
    })


def reverse_layout(cfg):
    """The receiver's status, sent back every cycle (``crc`` covers every other field)."""
    return data.StructLayout({
        "ack": cfg.seq_bits,
        "nak": 1,
        "credits": data.ArrayLayout(cfg.credit_bits, cfg.total_vcs),
        "crc": CRC_BITS,
    })


def eject_layout(cfg):
    return data.StructLayout({"data": cfg.flit_bits, "last": 1})


def link_signature(cfg):
    """One direction of a link, seen from the sending router's output port."""
    return wiring.Signature({"flit": Out(wire_layout(cfg)), "rev": In(reverse_layout(cfg))})


def wire_crc(m, wire, *, name):
    """CRC of a flit on a link (every field but ``crc``), its ROM named ``name`` in ``m``."""
    return crc_value(m, Cat(wire.valid, wire.data, wire.head, wire.tail, wire.vc, wire.seq),
                     name=name)


def reverse_crc(m, rev, *, name):
    """CRC of a reverse message (every field but ``crc``), its ROM named ``name`` in ``m``."""
    return crc_value(m, Cat(rev.ack, rev.nak, rev.credits), name=name)
