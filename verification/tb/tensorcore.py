"""cocotb testbench of the TensorCore top: a host on its AXI4-Lite port (cocotbext-axi) that
loads programs into the instruction memory, starts them and reads status, counters, registers
and semaphores; cocotbext-axi's ``AxiRam`` as the HBM behind the DMA's AXI4 port, with the
flow's idle and backpressure on its channels.

The tests are written against a small bench interface (``cfg``, ``rng``, ``write_hbm``,
``read_hbm``, ``run``) that the chip's bench (verification/tb/chip.py) also provides, so the
same programs run on the TensorCore alone and on the chip with the HBM controller.
"""

import itertools

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, FallingEdge, First, RisingEdge

from podium import compiler
from podium.isasim import TensorCoreSim
from podium.program import DTYPES
from podium.runner import golden
from spec.isa import SEM_NONE, DType, Error, Op, Queue, Src2, VOp, encode
from spec.tensorcore import TensorCoreConfig
from verification.models.mxu import MXUModel
from verification.tb.axi import axi_ram, axil_master
from verification.tb.bench import FLOWS, env_int, new_rng, start
from verification.tb.packing import load_sidecar
from verification.traffic.tensorcore import random_program

__all__ = ["TensorCoreHost", "TensorCoreBench", "Outcome"]

HBM_BYTES = 1 << 20
ABORT_CYCLES = 100_000
"""How long an aborted run may take to drain (its DMA transfers in flight finish)."""


class Outcome:
    """What a run left: status, error, registers, semaphores, counters."""

    def __init__(self, status, error, error_pc, regs, sems, counters, timed_out=False):
        self.done = bool(status & 2)
        self.timed_out = timed_out
        self.error = Error(error) if status & 4 else Error.NONE
        self.error_pc = error_pc
        self.regs, self.sems, self.counters = regs, sems, counters

    def __repr__(self):
        return (f"Outcome(done={self.done}, error={self.error.name}, pc={self.error_pc}, "
                f"counters={self.counters})")


class TensorCoreHost:
    """The host side of a TensorCore: program load, start, wait, read back. ``csr`` is the
    register map from the sidecar (``extras["csr"]``)."""

    def __init__(self, dut, prefix, config, csr, flow="none_none"):
        self.dut = dut
        self.config = config
        self.reg = csr["registers"]
        self.counter_names = csr["counters"]
        self.csr = axil_master(dut, prefix, flow)

    async def read(self, addr):
        return int.from_bytes((await self.csr.read(addr, 4)).data, "little")

    async def write(self, addr, value):
        await self.csr.write(addr, int(value).to_bytes(4, "little"))

    async def load(self, words, at=0):
        for i, w in enumerate(words):
            await self.write(self.reg["IMEM"] + 8 * (at + i), w & 0xFFFFFFFF)
            await self.write(self.reg["IMEM"] + 8 * (at + i) + 4, w >> 32)

    async def run(self, running, *, start_pc=0, budget=200_000, abort=False):
        """Start at ``start_pc``, wait (at most ``budget`` cycles) for ``running`` (the
        TensorCore's pin) to fall, and return the :class:`Outcome`."""
        await self.write(self.reg["START_PC"], start_pc)
        await self.write(self.reg["CONTROL"], 5)        # clear (the semaphores) and start
        return await self.run_to_end(running, budget=budget, abort=abort)

    async def run_to_end(self, running, *, budget=200_000, abort=False):
        """Wait for a started run to end; its :class:`Outcome`. A run still going after
        ``budget`` cycles fails the test, or with ``abort`` is aborted (CONTROL bit 1: the
        TensorCore flushes and drains) and its outcome returned with ``timed_out`` set."""
        if await self._wait(running, budget):
            return await self.outcome()
        if not abort:
            raise AssertionError(f"still running after {budget} cycles")
        await self.write(self.reg["CONTROL"], 2)
        if not await self._wait(running, ABORT_CYCLES):
            raise AssertionError(f"still running {ABORT_CYCLES} cycles after the abort")
        out = await self.outcome()
        out.timed_out = True
        return out

    async def _wait(self, running, cycles):
        """Whether ``running`` falls within ``cycles`` clock cycles; returns at the first
        clock edge that samples it low, as polling it every cycle would, but awaits its fall
        as an edge instead of waking Python every cycle."""
        await RisingEdge(self.dut.clk)
        if not running.value:
            return True
        if cycles <= 1:
            return False
        fell = FallingEdge(running)
        if await First(fell, ClockCycles(self.dut.clk, cycles - 1)) is not fell:
            return False
        await RisingEdge(self.dut.clk)
        return True

    async def outcome(self):
        cfg = self.config
        status = await self.read(self.reg["STATUS"])
        assert not status & 1, f"status {status:#x}: still running"
        regs = [await self.read(self.reg["REGS"] + 4 * r) for r in range(16)]
        sems = [await self.read(self.reg["SEMS"] + 4 * s) for s in range(cfg.semaphores)]
        counters = {name: await self.read(self.reg["COUNTERS"] + 4 * k)
                    for k, name in enumerate(self.counter_names)}
        error, error_pc = await self.read(self.reg["ERROR"]), await self.read(self.reg["ERROR_PC"])
        return Outcome(status, error, error_pc, regs, sems, counters)

    async def clear(self):
        """CONTROL.clear: error, done and semaphores cleared for the next program."""
        await self.write(self.reg["CONTROL"], 4)


class TensorCoreBench:
    """The TensorCore alone: host on ``csr``, ``AxiRam`` on ``axi``."""

    def __init__(self, dut, flow="random_random"):
        self.dut = dut
        self.sidecar = load_sidecar()
        self.cfg = TensorCoreConfig.from_dict(self.sidecar["parameters"])
        self.rng = new_rng()
        self.host = TensorCoreHost(dut, "csr", self.cfg, self.sidecar["csr"], flow)
        self.ram = axi_ram(dut, "axi", HBM_BYTES, flow)

    async def start(self):
        await start(self.dut)
        await ClockCycles(self.dut.clk, 2)

    def write_hbm(self, address, data):
        self.ram.write(address, data)

    def read_hbm(self, address, length):
        return self.ram.read(address, length)

    async def run(self, program, start_pc=0, **kw):
        await self.host.load(program, at=start_pc)
        return await self.host.run(self.dut.running, start_pc=start_pc, **kw)


def li(reg, value):
    return encode(Op.LI, a=reg, imm32=value & 0xFFFFFFFF)


async def dma_round_trip(tb):
    """A 2-D transfer HBM -> VMEM with strided rows, and back to another HBM region: the
    bytes land where the shape says, the semaphores order the two transfers."""
    beat = tb.cfg.beat_bytes
    rows, run = 5, 2 * beat
    src, dst, hstride = 0x1000, 0x8000, 3 * beat
    data = bytes(tb.rng.getrandbits(8) for _ in range(rows * hstride))
    tb.write_hbm(src, data)
    program = [
        li(1, src), li(2, 0), li(3, dst), li(4, run), li(5, rows), li(6, hstride), li(7, run),
        encode(Op.DMA_SHAPE, dim=0, b=4),
        encode(Op.DMA_SHAPE, dim=1, b=5, c=6, d=7),
        encode(Op.DMA_LOAD, b=1, c=2, sem=0),
        encode(Op.WAIT, queue=Queue.DMA, sem=0),
        encode(Op.DMA_SHAPE, dim=1, b=5, c=7, d=7),
        encode(Op.DMA_STORE, b=3, c=2, sem=1),
        encode(Op.WAIT, queue=Queue.DMA, sem=1),
        encode(Op.HALT),
    ]
    out = await tb.run(program)
    assert out.done and out.error == Error.NONE, out
    want = b"".join(data[r * hstride: r * hstride + run] for r in range(rows))
    got = tb.read_hbm(dst, rows * run)
    assert got == want, "stored bytes differ from the loaded rows"
    assert out.counters["bytes_read"] == out.counters["bytes_written"] == rows * run, out
    assert out.counters["retired"] == len(program), out
    assert out.sems[:2] == [0, 0], out


async def semaphore_after_last_burst(tb):
    """A DMA's semaphore is signalled when its last burst is answered, not before: a load of
    many rows, its WAIT, and at once a store of the load's last row (the end of its last
    burst) back to HBM store the loaded bytes. Read data comes one beat in 16 cycles, so a
    semaphore signalled a burst early lets the store read the row from VMEM long before it
    lands."""
    tb.ram.read_if.r_channel.set_pause_generator(itertools.cycle([False] + [True] * 15))
    beat = tb.cfg.beat_bytes
    rows, run = 24, 2 * beat           # contiguous: bursts of max_burst beats, the last row
    src, dst = 0x2000, 0x9000           # the end of the last burst
    data = bytes(tb.rng.getrandbits(8) for _ in range(rows * run))
    tb.write_hbm(src, data)
    last = (rows - 1) * run
    program = [
        li(1, src), li(2, 0), li(3, dst), li(4, run), li(5, rows), li(6, run), li(7, run),
        li(8, 1), li(9, last),
        encode(Op.DMA_SHAPE, dim=0, b=4),
        encode(Op.DMA_SHAPE, dim=1, b=5, c=6, d=7),
        encode(Op.DMA_LOAD, b=1, c=2, sem=0),
        encode(Op.WAIT, queue=Queue.DMA, sem=0),
        encode(Op.DMA_SHAPE, dim=1, b=8, c=6, d=7),
        encode(Op.DMA_STORE, b=3, c=9, sem=1),
        encode(Op.WAIT, queue=Queue.DMA, sem=1),
        encode(Op.HALT),
    ]
    out = await tb.run(program)
    assert out.done and out.error == Error.NONE, out
    assert tb.read_hbm(dst, run) == data[last:], "the last row was stored before it was loaded"
    assert out.counters["bytes_read"] == rows * run, out
    assert out.counters["bytes_written"] == run, out


async def matmul_from_hbm(tb):
    """A GEMM through the whole core: DMA the operands in, ``matmul`` (the MXU reads VMEM,
    writes the results to VMEM), DMA the result out; compared with the MXU golden model."""
    cfg = tb.cfg
    R, C, beat = cfg.mxu.rows, cfg.mxu.cols, cfg.beat_bytes
    m, k, n = 2 * R + 1, 2 * R + 3, 2 * C - 1
    rng = np.random.default_rng(tb.rng.getrandbits(32))
    a = rng.integers(-128, 128, size=(m, k))
    b = rng.integers(-128, 128, size=(k, n))
    pitch = lambda nbytes: -(-nbytes // beat) * beat   # noqa: E731
    a_pitch, b_pitch, c_pitch = pitch(k), pitch(n), pitch(4 * n)
    hbm_a, hbm_b, hbm_c = 0x10000, 0x20000, 0x30000
    for rows, pitch_, at in ((a, a_pitch, hbm_a), (b, b_pitch, hbm_b)):
        image = np.zeros((len(rows), pitch_), dtype=np.int8)
        image[:, :rows.shape[1]] = rows
        tb.write_hbm(at, image.tobytes())
    bank = cfg.vmem_bytes // cfg.vmem_banks
    va, vb, vc = 0, bank, 2 * bank
    program = [li(1, hbm_a), li(2, va), li(3, a_pitch), li(4, m),
               encode(Op.DMA_SHAPE, dim=0, b=3), encode(Op.DMA_SHAPE, dim=1, b=4, c=3, d=3),
               encode(Op.DMA_LOAD, b=1, c=2, sem=SEM_NONE),
               li(1, hbm_b), li(2, vb), li(3, b_pitch), li(4, k),
               encode(Op.DMA_SHAPE, dim=0, b=3), encode(Op.DMA_SHAPE, dim=1, b=4, c=3, d=3),
               encode(Op.DMA_LOAD, b=1, c=2, sem=0),
               encode(Op.SIGNAL, queue=Queue.DMA, sem=1),     # after both loads
               li(5, m), li(6, k), li(7, n), encode(Op.MXU_SHAPE, b=5, c=6, d=7),
               li(5, a_pitch), li(6, b_pitch), li(7, c_pitch),
               encode(Op.MXU_STRIDE, b=5, c=6, d=7),
               encode(Op.WAIT, queue=Queue.MXU, sem=1),
               encode(Op.WAIT, queue=Queue.MXU, sem=0),
               li(8, va), li(9, vb), li(10, vc),
               encode(Op.MATMUL, b=8, c=9, d=10, emit=1),
               encode(Op.SIGNAL, queue=Queue.MXU, sem=2),
               encode(Op.WAIT, queue=Queue.DMA, sem=2),
               li(1, hbm_c), li(2, vc), li(3, c_pitch), li(4, m),
               encode(Op.DMA_SHAPE, dim=0, b=3), encode(Op.DMA_SHAPE, dim=1, b=4, c=3, d=3),
               encode(Op.DMA_STORE, b=1, c=2, sem=3),
               encode(Op.WAIT, queue=Queue.DMA, sem=3),
               encode(Op.HALT)]
    out = await tb.run(program)
    assert out.done and out.error == Error.NONE, out
    model = MXUModel(R, C, cfg.mxu.acc_depth, cfg.mxu.fmt, cfg.mxu.out_fmt)
    from verification.models.mxu import Gemm
    want = np.array([beat.data for beat in model.execute(Gemm(m, k, n), a, b)])
    tiles = -(-n // C)
    want = np.hstack([want[j * m:(j + 1) * m] for j in range(tiles)])[:, :n]
    for i in range(m):
        got = np.frombuffer(tb.read_hbm(hbm_c + i * c_pitch, 4 * n), dtype=np.int32)
        assert got.tolist() == want[i].tolist(), f"row {i}: {got} != {want[i]}; {out}"
    assert out.counters["mxu_vectors"] == m * -(-k // R) * tiles, out


async def run_against_golden(tb, program, inputs, what):
    """Run ``program`` on the RTL and on the golden ISA simulator with the same HBM image;
    the outputs, registers, semaphores and the timing-free counters must agree."""
    image = program.image(inputs)
    for address, data in image.items():
        tb.write_hbm(address, data)
    out = await tb.run(program.words, budget=4_000_000)
    want = golden(program, image)
    assert want.status == "done", f"{what}: golden {want.status} {want.error.name}"
    assert out.done and out.error == Error.NONE, f"{what}: {out}"
    got = program.read_outputs(tb.read_hbm)
    expect = program.read_outputs(want.hbm.read)
    for name in expect:
        assert np.array_equal(got[name].view(np.uint8), expect[name].view(np.uint8)), (
            f"{what}: output {name} differs from the golden simulator's")
    assert out.regs == [int(r) for r in want.registers], f"{what}: registers"
    assert out.sems == [int(x) for x in want.semaphores], f"{what}: semaphores"
    for name in ("retired", "bytes_read", "bytes_written"):
        assert out.counters[name] == want.counters[name], (
            f"{what}: {name} {out.counters[name]}, golden {want.counters[name]}")
    return out


def _inputs(program, rng):
    arrays = {}
    for name, t in program.inputs.items():
        if t.dtype == "int8":
            arrays[name] = rng.integers(-128, 128, t.shape).astype(np.int8)
        else:
            arrays[name] = rng.standard_normal(t.shape).astype(DTYPES[t.dtype])
    return arrays


async def compiled_gemms(tb):
    """Compiled GEMMs (podium/compiler.py) of edge shapes: one element, sizes not multiples
    of the array, larger than one tile, K split across tiles; bit-exact with the golden
    simulator."""
    cfg = tb.cfg
    R, C = cfg.mxu.rows, cfg.mxu.cols
    rng = np.random.default_rng(tb.rng.getrandbits(32))
    shapes = [(1, 1, 1), (R + 3, 2 * R - 1, C + 5), (3 * R, 5 * R, 2 * C + 1)]
    for M, K, N in shapes:
        program = compiler.gemm(cfg, M, K, N)
        await run_against_golden(tb, program, _inputs(program, rng), f"gemm {M}x{K}x{N}")


async def compiled_mlp(tb):
    """A two-layer MLP with the epilogue on the VPU (bias add with fused ReLU, then int8
    requantization or bfloat16 rounding), bit-exact with the golden simulator."""
    cfg = tb.cfg
    rng = np.random.default_rng(tb.rng.getrandbits(32))
    widths = [3 * cfg.mxu.rows + 1, 2 * cfg.mxu.cols - 3, 7]
    layers = []
    int8 = cfg.mxu.fmt == "int8"
    for k, n in zip(widths, widths[1:], strict=False):
        w = (rng.integers(-128, 128, (k, n)) if int8 else
             rng.standard_normal((k, n)).astype(DTYPES["bfloat16"]))
        b = rng.integers(-5000, 5000, n) if int8 else rng.standard_normal(n).astype(np.float32)
        layers.append((w, b))
    requant = [(int(rng.integers(1, 1 << 15)), 20)] if int8 else None
    program = compiler.mlp(cfg, layers, batch=2 * cfg.mxu.rows + 3, requant=requant)
    await run_against_golden(tb, program, _inputs(program, rng), "mlp")


async def random_programs(tb):
    """Random programs from the ISA (verification/traffic/tensorcore.py): two interleaved
    chains of DMA, VPU and MXU work with scalar arithmetic and a loop; HBM, registers,
    semaphores and the timing-free counters agree with the golden ISA simulator."""
    for _ in range(env_int("PODIUM_TC_PROGRAMS", 3)):
        words, image, regions = random_program(tb.cfg, tb.rng)
        for address, data in image.items():
            tb.write_hbm(address, data)
        out = await tb.run(words, budget=1_000_000)
        sim = TensorCoreSim(tb.cfg, hbm_capacity=HBM_BYTES)
        for address, data in image.items():
            sim.hbm.write(address, data)
        sim.load(words)
        want = sim.run()
        assert want.status == "done" and out.done and out.error == Error.NONE, (out, want)
        for address, length in regions:
            assert tb.read_hbm(address, length) == want.hbm.read(address, length), (
                "HBM differs from the golden simulator's")
        assert out.regs == [int(r) for r in want.registers], (out.regs, want.registers)
        assert out.sems == [int(x) for x in want.semaphores]
        for name in ("retired", "bytes_read", "bytes_written"):
            assert out.counters[name] == want.counters[name], (name, out, want.counters)


async def check_error(tb, words, want, *, golden_pc=True, start_pc=0):
    """Run ``words``: the run must stop with error ``want`` at the PC the golden simulator
    gives (``golden_pc``); then the core must still answer: cleared, a small program runs."""
    out = await tb.run(words, start_pc=start_pc, budget=200_000)
    assert not out.done and out.error == want, f"expected {want.name}: {out}"
    if golden_pc:
        sim = TensorCoreSim(tb.cfg, hbm_capacity=HBM_BYTES)
        sim.load([0] * start_pc + list(words))
        ref = sim.run(max_steps=100_000, start_pc=start_pc)
        assert (ref.error, ref.error_pc) == (want, out.error_pc), (
            f"{want.name} at {out.error_pc}; golden: {ref.error.name} at {ref.error_pc}")
    await tb.host.clear()
    again = await tb.run([li(3, 77), encode(Op.HALT)])
    assert again.done and again.regs[3] == 77, f"no recovery after {want.name}: {again}"
    return out


async def errors(tb):
    """Every error the core can find on its own stops the run with its code and PC (as the
    golden simulator says), nothing hangs, and the core runs the next program: illegal
    instructions, PC out of range (branch, fall-through), VMEM operands out of range or
    misaligned, a misaligned DMA shape, a semaphore overflow, a deadlock, the host's abort."""
    cfg = tb.cfg
    depth, rb = cfg.imem_depth, cfg.row_bytes
    nop_bit = encode(Op.NOP) | 1
    bad_vop = encode(Op.VOP, vop=max(VOp) + 1, dtype=DType.INT32, b=1, c=1, d=1)   # no such op
    for word in (0x3F << 58, nop_bit, bad_vop,
                 encode(Op.WAIT, queue=Queue.MXU, sem=cfg.semaphores)):
        await check_error(tb, [li(1, 5), word, encode(Op.HALT)], Error.ILLEGAL_INSTRUCTION)
    await check_error(tb, [li(1, 1), encode(Op.JMP, target=depth)], Error.PC_RANGE)
    await check_error(tb, [encode(Op.NOP), encode(Op.NOP)], Error.PC_RANGE,
                      start_pc=depth - 2)
    cases = {} if not cfg.vtrans else {     # two bfloat16 tiles of 2 * lanes rows: a row over
        "vtrans past the end": [li(1, 2), encode(Op.VPU_CFG, b=1),
                                li(2, cfg.vmem_bytes - (4 * cfg.lanes - 1) * rb),
                                encode(Op.VTRANS, dtype=DType.BF16, b=0, c=2)]}
    cases |= {
        "vop past the end": [li(1, 2), encode(Op.VPU_CFG, b=1), li(2, cfg.vmem_bytes - rb),
                             encode(Op.VOP, vop=VOp.ADD, dtype=DType.INT32, b=2, c=0, d=0)],
        "vop misaligned": [li(1, 1), encode(Op.VPU_CFG, b=1), li(2, 4),
                           encode(Op.VOP, vop=VOp.COPY, dtype=DType.FP32, b=2, c=0)],
        "matmul misaligned": [li(1, 1), encode(Op.MXU_SHAPE, b=1, c=1, d=1), li(2, 1),
                              encode(Op.MATMUL, b=2, c=0, d=0, emit=1)],
        "vop stat group 0": [li(1, 1), encode(Op.VPU_CFG, b=1),
                             encode(Op.VOP, vop=VOp.SUB, dtype=DType.FP32, b=0, c=0, d=0,
                                    src2=Src2.STAT)],
        "vop stat rows past the end": [li(1, 2), li(2, cfg.vmem_rows),
                                       encode(Op.VPU_CFG, b=1, c=2),
                                       encode(Op.VOP, vop=VOp.SUB, dtype=DType.FP32, b=0, c=0,
                                              d=0, src2=Src2.STAT)],
        "dma past the end": [li(1, cfg.beat_bytes), encode(Op.DMA_SHAPE, dim=0, b=1),
                             li(2, cfg.vmem_bytes), encode(Op.DMA_LOAD, b=0, c=2, sem=SEM_NONE)],
    }
    for words in cases.values():
        await check_error(tb, words + [encode(Op.HALT)], Error.VMEM_RANGE)
    await check_error(tb, [li(1, cfg.beat_bytes // 2), encode(Op.DMA_SHAPE, dim=0, b=1),
                           encode(Op.DMA_LOAD, b=0, c=0, sem=0), encode(Op.HALT)],
                      Error.DMA_ALIGN)
    await check_error(tb, [li(1, 256), encode(Op.SIGNAL, queue=Queue.VPU, sem=2),
                           encode(Op.ADDI, a=1, b=1, imm32=0xFFFFFFFF),
                           encode(Op.BNE, b=1, c=0, target=1), encode(Op.HALT)],
                      Error.SEM_OVERFLOW)
    await check_error(tb, [encode(Op.WAIT, queue=Queue.MXU, sem=5), encode(Op.HALT)],
                      Error.DEADLOCK)
    await tb.host.load([encode(Op.JMP, target=0)])
    await tb.host.write(tb.host.reg["START_PC"], 0)
    await tb.host.write(tb.host.reg["CONTROL"], 1)
    await ClockCycles(tb.dut.clk, 200)
    await tb.host.write(tb.host.reg["CONTROL"], 2)
    out = await tb.host.run_to_end(tb.dut.running)
    assert out.error == Error.ABORTED and out.error_pc == 0, out
    await tb.host.clear()


TESTS = [dma_round_trip, matmul_from_hbm, compiled_gemms, compiled_mlp, random_programs, errors]
"""The programs every bench of a TensorCore runs (this one, the chip's)."""


def cocotb_tests(bench, bodies, flows, module):
    """A cocotb test ``test_<body>`` of ``module`` per test body, over ``flows``, on benches
    made by ``bench(dut, flow)`` (started, then handed to the body)."""
    tests = {}
    for body in bodies:
        async def test(dut, flow, body=body):
            tb = bench(dut, flow)
            await tb.start()
            await body(tb)
        test.__name__ = test.__qualname__ = f"test_{body.__name__}"
        test.__doc__, test.__module__ = body.__doc__, module
        tests[test.__name__] = cocotb.test()(cocotb.parametrize(flow=flows)(test))
    return tests


globals().update(cocotb_tests(TensorCoreBench, [*TESTS, semaphore_after_last_burst], FLOWS,
                             __name__))
