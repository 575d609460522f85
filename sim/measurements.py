"""The measurements a design-space sweep can ask for (sim/sweep.py): a name mapped to a
function of one configuration that returns a dict of metrics.

Each is built on a benchmark's own measurement function (sim/mxu_perf.py, hbm_perf.py,
ici_perf.py, tensorcore_perf.py), so a sweep point is measured exactly as ``make bench``
measures it: through ``sim.measure.measure``, the shared build cache, the testbench checking
every result against the golden model. Metrics are exact (cycles, counts, ratios of them);
keys ending in ``_seconds`` are wall times, reported but never compared.

A measurement also names the blocks it measures, its options (with defaults and checks: a bad
option is refused as ``measurement.options.<name>``), its headline metrics (the first is the
one plotted by default) and which way each is better, for Pareto fronts, and what is
synthesized for the figures beside them: the block itself, except for the ICI network, where
it is one router (the network repeats it; a 4 x 4 torus is 16 of them).
"""

from dataclasses import dataclass, field

import numpy as np

from sim.ici_perf import COARSE, SOURCE_QUEUE, WARMUP, WINDOW, run_loads, saturation
from spec.config import ConfigError, check, check_choice, check_int, check_keys
from spec.ici import ICIHarnessConfig
from verification.models.ici import ideal_throughput
from verification.traffic.hbm import PATTERNS

__all__ = ["Measurement", "MEASUREMENTS", "get_measurement", "wall_time"]


def wall_time(metric):
    """Whether ``metric`` is a wall time (compared never, reported always)."""
    return metric.endswith("_seconds")


@dataclass(frozen=True)
class Measurement:
    """One measurement of the registry.

    ``run(config, seed, **options)`` measures one configuration of one of ``blocks``,
    returning at least the metrics of ``reports`` (headline ones first: ``metrics``), which
    :meth:`measure` keeps;
    ``options`` maps each option to ``(default, checker)``, ``checker(path, value)`` raising a
    ConfigError; ``validate(config, options)`` refuses a configuration the measurement cannot
    run (before anything runs); ``better`` maps a metric to ``"max"`` or ``"min"``;
    ``synthesized``: the block whose synthesis figures stand for the configuration (default:
    the measured block itself); ``synthesis``: whether a sweep synthesizes unless its spec
    says (off for the whole chip, whose synthesis takes far longer than its measurement).
    """

    name: str
    summary: str
    blocks: tuple
    run: object
    options: dict
    metrics: tuple
    reports: tuple
    better: dict
    validate: object = field(default=None)
    synthesized: str = None
    synthesis: bool = True

    def measure(self, config, seed, options):
        """Run on ``config``: the metrics of ``reports``, in that order."""
        metrics = self.run(config, seed, **options)
        missing = [m for m in self.reports if m not in metrics]
        if missing:
            raise RuntimeError(f"measurement {self.name} did not report {', '.join(missing)}")
        return {m: metrics[m] for m in self.reports}

    def resolve(self, given):
        """The options of ``given`` (a dict) checked and completed with the defaults."""
        if not isinstance(given, dict):
            raise ConfigError("measurement.options", f"must be a mapping, got {given!r}")
        check_keys("measurement.options", given, tuple(self.options),
                   f"option(s) of {self.name}")
        out = {}
        for name, (default, checker) in self.options.items():
            out[name] = given.get(name, default)
            if name in given:
                checker(f"measurement.options.{name}", out[name])
        return out


def _optional_int(lo, hi):
    def checker(path, value):
        if value is not None:
            check_int(path, value, lo, hi)
    return checker


def _optional_number(path, value):
    ok = value is None or (isinstance(value, int | float) and not isinstance(value, bool)
                           and value > 0)
    check(path, ok, "a positive number (or null)", value)


def _int(lo, hi):
    return lambda path, value: check_int(path, value, lo, hi)


def _loads(path, value):
    ok = (isinstance(value, list) and value and all(
        isinstance(v, int | float) and not isinstance(v, bool) and 0 < v <= 1 for v in value)
          and value == sorted(value))
    check(path, ok, "an ascending list of offered loads in (0, 1]", value)


def _load(path, value):
    ok = isinstance(value, int | float) and not isinstance(value, bool) and 0 < value <= 1
    check(path, ok, "an offered load in (0, 1]", value)


# MXU --------------------------------------------------------------------------------------

def _mxu_dims(config, options):
    return (options["m"], options["k"] or 4 * config.rows, options["n"] or 4 * config.cols)


def _mxu_validate(config, options):
    m, _, n = _mxu_dims(config, options)
    need = -(-n // config.cols) * m
    if need > config.acc_depth:
        raise ConfigError("acc_depth", f"must hold ceil(n / cols) * m = {need} rows for the "
                                       f"measured GEMM, got {config.acc_depth}")


def _mxu_gemm(config, seed, **options):
    from sim.mxu_perf import measure_gemm

    return measure_gemm(config, *_mxu_dims(config, options), tag="sweep", seed=seed)


# HBM --------------------------------------------------------------------------------------

def _hbm_pattern(config, seed, *, pattern):
    from sim.hbm_perf import bound, measure_pattern

    r = measure_pattern(config, pattern, f"sweep-{config.name}-{pattern}-{seed}", seed=seed)
    limit, _ = bound(config, pattern, r["refresh_share"])
    window = r["window"]
    return {"cycles": window["cycles"], "efficiency": r["efficiency"], "bound": limit,
            "of_bound": r["efficiency"] / limit, "refresh_share": r["refresh_share"],
            "queue_full": window["queue_full"], "acts": window["acts"],
            "build_seconds": r["build_seconds"]}


# ICI --------------------------------------------------------------------------------------

def _ici_validate(config, options):
    try:
        ICIHarnessConfig(ici=config)
    except ConfigError as e:
        raise ConfigError(e.path.removeprefix("ici."), e.message) from None


def _ici_harness(config):
    return ICIHarnessConfig(ici=config, source_queue=SOURCE_QUEUE)


def _ici_saturation(config, seed, *, length, loads, warmup, window):
    c = saturation(_ici_harness(config), length, coarse=loads, seed=seed, warmup=warmup,
                   window=window)
    return {"saturation": c["saturation"], "saturation_accepted": c["saturation_accepted"],
            "peak": c["peak"], "zero_load_latency": c["zero_load_latency"],
            "loads_measured": len(c["points"]), "ideal": c["ideal"],
            "build_seconds": c["build_seconds"]}


def _ici_latency(config, seed, *, length, load, warmup, window):
    points, build_seconds, _ = run_loads(_ici_harness(config), length, [load], seed=seed,
                                         warmup=warmup, window=window)
    p = points[0]
    return {"latency": p["latency"], "accepted": p["accepted"], "offered": p["offered"],
            "refused": p["refused"], "ideal": ideal_throughput(config),
            "build_seconds": build_seconds}


_ICI_RUN = {"length": (1, _int(1, 64)), "warmup": (WARMUP, _int(0, 1_000_000)),
            "window": (WINDOW, _int(100, 10_000_000))}


# TensorCore on the chip ------------------------------------------------------------------------

def _chip_validate(config, options):
    check_choice("tensorcore.mxu.fmt", config.tensorcore.mxu.fmt, ("int8", "bfloat16"))


def _hbm_peak(chip):
    """Peak HBM bytes per cycle of ``chip``: every pseudo-channel's data bus always busy."""
    hbm = chip.hbm
    return hbm.pseudo_channels * hbm.access_bytes / hbm.timing.burst_cycles


def _tensorcore_gemm(config, seed, *, n, bw):
    from sim.tensorcore_perf import measure_gemm

    return measure_gemm(config, n, np.random.default_rng(seed), bw or _hbm_peak(config),
                        sim="verilator")   # any chip of the sweep (native: HBM chips only)


def _digits(config, seed):
    from podium.runner import run
    from podium.workloads.digits import compile_digits, load
    from sim import programs  # noqa: F401  (registers the verilator backend)

    program = compile_digits(config.tensorcore, load(seed), config.tensorcore.mxu.fmt)
    result, outputs = run(program, sim="verilator", chip=config)
    if result.status != "done":
        raise RuntimeError(f"the chip stopped with {result.error.name} at {result.error_pc}")
    classes = np.argmax(outputs["Y"], axis=1)
    meta = program.metadata
    c = result.counters
    return {"accuracy": float(np.mean(classes == np.array(meta["labels"]))),
            "matches_numpy": bool(np.array_equal(classes, meta["classes"])),
            "cycles": c["cycles"], "build_seconds": c["build_seconds"],
            "run_seconds": c["run_seconds"]}


MEASUREMENTS = {m.name: m for m in [
    Measurement(
        "mxu_gemm", "one GEMM (M x K x N, default 64 x 4 rows x 4 cols) on the MXU with "
        "streams that never idle (sim/mxu_perf.py measure_gemm)", ("mxu",), _mxu_gemm,
        {"m": (64, _int(1, 65535)), "k": (None, _optional_int(1, 65535)),
         "n": (None, _optional_int(1, 65535))},
        ("utilization", "cycles"),
        ("utilization", "cycles", "m", "k", "n", "scalesim_utilization", "weight_wait", "stall",
         "build_seconds"),
        {"utilization": "max", "cycles": "min"}, _mxu_validate),
    Measurement(
        "hbm_pattern", "one traffic pattern at saturation on the HBM controller "
        "(sim/hbm_perf.py measure_pattern); efficiency = data-bus busy / cycles x PCs",
        ("hbm",), _hbm_pattern,
        {"pattern": ("rand_mix", lambda path, v: check_choice(path, v, PATTERNS))},
        ("efficiency", "of_bound"),
        ("efficiency", "of_bound", "cycles", "bound", "refresh_share", "queue_full", "acts",
         "build_seconds"),
        {"efficiency": "max", "of_bound": "max"}),
    Measurement(
        "ici_saturation", "uniform random traffic on the ICI network in its test harness, "
        "each offered load on a fresh network (sim/ici_perf.py saturation): saturation as "
        "BookSim defines it, the highest stable offered load (accepted within 2%, latency "
        "under 3x zero-load, no refusal; the coarse loads refined by 0.02 at the knee), "
        "flits/node/cycle; peak = the highest accepted rate", ("ici",), _ici_saturation,
        {"loads": (COARSE, _loads), **_ICI_RUN},
        ("saturation", "zero_load_latency", "peak"),
        ("saturation", "zero_load_latency", "peak", "saturation_accepted", "loads_measured",
         "ideal", "build_seconds"),
        {"saturation": "max", "zero_load_latency": "min", "peak": "max"}, _ici_validate,
        "ici_router"),
    Measurement(
        "ici_latency", "mean packet latency (cycles) of uniform random traffic at one offered "
        "load on a fresh ICI network (sim/ici_perf.py run_loads)", ("ici",), _ici_latency,
        {"load": (0.1, _load), **_ICI_RUN}, ("latency", "accepted"),
        ("latency", "accepted", "offered", "refused", "ideal", "build_seconds"),
        {"latency": "min", "accepted": "max"}, _ici_validate, "ici_router"),
    Measurement(
        "tensorcore_gemm", "an n x n x n GEMM compiled for the chip's TensorCore, run from HBM "
        "on the RTL chip and checked (sim/tensorcore_perf.py measure_gemm); roofline and cycle "
        "model at bw bytes/cycle of HBM (default: the chip's HBM peak)", ("chip",),
        _tensorcore_gemm, {"n": (64, _int(1, 4096)), "bw": (None, _optional_number)},
        ("cycles", "utilization"),
        ("cycles", "utilization", "roofline", "roofline_fraction", "mxu_busy_fraction",
         "exposed_dma_fraction", "model_cycles", "model_error", "build_seconds", "run_seconds"),
        {"cycles": "min", "utilization": "max"}, _chip_validate,
        synthesis=False),
    Measurement(
        "digits", "the UCI digits MLP workload (podium/workloads/digits.py) classifying the "
        "test split on the RTL chip", ("chip",), _digits, {},
        ("accuracy", "cycles"),
        ("accuracy", "cycles", "matches_numpy", "build_seconds", "run_seconds"),
        {"accuracy": "max", "cycles": "min"}, _chip_validate,
        synthesis=False),
]}


def get_measurement(name, block):
    """The measurement ``name`` of :data:`MEASUREMENTS` for ``block``, or a ConfigError naming
    ``measurement`` (or ``block``) and what is allowed."""
    if name not in MEASUREMENTS:
        raise ConfigError("measurement", f"must be one of {', '.join(MEASUREMENTS)}, "
                                         f"got {name!r}")
    m = MEASUREMENTS[name]
    if block not in m.blocks:
        raise ConfigError("block", f"must be {' or '.join(m.blocks)} for measurement "
                                   f"{name}, got {block!r}")
    return m
