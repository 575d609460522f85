"""Unit tests of the ICI endpoint's write path (hdl/pod/endpoint.py) in Amaranth's Python
simulator: configuration refusals; several Senders cutting random messages into packets, a
Python network that stamps sources and delivers whole packets interleaved across sources (in
order per source, as the ICI does), and one Receiver writing them to a byte memory, all under
random idle and backpressure; and a Receiver fed bad packets directly."""

import random
from collections import deque

import pytest
from amaranth.hdl import Elaboratable, Module, Shape
from amaranth.sim import Simulator

from hdl.config import ConfigError
from hdl.ici.config import ICIConfig
from hdl.pod.config import EndpointConfig
from hdl.pod.endpoint import Kind, Receiver, Sender, endpoint_header_layout
from verification.models.ici import Header

CFG = EndpointConfig(ici=ICIConfig(dims=(2, 2), classes=2, flit_bits=128, max_packet=4))
RECEIVER = (1, 1)       # coordinates of the receiving chip (endpoint 3)


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
    layout = endpoint_header_layout(cfg)
    f = layout[name]
    width = Shape.cast(f.shape).width
    return (word >> (cfg.ici.header_bits + f.offset)) & ((1 << width) - 1)


def _pack_endpoint_header(cfg, **fields):
    layout = endpoint_header_layout(cfg)
    word = 0
    for name, value in fields.items():
        word |= int(value) << layout[name].offset
    return word << cfg.ici.header_bits


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


def _sink(ctx, stream, rng, rate):
    """Random backpressure on a stream; the beat taken this cycle, if any."""
    ready = rng.random() < rate
    ctx.set(stream.ready, ready)
    return ctx.get(stream.payload) if ready and ctx.get(stream.valid) else None


def _set_command(ctx, payload, message):
    dst, space, address, data, sem = message
    for d, c in enumerate(dst):
        ctx.set(payload.dst[f"c{d}"], c)
    ctx.set(payload.dst_port, 0)
    ctx.set(payload.space, space)
    ctx.set(payload.address, address)
    ctx.set(payload.bytes, len(data))
    ctx.set(payload.sem, sem)


def _set_value(ctx, payload, value):
    ctx.set(payload, value)


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


class _Pair(Elaboratable):
    def __init__(self, cfg, sources):
        self.senders = [Sender(cfg) for _ in sources]
        self.receiver = Receiver(cfg)

    def elaborate(self, platform):
        m = Module()
        for i, s in enumerate(self.senders):
            m.submodules[f"sender{i}"] = s
        m.submodules.receiver = self.receiver
        return m


def _random_messages(cfg, rng, source, count):
    """Messages of 0 to 3 packets and a bit, each in its own 1 KiB region."""
    out = []
    for j in range(count):
        size = rng.choice([0, 1, cfg.flit_bytes, cfg.packet_bytes, cfg.packet_bytes + 1,
                           rng.randint(1, 3 * cfg.packet_bytes + 5)])
        data = bytes(rng.getrandbits(8) for _ in range(size))
        out.append((RECEIVER, rng.randrange(2), (source * 64 + j) * 1024, data,
                    rng.randrange(31)))
    return out


class _Network:
    """Collects each sender's flits into packets, checks their headers against the message
    they belong to, stamps the source and queues them for the receiver."""

    def __init__(self, cfg, sources, messages):
        self.cfg, self.sources = cfg, sources
        self.partial = {s: [] for s in sources}
        self.queues = {s: deque() for s in sources}
        self.expect = {s: deque(self._packets(messages[s])) for s in sources}
        self.seq = dict.fromkeys(sources, 0)

    def _packets(self, messages):
        """(bytes, address, last, sem, space) of every packet of the messages, in order."""
        p = self.cfg.packet_bytes
        for _, space, address, data, sem in messages:
            sizes = [min(p, len(data) - o) for o in range(0, len(data), p)] or [0]
            for i, size in enumerate(sizes):
                yield size, address + i * p, int(i == len(sizes) - 1), sem, space

    def flit(self, source, word):
        cfg = self.cfg
        flits = self.partial[source]
        flits.append(word)
        head = Header.unpack(cfg.ici, flits[0])
        if len(flits) < head.length:
            return
        self.partial[source] = []
        size, address, last, sem, space = self.expect[source].popleft()
        assert (head.dst, head.dst_port, head.tclass) == (RECEIVER, 0, 0)
        assert head.seq == self.seq[source] % 256
        self.seq[source] += 1
        assert head.length == 1 + -(-size // cfg.flit_bytes) <= cfg.ici.max_packet
        got = {n: _field(cfg, flits[0], n)
               for n in ("kind", "bytes", "address", "last", "sem", "space")}
        assert got == {"kind": Kind.WRITE.value, "bytes": size, "address": address,
                       "last": last, "sem": sem, "space": space}
        head.src, head.src_port = _coords(cfg, source), 0
        hb = cfg.ici.header_bits
        flits[0] = (flits[0] >> hb << hb) | head.pack(cfg.ici)
        self.queues[source].append(flits)


@pytest.mark.parametrize("flow", ["fast", "idle", "backpressure"])
def test_write_messages(seed, flow):
    """Random messages (empty, one byte, exact packets, a byte past a packet, several packets)
    from three chips to one: every byte lands once at its address in its memory and nowhere
    else, every message completes once with its source and semaphore, in order per source,
    after its last byte; packet headers as the format says; no sequence error, no drop."""
    cfg = CFG
    rng = random.Random(seed)
    rate, ready = {"fast": (1.0, 1.0), "idle": (0.4, 1.0), "backpressure": (1.0, 0.3)}[flow]
    sources = [_endpoint(cfg, c) for c in ((0, 0), (1, 0), (0, 1))]
    messages = {s: _random_messages(cfg, rng, s, 12) for s in sources}
    dut = _Pair(cfg, sources)
    net = _Network(cfg, sources, messages)
    memory, completions, written = {}, {s: [] for s in sources}, {}
    expect_done = {s: [m[4] for m in messages[s]] for s in sources}
    for msgs in messages.values():
        for _, space, address, data, _ in msgs:
            memory.update({(space, address + i): b for i, b in enumerate(data)})

    async def bench(ctx):
        cmds, datas = [], []
        for i, s in enumerate(sources):
            cmds.append(_Driver(dut.senders[i].cmd, rng, rate, _set_command))
            cmds[-1].queue.extend(messages[s])
            datas.append(_Driver(dut.senders[i].data, rng, rate, _set_value))
            for m in messages[s]:
                datas[-1].queue.extend(_beats(cfg, m[3], rng))
        eject = _Driver(dut.receiver.i, rng, rate, _set_eject)
        for _ in range(20000):
            if sum(len(c) for c in completions.values()) == sum(map(len, messages.values())):
                break
            if eject.current is None and not eject.queue:
                waiting = [s for s in sources if net.queues[s]]
                if waiting:
                    packet = net.queues[rng.choice(waiting)].popleft()
                    eject.queue.extend((f, int(i == len(packet) - 1))
                                       for i, f in enumerate(packet))
            for driver in cmds + datas + [eject]:
                driver.drive(ctx)
            outs = [_sink(ctx, dut.senders[i].o, rng, ready) for i in range(len(sources))]
            beat = _sink(ctx, dut.receiver.write, rng, ready)
            done = _sink(ctx, dut.receiver.done, rng, ready)
            for driver in cmds + datas:
                driver.taken(ctx)
            eject.taken(ctx)
            for s, flit in zip(sources, outs, strict=True):
                if flit is not None:
                    net.flit(s, flit)
            if beat is not None:
                for i in range(cfg.flit_bytes):
                    if beat.strobe >> i & 1:
                        key = (beat.space.value, beat.address + i)
                        assert key not in written, f"byte {key} written twice"
                        written[key] = beat.data >> (8 * i) & 0xFF
            if done is not None:
                completions[done.src].append(done.sem)
                n = len(completions[done.src])
                _, space, address, data, _ = messages[done.src][n - 1]
                for i in range(len(data)):
                    assert (space, address + i) in written, "completed before its data"
            await ctx.tick()
        assert completions == expect_done
        assert written == memory
        r = dut.receiver
        packets = sum(net.seq.values())
        assert (ctx.get(r.packets), ctx.get(r.seq_errors), ctx.get(r.dropped)) == (packets, 0, 0)
        assert sum(ctx.get(s.packets) for s in dut.senders) == packets

    _simulate(dut, bench)


def test_bad_packets(seed):
    """Packets with a wrong sequence number are counted and still written; a kind this path
    does not serve (a read request) is consumed with its body and counted; the good packets
    around them land."""
    cfg = CFG
    rng = random.Random(seed)
    dut = Receiver(cfg)
    src = (0, 1)

    def packet(seq, kind, address, data):
        head = Header(RECEIVER, 0, src, 0, 0, 1 + len(data), seq).pack(cfg.ici)
        ep = _pack_endpoint_header(cfg, kind=kind, address=address, last=1,
                                   bytes=len(data) * cfg.flit_bytes, sem=5)
        return [head | ep] + data

    words = [[rng.getrandbits(cfg.ici.flit_bits) for _ in range(2)] for _ in range(4)]
    packets = [packet(0, Kind.WRITE.value, 0x100, words[0]),
               packet(7, Kind.WRITE.value, 0x200, words[1]),
               packet(8, Kind.READ.value, 0x300, words[2]),
               packet(9, Kind.WRITE.value, 0x400, words[3])]
    written, done = {}, []

    async def bench(ctx):
        eject = _Driver(dut.i, rng, 0.7, _set_eject)
        for p in packets:
            eject.queue.extend((f, int(i == len(p) - 1)) for i, f in enumerate(p))
        for _ in range(200):
            eject.drive(ctx)
            beat = _sink(ctx, dut.write, rng, 0.7)
            finished = _sink(ctx, dut.done, rng, 0.7)
            eject.taken(ctx)
            if beat is not None:
                written[beat.address] = beat.data
            if finished is not None:
                done.append((finished.src, finished.sem))
            await ctx.tick()
        assert (ctx.get(dut.packets), ctx.get(dut.seq_errors), ctx.get(dut.dropped)) == (4, 1, 1)

    _simulate(dut, bench)
    fb = cfg.flit_bytes
    assert written == {0x100: words[0][0], 0x100 + fb: words[0][1],
                       0x200: words[1][0], 0x200 + fb: words[1][1],
                       0x400: words[3][0], 0x400 + fb: words[3][1]}
    assert done == [(_endpoint(cfg, src), 5)] * 3


@pytest.mark.parametrize("change, name", [
    ({"ici": ICIConfig(dims=(2, 2), classes=1, flit_bits=128)}, "ici.classes"),
    ({"ici": ICIConfig(dims=(2, 2), classes=2, flit_bits=128, max_packet=1)},
     "ici.max_packet"),
    ({"ici": ICIConfig(dims=(2, 2), classes=2, flit_bits=96)}, "ici.flit_bits"),
    ({"ici": ICIConfig(dims=(2, 2), classes=2, flit_bits=64)}, "ici.flit_bits"),
    ({"max_message": 1000}, "max_message"),
    ({"max_message": 0}, "max_message"),
])
def test_config_refused(change, name):
    with pytest.raises(ConfigError) as info:
        CFG.replace(**change)
    assert info.value.path == name
