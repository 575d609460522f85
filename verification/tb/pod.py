"""cocotb testbench of the pod (hdl/pod/pod.py): simulation chips on the RTL ICI network.

Python is every chip's host: it loads and reads the chips' memories through their host ports,
issues messages (remote writes, adds and reads) and collectives, and takes completions, with
random idle on every stream it drives and backpressure on every stream it takes. Results are
checked against the golden model (verification/models/collectives.py): every collective's
buffers bit for bit, every message's bytes and completions, and nothing else written.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotb.utils import get_sim_time

from spec.collectives import all_to_all_table
from spec.pod import PodConfig
from spec.protocol import LOCAL_PORTS, NO_SEM, REQUEST_PORT, RESPONSE_PORT
from spec.topology import node_coords
from verification.models.collectives import (
    add_bytes,
    all_to_all,
    random_elements,
    ring_collective,
)
from verification.tb.axi import axi_ram
from verification.tb.bench import (
    FLOWS,
    flow_pauses,
    measurement,
    new_rng,
    only_if,
    pause,
    perf_spec,
    start,
    write_report,
)
from verification.tb.hbm import HBMBench
from verification.tb.packing import Port, load_sidecar
from verification.tb.streams import StreamBench

OPS = ("reduce_scatter", "all_gather", "all_reduce")
STALL = 20000
"""Cycles a wait may last with nothing to show for it before the test fails (a wedge)."""
COLLECTIVE_BASE = 0
"""Byte address of the collective buffers; messages use slots above ``MESSAGE_BASE``."""
MESSAGE_BASE = 0x1000
SLOT = 0x200
A2A_SRC, A2A_DST = 0x0000, 0x2000
"""Byte addresses of the all-to-all's send and receive buffers (8 KiB each in the tests); its
table follows the receive buffer."""
HBM_BYTES = 1 << 16
"""Bytes of each chip's HBM model (with ``hbm``)."""
PERIOD_NS = 10
"""The testbench's clock period (verification/tb/bench.py's default)."""
ESIZE = {"int32": 4, "fp32": 4, "bfloat16": 2}
"""Bytes of an element of each format."""
FMT_CODES = {"int32": "INT32", "fp32": "FP32", "bfloat16": "BF16"}
"""The name of each format's code (spec/protocol.py, ``IciFmt``) in the sidecar."""


def _grain(tb, fmt):
    """The engine's grain in elements: a flit of 32-bit elements, half a flit in bfloat16."""
    return tb.fb // 4 if ESIZE[fmt] == 4 else tb.fb // 2


class DeviceHBM:
    """A chip's HBM behind its HBM controller, as the pod's host reads and writes it: the
    golden device model (verification/tb/hbm.py) on the controller's channels, through its
    backdoor."""

    def __init__(self, dut, config, chip, trace=None):
        """``trace``: a file for every command of the chip's device (optional)."""
        self.bench = HBMBench(dut, masters=False, config=config, prefix="hbm_ch",
                              idle="hbm_idle", index=chip, trace=trace)

    def write(self, address, data):
        self.bench.write_bytes(address, data)

    def read(self, address, length):
        """The bytes the device holds (after :meth:`PodHost.settle_hbm`)."""
        assert self.bench.error is None, str(self.bench.error)
        return self.bench.dump(address, length)


class PodHost:
    """The host's memory port on every chip of a pod (``host_write``, ``host_read``,
    ``host_read_data``), and whatever other streams a subclass names (``sources``,
    ``sinks``), each with the flow's idle and backpressure; with an HBM each chip's
    (``hbm``: with ``memory`` "axi" cocotbext-axi ``AxiRam`` s of ``HBM_BYTES``, with "hbm"
    the device models of its controller, :class:`DeviceHBM`)."""

    def __init__(self, dut, sources=(), sinks=(), *, memory_flows=None, hbm_traces=None):
        """``memory_flows``: each chip's idle and backpressure on its HBM's AXI4 ports with
        memory "axi" (``random_random`` on every chip by default); ``hbm_traces``: with
        memory "hbm", a file per chip for its device's commands."""
        self.dut = dut
        self.sidecar = load_sidecar()
        self.cfg = PodConfig.from_dict(self.sidecar["parameters"])
        self.ici = self.cfg.ici
        self.fb = self.cfg.nic.flit_bytes
        self.chips = self.cfg.chips
        self.ports = {name: Port.of(self.sidecar, f"{name}__0")
                      for name in ("host_write", "host_read", *sources, *sinks)}
        self.bench = StreamBench(dut, dut.clk)
        self.src, self.snk = [], []
        for c in range(self.chips):
            self.src.append({name: self.bench.source(f"{name}__{c}")
                             for name in ("host_write", "host_read", *sources)})
            self.snk.append({name: self.bench.sink(f"{name}__{c}")
                             for name in ("host_read_data", *sinks)})
        self.taken = [0] * self.chips       # host_read_data beats consumed per chip
        self.faults = hasattr(dut, "fault_rate")
        self._loop = None
        # With memory "axi" each chip's HBM is an AxiRam on its network interface's port
        # and, on a pod of TensorCores, a second port of the same memory for its DMA; with
        # "hbm" the device models behind its controller.
        self.hbm, self.dma_hbm = [], []
        if self.cfg.chip.memory == "axi":
            flows = memory_flows or ["random_random"] * self.chips
            self.hbm = [axi_ram(dut, f"hbm__{c}", HBM_BYTES, flows[c])
                        for c in range(self.chips)]
            if self.cfg.tensorcore:
                self.dma_hbm = [axi_ram(dut, f"dma__{c}", HBM_BYTES, flows[c], mem=ram.mem)
                                for c, ram in enumerate(self.hbm)]
        elif self.cfg.chip.memory == "hbm":
            traces = hbm_traces or [None] * self.chips
            self.hbm = [DeviceHBM(dut, self.cfg.chip.hbm, c, traces[c])
                        for c in range(self.chips)]

    async def start(self, *, fault_rate=0, clock_impl=None):
        if self.faults:
            self.dut.fault_rate.value = fault_rate
            self.dut.fault_seed.value = random.getrandbits(32)
        self.bench.quiesce()
        await start(self.dut, clock_impl=clock_impl)
        for memory in self.hbm:
            if isinstance(memory, DeviceHBM):
                await memory.bench.start(clock=False)
        self.resume()

    async def settle_hbm(self):
        """Wait until every chip's HBM controller has written every answered write into its
        device, so the backdoor sees it (nothing to wait for with memory models)."""
        for memory in self.hbm:
            if isinstance(memory, DeviceHBM):
                await memory.bench.settle()

    @property
    def hbm_capacity(self):
        """Bytes of each chip's HBM as the golden pod simulator holds it."""
        return self.cfg.chip.hbm.capacity if self.cfg.chip.memory == "hbm" else HBM_BYTES

    def resume(self):
        """Drive the host streams every cycle (the default)."""
        self._loop = cocotb.start_soon(self.bench.run())

    async def pause(self):
        """Stop driving the host streams, every queued beat taken: the simulation then runs
        with no Python per cycle (for timing long collectives)."""
        await self.drained()
        self._loop.cancel()
        await FallingEdge(self.dut.clk)
        self.bench.quiesce()

    def flow(self, flow, chips=None):
        """Idle and backpressure of every stream (of ``chips``, by default every chip's) for
        the next operations."""
        idle, back = flow_pauses(flow)
        for c in range(self.chips) if chips is None else chips:
            for s in self.src[c].values():
                s.set_idle_generator(pause(idle, new_rng()))
            for k in self.snk[c].values():
                k.set_backpressure_generator(pause(back, new_rng()))

    # Coordinates and packing ------------------------------------------------------------

    def coords(self, chip):
        return node_coords(self.ici.dims, chip)

    def golden_dims(self):
        """The golden model's 2-D dims and the offset of the pod's dims in them."""
        dims = self.ici.dims
        return ((1, dims[0]), 1) if len(dims) == 1 else (tuple(dims), 0)

    def dst(self, chip):
        dst = Port(self.ports["message"].field("dst"))
        return dst.pack(**{f"c{d}": c for d, c in enumerate(self.coords(chip))})

    # Host memory port ---------------------------------------------------------------------

    def write(self, chip, address, data, *, space="VMEM"):
        """Queue host writes of ``data`` at ``address`` (a multiple of the flit bytes)."""
        port = self.ports["host_write"]
        for i in range(0, len(data), self.fb):
            chunk = data[i:i + self.fb]
            self.src[chip]["host_write"].send([port.pack(
                space=space, address=address + i,
                data=int.from_bytes(chunk.ljust(self.fb, b"\0"), "little"),
                strobe=(1 << len(chunk)) - 1)])

    async def read(self, chip, address, nbytes, *, space="VMEM"):
        """Bytes of chip ``chip``'s memory read through its host port."""
        flits = -(-nbytes // self.fb)
        port = self.ports["host_read"]
        self.src[chip]["host_read"].send(port.pack(space=space, address=address + i * self.fb)
                                         for i in range(flits))
        sink = self.snk[chip]["host_read_data"]
        await self.until(lambda: len(sink.beats) >= self.taken[chip] + flits, "host reads")
        beats = sink.beats[self.taken[chip]:self.taken[chip] + flits]
        self.taken[chip] += flits
        return b"".join(b.to_bytes(self.fb, "little") for b in beats)[:nbytes]

    async def until(self, predicate, what, bound=STALL):
        for _ in range(bound):
            if predicate():
                return
            await RisingEdge(self.dut.clk)
        raise AssertionError(f"{what() if callable(what) else what}: not done within {bound} "
                             f"cycles")

    async def drained(self):
        """Every queued beat of every source taken."""
        await self.until(lambda: all(s.pending == 0 for c in self.src for s in c.values()),
                         "host streams")
        await ClockCycles(self.dut.clk, 2)


class PodBench(PodHost):
    """The host side of every simulation chip of a pod: memory, messages, collectives and
    completions; with ``hbm`` a cocotbext-axi ``AxiRam`` as each chip's HBM."""

    def __init__(self, dut):
        super().__init__(dut, sources=("message", "collective"), sinks=("done",))
        self.spaces = ("VMEM", "HBM") if self.cfg.chip.has_hbm else ("VMEM",)

    # Collectives and messages -------------------------------------------------------------

    def collective(self, chip, op, dim, fmt, address, length):
        self.src[chip]["collective"].send([self.ports["collective"].pack(
            op=op.upper(), dim=dim, fmt=FMT_CODES[fmt], space="VMEM", address=address,
            length=length)])

    def all_to_all(self, chip, table_address):
        self.src[chip]["collective"].send([self.ports["collective"].pack(
            op="ALL_TO_ALL", space="VMEM", address=table_address, length=self.chips)])

    def write_table(self, chip, address, entries):
        """Queue host writes of an all-to-all table (one entry per flit)."""
        self.write(chip, address, b"".join(
            (e["src_address"] | e["dst_address"] << 32 | e["bytes"] << 64).to_bytes(
                self.fb, "little") for e in entries))

    async def collectives_done(self):
        await self.drained()
        await self.until(lambda: not any(int(getattr(self.dut, f"busy__{c}").value)
                                         for c in range(self.chips)), "collectives")

    def message(self, chip, **fields):
        fields.setdefault("dst_port", REQUEST_PORT)
        self.src[chip]["message"].send([self.ports["message"].pack(**fields)])

    def completions(self, chip):
        port = self.ports["done"]
        return [port.unpack(b) for b in self.snk[chip]["done"].beats]

    def counters(self):
        names = ["dropped", "seq_errors", "errors", "crc_errors", "retries", "net_dropped"]
        if self.faults:
            names.append("faults")
        return {n: int(getattr(self.dut, n).value) for n in names}


async def _run_collective(tb, rng, op, dim, fmt, length):
    """Load random buffers, start ``op`` on every chip at a random cycle, check every chip's
    buffer against the golden model."""
    dims, shift = tb.golden_dims()
    esize = ESIZE[fmt]
    buffers = [random_elements(rng, fmt, length) for _ in range(tb.chips)]
    expect = ring_collective(op, fmt, dims, dim + shift, length, _grain(tb, fmt), buffers)
    for c, b in enumerate(buffers):
        tb.write(c, COLLECTIVE_BASE, b)
    await tb.drained()
    order = rng.sample(range(tb.chips), tb.chips)
    for c in order:
        await ClockCycles(tb.dut.clk, rng.randrange(20))
        tb.collective(c, op, dim, fmt, COLLECTIVE_BASE, length)
    await tb.collectives_done()
    for c, (offset, want) in enumerate(expect):
        got = await tb.read(c, COLLECTIVE_BASE + esize * offset, len(want))
        assert got == want, (f"chip {c} ({tb.coords(c)}): {op} {fmt} length {length} along "
                             f"{dim}: buffer differs from the golden model")


async def _timed_collective(tb, **descriptor):
    """Cycles of the collective ``descriptor`` started on every chip in the same cycle, from
    the descriptors' handshake to the cycle the last chip's ``busy`` falls (host streams
    paused)."""
    await tb.pause()
    word = tb.ports["collective"].pack(space="VMEM", **descriptor)
    for c in range(tb.chips):
        getattr(tb.dut, f"collective__{c}__payload").value = word
        getattr(tb.dut, f"collective__{c}__valid").value = 1
    await ReadOnly()
    assert all(int(getattr(tb.dut, f"collective__{c}__ready").value) for c in range(tb.chips))
    await RisingEdge(tb.dut.clk)
    t0 = get_sim_time("ns")
    await FallingEdge(tb.dut.clk)
    for c in range(tb.chips):
        getattr(tb.dut, f"collective__{c}__valid").value = 0
    end = t0
    for c in range(tb.chips):
        busy = getattr(tb.dut, f"busy__{c}")
        if int(busy.value):
            await FallingEdge(busy)
            end = max(end, get_sim_time("ns"))
    tb.resume()
    return round((end - t0) / PERIOD_NS)


async def _timed_ring(tb, rng, op, spec, size, check):
    dims, shift = tb.golden_dims()
    esize = ESIZE[spec["fmt"]]
    length = size // esize
    if check:
        buffers = [random_elements(rng, spec["fmt"], length) for _ in range(tb.chips)]
        for c, b in enumerate(buffers):
            tb.write(c, COLLECTIVE_BASE, b)
    cycles = await _timed_collective(tb, op=op.upper(), dim=spec["dim"],
                                     fmt=FMT_CODES[spec["fmt"]], address=COLLECTIVE_BASE,
                                     length=length)
    if check:
        expect = ring_collective(op, spec["fmt"], dims, spec["dim"] + shift, length,
                                 _grain(tb, spec["fmt"]), buffers)
        for c, (offset, want) in enumerate(expect):
            got = await tb.read(c, COLLECTIVE_BASE + esize * offset, len(want))
            assert got == want, f"chip {c}: {op} of {size} B differs from the golden model"
    return cycles


async def _timed_all_to_all(tb, rng, size, check):
    """An all-to-all of ``size`` bytes per chip, ``size / chips`` to each chip (uniform):
    send buffer at 0, receive buffer at ``size``, tables after it."""
    sizes = [[size // tb.chips] * tb.chips for _ in range(tb.chips)]
    before = None
    if check:
        before = [rng.randbytes(size) for _ in range(tb.chips)]
        for c in range(tb.chips):
            tb.write(c, size, before[c])
    sends = _load_all_to_all(tb, rng, sizes, 0, size, 2 * size, random_data=check)
    cycles = await _timed_collective(tb, op="ALL_TO_ALL", address=2 * size, length=tb.chips)
    if check:
        await _check_all_to_all(tb, sizes, sends, size, before)
    return cycles


def _load_all_to_all(tb, rng, sizes, src_base, dst_base, table_base, *, random_data=True):
    """Queue the host writes of an all-to-all: every chip's messages (random bytes, or
    nothing) and its table; returns the messages, ``sends[src][dst]``."""
    tables, _ = all_to_all_table(sizes, tb.fb, src_base, dst_base)
    sends = [[rng.randbytes(b) if random_data else bytes(b) for b in row] for row in sizes]
    for c in range(tb.chips):
        if random_data:
            for msg, entry in zip(sends[c], tables[c], strict=True):
                tb.write(c, entry["src_address"], msg)
        tb.write_table(c, table_base, tables[c])
    return sends


async def _check_all_to_all(tb, sizes, sends, dst_base, before):
    """Every chip's receive buffer holds the golden model's messages in their slots and nothing
    else changed (``before``: what each held before)."""
    dims, _ = tb.golden_dims()
    received = all_to_all([[np.frombuffer(m, np.uint8) for m in row] for row in sends], dims)
    _, landing = all_to_all_table(sizes, tb.fb, 0, dst_base)
    for d in range(tb.chips):
        slots = [(landing[d][s] - dst_base, sizes[s][d]) for s in range(tb.chips)]
        end = max(first + n for first, n in slots)
        got = await tb.read(d, dst_base, end)
        want = bytearray(before[d][:end])
        for s, (first, n) in enumerate(slots):
            want[first:first + n] = received[d][s].tobytes()
        assert got == bytes(want), f"chip {d}: all-to-all receive buffer differs"


@measurement
@cocotb.test()
async def measure_collectives(dut):
    """Cycles of collectives (spec ``ops``, ``sizes`` in bytes per chip, ``dim``, ``fmt``;
    ``all_to_all`` uniform at ``a2a_sizes`` bytes sent per chip) started on every chip at
    once; every run of at most ``verify`` bytes per chip is loaded with random data and
    checked against the golden model (the RTL's timing does not depend on the data)."""
    spec = perf_spec()
    tb = PodBench(dut)
    await tb.start(clock_impl="gpi")
    rng = new_rng()
    rows = []
    for op in spec["ops"]:
        for size in spec["a2a_sizes" if op == "all_to_all" else "sizes"]:
            check = size <= spec["verify"]
            if op == "all_to_all":
                cycles = await _timed_all_to_all(tb, rng, size, check)
            else:
                cycles = await _timed_ring(tb, rng, op, spec, size, check)
            dut._log.info(f"{op} {size} B per chip: {cycles} cycles"
                          + (" (checked)" if check else ""))
            rows.append({"op": op, "bytes": size, "cycles": cycles, "checked": check})
    assert tb.counters()["errors"] == 0, tb.counters()
    write_report(spec, {"rows": rows, "counters": tb.counters()})


def _dims_to_test(tb):
    return [d for d, k in enumerate(tb.ici.dims) if k > 1]


@cocotb.test()
async def test_collectives(dut):
    """Reduce-scatter, all-gather and all-reduce in int32, fp32 and bfloat16 along every
    dimension (and on a 2-D pod the 2-D all-reduce), at lengths from one
    element to pieces of several packets (uneven splits, empty pieces), each chip starting
    at a random cycle, every flow of idle and backpressure: every chip's buffer bit-exactly
    as the golden model's, no error, drop or sequence error anywhere."""
    tb = PodBench(dut)
    await tb.start()
    rng = new_rng()
    packet_elems = tb.cfg.nic.packet_bytes // 4
    lengths = [1, 7, 37, 101, 4 * tb.chips * packet_elems + 5]
    cases = [(op, dim, fmt) for dim in _dims_to_test(tb) for op in OPS
             for fmt in ("int32", "fp32", "bfloat16")]
    if len(_dims_to_test(tb)) == 2:
        cases += [("all_reduce_2d", 0, fmt) for fmt in ("int32", "fp32", "bfloat16")]
    for k, (op, dim, fmt, length) in enumerate((op, dim, fmt, length) for op, dim, fmt in cases
                                               for length in lengths):
        flow = FLOWS[k % len(FLOWS)]
        tb.flow(flow)
        dut._log.info(f"{op} {fmt} dim {dim} length {length} flow {flow}")
        await _run_collective(tb, rng, op, dim, fmt, length)
    counters = tb.counters()
    assert counters == {**counters, "dropped": 0, "seq_errors": 0, "errors": 0,
                        "net_dropped": 0}, counters
    assert not any(tb.completions(c) for c in range(tb.chips)), "completions to the host"


def _random_messages(tb, rng, count):
    """``count`` random messages between random chips (self included), each with a slot of
    its own at both ends: (src, dst, kind, op, fmt, bytes, ack, tag, sem, slot)."""
    out = []
    for k in range(count):
        kind = rng.choice(["WRITE", "WRITE", "READ"])
        op = rng.choice(["STORE", "ADD", "ADD_FINAL"]) if kind == "WRITE" else "STORE"
        size = rng.choice([0, 4, 16, 100, 3 * tb.cfg.nic.packet_bytes + 20,
                           rng.randrange(1, SLOT)])
        if op != "STORE":
            size -= size % 4
        out.append(dict(src=rng.randrange(tb.chips), dst=rng.randrange(tb.chips), kind=kind,
                        op=op, fmt=rng.choice(["INT32", "FP32"]), bytes=size,
                        ack=rng.randrange(2) if kind == "WRITE" else 0,
                        tag=rng.randrange(16), sem=rng.randrange(30), slot=k))
    return out


async def _run_messages(tb, rng, count, *, during=None):
    """Send ``count`` random messages (and start ``during``, a coroutine, meanwhile); check
    every chip's message slots and completions against a model of the messages."""
    slots = count
    image = [{space: bytearray(random_elements(rng, "fp32", slots * SLOT // 4))
              for space in tb.spaces} for _ in range(tb.chips)]
    for c in range(tb.chips):
        for space in tb.spaces:
            tb.write(c, MESSAGE_BASE, bytes(image[c][space]), space=space)
    await tb.drained()
    before = [len(tb.snk[c]["done"].beats) for c in range(tb.chips)]
    expect = [[] for _ in range(tb.chips)]
    messages = _random_messages(tb, rng, count)
    for msg in messages:
        s, d, k, n = msg["src"], msg["dst"], msg["slot"], msg["bytes"]
        here, there = rng.choice(tb.spaces), rng.choice(tb.spaces)
        local, remote = image[s][here], image[d][there]
        base = k * SLOT
        if msg["kind"] == "WRITE":
            data = bytes(local[base:base + n])
            if msg["op"] != "STORE":
                data = add_bytes(msg["fmt"].lower(), data, bytes(remote[base:base + n]))
            remote[base:base + n] = data
            expect[d].append(("WRITE", s * LOCAL_PORTS + REQUEST_PORT, msg["sem"], msg["tag"]))
            if msg["ack"]:
                expect[s].append(("ACK", d * LOCAL_PORTS + RESPONSE_PORT, NO_SEM, msg["tag"]))
        else:
            local[base:base + n] = remote[base:base + n]
            expect[s].append(("READ_DATA", d * LOCAL_PORTS + RESPONSE_PORT, msg["sem"], msg["tag"]))
        tb.dut._log.info(f"message {k}: {s} -> {d} {msg['kind']} {msg['op']} {n} B, "
                         f"{here} -> {there}")
        tb.message(s, kind=msg["kind"], dst=tb.dst(d), space=there,
                   address=MESSAGE_BASE + base, bytes=n, op=msg["op"], fmt=msg["fmt"],
                   ack=msg["ack"], tag=msg["tag"], sem=msg["sem"], reply_space=here,
                   reply_address=MESSAGE_BASE + base)
    if during is not None:
        await during
    kinds = {v: k for k, v in tb.ports["done"].field("kind")["enum"].items()}
    await tb.until(lambda: all(len(tb.snk[c]["done"].beats) - before[c] >= len(expect[c])
                               for c in range(tb.chips)),
                   lambda: f"message completions (per chip, of {[len(e) for e in expect]}: "
                           f"{[len(tb.snk[c]['done'].beats) - before[c] for c in range(tb.chips)]}"
                           ")")
    await ClockCycles(tb.dut.clk, 50)
    for c in range(tb.chips):
        got = sorted((kinds[x["kind"]], x["src"], x["sem"], x["tag"])
                     for x in tb.completions(c)[before[c]:])
        assert got == sorted(expect[c]), f"chip {c}: completions {got} != {sorted(expect[c])}"
        for space in tb.spaces:
            mem = await tb.read(c, MESSAGE_BASE, slots * SLOT, space=space)
            want = image[c][space]
            for k in range(slots):
                assert mem[k * SLOT:(k + 1) * SLOT] == bytes(want[k * SLOT:(k + 1) * SLOT]), (
                    f"chip {c} {space} slot {k}: {[m for m in messages if m['slot'] == k]}")


@cocotb.test()
async def test_messages(dut):
    """Remote stores, int32 / fp32 adds and reads between every kind of pair (self included),
    0 bytes to several packets, partial flits, acknowledged or not, under every flow: every
    chip's memory as a model of the messages says, every completion (landed writes, read
    data, acks) once at the right chip with its source, semaphore and tag."""
    tb = PodBench(dut)
    await tb.start()
    rng = new_rng()
    for flow in FLOWS:
        tb.flow(flow)
        dut._log.info(f"flow {flow}")
        await _run_messages(tb, rng, 12)
    counters = tb.counters()
    assert counters == {**counters, "dropped": 0, "seq_errors": 0, "errors": 0,
                        "net_dropped": 0}, counters


@cocotb.test()
async def test_collective_with_traffic(dut):
    """A collective runs while the host's messages load the same network and memories: both
    end as the golden model says."""
    tb = PodBench(dut)
    await tb.start()
    rng = new_rng()
    tb.flow("random_random")
    dim = _dims_to_test(tb)[-1]
    length = 2 * tb.chips * tb.cfg.nic.packet_bytes // 4 + 3
    await _run_messages(tb, rng, 10,
                        during=_run_collective(tb, rng, "all_reduce", dim, "fp32", length))
    assert tb.counters()["errors"] == 0


def _all_to_all_cases(tb, rng):
    """Sizes matrices (bytes, ``sizes[src][dst]``): uniform, ragged with zeros, skewed (one
    pair several packets, the rest a few bytes or nothing, one chip sending nothing), all
    zero."""
    n, packet = tb.chips, tb.cfg.nic.packet_bytes
    ragged = [[0 if rng.random() < 0.3 else rng.randrange(1, 400) for _ in range(n)]
              for _ in range(n)]
    skewed = [[rng.choice([0, 1, 5, 16]) for _ in range(n)] for _ in range(n)]
    skewed[0][n - 1] = 4000
    skewed[n // 2] = [0] * n
    return {"uniform": [[packet + 20] * n for _ in range(n)], "ragged": ragged,
            "skewed": skewed, "zeros": [[0] * n for _ in range(n)]}


@cocotb.test()
async def test_all_to_all(dut):
    """Ragged all-to-all among every chip of the pod (self included) from each chip's table:
    uniform, ragged with zero sizes, skewed and all-zero matrices, partial flits, each chip
    starting at a random cycle under every flow: every chip's receive buffer holds the
    golden model's messages in their slots and nothing else changed."""
    tb = PodBench(dut)
    await tb.start()
    rng = new_rng()
    table = tb.cfg.chip.nic_words * tb.fb - tb.chips * tb.fb
    for k, (name, sizes) in enumerate(_all_to_all_cases(tb, rng).items()):
        flow = FLOWS[k % len(FLOWS)]
        tb.flow(flow)
        dut._log.info(f"all-to-all {name} flow {flow}: {sizes}")
        before = [rng.randbytes(table - A2A_DST) for _ in range(tb.chips)]
        for c in range(tb.chips):
            tb.write(c, A2A_DST, before[c])
        sends = _load_all_to_all(tb, rng, sizes, A2A_SRC, A2A_DST, table)
        await tb.drained()
        for c in rng.sample(range(tb.chips), tb.chips):
            await ClockCycles(tb.dut.clk, rng.randrange(20))
            tb.all_to_all(c, table)
        await tb.collectives_done()
        await _check_all_to_all(tb, sizes, sends, A2A_DST, before)
    counters = tb.counters()
    assert counters == {**counters, "dropped": 0, "seq_errors": 0, "errors": 0,
                        "net_dropped": 0}, counters
    assert not any(tb.completions(c) for c in range(tb.chips)), "completions to the host"


@cocotb.test()
async def test_bad_input(dut):
    """Bad requests are counted and dropped, and the pod goes on: a message of a response
    kind, a descriptor of an unknown op, an all-to-all of the wrong length, a host read of
    HBM at an address that is not a flit's (answered with zeros) and a remote write past the
    memory; then a collective is still exact."""
    tb = PodBench(dut)
    await tb.start()
    rng = new_rng()
    tb.flow("random_random")
    tb.message(0, kind="ACK", dst=tb.dst(1 % tb.chips))
    tb.message(0, kind="READ_DATA", dst=tb.dst(1 % tb.chips), bytes=16)
    tb.src[0]["collective"].send([tb.ports["collective"].pack(op=7, length=4, space="VMEM")])
    tb.src[0]["collective"].send([tb.ports["collective"].pack(op="ALL_TO_ALL",
                                                               length=tb.chips + 1,
                                                               space="VMEM")])
    await tb.drained()
    assert await tb.read(0, 4, 16, space="HBM") == bytes(16)
    tb.message(0, kind="WRITE", dst=tb.dst(tb.chips - 1), space="VMEM",
               address=tb.cfg.chip.nic_words * tb.fb, bytes=16, sem=3, reply_space="VMEM",
               reply_address=0)
    await tb.drained()
    await tb.until(lambda: len(tb.snk[tb.chips - 1]["done"].beats) == 1, "bad write completes")
    assert tb.counters()["errors"] == 6, tb.counters()
    await _run_collective(tb, rng, "all_reduce", _dims_to_test(tb)[0], "int32", 37)
    counters = tb.counters()
    assert counters == {**counters, "dropped": 0, "seq_errors": 0, "errors": 6}, counters


@only_if(lambda p: p["faults"])
@cocotb.test()
async def test_link_faults(dut):
    """Bit errors on every link (CRC + retry repairs them): a collective and messages still
    end exactly as the golden model says, and the links did retransmit."""
    tb = PodBench(dut)
    await tb.start(fault_rate=300)
    rng = new_rng()
    tb.flow("random_random")
    dim = _dims_to_test(tb)[0]
    length = 2 * tb.chips * tb.cfg.nic.packet_bytes // 4 + 9
    await _run_collective(tb, rng, "all_reduce", dim, "fp32", length)
    await _run_messages(tb, rng, 8)
    counters = tb.counters()
    assert counters["faults"] > 0 and counters["retries"] > 0, counters
    assert counters == {**counters, "dropped": 0, "seq_errors": 0, "errors": 0}, counters
