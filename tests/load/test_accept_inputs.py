"""Every model onnxruntime accepts is converted; an input invalid for it too is blamed as the input.

Inputs the checker refuses but onnxruntime loads are repaired in ampconv's own
copy and every repair is reported; the converted model passes the full checker.
A rejection of the converted model by onnx.checker pins the blamed node.
"""

from __future__ import annotations

import hashlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ampconv
from ampconv.errors import ConversionError, ModelLoadError
from ampconv.runtime.verdict import PIN, checker_pins, judge
from ampconv_cli.main import cli


def _mlp(ir_version: int = 8, opset: int = 13) -> onnx.ModelProto:
    w = numpy_helper.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "W")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
            helper.make_node("Relu", ["h"], ["y"], name="relu"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


def _no_output_type(m):
    m.graph.output[0].ClearField("type")


def _no_output_shape(m):
    m.graph.output[0].type.tensor_type.ClearField("shape")


def _unsorted(m):
    nodes = list(m.graph.node)
    del m.graph.node[:]
    m.graph.node.extend(reversed(nodes))


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "mutate,ir_version,opset,note",
    [
        (_no_output_type, 8, 13, "graph output y has no type"),
        (_no_output_shape, 8, 13, "graph output y has no shape"),
        (None, 3, 8, "IR version raised to 4"),
        (_unsorted, 8, 13, "topological order"),
    ],
    ids=["output-without-type", "output-without-shape", "ir3-initializer-not-input", "unsorted"],
)
def test_runtime_accepted_input_is_repaired_and_converted(tmp_path, mutate, ir_version, opset, note):
    model = _mlp(ir_version, opset)
    if mutate is not None:
        mutate(model)
    src = tmp_path / "in.onnx"
    onnx.save(model, str(src))
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(str(src))
    ort.InferenceSession(str(src), providers=["CPUExecutionProvider"])  # the runtime accepts it
    before = _digest(src)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert _digest(src) == before
    assert any("fails onnx.checker" in n and "loads in onnxruntime" in n for n in report.notes)
    assert any(note in n for n in report.notes), report.notes
    onnx.checker.check_model(str(tmp_path / "out.onnx"), full_check=True)
    session = ort.InferenceSession(str(tmp_path / "out.onnx"), providers=["CPUExecutionProvider"])
    x = np.ones((2, 4), np.float32)
    (y,) = session.run(None, {"x": x})
    np.testing.assert_allclose(y, np.maximum(x @ numpy_helper.to_array(model.graph.initializer[0]), 0), rtol=1e-2)


def test_valid_input_gets_no_repair_note(tmp_path):
    src = tmp_path / "in.onnx"
    onnx.save(_mlp(), str(src))
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert not any("repaired" in n or "onnx.checker (" in n for n in report.notes)


def test_input_invalid_for_runtime_blames_the_input(tmp_path):
    model = _mlp()
    model.graph.node[1].name = "mm"  # two nodes with one name: the checker passes, onnxruntime refuses
    src = tmp_path / "dup.onnx"
    onnx.save(model, str(src))
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(tmp_path / "out.onnx")])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("ampconv: error:")
    assert str(src) in lines[0] and "input model is invalid" in lines[0] and "same node name" in lines[0]
    assert "ampconv-tmp" not in lines[0]  # never a private staging path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup.onnx"]


def test_input_invalid_for_checker_and_runtime_names_both(tmp_path):
    model = _mlp()
    model.graph.output[0].type.tensor_type.ClearField("elem_type")
    src = tmp_path / "bad.onnx"
    onnx.save(model, str(src))
    with pytest.raises(ModelLoadError) as info:
        ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    message = str(info.value)
    assert message.startswith(str(src)) and "onnx.checker:" in message and "onnxruntime:" in message
    assert not (tmp_path / "out.onnx").exists()


def _mixed_add(tmp_path):
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16, name="cast"),
            helper.make_node("Add", ["h", "x"], ["y"], name="add"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_checker_message_names_the_node_to_pin(tmp_path):
    """The checker's own words, from a real rejection, become the pin's reason."""
    model = _mixed_add(tmp_path)
    with pytest.raises(Exception) as info:
        onnx.checker.check_model(model, full_check=True)
    ir_model = ampconv.converter.ir.serde.deserialize_model(model)
    pins = checker_pins(str(info.value), ir_model)
    assert list(pins) == ["add"]
    assert pins["add"].startswith("onnx.checker:") and "inconsistent type" in pins["add"]
    verdict = judge(ConversionError("converted model fails onnx.checker: x", str(info.value), ConversionError.CHECKER), ir_model, "fp16")
    assert verdict.kind == PIN and list(verdict.pins) == ["add"]


def test_checker_message_without_a_known_node_pins_nothing(tmp_path):
    ir_model = ampconv.converter.ir.serde.deserialize_model(_mixed_add(tmp_path))
    assert checker_pins("[ShapeInferenceError] (op_type:Add, node name: elsewhere): bad", ir_model) == {}
    assert checker_pins("Field 'type' of 'value_info' is required but missing.", ir_model) == {}
    verdict = judge(ConversionError("converted model fails onnx.checker: x", "no node here", ConversionError.CHECKER), ir_model, "fp16")
    assert verdict.kind == "fail"


def test_cast_counts_add_up(tmp_path):
    """before + inserted - removed = after, also when the cleanup bypasses an existing Cast."""
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
            helper.make_node("Cast", ["h"], ["c"], to=TensorProto.FLOAT, name="cast"),
            helper.make_node("Relu", ["c"], ["y"], name="relu"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.ones((4, 3), np.float32), "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    src = tmp_path / "in.onnx"
    onnx.save(model, str(src))
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    written = sum(n.op_type == "Cast" for n in onnx.load(str(tmp_path / "out.onnx")).graph.node)
    assert report.casts_after == written
    assert report.casts_before + report.casts_inserted - report.casts_removed == report.casts_after
