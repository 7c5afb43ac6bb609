"""The load-check probe: one node per signature stands for all of them, in onnxruntime and in the pins."""

from __future__ import annotations

import onnx.parser
import onnx.shape_inference
import onnx_ir as ir
import onnxruntime as ort

import ampconv
from ampconv.probe import build_probe, expand, signature
from helpers import convert_text, save


def _ir(text: str) -> ir.Model:
    """A typed IR model from ONNX text; nodes named after their first output."""
    model = ir.serde.deserialize_model(onnx.shape_inference.infer_shapes(onnx.parser.parse_model(text)))
    for node in model.graph:
        node.name = node.outputs[0].name
    return model


CHAIN = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] W = {1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1}, int64[2] s = {2, 4}> {
    a = MatMul (x, W)
    b = Relu (a)
    c = MatMul (b, W)
    d = Relu (c)
    e = Reshape (d, s)
    y = Softmax (e)
}
"""


def test_probe_holds_one_node_per_signature_and_loads(tmp_path):
    model = _ir(CHAIN)
    probe = build_probe(model)
    assert probe is not None and probe.nodes == 4  # MatMul, Relu, Reshape, Softmax
    assert sorted(m for ms in probe.members.values() for m in ms) == sorted(n.name for n in model.graph)
    assert probe.members["a"] == ["a", "c"] and probe.members["b"] == ["b", "d"]
    # The Reshape's small constant shape stays a constant (onnxruntime reads it); the weight becomes an input.
    reshape = next(n for n in probe.model.graph if n.op_type == "Reshape")
    assert reshape.inputs[1].const_value is not None
    matmul = next(n for n in probe.model.graph if n.op_type == "MatMul")
    assert matmul.inputs[1].const_value is None
    path = tmp_path / "probe.onnx"
    ir.save(probe.model, str(path))
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def test_different_types_or_attributes_are_different_signatures():
    model = _ir("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 4] x, double[2, 4] z) => (float[2, 4] y, double[2, 4] w, float[2, 4] v) {
        y = Softmax <axis = 1> (x)
        v = Softmax <axis = 0> (x)
        w = Softmax <axis = 1> (z)
    }""")
    opsets = {"": 17}
    keys = {signature(node, opsets) for node in model.graph}
    assert len(keys) == 3


def test_models_with_subgraphs_or_functions_are_loaded_whole():
    model = _ir("""<ir_version: 8, opset_import: ["" : 17]>
    g (bool c, float[2] x) => (float[2] y) {
        y = If (c) <then_branch = t () => (float[2] o) { o = Relu (x) },
                    else_branch = e () => (float[2] o) { o = Neg (x) }>
    }""")
    assert build_probe(model) is None


def test_expand_maps_a_probe_pin_to_every_member():
    probe = build_probe(_ir(CHAIN))
    assert expand({"a": "onnxruntime: no kernel"}, probe) == {"a": "onnxruntime: no kernel", "c": "onnxruntime: no kernel"}
    assert expand({}, probe) == {}


def test_one_rejection_pins_every_node_of_the_signature(tmp_path):
    """Two bf16 Clip nodes whose expanded body onnxruntime rejects: both pinned after one retry."""
    text = """<ir_version: 8, opset_import: ["" : 13]>
    g (float[3, 4] x) => (float[3, 4] y) <float lo = {-1.0}, float hi = {1.0}> {
        a = Clip (x, lo, hi)
        b = Relu (a)
        y = Clip (b, lo, hi)
    }"""
    report, _ = convert_text(tmp_path, text, level="O3", dtype="bf16")
    clips = [n for n in report.nodes if n["op_type"] == "Clip"]
    assert len(clips) == 2 and all(n["rule"] == "runtime-pin" for n in clips)
    assert sorted(p["node"] for p in report.runtime_pins) == sorted(n["name"] for n in clips)
    assert report.load_check["runtime"] and report.load_check["probe_nodes"] < report.load_check["nodes"]


def test_no_node_limit_on_the_load_check(tmp_path):
    """A 12,000-node chain is load-checked (the old check was skipped above 10,000 nodes)."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from bench.models import build_chain

    src = save(build_chain(12_000), tmp_path / "chain.onnx")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert report.load_check["runtime"] is True and report.load_check["nodes"] >= 12_000
    assert report.load_check["probe_nodes"] < 50
    assert not any("load check skipped" in n for n in report.notes)
