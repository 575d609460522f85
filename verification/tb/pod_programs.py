"""cocotb testbench of a pod of program-running chips (hdl/pod/tensor_node.py; docs/pod.md,
"Programs on the pod"): every chip a TensorCore whose ICI queue sends, reads and runs
collectives.

Python is the host of every chip: it fills each chip's VMEM through its host port, loads
programs over AXI4-Lite (cocotbext-axi, with the flow's idle and backpressure), starts every
chip, waits for all of them and reads back status, registers, semaphores and VMEM; the golden
pod simulator (podium/podsim.py) runs the same programs on the same images, and everything is
compared (VMEM but the staging area after a bfloat16 reduction, which the golden model leaves
undefined).
"""

import base64

import cocotb
import numpy as np
from cocotb.triggers import ClockCycles, RisingEdge
from cocotb.utils import get_sim_time

from podium.asm import assemble
from podium.podsim import PodSim
from podium.spmd import data_parallel_step
from spec.chip import ChipConfig
from spec.collectives import all_to_all_table
from spec.hbm import HBMConfig
from spec.ici import ICIConfig
from spec.isa import Error
from spec.mxu import MXUConfig
from spec.nic import NICConfig
from spec.pod import PodConfig
from spec.protocol import LOCAL_PORTS
from spec.tensorcore import TensorCoreConfig
from verification.models.collectives import random_elements
from verification.tb import bench
from verification.tb.bench import FLOWS, measurement, new_rng, perf_spec, write_report
from verification.tb.packing import load_sidecar
from verification.tb.pod import HBM_BYTES, PERIOD_NS, PodHost
from verification.tb.tensorcore import ABORT_CYCLES, TensorCoreHost

__all__ = ["TensorPodBench", "TENSORCORE", "pod_config", "tensor_pod_config"]

def pod_config(dims, *, faults=False, memory="none", tensorcore=None, hbm=None, **ici):
    """The pod tests' pod of ``dims``: 2 classes of 2 VCs, 8-flit buffers, 128-bit flits and
    8-flit packets unless ``ici`` says otherwise; chips of ``tensorcore`` (None: simulation
    chips) with ``memory`` and ``hbm``; ``faults``: link fault injectors."""
    params = dict(classes=2, vcs=2, buffer_depth=8, flit_bits=128, max_packet=8,
                  local_ports=LOCAL_PORTS)
    params.update(ici)
    nic = NICConfig(ici=ICIConfig(dims=dims, **params))
    return PodConfig(chip=ChipConfig(tensorcore=tensorcore, memory=memory, hbm=hbm or HBMConfig(),
                                     nic=nic),
                     faults=faults)


TENSORCORE = TensorCoreConfig(mxu=MXUConfig(rows=4, cols=4), vmem_bytes=32768, row_bytes=32,
                              deadlock_cycles=1 << 16, ici=True, vmath=False)
"""The program-running chips' TensorCore: a 4x4 int8 MXU, 32 KiB of VMEM in rows of a flit
(256 bits), a deadlock watch long enough for a neighbour's work, no transcendental unit
(eight per chip would make the pods' builds and runs slower for programs that never use
them; the TensorCore and chip tests run the unit)."""


def tensor_pod_config(dims, memory="none"):
    """A pod of :data:`TENSORCORE` chips with 256-bit flits; ``memory`` "hbm": each chip's
    HBM controller with two AXI4 ports (the DMA's and the network interface's)."""
    hbm = HBMConfig(ports=2) if memory == "hbm" else HBMConfig()
    return pod_config(dims, flit_bits=256, memory=memory, tensorcore=TENSORCORE, hbm=hbm)


ARRIVE, READ, DONE = 0, 1, 2
"""Semaphores of the test programs: messages landed here, reads landed here, the ICI idle."""
SETTLE = 400
"""Cycles the host waits after every chip is done before it reads VMEM back, for messages
that signal nothing (``sem none``) to land."""


class TensorPodBench(PodHost):
    """The host of every chip: VMEM through the host port, programs and status over
    AXI4-Lite."""

    def __init__(self, dut, test=0):
        """Chip ``c`` of the module's test number ``test`` runs flow ``FLOWS[(test x chips + c)
        mod 6]`` on every stream it has (host port, AXI4-Lite, the HBM's AXI4 ports), so the
        tests of a pod of four chips together run every flow on every stream."""
        self.flows = chip_flows(test, PodConfig.from_dict(load_sidecar()["parameters"]).chips)
        super().__init__(dut, memory_flows=self.flows)
        self.tc = self.cfg.tensorcore
        self.hosts = [TensorCoreHost(dut, f"csr__{c}", self.tc, self.sidecar["csr"], flow)
                      for c, flow in enumerate(self.flows)]
        for c, flow in enumerate(self.flows):
            self.flow(flow, [c])
        dut._log.info(f"flows, chip by chip: {', '.join(self.flows)}")

    async def run(self, programs, images, *, hbm_images=None, budget=200_000, seed=None):
        """Run ``programs`` (assembly, one per chip) on VMEM ``images`` (bytes, one per chip)
        and, with ``hbm``, HBM ``hbm_images`` (zeros by default); returns ``(outcomes,
        vmems)`` of the RTL and ``results`` of the golden pod simulator on the same input
        (``seed``: its schedule); ``golden_errors`` is then the simulator's error count (all
        chips)."""
        words = [assemble(p) for p in programs]
        hbm_images = hbm_images or [bytes(HBM_BYTES)] * len(self.hbm)
        for c, image in enumerate(images):
            self.write(c, 0, image)
        for ram, image in zip(self.hbm, hbm_images, strict=True):
            ram.write(0, image.ljust(HBM_BYTES, b"\0"))
        await self.drained()
        for host, w in zip(self.hosts, words, strict=True):
            await host.load(w)
        for host in self.hosts:     # every chip cleared before any starts: a message that
            await host.clear()      # lands before its chip's start keeps its semaphore signal
            await host.write(host.reg["START_PC"], 0)
        for host in self.hosts:
            await host.write(host.reg["CONTROL"], 1)
        for _ in range(budget):
            await RisingEdge(self.dut.clk)
            if not any(int(getattr(self.dut, f"running__{c}").value)
                       for c in range(self.chips)):
                break
        else:
            raise AssertionError(f"a chip is still running after {budget} cycles")
        await ClockCycles(self.dut.clk, SETTLE)
        await self.settle_hbm()
        outcomes = [await host.outcome() for host in self.hosts]
        vmems = [await self.read(c, 0, self.tc.vmem_bytes) for c in range(self.chips)]
        sim = PodSim(self.cfg, seed=seed, hbm_capacity=self.hbm_capacity)
        for chip, w, image in zip(sim.chips, words, images, strict=True):
            chip.load(w)
            chip.vmem[:len(image)] = np.frombuffer(image, np.uint8)
        for chip, image in zip(sim.chips[:len(hbm_images)], hbm_images, strict=True):
            chip.hbm.write(0, image)
        results = sim.run()
        self.golden_errors = sum(sim.errors)
        return outcomes, vmems, results

    def check(self, outcomes, vmems, results):
        """Every chip as the golden simulator left it: done or the same error at the same PC;
        when done, the same registers and semaphores and the same VMEM (and HBM) but where
        the golden model leaves it undefined (after an error only the code and PC are exact:
        docs/tensorcore.md, "Errors")."""
        for c, (out, vmem, res) in enumerate(zip(outcomes, vmems, results, strict=True)):
            assert (out.done, out.error, out.error_pc if out.error != Error.NONE else 0) == (
                res.status == "done", res.error,
                res.error_pc if res.error != Error.NONE else 0), (c, out, res)
            if res.status != "done":
                continue
            assert out.regs == res.registers, f"chip {c}: registers"
            assert out.sems == res.semaphores, f"chip {c}: semaphores {out.sems}"
            _compare(f"chip {c}: VMEM", vmem, res.vmem, res.undefined)
            if self.hbm:
                _compare(f"chip {c}: HBM", self.hbm[c].read(0, HBM_BYTES),
                         res.hbm.data[:HBM_BYTES], res.hbm_undefined)


def _compare(what, got, want, undefined):
    """``got`` (bytes) is ``want`` (a uint8 array) but in the ``undefined`` ranges."""
    got, want = bytearray(got), bytearray(want.tobytes())
    for start, end in undefined:
        got[start:end] = want[start:end]
    if got != want:
        bad = next(i for i in range(len(got)) if got[i] != want[i])
        raise AssertionError(f"{what} differs from byte {bad:#x}")


def _li(reg, value):
    return f"li r{reg}, {value & 0xFFFFFFFF}"


TESTS = ("test_program_messages", "test_program_hbm", "test_program_collectives",
         "test_program_errors", "test_training_step")
"""The module's tests in order: a test's number picks its chips' flows (TensorPodBench)."""


def chip_flows(test, chips):
    """The flow of each chip in the module's test number ``test``: the flows in turn."""
    return [FLOWS[(test * chips + c) % len(FLOWS)] for c in range(chips)]


async def _started(dut, test):
    tb = TensorPodBench(dut, TESTS.index(test))
    await tb.start()
    return tb, new_rng()


@cocotb.test()
async def test_program_messages(dut):
    """Random programs of ``ici.send`` (stores, int32 and fp32 adds, 0 bytes to several
    packets, partial rows, to every chip and to itself, signalling the destination or not)
    and ``ici.read`` (into this chip, signalling it), each message with a landing slot of its
    own, every chip waiting for its arrivals: VMEM, semaphores and registers of every chip as
    the golden pod simulator's."""
    tb, rng = await _started(dut, "test_program_messages")
    chips, slot, size_max = tb.chips, 256, 256
    source, landing = 0, 4096
    images = [random_elements(rng, "fp32", tb.tc.vmem_bytes // 4) for _ in range(chips)]
    programs = [[] for _ in range(chips)]
    arrivals, reads = [0] * chips, [0] * chips
    for k in range(6 * chips):
        src, dst = rng.randrange(chips), rng.randrange(chips)
        size = rng.choice([0, 4, 32, 100, 164, size_max])
        at = landing + k * slot
        if rng.random() < 0.25:
            programs[src] += [_li(1, at), _li(2, source + rng.randrange(8) * 32), _li(3, size),
                              f"ici.read r1, r2, r3, {dst}, s{READ}"]
            reads[src] += 1
            continue
        op = rng.choice(["store", "add", "add_final"])
        if op != "store":
            size -= size % 4
        signal = rng.random() < 0.8
        programs[src] += [_li(1, source + rng.randrange(8) * 32), _li(2, at), _li(3, size),
                          f"ici.send r1, r2, r3, {dst}, {op}, {rng.choice(['int32', 'fp32'])}, "
                          f"{f's{ARRIVE}' if signal else 'none'}"]
        arrivals[dst] += signal
    texts = ["\n".join(p + [f"wait dma, s{ARRIVE}"] * arrivals[c] + [f"wait dma, s{READ}"]
                       * reads[c] + ["halt"]) for c, p in enumerate(programs)]
    outcomes, vmems, results = await tb.run(texts, images, seed=rng.getrandbits(32))
    tb.check(outcomes, vmems, results)
    assert all(o.done for o in outcomes), outcomes
    assert sum(o.counters["arrivals"] for o in outcomes) == sum(arrivals) + sum(reads)


@cocotb.test()
async def test_program_hbm(dut):
    """Every chip's program moves data between the VMEMs and HBMs of the pod: with ``hbm`` it
    loads a block of its HBM into VMEM by DMA, then (the ICI queue waiting for the load)
    sends and reads messages from and to VMEM or HBM of any chip, each landing in a slot of
    its own and signalling, and once they have all landed stores the VMEM slots to HBM by
    DMA: every chip's VMEM and HBM, registers and semaphores as the golden pod simulator's.
    Without ``hbm`` the same messages (stores and reads) touch HBM that is not there: counted
    in ``errors`` as the golden simulator counts them (a flit each), zeros read."""
    tb, rng = await _started(dut, "test_program_hbm")
    chips, slot, hbm = tb.chips, 256, tb.cfg.chip.has_hbm
    images = [random_elements(rng, "fp32", tb.tc.vmem_bytes // 4) for _ in range(chips)]
    hbm_images = [random_elements(rng, "fp32", HBM_BYTES // 4) for _ in range(chips)] \
        if hbm else None
    # Slots land at 4 KiB in VMEM and 8 KiB in HBM; sends read VMEM or HBM below 4 KiB, reads
    # the other chip's bytes that do not change: VMEM 2..4 KiB (below 2 KiB the DMA loads),
    # HBM below 4 KiB. The DMA stores the VMEM slots to HBM at 32 KiB.
    landing = {"vmem": 4096, "hbm": 8192}
    programs = [[] for _ in range(chips)]
    if hbm:
        programs = [[_li(1, 2048), "dma.shape 0, r1, r0, r0", "dma.load r0, r0, s3",
                     "wait ici, s3"] for _ in range(chips)]
    arrivals, reads = [0] * chips, [0] * chips
    for k in range(6 * chips):
        src, dst = rng.randrange(chips), rng.randrange(chips)
        lspace, rspace = rng.choice(["vmem", "hbm"]), rng.choice(["vmem", "hbm"])
        size = rng.choice([0, 4, 32, 100, 164, slot])
        spaces = f"lspace={lspace}, rspace={rspace}"
        if rng.random() < 0.25:
            source = rng.randrange(64 if rspace == "vmem" else 0, 128) * 32
            programs[src] += [_li(1, landing[lspace] + k * slot), _li(2, source), _li(3, size),
                              f"ici.read r1, r2, r3, {dst}, s{READ}, {spaces}"]
            reads[src] += 1
            continue
        op = rng.choice(["store", "add", "add_final"]) if hbm else "store"
        if op != "store":
            size -= size % 4
        programs[src] += [_li(1, rng.randrange(128) * 32), _li(2, landing[rspace] + k * slot),
                          _li(3, size), f"ici.send r1, r2, r3, {dst}, {op}, "
                                        f"{rng.choice(['int32', 'fp32'])}, s{ARRIVE}, {spaces}"]
        arrivals[dst] += 1
    store = [_li(1, 4096), "dma.shape 0, r1, r0, r0", _li(2, 0x8000), _li(3, 4096),
             "dma.store r2, r3, s4", "wait dma, s4"] if hbm else []
    texts = ["\n".join(p + [f"wait dma, s{ARRIVE}"] * arrivals[c] + [f"wait dma, s{READ}"]
                       * reads[c] + store + ["halt"]) for c, p in enumerate(programs)]
    before = int(dut.errors.value)
    outcomes, vmems, results = await tb.run(texts, images, hbm_images=hbm_images,
                                            seed=rng.getrandbits(32))
    tb.check(outcomes, vmems, results)
    assert all(o.done for o in outcomes), outcomes
    assert int(dut.errors.value) - before == tb.golden_errors
    assert (tb.golden_errors == 0) == hbm, tb.golden_errors


def _collective_programs(tb, rng):
    """SPMD collectives on buffers of one chip's VMEM: (program, images)."""
    chips, fb = tb.chips, tb.fb
    dims = [d for d, k in enumerate(tb.ici.dims) if k > 1]
    lengths = [1, 37, 2 * chips * tb.cfg.nic.packet_bytes // 4 + 5]
    steps, images = [], [bytearray(tb.tc.vmem_bytes) for _ in range(chips)]
    address = 0
    cases = [(op, dim, fmt) for dim in dims for op in ("reduce_scatter", "all_gather",
                                                         "all_reduce")
             for fmt in ("int32", "fp32", "bf16")]
    if len(dims) == 2:
        cases += [("all_reduce_2d", 0, "fp32"), ("all_reduce_2d", 0, "int32"),
                  ("all_reduce_2d", 0, "bf16")]
    for op, dim, fmt in rng.sample(cases, min(len(cases), 6)):
        length = rng.choice(lengths)
        esize = 2 if fmt == "bf16" else 4
        for c in range(chips):
            data = random_elements(rng, "bfloat16" if fmt == "bf16" else fmt, length)
            images[c][address:address + len(data)] = data
        # Back to back on one buffer (a reduce-scatter leaves the rest of it undefined).
        repeat = 2 if rng.random() < 0.4 and op != "reduce_scatter" else 1
        steps += [_li(1, address), _li(2, length)] + [f"ici.coll {op}, {dim}, {fmt}, r1, r2"] \
            * repeat
        tb.dut._log.info(f"{op} x{repeat} dim {dim} {fmt} length {length} at {address:#x}")
        address += -(-length * esize // fb) * fb
    # A ragged all-to-all from per-chip tables: send buffers, receive buffers, tables.
    sizes = [[rng.choice([0, 3, 40, 200]) for _ in range(chips)] for _ in range(chips)]

    def rows(total):
        return -(-total // fb) * fb

    src_base = address
    dst_base = src_base + max(sum(rows(b) for b in row) for row in sizes)
    table_base = dst_base + max(sum(rows(sizes[s][d]) for s in range(chips))
                                for d in range(chips))
    tables, _ = all_to_all_table(sizes, fb, src_base, dst_base)
    for c in range(chips):
        for d, entry in enumerate(tables[c]):
            images[c][entry["src_address"]:entry["src_address"] + entry["bytes"]] = \
                rng.randbytes(entry["bytes"])
            row = table_base + d * fb
            images[c][row:row + 12] = np.array([entry["src_address"], entry["dst_address"],
                                                entry["bytes"]], np.uint32).tobytes()
    steps += [_li(1, table_base), _li(2, chips), "ici.coll all_to_all, 0, int32, r1, r2"]
    assert table_base + chips * fb <= tb.cfg.chip.staging_base, "the test's buffers overflow VMEM"
    program = "\n".join(steps + [f"signal ici, s{DONE}", f"wait dma, s{DONE}", "halt"])
    return program, [bytes(i) for i in images]


@cocotb.test()
async def test_program_collectives(dut):
    """SPMD programs of collectives: reduce-scatter, all-gather and all-reduce in int32, fp32
    and bfloat16 along every dimension (on a 2-D pod the 2-D all-reduce), some twice in a row
    on one buffer, then a ragged all-to-all, every chip starting when its host starts it:
    every chip's VMEM (but the bfloat16 staging area) as the golden pod simulator's."""
    tb, rng = await _started(dut, "test_program_collectives")
    program, images = _collective_programs(tb, rng)
    outcomes, vmems, results = await tb.run([program] * tb.chips, images,
                                            seed=rng.getrandbits(32))
    tb.check(outcomes, vmems, results)
    assert all(o.done for o in outcomes), outcomes


@cocotb.test()
async def test_program_errors(dut):
    """What a pod chip refuses stops its program with the code and PC the golden pod
    simulator gives, and the pod runs the next program: a message to a chip past the pod and
    one over ``max_message`` (ICI), a misaligned send (VMEM_RANGE), a collective along a
    dimension of one chip (ICI, on every chip), a DMA transfer with no HBM (DMA_RESPONSE) or,
    with HBM, from an address off the AXI beat (DMA_ALIGN)."""
    tb, rng = await _started(dut, "test_program_errors")
    image = [bytes(tb.tc.vmem_bytes)] * tb.chips
    long = tb.cfg.nic.max_message + tb.fb
    flat = len(tb.ici.dims)
    cases = [
        [_li(3, 64), f"ici.send r0, r0, r3, {tb.chips}, store, int32, none", "halt"],
        [_li(3, long), "ici.send r0, r0, r3, 0, store, int32, none", "halt"],
        [_li(1, 4), "ici.send r1, r0, r0, 0, store, int32, none", "halt"],
        [_li(2, 64), f"ici.coll all_reduce, {flat}, fp32, r0, r2", "halt"],
        [_li(1, 32), "dma.shape 0, r1, r0, r0", _li(2, 4 if tb.cfg.chip.has_hbm else 0),
         "dma.load r2, r0, s0", "halt"],
    ]
    for case in cases:
        victim = rng.randrange(tb.chips)
        programs = ["\n".join(case if c == victim or "ici.coll" in case[1] else ["halt"])
                    for c in range(tb.chips)]
        outcomes, vmems, results = await tb.run(programs, image, seed=rng.getrandbits(32))
        tb.check(outcomes, vmems, results)
        assert outcomes[victim].error != Error.NONE, (case, outcomes[victim])


@cocotb.test()
async def test_training_step(dut):
    """The data-parallel training step of a linear layer (podium/spmd.py): every chip's local
    gradient on its MXU, all-reduced over the pod, the weights updated on its VPU; every
    chip's VMEM as the golden pod simulator's, and (int8: exactly) the new weights
    ``W - sum over chips of X^T dY``, the same on every chip."""
    tb, rng = await _started(dut, "test_training_step")
    step = data_parallel_step(tb.cfg, d_in=16, batch=8, d_out=8)
    gen = np.random.default_rng(rng.getrandbits(32))
    xs = [gen.integers(-128, 128, (8, 16)) for _ in range(tb.chips)]
    dys = [gen.integers(-128, 128, (8, 8)) for _ in range(tb.chips)]
    w = gen.integers(-1 << 20, 1 << 20, (16, 8))
    images = []
    for x, dy in zip(xs, dys, strict=True):
        image = bytearray(tb.tc.vmem_bytes)
        for buffer, array in ((step.x_t, x.T), (step.dy, dy), (step.w, w)):
            address, data = buffer.pack(array)
            image[address:address + len(data)] = data
        images.append(bytes(image))
    outcomes, vmems, results = await tb.run([step.text] * tb.chips, images,
                                            seed=rng.getrandbits(32))
    tb.check(outcomes, vmems, results)
    want = w - sum(x.T @ dy for x, dy in zip(xs, dys, strict=True))
    for c, vmem in enumerate(vmems):
        assert (step.w.unpack(vmem) == want).all(), f"chip {c}: weights"
    assert all(o.counters["mxu_vectors"] > 0 for o in outcomes)


RESET_CYCLES = 4
"""``run_pod_program``'s reset (sim/native_main.cpp resets as long)."""


@measurement
@cocotb.test()
async def run_pod_program(dut):
    """Run one program per chip (sim/pod_native.py ``cocotb_pod``, the native pod path's
    reference) on a pod of TensorCores with HBM controllers: spec ``programs`` (instruction
    words per chip), ``images`` (per chip, ``[{address, data (base64)}]``, into its HBM through
    the device model's backdoor), ``reads`` (per chip, ``[[address, length], ...]``, read
    back the same way), ``budget`` (cycles; then every chip is aborted) and ``traces`` (a file
    per chip for its HBM commands, optional). Every stream without idle or backpressure, the
    host's operations one at a time: every chip's program, every chip cleared with its start
    PC, every chip started; then until no chip runs; every chip's outcome; every chip's HBM
    controller drained, chip after chip. The report holds each chip's outcome words,
    counters and reads, and the cycles from the reset's release to the end."""
    spec = perf_spec()
    tb = PodHost(dut, hbm_traces=spec.get("traces"))
    hosts = [TensorCoreHost(dut, f"csr__{c}", tb.cfg.tensorcore, tb.sidecar["csr"])
             for c in range(tb.chips)]
    tb.bench.quiesce()
    await bench.start(dut, reset_cycles=RESET_CYCLES)
    begin = get_sim_time("ns")
    for memory in tb.hbm:
        await memory.bench.start(clock=False)
    for memory, image in zip(tb.hbm, spec["images"], strict=True):
        for entry in image:
            memory.write(entry["address"], base64.b64decode(entry["data"]))
    for host, words in zip(hosts, spec["programs"], strict=True):
        await host.load(words)
    for host in hosts:
        await host.clear()
        await host.write(host.reg["START_PC"], 0)
    for host in hosts:
        await host.write(host.reg["CONTROL"], 1)

    def running():
        return any(int(getattr(dut, f"running__{c}").value) for c in range(tb.chips))

    async def wait(cycles):
        for _ in range(cycles):
            await RisingEdge(dut.clk)
            if not running():
                return True
        return False

    timeout = not await wait(spec["budget"])
    if timeout:
        for host in hosts:
            await host.write(host.reg["CONTROL"], 2)
        assert await wait(ABORT_CYCLES), f"still running {ABORT_CYCLES} cycles after the abort"
    chips = []
    for host in hosts:
        words = [await host.read(host.reg["STATUS"])]
        words += [await host.read(host.reg["REGS"] + 4 * r) for r in range(16)]
        words += [await host.read(host.reg["SEMS"] + 4 * s)
                  for s in range(tb.cfg.tensorcore.semaphores)]
        words += [await host.read(host.reg["COUNTERS"] + 4 * k)
                  for k in range(len(host.counter_names))]
        words += [await host.read(host.reg["ERROR"]), await host.read(host.reg["ERROR_PC"])]
        n_sems = tb.cfg.tensorcore.semaphores
        chips.append({"status": words[0], "registers": words[1:17],
                      "semaphores": words[17:17 + n_sems],
                      "counters": dict(zip(host.counter_names, words[17 + n_sems:-2],
                                           strict=True)),
                      "error": words[-2], "error_pc": words[-1]})
    await tb.settle_hbm()
    for chip, memory, reads in zip(chips, tb.hbm, spec["reads"], strict=True):
        assert memory.bench.error is None, str(memory.bench.error)
        chip["reads"] = [base64.b64encode(memory.read(a, n)).decode() for a, n in reads]
        if memory.bench.trace:
            memory.bench.trace.flush()
    write_report(spec, {"chips": chips, "timeout": timeout,
                        "cycles": round((get_sim_time("ns") - begin) / PERIOD_NS)})
