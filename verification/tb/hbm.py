"""cocotb testbench of the HBM controller: cocotbext-axi masters on its AXI4 ports, the golden
device model (verification/models/hbm.py) on every pseudo-channel, a golden memory scoreboard.

:class:`HBMBench` wraps the DUT: clock and reset, one :class:`~cocotbext.axi.AxiMaster` per port
with random idle on AW, W and AR and random backpressure on R and B (pause generators), and one
clocked loop that plays the HBM device for all pseudo-channels: every cycle it checks the
commands against the model (which raises on the first violation, failing the test), takes
write data and drives read data CL cycles after RD. The scoreboard is a byte-level golden
memory; each test keeps the bytes that concurrent IDs touch disjoint (or orders the accesses
by waiting for responses), so every read has exactly one right answer. The seed is printed by
cocotb and reproduces any failure (PODIUM_SEED, see README).
"""

import os
import random
from collections import Counter

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiBus, AxiMaster, AxiResp

from hdl.hbm.config import HBMConfig
from verification.models.hbm import HBMDeviceModel
from verification.tb.packing import load_sidecar

__all__ = ["HBMBench", "Saturator", "FLOWS", "PATTERNS"]

# Idle on the request channels x backpressure on the response channels.
FLOWS = ["none_none", "random_random", "none_bursty"]

ROW_OPS = {0: "act", 1: "pre", 2: "prea", 3: "ref"}


def _pause(kind, rng):
    """A cocotbext-axi pause generator: True on cycles the channel holds back."""
    while True:
        if kind == "none":
            yield False
        elif kind == "random":
            yield rng.random() < 0.3
        else:                                   # bursty: 4 go, 12 hold, jittered
            for k in range(16):
                yield k >= 4 or rng.random() < 0.1


class _Device:
    """Handles of one pseudo-channel's command/data interface."""

    def __init__(self, dut, i):
        def port(name):
            return getattr(dut, f"pc{i}__{name}")
        self.row_valid, self.row_op = port("row_valid"), port("row_op")
        self.row_bank, self.row_addr = port("row_bank"), port("row_addr")
        self.col_valid, self.col_op = port("col_valid"), port("col_op")
        self.col_bank, self.col_addr = port("col_bank"), port("col_addr")
        self.wrdata, self.wrdata_valid = port("wrdata"), port("wrdata_valid")
        self.rddata, self.rddata_valid = port("rddata"), port("rddata_valid")


class HBMBench:
    def __init__(self, dut, flow="random_random", masters=True):
        self.dut = dut
        self.sidecar = load_sidecar()
        self.cfg = HBMConfig.from_dict(self.sidecar["parameters"])
        cfg = self.cfg
        self.rng = random.Random(random.getrandbits(64))
        self.model = HBMDeviceModel(cfg.timing, cfg.pseudo_channels, cfg.bank_groups,
                                    cfg.banks_per_group, cfg.words, check_refresh=cfg.refresh)
        self.devices = [_Device(dut, i) for i in range(cfg.pseudo_channels)]
        self.golden = {}                        # byte address -> value (absent: zero)
        self.cycle = 0
        self.error = None
        trace = os.environ.get("PODIUM_HBM_TRACE")      # a file: every command, for debugging
        self.trace = open(trace, "w") if trace else None
        idle, backpressure = flow.split("_")
        self.masters = []
        for p in range(cfg.ports if masters else 0):
            master = AxiMaster(AxiBus.from_prefix(dut, f"s{p}_axi"), dut.clk, dut.rst)
            prng = random.Random(self.rng.getrandbits(64))
            for ch in (master.write_if.aw_channel, master.write_if.w_channel,
                       master.read_if.ar_channel):
                ch.set_pause_generator(_pause(idle, prng))
            for ch in (master.write_if.b_channel, master.read_if.r_channel):
                ch.set_pause_generator(_pause(backpressure, prng))
            self.masters.append(master)

    async def start(self):
        dut = self.dut
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
        for d in self.devices:
            d.rddata_valid.value = 0
            d.rddata.value = 0
        dut.rst.value = 1
        await ClockCycles(dut.clk, 4)
        dut.rst.value = 0
        cocotb.start_soon(self._device_loop())

    async def _device_loop(self):
        """Cycle 0 is the first cycle out of reset, where the controller's refresh timer
        starts too."""
        model, clk = self.model, self.dut.clk
        try:
            while True:
                await FallingEdge(clk)
                for i, d in enumerate(self.devices):
                    beat = model.read_data(i, self.cycle)
                    d.rddata_valid.value = int(beat is not None)
                    if beat is not None:
                        d.rddata.value = beat
                await ReadOnly()
                for i, d in enumerate(self.devices):
                    self._sample(i, d)
                model.tick(self.cycle)
                await RisingEdge(clk)
                self.cycle += 1
        except AssertionError as e:
            self.error = e
            raise

    def _sample(self, i, d):
        model, cycle = self.model, self.cycle
        wv = int(d.wrdata_valid.value)
        model.write_data(i, cycle, wv, d.wrdata.value.to_unsigned() if wv else 0)
        if self.trace and (int(d.row_valid.value) or int(d.col_valid.value)):
            self.trace.write(f"{cycle} pc{i} row {int(d.row_valid.value)}:"
                             f"{int(d.row_op.value)}:{int(d.row_bank.value)}:"
                             f"{int(d.row_addr.value)} col {int(d.col_valid.value)}:"
                             f"{int(d.col_op.value)}:{int(d.col_bank.value)}\n")
        if int(d.row_valid.value):
            op = ROW_OPS[int(d.row_op.value)]
            if op == "act":
                model.act(i, cycle, int(d.row_bank.value), int(d.row_addr.value))
            elif op == "pre":
                model.pre(i, cycle, int(d.row_bank.value))
            elif op == "prea":
                model.prea(i, cycle)
            else:
                model.ref(i, cycle)
        if int(d.col_valid.value):
            if int(d.col_op.value):
                model.wr(i, cycle, int(d.col_bank.value), int(d.col_addr.value))
            else:
                model.rd(i, cycle, int(d.col_bank.value), int(d.col_addr.value))

    # Scoreboard ----------------------------------------------------------------------------

    def expect(self, address, length):
        return bytes(self.golden.get(a, 0) for a in range(address, address + length))

    def in_range(self, address, length):
        return address + length <= self.cfg.capacity

    async def write(self, address, data, awid=0, port=0, size=None):
        """AXI write; updates the golden memory and checks the response."""
        resp = await self.masters[port].write(address, data, awid=awid, size=size)
        if self.in_range(address, len(data)):
            assert resp.resp == AxiResp.OKAY, f"write {address:#x}: {resp.resp!r}"
            for k, b in enumerate(data):
                self.golden[address + k] = b
        else:
            assert resp.resp == AxiResp.DECERR, f"write {address:#x}: {resp.resp!r}"
        return resp

    async def read(self, address, length, arid=0, port=0, size=None):
        """AXI read, checked against the golden memory."""
        resp = await self.masters[port].read(address, length, arid=arid, size=size)
        if self.in_range(address, length):
            assert resp.resp == AxiResp.OKAY, f"read {address:#x}: {resp.resp!r}"
            want = self.expect(address, length)
            assert resp.data == want, (f"read {address:#x}+{length} id {arid}: got "
                                       f"{resp.data.hex()}, expected {want.hex()}")
        else:
            assert resp.resp == AxiResp.DECERR, f"read {address:#x}: {resp.resp!r}"
            assert resp.data == bytes(length), "DECERR read data not zero"
        return resp

    async def settle(self, budget=20000):
        """Wait until every master is idle and the controller has drained."""
        for m in self.masters:
            await m.wait()
        for _ in range(budget):
            await RisingEdge(self.dut.clk)
            if self.dut.idle.value:
                break
        else:
            raise AssertionError(f"controller not idle {budget} cycles after the last response")
        await ClockCycles(self.dut.clk, 8)

    def counter(self, name, pc=None):
        pcs = range(self.cfg.pseudo_channels) if pc is None else [pc]
        return sum(int(getattr(self.dut, f"pc{i}_{name}").value) for i in pcs)

    async def finish(self):
        """Drain, then check the counters against the device model and that it saw no
        violation."""
        await self.settle()
        assert self.error is None, str(self.error)
        # At a falling edge the counters hold every command up to the cycle before, and the
        # model has checked exactly those (it takes a cycle's commands later, at ReadOnly).
        await FallingEdge(self.dut.clk)
        cmds = Counter(self.model.commands)
        assert self.counter("reads") == cmds["RD"], f"reads {self.counter('reads')} vs {cmds}"
        assert self.counter("writes") == cmds["WR"], f"writes {self.counter('writes')} vs {cmds}"
        assert self.counter("acts") == cmds["ACT"], f"acts {self.counter('acts')} vs {cmds}"
        assert self.counter("refs") == cmds["REF"], f"refs {self.counter('refs')} vs {cmds}"
        busy = self.counter("data_busy")
        assert busy == 2 * (cmds["RD"] + cmds["WR"]), f"data_busy {busy} vs {cmds}"
        self.dut._log.info("%d cycles; device commands %s; sbe %d dbe %d rmw %d", self.cycle,
                           dict(cmds), self.counter("sbe"), self.counter("dbe"),
                           self.counter("rmw"))

    # Address helpers -----------------------------------------------------------------------

    def hot_address(self, rows=3, banks=None):
        """A random access-aligned address in a few rows of a few banks of every
        pseudo-channel, so traffic hits open rows, conflicts and spreads over channels."""
        cfg = self.cfg
        banks = banks or min(cfg.banks, 4)
        pc = self.rng.randrange(cfg.pseudo_channels)
        bank = self.rng.randrange(banks) * (cfg.banks // banks)
        row = self.rng.randrange(rows) * 7 + 1
        col = self.rng.randrange(1 << cfg.col_bits)
        return cfg.encode(pc, bank, row % (1 << cfg.row_bits), col)


def env_int(name, default):
    return int(os.environ.get(name, default))


class Saturator:
    """A lean AXI master for saturating traffic: one clocked loop per port keeps AR and AW/W
    valid whenever commands wait (unless ``flow`` pauses them), so the controller, not
    Python, sets the pace. Read data is checked against the bench's golden memory; every
    response must be OKAY.

    Commands are ``(kind, id, address, beats[, strb])`` with kind ``"r"`` or ``"w"``;
    full-width, access-aligned INCR bursts; write data is random and its strobed bytes (all by
    default) enter the golden memory. ``flow`` is ``"<idle>_<backpressure>"`` as for the
    cocotbext-axi masters (``FLOWS``): idle cycles on AR, AW and W, backpressure on R and B;
    a valid once raised stays until its handshake. ``b_latency`` lists, per write, the cycles
    from its AW handshake to its B.
    """

    WINDOW = 16

    def __init__(self, tb, port=0, flow="none_none"):
        self.tb = tb
        dut = tb.dut

        def sig(name):
            return getattr(dut, f"s{port}_axi_{name}")

        self.s = {n: sig(n) for n in (
            "awid", "awaddr", "awlen", "awsize", "awburst", "awvalid", "awready", "wdata",
            "wstrb", "wlast", "wvalid", "wready", "bid", "bresp", "bvalid", "bready", "arid",
            "araddr", "arlen", "arsize", "arburst", "arvalid", "arready", "rid", "rdata",
            "rresp", "rlast", "rvalid", "rready")}
        idle, backpressure = flow.split("_")
        self.pause = {ch: _pause(idle if ch in ("ar", "aw", "w") else backpressure,
                                 random.Random(tb.rng.getrandbits(64)))
                      for ch in ("ar", "aw", "w", "r", "b")}
        self.reads, self.writes = [], []
        self.kinds = []                     # "r" / "w" in add() order
        self.w_beats = []                   # (data, last, strb) in AW order
        self.expected = {}                  # id -> list of expected read beats (ints)
        self.aw_cycles = {}                 # id -> AW handshake cycles of unanswered writes
        self.b_latency = []
        self.outstanding = 0
        self.first_cycle = None
        self.last_cycle = None

    def add(self, kind, ident, address, beats, strb=None):
        ab = self.tb.cfg.access_bytes
        strb = (1 << ab) - 1 if strb is None else strb
        self.kinds.append(kind)
        if kind == "r":
            self.reads.append((ident, address, beats))
            want = self.expected.setdefault(ident, [])
            for k in range(beats):
                want.append(int.from_bytes(self.tb.expect(address + k * ab, ab), "little"))
        else:
            self.writes.append((ident, address, beats))
            for k in range(beats):
                data = self.tb.rng.getrandbits(8 * ab)
                for j, b in enumerate(data.to_bytes(ab, "little")):
                    if strb >> j & 1:
                        self.tb.golden[address + k * ab + j] = b
                self.w_beats.append((data, k == beats - 1, strb))
        self.outstanding += 1

    async def run(self):
        s, tb = self.s, self.tb
        ab = tb.cfg.access_bytes
        size = (ab - 1).bit_length()
        for name in ("awsize", "arsize"):
            s[name].value = size
        s["awburst"].value = s["arburst"].value = 1
        # Program order, loosely: neither channel runs more than WINDOW commands ahead of the
        # other's next one, so a mix reaches the memory in its ratio.
        r_pos = [p for p, kind in enumerate(self.kinds) if kind == "r"]
        w_pos = [p for p, kind in enumerate(self.kinds) if kind == "w"]
        end = len(self.kinds)
        ar = aw = w = 0
        held = {"ar": False, "aw": False, "w": False}
        while self.outstanding:
            await FallingEdge(tb.dut.clk)
            r_next = r_pos[ar] if ar < len(r_pos) else end
            w_next = w_pos[aw] if aw < len(w_pos) else end
            offer = {"ar": ar < len(self.reads) and r_next < w_next + self.WINDOW,
                     "aw": aw < len(self.writes) and w_next < r_next + self.WINDOW,
                     "w": w < len(self.w_beats)}
            for ch, want in offer.items():
                paused = next(self.pause[ch])
                s[f"{ch}valid"].value = int(held[ch] or (want and not paused))
            s["rready"].value = int(not next(self.pause["r"]))
            s["bready"].value = int(not next(self.pause["b"]))
            if ar < len(self.reads):
                ident, address, beats = self.reads[ar]
                s["arid"].value, s["araddr"].value, s["arlen"].value = ident, address, beats - 1
            if aw < len(self.writes):
                ident, address, beats = self.writes[aw]
                s["awid"].value, s["awaddr"].value, s["awlen"].value = ident, address, beats - 1
            if w < len(self.w_beats):
                s["wdata"].value, s["wlast"].value, s["wstrb"].value = self.w_beats[w]
            await ReadOnly()
            if self.first_cycle is None and (s["arvalid"].value or s["awvalid"].value):
                self.first_cycle = tb.cycle
            fire = {ch: bool(s[f"{ch}valid"].value and s[f"{ch}ready"].value)
                    for ch in ("ar", "aw", "w", "r", "b")}
            for ch in held:
                held[ch] = bool(s[f"{ch}valid"].value) and not fire[ch]
            if fire["ar"]:
                if tb.trace:
                    tb.trace.write(f"{tb.cycle} AR {self.reads[ar]} "
                                   f"{tb.cfg.decode(self.reads[ar][1])}\n")
                ar += 1
            if fire["aw"]:
                if tb.trace:
                    tb.trace.write(f"{tb.cycle} AW {self.writes[aw]}\n")
                self.aw_cycles.setdefault(self.writes[aw][0], []).append(tb.cycle)
                aw += 1
            if fire["w"]:
                w += 1
            if fire["r"]:
                ident = int(s["rid"].value)
                assert int(s["rresp"].value) == 0, f"read id {ident}: rresp {s['rresp'].value}"
                got = s["rdata"].value.to_unsigned()
                want = self.expected[ident].pop(0)
                assert got == want, f"read id {ident}: {got:#x}, expected {want:#x}"
                self.last_cycle = tb.cycle
                if s["rlast"].value:
                    self.outstanding -= 1
            if fire["b"]:
                ident = int(s["bid"].value)
                assert int(s["bresp"].value) == 0, f"write id {ident}: bresp {s['bresp'].value}"
                self.b_latency.append(tb.cycle - self.aw_cycles[ident].pop(0))
                self.outstanding -= 1
                self.last_cycle = tb.cycle
            await RisingEdge(tb.dut.clk)
        await FallingEdge(tb.dut.clk)
        for name in ("arvalid", "awvalid", "wvalid"):
            s[name].value = 0


def _pattern(tb, name, accesses, port=0, ports=1):
    """The commands of a benchmark pattern (see sim/hbm_perf.py), for one port of ``ports``."""
    cfg, rng = tb.cfg, tb.rng
    ab = cfg.access_bytes
    ids = 1 << cfg.id_width
    cmds = []
    if name in ("seq_read", "seq_write", "stream"):
        region = accesses * ab
        base = port * region
        burst = 32
        for k in range(0, accesses, burst):
            kind = "w" if name == "seq_write" else "r"
            cmds.append((kind, (k // burst) % 2, base + k * ab, min(burst, accesses - k)))
    elif name == "rand_read":
        for k in range(accesses):
            cmds.append(("r", k % ids, rng.randrange(cfg.capacity // ab) * ab, 1))
    elif name == "rand_mix":
        # Distinct addresses: a read never races a write to the same bytes.
        pairs = cfg.capacity // (2 * ab)
        used = set()
        for k in range(accesses // 2):
            kind = "w" if k % 3 == 2 else "r"
            pair = rng.randrange(pairs)
            while pair in used:
                pair = rng.randrange(pairs)
            used.add(pair)
            cmds.append((kind, k % ids, pair * 2 * ab, 2))
    elif name == "row_walk":
        # Reads in column order within a row, rows in turn in one bank: each row a new ACT.
        per_row = 1 << cfg.col_bits
        for k in range(accesses):
            row, col = divmod(k, per_row)
            cmds.append(("r", 0, cfg.encode(0, 0, row % (1 << cfg.row_bits), col), 1))
    else:
        raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {name!r}")
    return cmds


PATTERNS = ("seq_read", "seq_write", "rand_read", "rand_mix", "stream", "row_walk")


# Tests ----------------------------------------------------------------------------------------

def _chunk(tb):
    """Bytes in one ownership chunk: eight accesses (every pseudo-channel and bank group of a
    column under the default mapping)."""
    return 8 * tb.cfg.access_bytes


def _owned_chunk(tb, owner, owners):
    ch = _chunk(tb)
    index = tb.hot_address() // ch
    return (index - index % owners + owner) * ch


def _random_size(tb):
    """AXI size: usually the full bus, sometimes narrower (several beats per access)."""
    full = (tb.cfg.access_bytes - 1).bit_length()
    return full if tb.rng.random() < 0.7 else tb.rng.randrange(full)


async def _worker(tb, owner, owners, ops, port=0):
    """Random reads and writes of random length, alignment and size, on the chunks this
    owner's ID owns (the IDs' bytes are disjoint, their rows and banks are shared)."""
    ch = _chunk(tb)
    for _ in range(ops):
        base = _owned_chunk(tb, owner, owners)
        start = tb.rng.randrange(ch)
        length = tb.rng.randint(1, ch - start)
        size = _random_size(tb)
        if tb.rng.random() < 0.5:
            data = bytes(tb.rng.getrandbits(8) for _ in range(length))
            await tb.write(base + start, data, awid=owner, port=port, size=size)
        else:
            await tb.read(base + start, length, arid=owner, port=port, size=size)


def _ids(tb, n):
    return [k % (1 << tb.cfg.id_width) for k in range(n)]


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_random_mix(dut, flow):
    """Random mixes from several IDs on every port: burst lengths, sizes, alignments, strobes;
    addresses hitting the same and different banks, rows and pseudo-channels."""
    tb = HBMBench(dut, flow)
    await tb.start()
    owners = min(4 * tb.cfg.ports, 1 << tb.cfg.id_width)
    ops = env_int("PODIUM_HBM_OPS", 30)
    tasks = [cocotb.start_soon(_worker(tb, k, owners, ops, port=k % tb.cfg.ports))
             for k in range(owners)]
    for task in tasks:
        await task
    await tb.finish()


@cocotb.test()
async def test_read_after_write(dut):
    """Read-after-write on one address from different IDs: IDs share the same few accesses
    (each owns a few bytes of every one, so every write is a partial-word read-modify-write
    racing the others); each writes its bytes and, once the write is answered, another ID
    reads them back and must see the new data."""
    tb = HBMBench(dut)
    await tb.start()
    cfg = tb.cfg
    ids = min(4, 1 << cfg.id_width)
    lane = cfg.access_bytes // ids
    hot = [tb.hot_address(rows=2, banks=2) for _ in range(4)]

    async def hammer(k):
        for _ in range(12):
            base = tb.rng.choice(hot) + k * lane
            start = tb.rng.randrange(lane)
            data = bytes(tb.rng.getrandbits(8) for _ in range(tb.rng.randint(1, lane - start)))
            port = tb.rng.randrange(cfg.ports)
            await tb.write(base + start, data, awid=k, port=port)
            await tb.read(base + start, len(data), arid=(k + 1) % ids, port=port)

    tasks = [cocotb.start_soon(hammer(k)) for k in range(ids)]
    for task in tasks:
        await task
    await tb.finish()
    assert tb.counter("rmw") > 0, "no write needed a read-modify-write"


@cocotb.test()
async def test_long_bursts(dut):
    """Long INCR bursts (up to 256 beats) written and read back across rows, banks and
    pseudo-channels, with reads of other IDs in between."""
    tb = HBMBench(dut)
    await tb.start()
    cfg = tb.cfg
    for n in range(3):
        base = tb.rng.randrange(cfg.capacity // 4096) * 4096
        data = bytes(tb.rng.getrandbits(8) for _ in range(4096 * (1 + n % 2)))
        await tb.write(base, data, awid=n)
        await tb.read(base + 7, len(data) - 19, arid=n + 1)
    await tb.finish()


@cocotb.test()
async def test_ecc(dut):
    """SECDED: single flipped bits (data or check) are corrected and counted; two flipped bits
    in a word answer SLVERR on that beat only and are counted; a partial write onto such a word
    is refused with SLVERR and leaves it alone; a full write repairs it. Traffic of another ID
    runs meanwhile and is not disturbed."""
    tb = HBMBench(dut)
    await tb.start()
    cfg = tb.cfg
    ab = cfg.access_bytes
    addrs = sorted({tb.hot_address(rows=4, banks=cfg.banks) for _ in range(12)})
    for a in addrs:
        await tb.write(a, bytes(tb.rng.getrandbits(8) for _ in range(ab)), awid=1)
    await tb.settle()
    background = cocotb.start_soon(_worker(tb, 0, 2, 20))    # owner 0 of 2: other chunks
    singles, doubles = addrs[: len(addrs) // 2], addrs[len(addrs) // 2:]
    for a in singles:
        pc, bank, row, col = cfg.decode(a)
        tb.model.inject(pc, bank, row, col, tb.rng.randrange(cfg.words), [tb.rng.randrange(72)])
    double_words = {}
    for a in doubles:
        pc, bank, row, col = cfg.decode(a)
        word = tb.rng.randrange(cfg.words)
        tb.model.inject(pc, bank, row, col, word, tb.rng.sample(range(72), 2))
        double_words[a] = word
    for a in singles:
        await tb.read(a, ab, arid=1)
    assert tb.counter("sbe") == len(singles), f"sbe {tb.counter('sbe')}, expected {len(singles)}"
    for a in doubles:
        resp = await tb.masters[0].read(a, ab, arid=1)
        assert resp.resp == AxiResp.SLVERR, f"double error at {a:#x} answered {resp.resp!r}"
        word = double_words[a]
        good = [k for k in range(ab) if k // 8 != word]
        want = tb.expect(a, ab)
        assert [resp.data[k] for k in good] == [want[k] for k in good], "other words disturbed"
    assert tb.counter("dbe") == len(doubles), f"dbe {tb.counter('dbe')}, expected {len(doubles)}"
    # Partial write onto a word with a double error: refused, memory unchanged.
    a = doubles[0]
    resp = await tb.masters[0].write(a + 3, b"\x55", awid=1)
    assert resp.resp == AxiResp.SLVERR, f"partial write onto a double error: {resp.resp!r}"
    resp = await tb.masters[0].read(a, ab, arid=1)
    assert resp.resp == AxiResp.SLVERR, "the double error should still be there"
    await tb.write(a, bytes(ab), awid=1)
    await tb.read(a, ab, arid=1)
    await background
    await tb.finish()


@cocotb.test()
async def test_bad_requests(dut):
    """Addresses past the capacity answer DECERR (reads return zero) and FIXED bursts answer
    SLVERR, beat by beat, with nothing stored; in-range traffic of other IDs meanwhile is
    served correctly, and the error counters count every beat."""
    from cocotbext.axi import AxiBurstType

    tb = HBMBench(dut)
    await tb.start()
    cfg = tb.cfg
    background = cocotb.start_soon(_worker(tb, 0, 2, 20))
    expected_decerr = 0
    if cfg.addr_width > cfg.capacity_bits:
        for _ in range(6):
            top = 1 << cfg.addr_width
            a = tb.rng.randrange(cfg.capacity, top - 4096) & ~(cfg.access_bytes - 1)
            beats = tb.rng.randint(1, 4)
            await tb.write(a, bytes(beats * cfg.access_bytes), awid=1)
            await tb.read(a, beats * cfg.access_bytes, arid=1)
            expected_decerr += 2 * beats
    a = _owned_chunk(tb, 1, 2)
    before = tb.expect(a, cfg.access_bytes)
    resp = await tb.masters[0].write(a, bytes(range(cfg.access_bytes)) * 2, awid=1,
                                     burst=AxiBurstType.FIXED)
    assert resp.resp == AxiResp.SLVERR, f"FIXED write burst answered {resp.resp!r}"
    resp = await tb.masters[0].read(a, 2 * cfg.access_bytes, arid=1, burst=AxiBurstType.FIXED)
    assert resp.resp == AxiResp.SLVERR, f"FIXED read burst answered {resp.resp!r}"
    await tb.read(a, cfg.access_bytes, arid=1)
    assert tb.expect(a, cfg.access_bytes) == before
    await background
    await tb.finish()
    decerr = sum(int(getattr(dut, f"s{p}_decerr").value) for p in range(cfg.ports))
    slverr = sum(int(getattr(dut, f"s{p}_slverr").value) for p in range(cfg.ports))
    assert decerr == expected_decerr, f"decerr counter {decerr}, expected {expected_decerr}"
    assert slverr == 4, f"slverr counter {slverr}, expected 4 (two FIXED bursts of 2 beats)"


@cocotb.test()
async def test_refresh_soak(dut):
    """A soak over 20 x tREFI with light random traffic: the device model fails the run if a
    refresh is ever overdue or breaks a timing rule; the data written early must still read
    back at the end, and the refresh count must match the elapsed time."""
    tb = HBMBench(dut)
    await tb.start()
    cfg = tb.cfg
    intervals = env_int("PODIUM_HBM_SOAK", 20)
    end = intervals * cfg.timing.refi
    owners = min(4, 1 << cfg.id_width)

    async def trickle(k):
        while tb.cycle < end:
            await _worker(tb, k, owners, 1)
            await ClockCycles(dut.clk, tb.rng.randrange(200, 2000))

    tasks = [cocotb.start_soon(trickle(k)) for k in range(owners)]
    for task in tasks:
        await task
    await tb.finish()
    for pc in range(cfg.pseudo_channels):
        refs = tb.model.ch[pc].refs
        due = tb.cycle // cfg.timing.refi
        assert due - 8 <= refs <= due, f"pc{pc}: {refs} refreshes in {tb.cycle} cycles"
    for a in sorted(tb.golden)[:: max(1, len(tb.golden) // 64)]:
        await tb.read(a, 1, arid=0)


@cocotb.test()
async def test_refresh_under_load(dut):
    """Sequential writes offered faster than the pseudo-channels can take them, for 10 x tREFI:
    the queues never empty, so refreshes are forced (``forced_refs``); the device model checks
    none is overdue and no timing is broken. Then part of the data is read back and checked,
    and random reads at saturation issue ACTs as fast as tRRD and tFAW allow."""
    tb = HBMBench(dut, masters=False)
    await tb.start()
    cfg = tb.cfg
    accesses = 10 * cfg.timing.refi * cfg.pseudo_channels // 2
    for phase in ("seq_write", "seq_read", "rand_read"):
        drivers = [Saturator(tb, p, "random_random") for p in range(cfg.ports)]
        n = {"seq_write": accesses, "seq_read": accesses // 8, "rand_read": 2000}[phase]
        for p, drv in enumerate(drivers):
            for cmd in _pattern(tb, phase, n // cfg.ports, p, cfg.ports):
                drv.add(*cmd)
        tasks = [cocotb.start_soon(d.run()) for d in drivers]
        for task in tasks:
            await task
        if phase == "seq_write":
            forced = tb.counter("forced_refs")
            assert forced >= cfg.pseudo_channels, f"only {forced} refreshes were forced"
    await tb.finish()
    refs = tb.counter("refs")
    assert refs >= cfg.pseudo_channels * (tb.cycle // cfg.timing.refi - 8), f"{refs} refreshes"
    assert tb.cycle >= 10 * cfg.timing.refi, f"only {tb.cycle} cycles"


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_write_not_starved(dut, flow):
    """Sparse partial writes (answered only when their WR issues) amid random reads that keep
    the queues full: the write watermark never fills, yet every write is answered within the
    bound the starvation cap sets, and the merged data reads back."""
    from hdl.hbm.channel import LEAVE_LIMIT

    tb = HBMBench(dut, masters=False)
    await tb.start()
    cfg = tb.cfg
    ab, ids = cfg.access_bytes, 1 << cfg.id_width
    half = cfg.capacity // 2 // ab            # reads below, writes above: no address shared
    drv = Saturator(tb, 0, flow)
    writes = []
    for k in range(env_int("PODIUM_HBM_STARVE_READS", 2000)):
        if k % 150 == 75:
            a = (half + tb.rng.randrange(half)) * ab
            drv.add("w", k % ids, a, 1, strb=tb.rng.randrange(1, (1 << ab) - 1))
            writes.append(a)
        drv.add("r", k % ids, tb.rng.randrange(half) * ab, 1)
    await drv.run()
    # Once starving, a write waits for the older starving requests (one row cycle each at
    # worst), the mode switch and its own row; the reads alone would hold it to the end.
    bound = cfg.starvation_cap + cfg.queue_depth * cfg.timing.rc + LEAVE_LIMIT + 100
    tb.dut._log.info("write latencies %s (bound %d), run %d cycles", drv.b_latency, bound,
                     drv.last_cycle - drv.first_cycle)
    assert max(drv.b_latency) <= bound, f"a write waited {max(drv.b_latency)} cycles"
    back = Saturator(tb, 0, flow)
    for a in writes:
        back.add("r", 1, a, 1)
    await back.run()
    await tb.finish()


@cocotb.test(skip=os.environ.get("PODIUM_PERF") is None)
async def measure(dut):
    """A benchmark pattern (PODIUM_PERF: {"pattern", "accesses", "report"}) at saturation, with
    the device model checking every command and the read data checked; writes cycles and
    counters as JSON to the report file. Not part of the regression."""
    import json

    spec = json.loads(os.environ["PODIUM_PERF"])
    tb = HBMBench(dut, masters=False)
    await tb.start()
    cfg = tb.cfg
    drivers = [Saturator(tb, p) for p in range(cfg.ports)]
    for p, drv in enumerate(drivers):
        for cmd in _pattern(tb, spec["pattern"], spec["accesses"] // cfg.ports, p, cfg.ports):
            drv.add(*cmd)
    start = {name: tb.counter(name) for name in ("data_busy", "refresh_busy")}
    tasks = [cocotb.start_soon(d.run()) for d in drivers]
    for task in tasks:
        await task
    first = min(d.first_cycle for d in drivers)
    last = max(d.last_cycle for d in drivers)
    counters = {name: tb.counter(name) - start.get(name, 0) for name in (
        "data_busy", "refresh_busy", "reads", "writes", "acts", "refs", "forced_refs",
        "queue_full")}
    for name in ("data_busy", "refs", "forced_refs"):
        counters[f"{name}_per_pc"] = [tb.counter(name, pc) for pc in range(cfg.pseudo_channels)]
    await tb.finish()
    report = {"pattern": spec["pattern"], "accesses": spec["accesses"],
              "cycles": last - first + 1, **counters}
    dut._log.info("measured %s", report)
    with open(spec["report"], "w") as f:
        json.dump(report, f)
