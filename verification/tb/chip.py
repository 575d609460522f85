"""cocotb testbench of the chip: the TensorCore's programs run against the HBM controller, with
the golden HBM device model on every pseudo-channel (verification/tb/hbm.py) checking each
command; operands go into HBM and results come out through the device model's backdoor
(through the controller's address map and ECC).
"""

import base64
import json

import cocotb

from podium.program import Program
from spec.chip import ChipConfig
from spec.isa import SEM_NONE, Error, Op, encode
from verification.tb import sparsecore as sparsecore_tb
from verification.tb.bench import (
    SHORT_FLOWS,
    measurement,
    new_rng,
    only_if,
    perf_spec,
    write_report,
)
from verification.tb.hbm import HBMBench
from verification.tb.packing import load_sidecar
from verification.tb.tensorcore import (
    TESTS,
    TensorCoreHost,
    check_error,
    cocotb_tests,
    dma_round_trip,
    li,
)

__all__ = ["ChipBench"]


class ChipBench:
    """The bench interface of verification/tb/tensorcore.py on the chip."""

    def __init__(self, dut, flow="random_random", trace=None):
        self.dut = dut
        sidecar = load_sidecar()
        self.chip = ChipConfig.from_dict(sidecar["parameters"])
        self.cfg = self.chip.tensorcore
        self.rng = new_rng()
        self.hbm = HBMBench(dut, flow, masters=False, trace=trace, config=self.chip.hbm,
                            prefix="hbm_ch", idle="hbm_idle")
        self.host = TensorCoreHost(dut, "csr", self.cfg, sidecar["csr"], flow)

    async def start(self):
        await self.hbm.start()

    def write_hbm(self, address, data):
        """Backdoor write of any bytes."""
        self.hbm.write_bytes(address, data)

    def read_hbm(self, address, length):
        """Backdoor read of the device: after :meth:`run`, which waits for the controller to
        write every posted write into it."""
        return self.hbm.dump(address, length)

    async def run(self, program, **kw):
        await self.host.load(program)
        out = await self.host.run(self.dut.running, **kw)
        # The controller answers a write when it is queued: the program's last stores may still
        # be in its write buffer when the TensorCore is done.
        await self.hbm.settle()
        assert self.hbm.error is None, str(self.hbm.error)
        return out


async def dma_error(tb):
    """A load and a store past the HBM's capacity are answered DECERR: the run stops with
    DMA_RESPONSE at that transfer, every burst is answered, and the chip runs the next
    program."""
    past = tb.chip.hbm.capacity
    for op in (Op.DMA_LOAD, Op.DMA_STORE):
        words = [li(1, past), li(2, 4 * tb.cfg.beat_bytes), encode(Op.DMA_SHAPE, dim=0, b=2),
                 encode(op, b=1, c=0, sem=SEM_NONE), encode(Op.HALT)]
        out = await check_error(tb, words, Error.DMA_RESPONSE, golden_pc=False)
        assert out.error_pc == 3, out


globals().update(cocotb_tests(ChipBench, [*TESTS, dma_error], SHORT_FLOWS, __name__))


@only_if(lambda params: params.get("sparsecore") is not None)
@cocotb.test()
async def test_sparsecore(dut):
    """The chip's SparseCore on HBM port 1: lookups with every combiner and scatters (the whole
    table compared) against the golden model, while the TensorCore's DMA shares the controller;
    then a TensorCore program still runs."""
    chip = ChipBench(dut, "random_random")
    await chip.start()
    sc = sparsecore_tb.SparseCoreBench(dut, "random_random", chip=chip)
    tc = cocotb.start_soon(dma_round_trip(chip))
    await sparsecore_tb.combiners(sc)
    await tc
    await sparsecore_tb.scatter_duplicates(sc)
    await dma_round_trip(chip)


@measurement
@cocotb.test()
async def run_program(dut):
    """Run a compiled program (``podium run --sim verilator``): the spec names the program
    file and an HBM image file and the ``budget`` in cycles (and ``hbm_trace``, a file for
    every HBM device command, optional); the report holds the outcome (``timeout``: still
    running after the budget, then aborted), every counter and the bytes of the program's
    outputs."""
    spec = perf_spec()
    program = Program.load(spec["program"])
    image = json.loads(open(spec["image"]).read())
    tb = ChipBench(dut, spec.get("flow", "none_none"), trace=spec.get("hbm_trace"))
    await tb.start()
    for entry in image:
        tb.write_hbm(entry["address"], base64.b64decode(entry["data"]))
    out = await tb.run(program.words, budget=spec["budget"], abort=True)
    outputs = {name: base64.b64encode(tb.read_hbm(t.address, t.nbytes)).decode()
               for name, t in program.outputs.items()}
    if tb.hbm.trace:
        tb.hbm.trace.flush()
    write_report(spec, {"done": out.done, "timeout": out.timed_out, "error": out.error.name,
                        "error_pc": out.error_pc, "registers": out.regs, "semaphores": out.sems,
                        "counters": out.counters, "outputs": outputs})
