"""cocotb testbench of the VPU (hdl/tensorcore/vpu.py) against the golden model
verification/models/vpu.py.

:class:`VPUBench` wraps the VPU test top: clock and reset, a source on ``cmd`` with the flow's
idle pattern, and Python in the place of the VMEM (verification/tb/vmem.py) behind ``src1``,
``src2`` and ``dst``, each port with its own backpressure. The golden side is a second copy
of the VMEM that the model updates command by command, in program order; every write the VPU
makes must be the next expected one (row and data, whole rows), every read the next expected
row of its port, and at the end both memories must be equal, bit for bit, with the pass
counter as documented. A test loads rows (only while nothing is pending), submits commands and
drains. Every test runs over the idle x backpressure matrix; the seed is printed by cocotb
and replays any failure (PODIUM_SEED).
"""

import math
import random
from dataclasses import dataclass

import cocotb
import ml_dtypes
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from spec import vmath
from spec.isa import VOPS, Cast, DType, ROp, Src2, VOp
from verification.models.vpu import tile_rows, vcast_rows, vop_rows, vred_rows, vtrans_rows
from verification.tb.bench import FLOWS, flow_pauses, new_rng, only_if, pause, start
from verification.tb.packing import Port, load_sidecar
from verification.tb.streams import StreamBench
from verification.tb.vmem import VMEMModel

LATENCY = 6
"""Cycles from a command's handshake to the write of the row of its first pass, with every
port ready (docs/tensorcore.md, VPU hardware). An empty command (``count = 0``) costs a cycle."""

INT32_SPECIALS = [0, 1, -1, 2, -2, 7, -7, 2**31 - 1, -2**31, -2**31 + 1, 2**16, -2**16, 46341,
                  -46341, 2**30, -2**30, 255, 256, -128, -129]
FP32_SPECIALS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                 0x7F800001, 0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00800000,
                 0x80800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x3F800001,
                 0x33800000, 0x34000000, 0x1F800000, 0x5F800000, 0x3F000000]
BF16_SPECIALS = [0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC1, 0x7F81, 0x0001, 0x8001,
                 0x007F, 0x807F, 0x0080, 0x7F7F, 0xFF7F, 0x3F80, 0xBF80, 0x3F81, 0x1F80,
                 0x5F80, 0x3F00, 0x0040]
SPECIALS = {DType.INT32: INT32_SPECIALS, DType.FP32: FP32_SPECIALS, DType.BF16: BF16_SPECIALS}
KINDS = ("bits", "values", "specials", "mixed")


@dataclass(frozen=True)
class Command:
    """One VPU instruction as the sequencer hands it over (``vpu_command_layout``)."""

    kind: str                   # "VOP", "VCAST", "VRED", "VTRANS"
    count: int                  # rows, reductions (VRED) or tiles (VTRANS)
    dst: int = 0
    src1: int = 0
    src2: int = 0
    vop: VOp = VOp.ADD
    dtype: DType = DType.INT32
    src2_mode: Src2 = Src2.ROWS
    relu: bool = False
    cast: Cast = Cast.F32_BF16
    rop: ROp = ROp.SUM
    span: int = 1               # VTRANS: a tile's rows (a row's elements; the VPU ignores it)
    scalar: int = 0
    shift: int = 0

    @property
    def binary(self):
        return self.kind == "VOP" and not VOPS[self.vop].unary

    def reads1(self):
        return list(range(self.src1, self.src1 + self.count * (
            self.span if self.kind in ("VRED", "VTRANS") else 1)))

    def writes(self):
        """Destination rows."""
        return self.count * (self.span if self.kind == "VTRANS" else 1)

    def reads2(self):
        if not self.binary or self.count == 0 or self.src2_mode == Src2.SCALAR:
            return []
        rows = {Src2.BROADCAST: 1, Src2.STAT: self.count // self.span}.get(self.src2_mode,
                                                                            self.count)
        return list(range(self.src2, self.src2 + rows))

    def passes(self, lanes):
        """Passes through the lanes (docs/tensorcore.md, VPU hardware)."""
        halves = 2 if self.dtype == DType.BF16 and self.kind != "VCAST" else 1
        if self.kind == "VCAST":
            return self.count
        if self.kind == "VTRANS":        # a pass a row, and the last tile's rows out again
            return (self.count + (self.count > 0)) * self.span
        if self.kind == "VOP":
            load = self.binary and self.src2_mode == Src2.BROADCAST and self.count > 0
            return self.count * halves + int(load)
        levels = int(math.log2(lanes)) + (halves - 1)
        return self.count * (self.span * halves + levels)

    def results(self, mem):
        """The destination rows, from the golden memory ``mem`` before the command."""
        if self.count == 0:
            return mem[:0]
        src1 = mem[self.reads1()[0]:self.reads1()[-1] + 1]
        if self.kind == "VTRANS":
            return vtrans_rows(self.dtype, src1)
        if self.kind == "VCAST":
            return vcast_rows(self.cast, src1, scalar=self.scalar, shift=self.shift)
        if self.kind == "VRED":
            return vred_rows(self.rop, self.dtype, src1, self.span)
        if self.src2_mode == Src2.SCALAR or not self.binary:
            return vop_rows(self.vop, self.dtype, src1, scalar=self.scalar, relu=self.relu)
        rows = self.reads2()
        return vop_rows(self.vop, self.dtype, src1, mem[rows[0]:rows[-1] + 1],
                        broadcast=self.src2_mode == Src2.BROADCAST,
                        group=self.span if self.src2_mode == Src2.STAT else None,
                        relu=self.relu)

    def safe(self):
        """Whether the destination rows avoid every source row a later pass of the same
        command reads (the hardware does not order those; docs/tensorcore.md)."""
        dst = range(self.dst, self.dst + self.writes())
        sources = [self.reads1()]
        if self.binary and self.src2_mode == Src2.ROWS:
            sources.append(self.reads2())
        stats = self.reads2() if self.binary and self.src2_mode == Src2.STAT else []
        return not set(dst) & set(stats) and all(
            not src or self.dst <= src[0] or not set(dst) & set(src) for src in sources)


def elements(rng, dtype, kind, n):
    """``n`` raw element bit patterns of ``dtype`` (int64 array) of one of KINDS: any bits,
    ordinary values at a random scale, special values (extremes, zeros, infinities, NaNs,
    subnormals), or a mix of the three."""
    width = 16 if dtype == DType.BF16 else 32
    if kind == "mixed":
        pick = rng.integers(0, 3, size=n)
        parts = [elements(rng, dtype, k, n) for k in KINDS[:3]]
        return np.choose(pick, parts)
    if kind == "bits":
        return rng.integers(0, 1 << width, size=n, dtype=np.int64)
    if kind == "specials":
        return np.array(SPECIALS[dtype], dtype=np.int64)[rng.integers(0, len(SPECIALS[dtype]),
                                                                      size=n)] & ((1 << width) - 1)
    if dtype == DType.INT32:
        magnitude = rng.integers(0, 32, size=n)
        return rng.integers(-(1 << magnitude), 1 << magnitude, dtype=np.int64) & 0xFFFFFFFF
    values = rng.standard_normal(n) * 2.0 ** int(rng.integers(-20, 20))
    if dtype == DType.FP32:
        return values.astype(np.float32).view(np.uint32).astype(np.int64)
    return values.astype(ml_dtypes.bfloat16).view(np.uint16).astype(np.int64)


def fill_rows(rng, dtype, kind, count, row_bytes):
    """``count`` rows of bytes holding elements of ``dtype`` of ``kind``."""
    width = 2 if dtype == DType.BF16 else 4
    bits = elements(rng, dtype, kind, count * row_bytes // width)
    view = np.uint16 if width == 2 else np.uint32
    return bits.astype(view).view(np.uint8).reshape(count, row_bytes)


class VPUBench:
    def __init__(self, dut, flow):
        idle, backpressure = flow_pauses(flow)
        self.dut = dut
        self.sidecar = load_sidecar()
        shape = self.sidecar["vpu"]
        self.lanes, self.row_bytes, self.rows = (shape["lanes"], shape["row_bytes"],
                                                 shape["vmem_rows"])
        self.ops = [op for op in VOp if shape["vmath"] or VOPS[op].latency != "vmath"]
        """The operations this VPU has (the transcendental functions with ``vmath``)."""
        self.kinds = ["VOP", "VCAST", "VRED"] + (["VTRANS"] if shape["vtrans"] else [])
        """The kinds of command this VPU takes (``vtrans`` with the transpose unit)."""
        self.rng = np.random.default_rng(random.getrandbits(64))
        self.cmd_port = Port.of(self.sidecar, "cmd")
        self.streams = StreamBench(dut, dut.clk)
        self.cmd = self.streams.source("cmd", pause(idle))
        self.vmem = VMEMModel(dut, self.rows, self.row_bytes, new_rng())
        self.src1 = self.vmem.read_port("src1", pause(backpressure))
        self.src2 = self.vmem.read_port("src2", pause(backpressure))
        self.dst = self.vmem.write_port("dst", pause(backpressure))
        self.streams.attach(self.vmem)
        self.streams.checks.append(self._count_events)
        self.golden = np.zeros_like(self.vmem.mem)
        self.expected = {"src1": [], "src2": [], "dst": []}
        self.passes = 0
        self.events = {"busy": 0, "alu_pass": 0, "read_wait": 0, "write_wait": 0,
                       "hazard_wait": 0}
        self.cmd_cycles = []
        self.budget = 100

    async def start(self):
        self.streams.quiesce()
        await start(self.dut)
        cocotb.start_soon(self.streams.run())

    def _count_events(self):
        dut = self.dut
        busy = bool(dut.busy.value)
        assert busy != bool(dut.idle.value), "busy must be the complement of idle"
        for name in self.events:
            self.events[name] += int(getattr(dut, name).value)
        if dut.cmd__valid.value and dut.cmd__ready.value:
            self.cmd_cycles.append(self.streams.cycle)

    def load(self, base, rows):
        """Write ``rows`` (uint8, ``(n, row_bytes)``) at row ``base`` of both memories; only
        while no command is pending."""
        assert self.cmd.pending == 0 and len(self.dst.log) == len(self.expected["dst"]), (
            "load while commands are pending")
        self.vmem.mem[base:base + len(rows)] = rows
        self.golden[base:base + len(rows)] = rows

    def fill(self, dtype, kind="mixed", base=0, count=None):
        count = self.rows - base if count is None else count
        self.load(base, fill_rows(self.rng, dtype, kind, count, self.row_bytes))

    def submit(self, c):
        """Queue command ``c``; record the reads, writes and passes it must make."""
        assert c.safe(), f"{c} overwrites rows it has still to read"
        self.cmd.send([self.cmd_port.pack(
            kind=c.kind, vop=c.vop.value, dtype=c.dtype.value, src2_mode=c.src2_mode.value,
            relu=int(c.relu), cast=c.cast.value, rop=c.rop.value, count=c.count, span=c.span,
            dst=c.dst, src1=c.src1, src2=c.src2, scalar=c.scalar & 0xFFFFFFFF, shift=c.shift)])
        out = c.results(self.golden)
        self.expected["src1"] += c.reads1()
        self.expected["src2"] += c.reads2()
        full = (1 << self.row_bytes) - 1
        for i, row in enumerate(out):
            self.expected["dst"].append((c.dst + i, int.from_bytes(row.tobytes(), "little"),
                                         full))
        self.golden[c.dst:c.dst + len(out)] = out
        passes = c.passes(self.lanes)
        self.passes += passes
        self.budget += 12 * passes + 40

    async def drain(self):
        """Wait until every command is done and the VPU idle; check every read and write,
        the memory and the pass counter."""
        dut = self.dut
        want = len(self.expected["dst"])
        for _ in range(self.budget):
            await RisingEdge(dut.clk)
            if self.cmd.pending == 0 and len(self.dst.log) >= want and dut.idle.value:
                break
        else:
            raise AssertionError(
                f"timeout after {self.budget} cycles: {len(self.dst.log)} of {want} rows "
                f"written, {self.cmd.pending} commands not taken")
        self.budget = 100
        await ClockCycles(dut.clk, 3)
        for name, port in (("src1", self.src1), ("src2", self.src2)):
            assert port.log == self.expected[name], (
                f"{name} read rows {port.log}, expected {self.expected[name]}")
        for i, (got, exp) in enumerate(zip(self.dst.log, self.expected["dst"], strict=True)):
            assert got == exp, (
                f"write {i}: row {got[0]} data {got[1]:#x} strb {got[2]:#x}, expected row "
                f"{exp[0]} data {exp[1]:#x}")
        bad = np.flatnonzero((self.vmem.mem != self.golden).any(axis=1))
        assert len(bad) == 0, f"VMEM rows {list(bad)} differ from the golden memory"
        assert self.events["alu_pass"] == self.passes, (
            f"{self.events['alu_pass']} passes through the lanes, expected {self.passes}")
        assert dut.idle.value and not dut.src1__valid.value and not dut.src2__valid.value

    def region(self, count):
        """A random base for ``count`` rows."""
        return int(self.rng.integers(0, self.rows - count + 1))

    def random_command(self, kind=None, **fields):
        """A random command (fields given are kept) that reads and writes inside VMEM and does
        not overwrite rows it has still to read."""
        rng = self.rng
        kind = kind or str(rng.choice(self.kinds))
        max_count = max(1, min(6, self.rows // 4))
        if kind == "VTRANS":        # tiles of a row's elements in rows; at most 3, in half VMEM
            fields.setdefault("dtype", DType(int(rng.integers(0, len(DType)))))
            fields.setdefault("span", tile_rows(fields["dtype"], self.row_bytes))
            max_count = max(1, min(3, self.rows // fields["span"] // 2))
            if "count" in fields:   # as many tiles as fit
                fields["count"] = min(fields["count"], max_count)
        for _ in range(1000):
            f = dict(kind=kind, count=int(rng.integers(1, max_count + 1)),
                     vop=self.ops[int(rng.integers(0, len(self.ops)))],
                     dtype=DType(int(rng.integers(0, len(DType)))),
                     src2_mode=Src2(int(rng.integers(0, len(Src2)))),
                     relu=bool(rng.integers(0, 2)), cast=Cast(int(rng.integers(0, len(Cast)))),
                     rop=ROp(int(rng.integers(0, len(ROp)))),
                     span=int(rng.integers(1, min(9, self.rows // max_count) + 1)),
                     scalar=int(rng.integers(0, 1 << 32)), shift=int(rng.integers(0, 63)))
            f.update(fields)
            if kind == "VOP" and f["dtype"] not in VOPS[f["vop"]].dtypes:
                if "dtype" in fields:
                    raise AssertionError(f"vop {f['vop'].name} does not take {f['dtype'].name}")
                dtypes = VOPS[f["vop"]].dtypes
                f["dtype"] = dtypes[int(rng.integers(0, len(dtypes)))]
            if kind == "VOP" and f["src2_mode"] == Src2.STAT and "span" not in fields:
                if "count" in fields:           # groups of span rows: a divisor of count
                    f["span"] = int(rng.choice([d for d in range(1, max(1, f["count"]) + 1)
                                                if f["count"] % d == 0] or [1]))
                else:                           # count groups (the frontend's product)
                    f["count"] *= f["span"]
            n1 = f["count"] * (f["span"] if kind in ("VRED", "VTRANS") else 1)
            nd = f["count"] * (f["span"] if kind == "VTRANS" else 1)
            if n1 > self.rows:
                continue
            f.setdefault("src1", self.region(n1))
            f.setdefault("src2", self.region(f["count"]))
            if "dst" not in fields:
                way = rng.integers(0, 3)
                f["dst"] = (f["src1"] if way == 0 else max(0, f["src1"] - int(rng.integers(1, 4)))
                            if way == 1 else self.region(nd))
                f["dst"] = min(f["dst"], self.rows - nd)
            c = Command(**f)
            if c.safe():
                return c
        raise AssertionError(f"no safe command with {fields}")

    def log_summary(self):
        self.dut._log.info("%d passes, %d rows written in %d cycles; events %s", self.passes,
                           len(self.dst.log), self.streams.cycle, self.events)


async def bench(dut, flow):
    tb = VPUBench(dut, flow)
    await tb.start()
    return tb


def near(rng, rows, dtype):
    """Rows close to the negation (or the value) of ``rows``: sums cancel, max / min tie."""
    width = 2 if dtype == DType.BF16 else 4
    bits = rows.view(np.uint16 if width == 2 else np.uint32).astype(np.int64)
    sign = 1 << (8 * width - 1)
    flip = rng.integers(0, 2, size=bits.shape) * sign
    nudge = rng.integers(-2, 3, size=bits.shape) * (rng.integers(0, 2, size=bits.shape))
    out = ((bits ^ flip) + nudge) & ((1 << 8 * width) - 1)
    return out.astype(np.uint16 if width == 2 else np.uint32).view(np.uint8).reshape(rows.shape)


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_vop_matrix(dut, flow):
    """Every op x dtype x src2 mode x relu, on ordinary values, bits and special values; half
    the second operands are near-negations of the first (cancellation, ties of max / min)."""
    tb = await bench(dut, flow)
    half = tb.rows // 2
    for dtype in DType:
        tb.fill(dtype, "mixed", 0, half)
        tb.load(half, near(tb.rng, tb.golden[:half], dtype))
        for op in (op for op in tb.ops if dtype in VOPS[op].dtypes):
            for mode in Src2:
                for relu in (False, True):
                    c = tb.random_command("VOP", vop=op, dtype=dtype, src2_mode=mode,
                                          relu=relu, count=int(tb.rng.integers(1, 4)))
                    if tb.rng.integers(0, 2) and c.src1 + c.count <= half:
                        c = tb.random_command("VOP", vop=op, dtype=dtype, src2_mode=mode,
                                              relu=relu, count=c.count, span=c.span,
                                              src1=c.src1, src2=c.src1 + half)
                    tb.submit(c)
        await tb.drain()
    tb.log_summary()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_scalar_operands(dut, flow):
    """The scalar operand of every dtype (bfloat16: its low 16 bits; the high ones ignored)
    with special values in both operands."""
    tb = await bench(dut, flow)
    for dtype in DType:
        tb.fill(dtype, "mixed")
        for op in (v.op for v in VOPS.values() if not v.unary):
            for _ in range(2):
                scalar = int(elements(tb.rng, dtype, "mixed", 1)[0])
                if dtype == DType.BF16:
                    scalar |= int(tb.rng.integers(0, 1 << 16)) << 16
                tb.submit(tb.random_command("VOP", vop=op, dtype=dtype,
                                            src2_mode=Src2.SCALAR, scalar=scalar))
        await tb.drain()
    tb.log_summary()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_casts(dut, flow):
    """Every cast; requantization with multipliers and shifts from 0 to 62, saturation both
    ways, exact halves (rounded up)."""
    tb = await bench(dut, flow)
    for cast, dtype in ((Cast.F32_BF16, DType.FP32), (Cast.BF16_F32, DType.BF16),
                        (Cast.I8_I32, DType.INT32)):
        tb.fill(dtype, "mixed")
        for _ in range(4):
            tb.submit(tb.random_command("VCAST", cast=cast))
        await tb.drain()
    multipliers = [0, 1, -1, 2, 3, -3, 2**31 - 1, -2**31, 2**16, 12345, -987654]
    shifts = [0, 1, 2, 7, 8, 15, 16, 31, 32, 33, 47, 61, 62]
    tb.fill(DType.INT32, "mixed")
    clipped = [0, 0]        # elements saturated low, high: the stimulus must reach both
    for i, shift in enumerate(shifts):
        for scalar in (multipliers[i % len(multipliers)], int(tb.rng.integers(-2**31, 2**31))):
            c = tb.random_command("VCAST", cast=Cast.I32_I8, scalar=scalar, shift=shift)
            x = tb.golden[c.src1:c.src1 + c.count].view(np.int32).ravel().tolist()
            scaled = [(v * scalar + (1 << shift >> 1)) >> shift for v in x]
            clipped[0] += sum(v < -128 for v in scaled)
            clipped[1] += sum(v > 127 for v in scaled)
            tb.submit(c)
    assert min(clipped) > 0, f"requantization saturated {clipped} (low, high) elements"
    await tb.drain()
    # Exact halves: x * 1 with x = (2k + 1) * 2^(shift - 1), both signs.
    ties = [(2 * k + 1) * sign << s - 1 for s in (1, 2, 5) for k in range(-3, 3)
            for sign in (1, -1)]
    rows = np.resize(np.array(ties, dtype=np.int64), (4, tb.lanes)).astype(np.uint32)
    tb.load(0, rows.view(np.uint8).reshape(4, tb.row_bytes))
    for shift in (1, 2, 5):
        tb.submit(Command("VCAST", 4, dst=8, src1=0, cast=Cast.I32_I8, scalar=1, shift=shift))
    await tb.drain()
    tb.log_summary()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_reductions(dut, flow):
    """sum and max of every dtype over spans 1..9 and one long span, several reductions per
    command."""
    tb = await bench(dut, flow)
    for dtype in DType:
        tb.fill(dtype, str(tb.rng.choice(["values", "mixed"])))
        for rop in ROp:
            for span in range(1, 10):
                count = int(tb.rng.integers(1, 4))
                if count * span <= tb.rows:
                    tb.submit(tb.random_command("VRED", rop=rop, dtype=dtype, span=span,
                                                count=count))
            span = tb.rows // 2
            tb.submit(tb.random_command("VRED", rop=rop, dtype=dtype, span=span, count=1))
        await tb.drain()
    tb.log_summary()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_special_values(dut, flow):
    """Rows of special values only (NaN with payloads, infinities, signed zeros, subnormals,
    the largest magnitudes, int32 extremes) through every op, cast and reduction."""
    tb = await bench(dut, flow)
    for dtype in DType:
        tb.fill(dtype, "specials")
        for op in (op for op in tb.ops if dtype in VOPS[op].dtypes):
            for relu in (False, True):
                tb.submit(tb.random_command("VOP", vop=op, dtype=dtype, relu=relu,
                                            src2_mode=Src2.ROWS))
        for rop in ROp:
            tb.submit(tb.random_command("VRED", rop=rop, dtype=dtype))
        tb.submit(tb.random_command("VCAST"))
        if "VTRANS" in tb.kinds:       # NaN payloads and all: the bits move unchanged
            tb.submit(tb.random_command("VTRANS", dtype=dtype))
        await tb.drain()
    tb.log_summary()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_dependent_commands(dut, flow):
    """Commands that read what the previous ones wrote (in place, chained, a broadcast row,
    a reduction's source or a transpose's tile just written), between independent ones, and
    empty commands: the VPU's results must be those of the commands run one after the
    other."""
    tb = await bench(dut, flow)
    tb.fill(DType.FP32, "mixed")
    c = None
    for i in range(40):
        pick = tb.rng.integers(0, 6 if "VTRANS" in tb.kinds else 5)
        if c is None or pick == 0:
            c = tb.random_command()
        elif pick == 1:     # in place on the previous destination
            c = tb.random_command("VOP", src1=c.dst, dst=c.dst, count=c.count)
        elif pick == 2:     # the previous destination as the broadcast row
            c = tb.random_command("VOP", src2=c.dst, src2_mode=Src2.BROADCAST)
        elif pick == 3:     # reduce what was just written
            c = tb.random_command("VRED", src1=c.dst, count=1, span=c.count)
        elif pick == 4:
            tb.submit(Command("VOP", 0, dst=c.dst, src1=c.dst))
            c = tb.random_command("VCAST", src1=c.dst, count=c.count)
        else:               # transpose the tile at the previous destination
            dtype = DType(int(tb.rng.integers(0, len(DType))))
            c = tb.random_command("VTRANS", dtype=dtype, count=1,
                                  src1=min(c.dst, tb.rows - tile_rows(dtype, tb.row_bytes)))
        tb.submit(c)
        if i % 8 == 7:
            await tb.drain()
    await tb.drain()
    tb.log_summary()


@cocotb.test()
@cocotb.parametrize(flow=FLOWS)
async def test_random_mix(dut, flow):
    """Random commands of every kind, dtype and size on a memory of mixed rows."""
    tb = await bench(dut, flow)
    for _ in range(4):
        tb.fill(DType(int(tb.rng.integers(0, len(DType)))), "mixed")
        for _ in range(30):
            count = int(tb.rng.integers(0, min(12, tb.rows // 4) + 1))
            tb.submit(tb.random_command(count=count))
        await tb.drain()
    tb.log_summary()


@cocotb.test()
async def test_throughput(dut):
    """With every port ready and commands that never wait: one pass per cycle, the first row
    LATENCY cycles after the first command, no gap between commands, and bfloat16 rows and
    reductions as many passes as documented."""
    tb = await bench(dut, "none_none")
    tb.fill(DType.FP32, "values")
    n = max(2, tb.rows // 8)
    commands = [
        Command("VOP", n, dst=0, src1=2 * n, src2=3 * n, dtype=DType.INT32),
        Command("VOP", n, dst=n, src1=2 * n, src2=3 * n, vop=VOp.MUL, dtype=DType.FP32),
        Command("VCAST", n, dst=0, src1=2 * n, cast=Cast.I32_I8, scalar=3, shift=2),
        Command("VOP", n, dst=n, src1=3 * n, src2=2 * n, dtype=DType.BF16,
                src2_mode=Src2.BROADCAST),
        Command("VRED", 2, dst=0, src1=2 * n, span=n // 2 or 1, dtype=DType.BF16),
        Command("VOP", 0, dst=0, src1=2 * n),
        Command("VRED", 1, dst=n, src1=3 * n, span=n, rop=ROp.MAX),
    ]
    if "VTRANS" in tb.kinds:        # a pass a row, and a tile's more for the last tile;
        top = tb.rows - 4 * tb.lanes    # writes below 4 * lanes, reads from the top half
        commands += [Command("VTRANS", 1, dst=0, src1=top, span=tb.lanes),
                     Command("VTRANS", 3, dst=0, src1=top, span=tb.lanes),
                     Command("VTRANS", 2, dst=0, src1=top, span=2 * tb.lanes,
                             dtype=DType.BF16)]
    for c in commands:
        tb.submit(c)
    await tb.drain()
    first = tb.cmd_cycles[0]
    assert tb.dst.cycles[0] - first == LATENCY, (
        f"first row written {tb.dst.cycles[0] - first} cycles after the first command, "
        f"expected {LATENCY}")
    empty = sum(c.count == 0 for c in commands)
    assert tb.dst.cycles[-1] - first == tb.passes + empty + LATENCY - 1, (
        f"last row written {tb.dst.cycles[-1] - first} cycles after the first command, "
        f"expected {tb.passes + empty + LATENCY - 1} ({tb.passes} passes, {empty} empty "
        f"commands)")
    assert tb.events["hazard_wait"] == 0, "independent commands waited for each other"
    tb.log_summary()


@only_if(lambda p: p["tensorcore"]["vmath"])
@cocotb.test()
async def test_function_throughput(dut):
    """With every port ready, the transcendental functions (a VPU with ``vmath``): one pass
    per cycle; a function's row is written ``vmath.LATENCY - 1`` cycles later than another
    operation's, and a pass that follows a function waits those cycles (rows stay in order),
    so each switch from a function to another operation costs ``vmath.LATENCY - 1`` cycles
    (docs/tensorcore.md, "VPU hardware")."""
    tb = await bench(dut, "none_none")
    tb.fill(DType.FP32, "values")
    n = max(2, tb.rows // 8)
    commands = [
        Command("VOP", n, dst=0, src1=2 * n, vop=VOp.EXP, dtype=DType.FP32),
        Command("VOP", n, dst=n, src1=2 * n, vop=VOp.SIGMOID, dtype=DType.BF16),
        Command("VOP", n, dst=0, src1=3 * n, src2=2 * n, vop=VOp.ADD, dtype=DType.FP32),
        Command("VOP", n, dst=n, src1=3 * n, vop=VOp.RSQRT, dtype=DType.FP32),
        Command("VOP", n, dst=4 * n, src1=3 * n, vop=VOp.LOG, dtype=DType.BF16),
    ]
    for c in commands:
        tb.submit(c)
    await tb.drain()
    first, extra = tb.cmd_cycles[0], vmath.LATENCY - 1
    assert tb.dst.cycles[0] - first == LATENCY + extra, (
        f"first row written {tb.dst.cycles[0] - first} cycles after the first command, "
        f"expected {LATENCY + extra}")
    switches = 1        # sigmoid -> add; the last command, a function, ends late too
    want = tb.passes + LATENCY - 1 + extra * (switches + 1)
    assert tb.dst.cycles[-1] - first == want, (
        f"last row written {tb.dst.cycles[-1] - first} cycles after the first command, "
        f"expected {want} ({tb.passes} passes)")
    tb.log_summary()
