"""The Vision Transformer workload: a pre-LN ViT on the UCI digits (8x8 pixels, 2x2 patches,
16 patch tokens and a class token), defined and trained here in numpy with a hand-written
backward pass, inferred in float64 (``forward``) and in a bfloat16 emulation of the chip's
precision (``forward_bf16``). The compiler that runs it on the TensorCore reads this module
(docs/tensorcore.md, "The ViT workload").

Model (``VitShape``: width ``dim`` 64, ``heads`` 4 of ``dim / heads``, MLP hidden ``mlp`` 128,
``blocks`` 2). Input ``x = pixels / 16``; patch ``(i, j)`` (``i, j`` in 0..3) is token
``1 + 4 i + j`` with features ``x[2i, 2j], x[2i, 2j+1], x[2i+1, 2j], x[2i+1, 2j+1]``; token
0 is the class token, whose patch is all zeros (``patches``). Embedding
``e[t] = patch[t] @ patch_w + emb[t]`` with ``emb[0] = cls + pos[0]`` and
``emb[t] = patch_b + pos[t]`` (``embedding_bias``). Each block:
``h = LN(x); qkv = h @ qkv_w + qkv_b`` (columns: Q of heads 0..H-1, then K, then V);
per head ``softmax(Q K^T / sqrt(dim / heads)) V`` over all 17 tokens; the heads concatenated
``@ proj_w + proj_b`` added to ``x``; then ``x += gelu_tanh(LN(x) @ fc1_w + fc1_b) @ fc2_w +
fc2_b``. Logits ``LN(x[:, 0]) @ head_w + head_b``. LayerNorm eps 1e-5, GELU in its tanh form.

Training (``TRAIN``): AdamW, minibatches, label-smoothed cross-entropy, random 1-pixel shifts
of the training images, linear warmup then cosine decay; the random draws come from
generators seeded by the seed and the BLAS runs on one thread, so a training is a function of
its settings and seed (and of the machine's BLAS kernels). The trained parameters are cached
under build/vit/, keyed by a hash of the settings, the seed and this module's source.
``python -m podium.workloads.vit`` trains (or loads) and reports.

On the chip: ``compile_vit`` compiles the inference of a batch of images with the encoder
compiler (podium/encoder.py, its parameters from ``encoder_params``) for ``TENSORCORE``, the
ViT's TensorCore (``make demo ARGS="--model vit"``).
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig

from ..encoder import encoder

__all__ = ["TENSORCORE", "encoder_params", "compile_vit",
           "VitShape", "TrainSettings", "TRAIN", "Vit", "TOKENS", "PATCH", "CLASSES", "EPS",
           "param_shapes", "init_params", "patches", "embedding_bias", "forward",
           "accuracy", "loss_and_grads", "train", "split", "load", "cache_key",
           "quantize_bf16", "forward_bf16", "gelu_tanh", "CACHE"]

TOKENS = 17
"""Sequence length: the class token and 16 patches."""
PATCH = 4
"""Features of a patch (2x2 pixels)."""
CLASSES = 10
EPS = 1e-5
"""LayerNorm epsilon."""
TENSORCORE = TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16, fmt="bfloat16"),
                              vmem_bytes=1 << 19, imem_depth=4096, queue_depth=64)
"""The ViT's TensorCore (and the transformer benchmark's): a 16 x 16 bfloat16 MXU, 512 KiB
of VMEM (the weights and six images' activations), a 4096-instruction IMEM and 64-entry
engine queues (a GEMM's matmuls fit the MXU's queue, so the front end goes on to the other
half's VPU work)."""
CACHE = Path(__file__).resolve().parents[2] / "build" / "vit"
"""Where trained parameters are kept (one .npz and one .json per training)."""


@dataclass(frozen=True)
class VitShape:
    """Width, heads, MLP hidden width and number of blocks."""

    dim: int = 64
    heads: int = 4
    mlp: int = 128
    blocks: int = 2

    def __post_init__(self):
        for name in ("dim", "heads", "mlp", "blocks"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"VitShape.{name} must be a positive integer, "
                                 f"got {getattr(self, name)!r}")
        if self.dim % self.heads:
            raise ValueError(f"VitShape.dim ({self.dim}) must be a multiple of heads "
                             f"({self.heads})")

    @property
    def head_dim(self):
        return self.dim // self.heads


def param_shapes(shape=VitShape()):
    """Parameter name -> array shape, in the model's order."""
    d, m = shape.dim, shape.mlp
    out = {"patch_w": (PATCH, d), "patch_b": (d,), "cls": (d,), "pos": (TOKENS, d)}
    for b in range(shape.blocks):
        out.update({
            f"b{b}.ln1_g": (d,), f"b{b}.ln1_b": (d,), f"b{b}.qkv_w": (d, 3 * d),
            f"b{b}.qkv_b": (3 * d,), f"b{b}.proj_w": (d, d), f"b{b}.proj_b": (d,),
            f"b{b}.ln2_g": (d,), f"b{b}.ln2_b": (d,), f"b{b}.fc1_w": (d, m),
            f"b{b}.fc1_b": (m,), f"b{b}.fc2_w": (m, d), f"b{b}.fc2_b": (d,)})
    out.update({"ln_g": (d,), "ln_b": (d,), "head_w": (d, CLASSES), "head_b": (CLASSES,)})
    return out


def _is_matrix(name):
    return name.endswith("_w")


def init_params(shape=VitShape(), seed=0, dtype=np.float32):
    """Xavier-uniform weight matrices, zero biases, unit LayerNorm scales, class token and
    position embeddings normal with standard deviation 0.02."""
    rng = np.random.default_rng(seed)
    params = {}
    for name, s in param_shapes(shape).items():
        if _is_matrix(name):
            limit = math.sqrt(6 / (s[0] + s[1]))
            value = rng.uniform(-limit, limit, s)
        elif name in ("cls", "pos"):
            value = rng.normal(0, 0.02, s)
        elif name.endswith("_g"):
            value = np.ones(s)
        else:
            value = np.zeros(s)
        params[name] = value.astype(dtype)
    return params


def patches(images):
    """(n, 17, 4) patch features of images given as (n, 64) or (n, 8, 8) in row-major pixel
    order: row 0 zeros (the class token), row ``1 + 4 i + j`` the 2x2 patch ``(i, j)``."""
    x = np.asarray(images)
    n = x.shape[0]
    if x.shape[1:] not in ((64,), (8, 8)):
        raise ValueError(f"images must be (n, 64) or (n, 8, 8), got {x.shape}")
    p = x.reshape(n, 4, 2, 4, 2).transpose(0, 1, 3, 2, 4).reshape(n, 16, PATCH)
    return np.concatenate([np.zeros((n, 1, PATCH), p.dtype), p], axis=1)


def embedding_bias(params):
    """(17, dim) added to ``patch @ patch_w``: ``cls + pos[0]``, then ``patch_b + pos[t]``."""
    emb = params["pos"] + params["patch_b"]
    emb[0] = params["cls"] + params["pos"][0]
    return emb


def encoder_params(params):
    """The encoder compiler's parameters of the ViT's: the patch embedding is its input
    projection, the class token and the position embedding its per-position bias."""
    out = {k: v for k, v in params.items() if k not in ("patch_w", "patch_b", "cls", "pos")}
    out["embed_w"] = params["patch_w"]
    out["embed_b"] = embedding_bias(params)
    return out


def compile_vit(config, model, images):
    """A program classifying ``images`` (n x 64, pixels / 16) with the trained ``model`` (a
    :class:`Vit`): its input bound into the HBM image, output ``Y`` the n x 10 fp32 logits."""
    program = encoder(config, encoder_params(model.params), seq=TOKENS,
                      heads=model.shape.heads, batch=len(images), eps=EPS)
    program.bind(X=patches(images).reshape(-1, PATCH))
    return program


def gelu_tanh(z):
    c = np.sqrt(2 / np.pi).astype(z.dtype)
    return 0.5 * z * (1 + np.tanh(c * (z + z.dtype.type(0.044715) * (z * z * z))))


# ---------------------------------------------------------------------------------------
# Forward and backward, one code path for float64, float32 and the bfloat16 emulation:
# ``mm`` is the matrix product (the bfloat16 emulation rounds its operands).

def _layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + x.dtype.type(EPS))
    xh = xc * rstd
    return xh * g + b, (xh, rstd)


def _layernorm_back(dy, g, cache):
    xh, rstd = cache
    axes = tuple(range(dy.ndim - 1))
    dg, db = (dy * xh).sum(axes), dy.sum(axes)
    dxh = dy * g
    dx = rstd * (dxh - dxh.mean(-1, keepdims=True) - xh * (dxh * xh).mean(-1, keepdims=True))
    return dx, dg, db


def _softmax(s):
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _split_heads(a, heads):
    n, t, d = a.shape
    return a.reshape(n, t, heads, d // heads).transpose(0, 2, 1, 3)


def _merge_heads(a):
    n, h, t, dh = a.shape
    return a.transpose(0, 2, 1, 3).reshape(n, t, h * dh)


def _run(params, p, shape, dtype, mm, keep=False):
    """Logits of patch features ``p`` (n, 17, 4); with ``keep`` also the values the
    backward pass needs."""
    P = {k: v.astype(dtype) for k, v in params.items()}
    p = p.astype(dtype)
    n, d, heads = p.shape[0], shape.dim, shape.heads
    scale = dtype(1 / math.sqrt(shape.head_dim))
    cache = {"p": p}
    x = mm(p.reshape(-1, PATCH), P["patch_w"]).reshape(n, TOKENS, d) + embedding_bias(P)
    for b in range(shape.blocks):
        c = cache[b] = {}
        h, c["ln1"] = _layernorm(x, P[f"b{b}.ln1_g"], P[f"b{b}.ln1_b"])
        c["h1"] = h
        qkv = mm(h.reshape(-1, d), P[f"b{b}.qkv_w"]).reshape(n, TOKENS, 3 * d) + P[f"b{b}.qkv_b"]
        q, k, v = (_split_heads(qkv[..., i * d:(i + 1) * d], heads) for i in range(3))
        a = _softmax(mm(q, k.swapaxes(-1, -2)) * scale)
        o = _merge_heads(mm(a, v))
        c.update(q=q, k=k, v=v, a=a, o=o)
        x = x + mm(o.reshape(-1, d), P[f"b{b}.proj_w"]).reshape(n, TOKENS, d) + P[f"b{b}.proj_b"]
        h, c["ln2"] = _layernorm(x, P[f"b{b}.ln2_g"], P[f"b{b}.ln2_b"])
        c["h2"] = h
        z = mm(h.reshape(-1, d), P[f"b{b}.fc1_w"]).reshape(n, TOKENS, -1) + P[f"b{b}.fc1_b"]
        g = gelu_tanh(z)
        c.update(z=z, g=g)
        x = x + mm(g.reshape(n * TOKENS, -1), P[f"b{b}.fc2_w"]).reshape(n, TOKENS, d) \
            + P[f"b{b}.fc2_b"]
    h, cache["ln"] = _layernorm(x[:, 0], P["ln_g"], P["ln_b"])
    cache["h"] = h
    logits = mm(h, P["head_w"]) + P["head_b"]
    return (logits, cache, P) if keep else logits


def _backward(dlogits, cache, P, shape):
    """Gradients of every parameter given the gradient of the logits."""
    n, d, heads = dlogits.shape[0], shape.dim, shape.heads
    dtype = dlogits.dtype.type
    scale = dtype(1 / math.sqrt(shape.head_dim))
    grads = {"head_w": cache["h"].T @ dlogits, "head_b": dlogits.sum(0)}
    dh = dlogits @ P["head_w"].T
    dx0, grads["ln_g"], grads["ln_b"] = _layernorm_back(dh, P["ln_g"], cache["ln"])
    dx = np.zeros((n, TOKENS, d), dlogits.dtype)
    dx[:, 0] = dx0
    for b in reversed(range(shape.blocks)):
        c = cache[b]
        # MLP
        dm = dx.reshape(-1, d)
        g2 = c["g"].reshape(n * TOKENS, -1)
        grads[f"b{b}.fc2_w"] = g2.T @ dm
        grads[f"b{b}.fc2_b"] = dm.sum(0)
        dg = dm @ P[f"b{b}.fc2_w"].T
        z = c["z"].reshape(n * TOKENS, -1)
        k0, k1 = dtype(math.sqrt(2 / math.pi)), dtype(0.044715)
        t = np.tanh(k0 * (z + k1 * (z * z * z)))
        dz = dg * (0.5 * (1 + t) + 0.5 * z * (1 - t * t) * k0 * (1 + 3 * k1 * z * z))
        h2 = c["h2"].reshape(-1, d)
        grads[f"b{b}.fc1_w"] = h2.T @ dz
        grads[f"b{b}.fc1_b"] = dz.sum(0)
        dh = (dz @ P[f"b{b}.fc1_w"].T).reshape(n, TOKENS, d)
        dxl, grads[f"b{b}.ln2_g"], grads[f"b{b}.ln2_b"] = _layernorm_back(
            dh, P[f"b{b}.ln2_g"], c["ln2"])
        dx = dx + dxl
        # attention
        do = dx.reshape(-1, d)
        grads[f"b{b}.proj_w"] = c["o"].reshape(-1, d).T @ do
        grads[f"b{b}.proj_b"] = do.sum(0)
        dav = _split_heads((do @ P[f"b{b}.proj_w"].T).reshape(n, TOKENS, d), heads)
        a, q, k, v = c["a"], c["q"], c["k"], c["v"]
        dv = a.swapaxes(-1, -2) @ dav
        da = dav @ v.swapaxes(-1, -2)
        ds = a * (da - (da * a).sum(-1, keepdims=True)) * scale
        dq = ds @ k
        dk = ds.swapaxes(-1, -2) @ q
        dqkv = np.concatenate([_merge_heads(dq), _merge_heads(dk), _merge_heads(dv)],
                              axis=-1).reshape(-1, 3 * d)
        grads[f"b{b}.qkv_w"] = c["h1"].reshape(-1, d).T @ dqkv
        grads[f"b{b}.qkv_b"] = dqkv.sum(0)
        dh = (dqkv @ P[f"b{b}.qkv_w"].T).reshape(n, TOKENS, d)
        dxl, grads[f"b{b}.ln1_g"], grads[f"b{b}.ln1_b"] = _layernorm_back(
            dh, P[f"b{b}.ln1_g"], c["ln1"])
        dx = dx + dxl
    demb = dx.sum(0)
    grads["patch_w"] = cache["p"].reshape(-1, PATCH).T @ dx.reshape(-1, d)
    grads["pos"] = demb
    grads["cls"] = demb[0].copy()
    grads["patch_b"] = demb[1:].sum(0)
    return grads


def _matmul(a, b):
    return a @ b


def forward(params, images, shape=VitShape()):
    """float64 logits (n, 10) of images (n, 64) with values ``pixels / 16``."""
    return _run(params, patches(images), shape, np.float64, _matmul)


def accuracy(params, images, labels, shape=VitShape(), bf16=False):
    """Share of images whose argmax logit is the label (float64 model, or the bfloat16
    emulation with ``bf16``)."""
    logits = (forward_bf16 if bf16 else forward)(params, images, shape)
    return float(np.mean(np.argmax(logits, axis=1) == np.asarray(labels)))


def loss_and_grads(params, p, labels, shape=VitShape(), smoothing=0.0, dtype=np.float64):
    """Mean label-smoothed cross-entropy of patch features ``p`` and its gradient with
    respect to every parameter (a dict like ``params``)."""
    logits, cache, P = _run(params, p, shape, dtype, _matmul, keep=True)
    n = logits.shape[0]
    shifted = logits - logits.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    target = np.full((n, CLASSES), smoothing / CLASSES, dtype)
    target[np.arange(n), labels] += 1 - smoothing
    loss = float(-(target * logp).sum() / n)
    grads = _backward(((np.exp(logp) - target) / n).astype(dtype), cache, P, shape)
    return loss, grads


# ---------------------------------------------------------------------------------------
# bfloat16 emulation of the chip's precision

def _bf16(a):
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _matmul_bf16(a, b):
    return _bf16(a) @ _bf16(b)


def quantize_bf16(params):
    """The parameters with every weight matrix (``*_w``) rounded to bfloat16, as float32
    arrays; biases, LayerNorm parameters, class token and positions kept float32."""
    return {k: _bf16(v) if _is_matrix(k) else np.asarray(v, np.float32)
            for k, v in params.items()}


def forward_bf16(params, images, shape=VitShape()):
    """float32 logits of the bfloat16 emulation: weight matrices in bfloat16
    (``quantize_bf16``), every GEMM operand (activations, Q, K, V, attention weights)
    rounded to bfloat16 with float32 accumulation, everything else in float32."""
    return _run(quantize_bf16(params), patches(images), shape, np.float32, _matmul_bf16)


# ---------------------------------------------------------------------------------------
# Training

@dataclass(frozen=True)
class TrainSettings:
    """The recipe. ``shift``: each training image moved by up to that many pixels in each
    direction (uniform, zero fill) every epoch."""

    epochs: int = 150
    batch: int = 128
    lr: float = 3e-3
    warmup: int = 3
    weight_decay: float = 0.05
    smoothing: float = 0.1
    shift: int = 1
    betas: tuple = (0.9, 0.999)
    adam_eps: float = 1e-8
    shape: VitShape = field(default_factory=VitShape)


TRAIN = TrainSettings()
"""The settings ``load`` trains with."""


def _shift(images, rng, shift):
    """Each image (n, 64) moved by a random (dy, dx) in [-shift, shift]^2, zero fill."""
    n = images.shape[0]
    pad = np.pad(images.reshape(n, 8, 8), ((0, 0), (shift, shift), (shift, shift)))
    dy, dx = rng.integers(-shift, shift + 1, (2, n))
    rows = (np.arange(8)[None, :] + shift - dy[:, None])[:, :, None]
    cols = (np.arange(8)[None, :] + shift - dx[:, None])[:, None, :]
    return pad[np.arange(n)[:, None, None], rows, cols].reshape(n, 64)


def split(seed=0):
    """``x_train, x_test, y_train, y_test``: the digits (pixels / 16), 75/25 with
    ``random_state=seed``, as podium/workloads/digits.py splits them."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    data = load_digits()
    return train_test_split(data.data / 16, data.target, test_size=0.25, random_state=seed)


def train(x_train, y_train, settings=TRAIN, seed=0, log=None, x_test=None, y_test=None):
    """float32 parameters trained from ``init_params(seed)`` with AdamW (decay on the
    weight matrices only); ``log(epoch, loss, test_accuracy or None)`` after each epoch
    (the accuracy on ``x_test`` every 10 epochs and after the last, if given).
    Returns the parameters and the mean training loss of each epoch. The BLAS runs on one
    thread (its results depend on its thread count), so the result depends only on the
    arguments and the machine's BLAS kernels."""
    from threadpoolctl import threadpool_limits  # a dependency of scikit-learn

    with threadpool_limits(1, user_api="blas"):
        return _train(x_train, y_train, settings, seed, log, x_test, y_test)


def _train(x_train, y_train, settings, seed, log, x_test, y_test):
    shape = settings.shape
    rng = np.random.default_rng(seed)
    params = init_params(shape, seed)
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v2 = {k: np.zeros_like(v) for k, v in params.items()}
    n = len(x_train)
    steps_per_epoch = -(-n // settings.batch)
    total = settings.epochs * steps_per_epoch
    warm = settings.warmup * steps_per_epoch
    b1, b2 = settings.betas
    step, losses = 0, []
    x_train = np.asarray(x_train, np.float32)
    for epoch in range(settings.epochs):
        order = rng.permutation(n)
        x = _shift(x_train, rng, settings.shift) if settings.shift else x_train
        epoch_loss = 0.0
        for start in range(0, n, settings.batch):
            idx = order[start:start + settings.batch]
            loss, grads = loss_and_grads(params, patches(x[idx]), y_train[idx], shape,
                                         settings.smoothing, np.float32)
            epoch_loss += loss * len(idx)
            step += 1
            if step <= warm:
                lr = settings.lr * step / warm
            else:
                lr = settings.lr * 0.5 * (1 + math.cos(math.pi * (step - warm) / (total - warm)))
            lr = np.float32(lr)
            c1, c2 = 1 - b1 ** step, 1 - b2 ** step
            for k, w in params.items():
                g = grads[k]
                m[k] = b1 * m[k] + (1 - b1) * g
                v2[k] = b2 * v2[k] + (1 - b2) * g * g
                update = (m[k] / c1) / (np.sqrt(v2[k] / c2) + settings.adam_eps)
                if _is_matrix(k):
                    update = update + settings.weight_decay * w
                params[k] = (w - lr * update).astype(np.float32)
        losses.append(epoch_loss / n)
        if log:
            due = (epoch + 1) % 10 == 0 or epoch + 1 == settings.epochs
            acc = accuracy(params, x_test, y_test, shape) if due and x_test is not None \
                else None
            log(epoch, losses[-1], acc)
    return params, losses


@dataclass
class Vit:
    """A trained ViT and the 75/25 split (pixels / 16)."""

    params: dict
    shape: VitShape
    x_train: np.ndarray
    x_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray
    float_accuracy: float
    train_seconds: float
    """Wall time of the training that produced ``params`` (cached with them)."""
    train_cpu_seconds: float
    """Its CPU time (this process)."""


def cache_key(settings=TRAIN, seed=0):
    """Hash of the settings, the seed and this module's source."""
    text = json.dumps({"settings": asdict(settings), "seed": seed}, sort_keys=True)
    digest = hashlib.sha256(text.encode() + Path(__file__).read_bytes())
    return digest.hexdigest()[:16]


def load(seed=0, settings=TRAIN, verbose=False, cache=CACHE):
    """The ViT trained with ``settings`` from ``seed`` on the split of ``random_state=seed``:
    read from ``cache`` if this training was done before, else trained (and stored)."""
    x_train, x_test, y_train, y_test = split(seed)
    key = cache_key(settings, seed)
    stored, meta = Path(cache) / f"vit-{key}.npz", Path(cache) / f"vit-{key}.json"
    if stored.exists() and meta.exists():
        with np.load(stored) as data:
            params = {k: data[k] for k in param_shapes(settings.shape)}
        stats = json.loads(meta.read_text())
        seconds, cpu = stats["train_seconds"], stats["train_cpu_seconds"]
    else:
        def log(epoch, loss, acc):
            if verbose:
                print(f"epoch {epoch + 1:3d}/{settings.epochs}  loss {loss:.4f}"
                      + ("" if acc is None else f"  test {acc:.2%}"), flush=True)
        start, start_cpu = time.perf_counter(), time.process_time()
        params, losses = train(x_train, y_train, settings, seed, log,
                               x_test if verbose else None, y_test)
        seconds, cpu = time.perf_counter() - start, time.process_time() - start_cpu
        Path(cache).mkdir(parents=True, exist_ok=True)
        tmp = stored.with_name(f"{stored.stem}.{os.getpid()}.tmp.npz")
        np.savez(tmp, **params)
        tmp.replace(stored)
        tmp = meta.with_name(f"{meta.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"train_seconds": seconds, "train_cpu_seconds": cpu,
                                   "losses": losses,
                                   "settings": asdict(settings), "seed": seed}) + "\n")
        tmp.replace(meta)
    acc = accuracy(params, x_test, y_test, settings.shape)
    return Vit(params, settings.shape, x_train, x_test, y_train, y_test, acc, seconds, cpu)


def _seed(text):
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text!r}")
    return int(text)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m podium.workloads.vit",
                                     description="Train (or load) the digits ViT and report.")
    parser.add_argument("--seed", type=_seed, default=0,
                        help="training seed and random_state of the split (default 0)")
    args = parser.parse_args(argv)
    vit = load(args.seed, verbose=True)
    bf16 = accuracy(vit.params, vit.x_test, vit.y_test, vit.shape, bf16=True)
    n = sum(v.size for v in vit.params.values())
    print(f"ViT {vit.shape}: {n} parameters, trained in {vit.train_seconds:.1f} s "
          f"({vit.train_cpu_seconds:.1f} s CPU)")
    print(f"test accuracy ({len(vit.y_test)} images): float64 {vit.float_accuracy:.2%}, "
          f"bfloat16 emulation {bf16:.2%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
