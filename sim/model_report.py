"""The scaling report: ``bench()`` computes every table of docs/results/scaling.md (printed,
and written as markdown, as JSON in the shape of the other benchmark results, and as PNG
plots), the published-figure presets beside the Podium-measured ones (sensitivity tables:
datasheet presets only).

``python -m sim.bench scaling`` runs it (``python -m sim.bench model`` too, after the
held-out report, sim/model_protocol.py); ``podium model report`` too.
"""

import statistics
from dataclasses import replace

import numpy as np

from podium.model.calibrate import measured_terms
from podium.model.costs import (
    critical_batch,
    inference,
    training_costs,
    training_step,
    unet_images_per_second,
    weak_scaling_efficiency,
)
from podium.model.fit import BASE_SLICES, TARGETS, fit_two_points, trillium_fit
from podium.model.hardware import CHIPS, SLICES, Efficiency
from podium.model.presets import (
    INFERENCE_SLICE,
    PALM_SLICE,
    SDXL,
    inference_preset,
    system,
    training,
)
from podium.model.workloads import MAXTEXT_V5E, MODELS, PALM_HFU, PALM_MFU, TRAINING
from sim.measure import (
    environment,
    environment_line,
    median_seconds,
    results_directory,
    table,
    write_results,
    wrote,
)

__all__ = ["bench", "render", "tables", "PAGE"]

PAGE = "scaling"
"""The results files' name: docs/results/scaling.json and .md."""

LLAMA_CLAIM = (36, 0.99)
"""Llama-2 70B on Trillium: 99% weak-scaling efficiency from 4 to 36 slices (Google Cloud's
Trillium blog, December 2024)."""

PRESET_COLUMNS = (("v6e", False), ("v6e", True))
"""Every table shows Trillium with datasheet peaks beside Trillium with Podium's measured
efficiencies (the "podium" preset)."""


def _label(chip, measured):
    return f"{chip} measured" if measured else f"{chip} datasheet"


def _pct(x, digits=1):
    return "-" if x is None else f"{100 * x:.{digits}f}%"


def _num(x, digits=3):
    return "-" if x is None else f"{x:.{digits}g}"


def _efficiencies(chip, measured, workload, slices, base, results):
    """Weak-scaling efficiency of ``workload`` at each of ``slices`` against ``base``."""
    def step(n):
        sys = system(chip, slices=n, measured=measured, results=results)
        return training_step(sys, training(workload, sys))
    reference = step(base)
    return {n: weak_scaling_efficiency(step(n), reference) for n in slices}


def _breakdown_row(label, workload, slices, st):
    return {"preset": label, "workload": workload, "slices": slices, "chips": st.chips,
            "compute_s": st.compute, "exposed_ici_s": st.exposed_ici,
            "exposed_dcn_s": st.exposed_dcn, "sync_s": st.sync, "step_s": st.step,
            "mfu": st.mfu, "hfu": st.hfu, "memory_gb": st.memory_bytes / 1e9,
            "fits": st.fits}


def _gpt3(results):
    rows, why = [], []
    fit = trillium_fit()
    for chip, measured in PRESET_COLUMNS:
        effs = _efficiencies(chip, measured, "gpt3-175b", [n for n, _ in TARGETS], BASE_SLICES,
                             results)
        for n, published in TARGETS:
            rows.append({"preset": _label(chip, measured), "slices": n, "chips": 256 * n,
                         "baseline_slices": BASE_SLICES, "published": published,
                         "model": effs[n], "error_points": 100 * (effs[n] - published)})
    for n in (BASE_SLICES, *[n for n, _ in TARGETS]):
        sys = system("v6e", slices=n)
        costs = training_costs(sys, training("gpt3-175b", sys))
        st = costs.step(overlap=fit.overlap, dcn_latency=fit.dcn_latency)
        why.append({"slices": n, "dcn_bandwidth_s": costs.dcn_bandwidth,
                    "dcn_latency_s": costs.dcn_steps * fit.dcn_latency,
                    "window_left_s": max(0.0, fit.overlap * costs.compute - costs.fsdp_ici),
                    "exposed_dcn_s": st.exposed_dcn, "step_s": st.step})
    return rows, why


def _llama(results, quick):
    slices = [4, 12, 36] if quick else list(range(4, 37, 4))
    rows = []
    for chip, measured in PRESET_COLUMNS:
        effs = _efficiencies(chip, measured, "llama2-70b", slices, BASE_SLICES, results)
        for n in slices:
            published = LLAMA_CLAIM[1] if n == LLAMA_CLAIM[0] else None
            rows.append({"preset": _label(chip, measured), "slices": n, "chips": 256 * n,
                         "published": published, "model": effs[n]})
    return rows


def _solve(f, lo, hi, target):
    """The x in [lo, hi] where the increasing ``f`` reaches ``target`` (bisection); None if
    ``target`` is outside [f(lo), f(hi)]."""
    if not f(lo) <= target <= f(hi):
        return None
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def _palm_closers(sys, work):
    """Each single term that, changed alone from the v4 datasheet preset, would bring the
    model's MFU down to PaLM's (sensitivities, not fits: what the model would have to be
    wrong about). MFU rises with every one of them, so each is found by bisection."""
    def mfu(sys_):
        return training_step(sys_, work).mfu

    def efficiency(name):
        return lambda e: mfu(replace(sys, efficiency=replace(sys.efficiency, **{name: e})))

    link = sys.chip.ici_link_bandwidth
    terms = (
        ("efficiency.mxu", 1.0, efficiency("mxu"), "MXU cycles at this fraction of the "
         "streaming bound"),
        ("efficiency.ici_collective", 1.0, efficiency("ici_collective"), "ring collectives "
         "at this fraction of the link bound"),
        ("system.overlap", sys.overlap, lambda o: mfu(replace(sys, overlap=o)), "FSDP "
         "gathers and reductions hide under this fraction of the compute"),
        ("chip.ici_link_bandwidth, GB/s", link / 1e9,
         lambda g: mfu(replace(sys, chip=replace(sys.chip, ici_link_bandwidth=g * 1e9))),
         "per link and direction"))
    return [{"term": term, "preset": value, "meaning": meaning,
             "value_for_published_mfu": _solve(f, 1e-3 * value, value, PALM_MFU)}
            for term, value, f, meaning in terms]


def _palm(results):
    rows = []
    fit = trillium_fit()
    for measured in (False, True):
        sys = system("v4", slices=2, slice_=PALM_SLICE, measured=measured, results=results)
        work = training("palm-540b", sys)
        costs = training_costs(sys, work)
        for overlap, note in ((fit.overlap, "fitted on Trillium"), (0.0, "none: a sensitivity"),
                              (1.0, "full: a sensitivity")):
            st = costs.step(overlap=overlap, dcn_latency=fit.dcn_latency)
            rows.append({"preset": _label("v4", measured), "overlap": overlap,
                         "overlap_from": note, "recompute": work.recompute, "mfu": st.mfu,
                         "hfu": st.hfu, "published_mfu": PALM_MFU, "published_hfu": PALM_HFU,
                         "mfu_error_points": 100 * (st.mfu - PALM_MFU),
                         "hfu_error_points": 100 * (st.hfu - PALM_HFU),
                         "step_s": st.step, "compute_s": st.compute, "tensor_s": st.tensor,
                         "fsdp_ici_s": st.fsdp_ici, "exposed_ici_s": st.exposed_ici,
                         "exposed_dcn_s": st.exposed_dcn})
    datasheet = system("v4", slices=2, slice_=PALM_SLICE)
    return rows, _palm_closers(datasheet, training("palm-540b", datasheet))


def _step_at(st, mfu):
    """The step a published ``mfu`` means for the model FLOPs of ``st``."""
    return st.model_flops / (mfu * st.peak_flops)


def _maxtext(results):
    """MaxText's published MFU on 1 to 32 v5e-256 slices beside the model's (v5e datasheet
    and v5e measured), and the weak-scaling efficiency against one slice of both."""
    rows = []
    for measured in (False, True):
        for workload, (per_chip, published) in MAXTEXT_V5E.items():
            steps = {}
            for n in published:
                sys = system("v5e", slices=n, measured=measured, results=results)
                steps[n] = training_step(sys, training(workload, sys))
            base_step = _step_at(steps[1], published[1])
            for n, mfu in published.items():
                step_at = _step_at(steps[n], mfu)
                rows.append({"preset": _label("v5e", measured), "workload": workload,
                             "sequences_per_chip": per_chip, "slices": n,
                             "chips": steps[n].chips, "mfu": steps[n].mfu,
                             "published_mfu": mfu,
                             "mfu_error_points": 100 * (steps[n].mfu - mfu),
                             "weak_scaling": weak_scaling_efficiency(steps[n], steps[1]),
                             "published_weak_scaling": mfu / published[1],
                             "step_s": steps[n].step, "published_step_s": step_at,
                             "published_slowdown_s": step_at - base_step,
                             "dcn_s": steps[n].dcn, "exposed_dcn_s": steps[n].exposed_dcn})
    return rows


def _maxtext_closers():
    """The DCN efficiency (fraction of the NICs' rate) that, with the gradient exchange
    exposed after the backward pass (as PaLM ran it), gives MaxText's published weak scaling
    on the v5e datasheet preset: a sensitivity, not a fit."""
    rows = []
    for workload, (_, published) in MAXTEXT_V5E.items():
        base = system("v5e")
        reference = training_step(base, replace(training(workload, base), dcn_overlap=False))
        for n in (2, 8, max(published)):
            sys = system("v5e", slices=n)
            work = replace(training(workload, sys), dcn_overlap=False)

            def efficiency(e, sys=sys, work=work, reference=reference):
                slow = replace(sys, efficiency=replace(sys.efficiency, dcn=e))
                return weak_scaling_efficiency(training_step(slow, work), reference)

            rows.append({"workload": workload, "slices": n,
                         "published_weak_scaling": published[n] / published[1],
                         "exposed_at_nic_rate": efficiency(1.0),
                         "dcn_efficiency_for_published": _solve(efficiency, 1e-3, 1.0,
                                                                published[n] / published[1])})
    return rows


def _absolute_term():
    """What the missing absolute term would do, outside the issue's two-parameter rule: the
    one MXU efficiency that makes the model's one-slice MFU of MaxText's three v5e runs right
    on average (datasheet preset otherwise), applied unchanged to PaLM on v4."""
    def work(chip, e, name, **kw):
        sys = system(chip, **kw)
        sys = replace(sys, efficiency=Efficiency(mxu=e))
        return training_step(sys, training(name, sys))

    def mean_mfu(e):
        return statistics.mean(work("v5e", e, w).mfu for w in MAXTEXT_V5E)

    mxu = _solve(mean_mfu, 0.5, 1.0, statistics.mean(p[1] for _, p in MAXTEXT_V5E.values()))
    rows = []
    for w, (_, published) in MAXTEXT_V5E.items():
        st = work("v5e", mxu, w)
        rows.append({"case": f"{w}, 1 v5e-256 slice", "role": "fitted on", "mxu": mxu,
                     "mfu": st.mfu, "published_mfu": published[1],
                     "mfu_error_points": 100 * (st.mfu - published[1]), "hfu": None,
                     "published_hfu": None, "hfu_error_points": None})
    st = work("v4", mxu, "palm-540b", slices=2, slice_=PALM_SLICE)
    rows.append({"case": "palm-540b, 2 x 3072 v4 chips", "role": "checked", "mxu": mxu,
                 "mfu": st.mfu, "published_mfu": PALM_MFU,
                 "mfu_error_points": 100 * (st.mfu - PALM_MFU), "hfu": st.hfu,
                 "published_hfu": PALM_HFU, "hfu_error_points": 100 * (st.hfu - PALM_HFU)})
    return rows


def _breakdowns(results):
    rows = []
    for chip, measured in (*PRESET_COLUMNS, ("v5e", False), ("v5p", False)):
        for workload in ("gpt3-175b", "llama2-70b", "mixtral-8x7b"):
            for n in (1, 12, 24):
                sys = system(chip, slices=n, measured=measured, results=results)
                rows.append(_breakdown_row(_label(chip, measured), workload, n,
                                           training_step(sys, training(workload, sys))))
    sys = system("v4", slices=2, slice_=PALM_SLICE)
    rows.append(_breakdown_row(_label("v4", False), "palm-540b", 2,
                               training_step(sys, training("palm-540b", sys))))
    return rows


def _critical(results):
    rows = []
    for chip, measured in (*PRESET_COLUMNS, ("v5e", False)):
        for workload in ("gpt3-175b", "llama2-70b"):
            for n in (4, 12, 24, 32):
                sys = system(chip, slices=n, measured=measured, results=results)
                work = training(workload, sys)
                cb = critical_batch(sys, work)
                rows.append({"preset": _label(chip, measured), "workload": workload,
                             "slices": n, "chips": sys.chips,
                             "preset_batch": work.global_batch, **cb})
    return rows


def _versus_chips(results, quick):
    pods = [1, 4, 12, 24, 32, 36] if quick else list(range(1, 37))
    rows = []
    for chip, measured in PRESET_COLUMNS:
        for workload in ("gpt3-175b", "llama2-70b"):
            effs = _efficiencies(chip, measured, workload, pods, 1, results)
            effs4 = _efficiencies(chip, measured, workload, [p for p in pods if p >= 4],
                                  BASE_SLICES, results)
            rows += [{"preset": _label(chip, measured), "workload": workload, "pods": p,
                      "chips": 256 * p, "efficiency_base_1": effs[p],
                      "efficiency_base_4": effs4.get(p)} for p in pods]
    return rows


def _inference(results):
    llama, sdxl = [], []
    for chip, measured in (*PRESET_COLUMNS, ("v5e", False)):
        sys = system(chip, slice_=INFERENCE_SLICE, measured=measured, results=results)
        for batch in (1, 64):
            inf = replace(inference_preset("llama2-70b"), batch=batch)
            r = inference(sys, inf)
            llama.append({"preset": _label(chip, measured), "chips": sys.chips, "batch": batch,
                          "prompt": inf.prompt, "output": inf.output,
                          "prefill_tokens_per_s": r.prefill_tokens_per_second,
                          "time_to_first_token_s": r.prefill_seconds,
                          "decode_tokens_per_s": r.decode_tokens_per_second,
                          "decode_step_ms": 1e3 * r.decode_step_seconds,
                          "memory_gb_per_chip": r.memory_bytes / 1e9, "fits": r.fits})
        one = system(chip, measured=measured, results=results, slice_=INFERENCE_SLICE)
        for images in (1, 4):
            ips = unet_images_per_second(one, SDXL, images=images) / one.chips
            sdxl.append({"preset": _label(chip, measured), "images_per_chip": images,
                         "steps": SDXL.steps, "images_per_s_per_chip": ips})
    return llama, sdxl


def _speed(results, quick):
    """Median wall time of one configuration of each kind, from the preset's name to the
    result (reading the measured results included)."""
    repeats = 5 if quick else 21

    def step(chip, workload, slices, measured=False, slice_=None):
        sys = system(chip, slices=slices, measured=measured, results=results, slice_=slice_)
        return training_step(sys, training(workload, sys))

    def llama():
        sys = system("v6e", slice_=INFERENCE_SLICE)
        return inference(sys, inference_preset("llama2-70b"))

    cases = (
        ("training step: gpt3-175b, v6e datasheet, 24 slices", 1,
         lambda: step("v6e", "gpt3-175b", 24)),
        ("training step: gpt3-175b, v6e measured, 24 slices (reads the JSON files)", 1,
         lambda: step("v6e", "gpt3-175b", 24, measured=True)),
        ("training step: mixtral-8x7b (MoE), v6e, 12 slices", 1,
         lambda: step("v6e", "mixtral-8x7b", 12)),
        ("training step: palm-540b, v4, 2 slices", 1,
         lambda: step("v4", "palm-540b", 2, slice_=PALM_SLICE)),
        ("inference: llama2-70b prefill and decode, v6e 2x4", 1, llama),
        ("inference: SDXL UNet, v6e", 1,
         lambda: unet_images_per_second(system("v6e"), SDXL, images=1)),
        ("critical global batch search: llama2-70b, v6e, 24 slices", 3 * 62,
         lambda: critical_batch(system("v6e", slices=24),
                                training("llama2-70b", system("v6e", slices=24)))),
        ("the two-parameter fit on GPT-3 175B (done once per process)", None,
         lambda: fit_two_points(CHIPS["v6e"], SLICES["v6e"], "gpt3-175b")))
    return [{"case": name, "configurations": n,
             "median_s": median_seconds(f, 3 if n is None else repeats)}
            for name, n, f in cases]


def _terms(results):
    terms = measured_terms(CHIPS["v6e"], results)
    rows = [{"term": name, "value": t.value, "measured": t.measured, "origin": t.origin,
             "source": t.source} for name, t in terms.items()]
    return rows


def _presets():
    rows = []
    for key, chip in CHIPS.items():
        rows.append({"preset": key, "chip": chip.name, "peak_bf16_tflops": chip.peak_flops()
                     / 1e12, "hbm_gb": chip.hbm_bytes / 1e9,
                     "hbm_gb_per_s": chip.hbm_bandwidth / 1e9,
                     "ici_link_gb_per_s": chip.ici_link_bandwidth / 1e9,
                     "ici_ports": chip.ici_ports, "dcn_gb_per_s_per_chip": chip.dcn_bandwidth
                     / 1e9})
    return rows


def _fits(results):
    """The model's fit (v6e datasheet) and, for comparison only, the same fit on the v6e
    measured preset (None if no pair of values meets both points there)."""
    fit = trillium_fit()
    measured = system("v6e", measured=True, results=results)
    try:
        refit = fit_two_points(measured.chip, SLICES["v6e"], "gpt3-175b",
                               efficiency=measured.efficiency)
    except ValueError:
        refit = None
    rows = []
    for name, unit in (("overlap", "fraction of compute"),
                       ("dcn_latency", "s per DCN ring step per message")):
        rows.append({"parameter": name, "value": getattr(fit, name), "unit": unit,
                     "refit_on_measured": getattr(refit, name) if refit else None})
    return rows


def tables(*, results=None, quick=False):
    """Every table of the report as {name: [row, ...]} (JSON-ready: plain numbers,
    fractions not percents)."""
    gpt3, why = _gpt3(results)
    llama, sdxl = _inference(results)
    palm, closers = _palm(results)
    return {
        "fit": _fits(results),
        "gpt3_multislice": gpt3,
        "gpt3_drop": why,
        "llama2_multislice": _llama(results, quick),
        "palm": palm,
        "palm_closers": closers,
        "maxtext_v5e": _maxtext(results),
        "maxtext_dcn": _maxtext_closers(),
        "absolute_term": _absolute_term(),
        "breakdown": _breakdowns(results),
        "critical_batch": _critical(results),
        "efficiency_vs_chips": _versus_chips(results, quick),
        "inference_llama2_70b": llama,
        "inference_sdxl": sdxl,
        "podium_terms": _terms(results),
        "speed": _speed(results, quick),
        "presets": _presets(),
    }


def _attention_share():
    """The range of the attention terms' share of the model FLOPs of the MaxText models."""
    shares = []
    for workload in MAXTEXT_V5E:
        m = MODELS[workload]
        shares.append(12 * m.layers * m.heads * m.head_dim * m.seq
                      / m.training_flops_per_token())
    return f"{100 * min(shares):.1f}% to {100 * max(shares):.1f}%"


def _maxtext_summary(rows):
    """The MaxText comparison in two sentences, its ranges read off the datasheet rows."""
    rows = [r for r in rows if r["preset"] == _label("v5e", False)]

    def span(values, form):
        return f"{form.format(min(values))} to {form.format(max(values))}"

    def lost(n):
        return span([100 * (1 - r["published_weak_scaling"]) for r in rows if r["slices"] == n],
                    "{:.1f}")

    last = max(r["slices"] for r in rows)
    return ("Two misses. On one slice the model's MFU is "
            + span([r["mfu_error_points"] for r in rows if r["slices"] == 1], "{:+.1f}")
            + " points from MaxText's (the datasheet preset's upper bound, as for PaLM). The "
            f"model's weak scaling never falls below {_pct(min(r['weak_scaling'] for r in rows))}"
            ", since with these batches the DCN all-reduce hides under the overlap "
            f"window, while MaxText lost {lost(2)} points at 2 slices and {lost(last)} at "
            f"{last}: a slowdown "
            + span([r["published_slowdown_s"] / r["dcn_s"] for r in rows if r["slices"] > 1],
                   "{:.1f}")
            + " times the model's whole DCN all-reduce, so even a DCN exchange left entirely "
            "exposed would not explain it.")


def _batch(x, chips):
    if x is None:
        return "never"
    if x == float("inf"):
        return "always"
    return f"{x:,.0f} ({x / chips:.2g}/chip)"


def _refit(t, name, scale, form):
    value = next(r["refit_on_measured"] for r in t["fit"] if r["parameter"] == name)
    return "no fit" if value is None else form.format(value * scale)


def _introduction(t, env):
    """The title and what the report is: where it ran, the two presets, which efficiency
    terms this run measured and which it assumed."""
    terms = {r["term"]: r for r in t["podium_terms"]}
    measured = [n for n, r in terms.items() if r["measured"]]
    return [
        "# Scaling model results",
        "",
        f"Computed by `sim.model_report.bench` (`python -m sim.bench scaling`, also run by "
        f"`python -m sim.bench model`; `podium model report`) "
        f"on {environment_line(env)}. The model, its equations and every "
        "assumption are in [docs/model.md](../model.md).",
        "",
        "Two presets in every table but the sensitivity ones (datasheet only): **v6e "
        "datasheet** (Trillium's published peaks, every efficiency 1.0) and **v6e measured** "
        "(the `podium` preset: Trillium's size with the efficiency terms of Podium's own RTL "
        "benchmarks, read from docs/results/*.json); the PaLM and MaxText tables set the v4 "
        "and v5e chips the same two ways. "
        "Terms measured in this run: "
        + ("; ".join(f"{n} {_num(terms[n]['value'], 4)} ({terms[n]['origin']})"
                     for n in measured) if measured else "none")
        + ". Assumed: " + (", ".join(n for n in terms if n not in measured) or "none")
        + " (why: the table of Podium-measured terms).",
        "",
    ]


def _fit_section(t):
    """The two fitted parameters: their values on the datasheet preset (the model's) and the
    same fit on the measured one."""
    fit = trillium_fit()
    return [
        "## Fitted parameters",
        "",
        "Weak-scaling efficiency = (throughput_N / throughput_base) / (N / N_base) with the "
        f"per-chip batch fixed; baseline {BASE_SLICES} slices (1024 chips). The model has two "
        "fitted parameters, fitted on the two GPT-3 175B Trillium points and on nothing else:",
        "",
        table(["parameter", "value (fitted on v6e datasheet: the model's)",
               "the same fit on v6e measured (comparison only)", "meaning"],
              [["overlap", f"{fit.overlap:.3f}", _refit(t, "overlap", 1, "{:.3f}"),
                "fraction of compute time under which FSDP and DCN traffic hides"],
               ["dcn_latency", f"{fit.dcn_latency * 1e6:.1f} us",
                _refit(t, "dcn_latency", 1e6, "{:.1f} us"),
                "per DCN ring step and message (one message per layer)"]]),
        "",
    ]


def _gpt3_section(t):
    """GPT-3 175B on Trillium, the points the parameters are fitted on, and what causes its
    drop in efficiency."""
    return [
        "## GPT-3 175B on Trillium multislice (the fitted points)",
        "",
        table(["preset", "slices", "chips", "published", "model", "model - published"],
              [[r["preset"], r["slices"], r["chips"], _pct(r["published"]), _pct(r["model"], 2),
                f"{r['error_points']:+.2f} points"] for r in t["gpt3_multislice"]]),
        "",
        "The v6e measured rows keep the two software terms fitted on the datasheet preset: "
        "they show what Podium's measured efficiencies do to the same software. The fit is "
        "balanced on the part of the overlap window the FSDP traffic leaves free (0.33 s of "
        "a 3.5 s step at 12 slices), so a term that lengthens the compute (MXU, HBM) widens "
        "the window and raises the efficiency, and one that lengthens the FSDP traffic (the "
        "ring collective efficiency) narrows it and lowers it.",
        "",
        "What causes 99 -> 94 (v6e datasheet): the DCN all-reduce's latency term 2(N-1) x "
        "layers x dcn_latency grows linearly with the slices while its bandwidth term "
        "2(N-1)/N S/B saturates; once the DCN time outgrows the overlap window the FSDP "
        "traffic leaves free, every further slice adds to the step.",
        "",
        table(["slices", "DCN bandwidth term, s", "DCN latency term, s", "window left, s",
               "exposed DCN, s", "step, s"],
              [[r["slices"], f"{r['dcn_bandwidth_s']:.3f}", f"{r['dcn_latency_s']:.3f}",
                f"{r['window_left_s']:.3f}", f"{r['exposed_dcn_s']:.3f}",
                f"{r['step_s']:.3f}"] for r in t["gpt3_drop"]]),
        "",
    ]


def _llama_section(t):
    """Llama-2 70B from 4 to 36 slices beside the published efficiency (not fitted)."""
    return [
        "## Llama-2 70B, 4 to 36 slices (not fitted)",
        "",
        table(["preset", "slices", "chips", "published", "model"],
              [[r["preset"], r["slices"], r["chips"], _pct(r["published"]), _pct(r["model"], 2)]
               for r in t["llama2_multislice"]]),
        "",
    ]


def _palm_section(t):
    """PaLM 540B on two v4 slices beside its published MFU and HFU, and what one term alone
    would have to be to match it."""
    return [
        "## PaLM 540B on 6144 TPU v4 chips (not fitted)",
        "",
        "Two 3072-chip slices (12x16x16, no wraparound: no 3072-chip v4 shape is a torus) "
        "over the DCN, 12-way tensor x 256-way FSDP per slice, global batch 2048 x 2048 "
        "tokens, attention not fused; the recomputed fraction is set from PaLM's own HFU / MFU "
        "ratio (a property of the workload, r = "
        f"{t['palm'][0]['recompute']:.2f}); the cross-pod gradient exchange runs after the "
        "backward pass, exposed (PaLM's Pathways schedule). The overlap fitted on Trillium is "
        "the model's value; the other two rows are sensitivities, not fits.",
        "",
        table(["preset", "overlap", "MFU", "published MFU", "HFU", "published HFU",
               "MFU error", "HFU error", "step, s", "compute, s", "tensor-parallel, s",
               "FSDP on ICI, s", "exposed DCN, s"],
              [[r["preset"], f"{r['overlap']:.2f} ({r['overlap_from']})", _pct(r["mfu"]),
                _pct(r["published_mfu"]), _pct(r["hfu"]), _pct(r["published_hfu"]),
                f"{r['mfu_error_points']:+.1f} points", f"{r['hfu_error_points']:+.1f} points",
                f"{r['step_s']:.2f}", f"{r['compute_s']:.2f}", f"{r['tensor_s']:.2f}",
                f"{r['fsdp_ici_s']:.2f}", f"{r['exposed_dcn_s']:.3f}"] for r in t["palm"]]),
        "",
        "The datasheet preset runs every MXU cycle and every link at its peak, so its MFU is "
        "an upper bound. What one term alone would have to be for the v4 datasheet preset to "
        "give PaLM's 46.2% MFU (sensitivities, not fits; none of these values is published):",
        "",
        table(["term", "preset value", "value giving 46.2% MFU", "meaning"],
              [[r["term"], _num(r["preset"]), _num(r["value_for_published_mfu"]),
                r["meaning"]] for r in t["palm_closers"]]),
        "",
    ]


def _maxtext_section(t, plots):
    """MaxText on v5e slices beside its published MFU, the misses summarized, the DCN that
    would explain its weak scaling, and the plot."""
    return [
        "## MaxText on 1 to 32 TPU v5e-256 slices (not fitted)",
        "",
        "Published MFU from MaxText's `MaxText/configs/v5e/README.md` (AI-Hypercomputer/"
        "maxtext), the runs its `configs/v5e/{16,32,64}b.sh` "
        "set: the default decoder at global_parameter_scale 16 / 32 / 64 (15.8, 31.7, 62.8 B "
        "weights), 6 / 4 / 2 sequences of 2048 tokens per chip, full recomputation, flash "
        "attention, FSDP over each 16x16 slice, slices data parallel over the DCN. MaxText's "
        "count of model FLOPs changed over its history (6 x weights per token with the "
        "attention halved for the causal mask, then per GEMM with the attention whole, as "
        "the model counts, then halved again); the attention is "
        + _attention_share() + " of the model's count for these shapes, so the definitions "
        "differ by at most half that. Weak "
        "scaling = MFU_N / MFU_1 (the per-chip batch is fixed). Published step = the model's "
        "FLOPs per chip / (published MFU x peak); slowdown = its growth from one slice; DCN "
        "all-reduce = the model's whole DCN time (bandwidth and latency terms, before "
        "overlap).",
        "",
        table(["preset", "workload", "slices", "MFU", "published MFU", "MFU error",
               "weak scaling", "published weak scaling", "step, s", "published step, s",
               "published slowdown, s", "DCN all-reduce, s", "exposed DCN, s"],
              [[r["preset"], r["workload"], r["slices"], _pct(r["mfu"]),
                _pct(r["published_mfu"], 2), f"{r['mfu_error_points']:+.1f} points",
                _pct(r["weak_scaling"]), _pct(r["published_weak_scaling"]),
                f"{r['step_s']:.2f}", f"{r['published_step_s']:.2f}",
                f"{r['published_slowdown_s']:.2f}", f"{r['dcn_s']:.3f}",
                f"{r['exposed_dcn_s']:.3f}"] for r in t["maxtext_v5e"]]),
        "",
        _maxtext_summary(t["maxtext_v5e"]),
        "",
        "What the DCN would have to be for MaxText's weak scaling, with the gradient exchange "
        "exposed after the backward pass (one message, as PaLM ran it) and v5e's datasheet "
        "otherwise (a sensitivity, not a fit):",
        "",
        table(["workload", "slices", "published weak scaling", "exposed at the NICs' rate",
               "DCN efficiency giving the published"],
              [[r["workload"], r["slices"], _pct(r["published_weak_scaling"]),
                _pct(r["exposed_at_nic_rate"]), _num(r["dcn_efficiency_for_published"], 2)]
               for r in t["maxtext_dcn"]]),
        "",
        f"![MaxText on v5e]({plots[2]})",
        "",
    ]


def _third_parameter_section(t):
    """What a third fitted parameter (the MXU efficiency) would do: fitted on MaxText,
    applied to PaLM."""
    return [
        "## A third parameter, outside the rules",
        "",
        "Both sets miss the same way on one slice, so one term for the achieved efficiency of "
        "compiled training steps would serve both, but it is a fitted parameter and the issue "
        "allows two. What it would do: the MXU efficiency that makes the model right on "
        "average on MaxText's three one-slice points (v5e datasheet otherwise) is "
        f"{t['absolute_term'][0]['mxu']:.3f}; applied unchanged to PaLM (v4 datasheet "
        "otherwise), it gives:",
        "",
        table(["case", "role", "MFU", "published MFU", "MFU error", "HFU", "published HFU",
               "HFU error"],
              [[r["case"], r["role"], _pct(r["mfu"]), _pct(r["published_mfu"], 2),
                f"{r['mfu_error_points']:+.1f} points", _pct(r["hfu"]),
                _pct(r["published_hfu"]),
                "-" if r["hfu_error_points"] is None else f"{r['hfu_error_points']:+.1f} points"]
               for r in t["absolute_term"]]),
        "",
    ]


def _breakdown_section(t):
    """The step time of each preset and workload split into compute, exposed ICI and DCN,
    and sync."""
    return [
        "## Step-time breakdown",
        "",
        "Seconds per step per chip. Exposed ICI = tensor-parallel all-reduces + MoE "
        "all-to-alls + the FSDP traffic that does not hide under the overlap window; exposed "
        "DCN = the DCN gradient all-reduce left after the window; sync = one barrier per step.",
        "",
        table(["preset", "workload", "slices", "chips", "compute", "exposed ICI",
               "exposed DCN", "sync", "step", "MFU", "HFU", "memory, GB", "fits"],
              [[r["preset"], r["workload"], r["slices"], r["chips"], f"{r['compute_s']:.3f}",
                f"{r['exposed_ici_s']:.3f}", f"{r['exposed_dcn_s']:.3f}",
                f"{r['sync_s']:.4f}", f"{r['step_s']:.3f}", _pct(r["mfu"]), _pct(r["hfu"]),
                f"{r['memory_gb']:.1f}", "yes" if r["fits"] else "no"]
               for r in t["breakdown"]]),
        "",
    ]


def _critical_section(t):
    """The global batches below which the DCN all-reduce outgrows the compute, the DCN
    time shows in the step, and the FSDP traffic on ICI outgrows the compute."""
    return [
        "## Critical global batch",
        "",
        "Global batch (sequences per step) below which: the DCN all-reduce takes longer than "
        "the step's compute (the step is DCN-bound whatever the overlap); the DCN time starts "
        "to show in the step (with the fitted overlap); the FSDP traffic on ICI takes longer "
        "than the compute. \"never\": no crossover down to 1e-4 sequences per replica, because "
        "streaming the gathered weights from HBM keeps the compute above the DCN time.",
        "",
        table(["preset", "workload", "slices", "preset batch", "DCN > compute below",
               "DCN exposed below", "FSDP ICI > compute below"],
              [[r["preset"], r["workload"], r["slices"], r["preset_batch"],
                _batch(r["dcn_dominates"], r["chips"]), _batch(r["dcn_exposed"], r["chips"]),
                _batch(r["ici_dominates"], r["chips"])] for r in t["critical_batch"]]),
        "",
    ]


def _versus_chips_section(t, plots):
    """Weak-scaling efficiency from 1 to 36 pods: the two plots and the table."""
    return [
        "## Efficiency vs chips, 1 to 36 pods",
        "",
        f"![efficiency vs chips]({plots[0]})",
        "",
        f"![step breakdown]({plots[1]})",
        "",
        table(["preset", "workload", "pods", "chips", "efficiency (base 1 pod)",
               "efficiency (base 4 pods)"],
              [[r["preset"], r["workload"], r["pods"], r["chips"],
                _pct(r["efficiency_base_1"], 2), _pct(r["efficiency_base_4"], 2)]
               for r in t["efficiency_vs_chips"]
               if r["pods"] in (1, 2, 4, 8, 12, 16, 24, 32, 36)]),
        "",
    ]


def _inference_section(t):
    """Llama-2 70B prefill and decode, and SDXL images per second."""
    return [
        "## Inference",
        "",
        "Llama-2 70B on 8 chips (a 2x4 slice, tensor parallel, bfloat16 weights), prompts of "
        "2048 and 512 generated tokens (decode at the mean context). No published figure for "
        "these shapes was found: the model's numbers only.",
        "",
        table(["preset", "batch", "prefill tokens/s", "time to first token, s",
               "decode tokens/s", "decode step, ms", "memory per chip, GB", "fits"],
              [[r["preset"], r["batch"], f"{r['prefill_tokens_per_s']:,.0f}",
                f"{r['time_to_first_token_s']:.2f}", f"{r['decode_tokens_per_s']:,.0f}",
                f"{r['decode_step_ms']:.1f}", f"{r['memory_gb_per_chip']:.1f}",
                "yes" if r["fits"] else "no"] for r in t["inference_llama2_70b"]]),
        "",
        f"SDXL UNet at 1024 x 1024, {SDXL.steps} steps with classifier-free guidance, data "
        "parallel (the VAE and text encoders not counted):",
        "",
        table(["preset", "images at once per chip", "images/s per chip"],
              [[r["preset"], r["images_per_chip"], f"{r['images_per_s_per_chip']:.2f}"]
               for r in t["inference_sdxl"]]),
        "",
    ]


def _speed_section(t, env):
    """The wall time of the model's own evaluations, and where it was measured."""
    return [
        "## Speed of the model",
        "",
        "Median wall time (perf_counter) of one evaluation, from the preset's name to the "
        f"result, on {environment_line(env)}; \"configurations\": step-time evaluations it "
        "makes (the fit's grid and bisections make a few thousand arithmetic ones on "
        "precomputed costs).",
        "",
        table(["evaluation", "configurations", "median, ms"],
              [[r["case"], r["configurations"] or "-", f"{1e3 * r['median_s']:.2f}"]
               for r in t["speed"]]),
        "",
    ]


def _terms_section(t):
    """The efficiency terms measured on Podium and their sources."""
    return [
        "## Podium-measured terms",
        "",
        table(["term", "value", "source"],
              [[r["term"], _num(r["value"], 4), r["source"]] for r in t["podium_terms"]]),
        "",
    ]


def _presets_section(t):
    """Every hardware preset's figures, and the training presets."""
    return [
        "## Presets",
        "",
        "Sources of every figure: docs/model.md and `podium/model/hardware.py`.",
        "",
        table(["preset", "chip", "peak bf16, TFLOP/s", "HBM, GB", "HBM, GB/s",
               "ICI link, GB/s per direction", "ICI ports", "DCN, GB/s per chip"],
              [[r["preset"], r["chip"], f"{r['peak_bf16_tflops']:.0f}", f"{r['hbm_gb']:.0f}",
                f"{r['hbm_gb_per_s']:.0f}", f"{r['ici_link_gb_per_s']:.0f}", r["ici_ports"],
                f"{r['dcn_gb_per_s_per_chip']:.3g}"] for r in t["presets"]]),
        "",
        "Training presets: " + "; ".join(f"`{k}`: {v}" for k, v in TRAINING.items()) + ".",
        "",
    ]


def _markdown(t, plots, env):
    """The report as markdown: the introduction, then one section per group of tables."""
    sections = (_introduction(t, env), _fit_section(t), _gpt3_section(t), _llama_section(t),
                _palm_section(t), _maxtext_section(t, plots), _third_parameter_section(t),
                _breakdown_section(t), _critical_section(t), _versus_chips_section(t, plots),
                _inference_section(t), _speed_section(t, env), _terms_section(t),
                _presets_section(t))
    return "\n".join(line for section in sections for line in section)


PLOTS = ("scaling_efficiency.png", "scaling_breakdown.png", "scaling_maxtext.png")
"""The plots' files, beside the page."""


def render(data):
    """The results page (markdown) of the report's JSON ``data``."""
    return _markdown(data["tables"], PLOTS, data["environment"])


def _plots(t, directory):
    """Efficiency vs chips, the GPT-3 step breakdown and MaxText on v5e, as PNG files in
    ``directory``; returns their names."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = PLOTS
    _efficiency_plot(plt, t, directory / names[0])
    _breakdown_plot(plt, t, directory / names[1])
    _maxtext_plot(plt, t, directory / names[2])
    return names


def _efficiency_plot(plt, t, path):
    """Weak-scaling efficiency against chips, on a base of 1 pod and of BASE_SLICES pods,
    with the published GPT-3 and Llama-2 points."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for (preset, workload), style in zip(
            [(p, w) for w in ("gpt3-175b", "llama2-70b") for p in
             (_label("v6e", False), _label("v6e", True))], ("-", "--", "-.", ":"), strict=True):
        rows = [r for r in t["efficiency_vs_chips"]
                if r["preset"] == preset and r["workload"] == workload]
        label = f"{workload}, {preset}"
        axes[0].plot([r["chips"] for r in rows], [r["efficiency_base_1"] for r in rows],
                     style, label=label)
        base4 = [r for r in rows if r["efficiency_base_4"] is not None]
        axes[1].plot([r["chips"] for r in base4], [r["efficiency_base_4"] for r in base4],
                     style, label=label)
    axes[1].plot([256 * n for n, _ in TARGETS], [e for _, e in TARGETS], "ko",
                 label="published GPT-3 175B")
    axes[1].plot([256 * LLAMA_CLAIM[0]], [LLAMA_CLAIM[1]], "ks", label="published Llama-2 70B")
    for ax, title in zip(axes, ("baseline 1 pod", f"baseline {BASE_SLICES} pods"), strict=True):
        ax.set_xlabel("chips (256 per pod)")
        ax.set_ylabel("weak-scaling efficiency")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    wrote(path)
    plt.close(fig)


def _breakdown_plot(plt, t, path):
    """GPT-3 175B's step on v6e (datasheet) against pods, stacked by part."""
    fig, ax = plt.subplots(figsize=(8, 4))
    rows = [r for r in t["efficiency_vs_chips"]
            if r["preset"] == _label("v6e", False) and r["workload"] == "gpt3-175b"]
    pods = [r["pods"] for r in rows]
    parts = {"compute": [], "exposed ICI": [], "exposed DCN": [], "sync": []}
    for p in pods:
        sys = system("v6e", slices=p)
        st = training_step(sys, training("gpt3-175b", sys))
        for key, value in zip(parts, (st.compute, st.exposed_ici, st.exposed_dcn, st.sync),
                              strict=True):
            parts[key].append(value)
    bottom = np.zeros(len(pods))
    for key, values in parts.items():
        ax.bar(pods, values, bottom=bottom, label=key)
        bottom += np.array(values)
    ax.set_xlabel("pods (slices of 256 chips)")
    ax.set_ylabel("seconds per step")
    ax.set_title("GPT-3 175B on v6e (datasheet), 1 sequence per chip")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    wrote(path)
    plt.close(fig)


def _maxtext_plot(plt, t, path):
    """MaxText on v5e: the model's MFU and weak scaling against slices, both presets, beside
    the published points."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for (workload, (_, published)), color in zip(MAXTEXT_V5E.items(), ("C0", "C1", "C2"),
                                                 strict=True):
        for preset, style in ((_label("v5e", False), "-"), (_label("v5e", True), "--")):
            rows = [r for r in t["maxtext_v5e"]
                    if r["preset"] == preset and r["workload"] == workload]
            axes[0].plot([r["slices"] for r in rows], [r["mfu"] for r in rows], style,
                         color=color, label=f"{workload}, model ({preset})")
            axes[1].plot([r["slices"] for r in rows], [r["weak_scaling"] for r in rows], style,
                         color=color)
        axes[0].plot(list(published), list(published.values()), "o", color=color,
                     label=f"{workload}, published")
        axes[1].plot(list(published), [m / published[1] for m in published.values()], "o",
                     color=color)
    for ax, ylabel in zip(axes, ("MFU", "weak scaling against 1 slice"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("v5e-256 slices")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
    axes[0].set_title("MaxText on v5e: MFU (points: published)")
    axes[1].set_title("weak scaling (points: published)")
    axes[1].legend(*axes[0].get_legend_handles_labels(), fontsize=6, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    wrote(path)
    plt.close(fig)


def bench(quick=False, results=None):
    """Compute the report, print it and write docs/results/scaling.md, scaling.json and the
    PNG plots (build/results/ with ``quick``: fewer points, a smoke run). ``results``: the
    directory of measured results to calibrate on (default docs/results)."""
    env = environment()
    t = tables(results=results, quick=quick)
    _plots(t, results_directory(quick))
    env["efficiency_terms"] = {r["term"]: r["source"] for r in t["podium_terms"]}
    env["datasheet_efficiency"] = {n: 1.0 for n in Efficiency.TERMS}
    write_results(PAGE, t, env, render, quick)
    return t
