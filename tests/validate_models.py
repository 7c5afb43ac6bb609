"""Tiny hand-built models for the validation tests (float32 references and LOW twins).

Each builder writes ``<name>.onnx`` into a folder and returns its path. The
LOW twins are built by hand the way the converter writes them: float32 graph
inputs/outputs, a Cast to LOW at the boundary, LOW initializers.
"""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

IR_VERSION = 9  # onnxruntime 1.31 reads IR <= 13; onnx 1.23 would write 14
OPSET = 17
LOW = {"fp16": T.FLOAT16, "bf16": T.BFLOAT16}


def _save(model: onnx.ModelProto, folder, name: str) -> str:
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(os.fspath(folder), f"{name}.onnx")
    onnx.save(model, path)
    return path


def _model(nodes, inputs, outputs, initializers=(), name="g"):
    graph = h.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)])


def _const(name, value, elem):
    array = np.asarray(value, dtype=np.float32)
    if elem == T.FLOAT:
        return numpy_helper.from_array(array, name)
    if elem == T.FLOAT16:
        return numpy_helper.from_array(array.astype(np.float16), name)
    return h.make_tensor(name, T.BFLOAT16, array.shape, array.ravel().tolist())


def overflow_pair(folder, scale_low: bool = True, dtype: str = "fp16"):
    """y = (x * 1000) / 1000 with x ~ 70: the product (7e4) overflows fp16.

    Returns (reference, converted). ``scale_low=False`` keeps the Mul and Div
    float32 in the converted model (what the automatic fix would do).
    """
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])
    y = h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])
    ref_nodes = [
        h.make_node("Relu", ["x"], ["r"], name="relu"),
        h.make_node("Mul", ["r", "k"], ["big"], name="scale_up"),
        h.make_node("Div", ["big", "k"], ["small"], name="scale_down"),
        h.make_node("Add", ["small", "one"], ["y"], name="add_one"),
    ]
    ref = _model(ref_nodes, [x], [y], [_const("k", 1000.0, T.FLOAT), _const("one", 1.0, T.FLOAT)])
    low = LOW[dtype]
    if scale_low:
        nodes = [
            h.make_node("Cast", ["x"], ["x_low"], to=low, name="cast_in"),
            h.make_node("Relu", ["x_low"], ["r"], name="relu"),
            h.make_node("Mul", ["r", "k"], ["big"], name="scale_up"),
            h.make_node("Div", ["big", "k"], ["small"], name="scale_down"),
            h.make_node("Add", ["small", "one"], ["y_low"], name="add_one"),
            h.make_node("Cast", ["y_low"], ["y"], to=T.FLOAT, name="cast_out"),
        ]
        inits = [_const("k", 1000.0, low), _const("one", 1.0, low)]
    else:
        nodes = [
            h.make_node("Cast", ["x"], ["x_low"], to=low, name="cast_in"),
            h.make_node("Relu", ["x_low"], ["r_low"], name="relu"),
            h.make_node("Cast", ["r_low"], ["r"], to=T.FLOAT, name="cast_r"),
            h.make_node("Mul", ["r", "k"], ["big"], name="scale_up"),
            h.make_node("Div", ["big", "k"], ["small"], name="scale_down"),
            h.make_node("Cast", ["small"], ["small_low"], to=low, name="cast_small"),
            h.make_node("Add", ["small_low", "one"], ["y_low"], name="add_one"),
            h.make_node("Cast", ["y_low"], ["y"], to=T.FLOAT, name="cast_out"),
        ]
        inits = [_const("k", 1000.0, T.FLOAT), _const("one", 1.0, low)]
    conv = _model(nodes, [x], [y], inits)
    suffix = "" if scale_low else "_fixed"
    return _save(ref, folder, "overflow_ref"), _save(conv, folder, f"overflow_{dtype}{suffix}")


def mlp_pair(folder, dtype: str = "fp16", seed: int = 0, hidden: int = 16):
    """A 2-layer MLP with a class-like output (batch, 5) and its LOW twin."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((8, hidden)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(hidden).astype(np.float32) * 0.1
    w2 = rng.standard_normal((hidden, 5)).astype(np.float32) * 0.3
    x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 8])
    y = h.make_tensor_value_info("logits", T.FLOAT, ["batch", 5])

    def nodes(pre, post):
        return pre + [
            h.make_node("MatMul", [post[0], "w1"], ["h1"], name="fc1"),
            h.make_node("Add", ["h1", "b1"], ["h2"], name="bias1"),
            h.make_node("Relu", ["h2"], ["h3"], name="relu1"),
            h.make_node("MatMul", ["h3", "w2"], [post[1]], name="fc2"),
        ]

    def inits(elem):
        return [_const("w1", w1, elem), _const("b1", b1, elem), _const("w2", w2, elem)]

    ref = _model(nodes([], ["x", "logits"]), [x], [y], inits(T.FLOAT))
    low = LOW[dtype]
    conv_nodes = nodes([h.make_node("Cast", ["x"], ["x_low"], to=low, name="cast_in")], ["x_low", "logits_low"])
    conv_nodes.append(h.make_node("Cast", ["logits_low"], ["logits"], to=T.FLOAT, name="cast_out"))
    conv = _model(conv_nodes, [x], [y], inits(low))
    return _save(ref, folder, "mlp_ref"), _save(conv, folder, f"mlp_{dtype}")


def multi_input_pair(folder):
    """Inputs of three kinds: float ``x`` [batch, 3], int64 ``ids`` [batch], bool ``mask`` [batch, 3].

    y = Where(mask, x, 0) + Gather(table, ids)[:, :3]; the converted twin is
    identical except that the Where runs in fp16.
    """
    table = np.arange(12, dtype=np.float32).reshape(4, 3) / 10
    inputs = [
        h.make_tensor_value_info("x", T.FLOAT, ["batch", 3]),
        h.make_tensor_value_info("ids", T.INT64, ["batch"]),
        h.make_tensor_value_info("mask", T.BOOL, ["batch", 3]),
    ]
    out = [h.make_tensor_value_info("y", T.FLOAT, ["batch", 3])]
    ref_nodes = [
        h.make_node("Where", ["mask", "x", "zero"], ["w"], name="where"),
        h.make_node("Gather", ["table", "ids"], ["g"], name="gather"),
        h.make_node("Add", ["w", "g"], ["y"], name="add"),
    ]
    ref = _model(ref_nodes, inputs, out, [_const("zero", 0.0, T.FLOAT), _const("table", table, T.FLOAT)])
    conv_nodes = [
        h.make_node("Cast", ["x"], ["x_low"], to=T.FLOAT16, name="cast_in"),
        h.make_node("Where", ["mask", "x_low", "zero"], ["w_low"], name="where"),
        h.make_node("Cast", ["w_low"], ["w"], to=T.FLOAT, name="cast_w"),
        h.make_node("Gather", ["table", "ids"], ["g"], name="gather"),
        h.make_node("Add", ["w", "g"], ["y"], name="add"),
    ]
    conv = _model(conv_nodes, inputs, out, [_const("zero", 0.0, T.FLOAT16), _const("table", table, T.FLOAT)])
    return _save(ref, folder, "multi_ref"), _save(conv, folder, "multi_fp16")


def if_pair(folder):
    """An If whose LOW branch overflows: cond ? (x*1000)/1000 : x, in fp16 inside the branch."""
    x = h.make_tensor_value_info("x", T.FLOAT, [4])
    c = h.make_tensor_value_info("cond", T.BOOL, [])
    y = h.make_tensor_value_info("y", T.FLOAT, [4])

    def branches(elem):
        then_out = h.make_tensor_value_info("t_out", elem, [4])
        else_out = h.make_tensor_value_info("e_out", elem, [4])
        then_g = h.make_graph(
            [
                h.make_node("Mul", ["xin", "k"], ["t_big"], name="then_mul"),
                h.make_node("Div", ["t_big", "k"], ["t_out"], name="then_div"),
            ],
            "then", [], [then_out],
        )
        else_g = h.make_graph([h.make_node("Identity", ["xin"], ["e_out"], name="else_id")], "else", [], [else_out])
        return then_g, else_g

    t, e = branches(T.FLOAT)
    ref = _model(
        [h.make_node("Identity", ["x"], ["xin"], name="id"), h.make_node("If", ["cond"], ["y"], then_branch=t, else_branch=e, name="if")],
        [x, c], [y], [_const("k", 1000.0, T.FLOAT)],
    )
    t, e = branches(T.FLOAT16)
    conv = _model(
        [
            h.make_node("Cast", ["x"], ["xin"], to=T.FLOAT16, name="id"),
            h.make_node("If", ["cond"], ["y_low"], then_branch=t, else_branch=e, name="if"),
            h.make_node("Cast", ["y_low"], ["y"], to=T.FLOAT, name="cast_out"),
        ],
        [x, c], [y], [_const("k", 1000.0, T.FLOAT16)],
    )
    return _save(ref, folder, "if_ref"), _save(conv, folder, "if_fp16")


def overflow_inputs(batch: int = 2) -> dict:
    """Inputs near 70 so that x * 1000 exceeds the fp16 maximum 65504."""
    return {"x": np.full((batch, 4), 70.0, dtype=np.float32) + np.arange(4, dtype=np.float32)}


def _unnamed(info):
    """Clear the dims declared None so they have neither dim_value nor dim_param ("?")."""
    for dim in info.type.tensor_type.shape.dim:
        if not dim.HasField("dim_value") and not dim.dim_param:
            dim.Clear()
    return info


def paddle_pair(folder, dims=(-1, 3, None, None)):
    """y = Relu(x) with x declared like a Paddle export, ``[-1, 3, ?, ?]``, and its fp16 twin."""
    x = _unnamed(h.make_tensor_value_info("x", T.FLOAT, list(dims)))
    y = _unnamed(h.make_tensor_value_info("y", T.FLOAT, list(dims)))
    ref = _model([h.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y])
    conv_nodes = [
        h.make_node("Cast", ["x"], ["x_low"], to=T.FLOAT16, name="cast_in"),
        h.make_node("Relu", ["x_low"], ["y_low"], name="relu"),
        h.make_node("Cast", ["y_low"], ["y"], to=T.FLOAT, name="cast_out"),
    ]
    conv = _model(conv_nodes, [x], [y])
    return _save(ref, folder, "paddle_ref"), _save(conv, folder, "paddle_fp16")


def bf16_output_pair(folder, factor: float = 1.0):
    """A reference whose graph output is bfloat16: y = Cast(x * 2, bf16); the twin scales by 2*factor in fp16."""
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 4])
    y = h.make_tensor_value_info("y", T.BFLOAT16, [2, 4])
    ref = _model(
        [
            h.make_node("Mul", ["x", "k"], ["scaled"], name="mul"),
            h.make_node("Cast", ["scaled"], ["y"], to=T.BFLOAT16, name="to_bf16"),
        ],
        [x], [y], [_const("k", 2.0, T.FLOAT)],
    )
    conv = _model(
        [
            h.make_node("Cast", ["x"], ["x_low"], to=T.FLOAT16, name="cast_in"),
            h.make_node("Mul", ["x_low", "k"], ["scaled_low"], name="mul_low"),
            h.make_node("Cast", ["scaled_low"], ["scaled"], to=T.FLOAT, name="mul"),
            h.make_node("Cast", ["scaled"], ["y"], to=T.BFLOAT16, name="to_bf16"),
        ],
        [x], [y], [_const("k", 2.0 * factor, T.FLOAT16)],
    )
    suffix = "" if factor == 1.0 else "_drift"
    return _save(ref, folder, "bf16out_ref"), _save(conv, folder, f"bf16out_conv{suffix}")


def passthrough_pair(folder, dtype: str = "fp16"):
    """Outputs ``[y, x]`` where ``x`` is the graph input itself; the twin declares x as LOW.

    Reference: y = Relu(x), x float32. Converted (keep_io_types off): x is a
    LOW graph input, y = Cast(Relu(Cast(x, float)), float) and x is returned
    as is, the way a converter writes a model whose input is also an output.
    """
    low = LOW[dtype]
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 3])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    ref = _model([h.make_node("Relu", ["x"], ["y"], name="relu")], [x], [y, x])
    x_low = h.make_tensor_value_info("x", low, [2, 3])
    conv = _model(
        [
            h.make_node("Cast", ["x"], ["x_f"], to=T.FLOAT, name="cast_in"),
            h.make_node("Relu", ["x_f"], ["y"], name="relu"),
        ],
        [x_low], [y, x_low],
    )
    return _save(ref, folder, "passthrough_ref"), _save(conv, folder, f"passthrough_{dtype}")


def overflowing_mlp(seed: int = 0) -> onnx.ModelProto:
    """A 4-layer MLP whose second layer's output reaches ~1.8e5 on inputs in [0, 50] (fp16 max 65504).

    x[batch, 16] -> /layer{k}/MatMul -> /layer{k}/Add -> /layer{k}/Relu (k = 0..2) -> /layer3/MatMul -> y[batch, 40].
    Layer 0 keeps values moderate (its own fp16 rounding is ordinary), layer 1 multiplies them past the
    fp16 range, layer 2 scales them back into range, layer 3 makes the 40 logits.
    """
    rng = np.random.default_rng(seed)
    sizes = [(16, 32, 0.5), (32, 32, 190.0), (32, 32, 8e-6), (32, 40, 0.5)]
    nodes, inits = [], []
    current = "x"
    for k, (n_in, n_out, scale) in enumerate(sizes):
        w = rng.standard_normal((n_in, n_out)).astype(np.float32) * scale
        if k > 0:  # layer 0 mixes signs (outputs near 0, ordinary rounding over an elementwise tolerance)
            w = np.abs(w)
        b = np.zeros(n_out, np.float32)
        inits += [numpy_helper.from_array(w, f"layer{k}.weight"), numpy_helper.from_array(b, f"layer{k}.bias")]
        nodes.append(h.make_node("MatMul", [current, f"layer{k}.weight"], [f"/layer{k}/MatMul_output_0"],
                                      name=f"/layer{k}/MatMul"))
        nodes.append(h.make_node("Add", [f"/layer{k}/MatMul_output_0", f"layer{k}.bias"],
                                      [f"/layer{k}/Add_output_0"], name=f"/layer{k}/Add"))
        current = f"/layer{k}/Add_output_0"
        if k < len(sizes) - 1:
            nodes.append(h.make_node("Relu", [current], [f"/layer{k}/Relu_output_0"], name=f"/layer{k}/Relu"))
            current = f"/layer{k}/Relu_output_0"
    nodes[-1].output[0] = "y"
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["batch", 16])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["batch", 40])], inits, name="mlp")


def text_detector(seed: int = 3) -> onnx.ModelProto:
    """A DB-style text detector head: Conv -> Relu -> Conv -> Sigmoid probability map, near 0 on random inputs.

    The logits come out near -10 from intermediate values near 1000 (fp16 spacing there: 0.5), so
    fp16 moves each logit by up to a quarter: a quarter of a map value near 1e-4, as a
    trained detector's map is near zero away from text. Its RMS is tiny, its range [0, 1].
    """
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 8.0).astype(np.float32), "w1"),
        numpy_helper.from_array(np.abs(rng.standard_normal((1, 8, 3, 3))).astype(np.float32), "w2"),
        numpy_helper.from_array(np.array([-1056.0], np.float32), "b2"),
    ]
    nodes = [
        h.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        h.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        h.make_node("Add", ["c2", "b2"], ["logits"], name="bias"),  # as exporters often write the bias
        h.make_node("Sigmoid", ["logits"], ["maps"], name="sigmoid"),
    ]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 32, 32])],
                  [h.make_tensor_value_info("maps", T.FLOAT, [1, 1, 32, 32])], inits, name="detector")


def sensitive_classifier(seed: int = 0, offset: float = 900.0) -> onnx.ModelProto:
    """A classifier whose logits are small differences of large hidden values: sensitive to fp16 by design.

    x[batch, 32] -> MatMul -> Add(offset) -> Relu -> MatMul -> logits[batch, 10]. The hidden layer sits
    near ``offset`` (fp16 spacing 0.5 at 900) and carries a signal of size ~4; the second layer's columns
    sum to zero, so the offset cancels and the logits are made of the signal alone. Rounding the hidden
    layer (any LOW conversion does: it is a product's result) moves each logit by a few percent of its
    scale, while the top-1 of every clearly led row stays. A trained network with a large activation
    offset (EfficientNet's, in issue 30) reads like this.
    """
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((32, 64)) * 0.7).astype(np.float32)
    w2 = rng.standard_normal((64, 10)).astype(np.float32)
    w2 -= w2.mean(axis=0, keepdims=True)
    w2 *= 0.5
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(np.full(64, offset, np.float32), "b1"),
             numpy_helper.from_array(w2, "w2")]
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        h.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
        h.make_node("Relu", ["h1"], ["h2"], name="relu1"),
        h.make_node("MatMul", ["h2", "w2"], ["logits"], name="fc2"),
    ]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["batch", 32])],
                  [h.make_tensor_value_info("logits", T.FLOAT, ["batch", 10])], inits, name="classifier")


def prob_map_detector(seed: int = 0, size: int = 64) -> onnx.ModelProto:
    """A DB-style text detector (PP-OCR's head, by hand): Conv -> Relu -> Conv -> Relu -> Resize x2 -> Conv ->
    Sigmoid, a probability map in [0, 1] at twice the feature resolution.

    The first layers reach values in the hundreds (fp16 spacing 0.25 to 0.5 there) and the last one turns
    their small differences into logits around -4 with a spread of a few units, so on random inputs in
    [-1, 1] most of the map is near zero and a few percent of its pixels cross 0.5: a thresholded text area.
    """
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((16, 3, 3, 3)) * 12.0).astype(np.float32)
    w2 = (rng.standard_normal((16, 16, 3, 3)) * 1.5).astype(np.float32)
    w3 = rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
    w3 = (w3 - w3.mean()) * 0.02
    inits = [
        numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(np.full(16, 40.0, np.float32), "b1"),
        numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(np.zeros(16, np.float32), "b2"),
        numpy_helper.from_array(w3.astype(np.float32), "w3"), numpy_helper.from_array(np.array([-4.0], np.float32), "b3"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]
    nodes = [
        h.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        h.make_node("Conv", ["r1", "w2", "b2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        h.make_node("Resize", ["r2", "", "scales"], ["up"], name="upsample", mode="linear"),
        h.make_node("Conv", ["up", "w3", "b3"], ["logits"], name="conv3"),
        h.make_node("Sigmoid", ["logits"], ["maps"], name="sigmoid"),
    ]
    return _model(nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 3, size, size])],
                  [h.make_tensor_value_info("maps", T.FLOAT, [1, 1, 2 * size, 2 * size])], inits, name="dbnet")


def _scalar(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


def _detector_body(rng, anchors: int, features: int, classes: int):
    """Nodes and weights shared by the detection heads: boxes [1, A, 4] (x1, y1, x2, y2) and class scores
    [1, A, C] in (0, 1) from features [1, A, F]."""
    inits = [
        numpy_helper.from_array((rng.standard_normal((features, 4)) * 0.6).astype(np.float32), "w_box"),
        numpy_helper.from_array((rng.standard_normal((features, classes)) * 0.4).astype(np.float32), "w_cls"),
        numpy_helper.from_array(np.full(classes, -1.5, np.float32), "b_cls"),
        numpy_helper.from_array(np.array([300.0, 300.0], np.float32), "extent"),
        numpy_helper.from_array(np.array([60.0, 60.0], np.float32), "size"),
        numpy_helper.from_array(np.array([24.0, 24.0], np.float32), "min_size"),
        _scalar("s0", [0]), _scalar("s2", [2]), _scalar("s4", [4]), _scalar("axis_last", [-1]),
    ]
    nodes = [
        h.make_node("MatMul", ["feats", "w_box"], ["box_raw"], name="box_head"),
        h.make_node("Sigmoid", ["box_raw"], ["box_unit"], name="box_sigmoid"),
        h.make_node("Slice", ["box_unit", "s0", "s2", "axis_last"], ["corner_unit"], name="corner_slice"),
        h.make_node("Slice", ["box_unit", "s2", "s4", "axis_last"], ["size_unit"], name="size_slice"),
        h.make_node("Mul", ["corner_unit", "extent"], ["corner"], name="corner_scale"),
        h.make_node("Mul", ["size_unit", "size"], ["size_scaled"], name="size_scale"),
        h.make_node("Add", ["size_scaled", "min_size"], ["wh"], name="size_min"),
        h.make_node("Add", ["corner", "wh"], ["far"], name="far_corner"),
        h.make_node("Concat", ["corner", "far"], ["boxes_all"], name="boxes_concat", axis=-1),
        h.make_node("MatMul", ["feats", "w_cls"], ["cls_raw"], name="cls_head"),
        h.make_node("Add", ["cls_raw", "b_cls"], ["cls_logits"], name="cls_bias"),
        h.make_node("Sigmoid", ["cls_logits"], ["cls_scores"], name="cls_sigmoid"),
    ]
    return nodes, inits


def nms_detector(seed: int = 0, anchors: int = 400, features: int = 16, classes: int = 3,
                 score_threshold: float = 0.5) -> onnx.ModelProto:
    """A detection head ending in NonMaxSuppression, torchvision-style: boxes [K, 4], scores [K], labels [K]
    (int64), K decided by the data (the scores over ``score_threshold``, at most 100 per class, IoU 0.5)."""
    rng = np.random.default_rng(seed)
    nodes, inits = _detector_body(rng, anchors, features, classes)
    inits += [_scalar("max_out", [100]), numpy_helper.from_array(np.array([0.5], np.float32), "iou_thr"),
              numpy_helper.from_array(np.array([score_threshold], np.float32), "score_thr"),
              _scalar("col_class", 1), _scalar("col_box", 2), _scalar("axes0", [0])]
    nodes += [
        h.make_node("Transpose", ["cls_scores"], ["cls_by_class"], name="scores_t", perm=[0, 2, 1]),
        h.make_node("NonMaxSuppression", ["boxes_all", "cls_by_class", "max_out", "iou_thr", "score_thr"],
                    ["selected"], name="nms"),
        h.make_node("Gather", ["selected", "col_box"], ["box_index"], name="pick_box", axis=1),
        h.make_node("Gather", ["selected", "col_class"], ["labels"], name="pick_class", axis=1),
        h.make_node("Squeeze", ["boxes_all", "axes0"], ["boxes_flat"], name="boxes_squeeze"),
        h.make_node("Gather", ["boxes_flat", "box_index"], ["boxes"], name="gather_boxes", axis=0),
        h.make_node("GatherND", ["cls_by_class", "selected"], ["scores"], name="gather_scores"),
    ]
    outputs = [h.make_tensor_value_info("boxes", T.FLOAT, ["detections", 4]),
               h.make_tensor_value_info("scores", T.FLOAT, ["detections"]),
               h.make_tensor_value_info("labels", T.INT64, ["detections"])]
    return _model(nodes, [h.make_tensor_value_info("feats", T.FLOAT, [1, anchors, features])], outputs, inits,
                  name="nms_head")


def topk_detector(seed: int = 0, anchors: int = 400, features: int = 16, classes: int = 3,
                  keep: int = 50) -> onnx.ModelProto:
    """A YOLO end-to-end style head: the ``keep`` best anchors by their top class score (TopK), packed as
    [1, keep, 6] = (x1, y1, x2, y2, score, class) by a Concat; a fixed count, an order decided by the scores."""
    rng = np.random.default_rng(seed)
    nodes, inits = _detector_body(rng, anchors, features, classes)
    inits += [_scalar("k", [keep]), _scalar("idx_axes", [2])]
    nodes += [
        h.make_node("ReduceMax", ["cls_scores"], ["best"], name="best_score", axes=[-1], keepdims=0),
        h.make_node("ArgMax", ["cls_scores"], ["best_class"], name="best_class", axis=-1, keepdims=0),
        h.make_node("TopK", ["best", "k"], ["top_scores", "top_index"], name="topk", axis=-1),
        h.make_node("Unsqueeze", ["top_index", "idx_axes"], ["top_index3"], name="index_unsqueeze"),
        h.make_node("Expand", ["top_index3", "expand_shape"], ["box_index"], name="index_expand"),
        h.make_node("GatherElements", ["boxes_all", "box_index"], ["top_boxes"], name="gather_boxes", axis=1),
        h.make_node("GatherElements", ["best_class", "top_index"], ["top_class"], name="gather_class", axis=1),
        h.make_node("Cast", ["top_class"], ["top_class_f"], name="class_float", to=T.FLOAT),
        h.make_node("Unsqueeze", ["top_scores", "axis_last"], ["score_col"], name="score_col"),
        h.make_node("Unsqueeze", ["top_class_f", "axis_last"], ["class_col"], name="class_col"),
        h.make_node("Concat", ["top_boxes", "score_col", "class_col"], ["detections"], name="pack", axis=-1),
    ]
    inits.append(_scalar("expand_shape", [1, keep, 4]))
    return _model(nodes, [h.make_tensor_value_info("feats", T.FLOAT, [1, anchors, features])],
                  [h.make_tensor_value_info("detections", T.FLOAT, [1, keep, 6])], inits, name="topk_head")


def image_decoder(seed: int = 0, size: int = 8) -> onnx.ModelProto:
    """A VAE-decoder-like model: latents [1, 4, S, S] -> Conv -> Relu -> Resize x2 -> Conv -> Relu -> Conv ->
    Tanh, an image [1, 3, 2S, 2S] in [-1, 1] (judged by its PSNR, as a decoded image is)."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((32, 4, 3, 3)) * 0.3).astype(np.float32), "w1"),
        numpy_helper.from_array((rng.standard_normal((32, 32, 3, 3)) * 0.08).astype(np.float32), "w2"),
        numpy_helper.from_array((rng.standard_normal((3, 32, 3, 3)) * 0.08).astype(np.float32), "w3"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
    ]
    nodes = [
        h.make_node("Conv", ["z", "w1"], ["c1"], name="conv_in", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        h.make_node("Resize", ["r1", "", "scales"], ["up"], name="upsample", mode="nearest"),
        h.make_node("Conv", ["up", "w2"], ["c2"], name="conv_mid", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        h.make_node("Conv", ["r2", "w3"], ["c3"], name="conv_out", pads=[1, 1, 1, 1]),
        h.make_node("Tanh", ["c3"], ["image"], name="tanh"),
    ]
    return _model(nodes, [h.make_tensor_value_info("z", T.FLOAT, [1, 4, size, size])],
                  [h.make_tensor_value_info("image", T.FLOAT, [1, 3, 2 * size, 2 * size])], inits, name="decoder")


def token_grid_reshape(folder, tokens: int = 577, width: int = 384, heads: int = 6) -> str:
    """A ViT-S saliency head that packs its Reshape target in float: ``[b, n, 6, 64]`` from ``Shape`` cast to
    float, ``Concat``-ed with float constants and cast back to int64 (exporters write it for ``n / k``).

    bfloat16 holds integers exactly only up to 256: a floor that rounded the packed shape asked the
    Reshape for 576 of the 577 tokens and failed. The converter keeps that computation float32.
    """
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((width, width)) * 0.05).astype(np.float32), "w_q"),
             numpy_helper.from_array(np.array(0, np.int64), "at0"), numpy_helper.from_array(np.array(1, np.int64), "at1"),
             numpy_helper.from_array(np.array([0], np.int64), "axes0"),
             numpy_helper.from_array(np.array([heads, width // heads], np.float32), "head_dims"),
             numpy_helper.from_array((rng.standard_normal((width // heads, 1)) * 0.05).astype(np.float32), "w_s")]
    nodes = [
        h.make_node("MatMul", ["tokens", "w_q"], ["q"], name="q_proj"),
        h.make_node("Shape", ["q"], ["q_shape"], name="shape"),
        h.make_node("Gather", ["q_shape", "at0"], ["batch"], name="batch_of"),
        h.make_node("Gather", ["q_shape", "at1"], ["count"], name="count_of"),
        h.make_node("Cast", ["batch"], ["batch_f"], name="batch_float", to=T.FLOAT),
        h.make_node("Cast", ["count"], ["count_f"], name="count_float", to=T.FLOAT),
        h.make_node("Unsqueeze", ["batch_f", "axes0"], ["batch_1"], name="batch_unsqueeze"),
        h.make_node("Unsqueeze", ["count_f", "axes0"], ["count_1"], name="count_unsqueeze"),
        h.make_node("Concat", ["batch_1", "count_1", "head_dims"], ["packed"], name="pack_shape", axis=0),
        h.make_node("Cast", ["packed"], ["target"], name="shape_int", to=T.INT64),
        h.make_node("Reshape", ["q", "target"], ["q_heads"], name="heads_reshape"),
        h.make_node("MatMul", ["q_heads", "w_s"], ["saliency"], name="saliency"),
    ]
    model = _model(nodes, [h.make_tensor_value_info("tokens", T.FLOAT, [1, tokens, width])],
                   [h.make_tensor_value_info("saliency", T.FLOAT, [1, tokens, heads, 1])], inits)
    return _save(model, folder, "token_grid")
