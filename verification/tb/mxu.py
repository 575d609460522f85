"""cocotb testbench of the MXU, against the golden model in verification/models/mxu.py.

:class:`MXUBench` wraps the DUT: clock and reset, a source per input stream (``cmd``, ``w``,
``a``) and a sink on ``c``, each with its idle or backpressure pattern, and an in-order scoreboard
fed by :class:`~verification.models.mxu.MXUModel`. Tests submit GEMM commands with numpy
operands; the bench lays the operands out in the MXU's tile order (with random garbage in every
lane the MXU must ignore), runs until every expected beat has arrived and the MXU is idle, and
checks every beat, the counters and the stream rules. Every test runs the idle x backpressure
matrix; the seed is printed by cocotb and reproduces any failure (PODIUM_SEED, see README).
"""

import random

import cocotb
import ml_dtypes
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from verification.models import fp
from verification.models.mxu import Gemm, MXUModel, tile_order
from verification.tb.bench import (
    FLOWS,
    flow_pauses,
    measurement,
    only_if,
    pause,
    perf_spec,
    start,
    write_report,
)
from verification.tb.packing import Port, load_sidecar, pack_lanes
from verification.tb.streams import StreamBench


class MXUBench:
    def __init__(self, dut, flow):
        idle, backpressure = flow_pauses(flow)
        self.dut = dut
        self.sidecar = load_sidecar()
        p = self.sidecar["parameters"]
        self.rows, self.cols, self.acc_depth = p["rows"], p["cols"], p["acc_depth"]
        self.fmt = p["fmt"]
        self.is_float = self.fmt != "int8"
        self.rng = np.random.default_rng(random.getrandbits(64))
        self.cmd_port = Port.of(self.sidecar, "cmd")
        self.c_port = Port.of(self.sidecar, "c")
        ports = {x["name"]: x for x in self.sidecar["ports"]}
        self.in_width = ports["a__payload"]["lanes"]["width"]
        self.streams = StreamBench(dut, dut.clk)
        self.cmd = self.streams.source("cmd", pause(idle))
        self.w = self.streams.source("w", pause(idle))
        self.a = self.streams.source("a", pause(idle))
        self.c = self.streams.sink("c", pause(backpressure))
        self.model = MXUModel(self.rows, self.cols, self.acc_depth, self.fmt, p["out_fmt"])
        self.expected = []
        self.vectors = 0        # activation vectors the MXU must take
        self.weight_rows = 0    # weight rows the array must shift in
        self.refused = 0
        self.budget = 200       # cycle budget before declaring a hang

    async def start(self):
        self.streams.quiesce()
        await start(self.dut)
        cocotb.start_soon(self.streams.run())

    def garbage(self, shape):
        """Random lanes the MXU must ignore: any bit pattern (NaNs and infinities included)."""
        if self.is_float:
            return self.rng.integers(0, 1 << self.in_width, size=shape)
        return self.rng.integers(-128, 128, size=shape)

    def operands(self, shape, kind="values"):
        """Random operands. ``values``: int8 uniform, floats normally distributed at a random
        scale (so sums are meaningful and rounding is exercised); ``bits``: any bit pattern."""
        if not self.is_float:
            return self.rng.integers(-128, 128, size=shape)
        if kind == "bits":
            return self.garbage(shape)
        scale = 2.0 ** int(self.rng.integers(-12, 8))
        return fp.bits_of(self.rng.standard_normal(shape) * scale, self.fmt).astype(np.int64)

    def extremes(self):
        """The format's extreme operands: largest magnitudes of both signs, for floats also the
        smallest subnormals."""
        if not self.is_float:
            return [-128, 127]
        info = ml_dtypes.finfo(fp.DTYPES[self.fmt])
        top = int(fp.bits_of(float(info.max), self.fmt))
        sign = 1 << (self.in_width - 1)
        return [top, top | sign, 1, 1 | sign]

    def submit(self, cmd, a=None, b=None):
        """Queue one command and its operands; record what the MXU must answer."""
        R, C = self.rows, self.cols
        self.cmd.send([self.cmd_port.pack(m=cmd.m, k=cmd.k, n=cmd.n, acc_addr=cmd.acc_addr,
                                          accumulate=cmd.accumulate, emit=cmd.emit)])
        self.expected += self.model.execute(cmd, a, b)
        if not self.model.accepts(cmd):
            self.refused += 1
            return
        for tile_b, tile_a in tile_order(cmd, a, b, R, C, self.garbage):
            self.w.send(pack_lanes(row, self.in_width) for row in tile_b)
            self.a.send(pack_lanes(row, self.in_width) for row in tile_a)
            self.vectors += cmd.m
            self.weight_rows += R
            self.budget += 4 * (cmd.m + R) + R + C + 20

    def submit_random(self, cmd, kind="values"):
        a = self.operands((cmd.m, cmd.k), kind)
        b = self.operands((cmd.k, cmd.n), kind)
        self.submit(cmd, a, b)
        return a, b

    async def finish(self):
        """Wait for every expected beat and for idle; check beats, counters and leftovers."""
        dut = self.dut
        for _ in range(self.budget):
            await RisingEdge(dut.clk)
            if len(self.c.beats) >= len(self.expected) and dut.idle.value:
                break
        else:
            raise AssertionError(
                f"timeout after {self.budget} cycles: {len(self.c.beats)} of "
                f"{len(self.expected)} result beats, cmd/w/a left "
                f"{self.cmd.pending}/{self.w.pending}/{self.a.pending}")
        await ClockCycles(dut.clk, 5)
        assert len(self.c.beats) == len(self.expected), (
            f"{len(self.c.beats)} result beats, expected {len(self.expected)}")
        for i, (word, exp) in enumerate(zip(self.c.beats, self.expected, strict=True)):
            got = self.c_port.unpack(word)
            assert (bool(got["error"]), bool(got["last"])) == (exp.error, exp.last), (
                f"beat {i}: error/last {got['error']}/{got['last']}, "
                f"expected {exp.error}/{exp.last}")
            assert tuple(got["data"]) == exp.data, (
                f"beat {i}: data {got['data']}, expected {list(exp.data)}")
        assert self.cmd.pending == self.w.pending == self.a.pending == 0, "inputs left unread"
        assert int(dut.mac.value) == self.vectors, (
            f"mac counter {int(dut.mac.value)}, expected {self.vectors}")
        assert int(dut.weight_load.value) == self.weight_rows, (
            f"weight_load counter {int(dut.weight_load.value)}, expected {self.weight_rows}")
        assert int(dut.cmd_errors.value) == self.refused, (
            f"cmd_errors counter {int(dut.cmd_errors.value)}, expected {self.refused}")
        busy = int(dut.busy.value)
        assert self.vectors <= busy <= self.streams.cycle, f"busy counter {busy} out of range"
        dut._log.info("checked %d beats of %d commands in %d cycles (mac %d, stall %d, "
                      "weight_wait %d)", len(self.expected), self.cmd.sent, self.streams.cycle,
                      self.vectors, int(dut.stall.value), int(dut.weight_wait.value))


def random_gemm(rng, bench, max_m=None, accumulate=False, emit=True):
    """A command that fits the accumulator, with sizes up to about three tiles each way."""
    R, C = bench.rows, bench.cols
    n = int(rng.integers(1, min(3, bench.acc_depth) * C + 1))
    tiles = -(-n // C)
    max_m = max(1, min(max_m or 3 * R + 2, bench.acc_depth // tiles))
    m = int(rng.integers(1, max_m + 1))
    k = int(rng.integers(1, 3 * R + 1))
    addr = int(rng.integers(0, bench.acc_depth - tiles * m + 1))
    return Gemm(m, k, n, addr, accumulate, emit)


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_gemm_random(dut, flow):
    """Random GEMMs of random shape, including sizes that are not multiples of the array."""
    tb = MXUBench(dut, flow)
    await tb.start()
    for i in range(6):
        tb.submit_random(random_gemm(tb.rng, tb), kind="bits" if i % 3 == 2 else "values")
    await tb.finish()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_extremes(dut, flow):
    """Operands at the format's extremes in every combination (int8: -128 and 127; floats:
    the largest finite magnitudes and the smallest subnormals of both signs), then mixed."""
    tb = MXUBench(dut, flow)
    await tb.start()
    R, C = tb.rows, tb.cols
    n = 2 * C if tb.acc_depth >= 2 else C
    m, k = max(1, min(2 * R + 1, tb.acc_depth // -(-n // C))), 3 * R
    ext = tb.extremes()
    for av in ext:
        for bv in ext:
            tb.submit(Gemm(m, k, n), np.full((m, k), av), np.full((k, n), bv))
    for _ in range(2):
        tb.submit(Gemm(m, k, n), tb.rng.choice(ext, size=(m, k)), tb.rng.choice(ext, size=(k, n)))
    await tb.finish()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_accumulate(dut, flow):
    """Accumulate and overwrite modes, emit on and off, and reuse of the same accumulator
    rows by back-to-back commands (a result must wait for a pending read-out of its row)."""
    tb = MXUBench(dut, flow)
    await tb.start()
    R, C = tb.rows, tb.cols
    n = min(2 * C, C * max(1, tb.acc_depth // (R + 1)))
    m = max(1, min(R + 1, tb.acc_depth // -(-n // C)))
    # A narrower GEMM accumulating onto rows a wider one filled: the lanes past its n hold
    # stale sums and must read out as zero.
    tb.submit_random(Gemm(m, R, n, 0, accumulate=False, emit=False))
    tb.submit_random(Gemm(m, R, max(1, n - C // 2 - 1), 0, accumulate=True, emit=True))
    for step in range(8):
        k = int(tb.rng.integers(1, 2 * R + 2))
        tb.submit_random(Gemm(m, k, n, 0, accumulate=step % 3 != 0, emit=step % 2 == 1))
    tb.submit_random(Gemm(m, R, n, 0, accumulate=True, emit=True))
    await tb.finish()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_small_folds(dut, flow):
    """Folds shorter than the array (m < rows, m = 1) and one-element dimensions."""
    tb = MXUBench(dut, flow)
    await tb.start()
    R, C = tb.rows, tb.cols
    for m, k, n in [(1, 1, 1), (1, 3 * R, 1), (1, 2 * R + 1, 2 * C + 1), (2, R, C),
                    (max(1, R - 1), 2 * R, C + 1), (3, 1, 3 * C)]:
        tiles = -(-n // C)
        if tiles * m <= tb.acc_depth:
            tb.submit_random(Gemm(m, k, n, 0))
    await tb.finish()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_refused_commands(dut, flow):
    """Malformed and oversized commands answer one error beat, in order, and disturb nothing."""
    tb = MXUBench(dut, flow)
    await tb.start()
    R, C, D = tb.rows, tb.cols, tb.acc_depth
    addr_limit = 1 << max(1, (D - 1).bit_length())   # acc_addr values the field can hold
    bad = [
        Gemm(0, R, C), Gemm(1, 0, C), Gemm(1, R, 0),
        Gemm(D + 1, R, C) if D < 65535 else Gemm(65535, R, 2 * C),
        Gemm(1, R, C, D) if D < addr_limit else Gemm(2, R, C, D - 1),
    ]
    for cmd in bad:
        tb.submit_random(random_gemm(tb.rng, tb))
        tb.submit(cmd)
    tb.submit_random(random_gemm(tb.rng, tb))
    await tb.finish()


@cocotb.test()
async def test_no_bubbles(dut):
    """With streams that never idle, consecutive folds with m >= rows never wait for weights
    after the first tile, and the array is never frozen."""
    tb = MXUBench(dut, "none_none")
    await tb.start()
    R, C = tb.rows, tb.cols
    tiles = max(1, min(4, tb.acc_depth // R))
    cmd = Gemm(R, 4 * R, tiles * C)
    tb.submit_random(cmd)
    await tb.finish()
    wait, stall = int(dut.weight_wait.value), int(dut.stall.value)
    assert stall == 0, f"array frozen for {stall} cycles with an always-ready consumer"
    assert wait <= R + 1, f"activations waited {wait} cycles for weights, first tile needs {R}"


@measurement
@cocotb.test()
async def measure_gemm(dut):
    """One GEMM with streams that never idle, for the demo and the benchmarks (not part of the
    regression): checks the result like every test, then writes cycles and counters as JSON
    to the file named in PODIUM_PERF (with m, k, n given there; default 4*rows each)."""
    spec = perf_spec()
    tb = MXUBench(dut, "none_none")
    await tb.start()
    R, C = tb.rows, tb.cols
    cmd = Gemm(spec.get("m", 4 * R), spec.get("k", 4 * R), spec.get("n", 4 * C))
    tb.submit_random(cmd)
    await tb.finish()
    report = {
        "rows": R, "cols": C, "m": cmd.m, "k": cmd.k, "n": cmd.n,
        "cycles": tb.c.last_cycle + 1,
        **{name: int(getattr(dut, name).value)
           for name in ("busy", "mac", "weight_load", "stall", "weight_wait")},
    }
    dut._log.info("measured %s", report)
    write_report(spec, report)


def float_edge_cases(fmt):
    """Pairs (activation row, weight column) of length 4 whose dot products hit the hard cases
    of fp32 accumulation; values are rounded into ``fmt``, so some cases degrade gracefully in
    the small formats (e4m3fn has no infinity: its overflow cases saturate to NaN inputs)."""
    big = float(ml_dtypes.finfo(fp.DTYPES[fmt]).max)
    tiny = float(ml_dtypes.finfo(fp.DTYPES[fmt]).smallest_subnormal)
    inf, nan = float("inf"), float("nan")
    return [
        ([1, 1, 0, 0], [inf, -inf, 0, 0]),               # inf - inf: NaN
        ([big, big, big, 0], [big, big, big, 0]),        # overflow to inf (bfloat16)
        ([1, 1, 1, 1], [1 + 2.0**-3, -1, 0, 0]),         # catastrophic cancellation
        ([1, 2.0**-9, 2.0**-9, 1], [1, 2.0**-15, 2.0**-15, -1]),  # ties and near-ties
        ([tiny, tiny, tiny, 1], [1, -2, 0.5, tiny]),     # subnormal inputs and results
        ([-1, -2, 1, 3], [0, 0, -0.0, -0.0]),            # signed zeros: -0 sum
        ([nan, 1, 1, 1], [1, 1, 1, 1]),                  # NaN input
        ([1, 2.0**-24 / 4, 1, 1], [1, 1, -1, 2.0**-23]),  # sticky bits through cancellation
    ]


@only_if(lambda p: p["fmt"] != "int8")
@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_float_edges(dut, flow):
    """Directed fp cases: NaN and inf propagation, overflow, cancellation, ties to even,
    subnormal inputs and results, signed zero. Every (case row, case column) pair is computed,
    so each case also meets every other one, and k = 4 crosses k-tiles on small arrays."""
    tb = MXUBench(dut, flow)
    await tb.start()
    cases = float_edge_cases(tb.fmt)
    a = fp.bits_of(np.array([row for row, _ in cases], dtype=np.float64), tb.fmt)
    b = fp.bits_of(np.array([col for _, col in cases], dtype=np.float64).T, tb.fmt)
    m, n = len(cases), len(cases)
    if -(-n // tb.cols) * m <= tb.acc_depth:
        tb.submit(Gemm(m, 4, n), a.astype(np.int64), b.astype(np.int64))
        tb.submit(Gemm(m, 4, n, accumulate=True), b.T.astype(np.int64), a.T.astype(np.int64))
    for i in range(len(cases)):
        tb.submit(Gemm(1, 4, 1), a[i:i + 1].astype(np.int64), b[:, i:i + 1].astype(np.int64))
    await tb.finish()
