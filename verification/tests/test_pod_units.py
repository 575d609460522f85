"""Unit tests of the network interface's endpoint (hdl/nic/endpoint.py) in Amaranth's Python
simulator: configuration refusals; four chips, each a Sender, a Receiver and a Responder with a
Python memory, joined by a Python network that stamps sources and delivers whole packets interleaved
across sources and classes (in order per source and class, as the ICI does), exchanging random
writes, adds (int32 and fp32, special values included), acknowledged writes and reads under
random idle and backpressure; and a Receiver fed bad packets among good ones."""

import itertools
import math
import random
from collections import deque
from dataclasses import dataclass

import numpy as np
import pytest
from amaranth.hdl import Elaboratable, Module, Shape
from amaranth.lib import wiring
from amaranth.sim import Simulator

from hdl.nic.collective import CollectiveEngine, descriptor_layout
from hdl.nic.endpoint import (
    REQUEST_CLASS,
    RESPONSE_CLASS,
    IciFmt,
    IciOp,
    PacketKind,
    Receiver,
    Responder,
    Sender,
    endpoint_header_layout,
    read_beat_layout,
    read_request_layout,
    write_beat_layout,
)
from hdl.nic.hbm_port import HbmPort, SpaceSplit
from hdl.nic.interface import MessageMux
from sim.collectives_model import Network, bisection_bound, route
from spec.collectives import a2a_displacements
from spec.config import ConfigError
from spec.ici import ICIConfig
from spec.nic import NICConfig
from spec.protocol import NO_SEM, Collective, IciSpace
from spec.topology import node_coords, node_index
from verification.models.collectives import (
    add_bytes,
    all_to_all_schedule,
    random_elements,
    ring_collective,
)
from verification.models.ici import Header

CFG = NICConfig(ici=ICIConfig(dims=(2, 2), classes=2, flit_bits=128, max_packet=4))
CHIPS = [(0, 0), (1, 0), (0, 1), (1, 1)]
FLOWS = {"fast": (1.0, 1.0), "idle": (0.4, 1.0), "backpressure": (1.0, 0.3)}
STALL = 500
"""Cycles without a flit sent or a beat written after which a test calls the design stuck."""
def _simulate(dut, bench):
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


def _endpoint(cfg, coords, port=0):
    node, stride = 0, 1
    for c, k in zip(coords, cfg.ici.dims, strict=True):
        node += c * stride
        stride *= k
    return node * cfg.ici.local_ports + port


def _coords(cfg, endpoint):
    node = endpoint // cfg.ici.local_ports
    out = []
    for k in cfg.ici.dims:
        out.append(node % k)
        node //= k
    return tuple(out)


def _field(cfg, word, name):
    """A field of the endpoint header of a head flit."""
    f = endpoint_header_layout(cfg)[name]
    width = Shape.cast(f.shape).width
    return (word >> (cfg.ici.header_bits + f.offset)) & ((1 << width) - 1)


def _pack(layout, **fields):
    word = 0
    for name, value in fields.items():
        word |= int(getattr(value, "value", value)) << layout[name].offset
    return word


class _Driver:
    """One stream source: offers its queued beats in order with random idle, holding a beat
    until it is taken."""

    def __init__(self, stream, rng, rate, set_payload):
        self.stream, self.rng, self.rate, self.set_payload = stream, rng, rate, set_payload
        self.queue, self.current = deque(), None

    def drive(self, ctx):
        if self.current is None and self.queue and self.rng.random() < self.rate:
            self.current = self.queue.popleft()
        ctx.set(self.stream.valid, self.current is not None)
        if self.current is not None:
            self.set_payload(ctx, self.stream.payload, self.current)

    def taken(self, ctx):
        """After :meth:`drive`: the beat taken this cycle, if any."""
        if self.current is not None and ctx.get(self.stream.ready):
            beat, self.current = self.current, None
            return beat
        return None

    @property
    def idle(self):
        return self.current is None and not self.queue


def _sink(ctx, stream, rng, rate):
    """Random backpressure on a stream; the beat taken this cycle, if any."""
    ready = rng.random() < rate
    ctx.set(stream.ready, ready)
    return ctx.get(stream.payload) if ready and ctx.get(stream.valid) else None


@dataclass
class _Message:
    """A command for a Sender (``data`` the bytes of a WRITE, ``bytes`` of a READ)."""

    kind: PacketKind
    dst: tuple
    space: int
    address: int
    data: bytes = b""
    bytes: int = 0
    op: IciOp = IciOp.STORE
    fmt: str = "int32"
    ack: int = 0
    tag: int = 0
    sem: int = 0
    reply_space: int = 0
    reply_address: int = 0


def _set_command(ctx, payload, msg):
    for d, c in enumerate(msg.dst):
        ctx.set(payload.dst[f"c{d}"], c)
    fmt = IciFmt.FP32 if msg.fmt == "fp32" else IciFmt.INT32
    for name, value in (("kind", msg.kind), ("dst_port", 0), ("space", msg.space),
                        ("address", msg.address), ("op", msg.op), ("fmt", fmt),
                        ("ack", msg.ack), ("tag", msg.tag), ("sem", msg.sem),
                        ("reply_space", msg.reply_space),
                        ("reply_address", msg.reply_address),
                        ("bytes", len(msg.data) if msg.kind == PacketKind.WRITE else msg.bytes)):
        ctx.set(getattr(payload, name), value)


def _set_value(ctx, payload, value):
    ctx.set(payload, value)


def _set_bits(ctx, payload, value):
    ctx.set(payload.as_value(), value)


def _set_eject(ctx, payload, flit):
    ctx.set(payload.data, flit[0])
    ctx.set(payload.last, flit[1])


def _beats(cfg, data, rng):
    """Data flits of a message: its bytes little-endian, the last flit padded with noise."""
    fb = cfg.flit_bytes
    out = []
    for start in range(0, len(data), fb):
        chunk = data[start:start + fb]
        chunk = chunk + bytes(rng.getrandbits(8) for _ in range(fb - len(chunk)))
        out.append(int.from_bytes(chunk, "little"))
    return out


class _Chip(Elaboratable):
    """One chip's endpoint: its Sender, Receiver and Responder (``respond`` to ``job``)."""

    def __init__(self, cfg):
        self.sender = Sender(cfg)
        self.receiver = Receiver(cfg)
        self.responder = Responder(cfg)

    def elaborate(self, platform):
        m = Module()
        m.submodules.sender = self.sender
        m.submodules.receiver = self.receiver
        m.submodules.responder = self.responder
        wiring.connect(m, self.receiver.respond, self.responder.job)
        return m


class _Pod(Elaboratable):
    def __init__(self, chips):
        self.chips = chips

    def elaborate(self, platform):
        m = Module()
        for i, chip in enumerate(self.chips):
            m.submodules[f"chip{i}"] = chip
        return m


class _Memory:
    """A chip's HBM and VMEM as bytes, with in-order read ports answering after random
    delays: a read returns the memory as it was when the read was taken."""

    def __init__(self, cfg, contents):
        self.cfg, self.bytes = cfg, dict(contents)

    def write(self, beat):
        for i in range(self.cfg.flit_bytes):
            if beat.strobe >> i & 1:
                self.bytes[(beat.space.value, beat.address + i)] = beat.data >> (8 * i) & 0xFF

    def read(self, beat):
        return sum(self.bytes.get((beat.space.value, beat.address + i), 0) << (8 * i)
                   for i in range(self.cfg.flit_bytes))

    def region(self, space, address, size):
        return bytes(self.bytes.get((space, address + i), 0) for i in range(size))


def _store(contents, space, address, data):
    contents.update({(space, address + i): b for i, b in enumerate(data)})


class _Network:
    """Collects each output stream's flits into packets, checks their class, destination and
    sequence number, stamps the source and queues them for their destination, one queue per
    source and class."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.partial, self.seq = {}, {}
        self.queues = {e: {} for e in range(cfg.ici.endpoints)}

    def flit(self, source, tclass, word):
        cfg = self.cfg
        flits = self.partial.setdefault((source, tclass), [])
        flits.append(word)
        head = Header.unpack(cfg.ici, flits[0])
        if len(flits) < head.length:
            return
        self.partial[(source, tclass)] = []
        dst = _endpoint(cfg, head.dst, head.dst_port)
        kind = PacketKind(_field(cfg, flits[0], "kind"))
        assert head.tclass == tclass
        requests = (PacketKind.WRITE, PacketKind.READ)
        assert tclass == (REQUEST_CLASS if kind in requests else RESPONSE_CLASS)
        assert head.length <= cfg.ici.max_packet
        key = (source, dst, tclass)
        assert head.seq == self.seq.get(key, 0) % 256
        self.seq[key] = self.seq.get(key, 0) + 1
        head.src, head.src_port = _coords(cfg, source), 0
        hb = cfg.ici.header_bits
        flits[0] = (flits[0] >> hb << hb) | head.pack(cfg.ici)
        self.queues[dst].setdefault((source, tclass), deque()).append(flits)

    def next_packet(self, dst, rng):
        """A whole packet for ``dst`` from a random source and class, or None."""
        waiting = [q for q in self.queues[dst].values() if q]
        return rng.choice(waiting).popleft() if waiting else None


class _Traffic:
    """Random messages among the chips and what they must leave behind: every chip's memory,
    the completions each receiver must report per (source, kind) in order, and the contents
    of a message's region when it completes."""

    def __init__(self, cfg, rng, count):
        self.cfg, self.rng = cfg, rng
        ends = [_endpoint(cfg, c) for c in CHIPS]
        self.messages = {e: [] for e in ends}
        self.initial = {e: {} for e in ends}
        for e in ends:
            for space in (0, 1):
                for r in range(4):
                    _store(self.initial[e], space, 0x100000 + r * 1024,
                           bytes(rng.getrandbits(8) for _ in range(1024)))
        self.final = {e: dict(self.initial[e]) for e in ends}
        self.completions = {e: {} for e in ends}
        self.snapshots = {e: {} for e in ends}
        for s in ends:
            for j in range(count):
                self._message(s, rng.choice(ends), j)

    def _size(self, unit):
        cfg, rng = self.cfg, self.rng
        return rng.choice([0, unit, cfg.flit_bytes, cfg.packet_bytes, cfg.packet_bytes + unit,
                           unit * rng.randint(1, (3 * cfg.packet_bytes + 5) // unit)])

    def _complete(self, receiver, src, kind, sem, tag, region=None):
        self.completions[receiver].setdefault((src, kind), []).append((sem, tag))
        self.snapshots[receiver].setdefault((src, kind), []).append(region)

    def _message(self, s, d, j):
        rng = self.rng
        tag, sem, space = rng.randrange(16), rng.randrange(31), rng.randrange(2)
        pick = rng.random()
        if pick < 0.25:
            size = self._size(1)
            address = 0x200000 + (s * 64 + j) * 1024
            msg = _Message(PacketKind.READ, _coords(self.cfg, d), space,
                           0x100000 + rng.randrange(4) * 1024 + rng.randrange(4) * 16,
                           bytes=size, tag=tag, sem=sem, reply_space=rng.randrange(2),
                           reply_address=address)
            data = bytes(self.initial[d][(space, msg.address + i)] for i in range(size))
            _store(self.final[s], msg.reply_space, address, data)
            self._complete(s, d, PacketKind.READ_DATA, sem, tag, (msg.reply_space, address, data))
            self.messages[s].append(msg)
            return
        fmt = rng.choice(["int32", "fp32"])
        op = IciOp.STORE if pick < 0.5 else rng.choice([IciOp.ADD, IciOp.ADD_FINAL])
        size = self._size(1 if op == IciOp.STORE else 4)
        address = (s * 64 + j) * 1024
        repeats = 1 if op == IciOp.STORE else rng.choice([1, 2])
        if op != IciOp.STORE:
            present = random_elements(rng, fmt, size // 4)
            _store(self.initial[d], space, address, present)
            _store(self.final[d], space, address, present)
        for _ in range(repeats):
            data = (bytes(rng.getrandbits(8) for _ in range(size)) if op == IciOp.STORE
                    else random_elements(rng, fmt, size // 4))
            ack = rng.randrange(2)
            msg = _Message(PacketKind.WRITE, _coords(self.cfg, d), space, address, data, op=op,
                           fmt=fmt, ack=ack, tag=tag, sem=sem)
            if op != IciOp.STORE:
                present = bytes(self.final[d][(space, address + i)] for i in range(size))
                data = add_bytes(fmt, data, present)
            _store(self.final[d], space, address, data)
            self._complete(d, s, PacketKind.WRITE, sem, tag, (space, address, data))
            if ack:
                self._complete(s, d, PacketKind.ACK, NO_SEM, tag)
            self.messages[s].append(msg)


@pytest.mark.parametrize("flow", list(FLOWS))
def test_endpoints(seed, flow):
    """Four chips send each other random messages (empty, one byte or element, exact flits
    and packets, past a packet, several packets): stores, int32 and fp32 adds (twice in a row
    to one region, so the second add reads the first one's result), acknowledged writes and
    reads of HBM and VMEM. Every chip's memory ends bit-exactly as the golden model says
    (stores and read data copied, adds in the golden model's order ``arriving + present``)
    and nothing else is written; every completion (write, read data, ack) arrives once, in
    order per source and kind, with its semaphore and tag, and when it arrives its message's
    bytes are in memory; the network sees requests in class 0 and responses in class 1 with
    consecutive sequence numbers; no sequence error, no drop."""
    cfg = CFG
    rng = random.Random(seed)
    rate, ready = FLOWS[flow]
    traffic = _Traffic(cfg, rng, 10)
    ends = list(traffic.messages)
    dut = _Pod([_Chip(cfg) for _ in ends])
    net = _Network(cfg)
    memories = {e: _Memory(cfg, traffic.initial[e]) for e in ends}
    completions = {e: {} for e in ends}
    total = sum(len(v) for c in traffic.completions.values() for v in c.values())

    def check_completion(e, done):
        key = (done.src, done.kind)
        got = completions[e].setdefault(key, [])
        got.append((done.sem, done.tag))
        region = traffic.snapshots[e][key][len(got) - 1]
        if region is not None:
            space, address, data = region
            assert memories[e].region(space, address, len(data)) == data, \
                f"{done.kind} from {done.src} at {e} completed before its data"

    async def bench(ctx):
        ports = []
        for e, chip in zip(ends, dut.chips, strict=True):
            p = {
                "cmd": _Driver(chip.sender.cmd, rng, rate, _set_command),
                "data": _Driver(chip.sender.data, rng, rate, _set_value),
                "eject": _Driver(chip.receiver.i, rng, rate, _set_eject),
                "recv_data": _Driver(chip.receiver.read_data, rng, rate, _set_value),
                "resp_data": _Driver(chip.responder.read_data, rng, rate, _set_value),
            }
            p["cmd"].queue.extend(traffic.messages[e])
            for msg in traffic.messages[e]:
                p["data"].queue.extend(_beats(cfg, msg.data, rng))
            ports.append(p)
        count, last = 0, 0
        for cycle in range(40000):
            if count == total:
                break
            assert cycle - last < STALL, f"nothing moved for {STALL} cycles"
            for e, chip, p in zip(ends, dut.chips, ports, strict=True):
                if p["eject"].idle and (packet := net.next_packet(e, rng)):
                    p["eject"].queue.extend((f, int(i == len(packet) - 1))
                                            for i, f in enumerate(packet))
                for driver in p.values():
                    driver.drive(ctx)
                outs = [(t, _sink(ctx, o, rng, ready)) for t, o in
                        ((REQUEST_CLASS, chip.sender.o), (RESPONSE_CLASS, chip.responder.o))]
                beat = _sink(ctx, chip.receiver.write, rng, ready)
                reads = [(_sink(ctx, chip.receiver.read, rng, ready), p["recv_data"]),
                         (_sink(ctx, chip.responder.read, rng, ready), p["resp_data"])]
                done = _sink(ctx, chip.receiver.done, rng, ready)
                for driver in p.values():
                    driver.taken(ctx)
                for tclass, flit in outs:
                    if flit is not None:
                        net.flit(e, tclass, flit)
                for read, driver in reads:
                    if read is not None:
                        driver.queue.append(memories[e].read(read))
                if beat is not None:
                    memories[e].write(beat)
                if done is not None:
                    check_completion(e, done)
                    count += 1
                if any(x is not None for x in (beat, done, *(o for _, o in outs))):
                    last = cycle
            await ctx.tick()
        assert completions == traffic.completions
        for e in ends:
            assert memories[e].bytes == traffic.final[e], f"memory of endpoint {e}"
        for e, chip in zip(ends, dut.chips, strict=True):
            r = chip.receiver
            packets = sum(n for (_, dst, _), n in net.seq.items() if dst == e)
            assert (ctx.get(r.packets), ctx.get(r.seq_errors), ctx.get(r.dropped)) == \
                (packets, 0, 0)
        sent = sum(ctx.get(c.sender.packets) + ctx.get(c.responder.packets) for c in dut.chips)
        assert sent == sum(net.seq.values())

    _simulate(dut, bench)


class _Packets:
    """Head flits from source (0, 1) to (1, 1), with consecutive sequence numbers per class
    unless told otherwise."""

    def __init__(self, cfg):
        self.cfg, self.seq = cfg, {}

    def head(self, tclass, length, seq=None, **fields):
        cfg = self.cfg
        if seq is None:
            seq = self.seq.get(tclass, 0)
        self.seq[tclass] = seq + 1
        head = Header((1, 1), 0, (0, 1), 0, tclass, length, seq).pack(cfg.ici)
        return head | _pack(endpoint_header_layout(cfg), **fields) << cfg.ici.header_bits


def test_bad_packets(seed):
    """Bad packets among good ones: each is consumed with its body and counted in ``dropped``
    (a write in the response class, an add in format 3, op 3, a write whose length does not
    match its bytes, a read of three flits, an ack with a body) without touching memory or
    completing; a wrong sequence number is counted and the packet still served. The good
    packets around them work: stores, an acknowledged int32 add (read, add, write, then its
    completion and its ACK for the source), a read (its READ_DATA job for the Responder), an
    ACK and a READ_DATA (their completions)."""
    cfg = CFG
    rng = random.Random(seed)
    dut = Receiver(cfg)
    fb = cfg.flit_bytes
    words = [rng.getrandbits(cfg.ici.flit_bits) for _ in range(12)]
    present = rng.getrandbits(cfg.ici.flit_bits)
    hdr = _Packets(cfg)
    write = {"kind": PacketKind.WRITE, "last": 1, "bytes": fb, "sem": 5}
    request = _pack(read_request_layout(cfg), space=1, address=0x7000, bytes=100)
    packets = [
        [hdr.head(0, 2, address=0x100, **write), words[0]],
        [hdr.head(0, 2, seq=7, address=0x200, **write), words[1]],
        [hdr.head(1, 2, address=0x300, **write), words[2]],
        [hdr.head(0, 2, address=0x300, op=IciOp.ADD, fmt=3, **write), words[3]],
        [hdr.head(0, 2, address=0x300, op=3, **write), words[4]],
        [hdr.head(0, 3, address=0x300, **write), words[5], words[6]],
        [hdr.head(0, 3, kind=PacketKind.READ, address=0x300, last=1), request, words[7]],
        [hdr.head(1, 2, kind=PacketKind.ACK, tag=3), words[8]],
        [hdr.head(0, 2, address=0x500, op=IciOp.ADD, fmt=IciFmt.INT32, ack=1, tag=9,
                  **write), words[9]],
        [hdr.head(0, 2, kind=PacketKind.READ, space=0, address=0x600, last=1, tag=4, sem=6),
         request],
        [hdr.head(1, 1, kind=PacketKind.ACK, tag=11, sem=NO_SEM)],
        [hdr.head(1, 2, kind=PacketKind.READ_DATA, space=1, address=0x800, last=1, bytes=3, tag=4,
                  sem=6), words[10]],
    ]
    memory = {0x500: present}
    done, jobs = [], []

    async def bench(ctx):
        eject = _Driver(dut.i, rng, 0.7, _set_eject)
        read_data = _Driver(dut.read_data, rng, 0.7, _set_value)
        for p in packets:
            eject.queue.extend((f, int(i == len(p) - 1)) for i, f in enumerate(p))
        for _ in range(300):
            eject.drive(ctx)
            read_data.drive(ctx)
            beat = _sink(ctx, dut.write, rng, 0.7)
            read = _sink(ctx, dut.read, rng, 0.7)
            finished = _sink(ctx, dut.done, rng, 0.7)
            job = _sink(ctx, dut.respond, rng, 0.7)
            eject.taken(ctx)
            read_data.taken(ctx)
            if beat is not None:
                assert beat.strobe == (1 << fb) - 1 or beat.address == 0x800
                memory[beat.address] = beat.data & int.from_bytes(
                    bytes(0xFF * (beat.strobe >> i & 1) for i in range(fb)), "little")
            if read is not None:
                read_data.queue.append(memory[read.address])
            if finished is not None:
                done.append((finished.kind, finished.src, finished.sem, finished.tag))
            if job is not None:
                fields = (job.kind, job.dst.c0, job.dst.c1, job.bytes, job.tag, job.sem)
                if job.kind == PacketKind.READ_DATA:
                    fields += (job.space.value, job.address, job.reply_space.value,
                               job.reply_address)
                jobs.append(fields)
            await ctx.tick()
        assert (ctx.get(dut.packets), ctx.get(dut.seq_errors), ctx.get(dut.dropped)) == \
            (len(packets), 1, 6)

    _simulate(dut, bench)
    src = _endpoint(cfg, (0, 1))
    lanes = [((present >> 32 * k) + (words[9] >> 32 * k)) & 0xFFFFFFFF for k in range(fb // 4)]
    added = sum(v << 32 * k for k, v in enumerate(lanes))
    assert memory == {0x100: words[0], 0x200: words[1], 0x500: added,
                      0x800: words[10] & 0xFFFFFF}
    assert done == [(PacketKind.WRITE, src, 5, 0), (PacketKind.WRITE, src, 5, 0),
                    (PacketKind.WRITE, src, 5, 9), (PacketKind.ACK, src, NO_SEM, 11),
                    (PacketKind.READ_DATA, src, 6, 4)]
    assert jobs == [(PacketKind.ACK, 0, 1, 0, 9, NO_SEM),
                    (PacketKind.READ_DATA, 0, 1, 100, 4, 6, 0, 0x600, 1, 0x7000)]


@pytest.mark.parametrize("change, name", [
    ({"ici": ICIConfig(dims=(2, 2), classes=1, flit_bits=128)},
     "ici.classes"),
    ({"ici": ICIConfig(dims=(2, 2), classes=2, flit_bits=128, max_packet=1)},
     "ici.max_packet"),
    ({"ici": ICIConfig(dims=(2, 2), classes=2, flit_bits=96)}, "ici.flit_bits"),
    ({"ici": ICIConfig(dims=(2, 2), classes=2, flit_bits=64)}, "ici.flit_bits"),
    ({"max_message": 1000}, "max_message"),
    ({"max_message": 0}, "max_message"),
    ({"staging_slot": 1000}, "staging_slot"),
    ({"staging_slot": 16}, "staging_slot"),
])
def test_config_refused(change, name):
    with pytest.raises(ConfigError) as info:
        CFG.replace(**change)
    assert info.value.path == name


STAGING = 0x8000
"""The unit tests' staging area of bfloat16 reductions."""


class _EngineChip(Elaboratable):
    """One chip for the collectives: a CollectiveEngine whose two ring directions share a
    Sender (a MessageMux), and a Receiver whose completions it counts."""

    def __init__(self, cfg):
        self.engine = CollectiveEngine(cfg, staging_base=STAGING)
        self.mux = MessageMux(cfg, 2)
        self.sender = Sender(cfg)
        self.receiver = Receiver(cfg, staging_base=STAGING)

    def elaborate(self, platform):
        m = Module()
        m.submodules.engine = self.engine
        m.submodules.mux = self.mux
        m.submodules.sender = self.sender
        m.submodules.receiver = self.receiver
        for h in range(2):
            wiring.connect(m, self.engine.cmd[h], self.mux.cmd[h])
            wiring.connect(m, self.engine.data[h], self.mux.data[h])
        wiring.connect(m, self.mux.o_cmd, self.sender.cmd)
        wiring.connect(m, self.mux.o_data, self.sender.data)
        wiring.connect(m, self.receiver.done, self.engine.arrived)
        return m


RINGS = {
    # name: (golden model dims, golden dim, ICI dims, engine dim)
    "1x4": ((1, 4), 1, (4,), 0),
    "2x2-x": ((2, 2), 0, (2, 2), 0),
    "2x2-y": ((2, 2), 1, (2, 2), 1),
    "3x2": ((3, 2), 0, (3, 2), 0),
}
RING_OPS = [Collective.REDUCE_SCATTER, Collective.ALL_GATHER, Collective.ALL_REDUCE]
COLLECTIVE_CASES = (
    [(ring, op, fmt) for ring in ("1x4", "2x2-x", "2x2-y") for op in RING_OPS
     for fmt in ("int32", "fp32", "bfloat16")]
    + [(ring, Collective.ALL_REDUCE_2D, fmt) for ring in ("2x2-x", "3x2")
       for fmt in ("int32", "fp32", "bfloat16")])
"""Ring collectives on rings of 4 and 2; the 2-D all-reduce on 2x2 and 3x2 pods (the ring
along X of three chips, along Y of two)."""
FMTS = {"int32": IciFmt.INT32, "fp32": IciFmt.FP32, "bfloat16": IciFmt.BF16}


@pytest.mark.parametrize("ring, op, fmt", COLLECTIVE_CASES,
                         ids=lambda v: v.name if isinstance(v, Collective) else str(v))
def test_collective(seed, ring, op, fmt):
    """Every chip's engine, started at a random cycle, runs its part of a collective
    (lengths that do not divide evenly, empty pieces included; but a reduce-scatter, at random
    twice in a row on the same buffer) through Senders, a Python network and Receivers under
    random idle and backpressure; every chip's buffer ends bit-exactly as the golden model's
    schedule leaves it (reduce-scatter: the chip's own block; the others: the whole buffer),
    with no error, sequence error or drop, no response asked for, and every arrival counter
    of every engine back at zero."""
    dims, dim, ici_dims, engine_dim = RINGS[ring]
    cfg = NICConfig(ici=ICIConfig(dims=ici_dims, classes=2, flit_bits=128, max_packet=4))
    esize = 2 if fmt == "bfloat16" else 4
    grain = cfg.flit_bytes // esize
    rng = random.Random(seed)
    length = rng.choice([1, 7, 37, 101, 150])
    space, base = rng.randrange(2), 0x1000
    print(f"{ring} {op.name} {fmt} length {length} space {space}")
    chips = [tuple(c) for c in (node_coords(dims, node) for node in range(dims[0] * dims[1]))]
    ici_coords = [_coords(cfg, node) for node in range(len(chips))]
    buffers = [random_elements(rng, fmt, length) for _ in chips]
    repeat = 1 if op == Collective.REDUCE_SCATTER else rng.choice([1, 2])
    print(f"{repeat} time(s)")
    expect = [(0, buffer) for buffer in buffers]
    for _ in range(repeat):
        expect = ring_collective(op.name.lower(), fmt, dims, dim, length, grain,
                                 [data for _, data in expect])
    memories = [_Memory(cfg, {}) for _ in chips]
    for memory, buffer in zip(memories, buffers, strict=True):
        _store(memory.bytes, space, base, buffer)
    dut = _Pod([_EngineChip(cfg) for _ in chips])
    net = _Network(cfg)
    starts = [rng.randrange(60) for _ in chips]

    async def bench(ctx):
        drivers = []
        for chip, coords in zip(dut.chips, ici_coords, strict=True):
            for d, c in enumerate(coords):
                ctx.set(chip.engine.coords[f"c{d}"], c)
            drivers.append({
                "start": _Driver(chip.engine.start, rng, 1.0, _set_bits),
                "eject": _Driver(chip.receiver.i, rng, 0.7, _set_eject),
                "engine_data0": _Driver(chip.engine.read_data[0], rng, 0.7, _set_value),
                "engine_data1": _Driver(chip.engine.read_data[1], rng, 0.7, _set_value),
                "recv_data": _Driver(chip.receiver.read_data, rng, 0.7, _set_value),
            })
        descriptor = _pack(descriptor_layout(cfg), op=op, dim=engine_dim, fmt=FMTS[fmt],
                           space=space, address=base, length=length)
        last = 0
        for cycle in range(30000):
            assert cycle - last < STALL, f"nothing moved for {STALL} cycles"
            if cycle > max(starts) + 2 and not any(ctx.get(c.engine.busy) for c in dut.chips) \
                    and not any(net.queues[e][k] for e in net.queues for k in net.queues[e]) \
                    and all(p["eject"].idle for p in drivers):
                break
            for e, (chip, p) in enumerate(zip(dut.chips, drivers, strict=True)):
                if cycle == starts[e]:
                    p["start"].queue.extend([descriptor] * repeat)
                if p["eject"].idle and (packet := net.next_packet(e, rng)):
                    p["eject"].queue.extend((f, int(i == len(packet) - 1))
                                            for i, f in enumerate(packet))
                for driver in p.values():
                    driver.drive(ctx)
                flit = _sink(ctx, chip.sender.o, rng, 0.7)
                beat = _sink(ctx, chip.receiver.write, rng, 0.7)
                reads = [(_sink(ctx, chip.engine.read[0], rng, 0.7), p["engine_data0"]),
                         (_sink(ctx, chip.engine.read[1], rng, 0.7), p["engine_data1"]),
                         (_sink(ctx, chip.receiver.read, rng, 0.7), p["recv_data"])]
                assert _sink(ctx, chip.receiver.respond, rng, 1.0) is None
                for driver in p.values():
                    driver.taken(ctx)
                if flit is not None:
                    net.flit(e, REQUEST_CLASS, flit)
                for read, driver in reads:
                    if read is not None:
                        driver.queue.append(memories[e].read(read))
                if beat is not None:
                    memories[e].write(beat)
                if flit is not None or beat is not None:
                    last = cycle
            await ctx.tick()
        else:
            pytest.fail("the collective did not finish")
        for chip in dut.chips:
            r = chip.receiver
            assert ctx.get(chip.engine.errors) == 0
            assert (ctx.get(r.seq_errors), ctx.get(r.dropped)) == (0, 0)
            assert [ctx.get(c) for c in chip.engine.counters] == [0] * len(
                chip.engine.counters)

    _simulate(dut, bench)
    for node, ((offset, data), memory) in enumerate(zip(expect, memories, strict=True)):
        got = memory.region(space, base + esize * offset, len(data))
        assert got == data, f"chip {chips[node]}: {got.hex()} != {data.hex()}"


def _a2a_steps(dims, h):
    """Direction ``h``'s all-to-all displacement of every step, as tuples."""
    return list(zip(*a2a_displacements(dims, h), strict=True))


@pytest.mark.parametrize("dims", [(4,), (2, 2), (4, 4), (3, 2), (2, 2, 2)])
def test_a2a_displacements(dims):
    """Each direction's all-to-all steps visit every displacement once, direction 1 half of
    every ring away from direction 0; on a 2-D pod direction 0 follows the golden schedule's
    steps."""
    nodes = math.prod(dims)
    every = set(itertools.product(*[range(k) for k in dims]))
    steps = [_a2a_steps(dims, h) for h in range(2)]
    for h in range(2):
        assert set(steps[h]) == every and len(steps[h]) == nodes
    for d0, d1 in zip(*steps, strict=True):
        assert all((a + k // 2) % k == b for a, b, k in zip(d0, d1, dims, strict=True))
    if len(dims) == 2:
        schedule = all_to_all_schedule(dims, np.ones((nodes, nodes), dtype=int))
        for (dx, dy), step in zip(steps[0], schedule, strict=True):
            for t in step.transfers:
                x, y = node_coords(dims, t.src)
                assert t.dst == node_index(dims, ((x + dx) % dims[0], (y + dy) % dims[1]))


def test_a2a_order_meets_the_bisection_bound():
    """On a 4x4 torus, with every chip and both directions in step (a chunk each to every
    chip per round), the busiest link of each step (the ICI's routes) sums over a round to
    the time model's bisection bound of that round's traffic, in chunk times. Visiting by
    linear index took 28 against 16."""
    dims = (4, 4)
    total = 0
    for pair in zip(_a2a_steps(dims, 0), _a2a_steps(dims, 1), strict=True):
        loads = {}
        for src in range(16):
            x, y = node_coords(dims, src)
            for dx, dy in pair:
                for link in route(dims, src, node_index(dims, ((x + dx) % 4, (y + dy) % 4))):
                    loads[link] = loads.get(link, 0) + 1
        total += max(loads.values(), default=0)
    net = Network(dims=dims, alpha=0, per_hop=0, link_bw=1, inject_bw=2)
    assert total == bisection_bound(np.full((16, 16), 2), 1, net) == 16


def test_engine_refuses(seed):
    """Descriptors the engine cannot run (format 3, op 7, a dimension the pod does not have,
    a piece longer than max_message, an all-to-all whose length is not the chip count, a 2-D
    all-reduce on a 1-D pod, a bfloat16 piece whose partials overflow a staging slot) are
    consumed and counted in ``errors`` without sending anything;
    a good one after them starts sending."""
    cfg = NICConfig(ici=ICIConfig(dims=(4,), classes=2, flit_bits=128, max_packet=4))
    dut = CollectiveEngine(cfg)
    good = {"op": Collective.ALL_REDUCE, "dim": 0, "fmt": IciFmt.INT32, "address": 0,
            "length": 100}
    bad = [{"fmt": 3}, {"op": 7}, {"dim": 1}, {"length": 8 * cfg.max_message},
           {"op": Collective.ALL_TO_ALL}, {"op": Collective.ALL_REDUCE_2D},
           {"fmt": IciFmt.BF16, "length": 8 * cfg.staging_slot // 2}]
    layout = descriptor_layout(cfg)

    async def bench(ctx):
        ctx.set(dut.coords.c0, 1)
        for change in bad:
            ctx.set(dut.start.payload.as_value(), _pack(layout, **{**good, **change}))
            ctx.set(dut.start.valid, 1)
            assert ctx.get(dut.start.ready)
            await ctx.tick()
            ctx.set(dut.start.valid, 0)
            for _ in range(4):
                assert not ctx.get(dut.cmd[0].valid) and not ctx.get(dut.cmd[1].valid)
                await ctx.tick()
            assert not ctx.get(dut.busy)
        assert ctx.get(dut.errors) == len(bad)
        ctx.set(dut.start.payload.as_value(), _pack(layout, **good))
        ctx.set(dut.start.valid, 1)
        await ctx.tick()
        ctx.set(dut.start.valid, 0)
        await ctx.tick()
        assert ctx.get(dut.busy) and ctx.get(dut.cmd[0].valid) and ctx.get(dut.cmd[1].valid)
        assert ctx.get(dut.errors) == len(bad)

    _simulate(dut, bench)


class _SplitMemory(Elaboratable):
    """A SpaceSplit in front of an HbmPort (space HBM) for two writers and two readers; the
    VMEM side is left to the test."""

    def __init__(self, cfg):
        self.split = SpaceSplit(cfg, writers=2, readers=2, depth=8)
        self.hbm = HbmPort(cfg, writers=2, readers=2)

    def elaborate(self, platform):
        m = Module()
        m.submodules.split, m.submodules.hbm = self.split, self.hbm
        self.split.join(m, "hbm", self.hbm)
        return m


def test_hbm_port(seed):
    """SpaceSplit and HbmPort between two writers, two readers, a Python VMEM answering in
    order and a Python AXI4 memory answering after random delays, out of order across IDs:
    writes of both spaces land (single-beat bursts) and ``pending`` stays high until every
    one is answered; then reads of both spaces, interleaved, return each reader's data in the
    order it issued them."""
    cfg = CFG
    rng = random.Random(seed)
    fb = cfg.flit_bytes
    dut = _SplitMemory(cfg)
    hbm, vmem = IciSpace.HBM.value, IciSpace.VMEM.value
    memories = {hbm: {}, vmem: {}}             # space -> address -> flit
    cells = rng.sample([(space, k * fb) for space in (hbm, vmem) for k in range(64)], 48)
    values = {cell: rng.getrandbits(cfg.ici.flit_bits) for cell in cells}
    reads = [[rng.choice(cells) for _ in range(30)] for _ in range(2)]
    got = [[], []]

    async def bench(ctx):
        split, bus = dut.split, dut.hbm.axi
        wl, rl = write_beat_layout(cfg), read_beat_layout(cfg)
        writers = [_Driver(split.write[i], rng, 0.6, _set_bits) for i in range(2)]
        readers = [_Driver(split.read[i], rng, 0.6, _set_bits) for i in range(2)]
        vmem_data = [_Driver(split.vmem_read_data[i], rng, 1.0, _set_value) for i in range(2)]
        for k, (space, address) in enumerate(cells):
            writers[k % 2].queue.append(_pack(wl, space=space, address=address,
                                              data=values[(space, address)],
                                              strobe=(1 << fb) - 1))
        b_due, r_due = [], []                   # [address, data, delay], [id, data, delay]
        addresses, data = deque(), deque()      # AW and W, paired in order (either first)
        phase = "write"
        for _ in range(20000):
            if phase == "write" and all(w.idle for w in writers) and not b_due \
                    and not addresses and not data:
                assert not ctx.get(dut.hbm.pending), "pending with every write answered"
                for i in range(2):
                    readers[i].queue.extend(_pack(rl, space=sp, address=ad)
                                            for sp, ad in reads[i])
                phase = "read"
            if phase == "read" and all(len(got[i]) == len(reads[i]) for i in range(2)):
                break
            for d in writers + readers + vmem_data:
                d.drive(ctx)
            for i in range(2):
                ctx.set(split.read_data[i].ready, rng.random() < 0.7)
            for name in ("awready", "wready", "arready"):
                ctx.set(getattr(bus, name), rng.random() < 0.6)
            # The AXI memory's answers: a B for the oldest write (data in) past its delay; an
            # R for the oldest read of a random ID past its delay.
            if b_due or addresses or data:
                assert ctx.get(dut.hbm.pending), "a write unanswered and pending low"
            b = b_due[0] if b_due and b_due[0][2] <= 0 else None
            ctx.set(bus.bvalid, b is not None)
            heads = {}
            for x in r_due:
                heads.setdefault(x[0], x)
            due = [x for x in heads.values() if x[2] <= 0]
            r = rng.choice(due) if due else None
            ctx.set(bus.rvalid, r is not None)
            if r is not None:
                ctx.set(bus.rid, r[0])
                ctx.set(bus.rdata, r[1])
            for i in range(2):
                beat = _sink(ctx, split.vmem_write[i], rng, 0.8)
                if beat is not None:
                    memories[vmem][beat.address] = beat.data
                read = _sink(ctx, split.vmem_read[i], rng, 0.8)
                if read is not None:
                    vmem_data[i].queue.append(memories[vmem].get(read.address, 0))
                out = split.read_data[i]
                if ctx.get(out.valid) and ctx.get(out.ready):
                    got[i].append(ctx.get(out.payload))
            if ctx.get(bus.awvalid) and ctx.get(bus.awready):
                assert (ctx.get(bus.awlen), ctx.get(bus.awsize)) == (0, 4)
                addresses.append(ctx.get(bus.awaddr))
            if ctx.get(bus.wvalid) and ctx.get(bus.wready):
                assert ctx.get(bus.wlast)
                data.append(ctx.get(bus.wdata))
            while addresses and data:
                b_due.append([addresses.popleft(), data.popleft(), rng.randrange(1, 6)])
            if ctx.get(bus.arvalid) and ctx.get(bus.arready):
                assert ctx.get(bus.arlen) == 0
                r_due.append([ctx.get(bus.arid), memories[hbm].get(ctx.get(bus.araddr), 0),
                              rng.randrange(1, 8)])
            if b is not None:
                memories[hbm][b[0]] = b[1]
                b_due.remove(b)
            if r is not None:
                r_due.remove(r)
            for x in b_due + r_due:
                x[2] -= 1
            for d in writers + readers + vmem_data:
                d.taken(ctx)
            await ctx.tick()
        else:
            pytest.fail(f"{phase} did not finish")
        assert ctx.get(dut.hbm.errors) == 0

    _simulate(dut, bench)
    assert {cell: memories[cell[0]][cell[1]] for cell in cells} == values
    for i in range(2):
        assert got[i] == [values[cell] for cell in reads[i]], f"reader {i}"
