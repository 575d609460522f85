"""The UCI digits workload: a 64-32-10 ReLU MLP trained with scikit-learn on the digits data
set inside its wheel (no download), quantized to int8 and to bfloat16, inferred in numpy,
and compiled (podium/compiler.py ``mlp``) to one program that classifies the whole test
split on the TensorCore.

int8: inputs ``round(x/16 * 127)``, per-tensor weight scales ``max|W| / 127``, int32 biases
at the scale of their sums, hidden activations requantized to int8 by ``(h * multiplier +
2**(shift-1)) >> shift`` with a scale calibrated on the training split (the ``vcast i32_i8``
of the VPU), int32 logits. bfloat16: inputs, weights and hidden activations in bfloat16,
biases and sums in fp32, sums in the MXU's order (``mxu_order_matmul``), fp32 logits.
The class of a sample is the argmax of its logits on the host (first index on a tie).
"""

import warnings
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..compiler import mlp

__all__ = ["Digits", "load", "quantize_int8", "quantize_bf16", "infer_int8", "infer_bf16",
           "mxu_order_matmul", "compile_digits", "SHIFT", "HIDDEN"]

HIDDEN = 32
SHIFT = 24
"""Right shift of the int8 requantization; the multiplier carries the scale ratio."""


@dataclass
class Digits:
    """The trained model and the 75/25 split (pixels scaled to 0..1)."""

    model: object
    x_train: np.ndarray
    x_test: np.ndarray
    y_train: np.ndarray
    y_test: np.ndarray

    @property
    def float_accuracy(self):
        return float(self.model.score(self.x_test, self.y_test))


def load(seed=0):
    """Train ``MLPClassifier((32,), random_state=seed)`` on 75% of the digits."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier

    data = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        data.data / 16, data.target, test_size=0.25, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MLPClassifier(hidden_layer_sizes=(HIDDEN,), random_state=seed,
                              max_iter=1000).fit(x_train, y_train)
    return Digits(model, x_train, x_test, y_train, y_test)


@dataclass
class QuantizedInt8:
    layers: list            # (int8 weights, int32 bias) per layer
    requant: list           # (multiplier, shift) per hidden layer

    @staticmethod
    def inputs(x):
        return np.clip(np.rint(x * 127), -128, 127).astype(np.int8)


def _requantize(h, multiplier, shift):
    return np.clip((h.astype(np.int64) * multiplier + (1 << (shift - 1))) >> shift,
                   -128, 127).astype(np.int8)


def quantize_int8(digits):
    """Per-tensor symmetric int8 quantization, activation scales from the training split."""
    model = digits.model
    layers, requant = [], []
    scale_in = 1 / 127
    x = QuantizedInt8.inputs(digits.x_train)
    for n, (w, b) in enumerate(zip(model.coefs_, model.intercepts_, strict=True)):
        scale_w = np.abs(w).max() / 127
        wq = np.clip(np.rint(w / scale_w), -127, 127).astype(np.int8)
        bq = np.rint(b / (scale_in * scale_w)).astype(np.int32)
        layers.append((wq, bq))
        if n < len(model.coefs_) - 1:
            h = np.maximum(x.astype(np.int64) @ wq + bq, 0)
            scale_out = h.max() * scale_in * scale_w / 127
            multiplier = int(round(scale_in * scale_w / scale_out * (1 << SHIFT)))
            requant.append((multiplier, SHIFT))
            x = _requantize(h, multiplier, SHIFT)
            scale_in = scale_out
    return QuantizedInt8(layers, requant)


def infer_int8(q, x):
    """Logits (int32) of the int8 model for inputs ``x`` (pixels 0..1)."""
    a = QuantizedInt8.inputs(x)
    for n, (w, b) in enumerate(q.layers):
        h = (a.astype(np.int64) @ w + b).astype(np.int32)
        if n == len(q.layers) - 1:
            return h
        a = _requantize(np.maximum(h, 0), *q.requant[n])


def quantize_bf16(digits):
    """bfloat16 weights, fp32 biases."""
    m = digits.model
    return [(w.astype(ml_dtypes.bfloat16), b.astype(np.float32))
            for w, b in zip(m.coefs_, m.intercepts_, strict=True)]


def mxu_order_matmul(a, w, rows, group):
    """fp32 ``a @ w`` for bfloat16 operands summed as the MXU does (docs/mxu.md): one
    command per ``group`` of the reduction (accumulated in order), within a command k-tiles
    of ``rows`` each summed from -0 in row order, every operation rounded to fp32."""
    a32, w32 = a.astype(np.float32), w.astype(np.float32)
    acc = None
    with np.errstate(all="ignore"):
        for g in range(0, a.shape[1], group):
            end = min(g + group, a.shape[1])
            for t in range(g, end, rows):
                s = np.full((a.shape[0], w.shape[1]), -0.0, dtype=np.float32)
                for r in range(t, min(t + rows, end)):
                    s = s + a32[:, r:r + 1] * w32[r:r + 1, :]
                acc = s if acc is None else acc + s
    return acc


def infer_bf16(layers, x, config):
    """Logits (fp32) of the bfloat16 model for inputs ``x``, in the order the compiled
    program runs on ``config``'s MXU (hidden widths padded to whole VMEM-row chunks)."""
    chunk = config.row_bytes // 4
    a = x.astype(ml_dtypes.bfloat16)
    for n, (w, b) in enumerate(layers):
        group = a.shape[1] if n == 0 else chunk
        pad = -a.shape[1] % chunk if n else 0
        a = np.pad(a, ((0, 0), (0, pad)))
        w = np.pad(w, ((0, pad), (0, 0)))
        h = mxu_order_matmul(a, w, config.mxu.rows, group) + b
        if n == len(layers) - 1:
            return h
        a = np.where(h > 0, h, np.float32(0)).astype(ml_dtypes.bfloat16)


def compile_digits(config, digits=None, dtype="int8"):
    """One program classifying the whole test split: the quantized model and the test
    inputs in its HBM image, logits ``Y`` as output; metadata holds the labels and the
    classes of the numpy inference."""
    digits = digits or load()
    if dtype == "int8":
        q = quantize_int8(digits)
        program = mlp(config, q.layers, len(digits.x_test), "relu", q.requant)
        x = QuantizedInt8.inputs(digits.x_test)
        logits = infer_int8(q, digits.x_test)
    elif dtype == "bfloat16":
        layers = quantize_bf16(digits)
        program = mlp(config, layers, len(digits.x_test), "relu")
        x = digits.x_test.astype(ml_dtypes.bfloat16)
        logits = infer_bf16(layers, digits.x_test, config)
    else:
        raise ValueError(f"dtype must be int8 or bfloat16, got {dtype!r}")
    program.bind(X=x)
    classes = np.argmax(logits, axis=1)
    program.metadata.update({
        "workload": "digits", "labels": [int(v) for v in digits.y_test],
        "classes": [int(v) for v in classes],
        "float_accuracy": digits.float_accuracy,
        "numpy_accuracy": float(np.mean(classes == digits.y_test))})
    return program
