"""Ops whose LOW form is valid ONNX but breaks in practice, and how each is kept working.

Each case was found by the ONNX backend corpus (docs/corpus_summary.md):
function bodies that only type-check in float32, function bodies onnxruntime
expands and rejects in bfloat16, kernels that fail only at run time, and a
Scan-8 state that changed type across an iteration.
"""

import numpy as np
import onnx
import onnx_ir as ir
import pytest

import ampconv
from ampconv.errors import ConversionError
from ampconv.passes.invariants import check_loop_state_types
from ampconv.policy.lists import FLOAT32_FUNCTION_BODY
from helpers import NoGpuTable, convert_text, model_from_text, ops, run, save

pytest.importorskip("onnxruntime")


def by_op(report, op_type):
    return [n for n in report.nodes if n["op_type"] == op_type]


# ------------------------------------------------------- function bodies
def _float32_only_bodies():
    """Default-domain ops taking float16 whose function body feeds float32 Constants to T arithmetic."""
    found = set()
    for schema in onnx.defs.get_all_schemas_with_history():
        if schema.domain != "" or schema.deprecated or not schema.has_function:
            continue
        constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
        takes_low = any("tensor(float16)" in constraints.get(i.type_str, [i.type_str]) for i in schema.inputs)
        body = schema.function_body.node
        float_constants = [
            n for n in body
            if n.op_type == "Constant"
            and any((a.name == "value" and a.t.data_type == onnx.TensorProto.FLOAT) or a.name == "value_float"
                    for a in n.attribute)
        ]
        if takes_low and float_constants and not any(n.op_type == "CastLike" for n in body):
            found.add(schema.name)
    return found


def test_float32_only_function_bodies_are_all_listed():
    assert _float32_only_bodies() == set(FLOAT32_FUNCTION_BODY)


@pytest.mark.parametrize("level", ["O1", "O3"])
def test_mean_variance_normalization_stays_float32(tmp_path, level):
    text = """<ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3, 4, 4] x, float[3, 3, 1, 1] w) => (float[2, 3, 4, 4] y) {
        c = Conv (x, w)
        y = MeanVarianceNormalization <axes = [0, 2, 3]> (c)
    }"""
    report, model = convert_text(tmp_path, text, level=level)
    mvn = by_op(report, "MeanVarianceNormalization")[0]
    assert mvn["precision"] == "HIGH" and mvn["rule"] == "hard-function-body"
    assert by_op(report, "Conv")[0]["precision"] == "LOW"
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 3, 4, 4), np.float32), "w": rng.standard_normal((3, 3, 1, 1), np.float32)}
    (want,) = run(tmp_path / "model.onnx", feeds)
    (got,) = run(tmp_path / "model.out.onnx", feeds)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_input_failing_the_full_checker_is_held_to_the_basic_one(tmp_path):
    # MeanVarianceNormalization without axes: onnx's own shape inference cannot
    # expand its body (the axes Constant refers to a missing attribute).
    text = """<ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3, 4, 4] x) => (float[2, 3, 4, 4] y) {
        m = MatMul (x, x)
        y = MeanVarianceNormalization (m)
    }"""
    model = onnx.parser.parse_model(text)
    with pytest.raises(onnx.shape_inference.InferenceError):
        onnx.checker.check_model(model, full_check=True)
    src = save(model, tmp_path / "m.onnx")
    report = ampconv.convert(src, tmp_path / "o.onnx", ampconv.Config(level="O2"))
    assert any("shape inference fails on the input model too" in n for n in report.notes)
    onnx.checker.check_model(str(tmp_path / "o.onnx"))  # the basic check passes
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(run(tmp_path / "o.onnx", {"x": x})[0], run(src, {"x": x})[0], rtol=2e-2, atol=2e-2)


def test_an_output_failing_the_full_checker_alone_is_refused(tmp_path):
    from ampconv.runtime.loadcheck import check_written

    good = save(model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { y = Relu (x) }"""), tmp_path / "good.onnx")
    bad = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3, 4, 4] x) => (float[2, 3, 4, 4] y) { y = MeanVarianceNormalization (x) }""")
    bad_path = save(bad, tmp_path / "bad.onnx")
    with pytest.raises(ConversionError, match="fails onnx.checker"):
        check_written(bad_path, runtime=False, source=good)
    assert "shape inference" in check_written(bad_path, runtime=False, source=bad_path)


# ------------------------------------------------------------- Attention
ATTENTION = """<ir_version: 10, opset_import: ["" : 23]>
g (float[1, 2, 4, 8] q, float[1, 2, 4, 8] k, float[1, 2, 4, 8] v) => (float[1, 2, 4, 8] y%s) {
    y%s = Attention <qk_matmul_output_mode = %d> (q, k, v)
}"""


@pytest.mark.parametrize("mode, softmax_output", [(0, False), (3, False), (3, True)])
def test_attention_softmax_precision_only_when_it_keeps_types(tmp_path, mode, softmax_output):
    extra = ", float[1, 2, 4, 4] qk" if softmax_output else ""
    outs = ", , , qk" if softmax_output else ""
    report, model = convert_text(tmp_path, ATTENTION % (extra, outs, mode), level="O2")
    assert by_op(report, "Attention")[0]["precision"] == "LOW"
    node = ops(model, "Attention")[0]
    attrs = {a.name: a.i for a in node.attribute}
    # With its softmax exported (mode 3), a float32 softmax would make that output float32.
    assert ("softmax_precision" in attrs) == (not softmax_output)
    if "softmax_precision" in attrs:
        assert attrs["softmax_precision"] == onnx.TensorProto.FLOAT
    # The attribute is the plan's decision, named by its rule in the report (absent when not set).
    record = by_op(report, "Attention")[0]
    named = [a["rule"] for a in record.get("attributes", [])]
    assert named == ([] if softmax_output else ["attention-softmax-fp32"])
    rng = np.random.default_rng(2)
    feeds = {n: rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for n in "qkv"}
    got, want = run(tmp_path / "model.out.onnx", feeds), run(tmp_path / "model.onnx", feeds)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=2e-2, atol=2e-2)


def test_attention_softmax_rule_leaves_float32_and_model_set_attentions_alone(tmp_path):
    # A float32 Attention (--block-op) needs no softmax attribute; one the model set is the model's.
    report, model = convert_text(tmp_path, ATTENTION % ("", "", 0), level="O2", block_ops=("Attention",))
    assert by_op(report, "Attention")[0]["precision"] == "HIGH"
    assert "attributes" not in by_op(report, "Attention")[0]
    assert "softmax_precision" not in {a.name for a in ops(model, "Attention")[0].attribute}
    own = ATTENTION.replace("<qk_matmul_output_mode = %d>", "<qk_matmul_output_mode = %d, softmax_precision = 10>")
    report, model = convert_text(tmp_path, own % ("", "", 0), level="O2")
    assert by_op(report, "Attention")[0]["precision"] == "LOW" and "attributes" not in by_op(report, "Attention")[0]
    assert {a.name: a.i for a in ops(model, "Attention")[0].attribute}["softmax_precision"] == 10


# --------------------------------------------- runtime pins in function bodies
def test_clip_whose_bfloat16_body_onnxruntime_rejects_is_pinned(tmp_path):
    text = """<ir_version: 8, opset_import: ["" : 13]>
    g (float[3, 4] x) => (float[3, 4] y) <float lo = {-1.0}, float hi = {1.0}> {
        y = Clip (x, lo, hi)
    }"""
    # CUDA has no bfloat16 Clip either (``hard-gpu-kernel`` keeps it first); a runtime without that table
    # leaves the node to the load check, whose pin is what this test holds.
    report, _ = convert_text(tmp_path, text, level="O3", dtype="bf16", runtime=NoGpuTable())
    clip = by_op(report, "Clip")[0]
    assert clip["precision"] == "HIGH" and clip["rule"] == "runtime-pin"
    assert "expanded function body" in clip["reason"]
    assert report.runtime_pins and report.runtime_pins[0]["node"] == clip["name"]
    report, _ = convert_text(tmp_path, text, level="O3", dtype="bf16")
    assert by_op(report, "Clip")[0]["rule"] == "hard-gpu-kernel" and not report.runtime_pins


def test_softmax_cross_entropy_function_is_pinned_by_its_inlined_value_names(tmp_path):
    text = """<ir_version: 8, opset_import: ["" : 13]>
    g (float[3, 5] scores, int64[3] labels) => (float loss) {
        loss = SoftmaxCrossEntropyLoss <reduction = "mean"> (scores, labels)
    }"""
    report, _ = convert_text(tmp_path, text, level="O3", dtype="bf16")
    sce = by_op(report, "SoftmaxCrossEntropyLoss")[0]
    assert sce["precision"] == "HIGH" and sce["rule"] == "runtime-pin"


def test_runtime_message_without_a_name_pins_nothing():
    from ampconv.runtime.verdict import runtime_pins as _runtime_pin

    model = ir.serde.deserialize_model(model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { y = Relu (x) }"""))
    next(iter(model.graph)).name = "Relu_1"
    assert _runtime_pin("[ONNXRuntimeError] onnxruntime: something else went wrong", model) == {}
    assert _runtime_pin("onnxruntime: Type Error of input parameter (nowhere) in node ()", model) == {}
    named = _runtime_pin("onnxruntime: Type Error of input parameter (x) in node ()", model)
    assert list(named) == [next(iter(model.graph)).name]


def test_a_value_read_by_several_nodes_pins_the_function_op():
    from ampconv.runtime.verdict import runtime_pins as _runtime_pin

    model = ir.serde.deserialize_model(model_from_text("""<ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 2] x) => (float[2, 2] a, float[2, 2] y) <float lo = {0.0}, float hi = {1.0}> {
        a = MatMul (x, x)
        y = Clip (x, lo, hi)
    }"""))
    for i, node in enumerate(model.graph):
        node.name = f"{node.op_type}_{i}"
    pins = _runtime_pin("onnxruntime: Type Error of input parameter (x) of operator (Where) in node ()", model)
    assert list(pins) == ["Clip_1"]


# ------------------------------------------------ kernels missing at run time
@pytest.mark.parametrize("reduction", ["add", "max"])
def test_scatter_reductions_stay_float32_and_run(tmp_path, reduction):
    text = """<ir_version: 8, opset_import: ["" : 18]>
    g (float[4, 3] data, int64[2, 1] idx, float[2, 3] upd) => (float[4, 3] y) {
        y = ScatterND <reduction = "%s"> (data, idx, upd)
    }""" % reduction
    report, _ = convert_text(tmp_path, text, level="O3")
    scatter = by_op(report, "ScatterND")[0]
    assert scatter["precision"] == "HIGH" and scatter["rule"] == "hard-runtime-kernel"
    feeds = {"data": np.ones((4, 3), np.float32), "idx": np.array([[1], [1]], np.int64),
             "upd": np.full((2, 3), 2.0, np.float32)}
    np.testing.assert_array_equal(run(tmp_path / "model.out.onnx", feeds)[0], run(tmp_path / "model.onnx", feeds)[0])


def test_scatter_without_reduction_still_goes_low(tmp_path):
    text = """<ir_version: 8, opset_import: ["" : 18]>
    g (float[4, 3] data, int64[2, 1] idx, float[2, 3] upd) => (float[4, 3] y) {
        y = ScatterND (data, idx, upd)
    }"""
    report, _ = convert_text(tmp_path, text, level="O3")
    assert by_op(report, "ScatterND")[0]["precision"] == "LOW"


# ------------------------------------------------------------ loop states
SCAN8 = """<ir_version: 8, opset_import: ["" : 8]>
g (float[1, 2] initial, float[1, 3, 2] x) => (float[1, 2] y, float[1, 3, 2] z) {
    y, z = Scan <num_scan_inputs = 1, body = body (float[2] sum_in, float[2] next) => (float[2] sum_out, float[2] scan_out) {
        sum_out = Add (sum_in, next)
        scan_out = Identity (sum_out)
    }> ("", initial, x)
}"""


def test_scan8_state_keeps_its_type_across_iterations(tmp_path):
    report, model = convert_text(tmp_path, SCAN8, level="O3")
    body = next(a.g for a in ops(model, "Scan")[0].attribute if a.name == "body")
    assert body.input[0].type.tensor_type.elem_type == body.output[0].type.tensor_type.elem_type
    feeds = {"initial": np.zeros((1, 2), np.float32), "x": np.arange(6, dtype=np.float32).reshape(1, 3, 2)}
    for got, want in zip(run(tmp_path / "model.out.onnx", feeds), run(tmp_path / "model.onnx", feeds)):
        np.testing.assert_array_equal(got, want)
    assert by_op(report, "Add")[0]["precision"] == "LOW"  # the body still runs in LOW


def test_a_state_that_changes_type_is_caught_before_writing():
    model = ir.serde.deserialize_model(onnx.parser.parse_model(SCAN8))
    body = next(iter(model.graph)).attributes["body"].value
    body.outputs[0].dtype = ir.DataType.FLOAT16
    with pytest.raises(ConversionError, match="state sum_in enters as FLOAT but leaves the body as FLOAT16"):
        check_loop_state_types(model)
