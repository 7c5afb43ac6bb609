"""Graph shapes that real exporters produce, converted end to end.

Each model is built here, converted at the levels and dtypes that matter for
it, and then: ``onnx.checker`` (full) passes, onnxruntime loads and runs it
(bf16: resolves; the CPU provider has no bf16 kernels), and the emulated
validation (``ampconv.validate``, backend ``emulate``) is within the dtype's
default tolerance of the float32 original on fixed inputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import make_model
from onnx import TensorProto, helper, numpy_helper

import ampconv

RNG = np.random.default_rng(42)
DTYPES = ("fp16", "bf16")


def arr(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype(np.float32)


def run_ort(path, feeds):
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def convert_and_check(tmp_path, model, feeds, level="O2", dtype="fp16", tag="m", validate=True, **config):
    """Save, convert, check (checker, onnxruntime, emulated validation); return (report, output model)."""
    src = tmp_path / f"{tag}.onnx"
    dst = tmp_path / f"{tag}.{level}.{dtype}.onnx"
    onnx.save(model, str(src))
    run_ort(src, feeds)  # the original itself is valid
    report = ampconv.convert(src, dst, ampconv.Config(level=level, dtype=dtype, overwrite=True, **config))
    assert report.output == str(dst)
    onnx.checker.check_model(str(dst), full_check=True)
    try:
        run_ort(dst, feeds)
    except Exception as exc:  # noqa: BLE001
        assert dtype == "bf16" and "NOT_IMPLEMENTED" in str(exc), exc
        assert any("bfloat16" in n for n in report.notes)
    if validate:
        npz = tmp_path / f"{tag}.npz"
        np.savez(npz, **feeds)
        result = ampconv.validate(
            src, dst, ampconv.ValidateOptions(inputs=(str(npz),), backend="emulate", localize=True,
                                              decisions=report.decisions_by_node())
        )
        assert result.passed, result.to_dict()
    return report, onnx.load(str(dst))


def node_decisions(report):
    return {n["name"]: n for n in report.nodes}


# ------------------------------------------------------- Paddle: Constant weights
@pytest.mark.parametrize("dtype", DTYPES)
def test_weights_in_constant_nodes(tmp_path, dtype):
    """Paddle exports weights as Constant nodes; they are retyped in place, not cast at run time."""
    w1, b1, w2 = arr(8, 16, scale=0.3), arr(16), arr(16, 4, scale=0.3)
    nodes = [
        helper.make_node("Constant", [], ["w1"], value=numpy_helper.from_array(w1, "w1"), name="const_w1"),
        helper.make_node("Constant", [], ["b1"], value=numpy_helper.from_array(b1, "b1"), name="const_b1"),
        helper.make_node("Constant", [], ["w2"], value=numpy_helper.from_array(w2, "w2"), name="const_w2"),
        helper.make_node("MatMul", ["x", "w1"], ["h"], name="fc1"),
        helper.make_node("Add", ["h", "b1"], ["hb"], name="bias1"),
        helper.make_node("Relu", ["hb"], ["r"], name="relu1"),
        helper.make_node("MatMul", ["r", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(
        nodes, "paddle", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
    )
    report, out = convert_and_check(tmp_path, make_model(graph, opset=13), {"x": arr(3, 8)}, dtype=dtype)
    low = TensorProto.FLOAT16 if dtype == "fp16" else TensorProto.BFLOAT16
    consts = {n.output[0]: n for n in out.graph.node if n.op_type == "Constant"}
    for name in ("w1", "b1", "w2"):
        assert name in consts, [n.op_type for n in out.graph.node]
        assert consts[name].attribute[0].t.data_type == low
    # No Cast on the weights: only the interface casts (x in, y out).
    casts = [n for n in out.graph.node if n.op_type == "Cast"]
    assert len(casts) == 2, [(n.input, n.output) for n in casts]


# --------------------------------------------- BatchNorm with var above 65504
@pytest.mark.parametrize("dtype", DTYPES)
def test_batchnorm_running_variance_above_fp16_max(tmp_path, dtype):
    """OCR detectors ship BN running variance > 65504 at opset 12 (one type T for all inputs).

    The variance must not be clamped (BN would then scale by the wrong factor):
    for fp16 the BN node stays float32 with its variance exact and the report
    names the constant; for bf16 (no bfloat16 norm kernel anywhere) the norm is
    folded into its Conv in float32, the variance read exactly; the output stays
    accurate.
    """
    c = 4
    conv_w = arr(c, 3, 3, 3, scale=0.2)
    mean = arr(c, scale=50.0)
    var = np.array([1.2e5, 9.0e4, 2.5, 7.0e4], np.float32)
    scale, bias = arr(c), arr(c)
    inits = [numpy_helper.from_array(a, n) for a, n in
             ((conv_w, "conv_w"), (scale, "bn_scale"), (bias, "bn_bias"), (mean, "bn_mean"), (var, "bn_var"))]
    nodes = [
        helper.make_node("Conv", ["x", "conv_w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "bn_scale", "bn_bias", "bn_mean", "bn_var"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes, "ocr_bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])], inits,
    )
    x = arr(1, 3, 8, 8, scale=100.0)  # activations large enough that var matters
    report, out = convert_and_check(tmp_path, make_model(graph, opset=12), {"x": x}, dtype=dtype)
    if dtype == "bf16":
        assert [(f["node"], f["into"]) for f in report.folded] == [("bn", "conv")]
        assert "BatchNormalization" not in {n.op_type for n in out.graph.node}
        return
    var_out = [t for t in out.graph.initializer if t.name == "bn_var"]
    assert len(var_out) == 1
    stored = numpy_helper.to_array(var_out[0]).astype(np.float32)
    np.testing.assert_array_equal(stored, var)  # never clamped
    if dtype == "fp16":
        decisions = node_decisions(report)
        assert decisions["bn"]["precision"] == "HIGH" and decisions["bn"]["rule"] == "hard-constant"
        assert any(c["tensor"] == "bn_var" and c["overflow"] == 3 for c in report.constants)
        assert var_out[0].data_type == TensorProto.FLOAT


# ------------------------------------------------ nested If with outer captures
def _branch(depth: int, scope):
    """A then-branch nested ``depth`` deep; every level captures tensors of all enclosing scopes."""
    if depth == 0:
        return helper.make_graph(
            [helper.make_node("MatMul", [scope[0], "w"], ["leaf_mm"], name="leaf_mm"),
             helper.make_node("Add", ["leaf_mm", scope[len(scope) // 2]], ["leaf_out"], name="leaf_add")],
            "leaf", [], [helper.make_tensor_value_info("leaf_out", TensorProto.FLOAT, None)],
        )
    h = f"h{depth}"
    else_g = helper.make_graph(
        [helper.make_node("Sigmoid", [h], [f"e{depth}"], name=f"sig{depth}")],
        f"else{depth}", [], [helper.make_tensor_value_info(f"e{depth}", TensorProto.FLOAT, None)],
    )
    return helper.make_graph(
        [helper.make_node("Tanh", [scope[-1]], [h], name=f"tanh{depth}"),
         helper.make_node("If", [f"c{depth % 2}"], [f"out{depth}"], then_branch=_branch(depth - 1, scope + [h]),
                          else_branch=else_g, name=f"if{depth}")],
        f"then{depth}", [], [helper.make_tensor_value_info(f"out{depth}", TensorProto.FLOAT, None)],
    )


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
@pytest.mark.parametrize("cond", [True, False])
def test_nested_if_with_outer_scope_captures(tmp_path, level, dtype, cond):
    """Voice-activity models: If inside If inside If..., each capturing tensors from all enclosing scopes."""
    depth = 4
    top_else = helper.make_graph([helper.make_node("Identity", ["x"], ["top_e"], name="top_ident")], "top_else", [],
                                 [helper.make_tensor_value_info("top_e", TensorProto.FLOAT, None)])
    nodes = [
        helper.make_node("Mul", ["x_in", "x_in"], ["x"], name="square"),
        helper.make_node("Not", ["cond"], ["c1"], name="not"),
        helper.make_node("Identity", ["cond"], ["c0"], name="cond_id"),
        helper.make_node("If", ["cond"], ["y"], then_branch=_branch(depth, ["x"]), else_branch=top_else, name="top_if"),
    ]
    graph = helper.make_graph(
        nodes, "vad",
        [helper.make_tensor_value_info("x_in", TensorProto.FLOAT, [4, 4]),
         helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
        [numpy_helper.from_array(arr(4, 4, scale=0.5), "w")],
    )
    feeds = {"x_in": arr(4, 4), "cond": np.array(cond)}
    report, out = convert_and_check(tmp_path, make_model(graph, opset=16), feeds, level=level, dtype=dtype)
    decisions = node_decisions(report)
    assert decisions["leaf_mm"]["precision"] == "LOW"  # WHITE at every level, four scopes down


# ----------------------------------------------------- LSTM with initial states
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_lstm_with_initial_states(tmp_path, level, dtype):
    seq, batch, inp, hidden = 5, 2, 3, 4
    W, R, B = arr(1, 4 * hidden, inp, scale=0.3), arr(1, 4 * hidden, hidden, scale=0.3), arr(1, 8 * hidden, scale=0.1)
    nodes = [
        helper.make_node("LSTM", ["x", "W", "R", "B", "", "h0", "c0"], ["Y", "Y_h", "Y_c"], hidden_size=hidden, name="lstm"),
        helper.make_node("Squeeze", ["Y", "axes1"], ["Ys"], name="squeeze"),
        helper.make_node("Add", ["Y_h", "Y_c"], ["hc"], name="add_states"),
    ]
    graph = helper.make_graph(
        nodes, "lstm",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, batch, inp]),
         helper.make_tensor_value_info("h0", TensorProto.FLOAT, [1, batch, hidden]),
         helper.make_tensor_value_info("c0", TensorProto.FLOAT, [1, batch, hidden])],
        [helper.make_tensor_value_info("Ys", TensorProto.FLOAT, [seq, batch, hidden]),
         helper.make_tensor_value_info("hc", TensorProto.FLOAT, [1, batch, hidden])],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B"),
         numpy_helper.from_array(np.array([1], np.int64), "axes1")],
    )
    feeds = {"x": arr(seq, batch, inp), "h0": arr(1, batch, hidden), "c0": arr(1, batch, hidden)}
    # LSTM accepts float16 from opset 14 onwards (bfloat16 from opset 22).
    report, _ = convert_and_check(tmp_path, make_model(graph, opset=14), feeds, level=level, dtype=dtype,
                                  keep_opset=True)
    lstm = node_decisions(report)["lstm"]
    if dtype == "fp16":
        assert lstm["precision"] == "LOW"
    else:
        assert lstm["precision"] == "HIGH" and lstm["rule"] == "hard-schema" and "opset 22" in lstm["reason"]


# ------------------------------------------ existing Cast nodes and fp16 parts
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_existing_casts_and_float16_parts(tmp_path, level, dtype):
    """A model exported partly in float16 already: float16 parts stay, existing casts stay consistent."""
    w16 = arr(6, 6, scale=0.3).astype(np.float16)
    nodes = [
        helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16, name="to_half"),
        helper.make_node("MatMul", ["x16", "w16"], ["h16"], name="half_mm"),
        helper.make_node("Cast", ["h16"], ["h32"], to=TensorProto.FLOAT, name="to_float"),
        helper.make_node("MatMul", ["h32", "w32"], ["m"], name="mm"),
        helper.make_node("Softmax", ["m"], ["s"], axis=-1, name="softmax"),
        helper.make_node("Cast", ["s"], ["s32"], to=TensorProto.FLOAT, name="redundant_cast"),
        helper.make_node("Cast", ["i"], ["if32"], to=TensorProto.FLOAT, name="int_to_float"),
        helper.make_node("Add", ["s32", "if32"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [2, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6]),
         helper.make_tensor_value_info("h16", TensorProto.FLOAT16, [2, 6])],
        [numpy_helper.from_array(w16, "w16"), numpy_helper.from_array(arr(6, 6, scale=0.3), "w32")],
    )
    feeds = {"x": arr(2, 6), "i": RNG.integers(0, 3, (2, 6)).astype(np.int64)}
    _, out = convert_and_check(tmp_path, make_model(graph, opset=17), feeds, level=level, dtype=dtype)
    types = {t.name: t.data_type for t in out.graph.initializer}
    assert types["w16"] == TensorProto.FLOAT16  # pre-existing float16 data untouched
    outputs = {o.name: o.type.tensor_type.elem_type for o in out.graph.output}
    assert outputs == {"y": TensorProto.FLOAT, "h16": TensorProto.FLOAT16}
    # Every Cast's 'to' agrees with its output type (HAZARDS 1).
    inferred = onnx.shape_inference.infer_shapes(out)
    vtypes = {v.name: v.type.tensor_type.elem_type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    for node in out.graph.node:
        if node.op_type == "Cast" and node.output[0] in vtypes:
            assert node.attribute[0].i == vtypes[node.output[0]], node.name


# -------------------------------------------- ai.onnx.ml ops next to float ops
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_onnx_ml_ops_next_to_float_ops(tmp_path, level, dtype):
    """ai.onnx.ml ops have float-only kernels: they stay float32, the float ops around them convert."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Scaler", ["h"], ["scaled"], domain="ai.onnx.ml", offset=[0.5] * 4, scale=[2.0] * 4, name="scaler"),
        helper.make_node("MatMul", ["scaled", "w2"], ["y"], name="mm2"),
        helper.make_node("Normalizer", ["y"], ["normed"], domain="ai.onnx.ml", norm="L2", name="normalizer"),
    ]
    graph = helper.make_graph(
        nodes, "ml",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("normed", TensorProto.FLOAT, [3, 4])],
        [numpy_helper.from_array(arr(4, 4, scale=0.5), "w"), numpy_helper.from_array(arr(4, 4, scale=0.5), "w2")],
    )
    model = make_model(graph, opset=17, extra_opsets=[("ai.onnx.ml", 3)])
    report, _ = convert_and_check(tmp_path, model, {"x": arr(3, 4)}, level=level, dtype=dtype)
    d = node_decisions(report)
    assert d["scaler"]["precision"] == "HIGH" and d["normalizer"]["precision"] == "HIGH"
    assert d["mm"]["precision"] == "LOW"


# ---------------------------------------- com.microsoft contrib and quantized ops
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_contrib_ops(tmp_path, level, dtype):
    """com.microsoft ops (Gelu, FusedMatMul) are read through onnxruntime's schemas: they convert like any op."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Gelu", ["h"], ["g"], domain="com.microsoft", name="gelu"),
        helper.make_node("FusedMatMul", ["g", "w"], ["f"], domain="com.microsoft", alpha=0.5, name="fused"),
        helper.make_node("Add", ["f", "h"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "contrib", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(arr(8, 8, scale=0.3), "w")],
    )
    model = make_model(graph, opset=17, extra_opsets=[("com.microsoft", 1)])
    report, _ = convert_and_check(tmp_path, model, {"x": arr(2, 8)}, level=level, dtype=dtype)
    d = node_decisions(report)
    if level == "O1":  # gray follows the white MatMul; the white FusedMatMul is LOW at every level
        assert (d["gelu"]["precision"], d["gelu"]["rule"]) == ("LOW", "gray-follow")
    else:
        assert d["gelu"]["precision"] == "LOW"
    assert (d["fused"]["precision"], d["fused"]["rule"]) == ("LOW", "level-O3" if level == "O3" else "white")
    assert d["add"]["precision"] == "LOW"  # its inputs' types are inferred through the contrib ops


@pytest.mark.parametrize("dtype", DTYPES)
def test_an_op_of_a_domain_nobody_knows_stays_float32(tmp_path, dtype):
    """No schema anywhere (a custom domain): its float tensors stay float32, said, and the rest converts."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Mystery", ["h"], ["g"], domain="example.custom", name="mystery"),
        helper.make_node("Add", ["g", "h"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [numpy_helper.from_array(arr(8, 8, scale=0.3), "w")],
    )
    model = make_model(graph, opset=17, extra_opsets=[("example.custom", 1)])
    src = tmp_path / "custom.onnx"
    onnx.save(model, str(src))
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(dtype=dtype))
    d = node_decisions(report)
    assert (d["mystery"]["precision"], d["mystery"]["rule"]) == ("HIGH", "hard-no-schema")
    assert d["mm"]["precision"] == "LOW"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_quantized_ops(tmp_path, level, dtype):
    """DynamicQuantizeLinear -> MatMulInteger / ConvInteger -> dequantize by hand: scales stay float32."""
    wq = RNG.integers(-20, 20, (8, 4)).astype(np.int8)
    wc = RNG.integers(0, 20, (2, 1, 3, 3)).astype(np.uint8)
    nodes = [
        helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"], name="dql"),
        helper.make_node("MatMulInteger", ["xq", "wq", "xz"], ["acc"], name="mmi"),
        helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT, name="acc_to_float"),
        helper.make_node("Mul", ["accf", "xs"], ["deq"], name="dequant"),
        helper.make_node("MatMul", ["deq", "w2"], ["y"], name="mm"),
        helper.make_node("DynamicQuantizeLinear", ["img"], ["iq", "is_", "iz"], name="dql_img"),
        helper.make_node("ConvInteger", ["iq", "wc", "iz"], ["cacc"], name="convint"),
        helper.make_node("Cast", ["cacc"], ["caccf"], to=TensorProto.FLOAT, name="cacc_to_float"),
        helper.make_node("Mul", ["caccf", "is_"], ["cy"], name="cdequant"),
    ]
    graph = helper.make_graph(
        nodes, "quant",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 8]),
         helper.make_tensor_value_info("img", TensorProto.FLOAT, [1, 1, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5]),
         helper.make_tensor_value_info("cy", TensorProto.FLOAT, [1, 2, 4, 4])],
        [numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(wc, "wc"),
         numpy_helper.from_array(arr(4, 5, scale=0.01), "w2")],
    )
    feeds = {"x": arr(3, 8), "img": np.abs(arr(1, 1, 6, 6))}
    report, _ = convert_and_check(tmp_path, make_model(graph, opset=13), feeds, level=level, dtype=dtype)
    d = node_decisions(report)
    # DynamicQuantizeLinear's input is float32-only in its schema: never converted.
    assert d["dql"]["precision"] in ("HIGH", "NONE") and d["mmi"]["precision"] in ("HIGH", "NONE")
    assert d["mm"]["precision"] == "LOW"


# ------------------------------------------------ symbolic dims as formulas
@pytest.mark.parametrize("dtype", DTYPES)
def test_symbolic_dimension_formulas(tmp_path, dtype):
    """dim_params like 'batch*2' and 'seq+1' (torch.export, symbolic shape inference) survive conversion."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Concat", ["h", "h"], ["cat"], axis=0, name="cat"),
        helper.make_node("Softmax", ["cat"], ["y"], axis=-1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "sym", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq+1", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["2*batch", "seq+1", 4])],
        [numpy_helper.from_array(arr(4, 4, scale=0.5), "w")],
    )
    graph.value_info.append(helper.make_tensor_value_info("cat", TensorProto.FLOAT, ["2*batch", "seq+1", 4]))
    _, out = convert_and_check(tmp_path, make_model(graph, opset=17), {"x": arr(3, 5, 4)}, dtype=dtype)
    dims = [d.dim_param or d.dim_value for d in out.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq+1", 4]
    dims = [d.dim_param or d.dim_value for d in out.graph.output[0].type.tensor_type.shape.dim]
    assert dims == ["2*batch", "seq+1", 4]


# -------------------------------------------------------------- opsets 11..21
def _opset_model(opset: int) -> onnx.ModelProto:
    """Conv, BN, Resize, Softmax, ReduceMean, Clip and Split: ops whose schemas changed across 11..21."""
    axes_as_input = opset >= 18  # ReduceMean axes became an input at 18
    split_as_input = opset >= 13
    inits = [
        numpy_helper.from_array(arr(4, 3, 3, 3, scale=0.2), "cw"),
        numpy_helper.from_array(np.abs(arr(4)) + 0.5, "bn_s"), numpy_helper.from_array(arr(4), "bn_b"),
        numpy_helper.from_array(arr(4), "bn_m"), numpy_helper.from_array(np.abs(arr(4)) + 0.5, "bn_v"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
        numpy_helper.from_array(np.array([], np.float32), "roi"),
        numpy_helper.from_array(np.array([0.0], np.float32).reshape(()), "lo"),
        numpy_helper.from_array(np.array([6.0], np.float32).reshape(()), "hi"),
        numpy_helper.from_array(np.array([-1], np.int64), "axes"),
        numpy_helper.from_array(np.array([2, 2], np.int64), "split"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "cw"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn"),
        helper.make_node("Clip", ["bn", "lo", "hi"], ["clip"], name="clip"),
        helper.make_node("Resize", ["clip", "roi", "scales"], ["up"], mode="nearest", name="resize"),
        helper.make_node("Split", ["up", "split"] if split_as_input else ["up"], ["s1", "s2"], axis=1,
                         name="split", **({} if split_as_input else {"split": [2, 2]})),
        helper.make_node("Softmax", ["s1"], ["sm"], axis=-1, name="softmax"),
        helper.make_node("ReduceMean", ["s2", "axes"] if axes_as_input else ["s2"], ["rm"], name="rmean",
                         **({} if axes_as_input else {"axes": [-1]})),
    ]
    graph = helper.make_graph(
        nodes, f"opset{opset}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 6])],
        [helper.make_tensor_value_info("sm", TensorProto.FLOAT, [1, 2, 12, 12]),
         helper.make_tensor_value_info("rm", TensorProto.FLOAT, [1, 2, 12, 1])],
        inits,
    )
    return make_model(graph, opset=opset, ir_version=8 if opset < 21 else 10)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opset", list(range(11, 22)))
def test_opsets_11_to_21(tmp_path, opset, dtype):
    report, out = convert_and_check(tmp_path, _opset_model(opset), {"x": arr(1, 3, 6, 6)}, dtype=dtype, tag=f"op{opset}")
    d = node_decisions(report)
    # Guarded, not black: it follows the Split (LOW in fp16; bf16 Conv waits for opset 22, and
    # Softmax before opset 13 takes no bfloat16 at all).
    if d["softmax"]["rule"] != "hard-schema":
        assert d["softmax"]["rule"] == "gray-follow" and d["softmax"]["precision"] == d["split"]["precision"]
    assert dtype != "fp16" or d["softmax"]["precision"] == "LOW"
    resize = next(n for n in out.graph.node if n.op_type == "Resize")
    scales_type = {t.name: t.data_type for t in out.graph.initializer}
    assert scales_type[resize.input[2]] == TensorProto.FLOAT  # Resize scales stay float32
