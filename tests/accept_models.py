"""Models onnxruntime loads that ampconv once refused (issue "Every model onnxruntime accepts converts").

- ``computed_size_classifier``: a torchvision-style classifier exported at
  opset 11-13, whose two ``Resize`` nodes take an empty ``roi`` and ``scales``
  from Constant nodes and a ``sizes`` computed by Shape -> Slice -> Concat
  with an int64 initializer. The load-check probe once gave ``sizes`` a fresh
  input onnxruntime cannot read, and took its refusal for the model's.
- ``if_untyped_subgraph``: an ``If`` whose branch outputs and value_info carry
  no type (``type {}``) and whose main-graph output is untyped: onnx.checker
  refuses the input, onnxruntime runs it. With ``rank_varies`` the branches
  return different ranks, so no shape can be declared for the output.
- ``repairable(kind, in_subgraph)``: one model per repair kind of
  ``ampconv.reading.repair``, the defect in the main graph or inside an If branch.

Every builder returns a float32 ``onnx.ModelProto`` and its seeded feeds.
"""

from __future__ import annotations

from typing import Dict, Tuple

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

Feeds = Dict[str, np.ndarray]


def _const(name: str, array) -> onnx.NodeProto:
    return h.make_node("Constant", [], [name], name=f"const_{name}", value=nh.from_array(np.asarray(array), name))


def computed_size_classifier(opset: int = 11) -> Tuple[onnx.ModelProto, Feeds]:
    """Conv -> Resize (computed sizes) -> Conv -> Relu -> Resize (computed sizes) -> pool -> Gemm."""
    rng = np.random.default_rng(11)
    weights = [
        nh.from_array((rng.standard_normal((6, 3, 3, 3)) * 0.2).astype(np.float32), "conv1_w"),
        nh.from_array((rng.standard_normal((8, 6, 3, 3)) * 0.2).astype(np.float32), "conv2_w"),
        nh.from_array((rng.standard_normal((10, 8)) * 0.2).astype(np.float32), "fc_w"),
        nh.from_array(np.zeros(10, np.float32), "fc_b"),
        nh.from_array(np.array([40, 40], np.int64), "size1"),
        nh.from_array(np.array([20, 20], np.int64), "size2"),
    ]
    nodes = []

    def resize(x: str, size: str, tag: str, mode: str) -> str:
        nodes.extend([
            h.make_node("Shape", [x], [f"{tag}_shape"], name=f"{tag}_Shape"),
            _const(f"{tag}_starts", [0]), _const(f"{tag}_ends", [2]), _const(f"{tag}_axes", [0]),
            h.make_node("Slice", [f"{tag}_shape", f"{tag}_starts", f"{tag}_ends", f"{tag}_axes"], [f"{tag}_nc"],
                        name=f"{tag}_Slice"),
            h.make_node("Concat", [f"{tag}_nc", size], [f"{tag}_sizes"], name=f"{tag}_Concat", axis=0),
            _const(f"{tag}_roi", np.zeros(0, np.float32)), _const(f"{tag}_scales", np.zeros(0, np.float32)),
            h.make_node("Resize", [x, f"{tag}_roi", f"{tag}_scales", f"{tag}_sizes"], [f"{tag}_out"],
                        name=f"{tag}_Resize", mode=mode, coordinate_transformation_mode="pytorch_half_pixel"),
        ])
        return f"{tag}_out"

    up = resize("x", "size1", "up", "linear")
    nodes += [
        h.make_node("Conv", [up, "conv1_w"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c1"], ["r1"], name="relu1"),
    ]
    down = resize("r1", "size2", "down", "nearest")
    nodes += [
        h.make_node("Conv", [down, "conv2_w"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        h.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        h.make_node("GlobalAveragePool", ["r2"], ["pooled"], name="pool"),
        h.make_node("Flatten", ["pooled"], ["flat"], name="flatten"),
        h.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="fc", transB=1),
    ]
    graph = h.make_graph(
        nodes, "classifier", [h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 32, 32])],
        [h.make_tensor_value_info("logits", T.FLOAT, ["batch", 10])], weights,
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=7)
    return model, {"x": rng.standard_normal((2, 3, 32, 32)).astype(np.float32)}


def if_untyped_subgraph(rank_varies: bool = False) -> Tuple[onnx.ModelProto, Feeds]:
    """ReduceSum(x) > 0 ? Relu(x @ W) : (x @ W) * 2, with untyped branch outputs, value_info and main output."""
    rng = np.random.default_rng(12)
    then_nodes = [h.make_node("MatMul", ["x", "W"], ["t1"], name="then_mm"),
                  h.make_node("Relu", ["t1"], ["t_out"], name="then_relu")]
    then_init = []
    then_out = "t_out"
    if rank_varies:
        then_nodes.append(h.make_node("Unsqueeze", ["t_out", "axis0"], ["t_out3"], name="then_unsqueeze"))
        then_init.append(nh.from_array(np.array([0], np.int64), "axis0"))
        then_out = "t_out3"
    then_branch = h.make_graph(then_nodes, "then", [], [onnx.ValueInfoProto(name=then_out)], then_init)
    then_branch.output[0].type.CopyFrom(onnx.TypeProto())  # ``type {}``: present, empty
    then_branch.value_info.append(onnx.ValueInfoProto(name="t1"))
    else_branch = h.make_graph(
        [h.make_node("MatMul", ["x", "W"], ["e1"], name="else_mm"), h.make_node("Mul", ["e1", "two"], ["e_out"],
                                                                                 name="else_mul")],
        "else", [], [onnx.ValueInfoProto(name="e_out")], [nh.from_array(np.array(2.0, np.float32), "two")],
    )
    nodes = [
        h.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        h.make_node("Greater", ["s", "zero"], ["cond"], name="positive"),
        h.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_branch, else_branch=else_branch),
    ]
    graph = h.make_graph(
        nodes, "if_untyped", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])], [onnx.ValueInfoProto(name="y")],
        [nh.from_array(rng.standard_normal((4, 4)).astype(np.float32), "W"),
         nh.from_array(np.array(0.0, np.float32), "zero")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
    return model, {"x": rng.standard_normal((2, 4)).astype(np.float32)}


# ------------------------------------------------------------ repair kinds
REPAIR_KINDS = ("no-type", "no-shape", "ir3-initializer", "unsorted", "shape-without-type")


def repairable(kind: str, in_subgraph: bool) -> Tuple[onnx.ModelProto, Feeds]:
    """An MLP (``in_subgraph``: inside both branches of an If) with the defect ``kind`` the repair must mend."""
    rng = np.random.default_rng(13)
    weight = nh.from_array(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3), "W")
    body = [h.make_node("MatMul", ["x", "W"], ["h"], name="mm"), h.make_node("Relu", ["h"], ["y"], name="relu")]
    ir_version, opset = (3, 8) if kind == "ir3-initializer" else (8, 13)
    x = h.make_tensor_value_info("x", T.FLOAT, [2, 4])
    y = h.make_tensor_value_info("y", T.FLOAT, [2, 3])
    if not in_subgraph:
        graph = h.make_graph(body, "g", [x], [y], [weight])
        target = graph
    else:
        def branch(tag: str) -> onnx.GraphProto:
            nodes = [onnx.NodeProto(), onnx.NodeProto()]
            for copy, original in zip(nodes, body):
                copy.CopyFrom(original)
                copy.name = f"{tag}_{original.name}"
                copy.output[0] = f"{tag}_{original.output[0]}"
            nodes[1].input[0] = nodes[0].output[0]
            out = h.make_tensor_value_info(nodes[1].output[0], T.FLOAT, [2, 3])
            return h.make_graph(nodes, tag, [], [out])

        # Both branches read the weight from the main graph: under IR 3 that initializer is
        # the one not listed as an input (onnxruntime refuses one held by a branch itself).
        then_branch, else_branch = branch("then"), branch("else")
        graph = h.make_graph(
            [h.make_node("If", ["flag"], ["y"], name="branch", then_branch=then_branch, else_branch=else_branch)],
            "g", [x, h.make_tensor_value_info("flag", T.BOOL, [])], [y], [weight],
        )
        target = then_branch
    if kind == "no-type":
        target.output[0].ClearField("type")
    elif kind == "no-shape":
        target.output[0].type.tensor_type.ClearField("shape")
    elif kind == "unsorted":
        nodes = list(target.node)
        del target.node[:]
        target.node.extend(reversed(nodes))
    elif kind == "shape-without-type":
        info = target.value_info.add()
        info.name = target.node[0].output[0]
        info.type.tensor_type.shape.dim.add().dim_value = 2
        info.type.tensor_type.shape.dim.add().dim_value = 3
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = ir_version
    feeds = {"x": rng.standard_normal((2, 4)).astype(np.float32)}
    if in_subgraph:
        feeds["flag"] = np.array(True)
    return model, feeds
