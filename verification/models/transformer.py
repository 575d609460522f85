"""float64 references of the transformer operations (podium/transformer.py), from their
textbook definitions, independent of the ISA simulator and of the VPU's algorithms.

Each takes a 2-D array (rows x features) of any float type and computes in float64; erf is
``math.erf`` (correctly rounded libm), not the compiler's Abramowitz-Stegun form.
"""

import math

import numpy as np

__all__ = ["softmax", "layernorm", "rmsnorm", "gelu_tanh", "gelu_erf", "silu", "add",
           "REFERENCES", "attention"]


def _f64(x):
    return np.asarray(x, dtype=np.float64)


def softmax(x):
    """exp(x - max) / sum along each row. A row of all -inf gives zeros (the compiler's
    rule for a fully masked row); any NaN or +inf gives a row of NaN."""
    x = _f64(x)
    m = np.max(x, axis=1, keepdims=True)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.maximum(m, -np.finfo(np.float32).max)
        e = np.exp(x - m)
        s = np.sum(e, axis=1, keepdims=True)
        y = e / np.maximum(s, 2.0**-126)
    bad = np.isnan(x).any(axis=1) | np.isposinf(x).any(axis=1)
    y[bad] = np.nan
    return y


def layernorm(x, gamma=None, beta=None, eps=1e-5):
    x = _f64(x)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    y = (x - mean) / np.sqrt(var + eps)
    return _affine(y, gamma, beta)


def rmsnorm(x, gamma=None, beta=None, eps=1e-6):
    x = _f64(x)
    y = x / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    return _affine(y, gamma, beta)


def _affine(y, gamma, beta):
    if gamma is not None:
        y = y * _f64(gamma)
    if beta is not None:
        y = y + _f64(beta)
    return y


def gelu_tanh(x):
    x = _f64(x)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def gelu_erf(x):
    x = _f64(x)
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def silu(x):
    x = _f64(x)
    with np.errstate(over="ignore"):
        return x / (1 + np.exp(-x))


def add(x, r):
    return _f64(x) + _f64(r)


REFERENCES = {"softmax": softmax, "layernorm": layernorm, "rmsnorm": rmsnorm,
              "gelu_tanh": gelu_tanh, "gelu_erf": gelu_erf, "silu": silu, "add": add}


def attention(q, k, v, causal=False):
    """``softmax(q k^T / sqrt(d) [+ mask]) v`` for one head (``seq x d`` arrays), the textbook
    two-pass softmax in float64; ``causal``: key ``j`` is masked (-inf) for query ``i < j``.
    A NaN or inf anywhere in a query row, or in a key or value that row attends, gives NaN
    in that row (numpy's arithmetic)."""
    q, k, v = _f64(q), _f64(k), _f64(v)
    s = q @ k.T / math.sqrt(q.shape[1])
    if causal:
        s = np.where(np.triu(np.ones(s.shape, dtype=bool), 1), -np.inf, s)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(s, axis=1, keepdims=True)
        e = np.exp(s - m)
        return (e / e.sum(axis=1, keepdims=True)) @ v
