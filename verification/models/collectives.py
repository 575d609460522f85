"""Golden model of the pod's collectives: what every chip holds after a reduce-scatter,
all-gather or all-reduce along one torus dimension, a 2-D all-reduce, or a ragged all-to-all,
bit-exactly, and the step-by-step schedule that produces it (docs/pod.md).

Written from the specification, not from any RTL. A pod is an X x Y torus of chips; chip
``(x, y)`` is node ``x + X * y`` (the ICI's numbering). A collective along dimension ``dim``
runs independently in every *ring*: the chips that share the other coordinate, at *positions*
``0 .. n - 1`` given by their coordinate along ``dim``.

Buffer split (ring collectives). A buffer of ``length`` elements is cut into ``n`` contiguous
*blocks*, block ``b`` being the part position ``b`` owns (its reduce-scatter result, its
all-gather contribution); every block is cut into two *halves*, the first travelling the + ring
(position p sends to p + 1), the second the - ring (p sends to p - 1). Both cuts follow
:func:`split_sizes`: whole *grains* of ``grain`` elements, as even as possible, the earlier
parts one grain larger, the last part possibly short. Half ``h`` of block ``b`` is the *piece*
``(b, h)``.

Reduction order. On the + ring the sum of piece ``(c, 0)`` starts at the owner's successor
``c + 1`` and runs round the ring, every chip adding its own contribution to the partial it
received: ``((x[c+1] + x[c+2]) + ...) + x[c]`` (positions mod n). On the - ring piece
``(c, 1)`` runs the other way: ``((x[c-1] + x[c-2]) + ...) + x[c]``. A 2-D all-reduce nests
the orders: each element's Y sum (in the Y ring's order) adds the X sums (in the X rings'
order) of the chips of its Y ring.

Formats (:data:`FORMATS`): ``int32`` adds wrap modulo 2^32; ``fp32`` adds are IEEE binary32,
round to nearest even, NaNs canonical (verification/models/fp.py); ``bfloat16`` inputs are
widened exactly to fp32, added in fp32 in the order above (the partials travel as fp32) and
rounded once to bfloat16 (nearest even) by the chip that completes the sum. Every output of a
reduction passes through that final conversion, even on a ring of one chip; all-gather and
all-to-all copy bits.
"""

from dataclasses import dataclass

import ml_dtypes
import numpy as np

from spec.config import ConfigError
from spec.topology import node_coords, node_index
from verification.models import fp

__all__ = ["Format", "FORMATS", "split_sizes", "rings", "pieces",
           "Transfer", "Step", "reduce_scatter_schedule", "all_gather_schedule",
           "all_reduce_schedule", "all_reduce_2d_schedule", "all_to_all_schedule",
           "reduce_scatter", "all_gather", "all_reduce", "all_reduce_2d", "all_to_all",
           "ring_collective", "add_bytes", "random_elements", "FP32_SPECIALS", "PLUS", "MINUS"]

PLUS, MINUS = 1, -1
"""Ring directions: + sends to the next coordinate, - to the previous one."""


@dataclass(frozen=True)
class Format:
    """An element format of the collectives: its numpy type, its size, the size of the
    partial sums that travel during a reduction, and the three steps of a reduction."""

    name: str
    dtype: type
    bytes: int
    partial_bytes: int

    def widen(self, values):
        """The accumulation-domain copy of ``values`` (int32, or fp32 bit patterns)."""
        values = np.asarray(values, dtype=self.dtype)
        if self.name == "int32":
            return values.copy()
        if self.name == "fp32":
            return values.view(np.uint32).copy()
        return fp.to_float32(values.view(np.uint16), "bfloat16").view(np.uint32)

    def add(self, a, b):
        """a + b in the accumulation domain (wrapping int32, or IEEE fp32)."""
        if self.name == "int32":
            return np.add(a, b, dtype=np.int32)
        return fp.add(a, b)

    def narrow(self, acc):
        """Results of the format from accumulation-domain values (fp32: NaN canonical;
        bfloat16: rounded to nearest even, NaN canonical)."""
        if self.name == "int32":
            return np.asarray(acc, dtype=np.int32).copy()
        if self.name == "fp32":
            return fp.canonical(acc).view(np.float32)
        return fp.to_bf16(acc).view(ml_dtypes.bfloat16)


FORMATS = {
    "int32": Format("int32", np.int32, 4, 4),
    "fp32": Format("fp32", np.float32, 4, 4),
    "bfloat16": Format("bfloat16", ml_dtypes.bfloat16, 2, 4),
}


def _format(fmt):
    if fmt not in FORMATS:
        raise ValueError(f"fmt must be one of {', '.join(FORMATS)}, got {fmt!r}")
    return FORMATS[fmt]


def _check_count(name, value, lo):
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < lo:
        raise ConfigError(name, f"must be an integer >= {lo}, got {value!r}")
    return int(value)


def _check_dims(dims):
    if not isinstance(dims, tuple | list) or len(dims) != 2:
        raise ConfigError("dims", f"must be (X, Y), got {dims!r}")
    for d, k in enumerate(dims):
        _check_count(f"dims[{d}]", k, 1)
    return tuple(int(k) for k in dims)


def _check_dim(dim):
    if dim not in (0, 1):
        raise ConfigError("dim", f"must be 0 (X) or 1 (Y), got {dim!r}")
    return dim


def split_sizes(length, parts, grain=1):
    """Sizes of ``parts`` contiguous parts of ``length`` elements, cut at multiples of
    ``grain``: the ``ceil(length / grain)`` grains are shared as evenly as possible, the first
    parts taking one grain more, and the part holding the last grain is short by the
    remainder. Parts past the data are empty."""
    length = _check_count("length", length, 0)
    parts = _check_count("parts", parts, 1)
    grain = _check_count("grain", grain, 1)
    grains = -(-length // grain)
    counts = [grains // parts + (i < grains % parts) for i in range(parts)]
    ends = np.minimum(np.cumsum(counts) * grain, length)
    return tuple(int(e - s) for s, e in zip(np.concatenate([[0], ends[:-1]]), ends, strict=True))


def _offsets(sizes, base=0):
    return tuple(base + int(s) for s in np.concatenate([[0], np.cumsum(sizes)[:-1]]))


def pieces(length, n, grain=1, base=0):
    """``[b][h] -> (offset, count)`` of half ``h`` (0: + ring, 1: - ring) of block ``b`` of a
    buffer of ``length`` elements starting at element ``base``, split for a ring of ``n``."""
    blocks = split_sizes(length, n, grain)
    out = []
    for offset, size in zip(_offsets(blocks, base), blocks, strict=True):
        halves = split_sizes(size, 2, grain)
        out.append(tuple(zip(_offsets(halves, offset), halves, strict=True)))
    return out


def rings(dims, dim):
    """The rings along ``dim``: one tuple of nodes per value of the other coordinate (in
    increasing order), each listing its chips by position."""
    dims, dim = _check_dims(dims), _check_dim(dim)
    other = dims[1 - dim]
    if dim == 0:
        return [tuple(node_index(dims, (x, o)) for x in range(dims[0])) for o in range(other)]
    return [tuple(node_index(dims, (o, y)) for y in range(dims[1])) for o in range(other)]


@dataclass(frozen=True)
class Transfer:
    """One message of a schedule: ``count`` elements at ``offset`` of ``src``'s buffer go to
    the same place in ``dst``'s, one hop in ``direction`` along ``dim`` (ring collectives), or
    ``hops`` hops through the network (all-to-all, ``dim`` None). ``reduce``: the receiver adds
    what arrives to its own elements; ``final``: that add completes the sum, so the receiver
    stores the format's result (bfloat16: rounded); ``partial``: the elements travel as
    partial sums (fp32 for bfloat16) rather than in the format. For all-to-all, ``dst_offset``
    is where the elements land in the receiver's output."""

    src: int
    dst: int
    offset: int
    count: int
    dim: int | None = None
    direction: int = PLUS
    hops: int = 1
    reduce: bool = False
    final: bool = False
    partial: bool = False
    dst_offset: int | None = None


@dataclass(frozen=True)
class Step:
    """A step of a schedule: every chip sends its transfers of the step at once and may start
    the next step only when all the transfers it receives in this one have arrived. ``phase``
    names the collective the step belongs to (``reduce-scatter``, ``all-gather``, ...)."""

    phase: str
    dim: int | None
    transfers: tuple


def _ring_phase_steps(dims, dim, segment, grain, phase, reduce, final):
    """The n - 1 steps of a reduce-scatter (``reduce``) or all-gather along ``dim`` on every
    ring, each ring working on its ``segment(ring index) = (offset, length)`` of the buffer.

    Step s, position p: on the + ring p sends piece (p - s - 1, 0) (reduce-scatter) or
    (p - s, 0) (all-gather) to p + 1; on the - ring (p + s + 1, 1) or (p + s, 1) to p - 1.
    Empty pieces send nothing."""
    n = dims[dim]
    lag = 1 if reduce else 0
    layouts = [(ring, pieces(segment(index)[1], n, grain, segment(index)[0]))
               for index, ring in enumerate(rings(dims, dim))]
    steps = []
    for s in range(n - 1):
        transfers = []
        for ring, layout in layouts:
            for p, node in enumerate(ring):
                for half, direction in ((0, PLUS), (1, MINUS)):
                    offset, count = layout[(p - direction * (s + lag)) % n][half]
                    if count:
                        transfers.append(Transfer(
                            node, ring[(p + direction) % n], offset, count, dim, direction,
                            reduce=reduce, final=reduce and final and s == n - 2,
                            partial=reduce))
        steps.append(Step(phase, dim, tuple(transfers)))
    return steps


def _whole(length):
    return lambda index: (0, length)


def reduce_scatter_schedule(dims, dim, length, grain=1, final=True):
    """Steps of a bidirectional ring reduce-scatter along ``dim`` of buffers of ``length``
    elements; position p ends with the sums of block p. ``final`` False leaves them as partial
    sums (the first phase of a 2-D all-reduce)."""
    dims, dim = _check_dims(dims), _check_dim(dim)
    return _ring_phase_steps(dims, dim, _whole(_check_count("length", length, 0)), grain,
                             "reduce-scatter", True, final)


def all_gather_schedule(dims, dim, length, grain=1):
    """Steps of a bidirectional ring all-gather along ``dim``: position p contributes block p
    of a buffer of ``length`` elements; every chip ends with all blocks."""
    dims, dim = _check_dims(dims), _check_dim(dim)
    return _ring_phase_steps(dims, dim, _whole(_check_count("length", length, 0)), grain,
                             "all-gather", False, False)


def all_reduce_schedule(dims, dim, length, grain=1):
    """Steps of a ring all-reduce along ``dim``: a reduce-scatter, then an all-gather of the
    reduced blocks (2(n - 1) steps)."""
    return (reduce_scatter_schedule(dims, dim, length, grain)
            + all_gather_schedule(dims, dim, length, grain))


def all_reduce_2d_schedule(dims, length, grain=1):
    """Steps of the 2-D all-reduce: reduce-scatter along X (its sums rounded to the format:
    bfloat16 X sums are rounded before the Y ring adds them, as a chip holds its X block in
    the buffer's format), an all-reduce along Y of each chip's X block (every Y ring works on
    the block its X position owns), then an all-gather along X."""
    dims = _check_dims(dims)
    length = _check_count("length", length, 0)
    xblocks = split_sizes(length, dims[0], grain)
    xoffsets = _offsets(xblocks)

    def xblock(x):
        return xoffsets[x], xblocks[x]

    return (_ring_phase_steps(dims, 0, _whole(length), grain, "reduce-scatter", True, True)
            + _ring_phase_steps(dims, 1, xblock, grain, "reduce-scatter", True, True)
            + _ring_phase_steps(dims, 1, xblock, grain, "all-gather", False, False)
            + _ring_phase_steps(dims, 0, _whole(length), grain, "all-gather", False, False))


def _torus_hops(dims, a, b):
    return sum(min(abs(p - q), k - abs(p - q))
               for k, p, q in zip(dims, node_coords(dims, a), node_coords(dims, b), strict=True))


def _check_sizes(dims, sizes):
    nodes = dims[0] * dims[1]
    sizes = np.asarray(sizes)
    if sizes.shape != (nodes, nodes) or not np.issubdtype(sizes.dtype, np.integer):
        raise ConfigError("sizes", f"must be a {nodes} x {nodes} matrix of integers "
                                   f"(sizes[src][dst]), got shape {sizes.shape}")
    if (sizes < 0).any():
        raise ConfigError("sizes", "must be >= 0 everywhere")
    return sizes.astype(np.int64)


def all_to_all_schedule(dims, sizes):
    """Steps of a ragged all-to-all among the N = X * Y chips: ``sizes[src][dst]`` elements
    go from src to dst. Source buffers hold their messages in destination order, outputs their
    messages in source order. Step s (0 .. N - 1) = sx + X * sy moves every chip's message by
    (sx, sy) on the torus: from (x, y) to ((x + sx) mod X, (y + sy) mod Y) (step 0 the chip's
    own, a local copy), so every step is a translation: a permutation that loads the links of
    a dimension evenly. The steps order each chip's messages; they are not barriers (the
    engine issues them back to back). Zero-sized messages are left out."""
    dims = _check_dims(dims)
    sizes = _check_sizes(dims, sizes)
    nodes = len(sizes)
    steps = []
    for s in range(nodes):
        transfers = []
        for src in range(nodes):
            x, y = node_coords(dims, src)
            dst = node_index(dims, ((x + s % dims[0]) % dims[0], (y + s // dims[0]) % dims[1]))
            count = int(sizes[src, dst])
            if count:
                transfers.append(Transfer(
                    src, dst, int(sizes[src, :dst].sum()), count, None,
                    hops=_torus_hops(dims, src, dst), dst_offset=int(sizes[:src, dst].sum())))
        steps.append(Step("all-to-all", None, tuple(transfers)))
    return steps


def _buffers(dims, buffers, dtype):
    nodes = dims[0] * dims[1]
    if len(buffers) != nodes:
        raise ConfigError("buffers", f"must hold one buffer per chip ({nodes}), "
                                     f"got {len(buffers)}")
    arrays = [np.asarray(b, dtype=dtype) for b in buffers]
    if any(a.ndim != 1 for a in arrays) or len({len(a) for a in arrays}) != 1:
        raise ConfigError("buffers", "must be one-dimensional and all of one length")
    return arrays


def _execute(state, steps, fmt):
    """Run ``steps`` on the chips' buffers ``state`` (accumulation domain for reductions),
    in place: within a step every chip sends what it held at the start of the step."""
    for step in steps:
        sent = [state[t.src][t.offset:t.offset + t.count].copy() for t in step.transfers]
        for t, values in zip(step.transfers, sent, strict=True):
            window = slice(t.offset, t.offset + t.count)
            if t.reduce:
                values = fmt.add(values, state[t.dst][window])
            if t.final:
                values = fmt.widen(fmt.narrow(values))
            state[t.dst][window] = values


def _reduction(dims, buffers, fmt, steps):
    fmt = _format(fmt)
    state = [fmt.widen(b) for b in _buffers(dims, buffers, fmt.dtype)]
    _execute(state, steps, fmt)
    return [fmt.narrow(s) for s in state]


def _owned(dims, dim, outputs, length, grain):
    blocks = split_sizes(length, dims[dim], grain)
    offsets = _offsets(blocks)
    position = [node_coords(dims, node)[dim] for node in range(len(outputs))]
    return [out[offsets[p]:offsets[p] + blocks[p]] for out, p in zip(outputs, position,
                                                                     strict=True)]


def reduce_scatter(buffers, dims, dim, fmt, grain=1):
    """Every chip's block of the sum of its ring's buffers (``buffers[node]``, all of one
    length, of ``fmt``): position p gets block p, summed in the ring order."""
    dims, dim = _check_dims(dims), _check_dim(dim)
    length = len(_buffers(dims, buffers, _format(fmt).dtype)[0])
    outputs = _reduction(dims, buffers, fmt, reduce_scatter_schedule(dims, dim, length, grain))
    return _owned(dims, dim, outputs, length, grain)


def all_gather(shards, dims, dim, grain=1):
    """Every chip's concatenation of its ring's shards in position order: ``shards[node]`` is
    the block its position owns of a buffer of the shards' total length (the sizes
    :func:`split_sizes` gives); bits are copied."""
    dims, dim = _check_dims(dims), _check_dim(dim)
    shards = [np.asarray(s) for s in shards]
    if len(shards) != dims[0] * dims[1]:
        raise ConfigError("shards", f"must hold one shard per chip ({dims[0] * dims[1]}), "
                                    f"got {len(shards)}")
    length = sum(len(shards[node]) for node in rings(dims, dim)[0])
    blocks = split_sizes(length, dims[dim], grain)
    for ring in rings(dims, dim):
        if tuple(len(shards[node]) for node in ring) != blocks:
            raise ConfigError("shards", f"must have the sizes {blocks} in every ring "
                                        f"(split_sizes of the total, in position order)")
    offsets = _offsets(blocks)
    state = []
    for node, shard in enumerate(shards):
        buffer = np.zeros(length, dtype=shard.dtype)
        start = offsets[node_coords(dims, node)[dim]]
        buffer[start:start + len(shard)] = shard
        state.append(buffer)
    _execute(state, all_gather_schedule(dims, dim, length, grain), None)
    return state


def all_reduce(buffers, dims, dim, fmt, grain=1):
    """Every chip's sum of its ring's buffers along ``dim``, in the ring order."""
    dims, dim = _check_dims(dims), _check_dim(dim)
    length = len(_buffers(dims, buffers, _format(fmt).dtype)[0])
    return _reduction(dims, buffers, fmt, all_reduce_schedule(dims, dim, length, grain))


def all_reduce_2d(buffers, dims, fmt, grain=1):
    """Every chip's sum of all the pod's buffers: X sums (X ring order) added in Y ring
    order."""
    dims = _check_dims(dims)
    length = len(_buffers(dims, buffers, _format(fmt).dtype)[0])
    return _reduction(dims, buffers, fmt, all_reduce_2d_schedule(dims, length, grain))


def all_to_all(sends, dims):
    """Ragged all-to-all: ``sends[src][dst]`` (any length, zero included) arrives at dst;
    returns ``received[dst][src]`` (bits copied)."""
    dims = _check_dims(dims)
    nodes = dims[0] * dims[1]
    if len(sends) != nodes or any(len(row) != nodes for row in sends):
        raise ConfigError("sends", f"must be a {nodes} x {nodes} table of arrays "
                                   f"(sends[src][dst])")
    messages = [[np.asarray(m) for m in row] for row in sends]
    dtype = messages[0][0].dtype
    if any(m.ndim != 1 or m.dtype != dtype for row in messages for m in row):
        raise ConfigError("sends", f"must all be one-dimensional arrays of one dtype ({dtype})")
    sizes = np.array([[len(m) for m in row] for row in messages], dtype=np.int64)
    inputs = [np.concatenate(row) for row in messages]
    outputs = [np.zeros(int(sizes[:, dst].sum()), dtype=dtype)
               for dst in range(nodes)]
    for step in all_to_all_schedule(dims, sizes):
        for t in step.transfers:
            outputs[t.dst][t.dst_offset:t.dst_offset + t.count] = \
                inputs[t.src][t.offset:t.offset + t.count]
    starts = [_offsets(sizes[:, dst]) for dst in range(nodes)]
    return [[outputs[dst][starts[dst][src]:starts[dst][src] + sizes[src, dst]]
             for src in range(nodes)] for dst in range(nodes)]


def ring_collective(op, fmt, dims, dim, length, grain, buffers):
    """What every chip's buffer holds after collective ``op`` (``reduce_scatter``,
    ``all_gather`` or ``all_reduce`` along ``dim``, or ``all_reduce_2d``, ``dim`` unused) of
    ``fmt``, each chip starting with the
    little-endian bytes ``buffers[node]`` of ``length`` elements (for an all-gather, only its
    own block counts): per node, ``(element offset, bytes)`` of the part the collective
    defines (a reduce-scatter: the node's own block; otherwise the whole buffer)."""
    dtype = _format(fmt).dtype
    raw = np.uint16 if _format(fmt).bytes == 2 else np.uint32
    arrays = [np.frombuffer(b, dtype=raw).view(dtype) for b in buffers]
    blocks = split_sizes(length, dims[dim], grain)
    starts = _offsets(blocks)
    positions = [node_coords(dims, node)[dim] for node in range(len(buffers))]
    if op == "reduce_scatter":
        out = reduce_scatter(arrays, dims, dim, fmt, grain)
        return [(int(starts[p]), np.asarray(o).view(raw).tobytes())
                for o, p in zip(out, positions, strict=True)]
    if op == "all_reduce":
        out = all_reduce(arrays, dims, dim, fmt, grain)
    elif op == "all_reduce_2d":
        out = all_reduce_2d(arrays, dims, fmt, grain)
    elif op == "all_gather":
        out = all_gather([a[starts[p]:starts[p] + blocks[p]]
                          for a, p in zip(arrays, positions, strict=True)], dims, dim, grain)
    else:
        raise ConfigError("op", f"must be one of reduce_scatter, all_gather, all_reduce, "
                                f"all_reduce_2d, got {op!r}")
    return [(0, np.asarray(o).view(raw).tobytes()) for o in out]


FP32_SPECIALS = [0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001,
                 0xFFFFFFFF, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF]
"""fp32 values every reduction test mixes in: zeros, infinities, NaNs, subnormals, extremes."""


def random_elements(rng, fmt, count):
    """``count`` random int32, fp32 or bfloat16 elements (``rng`` a ``random.Random``) as
    little-endian bytes; fp32 mixes :data:`FP32_SPECIALS`, subnormals and values of nearby
    exponents (cancellation, rounding ties); bfloat16 the upper halves of such fp32 values."""
    if fmt == "bfloat16":
        words = np.frombuffer(random_elements(rng, "fp32", count), dtype=np.uint32)
        return (words >> 16).astype(np.uint16).tobytes()
    words = []
    for _ in range(count):
        pick = rng.random()
        if fmt == "int32" or pick < 0.3:
            words.append(rng.getrandbits(32))
        elif pick < 0.5:
            words.append(rng.choice(FP32_SPECIALS))
        elif pick < 0.6:
            words.append(rng.getrandbits(1) << 31 | rng.getrandbits(23))
        else:
            words.append(rng.getrandbits(1) << 31 | rng.randint(120, 130) << 23
                         | rng.getrandbits(23))
    return np.array(words, dtype=np.uint32).tobytes()


def add_bytes(fmt, arriving, present):
    """One add of the reductions on little-endian bytes (int32 or fp32 elements): the
    arriving partial + the destination's elements, as bytes."""
    fmt = _format(fmt)
    a = np.frombuffer(arriving, dtype=np.uint32).view(fmt.dtype)
    b = np.frombuffer(present, dtype=np.uint32).view(fmt.dtype)
    return np.asarray(fmt.add(fmt.widen(a), fmt.widen(b))).astype(np.uint32).tobytes()
