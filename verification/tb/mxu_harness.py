"""cocotb testbench of the self-running MXU (hdl/mxu/harness.py): operands written into the
harness memories through VPI, one `start`, a wait for `done` with no Python per cycle, then
every result read back and compared with the golden model. It checks correctness like the other
MXU tests and measures how many cycles per second Verilator simulates.

PODIUM_PERF (JSON) sets the GEMM ``m``, ``k``, ``n``, the number of timed ``runs`` and the
``report`` file the measurements go to.
"""

import random
import statistics
import time

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge

from verification.models import fp
from verification.models.mxu import Gemm, MXUModel, tile_order
from verification.tb.bench import perf_spec, start, write_report
from verification.tb.packing import Port, load_sidecar, pack_lanes


class Harness:
    def __init__(self, dut):
        self.dut = dut
        self.sidecar = load_sidecar()
        p = self.sidecar["parameters"]["mxu"]
        self.rows, self.cols, self.fmt = p["rows"], p["cols"], p["fmt"]
        self.rng = np.random.default_rng(random.getrandbits(64))
        memories = self.sidecar["memories"]
        self.in_width = memories["a"]["lanes"]["width"]
        self.model = MXUModel(self.rows, self.cols, p["acc_depth"], self.fmt, p["out_fmt"])
        self.cmd_layout = Port(memories["cmd"])
        self.c_layout = Port(memories["c"])

    def garbage(self, shape):
        if self.fmt == "int8":
            return self.rng.integers(-128, 128, size=shape)
        return self.rng.integers(0, 1 << self.in_width, size=shape)

    def operands(self, shape):
        if self.fmt == "int8":
            return self.rng.integers(-128, 128, size=shape)
        return fp.bits_of(self.rng.standard_normal(shape), self.fmt).astype(np.int64)

    def load(self, cmds):
        """Write commands and operands into the memories; return the expected result beats."""
        dut = self.dut
        expected, w_beats, a_beats = [], [], []
        for cmd in cmds:
            a, b = self.operands((cmd.m, cmd.k)), self.operands((cmd.k, cmd.n))
            expected += self.model.execute(cmd, a, b)
            for tile_b, tile_a in tile_order(cmd, a, b, self.rows, self.cols, self.garbage):
                w_beats += [pack_lanes(row, self.in_width) for row in tile_b]
                a_beats += [pack_lanes(row, self.in_width) for row in tile_a]
        for i, cmd in enumerate(cmds):
            dut.cmd_mem[i].value = self.cmd_layout.pack(
                m=cmd.m, k=cmd.k, n=cmd.n, acc_addr=cmd.acc_addr, accumulate=cmd.accumulate,
                emit=cmd.emit)
        for i, beat in enumerate(w_beats):
            dut.w_mem[i].value = beat
        for i, beat in enumerate(a_beats):
            dut.a_mem[i].value = beat
        dut.n_cmd.value, dut.n_w.value, dut.n_a.value = len(cmds), len(w_beats), len(a_beats)
        return expected

    async def run(self):
        """One run from `start` to `done`; returns (cycles, wall seconds)."""
        dut = self.dut
        await RisingEdge(dut.clk)
        dut.start.value = 1
        await RisingEdge(dut.clk)
        dut.start.value = 0
        wall = time.perf_counter()
        await RisingEdge(dut.done)
        wall = time.perf_counter() - wall
        return int(dut.cycles.value), wall

    def check(self, expected):
        n = int(self.dut.n_c.value)
        assert n == len(expected), f"{n} result beats, expected {len(expected)}"
        for i, exp in enumerate(expected):
            got = self.c_layout.unpack(int(self.dut.c_mem[i].value))
            assert (tuple(got["data"]), bool(got["last"]), bool(got["error"])) == (
                exp.data, exp.last, exp.error), f"beat {i}: {got}, expected {exp}"


@cocotb.test()
async def run_preloaded(dut):
    """GEMMs from preloaded memories: every result checked; cycles per second reported."""
    spec = perf_spec()
    h = Harness(dut)
    dut.start.value = 0
    await start(dut)
    R, C = h.rows, h.cols
    if spec:
        cmds = [Gemm(spec["m"], spec["k"], spec["n"])]
    else:
        cmds = [Gemm(int(h.rng.integers(1, 3 * R)), int(h.rng.integers(1, 3 * R)),
                     int(h.rng.integers(1, 3 * C)), acc_addr=64 * i, accumulate=i == 2)
                for i in range(3)]
    expected = h.load(cmds)
    runs = []
    for _ in range(spec.get("runs", 1)):
        runs.append(await h.run())
        h.check(expected)
    cycles = runs[0][0]
    assert all(c == cycles for c, _ in runs), f"cycle counts differ between runs: {runs}"
    wall = statistics.median(w for _, w in runs)
    dut._log.info("%d cycles, median %.3f s: %.0f cycles/s", cycles, wall, cycles / wall)
    write_report(spec, {"cycles": cycles, "seconds": wall, "cycles_per_second": cycles / wall,
                        "walls": [w for _, w in runs]})
