"""``make bench training``: training steps compiled by the JAX front end (docs/jax.md).
Writes docs/results/training.{json,md} and training.png (the loss curves).

- **Step phases** (RTL): a training step of the digits MLP (podium/jax/digits.py: batch 64,
  64-32-10, softmax cross-entropy, SGD) on the RTL chip (the native path, sim/native.py: the
  cocotb run's cycles; the ViT's TensorCore): cycles per step split into forward, backward
  and optimizer, the MXU's utilization in the backward GEMMs, and the cycle model's
  prediction (podium/cycles.py ``timeline``) of every program next to the RTL's. Each part is
  a program of its own, run for 1 and for 3 steps in one loop: the per-step figures are the
  difference over 2 steps (so the loads of constants and weights before the loop and the
  stores after it drop out). Forward: the loss only. Forward + backward: the loss and
  ``jax.grad`` (the gradients carried, so stored once). Step: the SGD update too. Backward =
  (forward + backward) - forward; optimizer = step - (forward + backward).
- **ViT step** (RTL): the ViT's SGD step (podium/jax/vit.py) for 1 and 3 steps, likewise.
- **Trained on the RTL**: the 168 SGD steps of the digits MLP from scratch on the RTL chip,
  every loss and the final weights compared bit for bit with the golden simulator's.
- **Golden**: the trainings on the golden simulator against jax on CPU (fp32): SGD and Adam
  (168 steps each), data parallel on the 2x2 and 1x4 pods (the golden pod simulator).
- **Pod step phases** (RTL pod and golden pod): the data-parallel SGD step
  (podium/jax/digits.py ``pod_sgd_step``: 16 samples per chip, ``jax.lax.pmean``) on the 2x2
  pod, split like the chip's step: forward, forward + backward, the step without the
  all-reduce (``local=4``: each chip's own gradient) and the step; per step from 1 and 3
  steps of each program on the RTL pod (sim/pod_native.py, chip 0's cycle counter), each
  run checked bit for bit against the golden pod simulator (podium/podsim.py: instructions
  retired, no cycles). The model: the chip's timeline (podium/cycles.py) with the ICI queue
  played, each ``ici.coll`` costing the collectives' alpha-beta model (sim/collectives_model.py
  over the golden model's schedule, verification/models/collectives.py) at the alpha and
  injection rate the collectives bench fitted (docs/results/collectives.json, 1x4
  all-reduce), the injection scaled from that bench's 128-bit flits to the pod's. ``python -m
  sim.training_perf --pod`` re-runs these rows alone (merged into the page's JSON).
- **The ViT at its full size** (RTL): the transformer issue's shape (podium/jax/vit.py
  ``FULL`` on ``FULL_CONFIG``, 2 MiB of VMEM), a step longer than the instruction memory run
  as segments (docs/jax.md, "Segments"): one step on the RTL bit for bit against the golden
  simulator, its cycles beside the timeline of each segment added up, and three steps on the
  golden simulator against jax. ``python -m sim.training_perf --vit-full`` re-runs it alone.
"""

import json
import sys
import time

import numpy as np

from .measure import environment, environment_line, results_directory, table, write_results

__all__ = ["bench", "render", "PAGE", "PARTS", "BACKWARD_MACS"]

PAGE = "training"
PARTS = ("forward", "forward_backward", "step")
STEPS = (1, 3)
BATCH, FEATURES, HIDDEN, CLASSES = 64, 64, 32, 10
FORWARD_MACS = BATCH * FEATURES * HIDDEN + BATCH * HIDDEN * CLASSES
BACKWARD_MACS = (HIDDEN * BATCH * CLASSES          # dW2 = h^T @ dlogits
                 + BATCH * CLASSES * HIDDEN        # dh = dlogits @ W2^T
                 + FEATURES * BATCH * HIDDEN)      # dW1 = x^T @ dh
"""Multiply-accumulates of the backward GEMMs of a step (no gradient of the input)."""
COUNTERS = ("cycles", "mxu_busy", "vpu_busy", "dma_busy", "mxu_vectors", "retired")
MODEL = ("model_cycles", "model_mxu", "model_vpu", "model_dma", "model_vectors")
"""The timeline's figures of a program: cycles, MXU streaming cycles, VPU busy cycles, DMA
transfer cycles, MXU vectors (the RTL's ``cycles``, ``mxu_busy``, ``vpu_busy``, ``dma_busy``,
``mxu_vectors``)."""
SIM = "native"


def _part(name):
    """(step function, carry of it given the weights)."""
    import jax

    from podium.jax import digits as jd

    if name == "forward":
        return (lambda p, b: (p, jd.loss(p, *b))), (lambda p: p)
    if name == "forward_backward":
        def fb(state, b):
            p, _ = state
            value, g = jax.value_and_grad(jd.loss)(p, *b)
            return (p, g), value
        return fb, (lambda p: (p, {k: np.zeros_like(v) for k, v in p.items()}))
    return jd.sgd_step(jd.SETTINGS.lr), (lambda p: p)


def _model(program, ici=None):
    from podium.cycles import timeline
    t = timeline(program, ici=ici)
    return {"model_cycles": t.cycles, "model_mxu": t.mxu_cycles, "model_vpu": t.vpu_busy,
            "model_dma": t.dma_cycles, "model_vectors": t.vectors, "model_ici": t.ici_cycles}


def _row(program, counters, **extra):
    return {**extra, "instructions": len(program.words),
            "operations": program.metadata["operations"],
            **{k: int(counters.get(k, 0)) for k in COUNTERS},
            "run_seconds": float(counters.get("run_seconds", 0.0)), **_model(program)}


def _measure(name, steps, sim):
    import jax

    from podium.jax import digits as jd
    from podium.jax import scan

    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    fn, carry = _part(name)
    p0 = jd.init_params(0)
    _, losses, counters = scan(fn, carry(p0), (xs[:steps], ys[:steps]), sim=sim)
    _, ref = jax.lax.scan(fn, carry(p0), (xs[:steps], ys[:steps]))
    diff = float(np.max(np.abs(np.asarray(losses) - np.asarray(ref))))
    return _row(scan.last.program, counters, part=name, steps=steps,
                max_loss_diff_vs_jax=diff)


def _vit(steps, sim):
    from podium.jax import vit as jv
    r = jv.train(steps=steps, sim=sim)
    gold = jv.train(steps=steps)
    same = bool(np.array_equal(r.losses.view(np.uint32), gold.losses.view(np.uint32)) and all(
        np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))
        for a, b in zip(_leaves(r.params), _leaves(gold.params), strict=True)))
    return _row(r.program, r.counters, part="vit_step", steps=steps,
                max_loss_diff_vs_jax=float(np.max(np.abs(r.losses - r.ref_losses))),
                max_weight_diff_vs_jax=jv.max_weight_diff(r.params, r.ref_params),
                bit_exact_with_golden=same, losses=[float(v) for v in r.losses],
                jax_losses=[float(v) for v in r.ref_losses])


POD = "2x2"
POD_PARTS = ("forward", "forward_backward", "local", "step")
"""The pod's programs: the chip's forward and forward + backward on its 16 samples, the SGD
step without the all-reduce (``pod_sgd_step(local=4)``) and the data-parallel step."""


def collective_network(podc):
    """``(cost, facts)``: the cycles of one ``ici.coll`` of ``podc`` (a function of the golden
    simulator's arguments, for ``podium.cycles.timeline(..., ici=cost)``) by the collectives'
    alpha-beta model, and the figures it uses with their sources."""
    from sim.collectives_model import Network, schedule_time
    from spec.protocol import Collective, IciFmt
    from verification.models.collectives import all_reduce_2d_schedule, all_reduce_schedule

    from .measure import RESULTS
    fitted = json.loads((RESULTS / "collectives.json").read_text())["tables"]["alpha_beta"]
    ab = next(r for r in fitted if r["topology"] == "1x4" and r["collective"] == "all_reduce")
    flit = podc.nic.flit_bytes
    inject = ab["bytes_per_cycle"] / ab["link_bytes_per_cycle"] * flit
    dims = tuple(podc.ici.dims)
    gdims = dims if len(dims) == 2 else (1, dims[0])
    net = Network(dims=gdims, alpha=ab["alpha_cycles"], per_hop=ab["per_hop_cycles"],
                  link_bw=flit, inject_bw=inject)
    grain = flit // 4

    def cost(a):
        if a["fmt"] != IciFmt.FP32:
            raise ValueError(f"the model plays fp32 collectives only, got {a['fmt'].name}")
        if a["coll"] == Collective.ALL_REDUCE_2D:
            steps = all_reduce_2d_schedule(gdims, a["length"], grain)
        elif a["coll"] == Collective.ALL_REDUCE:
            steps = all_reduce_schedule(gdims, a["dim"] + (len(dims) == 1), a["length"], grain)
        else:
            raise ValueError(f"the model plays all-reduces only, got {a['coll'].name}")
        return schedule_time(net, steps, "fp32")

    facts = {"alpha_cycles": ab["alpha_cycles"], "per_hop_cycles": ab["per_hop_cycles"],
             "link_bytes_per_cycle": flit, "inject_bytes_per_cycle": round(inject, 2),
             "fitted_on": "docs/results/collectives.json alpha_beta, 1x4 all_reduce "
                          f"({ab['bytes_per_cycle']} B/cycle on {ab['link_bytes_per_cycle']}"
                          "-byte flits)"}
    return cost, facts


def _pod_fn(part):
    from podium.jax import digits as jd
    if part in ("forward", "forward_backward"):
        return _part(part)
    lr = jd.SETTINGS.lr
    return (jd.pod_sgd_step(lr, local=4) if part == "local" else jd.pod_sgd_step(lr)), \
        (lambda p: p)


def _pod_measure(part, steps, sim):
    """One pod program for ``steps`` steps on ``sim`` and on the golden pod simulator:
    chip 0's counters, the model's cycles, and whether the runs agree bit for bit."""
    import jax

    from podium.jax import digits as jd
    from podium.jax import pod_scan

    x_train, _, y_train, _ = jd.data(jd.SETTINGS.seed)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    fn, carry = _pod_fn(part)
    init = carry(jd.init_params(jd.SETTINGS.seed))
    data = (xs[:steps], ys[:steps])
    t0 = time.time()
    pod_scan(fn, init, data, pod=POD, sim=sim)
    seconds = time.time() - t0
    rtl = [jax.tree.leaves(c) for c in pod_scan.chips]
    counters, program = pod_scan.counters[0], pod_scan.last.program
    podc = _rtl_pod()
    pod_scan(fn, init, data, pod=podc, sim="golden")
    gold = [jax.tree.leaves(c) for c in pod_scan.chips]
    golden_retired = int(pod_scan.counters[0].get("retired", 0))

    def bits(leaves):
        return [np.asarray(v, np.float32).view(np.uint32) for v in leaves]
    same = all(np.array_equal(a, b) for r, g in zip(rtl, gold, strict=True)
               for a, b in zip(bits(r), bits(g), strict=True))
    identical = all(np.array_equal(a, b) for r in rtl[1:]
                    for a, b in zip(bits(r), bits(rtl[0]), strict=True))
    cost, _ = collective_network(podc)
    return {"part": part, "steps": steps, "instructions": len(program.words),
            **{k: int(counters.get(k, 0)) for k in COUNTERS},
            "golden_retired": golden_retired, "bit_exact_with_golden": bool(same),
            "chips_identical": bool(identical), "run_seconds": round(seconds, 1),
            **_model(program, ici=cost),
            "collectives": sum(1 for w in program.words if _is_coll(w))}


def _rtl_pod():
    """The pod (a PodConfig) of the RTL pod's runs: what ``pod_scan(sim="native")`` builds
    for ``POD``; the golden pod simulator runs it too."""
    from podium.jax import PODS, pod_config
    return pod_config(PODS[POD], memory="hbm")


def _is_coll(word):
    from spec.isa import Op, decode
    return decode(word)[0] == Op.ICI_COLL


FULL_STEPS = 3
"""Steps of the full-size ViT on the golden simulator (against jax); the RTL runs one."""


def _segments_model(program):
    """The timeline's figures of a program in segments: each segment played alone (it
    starts with every engine idle, as the host restarts it), added up."""
    from podium.cycles import timeline
    ts = [timeline(seg) for seg in program.segments()]
    return {"model_cycles": sum(t.cycles for t in ts),
            "model_vectors": sum(t.vectors for t in ts)}


def _vit_full(sim):
    """The transformer issue's ViT (width 64, 4 heads, 2 blocks) in segments: one step on
    ``sim`` against the golden simulator bit for bit, FULL_STEPS on golden against jax."""
    from podium.jax import vit as jv
    gold = jv.train(steps=FULL_STEPS, shape=jv.FULL, config=jv.FULL_CONFIG)
    one = jv.train(steps=1, shape=jv.FULL, config=jv.FULL_CONFIG)
    r = jv.train(steps=1, sim=sim, shape=jv.FULL, config=jv.FULL_CONFIG)
    same = bool(np.array_equal(r.losses.view(np.uint32), one.losses.view(np.uint32)) and all(
        np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))
        for a, b in zip(_leaves(r.params), _leaves(one.params), strict=True)))
    meta = r.program.metadata
    return {"shape": {"dim": jv.FULL.dim, "heads": jv.FULL.heads, "mlp": jv.FULL.mlp,
                      "blocks": jv.FULL.blocks},
            "vmem_bytes": jv.FULL_CONFIG.vmem_bytes, "imem_depth": jv.FULL_CONFIG.imem_depth,
            "instructions": len(r.program.words), "segments": meta["segments"],
            "operations": meta["operations"], "vmem_rows": meta["vmem_rows"],
            "scratch_bytes": meta["scratch"]["bytes"],
            "stored_rows": [sum(n for _, n in c["stored"]) for c in meta["scratch"]["cuts"]],
            "loaded_rows": [sum(n for _, n in c["loaded"]) for c in meta["scratch"]["cuts"]],
            "bytes_read_golden": int(one.counters.get("bytes_read", 0)),
            "bytes_written_golden": int(one.counters.get("bytes_written", 0)),
            **{k: int(r.counters.get(k, 0)) for k in COUNTERS},
            "run_seconds": float(r.counters.get("run_seconds", 0.0)),
            "run_cpu_seconds": float(r.counters.get("run_cpu_seconds", 0.0)),
            "simulated_cycles": int(r.counters.get("simulated_cycles", 0)),
            "runs": int(r.counters.get("segments", 0)),
            **_segments_model(r.program), "bit_exact_with_golden": same,
            "loss": float(r.losses[0]), "golden_steps": FULL_STEPS,
            "golden_losses": [float(v) for v in gold.losses],
            "jax_losses": [float(v) for v in gold.ref_losses],
            "max_loss_diff_vs_jax": float(np.max(np.abs(gold.losses - gold.ref_losses))),
            "max_weight_diff_vs_jax": jv.max_weight_diff(gold.params, gold.ref_params),
            "golden_seconds": round(gold.seconds, 1)}


def _leaves(tree):
    import jax
    return jax.tree.leaves(tree)


def _weight_diff(a, b):
    return max(float(np.max(np.abs(np.asarray(a[k]) - np.asarray(b[k])))) for k in a)


def _golden(steps=None):
    """The trainings on the golden simulator against jax (and the pods against one chip)."""
    from podium.jax import digits as jd
    rows, results = [], {}
    for name, settings in (("sgd", jd.SETTINGS), ("adam", jd.ADAM)):
        r = jd.train(settings, steps=steps)
        results[name] = r
        rows.append({"run": name, "steps": r.steps, "lr": settings.lr,
                     "instructions": len(r.program.words),
                     "first_loss": float(r.losses[0]), "jax_first_loss": float(r.ref_losses[0]),
                     "last_loss": float(r.losses[-1]), "jax_last_loss": float(r.ref_losses[-1]),
                     "max_loss_diff_vs_jax": float(np.max(np.abs(r.losses - r.ref_losses))),
                     "max_weight_diff_vs_jax": _weight_diff(r.params, r.ref_params),
                     "test_accuracy": r.accuracy, "jax_test_accuracy": r.ref_accuracy,
                     "seconds": round(r.seconds, 1),
                     "losses": [float(v) for v in r.losses],
                     "jax_losses": [float(v) for v in r.ref_losses]})
    one = results["sgd"]
    for pod in ("2x2", "1x4"):
        r = jd.train_pod(pod=pod, steps=steps)
        rows.append({"run": f"pod {pod}", "steps": r.steps, "lr": jd.SETTINGS.lr,
                     "instructions": len(r.program.words),
                     "first_loss": float(r.losses[0]), "last_loss": float(r.losses[-1]),
                     "max_loss_diff_vs_one_chip": float(np.max(np.abs(r.losses - one.losses))),
                     "max_weight_diff_vs_one_chip": _weight_diff(r.params, one.params),
                     "steps_bit_equal_to_one_chip": int(np.sum(
                         r.losses.view(np.uint32) == one.losses.view(np.uint32))),
                     "chips_identical": bool(r.chips_identical),
                     "test_accuracy": r.accuracy, "seconds": round(r.seconds, 1)})
    return rows, one


def _rtl_training(gold, steps=None):
    """The digits MLP's SGD training on the RTL (every step), against the golden run."""
    from podium.jax import digits as jd
    r = jd.train(sim=SIM, steps=steps)
    same_losses = bool(np.array_equal(r.losses.view(np.uint32), gold.losses.view(np.uint32)))
    same_weights = all(np.array_equal(r.params[k].view(np.uint32), gold.params[k].view(np.uint32))
                       for k in gold.params)
    return {"steps": r.steps, "instructions": len(r.program.words),
            "losses_bit_exact": same_losses, "weights_bit_exact": bool(same_weights),
            "test_accuracy": r.accuracy, "golden_test_accuracy": gold.accuracy,
            "first_loss": float(r.losses[0]), "last_loss": float(r.losses[-1]),
            **{k: int(r.counters.get(k, 0)) for k in COUNTERS},
            "run_seconds": float(r.counters.get("run_seconds", 0.0)),
            "run_cpu_seconds": float(r.counters.get("run_cpu_seconds", 0.0))}


def _plot(golden, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 4))
    for row in golden:
        if "losses" in row:
            ax.plot(np.arange(1, row["steps"] + 1), row["losses"],
                    label=f"{row['run'].upper()}, golden simulator")
            ax.plot(np.arange(1, row["steps"] + 1), row["jax_losses"], ":",
                    label=f"{row['run'].upper()}, jax on CPU (fp32)")
    ax.set_xlabel("step (batch 64)")
    ax.set_ylabel("training loss (cross-entropy)")
    ax.set_yscale("log")
    ax.set_title("Digits MLP trained from scratch through the JAX front end")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def bench(quick=False):
    """Every part for 1 and 3 steps on the RTL, the ViT's step, the digits MLP trained on the
    RTL and the golden trainings; writes docs/results/training.{json,md,png}."""
    runs = [_measure(name, steps, SIM) for name in PARTS for steps in STEPS]
    vit = [_vit(steps, SIM) for steps in STEPS]
    steps = 6 if quick else None
    golden, one = _golden(steps)
    rtl = _rtl_training(one, steps)
    pod = [_pod_measure(part, n, SIM) for part in POD_PARTS for n in STEPS]
    vit_full = [_vit_full(SIM)]
    env = environment()
    write_results(PAGE, {"runs": runs, "vit": vit, "golden": golden, "pod": pod,
                         "vit_full": vit_full}, env, render,
                  quick, steps=list(STEPS), backward_macs=BACKWARD_MACS,
                  forward_macs=FORWARD_MACS, lanes=16, sim=SIM, rtl_training=rtl,
                  pod_network=collective_network(_rtl_pod())[1], pod_environment=env,
                  vit_full_environment=env)
    _plot(golden, results_directory(quick) / f"{PAGE}.png")
    return runs


def bench_part(part):
    """Re-run one part alone (``python -m sim.training_perf --pod`` or ``--vit-full``): the
    page's JSON keeps its other tables, the part's rows get their own environment line."""
    from .measure import dumps, wrote
    path = results_directory() / f"{PAGE}.json"
    data = json.loads(path.read_text())
    if part == "pod":
        data["tables"]["pod"] = [_pod_measure(p, n, SIM) for p in POD_PARTS for n in STEPS]
        data["pod_network"] = collective_network(_rtl_pod())[1]
    else:
        data["tables"]["vit_full"] = [_vit_full(SIM)]
    data[f"{part}_environment"] = environment()
    path.write_text(dumps(data))
    page = path.with_suffix(".md")
    page.write_text(render(json.loads(path.read_text())))
    print(page.read_text())
    wrote(page, path)


def _per_step(rows, keys):
    """Part -> key -> per-step value (the difference between the runs over the extra
    steps)."""
    by = {(r["part"], r["steps"]): r for r in rows}
    lo, hi = sorted({r["steps"] for r in rows})
    return {p: {k: (by[(p, hi)][k] - by[(p, lo)][k]) / (hi - lo) for k in keys}
            for p in {r["part"] for r in rows}}


def _ratio(model, rtl):
    return f"{model / rtl:.3f}" if rtl else "-"


def _phase_cells(name, v, step, units):
    """A phase's first cells: its name, RTL and model cycles, their ratio, its share of the
    ``step``, then RTL / model busy cycles of each of ``units``."""
    return [name, f"{v['cycles']:,.0f}", f"{v['model_cycles']:,.0f}",
            _ratio(v["model_cycles"], v["cycles"]), f"{100 * v['cycles'] / step['cycles']:.1f}%",
            *(f"{v[u + '_busy']:,.0f} / {v['model_' + u]:,.0f}" for u in units)]


def render(data):
    """The results page (markdown) of the benchmark's JSON ``data``."""
    keys = COUNTERS + MODEL
    per = _per_step(data["tables"]["runs"], keys)
    f, fb, s = per["forward"], per["forward_backward"], per["step"]
    phases = {"forward": f, "backward": {k: fb[k] - f[k] for k in keys},
              "optimizer": {k: s[k] - fb[k] for k in keys}, "step": s}
    slots = 16 * 16
    bw = phases["backward"]
    util_busy = data["backward_macs"] / (bw["mxu_busy"] * slots)
    util_cycles = data["backward_macs"] / (bw["cycles"] * slots)
    fill = data["backward_macs"] / (bw["mxu_vectors"] * slots)
    rows = [[*_phase_cells(name, v, s, ("mxu", "vpu", "dma")),
             f"{v['mxu_vectors']:,.0f}", f"{v['retired']:,.0f}"]
            for name, v in phases.items()]
    runs = [[r["part"], r["steps"], f"{r['cycles']:,}", f"{r['model_cycles']:,}",
             _ratio(r["model_cycles"], r["cycles"]), r["instructions"], r["operations"],
             f"{r['max_loss_diff_vs_jax']:.2g}", f"{r['run_seconds']:.0f}"]
            for r in [*data["tables"]["runs"], *data["tables"]["vit"]]]
    vit = _per_step(data["tables"]["vit"], keys)["vit_step"]
    v3 = max(data["tables"]["vit"], key=lambda r: r["steps"])
    rt = data["rtl_training"]
    gold = {g["run"]: g for g in data["tables"]["golden"]}
    sgd, adam = gold["sgd"], gold["adam"]
    pods = [g for g in data["tables"]["golden"] if g["run"].startswith("pod")]
    golden_rows = [
        ["first loss", f"{sgd['first_loss']:.4f} (jax {sgd['jax_first_loss']:.4f})",
         f"{adam['first_loss']:.4f} (jax {adam['jax_first_loss']:.4f})"],
        ["last loss", f"{sgd['last_loss']:.4f} (jax {sgd['jax_last_loss']:.4f})",
         f"{adam['last_loss']:.4f} (jax {adam['jax_last_loss']:.4f})"],
        ["largest loss difference vs jax", f"{sgd['max_loss_diff_vs_jax']:.2g}",
         f"{adam['max_loss_diff_vs_jax']:.2g}"],
        ["largest final-weight difference vs jax", f"{sgd['max_weight_diff_vs_jax']:.2g}",
         f"{adam['max_weight_diff_vs_jax']:.2g}"],
        ["test accuracy", f"{100 * sgd['test_accuracy']:.1f}% (jax "
                          f"{100 * sgd['jax_test_accuracy']:.1f}%)",
         f"{100 * adam['test_accuracy']:.1f}% (jax {100 * adam['jax_test_accuracy']:.1f}%)"],
        ["instructions", sgd["instructions"], adam["instructions"]],
        ["simulation s", f"{sgd['seconds']:.0f}", f"{adam['seconds']:.0f}"],
    ]
    pod_rows = [[p["run"], p["steps"], f"{p['first_loss']:.7f}", f"{p['last_loss']:.4f}",
                 f"{p['max_loss_diff_vs_one_chip']:.2g}",
                 f"{p['max_weight_diff_vs_one_chip']:.2g}",
                 f"{p['steps_bit_equal_to_one_chip']} of {p['steps']}",
                 "yes" if p["chips_identical"] else "NO",
                 f"{100 * p['test_accuracy']:.1f}%", f"{p['seconds']:.0f}"] for p in pods]
    exact = "bit-exact" if rt["losses_bit_exact"] and rt["weights_bit_exact"] else \
        "NOT bit-exact"
    return "\n".join([
        "# Training on the chip (JAX front end)", "",
        f"Measured by `make bench training` on {environment_line(data['environment'])}.", "",
        "## The digits MLP trained on the RTL chip", "",
        f"{rt['steps']} SGD steps of the digits MLP (podium/jax/digits.py: batch 64, "
        "64-32-10 ReLU, softmax cross-entropy, `jax.value_and_grad`, learning rate 0.5) from "
        f"scratch in one program of {rt['instructions']} instructions on the RTL chip (the "
        f"native path, sim/native.py; the ViT's TensorCore: 16 x 16 bfloat16 MXU): every "
        f"step's loss and the final weights **{exact}** with the golden simulator; test "
        f"accuracy **{100 * rt['test_accuracy']:.1f}%** (golden "
        f"{100 * rt['golden_test_accuracy']:.1f}%); loss {rt['first_loss']:.4f} at the first "
        f"step, {rt['last_loss']:.4f} at the last; {rt['cycles']:,} cycles "
        f"({rt['cycles'] / rt['steps']:,.0f} per step with the loads and stores around the "
        f"loop), simulated in {rt['run_seconds']:.0f} s ({rt['run_cpu_seconds']:.0f} CPU s, "
        f"{rt['cycles'] / max(rt['run_cpu_seconds'], 1e-9):,.0f} cycles per CPU second).", "",
        "## Step phases on the RTL and the cycle model", "",
        "The same step lowered by the JAX front end (docs/jax.md). Each part is its own "
        f"program run for {data['steps'][0]} and {data['steps'][1]} steps of its loop; per "
        "step: the difference over the extra steps. Backward = (forward + backward) - "
        "forward, optimizer = step - (forward + backward). The schedule is sequential (one "
        "engine at a time), so the phases add up; the programs differ a little besides (the "
        "forward + backward one copies its gradients into their carried buffers every step, "
        "the step program does not): the small negative entries. Model: the engine "
        "timeline of podium/cycles.py (`timeline`, docs/tensorcore.md \"Cycle model\") of "
        "the same programs; engine columns: RTL / model (MXU busy against the model's "
        "streaming cycles, VPU busy, DMA busy against its transfer cycles).", "",
        table(["phase", "cycles per step", "model", "model / RTL", "share",
               "MXU busy", "VPU busy", "DMA busy", "MXU vectors", "instructions"], rows), "",
        f"Backward GEMMs (dW2 = h^T dlogits, dh = dlogits W2^T, dW1 = x^T dh): "
        f"{data['backward_macs']:,} multiply-accumulates per step. MXU utilization: "
        f"{100 * util_busy:.1f}% of the MAC slots of the cycles the MXU is busy in the "
        f"backward phase, {100 * fill:.1f}% of the slots of the vectors it streams (the rest "
        f"is padding: every `matmul` is m x 16 x 16, the 10 classes fill 10 of 16 lanes), "
        f"{100 * util_cycles:.1f}% of the backward phase's cycles.", "",
        "## The ViT's training step", "",
        "The ViT of podium/workloads/vit.py at width 16 (2 heads of 8, MLP 32, one block; "
        "podium/jax/vit.py), one image per step, `jax.value_and_grad` of the cross-entropy "
        "(the backward of attention, softmax, LayerNorm and GELU) and SGD: "
        f"{vit['cycles']:,.0f} cycles per step on the RTL, model {vit['model_cycles']:,.0f} "
        f"({_ratio(vit['model_cycles'], vit['cycles'])}); {v3['instructions']} instructions; "
        f"{v3['steps']} steps "
        f"{'bit-exact' if v3['bit_exact_with_golden'] else 'NOT bit-exact'} with the golden "
        f"simulator (losses and weights); losses "
        f"{', '.join(f'{x:.4f}' for x in v3['losses'])} (jax fp32 "
        f"{', '.join(f'{x:.4f}' for x in v3['jax_losses'])}).", "",
        "## Runs", "",
        table(["part", "steps", "cycles", "model", "model / RTL", "instructions",
               "operations", "max loss difference vs jax fp32", "simulation s"], runs), "",
        "## On the golden simulator", "",
        f"The digits MLP's {sgd['steps']} steps (8 epochs of 21 batches of 64) on the golden "
        "ISA simulator against jax on CPU in fp32 (the same steps): SGD (learning rate "
        f"{sgd['lr']}) and Adam (learning rate {adam['lr']}, the moments carried in VMEM). "
        "Loss curves: [training.png](training.png).", "",
        table(["", "SGD", "Adam"], golden_rows), "",
        "Data parallel (`pod_scan`, the golden pod simulator): the SGD step on four chips, "
        "16 samples each, gradients and loss all-reduced in fp32 (`jax.lax.pmean`), against "
        "one chip on the full batch:", "",
        table(["pod", "steps", "first loss", "last loss", "largest loss difference",
               "largest final-weight difference", "losses bit-equal", "chips identical",
               "test accuracy", "simulation s"], pod_rows), "",
        *_render_pod(data),
        *_render_vit_full(data),
    ])


def _cut_bytes(v):
    """HBM bytes the cuts of the full-size ViT's step move: the live rows stored and loaded
    back, the constants reloaded by every segment after the first."""
    rows = sum(v["stored_rows"]) + sum(v["loaded_rows"]) + \
        v["vmem_rows"]["constants"] * len(v["loaded_rows"])
    return rows * 64


def _render_vit_full(data):
    """The section of the full-size ViT (none in a JSON written before it existed)."""
    rows = data["tables"].get("vit_full")
    if not rows:
        return []
    v = rows[0]
    sh = v["shape"]
    env = environment_line(data["vit_full_environment"])
    exact = "bit-exact" if v["bit_exact_with_golden"] else "NOT bit-exact"
    rel = max(abs(a - b) / max(1, abs(b))
              for a, b in zip(v["golden_losses"], v["jax_losses"], strict=True))
    return [
        "## The ViT at its full size, in segments", "",
        f"Measured on {env}.", "",
        f"The workload's own shape (podium/workloads/vit.py: width {sh['dim']}, "
        f"{sh['heads']} heads, MLP {sh['mlp']}, {sh['blocks']} blocks; podium/jax/vit.py "
        f"`FULL`), one image per step, SGD: a step is {v['operations']:,} operations and "
        f"{v['instructions']:,} instructions, more than the instruction memory's "
        f"{v['imem_depth']:,}, so it runs as {len(v['segments'])} segments "
        f"(docs/jax.md, \"Segments\"; the longest {max(v['segments']):,} instructions), "
        f"and its values take {v['vmem_rows']['values']:,} VMEM rows and its constants "
        f"{v['vmem_rows']['constants']:,} (64 bytes each), so the chip is the ViT's "
        f"TensorCore with {v['vmem_bytes'] // (1 << 20)} MiB of VMEM (`FULL_CONFIG`). At "
        f"the {len(v['loaded_rows'])} cuts in a step the live values are loaded back "
        f"({', '.join(f'{n:,}' for n in v['loaded_rows'])} rows of 64 bytes), those written "
        "since the cut before stored first (all at the first cut: "
        f"{', '.join(f'{n:,}' for n in v['stored_rows'])} rows), and every segment after the "
        f"first reloads the constants: HBM bytes read {v['bytes_read_golden']:,} and written "
        f"{v['bytes_written_golden']:,} in the step (golden simulator's counters), "
        f"{_cut_bytes(v):,} of them the cuts' (about {_cut_bytes(v) / 29.5:,.0f} cycles at the "
        "model's 29.5 bytes a cycle).", "",
        table(["", "value"], [
            ["RTL (native path), one step: cycles (the segments' added up)",
             f"{v['cycles']:,}"],
            ["model (the timeline of each segment, added up)",
             f"{v['model_cycles']:,} ({_ratio(v['model_cycles'], v['cycles'])})"],
            ["MXU vectors, RTL / model", f"{v['mxu_vectors']:,} / {v['model_vectors']:,}"],
            ["loss and new weights against the golden simulator", f"**{exact}**"],
            ["loss, RTL", f"{v['loss']:.6f}"],
            [f"golden, {v['golden_steps']} steps: losses",
             ", ".join(f"{x:.4f}" for x in v["golden_losses"])],
            ["jax fp32, the same steps", ", ".join(f"{x:.4f}" for x in v["jax_losses"])],
            ["largest loss difference vs jax (relative to max(1, loss))",
             f"{v['max_loss_diff_vs_jax']:.2g} ({rel:.2g})"],
            ["largest weight difference vs jax", f"{v['max_weight_diff_vs_jax']:.2g}"],
            ["simulation (RTL, one step)",
             f"{v['run_seconds']:.0f} s ({v['run_cpu_seconds']:.0f} CPU s)"],
            [f"golden simulator, {v['golden_steps']} steps", f"{v['golden_seconds']:.0f} s"],
        ]), "",
        "The cycles are the chip's, from each segment's start to its done; the host's "
        "work between segments (loading each segment's instructions over AXI4-Lite, two "
        "32-bit writes a word, and reading the outcome) is not in them"
        + (f": the native runs ({v['runs']}) simulated {v['simulated_cycles']:,} clock "
           f"cycles in all, {v['simulated_cycles'] - v['cycles']:,} of them the host's "
           "(the programs' loads, the starts, the outcomes read, the controller drained)."
           if v.get("simulated_cycles") else "."), "",
    ]


POD_KEYS = ("cycles", "mxu_busy", "vpu_busy", "dma_busy", "golden_retired", "model_cycles",
            "model_mxu", "model_vpu", "model_dma", "model_ici")


def _render_pod(data):
    """The section of the pod's rows (none in a JSON written before they existed)."""
    rows = data["tables"].get("pod")
    if not rows:
        return []
    per = _per_step(rows, POD_KEYS)
    f, fb, loc, s = (per[p] for p in POD_PARTS)
    phases = {"forward": f, "backward": {k: fb[k] - f[k] for k in POD_KEYS},
              "optimizer": {k: loc[k] - fb[k] for k in POD_KEYS},
              "all-reduce": {k: s[k] - loc[k] for k in POD_KEYS}, "step": s}
    table_rows = [[*_phase_cells(name, v, s, ("vpu", "mxu", "dma")),
                   f"{v['model_ici']:,.0f}", f"{v['golden_retired']:,.0f}"]
                  for name, v in phases.items()]
    runs = [[r["part"], r["steps"], f"{r['cycles']:,}", f"{r['model_cycles']:,}",
             _ratio(r["model_cycles"], r["cycles"]), f"{r['model_ici']:,}",
             r["collectives"], r["instructions"], f"{r['golden_retired']:,}",
             "yes" if r["bit_exact_with_golden"] else "NO",
             ("yes" if r["chips_identical"] else "NO") if r["collectives"] else "-",
             f"{r['run_seconds']:.0f}"]
            for r in rows]
    net = data["pod_network"]
    ar = phases["all-reduce"]
    one = {r["part"]: r for r in rows if r["steps"] == 1}
    env = environment_line(data["pod_environment"])
    return [
        "## Data parallel on the 2x2 pod: step phases, RTL and model", "",
        f"Measured on {env}.", "",
        "The data-parallel SGD step (`pod_sgd_step`: 16 samples per chip, gradients and "
        "loss all-reduced in fp32 by `jax.lax.pmean`) on the RTL 2x2 pod (the native pod "
        "path, sim/pod_native.py: four of the front end's TensorCores with their HBM "
        "controllers, `pod_config((2, 2), memory=\"hbm\")`; chip 0's cycle counter), split "
        "like the chip's step, each part its own program run for 1 and 3 steps, per step "
        "the difference: forward, backward = (forward + backward) - forward, optimizer = "
        "(the step without the all-reduce: `pod_sgd_step(local=4)`, each chip's own "
        "gradient) - (forward + backward), all-reduce = the step - the step without it "
        "(the **exposed** all-reduce: the VPU copies, the hand-overs and the five "
        "`ici.coll`s; the schedule is sequential, nothing overlaps them). Every run's losses "
        "and carries are checked bit for bit against the golden pod simulator "
        "(podium/podsim.py, which counts instructions retired, no cycles: the last column, "
        "chip 0) and across the four chips. Model: the engine timeline of podium/cycles.py "
        "with the ICI queue played (`timeline(program, ici=cost)`), each `ici.coll` costing "
        "sim/collectives_model.py's alpha-beta time of the golden model's schedule "
        "(verification/models/collectives.py `all_reduce_2d_schedule`): per step alpha "
        f"{net['alpha_cycles']} cycles + {net['per_hop_cycles']} per hop + its bytes over "
        f"the busiest resource, a link at {net['link_bytes_per_cycle']} B/cycle (a 512-bit "
        f"flit a cycle) or a chip's injection at {net['inject_bytes_per_cycle']} B/cycle; "
        f"alpha and the injection rate as fitted on {net['fitted_on']}, the injection "
        "scaled to the pod's 64-byte flits (the same flits per cycle). Engine columns: RTL "
        "/ model; ICI: the model's cycles in the collectives.", "",
        table(["phase", "cycles per step", "model", "model / RTL", "share", "VPU busy",
               "MXU busy", "DMA busy", "ICI (model)", "instructions retired (golden)"],
              table_rows), "",
        f"**Exposed all-reduce: {ar['cycles']:,.0f} cycles per step on the RTL** "
        f"({100 * ar['cycles'] / s['cycles']:.1f}% of the {s['cycles']:,.0f}-cycle step), "
        f"model {ar['model_cycles']:,.0f} ({_ratio(ar['model_cycles'], ar['cycles'])}), of "
        f"which the collectives {ar['model_ici']:,.0f} cycles in the model (five "
        f"`ici.coll all_reduce_2d` of 2,048 + 512 + 512 + 256 + 256 fp32 elements, 14,336 "
        f"bytes per chip) and the rest the VPU copies and hand-overs around them "
        f"({ar['vpu_busy']:,.0f} VPU busy cycles on the RTL, {ar['model_vpu']:,.0f} in the "
        f"model). The whole step: model / RTL {_ratio(s['model_cycles'], s['cycles'])}; "
        f"one step of the data-parallel program (the loads and stores around the loop "
        f"included): RTL {one['step']['cycles']:,}, model {one['step']['model_cycles']:,}.",
        "",
        "Where the model misses: the all-reduce phase by "
        f"{ar['cycles'] - ar['model_cycles']:,.0f} cycles, all in the collectives (the VPU "
        "copies agree within a few cycles): on the RTL the five collectives and their "
        f"hand-overs take about {ar['cycles'] - ar['vpu_busy']:,.0f} cycles, the model's "
        f"collectives {ar['model_ici']:,.0f}; their 20 ring steps (four per 2-D all-reduce on "
        "the 2x2) would need about "
        f"{net['alpha_cycles'] + (ar['cycles'] - ar['model_cycles']) / 20:.1f} cycles of "
        f"alpha each instead of the {net['alpha_cycles']} fitted on the collectives bench's "
        "pod (simulation chips with a local memory, 128-bit flits; here the ICI endpoint "
        "reads and writes VMEM, 512-bit flits, messages of 8 flits): the per-step latency "
        "of this pod is not measured by that bench. The optimizer phase "
        f"({_ratio(phases['optimizer']['model_cycles'], phases['optimizer']['cycles'])}) is "
        "a difference of two programs, each with its own error, as on the chip. The DMA: "
        "the model's 29.5 bytes a cycle are the default HBM controller's sequential rate; "
        "the pod's chips have the controller's 512-bit legacy channels, faster (DMA busy "
        f"{s['dma_busy']:,.0f} RTL / {s['model_dma']:,.0f} model in the step), which is most "
        "of the model's excess on the 1-step programs (the data set's first load; the "
        "per-step figures take it out). Within the issue's 10%: the step, forward and "
        "backward; not the all-reduce and the optimizer phases.", "",
        table(["program", "steps", "cycles", "model", "model / RTL", "ICI (model)",
               "collectives", "instructions", "retired (golden)", "bit-exact with golden",
               "chips identical", "simulation s"], runs), "",
    ]


if __name__ == "__main__":
    if sys.argv[1:] not in (["--pod"], ["--vit-full"]):
        print("usage: python -m sim.training_perf --pod | --vit-full (one part's rows alone; "
              "the whole bench: python -m sim.bench training)", file=sys.stderr)
        sys.exit(2)
    bench_part(sys.argv[1][2:].replace("-", "_"))
