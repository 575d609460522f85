"""Verilog generation: a block's configuration in, Verilog and a JSON sidecar out.

``BLOCKS`` maps every block name to its configuration class and its top (an ``hdl.top.Top``).
The sidecar (``hdl.top``) describes the top's ports and configuration, so testbenches and
users can drive the Verilog without the Python that made it. Output is deterministic: the same
configuration always gives byte-identical Verilog, in any process, which is what the simulator
build cache keys on.
"""

import importlib
import json
from dataclasses import dataclass
from pathlib import Path

from spec.chip import ChipConfig
from spec.config import ConfigError, check_keys
from spec.files import in_file, load_json
from spec.formats import FloatUnitsConfig
from spec.hbm import HBMConfig
from spec.ici import ICIConfig, ICIHarnessConfig
from spec.mxu import MXUConfig, MXUHarnessConfig
from spec.nic import NICConfig
from spec.pod import PodConfig
from spec.sparsecore import SparseCoreConfig, SparseCoreSystemConfig
from spec.tensorcore import TensorCoreConfig, VPUTopConfig
from spec.vmath import VMathConfig

__all__ = ["BLOCKS", "Block", "Design", "generate", "make_config", "config_file", "CONFIG_KEYS"]

@dataclass(frozen=True)
class Block:
    """One block the generator makes: its configuration class and its top, named
    ``"module:Class"`` under ``hdl`` (imported by :attr:`top` when a design is generated: a
    run that reads its Verilog back from the cache never imports Amaranth); the configurations
    besides the default that ``make verilog`` and ``make lint`` generate (``examples``); and
    the ``make bench`` entry that measures it (``bench``, sim/<bench>_perf.py), if any."""

    config: type
    top_name: str
    examples: tuple = ()
    bench: str | None = None

    @property
    def top(self):
        """The top's class."""
        module, name = self.top_name.split(":")
        return getattr(importlib.import_module(f"hdl.{module}"), name)

    def configurations(self):
        """The default configuration, then the examples."""
        return (self.config(), *self.examples)


_TC_POD_CHIP = ChipConfig(
    tensorcore=TensorCoreConfig(mxu=MXUConfig(rows=4, cols=4), vmem_bytes=32768, ici=True),
    memory="axi", nic=NICConfig(ici=NICConfig().ici.replace(flit_bits=256)))
"""A pod's program-running chip: a TensorCore whose VMEM rows are the network's flits."""

BLOCKS = {
    "mxu": Block(MXUConfig, "mxu.unit:MXU", (
        MXUConfig(rows=1, cols=1), MXUConfig(rows=2, cols=3),
        MXUConfig(rows=5, cols=7, acc_depth=100), MXUConfig(rows=16, cols=16)), bench="mxu"),
    "tensorcore": Block(TensorCoreConfig, "tensorcore.core:TensorCore"),
    "hbm": Block(HBMConfig, "hbm.controller:HBMController", (
        HBMConfig(speed="1600", ports=2, page_policy="closed", scheduler="fcfs", xor_bank=True,
                  mapping="RoCoBaBgPc", queue_depth=8, write_buffer=4, write_high=3,
                  write_low=1, id_lanes=2, rob_depth=16, row_bits=10, refresh_postpone=2),),
        bench="hbm"),
    "ici": Block(ICIConfig, "ici.network:Network", (
        ICIConfig(dims=(2, 2, 2), wrap=(True, False, True), classes=2, local_ports=2),),
        bench="ici"),
    "chip": Block(ChipConfig, "chip:Chip", (
        ChipConfig(hbm=HBMConfig(ports=2), sparsecore=SparseCoreConfig()), _TC_POD_CHIP),
        bench="tensorcore"),
    "ici_router": Block(ICIConfig, "ici.router:Router"),
    "ici_harness": Block(ICIHarnessConfig, "ici.harness:Harness", (ICIHarnessConfig(faults=True),)),
    "mxu_harness": Block(MXUHarnessConfig, "mxu.harness:MXUHarness"),
    "fp_units": Block(FloatUnitsConfig, "fp_units:FloatUnits"),
    "vpu": Block(VPUTopConfig, "tensorcore.vpu_top:VPUTop"),
    "vmath": Block(VMathConfig, "tensorcore.vpu_func:VMathTop", bench="vmath"),
    "sparsecore": Block(SparseCoreSystemConfig, "sparsecore.system:SparseCoreSystem",
                        (SparseCoreSystemConfig(memory="axi"),), bench="sparsecore"),
    "pod": Block(PodConfig, "pod.pod:Pod", (PodConfig(chip=_TC_POD_CHIP),), bench="pod"),
}
"""Every block, by the name ``podium generate`` and the sidecars use: the one registry that
generation, ``make verilog`` / ``make lint``, the benchmarks and the sweeps read."""


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
        return BLOCKS[block].config.from_dict(params)
    except ConfigError as e:
        raise e.within(block) from None


CONFIG_KEYS = ("block", "parameters")
"""The keys of a configuration file: ``{"block": "mxu", "parameters": {...}}``."""


def config_file(path, block=None):
    """The block and parameters (a dict) of configuration file ``path``, checked on their
    own: unknown keys and parameters, a block other than ``block`` (if given) and invalid
    values are refused with a ``FileError`` naming the file."""
    spec = load_json(path)
    with in_file(path):
        if not isinstance(spec, dict):
            raise ConfigError("", f"must be a JSON object {{\"block\": ..., \"parameters\": "
                                  f"{{...}}}}, got a {type(spec).__name__}")
        check_keys("", spec, CONFIG_KEYS)
        named = spec.get("block", block)
        if block is not None and named != block:
            raise ConfigError("block", f"must be {block!r} (the block asked for), got "
                                       f"{named!r}")
        if named is None:
            raise ConfigError("block", "must be given, in the file or on the command line")
        params = spec.get("parameters", {})
        if not isinstance(params, dict):
            raise ConfigError("parameters", f"must be a mapping of parameters, got {params!r}")
        make_config(named, params)
    return named, params


def generate(block, config):
    """Generate ``block`` (a name in BLOCKS) for ``config``; return a :class:`Design`."""
    top = BLOCKS[block].top(config)
    return Design(block, top.name, top.to_verilog(), top.sidecar(block))
