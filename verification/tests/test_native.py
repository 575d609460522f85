"""The native run path (sim/native.py): programs run on the Verilated chip with a C++ host and
HBM device give what the cocotb run of the same program gives (``verilator`` backend, flow
none_none), cycle for cycle: cycle counts, counters, registers, semaphores, outputs and the
HBM command trace, which the golden device model checks after the run.

The chip is the default one, which the regression builds for cocotb anyway (test_chip,
test_tools); the native build of the same Verilog adds one Verilator run and one C++ compile
(72 CPU seconds, docs/results/simspeed.md)."""

import json
import random

import numpy as np
import pytest

from podium import compiler
from podium.asm import assemble
from podium.program import Program
from podium.runner import run
from podium.workloads import digits
from sim import native, programs  # noqa: F401  (programs: registers both RTL backends)
from spec.chip import ChipConfig
from spec.isa import SEM_NONE, Error, Op, encode
from spec.tensorcore import TensorCoreConfig
from verification.models import ecc
from verification.models.hbm import (
    HBMDeviceModel,
    Violation,
    backdoor_dump,
    backdoor_write,
    replay,
)

TIMING_KEYS = ("build_seconds", "setup_seconds", "run_seconds", "run_cpu_seconds",
               "check_seconds", "simulated_cycles", "hbm_commands", "model_share")


def _gemm_program(seed):
    """A small int8 GEMM (several tiles and K chunks) and seeded random inputs."""
    config = TensorCoreConfig()
    rng = np.random.default_rng(seed)
    program = compiler.gemm(config, 40, 72, 24)
    inputs = {name: rng.integers(-128, 128, t.shape).astype(np.int8)
              for name, t in program.inputs.items()}
    return program, inputs


def _digits_program(seed):
    return digits.compile_digits(TensorCoreConfig(), digits.load(), "int8"), {}


PROGRAMS = {"digits": _digits_program, "gemm": _gemm_program}


def _both(program, inputs, directory, **options):
    """The program run on the cocotb path and on the native path: ``[(result, outputs,
    trace text), ...]``."""
    out = []
    for backend in ("verilator", "native"):
        trace = directory / f"{backend}.trace"
        result, outputs = run(program, inputs, sim=backend, trace=trace, **options)
        out.append((result, outputs, trace.read_text()))
    return out


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_native_run_is_the_cocotb_run(tmp_path, seed, name):
    """Same status, cycles, counters, registers, semaphores, outputs and HBM command trace on
    both paths; the outputs are right (the digits' classes are numpy's, the GEMM's product is
    the reference's)."""
    program, inputs = PROGRAMS[name](seed)
    (ref, ref_out, ref_trace), (nat, nat_out, nat_trace) = _both(program, inputs, tmp_path)
    assert ref.status == nat.status == "done", (ref, nat)
    assert nat.steps == ref.steps > 0
    strip = {k: v for k, v in nat.counters.items() if k not in TIMING_KEYS}
    assert strip == {k: v for k, v in ref.counters.items() if k not in TIMING_KEYS}
    assert (nat.registers, nat.semaphores, nat.error, nat.error_pc) == (
        ref.registers, ref.semaphores, ref.error, ref.error_pc)
    assert sorted(nat_out) == sorted(ref_out) == sorted(program.outputs)
    for key in ref_out:
        assert np.array_equal(nat_out[key], ref_out[key]), key
    lines = nat_trace.splitlines()
    assert nat.counters["hbm_commands"] == len(lines) > 100
    assert 0 < nat.counters["model_share"] <= 1, nat.counters   # timed cycles: of the model
    assert nat.counters["run_cpu_seconds"] > 0 and ref.counters["run_cpu_seconds"] > 0
    assert nat_trace == ref_trace, next(
        (i, a, b) for i, (a, b) in enumerate(zip(nat_trace.splitlines(),
                                                 ref_trace.splitlines(), strict=False))
        if a != b) if nat_trace != ref_trace else None
    if name == "digits":
        classes = np.argmax(nat_out["Y"], axis=1)
        assert np.array_equal(classes, program.metadata["classes"])
    else:
        want = compiler.gemm_reference(program.config, inputs["A"], inputs["B"])
        assert np.array_equal(compiler.result_bits(program.config, nat_out["C"]), want)


def test_a_timeout_is_the_cocotb_timeout(tmp_path):
    """A program that never ends (``loop: jmp loop``), stopped after two refresh intervals:
    aborted at the same cycle, with the same counters, registers and HBM trace (refreshes
    only) on both paths."""
    config = TensorCoreConfig()
    chip = ChipConfig(tensorcore=config)
    program = Program(assemble("loop: jmp loop\n"), config, chip.hbm.capacity)
    budget = 2 * chip.hbm.timing.refi
    (ref, _, ref_trace), (nat, _, nat_trace) = _both(program, {}, tmp_path, max_steps=budget)
    assert ref.status == nat.status == "timeout" and ref.error == nat.error
    assert budget <= nat.steps == ref.steps < budget + 100
    assert {k: v for k, v in nat.counters.items() if k not in TIMING_KEYS} == {
        k: v for k, v in ref.counters.items() if k not in TIMING_KEYS}
    assert nat.registers == ref.registers
    assert nat_trace == ref_trace and nat_trace.count(" REF") > 0


def test_an_error_is_the_cocotb_error(tmp_path):
    """A DMA load past the HBM's capacity (answered DECERR): the run stops with DMA_RESPONSE
    at that instruction, with the same cycle, counters, registers and HBM trace on both
    paths."""
    config = TensorCoreConfig()
    chip = ChipConfig(tensorcore=config)
    past, beat = chip.hbm.capacity, config.beat_bytes
    words = [encode(Op.LI, a=1, imm32=past & 0xFFFFFFFF), encode(Op.LI, a=2, imm32=4 * beat),
             encode(Op.DMA_SHAPE, dim=0, b=2), encode(Op.DMA_LOAD, b=1, c=0, sem=SEM_NONE),
             encode(Op.HALT)]
    program = Program(words, config, chip.hbm.capacity)
    (ref, _, ref_trace), (nat, _, nat_trace) = _both(program, {}, tmp_path)
    assert ref.status == nat.status == "error"
    assert ref.error == nat.error == Error.DMA_RESPONSE and nat.error_pc == ref.error_pc == 3
    assert nat.steps == ref.steps > 0
    assert {k: v for k, v in nat.counters.items() if k not in TIMING_KEYS} == {
        k: v for k, v in ref.counters.items() if k not in TIMING_KEYS}
    assert nat.registers == ref.registers and nat_trace == ref_trace


@pytest.mark.slow
def test_native_on_the_benchmark_chip(tmp_path, seed):
    """The 16 x 16 bfloat16 benchmark chip (512 KiB of VMEM, the HBM controller's benchmark
    configuration), the kind of chip long workloads run on: a bfloat16 GEMM gives the same
    cycles, counters, outputs and HBM trace on both paths, and the MXU golden model's bits.
    Slow: both builds of that chip take about 10 CPU minutes."""
    from podium.program import DTYPES
    from sim.tensorcore_perf import bench_chip

    chip = bench_chip("bfloat16")
    tc = chip.tensorcore
    program = compiler.gemm(tc, 96, 128, 80)
    rng = np.random.default_rng(seed)
    inputs = {k: rng.standard_normal(t.shape).astype(DTYPES[t.dtype])
              for k, t in program.inputs.items()}
    (ref, ref_out, ref_trace), (nat, nat_out, nat_trace) = _both(program, inputs, tmp_path,
                                                                 chip=chip)
    assert ref.status == nat.status == "done" and nat.steps == ref.steps > 0
    assert {k: v for k, v in nat.counters.items() if k not in TIMING_KEYS} == {
        k: v for k, v in ref.counters.items() if k not in TIMING_KEYS}
    assert np.array_equal(nat_out["C"], ref_out["C"])
    assert nat_trace == ref_trace and len(nat_trace.splitlines()) > 100
    want = compiler.gemm_reference(tc, inputs["A"], inputs["B"])
    assert np.array_equal(compiler.result_bits(tc, nat_out["C"]), want)


def _model(chip=None):
    hbm = (chip or ChipConfig()).hbm
    return HBMDeviceModel(hbm.timing, hbm.pseudo_channels, hbm.bank_groups,
                          hbm.banks_per_group, per_channel=hbm.pcs_per_channel,
                          words=hbm.words, check_refresh=hbm.refresh), hbm


def test_the_trace_check_catches_broken_rules(tmp_path, seed):
    """The replay of a native run's trace passes, and fails when a command is moved a cycle
    earlier than its timing allows (a RD right after its ACT), when the refreshes are dropped
    (refresh overdue) or when a command goes to a closed bank."""
    program, inputs = _gemm_program(seed)
    result, _ = run(program, inputs, sim="native", trace=tmp_path / "t.trace")
    assert result.status == "done"
    trace = (tmp_path / "t.trace").read_text().splitlines()
    model, _ = _model()
    last = int(trace[-1].split()[0])
    assert replay(model, trace, last) == len(trace)
    act = next(i for i, line in enumerate(trace) if line.split()[3] == "ACT")
    rd = next(i for i in range(act + 1, len(trace)) if trace[i].split()[3] in ("RD", "RDA")
              and trace[i].split()[1:3] == trace[act].split()[1:3]
              and trace[i].split()[4] == trace[act].split()[4])
    early = trace[:act + 1] + [" ".join([str(int(trace[act].split()[0]) + 1),
                                         *trace[rd].split()[1:]])]
    with pytest.raises(Violation, match="tRCD"):
        replay(_model()[0], early, last)
    refreshes = [line for line in trace if line.split()[3] in ("REF", "REFSB")]
    assert refreshes, "no refresh in the trace"
    no_refresh = [line for line in trace if line.split()[3] not in ("REF", "REFSB")]
    with pytest.raises(Violation, match="refresh"):
        replay(_model()[0], no_refresh, last + 10 * ChipConfig().hbm.timing.refi)
    closed = [trace[rd]]
    with pytest.raises(Violation, match="closed"):
        replay(_model()[0], closed, last)


def test_native_refusals():
    """A pausing flow, another TensorCore than the program's and max_steps below 1 are
    refused with one line naming what is allowed."""
    config = TensorCoreConfig()
    program = Program(assemble("halt\n"), config, ChipConfig(tensorcore=config).hbm.capacity)
    with pytest.raises(ValueError, match="flow must be none_none"):
        native.native(program, {}, flow="random_random")
    other = ChipConfig(tensorcore=TensorCoreConfig(vmem_bytes=2 * 65536))
    with pytest.raises(ValueError, match="TensorCore configuration differs"):
        native.native(program, {}, chip=other)
    with pytest.raises(ValueError, match="max_steps must be at least 1"):
        native.native(program, {}, max_steps=0)


def test_check_bits_are_the_codewords(seed):
    """The backdoor's vectorised ECC (``ecc.check_bits``) gives each word's check bits as
    ``ecc.encode`` does, on seeded random words and the corners."""
    rng = np.random.default_rng(seed)
    words = [int(w) for w in rng.integers(0, 2**63, 5000, dtype=np.uint64) * 2 + 1]
    words += [0, 1, 2**63, 2**64 - 1]
    got = ecc.check_bits(np.array(words, dtype=np.uint64)).tolist()
    assert got == [ecc.encode(w) >> 64 for w in words]
    assert len(set(got)) > 100


def test_backdoor_dump_checks_every_word(seed):
    """The backdoor's read-back (``backdoor_dump``: every word's check bits compared at once)
    gives back the bytes loaded at any offset and length, zeros where nothing was written,
    and refuses a codeword with a flipped bit (data or check bit), naming its access."""
    model, hbm = _model()
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, 16 * hbm.access_bytes, dtype=np.uint8).tobytes()
    base = 64 * hbm.access_bytes
    backdoor_write(model, hbm, base, data)
    assert backdoor_dump(model, hbm, base + 5, len(data) - 9) == data[5:-4]
    assert backdoor_dump(model, hbm, 0, 100) == bytes(100)
    for bit in (3, 70):
        model, _ = _model()
        backdoor_write(model, hbm, base, data)
        at = base + 7 * hbm.access_bytes
        pc, bank, row, col = hbm.decode(at)
        model.pc[pc].mem[(bank, row, col)][1] ^= 1 << bit
        with pytest.raises(AssertionError, match=f"ECC error in the device at {at:#x}"):
            backdoor_dump(model, hbm, base, len(data))


POD_COLLECTIVES = """
    li r1, 4096
    dma.shape 0, r1, r0, r0
    dma.load r0, r0, s3
    wait ici, s3
    li r1, 0
    li r2, 300
    ici.coll all_reduce_2d, 0, fp32, r1, r2
    li r1, 1280
    li r2, 200
    ici.coll all_reduce, 1, int32, r1, r2
    li r1, 2112
    li r2, 150
    ici.coll all_reduce, 0, fp32, r1, r2
    signal ici, s2
    wait dma, s2
    li r1, 4096
    dma.shape 0, r1, r0, r0
    li r2, 32768
    dma.store r2, r0, s4
    wait dma, s4
    halt
"""
"""Every chip's program of the pod test: 4 KiB of its HBM into VMEM, a 2-D fp32 all-reduce,
an int32 all-reduce along dimension 1 and an fp32 one along dimension 0, back to HBM at
32 KiB."""


@pytest.mark.slow
def test_native_pod_run_is_the_cocotb_run(tmp_path, seed):
    """A collective program on the 2x2 pod of TensorCores with HBM controllers (the pod tests'
    "2x2-tc-hbm"), run natively (sim/pod_native.py) and through cocotb: every chip's status,
    cycles, counters, registers, semaphores, HBM output and HBM command trace the same on both
    paths, the cycles the host simulated too, and the outputs the golden pod simulator's.
    Slow: the pod's cocotb build (which only the slow pod tests share) takes 4.4 CPU minutes
    and its native build (the ``hier`` flavour) 2.7 (docs/results/podspeed.md)."""
    from podium.podsim import PodSim
    from sim.pod_native import cocotb_pod, native_pod
    from verification.models.collectives import random_elements
    from verification.tests.test_pod import PROGRAM_CONFIGS

    pod = PROGRAM_CONFIGS["2x2-tc-hbm"]
    words = assemble(POD_COLLECTIVES)
    rng, elements = np.random.default_rng(seed), random.Random(seed)
    images = []
    for _ in range(pod.chips):
        data = bytearray(random_elements(elements, "fp32", 1024))
        data[1280:2080] = rng.integers(-1 << 20, 1 << 20, 200, dtype=np.int32).tobytes()
        images.append({0: bytes(data)})
    reads = [[(32768, 4096)]] * pod.chips
    runs = {name: fn(pod, [words] * pod.chips, images, reads=reads, traces=tmp_path / name)
            for name, fn in (("cocotb", cocotb_pod), ("native", native_pod))}
    ref, nat = runs["cocotb"], runs["native"]
    print(f"cycles: cocotb {ref.cycles} in {ref.seconds:.1f} s, native {nat.cycles} in "
          f"{nat.seconds:.2f} s")
    golden = PodSim(pod, seed=int(rng.integers(1 << 30)), hbm_capacity=1 << 16)
    for chip, image in zip(golden.chips, images, strict=True):
        chip.load(words)
        chip.hbm.write(0, image[0])
    want = golden.run()
    for n, (a, b, g) in enumerate(zip(ref.results, nat.results, want, strict=True)):
        assert a.status == b.status == g.status == "done", (n, a, b, g)
        assert b.steps == a.steps > 0 and b.counters == a.counters, n
        assert (b.registers, b.semaphores) == (a.registers, a.semaphores) == (
            g.registers, g.semaphores), n
        out = b.hbm.read(32768, 4096)
        assert out == a.hbm.read(32768, 4096), f"chip {n}: outputs differ"
        assert out == bytes(g.hbm.data[32768:32768 + 4096]), f"chip {n}: not the golden output"
        trace = (tmp_path / "native" / f"chip{n}.trace").read_text()
        assert len(trace.splitlines()) > 50, n
        assert trace == (tmp_path / "cocotb" / f"chip{n}.trace").read_text(), n
    assert nat.cycles == ref.cycles > 0


@pytest.mark.slow
def test_a_pod_timeout_is_the_cocotb_timeout(tmp_path):
    """Three chips of the 2x2 pod loop forever and one halts, stopped after two refresh
    intervals: the looping chips aborted at the same cycle (status timeout), the halted one
    done, with the same counters, registers and HBM traces (refreshes only) on both paths."""
    from sim.pod_native import cocotb_pod, native_pod
    from verification.tests.test_pod import PROGRAM_CONFIGS

    pod = PROGRAM_CONFIGS["2x2-tc-hbm"]
    budget = 2 * pod.chip.hbm.timing.refi
    words = [assemble("loop: jmp loop\n")] * 3 + [assemble("halt\n")]
    ref, nat = (fn(pod, words, [{}] * pod.chips, max_steps=budget, traces=tmp_path / name)
                for name, fn in (("cocotb", cocotb_pod), ("native", native_pod)))
    assert nat.cycles == ref.cycles > budget
    for n, (a, b) in enumerate(zip(ref.results, nat.results, strict=True)):
        assert a.status == b.status == ("done" if n == 3 else "timeout"), (n, a, b)
        assert (b.steps, b.counters, b.registers) == (a.steps, a.counters, a.registers), n
        trace = (tmp_path / "native" / f"chip{n}.trace").read_text()
        assert trace == (tmp_path / "cocotb" / f"chip{n}.trace").read_text(), n
        assert trace.count(" REF") > 0, n
    assert budget <= ref.results[0].steps < budget + 100


def test_spec_lines_carry_a_long_program():
    """The host's writes of a long program (a 4,096-word program of large words is about
    250 KiB of ``load`` values) go as several lines of one key, which the C++ reader adds up:
    every line under the reader's 64 KiB, the values in order. (One line truncated programs
    past about 3,100 words; the reader now refuses a longer line instead.)"""
    rng = random.Random(7)
    print("seed 7")
    words = [rng.getrandbits(64) for _ in range(4096)]
    writes = [v for w in native.program_writes(0, words, 0x8000) for v in w]
    text = native.spec_lines("load", writes)
    lines = text.splitlines(keepends=True)
    assert len(lines) > 1 and all(len(ln.encode()) < 1 << 16 for ln in lines)
    values = []
    for ln in lines:
        key, *rest = ln.split()
        assert key == "load"
        values += [int(v) for v in rest]
    assert values == writes
    assert native.spec_lines("load", []) == "load \n"


@pytest.mark.slow
def test_podium_run_on_the_native_pod_is_the_golden_pod(tmp_path, seed):
    """``podium run --pod 2x2 --sim native`` of an all-reduce program (the pod tests'
    "2x2-tc-hbm" pod, whose native build the pod tests above share) on seeded random fp32
    inputs, one per chip: every chip done, and its output bit for bit the golden pod
    simulator's (``--sim golden``), which models the collective's order of sums."""
    from podium.tools import _pod
    from verification.tb.pod_programs import tensor_pod_config
    from verification.tests.test_tools import pod_program, podium

    program = pod_program()
    assert _pod("2x2", "ar.json", program.config) == tensor_pod_config((2, 2), memory="hbm")
    program.save(tmp_path / "ar.json")
    x = np.random.default_rng(seed).standard_normal((4, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    reports = {}
    for sim in ("golden", "native"):
        r = podium("run", "ar.json", "--pod", "2x2", "--sim", sim, "--input", "X=x.npy",
                   "--outputs", sim, "--json", cwd=tmp_path, timeout=3600)
        assert r.returncode == 0, r.stderr
        reports[sim] = json.loads(r.stdout)
    assert [c["status"] for c in reports["native"]["chip"]] == ["done"] * 4
    print(f"cycles: {[c['cycles'] for c in reports['native']['chip']]}")
    for k in range(4):
        native, golden = (np.load(tmp_path / sim / f"Y.chip{k}.npy")
                          for sim in ("native", "golden"))
        assert native.tobytes() == golden.tobytes(), f"chip {k}"
    assert np.any(golden != 0)


def test_build_flavours_mark_their_hier_blocks():
    """``hier`` marks the pod's chip module a Verilator hier_block, ``nodes`` the chip's and
    the router's (one module for every node), each once, right after its header; a design
    without the module is refused naming it. (The builds themselves: the slow pod tests and
    docs/pod.md's measurements.)"""
    from hdl.generate import Design
    from sim.pod_native import chip_hier_block, node_hier_blocks
    from sim.runner import HIER_BLOCK
    from verification.tb.pod_programs import tensor_pod_config

    pod = tensor_pod_config((2, 2), memory="hbm")
    router = f"podium_ici_router_{pod.ici.suffix}"
    top = "podium_pod_x"
    verilog = "".join(f"module {m}(a, b);\n  input a;\nendmodule\n"
                      for m in (router, f"{top}_chip", f"{top}_chip_helper", top))
    design = Design("pod", top, verilog, {})
    chip = chip_hier_block(design).verilog
    assert chip.count(HIER_BLOCK) == 1
    assert f"module {top}_chip(a, b);\n  {HIER_BLOCK}\n" in chip
    nodes = node_hier_blocks(design, pod).verilog
    assert nodes.count(HIER_BLOCK) == 2
    assert f"module {router}(a, b);\n  {HIER_BLOCK}\n" in nodes
    with pytest.raises(ValueError, match=f"no module {router}"):
        node_hier_blocks(Design("pod", top, verilog.replace(router, "other"), {}), pod)
