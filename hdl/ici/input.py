"""The input side of an ICI router: routing of head flits, the per-port VC buffers
(:class:`InputUnit`) and the injection port that checks and stamps packets from the local
endpoint (:class:`InjectionPort`).

Routing (a function of the head only, so every packet of a flow takes the same path):
dimension order, and in a wrapped dimension the shorter direction, a tie (distance k/2) going +
from even and - from odd coordinates. Output VC = ``tclass * vcs + lane`` in a mesh dimension
and ``tclass * vcs + dateline_class * vcs/2 + lane`` in a wrapped one, where the dateline class
is 1 from the wraparound hop of the dimension on (the hop k-1 -> 0 going +, 0 -> k-1 going -)
and 0 before it and in every new dimension, and ``lane`` is a hash of source and destination.
Because the output VC is a function of the packet, packets of one (source, destination, class)
always queue in the same buffers and are delivered in order.
"""

from functools import reduce
from operator import xor

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .packet import coord_layout, flit_layout, header_layout

__all__ = ["InputUnit", "InjectionPort", "meta_layout", "route", "lane"]


def meta_layout(cfg):
    """What the allocator sees of a buffered flit: its marks and, for a head, its route."""
    return data.StructLayout({"head": 1, "tail": 1, "op": range(cfg.ports),
                              "ovc": range(cfg.total_vcs)})


def lane(cfg, hdr):
    """Lane of a flow within its VC group: an XOR fold of source and destination."""
    bits = Cat(*[hdr[f"dst{d}"] for d in range(cfg.ndims)], hdr.dst_port,
               *[hdr[f"src{d}"] for d in range(cfg.ndims)], hdr.src_port)
    return reduce(xor, [bits[i:i + 3] for i in range(0, len(bits), 3)])


def route(m, cfg, coord, hdr, in_port, in_vc):
    """Output port and output VC (signals) of the head ``hdr`` arriving on input ``in_port``
    (a constant) in VC ``in_vc``, at the router of coordinates ``coord``."""
    op = Signal(range(cfg.ports), name="route_op")
    ovc = Signal(range(cfg.total_vcs), name="route_ovc")
    lane_ = Signal(3, name="route_lane")
    m.d.comb += lane_.eq(lane(cfg, hdr))
    base = hdr.tclass * cfg.vcs
    half = cfg.vcs // 2
    in_class = Signal(name="route_in_class")
    if half:
        m.d.comb += in_class.eq((in_vc % cfg.vcs) >= half)
    for d, (k, wrap) in enumerate(zip(cfg.dims, cfg.wrap, strict=True)):
        cur, dst = coord[f"c{d}"], hdr[f"dst{d}"]
        cond = m.If if d == 0 else m.Elif
        with cond(dst != cur):
            plus = Signal(name=f"route_plus{d}")
            if wrap:
                delta = Signal(range(k), name=f"route_delta{d}")
                m.d.comb += delta.eq((dst + k - cur) % k)
                m.d.comb += plus.eq((2 * delta < k) | ((2 * delta == k) & ~cur[0]))
                wrap_hop = Signal(name=f"route_wraphop{d}")
                m.d.comb += wrap_hop.eq(plus & (cur == k - 1) | ~plus & (cur == 0))
                dateline = (wrap_hop | ((in_port == 2 * d + ~plus) & in_class))
                m.d.comb += ovc.eq(base + dateline * half + lane_ % half)
            else:
                m.d.comb += [plus.eq(dst > cur), ovc.eq(base + lane_ % cfg.vcs)]
            m.d.comb += op.eq(2 * d + ~plus)
    with m.Else():
        m.d.comb += [op.eq(cfg.net_ports + hdr.dst_port), ovc.eq(0)]
    return op, ovc


class InputUnit(wiring.Component):
    """The buffers of one input port: ``total_vcs`` FIFOs of ``buffer_depth`` flits in one
    memory, with the head/tail marks and the route of every flit (computed as a head is
    written) kept in registers, so that every VC's front is visible to the allocator.

    A flit written in one cycle is at the front of its VC (if the VC was empty) in the next;
    a pop frees its slot in the next cycle. The writer must not write a full VC: a link's
    sender holds a credit for the slot, the injection port checks ``full``.

    Parameters
    ----------
    cfg : ICIConfig
    port : int
        This input's port number (a network port's number decides the dateline class).

    Members
    -------
    coord : In(coord_layout)
        The router's coordinates.
    w : In(stream of flit_layout, always ready)
        Flits to buffer, each into the VC its ``vc`` names.
    full, nonempty : Out(total_vcs)
        Per VC.
    front : Out(ArrayLayout(meta_layout, total_vcs))
        Per VC, the marks and route of the flit at its front (meaningful when nonempty).
    pop : In(1), pop_vc : In(range(total_vcs))
        Remove the front flit of ``pop_vc``.
    data : Out(flit_bits)
        The front flit of ``pop_vc`` (combinational).
    """

    def __init__(self, cfg, port):
        self._cfg = cfg
        self._port = port
        V = cfg.total_vcs
        super().__init__({
            "coord": In(coord_layout(cfg)),
            "w": In(stream.Signature(flit_layout(cfg), always_ready=True)),
            "full": Out(V),
            "nonempty": Out(V),
            "front": Out(data.ArrayLayout(meta_layout(cfg), V)),
            "pop": In(1),
            "pop_vc": In(range(V)),
            "data": Out(cfg.flit_bits),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        V, B = cfg.total_vcs, cfg.buffer_depth
        ab = (B - 1).bit_length()
        w = self.w.payload
        hdr = data.View(header_layout(cfg), w.data[: cfg.header_bits])
        op, ovc = route(m, cfg, self.coord, hdr, self._port, w.vc)

        m.submodules.buf = buf = memory.Memory(shape=cfg.flit_bits, depth=max(2, V * B),
                                               init=[])
        wp = buf.write_port()
        rp = buf.read_port(domain="comb")
        meta_l = meta_layout(cfg)
        wptr = [Signal(ab + 1, name=f"wptr{v}") for v in range(V)]
        rptr = [Signal(ab + 1, name=f"rptr{v}") for v in range(V)]
        meta = [Array(Signal(meta_l, name=f"meta{v}_{i}") for i in range(B)) for v in range(V)]
        for v in range(V):
            m.d.comb += [
                self.front[v].eq(meta[v][rptr[v][:ab]]),
                self.nonempty[v].eq(wptr[v] != rptr[v]),
                self.full[v].eq((wptr[v] - rptr[v])[: ab + 1] == B),
            ]
        m.d.comb += [wp.en.eq(self.w.valid), wp.data.eq(w.data),
                     wp.addr.eq(Cat(Array(wptr)[w.vc][:ab], w.vc))]
        meta_in = Signal(meta_l)
        m.d.comb += [meta_in.head.eq(w.head), meta_in.tail.eq(w.tail),
                     meta_in.op.eq(op), meta_in.ovc.eq(ovc)]
        for v in range(V):
            with m.If(self.w.valid & (w.vc == v)):
                m.d.sync += [meta[v][wptr[v][:ab]].eq(meta_in), wptr[v].eq(wptr[v] + 1)]
        m.d.comb += [rp.addr.eq(Cat(Array(rptr)[self.pop_vc][:ab], self.pop_vc)),
                     self.data.eq(rp.data)]
        for v in range(V):
            with m.If(self.pop & (self.pop_vc == v)):
                m.d.sync += rptr[v].eq(rptr[v] + 1)
        return m


class InjectionPort(wiring.Component):
    """Local port ``port`` of a router: packets from the endpoint into an input unit.

    The head's ``length`` delimits packets. A head is checked (destination inside the pod,
    destination port, class, length 1..max_packet); a bad one is dropped with its packet (only
    the head when the length is bad) and ``drop`` pulses. A good head has its source stamped
    (this router's coordinates and ``port``) and its hop count zeroed, and goes with its body
    into the VC ``tclass * vcs + lane mod vcs``. A flit waits (``i.ready`` low) while its VC is
    full; it is written in the cycle it is taken.

    Parameters
    ----------
    cfg : ICIConfig
    port : int
        The local port number.

    Members
    -------
    coord : In(coord_layout)
    i : In(stream of flit_bits)
        From the endpoint.
    o : Out(stream of flit_layout, always ready)
        Into the input unit's ``w``.
    full : In(total_vcs)
        The input unit's ``full``.
    drop : Out(1)
        Event: a packet is dropped (in the cycle its head is taken).
    """

    def __init__(self, cfg, port):
        self._cfg = cfg
        self._port = port
        super().__init__({
            "coord": In(coord_layout(cfg)),
            "i": In(stream.Signature(cfg.flit_bits)),
            "o": Out(stream.Signature(flit_layout(cfg), always_ready=True)),
            "full": In(cfg.total_vcs),
            "drop": Out(1),
        })

    def _check(self, m, hdr):
        """``(ok, length_ok)`` of the head ``hdr``."""
        cfg = self._cfg
        in_pod = Const(1)
        for d, k in enumerate(cfg.dims):
            in_pod = in_pod & (hdr[f"dst{d}"] < k)
        length_ok = (hdr.length >= 1) & (hdr.length <= cfg.max_packet)
        ok = in_pod & (hdr.dst_port < cfg.local_ports) & (hdr.tclass < cfg.classes) & length_ok
        return ok, length_ok

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        s, o = self.i, self.o
        hl = header_layout(cfg)
        hdr = data.View(hl, s.payload[: cfg.header_bits])
        remaining = Signal(cfg.length_bits)
        dropping = Signal()
        cur_vc = Signal(range(cfg.total_vcs))
        ok, length_ok = self._check(m, hdr)

        stamped = Signal(hl)
        m.d.comb += stamped.eq(hdr)
        for d in range(cfg.ndims):
            m.d.comb += stamped[f"src{d}"].eq(self.coord[f"c{d}"])
        m.d.comb += [stamped.src_port.eq(self._port), stamped.hops.eq(0)]
        head_vc = Signal(range(cfg.total_vcs))
        m.d.comb += head_vc.eq(stamped.tclass * cfg.vcs + lane(cfg, stamped) % cfg.vcs)

        with m.If(remaining == 0):
            full = self.full.bit_select(head_vc, 1)
            m.d.comb += [
                s.ready.eq(~ok | ~full),
                o.valid.eq(s.valid & ok & ~full),
                o.payload.vc.eq(head_vc),
                o.payload.data.eq(Cat(stamped, s.payload[cfg.header_bits:])),
                o.payload.head.eq(1),
                o.payload.tail.eq(hdr.length == 1),
                self.drop.eq(s.valid & ~ok),
            ]
            with m.If(s.valid & s.ready):
                m.d.sync += [remaining.eq(Mux(length_ok, hdr.length - 1, 0)),
                             dropping.eq(~ok), cur_vc.eq(head_vc)]
        with m.Else():
            full = self.full.bit_select(cur_vc, 1)
            m.d.comb += [
                s.ready.eq(dropping | ~full),
                o.valid.eq(s.valid & ~dropping & ~full),
                o.payload.vc.eq(cur_vc),
                o.payload.data.eq(s.payload),
                o.payload.tail.eq(remaining == 1),
            ]
            with m.If(s.valid & s.ready):
                m.d.sync += remaining.eq(remaining - 1)
        return m
