"""The engine timeline of podium/cycles.py (written from the documented timing, not fitted)
against every row the RTL measured in docs/results/transformer.json: the ``ops`` table (every
transformer operation, fp32 and bfloat16, on the default chip), the ``attention`` table
(FlashAttention on the ViT's 16 x 16 bfloat16 chip) and the ``encoder`` table (the ViT's
encoder on the same chip), the GEMM rows of docs/results/tensorcore.json and the JAX front
end's digits training programs of docs/results/training.json. Each row's
program is compiled again from the row's parameters; the model's cycles must be within the
documented bound of the RTL's (docs/tensorcore.md, "Cycle model"), and its VPU passes and
MXU vectors, which the documented counts give exactly, equal to the RTL's."""

import json
from pathlib import Path

import numpy as np
import pytest

from podium import attention as attn
from podium import compiler
from podium import transformer as tf
from podium.asm import assemble
from podium.cycles import VPU_QUEUES, timeline, two_source_stall
from podium.encoder import encoder
from podium.program import Program
from podium.runner import run
from podium.workloads import vit
from sim import programs  # noqa: F401  (registers the RTL backends)
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig
from verification.models.encoder import random_params

_DIR = Path(__file__).parents[2] / "docs" / "results"
RESULTS = json.loads((_DIR / "transformer.json").read_text())["tables"]
GEMMS = json.loads((_DIR / "tensorcore.json").read_text())["tables"]["gemm"]

BOUND = 0.05
"""The cycle model's documented agreement with the RTL, |model / RTL - 1|, on every row."""


def _op_program(row):
    op, dtype, rows, features = row["op"], row["dtype"], row["rows"], row["features"]
    tc = TensorCoreConfig()
    if op in ("layernorm", "rmsnorm"):
        return getattr(tf, op)(tc, rows, features, np.ones(features), np.zeros(features),
                               dtype=dtype)
    if op.startswith("gelu"):
        return tf.gelu(tc, rows, features, form=op[5:], dtype=dtype)
    if op == "add":
        return tf.residual_add(tc, rows, features, dtype=dtype)
    return getattr(tf, op)(tc, rows, features, dtype=dtype)


def _check(model, rtl, bound, what):
    ratio = model / rtl
    print(f"{what}: model {model}, RTL {rtl}, model / RTL {ratio:.3f} (bound {bound:.0%})")
    assert abs(ratio - 1) <= bound, f"{what}: model {model} vs RTL {rtl} ({ratio:.3f})"


@pytest.mark.parametrize("row", RESULTS["ops"], ids=lambda r: f"{r['op']}-{r['dtype']}")
def test_ops_rows(row):
    program = _op_program(row)
    model = timeline(program)
    assert model.vpu_passes == row["vpu_passes_documented"]
    _check(model.cycles, row["cycles"], BOUND,
           f"{row['op']} {row['dtype']} {row['rows']} x {row['features']}")


def _attention_id(r):
    return f"{r['seq']}-{r['head_dim']}-{'causal' if r['causal'] else 'full'}"


@pytest.mark.parametrize("row", RESULTS["attention"], ids=_attention_id)
def test_attention_rows(row):
    program = attn.attention(vit.TENSORCORE, row["seq"], row["head_dim"], causal=row["causal"])
    assert (program.metadata["q_block"], program.metadata["kv_block"]) == \
        (row["q_block"], row["kv_block"]), "the compiler chooses other blocks than the bench's"
    model = timeline(program)
    assert model.vectors == row["mxu_vectors"]
    key = (row["seq"], row["head_dim"], row["causal"])
    _check(model.cycles, row["cycles"], BOUND, f"attention {key}")


def test_dependent_commands_wait():
    """The read-after-write wait is in the model: a softmax of one row (a short chain of
    dependent commands) costs more per row than one of 32 rows."""
    big = timeline(tf.softmax(TensorCoreConfig(), 32, 256)).cycles
    small = timeline(tf.softmax(TensorCoreConfig(), 1, 256)).cycles
    assert small * 32 > big


@pytest.mark.parametrize("row", RESULTS["encoder"], ids=lambda r: f"{r['batch']}-images")
def test_encoder_rows(row):
    shape = vit.VitShape()
    assert (row["blocks"], row["width"], row["heads"], row["mlp"], row["seq"]) == \
        (shape.blocks, shape.dim, shape.heads, shape.mlp, vit.TOKENS), "not the ViT's shape"
    params = random_params(np.random.default_rng(0), features=vit.PATCH, width=shape.dim,
                           mlp=shape.mlp, classes=vit.CLASSES, seq=vit.TOKENS,
                           blocks=shape.blocks)
    program = encoder(vit.TENSORCORE, params, seq=vit.TOKENS, heads=shape.heads,
                      batch=row["batch"])
    assert len(program.words) == row["instructions"]
    _check(timeline(program).cycles, row["cycles"], BOUND, f"encoder {row['batch']} images")


def test_bank_contention_counts():
    """Attention at seq 256, head_dim 128 keeps S1 in the bank of K and V: the VPU's softmax
    and the MXU's weight reads meet on its read port, which the model charges; the blocks of
    seq 1024, head_dim 64 are in banks of their own but Q's and PV's, which the MXU and the
    VPU read at the same time."""
    shared = attn.attention(vit.TENSORCORE, 256, 128)
    apart = attn.attention(vit.TENSORCORE, 1024, 64)
    for program in (shared, apart):
        assert timeline(program).cycles > timeline(program, contention=False).cycles


@pytest.mark.parametrize("row", GEMMS, ids=lambda r: f"{r['m']}-{r['format']}")
def test_gemm_rows(row):
    """The same timeline on the TensorCore bench's GEMMs (its chip: sim/tensorcore_perf.py
    ``bench_chip``), which the analytic ``gemm_cycles`` also models."""
    rows = row["rows"]
    tc = TensorCoreConfig(mxu=MXUConfig(rows=rows, cols=rows, fmt=row["format"]),
                          vmem_bytes=512 * 1024, row_bytes=4 * rows)
    program = compiler.gemm(tc, row["m"], row["k"], row["n"])
    assert list(program.metadata["tiling"]) == list(row["tiling"])
    _check(timeline(program).cycles, row["cycles"], BOUND, f"GEMM {row['m']} {row['format']}")


def _vop(op, dtype, count, src1, src2, dst=None):
    """``vop`` commands of ``count`` rows each (sources and destination as row indices; one
    command when ``op`` is a string, else one per entry of ``op``, ``src1``, ``src2``,
    ``dst``) and ``halt``, on the default chip."""
    tc = TensorCoreConfig()
    rb = tc.row_bytes
    one = isinstance(op, str)
    ops, s1, s2 = ([op], [src1], [src2]) if one else (op, src1, src2)
    dst = [3 * tc.bank_rows] if dst is None else dst
    text = f"        li r1, {count}\n        vpu.cfg r1, r0, r0\n"
    for o, a, b, d in zip(ops, s1, s2, dst, strict=True):
        text += (f"        li r2, {d * rb}\n        li r3, {a * rb}\n        li r4, {b * rb}\n"
                 f"        vop {o}.{dtype} r2, r3, r4\n")
    return Program(words=assemble(text + "        halt\n"), config=tc, hbm_capacity=1 << 20)


_BANK = TensorCoreConfig().bank_rows
TWO_SOURCES = [(64, 0, 0), (33, 0, 0), (9, 0, 100), (16, 0, _BANK - 4), (16, 0, _BANK - 1),
               (16, _BANK - 8, _BANK + 40), (40, _BANK - 20, 2 * _BANK - 30), (64, 0, _BANK)]
"""(rows, src1, src2) of the two-source reads: ``x * x``, one bank, banks shared by some rows
only, two banks."""


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("count,src1,src2", TWO_SOURCES)
def test_two_source_reads_on_the_rtl(dtype, count, src1, src2):
    """A ``vop mul`` whose two sources share a VMEM bank on some rows takes, beyond a unary
    ``vop`` over the same rows, the cycles the model's ``two_source_stall`` plays: measured
    on the RTL (the default chip, natively; the regression builds it for test_native)."""
    cycles = {}
    for op in ("mul", "relu"):
        program = _vop(op, dtype, count, src1, src2)
        result, _ = run(program, {}, sim="native")
        assert result.status == "done"
        cycles[op] = (result.counters["cycles"], timeline(program).cycles)
    rtl = cycles["mul"][0] - cycles["relu"][0]
    model = cycles["mul"][1] - cycles["relu"][1]
    print(f"{dtype} {count} rows, src1 {src1}, src2 {src2}: two sources cost {rtl} cycles "
          f"more on the RTL, {model} in the model")
    assert model == rtl == two_source_stall(src1, src2, count, 2 if dtype == "bf16" else 1,
                                            _BANK)


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("count", [16, 33])
def test_two_source_reads_back_to_back(dtype, count):
    """Two ``x * x`` commands back to back: the model plays each from the unstalled schedule,
    so it may be a cycle off at the boundary (bfloat16, an odd count: the second command's
    first row uses the free slot of the first's last); the RTL's extra cycles over two unary
    commands are the model's within that cycle."""
    cycles = {}
    dst = [4 * _BANK, 3 * _BANK]
    for op, src1 in ((("mul", "mul"), (0, 0)), (("relu", "relu"), (5 * _BANK, 6 * _BANK))):
        program = _vop(op, dtype, count, src1, (0, 0), dst=dst)
        result, _ = run(program, {}, sim="native")
        assert result.status == "done"
        cycles[op[0]] = (result.counters["cycles"], timeline(program).cycles)
    rtl = cycles["mul"][0] - cycles["relu"][0]
    model = cycles["mul"][1] - cycles["relu"][1]
    print(f"{dtype} 2 x {count} rows of x * x: {rtl} cycles more on the RTL, {model} in the "
          f"model")
    assert rtl > 0 and abs(model - rtl) <= 1


def test_two_source_stall_counts():
    """Both sources in one bank: fp32 one cycle a row (the port's bandwidth), bfloat16 half a
    cycle a row (the issue stage's lookahead); in two banks nothing."""
    assert two_source_stall(0, 0, 64, 1, _BANK) == 64
    assert two_source_stall(0, 0, 64, 2, _BANK) == 32
    assert two_source_stall(0, 100, 63, 2, _BANK) == 32
    assert two_source_stall(0, _BANK, 64, 1, _BANK) == 0
    assert two_source_stall(0, _BANK, 64, 2, _BANK) == 0


def test_vpu_queues_are_the_rtls():
    """The queue depths the model plays are the RTL's."""
    import inspect

    from hdl.tensorcore import vpu
    from hdl.tensorcore.row_reader import RowReader

    addr = inspect.signature(RowReader).parameters["addr_depth"].default
    assert VPU_QUEUES == {"uops": vpu.UOP_DEPTH, "rows": vpu.READ_DEPTH, "addrs": addr}


TRAINING = json.loads((_DIR / "training.json").read_text())


def _handover_program(shared):
    """DMA -> VPU -> MXU -> DMA hand-overs, the VPU's busy 64 rows so that the later waits are
    at their queues' fronts before its signal: on one semaphore (``shared``) the DMA's wait,
    granted first, may take the count the VPU gave the MXU; on one semaphore per receiving
    queue (the JAX front end's rule, docs/jax.md) it cannot."""
    tc = TensorCoreConfig()
    to_mxu, to_dma = ("s0", "s0") if shared else ("s1", "s0")
    text = f"""
        li r1, 64
        vpu.cfg r1, r0, r0
        li r2, {4 * _BANK * tc.row_bytes}
        signal dma, s2
        wait vpu, s2
        vop relu.fp32 r2, r0, r0
        signal vpu, {to_mxu}
        wait mxu, {to_mxu}
        signal mxu, {to_dma}
        wait dma, {to_dma}
        halt
"""
    return Program(words=assemble(text), config=tc, hbm_capacity=1 << 20)


def test_stolen_handover_deadlocks():
    """A program whose hand-overs share a semaphore deadlocks by the ISA's semantics when the
    DMA's wait (granted first) takes the MXU's count: the timeline says so and names the
    blocked queue (the JAX front end's programs deadlocked this way, in the timeline and on
    the RTL, before it gave each receiving queue its own semaphore); one semaphore per
    receiving queue runs."""
    with pytest.raises(ValueError, match="mxu queue's front wait on s0"):
        timeline(_handover_program(shared=True))
    assert timeline(_handover_program(shared=False)).vpu_passes == 64


def test_jax_jit_runs():
    """A small jitted function of the JAX front end (podium/jax): the timeline plays it to
    the end; its MXU vectors are the documented count (32 rows x 64/16 k chunks, one column
    chunk)."""
    import jax
    import jax.numpy as jnp

    from podium.jax import compile_fn

    def f(x, w):
        return jnp.tanh(x @ w) + 1.0

    c = compile_fn(f, jax.ShapeDtypeStruct((32, 64), np.float32),
                   jax.ShapeDtypeStruct((64, 16), np.float32))
    model = timeline(c.program)
    print(f"tanh(x @ w) + 1, 32 x 64 x 16: {model.cycles} cycles in the model")
    assert model.vectors == 32 * 4 and model.mxu_cycles == 32 * 4
    assert model.cycles > model.mxu_cycles + model.vpu_passes


def _training_program(part, steps):
    import jax

    from podium.jax import compile_fn
    from podium.jax import digits as jd
    from sim.training_perf import _part

    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    fn, carry = _part(part)
    init = carry(jd.init_params(0))

    def spec(a, lead=0):
        return jax.ShapeDtypeStruct(np.shape(a)[lead:], np.asarray(a).dtype)

    return compile_fn(fn, jax.tree.map(spec, init),
                      jax.tree.map(lambda a: spec(a, 1), (xs[:steps], ys[:steps])),
                      carry=len(jax.tree.leaves(init)), steps=steps).program


@pytest.mark.parametrize("part", ["forward", "forward_backward", "step"])
def test_training_rows(part):
    """The digits training step of the JAX front end (docs/results/training.json: each part a
    program of 1 and of 3 steps on the RTL): the timeline plays it without deadlock, within
    the bound of the RTL's cycles for both programs and per step (the difference over the 2
    extra steps), its MXU vectors the RTL's exactly."""
    runs = {r["steps"]: r for r in TRAINING["tables"]["runs"] if r["part"] == part}
    models = {}
    for steps, row in runs.items():
        program = _training_program(part, steps)
        assert len(program.words) == row["instructions"], \
            "the front end's program is not the one measured: re-run make bench training"
        models[steps] = timeline(program)
        assert models[steps].vectors == row["mxu_vectors"]
        _check(models[steps].cycles, row["cycles"], BOUND, f"{part}, {steps} step(s)")
    lo, hi = sorted(runs)
    _check((models[hi].cycles - models[lo].cycles) / (hi - lo),
           (runs[hi]["cycles"] - runs[lo]["cycles"]) / (hi - lo), BOUND, f"{part} per step")


def test_training_pod_rows():
    """The data-parallel step on the 2x2 pod (docs/results/training.json ``pod``, part
    ``step``: 1 and 3 steps on the RTL pod): the timeline with the ICI queue played (the
    collectives' alpha-beta cost, sim/training_perf.py) gives the bench's model column for
    the recompiled programs, and the step per step within the issue's 10% of the RTL's; a
    pod program without a cost for its collectives is refused."""
    from podium.jax import digits as jd
    from podium.jax import pod_compile
    from sim import training_perf as tp

    runs = {r["steps"]: r for r in TRAINING["tables"]["pod"] if r["part"] == "step"}
    x_train, _, y_train, _ = jd.data(jd.SETTINGS.seed)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    pod = tp._rtl_pod()
    cost, _ = tp.collective_network(pod)
    models = {}
    for steps, row in runs.items():
        c, _, _ = pod_compile(jd.pod_sgd_step(jd.SETTINGS.lr), jd.init_params(0),
                              (xs[:steps], ys[:steps]), pod=pod)
        assert len(c.program.words) == row["instructions"], \
            "the front end's program is not the one measured: python -m sim.training_perf --pod"
        models[steps] = timeline(c.program, ici=cost)
        assert models[steps].cycles == row["model_cycles"]
        assert models[steps].ici_cycles == row["model_ici"] > 0
    lo, hi = sorted(runs)
    _check((models[hi].cycles - models[lo].cycles) / (hi - lo),
           (runs[hi]["cycles"] - runs[lo]["cycles"]) / (hi - lo), 0.10, "pod step per step")
    with pytest.raises(ValueError, match="ICI instructions"):
        timeline(c.program)


def _vit_program(steps):
    import jax

    from podium.jax import compile_fn
    from podium.jax import vit as jv

    xs, ys = jv.batches(jv.SETTINGS, steps)
    init = jv.to_heads(jv.W.init_params(jv.SHAPE, jv.SETTINGS.seed))

    def spec(a, lead=0):
        return jax.ShapeDtypeStruct(np.shape(a)[lead:], np.asarray(a).dtype)

    return compile_fn(jv.sgd_step(jv.SETTINGS.lr), jax.tree.map(spec, init),
                      jax.tree.map(lambda a: spec(a, 1), (xs, ys)),
                      carry=len(jax.tree.leaves(init)), steps=steps).program


def test_training_vit_rows():
    """The ViT's training step (docs/results/training.json ``vit``: 1 and 3 steps on the
    RTL): the timeline plays it, its cycles the bench's model column and within the bound of
    the RTL's, per program and per step, its MXU vectors the RTL's exactly."""
    runs = {r["steps"]: r for r in TRAINING["tables"]["vit"]}
    models = {}
    for steps, row in runs.items():
        program = _vit_program(steps)
        assert len(program.words) == row["instructions"], \
            "the front end's program is not the one measured: re-run make bench training"
        models[steps] = timeline(program)
        assert models[steps].vectors == row["mxu_vectors"]
        assert models[steps].cycles == row["model_cycles"]
        _check(models[steps].cycles, row["cycles"], BOUND, f"ViT step, {steps} step(s)")
    lo, hi = sorted(runs)
    _check((models[hi].cycles - models[lo].cycles) / (hi - lo),
           (runs[hi]["cycles"] - runs[lo]["cycles"]) / (hi - lo), BOUND, "ViT per step")
