"""``make bench``: every benchmark, printed as tables and written to docs/results/ (markdown and
JSON, see sim/measure.py).

    python -m sim.bench [name ...] [--quick]

The benchmarks are those the block registry names (hdl/generate.py ``BLOCKS``: a block's
``bench``, run by ``sim/<bench>_perf.py``) and the performance model's report, which measures
no block (sim/model_report.py).
"""

import argparse
import importlib
import sys

from hdl.generate import BLOCKS

__all__ = ["BENCHES", "main"]

BENCHES = {**{b.bench: f"sim.{b.bench}_perf" for b in BLOCKS.values() if b.bench},
           "model": "sim.model_report"}
"""Each benchmark's module, whose ``bench(quick=...)`` runs it."""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", choices=[[], *BENCHES], default=[], metavar="name",
                   help=f"benchmarks to run (default: all): {', '.join(BENCHES)}")
    p.add_argument("--quick", action="store_true",
                   help="small sizes only, results under build/results (a smoke run)")
    args = p.parse_args(argv)
    for name in args.names or BENCHES:
        print(f"== {name} benchmark", flush=True)
        importlib.import_module(BENCHES[name]).bench(quick=args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
