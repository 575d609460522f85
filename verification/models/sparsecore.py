"""Golden model of the SparseCore: embedding lookups (segment reductions over gathered table
rows), gradient scatter-add with dedup and a fused optimizer step, id sharding, bad input.

Written from the specification (issue 12, docs/sparsecore.md), not from the RTL. Values travel
as raw bit patterns where the hardware sees them (tables, outputs) and every fp32 operation is
one IEEE binary32 operation rounded to nearest even (numpy float32), in the order given here,
so results are bit-exact.

Input (the TPU embedding stack's form): a CSR batch, ``offsets`` (``bags + 1`` unsigned 32-bit
words), ``ids`` (unsigned 32-bit) and optional ``weights`` (fp32, one per id). Bag ``b`` is
``ids[offsets[b]:offsets[b + 1]]``.

Lookup, for each bag, over its ids in CSR order, skipping ``padding_idx`` and (``bad_ids =
"drop"``) ids outside the table::

    acc   = +0.0                                    (per element, fp32)
    acc   = fp32(acc + fp32(w * row[id]))           (w = 1.0 without weights)
    den   = sum:         -
            mean:        fp32 running sum of w      (torch / TF / TPU "mean")
            sqrtn:       fp32(sqrt(fp32 running sum of fp32(w * w)))
                                                    (the TPU embedding API's and
                                                     tf.nn.embedding_lookup_sparse's
                                                     definition)
            sqrtn_count: fp32(sqrt(count))          (sqrt of the number of ids; what the issue
                                                     calls TensorFlow's; equal to sqrtn
                                                     without weights)
    scale = fp32(1 / den), or 0 when den == 0 (an empty bag, every id padded or dropped, or
            weights summing to zero: the output is zeros, never inf or NaN from the divide)
    out   = fp32(acc * scale)                       (sum: out = acc)

bfloat16 table rows are widened to fp32 exactly; the output is always fp32. An empty bag gives
+0.0 in every element. NaNs in the output are the canonical ``0x7FC00000``.

Scatter (the backward pass with the optimizer fused), with the same bags, weights, padding and
bad-id policy and the forward combiner's ``scale`` per bag::

    g[b]      = fp32(grad[b] * scale[b])                    (per element; sum: grad[b])
    contrib   = fp32(w * g[b])                              for every (b, id, w) in CSR order
    G[id]     = +0.0 + contrib + contrib + ...              fp32, the contributions of one id in
                                                            CSR order (a stable sort by id, then
                                                            a segment sum: deterministic)
    sgd:      row = fp32(row - fp32(lr * G))
    adagrad:  acc = fp32(acc + fp32(G * G));  row = fp32(row - fp32(fp32(lr * G) / fp32(sqrt(acc))))
              (no change where acc == 0)

rows are read as fp32 (bfloat16 widened) and written back in the table's format (bfloat16
rounded to nearest even). Unique ids are updated in ascending id order; each row is written
once per minibatch.

Limits: ``max_ids`` kept ids (not padding, not dropped) and ``max_unique`` distinct ids per
minibatch. An operation larger than that is split, in CSR order, into minibatches (greedy; a
kept id that would break a limit starts the next one, wherever it is in its bag). Lookups do
not change with the split (the bag's accumulator carries across the cut); a scatter applies one
optimizer step per minibatch, in order. The counters report the minibatches and the largest
operation seen (its ids).

Bad input (checked before anything is written):

* offsets that decrease, or an offset past the id count: error ``BAD_OFFSETS``, nothing written;
* ids outside the table (``id >= rows``): counted in ``bad_ids``; with ``bad_ids="stop"`` (the
  default) the operation stops with ``BAD_ID`` and nothing is written; with ``"drop"`` they are
  skipped like padding.

Sharding (the TPU scheme): id ``i`` lives on shard ``i mod N`` as local row ``i div N``;
:func:`shard` splits a CSR batch into one CSR batch per shard with the same bags.
"""

import enum
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

__all__ = ["Error", "COMBINERS", "FORMATS", "Table", "Batch", "Result", "Limits", "check",
           "lookup", "scatter", "shard", "minibatches", "bag_scales", "table_image",
           "table_from_image", "read_table", "write_table"]

COMBINERS = ("sum", "mean", "sqrtn", "sqrtn_count")
FORMATS = ("fp32", "bf16")
_ESIZE = {"fp32": 4, "bf16": 2}


class Error(enum.IntEnum):
    """The error codes of an operation (the ERROR register)."""

    NONE = 0
    BAD_OFFSETS = 1
    BAD_ID = 2
    AXI_RESPONSE = 3
    BAD_DESCRIPTOR = 4


@dataclass(frozen=True)
class Table:
    """A table in memory: ``rows`` rows of ``dim`` elements of ``fmt`` at ``base``, row ``r`` at
    ``base + r * pitch`` (``pitch`` defaults to the row's bytes)."""

    base: int
    rows: int
    dim: int
    fmt: str = "fp32"
    pitch: int = 0

    def __post_init__(self):
        if self.fmt not in FORMATS:
            raise ValueError(f"fmt must be one of {FORMATS}, got {self.fmt!r}")
        if self.pitch == 0:
            object.__setattr__(self, "pitch", self.row_bytes)
        if self.pitch < self.row_bytes:
            raise ValueError(f"pitch must be at least {self.row_bytes}, got {self.pitch}")

    @property
    def esize(self):
        return _ESIZE[self.fmt]

    @property
    def row_bytes(self):
        return self.dim * self.esize

    @property
    def nbytes(self):
        return self.rows * self.pitch


@dataclass
class Batch:
    """A CSR batch: ``offsets`` (bags + 1), ``ids``, optional fp32 ``weights`` (one per id)."""

    offsets: np.ndarray
    ids: np.ndarray
    weights: np.ndarray | None = None

    def __post_init__(self):
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        self.ids = np.asarray(self.ids, dtype=np.int64)
        if self.weights is not None:
            self.weights = np.asarray(self.weights, dtype=np.float32)
            if len(self.weights) != len(self.ids):
                raise ValueError("weights must have one entry per id")

    @property
    def bags(self):
        return len(self.offsets) - 1


@dataclass(frozen=True)
class Limits:
    """Per-minibatch limits: ids, and unique ids (the scatter's dedup buffer)."""

    max_ids: int = 1 << 30
    max_unique: int = 1 << 30


@dataclass
class Result:
    """What an operation gives: ``out`` (lookup: fp32 bits, bags x dim; scatter: the new table
    as an array of its format's bits), the error, and the counters."""

    error: Error = Error.NONE
    out: np.ndarray | None = None
    counters: dict = field(default_factory=dict)


def _w(batch, k):
    return np.float32(1.0) if batch.weights is None else batch.weights[k]


def check(batch, rows):
    """``(error, bad id count)`` of a batch against a table of ``rows`` rows, ignoring the
    bad-id policy: BAD_OFFSETS if the offsets decrease or run past the ids, else BAD_ID if any
    looked-up id is outside the table."""
    off, n = batch.offsets, len(batch.ids)
    if len(off) < 1 or np.any(off < 0) or np.any(off > n) or np.any(np.diff(off) < 0):
        return Error.BAD_OFFSETS, 0
    used = batch.ids[off[0]:off[-1]]
    bad = int(np.count_nonzero((used < 0) | (used >= rows)))
    return (Error.BAD_ID if bad else Error.NONE), bad


def _kept(batch, k, rows, padding_idx):
    i = batch.ids[k]
    return i != padding_idx and 0 <= i < rows


def bag_scales(batch, rows, combiner, padding_idx=None):
    """The fp32 scale of each bag (see the module docstring); 1.0 for ``sum``."""
    if combiner not in COMBINERS:
        raise ValueError(f"combiner must be one of {COMBINERS}, got {combiner!r}")
    scales = np.ones(batch.bags, dtype=np.float32)
    if combiner == "sum":
        return scales
    with np.errstate(all="ignore"):
        for b in range(batch.bags):
            den = np.float32(0.0)
            count = 0
            for k in range(batch.offsets[b], batch.offsets[b + 1]):
                if not _kept(batch, k, rows, padding_idx):
                    continue
                w = _w(batch, k)
                count += 1
                if combiner == "mean":
                    den = np.float32(den + w)
                elif combiner == "sqrtn":
                    den = np.float32(den + np.float32(w * w))
            if combiner == "sqrtn":
                den = np.sqrt(den, dtype=np.float32)
            elif combiner == "sqrtn_count":
                den = np.sqrt(np.float32(count), dtype=np.float32)
            scales[b] = np.float32(0.0) if den == 0 else np.float32(np.float32(1.0) / den)
    return scales


def _widen(bits, fmt):
    if fmt == "fp32":
        return np.asarray(bits, dtype=np.uint32).view(np.float32)
    return np.asarray(bits, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)


def _narrow(values, fmt):
    values = np.asarray(values, dtype=np.float32)
    nan = np.isnan(values)
    if fmt == "fp32":
        return np.where(nan, np.uint32(0x7FC00000), values.view(np.uint32)).astype(np.uint32)
    bits = values.astype(ml_dtypes.bfloat16).view(np.uint16)
    return np.where(nan, np.uint16(0x7FC0), bits).astype(np.uint16)


def minibatches(batch, limits, rows=1 << 62, padding_idx=None):
    """The minibatches of ``batch`` under ``limits``: a list of ``(start, end)`` ranges of id
    positions covering ``offsets[0]:offsets[-1]`` in order. Only kept ids count (not padding,
    not outside the table's ``rows``): a kept id that would make its minibatch hold more than
    ``max_ids`` kept ids or ``max_unique`` distinct ones starts the next minibatch (bags are cut
    anywhere; a bag's lookup does not change, and a scatter's contributions are per id)."""
    off = batch.offsets
    out = []
    start = off[0]
    count, unique = 0, set()
    for k in range(off[0], off[-1]):
        i = int(batch.ids[k])
        if i == padding_idx or not 0 <= i < rows:
            continue
        if count + 1 > limits.max_ids or len(unique | {i}) > limits.max_unique:
            out.append((start, k))
            start, count, unique = k, 0, set()
        count += 1
        unique.add(i)
    out.append((start, off[-1]))
    return out


def _counters(batch, table, padding_idx, bad, limits):
    off = batch.offsets
    used = batch.ids[off[0]:off[-1]]
    padded = int(np.count_nonzero(used == padding_idx)) if padding_idx is not None else 0
    good = used[(used >= 0) & (used < table.rows) & (used != (-1 if padding_idx is None
                                                               else padding_idx))]
    return {"bags": batch.bags, "ids": len(used), "padding": padded, "bad_ids": bad,
            "gathered": len(good), "unique_ids": len(set(good.tolist())),
            "minibatches": len(minibatches(batch, limits, table.rows, padding_idx)),
            "max_batch": len(used)}


def _checked(batch, table, padding_idx, bad_ids, limits):
    """The counters of ``batch``, and the :class:`Result` that refuses it (bad offsets, or a
    bad id when ``bad_ids`` is ``"stop"``), or None when it goes ahead."""
    error, bad = check(batch, table.rows)
    if error == Error.BAD_OFFSETS:
        return {"bad_ids": 0}, Result(error, None, {"bad_ids": 0})
    counters = _counters(batch, table, padding_idx, bad, limits)
    if error == Error.BAD_ID and bad_ids == "stop":
        return counters, Result(error, None, counters)
    return counters, None


def lookup(table, bits, batch, combiner="sum", *, padding_idx=None, bad_ids="stop",
           limits=Limits()):
    """Lookup of ``batch`` in ``table`` (its :class:`Table`) whose rows are ``bits`` (an array
    ``rows x dim`` of the format's bit patterns). Returns a :class:`Result` whose ``out`` is
    ``bags x dim`` fp32 bit patterns (None on an error)."""
    if bad_ids not in ("stop", "drop"):
        raise ValueError(f"bad_ids must be 'stop' or 'drop', got {bad_ids!r}")
    counters, refused = _checked(batch, table, padding_idx, bad_ids, limits)
    if refused:
        return refused
    rows = _widen(bits, table.fmt).reshape(table.rows, table.dim)
    scales = bag_scales(batch, table.rows, combiner, padding_idx)
    out = np.zeros((batch.bags, table.dim), dtype=np.float32)
    with np.errstate(all="ignore"):
        for b in range(batch.bags):
            acc = np.zeros(table.dim, dtype=np.float32)
            for k in range(batch.offsets[b], batch.offsets[b + 1]):
                if _kept(batch, k, table.rows, padding_idx):
                    acc = (acc + _w(batch, k) * rows[batch.ids[k]]).astype(np.float32)
            out[b] = acc if combiner == "sum" else (acc * scales[b]).astype(np.float32)
    return Result(Error.NONE, _narrow(out, "fp32"), counters)


def scatter(table, bits, batch, grad, combiner="sum", *, lr=1.0, optimizer="sgd",
            accumulators=None, padding_idx=None, bad_ids="stop", limits=Limits()):
    """The gradient update of ``batch`` (see the module docstring): ``grad`` is ``bags x dim``
    fp32 values, ``bits`` the table (``rows x dim`` bit patterns). Returns a :class:`Result`
    whose ``out`` is the new table (None on an error, the table unchanged), and for adagrad
    ``counters["accumulators"]`` the new accumulators (``rows x dim`` fp32)."""
    if optimizer not in ("sgd", "adagrad"):
        raise ValueError(f"optimizer must be 'sgd' or 'adagrad', got {optimizer!r}")
    counters, refused = _checked(batch, table, padding_idx, bad_ids, limits)
    if refused:
        return refused
    lr = np.float32(lr)
    grad = np.asarray(grad, dtype=np.float32).reshape(batch.bags, table.dim)
    rows = _widen(bits, table.fmt).reshape(table.rows, table.dim).copy()
    acc = (np.zeros_like(rows) if accumulators is None
           else np.asarray(accumulators, dtype=np.float32).reshape(rows.shape).copy())
    scales = bag_scales(batch, table.rows, combiner, padding_idx)
    bag_of = np.repeat(np.arange(batch.bags), np.diff(batch.offsets))
    first = batch.offsets[0]
    writes = 0
    with np.errstate(all="ignore"):
        g = (grad * scales[:, None]).astype(np.float32)
        for lo, hi in minibatches(batch, limits, table.rows, padding_idx):
            pairs = [(int(batch.ids[k]), k) for k in range(lo, hi)
                     if _kept(batch, k, table.rows, padding_idx)]
            pairs.sort(key=lambda p: p[0])          # stable: CSR order within an id
            total = {}
            for i, k in pairs:
                contrib = (_w(batch, k) * g[bag_of[k - first]]).astype(np.float32)
                total[i] = (total.get(i, np.zeros(table.dim, np.float32)) + contrib
                            ).astype(np.float32)
            for i in sorted(total):
                G = total[i]
                step = (lr * G).astype(np.float32)
                if optimizer == "adagrad":
                    acc[i] = (acc[i] + (G * G).astype(np.float32)).astype(np.float32)
                    root = np.sqrt(acc[i], dtype=np.float32)
                    step = np.where(acc[i] == 0, np.float32(0),
                                    (step / root).astype(np.float32)).astype(np.float32)
                new = (rows[i] - step).astype(np.float32)
                # A bfloat16 table holds the rounded row between steps.
                rows[i] = _widen(_narrow(new, table.fmt), table.fmt)
                writes += 1
    counters["row_writes"] = writes
    if optimizer == "adagrad":
        counters["accumulators"] = acc
    return Result(Error.NONE, _narrow(rows, table.fmt), counters)


def shard(batch, n):
    """Split ``batch`` by ``id mod n`` into ``n`` CSR batches with the same bags: shard ``s``
    holds, in order, the ids ``i`` with ``i mod n == s`` as local ids ``i div n`` (and their
    weights). Offsets are checked first (ValueError)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    error, _ = check(batch, 1 << 62)
    if error != Error.NONE:
        raise ValueError(f"bad offsets: {error.name}")
    out = []
    for s in range(n):
        offsets, ids, weights = [0], [], []
        for b in range(batch.bags):
            for k in range(batch.offsets[b], batch.offsets[b + 1]):
                if batch.ids[k] % n == s:
                    ids.append(batch.ids[k] // n)
                    weights.append(_w(batch, k))
            offsets.append(len(ids))
        out.append(Batch(offsets, ids, None if batch.weights is None else weights))
    return out


# Memory images ---------------------------------------------------------------------------

def table_image(table, bits):
    """The bytes of ``table`` (rows of ``bits``, zero padding up to the pitch)."""
    dtype = np.uint32 if table.fmt == "fp32" else np.uint16
    rows = np.asarray(bits, dtype=dtype).reshape(table.rows, table.dim)
    image = np.zeros((table.rows, table.pitch), dtype=np.uint8)
    image[:, :table.row_bytes] = rows.view(np.uint8).reshape(table.rows, table.row_bytes)
    return image.tobytes()


def table_from_image(table, image):
    """The ``rows x dim`` bit patterns of ``table`` from its bytes."""
    dtype = np.uint32 if table.fmt == "fp32" else np.uint16
    raw = np.frombuffer(image, dtype=np.uint8).reshape(table.rows, table.pitch)
    return np.ascontiguousarray(raw[:, :table.row_bytes]).view(dtype).reshape(
        table.rows, table.dim)


def read_table(table, read):
    """The table's bit patterns read through ``read(address, length)``."""
    return table_from_image(table, read(table.base, table.nbytes))


def write_table(table, bits, write):
    """Write the table's image through ``write(address, data)``."""
    write(table.base, table_image(table, bits))
