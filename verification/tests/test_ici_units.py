"""Unit tests of the ICI router's parts, each alone in Amaranth's Python simulator: the link
layer (LinkTx and LinkRx over a corrupting wire), an input unit, an injection port, the
allocator, the ejection port's reassembly, and the delay line of long links. The router and
the network are verified as a whole by the cocotb suites in Verilator (test_ici.py); these
tests pin each part to its own contract, so a fault is found where it is."""

import random
from collections import deque

import pytest
from amaranth.hdl import ClockDomain, Elaboratable, Module, Signal
from amaranth.sim import Simulator

from hdl.ici.allocator import Allocator
from hdl.ici.harness import Checker
from hdl.ici.input import InjectionPort, InputUnit
from hdl.ici.link import LinkRx, LinkTx
from hdl.ici.packet import reverse_layout, wire_layout
from hdl.ici.router import Ejection
from hdl.lib.delay import DelayLine
from spec.ici import TIMESTAMP_BITS, ICIConfig
from spec.topology import node_index
from verification.models.ici import Header, injection_vc, min_hops, out_vc_of

CFG = ICIConfig(dims=(4, 4), classes=2, vcs=2, buffer_depth=4, max_packet=4, local_ports=2)


def _simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _random_header(cfg, rng, **fixed):
    h = Header(tuple(rng.randrange(k) for k in cfg.dims), rng.randrange(cfg.local_ports),
               tuple(rng.randrange(k) for k in cfg.dims), rng.randrange(cfg.local_ports),
               rng.randrange(cfg.classes), rng.randint(1, cfg.max_packet),
               rng.randrange(256), rng.randrange(cfg.max_hops + 1))
    for name, value in fixed.items():
        setattr(h, name, value)
    return h


def _flit_word(cfg, rng, header):
    hb = Header.bits(cfg)
    return header.pack(cfg) | (rng.getrandbits(cfg.flit_bits - hb) << hb)


class _Link(Elaboratable):
    """LinkTx -> wire -> LinkRx, with bits of the wire and of the reverse channel flipped
    where ``flip`` / ``flip_rev`` are set."""

    def __init__(self, cfg):
        self.tx, self.rx = LinkTx(cfg), LinkRx(cfg)
        self.flip = Signal(wire_layout(cfg).size)
        self.flip_rev = Signal(reverse_layout(cfg).size)

    def elaborate(self, platform):
        m = Module()
        m.submodules.tx, m.submodules.rx = self.tx, self.rx
        m.d.comb += [self.rx.link.flit.as_value().eq(self.tx.link.flit.as_value() ^ self.flip),
                     self.tx.link.rev.as_value().eq(self.rx.link.rev.as_value() ^ self.flip_rev)]
        return m


@pytest.mark.parametrize("error_rate", [0.0, 0.05])
def test_link(seed, error_rate):
    """Flits sent under credits over a wire that flips single bits both ways: every flit
    arrives once, in order and intact; every freed slot's credit comes back; bad CRCs are
    counted exactly (flits at the receiver, reverse messages at the sender) and losses are
    recovered by rewinds."""
    cfg = CFG
    rng = random.Random(seed)
    dut = _Link(cfg)
    V, B = cfg.total_vcs, cfg.buffer_depth
    wl = wire_layout(cfg)
    valid_bit = wl["valid"].offset
    sent, got = [], []
    counts = {"crc": 0, "rev": 0, "retries": 0, "rx_crc": 0, "tx_rev": 0}

    async def bench(ctx):
        tx, rx = dut.tx, dut.rx
        credits = [B] * V
        buffered = [0] * V
        cycle = 0
        while cycle < 3000 or len(got) < len(sent) or credits != [B] * V:
            assert cycle < 6000, f"not drained: {len(got)} of {len(sent)}, credits {credits}"
            sending = cycle < 3000
            flit = None
            if sending and rng.random() < 0.7:
                vc = rng.randrange(V)
                if credits[vc]:
                    flit = (rng.getrandbits(cfg.flit_bits), rng.randrange(2), rng.randrange(2),
                            vc)
            ctx.set(tx.i.valid, flit is not None)
            if flit is not None:
                for name, value in zip(("data", "head", "tail", "vc"), flit, strict=True):
                    ctx.set(getattr(tx.i.payload, name), value)
            flip = flip_rev = 0
            if sending and rng.random() < error_rate:
                flip = 1 << rng.randrange(wl.size)
                counts["crc"] += (ctx.get(tx.link.flit.valid) ^ (flip >> valid_bit)) & 1
            if sending and rng.random() < error_rate:
                flip_rev = 1 << rng.randrange(reverse_layout(cfg).size)
                counts["rev"] += 1
            ctx.set(dut.flip, flip)
            ctx.set(dut.flip_rev, flip_rev)
            freed = 0
            for v in range(V):
                if buffered[v] and rng.random() < 0.5:
                    freed |= 1 << v
                    buffered[v] -= 1
            ctx.set(rx.freed, freed)
            if flit is not None and ctx.get(tx.i.ready):
                sent.append(flit)
                credits[flit[3]] -= 1
            if ctx.get(rx.o.valid):
                p = ctx.get(rx.o.payload)
                got.append((p.data, p.head, p.tail, p.vc))
                buffered[p.vc] += 1
                assert buffered[p.vc] <= B, "a flit arrived without a credit"
            for v in range(V):
                credits[v] += ctx.get(tx.credits[v])
                assert credits[v] <= B, f"VC {v}: more credits returned than spent"
            counts["retries"] += ctx.get(tx.retry)
            counts["rx_crc"] += ctx.get(rx.crc_error)
            counts["tx_rev"] += ctx.get(tx.rev_error)
            await ctx.tick()
            cycle += 1

    _simulate(dut, bench)
    assert len(sent) > 1000
    assert got == sent
    assert counts["rx_crc"] == counts["crc"] and counts["tx_rev"] == counts["rev"], counts
    if error_rate:
        assert counts["crc"] > 0 and counts["rev"] > 0 and counts["retries"] > 0, counts
    else:
        assert counts["retries"] == counts["rx_crc"] == counts["tx_rev"] == 0, counts


@pytest.mark.parametrize("port, stage", [(0, False), (3, False), (CFG.net_ports + 1, False),
                                         (2, True)])
def test_input_unit(seed, port, stage):
    """Random flits into random VCs (never a full one) and random pops: per VC the flits
    leave in order and intact (on ``data`` at the pop, or in the next cycle with
    ``switch_stage``); full, nonempty and the front's marks follow the contents; a head's route
    is the golden model's output port and VC for this input and VC."""
    cfg = CFG.replace(switch_stage=stage)
    rng = random.Random(seed)
    coord = tuple(rng.randrange(k) for k in cfg.dims)
    dut = InputUnit(cfg, port)
    V, B = cfg.total_vcs, cfg.buffer_depth
    local = port >= cfg.net_ports

    def expected_route(h, vc):
        out, ovc = out_vc_of(cfg, coord, h, None if local else port, vc)
        return (cfg.net_ports + h.dst_port, 0) if out is None else (out, ovc)

    async def bench(ctx):
        for d, c in enumerate(coord):
            ctx.set(dut.coord[f"c{d}"], c)
        fifo = [deque() for _ in range(V)]
        popped = 0
        last = None             # with switch_stage: the flit popped in the last cycle
        for _ in range(2000):
            if last is not None:
                assert ctx.get(dut.data) == last
            for v in range(V):
                assert ctx.get(dut.full[v]) == (len(fifo[v]) == B)
                assert ctx.get(dut.nonempty[v]) == bool(fifo[v])
                if fifo[v]:
                    front = ctx.get(dut.front[v])
                    _, head, tail, route = fifo[v][0]
                    assert (front.head, front.tail) == (head, tail)
                    if head:
                        assert (front.op, front.ovc) == route
            vc = rng.randrange(V)
            write = rng.random() < 0.6 and len(fifo[vc]) < B
            ctx.set(dut.w.valid, write)
            if write:
                h = _random_header(cfg, rng)
                word, head, tail = _flit_word(cfg, rng, h), rng.randrange(2), rng.randrange(2)
                for name, value in (("data", word), ("head", head), ("tail", tail), ("vc", vc)):
                    ctx.set(getattr(dut.w.payload, name), value)
            ready = [v for v in range(V) if fifo[v]]
            pop = bool(ready) and rng.random() < 0.5
            ctx.set(dut.pop, pop)
            last = None
            if pop:
                v = rng.choice(ready)
                ctx.set(dut.pop_vc, v)
                if stage:
                    last = fifo[v][0][0]
                else:
                    assert ctx.get(dut.data) == fifo[v][0][0]
                fifo[v].popleft()
                popped += 1
            if write:
                fifo[vc].append((word, head, tail, expected_route(h, vc)))
            await ctx.tick()
        assert popped > 500

    _simulate(dut, bench)


def test_injection_port(seed):
    """Good and bad packets with random idle and random full VCs: good packets leave stamped
    (source, zero hops) in the model's injection VC, never into a full VC; bad ones
    (destination, port, class, length) are dropped whole (the head alone for a bad length) and
    counted."""
    cfg = CFG
    rng = random.Random(seed)
    coord = tuple(rng.randrange(k) for k in cfg.dims)
    lp = 1
    dut = InjectionPort(cfg, lp)
    hb = Header.bits(cfg)
    flits, want, drops = [], [], 0
    for _ in range(300):
        h = _random_header(cfg, rng)
        kind = rng.choice(["good"] * 4 + ["coord", "port", "class", "length"])
        if kind == "coord":
            h.dst = (cfg.dims[0],) + h.dst[1:]
        elif kind == "port":
            h.dst_port = cfg.local_ports
        elif kind == "class":
            h.tclass = cfg.classes
        elif kind == "length":
            h.length = rng.choice([0, cfg.max_packet + 1])
        packet = [_flit_word(cfg, rng, h)] + [rng.getrandbits(cfg.flit_bits)
                                              for _ in range(max(1, h.length) - 1)]
        if kind == "length":
            packet = packet[:1]
        flits += packet
        if kind != "good":
            drops += 1
            continue
        out = Header(h.dst, h.dst_port, coord, lp, h.tclass, h.length, h.seq, 0)
        vc = injection_vc(cfg, coord, h.dst, h.dst_port, h.tclass)
        stamped = [out.pack(cfg) | (packet[0] >> hb << hb)] + packet[1:]
        want += [(f, int(i == 0), int(i == len(packet) - 1), vc)
                 for i, f in enumerate(stamped)]
    got, counted = [], 0

    async def bench(ctx):
        nonlocal counted
        for d, c in enumerate(coord):
            ctx.set(dut.coord[f"c{d}"], c)
        pos = 0
        for _ in range(20000):
            if pos == len(flits):
                break
            full = rng.getrandbits(cfg.total_vcs) if rng.random() < 0.4 else 0
            ctx.set(dut.full, full)
            offer = rng.random() < 0.7
            ctx.set(dut.i.valid, offer)
            ctx.set(dut.i.payload, flits[pos])
            if ctx.get(dut.o.valid):
                p = ctx.get(dut.o.payload)
                assert not (full >> p.vc) & 1, "written into a full VC"
                got.append((p.data, p.head, p.tail, p.vc))
            counted += ctx.get(dut.drop)
            if offer and ctx.get(dut.i.ready):
                pos += 1
            await ctx.tick()
        assert pos == len(flits), "injection stalled"

    _simulate(dut, bench)
    assert got == want
    assert counted == drops > 0


@pytest.mark.parametrize("iters", [1, 2, 3])
def test_allocator(seed, iters):
    """Random packets queued at every input VC (routes at random), random credits and output
    readiness, with 1 to 3 allocator iterations: every transfer is of a requesting flit
    (buffered, credited, output ready); one flit per output and per input in a cycle; a head
    takes its route's output VC (any free one at an ejection port) and its packet's flits
    follow on it uninterrupted to the tail; every packet gets through. On network outputs: no
    output is left idle that every requesting VC of an unmatched input wanted; with more than
    one iteration (packets in flight first) no input sends a head while one of its body flits
    wanted an output that is left idle."""
    cfg = CFG.replace(alloc_iters=iters)
    rng = random.Random(seed)
    dut = Allocator(cfg)
    P, NP, V = cfg.ports, cfg.net_ports, cfg.total_vcs
    queues = [[deque() for _ in range(V)] for _ in range(P)]
    total = 0
    for i in range(P):
        for v in range(V):
            for _ in range(rng.randint(0, 6)):
                op = rng.randrange(P)
                ovc = 0 if op >= NP else rng.randrange(V)
                n = rng.randint(1, cfg.max_packet)
                for k in range(n):
                    queues[i][v].append((int(k == 0), int(k == n - 1), op, ovc, total))
                total += 1

    async def bench(ctx):
        owner = {}              # (output, output VC) -> (input, input VC) of its packet
        route = {}              # (input, input VC) -> (output, output VC) of its packet
        done = 0
        for _ in range(20000):
            if done == total:
                break
            ready = rng.getrandbits(P)
            credit = [rng.getrandbits(V) for _ in range(P)]
            ctx.set(dut.out_ready, ready)
            for i in range(P):
                ctx.set(dut.nonempty[i], sum(1 << v for v in range(V) if queues[i][v]))
                ctx.set(dut.credit[i], credit[i])
                for v in range(V):
                    if queues[i][v]:
                        head, tail, op, ovc, _ = queues[i][v][0]
                        for name, value in (("head", head), ("tail", tail), ("op", op),
                                            ("ovc", ovc)):
                            ctx.set(dut.front[i][v][name], value)
            pops = {i: ctx.get(dut.pop_vc[i]) for i in range(P) if ctx.get(dut.pop[i])}
            # Per input, the network outputs its VCs request, and of those its body flits'.
            wants, body_wants = {}, {}
            for i in range(P):
                for v in range(V):
                    if not queues[i][v]:
                        continue
                    head, _, op, ovc, _ = queues[i][v][0]
                    if op >= NP:
                        wants.setdefault(i, set()).add(None)  # an ejection: not checked
                        continue
                    vc = ovc if head else route[(i, v)][1]
                    if (ready >> op) & 1 and (credit[op] >> vc) & 1 \
                            and not (head and (op, vc) in owner):
                        wants.setdefault(i, set()).add(op)
                        if not head:
                            body_wants.setdefault(i, set()).add(op)
            idle = {o for o in range(NP) if not ctx.get(dut.transfer[o].sent)}
            for i, outs in wants.items():
                if i not in pops and len(outs) == 1 and outs <= idle:
                    raise AssertionError(f"input {i} unmatched, output {outs} idle")
                if iters > 1 and i in pops and queues[i][pops[i]][0][0] \
                        and body_wants.get(i, set()) & idle:
                    raise AssertionError(f"input {i} sent a head before a body flit")
            sources = []
            for o in range(P):
                t = ctx.get(dut.transfer[o])
                assert t.sent == (t.grant != 0)
                if not t.sent:
                    continue
                assert t.grant & (t.grant - 1) == 0, f"output {o}: grant {t.grant:b} not one-hot"
                src = t.grant.bit_length() - 1
                sources.append(src)
                assert src in pops, f"output {o}: transfer from input {src} without a pop"
                v = pops[src]
                head, tail, op, ovc, packet = queues[src][v][0]
                assert (ready >> o) & 1 and (credit[o] >> t.vc) & 1, "not ready or no credit"
                assert (t.head, t.tail) == (head, tail)
                if head:
                    assert op == o, "head sent off its route"
                    # A network output's VC is the route's; an ejection port's any free one.
                    assert o >= NP or ovc == t.vc, "head sent off its route's VC"
                    assert (o, t.vc) not in owner, "output VC taken while held"
                    owner[(o, t.vc)] = (src, v)
                    route[(src, v)] = (o, t.vc)
                else:
                    assert route.get((src, v)) == (o, t.vc), "body flit off its packet's VC"
                    assert owner.get((o, t.vc)) == (src, v), "packets interleaved"
                if tail:
                    del owner[(o, t.vc)]
                    done += 1
                queues[src][v].popleft()
            assert sorted(sources) == sorted(pops), "a pop without a transfer"
            assert len(set(sources)) == len(sources)
            await ctx.tick()
        assert done == total, f"{done} of {total} packets through"

    _simulate(dut, bench)


def test_ejection(seed):
    """Packets whose flits arrive interleaved over the ejection VCs (each VC one packet at a
    time, only into room), with random backpressure from the endpoint: every packet leaves
    whole, unmixed, in the order its head arrived."""
    cfg = CFG
    rng = random.Random(seed)
    dut = Ejection(cfg)
    V = cfg.total_vcs
    packets = [[rng.getrandbits(cfg.flit_bits) for _ in range(rng.randint(1, cfg.max_packet))]
               for _ in range(300)]
    arrived, got = [], []

    async def bench(ctx):
        todo = deque(packets)
        sending = {}            # vc -> flits left of the packet on it
        current = []
        for _ in range(20000):
            if not todo and not sending and len(got) == len(packets):
                break
            room = ctx.get(dut.room)
            free = [v for v in range(V) if v not in sending]
            if todo and free and rng.random() < 0.3:
                v = rng.choice(free)
                packet = todo.popleft()
                sending[v] = (deque(packet), packet)
            ready = [v for v in sending if (room >> v) & 1]
            flit = None
            if ready and rng.random() < 0.8:
                v = rng.choice(ready)
                flits, packet = sending[v]
                head = len(flits) == len(packet)
                if head:
                    arrived.append(packet)
                flit = (flits.popleft(), int(head), int(not flits), v)
                if not flits:
                    del sending[v]
            ctx.set(dut.i.valid, flit is not None)
            if flit is not None:
                for name, value in zip(("data", "head", "tail", "vc"), flit, strict=True):
                    ctx.set(getattr(dut.i.payload, name), value)
            take = rng.random() < 0.6
            ctx.set(dut.o.ready, take)
            if take and ctx.get(dut.o.valid):
                beat = ctx.get(dut.o.payload)
                current.append(beat.data)
                if beat.last:
                    got.append(current)
                    current = []
            await ctx.tick()
        assert len(got) == len(packets), f"{len(got)} of {len(packets)} packets delivered"

    _simulate(dut, bench)
    assert got == arrived


@pytest.mark.parametrize("cycles", [1, 2, 3, DelayLine.SHIFT_LIMIT, 9, 64])
def test_delay_line(seed, cycles):
    """A link's delay line gives every input value back exactly ``cycles`` cycles later (zero
    before), as registers (short lines) or as a ring buffer in a memory (long ones); a reset
    in the middle of a stream starts it afresh: zero again for ``cycles`` cycles, nothing
    from before the reset."""
    rng = random.Random(seed)
    dut = DelayLine(89, cycles)
    runs = [[rng.getrandbits(89) for _ in range(3 * cycles + 20 + extra)]
            for extra in (0, rng.randrange(cycles + 1))]
    got = [[], []]
    top = Module()
    top.domains.sync = sync = ClockDomain("sync")
    top.submodules.dut = dut

    async def bench(ctx):
        for n, values in enumerate(runs):
            if n:
                ctx.set(sync.rst, 1)
                await ctx.tick()
                ctx.set(sync.rst, 0)
            for v in values:
                ctx.set(dut.i, v)
                got[n].append(ctx.get(dut.o))
                await ctx.tick()

    _simulate(top, bench)
    for values, out in zip(runs, got, strict=True):
        assert out == [0] * cycles + values[: len(values) - cycles]


CHECK_CFG = ICIConfig(dims=(4, 4), classes=2, flit_bits=128, max_packet=4)
CHECK_NODE = (2, 1)
"""The endpoint (port 0) whose Checker the tests feed."""


def _harness_payload(cfg, src_ep, tclass, seq, idx):
    """A harness payload word as docs/ici.md states it: (sequence, flit index, class, source
    endpoint), least significant first, repeated over the flit."""
    ep_bits = max(1, (cfg.endpoints - 1).bit_length())
    unit = (seq & 0xFF) | (idx & 0x7F) << 8 | tclass << 15 | src_ep << (15 + cfg.class_bits)
    width = 15 + cfg.class_bits + ep_bits
    word = 0
    for pos in range(0, cfg.flit_bits, width):
        word |= unit << pos
    return word & ((1 << cfg.flit_bits) - 1)


def _checked_packet(cfg, seq, *, src=(0, 3), length=2, **header):
    """The flits ``(data, last)`` of a packet the harness's generators would send to
    ``CHECK_NODE``, with ``header`` fields overridden."""
    h = Header(CHECK_NODE, 0, src, 0, 0, length, seq, min_hops(cfg, src, CHECK_NODE))
    for name, value in header.items():
        setattr(h, name, value)
    src_ep = node_index(cfg.dims, src) * cfg.local_ports
    head_bits = cfg.header_bits + TIMESTAMP_BITS
    head = _harness_payload(cfg, src_ep, 0, seq, 0) >> head_bits << head_bits | h.pack(cfg)
    flits = [head] + [_harness_payload(cfg, src_ep, 0, seq, i) for i in range(1, length)]
    return [(f, int(i == len(flits) - 1)) for i, f in enumerate(flits)]


def _flip(packet, flit, bit):
    data, last = packet[flit]
    return [*packet[:flit], (data ^ (1 << bit), last), *packet[flit + 1:]]


@pytest.mark.parametrize("case, want", [
    ("good", "NONE"),
    ("lost", "SEQUENCE"),
    ("duplicated", "SEQUENCE"),
    ("reordered", "SEQUENCE"),
    ("body corrupted", "BODY_PAYLOAD"),
    ("head payload corrupted", "HEAD_PAYLOAD"),
    ("wrong destination", "WRONG_DESTINATION"),
    ("hop count", "HOP_COUNT"),
    ("tail early", "TAIL_POSITION"),
    ("bad length", "BAD_FIELDS"),
])
def test_checker_flags_every_fault(case, want):
    """The harness's synthesizable Checker (what the ICI traffic, soak and benchmark runs
    trust) flags a lost, duplicated, reordered, corrupted or misrouted packet with the right
    code, and passes a good stream: a checker stuck at "no error" fails this test."""
    cfg = CHECK_CFG
    head_payload_bit = cfg.header_bits + TIMESTAMP_BITS + 3
    packets = {
        "good": [_checked_packet(cfg, 0), _checked_packet(cfg, 1)],
        "lost": [_checked_packet(cfg, 0), _checked_packet(cfg, 2)],
        "duplicated": [_checked_packet(cfg, 0), _checked_packet(cfg, 0)],
        "reordered": [_checked_packet(cfg, 1), _checked_packet(cfg, 0)],
        "body corrupted": [_flip(_checked_packet(cfg, 0), 1, 77)],
        "head payload corrupted": [_flip(_checked_packet(cfg, 0), 0, head_payload_bit)],
        "wrong destination": [_checked_packet(cfg, 0, dst=(0, 0))],
        "hop count": [_checked_packet(cfg, 0, hops=min_hops(cfg, (0, 3), CHECK_NODE) + 1)],
        "tail early": [[(f, 1) if i == 1 else (f, last) for i, (f, last)
                        in enumerate(_checked_packet(cfg, 0, length=3)[:2])]],
        "bad length": [_checked_packet(cfg, 0, length=0)[:1]],
    }[case]
    flits = [f for p in packets for f in p]
    dut = Checker(cfg)
    seen = {}

    async def bench(ctx):
        for d, c in enumerate(CHECK_NODE):
            ctx.set(dut.node[f"c{d}"], c)
        ctx.set(dut.port, 0)
        ctx.set(dut.stall_rate, 0)
        for data, last in flits:
            ctx.set(dut.i.valid, 1)
            ctx.set(dut.i.payload.data, data)
            ctx.set(dut.i.payload.last, last)
            await ctx.tick()
        ctx.set(dut.i.valid, 0)
        await ctx.tick()
        seen.update(flits=ctx.get(dut.flits), errors=ctx.get(dut.errors),
                    code=ctx.get(dut.error_code).name)

    _simulate(dut, bench)
    assert seen["flits"] == len(flits)
    assert seen["code"] == want, seen
    assert (seen["errors"] == 0) == (want == "NONE"), seen
