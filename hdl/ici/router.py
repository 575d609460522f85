"""One ICI router: an input-queued virtual-channel router with wormhole switching, credit-based
flow control, dimension-order routing with datelines, and the link layer on every port.

Ports: ``2 * ndims`` network ports, (d, +) numbered ``2d`` and (d, -) numbered ``2d + 1``,
then ``local_ports`` injection/ejection pairs. Input port (d, +) receives the flits that travel
in the + direction of dimension d (from the neighbour at coordinate - 1), so a flit that goes
straight on leaves through the output port of the same number.

Pipeline, two cycles per hop at zero load:

1. a flit arrives on a link (CRC and sequence checked by :class:`~.link.LinkRx`), or on an
   injection port, has its route computed if it is a head, and is written into the buffer of
   its virtual channel;
2. from the front of that buffer it is allocated (VC and switch in one cycle, below), crosses
   the switch and is registered on the output link (or into the ejection FIFO).

Routing (a function of the head only, so every packet of a flow takes the same path):
dimension order, and in a wrapped dimension the shorter direction, a tie (distance k/2) going +
from even and - from odd coordinates. Output VC = ``tclass * vcs + lane`` in a mesh dimension
and ``tclass * vcs + dateline_class * vcs/2 + lane`` in a wrapped one, where the dateline class
is 1 from the wraparound hop of the dimension on (the hop k-1 -> 0 going +, 0 -> k-1 going -)
and 0 before it and in every new dimension, and ``lane`` is a hash of source and destination.
Because the output VC is a function of the packet, packets of one (source, destination, class)
always queue in the same buffers and are delivered in order.

Allocation: each input VC whose front flit may go (a head whose output VC is free, or the body
of a packet that holds it, with a credit for that VC and a ready output link) requests its
output port. A round-robin arbiter per input port picks one VC, then a round-robin arbiter per
output port picks one input: the winner's head takes the output VC (VC allocation) and its flit
the switch in the same cycle. An output VC is held from head to tail, so packets never
interleave on a VC; a freed VC may take a new packet at once (the buffer may still hold the
previous one's flits, behind which the new one queues).
"""

from functools import reduce
from operator import or_, xor

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, memory, stream
from amaranth.lib.wiring import In, Out

from ..lib.arbiter import round_robin
from ..top import Top
from .link import REPLAY_TIMEOUT, LinkRx, LinkTx
from .packet import coord_layout, eject_layout, header_layout, link_signature

__all__ = ["Router", "COUNTERS", "EJECT_DEPTH"]

COUNTERS = ("crc_errors", "retries", "dropped")
COUNTER_WIDTH = 32
EJECT_DEPTH = 4


def _encode(m, onehot, n, index_name, valid_name):
    """Index of the set bit of an ``n``-bit one-hot ``onehot``, and whether one is set."""
    index = Signal(range(n), name=index_name)
    for k in range(n):
        with m.If(onehot[k]):
            m.d.comb += index.eq(k)
    valid = Signal(name=valid_name)
    m.d.comb += valid.eq(onehot != 0)
    return index, valid


def _meta_layout(cfg):
    return data.StructLayout({"head": 1, "tail": 1, "op": range(cfg.ports),
                              "ovc": range(cfg.total_vcs)})


def _lane(cfg, hdr):
    """Lane of a flow within its VC group: an XOR fold of source and destination."""
    bits = Cat(*[hdr[f"dst{d}"] for d in range(cfg.ndims)], hdr.dst_port,
               *[hdr[f"src{d}"] for d in range(cfg.ndims)], hdr.src_port)
    return reduce(xor, [bits[i:i + 3] for i in range(0, len(bits), 3)])


def route(m, cfg, coord, hdr, in_port, in_vc, name):
    """Output port and output VC of the head ``hdr`` arriving on ``in_port`` in ``in_vc``."""
    op = Signal(range(cfg.ports), name=f"{name}_op")
    ovc = Signal(range(cfg.total_vcs), name=f"{name}_ovc")
    lane = Signal(3, name=f"{name}_lane")
    m.d.comb += lane.eq(_lane(cfg, hdr))
    base = hdr.tclass * cfg.vcs
    half = cfg.vcs // 2
    in_class = Signal(name=f"{name}_in_class")
    if half:
        m.d.comb += in_class.eq((in_vc % cfg.vcs) >= half)
    for d, (k, wrap) in enumerate(zip(cfg.dims, cfg.wrap, strict=True)):
        cur, dst = coord[f"c{d}"], hdr[f"dst{d}"]
        cond = m.If if d == 0 else m.Elif
        with cond(dst != cur):
            plus = Signal(name=f"{name}_plus{d}")
            if wrap:
                delta = Signal(range(k), name=f"{name}_delta{d}")
                m.d.comb += delta.eq((dst + k - cur) % k)
                m.d.comb += plus.eq((2 * delta < k) | ((2 * delta == k) & ~cur[0]))
                wrap_hop = Signal(name=f"{name}_wraphop{d}")
                m.d.comb += wrap_hop.eq(plus & (cur == k - 1) | ~plus & (cur == 0))
                dateline = (wrap_hop | ((in_port == 2 * d + ~plus) & in_class))
                m.d.comb += ovc.eq(base + dateline * half + lane % half)
            else:
                m.d.comb += [plus.eq(dst > cur), ovc.eq(base + lane % cfg.vcs)]
            m.d.comb += op.eq(2 * d + ~plus)
    with m.Else():
        m.d.comb += [op.eq(cfg.net_ports + hdr.dst_port), ovc.eq(0)]
    return op, ovc


class _InputUnit:
    """Buffers of one input port: ``V`` FIFOs of ``depth`` flits in one memory, with the
    head/tail marks and the route of every flit kept in registers so that every VC's front is
    visible to the allocator."""

    def __init__(self, m, cfg, name, coord, port):
        V, B = cfg.total_vcs, cfg.buffer_depth
        ab = (B - 1).bit_length()
        self.V = V
        # Write side (drive these).
        self.w_en = Signal(name=f"{name}_w_en")
        self.w_vc = Signal(range(V), name=f"{name}_w_vc")
        self.w_data = Signal(cfg.flit_bits, name=f"{name}_w_data")
        self.w_head = Signal(name=f"{name}_w_head")
        self.w_tail = Signal(name=f"{name}_w_tail")
        hdr = data.View(header_layout(cfg), self.w_data[: cfg.header_bits])
        op, ovc = route(m, cfg, coord, hdr, port, self.w_vc, f"{name}_rt")

        m.submodules[f"{name}_buf"] = buf = memory.Memory(
            shape=cfg.flit_bits, depth=max(2, V * B), init=[])
        wp = buf.write_port()
        self.rp = rp = buf.read_port(domain="comb")
        meta_l = _meta_layout(cfg)
        self.wptr = [Signal(ab + 1, name=f"{name}_wptr{v}") for v in range(V)]
        self.rptr = [Signal(ab + 1, name=f"{name}_rptr{v}") for v in range(V)]
        self.meta = [Array(Signal(meta_l, name=f"{name}_meta{v}_{i}") for i in range(B))
                     for v in range(V)]
        self.front = [Signal(meta_l, name=f"{name}_front{v}") for v in range(V)]
        for v in range(V):
            m.d.comb += self.front[v].eq(self.meta[v][self.rptr[v][:ab]])
        self.nonempty = [Signal(name=f"{name}_ne{v}") for v in range(V)]
        self.full = [Signal(name=f"{name}_full{v}") for v in range(V)]
        for v in range(V):
            m.d.comb += [
                self.nonempty[v].eq(self.wptr[v] != self.rptr[v]),
                self.full[v].eq((self.wptr[v] - self.rptr[v])[: ab + 1] == B),
            ]
        m.d.comb += [wp.en.eq(self.w_en), wp.data.eq(self.w_data),
                     wp.addr.eq(Cat(Array(self.wptr)[self.w_vc][:ab], self.w_vc))]
        meta_in = Signal(meta_l, name=f"{name}_meta_in")
        m.d.comb += [meta_in.head.eq(self.w_head), meta_in.tail.eq(self.w_tail),
                     meta_in.op.eq(op), meta_in.ovc.eq(ovc)]
        for v in range(V):
            with m.If(self.w_en & (self.w_vc == v)):
                m.d.sync += [self.meta[v][self.wptr[v][:ab]].eq(meta_in),
                             self.wptr[v].eq(self.wptr[v] + 1)]
        # Read side: the allocator sets these.
        self.pop = Signal(name=f"{name}_pop")
        self.pop_vc = Signal(range(V), name=f"{name}_pop_vc")
        m.d.comb += rp.addr.eq(Cat(Array(self.rptr)[self.pop_vc][:ab], self.pop_vc))
        for v in range(V):
            with m.If(self.pop & (self.pop_vc == v)):
                m.d.sync += self.rptr[v].eq(self.rptr[v] + 1)


class Router(Top):
    """One ICI router (see the module docstring for routing, allocation and timing).

    Parameters
    ----------
    config : ICIConfig

    Members
    -------
    coord : In(coord_layout)
        This router's coordinates (tied to constants in a network).
    link_out : Out(link_signature).array(net_ports)
        Per network port: the flit wire to the neighbour and its reverse channel.
    link_in : In(link_signature).array(net_ports)
        Per network port: the flit wire from the neighbour and the reverse channel back.
    inject : In(stream of flit_bits).array(local_ports)
        Flits of packets to send; the head's ``length`` delimits each packet. A head with a
        destination outside the pod, a class past ``classes`` or a length outside
        1..max_packet is dropped with its packet (only the head when the length is bad) and
        counted in ``dropped``. The router stamps the head's source and zeroes its hop count.
    eject : Out(stream of {data, last}).array(local_ports)
        Delivered flits, packet by packet (never interleaved), ``last`` on each tail.
    crc_errors, retries, dropped : Out(32)
        Counters: flits and reverse messages received with a bad CRC; go-back-N rewinds of the
        output links; packets dropped at injection.
    """

    def __init__(self, config):
        cfg = config
        super().__init__(config, {
            "coord": In(coord_layout(cfg)),
            "link_out": Out(link_signature(cfg)).array(cfg.net_ports),
            "link_in": In(link_signature(cfg)).array(cfg.net_ports),
            "inject": In(stream.Signature(cfg.flit_bits)).array(cfg.local_ports),
            "eject": Out(stream.Signature(eject_layout(cfg))).array(cfg.local_ports),
            **{name: Out(COUNTER_WIDTH) for name in COUNTERS},
        })

    @property
    def name(self):
        return self.config.router_name

    @property
    def extras(self):
        return {"constants": {"replay_timeout": REPLAY_TIMEOUT}}

    def elaborate(self, platform):
        m = Module()
        cfg = self._config
        P, NP, L, V, B = cfg.ports, cfg.net_ports, cfg.local_ports, cfg.total_vcs, cfg.buffer_depth
        hl = header_layout(cfg)
        inputs = [_InputUnit(m, cfg, f"in{i}", self.coord, i) for i in range(P)]

        # Link receivers feed the network inputs.
        rxs = []
        for p in range(NP):
            wire = self.link_in[p].flit
            rx = LinkRx(m, cfg, f"rx{p}", wire)
            rxs.append(rx)
            unit = inputs[p]
            m.d.comb += [unit.w_en.eq(rx.accept), unit.w_vc.eq(wire.vc),
                         unit.w_data.eq(wire.data), unit.w_head.eq(wire.head),
                         unit.w_tail.eq(wire.tail), self.link_in[p].rev.eq(rx.rev)]

        # Injection: check heads, stamp the source, delimit packets by their length.
        drops = []
        for lp in range(L):
            drops.append(self._injection(m, cfg, lp, inputs[NP + lp], hl))

        # Output state: credits and owner flag per output VC; link senders; ejection FIFOs.
        txs = [LinkTx(m, cfg, f"tx{p}", self.link_out[p].rev) for p in range(NP)]
        for p, tx in enumerate(txs):
            m.d.comb += self.link_out[p].flit.eq(tx.wire)
        credits = [[Signal(range(B + 1), init=B, name=f"cr{p}_{v}") for v in range(V)]
                   for p in range(NP)]
        busy = [[Signal(name=f"busy{p}_{v}") for v in range(V)] for p in range(NP)]
        busy += [[Signal(name=f"busy{NP + lp}")] * V for lp in range(L)]
        ejects = []
        for lp in range(L):
            ej = fifo.SyncFIFO(width=cfg.flit_bits + 1, depth=EJECT_DEPTH)
            m.submodules[f"eject{lp}"] = ej
            ejects.append(ej)
            m.d.comb += [self.eject[lp].valid.eq(ej.r_rdy), ej.r_en.eq(self.eject[lp].ready),
                         self.eject[lp].payload.eq(ej.r_data)]
        # Packed vectors indexed with bit_select: one shift each in the Verilog (an Array
        # would be a case statement per access, and Verilator emits its code per instance).
        out_ready = Cat(*[tx.ready for tx in txs], *[ej.w_rdy for ej in ejects])
        credit_ok = Signal(P * V, name="credit_ok")
        for p in range(P):
            for v in range(V):
                ok = credits[p][v] != 0 if p < NP else ejects[p - NP].w_rdy
                m.d.comb += credit_ok[p * V + v].eq(ok)
        vc_busy = Cat(*[busy[p][v] for p in range(P) for v in range(V)])

        # Per input VC: owner state, request, target.
        active = [[Signal(name=f"act{i}_{v}") for v in range(V)] for i in range(P)]
        aop = [[Signal(range(P), name=f"aop{i}_{v}") for v in range(V)] for i in range(P)]
        aovc = [[Signal(range(V), name=f"aovc{i}_{v}") for v in range(V)] for i in range(P)]
        pick_vc, pick_op, pick_ovc, pick_valid, granted = [], [], [], [], []
        for i, unit in enumerate(inputs):
            reqs, tops, tovcs = [], [], []
            for v in range(V):
                f = unit.front[v]
                top = Signal(range(P), name=f"top{i}_{v}")
                tovc = Signal(range(V), name=f"tovc{i}_{v}")
                m.d.comb += [top.eq(Mux(active[i][v], aop[i][v], f.op)),
                             tovc.eq(Mux(active[i][v], aovc[i][v], f.ovc))]
                slot = Signal(range(P * V), name=f"slot{i}_{v}")
                m.d.comb += slot.eq(top * V + tovc)
                req = Signal(name=f"req{i}_{v}")
                m.d.comb += req.eq(unit.nonempty[v] & out_ready.bit_select(top, 1)
                                   & credit_ok.bit_select(slot, 1)
                                   & (active[i][v] | (f.head & ~vc_busy.bit_select(slot, 1))))
                reqs.append(req)
                tops.append(top)
                tovcs.append(tovc)
            win = Signal(name=f"granted{i}")
            grant = round_robin(m, Cat(*reqs), win, name=f"ia{i}")
            idx, pv = _encode(m, grant, V, f"pick{i}", f"pickv{i}")
            pick_vc.append(idx)
            pick_valid.append(pv)
            pop_ = Signal(range(P), name=f"pickop{i}")
            povc = Signal(range(V), name=f"pickovc{i}")
            m.d.comb += [pop_.eq(Array(tops)[idx]), povc.eq(Array(tovcs)[idx])]
            pick_op.append(pop_)
            pick_ovc.append(povc)
            granted.append(win)

        out_grants = []
        for o in range(P):
            reqs = Cat(*[pick_valid[i] & (pick_op[i] == o) for i in range(P)])
            g = round_robin(m, reqs, 1, name=f"oa{o}")
            out_grants.append(g)
        for i in range(P):
            m.d.comb += granted[i].eq(reduce(or_, [out_grants[o][i] for o in range(P)]))

        # Switch traversal and state updates.
        fronts = [Signal(_meta_layout(cfg), name=f"pfront{i}") for i in range(P)]
        for i, unit in enumerate(inputs):
            m.d.comb += fronts[i].eq(Array(unit.front)[pick_vc[i]])
        for i, unit in enumerate(inputs):
            f = fronts[i]
            v = pick_vc[i]
            m.d.comb += [unit.pop.eq(granted[i]), unit.pop_vc.eq(v)]
            with m.If(granted[i]):
                with m.If(f.tail):
                    m.d.sync += Array(active[i])[v].eq(0)
                with m.Elif(f.head):
                    m.d.sync += [Array(active[i])[v].eq(1), Array(aop[i])[v].eq(pick_op[i]),
                                 Array(aovc[i])[v].eq(pick_ovc[i])]
            if i < NP:
                for vv in range(V):
                    m.d.comb += rxs[i].freed[vv].eq(granted[i] & (v == vv))

        for o in range(P):
            g = out_grants[o]
            src, sent = _encode(m, g, P, f"xsel{o}", f"sent{o}")
            flit = Signal(cfg.flit_bits, name=f"xdata{o}")
            raw = Signal(cfg.flit_bits, name=f"xraw{o}")
            f = Signal(_meta_layout(cfg), name=f"xfront{o}")
            m.d.comb += [raw.eq(Array(unit.rp.data for unit in inputs)[src]),
                         f.eq(Array(fronts)[src])]
            ovc = Signal(range(V), name=f"xovc{o}")
            m.d.comb += ovc.eq(Array(pick_ovc)[src])
            if o < NP:
                hdr = data.View(hl, raw[: cfg.header_bits])
                bumped = Signal(hl, name=f"xhdr{o}")
                m.d.comb += [bumped.eq(hdr), bumped.hops.eq(hdr.hops + 1)]
                m.d.comb += flit.eq(Mux(f.head, Cat(bumped, raw[cfg.header_bits:]), raw))
                tx = txs[o]
                m.d.comb += [tx.take.eq(sent), tx.data.eq(flit), tx.head.eq(f.head),
                             tx.tail.eq(f.tail), tx.vc.eq(ovc)]
                for v in range(V):
                    spend = sent & (ovc == v)
                    m.d.sync += credits[o][v].eq(credits[o][v] + tx.credit_delta[v] - spend)
                    with m.If(sent & (ovc == v)):
                        with m.If(f.tail):
                            m.d.sync += busy[o][v].eq(0)
                        with m.Elif(f.head):
                            m.d.sync += busy[o][v].eq(1)
            else:
                ej = ejects[o - NP]
                m.d.comb += [ej.w_en.eq(sent), ej.w_data.eq(Cat(raw, f.tail))]
                with m.If(sent):
                    with m.If(f.tail):
                        m.d.sync += busy[o][0].eq(0)
                    with m.Elif(f.head):
                        m.d.sync += busy[o][0].eq(1)

        # Counters.
        events = {
            "crc_errors": [rx.crc_error for rx in rxs] + [tx.rev_error for tx in txs],
            "retries": [tx.retry for tx in txs],
            "dropped": drops,
        }
        for name, bits in events.items():
            counter = getattr(self, name)
            if bits:
                m.d.sync += counter.eq(counter + sum(bits))
        return m

    def _injection(self, m, cfg, lp, unit, hl):
        """Injection port ``lp`` into input ``unit``; returns the drop event."""
        s = self.inject[lp]
        name = f"inj{lp}"
        hdr = data.View(hl, s.payload[: cfg.header_bits])
        remaining = Signal(cfg.length_bits, name=f"{name}_remaining")
        dropping = Signal(name=f"{name}_dropping")
        cur_vc = Signal(range(cfg.total_vcs), name=f"{name}_vc")
        in_pod = Const(1)
        for d, k in enumerate(cfg.dims):
            in_pod = in_pod & (hdr[f"dst{d}"] < k)
        length_ok = (hdr.length >= 1) & (hdr.length <= cfg.max_packet)
        ok = in_pod & (hdr.dst_port < cfg.local_ports) & (hdr.tclass < cfg.classes) & length_ok

        stamped = Signal(hl, name=f"{name}_stamped")
        m.d.comb += stamped.eq(hdr)
        for d in range(cfg.ndims):
            m.d.comb += stamped[f"src{d}"].eq(self.coord[f"c{d}"])
        m.d.comb += [stamped.src_port.eq(lp), stamped.hops.eq(0)]
        head_vc = Signal(range(cfg.total_vcs), name=f"{name}_head_vc")
        m.d.comb += head_vc.eq(stamped.tclass * cfg.vcs + _lane(cfg, stamped) % cfg.vcs)

        at_head = remaining == 0
        drop = Signal(name=f"{name}_drop")
        full = Array(unit.full)
        with m.If(at_head):
            m.d.comb += [
                s.ready.eq(~ok | ~full[head_vc]),
                unit.w_en.eq(s.valid & ok & ~full[head_vc]),
                unit.w_vc.eq(head_vc),
                unit.w_data.eq(Cat(stamped, s.payload[cfg.header_bits:])),
                unit.w_head.eq(1),
                unit.w_tail.eq(hdr.length == 1),
                drop.eq(s.valid & ~ok),
            ]
            with m.If(s.valid & s.ready):
                m.d.sync += [remaining.eq(Mux(length_ok, hdr.length - 1, 0)),
                             dropping.eq(~ok), cur_vc.eq(head_vc)]
        with m.Else():
            m.d.comb += [
                s.ready.eq(dropping | ~full[cur_vc]),
                unit.w_en.eq(s.valid & ~dropping & ~full[cur_vc]),
                unit.w_vc.eq(cur_vc),
                unit.w_data.eq(s.payload),
                unit.w_tail.eq(remaining == 1),
            ]
            with m.If(s.valid & s.ready):
                m.d.sync += remaining.eq(remaining - 1)
        return drop

