"""``make bench vmath``: the accuracy of the VPU's transcendental functions (docs/vmath.md)
against float64, measured on the golden model, which the RTL equals bit for bit
(verification/tests/test_vmath.py): every bfloat16 input, a dense seeded fp32 sample of every
unsaturated exponent with the exponent boundaries, and uniform fp32 bit patterns. Writes
docs/results/vmath.{json,md}."""

import numpy as np

from spec import vmath as V
from verification.models import fp, vmath

from .measure import environment, environment_line, table, write_results

__all__ = ["bench", "render", "SEED"]

SEED = 36
SAMPLE = 1_000_000


def _inputs(quick):
    rng = np.random.default_rng(SEED)
    n = 20_000 if quick else SAMPLE
    return {
        "bf16": np.arange(1 << 16, dtype=np.uint32) << 16,
        "bf16_out": np.arange(1 << 16, dtype=np.uint32) << 16,
        "fp32_dense": vmath.dense_sample(rng, n),
        "fp32_bits": rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32),
    }


def _row(op, kind, x):
    got = vmath.compute(op, x)
    ref = vmath.reference(op, x)
    man_bits = 23
    if kind == "bf16_out":          # as on a bfloat16 row: the fp32 result rounded to bfloat16
        got = fp.to_bf16(got).astype(np.uint32) << 16
        man_bits = 7
    err = vmath.ulp_error(got, ref, man_bits)
    value = got.view(np.float32).astype(np.float64)
    finite = np.isfinite(ref) & np.isfinite(value)
    with np.errstate(invalid="ignore"):
        absolute = np.abs(value - ref)[finite]
    worst = int(np.argmax(err))
    return {"op": op, "inputs": kind, "count": len(x), "max_ulp": float(err.max()),
            "mean_ulp": float(err.mean()), "correctly_rounded": float(np.mean(err <= 0.5)),
            "max_abs": float(absolute.max()) if absolute.size else 0.0,
            "worst_x": f"{int(x[worst]):#010x}", "worst_result": f"{int(got[worst]):#010x}"}


def _every_significand(quick):
    """reciprocal on every significand of [1, 2) and rsqrt on every one of [1, 4): their
    results at every other exponent are these scaled by a power of two (exactly, where the
    result is normal: always for rsqrt), so the maxima hold over all of fp32."""
    rows = []
    for op, fields in (("reciprocal", (127,)), ("rsqrt", (127, 128))):
        worst, correct, count = 0.0, 0, 0
        for field in fields:
            for start in range(0, 1 << 23, 1 << 21):
                x = (np.uint32(field) << 23) | np.arange(start, start + (1 << 21),
                                                         dtype=np.uint32)
                if quick:
                    x = x[::256]
                err = vmath.ulp_error(vmath.compute(op, x), vmath.reference(op, x))
                worst = max(worst, float(err.max()))
                correct += int(np.sum(err <= 0.5))
                count += len(x)
        rows.append({"op": op, "count": count, "max_ulp": worst,
                     "correctly_rounded": correct / count})
    return rows


def bench(quick=False):
    """Accuracy of every op on every input set; writes docs/results/vmath.json and .md."""
    rows = [_row(op, kind, x) for op in V.OPS for kind, x in _inputs(quick).items()]
    write_results("vmath", {"accuracy": rows, "every_significand": _every_significand(quick)},
                  environment(), render, quick,
                  seed=SEED, sample=SAMPLE if not quick else 20_000, latency=V.LATENCY,
                  segments=V.SEGMENTS)
    return rows


_KINDS = {"bf16": "all 65,536 bfloat16", "bf16_out": "all bfloat16, result to bfloat16",
          "fp32_dense": "fp32 dense + boundaries", "fp32_bits": "fp32 uniform bits"}


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    rows = data["tables"]["accuracy"]
    return "\n".join([
        "# VPU transcendental functions: accuracy", "",
        f"Measured by `make bench` on {environment_line(data['environment'])}.", "",
        "The golden model's results (verification/models/vmath.py; the RTL, "
        "hdl/tensorcore/vpu_func.py, equals it bit for bit) against numpy float64, in units in "
        "the last place of fp32 at the float64 value (subnormal results: the ULP of the "
        "subnormals). \"correctly rounded\": the result is the float64 value rounded to fp32. "
        "Inputs: every bfloat16 value as fp32; a seeded (seed "
        f"{data['seed']}) sample of {data['sample']:,} fp32 values of every sign and exponent "
        "where no op saturates (|x| < 128, subnormals included) plus the values at and 1-2 "
        "ULPs either side of every power of two there; the same number of uniform fp32 bit "
        "patterns. \"result to bfloat16\": the fp32 result rounded to nearest even into "
        "bfloat16, as a bfloat16 row would hold it, its error in bfloat16 ULPs (correctly "
        "rounded: equal to the float64 value rounded to bfloat16). Special inputs (NaN, "
        "infinities, zeros, out-of-domain) count with their documented result. The "
        "algorithm: docs/vmath.md; latency "
        f"{data['latency']} cycles for every op, one result per cycle.", "",
        table(["op", "inputs", "count", "max ULP", "mean ULP", "correctly rounded",
               "max abs error", "worst input", "its result"],
              [[r["op"], _KINDS[r["inputs"]], f"{r['count']:,}", f"{r['max_ulp']:.3f}",
                f"{r['mean_ulp']:.4f}", f"{100 * r['correctly_rounded']:.3f}%",
                f"{r['max_abs']:.3g}", f"`{r['worst_x']}`", f"`{r['worst_result']}`"]
               for r in rows]), "",
        "## Every significand", "",
        "`reciprocal` on every fp32 significand of [1, 2) and `rsqrt` on every one of [1, 4) "
        "(both exponent parities): the results at every other exponent are these times a "
        "power of two (exactly wherever the result is normal; rsqrt's always is), so these "
        "maxima are those of every fp32 input with a normal result.", "",
        table(["op", "count", "max ULP", "correctly rounded"],
              [[r["op"], f"{r['count']:,}", f"{r['max_ulp']:.4f}",
                f"{100 * r['correctly_rounded']:.3f}%"]
               for r in data["tables"]["every_significand"]]), ""])
