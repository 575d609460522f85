"""The input side of an ICI router: routing of head flits (:func:`route`), the per-port VC
buffers (:class:`InputUnit`) and the injection port that checks and stamps packets from the
local endpoint (:class:`InjectionPort`).

Routing (a function of the head and of where it is, so every packet of a flow takes the same
path in the same VCs, and a flow's packets stay in order): dimension order, and in a wrapped
dimension the shorter direction, a tie (distance k/2) going + from even and - from odd
coordinates; in a mesh dimension straight towards the destination; after the last dimension,
the destination's local port.

Output VC ``tclass * vcs + class * vcs/2 + lane`` in a wrapped dimension, ``tclass * vcs +
lane`` in a mesh dimension:

* dateline ``class``: 1 on the wraparound hop of the dimension (k-1 -> 0 going +, 0 -> k-1
  going -) and on every hop after it in that dimension (the packet continues on the port it
  arrived on, in a class-1 VC). A packet entering the dimension (from injection or a turn)
  whose route there does not wrap at all takes the class of the flow's hash bit and keeps it
  through the dimension; one whose route wraps takes class 0 until the wraparound. Class-0
  channels never include a wraparound link and no route goes from class 1 back to class 0
  within a dimension, so neither class closes a cycle around a ring, and traffic that never
  wraps (most of it) spreads over both classes.
* ``lane`` (one of ``vcs/2``, or ``vcs`` in a mesh): by lookahead, what the packet does at
  the next router: 0 if it goes on straight there, else a lane chosen by the port it turns
  to or ejects at. A VC so holds packets that leave the next router the same way, and a
  packet blocked there blocks only packets bound the same way.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .packet import coord_layout, flit_layout, header_layout

__all__ = ["InputUnit", "InjectionPort", "meta_layout", "route", "output_port", "flow_bit",
           "turn_lanes"]


def meta_layout(cfg):
    """What the allocator sees of a buffered flit: its marks and its packet's route (output
    port here and VC at the next router)."""
    return data.StructLayout({"head": 1, "tail": 1, "op": range(cfg.ports),
                              "ovc": range(cfg.total_vcs)})


def flow_bit(cfg, hdr):
    """The flow's hash bit: parity of its source and destination (coordinates and ports)."""
    return Cat(*[hdr[f"dst{d}"] for d in range(cfg.ndims)], hdr.dst_port,
               *[hdr[f"src{d}"] for d in range(cfg.ndims)], hdr.src_port).xor()


def turn_lanes(cfg, count):
    """Lane of a packet that turns to (or ejects at) port ``q`` at the next router, for every
    ``q``, when ``count`` lanes are available: lane 0 is for packets going straight on."""
    if count == 1:
        return [0] * cfg.ports
    return [1 + q % (count - 1) for q in range(cfg.ports)]


def _steps(m, cfg, coord, hdr, name):
    """Per dimension: (the destination differs here, direction +, this hop ends the
    dimension, route in the dimension never wraps, this hop is the wraparound)."""
    steps = []
    for d, (k, wrap) in enumerate(zip(cfg.dims, cfg.wrap, strict=True)):
        cur, dst = coord[f"c{d}"], hdr[f"dst{d}"]
        plus = Signal(name=f"{name}_plus{d}")
        last = Signal(name=f"{name}_last{d}")
        if wrap:
            delta = Signal(range(k), name=f"{name}_delta{d}")
            m.d.comb += [delta.eq(Mux(dst >= cur, dst - cur, dst + k - cur)),
                         plus.eq((2 * delta < k) | ((2 * delta == k) & ~cur[0]))]
            nxt = Mux(plus, Mux(cur == k - 1, 0, cur + 1), Mux(cur == 0, k - 1, cur - 1))
            free = Mux(plus, dst > cur, dst < cur)
            wrap_hop = Mux(plus, cur == k - 1, cur == 0)
        else:
            m.d.comb += plus.eq(dst > cur)
            nxt = Mux(plus, cur + 1, cur - 1)
            free = wrap_hop = Const(0)
        m.d.comb += last.eq(dst == nxt)
        steps.append((dst != cur, plus, last, free, wrap_hop))
    return steps


def _after(cfg, hdr, steps):
    """Per dimension d: the output port at the next router when dimension d is done there
    (the next dimension to correct, or the destination's local port)."""
    after = [None] * cfg.ndims
    nxt = cfg.net_ports + hdr.dst_port
    for d in reversed(range(cfg.ndims)):
        after[d] = nxt
        differs, plus = steps[d][:2]
        nxt = Mux(differs, 2 * d + ~plus, nxt)
    return after, nxt


def output_port(m, cfg, coord, hdr, *, name="route"):
    """The output port (a signal) of the head ``hdr`` at the router at ``coord``."""
    steps = _steps(m, cfg, coord, hdr, name)
    op = Signal(range(cfg.ports), name=f"{name}_op")
    m.d.comb += op.eq(_after(cfg, hdr, steps)[1])
    return op, steps


def route(m, cfg, coord, hdr, in_port, in_class, *, name="route"):
    """Output port and output VC (signals) of the head ``hdr`` that arrived on input port
    ``in_port`` (a constant) in a VC of dateline class ``in_class``, at the router at
    ``coord`` (see the module docstring)."""
    op, steps = output_port(m, cfg, coord, hdr, name=name)
    after, _ = _after(cfg, hdr, steps)
    ovc = Signal(range(cfg.total_vcs), name=f"{name}_ovc")
    hash_bit = flow_bit(cfg, hdr)
    base = hdr.tclass * cfg.vcs
    half = cfg.vcs // 2
    for d, (differs, plus, last, free, wrap_hop) in enumerate(steps):
        wrap = cfg.wrap[d]
        count = half if wrap else cfg.vcs
        table = Array(Const(x, range(max(2, count))) for x in turn_lanes(cfg, count))
        lane = Mux(last, table[after[d]], 0)
        if wrap:
            cls = Mux(in_port == 2 * d + ~plus, in_class | wrap_hop, wrap_hop | (free & hash_bit))
            value = base + cls * half + lane
        else:
            value = base + lane
        cond = m.If if d == 0 else m.Elif
        with cond(differs):
            m.d.comb += ovc.eq(value)
    return op, ovc


class InputUnit(wiring.Component):
    """The buffers of one input port: ``total_vcs`` FIFOs of ``buffer_depth`` flits, and with
    every flit its marks and its packet's route (computed as the head is written, kept for the
    body), all in memories, so that every VC's front is visible to the allocator.

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
        The front flit of ``pop_vc`` (combinational); with ``switch_stage``, the flit popped
        in the last cycle (its slot is not written again before then: a credit or ``full``
        must first show it free).
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
        in_class = (w.vc % cfg.vcs) >= cfg.vcs // 2 if cfg.vcs >= 2 else Const(0)
        op, ovc = route(m, cfg, self.coord, hdr, self._port, in_class)
        meta_l = meta_layout(cfg)

        # The route of the packet being written into each VC, for its body flits.
        m.submodules.routes = routes = memory.Memory(shape=meta_l, depth=max(2, V), init=[])
        route_wr, route_rd = routes.write_port(), routes.read_port(domain="comb")
        meta_in = Signal(meta_l)
        m.d.comb += [route_rd.addr.eq(w.vc), route_wr.addr.eq(w.vc), route_wr.data.eq(meta_in),
                     route_wr.en.eq(self.w.valid & w.head),
                     meta_in.eq(Mux(w.head, Cat(w.head, w.tail, op, ovc),
                                    Cat(w.head, w.tail, route_rd.data.op, route_rd.data.ovc)))]

        wptr = [Signal(ab + 1, name=f"wptr{v}") for v in range(V)]
        rptr = [Signal(ab + 1, name=f"rptr{v}") for v in range(V)]
        m.submodules.buf = buf = memory.Memory(shape=cfg.flit_bits, depth=max(2, V * B),
                                               init=[])
        m.submodules.meta = meta = memory.Memory(shape=meta_l, depth=max(2, V * B), init=[])
        waddr = Cat(Array(wptr)[w.vc][:ab], w.vc)
        for mem, value in ((buf, w.data), (meta, meta_in)):
            port = mem.write_port()
            m.d.comb += [port.en.eq(self.w.valid), port.addr.eq(waddr), port.data.eq(value)]
        for v in range(V):
            front = meta.read_port(domain="comb")
            m.d.comb += [
                front.addr.eq(Cat(rptr[v][:ab], Const(v, range(max(2, V))))),
                self.front[v].eq(front.data),
                self.nonempty[v].eq(wptr[v] != rptr[v]),
                self.full[v].eq((wptr[v] - rptr[v])[: ab + 1] == B),
            ]
            with m.If(self.w.valid & (w.vc == v)):
                m.d.sync += wptr[v].eq(wptr[v] + 1)
            with m.If(self.pop & (self.pop_vc == v)):
                m.d.sync += rptr[v].eq(rptr[v] + 1)
        rp = buf.read_port(domain="comb")
        front = Cat(Array(rptr)[self.pop_vc][:ab], self.pop_vc)
        if cfg.switch_stage:
            popped = Signal.like(front)
            with m.If(self.pop):
                m.d.sync += popped.eq(front)
            front = popped
        m.d.comb += [rp.addr.eq(front), self.data.eq(rp.data)]
        return m


class InjectionPort(wiring.Component):
    """Local port ``port`` of a router: packets from the endpoint into an input unit.

    The head's ``length`` delimits packets. A head is checked (destination inside the pod,
    destination port, class, length 1..max_packet); a bad one is dropped with its packet (only
    the head when the length is bad) and ``drop`` pulses. A good head has its source stamped
    (this router's coordinates and ``port``) and its hop count zeroed, and goes with its body
    into the VC ``tclass * vcs + (output port mod vcs)``, so packets leaving by different ports
    wait in different VCs. A flit waits (``i.ready`` low) while its VC is full; it is written
    in the cycle it is taken.

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

    def _check(self, hdr):
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
        ok, length_ok = self._check(hdr)

        stamped = Signal(hl)
        m.d.comb += stamped.eq(hdr)
        for d in range(cfg.ndims):
            m.d.comb += stamped[f"src{d}"].eq(self.coord[f"c{d}"])
        m.d.comb += [stamped.src_port.eq(self._port), stamped.hops.eq(0)]
        op, _ = output_port(m, cfg, self.coord, hdr)
        head_vc = Signal(range(cfg.total_vcs))
        m.d.comb += head_vc.eq(stamped.tclass * cfg.vcs + op % cfg.vcs)

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
