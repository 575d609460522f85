"""cocotb testbench of the ICI network, through its test harness top (hdl/ici/harness.py).

Mode ``PORTS`` (:class:`NetworkBench`): Python drives every endpoint's injection stream and
takes every ejection stream, with random idle and backpressure, and checks every packet
against the golden model's delivery contract (verification/models/ici.py): exactly once,
intact, at the right endpoint, in order per (source, destination, class), hop count minimal.

Mode ``GENERATORS`` (:class:`TrafficBench`): the harness's synthesizable generators and
checkers run on their own (no Python per cycle); the bench sets the load, pattern and fault
rate, waits, stops injection, waits for the network to drain within a bound, and reads the
counters.
"""

import random
import time

import cocotb
from cocotb.triggers import ClockCycles, RisingEdge, Timer

from spec.ici import ICIHarnessConfig
from spec.topology import node_coords
from verification.models.ici import (
    PATTERN_NAMES,
    Delivery,
    Header,
    min_hops,
    pattern_destination,
    zero_load_latency,
)
from verification.tb.bench import (
    FLOWS,
    env_int,
    flow_pauses,
    measurement,
    new_rng,
    only_if,
    pause,
    perf_spec,
    start,
    write_report,
)
from verification.tb.packing import enum_values, load_sidecar
from verification.tb.streams import StreamBench

COUNTERS = ("created", "throttled", "inj_packets", "inj_flits", "ej_packets", "ej_flits",
            "lat_sum", "lat_max", "errors", "error_code", "error_endpoint", "crc_errors",
            "retries", "dropped", "busy")


class _Harness:
    def __init__(self, dut):
        self.dut = dut
        self.sidecar = load_sidecar()
        self.cfg = ICIHarnessConfig.from_dict(self.sidecar["parameters"]).ici
        self.modes = enum_values(self.sidecar, "mode")
        self.patterns = enum_values(self.sidecar, "pattern")
        self.errors = {v: k for k, v in enum_values(self.sidecar, "error_code").items()}
        self.E = self.cfg.endpoints
        self.faults = hasattr(dut, "fault_rate")

    async def start(self, mode, *, seed=None, fault_rate=0, clock_impl=None):
        dut = self.dut
        dut.mode.value = mode
        for name in ("enable", "pattern", "rate", "length", "hotspot", "hotspot_port",
                     "hotspot_rate", "stall_rate"):
            getattr(dut, name).value = 0
        dut.seed.value = random.getrandbits(32) if seed is None else seed
        if self.faults:
            dut.fault_rate.value = fault_rate
        for e in range(self.E):
            getattr(dut, f"inject__{e}__valid").value = 0
            getattr(dut, f"eject__{e}__ready").value = 0
        await start(dut, clock_impl=clock_impl)
        await ClockCycles(dut.clk, 2)

    def counters(self):
        out = {n: int(getattr(self.dut, n).value) for n in COUNTERS}
        if self.faults:
            out["faults"] = int(self.dut.faults.value)
        return out


class NetworkBench(_Harness):
    """Mode 0: Python packets in, every ejected packet checked against the golden model."""

    def __init__(self, dut, flow):
        super().__init__(dut)
        idle, backpressure = flow_pauses(flow)
        self.rng = new_rng()
        self.streams = StreamBench(dut, dut.clk)
        self.src = [self.streams.source(f"inject__{e}", pause(idle)) for e in range(self.E)]
        self.snk = [self.streams.sink(f"eject__{e}", pause(backpressure)) for e in range(self.E)]
        self.model = Delivery(self.cfg)
        self.seq = {}
        self.taken = [0] * self.E        # ejected beats already parsed, per endpoint
        self.partial = [[] for _ in range(self.E)]
        self.flits = 0

    async def start(self, **kw):
        await super().start(self.modes["PORTS"], **kw)
        cocotb.start_soon(self.streams.run())

    def packet(self, src_ep, dst, dst_port, *, tclass=None, length=None, raw=None):
        """Flits of a packet from ``src_ep`` (the router stamps the source; we send garbage)."""
        cfg = self.cfg
        rng = self.rng
        tclass = rng.randrange(cfg.classes) if tclass is None else tclass
        length = rng.randint(1, cfg.max_packet) if length is None else length
        key = (src_ep, tuple(dst), dst_port, tclass)
        seq = self.seq.get(key, 0)
        self.seq[key] = (seq + 1) % 256
        h = Header(tuple(dst), dst_port, tuple(rng.randrange(1 << b) for b in cfg.coord_bits),
                   rng.randrange(1 << cfg.port_bits), tclass, length, seq,
                   rng.randrange(1 << cfg.hop_bits))
        hb = Header.bits(cfg)
        head = h.pack(cfg) | (rng.getrandbits(cfg.flit_bits - hb) << hb)
        body = [rng.getrandbits(cfg.flit_bits) for _ in range(max(length, 1) - 1)]
        return raw or [head] + body

    def send(self, src_ep, flits, count=None):
        self.model.injected(src_ep, flits)
        self.src[src_ep].send(flits[:count] if count is not None else flits)
        self.flits += len(flits)

    def _collect(self):
        for e, sink in enumerate(self.snk):
            beats = sink.beats
            while self.taken[e] < len(beats):
                word = beats[self.taken[e]]
                self.taken[e] += 1
                data, last = word & ((1 << self.cfg.flit_bits) - 1), word >> self.cfg.flit_bits
                self.partial[e].append(data)
                if last:
                    self.model.delivered_packet(e, self.partial[e])
                    self.partial[e] = []

    async def finish(self, budget=None):
        budget = budget or 200 + 6 * self.flits
        for _ in range(budget):
            await RisingEdge(self.dut.clk)
            self._collect()
            if (self.model.outstanding() == 0
                    and all(s.pending == 0 for s in self.src)):
                break
        else:
            raise AssertionError(f"timeout after {budget} cycles: {self.model.outstanding()} "
                                 f"packets not delivered, "
                                 f"{sum(s.pending for s in self.src)} flits not injected")
        await ClockCycles(self.dut.clk, 20)
        self._collect()
        assert all(not p for p in self.partial), "a packet was cut short (no tail)"
        assert all(s.pending == 0 for s in self.src)
        c = self.counters()
        assert c["dropped"] == self.model.dropped, (
            f"dropped counter {c['dropped']}, expected {self.model.dropped}")
        self.dut._log.info("%d packets delivered, %d dropped, %d cycles, counters %s",
                           self.model.delivered, self.model.dropped, self.streams.cycle, c)
        return c


async def _traffic(tb, name, packets_per_endpoint, **kw):
    cfg, rng = tb.cfg, tb.rng
    hot = node_coords(cfg.dims, rng.randrange(cfg.nodes))
    for e in range(tb.E):
        src = node_coords(cfg.dims, e // cfg.local_ports)
        for i in range(packets_per_endpoint):
            dst = pattern_destination(cfg, name, src, rng, hotspot=hot, hot_fraction=0.5,
                                      counter=i)
            port = rng.randrange(cfg.local_ports)
            tb.send(e, tb.packet(e, dst, port, **kw))


@cocotb.test()
@cocotb.parametrize(traffic=PATTERN_NAMES, flow=FLOWS)
async def test_patterns(dut, traffic, flow):
    """Every traffic pattern, random lengths and classes, every idle x backpressure flow."""
    tb = NetworkBench(dut, flow)
    await tb.start()
    await _traffic(tb, traffic, env_int("ICI_PACKETS", 6))
    await tb.finish()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_bad_packets(dut, flow):
    """Heads addressed outside the pod, with a bad class or a bad length are dropped at
    injection and counted; the packets around them are delivered untouched."""
    tb = NetworkBench(dut, flow)
    await tb.start()
    cfg, rng = tb.cfg, tb.rng
    for e in range(tb.E):
        for kind in ("coord", "port", "class", "length0", "length_big"):
            dst = list(node_coords(cfg.dims, rng.randrange(cfg.nodes)))
            good = tb.packet(e, dst, rng.randrange(cfg.local_ports))
            tb.send(e, good)
            port, tclass, length = 0, 0, rng.randint(1, cfg.max_packet)
            if kind == "coord":
                d = rng.randrange(cfg.ndims)
                dst[d] = rng.randrange(cfg.dims[d], 1 << cfg.coord_bits[d])
            elif kind == "port":
                port = rng.randrange(cfg.local_ports, 1 << cfg.port_bits)
            elif kind == "class":
                if cfg.classes == 1 << cfg.class_bits:
                    continue
                tclass = rng.randrange(cfg.classes, 1 << cfg.class_bits)
            elif kind == "length0":
                length = 0
            elif kind == "length_big":
                if cfg.max_packet + 1 >= 1 << cfg.length_bits:
                    continue
                length = rng.randrange(cfg.max_packet + 1, 1 << cfg.length_bits)
            bad = tb.packet(e, dst, port, tclass=tclass, length=length)
            # A bad length drops the head alone: send only the head then.
            tb.send(e, bad, count=1 if kind.startswith("length") else None)
    await tb.finish()
    assert tb.model.dropped > 0


@cocotb.test()
async def test_zero_load_latency(dut):
    """One packet at a time on an idle network: the tail leaves the model's zero-load latency
    after the head was taken (two cycles per hop on one-cycle links, one more with
    switch_stage, link_latency - 1 more on longer links, the body paced by the credits when the
    buffers are shorter than the credit round trip), plus the harness's port latency (its
    port buffers, from the sidecar)."""
    tb = NetworkBench(dut, "none_none")
    await tb.start()
    cfg, rng = tb.cfg, tb.rng
    for _ in range(12):
        e = rng.randrange(tb.E)
        dst_ep = rng.randrange(tb.E)
        dst = node_coords(cfg.dims, dst_ep // cfg.local_ports)
        length = rng.randint(1, cfg.max_packet)
        flits = tb.packet(e, dst, dst_ep % cfg.local_ports, length=length)
        src, taken = tb.src[e], []
        before = src.sent
        # Runs after every cycle's sampling: note the cycle the head was taken.
        tb.streams.checks[:] = [lambda src=src, before=before, taken=taken: taken.append(
            tb.streams.cycle) if src.sent > before and not taken else None]
        tb.send(e, flits)
        await tb.finish()
        head_cycle = taken[0]
        hops = min_hops(cfg, node_coords(cfg.dims, e // cfg.local_ports), dst)
        got = tb.snk[dst_ep].last_cycle - head_cycle - tb.sidecar["constants"]["port_latency"]
        want = zero_load_latency(hops, length, cfg.link_latency, cfg.switch_stage,
                                 cfg.buffer_depth)
        assert got == want, f"{hops} hops, {length} flits: latency {got}, expected {want}"


@only_if(lambda p: p["faults"])
@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_link_faults(dut, flow):
    """Random bit flips on every link (flits and reverse channel): every packet still arrives
    once, intact and in order; CRC errors and retries are counted."""
    tb = NetworkBench(dut, flow)
    await tb.start(fault_rate=2000)
    await _traffic(tb, "uniform", env_int("ICI_PACKETS", 6))
    c = await tb.finish()
    assert c["faults"] > 0 and c["crc_errors"] > 0 and c["retries"] > 0, c


class TrafficBench(_Harness):
    """Mode ``GENERATORS``: the harness's generators and checkers; Python only sets up and
    reads."""

    async def start(self, **kw):
        # The testbench only waits and reads counters: the clock needs no Python.
        await super().start(self.modes["GENERATORS"], clock_impl="gpi", **kw)

    async def reset(self, cycles=3):
        """Reset the harness (network, generators, checkers, counters): a fresh network."""
        self.dut.rst.value = 1
        await ClockCycles(self.dut.clk, cycles)
        self.dut.rst.value = 0
        await ClockCycles(self.dut.clk, 2)

    async def run(self, *, traffic="uniform", load=0.3, length=0, cycles=5000, stall=0.0,
                  fault_rate=0, hot_fraction=0.0, drain_bound=20000):
        """Offer ``load`` flits/endpoint/cycle for ``cycles``, stop, drain; return counters."""
        dut, cfg = self.dut, self.cfg
        mean_len = length or (cfg.max_packet + 1) / 2
        dut.pattern.value = self.patterns[traffic.upper()]
        dut.rate.value = min(65535, int(load / mean_len * 65536))
        dut.length.value = length
        dut.stall_rate.value = int(stall * 65536)
        hot = random.randrange(cfg.endpoints)
        dut.hotspot.value = sum(c << sum(cfg.coord_bits[:d]) for d, c in
                                enumerate(node_coords(cfg.dims, hot // cfg.local_ports)))
        dut.hotspot_port.value = hot % cfg.local_ports
        dut.hotspot_rate.value = int(hot_fraction * 65536)
        if self.faults:
            dut.fault_rate.value = fault_rate
        dut.enable.value = 1
        await Timer(cycles * 10, "ns")
        return await self.drain(drain_bound)

    async def drain(self, bound):
        """Stop creating packets and wait until every packet created is delivered (at most
        ``bound`` cycles); return the counters, with ``drain_cycles``."""
        dut = self.dut
        dut.enable.value = 0
        waited = 0
        while True:
            await Timer(100 * 10, "ns")
            waited += 100
            c = self.counters()
            if not c["busy"] and c["ej_packets"] == c["inj_packets"]:
                break
            assert waited < bound, f"not drained {bound} cycles after injection stopped: {c}"
        await ClockCycles(dut.clk, 50)
        c = self.counters()
        c["drain_cycles"] = waited
        return c


def check_clean(tb, c):
    assert c["errors"] == 0, (f"{c['errors']} checker errors, first at endpoint "
                              f"{c['error_endpoint']}: {tb.errors.get(c['error_code'])}; {c}")
    assert c["inj_packets"] == c["ej_packets"] == c["created"], c
    assert c["inj_flits"] == c["ej_flits"], c
    assert c["dropped"] == 0, c


@cocotb.test()
@cocotb.parametrize(traffic=PATTERN_NAMES)
async def test_generated_traffic(dut, traffic):
    """Every pattern from the synthesizable generators: random lengths, random backpressure
    at every ejection port, link faults, then a full drain; the checkers find no error."""
    tb = TrafficBench(dut)
    await tb.start()
    cycles, stall, hot = 2500, 0.3, 0.3
    c = await tb.run(traffic=traffic, load=0.4, cycles=cycles, stall=stall,
                     fault_rate=500 if tb.faults else 0, hot_fraction=hot)
    dut._log.info("%s: %s", traffic, c)
    check_clean(tb, c)
    # Progress: 50 packets per endpoint, or for the hotspot half of what its one ejection
    # port lets through (a fraction ``hot`` of all packets goes there, at 1 - stall flits per
    # cycle), which is less on a network of hundreds of endpoints.
    mean_length = (tb.cfg.max_packet + 1) / 2
    need = 50 * tb.E
    if traffic == "hotspot":
        need = min(need, cycles * (1 - stall) / (hot * mean_length) / 2)
    assert c["ej_packets"] > need, c


@cocotb.test()
async def test_soak(dut):
    """Deadlock soak: offered load far above saturation (every generator creating a packet
    every cycle), random lengths, ejection backpressure and link faults for SOAK cycles
    (default 200k); then injection stops and everything drains within the bound."""
    tb = TrafficBench(dut)
    await tb.start()
    cycles = env_int("ICI_SOAK", 200000)
    c = await tb.run(traffic="uniform", load=tb.cfg.max_packet, cycles=cycles, stall=0.1,
                     fault_rate=50 if tb.faults else 0)
    dut._log.info("soak %d cycles: %s", cycles, c)
    check_clean(tb, c)
    assert c["throttled"] > 0, "the offered load did not exceed what the network accepted"


@measurement
@cocotb.test()
async def measure_load(dut):
    """Benchmark (not in the regression): uniform traffic at each offered load of PODIUM_PERF,
    each on a drained and reset network, as BookSim measures: a warm-up, then a measured
    window, then a drain (every packet delivered, so the generators' and checkers' sequence
    numbers agree across the reset).
    Writes, per load, the offered and accepted throughput (flits/endpoint/cycle), the mean
    latency of the packets ejected in the window (tail ejection minus creation, source
    queueing included), the packets refused by full source queues in the window, and the
    simulated cycles and wall seconds."""
    spec = perf_spec()
    tb = TrafficBench(dut)
    await tb.start()
    length = spec.get("length", 1)
    warm, window = spec.get("warmup", 2000), spec.get("window", 10000)
    points = []
    for load in spec.get("loads", [0.1]):
        started = time.perf_counter()
        await tb.reset()
        dut.pattern.value = tb.patterns["UNIFORM"]
        dut.length.value = length
        dut.rate.value = min(65535, round(load / length * 65536))
        dut.enable.value = 1
        await Timer(warm * 10, "ns")
        a = tb.counters()
        await Timer(window * 10, "ns")
        b = tb.counters()
        seconds = time.perf_counter() - started
        drained = await tb.drain(spec.get("drain_bound", 200000))
        packets = b["ej_packets"] - a["ej_packets"]
        offered = b["created"] + b["throttled"] - a["created"] - a["throttled"]
        points.append({
            "load": load,
            "offered": offered * length / (tb.E * window),
            "accepted": (b["ej_flits"] - a["ej_flits"]) / (tb.E * window),
            "latency": (b["lat_sum"] - a["lat_sum"]) / max(1, packets),
            "packets": packets,
            "refused": b["throttled"] - a["throttled"],
            "cycles": warm + window,
            "seconds": seconds,
        })
        dut._log.info("measured %s", points[-1])
        check_clean(tb, drained)
    write_report(spec, points)
