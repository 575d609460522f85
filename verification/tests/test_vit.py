"""The ViT workload (podium/workloads/vit.py): patch layout, the float64 forward against a
straightforward per-sample loop written here, the hand-written backward against finite
differences for every parameter, deterministic training that lowers the loss, the parameter
cache, the bfloat16 emulation, and (slow: it trains) the accuracy of the trained model."""

import dataclasses
import math

import ml_dtypes
import numpy as np
import pytest

from podium.workloads import vit

SMALL = vit.VitShape(dim=8, heads=2, mlp=12, blocks=2)


def _random_params(shape, rng):
    """Initial parameters plus noise, so no LayerNorm scale is 1 and no bias is 0."""
    return {k: v.astype(np.float64) + rng.normal(0, 0.1, v.shape)
            for k, v in vit.init_params(shape, int(rng.integers(1 << 31))).items()}


def _reference(params, image, shape):
    """Logits of one image (64 values), token by token and head by head."""
    p = {k: np.asarray(v, np.float64) for k, v in params.items()}
    d, dh = shape.dim, shape.head_dim
    x = np.asarray(image, np.float64).reshape(8, 8)

    def ln(v, g, b):
        mu = sum(v) / len(v)
        var = sum((e - mu) ** 2 for e in v) / len(v)
        return (v - mu) / math.sqrt(var + 1e-5) * g + b

    tokens = [p["cls"] + p["pos"][0]]
    for i in range(4):
        for j in range(4):
            f = np.array([x[2 * i, 2 * j], x[2 * i, 2 * j + 1],
                          x[2 * i + 1, 2 * j], x[2 * i + 1, 2 * j + 1]])
            tokens.append(f @ p["patch_w"] + p["patch_b"] + p["pos"][1 + 4 * i + j])
    for b in range(shape.blocks):
        w = {k.split(".")[1]: v for k, v in p.items() if k.startswith(f"b{b}.")}
        qkv = [ln(t, w["ln1_g"], w["ln1_b"]) @ w["qkv_w"] + w["qkv_b"] for t in tokens]
        heads = [np.zeros(d) for _ in tokens]
        for h in range(shape.heads):
            cols = slice(h * dh, (h + 1) * dh)
            for t, row in enumerate(qkv):
                q = row[cols]
                scores = [q @ other[d:][cols] / math.sqrt(dh) for other in qkv]
                top = max(scores)
                e = [math.exp(s - top) for s in scores]
                heads[t][cols] = sum(e[u] * qkv[u][2 * d:][cols] for u in range(len(qkv))) \
                    / sum(e)
        tokens = [t + o @ w["proj_w"] + w["proj_b"] for t, o in zip(tokens, heads, strict=True)]
        out = []
        for t in tokens:
            z = ln(t, w["ln2_g"], w["ln2_b"]) @ w["fc1_w"] + w["fc1_b"]
            g = np.array([0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi)
                                                   * (v + 0.044715 * v ** 3))) for v in z])
            out.append(t + g @ w["fc2_w"] + w["fc2_b"])
        tokens = out
    return ln(tokens[0], p["ln_g"], p["ln_b"]) @ p["head_w"] + p["head_b"]


def test_patches_layout(seed):
    rng = np.random.default_rng(seed)
    images = rng.uniform(0, 1, (3, 64))
    p = vit.patches(images)
    assert p.shape == (3, 17, 4) and not p[:, 0].any()
    for n in range(3):
        for i in range(4):
            for j in range(4):
                r, c = 2 * i, 2 * j
                px = [images[n, r * 8 + c], images[n, r * 8 + c + 1],
                      images[n, (r + 1) * 8 + c], images[n, (r + 1) * 8 + c + 1]]
                assert list(p[n, 1 + 4 * i + j]) == px
    assert np.array_equal(vit.patches(images.reshape(3, 8, 8)), p)
    with pytest.raises(ValueError, match="images must be"):
        vit.patches(np.zeros((2, 63)))


def test_parameters_and_embedding_bias(seed):
    params = vit.init_params(vit.VitShape(), seed)
    expected = {"patch_w": (4, 64), "patch_b": (64,), "cls": (64,), "pos": (17, 64),
                "ln_g": (64,), "ln_b": (64,), "head_w": (64, 10), "head_b": (10,)}
    for b in range(2):
        expected.update({f"b{b}.ln1_g": (64,), f"b{b}.ln1_b": (64,),
                         f"b{b}.qkv_w": (64, 192), f"b{b}.qkv_b": (192,),
                         f"b{b}.proj_w": (64, 64), f"b{b}.proj_b": (64,),
                         f"b{b}.ln2_g": (64,), f"b{b}.ln2_b": (64,),
                         f"b{b}.fc1_w": (64, 128), f"b{b}.fc1_b": (128,),
                         f"b{b}.fc2_w": (128, 64), f"b{b}.fc2_b": (64,)})
    assert {k: v.shape for k, v in params.items()} == expected
    assert all(v.dtype == np.float32 for v in params.values())
    params = _random_params(vit.VitShape(), np.random.default_rng(seed))
    emb = vit.embedding_bias(params)
    assert emb.shape == (17, 64)
    assert np.array_equal(emb[0], params["cls"] + params["pos"][0])
    for t in range(1, 17):
        assert np.array_equal(emb[t], params["patch_b"] + params["pos"][t])


@pytest.mark.parametrize("bad, match", [
    (dict(dim=64, heads=5), "multiple of heads"),
    (dict(blocks=0), "VitShape.blocks must be a positive integer"),
])
def test_shape_refused(bad, match):
    with pytest.raises(ValueError, match=match):
        vit.VitShape(**bad)


@pytest.mark.parametrize("shape", [vit.VitShape(), SMALL], ids=["default", "small"])
def test_forward_matches_loop(shape, seed):
    rng = np.random.default_rng(seed)
    params = _random_params(shape, rng)
    images = rng.uniform(0, 1, (4, 64))
    logits = vit.forward(params, images, shape)
    assert logits.dtype == np.float64 and logits.shape == (4, 10)
    expect = np.array([_reference(params, im, shape) for im in images])
    np.testing.assert_allclose(logits, expect, rtol=1e-10, atol=1e-10)


def _loss(params, p, labels, shape):
    return vit.loss_and_grads(params, p, labels, shape, 0.1)[0]


def test_gradient_check_every_entry(seed):
    """Central differences of the float64 loss against the backward pass, every entry of
    every parameter of a small model (batch of 3, label smoothing on)."""
    rng = np.random.default_rng(seed)
    params = _random_params(SMALL, rng)
    p, labels = vit.patches(rng.uniform(0, 1, (3, 64))), rng.integers(0, 10, 3)
    _, grads = vit.loss_and_grads(params, p, labels, SMALL, 0.1)
    assert grads.keys() == params.keys()
    for name, value in params.items():
        numeric = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            numeric[i] = _central_difference(params, p, labels, SMALL, name, i)
        assert grads[name].shape == value.shape
        np.testing.assert_allclose(grads[name], numeric, rtol=1e-5,
                                   atol=1e-7 * np.abs(numeric).max(), err_msg=name)


def _central_difference(params, p, labels, shape, name, i):
    """d loss / d params[name][i] by a central difference of step 1e-6."""
    value = params[name]
    old = value[i]
    value[i] = old + 1e-6
    up = _loss(params, p, labels, shape)
    value[i] = old - 1e-6
    down = _loss(params, p, labels, shape)
    value[i] = old
    return (up - down) / 2e-6


def test_gradient_check_default_shape(seed):
    """The same on the workload's shape, three random entries of every parameter."""
    shape = vit.VitShape()
    rng = np.random.default_rng(seed)
    params = _random_params(shape, rng)
    p, labels = vit.patches(rng.uniform(0, 1, (2, 64))), rng.integers(0, 10, 2)
    _, grads = vit.loss_and_grads(params, p, labels, shape, 0.1)
    for name, value in params.items():
        for _ in range(3):
            i = tuple(int(rng.integers(s)) for s in value.shape)
            numeric = _central_difference(params, p, labels, shape, name, i)
            assert abs(grads[name][i] - numeric) <= 1e-6 + 1e-4 * abs(numeric), (name, i)


TINY = dataclasses.replace(vit.TRAIN, epochs=2, batch=32, warmup=1, shape=SMALL)


def test_training_deterministic(seed):
    """Two trainings on a tiny budget give identical parameters, the first with the BLAS on
    one thread, the second on two (training pins it to one); another seed gives others."""
    from threadpoolctl import threadpool_limits

    x_train, _, y_train, _ = vit.split()
    settings = dataclasses.replace(vit.TRAIN, epochs=1, warmup=1)
    runs = []
    for threads in (1, 2):
        with threadpool_limits(threads, user_api="blas"):
            runs.append(vit.train(x_train, y_train, settings, seed))
    (a, loss_a), (b, loss_b) = runs
    assert loss_a == loss_b
    assert all(np.array_equal(a[k], b[k]) for k in a)
    other, _ = vit.train(x_train, y_train, settings, seed + 1)
    assert not np.array_equal(a["head_w"], other["head_w"])


def test_training_lowers_loss(seed):
    """A short budget (6 epochs of the default model and recipe) lowers the training loss
    and beats chance on the test split by far."""
    x_train, x_test, y_train, y_test = vit.split()
    settings = dataclasses.replace(vit.TRAIN, epochs=6, warmup=1)
    params, losses = vit.train(x_train, y_train, settings, seed)
    print("losses", losses)
    assert losses[-1] < losses[0] - 0.5
    assert vit.accuracy(params, x_test, y_test) > 0.5


def test_load_caches(tmp_path, seed):
    settings = dataclasses.replace(TINY, epochs=1)
    first = vit.load(0, settings, cache=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    second = vit.load(0, settings, cache=tmp_path)
    assert second.train_seconds == first.train_seconds
    assert all(np.array_equal(first.params[k], second.params[k]) for k in first.params)
    assert second.float_accuracy == first.float_accuracy
    assert len(first.x_test) == 450 and len(first.x_train) == 1347
    assert vit.cache_key(settings) != vit.cache_key(TINY) != vit.cache_key(TINY, 1)


def test_command_line_refuses_bad_seed(capsys):
    with pytest.raises(SystemExit) as exit_:
        vit.main(["--seed", "-1"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--seed: must be a non-negative integer, got '-1'" in err


def test_quantize_bf16(seed):
    params = vit.init_params(vit.VitShape(), seed)
    q = vit.quantize_bf16(params)
    assert q.keys() == params.keys()
    for k, v in q.items():
        assert v.dtype == np.float32 and v.shape == params[k].shape
        if k.endswith("_w"):
            assert np.array_equal(v, v.astype(ml_dtypes.bfloat16).astype(np.float32))
            assert not np.array_equal(v, params[k])
            assert np.abs(v - params[k]).max() <= np.abs(params[k]).max() * 2 ** -8
        else:
            assert np.array_equal(v, params[k])


def test_forward_bf16_close(seed):
    """The bfloat16 emulation is not the float64 model, but close to it."""
    rng = np.random.default_rng(seed)
    params = {k: v.astype(np.float32) for k, v in _random_params(vit.VitShape(), rng).items()}
    images = rng.uniform(0, 1, (16, 64))
    exact, emulated = vit.forward(params, images), vit.forward_bf16(params, images)
    assert emulated.dtype == np.float32
    error = np.abs(exact - emulated).max() / np.abs(exact).max()
    print(f"relative error {error:.2e}")
    assert 0 < error < 0.05


@pytest.mark.slow
def test_accuracy():
    """The trained workload (trained here unless build/vit holds it): float64 at least 96%
    on the 450 test images, the bfloat16 emulation at least 95% and within 0.5 point."""
    model = vit.load()
    bf16 = vit.accuracy(model.params, model.x_test, model.y_test, model.shape, bf16=True)
    print(f"float {model.float_accuracy:.2%}  bf16 emulation {bf16:.2%}  "
          f"trained in {model.train_seconds:.1f} s")
    assert model.float_accuracy >= 0.96
    assert bf16 >= 0.95 and abs(bf16 - model.float_accuracy) <= 0.005


@pytest.mark.slow
def test_on_the_golden_simulator():
    """The trained ViT compiled for its TensorCore (podium/encoder.py) on the golden ISA
    simulator over the whole test split: at least 95%, within 0.5 point of float64; the
    RTL's bits are the golden simulator's (``make demo ARGS="--model vit"``,
    test_encoder.py)."""
    from podium.runner import run

    model = vit.load()
    program = vit.compile_vit(vit.TENSORCORE, model, model.x_test)
    result, out = run(program)
    assert result.status == "done", (result.error, result.error_pc)
    accuracy = float(np.mean(np.argmax(out["Y"], axis=1) == model.y_test))
    print(f"chip program {accuracy:.2%}  float {model.float_accuracy:.2%}")
    assert accuracy >= 0.95 and abs(accuracy - model.float_accuracy) <= 0.005
