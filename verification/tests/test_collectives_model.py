"""The collectives' golden model (verification/models/collectives.py) and time model
(sim/collectives_model.py) against references written here: plain numpy sums where the order
cannot matter (int32, integer-valued floats), and, for fp32 and bfloat16, sequential loops that
add each element's contributions one at a time in the order docs/pod.md states. Pure Python;
runs in seconds."""

import math

import ml_dtypes
import numpy as np
import pytest

from sim.collectives_model import (
    Network,
    all_reduce_2d_bound,
    all_to_all_bound,
    all_to_all_time,
    bisection_bound,
    bus_factor,
    busbw,
    busbw_bound,
    payload_bw,
    ring_bound,
    route,
    schedule_time,
)
from verification.models.collectives import (
    all_gather,
    all_gather_schedule,
    all_reduce,
    all_reduce_2d,
    all_reduce_2d_schedule,
    all_reduce_schedule,
    all_to_all,
    all_to_all_schedule,
    reduce_scatter,
    reduce_scatter_schedule,
    split_sizes,
)

PODS = [(1, 4), (4, 1), (2, 2), (4, 4), (1, 1), (3, 2)]
FORMATS = ("int32", "fp32", "bfloat16")
DTYPE = {"int32": np.int32, "fp32": np.float32, "bfloat16": ml_dtypes.bfloat16}


def lengths(n):
    """Buffer lengths for a ring of n: tiny, around 2n (not divisible by it), larger."""
    return sorted({0, 1, 2, 3, 2 * n - 1, 2 * n + 1, 2 * n, 37, 101})


def node(dims, x, y):
    return x + dims[0] * y


def ring_members(dims, dim, other):
    """Nodes of the ring along ``dim`` at ``other``, by position."""
    if dim == 0:
        return [node(dims, x, other) for x in range(dims[0])]
    return [node(dims, other, y) for y in range(dims[1])]


def ref_split(length, parts, grain):
    """(start, stop) of each part: np.array_split of the grains, the last grain cut short."""
    grains = np.array_split(np.arange(math.ceil(length / grain)), parts)
    bounds, start = [], 0
    for g in grains:
        stop = min(start + len(g) * grain, length)
        bounds.append((start, stop))
        start = stop
    return bounds


def ref_pieces(length, n, grain):
    """For every element: (owning block, half)."""
    owner = np.zeros((length, 2), dtype=np.int64)
    for b, (start, stop) in enumerate(ref_split(length, n, grain)):
        for h, (s, e) in enumerate(ref_split(stop - start, 2, grain)):
            owner[start + s:start + e] = (b, h)
    return owner


def ring_order(n, b, h):
    """Positions whose contributions to piece (b, h) are added, first to last."""
    step = 1 if h == 0 else -1
    return [(b + step * j) % n for j in range(1, n)] + [b]


def ref_add(fmt, acc, values):
    if fmt == "int32":
        return (acc.astype(np.int64) + values).astype(np.uint32).view(np.int32)
    return (acc + values).astype(np.float32)


def widen(fmt, values):
    return values.astype(np.int32) if fmt == "int32" else values.astype(np.float32)


def narrow(fmt, acc):
    if fmt == "bfloat16":
        return acc.astype(ml_dtypes.bfloat16)
    return acc


def ref_ring_sum(fmt, columns, order):
    """Sequential sum of ``columns[position]`` over ``order``, one add at a time."""
    acc = widen(fmt, columns[order[0]])
    for p in order[1:]:
        acc = ref_add(fmt, acc, widen(fmt, columns[p]))
    return narrow(fmt, acc)


def ref_ring_reduce(fmt, buffers, grain):
    """The all-reduce of one ring's buffers (by position), element by element in order."""
    n, length = len(buffers), len(buffers[0])
    owner = ref_pieces(length, n, grain)
    out = np.zeros(length, dtype=DTYPE[fmt])
    for b in range(n):
        for h in range(2):
            idx = np.flatnonzero((owner[:, 0] == b) & (owner[:, 1] == h))
            out[idx] = ref_ring_sum(fmt, [buf[idx] for buf in buffers], ring_order(n, b, h))
    return out


def ref_2d(fmt, dims, buffers, grain):
    """The 2-D all-reduce: per element, the Y-ring-ordered sum of the X-ring-ordered sums,
    each X sum rounded to the format (bfloat16) before the Y ring adds it."""
    length = len(buffers[0])
    out = np.zeros(length, dtype=DTYPE[fmt])
    xowner = ref_pieces(length, dims[0], grain)
    for start, stop in ref_split(length, dims[0], grain):
        yowner = ref_pieces(stop - start, dims[1], grain)
        for e in range(start, stop):
            bx, hx = xowner[e]
            by, hy = yowner[e - start]
            rows = []
            for y in range(dims[1]):
                cols = [buffers[node(dims, x, y)][e:e + 1] for x in range(dims[0])]
                acc = widen(fmt, cols[ring_order(dims[0], bx, hx)[0]])
                for x in ring_order(dims[0], bx, hx)[1:]:
                    acc = ref_add(fmt, acc, widen(fmt, cols[x]))
                rows.append(widen(fmt, narrow(fmt, acc)))
            acc = rows[ring_order(dims[1], by, hy)[0]]
            for y in ring_order(dims[1], by, hy)[1:]:
                acc = ref_add(fmt, acc, rows[y])
            out[e] = narrow(fmt, acc)[0]
    return out


def random_buffers(rng, fmt, count, length, integers=False):
    """Random buffers: full-range int32, integer-valued floats (exact in any order), or
    floats over many magnitudes (order-sensitive)."""
    if fmt == "int32":
        return [rng.integers(-2**31, 2**31, length).astype(np.int32) for _ in range(count)]
    if integers:
        return [rng.integers(-64, 64, length).astype(DTYPE[fmt]) for _ in range(count)]
    return [(rng.standard_normal(length) * 2.0 ** rng.integers(-12, 12, length))
            .astype(np.float32).astype(DTYPE[fmt]) for _ in range(count)]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def wrapping_sum(fmt, arrays):
    """numpy's sum of several buffers (int32 wrapping); exact for integer-valued floats."""
    if fmt == "int32":
        return np.sum(np.stack(arrays).astype(np.int64), axis=0).astype(np.uint32).view(np.int32)
    return np.sum(np.stack(arrays).astype(np.float64), axis=0).astype(DTYPE[fmt])


# Split ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("grain", [1, 2, 3, 8])
def test_split_sizes(grain):
    for length in range(0, 70):
        for parts in (1, 2, 3, 4, 8, 16):
            expect = tuple(e - s for s, e in ref_split(length, parts, grain))
            assert split_sizes(length, parts, grain) == expect, (length, parts, grain)


# Reductions against plain numpy (order cannot matter) ----------------------------------------


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dims", PODS)
def test_ring_collectives_numpy(seed, dims, fmt):
    rng = np.random.default_rng(seed)
    nodes = dims[0] * dims[1]
    for dim in (0, 1):
        n = dims[dim]
        for length in lengths(n):
            buffers = random_buffers(rng, fmt, nodes, length, integers=True)
            reduced = all_reduce(buffers, dims, dim, fmt)
            scattered = reduce_scatter(buffers, dims, dim, fmt)
            blocks = ref_split(length, n, 1)
            for other in range(dims[1 - dim]):
                ring = ring_members(dims, dim, other)
                total = wrapping_sum(fmt, [buffers[m] for m in ring])
                for p, m in enumerate(ring):
                    assert same_bits(reduced[m], total), (dim, length, m)
                    start, stop = blocks[p]
                    assert same_bits(scattered[m], total[start:stop]), (dim, length, m)
            gathered = all_gather(scattered, dims, dim)
            assert all(same_bits(g, r) for g, r in zip(gathered, reduced, strict=True))


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dims", PODS)
def test_all_reduce_2d_numpy(seed, dims, fmt):
    rng = np.random.default_rng(seed)
    for length in lengths(dims[0] * dims[1]):
        buffers = random_buffers(rng, fmt, dims[0] * dims[1], length, integers=True)
        total = wrapping_sum(fmt, buffers)
        for out in all_reduce_2d(buffers, dims, fmt):
            assert same_bits(out, total), length


# Reduction order, fp32 and bfloat16 -----------------------------------------------------------


@pytest.mark.parametrize("fmt", ["fp32", "bfloat16"])
@pytest.mark.parametrize("grain", [1, 4])
@pytest.mark.parametrize("dims", [(1, 4), (2, 2), (4, 4), (3, 2), (1, 1)])
def test_ring_order(seed, dims, fmt, grain):
    rng = np.random.default_rng(seed)
    for dim in (0, 1):
        n = dims[dim]
        for length in lengths(n) + [300]:
            buffers = random_buffers(rng, fmt, dims[0] * dims[1], length)
            reduced = all_reduce(buffers, dims, dim, fmt, grain)
            scattered = reduce_scatter(buffers, dims, dim, fmt, grain)
            blocks = ref_split(length, n, grain)
            for other in range(dims[1 - dim]):
                ring = ring_members(dims, dim, other)
                expect = ref_ring_reduce(fmt, [buffers[m] for m in ring], grain)
                for p, m in enumerate(ring):
                    assert same_bits(reduced[m], expect), (dim, length, m)
                    assert same_bits(scattered[m], expect[slice(*blocks[p])]), (dim, length)


def test_order_matters(seed):
    """The order tests can fail: on these inputs another order of the adds (numpy's pairwise
    sum, here) gives different fp32 bits."""
    rng = np.random.default_rng(seed)
    buffers = random_buffers(rng, "fp32", 4, 1000)
    naive = np.sum(np.stack(buffers), axis=0, dtype=np.float32)
    assert not same_bits(all_reduce(buffers, (4, 1), 0, "fp32")[0], naive)


@pytest.mark.parametrize("fmt", ["fp32", "bfloat16"])
@pytest.mark.parametrize("dims", [(2, 2), (4, 4), (1, 4), (4, 1), (3, 2)])
def test_2d_order(seed, dims, fmt):
    rng = np.random.default_rng(seed)
    for length in (1, 7, 2 * dims[0] * dims[1] + 3, 64):
        buffers = random_buffers(rng, fmt, dims[0] * dims[1], length)
        expect = ref_2d(fmt, dims, buffers, 1)
        for out in all_reduce_2d(buffers, dims, fmt):
            assert same_bits(out, expect), length


def test_bfloat16_rounds_once():
    """bf16 sums keep fp32 partials: (2^-8 + 1) + 2^-8 is 1 + 2^-7 (representable), whereas
    rounding after every add would lose both small terms (1 + 2^-8 ties to 1)."""
    small = np.array([2.0 ** -8], dtype=ml_dtypes.bfloat16)
    one = np.array([1.0], dtype=ml_dtypes.bfloat16)
    # Ring of 3, the element in block 0's + half: positions 1, 2, 0 in that order.
    for out in all_reduce([small, small, one], (3, 1), 0, "bfloat16"):
        assert float(out[0]) == 1.0 + 2.0 ** -7


def test_nan_canonical_and_single_chip():
    """One chip: a reduction is the format's conversion of the input (fp32 NaN payloads made
    canonical); all-gather copies bits."""
    x = np.array([0x7FC00001, 0x3F800000], dtype=np.uint32).view(np.float32)
    out = all_reduce([x], (1, 1), 0, "fp32")[0]
    assert out.view(np.uint32).tolist() == [0x7FC00000, 0x3F800000]
    assert same_bits(all_gather([x], (1, 1), 0)[0], x)


# Schedules --------------------------------------------------------------------------------


def ring_neighbour(dims, src, dst, dim, direction):
    x, y = src % dims[0], src // dims[0]
    coords = [x, y]
    coords[dim] = (coords[dim] + direction) % dims[dim]
    return dst == node(dims, *coords)


@pytest.mark.parametrize("dims", [(4, 4), (2, 2), (1, 4), (3, 2)])
def test_schedule_steps(dims):
    """Every transfer goes one hop to a ring neighbour; within a step no chip sends elements
    it receives in the same step; each chip sends at most one piece per direction per step;
    ``final`` marks exactly the last reduce-scatter step."""
    for length in (1, 5, 37):
        for steps in (all_reduce_schedule(dims, 0, length), all_reduce_schedule(dims, 1, length),
                      all_reduce_2d_schedule(dims, length)):
            for step in steps:
                sent, received = set(), set()
                for t in step.transfers:
                    assert ring_neighbour(dims, t.src, t.dst, t.dim, t.direction)
                    assert (t.src, t.direction) not in sent
                    sent.add((t.src, t.direction))
                    received |= {(t.dst, e) for e in range(t.offset, t.offset + t.count)}
                for t in step.transfers:
                    assert not {(t.src, e) for e in range(t.offset, t.offset + t.count)} \
                        & received
        rs = reduce_scatter_schedule(dims, 0, length)
        assert len(rs) == dims[0] - 1
        assert all(t.final == (i == len(rs) - 1) for i, s in enumerate(rs) for t in s.transfers)


@pytest.mark.parametrize("dims", [(4, 4), (2, 2), (3, 2)])
def test_schedule_coverage(dims):
    """Reduce-scatter: every element reaches its owner exactly once, completed (final).
    All-gather: every chip receives every element it does not own exactly once."""
    for dim in (0, 1):
        n = dims[dim]
        length = 2 * n + 3
        blocks = ref_split(length, n, 1)
        final = {}
        for step in reduce_scatter_schedule(dims, dim, length):
            for t in step.transfers:
                if t.final:
                    for e in range(t.offset, t.offset + t.count):
                        final[(t.dst, e)] = final.get((t.dst, e), 0) + 1
        owned = {(m, e) for other in range(dims[1 - dim])
                 for p, m in enumerate(ring_members(dims, dim, other))
                 for e in range(*blocks[p])}
        assert final == dict.fromkeys(owned, 1)
        got = {}
        for step in all_gather_schedule(dims, dim, length):
            for t in step.transfers:
                for e in range(t.offset, t.offset + t.count):
                    got[(t.dst, e)] = got.get((t.dst, e), 0) + 1
        everything = {(m, e) for m in range(dims[0] * dims[1]) for e in range(length)}
        assert got == dict.fromkeys(everything - owned, 1)


# All-to-all -----------------------------------------------------------------------------


def skewed_sizes(rng, nodes):
    """Ragged sizes: heavy-tailed, a quarter zero, one chip sending nothing, one receiving
    nothing."""
    sizes = np.minimum(rng.zipf(1.5, (nodes, nodes)), 200)
    sizes[rng.random((nodes, nodes)) < 0.25] = 0
    sizes[rng.integers(nodes)] = 0
    sizes[:, rng.integers(nodes)] = 0
    return sizes


@pytest.mark.parametrize("dims", [(1, 4), (2, 2), (4, 4), (1, 1)])
def test_all_to_all(seed, dims):
    rng = np.random.default_rng(seed)
    nodes = dims[0] * dims[1]
    for sizes in (skewed_sizes(rng, nodes), np.zeros((nodes, nodes), dtype=int),
                  np.full((nodes, nodes), 3)):
        sends = [[rng.integers(-2**31, 2**31, sizes[s, d]).astype(np.int32)
                  for d in range(nodes)] for s in range(nodes)]
        received = all_to_all(sends, dims)
        for s in range(nodes):
            for d in range(nodes):
                assert same_bits(received[d][s], sends[s][d]), (s, d)
        for step in all_to_all_schedule(dims, sizes):
            dsts = [t.dst for t in step.transfers]
            assert len(dsts) == len(set(dsts))
            assert all(t.count > 0 for t in step.transfers)


# Bad arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize("call, name", [
    (lambda: all_reduce([np.zeros(4)] * 4, (2, 2), 0, "fp16"), "fmt"),
    (lambda: all_reduce([np.zeros(4)] * 4, (0, 4), 0, "fp32"), "dims[0]"),
    (lambda: all_reduce([np.zeros(4)] * 4, (2, 2, 1), 0, "fp32"), "dims"),
    (lambda: all_reduce([np.zeros(4)] * 4, (2, 2), 2, "fp32"), "dim"),
    (lambda: all_reduce([np.zeros(4)] * 3, (2, 2), 0, "fp32"), "buffers"),
    (lambda: all_reduce([np.zeros(4)] * 3 + [np.zeros(5)], (2, 2), 0, "fp32"), "buffers"),
    (lambda: all_reduce([np.zeros(4)] * 4, (2, 2), 0, "fp32", grain=0), "grain"),
    (lambda: all_gather([np.zeros(2), np.zeros(3)], (2, 1), 0), "shards"),
    (lambda: all_to_all_schedule((2, 1), [[1, -1], [0, 0]]), "sizes"),
    (lambda: all_to_all_schedule((2, 1), [[1, 1]]), "sizes"),
    (lambda: all_to_all([[np.zeros(1, np.int32)]], (2, 1)), "sends"),
    (lambda: split_sizes(-1, 2), "length"),
    (lambda: split_sizes(4, 0), "parts"),
    (lambda: Network((2, 2), 0, 2, 0, 8), "link_bw"),
    (lambda: Network((2, 2), -1, 2, 8, 8), "alpha"),
    (lambda: Network((0, 2), 0, 2, 8, 8), "dims"),
    (lambda: bus_factor("broadcast", 4), "op"),
    (lambda: payload_bw(64, 1, 64), "header_bits"),
])
def test_bad_arguments(call, name):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value).startswith(name + " "), str(info.value)


# Time model -------------------------------------------------------------------------------


def test_bus_factors():
    assert bus_factor("all-reduce", 4) == 1.5
    for op in ("reduce-scatter", "all-gather", "all-to-all"):
        assert bus_factor(op, 4) == 0.75
    assert busbw("all-reduce", 1000, 10, 8) == 100 * 2 * 7 / 8


@pytest.mark.parametrize("n", [2, 3, 4, 8])
def test_alpha_beta(n):
    """A ring all-reduce of a buffer divisible into 2n chunks of c elements: 2(n - 1) steps of
    alpha + one hop + c elements over one link, the two directions on separate links (n > 2)
    or one (n == 2)."""
    net = Network((n, 1), alpha=50, per_hop=2, link_bw=8, inject_bw=32)
    chunk = 96
    length = 2 * n * chunk
    share = 2 if n == 2 else 1
    step = 50 + 2 + share * chunk * 4 / 8
    assert schedule_time(net, all_reduce_schedule((n, 1), 0, length), "fp32") == \
        2 * (n - 1) * step
    # bfloat16: reduce-scatter partials are fp32 (4 bytes), the gather bf16 (2 bytes).
    assert schedule_time(net, all_reduce_schedule((n, 1), 0, length), "bfloat16") == \
        (n - 1) * step + (n - 1) * (52 + share * chunk * 2 / 8)


@pytest.mark.parametrize("n", [2, 4, 8])
def test_ring_bound(n):
    """Without alpha and hop latency, an evenly divisible buffer runs at the ring bound, and
    bus bandwidth equals the link bound: two links per chip (one when n == 2) for fp32 and
    int32; a bfloat16 all-reduce moves 4 + 2 bytes per 2-byte element."""
    net = Network((n, 1), alpha=0, per_hop=0, link_bw=8, inject_bw=64)
    links = 2 if n > 2 else 1
    length = 2 * n * 64
    for op, schedule in (("all-reduce", all_reduce_schedule),
                         ("reduce-scatter", reduce_scatter_schedule),
                         ("all-gather", all_gather_schedule)):
        t = schedule_time(net, schedule((n, 1), 0, length), "fp32")
        assert t == ring_bound(op, n, length * 4, "fp32", net)
        assert busbw(op, length * 4, t, n) == pytest.approx(links * 8)
        assert busbw_bound(op, n, "fp32", net) == pytest.approx(links * 8)
    assert busbw_bound("all-reduce", n, "bfloat16", net) == pytest.approx(links * 8 * 4 / 6)
    uneven = schedule_time(net, all_reduce_schedule((n, 1), 0, length + 1), "fp32")
    assert uneven > ring_bound("all-reduce", n, (length + 1) * 4, "fp32", net)


def test_injection_limits_ring():
    """A chip that injects only one link's worth cannot drive both ring directions."""
    net = Network((4, 1), alpha=0, per_hop=0, link_bw=8, inject_bw=8)
    assert busbw_bound("all-reduce", 4, "fp32", net) == pytest.approx(8)
    t = schedule_time(net, all_reduce_schedule((4, 1), 0, 8 * 64), "fp32")
    assert t == ring_bound("all-reduce", 4, 8 * 64 * 4, "fp32", net)


def test_2d_bound():
    """Evenly divisible 2-D all-reduce without latency: exactly the sum of its phases'
    bounds."""
    net = Network((4, 4), alpha=0, per_hop=0, link_bw=8, inject_bw=64)
    length = 4 * 8 * 4 * 8
    t = schedule_time(net, all_reduce_2d_schedule((4, 4), length), "int32")
    assert t == all_reduce_2d_bound(length * 4, "int32", net)
    assert t == 3 / 4 * length * 4 / 16 * 2 + 2 * 3 / 4 * length / 4 * 4 / 16


def test_routes():
    """Routes are dimension ordered and minimal; a tie goes + from an even coordinate."""
    dims = (4, 4)
    assert route(dims, 0, 1) == [(0, 0, 1)]
    assert route(dims, 0, 2) == [(0, 0, 1), (1, 0, 1)]
    assert route(dims, 1, 3) == [(1, 0, -1), (0, 0, -1)]
    assert route(dims, 0, 5) == [(0, 0, 1), (1, 1, 1)]
    assert route(dims, 0, 12) == [(0, 1, -1)]
    assert route((2, 1), 0, 1) == [(0, 0, 1)] and route((2, 1), 1, 0) == [(1, 0, -1)]


def test_all_to_all_bounds(seed):
    """Uniform all-to-all on a 4x4 torus of m bytes per pair: 8 x 8 x m bytes cross a cut of
    8 link directions; injection 15 m per chip. The schedule's time is no better."""
    net = Network((4, 4), alpha=0, per_hop=0, link_bw=8, inject_bw=16)
    m = 64
    sizes = np.full((16, 16), m // 4)
    assert bisection_bound(sizes, 4, net) == 8 * 8 * m / (8 * 8)
    assert all_to_all_bound(sizes, 4, net) == max(8 * 8 * m / 64, 15 * m / 16)
    rng = np.random.default_rng(seed)
    ragged = skewed_sizes(rng, 16)
    assert all_to_all_time(net, all_to_all_schedule((4, 4), ragged), "int32") >= \
        all_to_all_bound(ragged, 4, net)


def test_payload_bw():
    assert payload_bw(64, 8, 64) == 7 * 8 / 8
