"""``python -m sim.bench podspeed``: the pod's simulation speed and builds, cocotb and native.

A collective program (every chip: 16 KiB of its HBM into VMEM, ``ITERATIONS`` 2-D fp32
all-reduces of it, back to HBM) runs on the pods of TensorCores with HBM controllers of the
pod tests (verification/tb/pod_programs.py ``tensor_pod_config``: 4x4 int8 MXUs, 32 KiB of VMEM), a
2x2 and a 4x4 torus, through sim/pod_native.py: natively (the C++ host, sim/native_main.cpp)
in each build flavour (``flat``: the chip inlined into the pod's model; ``hier``: the chip a
Verilator hier_block, verilated once and instantiated per node; ``nodes``: the router a
hier_block too), and through cocotb
(verification/tb/pod_programs.py ``run_pod_program``) where ``COCOTB_PODS`` says. Every run of a
pod gives the same cycle count and outputs (checked here; the regression checks the traces
too, verification/tests/test_native.py). Each build's wall time, CPU seconds (Verilator, the
C++ compiler) and peak memory are the build's own record (a cached build keeps its first
build's). A separate page from simspeed (the chip's): its JSON is one run's environment.
"""

import json

import numpy as np

from sim.measure import environment, environment_line, table, write_results

__all__ = ["bench", "render", "PAGE", "program"]

PAGE = "podspeed"
ITERATIONS = 32
"""All-reduces per run."""
PODS = {"2x2": (2, 2), "4x4": (4, 4)}
COCOTB_PODS = ("2x2",)
"""The pods also run through cocotb (the 4x4's cocotb build and run are left out: a flat
build of sixteen chips for cocotb, and a run at its speed)."""
FLAVOURS = {"2x2": ("flat", "hier", "nodes"), "4x4": ("hier", "nodes")}
"""The build flavours run on each pod. The 4x4's flat build is left out: Verilator alone
wrote 406 MB of C++ (the 2x2's flat build 77 MB) in more than 4 CPU minutes at 6.2 GB of
memory before it was stopped; its C++ compile, by the 2x2's rate (229 CPU seconds for 77 MB),
about 20 CPU minutes."""


def program(iterations=ITERATIONS):
    """The assembly of every chip's program."""
    return "\n".join([
        "li r1, 16384", "dma.shape 0, r1, r0, r0", "dma.load r0, r0, s3", "wait ici, s3",
        f"li r5, {iterations}",
        "loop:", "li r1, 0", "li r2, 4096", "ici.coll all_reduce_2d, 0, fp32, r1, r2",
        f"addi r5, r5, {0xFFFFFFFF}", "bne r5, r0, loop",
        "signal ici, s2", "wait dma, s2",
        "li r1, 16384", "dma.shape 0, r1, r0, r0", "li r2, 65536", "dma.store r2, r0, s4",
        "wait dma, s4", "halt", ""])


def _inputs(chips):
    rng = np.random.default_rng(1)
    return [{0: rng.integers(-8, 8, 4096).astype(np.float32).tobytes()} for _ in range(chips)]


def _row(name, flavour, path, run, build):
    r0 = run.results[0]
    return {"pod": name, "flavour": flavour, "path": path, "cycles": run.cycles,
            "program_cycles": r0.steps, "run_seconds": run.seconds,
            "run_cpu_seconds": run.cpu_seconds, "check_seconds": run.check_seconds,
            "build": build}


def bench(quick=False):
    from podium.asm import assemble
    from sim.pod_native import build_native_pod, cocotb_pod, native_pod
    from sim.runner import build, generated
    from verification.tb.pod_programs import tensor_pod_config

    env = environment()
    words = assemble(program(2 if quick else ITERATIONS))
    rows = []
    for name, dims in PODS.items():
        if quick and name != "2x2":
            continue
        pod = tensor_pod_config(dims, memory="hbm")
        design = generated("pod", pod)
        images = _inputs(pod.chips)
        reads = [[(65536, 16384)]] * pod.chips
        outs = {}
        for flavour in FLAVOURS[name]:
            b = build_native_pod(design, pod, flavour=flavour)
            run = native_pod(pod, [words] * pod.chips, images, reads=reads, design=design,
                             flavour=flavour)
            outs[flavour] = run
            rows.append(_row(name, flavour, "native", run, {
                "seconds": b.seconds, "cpu": b.cpu, "peak_rss": b.peak_rss or None}))
        if name in COCOTB_PODS:
            b = build(design)
            run = cocotb_pod(pod, [words] * pod.chips, images, reads=reads)
            outs["cocotb"] = run
            rows.append(_row(name, "flat", "verilator", run, {
                "seconds": float((b.directory / ".built").read_text()),
                "cpu": json.loads((b.directory / "build_cpu.json").read_text()),
                "peak_rss": b.peak_rss or None}))
        first = next(iter(outs.values()))
        for key, run in outs.items():
            if run.cycles != first.cycles or any(
                    (a.steps, a.counters, a.hbm.read(65536, 16384)) !=
                    (b.steps, b.counters, b.hbm.read(65536, 16384))
                    for a, b in zip(run.results, first.results, strict=True)):
                raise RuntimeError(f"{name} pod: {key} disagrees with the first run")
    write_results(PAGE, {"runs": rows}, env, render, quick=quick, iterations=ITERATIONS)


def _mib(value):
    return f"{value / 2**20:,.0f}" if value else "not recorded"


def render(data):
    rows = data["tables"]["runs"]
    lines = [
        "# Simulation speed: the pod, cocotb and native, flat and hierarchical builds", "",
        f"Measured by `python -m sim.bench podspeed` on "
        f"{environment_line(data['environment'])}.",
        "",
        f"Every chip of a pod of TensorCores with HBM controllers (the pod tests' 4x4 int8 "
        f"TensorCore, 32 KiB of VMEM) loads 16 KiB of its HBM, runs {data['iterations']} 2-D "
        f"fp32 all-reduces of it and stores it back (sim/podspeed.py). `native` is the C++ "
        f"host and HBM devices of sim/pod_native.py (the golden device model replays every "
        f"chip's command trace afterwards: \"check\"), `verilator` the cocotb testbench "
        f"(verification/tb/pod_programs.py `run_pod_program`, the golden device model in "
        f"Python every cycle). Build `flat`: one model of the whole pod; `hier`: the chip a "
        f"Verilator hier_block (verilated and compiled once, instantiated per node); `nodes`: "
        f"the router a hier_block too. Every run "
        f"of a pod gives the same cycles and outputs. cycles: clock cycles the host "
        f"simulated (load, run, read-back, drain); program: chip 0's cycle counter; run: the "
        f"simulator's wall time (cocotb: with its start-up).",
        "",
        table(["pod", "build", "path", "cycles", "program cycles", "run, s",
               "cycles/s (wall)", "run CPU, s", "cycles/s (CPU)", "check, s"],
              [[r["pod"], r["flavour"], r["path"], f"{r['cycles']:,}",
                f"{r['program_cycles']:,}", f"{r['run_seconds']:.2f}",
                f"{r['cycles'] / r['run_seconds']:,.0f}",
                f"{r['run_cpu_seconds']:.2f}" if r["run_cpu_seconds"] else "-",
                f"{r['cycles'] / r['run_cpu_seconds']:,.0f}" if r["run_cpu_seconds"] else "-",
                f"{r['check_seconds']:.2f}" if r["check_seconds"] else "-"] for r in rows]),
        "",
        "Builds (wall time of the first build, whenever it ran and with however many jobs "
        "and whatever load it had: the CPU seconds are the steadier figure; CPU seconds of "
        "Verilator, then of the C++ compiler; peak memory of the build's processes, not "
        "recorded for a cocotb build found built):",
        "",
        table(["pod", "build", "path", "build, s", "CPU s (Verilator, C++)", "peak memory, MiB"],
              [[r["pod"], r["flavour"], r["path"], f"{r['build']['seconds']:.0f}",
                ", ".join(f"{c:.0f}" for c in r["build"]["cpu"]) if r["build"]["cpu"]
                else "-", _mib(r["build"]["peak_rss"])] for r in rows]),
        "",
    ]
    return "\n".join(lines)
