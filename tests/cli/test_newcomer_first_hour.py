"""Issue 31, "a newcomer's first hour": each wrong turn a new user met, as a test that failed before the fix.

Items 3-5 and 7 of the issue: tracebacks and wrong figures, advice the tool
itself refused, a summary quiet where it should speak, and the Python API's
words. (Help, README and the report page have their own files:
``test_newcomer_help.py``, ``test_newcomer_readme.py``, ``test_html_report.py``.)
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from onnx import TensorProto, helper

import ampconv
from ampconv import report as summary
from ampconv.report import Report, render_text
from ampconv_cli.main import cli
from conftest import make_model, tiny_mlp
from helpers import model_from_text


def _run(runner, *args):
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _one_line_error(result, code, *fragments):
    assert result.exit_code == code, (result.exit_code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ampconv: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# --- item 3: tracebacks and wrong figures -------------------------------------------------------------------


@pytest.mark.parametrize("command", ["convert", "report"])
def test_a_directory_given_as_the_model_or_report_is_one_line(cli_runner, tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    onnx.save(tiny_mlp(), "m.onnx")
    result = _run(cli_runner, command, ".")
    _one_line_error(result, 1, ".: is a directory")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def _paddle_style_conv() -> onnx.ModelProto:
    """A Conv whose input, output and intermediate value declare their batch dim as -1 (paddle2onnx's habit)."""
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[N,3,8,8] x, float[4,3,3,3] w) => (float[N,4,8,8] y) {
      c = Conv<pads=[1,1,1,1]>(x, w)
      y = Relu(c)
    }
    """)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w"))
    del model.graph.input[1]
    for info in (model.graph.input[0], model.graph.output[0]):
        dim = info.type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_value = -1
    model.graph.value_info.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, [-1, 4, 8, 8]))
    return model


@pytest.mark.parametrize("shapes, batch", [((), 1), ((("x", (1, 3, 8, 8)),), 1), ("x:4x3x8x8", 4)])
def test_cast_traffic_of_minus_one_dims_is_never_negative(tmp_path, shapes, batch):
    src = tmp_path / "m.onnx"
    onnx.save(_paddle_style_conv(), str(src))
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(shapes=shapes))
    figures = report.figures
    assert figures["casts"] == 2 and figures["cast_traffic_unknown"] == 0
    # The input cast moves batch*3*8*8 values (4 + 2 bytes each), the output cast batch*4*8*8.
    assert figures["cast_traffic_bytes"] == batch * (3 * 64 + 4 * 64) * 6
    assert "moving -" not in render_text(report)


# --- item 4: advice the tool itself refuses ------------------------------------------------------------------


def _question_mark_dim_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "?"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "?"])],
    )
    return make_model(graph)


def test_a_dim_named_question_mark_is_set_by_axis_as_the_note_says(tmp_path, cli_runner):
    src = tmp_path / "m.onnx"
    onnx.save(_question_mark_dim_model(), str(src))
    result = ampconv.validate(src, src)
    note = next(n for n in result.notes if "size 1" in n)
    # In a Python caller's words (issue 40): the shapes parameter, keyed by input and axis.
    assert "--shape ?:" not in note and "'?'" not in note and "shapes={'x[1]': N}" in note
    # The advice works as written.
    ran = _run(cli_runner, "validate", src, src, "--shape", "x[1]:48")
    assert ran.exit_code == 0, ran.stderr


def _reflect_pad_model() -> onnx.ModelProto:
    """A VAD-style front end: a reflect Pad of 1 on an open time axis, which size 1 cannot feed."""
    return model_from_text("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1,T] audio) => (float[1,U] y) {
      pads = Constant<value = int64[4] {0, 1, 0, 1}>()
      y = Pad<mode="reflect">(audio, pads)
    }
    """)


def test_a_reference_that_fails_on_a_size_one_random_input_names_the_shape_to_pass(tmp_path, cli_runner):
    src = tmp_path / "vad.onnx"
    onnx.save(_reflect_pad_model(), str(src))
    result = _run(cli_runner, "validate", src, src)
    _one_line_error(result, 1, "onnxruntime failed to run the reference model", "size 1",
                    "--shape T:N")
    assert _run(cli_runner, "validate", src, src, "--shape", "T:400").exit_code == 0


# --- item 5: quiet where it should speak ---------------------------------------------------------------------


def _dynamically_quantized(tmp_path):
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src = tmp_path / "mlp.onnx"
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W1"], ["h"], name="/fc1/MatMul"),
         helper.make_node("Relu", ["h"], ["r"], name="/act/Relu"),
         helper.make_node("MatMul", ["r", "W2"], ["y"], name="/fc2/MatMul")],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [onnx.numpy_helper.from_array(np.random.default_rng(0).normal(size=(16, 32)).astype(np.float32), "W1"),
         onnx.numpy_helper.from_array(np.random.default_rng(1).normal(size=(32, 4)).astype(np.float32), "W2")],
    )
    onnx.save(make_model(graph), str(src))
    quantize_dynamic(str(src), str(tmp_path / "q.onnx"), weight_type=QuantType.QInt8)
    return tmp_path / "q.onnx"


def test_an_already_quantized_model_says_so_and_why_nothing_converts(tmp_path, cli_runner):
    quantized = _dynamically_quantized(tmp_path)
    result = _run(cli_runner, "convert", quantized)
    assert result.exit_code == 0, result.stderr
    assert "nothing to convert: the model is unchanged (it is already quantized)" in result.stderr
    assert "already quantized: 4 quantization node(s) (DynamicQuantizeLinear 2, MatMulInteger 2)" in result.stderr
    float32 = next(line for line in result.stderr.splitlines() if line.strip().startswith("float32:"))
    assert "follow quantization scales" in float32


def test_the_summary_counts_float32_nodes_by_rule():
    report = Report("m.onnx", "o.onnx", "fp16", "O2", "O2", "default", [])
    report.nodes = [
        {"name": "ln/mean", "op_type": "ReduceMean", "precision": "HIGH", "rule": "range-statistics", "follows": None},
        {"name": "ln/sub", "op_type": "Sub", "precision": "HIGH", "rule": "gray-follow", "follows": "ln/mean"},
        {"name": "mm", "op_type": "MatMul", "precision": "HIGH", "rule": "hard-constant", "follows": None},
        {"name": "head", "op_type": "Gemm", "precision": "HIGH", "rule": "user-keep-fp32", "follows": None},
        {"name": "add", "op_type": "Add", "precision": "HIGH", "rule": "gray-follow", "follows": "x"},
        {"name": "relu", "op_type": "Relu", "precision": "LOW", "rule": "gray-follow", "follows": "mm2"},
    ]
    line = summary.float32_by_rule_line(report)
    assert line.startswith("float32: 5 node(s): ")
    for part in ("1 normalization statistics", "1 follow normalization statistics", "1 fed by constants out of the",
                 "1 kept by keep_fp32", "1 follow float32 graph inputs"):
        assert part in line
    assert line in render_text(report)
    # No float32 node: no line.
    report.nodes = report.nodes[-1:]
    assert "float32:" not in render_text(report)


def test_plain_validate_says_on_its_drift_line_that_the_exit_status_stays_zero(tmp_path, cli_runner):
    src = tmp_path / "m.onnx"
    # exp(12) overflows fp16: the converted model drifts.
    onnx.save(model_from_text("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2,4] x) => (float[2,4] y) {
      k = Constant<value = float {12.0}>()
      a = Add(x, k)
      y = Exp(a)
    }
    """), str(src))
    result = _run(cli_runner, "convert", src, "--level", "O3", "--validate", "--rtol", "1e-4", "--atol", "0")
    assert result.exit_code == 0
    warning = next(line for line in result.stderr.splitlines() if "drifts beyond tolerance" in line)
    assert "exit status stays 0" in warning and "--fail-on-drift" in warning


def test_block_op_of_an_unknown_op_is_refused_with_a_hint(tmp_path, cli_runner, mlp_path):
    result = _run(cli_runner, "convert", mlp_path, "--block-op", "matmul")
    _one_line_error(result, 2, "--block-op matmul", "did you mean 'MatMul'?")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mlp.onnx"]
    with pytest.raises(ampconv.UsageError, match=r"block_ops='matmul'.*did you mean 'MatMul'"):
        ampconv.convert(mlp_path, tmp_path / "o.onnx", ampconv.Config(block_ops="matmul"))
    # A known op, another domain's op, and a framework name are still taken.
    ok = _run(cli_runner, "convert", mlp_path, "--block-op", "MatMul,com.microsoft::Gelu,MatMulV2", "--dry-run")
    assert ok.exit_code == 0, ok.stderr


def test_keep_opset_with_opset_is_refused(cli_runner, mlp_path):
    result = _run(cli_runner, "convert", mlp_path, "--keep-opset", "--opset", "22")
    _one_line_error(result, 2, "--keep-opset and --opset 22 contradict each other")
    with pytest.raises(ampconv.UsageError, match="keep_opset and opset=22 contradict"):
        ampconv.Config(keep_opset=True, opset=22)


# --- item 7: the Python API speaks Python ---------------------------------------------------------------------


def test_print_of_a_validation_result_reads_like_the_cli(mlp_path, tmp_path):
    out = tmp_path / "o.onnx"
    ampconv.convert(mlp_path, out)
    result = ampconv.validate(mlp_path, out)
    text = str(result)
    assert "ValidationResult(" not in text and "PASS" in text
    assert repr(result).startswith("ValidationResult(")


def test_library_warnings_name_parameters_and_the_cli_names_flags(mlp_path, tmp_path, cli_runner):
    report = ampconv.convert(mlp_path, tmp_path / "o.onnx", ampconv.Config(keep_fp32="^/head/", force_low="^zz"))
    assert "keep_fp32 '^/head/' matches no node name" in report.summary()
    assert report.warning_texts() == ["keep_fp32 '^/head/' matches no node name",
                                      "force_low '^zz' matches no node name"]
    assert "--keep-fp32" not in report.summary() and "--keep-fp32" not in str(report.to_dict()["warnings"])
    result = _run(cli_runner, "convert", mlp_path, "--keep-fp32", "^/head/", "--overwrite")
    assert "warning: --keep-fp32 '^/head/' matches no node name" in result.stderr


@pytest.mark.parametrize("shapes", [{"x": "2x4"}, "x:2x4", ["x:2x4"]])
def test_shapes_take_the_cli_strings(shapes):
    assert ampconv.ValidateOptions(shapes=shapes).shapes == (("x", (2, 4)),)
    assert ampconv.Config(shapes=shapes).shapes == (("x", (2, 4)),)
