"""Test-only top of the ICI: the network with a synthesizable traffic generator and delivery
checker on every endpoint, so long runs (saturation sweeps, soaks) need no Python per cycle.

``mode`` (:class:`Mode`) hands every endpoint's injection and ejection streams to the top's
ports (cocotb drives them, packet by packet) or to the generators and checkers. Both modes
build from one Verilog file, so one build per configuration serves every test.

Every input of the top is registered before it reaches anything else: the reset (everything
inside runs in a domain ``core`` reset by a register that follows ``rst``), the controls, and
the streams through a skid buffer each way (``PORT_LATENCY`` cycles in all from an ``inject``
port to an ``eject`` port on top of the network's latency). So no logic of the network
depends combinationally on the top's ports, which Verilator would otherwise evaluate again
every time the testbench touches an input or the clock, twice a cycle.

Generator (one per endpoint): a Bernoulli process creates a packet with probability
``rate / 65536`` per cycle (creation time into a source queue of ``source_queue`` entries; a
packet that finds the queue full is counted in ``throttled`` and not created). Packets leave
the queue in order; each gets a destination by ``pattern`` (:class:`Pattern`, chosen by
:class:`Destination`: uniform random, transpose, bit complement, hotspot, nearest neighbour,
all-to-all), a random class, a length (``length``, or random in 1..max_packet when 0), the
next sequence number of its (destination, class) and a payload derived from (source, class,
sequence number, flit index). The head carries the creation time.

Checker (one per endpoint): takes ejected flits with random backpressure (``stall_rate /
65536`` of cycles not ready) and checks, per packet: destination is this endpoint, source,
class and length valid, hop count equal to the minimal dimension-order distance, sequence
number the next of its (source, class), payload intact and the tail exactly at ``length``.
Errors are counted (and the first one's code, a :class:`CheckError`, and endpoint kept);
latency (tail ejection minus creation, in cycles) is summed over packets and its maximum kept.
"""

from functools import reduce

from amaranth.hdl import (
    Array,
    Cat,
    ClockDomain,
    ClockSignal,
    Const,
    DomainRenamer,
    Module,
    Mux,
    ResetSignal,
    Signal,
)
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from spec.ici import SEQ_BITS, TIMESTAMP_BITS
from spec.topology import node_coords

from ..lib.counter import count_events
from ..lib.hier import Submodule
from ..lib.queue import Queue, SkidBuffer
from ..lib.tree import tree_sum
from ..lib.xorshift import xorshift
from ..top import Top
from .network import Network
from .packet import coord_layout, eject_layout, endpoint_number, header_layout

__all__ = ["Harness", "Generator", "Destination", "Checker", "PortBuffer", "TrafficControl", "Mode",
           "Pattern", "CheckError", "PORT_LATENCY", "payload_word"]


class Mode(enum.Enum, shape=1):
    """Who drives the endpoints of the harness."""

    PORTS = 0           # the top's inject/eject ports (cocotb)
    GENERATORS = 1      # the synthesizable generators and checkers


class Pattern(enum.Enum, shape=3):
    """Destination of a generated packet."""

    UNIFORM = 0         # uniform random endpoint
    TRANSPOSE = 1       # coordinate d from coordinate d + 1
    BITCOMP = 2         # k - 1 - coordinate
    HOTSPOT = 3         # the hotspot endpoint with probability hotspot_rate, else uniform
    NEIGHBOUR = 4       # one step in a random dimension
    ALLTOALL = 5        # every other endpoint in turn


class CheckError(enum.Enum, shape=3):
    """The first fault a checker found in a delivered flit."""

    NONE = 0
    WRONG_DESTINATION = 1
    BAD_FIELDS = 2      # source, class or length out of range
    HOP_COUNT = 3
    SEQUENCE = 4
    HEAD_PAYLOAD = 5
    BODY_PAYLOAD = 6
    TAIL_POSITION = 7


IDX_BITS = 7
PORT_LATENCY = 2
"""Cycles the harness's skid buffers add between its ``inject`` and ``eject`` ports."""


def _ep_bits(cfg):
    return max(1, (cfg.endpoints - 1).bit_length())


def payload_word(cfg, src_ep, tclass, seq, idx):
    """Payload of flit ``idx`` of a packet: (seq, idx, class, source) repeated over the flit."""
    word = Cat(seq[:SEQ_BITS], idx[:IDX_BITS], tclass[: cfg.class_bits],
               src_ep[: _ep_bits(cfg)])
    reps = -(-cfg.flit_bits // len(word))
    return Cat(*[word] * reps)[: cfg.flit_bits]


def _mod_add(a, b, k):
    s = a + b
    return Mux(s >= k, s - k, s)


class TrafficControl(wiring.Signature):
    """The traffic the generators make, set by the harness's ports (shared by all endpoints).

    Members
    -------
    enable : Out(1)
        Create packets.
    pattern : Out(Pattern)
    rate : Out(16)
        Packets created per cycle per endpoint, /65536.
    length : Out(length_bits)
        Flits per packet; 0: random in 1..max_packet.
    hotspot : Out(coord_layout), hotspot_port : Out(port_bits), hotspot_rate : Out(16)
        The hotspot endpoint of :attr:`Pattern.HOTSPOT` and the share of packets sent to it
        (/65536).
    """

    def __init__(self, cfg):
        super().__init__({
            "enable": Out(1), "pattern": Out(Pattern), "rate": Out(16),
            "length": Out(cfg.length_bits), "hotspot": Out(coord_layout(cfg)),
            "hotspot_port": Out(cfg.port_bits), "hotspot_rate": Out(16),
        })


class Destination(wiring.Component):
    """Destination of the next generated packet of one endpoint, by pattern (combinational
    from ``random``; the all-to-all offset advances when ``step`` is high).

    Members
    -------
    node : In(coord_layout), port : In(port_bits)
        The endpoint.
    control : In(TrafficControl)
    random : In(64)
        Fresh random bits for this packet.
    step : In(1)
        The destination is used this cycle.
    dst : Out(coord_layout), dst_port : Out(port_bits)
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "node": In(coord_layout(cfg)), "port": In(cfg.port_bits),
            "control": In(TrafficControl(cfg)), "random": In(64), "step": In(1),
            "dst": Out(coord_layout(cfg)), "dst_port": Out(cfg.port_bits),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        D, L = cfg.ndims, cfg.local_ports
        me = [self.node[f"c{d}"] for d in range(D)]
        dst = [self.dst[f"c{d}"] for d in range(D)]
        ctl, r = self.control, self.random
        uni = [(r[8 * d: 8 * d + 8] * k) >> 8 for d, k in enumerate(cfg.dims)]
        uni_port = (r[24:32] * L) >> 8
        off = [Signal(range(k), name=f"a2a_off{d}", init=int(L == 1 and d == 0))
               for d, k in enumerate(cfg.dims)]
        off_port = Signal(range(max(2, L)), name="a2a_port", init=int(L > 1))
        nb_dim = (r[0:8] * D) >> 8
        nb_up = r[8]
        hot = r[48:64] < ctl.hotspot_rate
        with m.Switch(ctl.pattern):
            with m.Case(Pattern.TRANSPOSE):
                for d, k in enumerate(cfg.dims):
                    table = Array(Const(v % k, range(k)) for v in range(max(cfg.dims)))
                    m.d.comb += dst[d].eq(table[me[(d + 1) % D]])
                m.d.comb += self.dst_port.eq(self.port)
            with m.Case(Pattern.BITCOMP):
                for d, k in enumerate(cfg.dims):
                    m.d.comb += dst[d].eq(k - 1 - me[d])
                m.d.comb += self.dst_port.eq(self.port)
            with m.Case(Pattern.HOTSPOT):
                for d in range(D):
                    m.d.comb += dst[d].eq(Mux(hot, ctl.hotspot[f"c{d}"], uni[d]))
                m.d.comb += self.dst_port.eq(Mux(hot, ctl.hotspot_port, uni_port))
            with m.Case(Pattern.NEIGHBOUR):
                for d, (k, wrap) in enumerate(zip(cfg.dims, cfg.wrap, strict=True)):
                    up = Mux(me[d] == k - 1, Const(int(wrap)), Mux(me[d] == 0, 1, nb_up)) \
                        if not wrap else nb_up
                    step = Mux(up, _mod_add(me[d], 1, k), Mux(me[d] == 0, k - 1, me[d] - 1))
                    m.d.comb += dst[d].eq(Mux(nb_dim == d, step, me[d]))
                m.d.comb += self.dst_port.eq(uni_port)
            with m.Case(Pattern.ALLTOALL):
                for d, k in enumerate(cfg.dims):
                    m.d.comb += dst[d].eq(_mod_add(me[d], off[d], k))
                m.d.comb += self.dst_port.eq(_mod_add(self.port, off_port, L))
            with m.Default():   # UNIFORM
                for d in range(D):
                    m.d.comb += dst[d].eq(uni[d])
                m.d.comb += self.dst_port.eq(uni_port)
        with m.If(self.step):
            next_off = _odometer(cfg, off, off_port)
            m.d.sync += [o.eq(n) for o, n in zip([*off, off_port], next_off, strict=True)]
        return m


def _odometer(cfg, off, off_port):
    """Next all-to-all offset (port digit fastest), skipping the all-zero offset (self)."""
    digits = [(off_port, cfg.local_ports)] + [(o, k) for o, k in zip(off, cfg.dims,
                                                                        strict=True)]
    out, carry = [], Const(1)
    for value, k in digits:
        inc = value + carry
        out.append(Mux(inc == k, 0, inc))
        carry = carry & (inc == k)
    zero = reduce(lambda a, b: a & b, [o == 0 for o in out])
    first = [Const(1 if i == 0 else 0) for i in range(len(out))] if cfg.local_ports > 1 else \
        [Const(0)] + [Const(1 if i == 1 else 0) for i in range(1, len(out))]
    out = [Mux(zero, f, o) for f, o in zip(first, out, strict=True)]
    return out[1:] + out[:1]


class Generator(wiring.Component):
    """Traffic generator of one endpoint (see the module docstring).

    Members
    -------
    node : In(coord_layout), port : In(port_bits)
        The endpoint.
    seed : In(32)
        Taken at reset.
    now : In(TIMESTAMP_BITS)
        The time, stamped into each packet at creation.
    control : In(TrafficControl)
    o : Out(stream of flit_bits)
        The packets, flit by flit, into the endpoint's injection port.
    created, throttled, packets, flits : Out(32)
        Counters: packets created; creations refused by a full source queue; packets and
        flits sent.
    busy : Out(1)
        Packets are queued or being sent.
    """

    def __init__(self, cfg, source_queue):
        self._cfg = cfg
        self._source_queue = source_queue
        super().__init__({
            "node": In(coord_layout(cfg)), "port": In(cfg.port_bits), "seed": In(32),
            "now": In(TIMESTAMP_BITS), "control": In(TrafficControl(cfg)),
            "o": Out(stream.Signature(cfg.flit_bits)),
            "created": Out(32), "throttled": Out(32), "packets": Out(32), "flits": Out(32),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        ctl = self.control
        prep = Signal()     # the next packet leaves the queue and is prepared
        rng_a = xorshift(m, 32, self.seed, name="rng_a")
        rng_b = xorshift(m, 64, Cat(self.seed, ~self.seed), name="rng_b", step=prep)
        m.submodules.queue = queue = Queue(TIMESTAMP_BITS, self._source_queue)
        create = ctl.enable & (rng_a[:16] < ctl.rate)
        m.d.comb += [queue.i.valid.eq(create), queue.i.payload.eq(self.now)]

        m.submodules.dest = dest = Destination(cfg)
        m.d.comb += [dest.node.eq(self.node), dest.port.eq(self.port), dest.random.eq(rng_b),
                     dest.step.eq(prep)]
        for name in TrafficControl(cfg).members:
            m.d.comb += getattr(dest.control, name).eq(getattr(ctl, name))
        beat, last = self._packet(m, queue, dest, rng_b, prep)
        count_events(m, self, {"created": create & queue.i.ready,
                               "throttled": create & ~queue.i.ready,
                               "packets": beat & last, "flits": beat})
        return m

    def _packet(self, m, queue, dest, r, prep):
        """The packet being sent, prepared from the queue's oldest creation time when the one
        before it has gone (``prep``); returns the flit handshake and its ``last``."""
        cfg = self._cfg
        D, C = cfg.ndims, cfg.classes
        me = [self.node[f"c{d}"] for d in range(D)]
        dst = [dest.dst[f"c{d}"] for d in range(D)]
        tclass = Signal(range(max(2, C)), name="gclass")
        m.d.comb += tclass.eq((r[32:40] * C) >> 8)
        length = Signal(cfg.length_bits, name="glength")
        m.d.comb += length.eq(Mux(self.control.length != 0, self.control.length,
                                  1 + ((r[40:48] * cfg.max_packet) >> 8)))
        m.submodules.seq = seqmem = memory.Memory(
            shape=SEQ_BITS, depth=max(2, cfg.endpoints * C), init=[])
        seq_rd = seqmem.read_port(domain="comb")
        seq_wr = seqmem.write_port()
        m.d.comb += [seq_rd.addr.eq(endpoint_number(cfg, dst, dest.dst_port) * C + tclass),
                     seq_wr.addr.eq(seq_rd.addr), seq_wr.data.eq(seq_rd.data + 1)]

        pv = Signal(name="pv")
        hdr = Signal(header_layout(cfg), name="phdr")
        ts = Signal(TIMESTAMP_BITS, name="pts")
        idx = Signal(IDX_BITS, name="pidx")
        beat = self.o.valid & self.o.ready
        last = idx == hdr.length - 1
        m.d.comb += [prep.eq(queue.o.valid & (~pv | (beat & last))),
                     queue.o.ready.eq(prep), seq_wr.en.eq(prep)]
        with m.If(prep):
            m.d.sync += [*[hdr[f"dst{d}"].eq(dst[d]) for d in range(D)],
                         *[hdr[f"src{d}"].eq(me[d]) for d in range(D)],
                         hdr.dst_port.eq(dest.dst_port), hdr.src_port.eq(self.port),
                         hdr.tclass.eq(tclass), hdr.length.eq(length), hdr.seq.eq(seq_rd.data),
                         hdr.hops.eq(0), ts.eq(queue.o.payload), pv.eq(1)]
        with m.Elif(beat & last):
            m.d.sync += pv.eq(0)

        src_ep = endpoint_number(cfg, me, self.port)
        body = payload_word(cfg, src_ep, hdr.tclass, hdr.seq, idx)
        head = Cat(hdr, ts, body[cfg.header_bits + TIMESTAMP_BITS:])
        m.d.comb += [self.o.valid.eq(pv), self.o.payload.eq(Mux(idx == 0, head, body)),
                     self.busy.eq(pv | queue.o.valid)]
        with m.If(beat):
            m.d.sync += idx.eq(Mux(last, 0, idx + 1))
        return beat, last


class Checker(wiring.Component):
    """Delivery checker of one endpoint (see the module docstring).

    Members
    -------
    node : In(coord_layout), port : In(port_bits)
        The endpoint.
    seed : In(32)
        Taken at reset (the backpressure's random source).
    now : In(TIMESTAMP_BITS)
    stall_rate : In(16)
        Probability (/65536) that ``i.ready`` is low in a cycle.
    i : In(stream of {data, last})
        From the endpoint's ejection port.
    packets, flits, errors : Out(32), lat_sum : Out(48), lat_max : Out(TIMESTAMP_BITS)
        Counters: packets and flits taken, flits with an error; latency sum and maximum.
    error_code : Out(CheckError)
        The first error found.
    """

    def __init__(self, cfg):
        self._cfg = cfg
        super().__init__({
            "node": In(coord_layout(cfg)), "port": In(cfg.port_bits), "seed": In(32),
            "now": In(TIMESTAMP_BITS), "stall_rate": In(16),
            "i": In(stream.Signature(eject_layout(cfg))),
            "packets": Out(32), "flits": Out(32), "lat_sum": Out(48),
            "lat_max": Out(TIMESTAMP_BITS), "errors": Out(32), "error_code": Out(CheckError),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        rng = xorshift(m, 32, self.seed, name="rng")
        m.d.comb += self.i.ready.eq(~(rng[:16] < self.stall_rate))
        beat = self.i.valid & self.i.ready
        flit, last = self.i.payload.data, self.i.payload.last
        hl = header_layout(cfg)
        h = data.View(hl, flit[: cfg.header_bits])
        idx = Signal(IDX_BITS, name="idx")
        cur = Signal(hl, name="cur")          # header of the packet being received
        ts = Signal(TIMESTAMP_BITS, name="ts")
        at_head = idx == 0
        code = self._code(m, h, data.View(hl, Mux(at_head, h.as_value(), cur.as_value())),
                          idx, beat)
        lat = Signal(TIMESTAMP_BITS, name="lat")
        pay = cfg.header_bits + TIMESTAMP_BITS
        m.d.comb += lat.eq(self.now - Mux(at_head, flit[cfg.header_bits: pay], ts))
        error = beat & (code != CheckError.NONE)
        count_events(m, self, {"flits": beat, "packets": beat & last, "errors": error,
                               "lat_sum": Mux(beat & last, lat, 0)})
        with m.If(beat):
            m.d.sync += idx.eq(Mux(last, 0, idx + 1))
            with m.If(at_head):
                m.d.sync += [cur.eq(h), ts.eq(flit[cfg.header_bits: pay])]
            with m.If(last & (lat > self.lat_max)):
                m.d.sync += self.lat_max.eq(lat)
        with m.If(error & (self.errors == 0)):
            m.d.sync += self.error_code.eq(code)
        return m

    def _code(self, m, h, hdr, idx, beat):
        """The check of the flit being taken (head ``h``, header of its packet ``hdr``, flit
        index ``idx``): a :class:`CheckError`. Updates the expected sequence numbers."""
        cfg = self._cfg
        D, C = cfg.ndims, cfg.classes
        me = [self.node[f"c{d}"] for d in range(D)]
        flit, last = self.i.payload.data, self.i.payload.last
        at_head = idx == 0
        src = [hdr[f"src{d}"] for d in range(D)]
        src_ep = endpoint_number(cfg, src, hdr.src_port)
        m.submodules.expect = mem = memory.Memory(
            shape=SEQ_BITS, depth=max(2, cfg.endpoints * C), init=[])
        rd = mem.read_port(domain="comb")
        wr = mem.write_port()
        m.d.comb += [rd.addr.eq(src_ep * C + hdr.tclass), wr.addr.eq(rd.addr),
                     wr.data.eq(h.seq + 1), wr.en.eq(beat & at_head)]

        hops = 0
        src_ok = hdr.src_port < cfg.local_ports
        for d, (k, wrap) in enumerate(zip(cfg.dims, cfg.wrap, strict=True)):
            diff = Mux(src[d] > me[d], src[d] - me[d], me[d] - src[d])
            hops = hops + (Mux(2 * diff > k, k - diff, diff) if wrap else diff)
            src_ok = src_ok & (src[d] < k)
        dst_ok = hdr.dst_port == self.port
        for d in range(D):
            dst_ok = dst_ok & (hdr[f"dst{d}"] == me[d])
        fields_ok = (src_ok & (hdr.tclass < C) & (hdr.length >= 1)
                     & (hdr.length <= cfg.max_packet))
        want = payload_word(cfg, src_ep, hdr.tclass, hdr.seq, idx)
        tail_ok = last == (idx == hdr.length - 1)
        pay = cfg.header_bits + TIMESTAMP_BITS
        code = Signal(CheckError, name="code")
        with m.If(at_head):
            with m.If(~dst_ok):
                m.d.comb += code.eq(CheckError.WRONG_DESTINATION)
            with m.Elif(~fields_ok):
                m.d.comb += code.eq(CheckError.BAD_FIELDS)
            with m.Elif(h.hops != hops):
                m.d.comb += code.eq(CheckError.HOP_COUNT)
            with m.Elif(h.seq != rd.data):
                m.d.comb += code.eq(CheckError.SEQUENCE)
            with m.Elif(flit[pay:] != want[pay:]):
                m.d.comb += code.eq(CheckError.HEAD_PAYLOAD)
            with m.Elif(~tail_ok):
                m.d.comb += code.eq(CheckError.TAIL_POSITION)
        with m.Else():
            with m.If(flit != want):
                m.d.comb += code.eq(CheckError.BODY_PAYLOAD)
            with m.Elif(~tail_ok):
                m.d.comb += code.eq(CheckError.TAIL_POSITION)
        return code


class PortBuffer(wiring.Component):
    """A two-beat stream buffer whose write side depends only on ``i`` and its own registers
    and whose read side only on ``o.ready`` and its own registers (separate write and read
    pointers, no shared level): no expression mixes the two, so when ``i`` comes from a
    top-level port, the logic behind ``o.ready`` stays out of what the simulator evaluates on
    every input change. A beat taken on ``i`` is offered on ``o`` in the next cycle; both
    sides run at one beat per cycle.

    Members
    -------
    i : In(stream of shape)
    o : Out(stream of shape)
    """

    def __init__(self, shape):
        self._shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        slots = [Signal(self._shape, name=f"slot{k}", reset_less=True) for k in range(2)]
        wptr, rptr = Signal(2), Signal(2)
        m.d.comb += [self.i.ready.eq((wptr - rptr)[:2] != 2), self.o.valid.eq(wptr != rptr),
                     self.o.payload.eq(Mux(rptr[0], slots[1], slots[0]))]
        with m.If(self.i.valid & self.i.ready):
            m.d.sync += [Array(slots)[wptr[0]].eq(self.i.payload), wptr.eq(wptr + 1)]
        with m.If(self.o.valid & self.o.ready):
            m.d.sync += rptr.eq(rptr + 1)
        return m


class Harness(Top):
    """Test-only top: the network, a generator and a checker per endpoint, and ``mode``.

    Members
    -------
    mode : In(Mode)
        Who drives the endpoints: the ``inject``/``eject`` ports, or the generators and
        checkers.
    inject, eject : as in :class:`~.network.Network`
    enable, pattern, rate, length, hotspot, hotspot_port, hotspot_rate : In
        The generators' :class:`TrafficControl`, shared by all endpoints.
    seed : In(32)
        Seeds every generator, checker and fault injector (taken at reset).
    stall_rate : In(16)
        Probability (/65536) that a checker holds ``ready`` low in a cycle.
    created, throttled, inj_packets, inj_flits, ej_packets, ej_flits, lat_sum, lat_max,
    errors : Out
        Sums (maximum for ``lat_max``) over endpoints.
    error_code, error_endpoint : Out
        The first failing checker (lowest endpoint number) and its first error code.
    busy : Out(1)
        Some generator still has packets queued or in progress.
    crc_errors, retries, dropped (and fault_rate, faults with ``faults``) : as in the network.
    """

    SUMS = {"created": ("gen", "created"), "throttled": ("gen", "throttled"),
            "inj_packets": ("gen", "packets"), "inj_flits": ("gen", "flits"),
            "ej_packets": ("chk", "packets"), "ej_flits": ("chk", "flits"),
            "lat_sum": ("chk", "lat_sum"), "errors": ("chk", "errors")}

    def __init__(self, config):
        cfg = config.ici
        hier = {"auto": None, "hierarchical": True, "flat": False}[config.verilate]
        net = Network(cfg, faults=config.faults, hier_block=hier)
        self._net = Submodule(net.name, net, children=net.submodules)
        self._gen = Submodule(f"{config.name}_gen", Generator(cfg, config.source_queue))
        self._chk = Submodule(f"{config.name}_chk", Checker(cfg))
        E = cfg.endpoints
        control = {name: In(member.shape)
                   for name, member in TrafficControl(cfg).members.items()}
        members = {
            "mode": In(Mode),
            "inject": In(stream.Signature(cfg.flit_bits)).array(E),
            "eject": Out(stream.Signature(eject_layout(cfg))).array(E),
            **control, "seed": In(32), "stall_rate": In(16),
            **{n: Out(32) for n in ("created", "throttled", "inj_packets", "inj_flits",
                                    "ej_packets", "ej_flits", "errors", "crc_errors",
                                    "retries", "dropped")},
            "lat_sum": Out(48), "lat_max": Out(TIMESTAMP_BITS), "error_code": Out(CheckError),
            "error_endpoint": Out(_ep_bits(cfg)), "busy": Out(1),
        }
        if config.faults:
            members.update({"fault_rate": In(16), "faults": Out(32)})
        super().__init__(config, members)

    @property
    def submodules(self):
        return [self._net, self._gen, self._chk]

    @property
    def extras(self):
        return {"constants": {"port_latency": PORT_LATENCY},
                "verilator_threads": self.config.sim_threads}

    def _registered(self, m):
        """The domain ``core`` (reset by a register following ``rst``), and the top's control
        inputs, each through a register (named ``<input>_r``)."""
        m.domains.core = core = ClockDomain("core", local=True)
        rst = Signal(reset_less=True, name="core_rst")
        m.d.sync += rst.eq(ResetSignal())
        m.d.comb += [core.clk.eq(ClockSignal()), core.rst.eq(rst)]
        names = [*TrafficControl(self.config.ici).members, "mode", "seed", "stall_rate"]
        names += ["fault_rate"] if self.config.faults else []
        regs = {}
        for name in names:
            port = getattr(self, name)
            regs[name] = reg = Signal.like(port, name=f"{name}_r", reset_less=True)
            m.d.sync += reg.eq(port)
        return regs

    def elaborate(self, platform):
        m = Module()
        cfg = self.config.ici
        inputs = self._registered(m)
        net = self._net.instance(m, "net", domain="core")
        now = Signal(TIMESTAMP_BITS)
        m.d.core += now.eq(now + 1)
        for name in ("crc_errors", "retries", "dropped"):
            m.d.comb += getattr(self, name).eq(getattr(net, name))
        if self.config.faults:
            m.d.comb += [net.fault_rate.eq(inputs["fault_rate"]),
                         net.fault_seed.eq(inputs["seed"]), self.faults.eq(net.faults)]
        units = {"gen": [], "chk": []}
        for e in range(cfg.endpoints):
            g, c = self._endpoint(m, e, net, now, inputs)
            units["gen"].append(g)
            units["chk"].append(c)
        for out, (kind, name) in self.SUMS.items():
            m.d.comb += getattr(self, out).eq(tree_sum(getattr(u, name) for u in units[kind]))
        m.d.comb += self.busy.eq(Cat(*[g.busy for g in units["gen"]]).any())
        lat_max = Const(0, TIMESTAMP_BITS)
        for e, c in enumerate(units["chk"]):
            step = Signal(TIMESTAMP_BITS, name=f"lat_max{e}")   # a signal: no tree blow-up
            m.d.comb += step.eq(Mux(c.lat_max > lat_max, c.lat_max, lat_max))
            lat_max = step
        m.d.comb += self.lat_max.eq(lat_max)
        for e in reversed(range(cfg.endpoints)):
            with m.If(units["chk"][e].errors != 0):
                m.d.comb += [self.error_code.eq(units["chk"][e].error_code),
                             self.error_endpoint.eq(e)]
        return m

    def _endpoint(self, m, e, net, now, inputs):
        """Generator and checker of endpoint ``e``, the skid buffers of its ports, and the
        switch of its streams by ``mode``."""
        cfg = self.config.ici
        n, lp = divmod(e, cfg.local_ports)
        g = self._gen.instance(m, f"gen{e}", domain="core")
        c = self._chk.instance(m, f"chk{e}", domain="core")
        for x in (g, c):
            for d, v in enumerate(node_coords(cfg.dims, n)):
                m.d.comb += x.node[f"c{d}"].eq(v)
            m.d.comb += [x.port.eq(lp), x.now.eq(now)]
        seed = inputs["seed"]
        m.d.comb += [g.seed.eq(seed ^ ((2 * e + 1) * 0x9E3779B1 % 2**32)),
                     c.seed.eq(seed ^ ((2 * e + 2) * 0x85EBCA6B % 2**32)),
                     c.stall_rate.eq(inputs["stall_rate"])]
        for name in TrafficControl(cfg).members:
            m.d.comb += getattr(g.control, name).eq(inputs[name])
        ti, te = PortBuffer(cfg.flit_bits), SkidBuffer(eject_layout(cfg))
        m.submodules[f"inject_skid{e}"] = DomainRenamer("core")(ti)
        m.submodules[f"eject_skid{e}"] = DomainRenamer("core")(te)
        wiring.connect(m, wiring.flipped(self.inject[e]), ti.i)
        wiring.connect(m, te.o, wiring.flipped(self.eject[e]))
        ni, ne = net.inject[e], net.eject[e]
        with m.If(inputs["mode"] == Mode.GENERATORS):
            m.d.comb += [ni.valid.eq(g.o.valid), ni.payload.eq(g.o.payload),
                         g.o.ready.eq(ni.ready), c.i.valid.eq(ne.valid),
                         c.i.payload.eq(ne.payload), ne.ready.eq(c.i.ready)]
        with m.Else():
            m.d.comb += [ni.valid.eq(ti.o.valid), ni.payload.eq(ti.o.payload),
                         ti.o.ready.eq(ni.ready), te.i.valid.eq(ne.valid),
                         te.i.payload.eq(ne.payload), ne.ready.eq(te.i.ready)]
        return g, c
