"""``make bench transformer``: the transformer operations of podium/transformer.py (softmax,
LayerNorm, RMSNorm, GELU tanh / erf, SiLU, residual add; fp32 and bfloat16) on the RTL chip in
Verilator: cycles and the VPU's busy cycles per logical row, beside the VPU passes the
documented pass counts give (docs/tensorcore.md, "VPU hardware"; podium/transformer.py
``vpu_passes``). The per-operation VPU rates the performance model is to read. Writes
docs/results/transformer.{json,md}.

Attention and the encoder block are not here yet: the chip has no transpose for ``K^T``.
"""

import math
import time

import ml_dtypes
import numpy as np

from podium import transformer as tf
from podium.runner import run
from spec.chip import ChipConfig
from spec.tensorcore import TensorCoreConfig
from verification.models import transformer as ref

from . import programs  # noqa: F401  (registers the verilator backend)
from .measure import environment, environment_line, table, write_results
from .progress import stage

__all__ = ["bench", "render", "SEED"]

SEED = 36
SHAPE = (32, 256)
"""Logical rows x features of every measurement (``quick``: 8 x 64)."""
DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}


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


def bench(quick=False):
    """Every operation and type on the default chip; writes docs/results/transformer.*."""
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
            })
    write_results("transformer", {"ops": out_rows}, environment(), render, quick,
                  seed=SEED, chip={"lanes": tc.lanes, "row_bytes": tc.row_bytes,
                                   "mxu": f"{tc.mxu.rows}x{tc.mxu.cols} {tc.mxu.fmt}"})
    return out_rows


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    rows = data["tables"]["ops"]
    chip = data["chip"]
    return "\n".join([
        "# Transformer operations on the RTL chip", "",
        f"Measured by `make bench` on {environment_line(data['environment'])}.", "",
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
               "error (tolerance)"],
              [[r["op"], r["dtype"], f"{r['rows']} x {r['features']}", f"{r['cycles']:,}",
                f"{r['cycles_per_row']:.1f}", f"{r['elements_per_cycle']:.2f}",
                f"{r['vpu_busy']:,}", f"{r['vpu_passes_documented']:,}",
                f"{r['vpu_busy'] / r['vpu_passes_documented']:.2f}",
                "yes" if r["bit_exact_with_golden"] else "NO",
                f"{r['max_error']:.2g} ({r['tolerance']:g})"] for r in rows]), ""])
