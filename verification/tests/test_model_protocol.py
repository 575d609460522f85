"""The physical step terms, the held-out protocol and the seed table of the performance model
(podium/model/physical.py, protocol.py, seed.py). Pure Python, a few seconds."""

import json
import time
from dataclasses import replace

import pytest

from podium.model import protocol, seed
from podium.model.costs import collective_time, gemm_time, stream_time, training_costs
from podium.model.hardware import CHIPS, SLICES, Efficiency, Slice, System
from podium.model.physical import (
    BENCH_VPU_LANES,
    VPU_CLOCK,
    VPU_LANES,
    physical_system,
    physical_terms,
)
from podium.model.workloads import (
    ACT_BYTES,
    MODELS,
    Gemm,
    Parallelism,
    Stream,
    Training,
    layer_forward,
    training_ops,
)


def _sys(chip="v5e", **eff):
    return System(name="t", chip=CHIPS[chip], slice=SLICES[chip], efficiency=Efficiency(**eff))


# --- physical terms ---------------------------------------------------------------------

def test_stream_is_max_of_vpu_and_hbm():
    """Elementwise time = max(bytes / HBM, sum of elements / VPU rate per kind)."""
    sys = _sys()
    chip = replace(sys.chip, vpu_rates={"add": 1e11, "silu": 5e10})
    s = Stream("x", 819e9, (("add", 1e11), ("silu", 1e11)))
    assert stream_time(sys, s) == pytest.approx(1.0)  # HBM: 1 s, VPU unmodelled
    fast = replace(sys, chip=chip)
    assert stream_time(fast, s) == pytest.approx(1.0 + 2.0)  # VPU: 1 s + 2 s > 1 s HBM
    small = Stream("y", 819e9, (("add", 1e10),))
    assert stream_time(fast, small) == pytest.approx(1.0)  # HBM-bound


def test_vpu_rate_of_a_preset_is_the_measured_per_lane_rate_times_lanes_and_clock(tmp_path):
    data = {"model": {"vpu_elements_per_cycle": {"add.bfloat16": 2.0, "add.float32": 9.0},
                      "attention_mxu_utilization": [
                          {"seq": 512, "head_dim": 128, "causal": False, "mxu_utilization": 0.8},
                          {"seq": 1024, "head_dim": 128, "causal": False,
                           "mxu_utilization": 0.9},
                          {"seq": 2048, "head_dim": 128, "causal": True,
                           "mxu_utilization": 0.5}]}}
    (tmp_path / "transformer.json").write_text(json.dumps(data))
    terms = physical_terms(tmp_path)
    assert terms["vpu.add"].value == pytest.approx(2.0 / BENCH_VPU_LANES)
    assert terms["attention"].value == 0.9  # non-causal, head_dim 128, longest sequence
    sys = physical_system("v6e", results=tmp_path)
    assert sys.chip.vpu_rates == {"add": pytest.approx(2.0 / 8 * VPU_LANES["v6e"]
                                                       * VPU_CLOCK["v6e"])}
    assert sys.efficiency.attention == 0.9
    assert sys.chip.partial_bytes == 4


def test_attention_gemms_take_the_attention_efficiency():
    g = Gemm("scores", 2048, 128, 2048, 16, traffic=1.0)
    plain = Gemm("qkv", 2048, 128, 2048, 16)
    base = gemm_time(_sys(), g)
    assert gemm_time(_sys(attention=0.5), g) == pytest.approx(2 * base)
    assert gemm_time(_sys(attention=0.5), plain) == gemm_time(_sys(), plain)
    assert gemm_time(_sys(mxu=0.5), g) == pytest.approx(2 * base)  # 0: as the MXU's


def test_sequence_parallel_shards_norms_and_residuals():
    m = MODELS["llama2-70b"]
    full = layer_forward(m, tokens=4096, tensor=8, flash=True)[-1]
    sp = layer_forward(m, tokens=4096, tensor=8, flash=True, sequence_parallel=True)[-1]
    mlp = 3 * m.ffn / 8
    assert full.bytes == 4096 * ACT_BYTES * (10 * m.d_model + mlp)
    assert sp.bytes == 4096 * ACT_BYTES * (10 * m.d_model / 8 + mlp)
    assert dict(sp.vpu)["rmsnorm"] == 4096 * 2 * m.d_model / 8


def test_fp32_master_bytes_double_fsdp_and_dcn_traffic():
    sys = replace(_sys("v5e"), slices=4)
    t = Training(model=MODELS["maxtext-16b"], parallelism=Parallelism(fsdp=256),
                 global_batch=4 * 256)
    bf16, fp32 = training_costs(sys, t), training_costs(sys, replace(t, master_bytes=4))
    assert fp32.dcn_bandwidth == pytest.approx(2 * bf16.dcn_bandwidth)
    assert fp32.fsdp_ici > 1.9 * bf16.fsdp_ici
    assert fp32.compute == bf16.compute
    with pytest.raises(ValueError, match="training.master_bytes"):
        replace(t, master_bytes=3)


def test_reduce_scatter_moves_fp32_partials_and_has_its_own_efficiency():
    sys = _sys("v5e", ici_collective=0.9, ici_reduce_scatter=0.5)
    segs = [protocol_segment()]
    rs = collective_time("reduce_scatter", segs, 1e9, sys)
    ag = collective_time("all_gather", segs, 1e9, sys)
    assert rs > 1.7 * ag  # 0.9 / 0.5, less the latency
    t = Training(model=MODELS["maxtext-16b"], parallelism=Parallelism(fsdp=256),
                 global_batch=256)
    plain = training_costs(_sys("v5e"), t).fsdp_ici
    partial = training_costs(replace(_sys("v5e"), chip=replace(CHIPS["v5e"], partial_bytes=4)),
                             t).fsdp_ici
    # gathers twice, reduce-scatter once (at twice the bytes): 4/3 of the time
    assert partial == pytest.approx(plain * 4 / 3, rel=0.01)


def protocol_segment():
    from podium.model.costs import Segment
    return Segment(16, True)


def test_kv_heads_shared_when_the_tensor_group_outnumbers_them():
    """Llama-2 70B's 8 KV heads on 16 chips: one head per chip (replicated twice), not 8."""
    m = MODELS["llama2-70b"]
    ops = layer_forward(m, tokens=4096, tensor=16, flash=True)
    qkv = ops[0]
    assert qkv.n == (64 // 16) * 128 + 2 * 1 * 128


# --- workload shapes and FLOP counts pinned ----------------------------------------------

@pytest.mark.parametrize("run, params, layers, d, ffn", [
    ("maxtext-v4-22b", 25_760_366_592, 48, 6144, 24576),
    ("maxtext-v4-52b", 65_210_941_440, 32, 12288, 49152),
    ("maxtext-v5p-32b", 31_662_800_896, 32, 8192, 28672),
    ("maxtext-v5p-64b", 62_801_313_792, 64, 8192, 28672),
    ("maxtext-v5p-128b-256", 125_078_339_584, 64, 8192, 57344),
    ("maxtext-v5p-256b", 250_156_679_168, 64, 16384, 57344),
    ("maxtext-v5p-512b", 499_264_782_336, 128, 16384, 57344),
    ("maxtext-v5p-1024b-2048", 997_480_988_672, 128, 16384, 114688),
    ("maxtext-v5p-1024b-4096", 997_480_988_672, 128, 16384, 114688),
    ("maxtext-v5e-16b", 15_831_400_448, 32, 4096, 28672)])
def test_run_shapes(run, params, layers, d, ffn):
    """Each published run's model has the shape its run script gives and the parameter
    count of the hand formula (layers x (4 d x heads x 128 + 3 d ffn) + 2 x 32000 d, gated,
    untied: MaxText's names round, e.g. its "22B" on v4 counts 25.8 B this way)."""
    _, make = protocol.RUNS[run]
    slice_, t = make(1)
    m = t.model
    assert (m.layers, m.d_model, m.ffn) == (layers, d, ffn)
    assert m.params == m.layers * (4 * d * m.heads * 128 + 3 * d * ffn) + 2 * 32000 * d
    assert m.params == params
    assert t.parallelism.chips == slice_.chips
    assert t.master_bytes == 4


@pytest.mark.parametrize("run, chips, dims, tensor, per_chip, recompute", [
    ("maxtext-v5p-256b", 512, (8, 8, 8), 8, 1, 0.0),
    ("maxtext-v5p-512b", 512, (8, 8, 8), 8, 2, 1.0),
    ("maxtext-v5p-1024b-2048", 1024, (8, 8, 16), 16, 2, 1.0),
    ("maxtext-v5p-1024b-4096", 2048, (8, 16, 16), 16, 2, 1.0)])
def test_v5p_large_runs_as_their_scripts(run, chips, dims, tensor, per_chip, recompute):
    """configs/v5p/{256,512,1024}b.sh: v5p-1024 / -2048 / -4096 slices (N TensorCores, N / 2
    chips, a torus), ici_tensor_parallelism, FSDP over the rest, per_device_batch_size per
    chip (the global batch doubles with a second slice), remat minimal (none) or full."""
    _, make = protocol.RUNS[run]
    slice_, t = make(1)
    assert slice_.chips == chips and slice_.dims == dims and all(slice_.wrap)
    assert (t.parallelism.tensor, t.parallelism.fsdp) == (tensor, chips // tensor)
    assert t.global_batch == chips * per_chip
    assert make(2)[1].global_batch == 2 * chips * per_chip
    assert t.recompute == recompute


def test_gemm_flops_are_the_model_flops_without_recomputation():
    """6 x matmul params x tokens + the attention term, exactly, on a tensor-parallel run."""
    _, make = protocol.RUNS["maxtext-v5p-32b"]
    _, t = make(1)
    assert t.recompute == 0.0
    # fused attention recomputes its scores; remat minimal recomputes the attention
    t = replace(t, flash_attention=False, recompute_elementwise=False)
    tokens = 2048 * 7
    ops = training_ops(t, tokens=tokens)
    flops = t.parallelism.tensor * sum(op.flops * w for ph in ops.values() for op, w in ph
                                       if isinstance(op, Gemm))
    assert flops == pytest.approx(t.model.training_flops_per_token() * tokens, rel=1e-9)


def test_remat_minimal_recomputes_elementwise_work_and_attention_only():
    """checkpoint_dots_with_no_batch_dims: the weight GEMMs' outputs saved; the layers'
    streams and the attention's scores and context recomputed, once, in the backward pass.
    The extra GEMM FLOPs are exactly the attention's forward FLOPs (4 x seq x heads x
    head_dim per token and layer, over the tensor group)."""
    _, make = protocol.RUNS["maxtext-v5p-32b"]
    _, t = make(1)
    assert t.recompute == 0.0 and t.recompute_elementwise
    tokens = 2048 * 7
    on = training_ops(t, tokens=tokens)["recompute"]
    off = training_ops(replace(t, recompute_elementwise=False), tokens=tokens)["recompute"]
    assert all(w == 0 for _, w in off)
    names = {op.name for op, w in on if w}
    assert names == {"scores", "context", "elementwise"}
    m = t.model
    extra = t.parallelism.tensor * sum(op.flops * w for op, w in on if isinstance(op, Gemm))
    assert extra == pytest.approx(4 * m.seq * m.heads * m.head_dim * m.layers * tokens)
    # full remat already recomputes everything: nothing added
    full = replace(t, recompute=1.0)
    assert (training_ops(full, tokens=tokens)["recompute"]
            == training_ops(replace(full, recompute_elementwise=False),
                            tokens=tokens)["recompute"])
    assert not protocol.RUNS["maxtext-v5p-512b"][1](1)[1].recompute_elementwise
    with pytest.raises(ValueError, match="training.recompute_elementwise"):
        replace(t, recompute_elementwise=1)


@pytest.mark.parametrize("run", ["maxtext-v5p-32b", "maxtext-v5p-512b"])
def test_tensor_overlap_hides_the_backward_pass_all_reduces(run):
    """--xla_tpu_overlap_compute_collective_tc: of the passes' tensor-parallel all-reduces
    (forward, recomputed forward, backward) the backward pass's hide under the weight-gradient
    GEMMs (longer than them here); the others stay exposed."""
    chip, make = protocol.RUNS[run]
    slice_, t = make(1)
    assert t.tensor_overlap
    sys = physical_system(chip, slice_=slice_)
    on = training_costs(sys, t)
    off = training_costs(sys, replace(t, tensor_overlap=False))
    passes = 2 + t.recompute
    assert on.tensor == off.tensor > 0 and off.tensor_hidden == 0
    assert on.tensor_hidden == pytest.approx(on.tensor / passes)
    step_on = on.step(overlap=1.0, dcn_latency=0.0)
    step_off = off.step(overlap=1.0, dcn_latency=0.0)
    assert step_off.step - step_on.step == pytest.approx(on.tensor / passes)
    assert step_on.exposed_ici == pytest.approx(on.tensor * (1 - 1 / passes))


def test_tensor_overlap_is_bounded_by_the_weight_gradient_gemms():
    """A tensor group so wide that the backward pass's all-reduces outlast the dW GEMMs:
    only the dW GEMMs' time hides."""
    m = MODELS["llama2-70b"]
    sys = replace(_sys("v5e"), chip=replace(CHIPS["v5e"], ici_link_bandwidth=1e8))
    t = Training(model=m, parallelism=Parallelism(fsdp=32, tensor=8), global_batch=32,
                 tensor_overlap=True)
    c = training_costs(sys, t)
    ops = training_ops(t, tokens=8 * 4096 / 8)
    dw = sum(w * gemm_time(sys, op) for op, w in ops["backward"]
             if isinstance(op, Gemm) and op.name.endswith("_dw") and op.name != "logits_dw")
    assert c.tensor / 3 > dw
    assert c.tensor_hidden == pytest.approx(dw)


def test_runs_set_tensor_overlap_from_their_flags():
    """Every v5p script sets --xla_tpu_overlap_compute_collective_tc=true; PaLM (tensor 12)
    publishes no such schedule; the v4 and v5e runs have no tensor parallelism."""
    for run, (_, make) in protocol.RUNS.items():
        t = make(1)[1]
        assert t.tensor_overlap == run.startswith("maxtext-v5p"), run
        assert t.recompute_elementwise == (t.recompute == 0.0 and run.startswith("maxtext")), run


def test_term_effects_agree_with_the_model():
    """The variant with both terms is the held-out table; the variant with neither is the
    model without them; every v5p point is listed."""
    rows, summaries = protocol.term_effects()
    by = {s["variant"]: s for s in summaries}
    model = protocol.summary(protocol.evaluate())["mfu"]
    assert by["both (the model)"]["mae"] == pytest.approx(model["mae"])
    assert by["both (the model)"]["within"] == model["within"]
    held = {r["id"]: r for r in protocol.evaluate()}
    v5p = [p.id for p in protocol.POINTS if p.run.startswith("maxtext-v5p")]
    assert sorted(r["id"] for r in rows) == sorted(v5p)
    for r in rows:
        assert r["both (the model)"] == pytest.approx(held[r["id"]]["error_points"])
    # the recomputation only lowers MFU; the overlap only raises it
    for r in rows:
        assert r["recompute only"] <= r["neither"] + 1e-9
        assert r["both (the model)"] >= r["recompute only"] - 1e-9


# --- the protocol ---------------------------------------------------------------------------

def test_every_fitted_point_exists_and_fitted_sets_are_named():
    ids = {p.id for p in protocol.POINTS}
    assert len(ids) == len(protocol.POINTS)
    assert protocol.FITTED_POINTS <= ids
    assert set(protocol.FITTED) == {"outside_roofline", "overlap", "dcn_latency"}
    assert len(ids - protocol.FITTED_POINTS) >= 30  # the rest is held out


def test_fitted_points_are_never_agreement():
    rows = protocol.evaluate()
    fitted = {r["id"] for r in rows if r["status"] == "fitted"}
    assert fitted == protocol.FITTED_POINTS
    assert not fitted & {r["id"] for r in protocol.agreement(rows)}
    bad = [dict(r, status="held out") if r["id"] == "maxtext-v5e-32b-1" else r for r in rows]
    with pytest.raises(ValueError, match="maxtext-v5e-32b-1 is fitted"):
        protocol.agreement(bad)
    with pytest.raises(ValueError, match="fitted"):
        protocol.summary(bad)
    worse = [dict(r, status="fitted") if r["id"] == "palm-mfu" else r for r in rows]
    with pytest.raises(ValueError, match="palm-mfu is in no fitted set"):
        protocol.check_protocol(worse)


def test_calibration_fits_its_own_points_and_only_moves_with_them():
    cal = protocol.calibrate()
    assert 0 < cal.outside_roofline < 1
    rows = {r["id"]: r for r in protocol.evaluate(cal)}
    # the fitted one-slice points: right on average (least squares)
    errs = [rows[i]["error_points"] for i in protocol.FITTED["outside_roofline"]]
    assert abs(sum(errs) / len(errs)) < 1.0
    assert abs(rows["trillium-gpt3-12"]["error_points"]) < 0.5
    assert abs(rows["trillium-gpt3-24"]["error_points"]) < 0.5
    # a held-out point does not enter the fit: moving its published value changes nothing
    moved = tuple(replace(p, published=0.1) if p.id == "palm-mfu" else p
                  for p in protocol.POINTS)
    old = protocol.POINTS
    try:
        protocol.POINTS = moved
        protocol.calibrate.cache_clear()
        assert protocol.calibrate() == cal
        # while moving a fitted one does
        protocol.POINTS = tuple(replace(p, published=0.5) if p.id == "maxtext-v5e-32b-1"
                                else p for p in old)
        protocol.calibrate.cache_clear()
        assert protocol.calibrate().outside_roofline > cal.outside_roofline + 0.01
    finally:
        protocol.POINTS = old
        protocol.calibrate.cache_clear()


def test_held_out_summary_is_computed_from_held_out_rows():
    rows = protocol.evaluate()
    s = protocol.summary(rows)
    held = [abs(r["error_points"]) for r in rows
            if r["status"] == "held out" and r["metric"] in ("mfu", "hfu")]
    assert s["mfu"]["points"] == len(held)
    assert s["mfu"]["mae"] == pytest.approx(sum(held) / len(held))
    for r in rows:
        if r["status"] == "held out" and abs(r["error_points"]) > protocol.TARGET_POINTS:
            assert r["needs"], f"{r['id']} misses without saying what would close it"


def test_dcn_sensitivity_reads_the_published_losses():
    rows = protocol.dcn_sensitivity()
    r = next(r for r in rows if r["run"] == "maxtext-v5e-16b" and r["slices"] == 32)
    assert r["published_loss"] == pytest.approx(100 * (1 - 0.5465 / 0.6110))
    assert r["exposed_loss"] > r["overlapped_loss"]
    assert r["implied_alpha_us"] > 0


def test_dcn_sensitivity_covers_v5p_at_its_published_bandwidth():
    """v5p rows at the v5p page's 50 Gb/s per chip; the exposed exchange of the 128B run on
    256 chips is the ring's bandwidth term for its fp32 FSDP shard: (N - 1) / N x 2 x
    4 B x params / chips / 6.25 GB/s at N = 2."""
    rows = {(r["run"], r["slices"]): r for r in protocol.dcn_sensitivity()}
    assert {run for run, _ in rows if "v5p" in run} >= {"maxtext-v5p-32b",
                                                         "maxtext-v5p-1024b-4096"}
    r = rows[("maxtext-v5p-128b-512", 2)]
    assert r["dcn_bandwidth"] == pytest.approx(6.25e9)
    params = protocol.RUNS["maxtext-v5p-128b-512"][1](1)[1].model.params
    assert r["exposed_dcn_seconds"] == pytest.approx(4 * params / 256 / 6.25e9, rel=0.02)
    assert r["published_loss"] == pytest.approx(100 * (1 - 0.5966 / 0.6883))


# --- the seed table --------------------------------------------------------------------------

def test_seed_has_every_claim_with_a_status_and_reason():
    rows = seed.claims()
    assert len(rows) >= 22
    for r in rows:
        assert r["status"] in ("reproduced", "not reproduced", "fitted (not agreement)")
        if r["modelled"] is None:
            assert r["status"] == "not reproduced" and r["why"]
    by = {r["claim"]: r for r in rows}
    assert by["peak compute per chip vs v5e"]["modelled"] == pytest.approx(918 / 197)
    fitted = [r for r in rows if r["status"].startswith("fitted")]
    assert {r["claim"][:27] for r in fitted} == {"GPT-3 175B weak scaling, 12",
                                                 "GPT-3 175B weak scaling, 24"}


def test_model_speed_under_a_second_per_configuration():
    cal = protocol.calibrate()
    for run, (chip, make) in protocol.RUNS.items():
        t0 = time.perf_counter()
        slice_, t = make(2)
        protocol.modelled_step(training_costs(physical_system(chip, slices=2, slice_=slice_),
                                              t), cal)
        assert time.perf_counter() - t0 < 1.0, run


def test_v5e_slice_is_a_torus():
    assert protocol.RUNS["maxtext-v5e-16b"][1](1)[0] == Slice(dims=(16, 16), wrap=(True, True))


# --- the command line ------------------------------------------------------------------------

def test_cli_seed_and_heldout():
    from verification.tests.test_model import run_cli

    r = run_cli("seed", "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["claim"] for x in rows] == [x["claim"] for x in seed.claims()]
    r = run_cli("heldout", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {x["id"] for x in out["rows"] if x["status"] == "fitted"} == protocol.FITTED_POINTS
    r = run_cli("seed", "--bogus")
    assert r.returncode == 2 and "--bogus" in r.stderr


def test_make_bench_runs_the_scaling_report_once():
    """The model benchmark re-runs the scaling report itself: running every benchmark (make
    bench) or both by name runs it once; asked alone, it runs."""
    from sim.bench import BENCHES, selected

    assert "scaling" in BENCHES and "model" in BENCHES
    assert "scaling" not in selected([]) and "model" in selected([])
    assert selected(["model", "scaling"]) == ["model"]
    assert selected(["scaling"]) == ["scaling"]
    assert selected(["mxu", "hbm"]) == ["mxu", "hbm"]
