"""Generate (and optionally lint) the Verilog of every block's default configuration and of
the configurations the regression uses; one file and sidecar per configuration."""

import argparse
import sys
import time
from pathlib import Path

from hdl.generate import generate
from hdl.tensorcore.vpu_top import VPUTopConfig
from sim.runner import lint
from spec.chip import ChipConfig
from spec.hbm import HBMConfig
from spec.ici import ICIConfig, ICIHarnessConfig
from spec.mxu import MXUConfig
from spec.sparsecore import SparseCoreSystemConfig

CONFIGS = [
    ("chip", ChipConfig()),
    ("mxu", MXUConfig()),
    ("mxu", MXUConfig(rows=1, cols=1)),
    ("mxu", MXUConfig(rows=2, cols=3)),
    ("mxu", MXUConfig(rows=5, cols=7, acc_depth=100)),
    ("mxu", MXUConfig(rows=16, cols=16)),
    ("hbm", HBMConfig()),
    ("hbm", HBMConfig(speed="1600", ports=2, page_policy="closed", scheduler="fcfs",
                      xor_bank=True, mapping="RoCoBaBgPc", queue_depth=8, write_buffer=4,
                      write_high=3, write_low=1, id_lanes=2, rob_depth=16, row_bits=10,
                      refresh_postpone=2)),
    ("ici", ICIConfig()),
    ("ici_router", ICIConfig()),
    ("ici", ICIConfig(dims=(2, 2, 2), wrap=(True, False, True), classes=2, local_ports=2)),
    ("ici_harness", ICIHarnessConfig(faults=True)),
    ("vpu", VPUTopConfig()),
    ("sparsecore", SparseCoreSystemConfig()),
    ("sparsecore", SparseCoreSystemConfig(memory="axi")),
]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="build/verilog")
    p.add_argument("--lint", action="store_true", help="run verilator --lint-only on each")
    args = p.parse_args(argv)
    failures = 0
    for block, config in CONFIGS:
        start = time.perf_counter()
        design = generate(block, config)
        path = design.write(Path(args.out))
        status = f"{time.perf_counter() - start:5.1f} s"
        if args.lint:
            try:
                lint(path, design.name)
                status += "  lint clean"
            except RuntimeError as e:
                failures += 1
                status += f"  LINT FAILED\n{e}"
        print(f"{path}  {status}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
