"""cocotb testbench of the SparseCore's standalone top: the SparseCore on port 0 of the HBM
controller, the golden HBM device model on every channel (verification/tb/hbm.py) checking
each command, a host (cocotbext-axi AXI4-Lite manager, with the flow's idle and backpressure)
on the control port; or (``memory="axi"``) cocotbext-axi's ``AxiRam`` on the SparseCore's AXI4
port with the flow's idle and backpressure on all five channels. Tables, CSR lists and
weights go into memory through the backdoor (the device model's, through the controller's
address map and ECC); every output (and, after a refused operation, every byte that must not
have been written) is read back the same way and compared with the golden model
(verification/models/sparsecore.py) bit for bit.
"""

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge

from spec.sparsecore import SparseCoreSystemConfig
from verification.models.sparsecore import (
    COMBINERS,
    Batch,
    Error,
    Limits,
    Table,
    lookup,
    read_table,
    scatter,
    table_image,
)
from verification.tb.axi import axi_ram, axil_master
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
from verification.tb.hbm import HBMBench
from verification.tb.packing import load_sidecar

__all__ = ["SparseCoreBench", "Outcome", "Op", "ScatterOp"]

SENTINEL = 0xA5
RAM_BYTES = 1 << 21


class Outcome:
    """What an operation left: status, error code and info, counters."""

    def __init__(self, status, error, info, counters):
        self.done = bool(status & 2)
        self.error = Error(error) if status & 4 else Error.NONE
        self.info = info
        self.counters = counters

    def __repr__(self):
        return (f"Outcome(done={self.done}, error={self.error.name}, info={self.info}, "
                f"counters={self.counters})")


class Op:
    """One lookup: a table (its descriptor slot and :class:`Table`), a CSR batch and where
    its lists and output live."""

    def __init__(self, slot, table, batch, combiner="sum", *, padding_idx=None, drop=False,
                 lists=0x100000, out=0x180000, out_pitch=None):
        self.slot, self.table, self.batch, self.combiner = slot, table, batch, combiner
        self.padding_idx, self.drop = padding_idx, drop
        n = len(batch.ids)
        self.offsets_at = lists
        self.ids_at = lists + 4 * (len(batch.offsets) + 1)
        self.weights_at = self.ids_at + 4 * (n + 1)
        self.out = out
        self.out_pitch = out_pitch or table.dim * 4

    @property
    def out_bytes(self):
        return self.batch.bags * self.out_pitch

    def golden(self, bits):
        return lookup(self.table, bits, self.batch, self.combiner, padding_idx=self.padding_idx,
                      bad_ids="drop" if self.drop else "stop")


class ScatterOp(Op):
    """One gradient update: ``grad`` (bags x dim fp32) at ``grad_at``, SGD with ``lr``."""

    scatter = True

    def __init__(self, slot, table, batch, grad, lr, *, grad_at=0x1C0000, grad_pitch=None,
                 **kw):
        super().__init__(slot, table, batch, "sum", **kw)
        self.grad = np.asarray(grad, dtype=np.float32).reshape(batch.bags, table.dim)
        self.lr = np.float32(lr)
        self.grad_at = grad_at
        self.grad_pitch = grad_pitch or table.dim * 4

    @property
    def out_bytes(self):
        return 0

    def golden(self, bits, max_ids):
        return scatter(self.table, bits, self.batch, self.grad, "sum", lr=self.lr,
                       padding_idx=self.padding_idx, bad_ids="drop" if self.drop else "stop",
                       limits=Limits(max_ids=max_ids, max_unique=max_ids))


class SparseCoreBench:
    """The SparseCore's bench: its standalone top, or (``chip``: a started ChipBench of
    verification/tb/chip.py) the SparseCore of a chip, on HBM port 1 beside the TensorCore."""

    def __init__(self, dut, flow="random_random", *, chip=None):
        self.dut = dut
        sidecar = load_sidecar()
        self.rng = new_rng()
        self.np = np.random.default_rng(self.rng.getrandbits(32))
        if chip is not None:
            self.cfg = chip.chip.sparsecore
            self.memory, self.hbm_cfg, self.hbm = "hbm", chip.chip.hbm, chip.hbm
            csr, prefix, self.running = sidecar["sc_csr"], "sc_csr", dut.sc_running
        else:
            system = SparseCoreSystemConfig.from_dict(sidecar["parameters"])
            self.cfg, self.memory, self.hbm_cfg = system.sparsecore, system.memory, system.hbm
            csr, prefix, self.running = sidecar["csr"], "csr", dut.running
            if system.memory == "axi":
                self.hbm = None
                self.ram = axi_ram(dut, "axi", RAM_BYTES, flow)
                cocotb.start_soon(self._watch_4k())
            else:
                self.hbm = HBMBench(dut, flow, masters=False, config=system.hbm,
                                    prefix="hbm_ch", idle="hbm_idle")
        self.crossings = []             # bursts seen crossing a 4 KiB boundary (AXI forbids)
        self.csr_info = csr
        self.reg = csr["registers"]
        self.counter_names = csr["counters"]
        self.csr = axil_master(dut, prefix, flow)

    async def _watch_4k(self):
        """Record every AR or AW burst on the SparseCore's AXI port that crosses 4 KiB."""
        dut, beat = self.dut, self.cfg.beat_bytes
        while True:
            await RisingEdge(dut.clk)
            for ch in ("ar", "aw"):
                if int(getattr(dut, f"axi__{ch}valid").value) and \
                        int(getattr(dut, f"axi__{ch}ready").value):
                    addr = int(getattr(dut, f"axi__{ch}addr").value)
                    end = addr + (int(getattr(dut, f"axi__{ch}len").value) + 1) * beat - 1
                    if addr >> 12 != end >> 12:
                        self.crossings.append((ch, hex(addr), hex(end)))

    async def start(self):
        if self.hbm:
            await self.hbm.start()
        else:
            await start(self.dut)
        await ClockCycles(self.dut.clk, 2)

    # Memory backdoor -------------------------------------------------------------------

    def write_hbm(self, address, data):
        if not self.hbm:
            self.ram.write(address, data)
            return
        self.hbm.write_bytes(address, data)

    def read_hbm(self, address, length):
        if not self.hbm:
            return self.ram.read(address, length)
        return self.hbm.dump(address, length)

    # Registers -------------------------------------------------------------------------

    async def read(self, addr):
        return int.from_bytes((await self.csr.read(addr, 4)).data, "little")

    async def write(self, addr, value):
        await self.csr.write(addr, (int(value) & 0xFFFFFFFF).to_bytes(4, "little"))

    async def set_table(self, slot, table):
        at = self.reg["TABLES"] + 16 * slot
        shape = table.dim | (1 << 16 if table.fmt == "bf16" else 0)
        for k, value in enumerate((table.base, table.rows, shape, table.pitch)):
            await self.write(at + 4 * k, value)

    def place(self, op, bits=None):
        """Write the op's table (random bits if not given), lists and a sentinel output area
        into HBM; return the table's bits."""
        t = op.table
        if bits is None:
            if t.fmt == "fp32":
                bits = self.np.standard_normal((t.rows, t.dim)).astype(np.float32).view(
                    np.uint32)
            else:
                import ml_dtypes
                bits = self.np.standard_normal((t.rows, t.dim)).astype(
                    ml_dtypes.bfloat16).view(np.uint16)
        self.write_hbm(t.base, table_image(t, bits))
        b = op.batch
        self.write_hbm(op.offsets_at, np.asarray(b.offsets, dtype=np.uint32).tobytes())
        if len(b.ids):
            self.write_hbm(op.ids_at, np.asarray(b.ids, dtype=np.uint32).tobytes())
            if b.weights is not None:
                self.write_hbm(op.weights_at, np.asarray(b.weights, np.float32).tobytes())
        if op.out_bytes:
            self.write_hbm(op.out, bytes([SENTINEL]) * op.out_bytes)
        return bits

    async def settle(self):
        """Wait until the controller has written every answered write into the device (the
        backdoor reads the device)."""
        if self.hbm:
            await self.hbm.settle()

    async def run(self, op, budget=400_000):
        """Program the registers for ``op``, start it, wait for it to end; its Outcome."""
        await self.set_table(op.slot, op.table)
        b = op.batch
        kinds = {name: k for k, name in enumerate(COMBINERS)}
        mode = ((b.weights is not None) | kinds[op.combiner] << 1
                | (op.padding_idx is not None) << 3 | op.drop << 4)
        if getattr(op, "scatter", False):
            mode |= 1 << 5
            for name, value in (("GRAD", op.grad_at), ("GRAD_PITCH", op.grad_pitch),
                                ("LR", int(op.lr.view(np.uint32)))):
                await self.write(self.reg[name], value)
        values = {"TABLE": op.slot, "MODE": mode, "PADDING": op.padding_idx or 0,
                  "OFFSETS": op.offsets_at, "BAGS": b.bags, "IDS": op.ids_at,
                  "NIDS": len(b.ids), "WEIGHTS": op.weights_at, "OUT": op.out,
                  "OUT_PITCH": op.out_pitch}
        for name, value in values.items():
            await self.write(self.reg[name], value)
        await self.write(self.reg["CONTROL"], 1)
        for _ in range(budget):
            await RisingEdge(self.dut.clk)
            if not self.running.value:
                break
        else:
            raise AssertionError(f"still running after {budget} cycles")
        await self.settle()
        assert not self.hbm or self.hbm.error is None, str(self.hbm.error)
        status = await self.read(self.reg["STATUS"])
        counters = {name: await self.read(self.reg["COUNTERS"] + 4 * k)
                    for k, name in enumerate(self.counter_names)}
        return Outcome(status, await self.read(self.reg["ERROR"]),
                       await self.read(self.reg["ERROR_INFO"]), counters)

    async def check(self, op, bits=None):
        """Place, run and compare ``op`` with the golden model: the output bits, or on an
        error the code and that not one output byte was written; the counters."""
        bits = self.place(op, bits)
        out = await self.run(op)
        want = op.golden(bits)
        assert out.error == want.error, f"error {out.error.name}, golden {want.error.name}"
        got = self.read_hbm(op.out, op.out_bytes)
        if want.error != Error.NONE:
            assert not out.done
            assert got == bytes([SENTINEL]) * op.out_bytes, "a refused operation wrote"
            await self.write(self.reg["CONTROL"], 2)
            return out, want
        assert out.done, out
        rows = np.frombuffer(got, dtype=np.uint32).reshape(op.batch.bags, -1)
        rows = rows[:, :op.table.dim]
        if not np.array_equal(rows, want.out):
            bad = np.argwhere(rows != want.out)[:5]
            raise AssertionError(f"output differs at {bad.tolist()}: got "
                                 f"{[hex(rows[i, j]) for i, j in bad]}, want "
                                 f"{[hex(want.out[i, j]) for i, j in bad]}")
        c, w = out.counters, want.counters
        for name in ("bags", "ids", "gathered", "padding", "bad_ids"):
            assert c[name] == w[name], f"counter {name}: {c[name]}, golden {w[name]}"
        assert c["bytes_written"] == op.batch.bags * op.table.dim * 4, c
        gathered = w["gathered"] * op.table.row_bytes
        assert c["bytes_read"] >= gathered, c
        return out, want


async def check_scatter(tb, op, bits=None):
    """Place, run and compare a scatter with the golden model: the whole table in HBM after
    it (unchanged after a refused one), and the counters."""
    bits = tb.place(op, bits)
    image = np.zeros((op.batch.bags, op.grad_pitch), dtype=np.uint8)
    image[:, :op.table.dim * 4] = op.grad.view(np.uint8).reshape(op.batch.bags, -1)
    tb.write_hbm(op.grad_at, image.tobytes())
    out = await tb.run(op)
    want = op.golden(bits, tb.cfg.max_ids)
    assert out.error == want.error, f"error {out.error.name}, golden {want.error.name}: {out}"
    got = read_table(op.table, tb.read_hbm)
    expect = bits if want.error != Error.NONE else want.out
    if not np.array_equal(got, expect):
        bad = np.argwhere(got != expect)[:5]
        raise AssertionError(f"table differs at {bad.tolist()}: got "
                             f"{[hex(got[i, j]) for i, j in bad]}, want "
                             f"{[hex(expect[i, j]) for i, j in bad]}")
    if want.error != Error.NONE:
        await tb.write(tb.reg["CONTROL"], 2)
        return out, want, got
    c, w = out.counters, want.counters
    for mine, theirs in (("bags", "bags"), ("ids", "ids"), ("gathered", "gathered"),
                         ("padding", "padding"), ("bad_ids", "bad_ids"),
                         ("unique_ids", "row_writes"), ("minibatches", "minibatches")):
        assert c[mine] == w[theirs], f"counter {mine}: {c[mine]}, golden {w[theirs]}"
    assert c["bytes_written"] == w["row_writes"] * op.table.row_bytes, c
    return out, want, got


def random_batch(rng, bags, rows, *, max_bag=5, weighted=False, zipf=None, lo=0):
    sizes = rng.integers(lo, max_bag + 1, bags)
    n = int(sizes.sum())
    ids = (np.minimum(rng.zipf(zipf, n) - 1, rows - 1) if zipf else rng.integers(0, rows, n))
    weights = rng.standard_normal(n).astype(np.float32) if weighted else None
    return Batch(np.concatenate([[0], np.cumsum(sizes)]), ids, weights)


# Tests -------------------------------------------------------------------------------------

async def combiners(tb):
    """Every combiner, with and without per-id weights, on an fp32 table: bit-exact with the
    golden model, counters as it counts them."""
    table = Table(0x10000, 50, 16)
    for combiner in COMBINERS:
        for weighted in (False, True):
            batch = random_batch(tb.np, 6, table.rows, weighted=weighted)
            await tb.check(Op(0, table, batch, combiner))


async def bf16_padding_empty(tb):
    """A bfloat16 table (rows widened exactly), padding_idx excluded from the sum and the
    denominators, empty bags and bags of only padding written as zeros."""
    table = Table(0x20000, 30, 32, "bf16")
    batch = Batch([0, 0, 3, 5, 5, 8], [7, 3, 7, 7, 7, 1, 29, 0])
    for combiner in ("sum", "mean", "sqrtn"):
        out, want = await tb.check(Op(1, table, batch, combiner, padding_idx=7))
        assert want.counters["padding"] == 4


async def edges_duplicates_tables(tb):
    """Ids at both edges of the table, duplicates within and across bags, several table
    descriptors, a table at an odd base with a pitch wider than the row, an output pitch wider
    than the row."""
    wide = Table(0x30060, 9, 8, pitch=64)
    batch = Batch([0, 4, 6, 7], [0, 8, 8, 0, 8, 8, 4], np.float32([1, 2, -1, 0.5, 3, 3, 1]))
    await tb.check(Op(2, wide, batch, "mean", out_pitch=64))
    other = Table(0x40000, 64, 16)
    await tb.check(Op(3, other, random_batch(tb.np, 5, 64, zipf=1.2), "sqrtn_count"))
    # The first table's descriptor still works after the others were used.
    await tb.check(Op(2, wide, batch, "sum"))


async def rows_across_4k(tb):
    """Rows that straddle a 4 KiB boundary (96-byte rows at a base 32 bytes past a multiple
    of 96 below one), output rows and gradient rows that straddle one too: lookups, an fp32
    and a bfloat16 scatter, each bit-exact and the whole table compared; on the AXI harness
    no burst on the port crosses a boundary (the splitter cuts them in two)."""
    table = Table(0x6FC60, 40, 24)
    batch = random_batch(tb.np, 6, table.rows, max_bag=5, weighted=True)
    batch.ids[::3] = 9                      # row 9 spans 0x6FFC0..0x7001F
    for combiner in ("sum", "mean"):
        await tb.check(Op(1, table, batch, combiner, out=0x180FC0, out_pitch=96))
    grad = tb.np.standard_normal((batch.bags, table.dim)).astype(np.float32)
    _, _, bits = await check_scatter(tb, ScatterOp(1, table, batch, grad, 0.5,
                                                   grad_at=0x1C0FC0, grad_pitch=96))
    await tb.check(Op(1, table, batch, "sum", out=0x180FC0, out_pitch=96), bits)
    half = Table(0x7FFE0, 16, 48, "bf16")    # 96-byte rows: row 0 crosses 0x80000
    batch = random_batch(tb.np, 4, half.rows, max_bag=4)
    grad = tb.np.standard_normal((batch.bags, half.dim)).astype(np.float32)
    await check_scatter(tb, ScatterOp(2, half, batch, grad, 0.25))
    assert not tb.crossings, tb.crossings


async def bad_input(tb):
    """Refused operations: decreasing offsets, an offset past the ids, ids outside the table
    (stop policy), a bad descriptor; each stops with its code, writes nothing, and a good
    operation runs after it. The drop policy skips and counts bad ids."""
    table = Table(0x10000, 20, 8)
    good = Batch([0, 2, 3], [1, 19, 5])
    for offsets, ids, code in (([0, 3, 2, 4], [1, 2, 3, 4], Error.BAD_OFFSETS),
                               ([0, 2, 5], [1, 2, 3], Error.BAD_OFFSETS),
                               ([0, 2, 3], [1, 20, 5], Error.BAD_ID),
                               ([0, 1, 3], [4, 7, 1 << 31], Error.BAD_ID)):
        out, want = await tb.check(Op(0, table, Batch(offsets, ids)))
        assert out.error == code, out
        if code == Error.BAD_ID:
            assert out.counters["bad_ids"] == 1 and out.info == ids.index(max(ids)), out
        else:
            assert out.info == 2, f"the first bad offset is at index 2: {out}"
        await tb.check(Op(0, table, good, "mean"))
    out, _ = await tb.check(Op(0, table, Batch([0, 2, 4], [1, 20, 22, 3]), "mean", drop=True))
    assert out.counters["bad_ids"] == 2
    # offsets[0] need not be 0: the ids before it are never read (bad ones there are no error),
    # and the ids counter counts the bags' ids, padding and dropped ones included.
    out, _ = await tb.check(Op(0, table, Batch([2, 4, 5], [1 << 31, 99, 1, 19, 5])))
    assert out.error == Error.NONE and out.counters["ids"] == 3, out
    out, _ = await tb.check(Op(0, table, Batch([1, 3, 5], [7, 1, 20, 5, 5]), padding_idx=5,
                               drop=True))
    assert (out.counters["ids"], out.counters["gathered"]) == (4, 1), out
    # Every NaN leaves as the canonical 0x7FC00000: a signalling NaN, a negative NaN with a
    # payload, inf + -inf.
    bits = np.zeros((table.rows, table.dim), np.uint32)
    bits[3], bits[4], bits[5], bits[6] = 0x7F800001, 0xFFC12345, 0x7F800000, 0xFF800000
    out, want = await tb.check(Op(0, table, Batch([0, 1, 2, 4], [3, 4, 5, 6])), bits)
    assert (want.out == 0x7FC00000).all(), [hex(v) for v in want.out.ravel()]
    bad_desc = Op(0, Table(0x10000, 20, 4), good)      # 16-byte rows: not whole beats
    tb.place(bad_desc)
    out = await tb.run(bad_desc)
    assert out.error == Error.BAD_DESCRIPTOR, out
    assert tb.read_hbm(bad_desc.out, bad_desc.out_bytes) == bytes([SENTINEL]) * bad_desc.out_bytes
    await tb.write(tb.reg["CONTROL"], 2)
    await tb.check(Op(0, table, good))
    errors = await tb.read(tb.reg["COUNTERS"] + 4 * tb.counter_names.index("errors"))
    assert errors == 5, f"errors counter {errors}"


async def zipf_batches(tb):
    """Random CSR batches with Zipf-distributed ids (many duplicates, hot rows), random
    combiners and weights, one table per op from several descriptors."""
    tables = [Table(0x10000, 100, 16), Table(0x30000, 40, 32, "bf16"), Table(0x40000, 64, 8)]
    largest = 0
    for _ in range(env_int("PODIUM_SC_OPS", 4)):
        slot = tb.rng.randrange(len(tables))
        t = tables[slot]
        batch = random_batch(tb.np, tb.rng.randint(1, 12), t.rows, max_bag=8,
                             weighted=tb.rng.random() < 0.5, zipf=1.1 + tb.rng.random())
        largest = max(largest, len(batch.ids))
        await tb.check(Op(slot, t, batch, tb.rng.choice(COMBINERS)))
    got = await tb.read(tb.reg["COUNTERS"] + 4 * tb.counter_names.index("max_batch"))
    assert got == largest, f"max_batch {got}, want {largest}"


async def scatter_duplicates(tb):
    """Scatter-add with SGD: Zipf ids (duplicates within and across bags, hot rows at the
    table's first and last rows), weights, padding, more ids than one minibatch holds (the
    sorter splits them and steps once per minibatch), an fp32 and a bfloat16 table; the whole
    table compared after each, and a lookup afterwards reads the updated rows."""
    table = Table(0x50000, 24, 16)
    bits = None
    for k in range(env_int("PODIUM_SC_SCATTERS", 3)):
        batch = random_batch(tb.np, tb.rng.randint(2, 9), table.rows, max_bag=6,
                             weighted=k % 2 == 1, zipf=1.3)
        batch.ids[::7] = table.rows - 1
        grad = tb.np.standard_normal((batch.bags, table.dim)).astype(np.float32)
        op = ScatterOp(1, table, batch, grad, tb.rng.choice([0.5, 0.01, -1.0]),
                       padding_idx=3 if k == 1 else None)
        _, want, bits = await check_scatter(tb, op, bits)
    await tb.check(Op(1, table, random_batch(tb.np, 4, table.rows), "sum"), bits)
    half = Table(0x60000, 12, 32, "bf16")        # bfloat16: rounded once per step
    batch = random_batch(tb.np, 6, half.rows, max_bag=6, weighted=True, zipf=1.3)
    grad = tb.np.standard_normal((batch.bags, half.dim)).astype(np.float32)
    _, _, bits = await check_scatter(tb, ScatterOp(2, half, batch, grad, 0.125))
    await tb.check(Op(2, half, random_batch(tb.np, 3, half.rows), "mean"), bits)


async def scatter_bad_input(tb):
    """A scatter with an id outside the table (stop policy) or decreasing offsets leaves the
    whole table unchanged and the core answers the next operation; with the drop policy the bad
    ids are skipped and counted; a mean scatter is refused (BAD_DESCRIPTOR: not built)."""
    table = Table(0x50000, 10, 8)
    grad = tb.np.standard_normal((2, 8)).astype(np.float32)
    bits = None
    for offsets, ids, code in (([0, 2, 3], [1, 10, 5], Error.BAD_ID),
                               ([0, 2, 1], [1, 2, 5], Error.BAD_OFFSETS)):
        out, _, bits = await check_scatter(tb, ScatterOp(0, table, Batch(offsets, ids), grad,
                                                         0.5), bits)
        assert out.error == code, out
    out, _, bits = await check_scatter(tb, ScatterOp(0, table, Batch([0, 2, 4], [9, 12, 9, 0]),
                                                     grad, 0.5, drop=True), bits)
    assert out.counters["bad_ids"] == 1 and out.counters["unique_ids"] == 2, out
    refused = ScatterOp(0, table, Batch([0, 1], [2]), grad[:1], 1.0)
    refused.combiner = "mean"
    tb.place(refused)
    out = await tb.run(refused)
    assert out.error == Error.BAD_DESCRIPTOR, out
    await tb.write(tb.reg["CONTROL"], 2)
    await check_scatter(tb, ScatterOp(0, table, Batch([0, 3], [4, 4, 4]), grad[:1], 0.25))


async def axi_errors(tb):
    """A table past the HBM's capacity: every row read is answered DECERR; the operation still
    finishes (every bag written, nothing hangs) and stops with AXI_RESPONSE; the next
    operation is right (HBM configuration only: the AXI harness's memory has no errors)."""
    past = tb.hbm_cfg.capacity
    lost = Op(0, Table(past, 8, 8), Batch([0, 2, 3], [1, 7, 0]))
    tb.place(Op(0, Table(0x10000, 8, 8), lost.batch))         # the lists only
    out = await tb.run(lost)
    assert out.error == Error.AXI_RESPONSE and not out.done, out
    assert out.counters["bytes_written"] == 2 * 32, out
    await tb.write(tb.reg["CONTROL"], 2)
    await tb.check(Op(0, Table(0x10000, 8, 8), Batch([0, 2, 3], [1, 7, 0]), "mean"))


TESTS = [combiners, bf16_padding_empty, edges_duplicates_tables, rows_across_4k, bad_input,
         zipf_batches, scatter_duplicates, scatter_bad_input, axi_errors]
ONLY_IF = {axi_errors: lambda params: params.get("memory") == "hbm"}


def _tests(bodies, flows):
    tests = {}
    for body in bodies:
        async def test(dut, flow, body=body):
            tb = SparseCoreBench(dut, flow)
            await tb.start()
            assert await tb.read(tb.reg["ID"]) == tb.csr_info["id"]
            await body(tb)
            assert not tb.crossings, f"bursts across 4 KiB: {tb.crossings}"
        test.__name__ = test.__qualname__ = f"test_{body.__name__}"
        test.__doc__, test.__module__ = body.__doc__, __name__
        made = cocotb.test()(cocotb.parametrize(flow=flows)(test))
        tests[test.__name__] = only_if(ONLY_IF[body])(made) if body in ONLY_IF else made
    return tests


globals().update(_tests(TESTS, SHORT_FLOWS))


@measurement
@cocotb.test()
async def measure_gather(dut):
    """Gather throughput (``make bench``, not in the regression): per row size of the spec, a
    sum lookup of ``bags`` bags of ``ids_per_bag`` uniformly random ids over a table of
    ``rows`` fp32 rows, checked against the golden model; the report holds cycles (the whole
    operation: both checking passes, the gather, the writes), row bytes read and the counters.
    With ``dedup``, the same for a Zipf id stream: rows read with and without dedup."""
    spec = perf_spec()
    tb = SparseCoreBench(dut, spec.get("flow", "none_none"))
    await tb.start()
    rng = np.random.default_rng(spec.get("seed", 1))
    report = []
    for row_bytes in spec["row_bytes"]:
        table = Table(0x400000, spec["rows"], row_bytes // 4)
        n = spec["bags"] * spec["ids_per_bag"]
        batch = Batch(np.arange(0, n + 1, spec["ids_per_bag"]), rng.integers(0, table.rows, n))
        out, want = await tb.check(Op(0, table, batch, "sum", lists=0x100000, out=0x200000))
        c = out.counters
        report.append({"row_bytes": row_bytes, "rows_read": c["gathered"],
                       "unique_rows": want.counters["unique_ids"], "cycles": c["cycles"],
                       "row_bytes_read": c["gathered"] * row_bytes,
                       "bytes_read": c["bytes_read"], "bytes_written": c["bytes_written"],
                       "stalls": c["stalls"]})
    write_report(spec, {"gather": report})


@measurement
@cocotb.test()
async def measure_scatter(dut):
    """One scatter of the spec's CSR batch (``offsets``, ``ids``) over a table of ``rows`` x
    ``dim`` fp32 rows with random gradients, the whole table checked against the golden model
    afterwards; the report holds the counters (``unique_ids``: rows read-modified-written after
    dedup) and the cycles."""
    spec = perf_spec()
    tb = SparseCoreBench(dut, spec.get("flow", "none_none"))
    await tb.start()
    rng = np.random.default_rng(spec.get("seed", 1))
    table = Table(0x400000, spec["rows"], spec["dim"])
    batch = Batch(spec["offsets"], spec["ids"])
    grad = rng.standard_normal((batch.bags, table.dim)).astype(np.float32)
    op = ScatterOp(0, table, batch, grad, 0.01, grad_at=0x300000)
    out, want, _ = await check_scatter(tb, op)
    write_report(spec, {"counters": out.counters, "golden": {
        k: v for k, v in want.counters.items() if isinstance(v, int)}})


@measurement
@cocotb.test()
async def measure_dlrm(dut):
    """A DLRM DCNv2-shaped batch: ``tables`` tables of ``rows`` x ``dim`` fp32 rows, ``samples``
    samples each with a multi-hot bag of 1..``max_hot`` uniformly random ids per table; one sum
    lookup per table in turn, each checked against the golden model; the report holds the
    cycles of each lookup and the rows read."""
    spec = perf_spec()
    tb = SparseCoreBench(dut, spec.get("flow", "none_none"))
    await tb.start()
    rng = np.random.default_rng(spec.get("seed", 1))
    report = []
    for t in range(spec["tables"]):
        table = Table(0x400000 + t * spec["rows"] * spec["dim"] * 4, spec["rows"], spec["dim"])
        sizes = rng.integers(1, spec["max_hot"] + 1, spec["samples"])
        batch = Batch(np.concatenate([[0], np.cumsum(sizes)]),
                      rng.integers(0, table.rows, int(sizes.sum())))
        out, _ = await tb.check(Op(t % tb.cfg.tables, table, batch, "sum", lists=0x100000,
                                   out=0x200000))
        report.append({"table": t, "ids": len(batch.ids), "cycles": out.counters["cycles"],
                       "bytes_read": out.counters["bytes_read"]})
    write_report(spec, {"lookups": report})
