"""Generation of every block: the same configuration gives byte-identical Verilog in separate
processes (the build cache keys on it), the chip top lints clean, configurations round-trip
through dicts, and bad configurations are refused naming the full path of the parameter."""

import dataclasses
import hashlib
import json
import subprocess
import sys

import pytest

from hdl.generate import BLOCKS, generate, make_config
from sim import runner
from sim.runner import lint
from spec.chip import ChipConfig
from spec.config import ConfigError
from spec.hbm import HBMConfig
from spec.ici import ICIConfig
from spec.mxu import MXUConfig
from spec.nic import NICConfig
from spec.pod import PodConfig
from spec.tensorcore import TensorCoreConfig

_DIGEST = """
import hashlib, sys
from hdl.generate import BLOCKS, generate
design = generate(sys.argv[1], BLOCKS[sys.argv[1]].config())
print(hashlib.sha256(design.verilog.encode()).hexdigest())
"""


@pytest.mark.parametrize("block", BLOCKS)
def test_generate_deterministic_across_processes(block):
    """Two separate Python processes generate the default top of ``block`` byte for byte the
    same (hash randomization differs between processes)."""
    digests = {subprocess.run([sys.executable, "-c", _DIGEST, block], check=True,
                              capture_output=True, text=True).stdout.strip()
               for _ in range(2)}
    assert len(digests) == 1 and len(next(iter(digests))) == 64, digests


def test_chip_generates_lint_clean(tmp_path):
    """``podium generate chip`` writes a top that Verilator lints clean, with the blocks'
    interfaces on its ports."""
    subprocess.run([sys.executable, "-m", "sim.cli", "generate", "chip", "-o", str(tmp_path)],
                   check=True, capture_output=True)
    name = ChipConfig().name
    sidecar = json.loads((tmp_path / f"{name}.json").read_text())
    ports = {p["name"] for p in sidecar["ports"]}
    assert {"csr__awaddr", "csr__rdata", "done", "error", "hbm_ch0__row_op",
            "hbm_ch0__data0__rddata"} <= ports
    assert not any(p.startswith(("mem0__", "mxu_", "ici_")) for p in ports), \
        "the TensorCore drives HBM port 0 and the MXU inside the chip, which has no network " \
        "interface by default"
    lint(tmp_path / f"{name}.v", name)


def test_pod_generates_lint_clean(tmp_path):
    """``podium generate pod`` writes a top of chips (hdl/chip.py, one module instantiated per
    node) that Verilator lints clean, with each chip's host ports as arrays."""
    subprocess.run([sys.executable, "-m", "sim.cli", "generate", "pod", "-o", str(tmp_path)],
                   check=True, capture_output=True)
    pod = PodConfig()
    verilog = (tmp_path / f"{pod.name}.v").read_text()
    assert verilog.count(f"\n  {pod.name}_chip ") == pod.chips, "a chip instance per node"
    ports = {p["name"] for p in json.loads((tmp_path / f"{pod.name}.json").read_text())["ports"]}
    assert {f"host_write__{c}__valid" for c in range(pod.chips)} <= ports
    lint(tmp_path / f"{pod.name}.v", pod.name)


def test_config_round_trip():
    chip = ChipConfig(tensorcore=TensorCoreConfig(mxu=MXUConfig(rows=4, cols=4)),
                      hbm=HBMConfig(ports=2))
    d = json.loads(json.dumps(chip.to_dict()))
    assert ChipConfig.from_dict(d) == chip
    assert chip.replace(hbm=chip.hbm.replace(ports=1)).hbm.ports == 1
    ici = ICIConfig(dims=(2, 2, 2), classes=2, flit_bits=128, local_ports=3)
    pod = PodConfig(chip=ChipConfig(tensorcore=None, memory="none", nic=NICConfig(ici=ici)))
    assert PodConfig.from_dict(json.loads(json.dumps(pod.to_dict()))) == pod
    params = {"chip": {"tensorcore": None, "memory": "none",
                       "nic": {"ici": {"dims": [2, 3], "classes": 2, "flit_bits": 128,
                                      "local_ports": 3}}}}
    assert PodConfig.from_dict(params).ici.dims == (2, 3)


@pytest.mark.parametrize("params, message", [
    ({"hbm": {"queue_depth": 100}}, "chip.hbm.queue_depth must be an integer in 2..64, got 100"),
    ({"nic": {"ici": {"dims": [1, 4]}}},
     "chip.nic.ici.dims[0] must be an integer in 2..64, got 1"),
    ({"memory": "ddr"}, "chip.memory must be one of 'hbm', 'axi', 'none', got 'ddr'"),
    ({"tensorcore": None}, "chip.tensorcore must be given on a chip without a network"),
    ({"tensorcore": {"mxu": {"fmt": "int4"}}}, "chip.tensorcore.mxu.fmt must be one of"),
    ({"tensorcore": {"mxu": {"depth": 3}}}, "chip.tensorcore.mxu: unknown MXU parameter(s): depth"),
    ({"hbm": 5}, "chip.hbm must be a HBMConfig or a dict, got 5"),
    ({"tpu": {}}, "chip: unknown chip parameter(s): tpu"),
    ({"tensorcore": {"imem_depth": 8192}}, "chip.tensorcore.imem_depth must be one of 16, 32, "
     "64, 128, 256, 512, 1024, 2048, 4096, got 8192"),
])
def test_chip_config_refused(params, message):
    with pytest.raises(ConfigError) as info:
        make_config("chip", params)
    assert message in str(info.value)


def test_unknown_block_refused():
    with pytest.raises(ConfigError, match="block must be one of mxu, tensorcore"):
        make_config("gpu", {})


def test_sidecar_describes_enums():
    design = generate("hbm", HBMConfig())
    ports = {p["name"]: p for p in design.sidecar["ports"]}
    assert ports["ch0__row_op"]["enum"] == {"ACT": 0, "PRE": 1, "PREA": 2, "REF": 3, "REFSB": 4}
    assert ports["s0_axi__rresp"]["enum"]["DECERR"] == 3
    digest = hashlib.sha256(json.dumps(design.sidecar, sort_keys=True).encode()).hexdigest()
    again = generate("hbm", HBMConfig()).sidecar
    assert digest == hashlib.sha256(json.dumps(again, sort_keys=True).encode()).hexdigest()


def _configs(cls, seen):
    if cls not in seen:
        seen.add(cls)
        yield cls
        for f in dataclasses.fields(cls):
            if cls.field_config(f.name):
                yield from _configs(cls.field_config(f.name), seen)


def test_every_parameter_documented():
    """``podium generate --help`` shows each parameter's docstring entry: every parameter of
    every block's configuration, nested ones too, has one."""
    seen = set()
    for block in BLOCKS.values():
        for cls in _configs(block.config, seen):
            docs = cls.parameter_docs()
            missing = [f.name for f in dataclasses.fields(cls) if not docs.get(f.name)]
            assert not missing, f"{cls.__name__} does not document {missing}"


def test_derived_parameters():
    """row_bytes, vtrans and the HBM speed follow the parameters they depend on unless given; the
    default configurations are the same as with the old defaults given."""
    assert TensorCoreConfig() == TensorCoreConfig(row_bytes=32)
    assert TensorCoreConfig().digest() == TensorCoreConfig(row_bytes=32).digest()
    assert HBMConfig() == HBMConfig(speed="2000")
    big = TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16))
    assert big.row_bytes == 64 and big.derived == {"row_bytes", "vtrans"} and big.vtrans
    # the transpose unit up to 128-byte rows, re-derived when the rows change
    assert TensorCoreConfig(row_bytes=128).vtrans and not TensorCoreConfig(row_bytes=256).vtrans
    assert TensorCoreConfig(row_bytes=64).replace(row_bytes=256, vmath=False).vtrans is False
    assert TensorCoreConfig(axi_data_width=1024).row_bytes == 128
    assert TensorCoreConfig(mxu=MXUConfig(rows=256, fmt="bfloat16")).row_bytes == 512
    assert TensorCoreConfig().replace(mxu=MXUConfig(rows=16, cols=16)) == big
    assert TensorCoreConfig(row_bytes=64).replace(vmem_banks=4).row_bytes == 64
    assert ChipConfig.from_dict({"tensorcore": {"mxu": {"rows": 16, "cols": 16}}}) \
        .tensorcore.row_bytes == 64
    assert HBMConfig(standard="HBM3").speed == "6400"
    assert HBMConfig(standard="HBM2E").speed == "3200"
    assert HBMConfig().replace(standard="HBM3").speed == "6400"
    assert HBMConfig(speed="2400").replace(queue_depth=8).speed == "2400"
    with pytest.raises(ConfigError, match=r"^row_bytes must be one of 64, 128, 256, 512, 1024 "
                                          r"\(a power of two from 4 \* mxu.cols = 64, a "
                                          r"result row, up to 1024\), got 32$"):
        big.replace(row_bytes=32)
    with pytest.raises(ConfigError, match=r"from axi_data_width / 8 = 128, a beat"):
        TensorCoreConfig(axi_data_width=1024, row_bytes=64)


def test_generated_designs_are_read_back(tmp_path, monkeypatch):
    """The generation cache (sim/runner.py ``generated``) gives the Verilog and sidecar
    ``generate`` gives, generates once per configuration (the second call reads it back), and
    keys on the configuration and on the generator's sources."""
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    calls = []
    real = runner.generate
    monkeypatch.setattr(runner, "generate", lambda b, c: calls.append(c) or real(b, c))
    small = MXUConfig(rows=2, cols=2)
    first = runner.generated("mxu", small)
    again = runner.generated("mxu", small)
    fresh = generate("mxu", small)
    assert (first.verilog, first.sidecar) == (again.verilog, again.sidecar) == \
        (fresh.verilog, fresh.sidecar)
    assert calls == [small]
    runner.generated("mxu", small.replace(cols=3))
    assert len(calls) == 2
    monkeypatch.setattr(runner, "_generator_digest", lambda: "other sources")
    runner.generated("mxu", small)
    assert len(calls) == 3, "a design of other generator sources is made again"
