"""cocotb testbench: the digits MLP's data-parallel SGD step (podium/jax/digits.py
``pod_sgd_step``, compiled by the JAX front end's ``pod_compile``: ``psum`` lowered to the
pod's fp32 all-reduce) on the RTL pod of the front end's TensorCores (``podium.jax.pod_config``:
every chip the ViT's TensorCore with an ICI queue), a few steps, every chip's HBM (losses,
weights after every step) and VMEM bit-exact with the golden pod simulator
(podium/podsim.py); the weights identical on every chip after every step.

Not yet run: the design (four of the ViT's TensorCores) verilates in 5 minutes into 262 MB of
C++, about an hour of compilation on two shared cores; no test of the regression runs it
yet (docs/jax.md, "Data parallel on the pod").

With ``PODIUM_POD_JAX_JSON`` set (a file name) it also measures: the step (the loss stored
per step, the weights at the end) with and without the all-reduce
(``pod_sgd_step(local=4)``), each for 1 and ``STEPS`` steps, every chip's counters written
to that file."""

import json
import os

import cocotb
import numpy as np

from verification.tb.pod_programs import TensorPodBench

HBM_BYTES = 1 << 18
"""Each chip's memory model: the constants, the weights, every step's shard of the batch,
its loss and weights (a few steps)."""

STEPS = int(os.environ.get("PODIUM_POD_JAX_STEPS", "2"))
"""Training steps of the run (each one the 64-sample batch over the four chips)."""


async def _run(tb, dut, steps, local=None, clear=False, weights=True):
    """One run; ``clear``: VMEM zeroed first (after an earlier run: the golden simulator
    starts from zeros)."""
    from podium.jax import digits as jd
    from podium.jax import pod_compile

    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    c, pod, chip_args = pod_compile(jd.pod_sgd_step(jd.SETTINGS.lr, weights=weights,
                                                    local=local),
                                    jd.init_params(0), (xs[:steps], ys[:steps]))
    assert pod.tensorcore == tb.tc, "the build's TensorCore is not the front end's"
    program = c.program
    assert program.hbm_capacity <= HBM_BYTES, program.hbm_capacity
    images = []
    for args in chip_args:
        image = bytearray(HBM_BYTES)
        for address, data in program.image(c.pack(args)).items():
            image[address:address + len(data)] = data
        images.append(bytes(image))
    text = program.metadata["assembly"]
    vmem = bytes(tb.tc.vmem_bytes) if clear else b""
    outcomes, vmems, results = await tb.run([text] * pod.chips, [vmem] * pod.chips,
                                            hbm_images=images, budget=4_000_000)
    tb.check(outcomes, vmems, results)
    outs = [c.unpack(program.read_outputs(lambda a, n, k=k: tb.hbm[k].read(a, n)))
            for k in range(pod.chips)]
    if not local:
        for flat in outs[1:]:
            for a, b in zip(outs[0], flat, strict=True):
                assert np.array_equal(a, b), "a chip's weights or losses differ from chip 0's"
    counters = [dict(o.counters) for o in outcomes]
    dut._log.info(f"{steps} step(s){' without the all-reduce' if local else ''}: "
                  f"{max(k.get('cycles', 0) for k in counters)} cycles (slowest chip); "
                  f"losses {[float(v) for v in np.ravel(outs[0][c.carry])]}")
    return {"steps": steps, "all_reduce": not local, "weights_stored": weights,
            "instructions": len(program.words),
            "counters": counters}


@cocotb.test()
async def test_digits_pod_steps(dut):
    tb = TensorPodBench(dut, 0, hbm_bytes=HBM_BYTES)
    await _run(tb, dut, STEPS)
    out = os.environ.get("PODIUM_POD_JAX_JSON")
    if out:
        runs = [await _run(tb, dut, steps, local, clear=True, weights=False)
                for local in (None, 4) for steps in (1, STEPS)]
        with open(out, "w") as f:
            json.dump(runs, f, indent=1)
