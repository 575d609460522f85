"""The held-out protocol: the physical model (:mod:`.physical`), its three fitted parameters,
the published points each is fitted on, and every other published point held out and
reported with its error.

Fitted parameters and their fitted sets (``FITTED``; nothing else is fitted):

- ``outside_roofline``: the one calibrated step-efficiency term, the time a compiled step
  spends outside the roofline of its GEMMs, streams and collectives (fusion boundaries,
  layout copies, scheduling gaps, VPU work the rates miss), as a fraction of the roofline
  compute time: ``compute' = compute x (1 + outside_roofline)``. It is *not* an MXU
  efficiency (the MXU's is measured on the RTL and stays as measured). Fitted (least
  squares on MFU) on MaxText's three one-slice v5e points (16B, 32B, 64B).
- ``overlap`` and ``dcn_latency``: the two software terms of :mod:`.fit`, refitted on the
  physical Podium-measured v6e with ``outside_roofline`` applied, on Trillium's two GPT-3
  175B points (99% at 12 pods, 94% at 24, 4-pod base).

Every point of ``POINTS`` not in a fitted set is held out. ``evaluate`` marks each row
"fitted" or "held out"; ``agreement`` keeps the held-out rows only and
``check_protocol`` raises if a fitted point is ever reported as agreement.
"""

import functools
import math
from dataclasses import dataclass, replace

from .costs import training_costs
from .fit import fit_two_points
from .hardware import Slice
from .physical import physical_system
from .presets import PALM_SLICE
from .workloads import (
    MAXTEXT_V5E,
    MODELS,
    PALM_HFU,
    PALM_MFU,
    Parallelism,
    Training,
    Transformer,
    maxtext_model,
    training_preset,
)

__all__ = ["Point", "POINTS", "FITTED", "FITTED_POINTS", "RUNS", "Calibration", "calibrate",
           "evaluate", "agreement", "check_protocol", "summary", "maxtext_losses",
           "run_costs", "modelled_step", "TARGET_POINTS", "TARGET_MAE", "dcn_sensitivity",
           "NOT_MODELLED", "TERM_VARIANTS", "term_effects"]

TARGET_POINTS = 5.0
"""Every held-out MFU within this many points (the issue's target)."""
TARGET_MAE = 3.0
"""Mean absolute error of the held-out MFU points, in points."""

_MAXTEXT = "MaxText (AI-Hypercomputer/maxtext)"


@dataclass(frozen=True)
class Point:
    """One published figure: ``metric`` "mfu", "hfu" or "weak_scaling" (against ``base``
    slices, per-chip batch fixed) of run ``run`` (a key of RUNS) on ``slices`` slices."""

    id: str
    run: str
    slices: int
    metric: str
    published: float
    source: str
    base: int = 1


def _cube(chips):
    """A v4 / v5p slice of ``chips`` chips as 4 x 4 x k, 4 x 8 x 8, 8 x 8 x 8, 8 x 8 x 16 or
    8 x 16 x 16 (every axis a multiple
    of 4: a torus with wraparound through the optical switches, Cloud TPU v4 / v5p pages)."""
    dims = {64: (4, 4, 4), 128: (4, 4, 8), 192: (4, 4, 12), 256: (4, 8, 8), 512: (8, 8, 8),
            1024: (8, 8, 16), 2048: (8, 16, 16)}[chips]
    return Slice(dims=dims, wrap=(True, True, True))


def _maxtext_v4(name, d, heads, ffn, layers):
    return Transformer(name=name, layers=layers, d_model=d, heads=heads, kv_heads=heads,
                       head_dim=128, ffn=ffn, vocab=32000, seq=2048)


def _run(model, slice_, *, per_chip, tensor=1, recompute=1.0, master_bytes=4,
         sequence_parallel=False, dcn_overlap=True, tensor_overlap=False):
    # remat_policy minimal (recompute 0): checkpoint_dots_with_no_batch_dims (MaxText's
    # MaxText/layers/models.py), which saves the weight GEMMs' outputs only
    recompute_elementwise = recompute == 0.0

    def make(slices):
        chips = slice_.chips
        par = Parallelism(fsdp=chips // tensor, tensor=tensor)
        return slice_, Training(model=model, parallelism=par,
                                global_batch=chips * slices * per_chip,
                                recompute=recompute, master_bytes=master_bytes,
                                sequence_parallel=sequence_parallel,
                                dcn_overlap=dcn_overlap, tensor_overlap=tensor_overlap,
                                recompute_elementwise=recompute_elementwise)
    return make


_V5E = Slice.in_pod((16, 16), (16, 16))

RUNS = {
    # Trillium's published runs (batch not published: 1 sequence per chip assumed, as fit.py)
    "trillium-gpt3-175b": ("v6e", lambda n: (_V5E, training_preset("gpt3-175b", chips=256,
                                                                    slices=n))),
    "trillium-llama2-70b": ("v6e", lambda n: (_V5E, training_preset("llama2-70b", chips=256,
                                                                     slices=n))),
    "palm-540b": ("v4", lambda n: (PALM_SLICE, training_preset("palm-540b",
                                                               chips=PALM_SLICE.chips,
                                                               slices=n))),
    # MaxText's v5e runs (configs/v5e/{16,32,64}b.sh): FSDP, full remat, fp32 weights; the
    # scripts enable XLA's data-parallel all-reduce optimization and async collective
    # fusion: the DCN all-reduce overlapped layer by layer (dcn_overlap, the default)
    **{f"maxtext-v5e-{name.split('-')[1]}": (
        "v5e", _run(MODELS[name], _V5E, per_chip=per_chip))
       for name, (per_chip, _) in MAXTEXT_V5E.items()},
    # MaxText's v4 runs (configs/v4/22b.sh: v4-128, ici_fsdp 64, per_device_batch 13; 52b.sh:
    # v4-384, ici_fsdp 192, per_device_batch 7; both remat full). Their LIBTPU_INIT_ARGS set
    # only --xla_enable_async_all_gather, not the data-parallel all-reduce optimization the
    # v5e and v5p scripts enable (--xla_tpu_enable_data_parallel_all_reduce_opt): the DCN
    # gradient exchange is modelled after the backward pass, exposed (dcn_overlap=False).
    "maxtext-v4-22b": ("v4", _run(_maxtext_v4("MaxText 22B", 6144, 24, 24576, 48),
                                  _cube(64), per_chip=13, dcn_overlap=False)),
    "maxtext-v4-52b": ("v4", _run(_maxtext_v4("MaxText 52B", 12288, 32, 49152, 32),
                                  _cube(192), per_chip=7, dcn_overlap=False)),
    # MaxText's v5p runs (configs/v5p/{32,64,128}b.sh: global_parameter_scale 32 / 64 / 128,
    # ici_tensor_parallelism 4 / 4 / 8, FSDP over the rest, per_device_batch 7 / 3 / 1,
    # remat minimal: the GEMM outputs saved, no GEMM recomputed; the elementwise work and
    # the attention's batched products recomputed). Every v5p script's LIBTPU_INIT_ARGS set
    # --xla_tpu_overlap_compute_collective_tc=true: tensor_overlap (the backward pass's
    # tensor-parallel all-reduces hidden under the weight-gradient GEMMs).
    "maxtext-v5p-32b": ("v5p", _run(maxtext_model(32), _cube(64), per_chip=7, tensor=4,
                                    recompute=0.0, tensor_overlap=True)),
    "maxtext-v5p-64b": ("v5p", _run(maxtext_model(64), _cube(64), per_chip=3, tensor=4,
                                    recompute=0.0, tensor_overlap=True)),
    "maxtext-v5p-128b-256": ("v5p", _run(maxtext_model(128), _cube(128), per_chip=1,
                                         tensor=8, recompute=0.0, tensor_overlap=True)),
    "maxtext-v5p-128b-512": ("v5p", _run(maxtext_model(128), _cube(256), per_chip=1,
                                         tensor=8, recompute=0.0, tensor_overlap=True)),
    # configs/v5p/256b.sh (v5p-1024 slices: 512 chips; global_parameter_scale 256,
    # ici_tensor_parallelism 8, per_device_batch 1, remat minimal), 512b.sh (v5p-1024;
    # scale 512, tensor 8, per_device_batch 2, remat full) and 1024b.sh (v5p-2048 or v5p-4096
    # slices: 1024 or 2048 chips; scale 1024, ici_tensor_parallelism 16, per_device_batch 2,
    # remat full). One stored version of 1024b.sh reads "ici_tensor_parallelism=8\
    # ici_data_parallelism=16" (the escaped space joins the two into one argument); the
    # version modelled is the one with tensor 16 and FSDP over the rest.
    "maxtext-v5p-256b": ("v5p", _run(maxtext_model(256), _cube(512), per_chip=1, tensor=8,
                                     recompute=0.0, tensor_overlap=True)),
    "maxtext-v5p-512b": ("v5p", _run(maxtext_model(512), _cube(512), per_chip=2, tensor=8,
                                     tensor_overlap=True)),
    "maxtext-v5p-1024b-2048": ("v5p", _run(maxtext_model(1024), _cube(1024), per_chip=2,
                                           tensor=16, tensor_overlap=True)),
    "maxtext-v5p-1024b-4096": ("v5p", _run(maxtext_model(1024), _cube(2048), per_chip=2,
                                           tensor=16, tensor_overlap=True)),
}
"""Each published run: (chip preset, function of the slice count -> (slice, Training)),
configured as its run script or paper gives it. ``per_device_batch_size`` counts sequences
per chip: the global batch is per_device_batch_size x chips whatever the tensor parallelism
(a tensor-parallel group of t chips runs t x per_device_batch_size sequences). MaxText's
``v5p-N`` / ``v4-N`` name N TensorCores, N / 2 chips."""

_TRILLIUM = "Google Cloud blog, Trillium general availability (December 2024)"
_V5E_SRC = f"{_MAXTEXT} MaxText/configs/v5e/README.md"
_V4_SRC = f"{_MAXTEXT} MaxText/configs/v4/README.md"
_V5P_SRC = f"{_MAXTEXT} MaxText/configs/v5p/README.md"

POINTS = (
    Point("trillium-gpt3-12", "trillium-gpt3-175b", 12, "weak_scaling", 0.99, _TRILLIUM, 4),
    Point("trillium-gpt3-24", "trillium-gpt3-175b", 24, "weak_scaling", 0.94, _TRILLIUM, 4),
    Point("trillium-gpt3-24-base1", "trillium-gpt3-175b", 24, "weak_scaling", 0.90,
          f"{_TRILLIUM} (\"over 90%\": a lower bound)", 1),
    Point("trillium-llama2-36", "trillium-llama2-70b", 36, "weak_scaling", 0.99, _TRILLIUM, 4),
    Point("palm-mfu", "palm-540b", 2, "mfu", PALM_MFU, "PaLM, arXiv 2204.02311, section 4"),
    Point("palm-hfu", "palm-540b", 2, "hfu", PALM_HFU, "PaLM, arXiv 2204.02311, section 4"),
    *(Point(f"maxtext-v5e-{name.split('-')[1]}-{n}", f"maxtext-v5e-{name.split('-')[1]}", n,
            "mfu", mfu, _V5E_SRC)
      for name, (_, table) in MAXTEXT_V5E.items() for n, mfu in table.items()),
    *(Point(f"maxtext-v4-22b-{n}", "maxtext-v4-22b", n, "mfu", mfu, _V4_SRC)
      for n, mfu in {1: 0.567, 2: 0.552, 4: 0.543, 8: 0.532}.items()),
    *(Point(f"maxtext-v4-52b-{n}", "maxtext-v4-52b", n, "mfu", mfu,
            _V4_SRC + (" (MaxText: higher than one slice 'because of choices made by the "
                       "compiler')" if n == 2 else ""))
      for n, mfu in {1: 0.560, 2: 0.589}.items()),
    *(Point(f"{run}-{n}", run, n, "mfu", mfu, _V5P_SRC)
      for run, table in (("maxtext-v5p-32b", {1: 0.7147, 2: 0.6943}),
                         ("maxtext-v5p-64b", {1: 0.7031, 2: 0.6726}),
                         ("maxtext-v5p-128b-256", {1: 0.6868, 2: 0.6634}),
                         ("maxtext-v5p-128b-512", {1: 0.6883, 2: 0.5966}),
                         ("maxtext-v5p-256b", {1: 0.6709, 2: 0.6299}),
                         ("maxtext-v5p-512b", {1: 0.6399, 2: 0.6145}),
                         ("maxtext-v5p-1024b-2048", {1: 0.5535, 2: 0.5155}),
                         ("maxtext-v5p-1024b-4096", {1: 0.6480, 2: 0.6083}))
      for n, mfu in table.items()),
)
"""Every published point the model is compared with, with its source."""

FITTED = {
    "outside_roofline": ("maxtext-v5e-16b-1", "maxtext-v5e-32b-1", "maxtext-v5e-64b-1"),
    "overlap": ("trillium-gpt3-12", "trillium-gpt3-24"),
    "dcn_latency": ("trillium-gpt3-12", "trillium-gpt3-24"),
}
"""Each fitted parameter and the named set of published points it is fitted on."""

FITTED_POINTS = frozenset(p for ids in FITTED.values() for p in ids)

NOT_MODELLED = (
    ("MaxText v5e 128B (1-32 slices)", "its run script offloads activations to host memory "
     "and adds 16-way tensor parallelism, which the model does not represent"),
    ("MLPerf Training results of Google TPUs", "no run with a configuration the model can "
     "take was found: MLPerf Training v1.1 Open, a 480B and a 200B BERT-like encoder on 2048 "
     "and 1024 TPU v4 chips at '63% computational efficiency' (model plus rematerialization "
     "FLOPs over peak; Google Cloud blog, December 2021, as reposted by aster.cloud and "
     "analyticsindiamag.com), gives no layer shapes, batch or sharding, and the reports "
     "disagree on the time to train (about 55 h, or about 19-20 h: zdnet.com); MLPerf "
     "Training 3.1 GPT-3 175B on 4096 v5e chips trained in int8 (AQT), which the model does "
     "not represent, and the stored pages give no time to train; MLPerf Training 4.1's "
     "Trillium result is published as a ratio ('almost 4x') only"),
)
"""Published points left out, with why."""


@functools.lru_cache(maxsize=256)
def run_costs(run, slices, results=None):
    """TrainingCosts of ``run`` on ``slices`` slices of its physical system (software terms
    applied later, so that a fit costs arithmetic only)."""
    chip, make = RUNS[run]
    slice_, training = make(slices)
    system = physical_system(chip, slices=slices, slice_=slice_, results=results)
    return training_costs(system, training)


def modelled_step(costs, cal):
    """The step of ``costs`` with the calibration ``cal`` applied."""
    scaled = replace(costs, compute=costs.compute * (1 + cal.outside_roofline))
    return scaled.step(overlap=cal.overlap, dcn_latency=cal.dcn_latency)


@dataclass(frozen=True)
class Calibration:
    """The three fitted parameters."""

    outside_roofline: float
    overlap: float
    dcn_latency: float


def _value(point, cal, results=None):
    step = modelled_step(run_costs(point.run, point.slices, results), cal)
    if point.metric == "mfu":
        return step.mfu
    if point.metric == "hfu":
        return step.hfu
    base = modelled_step(run_costs(point.run, point.base, results), cal)
    return base.step / step.step


def _points(ids):
    by_id = {p.id: p for p in POINTS}
    return [by_id[i] for i in ids]


def _fit_outside(cal, results):
    pts = _points(FITTED["outside_roofline"])

    def loss(x):
        c = replace(cal, outside_roofline=x)
        return sum((_value(p, c, results) - p.published) ** 2 for p in pts)

    lo, hi = 0.0, 2.0
    g = (math.sqrt(5) - 1) / 2
    for _ in range(80):
        a, b = hi - g * (hi - lo), lo + g * (hi - lo)
        if loss(a) < loss(b):
            hi = b
        else:
            lo = a
    return (lo + hi) / 2


def _fit_software(cal, results):
    ids = FITTED["overlap"]
    assert ids == FITTED["dcn_latency"]
    (p12, p24) = _points(ids)
    run = p12.run

    def costs(n):
        c = run_costs(run, n, results)
        return replace(c, compute=c.compute * (1 + cal.outside_roofline))

    chip, make = RUNS[run]
    slice_, _ = make(1)
    targets = ((p12.slices, p12.published), (p24.slices, p24.published))
    try:
        fit = fit_two_points(None, slice_, None, base=p12.base, targets=targets, costs=costs)
        return fit.overlap, fit.dcn_latency
    except ValueError:
        pass
    # No pair meets both points exactly: least squares over the same two points (the fitted
    # rows then show their residuals).
    base, c12, c24 = costs(p12.base), costs(p12.slices), costs(p24.slices)

    def loss(o, lat):
        b = base.step(overlap=o, dcn_latency=lat).step
        return sum((b / c.step(overlap=o, dcn_latency=lat).step - e) ** 2
                   for c, (_, e) in ((c12, targets[0]), (c24, targets[1])))

    def best_latency(o):
        lo, hi = 0.0, 1e-3
        g = (math.sqrt(5) - 1) / 2
        for _ in range(60):
            a, b = hi - g * (hi - lo), lo + g * (hi - lo)
            if loss(o, a) < loss(o, b):
                hi = b
            else:
                lo = a
        return (lo + hi) / 2

    return min(((o / 100, best_latency(o / 100)) for o in range(101)),
               key=lambda ol: loss(*ol))


@functools.lru_cache(maxsize=4)
def calibrate(results=None, rounds=3):
    """Fit the three parameters on their named sets: ``outside_roofline`` on MaxText's
    one-slice v5e points, then ``overlap`` and ``dcn_latency`` on Trillium's GPT-3 points
    with it applied, alternately (``rounds`` times: the first moves the overlap window)."""
    cal = Calibration(outside_roofline=0.0, overlap=1.0, dcn_latency=0.0)
    for _ in range(rounds):
        cal = replace(cal, outside_roofline=_fit_outside(cal, results))
        overlap, latency = _fit_software(cal, results)
        cal = replace(cal, overlap=overlap, dcn_latency=latency)
    return cal


def _outside_for(point, cal, results):
    """The ``outside_roofline`` that alone would make ``point`` exact (None if none in
    [0, 5] does): the size of the change a miss asks for."""
    def f(x):
        return _value(point, replace(cal, outside_roofline=x), results) - point.published

    lo, hi = -0.5, 5.0
    if f(lo) * f(hi) > 0:
        return None
    for _ in range(60):
        mid = (lo + hi) / 2
        if f(lo) * f(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return (lo + hi) / 2


def evaluate(cal=None, results=None):
    """One row per published point: published, modelled, error (points), status ("fitted"
    or "held out"), and for a held-out miss (beyond TARGET_POINTS) the change it asks for."""
    cal = cal or calibrate(results)
    rows = []
    for p in POINTS:
        modelled = _value(p, cal, results)
        err = 100 * (modelled - p.published)
        fitted = p.id in FITTED_POINTS
        row = {"id": p.id, "run": p.run, "chip": RUNS[p.run][0], "slices": p.slices,
               "metric": p.metric + (f" (base {p.base})" if p.metric == "weak_scaling" else ""),
               "published": p.published, "modelled": modelled, "error_points": err,
               "status": "fitted" if fitted else "held out", "source": p.source,
               "needs": ""}
        if p.id == "trillium-gpt3-24-base1":
            # "over 90%": a lower bound, met when the model is at or above it
            row["error_points"] = min(0.0, err)
        if not fitted and abs(row["error_points"]) > TARGET_POINTS:
            row["needs"] = _needs(p, cal, modelled, results)
        rows.append(row)
    check_protocol(rows)
    return rows


def _needs(p, cal, modelled, results):
    step = modelled_step(run_costs(p.run, p.slices, results), cal)
    if p.metric == "weak_scaling":
        extra = step.step * (modelled / p.published - 1)
        return (f"{extra:+.3f} s in the {p.slices}-slice step ({step.step:.2f} s): the DCN "
                f"term (modelled {step.dcn:.3f} s, exposed {step.exposed_dcn:.3f} s)")
    x = _outside_for(p, cal, results)
    extra = step.step * (modelled / p.published - 1)
    what = (f"outside_roofline {x:.3f} for this run (fitted {cal.outside_roofline:.3f})"
            if x is not None else "no outside_roofline in [-0.5, 5] reaches it")
    return f"{extra:+.2f} s per step ({step.step:.2f} s modelled): {what}"


def agreement(rows):
    """The rows that may be reported as agreement: held-out ones only."""
    check_protocol(rows)
    return [r for r in rows if r["status"] == "held out"]


def check_protocol(rows):
    """Raise ValueError if a point of a fitted set is marked held out (reported as
    agreement) or a held-out point is marked fitted."""
    for r in rows:
        fitted = r["id"] in FITTED_POINTS
        if fitted and r["status"] != "fitted":
            raise ValueError(f"point {r['id']} is fitted (FITTED) but reported as "
                             f"{r['status']!r}: a fitted point is never agreement")
        if not fitted and r["status"] != "held out":
            raise ValueError(f"point {r['id']} is in no fitted set but marked "
                             f"{r['status']!r}")


def summary(rows):
    """Held-out MFU/HFU rows: count, mean absolute error, largest error, count within
    TARGET_POINTS; and the same for the held-out weak-scaling rows."""
    held = agreement(rows)
    out = {}
    for group, test in (("mfu", lambda r: r["metric"] in ("mfu", "hfu")),
                        ("weak_scaling", lambda r: r["metric"].startswith("weak"))):
        errs = [abs(r["error_points"]) for r in held if test(r)]
        out[group] = {"points": len(errs), "mae": sum(errs) / len(errs) if errs else 0.0,
                      "max": max(errs, default=0.0),
                      "within": sum(e <= TARGET_POINTS for e in errs)}
    return out


def maxtext_losses(rows):
    """Weak-scaling losses of MaxText's multislice runs (points of MFU lost against one
    slice, relative: 100 x (1 - MFU_N / MFU_1)), published and modelled. The N-slice point
    is held out; for v5e the one-slice point is fitted, so the loss is derived from a held-out
    and a fitted figure (said in the row)."""
    by = {(r["run"], r["slices"]): r for r in rows if r["run"].startswith("maxtext")}
    out = []
    for (run, n), r in sorted(by.items()):
        one = by.get((run, 1))
        if n == 1 or not one:
            continue
        pub = 100 * (1 - r["published"] / one["published"])
        mod = 100 * (1 - r["modelled"] / one["modelled"])
        out.append({"run": run, "slices": n, "published_loss": pub, "modelled_loss": mod,
                    "error_points": mod - pub, "base_status": one["status"]})
    return out


def dcn_sensitivity(cal=None, results=None):
    """MaxText's multislice weak-scaling losses against DCN schedules the model can
    express, per v5e and v5p run and slice count: ``overlapped`` (the calibrated model: the
    DCN all-reduce layer by layer under the overlap window), ``exposed`` (one exchange after
    the backward pass, on the critical path, fp32 gradients at the published NIC rate per
    chip), and the loss published. Also, per run, the least-squares line loss = a + b x
    slices through the published multislice points (a run with one such point: the line
    through it and no loss at one slice) and the per-message DCN latency a ring's latency
    term 2 (N - 1) x layers x alpha would need to give its slope b (what a latency-bound
    DCN term would have to be)."""
    cal = cal or calibrate(results)
    tables = {}
    for p in POINTS:
        if p.metric == "mfu" and RUNS[p.run][0] in ("v5e", "v5p"):
            tables.setdefault(p.run, {})[p.slices] = p.published
    out = []
    for run, table in tables.items():
        if len(table) < 2 or 1 not in table:
            continue
        chip, make = RUNS[run]
        one = modelled_step(run_costs(run, 1, results), cal)
        rows, xs, ys = [], [], []
        for n, mfu in sorted(table.items()):
            if n == 1:
                continue
            slice_, t = make(n)
            sys = physical_system(chip, slices=n, slice_=slice_, results=results)
            exposed = modelled_step(training_costs(sys, replace(t, dcn_overlap=False)), cal)
            over = modelled_step(run_costs(run, n, results), cal)
            pub = 100 * (1 - mfu / table[1])
            xs.append(n)
            ys.append(pub / 100 * one.step)
            rows.append({"run": run, "chip": chip, "slices": n, "published_loss": pub,
                         "overlapped_loss": 100 * (1 - one.step / over.step),
                         "exposed_loss": 100 * (1 - one.step / exposed.step),
                         "exposed_dcn_seconds": exposed.dcn, "step_seconds": one.step,
                         "dcn_bandwidth": sys.chip.dcn_bandwidth})
        if len(xs) == 1:
            slope = ys[0] / (xs[0] - 1)
        else:
            mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
            slope = (sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
                     / sum((x - mx) ** 2 for x in xs))
        layers = make(1)[1].model.layers
        for r in rows:
            r["slope_seconds_per_slice"] = slope
            r["implied_alpha_us"] = 1e6 * slope / (2 * layers)
        out += rows
    return out


TERM_VARIANTS = (
    ("neither", "without the two per-run terms (the model before them)",
     {"tensor_overlap": False, "recompute_elementwise": False}),
    ("recompute only", "remat minimal recomputes the elementwise work and attention",
     {"tensor_overlap": False}),
    ("both (the model)", "and the backward pass's tensor-parallel all-reduces hidden "
     "(--xla_tpu_overlap_compute_collective_tc)", {}),
    ("both + activation_embed sharded", "not applied: the norms and residual adds also on "
     "1/t of the activations (base.yml's logical axis rule activation_embed -> tensor)",
     {"sequence_parallel": True}),
)
"""Variants of the v5p runs' per-run terms for ``term_effects``: (name, what, Training
fields replaced on every v5p run; recompute_elementwise only where the run sets it)."""


def term_effects(cal=None, results=None):
    """What each per-run term of the v5p runs does to the held-out points: per variant of
    ``TERM_VARIANTS``, every v5p point's error (points) and the held-out MFU/HFU summary
    (mean absolute error, within TARGET_POINTS) over all points. Returns (rows, summaries)."""
    cal = cal or calibrate(results)
    errors = {}
    summaries = []
    for name, what, fields in TERM_VARIANTS:
        errs = []
        for p in POINTS:
            if p.metric not in ("mfu", "hfu") or p.id in FITTED_POINTS:
                continue
            chip, make = RUNS[p.run]
            slice_, t = make(p.slices)
            if p.run.startswith("maxtext-v5p"):
                t = replace(t, **{k: v and (k != "recompute_elementwise"
                                            or t.recompute_elementwise)
                                  for k, v in fields.items()})
                costs = training_costs(physical_system(chip, slices=p.slices, slice_=slice_,
                                                       results=results), t)
            else:
                costs = run_costs(p.run, p.slices, results)
            step = modelled_step(costs, cal)
            err = 100 * ((step.mfu if p.metric == "mfu" else step.hfu) - p.published)
            errs.append(abs(err))
            if p.run.startswith("maxtext-v5p"):
                errors.setdefault(p.id, {"id": p.id, "published": p.published})[name] = err
        summaries.append({"variant": name, "what": what, "points": len(errs),
                          "mae": sum(errs) / len(errs),
                          "within": sum(e <= TARGET_POINTS for e in errs)})
    return list(errors.values()), summaries
