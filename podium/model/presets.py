"""Ready-made systems and workloads: the published chips with datasheet efficiencies or with
Podium's measured ones, the two fitted software terms, and the training and inference
configurations of the published results the model is compared with.

``system("v6e", slices=12)`` is 12 Trillium pods with datasheet peaks; ``measured=True`` takes
the efficiency terms from Podium's benchmark results instead (the "podium" preset is
``system("v6e", measured=True)``: Trillium's size, Podium's measured efficiencies).
"""

from .calibrate import measured_chip, measured_efficiency, measured_terms
from .checks import check_choice, check_int
from .fit import trillium_fit
from .hardware import CHIPS, SLICES, Efficiency, Slice, System
from .workloads import MODELS, Inference, UNet, training_preset

__all__ = ["PRESETS", "system", "training", "INFERENCE", "INFERENCE_SLICE",
           "inference_preset", "SDXL", "PALM_SLICE"]

PRESETS = ("v6e", "v5e", "v5p", "v4", "podium")
"""System presets: the published chips, and "podium" (v6e with measured efficiencies)."""

PALM_SLICE = Slice(dims=(12, 16, 16), wrap=(False, False, False))
"""PaLM's 3072-chip v4 slices (arXiv 2204.02311: two of them over the DCN; the paper does not
give their shape). A v4 slice is a torus only for AxBxC with 2A=B=C or 2A=2B=C (Cloud TPU v4
page): 4A^3 = 3072 and 2A^3 = 3072 have no integer solution, so every 3072-chip slice is a
mesh. 12x16x16 puts the 12-way tensor group on a whole axis (8x16x24 would cut it from the
24-long one and make the FSDP group's rings strided), the most favourable layout."""


def system(name, *, slices=1, slice_=None, measured=False, results=None):
    """The system ``name`` (one of PRESETS) of ``slices`` slices (default slice: the chip's
    pod, or ``slice_``). Efficiency terms are datasheet peaks (1.0), or Podium's measurements
    from ``results`` (default docs/results) when ``measured`` or for "podium". The overlap
    and DCN latency are the two terms fitted on Trillium's GPT-3 points."""
    check_choice("preset", name, PRESETS)
    check_int("system.slices", slices, 1, 100_000)
    measured = measured or name == "podium"
    key = "v6e" if name == "podium" else name
    chip = CHIPS[key]
    if measured:
        terms = measured_terms(chip, results)
        chip, efficiency = measured_chip(chip, terms), measured_efficiency(terms)
        label = f"{key} (Podium-measured efficiencies)"
    else:
        efficiency, label = Efficiency(), key
    fit = trillium_fit()
    return System(name=label, chip=chip, slice=slice_ or SLICES[key], slices=slices,
                  efficiency=efficiency, overlap=fit.overlap, dcn_latency=fit.dcn_latency)


def training(name, sys):
    """The training preset ``name`` (workloads.TRAINING) sized for ``sys``."""
    return training_preset(name, chips=sys.slice.chips, slices=sys.slices)


INFERENCE = {
    "llama2-70b": Inference(model=MODELS["llama2-70b"], batch=64, prompt=2048, output=512),
}
"""Inference presets: Llama-2 70B, 64 sequences of 2048 prompt and 512 output tokens
(assumed serving shape), tensor parallel over a v6e-8-sized slice (2x4)."""

INFERENCE_SLICE = Slice(dims=(2, 4), wrap=(False, False))
"""An 8-chip slice (one host) cut from a 16x16 pod: no wraparound."""

SDXL = UNet()
"""SDXL's UNet at 1024x1024 (128x128 latents), 20 steps with classifier-free guidance."""


def inference_preset(name):
    """The inference preset ``name`` (one of INFERENCE)."""
    check_choice("workload", name, tuple(INFERENCE))
    return INFERENCE[name]
