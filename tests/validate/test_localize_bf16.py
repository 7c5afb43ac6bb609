"""Localization answers "bf16 here" before "float32 here" (issue 32).

An overflow in a float16 conversion: the nodes that make or read the
out-of-range tensors are first checked in bfloat16 under emulation; when the
outputs pass, the suggestion is ``--fallback-dtype bf16 --keep-bf16 ...``,
else (a cancellation bfloat16's 8 bits lose) float32 is checked and suggested
as before.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
from click.testing import CliRunner
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import validate_models as vm
from ampconv.validation import localize
from ampconv_cli.main import cli


def _run(tmp_path, model: onnx.ModelProto, name: str, *extra):
    """convert --validate --localize (inputs in [0, 50], batch 4); returns (click result, the report's validation)."""
    src = tmp_path / f"{name}.onnx"
    onnx.save(model, str(src))
    report = tmp_path / f"{name}.json"
    args = ["convert", str(src), "-o", str(tmp_path / f"{name}.fp16.onnx"), "--overwrite", "--validate",
            "--localize", "--shape", "batch:4", "--input-range", "x:0,50", "--report", str(report),
            "--no-synthetic-run", *extra]  # the range is validation's alone: the conversion must overflow
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    return result, json.loads(report.read_text())["validation"]


def _pattern(suggestion: str) -> str:
    return suggestion.split("'")[1]


def cancellation(scale: float = 4000.0) -> onnx.ModelProto:
    """x[batch, 16] in [0, 50] -> big = x @ (4000 I) (to 2e5: beyond fp16) -> shifted = big + 1 -> y = shifted - big.

    The reference is 1 everywhere. In bfloat16 (8 significant bits: a spacing of
    1024 near 2e5) ``big + 1`` rounds back to ``big`` and y is 0: bfloat16 holds
    the range, not the precision. float32 holds both.
    """
    nodes = [h.make_node("MatMul", ["x", "scale"], ["big"], name="scale_up"),
             h.make_node("Add", ["big", "one"], ["shifted"], name="shift"),
             h.make_node("Sub", ["shifted", "big"], ["y"], name="cancel")]
    graph = h.make_graph(nodes, "cancellation", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 16])],
                         [h.make_tensor_value_info("y", T.FLOAT, ["batch", 16])],
                         [numpy_helper.from_array(np.eye(16, dtype=np.float32) * scale, "scale"),
                          numpy_helper.from_array(np.array(1.0, np.float32), "one")])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_an_overflow_bf16_fixes_gets_the_bf16_suggestion_and_it_passes_applied(tmp_path):
    """The MLP whose second layer reaches ~2e5: bf16 for the out-of-range path passes; applied, it converts
    (the nodes in bfloat16, the rest float16) and validate passes with no localization."""
    result, validation = _run(tmp_path, vm.overflowing_mlp(), "mlp")
    loc = validation["localization"]
    cause, fix = loc["cause"], loc["fix"]
    nodes = ["/layer1/MatMul", "/layer1/Add", "/layer1/Relu", "/layer2/MatMul"]
    assert cause["nodes"] == nodes and fix["nodes"] == nodes
    assert fix["runs"] == "bf16" and fix["passes"] is True
    assert cause["suggestion"] == fix["suggestion"]
    assert fix["suggestion"].startswith("--fallback-dtype bf16 --keep-bf16 '^(")
    assert "run in bf16 (float32's range) every node" in result.output and "this fix passes" in result.output
    from ampconv.report.html.columns import _failed  # the page's "what to do" copies the checked command

    page = _failed({"source": "mlp.onnx", "output": "o.onnx"}, validation, [], "1/1 outputs fail", "")
    assert "in bf16 (float32's range)" in page["todo"] and "--keep-bf16" in page["command"]
    applied, after = _run(tmp_path, vm.overflowing_mlp(), "mlp_fixed", "--fallback-dtype", "bf16",
                          "--keep-bf16", _pattern(fix["suggestion"]))
    assert after["passed"] is True and after.get("localization") is None, applied.output
    written = onnx.shape_inference.infer_shapes(onnx.load(str(tmp_path / "mlp_fixed.fp16.onnx")))
    types = {v.name: v.type.tensor_type.elem_type for v in written.graph.value_info}
    assert types["/layer1/MatMul_output_0"] == T.BFLOAT16
    assert types["/layer0/MatMul_output_0"] == T.FLOAT16  # what fits stays float16


def test_an_overflow_bf16_cannot_fix_gets_the_float32_suggestion(tmp_path):
    """A cancellation past fp16's range: bf16 holds 2e5 but loses the +1; the float32 fix is suggested, and the
    bf16 try's words are kept. Applied, the float32 suggestion passes."""
    result, validation = _run(tmp_path, cancellation(), "cancel")
    loc = validation["localization"]
    assert loc["overflow"] is True and loc["node"] == "scale_up", loc
    cause, fix = loc["cause"], loc["fix"]
    assert fix["runs"] == "float32" and fix["passes"] is True
    assert cause["suggestion"] == fix["suggestion"] == "--keep-fp32 '^(scale_up|shift|cancel)$'"
    assert fix["bf16_after"]
    assert "keep float32 every node" in result.output
    assert "The same nodes in bf16 were checked first and do not pass" in result.output
    applied, after = _run(tmp_path, cancellation(), "cancel_fixed", "--keep-fp32", _pattern(fix["suggestion"]))
    assert after["passed"] is True, applied.output


def test_a_bf16_conversion_is_not_offered_bf16(tmp_path):
    """Negative: under --dtype bf16 the cancellation is no overflow (bf16 holds 2e5) but a loss of precision:
    the float32 fix of the node that loses it, never --keep-bf16."""
    _, validation = _run(tmp_path, cancellation(), "bf16", "--dtype", "bf16")
    loc = validation["localization"]
    assert validation["passed"] is False and loc["overflow"] is False
    assert loc["cause"]["suggestion"].startswith("--keep-fp32 ")
    assert "runs" not in (loc["fix"] or {}) and "keep-bf16" not in json.dumps(loc)


def test_bf16_split_follows_the_schema_at_the_opset():
    """bf16 where the node's schema admits it at the opset (Mul-14), float32 where not (Softplus before 22)."""
    import onnx_ir as ir

    nodes = [h.make_node("Mul", ["x", "x"], ["m"], name="mul"), h.make_node("Softplus", ["m"], ["y"], name="soft")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT16, [2])],
                         [h.make_tensor_value_info("y", T.FLOAT16, [2])])
    model = ir.from_proto(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))
    assert localize.bf16_split(model, ["mul", "soft"]) == (["mul"], ["soft"])
    old = ir.from_proto(h.make_model(graph, opset_imports=[h.make_opsetid("", 12)]))
    assert localize.bf16_split(old, ["mul", "soft"]) == ([], ["mul", "soft"])  # Cast takes bf16 from 13


def test_keep_bf16_pattern_names_exactly_the_nodes():
    assert localize.keep_bf16_pattern(["a/b.c"]) == "--fallback-dtype bf16 --keep-bf16 '^a/b\\.c$'"
    assert localize.keep_bf16_pattern(["a", "b"]) == "--fallback-dtype bf16 --keep-bf16 '^(a|b)$'"
