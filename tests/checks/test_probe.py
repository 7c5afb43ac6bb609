"""The load-check probe: one node per signature stands for all of them, in onnxruntime and in the pins."""

from __future__ import annotations

import onnx.parser
import onnx.shape_inference
import onnx_ir as ir
import onnxruntime as ort

import ampconv
from ampconv.checks.probe import build_probe, expand, signature
from helpers import NoGpuTable, convert_text, save


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
    # Without CUDA's kernel table: with it, ``hard-gpu-kernel`` keeps bf16 Clip float32 before the check runs.
    report, _ = convert_text(tmp_path, text, level="O3", dtype="bf16", runtime=NoGpuTable())
    clips = [n for n in report.nodes if n["op_type"] == "Clip"]
    assert len(clips) == 2 and all(n["rule"] == "runtime-pin" for n in clips)
    assert sorted(p["node"] for p in report.runtime_pins) == sorted(n["name"] for n in clips)
    assert report.load_check["runtime"] and report.load_check["probe_nodes"] < report.load_check["nodes"]


def test_no_node_limit_on_the_load_check(tmp_path):
    """A 12,000-node chain is load-checked (the old check was skipped above 10,000 nodes)."""

    from bench.models import build_chain

    src = save(build_chain(12_000), tmp_path / "chain.onnx")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert report.load_check["runtime"] is True and report.load_check["nodes"] >= 12_000
    assert report.load_check["probe_nodes"] < 50
    assert not any("load check skipped" in n for n in report.notes)


def test_a_computed_integer_input_is_probed_with_its_shape_computation(tmp_path):
    """Resize whose sizes come from Shape -> Slice -> Concat: the probe copies that cone and the real shapes."""
    from accept_models import computed_size_classifier
    from ampconv.reading.load import load_model
    from ampconv.reading.shapes import inferred_shapes

    model_proto, _ = computed_size_classifier(11)
    path = tmp_path / "classifier.onnx"
    onnx.save(model_proto, str(path))
    model = load_model(path, infer_types=True)
    probe = build_probe(model, inferred_shapes(model))
    assert probe is not None
    resizes = [n for n in probe.model.graph if n.op_type == "Resize"]
    assert len(resizes) == 2 and {len(probe.members[n.name]) for n in resizes} == {1}  # a signature each
    for resize in resizes:
        # The Resize reads a copy of Concat(Slice(Shape(data))), not a fresh input ...
        concat = resize.inputs[3].producer()
        assert concat is not None and concat.op_type == "Concat" and "/cone/" in concat.name
        sliced = concat.inputs[0].producer()
        assert sliced.op_type == "Slice" and sliced.inputs[0].producer().op_type == "Shape"
        # ... whose root, like the Resize's own data input, has its real rank.
        root = sliced.inputs[0].producer().inputs[0]
        assert root.is_graph_input() and root.shape is not None and len(root.shape) == 4
        assert resize.inputs[0].shape is not None and len(resize.inputs[0].shape) == 4
    probe_path = tmp_path / "probe.onnx"
    ir.save(probe.model, str(probe_path))
    ort.InferenceSession(str(probe_path), providers=["CPUExecutionProvider"])
    # Without its cone the same node is refused: what the probe used to give it.
    assert "sizes" in _refusal_without_cone(model, tmp_path)


def _refusal_without_cone(model, tmp_path):
    from ampconv.runtime.loadcheck import runtime_refusal

    resize = next(n for n in model.graph if n.op_type == "Resize")
    inputs = [ir.Value(name=f"in{i}", type=v.type) if v is not None else None for i, v in enumerate(resize.inputs)]
    inputs[0].shape = resize.inputs[0].shape  # the data input keeps its declared shape, as the old probe gave it
    inputs[1].const_value = resize.inputs[1].producer().attributes["value"].value
    inputs[2].const_value = resize.inputs[2].producer().attributes["value"].value
    out = ir.Value(name="out", type=resize.outputs[0].type)
    node = ir.Node("", "Resize", inputs, attributes=list(resize.attributes.values()), outputs=[out])
    graph = ir.Graph([inputs[0], inputs[3]], [out], nodes=[node], initializers=[inputs[1], inputs[2]],
                     opset_imports=dict(model.opset_imports))
    path = tmp_path / "lone.onnx"
    ir.save(ir.Model(graph, ir_version=model.ir_version), str(path))
    return runtime_refusal(path) or ""


def test_a_cone_longer_than_the_limit_loads_the_whole_model():
    from ampconv.checks.probe import MAX_CONE_NODES

    def chain(length: int) -> str:
        adds = "\n".join(f"        s{i + 1} = Add (s{i}, one)" for i in range(length))
        return f"""<ir_version: 8, opset_import: ["" : 17]>
        g (float[2, 4] x) => (float[4, 2] y) <int64[2] one = {{0, 0}}, int64[2] start = {{4, 2}}> {{
            s0 = Identity (start)
    {adds}
            y = Reshape (x, s{length})
        }}"""

    assert build_probe(_ir(chain(MAX_CONE_NODES + 1))) is None
    assert build_probe(_ir(chain(MAX_CONE_NODES - 1))) is not None


def test_a_probe_refusal_the_whole_model_does_not_confirm_is_overruled(tmp_path, monkeypatch):
    """The probe only speeds up acceptance: its refusal alone never pins a node or fails a run."""
    import ampconv.checks.staged
    from ampconv.errors import ConversionError

    def refused(probe, staged, timings):
        blamed = next(n.name for n in probe.model.graph if n.op_type == "MatMul")
        message = f"[ONNXRuntimeError] : 1 : FAIL : Node ({blamed}) Op (MatMul) [ShapeInferenceError] made up"
        raise ConversionError(f"converted model does not load in onnxruntime: {message}", message,
                              ConversionError.RUNTIME)

    monkeypatch.setattr(ampconv.checks.staged, "_check_probe", refused)
    report, _ = convert_text(tmp_path, CHAIN)
    assert report.runtime_pins == []
    assert report.load_check["probe_confirmed"] is False and "made up" in report.load_check["probe_refusal"]
    assert {n["precision"] for n in report.nodes if n["op_type"] == "MatMul"} == {"LOW"}


def test_a_confirmed_probe_refusal_pins_the_whole_signature(tmp_path, monkeypatch):
    """The whole model blames one node of a refused signature: every node of that signature is pinned at once."""
    import ampconv.checks.staged
    from ampconv.errors import ConversionError

    calls = []

    def refuse(path, *, timings=None, key="runtime_seconds"):
        calls.append(key)
        if len(calls) > 2:  # the second attempt, with the pins: it loads
            return
        from ampconv.reading.load import load_model

        blamed = [n.name for n in load_model(path).graph if n.op_type == "MatMul"][-1]  # a member, not the representative
        message = f"[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for MatMul node with name '{blamed}'"
        raise ConversionError(message, message, ConversionError.RUNTIME)

    monkeypatch.setattr(ampconv.checks.staged, "check_with_runtime", refuse)
    report, _ = convert_text(tmp_path, CHAIN)
    matmuls = sorted(n["name"] for n in report.nodes if n["op_type"] == "MatMul")
    assert len(matmuls) == 2 and sorted(p["node"] for p in report.runtime_pins) == matmuls
    assert calls[:2] == ["runtime_seconds", "confirm_seconds"]
