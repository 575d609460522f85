"""``make bench``: every benchmark, printed as tables and written to docs/results/ (markdown and
JSON, see sim/measure.py).

    python -m sim.bench [block ...] [--quick]
"""

import argparse
import sys

__all__ = ["main"]


def _benches():
    from sim import hbm_perf, ici_perf, mxu_perf, pod_perf, sparsecore_perf, tensorcore_perf
    from sim import model_report as report

    return {"mxu": mxu_perf.bench, "hbm": hbm_perf.bench, "ici": ici_perf.bench,
            "tensorcore": tensorcore_perf.bench, "sparsecore": sparsecore_perf.bench,
            "pod": pod_perf.bench, "model": report.bench}


def main(argv=None):
    benches = _benches()
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("blocks", nargs="*", choices=[[], *benches], default=[],
                   help="blocks to benchmark (default: all)")
    p.add_argument("--quick", action="store_true",
                   help="small sizes only, results under build/results (a smoke run)")
    args = p.parse_args(argv)
    for name in args.blocks or benches:
        print(f"== {name} benchmark", flush=True)
        benches[name](quick=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
