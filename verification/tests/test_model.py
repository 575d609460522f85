"""Tests of the performance model (podium/model): every formula against hand-computed cases,
properties over random configurations (hypothesis), configuration checks, the calibration
loader on fixture files, the fit, the report and the CLI end to end. Pure Python: no
simulator is involved."""

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.model import calibrate, costs, hardware, presets, workloads
from podium.model.costs import (
    Segment,
    assign_axes,
    collective_time,
    critical_batch,
    dcn_all_reduce_time,
    exposed_communication,
    gemm_time,
    ring_all_reduce_time,
    stream_time,
    training_step,
    weak_scaling_efficiency,
)
from podium.model.fit import BASE_SLICES, TARGETS, fit_two_points, trillium_fit
from podium.model.hardware import CHIPS, Chip, Efficiency, Slice, System
from podium.model.workloads import MODELS, Gemm, Parallelism, Stream, Training, Transformer

ROOT = Path(__file__).resolve().parents[2]

TOY_CHIP = Chip(name="toy", mxus=1, mxu_rows=128, mxu_cols=128, mac_rate=1e9,
                formats={"bfloat16": 1.0}, vmem_bytes=6 * 1024 ** 2, hbm_bytes=1e9,
                hbm_bandwidth=1e12, ici_ports=4, ici_link_bandwidth=1e10,
                ici_hop_latency=1e-6, dcn_bandwidth=1e9)
"""A chip with round numbers for hand-computed cases: 128x128 MXU at 1 G MAC/s, 1 TB/s HBM,
10 GB/s links, 1 GB/s DCN; VMEM of 6 MiB makes the GEMM tile 1024 (3 x 1024^2 x 2 B)."""


def toy_system(*, dims=(4,), wrap=(True,), slices=1, efficiency=None, overlap=0.0,
               dcn_latency=0.0):
    return System(name="toy", chip=TOY_CHIP, slice=Slice(dims=dims, wrap=wrap), slices=slices,
                  efficiency=efficiency or Efficiency(), overlap=overlap,
                  dcn_latency=dcn_latency)


# ---------------------------------------------------------------------------------------
# Formulas, hand-computed


def test_ring_all_reduce_formula():
    # 2(n-1)/n x S / B: 4 members, 1000 B, 100 B/s -> 2 x 3/4 x 10 s.
    assert ring_all_reduce_time(4, 1000, 100) == pytest.approx(15.0)
    assert ring_all_reduce_time(1, 1000, 100) == 0.0


def test_collectives_on_one_ring():
    sys_ = toy_system()
    ring = [Segment(4, True)]
    # all-gather of 4 MB over a bidirectional ring of 4: 3/4 x 4e6 / (2 x 1e10) + 3 hops.
    expected = 0.75 * 4e6 / 2e10 + 3e-6
    assert collective_time("all_gather", ring, 4e6, sys_) == pytest.approx(expected)
    assert collective_time("reduce_scatter", ring, 4e6, sys_) == pytest.approx(expected)
    assert collective_time("all_reduce", ring, 4e6, sys_) == pytest.approx(2 * expected)
    # The all-reduce's bandwidth term is the ring formula with the two directions' bandwidth.
    assert (collective_time("all_reduce", ring, 4e6, sys_) - 6e-6
            == pytest.approx(ring_all_reduce_time(4, 4e6, 2e10)))


def test_line_takes_twice_the_ring_bandwidth_time():
    sys_ = replace(toy_system(), chip=replace(TOY_CHIP, ici_hop_latency=0.0))
    ring = collective_time("all_gather", [Segment(8, True)], 8e6, sys_)
    line = collective_time("all_gather", [Segment(8, False)], 8e6, sys_)
    assert line == pytest.approx(2 * ring)


def test_two_axes_divide_the_bandwidth_term():
    sys_ = replace(toy_system(), chip=replace(TOY_CHIP, ici_hop_latency=0.0))
    one = collective_time("all_gather", [Segment(16, True)], 1e7, sys_)
    two = collective_time("all_gather", [Segment(4, True), Segment(4, True)], 1e7, sys_)
    # (g-1)/g x V / (sum of the axes' bandwidths): 15/16 / 2e10 vs 15/16 / 4e10.
    assert one == pytest.approx(15 / 16 * 1e7 / 2e10)
    assert two == pytest.approx(15 / 16 * 1e7 / 4e10)


def test_all_to_all_bisection_bound():
    sys_ = replace(toy_system(), chip=replace(TOY_CHIP, ici_hop_latency=0.0))
    # Uniform traffic on a ring of k: 8b/k per chip (bisection bound); a line 4b/k.
    assert collective_time("all_to_all", [Segment(8, True)], 1e6, sys_) == pytest.approx(
        1e6 / (8 * 1e10 / 8))
    assert collective_time("all_to_all", [Segment(8, False)], 1e6, sys_) == pytest.approx(
        1e6 / (4 * 1e10 / 8))
    half = replace(sys_, efficiency=Efficiency(ici_all_to_all=0.5))
    assert collective_time("all_to_all", [Segment(8, True)], 1e6, half) == pytest.approx(2e-4)


def test_collective_of_nothing_is_free_and_kind_is_checked():
    sys_ = toy_system()
    assert collective_time("all_reduce", [], 1e6, sys_) == 0.0
    with pytest.raises(ValueError, match="collective kind"):
        collective_time("broadcast", [Segment(4, True)], 1e6, sys_)


def test_dcn_all_reduce_formula():
    sys_ = toy_system(slices=4, dcn_latency=1e-4)
    # 2 x 3/4 x 1e8 B / 1e9 B/s + 2 x 3 ring steps x 10 messages x 100 us.
    assert dcn_all_reduce_time(sys_, 1e8, 10) == pytest.approx(0.15 + 6e-3)
    assert dcn_all_reduce_time(toy_system(slices=1), 1e8, 10) == 0.0


def test_gemm_roofline_compute_bound():
    sys_ = toy_system()
    g = Gemm("g", 1024, 256, 256)
    # 2 x 2 weight tiles, each streaming 1024 rows: 4096 cycles at 1 GHz.
    assert gemm_time(sys_, g) == pytest.approx(4096e-9)
    slow = replace(sys_, efficiency=Efficiency(mxu=0.5))
    assert gemm_time(slow, g) == pytest.approx(2 * 4096e-9)
    # 100 MACs short of a tile still costs the whole tile (quantization).
    assert gemm_time(sys_, Gemm("g", 1024, 257, 256)) == pytest.approx(3 * 2 * 1024e-9)


def test_gemm_roofline_memory_bound():
    sys_ = replace(toy_system(), chip=replace(TOY_CHIP, hbm_bandwidth=1e10))
    g = Gemm("g", 1, 4096, 4096)
    # MXU: 32 x 32 tiles x max(1, 128) rows = 131072 cycles = 131 us; HBM: A (1 x 4096) read
    # once per 1024-column block (4 times), B once, C once, 2 B each, at 10 GB/s: 3.4 ms.
    traffic = 2 * (1 * 4096 * 4 + 4096 * 4096 + 4096)
    assert gemm_time(sys_, g) == pytest.approx(traffic / 1e10)
    assert traffic / 1e10 > 131072e-9
    assert gemm_time(sys_, replace(g, traffic=1e9)) == pytest.approx(1e9 / 1e10)


def test_stream_roofline():
    sys_ = toy_system(efficiency=Efficiency(hbm=0.8))
    assert stream_time(sys_, Stream("s", 8e9)) == pytest.approx(8e9 / (1e12 * 0.8))


def test_overlap_hides_ici_first_then_dcn():
    # Window 0.5 x 10 = 5 s: 3 s of ICI hides, 2 s left for 4 s of DCN.
    assert exposed_communication(10, 3, 4, 0.5) == (0.0, 2.0)
    assert exposed_communication(10, 7, 4, 0.5) == (2.0, 4.0)
    assert exposed_communication(10, 3, 4, 0.0) == (3.0, 4.0)
    assert exposed_communication(10, 3, 4, 1.0) == (0.0, 0.0)


def test_dcn_exchange_after_the_backward_pass_is_exposed():
    c = costs.TrainingCosts(
        chips=8, compute=10.0, tensor=1.0, all_to_all=0.0, fsdp_ici=3.0, dcn_bandwidth=2.0,
        dcn_steps=2, dcn_overlap=True, sync_ici=0.0, sync_steps=0, tokens=1.0, model_flops=1.0,
        hardware_flops=1.0, peak_flops=1.0, memory_bytes=0.0, hbm_bytes=1.0)
    # DCN time 2 + 2 x 0.1 = 2.2 s. Window 0.5 x 10 = 5 s: the 3 s of FSDP hide, 2 s of the
    # window are left for the DCN, 0.2 s shows. After the backward pass, all 2.2 s show.
    hidden = c.step(overlap=0.5, dcn_latency=0.1)
    assert hidden.exposed_dcn == pytest.approx(0.2) and hidden.exposed_ici == 1.0
    after = replace(c, dcn_overlap=False).step(overlap=0.5, dcn_latency=0.1)
    assert after.exposed_dcn == pytest.approx(2.2) and after.exposed_ici == 1.0
    assert after.step == pytest.approx(10 + 1 + 2.2)
    # PaLM's preset exchanges once per step (one message), not once per layer.
    sys_ = presets.system("v4", slices=2, slice_=presets.PALM_SLICE)
    palm = costs.training_costs(sys_, presets.training("palm-540b", sys_))
    assert not palm.dcn_overlap and palm.dcn_steps == 2
    # 2(N-1)/N x shard / B_dcn with N = 2: one shard of 2 B x params / 3072 at 6.25 GB/s.
    assert palm.dcn_bandwidth == pytest.approx(2 * MODELS["palm-540b"].params / 3072 / 6.25e9)
    st = training_step(sys_, presets.training("palm-540b", sys_))
    assert st.exposed_dcn == pytest.approx(st.dcn)


def test_transformer_parameters_and_flops():
    tiny = Transformer(name="tiny", layers=2, d_model=8, heads=2, kv_heads=1, head_dim=4,
                       ffn=16, vocab=10, seq=6, gated=False)
    # Per layer: q 8x8 + kv 2 x 8x4 + o 8x8 = 192; MLP 2 x 8x16 = 256; embeddings 2 x 80.
    assert tiny.params == 2 * (192 + 256) + 160
    assert tiny.matmul_params_per_token == 2 * (192 + 256) + 80
    # 6 x matmul params + 12 x layers x heads x head_dim x seq.
    assert tiny.training_flops_per_token() == 6 * 976 + 12 * 2 * 2 * 4 * 6
    assert MODELS["gpt3-175b"].params == pytest.approx(175e9, rel=0.003)
    assert MODELS["llama2-70b"].params == pytest.approx(69e9, rel=0.003)
    assert MODELS["palm-540b"].params == pytest.approx(540.35e9, rel=0.001)
    assert MODELS["mixtral-8x7b"].params == pytest.approx(46.7e9, rel=0.003)


def test_maxtext_models_follow_its_scaling_rule():
    """MaxText's default decoder (d 2048, 16 heads, MLP 7168, 16 layers) scaled by a power of
    2: heads and MLP, embedding, layers double in turn (2^k, (b, r) = divmod(k, 3))."""
    def shape(m):
        return m.layers, m.d_model, m.heads, m.kv_heads, m.ffn

    assert shape(workloads.maxtext_model(1)) == (16, 2048, 16, 16, 7168)
    assert shape(workloads.maxtext_model(2)) == (16, 2048, 32, 32, 14336)  # k=1: heads, MLP
    assert shape(workloads.maxtext_model(4)) == (16, 4096, 32, 32, 14336)  # k=2: + embedding
    assert shape(workloads.maxtext_model(8)) == (32, 4096, 32, 32, 14336)  # k=3: one cycle
    assert shape(MODELS["maxtext-64b"]) == (64, 8192, 64, 64, 28672)
    # Per layer: q, o 2048 x 2048 and k, v the same (16 KV heads); gated MLP 3 x 2048 x 7168;
    # input and output embeddings 32000 x 2048 each.
    assert workloads.maxtext_model(1).params == 16 * (4 * 2048 ** 2 + 3 * 2048 * 7168) \
        + 2 * 32000 * 2048
    for n in (16, 32, 64):
        assert MODELS[f"maxtext-{n}b"].params == pytest.approx(n * 1e9, rel=0.02)
    with pytest.raises(ValueError, match="maxtext scale must be a power of 2"):
        workloads.maxtext_model(24)


@pytest.mark.parametrize("name", ["gpt3-175b", "llama2-70b", "palm-540b", "maxtext-32b"])
def test_gemms_of_a_step_are_the_model_flops(name):
    """Without recomputation or fused attention, the GEMMs of a step add up to 6 x params x
    tokens plus the attention terms, i.e. the model FLOPs."""
    t = Training(model=MODELS[name], parallelism=Parallelism(fsdp=256), global_batch=256,
                 recompute=0.0, flash_attention=False)
    tokens = t.model.seq
    ops = workloads.training_ops(t, tokens=tokens)
    gemm = sum(op.flops * w for phase in ops.values() for op, w in phase
               if isinstance(op, Gemm))
    assert gemm == pytest.approx(t.model.training_flops_per_token() * tokens, rel=1e-9)


def test_recompute_from_published_ratio():
    sys_ = presets.system("v4", slices=2, slice_=presets.PALM_SLICE)
    t = presets.training("palm-540b", sys_)
    step = training_step(sys_, t)
    assert step.hardware_flops / step.model_flops == pytest.approx(
        workloads.PALM_HFU / workloads.PALM_MFU, rel=0.01)
    assert 0 < t.recompute < 1


def test_weak_scaling_definition():
    sys_ = presets.system("v6e", slices=1)
    base = training_step(sys_, presets.training("llama2-70b", sys_))
    slow = replace(base, chips=2 * base.chips, tokens=2 * base.tokens, step=1.25 * base.step)
    # (throughput ratio 2 / 1.25) / (chip ratio 2) = 0.8.
    assert weak_scaling_efficiency(slow, base) == pytest.approx(0.8)


def test_assign_axes():
    sl = Slice.in_pod((16, 16), (16, 16))
    axes = assign_axes(sl, [("tensor", 4), ("fsdp", 64)])
    assert axes["tensor"] == [Segment(4, False, 1)]
    assert axes["fsdp"] == [Segment(4, True, 4), Segment(16, True, 1)]
    part = Slice.in_pod((8, 16), (16, 16))
    assert part.wrap == (False, True)
    assert assign_axes(part, [("fsdp", 128)])["fsdp"] == [Segment(8, False), Segment(16, True)]
    with pytest.raises(ValueError, match="parallelism.tensor=3"):
        assign_axes(sl, [("tensor", 3)])
    with pytest.raises(ValueError, match="parallelism.data=2 does not fit"):
        assign_axes(sl, [("fsdp", 256), ("data", 2)])


# ---------------------------------------------------------------------------------------
# Configuration checks


@pytest.mark.parametrize("build, message", [
    (lambda: replace(CHIPS["v6e"], hbm_bandwidth=-1), "chip.hbm_bandwidth must be > 0, got -1"),
    (lambda: replace(CHIPS["v6e"], mxus=0), "chip.mxus must be an integer in 1..1024, got 0"),
    (lambda: replace(CHIPS["v6e"], ici_hop_latency=float("nan")), "chip.ici_hop_latency"),
    (lambda: replace(CHIPS["v6e"], formats={"int8": 2.0}), "chip.formats must include"),
    (lambda: replace(CHIPS["v6e"], formats={"bfloat16": 0}), "chip.formats.bfloat16 must be"),
    (lambda: Slice(dims=(16, 0), wrap=(True, True)), r"slice.dims\[1\] must be an integer"),
    (lambda: Slice(dims=(16, 16), wrap=(True,)), "slice.wrap must have one entry per axis"),
    (lambda: Slice.in_pod((32, 16), (16, 16)), "slice.dims must fit in the pod"),
    (lambda: Efficiency(mxu=1.5), r"efficiency.mxu must be in \(0, 1\], got 1.5"),
    (lambda: Efficiency(hbm=0), r"efficiency.hbm must be in \(0, 1\], got 0"),
    (lambda: replace(presets.system("v6e"), slices=0), "system.slices must be an integer"),
    (lambda: replace(presets.system("v6e"), overlap=2), r"system.overlap must be in \[0, 1\]"),
    (lambda: System(name="x", chip=CHIPS["v6e"], slice=Slice(dims=(4, 4, 4), wrap=(True,) * 3)),
     "chip.ici_ports is 4"),
    (lambda: replace(MODELS["llama2-70b"], kv_heads=3), "model.kv_heads must divide"),
    (lambda: replace(MODELS["llama2-70b"], layers=0), "model.layers must be an integer"),
    (lambda: replace(MODELS["mixtral-8x7b"], top_k=9), "model.top_k must be an integer"),
    (lambda: Parallelism(fsdp=6, expert=4), "parallelism.expert must divide parallelism.fsdp"),
    (lambda: Training(model=MODELS["llama2-70b"], parallelism=Parallelism(tensor=3),
                      global_batch=8), "parallelism.tensor must divide model.heads"),
    (lambda: Training(model=MODELS["llama2-70b"], parallelism=Parallelism(),
                      global_batch=8, recompute=1.5), r"training.recompute must be in \[0, 1\]"),
    (lambda: Training(model=MODELS["llama2-70b"], parallelism=Parallelism(),
                      global_batch=8, dcn_overlap=1), "training.dcn_overlap must be True or"),
    (lambda: workloads.UNet(depths=(0, 2)), "unet.depths must have one entry per level"),
    (lambda: workloads.Inference(model=MODELS["llama2-70b"], batch=1, prompt=10 ** 6,
                                 output=1), "inference.prompt must be an integer"),
    (lambda: presets.system("v7"), "preset must be one of"),
])
def test_bad_configuration_names_the_parameter(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_layout_mismatches_are_refused():
    sys_ = presets.system("v6e", slices=2)
    t = presets.training("llama2-70b", sys_)
    with pytest.raises(ValueError, match="must equal the chips of a slice"):
        training_step(sys_, replace(t, parallelism=Parallelism(fsdp=128)))
    with pytest.raises(ValueError, match="training.global_batch must be a multiple"):
        training_step(sys_, replace(t, global_batch=100))


# ---------------------------------------------------------------------------------------
# Properties

PROPERTY = settings(max_examples=60, deadline=None, database=None, print_blob=True)
"""Hypothesis settings of every property: no example database written into the tree; a
failure prints its falsifying example and the blob that reproduces it."""
SLICE_COUNTS = st.integers(1, 40)
WORKLOADS = st.sampled_from(["gpt3-175b", "llama2-70b", "mixtral-8x7b"])
CHIP_NAMES = st.sampled_from(["v6e", "v5e", "v5p"])
FACTORS = st.floats(1.0, 8.0)


@PROPERTY
@given(chip=CHIP_NAMES, workload=WORKLOADS, slices=SLICE_COUNTS, hbm=FACTORS, ici=FACTORS,
       dcn=FACTORS, mac=FACTORS)
def test_more_bandwidth_never_slows_a_step(chip, workload, slices, hbm, ici, dcn, mac):
    sys_ = presets.system(chip, slices=slices)
    work = presets.training(workload, sys_)
    c = sys_.chip
    faster = replace(sys_, chip=replace(c, hbm_bandwidth=c.hbm_bandwidth * hbm,
                                        ici_link_bandwidth=c.ici_link_bandwidth * ici,
                                        dcn_bandwidth=c.dcn_bandwidth * dcn,
                                        mac_rate=c.mac_rate * mac))
    assert training_step(faster, work).step <= training_step(sys_, work).step * (1 + 1e-12)


@PROPERTY
@given(tensor=st.sampled_from([1, 2, 4, 8]), slices=st.integers(1, 8), hbm=FACTORS,
       ici=FACTORS, dcn=FACTORS, batch=st.sampled_from([1, 8, 64]),
       dcn_overlap=st.booleans())
def test_more_bandwidth_never_slows_tensor_parallelism_or_inference(tensor, slices, hbm, ici,
                                                                     dcn, batch, dcn_overlap):
    sys_ = presets.system("v6e", slices=slices)
    work = replace(presets.training("llama2-70b", sys_), dcn_overlap=dcn_overlap,
                   parallelism=Parallelism(tensor=tensor, fsdp=256 // tensor))
    c = sys_.chip
    wide = replace(c, hbm_bandwidth=c.hbm_bandwidth * hbm,
                   ici_link_bandwidth=c.ici_link_bandwidth * ici,
                   dcn_bandwidth=c.dcn_bandwidth * dcn)
    assert (training_step(replace(sys_, chip=wide), work).step
            <= training_step(sys_, work).step * (1 + 1e-12))
    serve = presets.system("v6e", slice_=presets.INFERENCE_SLICE)
    inf = replace(presets.inference_preset("llama2-70b"), batch=batch)
    slow, fast = costs.inference(serve, inf), costs.inference(replace(serve, chip=wide), inf)
    assert fast.prefill_seconds <= slow.prefill_seconds * (1 + 1e-12)
    assert fast.decode_step_seconds <= slow.decode_step_seconds * (1 + 1e-12)


@PROPERTY
@given(chip=CHIP_NAMES, workload=WORKLOADS, slices=SLICE_COUNTS,
       terms=st.lists(st.floats(0.05, 1.0), min_size=5, max_size=5))
def test_lower_efficiency_never_speeds_a_step(chip, workload, slices, terms):
    sys_ = presets.system(chip, slices=slices)
    work = presets.training(workload, sys_)
    worse = replace(sys_, efficiency=Efficiency(**dict(zip(Efficiency.TERMS, terms,
                                                           strict=True))))
    assert training_step(worse, work).step >= training_step(sys_, work).step * (1 - 1e-12)


@PROPERTY
@given(chip=CHIP_NAMES, workload=WORKLOADS, base=SLICE_COUNTS, more=st.integers(0, 40),
       measured=st.booleans())
def test_weak_scaling_never_exceeds_one(chip, workload, base, more, measured):
    """More chips with the per-chip batch fixed never raise per-chip throughput."""
    def step(n):
        sys_ = presets.system(chip, slices=n, measured=measured)
        return training_step(sys_, presets.training(workload, sys_))

    small, large = step(base), step(base + more)
    efficiency = weak_scaling_efficiency(large, small)
    assert 0 < efficiency <= 1 + 1e-12
    assert large.tokens_per_second / large.chips <= small.tokens_per_second / small.chips * (
        1 + 1e-12)
    assert 0 < large.mfu <= large.hfu <= 1


@PROPERTY
@given(kind=st.sampled_from(["all_gather", "reduce_scatter", "all_reduce", "all_to_all"]),
       lengths=st.lists(st.integers(2, 16), min_size=1, max_size=3),
       wraps=st.lists(st.booleans(), min_size=3, max_size=3),
       volume=st.floats(1.0, 1e10), extra=st.floats(1.0, 10.0))
def test_collectives_grow_with_volume_and_shrink_with_bandwidth(kind, lengths, wraps, volume,
                                                                extra):
    segments = [Segment(k, w) for k, w in zip(lengths, wraps, strict=False)]
    sys_ = presets.system("v6e")
    t = collective_time(kind, segments, volume, sys_)
    assert t > 0
    assert collective_time(kind, segments, volume * extra, sys_) >= t
    wide = replace(sys_, chip=replace(sys_.chip, ici_link_bandwidth=sys_.chip.ici_link_bandwidth
                                      * extra))
    assert collective_time(kind, segments, volume, wide) <= t


# ---------------------------------------------------------------------------------------
# Calibration loader


def write_results(directory, benchmark, tables):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"{benchmark}.json").write_text(json.dumps(
        {"benchmark": benchmark, "environment": {}, "tables": tables}))


MXU_ROWS = [{"format": "int8", "rows": 8, "cols": 8, "m": 256, "k": 32, "n": 32, "cycles": 4124,
             "utilization": 0.993},
            {"format": "int8", "rows": 16, "cols": 16, "m": 256, "k": 64, "n": 64,
             "cycles": 4148, "utilization": 0.987},
            {"format": "bfloat16", "rows": 16, "cols": 16, "m": 256, "k": 64, "n": 64,
             "cycles": 4148, "utilization": 0.987}]
# Rows in the schemas the benchmarks write (sim/tensorcore_perf.py, sim/hbm_perf.py,
# sim/ici_perf.py, sim/pod_perf.py), cut down to the keys that matter and a few others.
TENSORCORE_ROWS = [
    {"m": 512, "k": 512, "n": 512, "format": "bfloat16", "rows": 16, "cols": 16,
     "cycles": 534539, "utilization": 0.981, "roofline": 1.0, "roofline_fraction": 0.981},
    {"m": 1024, "k": 1024, "n": 1024, "format": "int8", "rows": 16, "cols": 16,
     "cycles": 4213052, "utilization": 0.9956, "roofline": 1.0, "roofline_fraction": 0.9956},
    {"m": 1024, "k": 1024, "n": 1024, "format": "bfloat16", "rows": 16, "cols": 16,
     "cycles": 4218931, "utilization": 0.9942, "roofline": 1.0, "roofline_fraction": 0.9942}]
HBM_ROWS = [{"pattern": "seq_read", "preset": "HBM2-2000", "efficiency": 0.923, "bound": 0.933},
            {"pattern": "rand_read", "preset": "HBM2-2000", "efficiency": 0.446, "bound": 0.467},
            {"pattern": "stream", "preset": "HBM2-2000", "efficiency": 0.839, "bound": 0.933}]
ICI_ROWS = [{"dims": [4, 4], "vcs": 4, "packet_flits": 4, "saturation": 0.734, "ideal": 1.0,
             "zero_load_latency": 11.2, "points": []},
            {"dims": [8, 8], "vcs": 4, "packet_flits": 4, "saturation": 0.52, "ideal": 1.0,
             "zero_load_latency": 15.2, "points": []},
            {"dims": [8, 8], "vcs": 2, "packet_flits": 4, "saturation": 0.443, "ideal": 1.0,
             "zero_load_latency": 15.2, "points": []},
            {"dims": [8, 8], "vcs": 4, "alloc_iters": 3, "packet_flits": 4, "saturation": 0.58,
             "ideal": 1.0, "zero_load_latency": 15.2, "points": []}]


def busbw_row(collective, topology, chips, size, efficiency):
    return {"collective": collective, "topology": topology, "chips": chips, "ring": 4,
            "bytes_per_chip": size, "cycles": 100, "busbw": 32 * efficiency,
            "link_bound": 32.0, "efficiency": efficiency, "checked": True}


COLLECTIVES = {
    "busbw": [busbw_row("all_reduce", "1x4", 4, 1024, 0.47),
              busbw_row("all_reduce", "1x4", 4, 1 << 20, 0.93),
              busbw_row("reduce_scatter", "4x4", 16, 1 << 20, 0.91),
              busbw_row("all_reduce", "4x4", 16, 1 << 20, 0.9),
              busbw_row("all_reduce", "4x4", 16, 1 << 14, 0.8)],
    "alpha_beta": [{"topology": "1x4", "collective": "all_reduce", "alpha_cycles": 6.0,
                    "per_hop_cycles": 2, "bytes_per_cycle": 30.0, "link_bytes_per_cycle": 16,
                    "worst_error": 0.01, "errors": {}, "crossover_bytes": 1016},
                   {"topology": "4x4", "collective": "reduce_scatter", "alpha_cycles": 9.0,
                    "per_hop_cycles": 2, "bytes_per_cycle": 29.0, "link_bytes_per_cycle": 16,
                    "worst_error": 0.02, "errors": {}, "crossover_bytes": 1100},
                   {"topology": "4x4", "collective": "all_reduce", "alpha_cycles": 8.0,
                    "per_hop_cycles": 2, "bytes_per_cycle": 29.5, "link_bytes_per_cycle": 16,
                    "worst_error": 0.02, "errors": {}, "crossover_bytes": 1050}],
    "cost": [{"topology": "1x4", "build_seconds": 150.0, "run_seconds": 5.0, "cycles": 1950}]}
"""A small collectives.json as sim/pod_perf.py writes it: tables busbw, alpha_beta, cost."""


def test_calibration_reads_the_mxu_results(tmp_path):
    """The MXU benchmark's own results (docs/results/mxu.json, written by ``make bench``) give
    the MXU term where no TensorCore GEMM table stands before them: the file exists, its
    utilization table has the rows the calibration needs, and the term is measured."""
    results = ROOT / "docs" / "results" / "mxu.json"
    (tmp_path / "mxu.json").write_text(results.read_text())
    terms = calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    assert terms["mxu"].measured and terms["mxu"].origin.startswith("mxu.json, utilization"), \
        terms["mxu"]
    assert 0.9 < terms["mxu"].value <= 1.0


def test_calibration_from_present_files(tmp_path):
    write_results(tmp_path, "tensorcore", {"gemm": TENSORCORE_ROWS})
    write_results(tmp_path, "hbm", {"patterns": HBM_ROWS})
    write_results(tmp_path, "ici", {"saturation": ICI_ROWS})
    write_results(tmp_path, "collectives", COLLECTIVES)
    terms = calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    # The largest bfloat16 GEMM, not the (larger-utilization) int8 one.
    assert terms["mxu"].value == 0.9942
    assert terms["mxu"].origin == "tensorcore.json, gemm row 2"
    assert terms["hbm"].value == 0.839 and terms["hbm"].origin == "hbm.json, patterns row 2"
    # The largest all-reduce on the largest pod: 1 MiB per chip on the 4x4.
    assert terms["ici_collective"].value == 0.9
    assert terms["ici_collective"].origin == "collectives.json, busbw row 3"
    # No all-to-all in collectives.json: uniform random saturation on the largest network,
    # with the pod's router (one allocator iteration), not the three-iteration row.
    assert terms["ici_all_to_all"].value == 0.52
    assert terms["ici_all_to_all"].origin == "ici.json, saturation row 1"
    # (8 + 2) cycles per ring step on the 4x4's all-reduce, a cycle being 16 B of a 100 GB/s
    # link: 1.6 ns, on top of the published 1 us of the physical link.
    assert terms["ici_hop_latency"].value == pytest.approx(1e-6 + 10 * 16 / 100e9)
    assert terms["ici_hop_latency"].origin == "collectives.json, alpha_beta row 2"
    assert all(t.measured for n, t in terms.items() if n != "dcn")
    assert not terms["dcn"].measured
    sys_ = presets.system("podium", results=tmp_path)
    assert sys_.efficiency.ici_collective == 0.9
    assert sys_.chip.ici_hop_latency == pytest.approx(1.0016e-6)
    assert sys_.efficiency.source("hbm").startswith("measured (hbm.json, patterns row 2:")
    # The v4 preset takes the same efficiencies, its latency moved to its 45 GB/s link.
    v4 = calibrate.measured_terms(CHIPS["v4"], tmp_path)
    assert v4["ici_hop_latency"].value == pytest.approx(1e-6 + 10 * 16 / 45e9)


def test_calibration_all_to_all_from_the_pod(tmp_path):
    """The pod benchmark's all-to-all table, when present, gives the all-to-all term: the
    largest message on the largest pod, as a fraction of the bisection bound."""
    write_results(tmp_path, "ici", {"saturation": ICI_ROWS})
    a2a = [{"collective": "all_to_all", "topology": t, "chips": c, "bytes_per_chip": b,
            "cycles": 100, "of_bisection_bound": f}
           for t, c, b, f in (("1x4", 4, 1 << 18, 0.85), ("4x4", 16, 1 << 14, 0.7),
                              ("4x4", 16, 1 << 18, 0.83))]
    write_results(tmp_path, "collectives", {**COLLECTIVES, "all_to_all": a2a})
    terms = calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    assert terms["ici_all_to_all"].value == 0.83
    assert terms["ici_all_to_all"].origin == "collectives.json, all_to_all row 2"


def test_calibration_from_mxu_benchmark(tmp_path):
    write_results(tmp_path, "mxu", {"utilization": MXU_ROWS})
    terms = calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    # Streaming bound of the 16x16 array: ceil(64/16) x ceil(64/16) x max(256, 16) = 4096.
    assert terms["mxu"].value == pytest.approx(4096 / 4148)
    assert terms["mxu"].origin == "mxu.json, utilization row 2"
    assert "bfloat16 16x16" in terms["mxu"].source


def test_calibration_without_collectives_says_assumed(tmp_path):
    write_results(tmp_path, "hbm", {"patterns": HBM_ROWS})
    terms = calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    for name in ("ici_collective", "ici_hop_latency"):
        assert not terms[name].measured
        assert terms[name].source.startswith("assumed")
        assert "collectives.json not found" in terms[name].source
    assert terms["ici_hop_latency"].value == CHIPS["v6e"].ici_hop_latency
    write_results(tmp_path, "collectives", {"busbw": [busbw_row("all_gather", "1x4", 4, 1024,
                                                                0.5)]})
    terms = calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    assert "has no all_reduce row" in terms["ici_collective"].source
    assert "has no table 'alpha_beta'" in terms["ici_hop_latency"].source


def test_calibration_without_files_says_assumed(tmp_path):
    terms = calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    assert all(t.value == 1.0 for n, t in terms.items() if n != "ici_hop_latency")
    assert not any(t.measured for t in terms.values())
    assert "mxu.json not found" in terms["mxu"].source
    assert terms["ici_hop_latency"].value == CHIPS["v6e"].ici_hop_latency
    assert presets.system("podium", results=tmp_path).efficiency == Efficiency()


def test_calibration_partial_and_tensorcore_preferred(tmp_path):
    write_results(tmp_path, "mxu", {"utilization": MXU_ROWS})
    write_results(tmp_path, "hbm", {"other": HBM_ROWS})  # the table under another name
    write_results(tmp_path, "ici", {"saturation": [{"dims": [4, 4], "vcs": 2}]})
    write_results(tmp_path, "tensorcore", {"gemm": [
        {"m": 64, "k": 64, "n": 64, "format": "int8", "cycles": 900, "mxu_busy_fraction": 0.9,
         "roofline_fraction": 0.8},
        {"m": 256, "k": 64, "n": 64, "format": "int8", "cycles": 4400,
         "mxu_busy_fraction": 0.95, "roofline_fraction": 0.93}]})
    terms = calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    assert terms["mxu"].value == 0.93 and "tensorcore.json, gemm row 1" in terms["mxu"].source
    assert terms["hbm"].source == "assumed: 1.0 (hbm.json has no table 'patterns')"
    assert "has no row with" in terms["ici_all_to_all"].source
    assert not terms["ici_collective"].measured


def test_calibration_follows_file_changes(tmp_path):
    write_results(tmp_path, "hbm", {"patterns": HBM_ROWS})
    assert presets.system("podium", results=tmp_path).efficiency.hbm == 0.839
    write_results(tmp_path, "hbm", {"patterns": [{"pattern": "stream", "efficiency": 0.5}]})
    assert presets.system("podium", results=tmp_path).efficiency.hbm == 0.5


def test_calibration_refuses_a_corrupt_file(tmp_path):
    (tmp_path / "mxu.json").write_text("{not json")
    with pytest.raises(ValueError, match="mxu.json: not valid JSON"):
        calibrate.measured_terms(CHIPS["v6e"], tmp_path)
    (tmp_path / "mxu.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected an object with a 'tables' object"):
        calibrate.measured_terms(CHIPS["v6e"], tmp_path)


# ---------------------------------------------------------------------------------------
# The fit and the published comparisons


def test_fit_meets_both_gpt3_points():
    fit = trillium_fit()
    assert 0 < fit.overlap < 1 and 0 < fit.dcn_latency < 1e-3
    assert fit.base == BASE_SLICES
    for (n, target), (m, achieved) in zip(TARGETS, fit.achieved, strict=True):
        assert n == m and abs(achieved - target) < 0.01
    # The same fit with slower links: the overlap takes up the longer FSDP traffic, so it
    # must grow; both points are still met.
    slow = fit_two_points(CHIPS["v6e"], hardware.SLICES["v6e"], "gpt3-175b",
                          efficiency=Efficiency(ici_collective=0.9))
    assert slow.overlap > fit.overlap
    assert all(abs(a - e) < 0.01 for (_, e), (_, a) in zip(TARGETS, slow.achieved, strict=True))


def test_published_comparisons():
    t = __import__("sim.model_report", fromlist=["tables"]).tables(quick=True)
    for row in t["gpt3_multislice"]:
        if row["preset"] == "v6e datasheet":
            assert abs(row["error_points"]) < 1
    llama36 = [r for r in t["llama2_multislice"] if r["slices"] == 36]
    assert all(abs(r["model"] - 0.99) < 0.01 for r in llama36)
    assert {r["preset"] for r in t["palm"]} == {"v4 datasheet", "v4 measured"}
    assert all(r["efficiency_base_1"] <= 1 + 1e-12 for r in t["efficiency_vs_chips"])
    # Datasheet peaks bound PaLM's MFU from above; the closers are each below the preset's
    # value and, applied alone, give the published MFU.
    fitted = {r["preset"]: r for r in t["palm"] if r["overlap_from"] == "fitted on Trillium"}
    assert fitted["v4 datasheet"]["mfu"] > workloads.PALM_MFU
    assert fitted["v4 measured"]["mfu"] <= fitted["v4 datasheet"]["mfu"]
    closers = {r["term"]: r for r in t["palm_closers"]}
    assert all(0 < r["value_for_published_mfu"] < r["preset"] for r in closers.values())
    sys_ = presets.system("v4", slices=2, slice_=presets.PALM_SLICE)
    slow = replace(sys_, efficiency=Efficiency(
        mxu=closers["efficiency.mxu"]["value_for_published_mfu"]))
    assert training_step(slow, presets.training("palm-540b", slow)).mfu == pytest.approx(
        workloads.PALM_MFU, abs=1e-6)
    assert all(0 < r["median_s"] < 1 for r in t["speed"])
    # MaxText on v5e: every published point has a row per preset, at the run script's
    # per-chip batch; the published step and the model's step do the same FLOPs.
    rows = t["maxtext_v5e"]
    assert len(rows) == 2 * sum(len(p) for _, p in workloads.MAXTEXT_V5E.values())
    for r in rows:
        per_chip, published = workloads.MAXTEXT_V5E[r["workload"]]
        sys_ = presets.system("v5e", slices=r["slices"])
        assert presets.training(r["workload"], sys_).global_batch == \
            256 * r["slices"] * per_chip
        assert r["published_mfu"] == published[r["slices"]]
        assert r["published_weak_scaling"] == pytest.approx(
            published[r["slices"]] / published[1])
        assert r["published_step_s"] * r["published_mfu"] == pytest.approx(
            r["step_s"] * r["mfu"])
        assert 0 < r["weak_scaling"] <= 1 + 1e-12
    # The DCN sensitivity: below the NICs' rate, and applied it gives the published scaling.
    for r in t["maxtext_dcn"]:
        assert r["exposed_at_nic_rate"] > r["published_weak_scaling"]
        assert 0 < r["dcn_efficiency_for_published"] < 1
    r = t["maxtext_dcn"][-1]
    one, many = presets.system("v5e"), presets.system("v5e", slices=r["slices"])
    many = replace(many, efficiency=Efficiency(dcn=r["dcn_efficiency_for_published"]))
    steps = [training_step(s, replace(presets.training(r["workload"], s), dcn_overlap=False))
             for s in (one, many)]
    assert costs.weak_scaling_efficiency(steps[1], steps[0]) == pytest.approx(
        r["published_weak_scaling"], abs=1e-6)
    # The third-parameter illustration: right on average where it is fitted, and the PaLM
    # row is the v4 preset with that one efficiency changed.
    fitted = [r for r in t["absolute_term"] if r["role"] == "fitted on"]
    assert sum(r["mfu_error_points"] for r in fitted) == pytest.approx(0, abs=1e-6)
    palm = next(r for r in t["absolute_term"] if r["role"] == "checked")
    assert 0 < palm["mxu"] < 1
    v4 = presets.system("v4", slices=2, slice_=presets.PALM_SLICE)
    v4 = replace(v4, efficiency=Efficiency(mxu=palm["mxu"]))
    assert training_step(v4, presets.training("palm-540b", v4)).mfu == pytest.approx(
        palm["mfu"])


def test_critical_batch_ordering():
    sys_ = presets.system("v6e", slices=24)
    cb = critical_batch(sys_, presets.training("llama2-70b", sys_))
    assert cb["dcn_dominates"] < cb["dcn_exposed"]
    step = training_step(sys_, presets.training("llama2-70b", sys_),
                         tokens=cb["dcn_exposed"] * 4096 / (24 * 256) * 1.01)
    assert step.exposed_dcn == 0


def test_inference_and_unet():
    sys_ = presets.system("v6e", slice_=presets.INFERENCE_SLICE)
    r = costs.inference(sys_, presets.inference_preset("llama2-70b"))
    assert r.fits and r.prefill_tokens_per_second > r.decode_tokens_per_second > 0
    # Decode at batch 1 is bound by streaming the weights: at least weights / HBM bandwidth.
    one = costs.inference(sys_, replace(presets.inference_preset("llama2-70b"), batch=1))
    weights = 2 * MODELS["llama2-70b"].params / 8
    assert one.decode_step_seconds >= weights / sys_.chip.hbm_bandwidth
    unet_flops = sum(op.flops for op, _ in workloads.unet_ops(presets.SDXL, images=1)
                     if isinstance(op, Gemm))
    assert 5e12 < unet_flops < 8e12
    ips = costs.unet_images_per_second(sys_, presets.SDXL, images=1)
    # Never faster than the peak allows: 2 evaluations per step (guidance).
    assert ips <= sys_.chips * sys_.chip.peak_flops() / (2 * presets.SDXL.steps * unet_flops)


def test_one_configuration_is_fast():
    sys_ = presets.system("v6e", slices=24)
    work = presets.training("gpt3-175b", sys_)
    start = time.perf_counter()
    training_step(sys_, work)
    assert time.perf_counter() - start < 0.1


def test_module_exports():
    for module in (hardware, workloads, costs, calibrate, presets):
        for name in module.__all__:
            assert hasattr(module, name), f"{module.__name__}.{name}"


# ---------------------------------------------------------------------------------------
# The CLI end to end


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "sim.cli", "model", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_cli_run_training():
    r = run_cli("run", "--preset", "v6e", "--slices", "24", "--workload", "gpt3-175b",
                "--base", "4")
    assert r.returncode == 0, r.stderr
    assert "exposed DCN" in r.stdout and "weak-scaling efficiency against 4" in r.stdout
    assert "94.00%" in r.stdout


def test_cli_run_palm_with_measured_collectives(tmp_path):
    write_results(tmp_path, "collectives", COLLECTIVES)
    r = run_cli("run", "--preset", "v4", "--measured", "--slices", "2", "--workload",
                "palm-540b", "--results", str(tmp_path), "--json")
    assert r.returncode == 0, r.stderr
    measured = json.loads(r.stdout)
    r = run_cli("run", "--preset", "v4", "--slices", "2", "--workload", "palm-540b")
    assert r.returncode == 0, r.stderr
    assert "after the backward pass: exposed" in r.stdout and "12, 16, 16" in r.stdout
    # The all-reduces at 90% of the link bound: the exposed tensor-parallel time grows 1/0.9.
    sys_ = presets.system("v4", slices=2, slice_=presets.PALM_SLICE)
    datasheet = training_step(sys_, presets.training("palm-540b", sys_))
    assert measured["tensor"] == pytest.approx(datasheet.tensor / 0.9, rel=1e-3)
    assert measured["mfu"] < datasheet.mfu


def test_cli_run_json_and_inference(tmp_path):
    write_results(tmp_path, "hbm", {"patterns": HBM_ROWS})
    r = run_cli("run", "--preset", "podium", "--workload", "llama2-70b-inference", "--json",
                "--results", str(tmp_path))
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["decode_tokens_per_second"] > 0 and "Podium-measured" in result["system"]


def test_cli_refuses_bad_configuration():
    r = run_cli("run", "--set", "chip.hbm_bandwidth=-1")
    assert r.returncode == 2
    assert "chip.hbm_bandwidth must be > 0, got -1" in r.stderr
    r = run_cli("run", "--set", "parallelism.tensor=3")
    assert r.returncode == 2 and "parallelism.tensor" in r.stderr
    r = run_cli("run", "--set", "nonsense")
    assert r.returncode == 2 and "--set must be PATH=VALUE, got 'nonsense'" in r.stderr
    r = run_cli("run", "--set", "tensor=3")
    assert r.returncode == 2 and "--set takes PATH=VALUE with PATH one of" in r.stderr


def test_cli_calibration_and_report(tmp_path):
    write_results(tmp_path, "mxu", {"utilization": MXU_ROWS})
    r = run_cli("calibration", "--results", str(tmp_path))
    assert r.returncode == 0 and "measured (mxu.json" in r.stdout
    r = run_cli("report", "--quick", "--results", str(tmp_path))
    assert r.returncode == 0, r.stderr
    out = ROOT / "build" / "results"
    data = json.loads((out / "scaling.json").read_text())
    assert data["benchmark"] == "scaling" and "gpt3_multislice" in data["tables"]
    text = (out / "scaling.md").read_text()
    assert "Terms measured in this run: mxu 0.9875 (mxu.json, utilization row 2)" in text
    assert "Assumed: hbm, ici_collective, ici_all_to_all, dcn, ici_hop_latency" in text
    assert (out / "scaling_efficiency.png").stat().st_size > 0
    assert math.isclose(trillium_fit().overlap, data["tables"]["fit"][0]["value"])
