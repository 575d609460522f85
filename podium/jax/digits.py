"""Training the digits MLP (64-32-10, ReLU; podium/workloads/digits.py's data split) from
scratch on the TensorCore through the JAX front end: ``jax.value_and_grad`` of the softmax
cross-entropy and an SGD (or Adam) update, ``steps`` of them in ONE program
(:func:`podium.jax.scan`: the step is the loop body, the weights stay in VMEM, every step's
batch is in HBM and its loss stored back).

    python -m podium.jax.digits [--sim golden|native|verilator] [--epochs 8] [--optimizer adam]
"""

import argparse
import json
import sys
import time
from dataclasses import dataclass

import numpy as np

__all__ = ["Settings", "SETTINGS", "ADAM", "data", "init_params", "forward", "loss",
           "sgd_step", "pod_sgd_step", "adam_step", "adam_rates", "batches", "train",
           "train_pod", "PodTrainResult", "TrainResult", "main"]

HIDDEN, CLASSES, FEATURES = 32, 10, 64


@dataclass(frozen=True)
class Settings:
    batch: int = 64
    lr: float = 0.5
    epochs: int = 8
    seed: int = 0
    optimizer: str = "sgd"


SETTINGS = Settings()
"""The defaults: SGD, batches of 64, learning rate 0.5, 8 epochs of 21 batches (168
steps)."""
ADAM = Settings(lr=0.02, optimizer="adam")
"""Adam (beta1 0.9, beta2 0.999, eps 1e-8), learning rate 0.02, otherwise the defaults."""
BETA1, BETA2, ADAM_EPS = 0.9, 0.999, 1e-8


def data(seed=0):
    """(x_train, x_test, y_train, y_test): the 75/25 split of podium/workloads/digits.py
    (pixels scaled to 0..1, fp32; labels int)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        d.data / 16, d.target, test_size=0.25, random_state=seed)
    return (x_train.astype(np.float32), x_test.astype(np.float32), y_train, y_test)


def init_params(seed=0):
    """He-normal first layer, Glorot-normal-like second, zero biases (numpy, seeded)."""
    rng = np.random.default_rng(seed)
    return {"w1": (rng.standard_normal((FEATURES, HIDDEN)) * np.sqrt(2 / FEATURES))
            .astype(np.float32),
            "b1": np.zeros(HIDDEN, np.float32),
            "w2": (rng.standard_normal((HIDDEN, CLASSES)) * np.sqrt(1 / HIDDEN))
            .astype(np.float32),
            "b2": np.zeros(CLASSES, np.float32)}


def forward(p, x):
    import jax
    h = jax.nn.relu(x @ p["w1"] + p["b1"])
    return h @ p["w2"] + p["b2"]


def loss(p, x, y):
    """Mean softmax cross-entropy of one-hot labels ``y``."""
    import jax
    import jax.numpy as jnp
    return -jnp.mean(jnp.sum(y * jax.nn.log_softmax(forward(p, x)), axis=1))


def sgd_step(lr):
    """``step(params, (x, y)) -> (params, loss)``: one SGD step."""
    import jax

    def step(p, batch):
        value, grads = jax.value_and_grad(loss)(p, *batch)
        return jax.tree.map(lambda w, g: w - lr * g, p, grads), value
    return step


def pod_sgd_step(lr, axis="batch", weights=False, local=None):
    """``step(params, (x, y)) -> (params, loss)`` of ONE chip of a data-parallel pod: the
    gradient of the loss of the chip's shard of the batch, averaged over the chips with
    ``jax.lax.pmean`` over ``axis`` (an fp32 all-reduce, then a multiplication by 1 / chips),
    the loss likewise, and the same SGD update on every chip. ``weights``: each step also
    outputs the new weights (to check them chip by chip, step by step). ``local`` (a number
    of chips): the step without the all-reduce (each chip's own gradient divided by it), to
    measure what the all-reduce costs."""
    import jax

    def mean(v):
        if local:
            return jax.tree.map(lambda g: g * (1 / local), v)
        return jax.lax.pmean(v, axis)

    def step(p, batch):
        value, grads = jax.value_and_grad(loss)(p, *batch)
        grads = mean(grads)
        value = mean(value)
        p = jax.tree.map(lambda w, g: w - lr * g, p, grads)
        return p, ((value, p) if weights else value)
    return step


def adam_step(state, batch):
    """``step((params, m, v), (x, y, lr_t)) -> ((params, m, v), loss)``: one Adam step; the
    moments are carried like the weights (in VMEM across steps, in HBM at the end), the
    bias-corrected rate ``lr_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)`` of step ``t`` is a
    per-step input (:func:`adam_rates`)."""
    import jax
    import jax.numpy as jnp
    p, m, v = state
    x, y, lr_t = batch
    value, g = jax.value_and_grad(loss)(p, x, y)
    m = jax.tree.map(lambda m, g: BETA1 * m + (1 - BETA1) * g, m, g)
    v = jax.tree.map(lambda v, g: BETA2 * v + (1 - BETA2) * g * g, v, g)
    p = jax.tree.map(lambda w, m, v: w - lr_t * m / (jnp.sqrt(v) + ADAM_EPS), p, m, v)
    return (p, m, v), value


def adam_rates(lr, steps):
    t = np.arange(1, steps + 1, dtype=np.float64)
    return (lr * np.sqrt(1 - BETA2 ** t) / (1 - BETA1 ** t)).astype(np.float32)


def batches(x, y, settings):
    """(xs, ys): ``epochs`` shuffled passes (seeded) over the whole batches of the training
    split, stacked ``(steps, batch, ...)``, labels one-hot fp32."""
    rng = np.random.default_rng(settings.seed + 1)
    n = len(x) // settings.batch
    idx = np.concatenate([rng.permutation(len(x))[:n * settings.batch]
                          for _ in range(settings.epochs)]).reshape(-1, settings.batch)
    return x[idx], np.eye(CLASSES, dtype=np.float32)[y[idx]]


@dataclass
class TrainResult:
    params: dict            # final weights from the chip
    losses: np.ndarray      # every step's loss, from the chip
    counters: dict
    accuracy: float         # test accuracy of the chip's weights (fp32 forward on the host)
    ref_params: dict        # jax on CPU, fp32, the same steps
    ref_losses: np.ndarray
    ref_accuracy: float
    steps: int
    program: object
    seconds: float


def accuracy(p, x, y):
    return float(np.mean(np.argmax(np.asarray(forward(p, x)), axis=1) == y))


def train(settings=SETTINGS, sim="golden", config=None, steps=None, **options):
    """Train on ``sim`` (and in jax on CPU for reference); ``steps`` (default: every batch
    of ``settings.epochs`` epochs) the first steps only."""
    import jax

    from . import scan
    x_train, x_test, y_train, y_test = data(settings.seed)
    xs, ys = batches(x_train, y_train, settings)
    if steps is not None:
        xs, ys = xs[:steps], ys[:steps]
    p0 = init_params(settings.seed)
    if settings.optimizer == "sgd":
        step, init, data_in = sgd_step(settings.lr), p0, (xs, ys)
    elif settings.optimizer == "adam":
        zeros = {k: np.zeros_like(v) for k, v in p0.items()}
        step, init = adam_step, (p0, zeros, zeros)
        data_in = (xs, ys, adam_rates(settings.lr, len(xs)))
    else:
        raise ValueError(f"optimizer must be sgd or adam, got {settings.optimizer!r}")
    t0 = time.time()
    params, losses, counters = scan(step, init, data_in, sim=sim, config=config, **options)
    seconds = time.time() - t0
    program = scan.last.program
    ref_params, ref_losses = jax.lax.scan(step, init, data_in)
    if settings.optimizer == "adam":
        params, ref_params = params[0], ref_params[0]
    ref_params = {k: np.asarray(v) for k, v in ref_params.items()}
    return TrainResult(params, np.asarray(losses), counters,
                       accuracy(params, x_test, y_test), ref_params, np.asarray(ref_losses),
                       accuracy(ref_params, x_test, y_test), len(xs), program, seconds)


@dataclass
class PodTrainResult:
    pod: str
    params: dict            # final weights of chip 0 (every chip's are checked equal)
    losses: np.ndarray      # every step's all-reduced loss, chip 0
    chips_identical: bool   # every chip's weights bit-identical after every step (and losses)
    step_weights: list      # per chip: {name: (steps, ...)} weights after every step, or None
    accuracy: float
    counters: dict
    steps: int
    program: object
    seconds: float


def train_pod(settings=SETTINGS, pod="2x2", steps=None, weights=False, seed=None):
    """Data-parallel SGD training on a pod (the golden pod simulator): each step's batch of
    ``settings.batch`` split over the chips, :func:`pod_sgd_step` on every chip.
    ``weights``: every step's weights stored too and compared chip by chip."""
    from . import pod_scan
    if settings.optimizer != "sgd":
        raise ValueError("train_pod trains with SGD (optimizer 'sgd')")
    x_train, x_test, y_train, y_test = data(settings.seed)
    xs, ys = batches(x_train, y_train, settings)
    if steps is not None:
        xs, ys = xs[:steps], ys[:steps]
    p0 = init_params(settings.seed)
    t0 = time.time()
    params, out, counters = pod_scan(pod_sgd_step(settings.lr, weights=weights), p0,
                                     (xs, ys), pod=pod, seed=seed)
    seconds = time.time() - t0
    chips = pod_scan.chips
    same = all(all(np.array_equal(params[k], c[0][k]) for k in params) for c in chips)
    losses = out[0] if weights else out
    same = same and all(np.array_equal(losses, c[1][0] if weights else c[1]) for c in chips)
    step_weights = None
    if weights:
        step_weights = [c[1][1] for c in chips]
        same = same and all(np.array_equal(step_weights[0][k], w[k])
                            for w in step_weights for k in w)
    return PodTrainResult(str(pod), params, np.asarray(losses), same, step_weights,
                          accuracy(params, x_test, y_test), counters, len(xs),
                          pod_scan.last.program, seconds)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m podium.jax.digits",
                                 description="train the digits MLP on the TensorCore")
    ap.add_argument("--sim", default="golden", choices=("golden", "native", "verilator"),
                    help="golden (the ISA simulator), native (the RTL chip, Verilated with a "
                         "C++ testbench: the fast path), verilator (the RTL chip under cocotb)")
    ap.add_argument("--epochs", type=int, default=SETTINGS.epochs)
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adam"),
                    help="sgd (learning rate 0.5) or adam (0.02)")
    ap.add_argument("--steps", type=int, default=None, help="only the first steps")
    ap.add_argument("--json", help="write the result's figures to this file")
    ap.add_argument("--pod", choices=("2x2", "1x4"), default=None,
                    help="data-parallel SGD on this pod of four chips (golden pod simulator)")
    a = ap.parse_args(argv)
    if a.epochs < 1 or (a.steps is not None and a.steps < 1):
        print("podium.jax.digits: --epochs and --steps must be at least 1", file=sys.stderr)
        return 2
    s = Settings(epochs=a.epochs, optimizer=a.optimizer,
                 lr=ADAM.lr if a.optimizer == "adam" else SETTINGS.lr)
    if a.pod is not None:
        if a.optimizer != "sgd" or a.sim != "golden":
            print("podium.jax.digits: --pod trains with --optimizer sgd on --sim golden",
                  file=sys.stderr)
            return 2
        r = train_pod(s, pod=a.pod, steps=a.steps)
        facts = {"pod": a.pod, "steps": r.steps, "batch": s.batch, "lr": s.lr,
                 "first_loss": float(r.losses[0]), "last_loss": float(r.losses[-1]),
                 "test_accuracy": r.accuracy, "chips_identical": r.chips_identical,
                 "instructions": len(r.program.words), "seconds": round(r.seconds, 1)}
        print_facts(facts, a.json)
        return 0
    r = train(s, sim=a.sim, steps=a.steps)
    diff = max(float(np.max(np.abs(r.params[k] - r.ref_params[k]))) for k in r.params)
    facts = {"steps": r.steps, "batch": s.batch, "optimizer": s.optimizer, "lr": s.lr,
             "sim": a.sim,
             "first_loss": float(r.losses[0]), "last_loss": float(r.losses[-1]),
             "max_loss_diff_vs_jax": float(np.max(np.abs(r.losses - r.ref_losses))),
             "max_weight_diff_vs_jax": diff, "test_accuracy": r.accuracy,
             "jax_test_accuracy": r.ref_accuracy, "instructions": len(r.program.words),
             "seconds": round(r.seconds, 1),
             "counters": {k: v for k, v in r.counters.items() if isinstance(v, int | float)}}
    print_facts(facts, a.json)
    return 0


def print_facts(facts, path=None):
    """Print a command's ``facts`` as JSON, and write them to ``path`` when given."""
    print(json.dumps(facts, indent=1))
    if path:
        with open(path, "w") as f:
            json.dump(facts, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
