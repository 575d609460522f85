"""MXU measurements shared by the demo and ``make bench``: one checked GEMM in simulation, its
cycle count and counters, the analytic bounds it is compared with, and the benchmark tables."""

import json
import math
import statistics

from hdl.generate import generate
from hdl.mxu.config import MXUConfig
from sim.bench import REPEATS, machine, median_seconds, table, write_results
from sim.runner import BUILD, build, run

__all__ = ["measure_gemm", "scalesim_cycles", "streaming_cycles", "bench"]


def scalesim_cycles(rows, cols, m, k, n):
    """SCALE-Sim v2's stall-free weight-stationary model, weight loads not overlapped
    (../shared/reference/mxu.md): ceil(K/R) * ceil(N/C) * (2R + C + M - 2)."""
    return math.ceil(k / rows) * math.ceil(n / cols) * (2 * rows + cols + m - 2)


def streaming_cycles(rows, cols, m, k, n):
    """Lower bound for any weight-stationary array: every fold streams max(M, R) vectors."""
    return math.ceil(k / rows) * math.ceil(n / cols) * max(m, rows)


def measure_gemm(config, m, k, n, *, tag="bench", seed=1, sim="verilator"):
    """Simulate one GEMM on ``config`` with streams that never idle; the testbench checks
    every result against the golden model. Returns the measurement as a dict."""
    built = build(generate("mxu", config), sim)
    test_dir = BUILD / tag / f"{config.name}-{m}x{k}x{n}"
    report = test_dir.parent / f"{test_dir.name}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    spec = {"m": m, "k": k, "n": n, "report": str(report)}
    run(built, "verification.tb.mxu", test_dir=test_dir, testcase=r"\.measure_gemm$", seed=seed,
        extra_env={"PODIUM_PERF": json.dumps(spec)})
    result = json.loads(report.read_text())
    macs = m * k * n
    slots = config.rows * config.cols
    result.update({
        "build_seconds": built.seconds,
        "utilization": macs / (result["cycles"] * slots),
        "scalesim_cycles": scalesim_cycles(config.rows, config.cols, m, k, n),
        "scalesim_utilization": macs / (scalesim_cycles(config.rows, config.cols, m, k, n)
                                        * slots),
        "streaming_cycles": streaming_cycles(config.rows, config.cols, m, k, n),
    })
    return result


def bench(quick=False):
    """Utilization over whole GEMMs and tool cost; writes docs/results/mxu.md."""
    sizes_util, sizes_build = ([4], [4]) if quick else ([8, 16], [8, 16, 32])
    util_rows = []
    for n in sizes_util:
        cfg = MXUConfig(rows=n, cols=n)
        m, k, nn = 256, 4 * n, 4 * n
        r = measure_gemm(cfg, m, k, nn)
        util_rows.append([
            f"{n}x{n}", f"{m}x{k}x{nn}", r["cycles"], f"{100 * r['utilization']:.1f}%",
            r["scalesim_cycles"], f"{100 * r['scalesim_utilization']:.1f}%",
            r["streaming_cycles"], r["weight_wait"], r["stall"],
        ])
        print(util_rows[-1], flush=True)
    cost_rows = []
    for n in sizes_build:
        cfg = MXUConfig(rows=n, cols=n)
        gen = median_seconds(lambda cfg=cfg: generate("mxu", cfg))
        design = generate("mxu", cfg)
        builds = [build(design, force=True).seconds for _ in range(REPEATS)]
        cost_rows.append([f"{n}x{n}", f"{gen:.1f}", f"{statistics.median(builds):.1f}",
                          " / ".join(f"{b:.1f}" for b in builds)])
        print(cost_rows[-1], flush=True)

    util = table(["array", "M x K x N", "cycles", "utilization", "SCALE-Sim cycles",
                   "SCALE-Sim util.", "streaming bound", "weight_wait", "stall"], util_rows)
    cost = table(["array (int8)", "generate, s (median)", "Verilator build, s (median)",
                   "builds, s"], cost_rows)
    text = f"""# MXU benchmark results

Measured by `make bench` on {machine()}.

## Utilization over whole GEMMs

Utilization = M*K*N / (cycles * rows * cols), cycles from the first command offered to the last
result row taken, streams never idle, every result checked against the golden model. The
SCALE-Sim column is the stall-free weight-stationary model without weight-load overlap,
ceil(K/R)*ceil(N/C)*(2R + C + M - 2) (../shared/reference/mxu.md); the streaming bound is
ceil(K/R)*ceil(N/C)*max(M, R), what any weight-stationary array needs to stream the operands.

{util}

## Tool cost

Generation (Python + Yosys) and Verilator build (verilate + C++ compile, 2 jobs) wall times,
medians of {REPEATS} runs; builds forced (no cache).

{cost}
"""
    write_results("mxu", text, quick)
