"""``opset``/``--opset`` (upgrade first, say when the opset holds bf16 back) and ``annotate``/``--annotate``."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.numpy_helper
import pytest
from click.testing import CliRunner

import ampconv
from ampconv_cli.main import cli
from helpers import convert_text, model_from_text, save

CONV = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,3,8,8] x, float[4,3,3,3] w) => (float[1,4,6,6] y) {
  c = Conv(x, w)
  y = Relu(c)
}
"""

MATMUL = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,4] x, float[4,4] w) => (float[2,4] y) {
  c = MatMul(x, w)
  s = Cos(c)
  y = Relu(s)
}
"""


def _opset(model: onnx.ModelProto) -> int:
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


# ------------------------------------------------------------------ opset


def test_bf16_below_opset_22_says_so_in_the_summary(tmp_path):
    report, _ = convert_text(tmp_path, CONV, dtype="bf16", keep_opset=True)
    assert report.count("LOW") == 0
    (warning,) = [w for w in report.warning_texts() if "opset 17" in w]
    assert "Conv" in warning and "opset=22" in warning  # the parameter, in Python words (the CLI: --opset 22)
    assert "warning: 1 node(s) stay float32 because opset 17" in report.summary()  # not only under -v


def test_no_opset_warning_where_the_opset_is_not_the_reason(tmp_path):
    report, _ = convert_text(tmp_path, CONV, dtype="fp16")  # Conv takes float16 at opset 17
    assert report.count("LOW") == 2
    assert not [w for w in report.warnings if "opset" in w]


def test_opset_upgrades_then_converts_and_the_output_loads(tmp_path):
    report, model = convert_text(tmp_path, CONV, dtype="bf16", opset=22)
    assert _opset(model) == 22
    assert report.count("LOW") == 2
    assert report.notes[0] == "upgraded from opset 17 to 22 with onnx's version converter before converting"
    assert report.source.endswith("model.onnx") and "ampconv-opset-" not in report.source
    onnx.checker.check_model(model, full_check=True)


def test_opset_equal_to_the_model_changes_nothing(tmp_path):
    report, model = convert_text(tmp_path, CONV, dtype="fp16", opset=17)
    assert _opset(model) == 17 and not [n for n in report.notes if "upgraded" in n]


def test_opset_keeps_external_weights_external(tmp_path):
    src = tmp_path / "m.onnx"
    model = model_from_text(CONV)
    model.graph.initializer.append(onnx.numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w"))
    del model.graph.input[1]
    onnx.save(model, str(src), save_as_external_data=True, all_tensors_to_one_file=True, location="m.data",
              size_threshold=0)
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(dtype="bf16", opset=22))
    assert report.count("LOW") == 2
    # Written like a conversion without the upgrade: with a data file beside the output.
    assert (tmp_path / "o.onnx.data").exists()
    assert onnx.load(str(tmp_path / "o.onnx")).graph.initializer[0].data_type == onnx.TensorProto.BFLOAT16


@pytest.mark.parametrize("opset, message", [(13, "below the model's opset 17"), (99, "newer than the installed")])
def test_opset_refuses_a_downgrade_or_an_unknown_opset(tmp_path, opset, message):
    src = save(model_from_text(CONV), tmp_path / "m.onnx")
    with pytest.raises(ampconv.UsageError, match=message):
        ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(opset=opset))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_opset_must_be_a_positive_integer():
    with pytest.raises(ampconv.UsageError, match="opset must be a positive integer"):
        ampconv.Config(opset="22")


def test_opset_still_guards_the_input(tmp_path):
    src = save(model_from_text(CONV), tmp_path / "m.onnx")
    before = src.read_bytes()
    with pytest.raises(ampconv.OutputError):
        ampconv.convert(src, src, ampconv.Config(opset=22, overwrite=True))
    assert src.read_bytes() == before


def test_cli_opset(tmp_path):
    src = save(model_from_text(CONV), tmp_path / "m.onnx")
    result = CliRunner().invoke(cli, ["convert", str(src), "--dtype", "bf16", "--opset", "22",
                                      "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == 0, result.output
    assert "upgraded from opset 17 to 22" in result.output
    bad = CliRunner().invoke(cli, ["convert", str(src), "--opset", "12", "-o", str(tmp_path / "p.onnx")])
    assert bad.exit_code == 2 and "below the model's opset 17" in bad.output
    assert not (tmp_path / "p.onnx").exists()


# --------------------------------------------------------------- annotate


def _props(model: onnx.ModelProto):
    return {n.name or n.op_type: {p.key: p.value for p in n.metadata_props} for n in model.graph.node}


def test_annotate_stamps_precision_and_rule(tmp_path):
    _, model = convert_text(tmp_path, MATMUL, annotate=True)
    stamped = {n.op_type: {p.key: p.value for p in n.metadata_props} for n in model.graph.node
               if n.op_type != "Cast"}
    assert stamped["MatMul"] == {"ampconv.precision": "float16", "ampconv.rule": "white"}
    assert stamped["Cos"] == {"ampconv.precision": "float32", "ampconv.rule": "black"}
    casts = [n for n in model.graph.node if n.op_type == "Cast"]
    assert casts and all({p.key: p.value for p in n.metadata_props} == {"ampconv.rule": "inserted"} for n in casts)


def test_annotate_says_bfloat16(tmp_path):
    _, model = convert_text(tmp_path, CONV, dtype="bf16", opset=22, annotate=True)
    conv = next(n for n in model.graph.node if n.op_type == "Conv")
    assert {p.key: p.value for p in conv.metadata_props}["ampconv.precision"] == "bfloat16"


def test_no_stamps_without_annotate(tmp_path):
    _, model = convert_text(tmp_path, MATMUL)
    assert all(not n.metadata_props for n in model.graph.node)


def test_cli_annotate(tmp_path):
    src = save(model_from_text(MATMUL), tmp_path / "m.onnx")
    out = tmp_path / "o.onnx"
    result = CliRunner().invoke(cli, ["convert", str(src), "--annotate", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert any(p.key == "ampconv.rule" for n in onnx.load(str(out)).graph.node for p in n.metadata_props)


def test_annotate_at_o0_warns_that_nothing_was_stamped(tmp_path):
    report, model = convert_text(tmp_path, MATMUL, level="O0", annotate=True)
    assert all(not n.metadata_props for n in model.graph.node)
    assert any("annotate" in w and "O0" in w for w in report.warnings)
    plain, _ = convert_text(tmp_path, MATMUL, level="O0")
    assert not any("annotate" in w for w in plain.warnings)  # no flag, no warning


def test_bf16_upgrades_by_default_when_the_opset_keeps_heavy_ops_float32(tmp_path):
    report, model = convert_text(tmp_path, CONV, dtype="bf16")
    assert _opset(model) == 22 and report.count("LOW") == 2
    note = report.note_texts()[0]
    assert note.startswith("upgraded from opset 17 to 22") and "Conv" in note and "keep_opset=True" in note
    assert not [w for w in report.warnings if "opset 17" in w]  # nothing left that the opset keeps float32
    onnx.checker.check_model(model, full_check=True)


def test_no_default_upgrade_where_the_opset_keeps_nothing_heavy(tmp_path):
    report, model = convert_text(tmp_path, CONV, dtype="fp16")  # Conv takes float16 at opset 17
    assert _opset(model) == 17 and not any("upgraded" in n for n in report.notes)


def test_a_failed_default_upgrade_converts_at_the_models_opset(tmp_path, monkeypatch):
    import ampconv.converter
    from ampconv.pipeline.opset_upgrade import UpgradeError

    def refuse(src, target):
        raise UpgradeError(f"{src}: onnx's version converter cannot upgrade opset 17 to {target}: made up")

    monkeypatch.setattr(ampconv.converter, "upgraded_copy", refuse)
    report, model = convert_text(tmp_path, CONV, dtype="bf16")
    assert _opset(model) == 17 and report.count("LOW") == 0
    assert report.notes[0].startswith("not upgraded to opset 22") and "made up" in report.notes[0]


def _wrong_output_shape_model(path, declared):
    """Opset 12: x [1, w] -> Transpose -> Reshape to [w, 1, -1]; the output declares ``declared``.

    The checker passes the wrong rank-2 declaration at opset 12 (Unsqueeze's axes attribute stops
    inference from counting the new shape); from opset 13 it sees rank 3 and refuses the upgraded copy.
    """
    from onnx import TensorProto as T
    from onnx import helper as h

    nodes = [h.make_node("Transpose", ["x"], ["xt"], perm=[1, 0]), h.make_node("Shape", ["xt"], ["sh"]),
             h.make_node("Gather", ["sh", "i0"], ["g0"], axis=0), h.make_node("Unsqueeze", ["g0"], ["u0"], axes=[0]),
             h.make_node("Concat", ["u0", "one", "minus"], ["shape"], axis=0),
             h.make_node("Reshape", ["xt", "shape"], ["r"]),
             h.make_node("Conv", ["r", "w"], ["y"])]
    weights = [onnx.numpy_helper.from_array(np.array(0, np.int64), "i0"),
               onnx.numpy_helper.from_array(np.array([1], np.int64), "one"),
               onnx.numpy_helper.from_array(np.array([-1], np.int64), "minus"),
               onnx.numpy_helper.from_array(np.full((2, 1, 1), 0.5, np.float32), "w")]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [1, 4])],
                         [h.make_tensor_value_info("y", T.FLOAT, declared)], weights)
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 12)]), path)
    return path


def test_an_output_shape_the_graph_contradicts_is_corrected_so_the_upgrade_goes_through(tmp_path):
    """A captcha recognizer declared its rank-3 output rank 2: bf16 upgraded nothing and made 0 nodes LOW."""
    src = _wrong_output_shape_model(tmp_path / "wrong.onnx", [1, 4])
    report = ampconv.convert(src, tmp_path / "wrong.bf16.onnx", ampconv.Config(dtype="bf16"))
    model = onnx.load(tmp_path / "wrong.bf16.onnx")
    assert _opset(model) == 22 and report.count("LOW") >= 1
    assert "written as inferred: y [1, 4] -> [4, 2, 1]" in report.notes[0]
    onnx.checker.check_model(model, full_check=True)
    # Negative: a true declaration is left alone.
    right = _wrong_output_shape_model(tmp_path / "right.onnx", [4, 2, 1])
    report = ampconv.convert(right, tmp_path / "right.bf16.onnx", ampconv.Config(dtype="bf16"))
    assert report.notes[0].startswith("upgraded from opset 12 to 22") and "inferred" not in report.notes[0]


def test_an_upgrade_that_converts_nothing_is_not_called_unchanged(tmp_path):
    """Every node kept float32 by the user at an opset they asked for: the output differs only by its opset, and says so."""
    report, model = convert_text(tmp_path, CONV, dtype="bf16", block_ops=("Conv", "Relu"), opset=22)
    assert _opset(model) == 22 and report.count("LOW") == 0 and not report.unchanged
    assert any("differs from the input only by the opset upgrade" in w for w in report.warnings)
    kept, model = convert_text(tmp_path, CONV, dtype="bf16", block_ops=("Conv", "Relu"), keep_opset=True)
    assert _opset(model) == 17 and kept.unchanged  # negative: nothing upgraded, nothing said of it
    assert not any("opset upgrade" in w for w in kept.warnings)
    # By default the blocked nodes would stay float32 at any opset: no upgrade is made for them.
    default, model = convert_text(tmp_path, CONV, dtype="bf16", block_ops=("Conv", "Relu"))
    assert _opset(model) == 17 and default.unchanged and not any("opset" in w for w in default.warnings)
