"""Running a :class:`~podium.program.Program` on a backend: the one seam between compiled
programs and whatever executes them. A backend is a function ``(program, image, **options)
-> Result`` (podium/isasim.py's :class:`~podium.isasim.Result`: status, error, registers,
semaphores, VMEM, an ``hbm`` with ``read(address, length)``, counters); ``golden`` is the ISA
simulator, ``verilator`` the RTL chip."""

import base64
import hashlib
import json

from spec.isa import Error

from .isasim import Result, TensorCoreSim

__all__ = ["BACKENDS", "run", "golden", "verilator"]


def golden(program, image, *, max_steps=50_000_000, seed=None):
    """Run on the golden ISA simulator; ``seed`` picks a random fair interleaving."""
    sim = TensorCoreSim(program.config, hbm_capacity=program.hbm_capacity, seed=seed)
    for address, data in image.items():
        sim.hbm.write(address, data)
    sim.load(program.words)
    return sim.run(max_steps=max_steps)


def run(program, inputs=None, sim="golden", **options):
    """Run ``program`` with ``inputs`` (name -> array) on backend ``sim``; returns
    ``(result, outputs)``, outputs name -> array read from HBM after the run (only when the
    run finished: ``result.status == "done"``)."""
    if sim not in BACKENDS:
        raise ValueError(f"sim must be one of {', '.join(BACKENDS)}, got {sim!r}")
    result = BACKENDS[sim](program, program.image(inputs or {}), **options)
    outputs = program.read_outputs(result.hbm.read) if result.status == "done" else {}
    return result, outputs


class _Outputs:
    """HBM as read back from the RTL after a run: the bytes of the program's outputs."""

    def __init__(self, program, encoded):
        self._regions = {program.outputs[name].address: base64.b64decode(data)
                         for name, data in encoded.items()}

    def read(self, address, length):
        for start, data in self._regions.items():
            if start <= address and address + length <= start + len(data):
                return data[address - start: address - start + length]
        raise ValueError(f"{length} bytes at {address:#x} are not an output of the program")


def verilator(program, image, *, chip=None, flow="none_none", seed=1, max_steps=10_000_000):
    """Run on the chip (``chip``: a ChipConfig; default: the program's TensorCore with the
    default HBM controller) in Verilator, through the chip's testbench and the golden HBM
    device model; ``max_steps`` bounds the run in cycles. The result's ``hbm`` holds the
    program's outputs; its counters are the TensorCore's (cycles, MXU, DMA, ...)."""
    from sim.measure import measure
    from sim.runner import BUILD
    from spec.chip import ChipConfig

    chip = chip or ChipConfig(tensorcore=program.config)
    if chip.tensorcore != program.config:
        raise ValueError("the chip's TensorCore configuration differs from the program's")
    if program.hbm_capacity > chip.hbm.capacity:
        raise ValueError(f"the program needs {program.hbm_capacity} bytes of HBM, the chip "
                         f"has {chip.hbm.capacity}")
    files = BUILD / "programs"
    files.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(json.dumps([program.to_dict(), sorted(
        (a, base64.b64encode(bytes(d)).decode()) for a, d in image.items())],
        sort_keys=True).encode()).hexdigest()[:16]
    prog_path, image_path = files / f"{digest}.json", files / f"{digest}.image.json"
    program.save(prog_path)
    image_path.write_text(json.dumps([{"address": a, "data": base64.b64encode(
        bytes(d)).decode()} for a, d in sorted(image.items())]))
    done = measure("chip", chip, "verification.tb.chip", "run_program",
                   {"program": str(prog_path), "image": str(image_path), "flow": flow,
                    "budget": max_steps}, tag="programs", seed=seed)
    r = done["report"]
    return Result(status="done" if r["done"] else "error", error=Error[r["error"]],
                  error_pc=r["error_pc"], pc=0, registers=r["registers"],
                  semaphores=r["semaphores"], vmem=None, hbm=_Outputs(program, r["outputs"]),
                  counters={**r["counters"], "build_seconds": done["build_seconds"],
                            "run_seconds": done["run_seconds"]})


BACKENDS = {"golden": golden, "verilator": verilator}
