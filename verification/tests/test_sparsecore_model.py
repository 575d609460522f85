"""The SparseCore golden model against references written here: straightforward per-element
loops in the order the specification gives (bit-exact), float64 sums over integer-valued
tables (exact, so any order agrees), and torch EmbeddingBag / TensorFlow semantics spelled out
by hand (torch is not installed)."""

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from verification.models.sparsecore import (
    Batch,
    Error,
    Limits,
    Table,
    bag_scales,
    check,
    lookup,
    minibatches,
    scatter,
    shard,
    table_from_image,
    table_image,
)

f32 = np.float32


def bits(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def vals(b):
    return np.asarray(b, dtype=np.uint32).view(np.float32)


def random_batch(rng, bags, rows, max_bag=6, weights=False, zipf=None):
    sizes = rng.integers(0, max_bag + 1, bags)
    n = int(sizes.sum())
    ids = (np.minimum(rng.zipf(zipf, n) - 1, rows - 1) if zipf
           else rng.integers(0, rows, n))
    w = rng.standard_normal(n).astype(np.float32) if weights else None
    return Batch(np.concatenate([[0], np.cumsum(sizes)]), ids, w)


def ref_lookup(rows, batch, combiner, padding_idx=None):
    """Scalar loops, one element at a time, fp32 each step: the specification's order."""
    bags, dim = batch.bags, rows.shape[1]
    out = np.zeros((bags, dim), dtype=np.float32)
    for b in range(bags):
        ks = [k for k in range(batch.offsets[b], batch.offsets[b + 1])
              if batch.ids[k] != padding_idx and 0 <= batch.ids[k] < len(rows)]
        ws = [f32(1) if batch.weights is None else batch.weights[k] for k in ks]
        if combiner == "mean":
            den = f32(0)
            for w in ws:
                den = f32(den + w)
        elif combiner == "sqrtn":
            den = f32(0)
            for w in ws:
                den = f32(den + f32(w * w))
            den = f32(math.sqrt(den)) if den >= 0 else f32("nan")
        elif combiner == "sqrtn_count":
            den = f32(math.sqrt(len(ks)))
        for e in range(dim):
            acc = f32(0)
            for k, w in zip(ks, ws, strict=True):
                acc = f32(acc + f32(w * rows[batch.ids[k], e]))
            if combiner != "sum":
                acc = f32(0) if den == 0 else f32(acc * f32(f32(1) / den))
            out[b, e] = acc
    return out


def same_bits(got_bits, want_values):
    want = np.asarray(want_values, dtype=np.float32)
    got = vals(got_bits)
    both_nan = np.isnan(got) & np.isnan(want)
    return np.array_equal(np.where(both_nan, 0, got.view(np.uint32)),
                          np.where(both_nan, 0, want.view(np.uint32)))


@pytest.mark.parametrize("combiner", ["sum", "mean", "sqrtn", "sqrtn_count"])
@pytest.mark.parametrize("weighted", [False, True])
def test_lookup_bit_exact(combiner, weighted, seed):
    rng = np.random.default_rng(seed)
    table = Table(0, 40, 7)
    rows = rng.standard_normal((40, 7)).astype(np.float32) * 1e3
    batch = random_batch(rng, 25, 40, weights=weighted)
    res = lookup(table, bits(rows), batch, combiner)
    assert res.error == Error.NONE
    assert same_bits(res.out, ref_lookup(rows, batch, combiner)), f"seed {seed}"
    assert res.counters["ids"] == len(batch.ids)


def test_integer_tables_match_float64_reference():
    """torch EmbeddingBag ``sum`` / ``mean`` with per-sample weights on sum: with small
    integers every fp32 step is exact, so the order cannot matter."""
    rng = np.random.default_rng(1)
    rows = rng.integers(-50, 50, (30, 5)).astype(np.float32)
    batch = random_batch(rng, 20, 30, max_bag=5)
    batch.weights = rng.integers(-3, 4, len(batch.ids)).astype(np.float32)
    got = vals(lookup(Table(0, 30, 5), bits(rows), batch, "sum").out)
    for b in range(batch.bags):
        lo, hi = batch.offsets[b], batch.offsets[b + 1]
        want = (batch.weights[lo:hi, None].astype(np.float64) * rows[batch.ids[lo:hi]]).sum(0)
        assert np.array_equal(got[b], want)
    batch.weights = None
    got = vals(lookup(Table(0, 30, 5), bits(rows), batch, "mean").out)
    for b in range(batch.bags):
        lo, hi = batch.offsets[b], batch.offsets[b + 1]
        if hi == lo:
            assert np.array_equal(got[b], np.zeros(5)) and not np.signbit(got[b]).any()
            continue
        total = rows[batch.ids[lo:hi]].astype(np.float64).sum(0)
        want = (total.astype(np.float32) * f32(f32(1) / f32(hi - lo))).astype(np.float32)
        assert np.array_equal(got[b], want)


def test_padding_idx_like_torch():
    """torch's padding_idx: the id contributes nothing and is not counted by ``mean``; a bag of
    only padding is zeros."""
    rows = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    batch = Batch([0, 3, 5, 5], [1, 2, 2, 2, 2])
    res = lookup(Table(0, 4, 3), bits(rows), batch, "mean", padding_idx=2)
    out = vals(res.out)
    assert np.array_equal(out[0], rows[1]), "padding counted in the mean"
    assert np.array_equal(out[1], np.zeros(3)) and np.array_equal(out[2], np.zeros(3))
    assert res.counters["padding"] == 4 and res.counters["gathered"] == 1
    s = vals(lookup(Table(0, 4, 3), bits(rows), batch, "sum", padding_idx=2).out)
    assert np.array_equal(s[0], rows[1])


def test_zero_denominators_give_zeros():
    rows = np.ones((3, 2), dtype=np.float32)
    batch = Batch([0, 2, 2], [0, 1], [1.5, -1.5])
    for combiner in ("mean", "sqrtn", "sqrtn_count", "sum"):
        out = vals(lookup(Table(0, 3, 2), bits(rows), batch, combiner).out)
        assert np.isfinite(out).all(), combiner
        assert np.array_equal(out[1], np.zeros(2)), f"{combiner}: empty bag not zeros"
    assert np.array_equal(vals(lookup(Table(0, 3, 2), bits(rows), batch, "mean").out)[0],
                          np.zeros(2)), "mean with weights summing to zero"


def test_sqrtn_definitions():
    """TPU (and tf.nn.embedding_lookup_sparse): sqrt of the sum of squared weights; count
    version: sqrt of the number of ids. Equal without weights, different with."""
    rows = np.full((2, 1), 6.0, dtype=np.float32)
    plain = Batch([0, 4], [0, 1, 0, 1])
    a = vals(lookup(Table(0, 2, 1), bits(rows), plain, "sqrtn").out)
    b = vals(lookup(Table(0, 2, 1), bits(rows), plain, "sqrtn_count").out)
    assert a.tolist() == b.tolist() == [[12.0]]
    weighted = Batch([0, 2], [0, 1], [3.0, 4.0])
    tpu = vals(lookup(Table(0, 2, 1), bits(rows), weighted, "sqrtn").out)[0, 0]
    count = vals(lookup(Table(0, 2, 1), bits(rows), weighted, "sqrtn_count").out)[0, 0]
    assert tpu == f32(42 * f32(1 / f32(5)))
    assert count == f32(42 * f32(1 / f32(math.sqrt(2))))


def test_bf16_table_widened_exactly():
    rng = np.random.default_rng(3)
    v = rng.standard_normal((10, 4)).astype(ml_dtypes.bfloat16)
    batch = random_batch(rng, 8, 10, weights=True)
    res = lookup(Table(0, 10, 4, "bf16"), v.view(np.uint16), batch, "sum")
    assert same_bits(res.out, ref_lookup(v.astype(np.float32), batch, "sum"))


@pytest.mark.parametrize("case", ["decreasing", "past_end", "negative"])
def test_bad_offsets_refused(case):
    offsets = {"decreasing": [0, 3, 2, 4], "past_end": [0, 2, 5], "negative": [-1, 2]}[case]
    batch = Batch(offsets, [0, 1, 1, 0])
    for fn in (lambda: lookup(Table(0, 2, 1), bits([[1.0], [2.0]]), batch),
               lambda: scatter(Table(0, 2, 1), bits([[1.0], [2.0]]), batch, np.ones((3, 1)))):
        res = fn()
        assert res.error == Error.BAD_OFFSETS and res.out is None


def test_bad_ids_stop_or_drop():
    rows = np.arange(4, dtype=np.float32).reshape(4, 1) + 1
    batch = Batch([0, 2, 4], [0, 4, 3, 7])
    stop = lookup(Table(0, 4, 1), bits(rows), batch, "mean")
    assert stop.error == Error.BAD_ID and stop.out is None and stop.counters["bad_ids"] == 2
    drop = lookup(Table(0, 4, 1), bits(rows), batch, "mean", bad_ids="drop")
    assert drop.error == Error.NONE and drop.counters["bad_ids"] == 2
    assert vals(drop.out).ravel().tolist() == [1.0, 4.0]
    assert check(Batch([0, 1], [3]), 4) == (Error.NONE, 0)
    assert check(Batch([0, 1], [4]), 4) == (Error.BAD_ID, 1), "the table edge is rows - 1"
    sc = scatter(Table(0, 4, 1), bits(rows), batch, np.ones((2, 1)))
    assert sc.error == Error.BAD_ID and sc.out is None


def ref_scatter(rows, batch, grad, lr, scales, padding_idx=None):
    """Reference: per id, the contributions in CSR order, then one SGD step per unique id."""
    rows = rows.copy()
    total = {}
    for b in range(batch.bags):
        for k in range(batch.offsets[b], batch.offsets[b + 1]):
            i = int(batch.ids[k])
            if i == padding_idx:
                continue
            w = f32(1) if batch.weights is None else batch.weights[k]
            g = [f32(f32(grad[b, e] * scales[b]) * w) for e in range(rows.shape[1])]
            prev = total.get(i, [f32(0)] * rows.shape[1])
            total[i] = [f32(p + x) for p, x in zip(prev, g, strict=True)]
    for i, G in total.items():
        for e in range(rows.shape[1]):
            rows[i, e] = f32(rows[i, e] - f32(f32(lr) * G[e]))
    return rows


@pytest.mark.parametrize("combiner", ["sum", "mean"])
def test_scatter_sgd_duplicates_combined(combiner, seed):
    rng = np.random.default_rng(seed)
    rows = rng.standard_normal((16, 5)).astype(np.float32)
    batch = random_batch(rng, 30, 16, weights=True, zipf=1.3)
    grad = rng.standard_normal((30, 5)).astype(np.float32)
    res = scatter(Table(0, 16, 5), bits(rows), batch, grad, combiner, lr=0.25, padding_idx=3)

    scales = bag_scales(batch, 16, combiner, 3)
    want = ref_scatter(rows, batch, grad, 0.25, scales, padding_idx=3)
    assert same_bits(res.out, want), f"seed {seed}"
    assert res.counters["row_writes"] == len(set(batch.ids.tolist()) - {3})
    again = scatter(Table(0, 16, 5), bits(rows), batch, grad, combiner, lr=0.25, padding_idx=3)
    assert np.array_equal(again.out, res.out), "scatter not deterministic"


def test_scatter_adagrad():
    rng = np.random.default_rng(5)
    rows = rng.standard_normal((6, 3)).astype(np.float32)
    batch = Batch([0, 3, 4], [1, 4, 1, 1], [1.0, 2.0, 0.5, -1.0])
    grad = rng.standard_normal((2, 3)).astype(np.float32)
    acc0 = np.full((6, 3), 0.1, dtype=np.float32)
    res = scatter(Table(0, 6, 3), bits(rows), batch, grad, lr=0.5, optimizer="adagrad",
                  accumulators=acc0)
    new = vals(res.out)
    G1 = (f32(1) * grad[0]).astype(np.float32)
    G1 = (G1 + (f32(0.5) * grad[0]).astype(np.float32)).astype(np.float32)
    G1 = (G1 + (f32(-1) * grad[1]).astype(np.float32)).astype(np.float32)
    a1 = (acc0[1] + G1 * G1).astype(np.float32)
    want1 = (rows[1] - ((f32(0.5) * G1).astype(np.float32) / np.sqrt(a1)).astype(np.float32))
    assert np.array_equal(new[1], want1.astype(np.float32))
    assert np.array_equal(new[0], rows[0]) and np.array_equal(res.counters["accumulators"][0],
                                                              acc0[0])


def test_scatter_bf16_rounds_once_per_step():
    rows = np.array([[1.0, 2.0]], dtype=ml_dtypes.bfloat16)
    batch = Batch([0, 1], [0])
    grad = np.array([[1e-3, -1.0]], dtype=np.float32)
    res = scatter(Table(0, 1, 2, "bf16"), rows.view(np.uint16), batch, grad, lr=1.0)
    want = (rows.astype(np.float32) - grad).astype(ml_dtypes.bfloat16)
    assert res.out.tolist() == want.view(np.uint16).tolist()


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 12), st.integers(1, 12))
def test_minibatches_cover_in_order_within_limits(seed, max_ids, max_unique):
    rng = np.random.default_rng(seed)
    batch = random_batch(rng, 10, 20, max_bag=9)
    parts = minibatches(batch, Limits(max_ids, max_unique))
    assert parts[0][0] == batch.offsets[0] and parts[-1][1] == batch.offsets[-1]
    for (a, b), (c, _) in zip(parts, parts[1:], strict=False):
        assert b == c and a < b
    for lo, hi in parts:
        assert hi - lo <= max_ids and len(set(batch.ids[lo:hi].tolist())) <= max_unique
    padded = minibatches(batch, Limits(max_ids, max_unique), padding_idx=0)
    for lo, hi in padded:
        kept = [i for i in batch.ids[lo:hi].tolist() if i != 0]
        assert len(kept) <= max_ids and len(set(kept)) <= max_unique
    assert len(padded) <= len(parts), "padding counted against the limits"
    rows = rng.standard_normal((20, 3)).astype(np.float32)
    whole = lookup(Table(0, 20, 3), bits(rows), batch, "mean")
    split = lookup(Table(0, 20, 3), bits(rows), batch, "mean",
                   limits=Limits(max_ids, max_unique))
    assert np.array_equal(whole.out, split.out), "a lookup changed with the minibatch split"
    assert split.counters["minibatches"] == len(parts)


def test_scatter_minibatches_step_in_order():
    rng = np.random.default_rng(9)
    rows = rng.standard_normal((5, 2)).astype(np.float32)
    batch = Batch([0, 2, 4, 6], [0, 1, 0, 2, 0, 1])
    grad = rng.standard_normal((3, 2)).astype(np.float32)
    res = scatter(Table(0, 5, 2), bits(rows), batch, grad, lr=0.1, limits=Limits(max_ids=2))
    want = rows
    for b in range(3):     # one bag per minibatch
        sub = Batch([0, 2], batch.ids[2 * b:2 * b + 2])
        want = ref_scatter(want, sub, grad[b:b + 1], 0.1, np.ones(1, np.float32))
    assert same_bits(res.out, want)
    assert res.counters["minibatches"] == 3 and res.counters["max_batch"] == 6


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 5))
def test_shard_mod_n(seed, n):
    rng = np.random.default_rng(seed)
    rows_n = 23
    rows = rng.integers(-20, 20, (rows_n, 4)).astype(np.float32)
    batch = random_batch(rng, 9, rows_n, weights=False)
    batch.weights = rng.integers(-2, 3, len(batch.ids)).astype(np.float32)
    parts = shard(batch, n)
    assert sum(len(p.ids) for p in parts) == len(batch.ids)
    total = np.zeros((batch.bags, 4), dtype=np.float64)
    for s, p in enumerate(parts):
        assert p.bags == batch.bags
        local_rows = rows[s::n]
        res = lookup(Table(0, len(local_rows), 4), bits(local_rows), p, "sum")
        assert res.error == Error.NONE
        total += vals(res.out)
    want = vals(lookup(Table(0, rows_n, 4), bits(rows), batch, "sum").out)
    assert np.array_equal(total, want), "shards do not add up to the whole lookup"


def test_table_image_round_trip_with_pitch():
    rng = np.random.default_rng(2)
    t = Table(0x100, 5, 3, "bf16", pitch=32)
    b = rng.integers(0, 1 << 16, (5, 3)).astype(np.uint16)
    image = table_image(t, b)
    assert len(image) == 5 * 32
    assert np.array_equal(table_from_image(t, image), b)
    with pytest.raises(ValueError, match="pitch"):
        Table(0, 5, 3, "fp32", pitch=8)
