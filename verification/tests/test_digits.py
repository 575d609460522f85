"""The digits workload (podium/workloads/digits.py): the whole test split compiled to one
program per format, run on the golden simulator: logits equal the numpy inference of the
quantized model bit for bit, so classes and accuracy are identical; accuracy near the float
model's."""

import numpy as np
import pytest

from podium.runner import run
from podium.workloads import digits
from spec.mxu import MXUConfig
from spec.tensorcore import TensorCoreConfig


@pytest.fixture(scope="module")
def trained():
    return digits.load()


@pytest.mark.parametrize("dtype, config", [
    ("int8", TensorCoreConfig()),
    ("bfloat16", TensorCoreConfig(mxu=MXUConfig(fmt="bfloat16"))),
    ("int8", TensorCoreConfig(mxu=MXUConfig(rows=16, cols=16), row_bytes=64,
                              queue_depth=2, vmem_banks=4)),
], ids=["int8", "bfloat16", "int8_16x16"])
def test_digits(trained, dtype, config):
    program = digits.compile_digits(config, trained, dtype)
    assert program.inputs == {} and len(program.words) < 256
    result, out = run(program)
    assert result.status == "done"
    if dtype == "int8":
        expect = digits.infer_int8(digits.quantize_int8(trained), trained.x_test)
        assert np.array_equal(out["Y"], expect)
    else:
        expect = digits.infer_bf16(digits.quantize_bf16(trained), trained.x_test, config)
        assert np.array_equal(out["Y"].view(np.uint32), expect.view(np.uint32))
    classes = np.argmax(out["Y"], axis=1)
    assert list(classes) == program.metadata["classes"]
    accuracy = np.mean(classes == trained.y_test)
    assert accuracy == program.metadata["numpy_accuracy"]
    assert abs(accuracy - trained.float_accuracy) < 0.01 and accuracy > 0.95
