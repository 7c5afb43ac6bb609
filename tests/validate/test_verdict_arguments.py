"""Which pairs ``validate`` judges (issue 30, 4 and 5).

Swapped arguments (the float32 model given as the converted one, beside a LOW
reference) are refused with one line and exit 1. A model onnxruntime runs is
validated even where onnx.checker refuses it, with a note naming who will
refuse it: nodes out of topological order (onnxruntime's float16 tool writes
them so) and onnxruntime's own ops in the default domain (onnxruntime-genai's
builder writes SimplifiedLayerNormalization so).
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from ampconv.errors import AmpconvError
from ampconv.validation import ValidateOptions, validate
from ampconv_cli.validate import command

import validate_models as vm


def test_swapped_arguments_are_refused_in_one_line_with_exit_1(tmp_path, cli_runner):
    ref, conv = vm.mlp_pair(tmp_path)
    with pytest.raises(AmpconvError, match="the arguments look swapped"):
        validate(conv, ref)
    result = cli_runner.invoke(command, [conv, ref])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "holds no float16/bfloat16 tensor while the reference" in lines[0]
    assert result.stdout == ""


def test_the_right_order_and_two_float32_models_still_run(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    assert validate(ref, conv).passed
    same = validate(ref, ref)  # nothing LOW on either side: judged, with a note (not a swap)
    assert same.passed and any("no float16/bfloat16 tensor found" in n for n in same.notes)


def _unsorted(path_in: str, path_out) -> str:
    model = onnx.load(path_in)
    nodes = list(model.graph.node)
    del model.graph.node[:]
    model.graph.node.extend(reversed(nodes))
    onnx.save(model, str(path_out))
    return str(path_out)


def test_nodes_out_of_order_are_validated_with_a_note_naming_tensorrt(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    unsorted = _unsorted(conv, tmp_path / "unsorted.onnx")
    with pytest.raises(onnx.checker.ValidationError, match="topologically sorted"):
        onnx.checker.check_model(onnx.load(unsorted))
    result = validate(ref, unsorted)
    assert result.passed
    note = next(n for n in result.notes if "onnx.checker refuses it" in n)
    assert "topologically sorted" in note and "onnxruntime runs it" in note and "TensorRT" in note


def _simplified_layer_norm(path, dtype=T.FLOAT) -> str:
    """x -> SimplifiedLayerNormalization (onnxruntime's op, registered in the default domain) -> MatMul -> y."""
    rng = np.random.default_rng(0)
    low = dtype != T.FLOAT
    numpy_type = np.float16 if low else np.float32
    nodes = [
        helper.make_node("SimplifiedLayerNormalization", ["x_in", "scale"], ["n"], axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["n", "w"], ["y_out"]),
    ]
    if low:
        nodes = [helper.make_node("Cast", ["x"], ["x_in"], to=dtype)] + nodes
        nodes.append(helper.make_node("Cast", ["y_out"], ["y"], to=T.FLOAT))
    else:
        nodes = [helper.make_node("Identity", ["x"], ["x_in"])] + nodes + [helper.make_node("Identity", ["y_out"], ["y"])]
    inits = [numpy_helper.from_array(np.ones(16, numpy_type), "scale"),
             numpy_helper.from_array((rng.standard_normal((16, 8)) * 0.25).astype(numpy_type), "w")]
    graph = helper.make_graph(nodes, "genai", [helper.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                              [helper.make_tensor_value_info("y", T.FLOAT, [4, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = vm.IR_VERSION
    onnx.save(model, str(path))
    return str(path)


def test_onnxruntime_ops_in_the_default_domain_are_validated_with_a_note(tmp_path):
    ref = _simplified_layer_norm(tmp_path / "genai.onnx")
    conv = _simplified_layer_norm(tmp_path / "genai.fp16.onnx", T.FLOAT16)
    result = validate(ref, conv, ValidateOptions(backend="emulate"))
    assert result.passed, [o.decided_by for o in result.outputs]
    note = next(n for n in result.notes if "onnx.checker refuses it" in n)
    assert "SimplifiedLayerNormalization" in note and "onnxruntime's own operators" in note


def test_a_model_onnxruntime_refuses_is_still_refused(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    model = onnx.load(conv)
    model.graph.node[1].op_type = "NoSuchOp"  # neither onnx.checker nor onnxruntime knows it
    broken = str(tmp_path / "broken.onnx")
    onnx.save(model, broken)
    with pytest.raises(AmpconvError, match="onnxruntime"):  # refused as it is read
        validate(ref, broken)
