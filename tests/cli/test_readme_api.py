"""The README's "Python API" examples run as written, and the in-memory entry points keep their promises."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import numpy as np
import onnx
import onnx.numpy_helper
import onnx_ir as ir
import pytest
from onnx_ir.passes import PassManager

import ampconv
from helpers import model_from_text

README = Path(__file__).resolve().parents[2] / "README.md"

# A batch dimension (the validate example sets it), a node under /head/ (the
# keep_fp32 example), an initializer and a black-list op (casts to insert: Cos, which the default
# preset keeps float32 on every model).
TEXT = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[batch,4] x) => (float[batch,4] y) {
  a = MatMul(x, w)
  s = Cos(a)
  y = Relu(s)
}
"""


def _model() -> onnx.ModelProto:
    model = model_from_text(TEXT.replace("(float[batch,4] x)", "(float[batch,4] x, float[4,4] w)"))
    rng = np.random.default_rng(0)
    model.graph.initializer.append(onnx.numpy_helper.from_array(rng.normal(size=(4, 4)).astype(np.float32), "w"))
    del model.graph.input[1]
    model.graph.node[-1].name = "/head/Relu"
    onnx.checker.check_model(model, full_check=True)
    return model


def python_api_examples() -> list:
    """The ```python blocks of the README's "Python API" section, in order."""
    text = README.read_text()
    section = text.split("## Python API", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.S)


def test_readme_has_an_example_of_each_entry_point():
    code = "\n".join(python_api_examples())
    for entry in ("ampconv.convert(", "ampconv.convert_model(", "ampconv.MixedPrecisionPass(", "ampconv.validate("):
        assert entry in code


def test_readme_python_examples_run(tmp_path):
    onnx.save(_model(), str(tmp_path / "model.onnx"))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            for block in python_api_examples():
                exec(compile(block, "README.md", "exec"), {})  # noqa: S102 - the README's own examples
    finally:
        os.chdir(cwd)
    printed = out.getvalue()
    assert "ampconv: converted model.onnx -> model.fp16.onnx" in printed
    assert "True 1 LOW nodes" in printed  # the pass: modified, one LOW MatMul
    assert printed.rstrip().endswith("True")  # validation passes
    assert 'metric same_top1 holds on 1/1 sample(s) (sample 0: "top-1 agrees on 100% of the rows")' in printed
    assert onnx.load(str(tmp_path / "model.bf16.onnx")).graph.initializer[0].data_type == onnx.TensorProto.BFLOAT16


def test_convert_model_returns_a_proto_and_leaves_the_input_unchanged():
    model = _model()
    before = model.SerializeToString()
    converted, report = ampconv.convert_model(model)
    assert isinstance(converted, onnx.ModelProto)
    assert model.SerializeToString() == before
    assert converted.graph.initializer[0].data_type == onnx.TensorProto.FLOAT16
    assert report.source == "<in-memory model>" and report.output is None
    assert report.load_check["runtime"] is True  # the onnxruntime load check ran
    onnx.checker.check_model(converted, full_check=True)


def test_convert_model_returns_an_ir_model_for_an_ir_model():
    model = ir.from_proto(_model())
    converted, report = ampconv.convert_model(model, ampconv.Config(level="O3"))
    assert isinstance(converted, ir.Model) and converted is not model
    assert model.graph.initializers["w"].const_value.dtype == ir.DataType.FLOAT  # input untouched
    assert report.count("LOW") == 3


def test_convert_model_reads_an_ir_model_whose_weights_live_in_a_file(tmp_path):
    path = tmp_path / "m.onnx"
    ir.save(ir.from_proto(_model()), path, external_data="m.data", size_threshold_bytes=0)
    model = ir.load(path)
    assert isinstance(model.graph.initializers["w"].const_value, ir.ExternalTensor)
    converted, _ = ampconv.convert_model(model)
    weight = converted.graph.initializers["w"].const_value
    assert weight.dtype == ir.DataType.FLOAT16 and not isinstance(weight, ir.ExternalTensor)
    np.testing.assert_allclose(weight.numpy(), model.graph.initializers["w"].const_value.numpy(), rtol=1e-3)


def test_mixed_precision_pass_composes_in_a_pass_manager():
    model = ir.from_proto(_model())
    to_fp16 = ampconv.MixedPrecisionPass(ampconv.Config())
    result = PassManager([to_fp16])(model)
    assert result.modified and result.model is not model
    assert to_fp16.report.count("LOW") == 1


def test_mixed_precision_pass_reports_no_change_at_o0():
    to_fp16 = ampconv.MixedPrecisionPass(ampconv.Config(level="O0"))
    result = PassManager([to_fp16])(ir.from_proto(_model()))
    assert not result.modified


def test_convert_model_refuses_a_path_and_unloaded_external_data(tmp_path):
    with pytest.raises(ampconv.UsageError, match="ampconv.convert"):
        ampconv.convert_model("model.onnx")
    path = tmp_path / "m.onnx"
    onnx.save(_model(), str(path), save_as_external_data=True, size_threshold=0)
    unloaded = onnx.load(str(path), load_external_data=False)
    with pytest.raises(ampconv.UsageError, match="external data that is not loaded"):
        ampconv.convert_model(unloaded)


def test_convert_model_errors_do_not_name_the_private_folder():
    # The model's opset is 17: a downgrade is refused with a message that starts with the model's path.
    with pytest.raises(ampconv.UsageError) as caught:
        ampconv.convert_model(_model(), ampconv.Config(opset=5))
    assert str(caught.value).startswith("<in-memory model>: opset=5 is below")
    assert "ampconv-" not in str(caught.value)  # the temporary folder's prefix
