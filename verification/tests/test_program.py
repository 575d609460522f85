"""The program format (podium/program.py) and the runner seam (podium/runner.py): layouts
pack and unpack arrays with zero padding, files round-trip, inputs are checked by name."""

import ml_dtypes
import numpy as np
import pytest

from podium.compiler import gemm
from podium.program import Program, Tensor
from podium.runner import run
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig


def test_tensor_pack_unpack(seed):
    rng = np.random.default_rng(seed)
    t = Tensor(0x1000, (3, 5), "bfloat16", 32)
    x = rng.standard_normal((3, 5)).astype(ml_dtypes.bfloat16)
    raw = np.frombuffer(t.pack(x), dtype=np.uint8).reshape(3, 32)
    assert not raw[:, 10:].any(), "padding is zero"
    assert np.array_equal(raw[:, :10].copy().view(ml_dtypes.bfloat16), x)
    assert np.array_equal(t.unpack(t.pack(x)).view(np.uint16), x.view(np.uint16))
    with pytest.raises(ValueError, match=r"array of shape \(5, 3\) given for a tensor of "
                                         r"shape \(3, 5\)"):
        t.pack(x.T)


def test_save_load_round_trip(tmp_path):
    config = TensorCoreConfig(mxu=MXUConfig(fmt="bfloat16"), queue_depth=4)
    program = gemm(config, 7, 9, 11)
    program.bind(B=np.ones((9, 11), dtype=ml_dtypes.bfloat16))
    path = tmp_path / "p.json"
    program.save(path)
    loaded = Program.load(path)
    assert loaded.words == program.words and loaded.config == config
    assert loaded.hbm == program.hbm and loaded.inputs == program.inputs
    assert loaded.outputs == program.outputs and loaded.metadata == program.metadata
    a = np.full((7, 9), 2, dtype=ml_dtypes.bfloat16)
    result, out = run(loaded, {"A": a})
    assert result.status == "done"
    assert np.array_equal(out["C"], np.full((7, 11), 18, dtype=np.float32))


def test_inputs_checked():
    program = gemm(TensorCoreConfig(), 2, 2, 2)
    with pytest.raises(ValueError, match=r"inputs must be exactly \['A', 'B'\]; missing "
                                         r"\['B'\], unknown \['Z'\]"):
        program.image({"A": np.zeros((2, 2), np.int8), "Z": 1})
    with pytest.raises(ValueError, match="'Q' is not an input"):
        program.bind(Q=np.zeros(1))
    with pytest.raises(ValueError, match="sim must be one of golden.*, got 'rtl'"):
        run(program, {}, sim="rtl")
    with pytest.raises(ValueError, match="format must be 'podium-program' with version 1, "
                                         "got 'other' version None"):
        Program.from_dict({"format": "other"})


def test_failed_run_has_no_outputs():
    program = gemm(TensorCoreConfig(), 2, 2, 2)
    program.hbm_capacity = program.outputs["C"].address    # the store of C is refused
    zeros = np.zeros((2, 2), np.int8)
    result, out = run(program, {"A": zeros, "B": zeros})
    assert result.status == "error" and result.error.name == "DMA_RESPONSE" and out == {}
