"""Q/DQ graphs (issue 29): the float ops between a DequantizeLinear and the next QuantizeLinear run LOW, with the
DequantizeLinear output and scales in the LOW type where the opset admits it (19+); no DequantizeLinear -> Cast."""

from __future__ import annotations

import onnx
import pytest

import ampconv
import numbers_models as nm
from bench.figures import deploy_figures

pytest.importorskip("onnxruntime.quantization")


def _dq_casts(model: onnx.ModelProto) -> int:
    producers = {out: node for node in model.graph.node for out in node.output}
    return sum(1 for node in model.graph.node if node.op_type == "Cast" and node.input[0] in producers
               and producers[node.input[0]].op_type == "DequantizeLinear")


@pytest.fixture(scope="module")
def qdq(tmp_path_factory):
    return nm.qdq_transformer(tmp_path_factory.mktemp("qdq"))


def test_an_int8_qdq_transformer_keeps_90_percent_of_its_float_nodes_low(qdq, tmp_path):
    out = tmp_path / "qdq.fp16.onnx"
    report = ampconv.convert(qdq, out, ampconv.Config())
    figures, model = deploy_figures(out), onnx.load(out)
    assert model.opset_import[0].version == 19  # the default upgrade: a float16 scale needs 19
    assert figures.float_low >= 0.9 * figures.float_nodes, (figures.float_low, figures.float_nodes)
    assert _dq_casts(model) == 0
    scales = {t.name: t.data_type for t in model.graph.initializer if t.name.endswith("_scale")}
    assert scales and sum(t == onnx.TensorProto.FLOAT16 for t in scales.values()) >= 0.9 * len(scales)
    for op in ("LayerNormalization", "Softmax", "Erf", "Add"):
        assert all(n["precision"] == "LOW" for n in report.nodes if n["op_type"] == op), op


def test_below_opset_19_the_pairs_stay_float32(qdq, tmp_path):
    """Negative: --keep-opset at 18 admits no float16 scale, so Q/DQ and the region between them stay float32."""
    out = tmp_path / "qdq.kept.onnx"
    report = ampconv.convert(qdq, out, ampconv.Config(keep_opset=True))
    dq = [n for n in report.nodes if n["op_type"] == "DequantizeLinear"]
    assert dq and not any(n["precision"] == "LOW" for n in dq)
    assert all(n["precision"] == "HIGH" for n in report.nodes if n["op_type"] == "LayerNormalization")
