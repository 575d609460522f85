"""``python -m sim.bench simspeed``: the chip's simulation speed on both run paths, side by side.

Each workload (the digits demo, a 512^3 int8 GEMM, on the default chip) is compiled to a
program file and run by ``podium run <program> --sim <path> --json`` as a subprocess, once
with ``verilator`` (cocotb: the chip's testbench, the golden HBM device model in Python) and
once with ``native`` (sim/native.py: a C++ host and device, the golden model checking the
command trace afterwards). Both builds exist before the runs (built first, their build times
and peak memory recorded by the build), so the wall time is that of a cached ``podium run``:
start-up, reading the generated Verilog back, the image, the simulation, the checks. Both
paths must give the same cycle count and outputs (the regression checks the traces too,
verification/tests/test_native.py); a run that does not raises.
"""

import json
import resource
import subprocess
import sys
import time

from sim.measure import environment, environment_line, table, write_results
from sim.runner import BUILD, ROOT

__all__ = ["bench", "render", "PAGE"]

PAGE = "simspeed"
PATHS = ("verilator", "native")
MAX_STEPS = 20_000_000
"""Every run's cycle budget (``--max-steps``): above the default of the verilator backend,
which the 512^3 GEMM (about 2.2 million cycles) passes."""


def _children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _programs(quick):
    """``[(name, program file)]``: the workloads compiled for the default chip."""
    from podium import compiler
    from podium.workloads import digits
    from spec.tensorcore import TensorCoreConfig

    directory = BUILD / "simspeed"
    directory.mkdir(parents=True, exist_ok=True)
    config = TensorCoreConfig()
    out = []
    n = 128 if quick else 512
    for name, make in (("digits demo (int8)", lambda: digits.compile_digits(config)),
                       (f"GEMM {n}^3 (int8)", lambda: compiler.gemm(config, n, n, n))):
        path = directory / f"{name.split()[0].lower()}-{n}.json"
        make().save(path)
        out.append((name, path))
    return out


def _build_records():
    """Build time, CPU seconds and peak memory of each path's build of the default chip."""
    from sim import native
    from sim.runner import build, generated
    from spec.chip import ChipConfig

    chip = ChipConfig()
    design = generated("chip", chip)
    b = build(design)
    cocotb = {"seconds": float((b.directory / ".built").read_text()),
              "cpu": json.loads((b.directory / "build_cpu.json").read_text()),
              "peak_rss": b.peak_rss or None}
    n = native.build_native(design, chip)
    return {"verilator": cocotb,
            "native": {"seconds": n.seconds, "cpu": n.cpu, "peak_rss": n.peak_rss or None}}


def _run(path, sim):
    """One ``podium run`` of program file ``path`` on ``sim``: its JSON report, wall time and
    CPU seconds (all its processes)."""
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sim.cli", "run", str(path), "--sim", sim,
                           "--max-steps", str(MAX_STEPS), "--json"], capture_output=True,
                          text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"podium run {path} --sim {sim} failed: {done.stderr.strip()}")
    return json.loads(done.stdout), wall, _children_cpu() - cpu


def bench(quick=False):
    env = environment()
    builds = _build_records()
    rows = []
    for name, path in _programs(quick):
        results = {}
        for sim in PATHS:
            report, wall, cpu = _run(path, sim)
            if report["status"] != "done":
                raise RuntimeError(f"{name} on {sim}: {report['status']} {report['error']}")
            results[sim] = report
            rows.append({"workload": name, "path": sim, "cycles": report["cycles"],
                         "run_seconds": report["run_seconds"],
                         "run_cpu_seconds": report.get("run_cpu_seconds"),
                         "check_seconds": report.get("check_seconds"),
                         "command_seconds": wall, "command_cpu_seconds": cpu,
                         "hbm_commands": report.get("hbm_commands")})
        ref, nat = results["verilator"], results["native"]
        if ref["cycles"] != nat["cycles"] or any(ref.get(k) != nat.get(k) for k in (
                "matches_reference", "matches_numpy")):
            raise RuntimeError(f"{name}: the paths disagree: {ref} vs {nat}")
    write_results(PAGE, {"runs": rows}, env, render, quick=quick, builds=builds)


def _mib(value):
    return f"{value / 2**20:,.0f}" if value else "not recorded"


def _base(by, row):
    """The cocotb row of ``row``'s workload."""
    return by[(row["workload"], "verilator")]


def render(data):
    rows = data["tables"]["runs"]
    builds = data["builds"]
    by = {(r["workload"], r["path"]): r for r in rows}
    lines = [
        "# Simulation speed: cocotb and native runs of the chip", "",
        f"Measured by `python -m sim.bench simspeed` on {environment_line(data['environment'])}.",
        "",
        "Each workload runs on the default chip through `podium run <program> --sim <path> "
        "--json`, a fresh process, with both builds cached: `verilator` is the cocotb "
        "testbench (verification/tb/chip.py, the golden HBM device model in Python every "
        "cycle), `native` the C++ host and HBM device of sim/native.py (the golden model "
        "replays the HBM command trace after the run: \"check\"). Both give the same cycle "
        "count and outputs. \"run\" is the simulator's part (cocotb: the simulator process "
        "with its start-up; native: the C++ process); cycles/s is the program's cycle "
        "counter over the run's wall time, and over its CPU time where measured (the machine "
        "is shared: CPU time is the steadier figure). \"command\" is the whole `podium run` "
        "(start-up, the Verilog read back from its cache, the HBM image, the run, the "
        "checks).",
        "",
        table(["workload", "path", "cycles", "run, s", "cycles/s (run wall)", "run CPU, s",
               "cycles/s (run CPU)", "check, s", "command, s", "command CPU, s",
               "cycles/s (command CPU)", "speed-up: command wall, CPU"],
              [[r["workload"], r["path"], f"{r['cycles']:,}", f"{r['run_seconds']:.2f}",
                f"{r['cycles'] / r['run_seconds']:,.0f}",
                f"{r['run_cpu_seconds']:.2f}" if r["run_cpu_seconds"] else "-",
                f"{r['cycles'] / r['run_cpu_seconds']:,.0f}" if r["run_cpu_seconds"]
                else "-",
                f"{r['check_seconds']:.2f}" if r["check_seconds"] is not None else "-",
                f"{r['command_seconds']:.1f}", f"{r['command_cpu_seconds']:.1f}",
                f"{r['cycles'] / r['command_cpu_seconds']:,.0f}",
                f"{_base(by, r)['command_seconds'] / r['command_seconds']:.1f}x, "
                f"{_base(by, r)['command_cpu_seconds'] / r['command_cpu_seconds']:.1f}x"]
               for r in rows]),
        "",
        "The run's CPU time of the cocotb path is not measured apart from its command's (the "
        "simulator is a process of the command's); a command's CPU time counts every process "
        "of it. Under load (the load average above, on 2 cores) wall times are several times "
        "the CPU times.",
        "",
        "Builds of the default chip (wall time of the first build; CPU seconds of Verilator, "
        "then of the C++ compiler; peak memory of the build's processes):",
        "",
        table(["path", "build, s", "CPU s (Verilator, C++)", "peak memory, MiB"],
              [[p, f"{b['seconds']:.0f}", ", ".join(f"{c:.0f}" for c in b["cpu"]),
                _mib(b["peak_rss"])] for p, b in builds.items()]),
        "",
    ]
    return "\n".join(lines)
