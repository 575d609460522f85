"""``podium sweep``: a design-space sweep on the command line (the engine is sim/sweep.py,
the spec format docs/sweeps.md).

    podium sweep spec.yaml                          (a LocalCluster, one worker per core)
    podium sweep spec.yaml --scheduler tcp://127.0.0.1:8786   (an existing Dask cluster)
    podium sweep spec.yaml --serial -o build/mine   (in this process, no Dask)
    podium sweep spec.yaml --check                  (validate the spec and list the points)

Exit status: 0 when every point finished, 1 when a point failed, 2 for a bad spec (nothing
run), 130 when interrupted (finished points are kept in the result store and the tables).
"""

import json
import sys
from pathlib import Path

from spec.files import in_file, load_data

__all__ = ["add_parser", "main"]


def add_parser(sub):
    """Add ``sweep`` to an argparse ``subparsers``."""
    s = sub.add_parser("sweep", help="run a design-space sweep (docs/sweeps.md)")
    s.add_argument("spec", help="sweep spec, JSON (.json) or YAML")
    s.add_argument("-o", "--out", help="directory for the tables and plots "
                   "(default: build/sweeps/<name>)")
    s.add_argument("--scheduler", help="address of a running Dask scheduler, such as "
                   "tcp://127.0.0.1:8786 (default: a LocalCluster on this machine)")
    s.add_argument("--workers", type=int, help="LocalCluster worker processes "
                   "(default: one per usable core)")
    s.add_argument("--serial", action="store_true", help="run the points one by one in this "
                   "process, without Dask")
    s.add_argument("--store", help="result store directory (default: build/sweeps/store)")
    s.add_argument("--rerun", action="store_true", help="run every point, even those in the "
                   "store")
    s.add_argument("--check", action="store_true", help="validate the spec, list the points, "
                   "run nothing")
    s.set_defaults(func=main)


def main(args):
    """Handler of ``podium sweep``: returns the exit status (a bad spec raises a FileError
    naming the file, which sim/cli.py reports)."""
    from sim.sweep import parse_spec, run_sweep

    spec = load_data(args.spec)
    with in_file(args.spec):
        sweep = parse_spec(spec, name=Path(args.spec).stem)
    print(f"sweep {sweep.name}: {len(sweep.points)} points of {sweep.block}, measurement "
          f"{sweep.measurement.name} {json.dumps(sweep.options)}, seed {sweep.seed}, "
          f"synthesis {'on' if sweep.synthesis else 'off'}", flush=True)
    if args.check:
        for point in sweep.points:
            print(f"  {point.index}: {point.label or 'the base'} ({point.config.name})")
        return 0
    outcome = run_sweep(sweep, out_dir=args.out, store_dir=args.store,
                        scheduler=args.scheduler, workers=args.workers, serial=args.serial,
                        rerun=args.rerun)
    for i in outcome.failed:
        record = outcome.records[i]
        print(f"point {i} ({sweep.points[i].label}) failed: {record['error']}\n"
              f"{record.get('log', '')}", file=sys.stderr)
    print(f"{len(outcome.records)} of {len(sweep.points)} points finished, "
          f"{len(outcome.failed)} failed; tables and plots in {outcome.out_dir}")
    if outcome.interrupted:
        print("interrupted: finished points are saved; run again to finish the rest",
              file=sys.stderr)
        return 130
    return 1 if outcome.failed else 0
