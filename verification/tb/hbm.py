"""cocotb testbench of the HBM controller: cocotbext-axi masters on its AXI4 ports, the golden
device model (verification/models/hbm.py) on every channel, a golden memory scoreboard.

:class:`HBMBench` wraps the DUT: clock and reset, one cocotbext-axi ``AxiMaster`` per port
with the flow's idle on AW, W and AR and backpressure on R and B (or an
:class:`~verification.tb.axi.AxiDriver` for saturating traffic), and one clocked loop that plays
the HBM device for all channels: every cycle it checks the commands of each channel's row and
column buses against the model (which raises on the first violation, failing the test), takes
write data and drives read data CL cycles after RD on each pseudo-channel's data bus. The
scoreboard is a golden byte memory; each test keeps the bytes that concurrent IDs touch disjoint
(or orders the accesses by waiting for responses), so every read has exactly one right answer.
The seed is printed by cocotb and reproduces any failure (PODIUM_SEED, see README).
PODIUM_HBM_TRACE=<file> writes every device command to the file (the model's trace format).
"""

import os
from collections import Counter

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly, RisingEdge
from cocotbext.axi import AxiResp

from spec.hbm import HBMConfig
from verification.models.hbm import (
    HBMDeviceModel,
    backdoor_dump,
    backdoor_load,
    backdoor_write,
)
from verification.models.memory import ByteMemory
from verification.tb.axi import AxiDriver, axi_master
from verification.tb.bench import (
    SHORT_FLOWS,
    env_int,
    measurement,
    new_rng,
    only_if,
    perf_spec,
    start,
    write_report,
)
from verification.tb.packing import enum_values, load_sidecar
from verification.traffic.hbm import pattern

__all__ = ["HBMBench"]

_ROW = ("valid", "op", "pc", "bank", "addr")


class _Channel:
    """Handles of one channel's command buses and its pseudo-channels' data buses."""

    def __init__(self, dut, prefix, per_channel):
        def port(name):
            return getattr(dut, f"{prefix}__{name}")
        self.row = [port(f"row_{n}") for n in _ROW]
        self.col = [port(f"col_{n}") for n in _ROW]
        self.data = [{n: port(f"data{k}__{n}") for n in ("wrdata", "wrdata_valid", "rddata",
                                                         "rddata_valid")}
                     for k in range(per_channel)]


class HBMBench:
    def __init__(self, dut, flow="random_random", masters=True, trace=None, *, config=None,
                 prefix="ch", idle="idle", index=None):
        """``config``, ``prefix`` and ``idle``: the controller's configuration, the prefix of
        its channel ports and the name of its idle output when it is part of a larger top (the
        chip: ``hbm_ch``, ``hbm_idle``); ``index``: the element of port arrays it is (a pod's
        chip ``n``: ``hbm_ch<c>__<n>``, ``hbm_idle__<n>``)."""
        self.dut = dut
        self.idle = getattr(dut, idle if index is None else f"{idle}__{index}")
        self.sidecar = load_sidecar()
        self.cfg = config or HBMConfig.from_dict(self.sidecar["parameters"])
        cfg = self.cfg
        self.rng = new_rng()
        def channel(c):
            return f"{prefix}{c}" + ("" if index is None else f"__{index}")
        self.row_ops = {v: k for k, v in enum_values(self.sidecar, f"{channel(0)}__row_op").items()}
        self.col_ops = {v: k for k, v in enum_values(self.sidecar, f"{channel(0)}__col_op").items()}
        trace = trace or os.environ.get("PODIUM_HBM_TRACE")
        self.trace = open(trace, "w") if trace else None
        self.model = HBMDeviceModel(cfg.timing, cfg.pseudo_channels, cfg.bank_groups,
                                    cfg.banks_per_group, per_channel=cfg.pcs_per_channel,
                                    words=cfg.words, check_refresh=cfg.refresh, trace=self.trace)
        self.channels = [_Channel(dut, channel(c), cfg.pcs_per_channel)
                         for c in range(cfg.channels)]
        self.memory = ByteMemory()
        self.cycle = 0
        self.error = None
        self.masters = [axi_master(dut, f"s{p}_axi", flow)
                        for p in range(cfg.ports if masters else 0)]

    def driver(self, port, flow="none_none"):
        """A saturating :class:`AxiDriver` on ``port``, checked against the golden memory."""
        return AxiDriver(self.dut, f"s{port}_axi", self.memory, lambda: self.cycle, flow=flow)

    async def start(self, *, clock=True):
        """Start the clock and reset (unless the top's bench already did: ``clock`` False),
        then the device model, from the first cycle out of reset."""
        for ch in self.channels:
            for d in ch.data:
                d["rddata_valid"].value = 0
                d["rddata"].value = 0
        if clock:
            await start(self.dut, reset_cycles=4)
        cocotb.start_soon(self._device_loop())

    async def _device_loop(self):
        """Cycle 0 is the first cycle out of reset, where the controller's refresh timer
        starts too."""
        model, clk, n = self.model, self.dut.clk, self.cfg.pcs_per_channel
        try:
            while True:
                await FallingEdge(clk)
                for c, ch in enumerate(self.channels):
                    for k, d in enumerate(ch.data):
                        beat = model.read_data(c * n + k, self.cycle)
                        d["rddata_valid"].value = int(beat is not None)
                        if beat is not None:
                            d["rddata"].value = beat
                await ReadOnly()
                for c, ch in enumerate(self.channels):
                    self._sample(c, ch)
                model.tick(self.cycle)
                await RisingEdge(clk)
                self.cycle += 1
        except AssertionError as e:
            self.error = e
            raise

    def _sample(self, c, ch):
        model, cycle, n = self.model, self.cycle, self.cfg.pcs_per_channel
        for k, d in enumerate(ch.data):
            wv = int(d["wrdata_valid"].value)
            model.write_data(c * n + k, cycle, wv, d["wrdata"].value.to_unsigned() if wv else 0)
        valid, op, pc, bank, addr = ch.row
        if int(valid.value):
            i, op, bank = c * n + int(pc.value), self.row_ops[int(op.value)], int(bank.value)
            if op == "ACT":
                model.act(i, cycle, bank, int(addr.value))
            elif op == "PRE":
                model.pre(i, cycle, bank)
            elif op == "PREA":
                model.prea(i, cycle)
            elif op == "REF":
                model.ref(i, cycle)
            else:
                model.refsb(i, cycle, bank)
        valid, op, pc, bank, addr = ch.col
        if int(valid.value):
            i, op = c * n + int(pc.value), self.col_ops[int(op.value)]
            access = model.wr if op.startswith("WR") else model.rd
            access(i, cycle, int(bank.value), int(addr.value), auto=op.endswith("A"))

    # Backdoor: the device's storage, through the controller's ECC and address map ---------

    def load(self, address, data):
        """Put ``data`` at byte ``address`` (access-aligned, whole accesses) straight into the
        device model, as the controller would have written it."""
        backdoor_load(self.model, self.cfg, address, data)

    def write_bytes(self, address, data):
        """Put any bytes at any ``address`` into the device model: the whole accesses around
        them are read (:meth:`dump`), patched and loaded back (:meth:`load`)."""
        backdoor_write(self.model, self.cfg, address, data)

    def dump(self, address, length):
        """The bytes at ``address`` as the device model holds them (no bit may be flipped)."""
        return backdoor_dump(self.model, self.cfg, address, length)

    # Scoreboard ----------------------------------------------------------------------------

    def in_range(self, address, length):
        return address + length <= self.cfg.capacity

    async def write(self, address, data, awid=0, port=0, size=None):
        """AXI write; updates the golden memory and checks the response."""
        resp = await self.masters[port].write(address, data, awid=awid, size=size)
        if self.in_range(address, len(data)):
            assert resp.resp == AxiResp.OKAY, f"write {address:#x}: {resp.resp!r}"
            self.memory.write(address, data)
        else:
            assert resp.resp == AxiResp.DECERR, f"write {address:#x}: {resp.resp!r}"
        return resp

    async def read(self, address, length, arid=0, port=0, size=None):
        """AXI read, checked against the golden memory."""
        resp = await self.masters[port].read(address, length, arid=arid, size=size)
        if self.in_range(address, length):
            assert resp.resp == AxiResp.OKAY, f"read {address:#x}: {resp.resp!r}"
            want = self.memory.read(address, length)
            assert resp.data == want, (f"read {address:#x}+{length} id {arid}: got "
                                       f"{resp.data.hex()}, expected {want.hex()}")
        else:
            assert resp.resp == AxiResp.DECERR, f"read {address:#x}: {resp.resp!r}"
            assert resp.data == bytes(length), "DECERR read data not zero"
        return resp

    async def settle(self, budget=20000):
        """Wait until every master is idle and the controller has drained: every answered
        write is in the device, so the backdoor (:meth:`dump`) sees it."""
        for m in self.masters:
            await m.wait()
        for _ in range(budget):
            await RisingEdge(self.dut.clk)
            if self.idle.value:
                break
        else:
            raise AssertionError(f"controller not idle {budget} cycles after the last response")
        # Writes are answered when queued: the last WR's data may still be CWL + a burst away
        # when the controller turns idle.
        t = self.cfg.timing
        await ClockCycles(self.dut.clk, max(8, t.cwl + t.burst_cycles + 2))

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
        expected = {"reads": cmds["RD"] + cmds["RDA"], "writes": cmds["WR"] + cmds["WRA"],
                    "acts": cmds["ACT"], "pres": cmds["PRE"] + cmds["PREA"],
                    "auto_pres": cmds["RDA"] + cmds["WRA"], "refs": cmds["REF"],
                    "refsbs": cmds["REFSB"]}
        for name, want in expected.items():
            assert self.counter(name) == want, f"{name} {self.counter(name)} vs {dict(cmds)}"
        busy = self.counter("data_busy")
        burst = self.cfg.timing.burst_cycles
        assert busy == burst * (expected["reads"] + expected["writes"]), f"data_busy {busy}"
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
@cocotb.parametrize(flow=SHORT_FLOWS)
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


ONE_FLOW = {"test_read_after_write": "random_bursty", "test_long_bursts": "none_random",
            "test_ecc": "random_none", "test_bad_requests": "random_random",
            "test_refresh_soak": "random_random"}
"""The flow of each test that runs one (the others run ``SHORT_FLOWS``): together every flow of
``FLOWS`` runs on the ports' AXI4 channels."""


@cocotb.test()
async def test_read_after_write(dut):
    """Read-after-write on one address from different IDs: IDs share the same few accesses
    (each owns a few bytes of every one, so every write is a partial-word read-modify-write
    racing the others); each writes its bytes and, once the write is answered, another ID
    reads them back and must see the new data."""
    tb = HBMBench(dut, ONE_FLOW["test_read_after_write"])
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
    tb = HBMBench(dut, ONE_FLOW["test_long_bursts"])
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
    tb = HBMBench(dut, ONE_FLOW["test_ecc"])
    await tb.start()
    cfg = tb.cfg
    ab = cfg.access_bytes
    # In chunks of owner 1 of 2: the background traffic (owner 0) never touches them.
    addrs = sorted({_owned_chunk(tb, 1, 2) + tb.rng.randrange(8) * ab for _ in range(12)})
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
        want = tb.memory.read(a, ab)
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

    tb = HBMBench(dut, ONE_FLOW["test_bad_requests"])
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
    before = tb.memory.read(a, cfg.access_bytes)
    resp = await tb.masters[0].write(a, bytes(range(cfg.access_bytes)) * 2, awid=1,
                                     burst=AxiBurstType.FIXED)
    assert resp.resp == AxiResp.SLVERR, f"FIXED write burst answered {resp.resp!r}"
    resp = await tb.masters[0].read(a, 2 * cfg.access_bytes, arid=1, burst=AxiBurstType.FIXED)
    assert resp.resp == AxiResp.SLVERR, f"FIXED read burst answered {resp.resp!r}"
    await tb.read(a, cfg.access_bytes, arid=1)
    assert tb.memory.read(a, cfg.access_bytes) == before
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
    tb = HBMBench(dut, ONE_FLOW["test_refresh_soak"])
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
    due = tb.cycle // cfg.timing.refi
    for pc in range(cfg.pseudo_channels):
        refreshed = tb.model.pc[pc].refreshed
        assert due - 8 <= min(refreshed) and max(refreshed) <= due + 1, (
            f"pc{pc}: banks refreshed {refreshed} times in {tb.cycle} cycles ({due} due)")
    addrs = tb.memory.addresses()
    for a in addrs[:: max(1, len(addrs) // 64)]:
        await tb.read(a, 1, arid=0)


@cocotb.test()
async def test_refresh_under_load(dut):
    """Sequential writes offered faster than the pseudo-channels can take them, for 10 x tREFI:
    the queues never empty, so all-bank refreshes are forced (``forced_refs``), and per-bank
    refreshes must keep pace hidden behind the traffic; the device model checks none is
    overdue and no timing is broken, and every bank is refreshed as often as tREFI demands.
    Then part of the data is read back and checked, and random reads at saturation issue ACTs
    as fast as tRRD and tFAW allow."""
    tb = HBMBench(dut, masters=False)
    await tb.start()
    cfg = tb.cfg
    accesses = 10 * cfg.timing.refi * cfg.pseudo_channels // 2
    for phase in ("seq_write", "seq_read", "rand_read"):
        drivers = [tb.driver(p, "random_random") for p in range(cfg.ports)]
        n = {"seq_write": accesses, "seq_read": accesses // 8, "rand_read": 2000}[phase]
        for p, drv in enumerate(drivers):
            for cmd in pattern(cfg, tb.rng, phase, n // cfg.ports, p):
                drv.add(*cmd)
        tasks = [cocotb.start_soon(d.run()) for d in drivers]
        for task in tasks:
            await task
        if phase == "seq_write" and not cfg.per_bank_refresh:
            forced = tb.counter("forced_refs")
            assert forced >= cfg.pseudo_channels, f"only {forced} refreshes were forced"
    await tb.finish()
    due = tb.cycle // cfg.timing.refi
    for pc in range(cfg.pseudo_channels):
        refreshed = tb.model.pc[pc].refreshed
        assert min(refreshed) >= due - 8, f"pc{pc}: banks refreshed {refreshed} ({due} due)"
    assert tb.cycle >= 10 * cfg.timing.refi, f"only {tb.cycle} cycles"


@cocotb.test()
@cocotb.parametrize(flow=SHORT_FLOWS)
async def test_write_not_starved(dut, flow):
    """Sparse partial writes (answered only when their WR issues) amid random reads that keep
    the queues full: the write watermark never fills, yet every write is answered within the
    bound the starvation cap sets, and the merged data reads back."""
    tb = HBMBench(dut, masters=False)
    await tb.start()
    cfg = tb.cfg
    ab, ids = cfg.access_bytes, 1 << cfg.id_width
    half = cfg.capacity // 2 // ab            # reads below, writes above: no address shared
    drv = tb.driver(0, flow)
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
    leave_limit = tb.sidecar["constants"]["leave_limit"]
    bound = cfg.starvation_cap + cfg.queue_depth * cfg.timing.rc + leave_limit + 100
    tb.dut._log.info("write latencies %s (bound %d), run %d cycles", drv.b_latency, bound,
                     drv.last_cycle - drv.first_cycle)
    assert max(drv.b_latency) <= bound, f"a write waited {max(drv.b_latency)} cycles"
    back = tb.driver(0, flow)
    for a in writes:
        back.add("r", 1, a, 1)
    await back.run()
    await tb.finish()


def _last_reads_after_write(trace, t):
    """Count, in a device-command trace, the reads that were their row's last access and came
    less than WR to PRE (CWL + BL/2 + tWR) after a WR to the bank: an RDA, or a RD after which
    the bank's next command was its PRE (or a PREA)."""
    last_wr, pending, count = {}, {}, 0
    for line in trace:
        cycle, ch, pc, op, bank, _ = line.split()
        key, cycle = (ch, pc, bank), int(cycle)
        near = cycle - last_wr.get(key, -t.wr_to_pre) < t.wr_to_pre
        if op in ("WR", "WRA", "ACT"):
            last_wr[key] = cycle if op.startswith("WR") else -t.wr_to_pre
            pending[key] = False
        elif op in ("RD", "RDA"):
            pending[key] = near and op == "RD"
            count += near and op == "RDA"
        elif op == "PRE":
            count += pending.pop(key, False)
        elif op == "PREA":
            count += sum(v for k, v in pending.items() if k[:2] == (ch, pc))
            pending = {k: v for k, v in pending.items() if k[:2] != (ch, pc)}
    return count


@only_if(lambda p: p.get("page_policy") == "closed")
@cocotb.test()
@cocotb.parametrize(flow=SHORT_FLOWS)
async def test_write_then_last_read(dut, flow):
    """Issue 34: a write, then a read of another access of the same row, a few cycles apart
    (every third write partial, a read-modify-write), so the read is the row's last access and
    comes right after the WR. Its auto-precharge must not cut the write's recovery short (the
    device model fails the test if it does), and the case must have happened: some of the
    row's last reads came less than WR to PRE after the WR."""
    trace = "write_then_last_read.trace"
    tb = HBMBench(dut, flow, trace=trace)
    await tb.start()
    cfg = tb.cfg
    ab, workers = cfg.access_bytes, min(4, cfg.banks, 1 << cfg.id_width)

    async def pairs(k):
        for n in range(env_int("PODIUM_HBM_PAIRS", 24)):
            bank = tb.rng.randrange(k, cfg.banks, workers)     # banks of this worker only
            row = tb.rng.randrange(1 << cfg.row_bits)
            wcol, rcol = tb.rng.sample(range(1 << cfg.col_bits), 2)
            pc = tb.rng.randrange(cfg.pseudo_channels)
            start, length = (0, ab) if n % 3 else (tb.rng.randrange(ab // 2), ab // 2)
            data = bytes(tb.rng.getrandbits(8) for _ in range(length))
            port = tb.rng.randrange(cfg.ports)
            write = cocotb.start_soon(tb.write(cfg.encode(pc, bank, row, wcol) + start, data,
                                               awid=k, port=port))
            await ClockCycles(dut.clk, tb.rng.randrange(6))
            await tb.read(cfg.encode(pc, bank, row, rcol), ab, arid=k, port=port)
            await write

    tasks = [cocotb.start_soon(pairs(k)) for k in range(workers)]
    for task in tasks:
        await task
    await tb.finish()
    tb.trace.close()
    with open(trace) as f:
        seen = _last_reads_after_write(f, cfg.timing)
    dut._log.info("row's last read less than WR to PRE after a WR: %d times", seen)
    assert seen >= 4, f"the case under test happened only {seen} times"


@measurement
@cocotb.test()
async def measure(dut):
    """A benchmark pattern at saturation (PODIUM_PERF: {"pattern", "accesses", "report",
    "warmup", "window", "trace"}), with the device model checking every command (and writing
    them to ``trace``) and the read data checked. Counters are taken over the whole run (first
    request offered to last response) and over the ``window`` cycles that start ``warmup``
    cycles after the first request (the steady state: the refreshes a run may postpone at its
    start have been forced, and no drain at the end); written as JSON to ``report``. Not part
    of the regression."""
    spec = perf_spec()
    tb = HBMBench(dut, masters=False, trace=spec.get("trace"))
    await tb.start()
    cfg = tb.cfg
    drivers = [tb.driver(p) for p in range(cfg.ports)]
    for p, drv in enumerate(drivers):
        for cmd in pattern(cfg, tb.rng, spec["pattern"], spec["accesses"] // cfg.ports, p):
            drv.add(*cmd)
    names = ("data_busy", "refresh_busy", "reads", "writes", "acts", "pres", "auto_pres",
             "refs", "refsbs", "forced_refs", "queue_full")

    def snapshot():
        return {"cycle": tb.cycle, **{n: tb.counter(n) for n in names},
                "data_busy_per_pc": [tb.counter("data_busy", pc)
                                     for pc in range(cfg.pseudo_channels)]}

    begin = snapshot()
    tasks = [cocotb.start_soon(d.run()) for d in drivers]
    start_at = begin["cycle"] + spec["warmup"]
    marks = [start_at, start_at + spec["window"]]
    window = []
    while not all(t.done() for t in tasks):
        await RisingEdge(dut.clk)
        if len(window) < len(marks) and tb.cycle == marks[len(window)]:
            window.append(snapshot())
    end = snapshot()
    first = min(d.first_cycle for d in drivers)
    last = max(d.last_cycle for d in drivers)
    await tb.finish()
    if tb.trace:
        tb.trace.close()

    def delta(a, b):
        return {"cycles": b["cycle"] - a["cycle"], **{n: b[n] - a[n] for n in names},
                "data_busy_per_pc": [y - x for x, y in zip(a["data_busy_per_pc"],
                                                           b["data_busy_per_pc"], strict=True)]}

    report = {"pattern": spec["pattern"], "accesses": spec["accesses"],
              "cycles": last - first + 1, "run": delta(begin, end),
              "window": delta(*window) if len(window) == 2 else None}
    dut._log.info("measured %s", report)
    write_report(spec, report)
