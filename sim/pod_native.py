"""Programs on the RTL pod of TensorCore chips with HBM controllers, two ways: the ``native``
path (the chip's C++ host, sim/native_main.cpp, for every chip of the pod, with no cocotb)
and the cocotb path (verification/tb/pod_programs.py ``run_pod_program``), the same run cycle
for cycle.

A run is one program per chip and an HBM image per chip. The host loads every chip's program
over its AXI4-Lite control port, clears and starts every chip, waits until no chip runs (at
most ``max_steps`` cycles, then every chip is aborted: status ``timeout``), reads every chip's
outcome (status, registers, semaphores, counters, error) and waits for every chip's HBM
controller to drain. Every pseudo-channel of every chip has an HBM device: on the native path
the C++ device of sim/native_device.h, one per chip, each writing its chip's command trace,
which the golden device model (verification/models/hbm.py) checks after the run; on the
cocotb path the golden device model itself (verification/tb/hbm.py). HBM images go in, and
the requested regions come out, through the golden model's backdoor (the controller's address
map and ECC).

Both paths return a :class:`PodRun`: a :class:`~podium.isasim.Result` per chip (its ``hbm``
reads the requested regions), the cycles the host simulated, and the wall and CPU times.
"""

import base64
import shutil
import tempfile
import time
from pathlib import Path

from podium.isasim import Result
from podium.runner import register_pod
from sim import progress
from sim.native import (
    MAIN,
    _device,
    _read_store,
    _write_store,
    build_host,
    host_spec,
    io_header,
    program_writes,
    run_host,
)
from sim.runner import BUILD, HIER_BLOCK, generated
from spec.isa import Error
from verification.models.hbm import backdoor_dump, backdoor_write, replay

__all__ = ["PodRun", "native_pod", "cocotb_pod", "build_native_pod", "MAX_CYCLES"]

MAX_CYCLES = 100_000_000
"""The default cycle budget of a pod run."""


class PodRun:
    """A pod run: ``results`` (a :class:`~podium.isasim.Result` per chip, its ``hbm``
    reading the run's ``reads``), ``cycles`` (clock cycles the host simulated, reset aside),
    ``seconds`` (wall time of the simulation), ``cpu_seconds`` (its CPU time, native only),
    ``build`` (the build's wall seconds, CPU seconds of each step and peak memory in bytes,
    native only)."""

    def __init__(self, results, cycles, seconds, cpu_seconds=None, build=None, check_seconds=0):
        self.results = results
        self.cycles = cycles
        self.seconds = seconds
        self.cpu_seconds = cpu_seconds
        self.build = build
        self.check_seconds = check_seconds


class _Regions:
    """HBM regions read after a run (``{(address, length): bytes}``): only those may be
    read."""

    def __init__(self, regions):
        self._regions = regions

    def read(self, address, length):
        for (start, n), data in self._regions.items():
            if start <= address and address + length <= start + n:
                return data[address - start:address - start + length]
        raise ValueError(f"{length} bytes at {address:#x} were not read back after the run")


def _checked(pod, programs, images, reads):
    chip = pod.chip
    if pod.tensorcore is None or chip.memory != "hbm":
        raise ValueError("a pod run needs a pod of TensorCores with HBM controllers "
                         "(PodConfig with tensorcore and chip memory 'hbm')")
    if len(programs) != pod.chips or len(images) != pod.chips:
        raise ValueError(f"one program and one HBM image per chip: the pod has {pod.chips} "
                         f"chips, got {len(programs)} programs and {len(images)} images")
    reads = [sorted(r) for r in (reads or [[]] * pod.chips)]
    if len(reads) != pod.chips:
        raise ValueError(f"reads: one list of (address, length) per chip ({pod.chips})")
    return reads


FLAVOURS = ("flat", "hier", "nodes")
"""How the pod is built: ``flat`` (the chip's module inlined into the pod, one model of
everything: Verilator optimises across the chips but compiles every chip's code), ``hier``
(the chip's module a Verilator hier_block: verilated and compiled once as a library, each
node an instance of it), ``nodes`` (the chip's module and the router's both hier_blocks:
otherwise Verilator writes the router's code once per node, specialised to the instance)."""


def _hier_block(design, name):
    """``design`` with its module ``name`` marked ``/*verilator hier_block*/``."""
    import dataclasses
    import re

    pattern = re.compile(rf"(module {re.escape(name)}\([^)]*\);\n)")
    if not pattern.search(design.verilog):
        raise ValueError(f"no module {name} in {design.name}")
    return dataclasses.replace(design, verilog=pattern.sub(rf"\1  {HIER_BLOCK}\n",
                                                           design.verilog, count=1))


def chip_hier_block(design):
    """``design`` (a pod's) with its chip module marked ``/*verilator hier_block*/``."""
    return _hier_block(design, f"{design.name}_chip")


def node_hier_blocks(design, pod):
    """``design`` (a pod's) with its chip module and its router module (one module for
    every node) marked ``/*verilator hier_block*/``."""
    return _hier_block(chip_hier_block(design), f"podium_ici_router_{pod.ici.suffix}")


def build_native_pod(design, pod, *, flavour="flat", jobs=None, force=False):
    """Build the native simulator of the pod ``design`` (configuration ``pod``) in
    ``flavour`` (:data:`FLAVOURS`); a :class:`~sim.native.NativeBuild`, cached under
    build/native by a hash of the Verilog, the sidecar, the C++ sources and the flags. A
    design with hier_block modules is built with ``--hierarchical`` (each such module
    verilated once, as a library)."""
    if flavour not in FLAVOURS:
        raise ValueError(f"flavour must be one of {', '.join(FLAVOURS)}, got {flavour!r}")
    if flavour == "hier":
        design = chip_hier_block(design)
    elif flavour == "nodes":
        design = node_hier_blocks(design, pod)
    return build_host(design, MAIN, {"io.h": io_header(design, pod.chip.hbm, pod.chips)},
                      jobs=jobs, force=force)


def _result(values, counters, tc, regions, extra):
    """A chip's Result from its outcome words (status, registers, semaphores, counters,
    error, error PC) or the cocotb report's fields."""
    status = values["status"]
    assert not status & 1, f"status {status:#x}: still running"
    if values["timeout"] and not status & 2:    # aborted by the host (a chip done stays done)
        state, err = "timeout", Error.NONE
    else:
        state = "done" if status & 2 else "error"
        err = Error(values["error"]) if status & 4 else Error.NONE
    return Result(status=state, error=err, steps=counters.get("cycles", 0),
                  error_pc=values["error_pc"], pc=0, registers=values["registers"],
                  semaphores=values["semaphores"], vmem=None, hbm=_Regions(regions),
                  counters={**counters, **extra})


def native_pod(pod, programs, images, *, reads=None, max_steps=MAX_CYCLES, traces=None,
               check=True, design=None, flavour="hier"):
    """Run ``programs`` (instruction words, one list per chip) on the pod ``pod`` (a
    PodConfig of TensorCores with HBM controllers) with HBM ``images`` (``{address: bytes}``
    per chip) in the native simulator; a :class:`PodRun` whose results' ``hbm`` read the
    regions ``reads`` (per chip, ``[(address, length), ...]``). ``traces``: a directory for
    each chip's HBM command trace (``chip<n>.trace``; default: not kept); ``check``: replay
    them through the golden device model (a broken rule raises AssertionError). ``design``:
    the pod's generated design (default: generated from ``pod``); ``flavour``: its build
    (:data:`FLAVOURS`; ``hier`` by default: it builds in about half the CPU time of ``flat``
    and runs faster, docs/results/podspeed.md)."""
    reads = _checked(pod, programs, images, reads)
    design = design or generated("pod", pod)
    built = build_native_pod(design, pod, flavour=flavour)
    hbm = pod.chip.hbm
    runs = BUILD / "native-runs"
    runs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{design.name}-", dir=runs))
    files = work / "run"
    for n, image in enumerate(images):
        device = _device(hbm)
        for address, data in sorted(image.items()):
            backdoor_write(device, hbm, address, bytes(data))
        _write_store(f"{files}.image{n}", device, hbm.words)
    csr = design.sidecar["csr"]
    regs = csr["registers"]
    # verification/tb/pod_programs.py run_pod_program: every chip's program, then every chip
    # cleared with its start PC set, then every chip started.
    load = [w for n, words in enumerate(programs) for w in program_writes(n, words, regs["IMEM"])]
    for n in range(pod.chips):
        load += [(n, regs["CONTROL"], 4), (n, regs["START_PC"], 0)]
    load += [(n, regs["CONTROL"], 1) for n in range(pod.chips)]
    (work / "spec").write_text(host_spec(hbm, csr, pod.tensorcore.semaphores, max_steps, load,
                                         traces=bool(traces or check)))
    progress.stage(f"simulating {design.name} natively, at most {max_steps:,} cycles")
    r, seconds, cpu_seconds = run_host(built, work)
    begin = time.perf_counter()
    if check:
        for n in range(pod.chips):
            with open(f"{files}.trace{n}") as f:
                replay(_device(hbm), f, r["edges"] - 1)
    check_seconds = time.perf_counter() - begin
    if traces:
        Path(traces).mkdir(parents=True, exist_ok=True)
        for n in range(pod.chips):
            shutil.copyfile(f"{files}.trace{n}", Path(traces) / f"chip{n}.trace")
    names, n_sems = csr["counters"], pod.tensorcore.semaphores
    per = 1 + 16 + n_sems + len(names) + 2
    values = r["values"]
    results = []
    for n in range(pod.chips):
        v = values[n * per:(n + 1) * per]
        out = _device(hbm)
        _read_store(f"{files}.dump{n}", out, hbm.words)
        regions = {(a, k): backdoor_dump(out, hbm, a, k) for a, k in reads[n]}
        counters = dict(zip(names, v[17 + n_sems:-2], strict=True))
        results.append(_result({"status": v[0], "registers": v[1:17],
                                "semaphores": v[17:17 + n_sems], "error": v[-2],
                                "error_pc": v[-1], "timeout": r["timeout"]},
                               counters, pod.tensorcore, regions, {}))
    shutil.rmtree(work)     # kept when the run failed: its files say why
    return PodRun(results, r["edges"] + 1, seconds, cpu_seconds,
                  {"seconds": built.seconds, "cpu": built.cpu, "peak_rss": built.peak_rss,
                   "cached": built.cached}, check_seconds)


def cocotb_pod(pod, programs, images, *, reads=None, max_steps=MAX_CYCLES, traces=None,
               seed=1):
    """The same run as :func:`native_pod` through the cocotb testbench
    (verification/tb/pod_programs.py ``run_pod_program``, the golden device model on every
    pseudo-channel checking each command as it comes); ``traces``: a directory for each
    chip's HBM command trace (``chip<n>.trace``)."""
    from sim.measure import measure

    reads = _checked(pod, programs, images, reads)
    spec = {"programs": [list(map(int, p)) for p in programs],
            "images": [[{"address": a, "data": base64.b64encode(bytes(d)).decode()}
                        for a, d in sorted(image.items())] for image in images],
            "reads": reads, "budget": max_steps}
    if traces:
        Path(traces).mkdir(parents=True, exist_ok=True)
        spec["traces"] = [str((Path(traces) / f"chip{n}.trace").resolve())
                          for n in range(pod.chips)]
    done = measure("pod", pod, "verification.tb.pod_programs", "run_pod_program", spec,
                   tag="programs", seed=seed)
    report = done["report"]
    results = []
    for n, chip in enumerate(report["chips"]):
        regions = {(a, k): base64.b64decode(d) for (a, k), d in
                   zip(reads[n], chip["reads"], strict=True)}
        results.append(_result({**chip, "timeout": report["timeout"]}, chip["counters"],
                               pod.tensorcore, regions, {}))
    return PodRun(results, report["cycles"], done["run_seconds"])


register_pod("native", native_pod, default=f"{MAX_CYCLES:,} cycles")
register_pod("verilator", cocotb_pod, default=f"{MAX_CYCLES:,} cycles")
