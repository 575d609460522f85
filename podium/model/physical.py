"""The physical step terms and the presets that carry them.

``physical_system(name)`` is a published chip with every efficiency term Podium measures on
its RTL (docs/results/*.json, read afresh) and the terms the datasheet presets leave out:

- **VPU time** per elementwise operation, max(VPU rate, HBM stream) (``costs.stream_time``):
  the VPU rate per kind is Podium's measured elements per cycle per lane
  (transformer.json, ``model.vpu_elements_per_cycle``, bfloat16 rows, on the bench's chip
  of 8 VPU lanes: docs/results/transformer.md) times the preset's lanes and clock. Lanes:
  the VPU of a TensorCore is an 8 x 128 SIMD array (JAX scaling book,
  https://jax-ml.github.io/scaling-book/, "How to think about TPUs"), one TensorCore per
  v5e / v6e chip, two (megacore) per v4 / v5p chip (Cloud TPU system architecture page).
  Clocks: v4 1.05 GHz, v5e 1.5 GHz, v5p 1.75 GHz (from the published peaks and MXU counts,
  hardware.py); v6e's clock is not published: 1.75 GHz assumed (two MACs per PE per cycle
  at 918 TFLOP/s).
- **Elementwise work sharded** under tensor parallelism (``Training.sequence_parallel``,
  Korthikanti et al., arXiv 2205.05198).
- **fp32 master weights and gradients** on the wire where the run keeps them
  (``Training.master_bytes``; MaxText's base.yml ``weight_dtype: float32``).
- **Attention** GEMMs at the flash-attention MXU utilization measured on Podium's RTL
  (transformer.json ``model.attention_mxu_utilization``: non-causal, head_dim 128, the
  longest sequence measured) instead of the plain GEMM's (``Efficiency.attention``).
- **bf16 reductions with fp32 partials**: a bfloat16 reduce-scatter moves fp32 partial
  sums, twice its payload (``Chip.partial_bytes``; the pod's policy, docs/pod.md "Formats
  and rounding"), at the reduce-scatter's own measured bus efficiency (collectives.json
  ``busbw``), the all-gather at its own (``Efficiency.ici_all_gather`` /
  ``ici_reduce_scatter``), the all-reduce at the all-reduce's.
- **2-D and wrap-around torus collectives per axis** were already modelled
  (``costs.assign_axes`` / ``costs.collective_time``: a bidirectional ring per wrapped
  axis, a line at half the bandwidth without wraparound, after the JAX scaling book).
"""

from dataclasses import replace
from pathlib import Path

from .calibrate import (
    RESULTS,
    Term,
    load_tables,
    measured_chip,
    measured_efficiency,
    measured_terms,
)
from .checks import check_choice, check_int, check_number
from .hardware import CHIPS, SLICES, System

__all__ = ["VPU_LANES", "VPU_CLOCK", "BENCH_VPU_LANES", "physical_terms", "physical_system"]

VPU_LANES = {"v6e": 8 * 128, "v5e": 8 * 128, "v5p": 2 * 8 * 128, "v4": 2 * 8 * 128}
"""VPU lanes per chip: an 8 x 128 VPU per TensorCore (JAX scaling book); TensorCores per
chip: 1 on v5e and v6e, 2 on v4 and v5p (Cloud TPU system architecture page)."""

VPU_CLOCK = {"v6e": 1.75e9, "v5e": 1.5e9, "v5p": 1.75e9, "v4": 1.05e9}
"""Clock per chip (Hz): v4, v5e, v5p from their peaks and MXUs; v6e assumed (not
published)."""

BENCH_VPU_LANES = 8
"""VPU lanes of the chip transformer.json's VPU rates were measured on (the default chip:
8x8 int8 MXU, 8 VPU lanes; docs/results/transformer.md)."""

ATTENTION_HEAD_DIM = 128

PARTIAL_BYTES = 4
"""A bfloat16 reduction's partial sums cross the links as fp32 (docs/pod.md, "Formats and
rounding": the pod widens bfloat16 inputs to fp32 and rounds once, at the end)."""


def _transformer_model(directory):
    path = Path(directory) / "transformer.json"
    if not path.exists():
        return None
    import json

    data = json.loads(path.read_text())
    return data.get("model") if isinstance(data, dict) else None


def physical_terms(directory=None):
    """The physical terms measured on Podium's RTL, as {name: Term}: ``vpu.<kind>``
    (elements per cycle per lane), ``attention`` (flash-attention MXU utilization),
    ``ici_all_gather`` and ``ici_reduce_scatter`` (bus efficiency). A missing file leaves a
    term assumed and says so."""
    directory = Path(directory) if directory is not None else RESULTS
    out = {}
    model = _transformer_model(directory)
    if model and isinstance(model.get("vpu_elements_per_cycle"), dict):
        for key, value in sorted(model["vpu_elements_per_cycle"].items()):
            kind, _, dtype = key.partition(".")
            if dtype == "bfloat16":
                out[f"vpu.{kind}"] = Term(
                    value / BENCH_VPU_LANES,
                    f"measured (transformer.json, model.vpu_elements_per_cycle['{key}']: "
                    f"{value:.3g} elements per cycle on {BENCH_VPU_LANES} lanes)",
                    f"transformer.json, model.vpu_elements_per_cycle['{key}']")
    rows = (model or {}).get("attention_mxu_utilization") or []
    rows = [r for r in rows if not r.get("causal") and r.get("head_dim") == ATTENTION_HEAD_DIM]
    if rows:
        r = max(rows, key=lambda r: r["seq"])
        out["attention"] = Term(
            r["mxu_utilization"],
            f"measured (transformer.json, model.attention_mxu_utilization: seq {r['seq']}, "
            f"head_dim {r['head_dim']}, non-causal flash attention on the RTL)",
            "transformer.json, model.attention_mxu_utilization")
    else:
        out["attention"] = Term(1.0, "assumed: 1.0 (transformer.json has no attention rows)")
    tables = load_tables(directory, "collectives") or {}
    busbw = tables.get("busbw") or []
    for kind in ("all_gather", "reduce_scatter"):
        rows = [(i, r) for i, r in enumerate(busbw) if r.get("collective") == kind]
        if rows:
            i, r = max(rows, key=lambda ir: (ir[1]["bytes_per_chip"], ir[1]["chips"]))
            out[f"ici_{kind}"] = Term(
                r["efficiency"],
                f"measured (collectives.json, busbw row {i}: {kind} on the {r['topology']} "
                f"pod, {r['bytes_per_chip']} B per chip, bf16 with fp32 partials)",
                f"collectives.json, busbw row {i}")
        else:
            out[f"ici_{kind}"] = Term(0.0, "assumed: the all-reduce's (no row)")
    return out


def physical_system(name, *, slices=1, slice_=None, results=None, overlap=None,
                    dcn_latency=None, dcn_efficiency=None):
    """The published chip ``name`` (v6e, v5e, v5p, v4) with Podium's measured efficiencies
    and the physical terms of this module, ``slices`` slices of ``slice_`` (default the
    chip's pod). ``overlap`` and ``dcn_latency``: the software terms (default 1.0 and 0:
    none fitted here; :mod:`podium.model.protocol` passes its fitted ones)."""
    check_choice("preset", name, tuple(VPU_LANES))
    check_int("system.slices", slices, 1, 100_000)
    terms = measured_terms(CHIPS[name], results)
    phys = physical_terms(results)
    chip = measured_chip(CHIPS[name], terms)
    rate = VPU_LANES[name] * VPU_CLOCK[name]
    vpu = {k.split(".", 1)[1]: t.value * rate for k, t in phys.items() if k.startswith("vpu.")}
    chip = replace(chip, name=f"{CHIPS[name].name}, physical terms", vpu_rates=vpu,
                   partial_bytes=PARTIAL_BYTES)
    eff = measured_efficiency(terms)
    if dcn_efficiency is not None:
        check_number("efficiency.dcn", dcn_efficiency, lo=0, hi=1, lo_open=True)
    eff = replace(eff, attention=phys["attention"].value,
                  ici_all_gather=phys["ici_all_gather"].value,
                  ici_reduce_scatter=phys["ici_reduce_scatter"].value,
                  dcn=eff.dcn if dcn_efficiency is None else dcn_efficiency,
                  sources={**eff.sources, **{k: t.source for k, t in phys.items()}})
    return System(name=f"{name} (physical)", chip=chip, slice=slice_ or SLICES[name],
                  slices=slices, efficiency=eff,
                  overlap=1.0 if overlap is None else overlap,
                  dcn_latency=0.0 if dcn_latency is None else dcn_latency)
