"""MXU measurements shared by the demo and the benchmarks: one checked GEMM in simulation,
its cycle count and counters, and the analytic bounds it is compared with."""

import json
import math

from hdl.generate import generate
from sim.runner import BUILD, build, run

__all__ = ["measure_gemm", "scalesim_cycles", "streaming_cycles"]


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
