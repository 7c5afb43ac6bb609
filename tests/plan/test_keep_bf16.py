"""``keep_bf16`` / ``--keep-bf16`` (issue 32): named nodes run in the fallback type (rule ``user-keep-bf16``).

The rule puts a matching node in bfloat16 where its schema admits it at the
model's opset, else keeps it float32 and says why; it needs
``fallback_dtype="bf16"``. Localization suggests it (tests/validate/test_localize_bf16.py).
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from onnx import TensorProto, helper

import ampconv
from ampconv.errors import UsageError

FALLBACK = "FALLBACK"


def _chain(opset: int = 17, middle: str = "Relu") -> onnx.ModelProto:
    """x -> MatMul 'mm' -> <middle> 'act' -> Add 'add' (+ b) -> y: nothing a guard would keep float32."""
    w = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node(middle, ["h"], ["a"], name="act"),
             helper.make_node("Add", ["a", "b"], ["y"], name="add")]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
                              [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(w[0], "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _plan(tmp_path, model, **config):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    report = ampconv.convert(path, tmp_path / "o.onnx", ampconv.Config(overwrite=True, synthetic_run=False,
                                                                       **config), dry_run=True)
    return {n["name"]: (str(n["precision"]), n["rule"], n["reason"]) for n in report.to_dict()["nodes"]}, report


def test_keep_bf16_puts_the_named_node_in_bf16(tmp_path):
    """Positive: the matching node runs bf16 by ``user-keep-bf16``; the nodes before it stay fp16 (LOW)."""
    decisions, _ = _plan(tmp_path, _chain(), fallback_dtype="bf16", keep_bf16=("^add$",))
    assert decisions["add"][:2] == (FALLBACK, "user-keep-bf16")
    assert "--keep-bf16 '^add$'" in decisions["add"][2] and "runs bfloat16" in decisions["add"][2]
    assert decisions["mm"][0] == "LOW" and decisions["act"][0] == "LOW"


def test_keep_bf16_written_model_has_the_node_in_bfloat16(tmp_path):
    """Applied: the written model computes 'add' in bfloat16 and 'mm' in float16, and it loads."""
    path = tmp_path / "m.onnx"
    onnx.save(_chain(), path)
    dst = tmp_path / "o.onnx"
    ampconv.convert(path, dst, ampconv.Config(fallback_dtype="bf16", keep_bf16="^add$", overwrite=True))
    written = ir.from_proto(onnx.shape_inference.infer_shapes(onnx.load(str(dst))))
    types = {node.name: node.outputs[0].dtype for node in written.graph}
    assert types["add"] == ir.DataType.BFLOAT16
    assert types["mm"] == ir.DataType.FLOAT16


def test_keep_bf16_matches_nothing_else_and_warns_on_no_match(tmp_path):
    """Negative: a pattern that names no node changes no decision, and the plan warns about it."""
    plain, _ = _plan(tmp_path, _chain(), fallback_dtype="bf16")
    decisions, report = _plan(tmp_path, _chain(), fallback_dtype="bf16", keep_bf16=("^nothing$",))
    assert decisions == plain
    assert any("keep_bf16 '^nothing$' matches no node name" in w for w in report.warning_texts())


def test_keep_fp32_wins_over_keep_bf16(tmp_path):
    """Both match: ``user-keep-fp32`` is tried first, so the node stays float32."""
    decisions, _ = _plan(tmp_path, _chain(), fallback_dtype="bf16", keep_bf16=("^mm$",), keep_fp32=("^mm$",))
    assert decisions["mm"][:2] == ("HIGH", "user-keep-fp32")


def test_keep_bf16_where_the_schema_refuses_bf16_names_the_opset(tmp_path):
    """Negative: Softplus-1 (opset 17) takes no bf16: float32, the reason naming opset 22 (the upgrade reads it)."""
    decisions, report = _plan(tmp_path, _chain(middle="Softplus"), fallback_dtype="bf16", keep_bf16=("^act$",),
                              keep_opset=True)
    precision, rule, reason = decisions["act"]
    assert (precision, rule) == ("HIGH", "user-keep-bf16")
    assert "only from opset 22" in reason
    assert any("opset=22" in w for w in report.warning_texts())
    assert "named by keep_bf16, without bf16 at this opset" in report.summary()


def test_keep_bf16_on_an_op_that_never_takes_bf16(tmp_path):
    """Negative: Shrink takes bf16 at no opset: float32, and the reason says so."""
    decisions, _ = _plan(tmp_path, _chain(middle="Shrink"), fallback_dtype="bf16", keep_bf16=("^act$",))
    precision, rule, reason = decisions["act"]
    assert (precision, rule) == ("HIGH", "user-keep-bf16")
    assert "Shrink does not take bf16 at opset 17 or later" in reason


def test_widen_neither_undoes_nor_doubles_keep_bf16(tmp_path):
    """A node the range guard would also put in bf16: the user's rule decides, its reason said once."""
    from bench import bf16_models

    model, _ = bf16_models.gemma_rms_norm()
    decisions, _ = _plan(tmp_path, model, fallback_dtype="bf16", keep_bf16=("^norm/mean$",))
    precision, rule, reason = decisions["norm/mean"]
    assert (precision, rule) == (FALLBACK, "user-keep-bf16")
    assert "float32's range" not in reason and reason.count("runs ") == 1


@pytest.mark.parametrize("config", [dict(keep_bf16=("x",)), dict(keep_bf16=("x",), fallback_dtype="float32")])
def test_keep_bf16_needs_the_bf16_fallback(config):
    with pytest.raises(UsageError, match=r"keep_bf16 .*needs fallback_dtype='bf16'"):
        ampconv.Config(**config)


def test_keep_bf16_bad_regex():
    with pytest.raises(UsageError, match="bad node-name regex"):
        ampconv.Config(fallback_dtype="bf16", keep_bf16=("(",))


def test_cli_keep_bf16_without_fallback_is_a_one_line_usage_error(tmp_path):
    from click.testing import CliRunner

    from ampconv_cli.main import cli

    path = tmp_path / "m.onnx"
    onnx.save(_chain(), path)
    result = CliRunner().invoke(cli, ["convert", str(path), "-o", str(tmp_path / "o.onnx"), "--keep-bf16", "mm"])
    assert result.exit_code == 2
    assert "--keep-bf16 puts nodes in the fallback type; it needs --fallback-dtype bf16" in result.output
    assert not (tmp_path / "o.onnx").exists()
    ok = CliRunner().invoke(cli, ["convert", str(path), "-o", str(tmp_path / "o.onnx"), "--fallback-dtype", "bf16",
                                  "--keep-bf16", "^mm$", "--keep-bf16", "^add$"])
    assert ok.exit_code == 0, ok.output
