"""bench/figures.py (the benchmarks' instrument): Casts, cast traffic, heavy nodes LOW and weight bytes, from dims and types only."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from bench.figures import HEAVY_OPS, deploy_figures, is_heavy
from helpers import model_from_text


def _fp16(name: str, shape: tuple[int, ...], value: float = 0.5) -> TensorProto:
    return numpy_helper.from_array(np.full(shape, value, np.float16), name)


def _model(nodes, inputs, outputs, initializers=(), opsets=(("", 17),)) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = 8
    return model


def cast_mlp() -> onnx.ModelProto:
    """x[batch, 8] -> Cast(fp16) -> MatMul(W fp16) -> Cast(fp32) -> y: Casts of batch*8 and batch*4 values."""
    return _model(
        [helper.make_node("Cast", ["x"], ["xl"], to=TensorProto.FLOAT16, name="in_cast"),
         helper.make_node("MatMul", ["xl", "W"], ["hl"], name="mm"),
         helper.make_node("Cast", ["hl"], ["y"], to=TensorProto.FLOAT, name="out_cast")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [_fp16("W", (8, 4))])


def test_cast_traffic_at_given_dims():
    figures = deploy_figures(cast_mlp(), dims={"batch": 3})
    # Cast 1: 3*8 values, 4 bytes in + 2 out; Cast 2: 3*4 values, 2 in + 4 out.
    assert figures.casts == 2
    assert figures.cast_traffic_bytes == 3 * 8 * 6 + 3 * 4 * 6
    assert figures.cast_traffic_unknown == 0
    assert figures.largest_casts == (("in_cast", 3 * 8 * 6), ("out_cast", 3 * 4 * 6))
    assert dict(figures.input_shapes) == {"x": (3, 8)}


def test_unset_dims_are_one_and_input_shapes_win():
    model = cast_mlp()
    assert deploy_figures(model).cast_traffic_bytes == 8 * 6 + 4 * 6
    figures = deploy_figures(model, dims={"batch": 3}, input_shapes={"x": [5, 8]})
    assert figures.cast_traffic_bytes == 5 * 8 * 6 + 5 * 4 * 6


def test_bad_input_shapes_are_refused():
    model = cast_mlp()
    with pytest.raises(ValueError, match="fixed at 8"):
        deploy_figures(model, input_shapes={"x": [2, 9]})
    with pytest.raises(ValueError, match="rank"):
        deploy_figures(model, input_shapes={"x": [2]})
    with pytest.raises(ValueError, match="no graph input"):
        deploy_figures(model, input_shapes={"nope": [2]})


def test_casts_in_subgraphs_are_counted_and_loop_bodies_said():
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4] x, bool c, int64 n) => (float16[4] y, float[4] z) {
        y = If(c) <then_branch = t () => (float16[4] a) { a = Cast<to = 10>(x) },
                   else_branch = e () => (float16[4] b) { b = Cast<to = 10>(x) }>
        z = Loop(n, c, x) <body = body (int64 i, bool cin, float[4] acc) => (bool cout, float[4] out) {
            cout = Identity(cin)
            h = Cast<to = 10>(acc)
            out = Cast<to = 1>(h)
        }>
    }
    """)
    figures = deploy_figures(model)
    assert figures.casts == 4
    assert figures.casts_in_loop_bodies == 2
    assert figures.cast_traffic_unknown == 0
    assert figures.cast_traffic_bytes == 4 * 4 * 6  # each Cast: 4 values, 4 + 2 bytes; the Loop's counted once
    assert any("Loop/Scan" in note for note in figures.notes)


def test_a_model_without_casts_counts_none():
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] x) => (float[2, 3] y) { y = Relu(x) }
    """)
    figures = deploy_figures(model)
    assert (figures.casts, figures.cast_traffic_bytes, figures.cast_traffic_unknown) == (0, 0, 0)


def test_reshape_computed_from_the_input_shape_is_resolved():
    """Shape -> Gather -> Unsqueeze -> Concat -> Reshape, then a Slice of a position table by the
    sequence length (onnx's data propagation stops there; the figures fold it)."""
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[batch, seq, 4] x) => (float16[batch, seq, 4] y) <int64[1] zero = {0}, int64[1] one = {1},
                                                              int64[1] minus = {-1}, int64[1] four = {4},
                                                              float[1, 16] pos = {0., 1., 2., 3., 4., 5., 6., 7.,
                                                                 8., 9., 10., 11., 12., 13., 14., 15.}> {
        s = Shape(x)
        n = Gather<axis = 0>(s, one)
        flat_shape = Concat<axis = 0>(minus, four)
        flat = Reshape(x, flat_shape)
        p = Slice(pos, zero, n, one)
        pt = Transpose(p)
        h = Add(flat, pt)
        back = Shape(x)
        r = Reshape(h, back)
        y = Cast<to = 10>(r)
    }
    """)
    figures = deploy_figures(model, dims={"batch": 2, "seq": 5})
    assert figures.cast_traffic_unknown == 0, figures.notes
    assert figures.cast_traffic_bytes == 2 * 5 * 4 * 6


def test_a_size_that_cannot_be_inferred_is_unknown_not_zero():
    # NonZero's output length depends on the data: no shape inference can know it.
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4] x) => (float16[1, ?] y) {
        nz = NonZero(x)
        flat = Flatten<axis = 0>(nz)
        f = Cast<to = 1>(flat)
        y = Cast<to = 10>(f)
    }
    """)
    figures = deploy_figures(model)
    assert figures.casts == 2
    assert figures.cast_traffic_unknown == 2
    assert figures.cast_traffic_bytes == 0
    assert any("unknown size" in note for note in figures.notes)


def _heavy_model(dtype: int) -> onnx.ModelProto:
    """x -> MatMul(W) -> Gemm -> Conv-free ops, all in ``dtype``, plus a Softmax (not heavy)."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "W")
    if dtype != TensorProto.FLOAT:
        w = helper.make_tensor("W", dtype, [4, 4], np.ones(16, np_type).view(np.uint16).tobytes(), raw=True)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
         helper.make_node("Gemm", ["h", "W"], ["g"], name="gemm"),
         helper.make_node("Softmax", ["g"], ["y"], name="sm")],
        "heavy", [helper.make_tensor_value_info("x", dtype, [2, 4])],
        [helper.make_tensor_value_info("y", dtype, [2, 4])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("dtype, name", [(TensorProto.FLOAT16, "fp16"), (TensorProto.BFLOAT16, "bf16")])
def test_heavy_nodes_low(dtype, name):
    figures = deploy_figures(_heavy_model(dtype))
    assert (figures.heavy_nodes, figures.heavy_low, figures.heavy_unknown) == (2, 2, 0)
    assert set(figures.heavy_low_names) == {"mm", "gemm"} and figures.heavy_other_names == ()
    assert figures.low_type == name
    assert figures.to_dict()["heavy_by_op"] == {"Gemm": {"low": 1, "total": 1}, "MatMul": {"low": 1, "total": 1}}


def test_float32_heavy_nodes_are_not_low():
    figures = deploy_figures(_heavy_model(TensorProto.FLOAT))
    assert (figures.heavy_nodes, figures.heavy_low) == (2, 0)
    assert set(figures.heavy_other_names) == {"mm", "gemm"}
    assert figures.low_type is None
    assert (figures.float_nodes, figures.float_low) == (3, 0)


def test_a_heavy_node_reads_its_type_from_inference_not_declarations():
    """A stale float32 declaration on a value a Cast makes float16 does not hide the LOW MatMul."""
    model = cast_mlp()
    model.graph.value_info.append(helper.make_tensor_value_info("xl", TensorProto.FLOAT, ["batch", 8]))
    assert deploy_figures(model).heavy_low == 1


def test_onnxruntime_fused_ops_are_heavy_and_inferred_through():
    """com.microsoft ops onnx has no schema for: heavy where fused, and the shapes flow through them."""
    model = _model(
        [helper.make_node("Cast", ["x"], ["xl"], to=TensorProto.FLOAT16),
         helper.make_node("Cast", ["skip"], ["sl"], to=TensorProto.FLOAT16),
         helper.make_node("SkipLayerNormalization", ["xl", "sl", "gamma", "beta"], ["n"], name="sln",
                          domain="com.microsoft", epsilon=1e-5),
         helper.make_node("FastGelu", ["n"], ["a"], domain="com.microsoft"),
         helper.make_node("Cast", ["a"], ["y"], to=TensorProto.FLOAT)],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", 8, 4]) for name in ("x", "skip")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8, 4])],
        [_fp16("gamma", (4,), 1.0), _fp16("beta", (4,), 0.0)], opsets=(("", 17), ("com.microsoft", 1)))
    figures = deploy_figures(model, dims={"batch": 2})
    assert figures.cast_traffic_unknown == 0
    assert figures.cast_traffic_bytes == 3 * 2 * 8 * 4 * 6
    assert (figures.heavy_nodes, figures.heavy_low) == (1, 1)  # SkipLayerNormalization; FastGelu is not heavy
    assert is_heavy(helper.make_node("Attention", [], [], domain="com.microsoft"))
    assert not is_heavy(helper.make_node("FastGelu", [], [], domain="com.microsoft"))
    assert not is_heavy(helper.make_node("Softmax", [], []))
    assert "MatMul" in HEAVY_OPS[""] and "Gelu" not in HEAVY_OPS["com.microsoft"]


def test_weight_bytes_count_initializers_and_constants():
    model = _model(
        [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array([3, 4], np.float32))),
         helper.make_node("Constant", [], ["k"], value_ints=[1, 2, 3]),
         helper.make_node("Add", ["x", "c"], ["a"]),
         helper.make_node("Mul", ["a", "a"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [_fp16("w", (2,))])
    assert deploy_figures(model).weight_bytes == 2 * 2 + 2 * 4 + 3 * 8


def test_external_data_is_never_read(tmp_path):
    """A missing or truncated .data file changes nothing: every figure comes from dims and types."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float16), "W")
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["xl"], to=TensorProto.FLOAT16),
         helper.make_node("MatMul", ["xl", "W"], ["h"], name="mm"),
         helper.make_node("Cast", ["h"], ["y"], to=TensorProto.FLOAT)],
        "ext", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 32])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="ext.data", size_threshold=0)
    whole = deploy_figures(path, dims={"batch": 2})
    assert whole.weight_bytes == 64 * 32 * 2 and whole.heavy_low == 1
    assert whole.cast_traffic_bytes == 2 * 64 * 6 + 2 * 32 * 6
    data = tmp_path / "ext.data"
    data.write_bytes(data.read_bytes()[:10])  # truncated
    assert deploy_figures(path, dims={"batch": 2}) == whole
    data.unlink()  # absent
    assert deploy_figures(path, dims={"batch": 2}) == whole


def test_the_model_given_is_not_modified():
    model = cast_mlp()
    before = model.SerializeToString()
    deploy_figures(model, dims={"batch": 7})
    assert model.SerializeToString() == before


def test_nodes_out_of_order_are_inferred_as_onnxruntime_sorts_them():
    """A converter may append a graph-input Cast after its consumer; sizes are still known."""
    model = cast_mlp()
    first = onnx.NodeProto()
    first.CopyFrom(model.graph.node[0])
    del model.graph.node[0]
    model.graph.node.append(first)
    figures = deploy_figures(model, dims={"batch": 3})
    assert figures.cast_traffic_unknown == 0 and figures.heavy_low == 1


def test_group_query_attention_presents_are_sized_from_the_past_and_the_new_keys():
    """GQA's present cache = past + the new tokens, whatever symbol names its length (gemma-2's sliding layers)."""
    fp = TensorProto.FLOAT16
    model = _model(
        [helper.make_node("GroupQueryAttention", ["qkv", "", "", "past_k", "past_v", "lens", "total"],
                          ["attn", "present_k", "present_v"], domain="com.microsoft", num_heads=4, kv_num_heads=2),
         helper.make_node("Cast", ["attn"], ["y"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["present_k"], ["pk"], to=TensorProto.FLOAT),
         helper.make_node("Cast", ["present_v"], ["pv"], to=TensorProto.FLOAT)],
        [helper.make_tensor_value_info("qkv", fp, ["batch", "seq", 8 * 16]),
         helper.make_tensor_value_info("past_k", fp, ["batch", 2, "past_sliding", 16]),
         helper.make_tensor_value_info("past_v", fp, ["batch", 2, "past_sliding", 16]),
         helper.make_tensor_value_info("lens", TensorProto.INT32, ["batch", 1]),
         helper.make_tensor_value_info("total", TensorProto.INT32, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", 64]),
         helper.make_tensor_value_info("pk", TensorProto.FLOAT, ["batch", 2, "total_sliding", 16]),
         helper.make_tensor_value_info("pv", TensorProto.FLOAT, ["batch", 2, "total_sliding", 16])],
        opsets=(("", 17), ("com.microsoft", 1)))
    figures = deploy_figures(model, dims={"batch": 1, "seq": 1, "past_sliding": 7})
    assert figures.cast_traffic_unknown == 0
    # attn 1x1x64, each present 1x2x8x16 (7 past + 1 new), each element read as fp16 and written as float32
    assert figures.cast_traffic_bytes == (64 + 2 * 2 * 8 * 16) * 6
