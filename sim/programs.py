"""TensorCore programs on the RTL chip: the ``verilator`` backend of podium/runner.py, registered
when this module is imported (the command line, the demo and the benchmarks import it), and
the ``native`` backend (sim/native.py, imported from here).

A run goes through the chip's testbench (verification/tb/chip.py, ``run_program``) with the
golden HBM device model on every pseudo-channel, and reads the program's outputs back.
"""

import base64
import hashlib
import json
from pathlib import Path

from podium.isasim import Result
from podium.runner import register
from sim.runner import BUILD
from spec.chip import ChipConfig
from spec.isa import Error

__all__ = ["verilator", "checked_run", "MAX_CYCLES", "CYCLES_PER_SECOND"]

CYCLES_PER_SECOND = 3_000
"""The chip's simulated speed in Verilator, roughly: 2,500-3,500 cycles/s measured by the
TensorCore benchmark (docs/results/tensorcore.md) on a shared 2-core machine."""
MAX_CYCLES = 1_000_000
"""The default cycle budget of an RTL run: about 6 minutes at :data:`CYCLES_PER_SECOND`
(the 512 x 512 x 512 GEMM of the benchmark takes 536,000 cycles, the digits demo 19,956)."""


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


def _duration(cycles):
    seconds = cycles / CYCLES_PER_SECOND
    return f"{seconds / 60:.0f} minutes" if seconds >= 90 else f"{seconds:.0f} s"


def checked_run(program, chip, max_steps):
    """(chip, cycle budget) of a run of ``program`` on the RTL: ``chip`` (default: the
    program's TensorCore with the default HBM controller) must have the program's TensorCore
    and HBM enough for it, ``max_steps`` (default :data:`MAX_CYCLES`) be positive."""
    chip = chip or ChipConfig(tensorcore=program.config)
    if chip.tensorcore != program.config:
        raise ValueError("the chip's TensorCore configuration differs from the program's")
    if program.hbm_capacity > chip.hbm.capacity:
        raise ValueError(f"the program needs {program.hbm_capacity} bytes of HBM, the chip "
                         f"has {chip.hbm.capacity}")
    max_steps = MAX_CYCLES if max_steps is None else max_steps
    if max_steps < 1:
        raise ValueError(f"max_steps must be at least 1, got {max_steps}")
    return chip, max_steps


def verilator(program, image, *, chip=None, flow="none_none", seed=1, max_steps=None,
              trace=None):
    """Run on the chip (``chip``: a ChipConfig; default: the program's TensorCore with the
    default HBM controller) in Verilator, through the chip's testbench and the golden HBM
    device model; ``max_steps`` bounds the run in cycles (default :data:`MAX_CYCLES`): a
    program still running then is aborted and its result's status is ``timeout``, as the
    golden simulator's is. The result's ``hbm`` holds the program's outputs; its counters are
    the TensorCore's (cycles, MXU, DMA, ...). ``trace``: a file to write every HBM device
    command to (the golden device model's trace format)."""
    from sim.measure import measure  # here: a native or golden run does not need it

    chip, max_steps = checked_run(program, chip, max_steps)
    files = BUILD / "programs"
    files.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(json.dumps([program.to_dict(), sorted(
        (a, base64.b64encode(bytes(d)).decode()) for a, d in image.items())],
        sort_keys=True).encode()).hexdigest()[:16]
    prog_path, image_path = files / f"{digest}.json", files / f"{digest}.image.json"
    program.save(prog_path)
    image_path.write_text(json.dumps([{"address": a, "data": base64.b64encode(
        bytes(d)).decode()} for a, d in sorted(image.items())]))
    spec = {"program": str(prog_path), "image": str(image_path), "flow": flow,
            "budget": max_steps, **({"hbm_trace": str(Path(trace).resolve())} if trace else {})}
    done = measure("chip", chip, "verification.tb.chip", "run_program", spec, tag="programs",
                   seed=seed,
                   note=f"at most {max_steps:,} cycles (about {_duration(max_steps)} at "
                        f"{CYCLES_PER_SECOND:,} cycles/s)")
    r = done["report"]
    if r.get("timeout"):
        # The testbench aborted the run (its ABORTED error is the testbench's doing, not the
        # program's): a timeout without an error, as the golden simulator reports it.
        status, error = "timeout", Error.NONE
    else:
        status, error = ("done" if r["done"] else "error"), Error[r["error"]]
    return Result(status=status, error=error, steps=r["counters"].get("cycles", 0),
                  error_pc=r["error_pc"], pc=0, registers=r["registers"],
                  semaphores=r["semaphores"], vmem=None, hbm=_Outputs(program, r["outputs"]),
                  counters={**r["counters"], "build_seconds": done["build_seconds"],
                            "setup_seconds": done["setup_seconds"],
                            "run_seconds": done["run_seconds"],
                            "run_cpu_seconds": done["run_cpu_seconds"]})


register("verilator", verilator, unit="cycles",
         default=f"{MAX_CYCLES:,} cycles, about {_duration(MAX_CYCLES)} at the chip's "
                 f"{CYCLES_PER_SECOND:,} simulated cycles/s")


from sim import native, pod_native  # noqa: E402, F401  (register the native backends)
