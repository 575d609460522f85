"""``make verilog`` / ``make lint``: generate (and optionally lint) the Verilog of every block
of the registry (hdl/generate.py ``BLOCKS``): its default configuration and its examples, one
file and sidecar per configuration. A configuration generated before by the same generator
sources is read back from the generation cache (sim/runner.py ``generated``,
build/verilog-cache/) instead of generated again."""

import argparse
import sys
import time
from pathlib import Path

from hdl.generate import BLOCKS
from sim.runner import generated, lint

__all__ = ["main"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="build/verilog")
    p.add_argument("--lint", action="store_true", help="run verilator --lint-only on each")
    args = p.parse_args(argv)
    failures = 0
    for block, entry in BLOCKS.items():
        for config in entry.configurations():
            start = time.perf_counter()
            design = generated(block, config)
            path = design.write(Path(args.out))
            status = f"{time.perf_counter() - start:5.1f} s"
            if args.lint:
                try:
                    lint(path, design.name)
                    status += "  lint clean"
                except RuntimeError as e:
                    failures += 1
                    status += f"  LINT FAILED\n{e}"
            print(f"{block:12} {path}  {status}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
