"""The ViT of podium/workloads/vit.py (pre-LN, class token, multi-head attention, LayerNorm,
GELU in its tanh form, a linear classifier) written in JAX for the front end, and its
training step: ``jax.value_and_grad`` of the softmax cross-entropy and an SGD update, run by
:func:`podium.jax.scan` (the step is the loop body, the weights stay in VMEM).

The front end holds values of rank 0 to 3 and does not split a ``(tokens, heads * d)`` value
into heads (no rank-4 values, no ``slice`` / ``concatenate``), so the model is written the
way the front end lowers it: activations ``(images, tokens, width)`` (rank 3, one slab per
image), each dense layer a batched ``dot_general`` of them with the weight broadcast over the
images (the broadcast is free: every slab shares the weight), and the heads **in the
parameters**: ``qkv_w`` (``dim x 3 dim``, columns Q of heads 0..H-1, then K, then V) becomes
per-head ``q_w[h]``, ``k_w[h]``, ``v_w[h]`` (``dim x dim / heads``) and ``proj_w`` per-head
row blocks ``proj_w[h]`` (``dim / heads x dim``; the heads' outputs projected and summed,
which is the concatenation's product). :func:`to_heads` and :func:`from_heads` convert the
workload's parameters exactly (a permutation of their elements), so the model is the
workload's, function for function. The class token's row is taken by a 0/1 mask and a sum
over the tokens (no ``slice``).

    python -m podium.jax.vit [--sim golden|native] [--steps 3] [--batch 2]
"""

import argparse
import math
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..workloads import vit as W
from .digits import print_facts

__all__ = ["SHAPE", "FULL", "FULL_CONFIG", "Settings", "SETTINGS", "to_heads", "from_heads",
           "loss", "logits", "sgd_step", "batches", "train", "TrainResult", "main"]

SHAPE = W.VitShape(dim=16, heads=2, mlp=32, blocks=1)
"""The shape trained through the front end: the workload's model (podium/workloads/vit.py)
at width 16, 2 heads of 8, MLP 32, one block. The workload's own shape (64, 4 heads, 128,
2 blocks) does not fit a training step into the ViT's TensorCore: the front end keeps every
parameter, its gradient and the step's activations in VMEM and the whole step in the
instruction memory (4,096 instructions), see docs/jax.md, "Training the ViT"."""

FULL = W.VitShape()
"""The workload's own shape (width 64, 4 heads of 16, MLP 128, two blocks): a step is
longer than the instruction memory, so it runs as segments (docs/jax.md, "Segments"), and
its values need more VMEM than the ViT's TensorCore has (512 KiB): :data:`FULL_CONFIG`."""


def _full_config():
    import dataclasses
    return dataclasses.replace(W.TENSORCORE, vmem_bytes=1 << 21)


FULL_CONFIG = _full_config()
"""The ViT's TensorCore with 2 MiB of VMEM (the full-size step's values and constants take
17,856 rows of 64 bytes, 1.09 MiB: more than 1 MiB, and VMEM sizes are powers of two)."""


@dataclass(frozen=True)
class Settings:
    batch: int = 1
    lr: float = 0.1
    seed: int = 0


SETTINGS = Settings()


def to_heads(params, shape=SHAPE):
    """The front end's parameter pytree of the workload's parameters (``W.init_params``):
    per block the per-head lists ``q_w``, ``k_w``, ``v_w``, ``q_b``, ``k_b``, ``v_b``,
    ``proj_w``; everything else as it is (fp32)."""
    d, H = shape.dim, shape.heads
    e = d // H
    out = {}
    for k, v in params.items():
        v = np.asarray(v, np.float32)
        blk, _, name = k.rpartition(".")
        if name == "qkv_w":
            for i, qkv in enumerate("qkv"):
                out[f"{blk}.{qkv}_w"] = [v[:, i * d + h * e:i * d + (h + 1) * e].copy()
                                         for h in range(H)]
        elif name == "qkv_b":
            for i, qkv in enumerate("qkv"):
                out[f"{blk}.{qkv}_b"] = [v[i * d + h * e:i * d + (h + 1) * e].copy()
                                         for h in range(H)]
        elif name == "proj_w":
            out[k] = [v[h * e:(h + 1) * e].copy() for h in range(H)]
        else:
            out[k] = v
    return out


def from_heads(p, shape=SHAPE):
    """The workload's parameters of the front end's (the inverse of :func:`to_heads`)."""
    out = {}
    for k, v in p.items():
        blk, _, name = k.rpartition(".")
        if name in ("q_w", "k_w", "v_w", "q_b", "k_b", "v_b"):
            continue
        out[k] = np.concatenate([np.asarray(h) for h in v]) if name == "proj_w" \
            else np.asarray(v)
    for b in range(shape.blocks):
        out[f"b{b}.qkv_w"] = np.concatenate([np.asarray(h) for qkv in "qkv"
                                             for h in p[f"b{b}.{qkv}_w"]], axis=1)
        out[f"b{b}.qkv_b"] = np.concatenate([np.asarray(h) for qkv in "qkv"
                                             for h in p[f"b{b}.{qkv}_b"]])
    return {k: out[k] for k in W.param_shapes(shape)}


def _dense(x, w):
    """``(n, t, k) @ (k, m)`` -> ``(n, t, m)``: a batched dot_general with ``w`` broadcast
    over the images."""
    import jax
    import jax.numpy as jnp
    wb = jnp.broadcast_to(w, (x.shape[0], *w.shape))
    return jax.lax.dot_general(x, wb, (((2,), (1,)), ((0,), (0,))))


def _layernorm(x, g, b):
    import jax
    import jax.numpy as jnp
    mu = jnp.mean(x, axis=-1, keepdims=True)
    xc = x - mu
    var = jnp.mean(xc * xc, axis=-1, keepdims=True)
    return xc * jax.lax.rsqrt(var + W.EPS) * g + b


def _gelu(z):
    import jax.numpy as jnp
    c = math.sqrt(2 / math.pi)
    return 0.5 * z * (1 + jnp.tanh(c * (z + 0.044715 * (z * z * z))))


def _softmax(s):
    import jax
    import jax.numpy as jnp
    e = jnp.exp(s - jax.lax.stop_gradient(jnp.max(s, axis=-1, keepdims=True)))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def logits(p, patches, shape=SHAPE):
    """Logits ``(n, 10)`` of patch features ``(n, 17, 4)`` (``W.patches``)."""
    import jax
    import jax.numpy as jnp
    first = np.zeros(W.TOKENS, np.float32)
    first[0] = 1
    rest = 1 - first
    scale = np.float32(1 / math.sqrt(shape.head_dim))
    emb = p["pos"] + rest[:, None] * p["patch_b"] + first[:, None] * p["cls"]
    x = _dense(patches, p["patch_w"]) + emb
    for b in range(shape.blocks):
        h = _layernorm(x, p[f"b{b}.ln1_g"], p[f"b{b}.ln1_b"])
        att = p[f"b{b}.proj_b"]
        for k in range(shape.heads):
            q = _dense(h, p[f"b{b}.q_w"][k]) + p[f"b{b}.q_b"][k]
            kk = _dense(h, p[f"b{b}.k_w"][k]) + p[f"b{b}.k_b"][k]
            v = _dense(h, p[f"b{b}.v_w"][k]) + p[f"b{b}.v_b"][k]
            s = jax.lax.dot_general(q, kk, (((2,), (2,)), ((0,), (0,)))) * scale
            o = jax.lax.dot_general(_softmax(s), v, (((2,), (1,)), ((0,), (0,))))
            att = att + _dense(o, p[f"b{b}.proj_w"][k])
        x = x + att
        h = _layernorm(x, p[f"b{b}.ln2_g"], p[f"b{b}.ln2_b"])
        g = _gelu(_dense(h, p[f"b{b}.fc1_w"]) + p[f"b{b}.fc1_b"])
        x = x + _dense(g, p[f"b{b}.fc2_w"]) + p[f"b{b}.fc2_b"]
    cls = jnp.sum(x * first[None, :, None], axis=1)          # (n, dim): token 0
    h = _layernorm(cls, p["ln_g"], p["ln_b"])
    return h @ p["head_w"] + p["head_b"]


def loss(p, patches, y, shape=SHAPE):
    """Mean softmax cross-entropy of one-hot labels ``y`` ``(n, 10)``."""
    import jax
    import jax.numpy as jnp
    return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits(p, patches, shape)), axis=1))


def sgd_step(lr, shape=SHAPE):
    """``step(params, (patches, y)) -> (params, loss)``: one SGD step."""
    import jax

    def step(p, batch):
        value, grads = jax.value_and_grad(loss)(p, *batch, shape)
        return jax.tree.map(lambda w, g: w - lr * g, p, grads), value
    return step


def batches(settings, steps):
    """(patches ``(steps, batch, 17, 4)``, one-hot labels ``(steps, batch, 10)``): the first
    ``steps * batch`` images of a seeded permutation of the workload's training split."""
    x_train, _, y_train, _ = W.split(settings.seed)
    rng = np.random.default_rng(settings.seed + 1)
    idx = rng.permutation(len(x_train))[:steps * settings.batch]
    p = W.patches(np.asarray(x_train)[idx]).astype(np.float32)
    y = np.eye(W.CLASSES, dtype=np.float32)[np.asarray(y_train)[idx]]
    return (p.reshape(steps, settings.batch, W.TOKENS, W.PATCH),
            y.reshape(steps, settings.batch, W.CLASSES))


@dataclass
class TrainResult:
    params: dict            # the front end's pytree after the steps, from the chip
    losses: np.ndarray
    counters: dict
    ref_params: dict        # jax on CPU, fp32, the same steps
    ref_losses: np.ndarray
    steps: int
    program: object
    seconds: float


def train(settings=SETTINGS, steps=3, sim="golden", shape=SHAPE, config=None, **options):
    """``steps`` SGD steps of the ViT from its seeded initialisation (``W.init_params``) on
    ``sim``, and in jax on CPU for reference."""
    import jax

    from . import scan
    xs, ys = batches(settings, steps)
    p0 = to_heads(W.init_params(shape, settings.seed), shape)
    step = sgd_step(settings.lr, shape)
    t0 = time.time()
    params, losses, counters = scan(step, p0, (xs, ys), sim=sim, config=config, **options)
    seconds = time.time() - t0
    program = scan.last.program
    ref_params, ref_losses = jax.lax.scan(step, p0, (xs, ys))
    ref_params = jax.tree.map(np.asarray, ref_params)
    return TrainResult(params, np.asarray(losses), counters, ref_params,
                       np.asarray(ref_losses), steps, program, seconds)


def max_weight_diff(a, b):
    import jax
    return max(float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
               for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m podium.jax.vit",
                                 description="train the ViT for a few SGD steps on the "
                                             "TensorCore")
    ap.add_argument("--sim", default="golden", choices=("golden", "native", "verilator"))
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--batch", type=int, default=SETTINGS.batch)
    ap.add_argument("--full", action="store_true",
                    help="the workload's own shape (width 64, 4 heads, 2 blocks) on the ViT's "
                         "TensorCore with 2 MiB of VMEM, in segments")
    ap.add_argument("--json", help="write the result's figures to this file")
    a = ap.parse_args(argv)
    if a.steps < 1 or a.batch < 1:
        print("podium.jax.vit: --steps and --batch must be at least 1", file=sys.stderr)
        return 2
    s = Settings(batch=a.batch)
    shape = FULL if a.full else SHAPE
    r = train(s, steps=a.steps, sim=a.sim, shape=shape,
              config=FULL_CONFIG if a.full else None)
    facts = {"shape": vars(shape) if hasattr(shape, "__dict__") else str(shape),
             "steps": r.steps, "batch": s.batch, "lr": s.lr, "sim": a.sim,
             "losses": [float(v) for v in r.losses],
             "jax_losses": [float(v) for v in r.ref_losses],
             "max_loss_diff_vs_jax": float(np.max(np.abs(r.losses - r.ref_losses))),
             "max_weight_diff_vs_jax": max_weight_diff(r.params, r.ref_params),
             "instructions": len(r.program.words),
             "operations": r.program.metadata.get("operations"),
             "segments": r.program.metadata.get("segments"),
             "seconds": round(r.seconds, 1),
             "counters": {k: v for k, v in r.counters.items() if isinstance(v, int | float)}}
    print_facts(facts, a.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
