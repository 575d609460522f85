"""``python -m sim.bench simspeed``: the chip's simulation speed on both run paths, side by side.

Each workload (the digits demo, a 512^3 and a 1024^3 int8 GEMM on the default chip, one
program of the digits ViT demo on the ViT's chip) is compiled to a program file and run by
``podium run <program> --sim <path> --json --outputs <dir>`` as a subprocess, with
``verilator`` (cocotb: the chip's testbench, the golden HBM device model in Python) and with
``native`` (sim/native.py: a C++ host and device, the golden model checking the command trace
afterwards); the 1024^3 GEMM (16.8 million cycles, 11 minutes to an hour on the cocotb path
by the machine's load) on the native path only (:data:`NATIVE_ONLY`). Both builds of both
chips exist before the runs (built first, their build times and peak memory recorded by the
build), so the wall time is that of a cached ``podium run``: start-up, reading the generated
Verilog back, the image, the simulation, the checks. Both paths must give the same cycle
count and outputs, bit for bit (the regression checks the traces too,
verification/tests/test_native.py); a run that does
not raises. The page reports issue 41's targets (:data:`TARGETS`) as met or missed from the
rows.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from sim.measure import environment, environment_line, table, write_results
from sim.runner import BUILD, ROOT, children_cpu

__all__ = ["bench", "render", "PAGE"]

PAGE = "simspeed"
PATHS = ("verilator", "native")
MAX_STEPS = 20_000_000
"""Every run's cycle budget (``--max-steps``): above the default of the verilator backend,
which the 512^3 GEMM (about 2.2 million cycles) passes; the 1024^3 GEMM takes 16.8 million."""
NATIVE_ONLY = ("GEMM 1024^3 (int8)",)
"""Workloads run on the native path only: the cocotb path would take 11 minutes (idle machine)
to an hour (at load 10) at its rate on the 512^3 GEMM (the paths' identity is checked on the
other rows)."""
VIT_IMAGES = 6
"""Images in the ViT's program: one program of the ViT demo with ``--batch 6`` (``make demo
ARGS="--model vit --batch 6"``; one VMEM tile of images, about 100,000 cycles)."""
TARGETS = {"native_cycles_per_second": 60_000, "speedup": 5.0, "million_cycles_seconds": 30.0,
           "demo_seconds": 5.0}
"""Issue 41's targets: native cycles/s on the chip, native over cocotb, the wall time of a
1-million-cycle program's whole command, a cached demo's ``podium run``."""


def _vit_program(images):
    """One program of the ViT demo (sim/demo.py): the first ``images`` test images."""
    from podium.workloads import vit

    model = vit.load()
    return vit.compile_vit(vit.TENSORCORE, model, model.x_test[:images])


def _programs(quick):
    """``[(name, program file)]``: the workloads compiled for their chips (the default one;
    the ViT's for the ViT: the program's TensorCore with the default HBM)."""
    from podium import compiler
    from podium.workloads import digits
    from spec.tensorcore import TensorCoreConfig

    directory = BUILD / "simspeed"
    directory.mkdir(parents=True, exist_ok=True)
    config = TensorCoreConfig()
    out = []
    sizes = (128,) if quick else (512, 1024)
    work = [("digits demo (int8)", "digits", lambda: digits.compile_digits(config))]
    work += [(f"GEMM {n}^3 (int8)", f"gemm-{n}", lambda n=n: compiler.gemm(config, n, n, n))
             for n in sizes]
    images = 2 if quick else VIT_IMAGES
    work.append((f"ViT demo, {images} images (bfloat16)", f"vit-{images}",
                 lambda: _vit_program(images)))
    for name, stem, make in work:
        path = directory / f"{stem}.json"
        make().save(path)
        out.append((name, path))
    return out


def _build_records(chip=None):
    """Build time, CPU seconds and peak memory of each path's build of ``chip`` (default:
    the default chip)."""
    from sim import native
    from sim.runner import build, generated
    from spec.chip import ChipConfig

    chip = chip or ChipConfig()
    design = generated("chip", chip)
    b = build(design)
    cocotb = {"seconds": float((b.directory / ".built").read_text()),
              "cpu": json.loads((b.directory / "build_cpu.json").read_text()),
              "peak_rss": b.peak_rss or None}
    n = native.build_native(design, chip)
    return {"verilator": cocotb,
            "native": {"seconds": n.seconds, "cpu": n.cpu, "peak_rss": n.peak_rss or None}}


def _run(path, sim):
    """One ``podium run`` of program file ``path`` on ``sim``: its JSON report, wall time,
    CPU seconds (all its processes) and outputs (name: raw bytes)."""
    outputs = path.with_name(f"{path.stem}-{sim}-outputs")
    shutil.rmtree(outputs, ignore_errors=True)
    cpu = children_cpu()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(path), "--sim", sim,
                           "--max-steps", str(MAX_STEPS), "--json", "--outputs",
                           str(outputs)], capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"podium run {path} --sim {sim} failed: {done.stderr.strip()}")
    arrays = {f.stem: np.load(f).tobytes() for f in sorted(outputs.glob("*.npy"))}
    return json.loads(done.stdout), wall, children_cpu() - cpu, arrays


def bench(quick=False):
    env = environment()
    from podium.workloads import vit
    from spec.chip import ChipConfig

    builds = _build_records()
    vit_builds = _build_records(ChipConfig(tensorcore=vit.TENSORCORE))
    rows = []
    for name, path in _programs(quick):
        results = {}
        for sim in (("native",) if name in NATIVE_ONLY else PATHS):
            report, wall, cpu, arrays = _run(path, sim)
            if report["status"] != "done":
                raise RuntimeError(f"{name} on {sim}: {report['status']} {report['error']}")
            if not arrays:
                raise RuntimeError(f"{name} on {sim}: no outputs written")
            results[sim] = (report, arrays)
            rows.append({"workload": name, "path": sim, "cycles": report["cycles"],
                         "run_seconds": report["run_seconds"],
                         "run_cpu_seconds": report.get("run_cpu_seconds"),
                         "check_seconds": report.get("check_seconds"),
                         "model_share": report.get("model_share"),
                         "command_seconds": wall, "command_cpu_seconds": cpu,
                         "hbm_commands": report.get("hbm_commands")})
        if "verilator" not in results:
            continue
        (ref, ref_out), (nat, nat_out) = results["verilator"], results["native"]
        if ref["cycles"] != nat["cycles"] or ref_out != nat_out or any(
                ref.get(k) != nat.get(k) for k in ("matches_reference", "matches_numpy")):
            raise RuntimeError(f"{name}: the paths disagree: {ref} vs {nat}")
    write_results(PAGE, {"runs": rows}, env, render, quick=quick, builds=builds,
                  vit_builds=vit_builds, targets=TARGETS,
                  bytecode_cached=not os.environ.get("PYTHONDONTWRITEBYTECODE"))


def _mib(value):
    return f"{value / 2**20:,.0f}" if value else "not recorded"


def _base(by, row):
    """The cocotb row of ``row``'s workload (None: not run on cocotb)."""
    return by.get((row["workload"], "verilator"))


def _speedup(by, r):
    base = _base(by, r)
    if base is None:
        return "- (native only)"
    return (f"{base['run_cpu_seconds'] / r['run_cpu_seconds']:.1f}x, "
            f"{base['command_cpu_seconds'] / r['command_cpu_seconds']:.1f}x, "
            f"{base['command_seconds'] / r['command_seconds']:.1f}x")


def _bound(base, r):
    """The most any host could gain over the cocotb path on this model: the cocotb run's CPU
    time over the model's own part of the native run's."""
    return base["run_cpu_seconds"] / (r["run_cpu_seconds"] * r["model_share"])


def _met(ok):
    return "met" if ok else "missed"


def _targets(data, by):
    """Issue 41's targets, each with the rows that decide it: ``[[target, measured,
    verdict]]``."""
    t = data["targets"]
    native = [r for r in data["tables"]["runs"] if r["path"] == "native"]
    paired = [r for r in native if _base(by, r)]
    rate, speed = t["native_cycles_per_second"], t["speedup"]
    out = []
    for r in native:
        wall = r["cycles"] / r["run_seconds"]
        cpu = r["cycles"] / r["run_cpu_seconds"]
        out.append([f">= {rate:,} cycles/s native: {r['workload']}",
                    f"{cpu:,.0f} per CPU second, {wall:,.0f} per wall second (the model "
                    f"{r['model_share']:.1%} of it)",
                    f"{_met(cpu >= rate)} (CPU), {_met(wall >= rate)} (wall)"])
    for r in paired:
        base = _base(by, r)
        cpu = base["run_cpu_seconds"] / r["run_cpu_seconds"]
        wall = base["run_seconds"] / r["run_seconds"]
        out.append([f">= {speed:.0f}x the cocotb path's cycles/s: {r['workload']}",
                    f"{cpu:.1f}x per CPU second, {wall:.1f}x per wall second (any host on "
                    f"this model: at most {_bound(base, r):.1f}x; whole commands: "
                    f"{base['command_cpu_seconds'] / r['command_cpu_seconds']:.1f}x CPU, "
                    f"{base['command_seconds'] / r['command_seconds']:.1f}x wall)",
                    f"{_met(cpu >= speed)} (CPU), {_met(wall >= speed)} (wall)"])
    long = [r for r in native if r["cycles"] >= 1_000_000]
    if long:
        r = min(long, key=lambda r: r["cycles"])
        limit = t["million_cycles_seconds"]
        out.append([f"a 1M-cycle program under {limit:.0f} s wall, start-up included",
                    f"{r['workload']} ({r['cycles']:,} cycles, more than 1M): "
                    f"{r['command_cpu_seconds']:.1f} s CPU, {r['command_seconds']:.1f} s wall",
                    f"{_met(r['command_cpu_seconds'] < limit)} (CPU), "
                    f"{_met(r['command_seconds'] < limit)} (wall)"])
    limit = t["demo_seconds"]
    for r in data["tables"]["runs"]:
        if r["workload"].startswith("digits demo"):
            out.append([f"`podium run` of the cached demo under {limit:.0f} s: {r['path']}",
                        f"{r['command_cpu_seconds']:.1f} s CPU, {r['command_seconds']:.1f} s "
                        f"wall", f"{_met(r['command_cpu_seconds'] < limit)} (CPU), "
                        f"{_met(r['command_seconds'] < limit)} (wall)"])
    return out


def _cocotb_estimate(rows, by):
    """What the native-only rows would take on cocotb, by the cocotb path's rate on the
    longest program it ran: `` (about N minutes on cocotb at its rate on W)``."""
    paired = [r for r in rows if r["path"] == "verilator"]
    alone = [r for r in rows if r["path"] == "native" and not _base(by, r)]
    if not paired or not alone:
        return ""
    base = max(paired, key=lambda r: r["cycles"])
    rate = base["cycles"] / base["command_seconds"]
    minutes = ", ".join(f"{r['cycles'] / rate / 60:.0f}" for r in alone)
    return (f" (about {minutes} minutes on cocotb at its {rate:,.0f} cycles/s on the "
            f"{base['workload']})")


def _bytecode(data):
    """A sentence on Python's bytecode cache in the commands' environment (it decides a short
    command's start-up: both paths import the project's modules, cocotb's more of them)."""
    if "bytecode_cached" not in data:
        return []
    if data["bytecode_cached"]:
        return ["Python's bytecode cache was on (the project's modules compiled once).", ""]
    return ["`PYTHONDONTWRITEBYTECODE` was set in the environment: the project's modules "
            "(no `__pycache__`) were compiled from source at every start of both paths; "
            "with the cache on, both commands start faster, the cocotb path's by more.", ""]


def render(data):
    rows = data["tables"]["runs"]
    builds = data["builds"]
    by = {(r["workload"], r["path"]): r for r in rows}
    alone = [r["workload"] for r in rows if r["path"] == "native" and not _base(by, r)]
    lines = [
        "# Simulation speed: cocotb and native runs of the chip", "",
        f"Measured by `python -m sim.bench simspeed` on {environment_line(data['environment'])}.",
        "",
        "Each workload runs through `podium run <program> --sim <path> --json --outputs "
        "<dir>`, a fresh process, with both builds cached, on the default chip (the ViT on "
        "its own: the ViT's TensorCore, a 16 x 16 bfloat16 MXU and 512 KiB of VMEM, with the "
        "default HBM; its program is one of the ViT demo's, `make demo ARGS=\"--model vit\"`"
        "): `verilator` is the cocotb "
        "testbench (verification/tb/chip.py, the golden HBM device model in Python every "
        "cycle), `native` the C++ host and HBM device of sim/native.py (the golden model "
        "replays the HBM command trace after the run: \"check\"). Both give the same cycle "
        "count and outputs, bit for bit (the bench compares them and stops otherwise); the "
        f"{', '.join(alone) or 'none'} ran on the native path only{_cocotb_estimate(rows, by)}"
        ". \"run\" is the simulator's part (cocotb: the simulator "
        "process with its start-up; native: the C++ process); cycles/s is the program's cycle "
        "counter over the run's wall time and over its CPU time (the machine is shared: CPU "
        "time is the steadier figure). \"model\" is the Verilated model's share of the native "
        "run (its evaluations, timed on every 64th cycle by the host; the rest is the host and "
        "the HBM devices). \"command\" is the whole `podium run` (start-up, the Verilog read "
        "back from its cache, the HBM image, the run, the checks).",
        "",
        *_bytecode(data),
        table(["workload", "path", "cycles", "run, s", "cycles/s (run wall)", "run CPU, s",
               "cycles/s (run CPU)", "model", "check, s", "command, s", "command CPU, s",
               "cycles/s (command CPU)", "speed-up: run CPU, command CPU, command wall"],
              [[r["workload"], r["path"], f"{r['cycles']:,}", f"{r['run_seconds']:.2f}",
                f"{r['cycles'] / r['run_seconds']:,.0f}",
                f"{r['run_cpu_seconds']:.2f}", f"{r['cycles'] / r['run_cpu_seconds']:,.0f}",
                f"{r['model_share']:.1%}" if r["model_share"] else "-",
                f"{r['check_seconds']:.2f}" if r["check_seconds"] is not None else "-",
                f"{r['command_seconds']:.1f}", f"{r['command_cpu_seconds']:.1f}",
                f"{r['cycles'] / r['command_cpu_seconds']:,.0f}",
                _speedup(by, r)]
               for r in rows]),
        "",
        "A command's CPU time counts every process of it." + (
            " Under load (the load average above, on 2 cores) wall times are several times "
            "the CPU times." if data["environment"]["load_average"][0] >= 2 else ""),
        "",
        "Builds of the chips (wall time of the first build; CPU seconds of Verilator, "
        "then of the C++ compiler; peak memory of the build's processes):",
        "",
        table(["chip", "path", "build, s", "CPU s (Verilator, C++)", "peak memory, MiB"],
              [[chip, p, f"{b['seconds']:.0f}", ", ".join(f"{c:.0f}" for c in b["cpu"]),
                _mib(b["peak_rss"])]
               for chip, group in (("default", builds), ("ViT's", data.get("vit_builds", {})))
               for p, b in group.items()]),
        "",
    ]
    if "targets" in data:
        lines += [
            "## Issue 41's targets", "",
            "Each target against the rows above: \"CPU\" judges the figure by CPU time (what "
            "the machine would give one run alone), \"wall\" by wall time at this run's load. "
            "The speed-up is the issue's: of the simulators' cycles per second (its own figure, "
            "a C++ main at 6.1x the cocotb test, was one), the whole commands' beside it (a "
            "short program's command is mostly the Python start-up both paths share). \"Any "
            "host on this model\" bounds what a faster host could give: the cocotb run over "
            "the model's part of the native run.",
            "",
            table(["target", "measured", "verdict"], _targets(data, by)),
            "",
        ]
    return "\n".join(lines)
