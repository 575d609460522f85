"""``make bench training``: a training step of the digits MLP (podium/jax/digits.py: batch 64,
64-32-10, softmax cross-entropy, SGD) compiled by the JAX front end, on the RTL chip (the
ViT's TensorCore): cycles per step split into forward, backward and optimizer, and the MXU's
utilization in the backward GEMMs. Writes docs/results/training.{json,md}.

Each part is a program of its own, run for 1 and for 3 steps in one loop: the per-step
figures are the difference over 2 steps (so the loads of constants and weights before the
loop and the stores after it drop out). Forward: the loss only. Forward + backward: the loss
and ``jax.grad`` (the gradients carried, so stored once). Step: the SGD update too.
Backward = (forward + backward) - forward; optimizer = step - (forward + backward).
"""

import numpy as np

from .measure import environment, environment_line, table, write_results

__all__ = ["bench", "render", "PAGE", "PARTS", "BACKWARD_MACS"]

PAGE = "training"
PARTS = ("forward", "forward_backward", "step")
STEPS = (1, 3)
BATCH, FEATURES, HIDDEN, CLASSES = 64, 64, 32, 10
FORWARD_MACS = BATCH * FEATURES * HIDDEN + BATCH * HIDDEN * CLASSES
BACKWARD_MACS = (HIDDEN * BATCH * CLASSES          # dW2 = h^T @ dlogits
                 + BATCH * CLASSES * HIDDEN        # dh = dlogits @ W2^T
                 + FEATURES * BATCH * HIDDEN)      # dW1 = x^T @ dh
"""Multiply-accumulates of the backward GEMMs of a step (no gradient of the input)."""
COUNTERS = ("cycles", "mxu_busy", "vpu_busy", "dma_busy", "mxu_vectors", "retired")


def _part(name):
    """(step function, carry of it given the weights)."""
    import jax

    from podium.jax import digits as jd

    if name == "forward":
        return (lambda p, b: (p, jd.loss(p, *b))), (lambda p: p)
    if name == "forward_backward":
        def fb(state, b):
            p, _ = state
            value, g = jax.value_and_grad(jd.loss)(p, *b)
            return (p, g), value
        return fb, (lambda p: (p, {k: np.zeros_like(v) for k, v in p.items()}))
    return jd.sgd_step(jd.SETTINGS.lr), (lambda p: p)


def _measure(name, steps, sim):
    import jax

    from podium.jax import digits as jd
    from podium.jax import scan

    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    fn, carry = _part(name)
    p0 = jd.init_params(0)
    _, losses, counters = scan(fn, carry(p0), (xs[:steps], ys[:steps]), sim=sim)
    _, ref = jax.lax.scan(fn, carry(p0), (xs[:steps], ys[:steps]))
    program = scan.last.program
    return {"part": name, "steps": steps, "instructions": len(program.words),
            "operations": program.metadata["operations"],
            "max_loss_diff_vs_jax": float(np.max(np.abs(np.asarray(losses) - np.asarray(ref)))),
            **{k: int(counters.get(k, 0)) for k in COUNTERS},
            "run_seconds": float(counters.get("run_seconds", 0.0))}


def bench(quick=False):
    """Every part for 1 and 3 steps on the RTL; writes docs/results/training.{json,md}."""
    runs = [_measure(name, steps, "verilator") for name in PARTS for steps in STEPS]
    write_results(PAGE, {"runs": runs}, environment(), render, quick, steps=list(STEPS),
                  backward_macs=BACKWARD_MACS, forward_macs=FORWARD_MACS,
                  lanes=16)
    return runs


def _per_step(data):
    """Part -> counter -> per-step value (the difference between the runs over the extra
    steps)."""
    lo, hi = data["steps"]
    by = {(r["part"], r["steps"]): r for r in data["tables"]["runs"]}
    return {p: {k: (by[(p, hi)][k] - by[(p, lo)][k]) / (hi - lo) for k in COUNTERS}
            for p in PARTS}


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    per = _per_step(data)
    f, fb, s = per["forward"], per["forward_backward"], per["step"]
    phases = {"forward": f, "backward": {k: fb[k] - f[k] for k in COUNTERS},
              "optimizer": {k: s[k] - fb[k] for k in COUNTERS}, "step": s}
    slots = 16 * 16
    bw = phases["backward"]
    util_busy = data["backward_macs"] / (bw["mxu_busy"] * slots)
    util_cycles = data["backward_macs"] / (bw["cycles"] * slots)
    fill = data["backward_macs"] / (bw["mxu_vectors"] * slots)
    rows = [[name, f"{v['cycles']:,.0f}", f"{100 * v['cycles'] / s['cycles']:.1f}%",
             f"{v['mxu_busy']:,.0f}", f"{v['vpu_busy']:,.0f}", f"{v['dma_busy']:,.0f}",
             f"{v['mxu_vectors']:,.0f}", f"{v['retired']:,.0f}"]
            for name, v in phases.items()]
    runs = [[r["part"], r["steps"], f"{r['cycles']:,}", r["instructions"], r["operations"],
             f"{r['max_loss_diff_vs_jax']:.2g}", f"{r['run_seconds']:.0f}"]
            for r in data["tables"]["runs"]]
    return "\n".join([
        "# Training step on the chip (JAX front end)", "",
        f"Measured by `make bench training` on {environment_line(data['environment'])}.", "",
        "The digits MLP's training step (podium/jax/digits.py: batch 64, 64-32-10 ReLU, "
        "softmax cross-entropy, `jax.value_and_grad`, SGD) lowered by the JAX front end "
        "(docs/jax.md) and run on the RTL chip (Verilator, the ViT's TensorCore: 16 x 16 "
        "bfloat16 MXU). Each part is its own program run for "
        f"{data['steps'][0]} and {data['steps'][1]} steps of its loop; per step: the "
        "difference over the extra steps. Backward = (forward + backward) - forward, "
        "optimizer = step - (forward + backward). The schedule is sequential (one engine at "
        "a time), so the phases add up; the programs differ a little besides (the forward + "
        "backward one copies its gradients into their carried buffers every step, the step "
        "program does not): the small negative entries.", "",
        table(["phase", "cycles per step", "share", "MXU busy", "VPU busy", "DMA busy",
               "MXU vectors", "instructions"], rows), "",
        f"Backward GEMMs (dW2 = h^T dlogits, dh = dlogits W2^T, dW1 = x^T dh): "
        f"{data['backward_macs']:,} multiply-accumulates per step. MXU utilization: "
        f"{100 * util_busy:.1f}% of the MAC slots of the cycles the MXU is busy in the "
        f"backward phase, {100 * fill:.1f}% of the slots of the vectors it streams (the rest "
        f"is padding: every `matmul` is m x 16 x 16, the 10 classes fill 10 of 16 lanes), "
        f"{100 * util_cycles:.1f}% of the backward phase's cycles.", "",
        "## Runs", "",
        table(["part", "steps", "cycles", "instructions", "operations",
               "max loss difference vs jax fp32", "simulation s"], runs), "",
    ])
