"""float64 reference of the encoder that podium/encoder.py compiles, from the textbook pre-LN
transformer (Vaswani et al. 2017 with the LN moved before each sub-layer, as in ViT:
Dosovitskiy et al. 2021, eq. 2-4), independent of the compiler and of the ISA simulator."""

import math

import numpy as np

from .transformer import gelu_tanh, layernorm, softmax

__all__ = ["encoder", "random_params"]


def encoder(params, x, *, seq, heads, eps=1e-5):
    """Logits (batch x C) of token 0 of each sequence of ``x`` (batch*seq x F)."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    x = np.asarray(x, np.float64)
    batch = x.shape[0] // seq
    blocks = sum(1 for k in p if k.endswith(".qkv_w"))
    D = p["embed_w"].shape[1]
    hd = D // heads
    out = []
    for b in range(batch):
        h = x[b * seq:(b + 1) * seq] @ p["embed_w"] + p["embed_b"]
        for i in range(blocks):
            a = layernorm(h, p[f"b{i}.ln1_g"], p[f"b{i}.ln1_b"], eps)
            qkv = a @ p[f"b{i}.qkv_w"] + p[f"b{i}.qkv_b"]
            heads_out = []
            for j in range(heads):
                q = qkv[:, j * hd:(j + 1) * hd]
                k = qkv[:, D + j * hd:D + (j + 1) * hd]
                v = qkv[:, 2 * D + j * hd:2 * D + (j + 1) * hd]
                heads_out.append(softmax(q @ k.T / math.sqrt(hd)) @ v)
            h = h + np.concatenate(heads_out, axis=1) @ p[f"b{i}.proj_w"] + p[f"b{i}.proj_b"]
            a = layernorm(h, p[f"b{i}.ln2_g"], p[f"b{i}.ln2_b"], eps)
            h = h + gelu_tanh(a @ p[f"b{i}.fc1_w"] + p[f"b{i}.fc1_b"]) @ p[f"b{i}.fc2_w"] \
                + p[f"b{i}.fc2_b"]
        out.append(layernorm(h[:1], p["ln_g"], p["ln_b"], eps) @ p["head_w"] + p["head_b"])
    return np.concatenate(out, axis=0)


def random_params(rng, *, features, width, mlp, classes, seq, blocks):
    """Parameters of the scale a trained model has: unit-variance layer outputs."""
    def normal(scale, *shape):
        return rng.normal(0, scale, shape).astype(np.float32)

    p = {"embed_w": normal(0.5, features, width), "embed_b": normal(0.5, seq, width),
         "ln_g": 1 + normal(0.1, width), "ln_b": normal(0.1, width),
         "head_w": normal(width ** -0.5, width, classes), "head_b": normal(0.1, classes)}
    for i in range(blocks):
        p.update({f"b{i}.ln1_g": 1 + normal(0.1, width), f"b{i}.ln1_b": normal(0.1, width),
                  f"b{i}.qkv_w": normal(width ** -0.5, width, 3 * width),
                  f"b{i}.qkv_b": normal(0.1, 3 * width),
                  f"b{i}.proj_w": normal(width ** -0.5, width, width),
                  f"b{i}.proj_b": normal(0.1, width),
                  f"b{i}.ln2_g": 1 + normal(0.1, width), f"b{i}.ln2_b": normal(0.1, width),
                  f"b{i}.fc1_w": normal(width ** -0.5, width, mlp),
                  f"b{i}.fc1_b": normal(0.1, mlp),
                  f"b{i}.fc2_w": normal(mlp ** -0.5, mlp, width),
                  f"b{i}.fc2_b": normal(0.1, width)})
    return p
