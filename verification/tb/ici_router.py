"""cocotb testbench of one ICI router, its network ports driven by Python link-layer peers.

Each input port has an :class:`Upstream` peer (a go-back-N sender written from the link
specification in docs/ici.md: sequence numbers, CRC-16, cumulative acknowledgements and
credits, rewind on ``nak``) and each output port a :class:`Downstream` peer (a receiver with a
buffer of ``buffer_depth`` flits per VC that it drains at random; it fails the test if the
router ever sends a flit without a credit). Local ports use the stream drivers. Every packet
carries a unique tag in its payload; the bench checks that each leaves on the output port and
VC the golden model's routing function gives (dateline class, lane, traffic class), with its
hop count incremented, intact, packets never interleaved on a VC, and in order per flow.
"""

from collections import defaultdict, deque

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge

from spec.ici import ICIConfig
from verification.models.ici import Header, crc16, out_vc_of, pack_fields
from verification.tb.bench import new_rng, pause, start
from verification.tb.packing import load_sidecar
from verification.tb.streams import StreamBench

TAG_BITS = 20
REV_DELAY = 3


def _fields(sidecar, name):
    return {p["name"]: p for p in sidecar["ports"]}[name]["fields"]


class _Peer:
    """A Python link-layer peer on the router's link ``link`` (``link_in`` or ``link_out``)
    of port ``p``."""

    def __init__(self, tb, link, p):
        self.tb, self.p, self.cfg = tb, p, tb.cfg
        self.flit = getattr(tb.dut, f"{link}__{p}__flit")
        self.rev = getattr(tb.dut, f"{link}__{p}__rev")
        self.M = 1 << tb.cfg.seq_bits


class Upstream(_Peer):
    """Python sender on input port ``p`` of the router."""

    def __init__(self, tb, p):
        super().__init__(tb, "link_in", p)
        cfg = self.cfg
        self.wr = self.send = self.ack = 0
        self.nak_seen = False
        self.frames = {}
        self.credits = [cfg.buffer_depth] * cfg.total_vcs
        self.seen = [0] * cfg.total_vcs
        self.packets = defaultdict(deque)     # vc -> packets (lists of (data, head, tail))
        self.current = {}                     # vc -> flits left of the packet being sent
        self.corrupt = 0.0
        self.corrupted = 0
        self.rev_line = deque()
        self.idle = 0

    def pending(self):
        return sum(len(q) for q in self.packets.values()) + sum(
            len(f) for f in self.current.values()) + (self.wr - self.ack) % self.M

    def _read_rev(self):
        cfg = self.cfg
        # The reverse channel reaches this sender REV_DELAY cycles late, as over a real wire,
        # so flits sent after one the router refused arrive before the rewind takes effect.
        self.rev_line.append(self.rev.value.to_unsigned())
        if len(self.rev_line) <= REV_DELAY:
            return
        word = self.rev_line.popleft()
        S, cb, V = cfg.seq_bits, cfg.credit_bits, cfg.total_vcs
        ack, nak = word & (self.M - 1), (word >> S) & 1
        credits = [(word >> (S + 1 + cb * v)) & ((1 << cb) - 1) for v in range(V)]
        crc = word >> (S + 1 + cb * V)
        if crc16(word & ((1 << (S + 1 + cb * V)) - 1), S + 1 + cb * V) != crc:
            return
        outstanding = (self.wr - self.ack) % self.M
        if (ack - self.ack) % self.M <= outstanding:
            if nak and not self.nak_seen:
                self.send = ack
            if ack != self.ack:
                self.idle = 0
            self.ack = ack
        self.nak_seen = bool(nak)
        for v in range(V):
            self.credits[v] += (credits[v] - self.seen[v]) % (1 << cb)
            self.seen[v] = credits[v]
            assert self.credits[v] <= cfg.buffer_depth, f"port {self.p}: credits overflow"

    def _frame(self, valid, data=0, head=0, tail=0, vc=0, seq=0):
        cfg = self.cfg
        f = self.tb.wire_fields
        body, nbits = pack_fields([(valid, 1), (data, cfg.flit_bits), (head, 1), (tail, 1),
                                   (vc, f["vc"]["width"]), (seq, cfg.seq_bits)])
        crc = crc16(body, nbits)
        word = 0
        for name, value in (("valid", valid), ("data", data), ("head", head), ("tail", tail),
                            ("vc", vc), ("seq", seq), ("crc", crc)):
            word |= value << f[name]["offset"]
        return word

    def step(self, rng):
        self._read_rev()
        # Replay timeout (a retransmission lost while nak stays up), as the sender's spec.
        self.idle = 0 if self.ack == self.wr else self.idle + 1
        if self.idle > self.tb.sidecar["constants"]["replay_timeout"]:
            self.send, self.idle = self.ack, 0
        frame = None
        if self.send != self.wr:
            frame = self.frames[self.send]
            self.send = (self.send + 1) % self.M
        elif (self.wr - self.ack) % self.M < self.cfg.retry_depth:
            ready = [v for v in set(self.packets) | set(self.current)
                     if self.credits[v] and (self.current.get(v) or self.packets[v])]
            if ready and rng.random() < 0.8:
                v = rng.choice(sorted(ready))
                if not self.current.get(v):
                    self.current[v] = deque(self.packets[v].popleft())
                data, head, tail = self.current[v].popleft()
                self.credits[v] -= 1
                frame = self._frame(1, data, head, tail, v, self.wr)
                self.frames[self.wr] = frame
                self.wr = self.send = (self.wr + 1) % self.M
        if frame is None:
            self.flit.value = self._frame(0)
            return
        if rng.random() < self.corrupt:
            bit = rng.randrange(self.tb.wire_bits)
            frame ^= 1 << bit
            # A flipped valid hides the frame: a lost flit, not a CRC error.
            self.corrupted += bit != self.tb.wire_fields["valid"]["offset"]
        self.flit.value = frame


class Downstream(_Peer):
    """Python receiver on output port ``p`` of the router."""

    def __init__(self, tb, p):
        super().__init__(tb, "link_out", p)
        cfg = self.cfg
        self.expected = 0
        self.nak = 0
        self.buffers = defaultdict(deque)
        self.freed = [0] * cfg.total_vcs
        self.out = defaultdict(list)          # vc -> flits in the order they left the buffer
        self.stall = 0.0
        self.drop = 0.0                       # pretend a good flit was corrupted
        self.rev_corrupt = 0.0
        self.rev_corrupted = 0
        self.naks = 0

    def step(self, rng):
        cfg = self.cfg
        f = self.tb.wire_fields
        word = self.flit.value.to_unsigned()

        def field(name):
            return (word >> f[name]["offset"]) & ((1 << f[name]["width"]) - 1)

        valid = field("valid")
        if valid:
            body, nbits = pack_fields([(1, 1), (field("data"), cfg.flit_bits),
                                       (field("head"), 1), (field("tail"), 1),
                                       (field("vc"), f["vc"]["width"]),
                                       (field("seq"), cfg.seq_bits)])
            good = crc16(body, nbits) == field("crc") and field("seq") == self.expected
            if good and rng.random() >= self.drop:
                v = field("vc")
                assert len(self.buffers[v]) < cfg.buffer_depth, (
                    f"output {self.p}: flit on VC {v} without a credit")
                self.buffers[v].append((field("data"), field("head"), field("tail")))
                self.expected = (self.expected + 1) % self.M
                self.nak = 0
            else:
                self.naks += not self.nak
                self.nak = 1
        for v, q in self.buffers.items():
            if q and rng.random() >= self.stall:
                self.out[v].append(q.popleft())
                self.freed[v] += 1
        cb, V, S = cfg.credit_bits, cfg.total_vcs, cfg.seq_bits
        fields = [(self.expected, S), (self.nak, 1)] + [
            (self.freed[v] % (1 << cb), cb) for v in range(V)]
        msg, nbits = pack_fields(fields)
        msg |= crc16(msg, nbits) << nbits
        if rng.random() < self.rev_corrupt:
            msg ^= 1 << rng.randrange(nbits + 16)
            self.rev_corrupted += 1
        self.rev.value = msg

    def busy(self):
        return any(self.buffers.values())


class RouterBench:
    def __init__(self, dut, coord=None):
        self.dut = dut
        self.sidecar = load_sidecar()
        self.cfg = cfg = ICIConfig.from_dict(self.sidecar["parameters"])
        self.rng = new_rng()
        self.coord = coord or tuple(self.rng.randrange(k) for k in cfg.dims)
        self.wire_fields = _fields(self.sidecar, "link_in__0__flit")
        self.wire_bits = sum(x["width"] for x in self.wire_fields.values())
        self.up = [Upstream(self, p) for p in range(cfg.net_ports)]
        self.down = [Downstream(self, p) for p in range(cfg.net_ports)]
        self.streams = StreamBench(dut, dut.clk)
        self.inj = [self.streams.source(f"inject__{lp}", pause("random"))
                    for lp in range(cfg.local_ports)]
        self.ej = [self.streams.sink(f"eject__{lp}", pause("random"))
                   for lp in range(cfg.local_ports)]
        self.expect = {}          # tag -> (port or None, vc, local port, flits)
        self.flows = defaultdict(list)
        self.tag = 0
        self.cycles = 0

    async def start(self):
        dut, cfg = self.dut, self.cfg
        dut.coord.value = sum(c << sum(cfg.coord_bits[:d]) for d, c in enumerate(self.coord))
        self.streams.quiesce()
        for p in range(cfg.net_ports):
            getattr(dut, f"link_in__{p}__flit").value = 0
            self.down[p].step(self.rng)
        await start(dut)
        cocotb.start_soon(self.streams.run())
        cocotb.start_soon(self._peers())

    async def _peers(self):
        while True:
            await FallingEdge(self.dut.clk)
            for peer in self.up + self.down:
                peer.step(self.rng)
            self.cycles += 1

    def random_packet(self, in_port, in_vc=None):
        """A packet into ``in_port`` (a network port, or net_ports + l for local port l)."""
        cfg, rng = self.cfg, self.rng
        self.tag += 1
        dst = tuple(rng.randrange(k) for k in cfg.dims)
        local = in_port >= cfg.net_ports
        src = self.coord if local else tuple(rng.randrange(k) for k in cfg.dims)
        h = Header(dst, rng.randrange(cfg.local_ports), src,
                   in_port - cfg.net_ports if local else rng.randrange(cfg.local_ports),
                   rng.randrange(cfg.classes), rng.randint(1, cfg.max_packet), self.tag % 256,
                   0 if local else rng.randrange(cfg.max_hops))
        hb = Header.bits(cfg)
        head = h.pack(cfg) | (self.tag << hb) | (rng.getrandbits(cfg.flit_bits - hb - TAG_BITS)
                                                 << (hb + TAG_BITS))
        flits = [head] + [rng.getrandbits(cfg.flit_bits) for _ in range(h.length - 1)]
        if local:
            in_vc = 0
        elif in_vc is None:
            in_vc = rng.randrange(cfg.total_vcs)
        port, vc = out_vc_of(cfg, self.coord, h, None if local else in_port, in_vc)
        out_head = Header(h.dst, h.dst_port, h.src, h.src_port, h.tclass, h.length, h.seq,
                          h.hops + (port is not None))
        want = [out_head.pack(cfg) | (head >> hb << hb)] + flits[1:]
        self.expect[self.tag] = (port, vc, h.dst_port, want)
        # Order holds per flow within one input VC (a peer may split a flow over VCs).
        self.flows[(in_port, in_vc, h.src, h.src_port, h.dst, h.dst_port, h.tclass)].append(
            self.tag)
        if local:
            self.inj[in_port - cfg.net_ports].send(flits)
        else:
            n = len(flits)
            self.up[in_port].packets[in_vc].append(
                [(f, int(i == 0), int(i == n - 1)) for i, f in enumerate(flits)])

    async def finish(self, budget=20000):
        for _ in range(budget // 10):
            await ClockCycles(self.dut.clk, 10)
            if (all(u.pending() == 0 for u in self.up) and all(s.pending == 0 for s in self.inj)
                    and not any(d.busy() for d in self.down) and self._delivered()
                    >= len(self.expect)):
                break
        else:
            raise AssertionError(f"timeout: {self._delivered()} of {len(self.expect)} packets")
        for u in self.up:
            u.corrupt = 0.0
        for d in self.down:
            d.drop = d.rev_corrupt = 0.0
        await ClockCycles(self.dut.clk, 20)
        self.check()

    def _delivered(self):
        return sum(sum(t for _, _, t in flits) for d in self.down for flits in d.out.values()) \
            + sum(b >> self.cfg.flit_bits & 1 for s in self.ej for b in s.beats)

    def check(self):
        cfg = self.cfg
        hb = Header.bits(cfg)
        seen = {}
        order = 0
        for d in self.down:
            for vc, flits in d.out.items():
                packet = []
                for data, head, tail in flits:
                    assert head == (not packet), f"port {d.p} VC {vc}: packets interleaved"
                    packet.append(data)
                    if tail:
                        seen[(packet[0] >> hb) & ((1 << TAG_BITS) - 1)] = (d.p, vc, None, packet)
                        packet = []
                assert not packet, f"port {d.p} VC {vc}: a packet without its tail"
        for lp, s in enumerate(self.ej):
            packet = []
            for beat in s.beats:
                packet.append(beat & ((1 << cfg.flit_bits) - 1))
                if beat >> cfg.flit_bits:
                    seen[(packet[0] >> hb) & ((1 << TAG_BITS) - 1)] = (None, 0, lp, packet)
                    packet = []
        for tag, (port, vc, dst_port, want) in self.expect.items():
            assert tag in seen, f"packet {tag} lost (expected on port {port} VC {vc})"
            gport, gvc, glp, flits = seen.pop(tag)
            assert (gport, gvc if port is not None else 0) == (port, vc if port is not None
                                                               else 0), (
                f"packet {tag}: left on port {gport} VC {gvc}, expected {port} VC {vc}")
            if port is None:
                assert glp == dst_port, f"packet {tag} ejected at {glp}, expected {dst_port}"
            assert flits == want, f"packet {tag} corrupted"
            order += 1
        assert not seen, f"unexpected packets {sorted(seen)}"
        self.dut._log.info("router at %s: %d packets checked in %d cycles", self.coord, order,
                           self.cycles)


def _order_check(tb):
    """Per flow and input VC, packets leave in the order they entered."""
    position = {}
    for d in tb.down:
        for flits in d.out.values():
            for i, (data, head, _) in enumerate(flits):
                if head:
                    position[(data >> Header.bits(tb.cfg)) & ((1 << TAG_BITS) - 1)] = (
                        d.p, i)
    for tags in tb.flows.values():
        places = [position[t] for t in tags if t in position]
        for a, b in zip(places, places[1:], strict=False):
            if a[0] == b[0]:
                assert a[1] < b[1], "packets of one flow reordered"


async def _traffic(tb, per_port):
    cfg = tb.cfg
    for _ in range(per_port):
        for p in range(cfg.ports):
            tb.random_packet(p)


@cocotb.test()
@cocotb.parametrize(where=["random", "origin", "far_corner", "edge"])
async def test_routes(dut, where):
    """Random packets on every input (network ports in random VCs, local ports), the router at
    a random coordinate and at the corners and edges where datelines and wraparounds are:
    output port and VC as the model routes them (dateline class, lane, class), hop count + 1,
    intact, never interleaved on a VC, in order per flow, with random stalls downstream and at
    ejection."""
    last = tuple(k - 1 for k in load_sidecar()["parameters"]["dims"])
    coord = {"random": None, "origin": (0,) * len(last), "far_corner": last,
             "edge": (last[0],) + (0,) * (len(last) - 1)}[where]
    tb = RouterBench(dut, coord)
    await tb.start()
    for d in tb.down:
        d.stall = 0.3
    await _traffic(tb, 12)
    await tb.finish()
    _order_check(tb)
    assert int(dut.crc_errors.value) == 0 and int(dut.retries.value) == 0


@cocotb.test()
async def test_links(dut):
    """Link layer: corrupted flits into the router are counted and retransmitted by the peer
    after the router's nak; flits the downstream peer refuses are replayed by the router
    (go-back-N, counted in retries); corrupted reverse messages are counted and lose no
    credit. Everything still arrives exactly once and in order."""
    tb = RouterBench(dut)
    await tb.start()
    for u in tb.up:
        u.corrupt = 0.05
    for d in tb.down:
        d.drop, d.rev_corrupt, d.stall = 0.05, 0.05, 0.2
    await _traffic(tb, 12)
    await tb.finish(budget=60000)
    _order_check(tb)
    crc, retries = int(dut.crc_errors.value), int(dut.retries.value)
    flits, revs = sum(u.corrupted for u in tb.up), sum(d.rev_corrupted for d in tb.down)
    assert flits > 0 and revs > 0
    assert crc == flits + revs, f"crc_errors {crc}, corrupted {flits} flits + {revs} messages"
    assert retries >= 1 and sum(d.naks for d in tb.down) > 0, retries
