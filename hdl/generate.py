"""Verilog generation: a block's configuration in, Verilog and a JSON sidecar out.

``BLOCKS`` maps every block name to its configuration class and its top (an ``hdl.top.Top``).
The sidecar (``hdl.top``) describes the top's ports and configuration, so testbenches and
users can drive the Verilog without the Python that made it. Output is deterministic: the same
configuration always gives byte-identical Verilog, in any process, which is what the simulator
build cache keys on.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from spec.chip import ChipConfig
from spec.config import ConfigError
from spec.formats import FloatUnitsConfig
from spec.hbm import HBMConfig
from spec.ici import ICIConfig, ICIHarnessConfig
from spec.mxu import MXUConfig
from spec.pod import PodConfig
from spec.sparsecore import SparseCoreSystemConfig
from spec.tensorcore import TensorCoreConfig

from .chip import Chip
from .fp_units import FloatUnits
from .hbm.controller import HBMController
from .ici.harness import Harness
from .ici.network import Network
from .ici.router import Router
from .mxu.harness import MXUHarness, MXUHarnessConfig
from .mxu.unit import MXU
from .pod.pod import Pod
from .sparsecore.system import SparseCoreSystem
from .tensorcore.core import TensorCore
from .tensorcore.vpu_top import VPUTop, VPUTopConfig

__all__ = ["BLOCKS", "Design", "generate", "make_config"]

BLOCKS = {
    "chip": (ChipConfig, Chip),
    "mxu": (MXUConfig, MXU),
    "tensorcore": (TensorCoreConfig, TensorCore),
    "hbm": (HBMConfig, HBMController),
    "ici": (ICIConfig, Network),
    "ici_router": (ICIConfig, Router),
    "ici_harness": (ICIHarnessConfig, Harness),
    "mxu_harness": (MXUHarnessConfig, MXUHarness),
    "fp_units": (FloatUnitsConfig, FloatUnits),
    "vpu": (VPUTopConfig, VPUTop),
    "sparsecore": (SparseCoreSystemConfig, SparseCoreSystem),
    "pod": (PodConfig, Pod),
}


@dataclass(frozen=True)
class Design:
    """One generated design: top module name, Verilog text and sidecar dictionary."""

    block: str
    name: str
    verilog: str
    sidecar: dict

    def write(self, out_dir):
        """Write ``<name>.v`` and ``<name>.json`` into ``out_dir``; return the Verilog path."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        vpath = out / f"{self.name}.v"
        vpath.write_text(self.verilog)
        (out / f"{self.name}.json").write_text(json.dumps(self.sidecar, indent=2) + "\n")
        return vpath


def make_config(block, params):
    """Validated configuration of ``block`` from a dict of parameters; an invalid parameter
    raises a ``ConfigError`` whose message starts with its full path (``chip.hbm.ports``)."""
    if block not in BLOCKS:
        raise ConfigError("block", f"must be one of {', '.join(BLOCKS)}, got {block!r}")
    try:
        return BLOCKS[block][0].from_dict(params)
    except ConfigError as e:
        raise e.within(block) from None


def generate(block, config):
    """Generate ``block`` (a name in BLOCKS) for ``config``; return a :class:`Design`."""
    top = BLOCKS[block][1](config)
    return Design(block, top.name, top.to_verilog(), top.sidecar(block))
