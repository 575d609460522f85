"""TensorCore measurements for ``make bench``: GEMMs from HBM on the chip against the roofline
and the analytic cycle model (podium/cycles.py), the cost of an MLP layer's epilogue, and tool
cost; writes docs/results/tensorcore.md and tensorcore.json.

Every run is a compiled program (podium/compiler.py) on the RTL chip in Verilator, the HBM
controller in its benchmark configuration behind the golden device model, its result checked
against the reference (numpy for int8, the MXU golden model's bits for bfloat16). The runs take
the native path (:data:`PATH`, sim/native.py: a C++ host and HBM device, the golden device
model checking the HBM command trace after the run), which gives the cocotb run's cycle counts,
counters and outputs exactly (verification/tests/test_native.py cross-checks them) at several
times its speed; every row of the JSON and the page names the path that produced it.
"""

import statistics
import time

import numpy as np

from hdl.generate import generate
from podium import compiler
from podium.cycles import gemm_cycles
from podium.program import DTYPES, Program
from podium.runner import run
from sim import programs  # noqa: F401  (registers the verilator and native backends)
from sim.hbm_perf import measured_rate
from sim.measure import (
    environment,
    environment_line,
    median_seconds,
    table,
    write_results,
)
from sim.native import build_native
from spec.chip import ChipConfig
from spec.hbm import BENCH_CONFIG
from spec.isa import Op
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig

__all__ = ["bench", "render", "bench_chip", "measure_gemm", "FIRST_BEAT", "PATH"]

PATH = "native"
"""The run path of every workload (podium/runner.py's backend): ``native`` runs the cocotb
path's cycles (``verilator``, flow none_none) with the golden checks kept, faster."""

FIRST_BEAT = 60
"""The model's first-beat latency of a DMA transfer, in cycles: AR through the controller's
port and queue, ACT (tRCD 14), RD (CL 14), ECC and the reorder buffer (docs/hbm.md); an
estimate from the design, not a fit."""


def bench_chip(fmt, rows=16):
    """The benchmark chip: a ``rows`` x ``rows`` MXU of ``fmt``, 512 KiB of VMEM in 8 banks,
    the HBM controller's benchmark configuration."""
    return ChipConfig(tensorcore=TensorCoreConfig(mxu=MXUConfig(rows=rows, cols=rows, fmt=fmt),
                                                  vmem_bytes=512 * 1024, row_bytes=4 * rows),
                      hbm=BENCH_CONFIG)


def _inputs(program, rng):
    return {name: (rng.integers(-128, 128, t.shape).astype(np.int8) if t.dtype == "int8"
                   else rng.standard_normal(t.shape).astype(DTYPES[t.dtype]))
            for name, t in program.inputs.items()}


def measure_gemm(chip, n, rng, bw, sim=PATH):
    """An n x n x n GEMM compiled for ``chip``'s TensorCore, inputs from ``rng``, run on the RTL
    chip on run path ``sim`` (``native`` or ``verilator``: the same cycles) and checked;
    cycles, utilization against the roofline at ``bw`` bytes/cycle of HBM, the cycle model's
    prediction, counters, the path and wall times as a dict."""
    tc = chip.tensorcore
    program = compiler.gemm(tc, n, n, n)
    inputs = _inputs(program, rng)
    result, outputs = run(program, inputs, sim=sim, chip=chip, max_steps=50_000_000)
    assert result.status == "done", f"{n}^3 {tc.mxu.fmt}: {result.error.name}"
    want = compiler.gemm_reference(tc, inputs["A"], inputs["B"])
    assert np.array_equal(compiler.result_bits(tc, outputs["C"]), want), "wrong result"
    c = result.counters
    R = tc.mxu.rows
    peak = R * R
    compulsory = 2 * n * n * tc.esize + n * n * tc.osize
    bound = min(1.0, n ** 3 / compulsory * bw / peak)   # of the MXU's peak
    util = n ** 3 / (c["cycles"] * peak)
    model = gemm_cycles(program, bw=bw, latency=FIRST_BEAT)
    return {"m": n, "k": n, "n": n, "format": tc.mxu.fmt, "rows": R, "cols": R, "path": sim,
            "tiling": program.metadata["tiling"], "cycles": c["cycles"],
            "utilization": util, "roofline": bound, "roofline_fraction": util / bound,
            "mxu_busy_fraction": c["mxu_vectors"] / c["cycles"],
            "exposed_dma_fraction": c["mxu_starved"] / c["cycles"],
            "bytes_read": c["bytes_read"], "bytes_written": c["bytes_written"],
            "model_cycles": model.cycles, "model_error": c["cycles"] / model.cycles - 1,
            "run_seconds": c["run_seconds"], "run_cpu_seconds": c.get("run_cpu_seconds"),
            "check_seconds": c.get("check_seconds"), "build_seconds": c["build_seconds"],
            "cycles_per_second": c["cycles"] / c["run_seconds"],
            "cycles_per_cpu_second": (c["cycles"] / c["run_cpu_seconds"]
                                      if c.get("run_cpu_seconds") else None)}


def _bare(program):
    """The program with its VPU epilogue instructions made ``nop`` (same schedule, same
    semaphores): the MLP without its epilogue, for timing only."""
    words = [0 if (w >> 58) in (Op.VOP.value, Op.VCAST.value) else w for w in program.words]
    return Program(words=words, config=program.config,
                            hbm_capacity=program.hbm_capacity, hbm=program.hbm,
                            inputs=program.inputs, outputs=program.outputs,
                            metadata=program.metadata)


def _epilogue(chip, n, rng):
    """Cycles of a hidden MLP layer (n x n x n, bias + ReLU + requantization on the VPU) with
    and without its epilogue."""
    tc = chip.tensorcore
    w1 = rng.integers(-128, 128, (n, n))
    w2 = rng.integers(-128, 128, (n, tc.mxu.cols))
    layers = [(w1, rng.integers(-5000, 5000, n)), (w2, rng.integers(-5000, 5000, tc.mxu.cols))]
    program = compiler.mlp(tc, layers, n, "relu", [(1 << 10, 20)])
    inputs = _inputs(program, rng)
    cycles = []
    for variant in (program, _bare(program)):
        result, _ = run(variant, inputs, sim=PATH, chip=chip, max_steps=50_000_000)
        assert result.status == "done", result.error.name
        cycles.append(result.counters["cycles"])
    return {"m": n, "k": n, "n": n, "path": PATH, "cycles": cycles[0], "bare_cycles": cycles[1],
            "epilogue_cost": cycles[0] / cycles[1] - 1}


def _tool_cost(chip, repeats):
    """Chip generation (uncached) and ``repeats`` forced builds of the native simulator
    (the :data:`PATH` builds the runs then use)."""
    gen = median_seconds(lambda: generate("chip", chip), repeats)
    design = generate("chip", chip)
    builds = [build_native(design, chip, force=True) for _ in range(repeats)]
    return {"path": PATH, "generate_seconds": gen,
            "build_seconds": statistics.median(b.seconds for b in builds),
            "builds_seconds": [b.seconds for b in builds],
            "builds_cpu_seconds": [b.cpu for b in builds],
            "peak_build_bytes": max(b.peak_rss for b in builds),
            "verilog_bytes": len(design.verilog)}


def bench(quick=False, sizes=(512, 1024), formats=("int8", "bfloat16"), epilogue_n=512,
          repeats=1):
    """GEMMs of every size in ``sizes`` cubed in every format of ``formats`` (128^3 int8 with
    ``quick``) on a 16 x 16 MXU (8 x 8 with ``quick``), the epilogue's cost on an
    ``epilogue_n`` layer, tool cost (``repeats`` forced native builds of each format's chip,
    measured first so that the runs use the last of them; none with 0: the runs then build
    or find their builds); writes docs/results/tensorcore.json and its page
    tensorcore.md."""
    env = environment()
    rng = np.random.default_rng(1)
    bw, bw_source = measured_rate("seq_read", quick, "tensorcore")
    size = 8 if quick else 16
    costs = [{"format": fmt, **_tool_cost(bench_chip(fmt, size), 1 if quick else repeats)}
             for fmt in (["int8"] if quick else formats if repeats else [])]
    for c in costs:
        print(f"tool cost: {c}", flush=True)
    plan = [("int8", 128)] if quick else [(f, n) for n in sizes
                                          for f in formats]
    gemms = []
    for fmt, n in plan:
        start = time.perf_counter()
        gemms.append(measure_gemm(bench_chip(fmt, size), n, rng, bw))
        print(f"gemm {fmt} {n}^3: {gemms[-1]} ({time.perf_counter() - start:.0f} s)",
              flush=True)
    epilogue = [_epilogue(bench_chip("int8", size), 128 if quick else epilogue_n, rng)]
    print(f"epilogue: {epilogue[-1]}", flush=True)
    write_results("tensorcore", {"gemm": gemms, "epilogue": epilogue, "tool_cost": costs},
                  env, render, quick, hbm_bandwidth={"bytes_per_cycle": bw, "from": bw_source},
                  mxu={"rows": size, "cols": size})


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    gemms, epilogue, costs = (data["tables"][k] for k in ("gemm", "epilogue", "tool_cost"))
    bw, bw_source = data["hbm_bandwidth"]["bytes_per_cycle"], data["hbm_bandwidth"]["from"]
    size, env = data["mxu"]["rows"], data["environment"]
    gemm_table = table(
        ["M=K=N", "format", "tiling tm x tk x tn", "cycles", "MXU utilization", "roofline",
         "of roofline", "MXU busy", "exposed DMA", "model cycles", "RTL vs model",
         "HBM read / written, bytes", "path", "cycles/s (run wall, CPU)"],
        [[g["m"], g["format"], " x ".join(map(str, g["tiling"])), g["cycles"],
          f"{100 * g['utilization']:.1f}%", f"{100 * g['roofline']:.1f}%",
          f"{100 * g['roofline_fraction']:.1f}%", f"{100 * g['mxu_busy_fraction']:.1f}%",
          f"{100 * g['exposed_dma_fraction']:.2f}%", g["model_cycles"],
          f"{100 * g['model_error']:+.2f}%", f"{g['bytes_read']} / {g['bytes_written']}",
          g["path"], f"{g['cycles_per_second']:,.0f}, " + (
              f"{g['cycles_per_cpu_second']:,.0f}" if g["cycles_per_cpu_second"] else "-")]
         for g in gemms])
    epi_table = table(["M=K=N", "cycles with epilogue", "without", "cost", "path"],
                      [[e["m"], e["cycles"], e["bare_cycles"], f"{100 * e['epilogue_cost']:.2f}%",
                        e["path"]] for e in epilogue])
    cost_table = table(["format", "path", "chip generation, s", "Verilator build, s (median)",
                        "builds, s", "builds, CPU s (Verilator, C++)", "peak build memory, GiB",
                        "Verilog, MB"],
                       [[c["format"], c["path"], f"{c['generate_seconds']:.1f}",
                         f"{c['build_seconds']:.1f}",
                         " / ".join(f"{b:.1f}" for b in c["builds_seconds"]),
                         " / ".join(", ".join(f"{x:.0f}" for x in b)
                                    for b in c["builds_cpu_seconds"]),
                         f"{c['peak_build_bytes'] / 2**30:.2f}",
                         f"{c['verilog_bytes'] / 1e6:.1f}"] for c in costs])
    text = f"""# TensorCore benchmark results

Measured by `make bench` (`python -m sim.bench tensorcore`) on {environment_line(env)}.

Chip: a {size} x {size} MXU, 512 KiB of VMEM in 8 banks of one read and one write port, the
HBM controller in its benchmark configuration (`BENCH_CONFIG`, 2 pseudo-channels of HBM2-2000,
one AXI port: the DMA's) behind the golden device model. Each GEMM is a compiled program
(`podium/compiler.py`, tiles chosen by its cost model) run from `start` to `done`; the result
is checked against numpy (int8) or the MXU golden model's bits (bfloat16).

Path: the run path that produced each row ("path"). `native` is sim/native.py (`podium run
--sim native`): the Verilated chip clocked by a C++ host, an HBM device at the golden device
model's timing, the golden model checking the HBM command trace after the run; its cycles,
counters and outputs are the cocotb run's (`verilator`, flow `none_none`) exactly
(verification/tests/test_native.py). Cycles/s: the cycle counter over the simulator's wall
time and over its CPU time (the machine is shared: CPU time is the steadier figure).

* MXU utilization = M*K*N / (cycles x rows x cols). Roofline = min(1, arithmetic intensity x
  HBM bandwidth / MXU peak), the arithmetic intensity M*K*N MACs over the compulsory bytes
  (A and B read once, C written once) and the bandwidth the HBM benchmark's sustained
  sequential reads ({bw:.1f} B/cycle, {bw_source}); "of roofline" is the utilization over it.
* MXU busy = cycles an activation vector entered the array / cycles (the `mxu_vectors`
  counter). Exposed DMA = cycles the MXU sat idle waiting on a semaphore / cycles
  (`mxu_starved`).
* Model: the analytic cycle model of `podium/cycles.py`, written from the design's timing
  before these runs (first-beat latency {FIRST_BEAT} cycles, the bandwidth above).

{gemm_table}

## Epilogue

A hidden MLP layer (`podium.compiler.mlp`, int8, batch M, bias add with fused ReLU and int8
requantization on the VPU) against the same program with the VPU's epilogue instructions made
`nop` (same schedule and semaphores).

{epi_table}

## Tool cost

Chip generation (Python + Yosys) and the build of the path's simulator (verilate + C++
compile), builds forced; the runs above used the last build.

{cost_table if costs else "Not measured in this run (no forced builds were asked for)."}
"""
    return text
