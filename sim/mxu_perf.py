"""MXU measurements shared by the demo and ``make bench``: one checked GEMM in simulation, its
cycle count and counters, the analytic bounds it is compared with, and the benchmark tables."""

import math
import statistics
import time

from hdl.generate import generate
from sim.measure import (
    REPEATS,
    environment,
    environment_line,
    measure,
    median_seconds,
    table,
    write_results,
)
from sim.runner import BUILD, build, lint
from spec.mxu import MXUConfig, MXUHarnessConfig

__all__ = ["measure_gemm", "measure_sim_speed", "scalesim_cycles", "streaming_cycles", "bench",
           "render"]


def scalesim_cycles(rows, cols, m, k, n):
    """SCALE-Sim v2's stall-free weight-stationary model, weight loads not overlapped
    (SCALE-Sim v2, scalesim-project/scale-sim-v2): ceil(K/R) * ceil(N/C) * (2R + C + M - 2)."""
    return math.ceil(k / rows) * math.ceil(n / cols) * (2 * rows + cols + m - 2)


def streaming_cycles(rows, cols, m, k, n):
    """Lower bound for any weight-stationary array: every fold streams max(M, R) vectors."""
    return math.ceil(k / rows) * math.ceil(n / cols) * max(m, rows)


def measure_gemm(config, m, k, n, *, tag="bench", seed=1):
    """Simulate one GEMM on ``config`` with streams that never idle; the testbench checks
    every result against the golden model. Returns the measurement as a dict."""
    done = measure("mxu", config, "verification.tb.mxu", "measure_gemm",
                   {"m": m, "k": k, "n": n}, tag=tag, seed=seed)
    result = done["report"]
    macs = m * k * n
    slots = config.rows * config.cols
    result.update({
        "build_seconds": done["build_seconds"],
        "utilization": macs / (result["cycles"] * slots),
        "scalesim_cycles": scalesim_cycles(config.rows, config.cols, m, k, n),
        "scalesim_utilization": macs / (scalesim_cycles(config.rows, config.cols, m, k, n)
                                        * slots),
        "streaming_cycles": streaming_cycles(config.rows, config.cols, m, k, n),
    })
    return result


def measure_sim_speed(config, m, k, n, *, runs=REPEATS, seed=1):
    """Cycles per second of Verilator on the self-running MXU (hdl/mxu/harness.py): one GEMM
    from preloaded memories, ``runs`` times, every result checked. Returns the measurement."""
    folds = math.ceil(k / config.rows) * math.ceil(n / config.cols)
    harness = MXUHarnessConfig(mxu=config, cmd_depth=2, w_depth=folds * config.rows,
                               a_depth=folds * m, c_depth=m * math.ceil(n / config.cols))
    return measure("mxu_harness", harness, "verification.tb.mxu_harness", "run_preloaded",
                   {"m": m, "k": k, "n": n, "runs": runs}, seed=seed)["report"]


def _tool_cost(config, repeats):
    """Generation and forced Verilator build wall times (medians) and peak build memory."""
    gen = median_seconds(lambda: generate("mxu", config), repeats)
    design = generate("mxu", config)
    builds = [build(design, force=True) for _ in range(repeats)]
    return gen, statistics.median(b.seconds for b in builds), max(b.peak_rss for b in builds), \
        [b.seconds for b in builds]


def _generate_and_lint(config, repeats):
    """Median generation time of a (large) configuration and the time of one lint."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        design = generate("mxu", config)
        times.append(time.perf_counter() - start)
    path = design.write(BUILD / "bench" / "generated")
    start = time.perf_counter()
    lint(path, design.name)
    return statistics.median(times), time.perf_counter() - start, len(design.verilog), times


def _utilization(formats, sizes):
    data = []
    for fmt in formats:
        for size in sizes:
            cfg = MXUConfig(rows=size, cols=size, fmt=fmt)
            r = measure_gemm(cfg, 256, 4 * size, 4 * size)
            data.append({"format": fmt, **{key: r[key] for key in (
                "rows", "cols", "m", "k", "n", "cycles", "utilization", "scalesim_cycles",
                "scalesim_utilization", "streaming_cycles", "weight_wait", "stall")}})
            print(data[-1], flush=True)
    return data


def _costs(plan, repeats):
    data = []
    for fmt, size in plan:
        gen, median_build, peak, builds = _tool_cost(MXUConfig(rows=size, cols=size, fmt=fmt),
                                                     repeats)
        data.append({"format": fmt, "rows": size, "cols": size, "generate_seconds": gen,
                     "build_seconds": median_build, "builds_seconds": builds,
                     "peak_build_bytes": peak})
        print(data[-1], flush=True)
    return data


def _speeds(formats, sizes, repeats):
    data = []
    for fmt in formats:
        for size in sizes:
            cfg = MXUConfig(rows=size, cols=size, fmt=fmt, acc_depth=8192)
            m, k, n = 2048, 4 * size, 4 * size
            r = measure_sim_speed(cfg, m, k, n, runs=repeats)
            data.append({"format": fmt, "rows": size, "cols": size, "m": m, "k": k, "n": n,
                         "cycles": r["cycles"], "seconds": r["seconds"],
                         "cycles_per_second": r["cycles_per_second"]})
            print(data[-1], flush=True)
    return data


def bench(quick=False):
    """Utilization, tool cost and simulation speed by format and size; writes
    docs/results/mxu.json and its page mxu.md."""
    env = environment()
    formats = ["int8", "bfloat16", "float8_e4m3fn", "float8_e5m2"]
    cost_plan = ([("int8", 4)] if quick else
                 [("int8", 8), ("int8", 16), ("int8", 32), ("int8", 64)]
                 + [(f, s) for f in formats[1:] for s in (8, 16)])
    repeats = 1 if quick else REPEATS
    util_data = _utilization(formats, [4] if quick else [8, 16])
    cost_data = _costs(cost_plan, repeats)
    speed_data = _speeds(formats, [4] if quick else [16], repeats)
    big_data = []
    if not quick:
        gen, lint_s, size, times = _generate_and_lint(MXUConfig(rows=256, cols=256), repeats)
        big_data = [{"format": "int8", "rows": 256, "cols": 256, "generate_seconds": gen,
                     "generate_runs_seconds": times, "verilog_bytes": size,
                     "lint_seconds": lint_s}]
        print(big_data[-1], flush=True)
    write_results("mxu", {"utilization": util_data, "tool_cost": cost_data,
                          "sim_speed": speed_data, "generation": big_data}, env, render, quick,
                  repeats=repeats)


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    t = data["tables"]
    repeats = data.get("repeats") or len(t["tool_cost"][0]["builds_seconds"])
    util_rows = [[r["format"], f"{r['rows']}x{r['cols']}", f"{r['m']}x{r['k']}x{r['n']}",
                  r["cycles"], f"{100 * r['utilization']:.1f}%", r["scalesim_cycles"],
                  f"{100 * r['scalesim_utilization']:.1f}%", r["streaming_cycles"],
                  r["weight_wait"], r["stall"]] for r in t["utilization"]]
    cost_rows = [[r["format"], f"{r['rows']}x{r['cols']}", f"{r['generate_seconds']:.1f}",
                  f"{r['build_seconds']:.1f}", f"{r['peak_build_bytes'] / 2**30:.2f}",
                  " / ".join(f"{b:.1f}" for b in r["builds_seconds"])] for r in t["tool_cost"]]
    speed_rows = [[r["format"], f"{r['rows']}x{r['cols']}", f"{r['m']}x{r['k']}x{r['n']}",
                   r["cycles"], f"{r['seconds']:.3f}", f"{r['cycles_per_second']:,.0f}"]
                  for r in t["sim_speed"]]
    # The runs behind the median: a JSON written before they were kept (the run at 2e60424,
    # whose page showed them without its JSON holding them) has none, and says so.
    big = [[r["format"], f"{r['rows']}x{r['cols']}", f"{r['generate_seconds']:.0f}",
            " / ".join(f"{s:.0f}" for s in r["generate_runs_seconds"])
            if "generate_runs_seconds" in r else "not recorded",
            f"{r['verilog_bytes'] / 2**20:.0f} MiB", f"{r['lint_seconds']:.0f}"]
           for r in t["generation"]]
    util = table(["format", "array", "M x K x N", "cycles", "utilization", "SCALE-Sim cycles",
                  "SCALE-Sim util.", "streaming bound", "weight_wait", "stall"], util_rows)
    cost = table(["format", "array", "generate, s", "Verilator build, s", "peak build memory, GiB",
                  "builds, s"], cost_rows)
    speed = table(["format", "array", "M x K x N", "cycles", "wall, s (median)", "cycles/s"],
                  speed_rows)
    big_table = table(["format", "array", "generate, s (median)", "runs, s", "Verilog",
                       "verilator --lint-only, s"], big) if big else "(not run with --quick)"
    text = f"""# MXU benchmark results

Measured by `make bench` on {environment_line(data["environment"])}.

## Utilization over whole GEMMs

Utilization = M*K*N / (cycles * rows * cols), cycles from the first command offered to the last
result row taken, streams never idle, every result checked against the golden model. The
SCALE-Sim column is the stall-free weight-stationary model without weight-load overlap,
ceil(K/R)*ceil(N/C)*(2R + C + M - 2) (SCALE-Sim v2, scalesim-project/scale-sim-v2);
the streaming bound is ceil(K/R)*ceil(N/C)*max(M, R), what any weight-stationary array needs
to stream the operands.

{util}

## Tool cost

Generation (Python + Yosys) and Verilator build (verilate + C++ compile) wall times, medians of
{repeats} runs, builds forced (no cache); peak memory of all build processes together (sampled
every 0.25 s), the largest of the runs.

{cost}

## Simulation speed

Verilator on the self-running MXU (hdl/mxu/harness.py): operands preloaded into memories through
VPI, one start, the testbench waits for done (no Python per cycle), results checked after;
median of {repeats} runs.

{speed}

## Trillium-size generation

`podium generate` of a 256 x 256 MXU and `verilator --lint-only` of its Verilog.

{big_table}
"""
    return text
