"""An upgrade that loads (issue 29): the default upgrade goes to the lowest opset admitting the nodes that will
actually go LOW, never past what onnxruntime runs, and is confirmed by loading the upgraded float32 model."""

from __future__ import annotations

import onnx
import pytest

import ampconv
import hazard_models as hm
import numbers_models as nm
from ampconv.pipeline.opset_upgrade import runtime_opset_ceiling
from ampconv.validation.options import ValidateOptions


def _convert(tmp_path, proto, name, **options):
    src = hm.save(proto, tmp_path, name)
    out = tmp_path / f"{name}.bf16.onnx"
    report = ampconv.convert(src, out, ampconv.Config(dtype="bf16", overwrite=True, **options))
    return src, out, report


def _runs_emulated(src, out) -> bool:
    return ampconv.validate(src, out, ValidateOptions(backend="emulate", samples=2)).passed


@pytest.mark.parametrize("opset", [17, 18, 19, 20])
def test_yolo_upgrades_to_the_opset_its_convs_need_not_to_the_one_range_would(tmp_path, opset):
    """Range takes bfloat16 only from a later opset, but the black list keeps it float32: it raises nothing."""
    src, out, report = _convert(tmp_path, nm.yolo(opset), f"yolo{opset}")
    assert onnx.load(out).opset_import[0].version == 22
    assert any("upgraded from opset" in n and "Conv x3" in n and "Range" not in n for n in report.notes)
    assert not any("--opset" in w for w in report.warnings)  # no opset would change a decision
    rng = next(n for n in report.nodes if n["op_type"] == "Range")
    assert rng["precision"] == "HIGH" and "allowed from opset" not in rng["reason"]
    assert _runs_emulated(src, out)


@pytest.mark.parametrize("opset", [17, 20])
def test_faster_rcnn_is_not_upgraded_where_roialign_22_would_not_load(tmp_path, opset):
    src, out, report = _convert(tmp_path, nm.faster_rcnn(opset), f"frcnn{opset}")
    assert onnx.load(out).opset_import[0].version == opset
    note = next(n for n in report.notes if n.startswith("not upgraded to opset 22"))
    assert "RoiAlign(22)" in note and f"converted at the model's opset {opset}" in note
    assert not any("--opset 22" in w for w in report.warnings)  # the opset that failed is no advice
    assert _runs_emulated(src, out)


def test_the_ceiling_is_an_opset_onnxruntime_loads():
    import onnxruntime as ort

    ceiling = runtime_opset_ceiling()
    assert 17 <= ceiling <= onnx.defs.onnx_opset_version()
    graph = onnx.helper.make_graph([onnx.helper.make_node("Identity", ["x"], ["y"])], "g",
                                   [hm.vi("x", onnx.TensorProto.FLOAT, [1])], [hm.vi("y", onnx.TensorProto.FLOAT, [1])])
    proto = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", ceiling)], ir_version=8)
    ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
