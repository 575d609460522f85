"""``make bench transformer``: the transformer operations of podium/transformer.py (softmax,
LayerNorm, RMSNorm, GELU tanh / erf, SiLU, residual add; fp32 and bfloat16) on the RTL chip in
Verilator: cycles and the VPU's busy cycles per logical row, beside the VPU passes the
documented pass counts give (docs/tensorcore.md, "VPU hardware"; podium/transformer.py
``vpu_passes``). The per-operation VPU rates the performance model is to read. Then
FlashAttention (podium/attention.py) on a 16 x 16 bfloat16 chip: exact cycles, useful MACs,
MXU utilization (useful MACs / (rows x cols x cycles)) and the engines' busy counters, the
``attention`` table of the JSON (docs/tensorcore.md, "Compiler: attention"). Then the
encoder (podium/encoder.py) in the digits ViT's shape on the same chip: cycles split by the
counters into MXU busy, VPU busy, DMA and waits, the non-GEMM share (the ``encoder`` table).
Writes docs/results/transformer.{json,md} and transformer_attention.png.

    python -m sim.transformer_perf [ops] [attention] [encoder] [--quick]

runs the parts named (default all); a part not run keeps its table from the JSON already
in docs/results (its rows say when they were measured: ``environment``).
"""

import math
import time

import ml_dtypes
import numpy as np

from podium import attention as attn
from podium import transformer as tf
from podium.cycles import model_columns
from podium.encoder import encoder
from podium.runner import run
from podium.workloads import vit
from spec.chip import ChipConfig
from spec.tensorcore import TensorCoreConfig
from verification.models import transformer as ref
from verification.models.encoder import encoder as reference
from verification.models.encoder import random_params

from . import programs  # noqa: F401  (registers the verilator backend)
from .measure import environment, environment_line, results_directory, table, write_results, wrote
from .progress import stage

__all__ = ["bench", "render", "for_model", "SEED", "PARTS", "ATTENTION_CHIP", "ATTENTION_SHAPES",
           "ENCODER_BATCHES"]

SEED = 36
SHAPE = (32, 256)
"""Logical rows x features of every measurement (``quick``: 8 x 64)."""
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
ATTENTION_CHIP = vit.TENSORCORE
"""The attention and encoder chip, the ViT's: 16 x 16 bfloat16 MXU, 512 KiB VMEM, 64-entry
engine queues (an attention step dispatches 24 matmuls: with 8-entry queues the front end
waits on the MXU's queue and the VPU's next softmax is dispatched late; the same for an
encoder's GEMM); verification/tests/test_attention.py and test_encoder.py run on the same
build."""
ATTENTION_SHAPES = [(seq, d, False) for d in (64, 128) for seq in (128, 256, 512, 1024)] + [
    (512, 64, True), (1024, 64, True)]
"""(seq, head_dim, causal) of the attention rows: one head, one batch (``quick``: 64 x 64)."""
ANCHORS = {"FlashAttention-2, A100, forward": "50-73%", "FlashAttention-3, H100, forward": "~75%"}


def _inputs(op, rows, features, dtype, rng):
    np_dtype = DTYPES[dtype]
    x = (rng.standard_normal((rows, features)) * 3).astype(np_dtype)
    inputs = {"X": x}
    if op in ("layernorm", "rmsnorm"):
        gamma = (1 + 0.1 * rng.standard_normal(features)).astype(np_dtype)
        beta = (0.1 * rng.standard_normal(features)).astype(np_dtype)
        program = getattr(tf, op)(TensorCoreConfig(), rows, features, gamma, beta, dtype=dtype)
        expect = getattr(ref, op)(x, gamma, beta, eps=program.metadata["eps"])
    elif op.startswith("gelu"):
        program = tf.gelu(TensorCoreConfig(), rows, features, form=op[5:], dtype=dtype)
        expect = getattr(ref, op)(x)
    elif op == "add":
        inputs["R"] = (rng.standard_normal((rows, features)) * 3).astype(np_dtype)
        program = tf.residual_add(TensorCoreConfig(), rows, features, dtype=dtype)
        expect = ref.add(x, inputs["R"])
    else:
        program = getattr(tf, op)(TensorCoreConfig(), rows, features, dtype=dtype)
        expect = getattr(ref, op)(x)
    return program, inputs, expect


def _passes(op, features, dtype, lanes, row_bytes):
    """VPU passes per logical row from the documented counts (padding masks not counted)."""
    esize = 4 if dtype == "float32" else 2
    span = math.ceil(features * esize / row_bytes)
    elementwise, stat, reductions = tf.vpu_passes(op, span, dtype, features)
    halves = 2 if dtype == "bfloat16" else 1
    levels = int(math.log2(lanes))
    red = (halves * span + levels + (halves - 1))
    return elementwise * span * halves + stat + reductions * red


PARTS = ("ops", "attention", "encoder")
ENCODER_BATCHES = (6, 12)
"""Images of the ViT-shaped encoder rows: one tile of six (two halves of three), two tiles."""


def bench(quick=False, parts=PARTS):
    """The parts named (``ops``: every operation and type on the default chip; ``attention``:
    the attention rows; ``encoder``: the ViT's encoder); writes docs/results/transformer.*,
    a part not run keeping its table (and environment) from the JSON already there."""
    old = {}
    path = results_directory(quick) / "transformer.json"
    if path.exists():
        import json

        old = json.loads(path.read_text())
    tables = {part: old.get("tables", {}).get(part, []) for part in PARTS}
    envs = dict(old.get("environments", {}))
    if old and "environments" not in old:       # a JSON from before the parts: ops only
        envs["ops"] = old["environment"]
    for part in parts:
        tables[part] = {"ops": _ops, "attention": _attention, "encoder": _encoder}[part](quick)
        envs[part] = environment()
    tc = TensorCoreConfig()
    write_results("transformer", tables, environment(), render, quick, seed=SEED,
                  environments=envs,
                  chip={"lanes": tc.lanes, "row_bytes": tc.row_bytes,
                        "mxu": f"{tc.mxu.rows}x{tc.mxu.cols} {tc.mxu.fmt}"},
                  attention_chip={"mxu": "16x16 bfloat16", "vmem_bytes": 1 << 19,
                                  "queue_depth": ATTENTION_CHIP.queue_depth,
                                  "lanes": ATTENTION_CHIP.lanes,
                                  "row_bytes": ATTENTION_CHIP.row_bytes},
                  anchors=ANCHORS, model=for_model(tables))
    if tables["attention"]:
        _plot(tables["attention"], results_directory(quick) / "transformer_attention.png")
    return tables


def for_model(tables):
    """The figures a performance model reads (docs/tensorcore.md, "Measured results" of the
    transformer bench): the VPU's rate per operation and type (elements per cycle of the
    ``ops`` rows), attention's MXU utilization per shape, and the encoder's non-GEMM share
    and MXU utilization per batch."""
    return {
        "vpu_elements_per_cycle": {f"{r['op']}.{r['dtype']}": r["elements_per_cycle"]
                                   for r in tables.get("ops") or []},
        "attention_mxu_utilization": [
            {"seq": r["seq"], "head_dim": r["head_dim"], "causal": r["causal"],
             "mxu_utilization": r["mxu_utilization"]} for r in tables.get("attention") or []],
        "encoder": [{"model": r["model"], "batch": r["batch"],
                     "non_gemm_share": r["non_gemm_share"],
                     "mxu_utilization": r["mxu_utilization"],
                     "vpu_busy_share": r["vpu_busy"] / r["cycles"]}
                    for r in tables.get("encoder") or []],
    }


def _ops(quick):
    rows, features = (8, 64) if quick else SHAPE
    tc = TensorCoreConfig()
    chip = ChipConfig(tensorcore=tc)
    rng = np.random.default_rng(SEED)
    out_rows = []
    for op in tf.OPS:
        for dtype in DTYPES:
            program, inputs, expect = _inputs(op, rows, features, dtype, rng)
            stage(f"transformer: {op} {dtype} {rows} x {features} on the RTL chip")
            golden, want = run(program, inputs)
            start = time.perf_counter()
            result, got = run(program, inputs, sim="verilator", chip=chip)
            wall = time.perf_counter() - start
            if result.status != "done":
                raise RuntimeError(f"{op} {dtype}: the RTL stopped with {result.error.name}")
            y = got["Y"]
            c = result.counters
            passes = _passes(op, features, dtype, tc.lanes, tc.row_bytes) * rows
            err = float(np.max(np.abs(y.astype(np.float64) - expect)
                               / np.maximum(1, np.abs(expect))))
            out_rows.append({
                "op": op, "dtype": dtype, "rows": rows, "features": features,
                "cycles": int(c["cycles"]), "vpu_busy": int(c["vpu_busy"]),
                "dma_busy": int(c["dma_busy"]), "vpu_passes_documented": passes,
                "cycles_per_row": c["cycles"] / rows,
                "elements_per_cycle": rows * features / c["cycles"],
                "bit_exact_with_golden": bool(np.array_equal(y.view(np.uint8),
                                                             want["Y"].view(np.uint8))),
                "max_error": err, "tolerance": tf.TOLERANCE[op][dtype == "bfloat16"],
                "run_seconds": float(c["run_seconds"]), "wall_seconds": wall,
                **model_columns(program, int(c["cycles"])),
            })
    return out_rows


def _attention(quick):
    """Each shape of :data:`ATTENTION_SHAPES` on the attention chip: the RTL's counters, the
    golden simulator's output (bit-exact?) and the float64 reference's (error)."""
    chip = ChipConfig(tensorcore=ATTENTION_CHIP)
    rows = []
    for seq, d, causal in ([(64, 64, False)] if quick else ATTENTION_SHAPES):
        program = attn.attention(ATTENTION_CHIP, seq, d, causal=causal)
        rng = np.random.default_rng(SEED)
        x = {n: rng.standard_normal((seq, d)).astype(ml_dtypes.bfloat16) for n in "QKV"}
        stage(f"attention: seq {seq} head_dim {d}{' causal' if causal else ''} on the RTL "
              f"chip")
        golden, want = run(program, x)
        start = time.perf_counter()
        result, got = run(program, x, sim="verilator", chip=chip, max_steps=20_000_000)
        wall = time.perf_counter() - start
        if result.status != "done":
            raise RuntimeError(f"attention {seq} x {d}: the RTL stopped with "
                               f"{result.error.name}")
        c = result.counters
        expect = ref.attention(x["Q"], x["K"], x["V"], causal)
        err = float(np.max(np.abs(got["O"] - expect))
                    / np.max(np.abs(x["V"].astype(np.float64))))
        macs = program.metadata["useful_macs"]
        peak = ATTENTION_CHIP.mxu.rows * ATTENTION_CHIP.mxu.cols
        rows.append({
            "seq": seq, "head_dim": d, "heads": 1, "batch": 1, "causal": causal,
            "q_block": program.metadata["q_block"], "kv_block": program.metadata["kv_block"],
            "steps": program.metadata["steps"], "scale": program.metadata["scale"],
            "cycles": int(c["cycles"]), "useful_macs": macs,
            "mxu_utilization": macs / (peak * c["cycles"]),
            "mxu_busy": int(c["mxu_busy"]), "vpu_busy": int(c["vpu_busy"]),
            "dma_busy": int(c["dma_busy"]), "mxu_vectors": int(c["mxu_vectors"]),
            "mxu_starved": int(c["mxu_starved"]), "vpu_wait": int(c["vpu_wait"]),
            "dispatch_stalls": int(c["dispatch_stalls"]),
            "bit_exact_with_golden": bool(np.array_equal(got["O"].view(np.uint32),
                                                         want["O"].view(np.uint32))),
            "max_error": err, "tolerance": attn.TOLERANCE,
            "run_seconds": float(c["run_seconds"]), "wall_seconds": wall,
            **model_columns(program, int(c["cycles"])),
        })
    return rows


def _model(rows):
    """The cycle model's header cells and a row's cells (podium/cycles.py), when the rows
    have them (rows measured before the model have not)."""
    if not rows or "model_cycles" not in rows[0]:
        return [], lambda r: []
    return ["model cycles", "model / RTL"], lambda r: [f"{r['model_cycles']:,}",
                                                       f"{r['model_ratio']:.3f}"]


def _encoder(quick):
    """The ViT's encoder shape (random parameters at a trained model's scale: cycles do not
    depend on the values) on the transformer chip: the RTL's counters split into MXU busy,
    VPU busy, DMA and stalls; useful MACs, MXU utilization, the non-GEMM share."""

    chip = ChipConfig(tensorcore=ATTENTION_CHIP)
    shape = vit.VitShape()
    rows = []
    for batch in ([2] if quick else ENCODER_BATCHES):
        rng = np.random.default_rng(SEED)
        params = random_params(rng, features=vit.PATCH, width=shape.dim, mlp=shape.mlp,
                               classes=vit.CLASSES, seq=vit.TOKENS, blocks=shape.blocks)
        x = rng.uniform(0, 1, (batch * vit.TOKENS, vit.PATCH)).astype(np.float32)
        program = encoder(ATTENTION_CHIP, params, seq=vit.TOKENS, heads=shape.heads,
                          batch=batch)
        stage(f"encoder: ViT shape, {batch} images on the RTL chip")
        _, want = run(program, {"X": x})
        start = time.perf_counter()
        result, got = run(program, {"X": x}, sim="verilator", chip=chip,
                          max_steps=40_000 * batch + 100_000)
        wall = time.perf_counter() - start
        if result.status != "done":
            raise RuntimeError(f"encoder {batch}: the RTL stopped with {result.error.name}")
        c = result.counters
        macs = _encoder_macs(program.metadata) * batch
        peak = ATTENTION_CHIP.mxu.rows * ATTENTION_CHIP.mxu.cols
        expect = reference(params, x, seq=vit.TOKENS, heads=shape.heads)
        rows.append({
            "model": "vit", "batch": batch, "group": program.metadata["group"],
            "blocks": shape.blocks, "width": shape.dim, "heads": shape.heads,
            "mlp": shape.mlp, "seq": vit.TOKENS, "instructions": len(program.words),
            "cycles": int(c["cycles"]), "cycles_per_sequence": c["cycles"] / batch,
            "useful_macs": macs, "mxu_utilization": macs / (peak * c["cycles"]),
            "mxu_busy": int(c["mxu_busy"]), "vpu_busy": int(c["vpu_busy"]),
            "dma_busy": int(c["dma_busy"]), "mxu_starved": int(c["mxu_starved"]),
            "vpu_wait": int(c["vpu_wait"]), "mxu_wait": int(c["mxu_wait"]),
            "dma_wait": int(c["dma_wait"]), "dispatch_stalls": int(c["dispatch_stalls"]),
            "non_gemm_share": 1 - c["mxu_busy"] / c["cycles"],
            "bit_exact_with_golden": bool(np.array_equal(got["Y"].view(np.uint32),
                                                         want["Y"].view(np.uint32))),
            "max_error": float(np.max(np.abs(got["Y"] - expect)
                                      / np.maximum(1, np.abs(expect)))),
            "build_seconds": float(c["build_seconds"]),
            "run_seconds": float(c["run_seconds"]), "wall_seconds": wall,
            "cycles_per_second": c["cycles"] / c["run_seconds"],
            **model_columns(program, int(c["cycles"])),
        })
    return rows


def _encoder_macs(meta):
    """Useful multiply-accumulates of one sequence: its GEMMs (embedding, QKV, projection,
    MLP, the classifier on token 0) and attention (Q K^T and P V of every head)."""
    s, d, m, blocks = meta["seq"], meta["width"], meta["mlp"], meta["blocks"]
    per_block = s * (d * 3 * d + d * d + 2 * d * m) + 2 * s * s * d
    return s * meta["features"] * d + blocks * per_block + d * meta["classes"]


def _plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for d in sorted({r["head_dim"] for r in rows}):
        for causal in (False, True):
            pts = sorted((r["seq"], r["mxu_utilization"]) for r in rows
                         if r["head_dim"] == d and r["causal"] == causal)
            if pts:
                ax.plot([p[0] for p in pts], [100 * p[1] for p in pts], marker="o",
                        label=f"head_dim {d}{', causal' if causal else ''}")
    ax.axhspan(50, 73, color="grey", alpha=0.15, label="FlashAttention-2 on A100 (fwd)")
    ax.axhline(75, color="grey", ls="--", lw=1, label="FlashAttention-3 on H100 (fwd)")
    ax.axhline(80, color="red", ls=":", lw=1, label="target 80%")
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 100)
    ax.set_xlabel("sequence length")
    ax.set_ylabel("MXU utilization (%)")
    ax.set_title("FlashAttention forward, 16 x 16 bfloat16 MXU (RTL)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    wrote(path)
    plt.close(fig)


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    rows = data["tables"]["ops"]
    chip = data["chip"]
    return "\n".join([
        "# Transformer operations on the RTL chip", "",
        f"Measured by `make bench` on "
        f"{environment_line(data.get('environments', {}).get('ops', data['environment']))}.",
        "",
        f"Each operation of podium/transformer.py on the default chip ({chip['mxu']} MXU, "
        f"{chip['lanes']} VPU lanes, {chip['row_bytes']}-byte VMEM rows, HBM through the "
        f"golden device model) in Verilator, on seeded (seed {data['seed']}) N(0, 3^2) data: "
        "the cycle counter of the whole program (HBM in and out, double-buffered row tiles), "
        "the VPU's busy cycles, and the VPU passes the documented counts give "
        "(docs/tensorcore.md, \"VPU hardware\": a pass per fp32 VMEM row, two per bfloat16 "
        "row; a reduction `span + log2 lanes`; padding masks not counted; a function "
        "followed by another operation costs 8 cycles more, not counted). \"bit-exact\": "
        "the output equals the golden ISA simulator's; error: max |y - ref| / max(1, |ref|) "
        "against numpy float64.", "",
        table(["op", "type", "rows x features", "cycles", "cycles / row", "elements / cycle",
               "VPU busy", "VPU passes (documented)", "busy / passes", "bit-exact",
               "error (tolerance)", *_model(rows)[0]],
              [[r["op"], r["dtype"], f"{r['rows']} x {r['features']}", f"{r['cycles']:,}",
                f"{r['cycles_per_row']:.1f}", f"{r['elements_per_cycle']:.2f}",
                f"{r['vpu_busy']:,}", f"{r['vpu_passes_documented']:,}",
                f"{r['vpu_busy'] / r['vpu_passes_documented']:.2f}",
                "yes" if r["bit_exact_with_golden"] else "NO",
                f"{r['max_error']:.2g} ({r['tolerance']:g})", *_model(rows)[1](r)]
               for r in rows]), "",
        *_render_attention(data), *_render_encoder(data)])


def _render_attention(data):
    rows = data["tables"].get("attention") or []
    if not rows:
        return []
    chip, env = data["attention_chip"], data["environment"]
    return [
        "## Attention (FlashAttention forward)", "",
        f"Measured on "
        f"{environment_line(data.get('environments', {}).get('attention', env))}.",
        "",
        f"podium/attention.py on a {chip['mxu']} MXU chip ({chip['vmem_bytes'] // 1024} KiB "
        f"VMEM, {chip['lanes']} VPU lanes, {chip['queue_depth']}-entry engine queues) in "
        "Verilator, one head, Q, K, V seeded N(0, 1) bfloat16, O float32. Cycles: the chip's "
        "cycle counter for the whole program (Q, K, V from HBM, O back); useful MACs `2 x "
        "pairs x head_dim` (pairs: seq^2, causal seq (seq + 1) / 2); MXU utilization = "
        "useful MACs / (16 x 16 x cycles); busy: cycles each engine had work; MXU vectors: "
        "activation vectors the MXU took (x 256 MACs: the MACs computed, masked ones "
        "included); MXU starved: cycles the MXU waited with nothing to do. Anchors, same "
        "definition: "
        + ", ".join(f"{k} {v}" for k, v in data["anchors"].items())
        + ". error: max |O - ref| / max |V| against numpy float64.", "",
        table(["seq", "head_dim", "causal", "blocks q x kv", "cycles", "useful MACs",
               "MXU utilization", "MXU busy", "MXU vectors", "MXU starved", "VPU busy",
               "DMA busy", "bit-exact",
               "error (tolerance)", *_model(rows)[0]],
              [[r["seq"], r["head_dim"], "yes" if r["causal"] else "no",
                f"{r['q_block']} x {r['kv_block']}", f"{r['cycles']:,}",
                f"{r['useful_macs']:,}", f"{100 * r['mxu_utilization']:.1f}%",
                f"{r['mxu_busy'] / r['cycles']:.1%}", f"{r['mxu_vectors'] / r['cycles']:.1%}",
                f"{r['mxu_starved'] / r['cycles']:.1%}", f"{r['vpu_busy'] / r['cycles']:.1%}",
                f"{r['dma_busy'] / r['cycles']:.1%}",
                "yes" if r["bit_exact_with_golden"] else "NO",
                f"{r['max_error']:.2g} ({r['tolerance']:.2g})", *_model(rows)[1](r)]
               for r in rows]), "",
        "![MXU utilization vs sequence](transformer_attention.png)", ""]


def _render_encoder(data):
    rows = data["tables"].get("encoder") or []
    if not rows:
        return []
    chip, env = data["attention_chip"], data["environment"]
    return [
        "## The encoder (the digits ViT's shape)", "",
        f"Measured on "
        f"{environment_line(data.get('environments', {}).get('encoder', env))}.",
        "",
        f"podium/encoder.py on the same chip ({chip['mxu']} MXU, {chip['lanes']} VPU lanes, "
        f"{chip['queue_depth']}-entry queues): the ViT's shape (2 blocks, width 64, 4 heads "
        "of 16, MLP 128, 17 tokens of 4 features, 10 classes) with seeded random parameters "
        "(cycles do not depend on the values), the whole program (weights loaded once, "
        "images in tiles of two halves). Useful MACs: every GEMM's and attention's "
        "(`Q K^T`, `P V`) multiply-accumulates of the real tokens; MXU utilization = useful "
        "MACs / (16 x 16 x cycles); non-GEMM share = 1 - MXU busy / cycles (cycles the MXU "
        "had no work: VPU-only phases, waits, DMA); MXU busy / VPU busy / DMA busy: cycles "
        "each engine had work; VPU wait / MXU starved: cycles an engine's queue waited on a "
        "semaphore. error: max |logit - ref| / max(1, |ref|) against float64.", "",
        table(["images", "group", "cycles", "cycles / image", "useful MACs",
               "MXU utilization", "MXU busy", "VPU busy", "DMA busy", "VPU wait",
               "MXU starved", "non-GEMM share", "bit-exact", "error", "simulated cycles/s",
               *_model(rows)[0]],
              [[r["batch"], r["group"], f"{r['cycles']:,}", f"{r['cycles_per_sequence']:,.0f}",
                f"{r['useful_macs']:,}", f"{100 * r['mxu_utilization']:.1f}%",
                f"{r['mxu_busy'] / r['cycles']:.1%}", f"{r['vpu_busy'] / r['cycles']:.1%}",
                f"{r['dma_busy'] / r['cycles']:.1%}", f"{r['vpu_wait'] / r['cycles']:.1%}",
                f"{r['mxu_starved'] / r['cycles']:.1%}", f"{r['non_gemm_share']:.1%}",
                "yes" if r["bit_exact_with_golden"] else "NO", f"{r['max_error']:.2g}",
                f"{r['cycles_per_second']:,.0f}", *_model(rows)[1](r)] for r in rows]), ""]


def main(argv=None):
    import argparse

    p = argparse.ArgumentParser(description="the transformer benchmark's parts")
    p.add_argument("parts", nargs="*", choices=[[], *PARTS], default=[])
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    bench(args.quick, tuple(args.parts) or PARTS)


if __name__ == "__main__":
    main()
