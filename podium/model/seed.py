"""Every claim of Google's Trillium (TPU v6e) announcement, reproduced or not by the model.

``claims()`` returns one row per claim: the published figure, the modelled one, the error,
the status (reproduced within the tolerance, held out; fitted: a point the model was fitted
on, never agreement; not reproduced, with why) and the terms that produce the figure. The
modelled figures come from the physical presets (:mod:`.physical`) with the protocol's
calibration (:mod:`.protocol`).

Sources: Google Cloud blog, "Trillium TPU is GA" (December 2024) for every claim; on-demand
prices per chip-hour ``PRICES`` from the pages ``PRICE_SOURCES`` names.
"""

from dataclasses import replace

from .costs import inference, training_costs, unet_images_per_second
from .hardware import CHIPS, Slice
from .physical import physical_system
from .presets import INFERENCE_SLICE, SDXL
from .protocol import calibrate, evaluate, modelled_step
from .workloads import MODELS, Inference, training_preset

__all__ = ["PRICES", "PRICE_SOURCE", "PRICE_SOURCES", "TOLERANCE", "claims", "per_chip_training",
           "per_chip_decode", "per_chip_sdxl"]

PRICES = {"v6e": 2.70, "v5e": 1.20, "v5p": 4.20}
"""On-demand US$ per chip-hour (v6e: Google's "starting at" price; ``PRICE_SOURCES``)."""

PRICE_SOURCES = {
    "v6e": ("Google's Trillium GA announcement (December 2024) as reported by Neowin, "
            "https://neowin.net/amp/google-takes-on-nvidia-blackwell-gpus-with-the-new-"
            "trillium-tpus: 'available starting at $2.7000 per chip-hour' (1-year and 3-year "
            "commitments $1.8900 and $1.2200)"),
    "v5e": ("artificial-intelligence-wiki.com, 'Google TPU v5 Guide' (updated January 27, "
            "2026), https://artificial-intelligence-wiki.com/ai-development/"
            "ai-hardware-infrastructure/tpu-v5-guide: v5e $1.2 per chip-hour"),
    "v5p": ("the same page: v5p $4.2 per chip-hour"),
}
"""Where each price was read (stored public pages). The stored copies of the Cloud TPU pricing
page (https://cloud.google.com/tpu/pricing, its language variants) are an old revision (v2,
v3 and v4 in Preview) with no v5e, v5p or v6e row, so none of the three is checked against it.
Third-party lists disagree: deploybase.ai's 'Google Cloud TPU pricing' gives v5e $0.32 and
v5p $0.48 'per core-hour' (v5e-8 $2.56 an hour), blog.easecloud.io gives 'TPU v5e at
$1.60/hour' (unit unclear); neither states a region, and the v6e figure is Google's own, so
the $2.70 / $1.20 / $4.20 set (each on-demand per chip-hour) is kept: the prices the earlier
report used, now each with a page."""

PRICE_SOURCE = ("on-demand per chip-hour: v6e $2.70 (Google's Trillium GA announcement, "
                "December 2024, as reported by Neowin), v5e $1.20 and v5p $4.20 "
                "(artificial-intelligence-wiki.com 'Google TPU v5 Guide', January 27, 2026); "
                "the stored Cloud TPU pricing page predates these chips")

TOLERANCE = 0.10
"""A ratio claim is reproduced when the modelled ratio is within 10% of the published one
(an "up to" or "over" claim: when the model reaches it)."""

_BLOG = "Trillium GA blog, Dec 2024"


def per_chip_training(chip, workload, cal=None, results=None, slices=1, slice_=None):
    """Tokens per second per chip of ``workload`` (a training preset) on ``slices`` pods of
    ``chip`` (physical preset, calibrated), one sequence per chip (4096 tokens for Llama,
    2048 for GPT-3)."""
    cal = cal or calibrate(results)
    sys = physical_system(chip, slices=slices, slice_=slice_, results=results)
    t = training_preset(workload, chips=sys.slice.chips, slices=slices)
    st = modelled_step(training_costs(sys, t), cal)
    return st.tokens_per_second / sys.chips, st


def per_chip_decode(chip, results=None):
    """Llama-2 70B decode tokens/s per chip, batch 64, prompt 2048, 512 output tokens,
    bf16, tensor parallel over 8 v6e chips (2 x 4) or 16 v5e chips (4 x 4: 8 v5e chips
    cannot hold the weights and KV cache in bf16)."""
    slice_ = INFERENCE_SLICE if chip == "v6e" else Slice(dims=(4, 4), wrap=(False, False))
    sys = physical_system(chip, slice_=slice_, results=results)
    inf = Inference(model=MODELS["llama2-70b"], batch=64, prompt=2048, output=512)
    r = inference(sys, inf)
    return r.decode_tokens_per_second / sys.chips, r


def per_chip_sdxl(chip, results=None, images=4):
    """SDXL images per second per chip (1024 x 1024, 20 steps with guidance, ``images`` per
    chip at a time)."""
    sys = physical_system(chip, results=results)
    return unet_images_per_second(replace(sys, slices=1), SDXL, images=images) / sys.chips


def _row(claim, published, modelled, terms, *, kind="ratio", status=None, why="",
         error=None):
    if status is None:
        if kind == "at_least":
            status = "reproduced" if modelled >= published * (1 - 1e-9) else "not reproduced"
        else:
            ok = abs(modelled / published - 1) <= TOLERANCE
            status = "reproduced" if ok else "not reproduced"
    if error is None and isinstance(published, float) and isinstance(modelled, float):
        error = modelled / published - 1
    return {"claim": claim, "published": published, "modelled": modelled,
            "error": error, "status": status, "terms": terms, "why": why}


def claims(results=None):
    """The seed table: one row per claim of the Trillium announcement."""
    cal = calibrate(results)
    v6, v5 = CHIPS["v6e"], CHIPS["v5e"]
    rows = [
        _row("peak compute per chip vs v5e", 4.7, v6.peak_flops() / v5.peak_flops(),
             "datasheet: 918 / 197 TFLOP/s bf16"),
        _row("HBM capacity per chip vs v5e", 2.0, v6.hbm_bytes / v5.hbm_bytes,
             "datasheet: 32 / 16 GB"),
        _row("HBM bandwidth per chip vs v5e", 2.0, v6.hbm_bandwidth / v5.hbm_bandwidth,
             "datasheet: 1638 / 819 GB/s"),
        _row("ICI bandwidth per chip vs v5e", 2.0,
             v6.ici_link_bandwidth * v6.ici_ports / (v5.ici_link_bandwidth * v5.ici_ports),
             "datasheet: 4 x 100 / 4 x 50 GB/s per direction"),
    ]
    train = {}
    for w in ("llama2-70b", "gpt3-175b", "mixtral-8x7b"):
        a, sa = per_chip_training("v6e", w, cal, results)
        b, sb = per_chip_training("v5e", w, cal, results)
        train[w] = a / b
        train[w + ".steps"] = (sa, sb)
    terms_train = ("physical presets (measured MXU, HBM, collectives, attention, VPU), "
                   f"outside_roofline {cal.outside_roofline:.3f} (fitted), one v6e-256 vs one "
                   "v5e-256 pod, FSDP, 1 sequence per chip (assumed)")
    rows += [
        _row("training Llama-2 70B vs v5e (per chip)", 4.0, train["llama2-70b"], terms_train,
             kind="at_least", why="\"up to 4x\": reproduced if the model reaches 4x"),
        _row("training GPT-3 175B vs v5e (per chip)", 4.0, train["gpt3-175b"], terms_train,
             kind="at_least", why="\"up to 4x\""),
        _row("training MoE vs v5e (per chip; Mixtral 8x7B, 8-way expert parallelism)", 3.8,
             train["mixtral-8x7b"], terms_train + "; all-to-all at the pod bench's measured "
             "bisection fraction"),
    ]
    held = {r["id"]: r for r in evaluate(cal, results)}
    for pid, claim in (("trillium-gpt3-12", "GPT-3 175B weak scaling, 12 pods (base 4)"),
                       ("trillium-gpt3-24", "GPT-3 175B weak scaling, 24 pods (base 4)"),
                       ("trillium-gpt3-24-base1", "GPT-3 175B weak scaling, 24 pods "
                                                  "(base 1), \"over 90%\""),
                       ("trillium-llama2-36", "Llama-2 70B weak scaling, 4 to 36 pods")):
        r = held[pid]
        status = ("fitted (not agreement)" if r["status"] == "fitted" else
                  "reproduced" if abs(r["error_points"]) <= 5 else "not reproduced")
        rows.append(_row(claim, r["published"], r["modelled"],
                         "DCN ring (bandwidth + per-message latency), overlap window; "
                         "overlap and dcn_latency fitted on the two GPT-3 base-4 points",
                         status=status, error=r["error_points"] / 100))
    # v5p cluster of the same peak FLOPs as 12 Trillium pods: 3072 x 918 / 459 = 6144 v5p
    # chips = 6 slices of 1024 (8 x 8 x 16, a torus)
    v5p_slice = Slice(dims=(8, 8, 16), wrap=(True, True, True))
    a, _ = per_chip_training("v6e", "gpt3-175b", cal, results, slices=12)
    b, _ = per_chip_training("v5p", "gpt3-175b", cal, results, slices=6, slice_=v5p_slice)
    ratio = a * 3072 / (b * 6144)
    rows.append(_row("GPT-3 175B at 12 pods ahead of a v5p cluster of the same peak FLOPs",
                     1.0, ratio, "6144 v5p chips (6 x 1024) vs 3072 v6e; throughput ratio",
                     kind="at_least", why="published qualitatively (\"ahead\"): reproduced "
                     "if the ratio exceeds 1"))
    sd = per_chip_sdxl("v6e", results) / per_chip_sdxl("v5e", results)
    dec6, r6 = per_chip_decode("v6e", results)
    dec5, r5 = per_chip_decode("v5e", results)
    rows += [
        _row("inference SDXL images/s vs v5e (per chip)", 3.1, sd,
             "UNet convolutions as im2col GEMMs, attention at the measured flash "
             "efficiency, group norms on the VPU/HBM; 4 images per chip",
             why="published \"over 3x\" (3.1x)"),
        _row("inference Llama-2 70B decode tokens/s vs v5e (per chip)", 2.0, dec6 / dec5,
             "decode with a KV cache, memory-bound: weights and cache at the measured HBM "
             "efficiency; batch 64, prompt 2048, 512 out; 8 v6e vs 16 v5e chips",
             why="\"nearly 2x\""),
        _row("embedding-heavy models vs v5e", 2.0, v6.hbm_bandwidth / v5.hbm_bandwidth,
             "gathers bound by HBM at the same gather efficiency on both (Podium's "
             "SparseCore bench measures one efficiency, not one per generation)",
             why="the model's ratio is the HBM ratio only"),
        _row("DLRM DCNv2 vs v5e", 5.0, None, "SparseCore terms",
             status="not reproduced",
             why="the model bounds a step between its gathers (2x: HBM) and its dense MLPs "
                 "(4.66x: peak); 5x needs v5e's embedding path to be 2.5x less efficient "
                 "per HBM byte than v6e's SparseCores (v5e has none), a figure no source "
                 "gives"),
    ]
    price6, price5, price_p = PRICES["v6e"], PRICES["v5e"], PRICES["v5p"]
    tr = min(train["llama2-70b"], train["gpt3-175b"])
    c6, _ = per_chip_training("v6e", "llama2-70b", cal, results)
    cp, _ = per_chip_training("v5p", "llama2-70b", cal, results,
                              slice_=Slice(dims=(4, 8, 8), wrap=(True, True, True)))
    cost_terms = f"modelled per-chip ratio / price ratio ({PRICE_SOURCE})"
    rows += [
        _row("training performance per dollar vs v5e", 2.5,
             max(train["llama2-70b"], train["gpt3-175b"]) / (price6 / price5), cost_terms,
             kind="at_least", why="\"up to 2.5x\""),
        _row("inference performance per dollar vs v5e (Llama-2 70B decode)", 1.4,
             dec6 / dec5 / (price6 / price5), cost_terms),
        _row("dense LLM training per dollar vs v5e", 2.1, tr / (price6 / price5),
             cost_terms + "; the lower of Llama-2 70B and GPT-3 175B"),
        _row("dense LLM training per dollar vs v5p (Llama-2 70B)", 2.5,
             c6 / cp / (price6 / price_p), cost_terms + "; v5p-512 (4 x 8 x 8)"),
        _row("SDXL cost per 1000 images vs v5e, offline: 27% lower", 0.27,
             1 - (price6 / price5) / sd, cost_terms, error=None),
        _row("SDXL cost per 1000 images vs v5e, serving: 22% lower", 0.22,
             1 - (price6 / price5) / sd, cost_terms + "; serving modelled as offline (no "
             "latency bound)", error=None),
        _row("energy efficiency vs v5e: 67% better", 1.67, None, "none",
             status="not reproduced",
             why="no per-chip power is published for v5e or v6e, and the model has no "
                 "power term; it could be estimated as (throughput ratio) x (v5e power / "
                 "v6e power) from a measured or published power per chip"),
    ]
    for r in rows:
        if r["error"] is None and r["modelled"] is not None and r["published"]:
            r["error"] = r["modelled"] / r["published"] - 1
    return rows
