"""Planner rules (docs/precision.md sec. 1-6), one test per rule, through the public API."""

import numpy as np
import onnx
import pytest

from helpers import convert_text, elem_types, ops, run

FP16, FP32, BF16 = onnx.TensorProto.FLOAT16, onnx.TensorProto.FLOAT, onnx.TensorProto.BFLOAT16

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'

CHAIN = HEADER + """
chain (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}, float[4] b = {1, 2, 3, 4}> {
    mm = MatMul (x, w)
    add = Add (mm, b)
    y = Relu (add)
}
""" % ", ".join(["0.5"] * 16)


def test_white_then_gray_follows(tmp_path):
    report, model = convert_text(tmp_path, CHAIN, level="O1")
    d = {n["op_type"]: n for n in report.nodes}
    assert d["MatMul"]["precision"] == "LOW" and d["MatMul"]["rule"] == "white"
    assert d["Add"]["rule"] == "gray-follow" and d["Add"]["precision"] == "LOW"
    assert d["Add"]["follows"] == d["MatMul"]["name"]
    assert d["Relu"]["precision"] == "LOW"
    types = elem_types(model)
    assert types["x"] == FP32 and types["y"] == FP32  # keep_io_types default
    assert types["w"] == FP16 and types["b"] == FP16


def test_gray_disagreeing_voters_promote(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
        mm = MatMul (x, w)
        y = Add (mm, x)
    }
    """ % ", ".join(["1.0"] * 16)
    report, _ = convert_text(tmp_path, text, level="O2")
    add = [n for n in report.nodes if n["op_type"] == "Add"][0]
    assert add["precision"] == "HIGH" and add["rule"] == "gray-promote"


def test_gray_free_source_follows_consumers(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
        mm = MatMul (x, w)
        shape = Shape (mm)
        fill = ConstantOfShape <value = float[1] {0.25}> (shape)
        y = Add (mm, fill)
    }
    """ % ", ".join(["1.0"] * 16)
    report, model = convert_text(tmp_path, text, level="O1")
    fill = [n for n in report.nodes if n["op_type"] == "ConstantOfShape"][0]
    assert fill["precision"] == "LOW" and fill["rule"] == "free-low"
    node = ops(model, "ConstantOfShape")[0]
    assert node.attribute[0].t.data_type == FP16  # rewritten attribute, no Cast added
    casts = ops(model, "Cast")
    assert [c.input[0] for c in casts] == ["x", "y__fp16"]  # interface casts only: none for the fill


def test_transparent_high_node_flips_low_when_all_consumers_low(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}, int64[2] s = {2, 4}> {
        r = Reshape (x, s)
        y = MatMul (r, w)
    }
    """ % ", ".join(["1.0"] * 16)
    report, model = convert_text(tmp_path, text, level="O1")
    reshape = [n for n in report.nodes if n["op_type"] == "Reshape"][0]
    assert reshape["precision"] == "LOW" and reshape["rule"] == "transparent-low"
    cast = ops(model, "Cast")[0]
    assert cast.input == ["x"]  # the down-cast moved upstream of the data movement


def test_compute_node_is_not_flipped_by_consumers(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
        m = Mul (x, x)
        y = MatMul (m, w)
    }
    """ % ", ".join(["1.0"] * 16)
    report, _ = convert_text(tmp_path, text, level="O1")
    mul = [n for n in report.nodes if n["op_type"] == "Mul"][0]
    assert mul["precision"] == "HIGH" and mul["rule"] == "gray-follow"


def test_black_high_at_o2_low_at_o3(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
        mm = MatMul (x, w)
        y = Cos (mm)
    }
    """ % ", ".join(["1.0"] * 16)
    r2, _ = convert_text(tmp_path, text, level="O2")
    assert {n["op_type"]: n["precision"] for n in r2.nodes}["Cos"] == "HIGH"
    r3, _ = convert_text(tmp_path, text, level="O3")
    assert {n["op_type"]: n["rule"] for n in r3.nodes}["Cos"] == "level-O3"


def test_unlisted_high_at_o1_low_at_o2(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) {
        y = Add (x, x)
    }
    """
    r1, _ = convert_text(tmp_path, text, level="O1", preset="mindspore")
    assert r1.nodes[0]["precision"] == "HIGH" and r1.nodes[0]["rule"] == "unlisted"
    r2, _ = convert_text(tmp_path, text, level="O2", preset="mindspore")
    assert r2.nodes[0]["precision"] == "LOW" and r2.nodes[0]["rule"] == "unlisted"


def test_o0_leaves_model_unchanged(tmp_path):
    report, model = convert_text(tmp_path, CHAIN, level="O0")
    assert report.unchanged and not report.nodes
    assert elem_types(model)["w"] == FP32 and not ops(model, "Cast")


def test_hard_schema_blocks_bf16_conv_before_opset_22(tmp_path):
    text = '<ir_version: 8, opset_import: ["" : 17]>' + """
    g (float[1, 1, 4, 4] x) => (float[1, 1, 4, 4] y) <float[1, 1, 1, 1] w = {2.0}> {
        y = Conv (x, w)
    }
    """
    report, _ = convert_text(tmp_path, text, level="O3", dtype="bf16", keep_opset=True)
    conv = report.nodes[0]
    assert conv["precision"] == "HIGH" and conv["rule"] == "hard-schema"
    assert "opset 17" in conv["reason"] and "allowed from opset 22" in conv["reason"]


def test_hard_schema_fixed_slot_keeps_float32(tmp_path):
    # Resize.scales is tensor(float) only: it stays float32 when the data is LOW.
    text = HEADER + """
    g (float[1, 1, 2, 2] x) => (float[1, 1, 4, 4] y) <float[4] sc = {1, 1, 2, 2}> {
        y = Resize <mode = "nearest"> (x, , sc)
    }
    """
    report, model = convert_text(tmp_path, text, level="O3")
    assert report.nodes[0]["precision"] == "LOW"
    assert elem_types(model)["sc"] == FP32


def test_user_overrides(tmp_path):
    r, _ = convert_text(tmp_path, CHAIN, level="O3", keep_fp32=("MatMul",))
    mm = [n for n in r.nodes if n["op_type"] == "MatMul"][0]
    assert mm["precision"] == "HIGH" and mm["rule"] == "user-keep-fp32"
    r, _ = convert_text(tmp_path, CHAIN, level="O3", block_ops=("Relu",))
    relu = [n for n in r.nodes if n["op_type"] == "Relu"][0]
    assert relu["rule"] == "user-block-op"
    r, _ = convert_text(tmp_path, CHAIN, level="O1", force_low=("Relu",), keep_fp32=("MatMul",))
    relu = [n for n in r.nodes if n["op_type"] == "Relu"][0]
    assert relu["precision"] == "LOW" and relu["rule"] == "user-force-low"


def test_unknown_domain_op_kept_high_and_reported(tmp_path):
    text = '<ir_version: 8, opset_import: ["" : 17, "custom.domain" : 1]>' + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
        mm = MatMul (x, w)
        y = custom.domain.Fancy (mm)
    }
    """ % ", ".join(["1.0"] * 16)
    from ampconv.report import render_text
    import onnx.parser

    model = onnx.parser.parse_model(text)
    onnx.save(model, str(tmp_path / "m.onnx"))
    import ampconv

    report = ampconv.convert(tmp_path / "m.onnx", tmp_path / "o.onnx", ampconv.Config(level="O3", check_runtime=False))
    fancy = [n for n in report.nodes if n["op_type"] == "custom.domain::Fancy"][0]
    assert fancy["precision"] == "HIGH" and fancy["rule"] == "hard-no-schema"
    assert "custom.domain::Fancy" in render_text(report, verbose=True)


def test_constant_out_of_range_pins_consumer_or_clamps(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}, float[4] big = {1e5, 1, 1, 1}> {
        mm = MatMul (x, w)
        y = Add (mm, big)
    }
    """ % ", ".join(["1.0"] * 16)
    report, model = convert_text(tmp_path, text, level="O2")
    add = [n for n in report.nodes if n["op_type"] == "Add"][0]
    assert add["precision"] == "HIGH" and add["rule"] == "hard-constant" and "big" in add["reason"]
    assert report.constants[0]["tensor"] == "big" and report.constants[0]["overflow"] == 1
    assert elem_types(model)["big"] == FP32
    report, model = convert_text(tmp_path, text, level="O2", clamp=True)
    add = [n for n in report.nodes if n["op_type"] == "Add"][0]
    assert add["precision"] == "LOW" and "clamped" in report.constants[0]["action"]
    big = [t for t in model.graph.initializer if t.name == "big"][0]
    assert onnx.numpy_helper.to_array(big)[0] == np.float16(65504)


def test_if_branches_disagree_output_is_high(tmp_path):
    text = HEADER + """
    g (bool c, float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
        y = If (c) <
            then_branch = t () => (float[2, 4] a) { a = MatMul (x, w) },
            else_branch = e () => (float[2, 4] b) { b = Softmax (x) }
        >
    }
    """ % ", ".join(["0.5"] * 16)
    report, model = convert_text(tmp_path, text, level="O2")
    assert {n["op_type"]: n["precision"] for n in report.nodes}["MatMul"] == "LOW"
    then_branch = model.graph.node[0].attribute[0].g
    casts = [n for n in then_branch.node if n.op_type == "Cast"]
    assert casts, "the LOW branch casts up inside its own subgraph"
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    out = tmp_path / "model.out.onnx"
    for cond in (True, False):
        (y,) = run(out, {"c": np.array(cond), "x": x})
        (ref,) = run(tmp_path / "model.onnx", {"c": np.array(cond), "x": x})
        np.testing.assert_allclose(y, ref, rtol=1e-2, atol=1e-2)


def test_loop_carried_state_low_only_if_both_ends_low(tmp_path):
    text = HEADER + """
    g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}, int64 n = {3}, bool t = {1}> {
        h = MatMul (x, w)
        y = Loop (n, t, h) <body = body (int64 i, bool c, float[2, 4] acc) => (bool co, float[2, 4] out) {
            co = Identity (c)
            out = Cos (acc)
        }>
    }
    """ % ", ".join(["0.5"] * 16)
    report, model = convert_text(tmp_path, text, level="O2")
    loop = [n for n in report.nodes if n["op_type"] == "Loop"][0]
    assert loop["precision"] == "HIGH"  # body output is HIGH (Cos, black), so the state is HIGH
    x = np.ones((2, 4), np.float32)
    (y,) = run(tmp_path / "model.out.onnx", {"x": x})
    (ref,) = run(tmp_path / "model.onnx", {"x": x})
    np.testing.assert_allclose(y, ref, rtol=1e-2, atol=1e-3)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_keep_io_false_converts_interface(tmp_path, dtype):
    report, model = convert_text(tmp_path, CHAIN, level="O3", dtype=dtype, keep_io_types=False)
    types = elem_types(model)
    low = FP16 if dtype == "fp16" else BF16
    assert types["x"] == low and types["y"] == low and not ops(model, "Cast")


def test_keep_io_names_subset_and_unknown_name(tmp_path):
    report, model = convert_text(tmp_path, CHAIN, level="O3", keep_io_types=("y",))
    types = elem_types(model)
    assert types["x"] == FP16 and types["y"] == FP32
    from ampconv.errors import UsageError

    with pytest.raises(UsageError, match="nope"):
        convert_text(tmp_path, CHAIN, level="O3", keep_io_types=("nope",))


SINK = HEADER + """
g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}, float c = {3.0}> {
    m = MatMul (x, w)
    a = Add (m, c)
    s = Exp (a)
    y = Mul (%s, s)
}
""" % (", ".join(["0.5"] * 16), "%s")


def test_gray_node_sinks_into_float32_when_its_input_is_cast_up_anyway(tmp_path):
    """x * exp(x + 3) with the Exp kept float32: the Add reads the Cast of m the Mul needs, and its own Cast goes."""
    report, model = convert_text(tmp_path, SINK % "m", level="O2", keep_fp32=("Exp",), synthetic_run=False)
    add = [n for n in report.nodes if n["op_type"] == "Add"][0]
    assert add["precision"] == "HIGH" and add["rule"] == "gray-sink"
    assert sorted(c.input[0] for c in ops(model, "Cast")) == ["m", "x"]  # no Cast of the Add's output
    x = np.random.default_rng(5).normal(0, 1, (2, 4)).astype(np.float32)
    m = x @ np.full((4, 4), 0.5, np.float32)
    got = run(tmp_path / "model.out.onnx", {"x": x})[0]
    np.testing.assert_allclose(got, m * np.exp(m + 3), rtol=1e-2, atol=1e-2)


def test_negative_gray_node_stays_low_when_sinking_only_moves_the_cast(tmp_path):
    """Nothing else reads m float32: float32 at the Add would cast m instead of a, no Cast saved."""
    report, model = convert_text(tmp_path, SINK % "s", level="O2", keep_fp32=("Exp",), synthetic_run=False)
    add = [n for n in report.nodes if n["op_type"] == "Add"][0]
    assert add["precision"] == "LOW" and add["rule"] == "gray-follow"
    assert sorted(c.input[0] for c in ops(model, "Cast")) == ["a", "x"]
