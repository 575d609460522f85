"""MXU regression: configuration checks, golden model checks, and cocotb testbenches in
Verilator (and a cross-check subset in Icarus) for array sizes from 1x1 to 16x16."""

import json
import subprocess
import sys

import numpy as np
import pytest

from hdl.generate import generate
from sim.runner import lint
from spec.mxu import MXUConfig, MXUHarnessConfig
from verification.models.mxu import Gemm, MXUModel, matmul
from verification.tests.suite import cases

TB = "verification.tb.mxu"

# Array shapes of the regression: square, non-square both ways, and small accumulators
# (which make the refused-command and fit paths bite; acc_depth 1 is the smallest accepted).
CONFIGS = {
    "1x1": MXUConfig(rows=1, cols=1),
    "2x3": MXUConfig(rows=2, cols=3),
    "3x2": MXUConfig(rows=3, cols=2, acc_depth=12),
    "1x4-acc1": MXUConfig(rows=1, cols=4, acc_depth=1),
    "4x4": MXUConfig(rows=4, cols=4),
    "8x8": MXUConfig(rows=8, cols=8),
    "16x16": MXUConfig(rows=16, cols=16),
    "2x3-bf16": MXUConfig(rows=2, cols=3, fmt="bfloat16"),
    "4x4-bf16-to-bf16": MXUConfig(rows=4, cols=4, fmt="bfloat16", out_fmt="bfloat16"),
    "8x8-bf16": MXUConfig(rows=8, cols=8, fmt="bfloat16"),
    "4x4-e4m3": MXUConfig(rows=4, cols=4, fmt="float8_e4m3fn"),
    "3x2-e5m2-to-bf16": MXUConfig(rows=3, cols=2, fmt="float8_e5m2", out_fmt="bfloat16",
                                  acc_depth=40),
    "1x5-e5m2": MXUConfig(rows=1, cols=5, fmt="float8_e5m2"),
}
LARGE = {
    "5x7": MXUConfig(rows=5, cols=7, acc_depth=100),
    "32x32": MXUConfig(rows=32, cols=32),
}


@pytest.mark.parametrize("shape, test", cases(TB, CONFIGS))
def test_mxu(cocotb_run, shape, test):
    cocotb_run("mxu", CONFIGS[shape], TB, test)


@pytest.mark.slow
@pytest.mark.parametrize("shape", LARGE)
def test_mxu_large(cocotb_run, shape):
    cocotb_run("mxu", LARGE[shape], TB)


@pytest.mark.parametrize("config", [
    MXUHarnessConfig(mxu=MXUConfig(rows=4, cols=4), w_depth=256, a_depth=512, c_depth=128),
    MXUHarnessConfig(mxu=MXUConfig(rows=3, cols=2, fmt="bfloat16"), w_depth=256, a_depth=512,
                     c_depth=128),
], ids=["4x4", "3x2-bf16"])
def test_mxu_harness(cocotb_run, config):
    """The self-running MXU (the simulation-speed benchmark's top) computes right."""
    cocotb_run("mxu_harness", config, "verification.tb.mxu_harness")


ICARUS = [(shape, test) for shape in ("2x3", "4x4")
          for test in ("test_gemm_random", "test_accumulate", "test_refused_commands")]
ICARUS += [("2x3-bf16", "test_gemm_random"), ("2x3-bf16", "test_float_edges")]


@pytest.mark.icarus
@pytest.mark.parametrize("shape, test", ICARUS)
def test_mxu_icarus(cocotb_run, shape, test):
    cocotb_run("mxu", CONFIGS[shape], TB, test, sim="icarus")


@pytest.mark.parametrize("params, message", [
    ({"rows": 0}, "rows must be an integer in 1..256, got 0"),
    ({"cols": 257}, "cols must be an integer in 1..256, got 257"),
    ({"rows": 2.5}, "rows must be an integer in 1..256, got 2.5"),
    ({"fmt": "int4"}, "fmt must be one of 'int8', 'bfloat16', 'float8_e4m3fn', 'float8_e5m2', "
                      "got 'int4'"),
    ({"out_fmt": "bfloat16"}, "out_fmt must be one of 'int32', got 'bfloat16'"),
    ({"fmt": "bfloat16", "out_fmt": "int32"},
     "out_fmt must be one of 'float32', 'bfloat16', got 'int32'"),
    ({"acc_depth": 0}, "acc_depth must be an integer in 1..65536, got 0"),
    ({"acc_depth": 65537}, "acc_depth must be an integer in 1..65536, got 65537"),
    ({"depth": 3}, "unknown MXU parameter(s): depth"),
])
def test_config_refused(params, message):
    with pytest.raises(ValueError) as info:
        MXUConfig.from_dict(params)
    assert message in str(info.value)


def test_generate_lint_random(seed, tmp_path):
    """Random accepted configurations generate Verilog that Verilator lints clean."""
    rng = np.random.default_rng(seed)
    for _ in range(3):
        config = MXUConfig(rows=int(rng.integers(1, 25)), cols=int(rng.integers(1, 25)),
                           acc_depth=int(rng.integers(1, 5000)))
        design = generate("mxu", config)
        lint(design.write(tmp_path), design.name)


@pytest.mark.slow
@pytest.mark.parametrize("config", [
    MXUConfig(rows=1, cols=256), MXUConfig(rows=256, cols=1),
    MXUConfig(rows=2, cols=256, acc_depth=65536), MXUConfig(rows=64, cols=64),
    MXUConfig(rows=16, cols=16, fmt="bfloat16", out_fmt="bfloat16"),
], ids=lambda c: c.name)
def test_generate_lint_limits(config, tmp_path):
    """Configurations at the limits of the parameters generate Verilog that lints clean."""
    design = generate("mxu", config)
    lint(design.write(tmp_path), design.name)


def test_cli_generate(tmp_path):
    out = tmp_path / "gen"
    cmd = [sys.executable, "-m", "sim.cli", "generate", "mxu", "--rows", "2", "--cols", "3",
           "--format", "int8", "-o", str(out)]
    subprocess.run(cmd, check=True, capture_output=True)
    sidecar = json.loads((out / "podium_mxu_2x3_int8_a1024.json").read_text())
    assert sidecar["parameters"] == {"rows": 2, "cols": 3, "fmt": "int8", "acc_depth": 1024,
                                     "out_fmt": None}
    ports = {p["name"]: p for p in sidecar["ports"]}
    assert ports["a__payload"]["width"] == 16 and ports["w__payload"]["width"] == 24
    assert ports["c__payload"]["fields"]["data"]["lanes"] == {
        "count": 3, "width": 32, "signed": True}
    lint(out / "podium_mxu_2x3_int8_a1024.v", "podium_mxu_2x3_int8_a1024")

    config = tmp_path / "cfg.json"
    config.write_text(json.dumps({"block": "mxu", "parameters": {"rows": 1, "cols": 5}}))
    subprocess.run([sys.executable, "-m", "sim.cli", "generate", "--config", str(config),
                    "-o", str(out)], check=True, capture_output=True)
    assert (out / "podium_mxu_1x5_int8_a1024.v").exists()

    bad = subprocess.run(cmd[:-2] + ["--rows", "0", "-o", str(out)], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "rows must be an integer in 1..256, got 0" in bad.stderr


def test_model_matmul_wraps():
    rng = np.random.default_rng(7)
    a = rng.integers(-128, 128, size=(5, 9))
    b = rng.integers(-128, 128, size=(9, 4))
    want = [[sum(int(a[i, t]) * int(b[t, j]) for t in range(9)) for j in range(4)]
            for i in range(5)]
    assert matmul(a, b).tolist() == want
    big = matmul(np.full((1, 1), 1 << 20), np.full((1, 1), 1 << 12))
    assert big[0, 0] == 0  # 2**32 wraps to zero


def test_model_tiles_and_refusals():
    model = MXUModel(rows=2, cols=3, acc_depth=8)
    a = np.arange(6).reshape(2, 3) - 3
    b = np.arange(12).reshape(3, 4) - 6
    beats = model.execute(Gemm(2, 3, 4), a, b)
    want = a @ b
    assert len(beats) == 4 and [bt.last for bt in beats] == [False, False, False, True]
    assert [list(bt.data) for bt in beats] == [
        list(want[0, :3]), list(want[1, :3]), [want[0, 3], 0, 0], [want[1, 3], 0, 0]]
    again = model.execute(Gemm(2, 3, 4, accumulate=True), a, b)
    assert list(again[0].data) == list(2 * want[0, :3])
    refused = model.execute(Gemm(3, 1, 7, acc_addr=0))  # 3 tiles x 3 rows > 8
    assert [(bt.error, bt.last) for bt in refused] == [(True, True)]
    assert list(model.execute(Gemm(2, 3, 4, emit=True), a, b)[0].data) == list(want[0, :3])
