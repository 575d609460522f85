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
import statistics
import subprocess
import time

from sim.runner import BUILD, ROOT, build, generated, run, verilator_env

__all__ = ["measure", "write_results", "environment", "environment_line", "median_seconds",
           "table", "results_directory", "dumps", "RESULTS", "REPEATS"]

RESULTS = ROOT / "docs" / "results"
REPEATS = 3
"""Wall times are medians of this many runs: build machines are shared and noisy."""


def measure(block, config, module, testcase, spec, *, tag="bench", seed=1, reuse=False):
    """Run measurement ``testcase`` of testbench ``module`` on ``block``/``config`` with the
    measurement parameters ``spec`` (a dict); return the testbench's report (a dict, or what the
    testbench wrote) in ``{"report": ..., "build_seconds": ..., "run_seconds": ...,
    "setup_seconds": ...}``: ``build_seconds`` is how long the design's build took (whenever
    it was built), ``setup_seconds`` what this call spent before simulating (the design
    generated or read back, built or found built).

    ``reuse``: return a report measured before on the same build (same Verilog hash) with the
    same spec and seed instead of simulating again (simulation is deterministic; use it for
    measurements that take many minutes); its ``run_seconds`` is then None, since the wall
    time of that run was measured in another environment than this one's.
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
                    "setup_seconds": setup_seconds}
    report = test_dir.parent / f"{test_dir.name}.report.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    passed, _ = run(built, module, test_dir=test_dir, testcase=rf"\.{testcase}$", seed=seed,
                    extra_env={"PODIUM_PERF": json.dumps({**spec, "report": str(report)})})
    if not passed:
        raise RuntimeError(f"measurement {module}.{testcase} did not run (skipped) on "
                           f"{built.design.name}")
    result = {"report": json.loads(report.read_text()), "build": built.directory.name,
              "run_seconds": time.perf_counter() - start}
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


def environment():
    """Where and with what a benchmark runs, measured now: the machine and its load, the
    tools' versions, the commit and whether the tree was clean (``clean``; the commit then
    reads "<hash> with uncommitted changes" on the page)."""
    import amaranth
    import cocotb
    import numpy

    commit = _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])
    # Clean: no tracked file differs from the commit (untracked files are not looked at).
    status = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain",
                             "--untracked-files=no"], capture_output=True, text=True)
    clean = status.returncode == 0 and not status.stdout.strip()
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
        "verilator": _first_line(["verilator", "--version"], env=verilator_env()),
        "cxx": _first_line(["g++", "--version"]),
        "commit": commit + ("" if clean else " with uncommitted changes"),
        "clean": clean,
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


def dumps(data):
    """A results JSON file's text."""
    return json.dumps(data, indent=1) + "\n"


def write_results(name, tables, env, render, quick=False, **extra):
    """Write ``tables`` (a dict of lists of row dicts), ``env`` and ``extra`` (more of what
    the page shows) to ``<name>.json`` in :func:`results_directory`, then ``render(data)`` of
    that file's contents to ``<name>.md``, and print the page."""
    directory = results_directory(quick)
    text = dumps({"benchmark": name, "environment": env, "tables": tables,
                  **({"quick": True} if quick else {}), **extra})
    (directory / f"{name}.json").write_text(text)
    page = render(json.loads(text))
    (directory / f"{name}.md").write_text(page)
    print(page)
