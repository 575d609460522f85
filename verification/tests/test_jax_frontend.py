"""The JAX front end (podium/jax, docs/jax.md) on the golden ISA simulator: every supported
primitive lowered and run against jax on CPU (hypothesis over small shapes, derandomized,
shapes that leave padding in rows and lanes and span several chunks), within the documented
tolerances; unsupported primitives and shapes refused with the primitive and the user's
source line; ``scan`` carrying values across steps; the command line; the digits MLP
trained from scratch on the golden simulator (>= 95% test accuracy, every step's loss within
the documented tolerance of jax in fp32); and a few training steps on the RTL chip, bit-exact
with the golden simulator."""

import inspect
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from podium.jax import Unsupported, compile_fn, jit, pod_scan, scan
from podium.jax import digits as jd

EPS = 2.0 ** -23

ELEMENTWISE = {
    # name: (function, input kind, tolerance on |y - ref| / max(1, |ref|); 0: exact)
    "add": (lambda x, y: x + y, "normal", 0),
    "sub": (lambda x, y: x - y, "normal", 0),
    "mul": (lambda x, y: x * y, "normal", 0),
    "max": (jnp.maximum, "normal", 0),
    "min": (jnp.minimum, "normal", 0),
    "add_scalar": (lambda x, y: x + 1.5, "normal", 0),
    "rsub_scalar": (lambda x, y: 2.0 - x, "normal", 0),
    "neg": (lambda x, y: -x, "normal", 0),
    "abs": (lambda x, y: jnp.abs(x), "normal", 0),
    "div": (lambda x, y: x / y, "divisor", 1e-6),
    "div_scalar": (lambda x, y: x / 3.0, "normal", 1e-6),
    "rdiv_scalar": (lambda x, y: 2.0 / y, "divisor", 1e-6),
    "exp": (lambda x, y: jnp.exp(x), "normal", 1e-6),
    "log": (lambda x, y: jnp.log(y), "positive", 1e-6),
    "tanh": (lambda x, y: jnp.tanh(x), "normal", 1e-6),
    "logistic": (lambda x, y: jax.nn.sigmoid(x), "normal", 1e-6),
    "rsqrt": (lambda x, y: jax.lax.rsqrt(y), "positive", 1e-6),
    "sqrt": (lambda x, y: jnp.sqrt(y), "positive", 1e-6),
    "integer_pow": (lambda x, y: x ** 3, "normal", 1e-6),
    "integer_pow_neg": (lambda x, y: y ** -2, "positive", 1e-6),
    "square": (lambda x, y: jnp.square(x), "normal", 0),
    "gt": (lambda x, y: (x > y).astype(jnp.float32), "normal", 0),
    "lt": (lambda x, y: (x < 0.25).astype(jnp.float32), "normal", 0),
    "ge": (lambda x, y: (x >= y).astype(jnp.float32), "ties", 0),
    "le": (lambda x, y: (x <= y).astype(jnp.float32), "ties", 0),
    "eq": (lambda x, y: (x == y).astype(jnp.float32), "ties", 0),
    "ne": (lambda x, y: (x != y).astype(jnp.float32), "ties", 0),
    "select_n": (lambda x, y: jnp.where(x > y, x, 2 * y), "normal", 0),
    "and_or_not_xor": (lambda x, y: jnp.where(((x > 0) & (y > 0)) | ~(x > y) ^ (y < 1), x, y),
                       "normal", 0),
    "relu": (lambda x, y: jax.nn.relu(x), "normal", 0),
    "convert_bf16": (lambda x, y: x.astype(jnp.bfloat16).astype(jnp.float32), "normal", 0),
    "stop_gradient": (lambda x, y: jax.lax.stop_gradient(x) + y, "normal", 0),
}

STRUCTURAL = {
    # name: (function of x (m, n), tolerance kind)
    "reduce_sum_1": (lambda x: jnp.sum(x, axis=1), "sum"),
    "reduce_sum_0": (lambda x: jnp.sum(x, axis=0), "sum"),
    "reduce_sum_all": (lambda x: jnp.sum(x), "sum"),
    "reduce_max_1": (lambda x: jnp.max(x, axis=1), "exact"),
    "reduce_max_0": (lambda x: jnp.max(x, axis=0), "exact"),
    "reduce_max_all": (lambda x: jnp.max(x), "exact"),
    "argmax_1": (lambda x: jnp.argmax(x, axis=1), "exact"),
    "argmax_0": (lambda x: jnp.argmax(x, axis=0), "exact"),
    "argmin_1": (lambda x: jnp.argmin(x, axis=1), "exact"),
    "reduce_min_0": (lambda x: jnp.min(x, axis=0), "exact"),
    "reduce_min_all": (lambda x: jnp.min(x), "exact"),
    "transpose": (lambda x: x.T, "exact"),
    "broadcast_row": (lambda x: x + jnp.max(x, axis=0), "exact"),
    "broadcast_col": (lambda x: x * jnp.sum(x, axis=1, keepdims=True), "sum"),
    "broadcast_scalar": (lambda x: x - jnp.max(x), "exact"),
    "reshape_col": (lambda x: jnp.sum(x, axis=1).reshape(-1, 1)
                    * jnp.max(x, axis=1, keepdims=True), "product"),
    "expand_squeeze": (lambda x: jnp.squeeze(jnp.expand_dims(jnp.max(x, axis=0), 0), 0),
                       "exact"),
    "vector_orientation": (lambda x: jnp.max(x, axis=0) + jnp.max(x.T, axis=1), "exact"),
    "iota": (lambda x: x + jnp.arange(x.shape[1], dtype=jnp.float32), "exact"),
    "log_softmax": (lambda x: jax.nn.log_softmax(x), "softmax"),
}


def _inputs(kind, shape, rng):
    x = (rng.standard_normal(shape) * 2).astype(np.float32)
    y = (rng.standard_normal(shape) * 2).astype(np.float32)
    if kind == "divisor":
        y = (np.sign(y) * (np.abs(y) + 0.25)).astype(np.float32)
    elif kind == "positive":
        y = (np.abs(y) + 0.05).astype(np.float32)
    elif kind == "ties":
        y = np.where(rng.random(shape) < 0.5, x, y).astype(np.float32)
    return x, y


def _rel(y, ref):
    y, ref = np.asarray(y, np.float64), np.asarray(ref, np.float64)
    return float(np.max(np.abs(y - ref) / np.maximum(1, np.abs(ref)), initial=0))


SHAPES = st.sampled_from([(1, 1), (1, 7), (5, 1), (3, 16), (16, 16), (17, 33), (40, 20),
                          (33, 5), (7,), (20,), ()])


@pytest.mark.parametrize("name", list(ELEMENTWISE))
@settings(max_examples=4, deadline=None)
@given(shape=SHAPES, seed=st.integers(0, 2 ** 16))
def test_elementwise(name, shape, seed):
    fn, kind, tol = ELEMENTWISE[name]
    print(f"seed {seed} shape {shape}")
    x, y = _inputs(kind, shape, np.random.default_rng(seed))
    out, counters = jit(fn)(x, y)
    ref = np.asarray(fn(x, y))
    assert out.shape == ref.shape and out.dtype == ref.dtype
    assert counters["retired"] > 0
    if tol == 0:
        assert np.array_equal(out, ref), (out, ref)
    else:
        assert _rel(out, ref) <= tol


@pytest.mark.parametrize("name", list(STRUCTURAL))
@settings(max_examples=4, deadline=None)
@given(shape=st.sampled_from([(1, 1), (1, 9), (6, 1), (16, 16), (17, 33), (40, 20), (3, 50)]),
       seed=st.integers(0, 2 ** 16))
def test_structural(name, shape, seed):
    fn, kind = STRUCTURAL[name]
    print(f"seed {seed} shape {shape}")
    x = (np.random.default_rng(seed).standard_normal(shape) * 2).astype(np.float32)
    out, _ = jit(fn)(x)
    _check(out, np.asarray(fn(x)), kind, x, shape, rel=1e-5)


def _check(out, ref, kind, x, shape, rel):
    """``out`` against jax's ``ref``: bit-exact, within the roundings of a sum (or a sum of
    products) of ``x`` in any order, or within ``rel``."""
    assert out.shape == ref.shape and out.dtype == ref.dtype
    if kind == "exact":
        assert np.array_equal(out, ref)
    elif kind in ("sum", "product"):
        # any summation order: n roundings of at most sum |x| (times max |x|) each
        scale = np.max(np.abs(x)) if kind == "product" else 1.0
        bound = 2 * EPS * max(shape) * np.sum(np.abs(x)) * scale + 1e-30
        assert np.max(np.abs(out.astype(np.float64) - ref)) <= bound
    else:
        assert _rel(out, ref) <= rel


DOTS = {
    # name: (function, lhs shape, rhs shape) in terms of (m, k, n)
    "nn": (lambda a, b: a @ b, lambda m, k, n: ((m, k), (k, n))),
    "tn": (lambda a, b: a.T @ b, lambda m, k, n: ((k, m), (k, n))),
    "nt": (lambda a, b: a @ b.T, lambda m, k, n: ((m, k), (n, k))),
    "tt": (lambda a, b: a.T @ b.T, lambda m, k, n: ((k, m), (n, k))),
    "matvec": (lambda a, b: a @ b, lambda m, k, n: ((m, k), (k,))),
    "vecmat": (lambda a, b: a @ b, lambda m, k, n: ((k,), (k, n))),
    "dot": (lambda a, b: a @ b, lambda m, k, n: ((k,), (k,))),
}


def _bf16(a):
    return np.asarray(jnp.asarray(a).astype(jnp.bfloat16).astype(jnp.float32), np.float64)


@pytest.mark.parametrize("name", list(DOTS))
@settings(max_examples=4, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 40), n=st.integers(1, 40),
       seed=st.integers(0, 2 ** 16))
def test_dot_general(name, m, k, n, seed):
    """bfloat16 operands (rounded to nearest even), fp32 sums: against the float64 product
    of the rounded operands within k fp32 roundings, against jax's fp32 within the
    documented 2^-7 (|A| @ |B|)."""
    fn, shapes = DOTS[name]
    print(f"seed {seed} m {m} k {k} n {n}")
    rng = np.random.default_rng(seed)
    sa, sb = shapes(m, k, n)
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    out, counters = jit(fn)(a, b)
    exact = fn(_bf16(a), _bf16(b))
    scale = fn(np.abs(_bf16(a)), np.abs(_bf16(b)))
    assert np.all(np.abs(out - exact) <= (k + 1) * EPS * scale + 1e-30)
    ref = np.asarray(fn(jnp.asarray(a), jnp.asarray(b)))
    assert np.all(np.abs(out - ref) <= 2.0 ** -7 * fn(np.abs(a), np.abs(b)) + 1e-30)


RANK3 = {
    # name: (function of x (b, m, n) and y (b, m, n), tolerance kind)
    "elementwise": (lambda x, y: x * y + jnp.exp(x) - 1.5, "fn"),
    "compare_select": (lambda x, y: jnp.where(x > y, x, 2 * y), "exact"),
    "rank2_to_rank3": (lambda x, y: x * jnp.max(y, axis=0), "exact"),
    "row_to_rank3": (lambda x, y: x - jnp.max(y, axis=(0, 1)), "exact"),
    "reduce_max_2_keepdims": (lambda x, y: x - jnp.max(x, axis=2, keepdims=True), "exact"),
    "reduce_sum_2": (lambda x, y: jnp.sum(x, axis=2), "sum"),
    "reduce_sum_0": (lambda x, y: jnp.sum(x, axis=0), "sum"),
    "reduce_max_0": (lambda x, y: jnp.max(x, axis=0), "exact"),
    "reduce_min_1": (lambda x, y: jnp.min(x, axis=1), "exact"),
    "reduce_sum_all": (lambda x, y: jnp.sum(x), "sum"),
    "transpose": (lambda x, y: jnp.swapaxes(x, 1, 2) * 2, "exact"),
    "reshape_merge": (lambda x, y: x.reshape(-1, x.shape[2]) + 1, "exact"),
    "reshape_split": (lambda x, y: (x.reshape(-1, x.shape[2]) * 2).reshape(x.shape), "exact"),
    "softmax": (lambda x, y: jax.nn.softmax(x, axis=-1), "fn"),
}


@pytest.mark.parametrize("name", list(RANK3))
@settings(max_examples=3, deadline=None)
@given(shape=st.sampled_from([(1, 1, 1), (2, 5, 7), (3, 17, 4), (2, 6, 33), (4, 3, 16)]),
       seed=st.integers(0, 2 ** 16))
def test_rank3(name, shape, seed):
    """Rank-3 values (slabs of the leading axis): elementwise operations, broadcasts from
    rank 2 and 1, reductions over the last, the middle, the leading and every axis,
    transposes of the last two axes, reshapes merging and splitting the leading axis."""
    fn, kind = RANK3[name]
    print(f"seed {seed} shape {shape}")
    rng = np.random.default_rng(seed)
    x, y = [(rng.standard_normal(shape) * 2).astype(np.float32) for _ in range(2)]
    out, _ = jit(fn)(x, y)
    _check(out, np.asarray(fn(x, y)), kind, x, shape, rel=1e-6)


BATCHED = {
    # einsum: (lhs, rhs) shapes of (b, m, k, n)
    "bqd,bkd->bqk": lambda b, m, k, n: ((b, m, k), (b, n, k)),
    "bqk,bkd->bqd": lambda b, m, k, n: ((b, m, k), (b, k, n)),
    "bkq,bkd->bqd": lambda b, m, k, n: ((b, k, m), (b, k, n)),
    "bkq,bdk->bqd": lambda b, m, k, n: ((b, k, m), (b, n, k)),
}


@pytest.mark.parametrize("spec", list(BATCHED))
@settings(max_examples=3, deadline=None)
@given(b=st.integers(1, 3), m=st.integers(1, 20), k=st.integers(1, 20), n=st.integers(1, 20),
       seed=st.integers(0, 2 ** 16))
def test_dot_general_batched(spec, b, m, k, n, seed):
    """dot_general with batch dimension 0 (either operand transposed): each slab the MXU
    rule, as test_dot_general."""
    print(f"seed {seed} b {b} m {m} k {k} n {n}")
    rng = np.random.default_rng(seed)
    sa, sb = BATCHED[spec](b, m, k, n)
    a = rng.standard_normal(sa).astype(np.float32)
    c = rng.standard_normal(sb).astype(np.float32)

    def fn(x, y):
        return jnp.einsum(spec, x, y)
    out, _ = jit(fn)(a, c)
    exact = np.einsum(spec, _bf16(a), _bf16(c))
    scale = np.einsum(spec, np.abs(_bf16(a)), np.abs(_bf16(c)))
    assert out.shape == exact.shape
    assert np.all(np.abs(out - exact) <= (k + 1) * EPS * scale + 1e-30)
    ref = np.asarray(fn(jnp.asarray(a), jnp.asarray(c)))
    assert np.all(np.abs(out - ref) <= 2.0 ** -7 * np.einsum(spec, np.abs(a), np.abs(c))
                  + 1e-30)


def _attention(q, k, v):
    s = jnp.einsum("bqd,bkd->bqk", q, k) / np.sqrt(q.shape[-1]).astype(np.float32)
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(s, axis=-1), v)


def _attention_grads(q, k, v):
    return jax.grad(lambda q, k, v: jnp.sum(_attention(q, k, v) * v),
                    argnums=(0, 1, 2))(q, k, v)


def _bf16_operands(fn, *args):
    """``fn`` evaluated by jax with every dot_general's operands rounded to bfloat16 (the
    MXU rule), everything else in fp32."""
    from jax.extend.core import ClosedJaxpr, Literal

    def run(jaxpr, consts, vals):
        env = dict(zip(jaxpr.constvars, consts, strict=True))
        env.update(zip(jaxpr.invars, vals, strict=True))

        def read(a):
            return a.val if isinstance(a, Literal) else env[a]
        for e in jaxpr.eqns:
            ins = [read(a) for a in e.invars]
            sub = next((e.params[key] for key in ("jaxpr", "call_jaxpr")
                        if isinstance(e.params.get(key), ClosedJaxpr)), None)
            if sub is not None:
                outs = run(sub.jaxpr, sub.consts, ins[len(ins) - len(sub.jaxpr.invars):])
            else:
                if e.primitive.name == "dot_general":
                    ins = [jnp.asarray(x).astype(jnp.bfloat16).astype(jnp.float32)
                           for x in ins]
                outs = e.primitive.bind(*ins, **e.params)
                outs = outs if e.primitive.multiple_results else [outs]
            env.update(zip(e.outvars, outs, strict=True))
        return [np.asarray(read(a)) for a in jaxpr.outvars]
    closed = jax.make_jaxpr(fn)(*args)
    return run(closed.jaxpr, closed.consts, args)


@pytest.mark.parametrize("heads,seq,d", [(1, 7, 16), (4, 17, 8), (3, 20, 33)])
@pytest.mark.parametrize("what", ["forward", "grad"])
def test_attention_on_golden(heads, seq, d, what, seed):
    """softmax(Q K^T / sqrt(d)) V over heads (one, and several: the leading axis) and its
    jax.grad with respect to Q, K and V, on the golden simulator: within 2^-5 max |y| of
    jax in fp32 (the bfloat16 operands; jax with them measured up to 1.28 x 2^-7 over 40
    seeds of these shapes), and against jax with
    the same bfloat16 operands within 1e-5 max(1, |y|) on at least 99% of the elements
    (one exp ULP can flip a bfloat16 rounding of a softmax weight: the rest)."""
    print(f"seed {seed} heads {heads} seq {seq} d {d}")
    rng = np.random.default_rng(seed)
    q, k, v = [rng.standard_normal((heads, seq, d)).astype(np.float32) for _ in range(3)]
    fn = _attention if what == "forward" else _attention_grads
    out, _ = jit(fn)(q, k, v)
    outs = [out] if what == "forward" else list(out)
    ref = fn(q, k, v)
    refs = [ref] if what == "forward" else list(ref)
    emul = _bf16_operands(fn, q, k, v)
    for y, r, e in zip(outs, refs, emul, strict=True):
        r = np.asarray(r)
        assert y.shape == r.shape == (heads, seq, d)
        err = np.max(np.abs(y - r))
        print(f"  error {err:.2e} = {err / (2 ** -7 * np.max(np.abs(r))):.2f} x 2^-7 max|y|")
        assert err <= 2.0 ** -5 * np.max(np.abs(r))
        close = np.abs(y - e) <= 1e-5 * np.maximum(1, np.abs(e))
        assert np.mean(close) >= 0.99


def _line_of(fn, text):
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(lines) if text in s)


def _sin(x):
    return jnp.sin(x) + 1


def _rank3(x):
    return jnp.transpose(x.reshape(2, 2, 4), (1, 0, 2)).sum(axis=0)


def _true_reshape(x):
    return x.reshape(-1) + 1


def _heads_by_reshape(x):
    return jnp.transpose(x.reshape(17, 2, 8), (1, 0, 2))     # (seq, heads * d) -> heads


def _heads_by_slice(x):
    return x[:, :8] * 2                                       # head 0's columns


def _batched(a, b):
    return jax.lax.dot_general(a, b, (((2,), (1,)), ((1,), (0,))))


@pytest.mark.parametrize("fn,args,words,marker", [
    (_sin, [(4, 4)], ["sin", "not supported"], "jnp.sin"),
    (_rank3, [(4, 4)], ["transpose", "(2, 2, 4)", "rank 3"], "jnp.transpose"),
    (_true_reshape, [(4, 4)], ["reshape", "(4, 4) -> (16,)"], "x.reshape"),
    (lambda x: jnp.cumsum(x, axis=1), [(4, 4)], ["cumsum"], None),
    (_heads_by_reshape, [(17, 16)], ["reshape", "(17, 16)", "(17, 2, 8)", "into heads"],
     "x.reshape"),
    (_heads_by_slice, [(17, 16)], ["slice", "not supported"], "x[:, :8]"),
    (lambda x: x.astype(jnp.int32) & 1, [(4, 4)],
     ["convert_element_type", "float32 to int32"], None),
])
def test_refusals(fn, args, words, marker):
    """An unsupported primitive or shape is refused at compile time with the primitive and
    the user's source line."""
    with pytest.raises(Unsupported) as e:
        compile_fn(fn, *[jax.ShapeDtypeStruct(s, jnp.float32) for s in args])
    msg = str(e.value)
    print(msg)
    assert __file__.rsplit("/", 1)[-1] in msg
    for w in words:
        assert w in msg
    if marker:
        assert f":{_line_of(fn, marker)}:" in msg


def test_batch_dimensions_refused():
    """Batch dimensions other than the leading axis of rank-3 operands, and rank 4, are
    refused with the primitive and the line."""
    with pytest.raises(Unsupported, match=r"test_jax_frontend.py:\d+:\d+ \(_batched\): "
                       r"dot_general: dimension numbers"):
        compile_fn(_batched, jax.ShapeDtypeStruct((3, 2, 4), jnp.float32),
                   jax.ShapeDtypeStruct((2, 4, 5), jnp.float32))
    with pytest.raises(Unsupported, match=r"shape \(2, 2, 2, 2\): the front end lowers "
                       r"ranks 0 to 3"):
        compile_fn(lambda a: a + 1, jax.ShapeDtypeStruct((2, 2, 2, 2), jnp.float32))
    with pytest.raises(Unsupported, match="dot_general: batch dimensions"):
        compile_fn(lambda a, b: jnp.einsum("bi,bi->b", a, b),
                   jax.ShapeDtypeStruct((3, 4), jnp.float32),
                   jax.ShapeDtypeStruct((3, 4), jnp.float32))


def test_scan_carries_across_steps(seed):
    """A running sum and a running max carried over 5 steps, each step's x from HBM and
    its y back: the carries and the ys equal jax.lax.scan's."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((5, 9, 20)).astype(np.float32)

    def step(c, x):
        s, m = c
        s2 = s + jnp.sum(x, axis=0)
        m2 = jnp.maximum(m, jnp.max(x))
        return (s2, m2), jnp.sum(x * x, axis=1)

    init = (np.zeros(20, np.float32), np.float32(-1e30) * np.ones((), np.float32))
    (s, m), ys, counters = scan(step, init, xs)
    (rs, rm), rys = jax.lax.scan(step, init, xs)
    assert np.allclose(s, rs, rtol=1e-6, atol=1e-5)
    assert m == rm
    assert ys.shape == (5, 9) and np.allclose(ys, rys, rtol=1e-6)
    assert scan.last.program.metadata["steps"] == 5


def test_scan_rank3_streamed(seed):
    """Rank-3 streamed inputs and per-step outputs (each step's slabs one after the other
    in HBM) with a rank-2 carry; a rank-3 carry is refused."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((3, 2, 5, 18)).astype(np.float32)

    def step(c, x):
        return c + jnp.max(x, axis=0), x * 2 - jnp.max(x, axis=2, keepdims=True)

    init = np.zeros((5, 18), np.float32)
    c, ys, _ = scan(step, init, xs)
    rc, rys = jax.lax.scan(step, init, xs)
    assert np.array_equal(c, rc) and ys.shape == (3, 2, 5, 18) and np.array_equal(ys, rys)
    with pytest.raises(Unsupported, match=r"a carry of shape \(2, 5, 18\)"):
        scan(lambda c, x: (c + x, jnp.sum(x)), np.zeros((2, 5, 18), np.float32), xs)


def test_outputs_that_are_inputs_or_constants():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    (a, b, c), _ = jit(lambda x: (x, jnp.full((2, 5), 2.5), jnp.arange(3)))(x)
    assert np.array_equal(a, x)
    assert np.array_equal(b, np.full((2, 5), 2.5, np.float32))
    assert c.dtype == np.int32 and np.array_equal(c, np.arange(3))


def test_podium_does_not_import_jax():
    """The command line starts without jax (it is imported by podium.jax only)."""
    out = subprocess.run([sys.executable, "-c", "import sys, sim.cli, podium.tools, "
                          "podium.compiler; print('jax' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_scan_swapping_carries():
    xs = np.ones((3, 2, 2), np.float32)
    a, b = np.full((2, 2), 1.0, np.float32), np.full((2, 2), 5.0, np.float32)
    (a2, b2), ys, _ = scan(lambda c, x: ((c[1], c[0] + x), c[0]), (a, b), xs)
    (ra, rb), rys = jax.lax.scan(lambda c, x: ((c[1], c[0] + x), c[0]), (a, b), xs)
    assert np.array_equal(a2, ra) and np.array_equal(b2, rb) and np.array_equal(ys, rys)


def test_jit_compiles_once_per_shape():
    f = jit(lambda x: x * 2)
    a, _ = f(np.ones((2, 3), np.float32))
    first = f.last
    b, _ = f(np.full((2, 3), 4, np.float32))
    assert f.last is first and np.array_equal(b, np.full((2, 3), 8, np.float32))
    f(np.ones((3, 3), np.float32))
    assert f.last is not first


def test_argument_shape_checked():
    c = compile_fn(lambda x: x + 1, jax.ShapeDtypeStruct((3, 4), jnp.float32))
    with pytest.raises(ValueError, match=r"argument 0 has shape \(4, 3\), traced as \(3, 4\)"):
        c.run([np.zeros((4, 3))])


def test_cli(tmp_path):
    """podium compile --jax: a program file from a module's function; a refusal is one line
    and exit status 2."""
    (tmp_path / "jaxmod.py").write_text(
        "import jax\n\ndef layer(x, w, b):\n    return jax.nn.relu(x @ w + b)\n\n"
        "def bad(x):\n    return jax.numpy.sin(x)\n")
    cmd = [sys.executable, "-m", "sim.cli", "compile", "--jax"]
    root = str(__import__("pathlib").Path(__file__).resolve().parents[2])
    env = {**__import__("os").environ, "PYTHONPATH": root}
    ok = subprocess.run([*cmd, "jaxmod:layer", "--shapes", "8x20,20x5,5", "-o",
                         str(tmp_path / "p.json")], cwd=tmp_path, capture_output=True,
                        text=True, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "instructions, jax" in ok.stdout
    from podium.program import Program
    p = Program.load(tmp_path / "p.json")
    assert p.metadata["kind"] == "jax" and "dot_general" in p.metadata["primitives"]
    bad = subprocess.run([*cmd, "jaxmod:bad", "--shapes", "4x4", "-o",
                          str(tmp_path / "q.json")], cwd=tmp_path, capture_output=True,
                         text=True, env=env)
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "jaxmod.py:7" in bad.stderr and "sin" in bad.stderr


LOSS_TOLERANCE = 0.05
"""Every step's loss on the chip within this of jax's fp32 loss on CPU (the MXU's bfloat16
operands; measured 0.013 over the 168 steps)."""
FIRST_LOSS_TOLERANCE = 2e-3
"""The first step's (same weights on both): measured 4e-4."""


def test_digits_training_on_golden():
    """The digits MLP trained from scratch in one program of 168 SGD steps (8 epochs of 21
    batches of 64) on the golden simulator."""
    r = jd.train()
    print(f"accuracy {r.accuracy} (jax {r.ref_accuracy}); last loss {r.losses[-1]}; "
          f"max loss diff {np.max(np.abs(r.losses - r.ref_losses))}")
    assert r.steps == 168 and r.losses.shape == (168,)
    assert abs(r.losses[0] - r.ref_losses[0]) <= FIRST_LOSS_TOLERANCE
    assert np.max(np.abs(r.losses - r.ref_losses)) <= LOSS_TOLERANCE
    assert r.losses[-20:].mean() < r.losses[:20].mean() / 5
    assert r.accuracy >= 0.95
    assert r.program.metadata["steps"] == 168 and len(r.program.words) < 4096


def test_digits_adam_on_golden():
    """Adam (moments carried in VMEM like the weights, the bias-corrected rate a per-step
    input): the first 42 steps (2 epochs) on the golden simulator, every loss within the
    tolerance of jax's, the loss falling."""
    r = jd.train(jd.ADAM, steps=42)
    print(f"losses {r.losses[0]} .. {r.losses[-1]}; max diff "
          f"{np.max(np.abs(r.losses - r.ref_losses))}")
    assert abs(r.losses[0] - r.ref_losses[0]) <= FIRST_LOSS_TOLERANCE
    assert np.max(np.abs(r.losses - r.ref_losses)) <= LOSS_TOLERANCE
    assert r.losses[-10:].mean() < r.losses[:10].mean() / 3


@pytest.mark.slow
def test_digits_adam_accuracy():
    """Adam over the 168 steps: >= 95% test accuracy (measured 96.4%, jax 96.7%)."""
    r = jd.train(jd.ADAM)
    print(f"accuracy {r.accuracy} (jax {r.ref_accuracy})")
    assert np.max(np.abs(r.losses - r.ref_losses)) <= LOSS_TOLERANCE
    assert r.accuracy >= 0.95


@pytest.mark.slow
def test_digits_training_rtl_matches_golden():
    """Three training steps on the RTL chip (the ViT's TensorCore): every loss and every
    final weight bit-exact with the golden simulator."""
    steps = 3
    rtl = jd.train(sim="verilator", steps=steps)
    gold = jd.train(sim="golden", steps=steps)
    print(f"cycles {rtl.counters.get('cycles')} for {steps} steps")
    assert np.array_equal(rtl.losses.view(np.uint32), gold.losses.view(np.uint32))
    for k in gold.params:
        assert np.array_equal(rtl.params[k].view(np.uint32), gold.params[k].view(np.uint32)), k
    assert rtl.counters["cycles"] > 0


@pytest.mark.slow
def test_digits_trained_on_the_rtl():
    """The digits MLP trained from scratch on the RTL chip (the native path): the 168 SGD
    steps in one program, every step's loss and the final weights bit-exact with the golden
    simulator, test accuracy >= 95%."""
    rtl = jd.train(sim="native")
    gold = jd.train(sim="golden")
    print(f"accuracy {rtl.accuracy}; {rtl.counters['cycles']} cycles for {rtl.steps} steps, "
          f"{rtl.counters['run_seconds']:.0f} s")
    assert rtl.steps == 168
    assert np.array_equal(rtl.losses.view(np.uint32), gold.losses.view(np.uint32))
    for k in gold.params:
        assert np.array_equal(rtl.params[k].view(np.uint32), gold.params[k].view(np.uint32)), k
    assert rtl.accuracy >= 0.95
    assert rtl.counters["mxu_vectors"] > 0


def _mixed(x, y):
    """The lowerings training does not use: reciprocal, rsqrt, sqrt, argmax, argmin,
    reduce_min, integer_pow, a bfloat16 round trip, a row-to-column vector, logic."""
    a = x / y + jnp.sqrt(jnp.abs(y)) * jax.lax.rsqrt(jnp.abs(x) + 1) + x ** -2
    b = a.astype(jnp.bfloat16).astype(jnp.float32)
    idx = (jnp.argmax(b, axis=1) + jnp.argmin(b, axis=1)).astype(jnp.float32)
    col = jnp.max(b, axis=0) + jnp.min(b.T, axis=1)
    mask = (x > 0) & ~(y > 0)
    return jnp.where(mask, b, -b), idx, col


@pytest.mark.slow
def test_primitives_rtl_matches_golden(seed):
    """A function of the primitives training does not use, on the RTL chip under cocotb
    (``sim="verilator"``) and on its native path (``sim="native"``): both bit-exact with
    the golden simulator, the native run's cycles and counters the cocotb run's."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((20, 37)).astype(np.float32)
    y = (rng.standard_normal((20, 37)) + 3).astype(np.float32)
    rtl, counters = jit(_mixed, sim="verilator")(x, y)
    native, ncounters = jit(_mixed, sim="native")(x, y)
    gold, _ = jit(_mixed)(x, y)
    for r, n, g in zip(rtl, native, gold, strict=True):
        assert np.array_equal(np.asarray(r).view(np.uint32), np.asarray(g).view(np.uint32))
        assert np.array_equal(np.asarray(n).view(np.uint32), np.asarray(g).view(np.uint32))
    assert counters["cycles"] > 0
    chip = {k for k in counters if not k.endswith("_seconds")}
    assert {k: ncounters[k] for k in chip} == {k: counters[k] for k in chip}
    ref = _mixed(x, y)
    assert np.array_equal(gold[1], np.asarray(ref[1]))


def test_native_backend_refused_when_unknown():
    """An unknown backend is refused by name before anything runs."""
    with pytest.raises(ValueError, match="sim must be one of"):
        jit(lambda a: a + 1, sim="nonesuch")(np.ones((2, 2), np.float32))


# ---------------------------------------------------------------------------------------
# Data parallel on the pod (golden pod simulator)


@pytest.mark.parametrize("pod", ["2x2", "1x4"])
def test_psum_on_the_pod(pod, seed):
    """``psum`` / ``pmean`` over the pod's axis of a matrix spanning chunks, a row vector, a
    column vector and a scalar, three steps: each chip's results equal the fp32 sums over
    the chips' shards (within fp32 reordering), bit-identical on every chip; the program
    runs the pod's all-reduce (``ici.coll``)."""
    rng = np.random.default_rng(seed)
    xs = rng.standard_normal((3, 8, 20)).astype(np.float32)

    def step(c, x):
        rows = jax.lax.psum(x.sum(0), "batch")              # a row (20,)
        cols = jax.lax.psum(x.sum(1), "batch")              # a column (2,)
        m = jax.lax.pmean(x * 2.0, "batch")                 # (2, 20): 2 chunks of lanes
        return c + rows, (m, cols, jax.lax.psum(jnp.sum(x * x), "batch"))

    c, (m, cols, total), _ = pod_scan(step, np.zeros(20, np.float32), xs, pod=pod)
    shards = xs.reshape(3, 4, 2, 20)
    tol = 4 * 8 * EPS * np.abs(xs).sum()
    assert np.max(np.abs(c - xs.sum((0, 1)))) <= tol
    assert np.max(np.abs(m - 2 * shards.mean(1))) <= tol
    assert np.max(np.abs(cols - shards.sum((1, 3)))) <= tol
    assert np.max(np.abs(total - (xs * xs).sum((1, 2)))) <= 4 * 8 * EPS * (xs * xs).sum()
    for cc, (mm, co, to) in pod_scan.chips[1:]:
        assert np.array_equal(cc, c) and np.array_equal(mm, m)
        assert np.array_equal(co, cols) and np.array_equal(to, total)
    text = pod_scan.last.program.metadata["assembly"]
    assert ("ici.coll all_reduce_2d" in text) == (pod == "2x2")
    assert ("ici.coll all_reduce, 0" in text) == (pod == "1x4")


def _psum_anywhere(x):
    return jax.lax.psum(x, "batch") * 2


def _psum_other_axis(c, x):
    return c + jax.lax.psum(x.sum(0), "model"), c


def test_psum_refused_outside_the_pod_or_axis():
    """A ``psum`` in a single-chip program, or over an axis that is not the pod's, is
    refused before anything runs, naming the primitive and the user's line."""
    with pytest.raises(Unsupported) as e:
        jit(_psum_anywhere)(np.ones(4, np.float32))
    msg = str(e.value)
    print(msg)
    assert f"test_jax_frontend.py:{_line_of(_psum_anywhere, 'lax.psum')}" in msg
    assert "psum" in msg and "'batch'" in msg and "single-chip" in msg
    with pytest.raises(Unsupported) as e:
        pod_scan(_psum_other_axis, np.zeros(4, np.float32),
                 np.ones((2, 8, 4), np.float32), pod="2x2", axis="batch")
    msg = str(e.value)
    print(msg)
    assert f"test_jax_frontend.py:{_line_of(_psum_other_axis, 'lax.psum')}" in msg
    assert "psum" in msg and "'model'" in msg and "'batch'" in msg


def _shard_map_sgd(p, batch):
    # under shard_map the gradient of the replicated weights is already summed over the
    # chips (jax transposes the weights' implicit broadcast into a psum): divide by 4
    value, grads = jax.value_and_grad(jd.loss)(p, *batch)
    return (jax.tree.map(lambda w, g: w - 0.5 * (g / 4), p, grads),
            jax.lax.pmean(value, "batch"))


def test_shard_map_step_on_the_pod():
    """The SGD step written as a ``jax.shard_map`` over a mesh of the pod's four chips (the
    whole batch in, ``P("batch")``) runs as the per-chip form with ``pmean``: three steps,
    losses and weights bit-identical; a spec the pod does not shard that way is refused
    with the line of the shard_map."""
    from jax.sharding import AbstractMesh
    from jax.sharding import PartitionSpec as P
    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    data = (xs[:3], ys[:3])
    mesh = AbstractMesh((4,), ("batch",))
    step = jax.shard_map(_shard_map_sgd, mesh=mesh, in_specs=(P(), P("batch")),
                         out_specs=(P(), P()))
    p1, l1, _ = pod_scan(jd.pod_sgd_step(0.5), jd.init_params(0), data)
    p2, l2, _ = pod_scan(step, jd.init_params(0), data)
    assert np.array_equal(l1, l2) and l1[-1] < l1[0]
    for k in p1:
        assert np.array_equal(p1[k], p2[k]), k
    sharded = {"w1": P("batch"), "b1": P(), "w2": P(), "b2": P()}
    bad = jax.shard_map(_shard_map_sgd, mesh=mesh, in_specs=(P(), P("batch")),
                        out_specs=(sharded, P()))
    with pytest.raises(Unsupported) as e:
        pod_scan(bad, jd.init_params(0), data)
    msg = str(e.value)
    print(msg)
    assert "shard_map" in msg
    assert f"test_jax_frontend.py:{_line_of(_shard_map_sgd, 'def')} (_shard_map_sgd)" in msg
    assert "output 2 has the spec P('batch',)" in msg and "replicated" in msg


POD_LOSS_TOLERANCE = 0.01
"""Every step's loss on the pod within this of single-chip training on the full batch
(golden): the sums over the batch are in another fp32 order (16 samples per chip in the MXU,
then the all-reduce's order), and the differences grow over the steps; measured 0.0020
(2x2) and 0.0016 (1x4) over the 168 steps."""


@pytest.mark.parametrize("pod", [
    "2x2", pytest.param("1x4", marks=pytest.mark.slow)])
def test_digits_data_parallel_on_pod(pod):
    """The digits MLP trained data-parallel on the golden pod simulator: 168 SGD steps in one
    program on every chip, each batch of 64 split 16 per chip, gradients and loss averaged
    with ``pmean`` (the pod's fp32 all-reduce); the weights bit-identical on every chip after
    every step, the losses within POD_LOSS_TOLERANCE of single-chip training on the full
    batch, test accuracy >= 95%."""
    r = jd.train_pod(pod=pod, weights=True)
    s = jd.train()
    diff = np.abs(r.losses - s.losses)
    print(f"{pod}: accuracy {r.accuracy} (single chip {s.accuracy}); max loss diff vs single "
          f"chip {diff.max()}; first {diff[0]}")
    assert r.steps == 168 and r.chips_identical
    for k, w in r.step_weights[0].items():
        assert w.shape == (168, *r.params[k].shape)
        assert np.array_equal(w[-1], r.params[k])
        for other in r.step_weights[1:]:
            assert np.array_equal(other[k], w), f"{k} differs between chips"
    assert diff[0] <= 4 * EPS * 3 and diff.max() <= POD_LOSS_TOLERANCE
    assert r.accuracy >= 0.95



# ---------------------------------------------------------------------------------------
# The ViT's training step (podium/jax/vit.py)


def test_vit_model_is_the_workloads():
    """The front end's ViT (per-head parameters) is the workload's: the parameters convert
    both ways exactly, and jax's loss and gradients of it equal the workload's hand-written
    float64 backward (podium/workloads/vit.py) within fp32 rounding."""
    from podium.jax import vit as jv
    from podium.workloads import vit as W
    p = W.init_params(jv.SHAPE, 3)
    ph = jv.to_heads(p)
    back = jv.from_heads(ph)
    assert list(back) == list(p) and all(np.array_equal(back[k], p[k]) for k in p)
    xs, ys = jv.batches(jv.Settings(batch=4), 1)
    value, grads = jax.value_and_grad(jv.loss)(ph, xs[0], ys[0])
    ref_loss, ref = W.loss_and_grads(p, xs[0], np.argmax(ys[0], axis=1), jv.SHAPE)
    assert abs(float(value) - ref_loss) <= 1e-5 * max(1, abs(ref_loss))
    g = jv.from_heads(jax.tree.map(np.asarray, grads))
    for k in ref:
        err = np.max(np.abs(g[k] - ref[k]))
        assert err <= 1e-5 * max(1.0, np.max(np.abs(ref[k]))), (k, err)


VIT_LOSS_TOLERANCE = 0.05
"""Every step's loss on the chip within this of jax's fp32 loss (the MXU's bfloat16
operands; measured 0.011 on the first steps)."""


def test_vit_training_on_golden():
    """A few SGD steps of the ViT (attention, softmax, LayerNorm, GELU and their backward)
    in one program on the golden simulator: every loss within VIT_LOSS_TOLERANCE of jax in
    fp32; one step's loss and new weights against jax evaluating the same jaxpr with every
    dot_general's operands rounded to bfloat16 (the MXU rule) within 1e-4 max(1, |y|) on at
    least 99% of the elements."""
    from podium.jax import vit as jv
    r = jv.train(steps=3)
    print(f"losses {r.losses} (jax {r.ref_losses}); {len(r.program.words)} instructions")
    assert r.losses.shape == (3,) and len(r.program.words) <= 4096
    assert np.max(np.abs(r.losses - r.ref_losses)) <= VIT_LOSS_TOLERANCE
    xs, ys = jv.batches(jv.SETTINGS, 1)
    p0 = jv.to_heads(jv.W.init_params(jv.SHAPE, 0))
    step = jv.sgd_step(jv.SETTINGS.lr)
    (new, value), _ = jit(step)(p0, (xs[0], ys[0]))
    flat_args, _ = jax.tree.flatten((p0, (xs[0], ys[0])))
    tree = jax.tree.structure((p0, (xs[0], ys[0])))

    def flat_step(*a):
        return jax.tree.leaves(step(*jax.tree.unflatten(tree, a)))
    emul = _bf16_operands(flat_step, *flat_args)
    got = jax.tree.leaves((new, value))
    close = np.concatenate([(np.abs(np.asarray(y) - e) <= 1e-4 * np.maximum(1, np.abs(e)))
                            .ravel() for y, e in zip(got, emul, strict=True)])
    print(f"{np.mean(close):.4f} of {close.size} elements within 1e-4 of the emulation")
    assert np.mean(close) >= 0.99


@pytest.mark.slow
def test_vit_training_rtl_matches_golden():
    """Three ViT training steps on the RTL chip (native path, the ViT's TensorCore): every
    loss and every weight bit-exact with the golden simulator."""
    from podium.jax import vit as jv
    rtl = jv.train(steps=3, sim="native")
    gold = jv.train(steps=3)
    print(f"{rtl.counters['cycles']} cycles for 3 steps, {rtl.counters['run_seconds']:.0f} s")
    assert np.array_equal(rtl.losses.view(np.uint32), gold.losses.view(np.uint32))
    for a, b in zip(jax.tree.leaves(rtl.params), jax.tree.leaves(gold.params), strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))
    assert rtl.counters["mxu_vectors"] > 0


@pytest.mark.slow
def test_segments_under_cocotb():
    """The runner's segments on the RTL chip under cocotb (the ``verilator`` backend): one
    digits SGD step in segments of at most 256 instructions, the loss and the weights
    bit-exact with the golden simulator's, every segment run."""
    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    data, p0, step = (xs[:1], ys[:1]), jd.init_params(0), jd.sgd_step(jd.SETTINGS.lr)
    p1, l1, _ = scan(step, p0, data)
    p2, l2, c2 = scan(step, p0, data, segment=256, sim="verilator")
    print(f"{c2['cycles']} cycles in {c2['segments']} segments")
    assert c2["segments"] == len(scan.last.program.metadata["segments"]) > 1
    assert np.array_equal(l1.view(np.uint32), l2.view(np.uint32))
    for k in p1:
        assert np.array_equal(p1[k].view(np.uint32), p2[k].view(np.uint32)), k


VIT_FULL_LOSS_TOLERANCE = 0.01
"""The full-size ViT's losses on the chip within this of jax's fp32 losses, relative to
``max(1, |loss|)`` (measured 0.0063 over three steps)."""


@pytest.mark.slow
def test_vit_full_size_on_golden():
    """The transformer issue's ViT at its own size (width 64, 4 heads, MLP 128, 2 blocks;
    ``vit.FULL`` on ``vit.FULL_CONFIG``, 2 MiB of VMEM): a step is longer than the
    instruction memory and runs as segments; three steps on the golden simulator, every loss
    within VIT_FULL_LOSS_TOLERANCE of jax in fp32, relative (the learning rate of 0.1 throws
    the second step's loss up to about 8.8, where an absolute 0.05 is 0.6%: measured 0.056)."""
    from podium.jax import vit as jv
    r = jv.train(steps=3, shape=jv.FULL, config=jv.FULL_CONFIG)
    meta = r.program.metadata
    print(f"losses {r.losses} (jax {r.ref_losses}); {len(r.program.words)} instructions in "
          f"segments {meta['segments']}")
    assert len(r.program.words) > 4096 and max(meta["segments"]) <= 4096
    assert r.counters["segments"] == len(meta["segments"]) == 3 * meta["segments_per_step"]
    rel = np.abs(r.losses - r.ref_losses) / np.maximum(1, np.abs(r.ref_losses))
    print(f"largest relative loss difference {np.max(rel):.4f}")
    assert np.max(rel) <= VIT_FULL_LOSS_TOLERANCE


@pytest.mark.slow
def test_vit_full_size_rtl_matches_golden():
    """One training step of the full-size ViT on the RTL chip (native path, in segments,
    ``vit.FULL_CONFIG``): the loss and every weight bit-exact with the golden simulator."""
    from podium.jax import vit as jv
    rtl = jv.train(steps=1, sim="native", shape=jv.FULL, config=jv.FULL_CONFIG)
    gold = jv.train(steps=1, shape=jv.FULL, config=jv.FULL_CONFIG)
    print(f"{rtl.counters['cycles']} cycles in {rtl.counters['segments']} segments, "
          f"{rtl.counters['run_seconds']:.0f} s")
    assert rtl.counters["segments"] == len(rtl.program.metadata["segments"]) > 1
    assert np.array_equal(rtl.losses.view(np.uint32), gold.losses.view(np.uint32))
    for a, b in zip(jax.tree.leaves(rtl.params), jax.tree.leaves(gold.params), strict=True):
        assert np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def test_segments_match_one_program():
    """A program run as segments (docs/jax.md, "Segments"): the digits SGD step, 2 steps,
    cut into segments of at most 256 instructions, gives the one-program run's losses and
    weights bit for bit on the golden simulator; the host ran every segment; a segment
    length the instruction memory cannot hold, or a pod program in segments, is refused."""
    from podium.compiler import CompileError
    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    data, p0, step = (xs[:2], ys[:2]), jd.init_params(0), jd.sgd_step(jd.SETTINGS.lr)
    p1, l1, _ = scan(step, p0, data)
    assert "segments" not in scan.last.program.metadata
    p2, l2, c2 = scan(step, p0, data, segment=256)
    meta = scan.last.program.metadata
    print(f"segments {meta['segments']} ({meta['segments_per_step']} a step)")
    assert max(meta["segments"]) <= 256 and meta["segments_per_step"] >= 3
    assert c2["segments"] == len(meta["segments"]) == 2 * meta["segments_per_step"]
    assert np.array_equal(l1.view(np.uint32), l2.view(np.uint32))
    for k in p1:
        assert np.array_equal(p1[k].view(np.uint32), p2[k].view(np.uint32)), k
    with pytest.raises(CompileError, match=r"segment must be in 64\.\.4096"):
        scan(step, p0, data, segment=8192)
    from podium.jax import PODS, pod_config
    from podium.jax.lower import lower
    with pytest.raises(CompileError, match="a pod program runs as one segment"):
        closed = jax.make_jaxpr(step)(p0, (xs[0], ys[0]))
        pod = pod_config(PODS["2x2"])
        lower(closed, pod.tensorcore, carry=4, pod=pod, axis="batch", segment=256)


def test_pod_scan_backends():
    """``pod_scan``'s ``sim``: an unknown one is refused naming the choices; the RTL paths
    need a pod whose chips have HBM controllers (sim/pod_native.py), a PodConfig without them
    is refused; the pod they build for a name (``pod_config(..., memory="hbm")``) gives, on
    the golden pod simulator, the named pod's losses and weights bit for bit."""
    from podium.jax import PODS, pod_config
    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    data = (xs[:2], ys[:2])
    with pytest.raises(ValueError, match="sim must be one of golden, native, verilator"):
        pod_scan(jd.pod_sgd_step(0.5), jd.init_params(0), data, sim="icarus")
    with pytest.raises(ValueError, match="HBM controllers"):
        pod_scan(jd.pod_sgd_step(0.5), jd.init_params(0), data, sim="native",
                 pod=pod_config(PODS["2x2"]))
    p1, l1, _ = pod_scan(jd.pod_sgd_step(0.5), jd.init_params(0), data)
    p2, l2, _ = pod_scan(jd.pod_sgd_step(0.5), jd.init_params(0), data,
                         pod=pod_config(PODS["2x2"], memory="hbm"))
    assert np.array_equal(l1, l2) and len(l1) == 2
    for k in p1:
        assert np.array_equal(p1[k], p2[k]), k


@pytest.mark.slow
def test_digits_data_parallel_on_the_rtl_pod():
    """Three steps of the data-parallel digits training (``pod_sgd_step``, every step's
    weights an output) on the RTL 2x2 pod of the front end's TensorCores with HBM
    controllers, natively (sim/pod_native.py, the chip a hier_block): every chip's losses and
    weights of every step bit-identical to the golden pod simulator's on the same pod, and
    the same on every chip. Slow: the pod's build (docs/jax.md, "Data parallel on the pod")."""
    from podium.jax import PODS, pod_config
    x_train, _, y_train, _ = jd.data(jd.SETTINGS.seed)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    data = (xs[:3], ys[:3])
    p0 = jd.init_params(jd.SETTINGS.seed)
    step = jd.pod_sgd_step(jd.SETTINGS.lr, weights=True)
    pod_scan(step, p0, data, pod=pod_config(PODS["2x2"], memory="hbm"))
    golden = pod_scan.chips
    pod_scan(step, p0, data, pod="2x2", sim="native")
    rtl = pod_scan.chips
    assert len(rtl) == 4
    for c, (g, r) in enumerate(zip(golden, rtl, strict=True)):
        for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(r), strict=True):
            assert np.array_equal(np.asarray(a), np.asarray(b)), f"chip {c}"
        for a, b in zip(jax.tree.leaves(rtl[0]), jax.tree.leaves(r), strict=True):
            assert np.array_equal(np.asarray(a), np.asarray(b)), f"chip {c} differs from chip 0"
    losses = np.asarray(rtl[0][1][0])
    assert losses.shape == (3,) and losses[-1] < losses[0]
    assert all(c["cycles"] > 0 for c in pod_scan.counters)
