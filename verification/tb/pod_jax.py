"""cocotb testbench: the digits MLP's data-parallel SGD step (podium/jax/digits.py
``pod_sgd_step``, compiled by the JAX front end's ``pod_compile``: ``psum`` lowered to the
pod's fp32 all-reduce) on the RTL pod of the front end's TensorCores (``podium.jax.pod_config``:
every chip the ViT's TensorCore with an ICI queue), a few steps, every chip's HBM (losses,
weights after every step) and VMEM bit-exact with the golden pod simulator
(podium/podsim.py); the weights identical on every chip after every step."""

import os

import cocotb
import numpy as np

from verification.tb.pod import HBM_BYTES
from verification.tb.pod_programs import TensorPodBench

STEPS = int(os.environ.get("PODIUM_POD_JAX_STEPS", "2"))
"""Training steps of the run (each one the 64-sample batch over the four chips)."""


@cocotb.test()
async def test_digits_pod_steps(dut):
    from podium.jax import digits as jd
    from podium.jax import pod_compile

    tb = TensorPodBench(dut, 0)
    x_train, _, y_train, _ = jd.data(0)
    xs, ys = jd.batches(x_train, y_train, jd.SETTINGS)
    c, pod, chip_args = pod_compile(jd.pod_sgd_step(jd.SETTINGS.lr, weights=True),
                                    jd.init_params(0), (xs[:STEPS], ys[:STEPS]))
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
    outcomes, vmems, results = await tb.run([text] * pod.chips, [b""] * pod.chips,
                                            hbm_images=images, budget=2_000_000)
    tb.check(outcomes, vmems, results)
    outs = []
    for k in range(pod.chips):
        flat = c.unpack(program.read_outputs(lambda a, n, k=k: tb.hbm[k].read(a, n)))
        outs.append(flat)
        dut._log.info(f"chip {k}: {outcomes[k].counters}")
    for flat in outs[1:]:
        for a, b in zip(outs[0], flat, strict=True):
            assert np.array_equal(a, b), "a chip's weights or losses differ from chip 0's"
    cycles = max(o.counters.get("cycles", 0) for o in outcomes)
    dut._log.info(f"{STEPS} steps: {cycles} cycles (slowest chip); losses "
                  f"{[float(v) for v in np.ravel(outs[0][c.carry])]}")
