"""Verilog generation: a block's configuration in, Verilog and a JSON sidecar out.

The sidecar lists the top's ports (name, direction, width) and the configuration, so testbenches
and users can drive the Verilog without the Python that made it. Output is deterministic: the
same configuration always gives byte-identical Verilog, which is what the simulator build cache
keys on.
"""

import json
from dataclasses import dataclass
from pathlib import Path

from amaranth.hdl import Shape
from amaranth.lib import data, wiring

from .hbm.config import HBMConfig
from .hbm.controller import HBMController
from .ici.config import ICIConfig
from .ici.top import ici_top
from .lib.fp import FloatUnits, FloatUnitsConfig
from .mxu.config import MXUConfig
from .mxu.harness import MXUHarness, MXUHarnessConfig
from .mxu.unit import MXU

__all__ = ["BLOCKS", "Design", "generate", "make_config", "describe_shape"]

BLOCKS = {
    "mxu": (MXUConfig, MXU),
    "hbm": (HBMConfig, HBMController),
    "mxu_harness": (MXUHarnessConfig, MXUHarness),
    "fp_units": (FloatUnitsConfig, FloatUnits),
    "ici": (ICIConfig, ici_top),
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
    """Validated configuration of ``block`` from a dict of parameters."""
    if block not in BLOCKS:
        raise ValueError(f"block must be one of {', '.join(BLOCKS)}, got {block!r}")
    return BLOCKS[block][0].from_dict(params)


def describe_shape(shape):
    """Width and, for a layout, its fields (LSB first) or lanes, as plain JSON."""
    desc = {"width": Shape.cast(shape).width}
    if isinstance(shape, data.ArrayLayout):
        desc["lanes"] = {"count": shape.length, **describe_shape(shape.elem_shape)}
    elif isinstance(shape, data.Layout):
        desc["fields"] = {name: {"offset": field.offset, **describe_shape(field.shape)}
                          for name, field in shape}
    else:
        desc["signed"] = Shape.cast(shape).signed
    return desc


def _ports(component):
    ports = [{"name": "clk", "direction": "in", "width": 1},
             {"name": "rst", "direction": "in", "width": 1}]
    for path, member, _ in component.signature.flatten(component):
        ports.append({
            "name": "__".join(map(str, path)),
            "direction": "in" if member.flow == wiring.In else "out",
            **describe_shape(member.shape),
        })
    return ports


def generate(block, config):
    """Generate ``block`` (a name in BLOCKS) for ``config``; return a :class:`Design`."""
    component = BLOCKS[block][1](config)
    verilog = component.to_verilog()
    sidecar = {
        "block": block,
        "top": config.name,
        "parameters": config.to_dict(),
        "ports": _ports(component),
    }
    return Design(block, config.name, verilog, sidecar)
