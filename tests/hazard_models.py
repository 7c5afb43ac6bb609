"""Tiny float32 models, one per hazard of docs/hazards.md, plus helpers to inspect results.

Each builder returns an ``onnx.ModelProto`` (IR 8, default opset 17 unless the
hazard needs another); ``save`` checks it with the full checker before writing,
so a broken fixture fails here and not inside the converter.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

from bench.graphstats import value_types  # one element-type walk for tests and benches

IR_VERSION = 8  # onnxruntime 1.31 rejects IR > 11
OPSET = 17
LOW_ELEM = {"fp16": T.FLOAT16, "bf16": T.BFLOAT16}
LOW_NP = {"fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16)}


# ---------------------------------------------------------------- plumbing
def model(nodes, inputs, outputs, initializers=(), opset=OPSET, extra_opsets=(), name="hazard"):
    graph = h.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    opsets = [h.make_opsetid("", opset)] + [h.make_opsetid(d, v) for d, v in extra_opsets]
    return h.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)


def save(proto: onnx.ModelProto, folder, name: str, full_check: bool = True) -> str:
    if full_check:
        onnx.checker.check_model(proto, full_check=True)
    path = os.path.join(os.fspath(folder), f"{name}.onnx")
    onnx.save(proto, path)
    return path


def vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def init(name, array, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(array, dtype=dtype), name)


def run(path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``path`` on onnxruntime's CPU provider; returns outputs by name."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds)))


def graphs(proto: onnx.ModelProto) -> list[onnx.GraphProto]:
    """The main graph and every subgraph, outermost first."""
    found = []

    def visit(graph):
        found.append(graph)
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g)
                for sub in attr.graphs:
                    visit(sub)

    visit(proto.graph)
    return found


def typed(path) -> onnx.ModelProto:
    """Load ``path`` and run strict shape inference (fills value_info everywhere)."""
    proto = onnx.load(str(path))
    return onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)


def elem_types(graph: onnx.GraphProto) -> dict[str, int]:
    """Element type of every named value of ``graph`` (inputs, outputs, initializers, value_info)."""
    return value_types(graph)


def node(graph: onnx.GraphProto, name: str) -> onnx.NodeProto:
    """The one node of ``graph`` named ``name``."""
    (found,) = [n for n in graph.node if n.name == name]
    return found


def nodes_of(graph: onnx.GraphProto, op_type: str) -> list[onnx.NodeProto]:
    return [n for n in graph.node if n.op_type == op_type]


def attr(node: onnx.NodeProto, name: str):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return None


def producers(graph: onnx.GraphProto) -> dict[str, onnx.NodeProto]:
    return {out: n for n in graph.node for out in n.output if out}


def cast_chains(proto: onnx.ModelProto) -> list[str]:
    """Names of Casts whose input is produced by another Cast, in any graph."""
    chains = []
    for graph in graphs(proto):
        made = producers(graph)
        for node in nodes_of(graph, "Cast"):
            if node.input[0] in made and made[node.input[0]].op_type == "Cast":
                chains.append(node.name)
    return chains


def bad_casts(typed_proto: onnx.ModelProto) -> list[str]:
    """Casts whose ``to`` disagrees with the type inferred for their output."""
    bad = []
    for graph in graphs(typed_proto):
        types = elem_types(graph)
        for node in nodes_of(graph, "Cast"):
            out_type = types.get(node.output[0])
            if out_type is not None and out_type != attr(node, "to"):
                bad.append(node.name)
    return bad


def initializer(graph: onnx.GraphProto, name: str) -> onnx.TensorProto | None:
    for t in graph.initializer:
        if t.name == name:
            return t
    return None


def const_input(graph: onnx.GraphProto, name: str) -> onnx.TensorProto:
    """The tensor behind ``name``: an initializer or a Constant's ``value``."""
    found = initializer(graph, name)
    if found is not None:
        return found
    for node in graph.node:
        if node.op_type == "Constant" and node.output[0] == name:
            return attr(node, "value")
    raise KeyError(name)


def bits(tensor: onnx.TensorProto) -> np.ndarray:
    """The raw bit patterns of a float32/float16/bfloat16 tensor, as unsigned ints."""
    array = numpy_helper.to_array(tensor)
    width = {T.FLOAT: np.uint32, T.FLOAT16: np.uint16, T.BFLOAT16: np.uint16, T.DOUBLE: np.uint64}
    return np.ascontiguousarray(array).view(width[tensor.data_type]).reshape(-1)


def report_node(report, name: str) -> dict:
    matches = [n for n in report.nodes if n["name"] == name]
    assert len(matches) == 1, f"report names node {name!r} {len(matches)} times"
    return matches[0]


def assert_close(ref: dict[str, np.ndarray], got: dict[str, np.ndarray], rtol=1e-2, atol=1e-2, names: Iterable[str] = ()):
    for name in names or ref:
        np.testing.assert_allclose(got[name].astype(np.float64), ref[name].astype(np.float64), rtol=rtol, atol=atol, equal_nan=True, err_msg=name)


# ---------------------------------------------------------------- hazard 1
def existing_cast() -> onnx.ModelProto:
    """MatMul (LOW) -> Cast(to=FLOAT) -> Relu -> MatMul, plus a Cast(to=FLOAT) of a float32 input."""
    rng = np.random.default_rng(1)
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["h1"], name="mm1"),
        h.make_node("Cast", ["h1"], ["h1f"], to=T.FLOAT, name="cast_mid"),
        h.make_node("Relu", ["h1f"], ["r"], name="relu"),
        h.make_node("Cast", ["x"], ["xf"], to=T.FLOAT, name="cast_in"),
        h.make_node("Add", ["r", "xf"], ["s"], name="add"),
        h.make_node("MatMul", ["s", "w2"], ["y"], name="mm2"),
    ]
    return model(
        nodes,
        [vi("x", T.FLOAT, [2, 4])],
        [vi("y", T.FLOAT, [2, 4])],
        [init("w1", rng.standard_normal((4, 4))), init("w2", rng.standard_normal((4, 4)))],
    )


# ---------------------------------------------------------------- hazard 2
def resize(variant: str) -> onnx.ModelProto:
    """Conv -> Resize(linear) -> Conv; ``scales``: constant float scales, roi omitted;
    ``empty``: roi and scales as empty float tensors, ``sizes`` int64."""
    rng = np.random.default_rng(2)
    inits = [init("wa", rng.standard_normal((2, 2, 1, 1))), init("wb", rng.standard_normal((2, 2, 1, 1)))]
    if variant == "scales":
        resize_inputs = ["a", "", "scales"]
        inits.append(init("scales", [1.0, 1.0, 2.0, 2.0]))
    else:
        resize_inputs = ["a", "roi", "scales", "sizes"]
        inits += [init("roi", np.zeros((0,))), init("scales", np.zeros((0,))), init("sizes", [1, 2, 8, 8], np.int64)]
    nodes = [
        h.make_node("Conv", ["x", "wa"], ["a"], name="conv_a"),
        h.make_node("Resize", resize_inputs, ["r"], mode="linear", name="resize"),
        h.make_node("Conv", ["r", "wb"], ["y"], name="conv_b"),
    ]
    return model(nodes, [vi("x", T.FLOAT, [1, 2, 4, 4])], [vi("y", T.FLOAT, [1, 2, 8, 8])], inits)


# ---------------------------------------------------------------- hazard 3
def shared_initializer() -> onnx.ModelProto:
    """``w`` feeds a MatMul (LOW) and an Add that the test forces HIGH."""
    rng = np.random.default_rng(3)
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        h.make_node("Add", ["m", "w"], ["y"], name="add_keep"),
    ]
    return model(nodes, [vi("x", T.FLOAT, [4, 4])], [vi("y", T.FLOAT, [4, 4])], [init("w", rng.standard_normal((4, 4)))])


# ---------------------------------------------------------------- hazard 4
# The default preset keeps Pow and ReduceSum gray (range guards decide on evidence), so the
# hazard's chain of BLACK nodes is made black here, as its docstring says.
BLACK_CHAIN_MIXLIST = {"white-list": {"to-add": ["Mul"]}, "black-list": {"to-add": ["Pow", "ReduceSum", "Sqrt"]}}
# Hazard 9 needs a float32 op inside a branch: the default preset runs Softmax LOW.
SOFTMAX_BLACK_MIXLIST = {"black-list": {"to-add": ["Softmax"]}}


def black_chain() -> onnx.ModelProto:
    """Pow -> ReduceSum -> Sqrt (all BLACK via the mixlist) -> Mul (WHITE via the mixlist).

    Fed with x in [200, 300]: Pow's output is near 1e5 (beyond fp16) and the
    ReduceSum reaches ~2.5e5, so any LOW tensor between the BLACK nodes is inf.
    """
    nodes = [
        h.make_node("Pow", ["x", "two"], ["p"], name="pow"),
        h.make_node("ReduceSum", ["p", "axes"], ["s"], keepdims=1, name="reduce_sum"),
        h.make_node("Sqrt", ["s"], ["n"], name="sqrt"),
        h.make_node("Mul", ["n", "scale"], ["y"], name="mul"),
    ]
    return model(
        nodes,
        [vi("x", T.FLOAT, [2, 4])],
        [vi("y", T.FLOAT, [2, 1])],
        [init("two", 2.0), init("axes", [1], np.int64), init("scale", [0.01])],
    )


# ---------------------------------------------------------------- hazard 5
LAYERNORM_NODES = ("mean1", "sub", "pow", "mean2", "add_eps", "sqrt", "div")


def decomposed_layernorm() -> onnx.ModelProto:
    """MatMul (identity weight) -> decomposed LayerNorm with eps = 1e-12."""
    nodes = [
        h.make_node("MatMul", ["x", "eye"], ["h"], name="mm"),
        h.make_node("ReduceMean", ["h"], ["mu"], axes=[-1], keepdims=1, name="mean1"),
        h.make_node("Sub", ["h", "mu"], ["d"], name="sub"),
        h.make_node("Pow", ["d", "two"], ["d2"], name="pow"),
        h.make_node("ReduceMean", ["d2"], ["var"], axes=[-1], keepdims=1, name="mean2"),
        h.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
        h.make_node("Sqrt", ["ve"], ["sd"], name="sqrt"),
        h.make_node("Div", ["d", "sd"], ["y"], name="div"),
    ]
    return model(
        nodes,
        [vi("x", T.FLOAT, [2, 8])],
        [vi("y", T.FLOAT, [2, 8])],
        [init("eye", np.eye(8)), init("two", 2.0), init("eps", 1e-12)],
    )


# ---------------------------------------------------------------- hazard 6
def attention(mask_value: float) -> onnx.ModelProto:
    """softmax(q k^T / sqrt(d) + mask) v; mask row 3 is fully masked."""
    mask = np.zeros((4, 4), np.float32)
    mask[np.triu_indices(4, 1)] = mask_value  # causal
    mask[3, :] = mask_value  # one fully masked row
    nodes = [
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="k_t"),
        h.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        h.make_node("Mul", ["scores", "inv_sqrt_d"], ["scaled"], name="scale"),
        h.make_node("Add", ["scaled", "mask"], ["masked"], name="add_mask"),
        h.make_node("Softmax", ["masked"], ["probs"], axis=-1, name="softmax"),
        h.make_node("MatMul", ["probs", "v"], ["y"], name="pv"),
    ]
    return model(
        nodes,
        [vi(n, T.FLOAT, [1, 4, 8]) for n in ("q", "k", "v")],
        [vi("y", T.FLOAT, [1, 4, 8])],
        [init("inv_sqrt_d", 1 / np.sqrt(8.0)), init("mask", mask)],
    )


# ---------------------------------------------------------------- hazard 7
EDGE_VALUES = np.array([3e4, 65504, 7e4, 1e-9, 0.0, -0.0, np.inf, np.nan], np.float32)
# In range for fp16 (kept exactly), with both zeros, inf and nan.
KEEP_VALUES = np.array([3e4, 65504, 0.0, -0.0, np.inf, -np.inf, np.nan, 1.0], np.float32)
# Float32 values exactly halfway between two bfloat16 neighbours (ties) and near them.
BF16_TIES = np.array(
    [0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0xBF808000, 0x477FE000, 0x7F7F7FFF, 0x00018000],
    np.uint32,
).view(np.float32)


def edge_constants() -> onnx.ModelProto:
    """h = x @ I (LOW); y_all = h + EDGE; y_keep = h + KEEP; y_tiny = h + [1e-9]; y_ties = h * TIES."""
    nodes = [
        h.make_node("MatMul", ["x", "eye"], ["h"], name="mm"),
        h.make_node("Add", ["h", "edge"], ["y_all"], name="add_edge"),
        h.make_node("Add", ["h", "keep"], ["y_keep"], name="add_keep"),
        h.make_node("Add", ["h", "tiny"], ["y_tiny"], name="add_tiny"),
        h.make_node("Mul", ["h", "ties"], ["y_ties"], name="mul_ties"),
    ]
    return model(
        nodes,
        [vi("x", T.FLOAT, [1, 8])],
        [vi(n, T.FLOAT, [1, 8]) for n in ("y_all", "y_keep", "y_tiny", "y_ties")],
        [
            init("eye", np.eye(8)),
            init("edge", EDGE_VALUES),
            init("keep", KEEP_VALUES),
            init("tiny", [1e-9]),
            init("ties", BF16_TIES),
        ],
    )


# ---------------------------------------------------------------- hazard 8
def shape_in_float() -> onnx.ModelProto:
    """x [2, 4099]: Shape -> Cast(float) -> Div [2, 0.5] -> Floor -> Cast(int64) -> Reshape -> MatMul."""
    rng = np.random.default_rng(8)
    nodes = [
        h.make_node("Relu", ["x"], ["xr"], name="relu"),
        h.make_node("Shape", ["xr"], ["shp"], name="shape"),
        h.make_node("Cast", ["shp"], ["shp_f"], to=T.FLOAT, name="to_float"),
        h.make_node("Div", ["shp_f", "divisor"], ["q"], name="div"),
        h.make_node("Floor", ["q"], ["fl"], name="floor"),
        h.make_node("Cast", ["fl"], ["shp_i"], to=T.INT64, name="to_int"),
        h.make_node("Reshape", ["xr", "shp_i"], ["flat"], name="reshape"),
        h.make_node("Transpose", ["flat"], ["col"], perm=[1, 0], name="transpose"),
        h.make_node("MatMul", ["w", "col"], ["y"], name="mm"),
    ]
    return model(
        nodes,
        [vi("x", T.FLOAT, [2, 4099])],
        [vi("y", T.FLOAT, [3, 1])],
        [init("divisor", [2.0, 0.5]), init("w", rng.standard_normal((3, 8198)) * 0.01)],
    )


# ---------------------------------------------------------------- hazard 9
def control_flow() -> onnx.ModelProto:
    """If (then: Gemm on captured ``a``; else: Softmax of ``a``) and a Loop whose body
    resizes a captured LOW tensor and adds it to a float32 accumulator."""
    rng = np.random.default_rng(9)
    then_g = h.make_graph(
        [h.make_node("Gemm", ["a", "wg", "bg"], ["t_out"], name="then_gemm")],
        "then_branch",
        [],
        [vi("t_out", T.FLOAT, [2, 4])],
    )
    else_g = h.make_graph(
        [h.make_node("Softmax", ["a"], ["e_out"], axis=-1, name="else_softmax")],
        "else_branch",
        [],
        [vi("e_out", T.FLOAT, [2, 4])],
    )
    body = h.make_graph(
        [
            h.make_node("Resize", ["u", "", "up"], ["ru"], mode="linear", name="body_resize"),
            h.make_node("Add", ["acc_in", "ru"], ["acc_out"], name="body_add"),
            h.make_node("Identity", ["cond_in"], ["cond_out"], name="body_cond"),
        ],
        "loop_body",
        [vi("i", T.INT64, []), vi("cond_in", T.BOOL, []), vi("acc_in", T.FLOAT, [1, 1, 4, 4])],
        [vi("cond_out", T.BOOL, []), vi("acc_out", T.FLOAT, [1, 1, 4, 4])],
    )
    nodes = [
        h.make_node("MatMul", ["x", "w0"], ["a"], name="mm"),
        h.make_node("If", ["c"], ["branch"], then_branch=then_g, else_branch=else_g, name="if"),
        h.make_node("Conv", ["s", "wc"], ["u"], name="conv_u"),
        h.make_node("Loop", ["trips", "", "acc0"], ["acc"], body=body, name="loop"),
    ]
    return model(
        nodes,
        [vi("x", T.FLOAT, [2, 4]), vi("c", T.BOOL, []), vi("s", T.FLOAT, [1, 1, 2, 2]), vi("acc0", T.FLOAT, [1, 1, 4, 4])],
        [vi("branch", T.FLOAT, [2, 4]), vi("acc", T.FLOAT, [1, 1, 4, 4])],
        [
            init("w0", rng.standard_normal((4, 4))),
            init("wg", rng.standard_normal((4, 4))),
            init("bg", rng.standard_normal((4,))),
            init("wc", rng.standard_normal((1, 1, 1, 1))),
            init("up", [1.0, 1.0, 2.0, 2.0]),
            init("trips", 3, np.int64),
        ],
    )


# ---------------------------------------------------------------- hazard 10
def interface() -> onnx.ModelProto:
    """Outputs: ``h`` (also feeds Relu), ``w`` (an initializer), ``yc`` (made by a Cast),
    ``y`` (plain); inputs ``x1`` and ``x2``."""
    rng = np.random.default_rng(10)
    nodes = [
        h.make_node("MatMul", ["x1", "w"], ["h"], name="mm"),
        h.make_node("Relu", ["h"], ["r"], name="relu"),
        h.make_node("Add", ["r", "x2"], ["s"], name="add"),
        h.make_node("MatMul", ["s", "w"], ["y"], name="mm2"),
        h.make_node("Cast", ["s"], ["yc"], to=T.FLOAT, name="cast_out"),
    ]
    return model(
        nodes,
        [vi("x1", T.FLOAT, [2, 4]), vi("x2", T.FLOAT, [2, 4])],
        [vi("h", T.FLOAT, [2, 4]), vi("w", T.FLOAT, [4, 4]), vi("yc", T.FLOAT, [2, 4]), vi("y", T.FLOAT, [2, 4])],
        [init("w", rng.standard_normal((4, 4)))],
    )


# ---------------------------------------------------------------- hazard 12
def dtype_ops() -> onnx.ModelProto:
    """RandomNormalLike (dtype=FLOAT, scale 1e-30: 0.5 exactly) and EyeLike (dtype=FLOAT)
    feeding LOW math, and a float64 path (constant, Mul, Cast to float) that must stay double."""
    rng = np.random.default_rng(12)
    dconst = numpy_helper.from_array(np.array([1e-300, 3.0, 1e300, 0.1, -0.0, 7e4, 1e-9, 65504.0]), "dconst")
    nodes = [
        h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
        h.make_node("RandomNormalLike", ["m"], ["rn"], dtype=T.FLOAT, mean=0.5, scale=1e-30, name="randlike"),
        h.make_node("Add", ["m", "rn"], ["a1"], name="add_rn"),
        h.make_node("EyeLike", ["a1"], ["eye"], dtype=T.FLOAT, name="eyelike"),
        h.make_node("Mul", ["a1", "eye"], ["a2"], name="mul_eye"),
        h.make_node("Constant", [], ["dconst"], value=dconst, name="dconst"),
        h.make_node("Mul", ["xd", "dconst"], ["dm"], name="mul_double"),
        h.make_node("Cast", ["dm"], ["df"], to=T.FLOAT, name="double_to_float"),
        h.make_node("Slice", ["df", "zero", "eight"], ["df8"], name="slice_double"),
        h.make_node("Reshape", ["df8", "shape42"], ["dfr"], name="reshape_double"),
        h.make_node("MatMul", ["a2", "dfr"], ["y"], name="mm_out"),
    ]
    return model(
        nodes,
        [vi("x", T.FLOAT, [4, 4]), vi("xd", T.DOUBLE, [8])],
        [vi("y", T.FLOAT, [4, 2]), vi("dm", T.DOUBLE, [8])],
        [init("w", rng.standard_normal((4, 4))), init("zero", [0], np.int64), init("eight", [8], np.int64)]
        + [init("shape42", [4, 2], np.int64)],
    )


CUSTOM_DOMAIN = "com.example.hazard"


def custom_op() -> onnx.ModelProto:
    """MatMul -> an op of an unknown domain (no schema, no inferred type) -> Relu -> MatMul."""
    rng = np.random.default_rng(13)
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["m"], name="mm1"),
        h.make_node("Mystery", ["m"], ["q"], domain=CUSTOM_DOMAIN, name="mystery"),
        h.make_node("Relu", ["q"], ["r"], name="relu"),
        h.make_node("MatMul", ["r", "w2"], ["y"], name="mm2"),
    ]
    return model(
        nodes,
        [vi("x", T.FLOAT, [2, 4])],
        [vi("y", T.FLOAT, [2, 4])],
        [init("w1", rng.standard_normal((4, 4))), init("w2", rng.standard_normal((4, 4)))],
        extra_opsets=[(CUSTOM_DOMAIN, 1)],
    )


def external_mlp(folder, name="ext") -> str:
    """Two 64x64 MatMuls whose weights live in ``<name>.weights`` beside the model."""
    rng = np.random.default_rng(11)
    nodes = [
        h.make_node("MatMul", ["x", "w1"], ["a"], name="mm1"),
        h.make_node("Relu", ["a"], ["r"], name="relu"),
        h.make_node("MatMul", ["r", "w2"], ["y"], name="mm2"),
    ]
    proto = model(
        nodes,
        [vi("x", T.FLOAT, [2, 64])],
        [vi("y", T.FLOAT, [2, 64])],
        [init("w1", rng.standard_normal((64, 64)) * 0.1), init("w2", rng.standard_normal((64, 64)) * 0.1)],
    )
    path = os.path.join(os.fspath(folder), f"{name}.onnx")
    onnx.save(proto, path, save_as_external_data=True, all_tensors_to_one_file=True, location=f"{name}.weights", size_threshold=0)
    onnx.checker.check_model(path, full_check=True)
    return path


# ---------------------------------------------------------------- layer norms as exporters spell them (issue 29)
NORM_STYLES = ("jax2tf", "keras", "hand")


def spelled_layer_norm(style: str, width: int = 256, gain: float = 30.0, seed: int = 29) -> onnx.ModelProto:
    """A MatMul whose outputs reach ``|x| ~ 3 * gain``, then a layer norm over ``width`` as ``style`` spells it.

    ``jax2tf``: ``Mul(h, h) -> ReduceSum -> truediv -> (- mean^2) + eps -> Sqrt -> Reciprocal`` (tf2onnx's
    Rsqrt); ``keras``: ``ReduceMean``, ``SquaredDifference`` as ``Sub`` and ``Mul``, ``h * inv + (beta - mean * inv)``;
    ``hand``: an RMS norm as ``Pow 2 -> MatMul with ones -> Mul 1/N -> Pow -0.5``. With the default gain a sum of
    ``width`` squares reaches about 2.3e5: past float16's 65504.
    """
    rng = np.random.default_rng(seed)
    n = float(width)
    weights = [init("w", rng.standard_normal((width, width)) * gain / np.sqrt(width)),
               init("gamma", 1.0 + 0.1 * rng.standard_normal(width)), init("beta", 0.1 * rng.standard_normal(width)),
               init("eps", 1e-6), init("n", n), init("axes", [-1], np.int64)]
    nodes = [h.make_node("MatMul", ["x", "w"], ["h"], name="dense")]
    if style == "jax2tf":
        nodes += [
            h.make_node("Mul", ["h", "h"], ["sq"], name="square"),
            h.make_node("ReduceSum", ["sq", "axes"], ["ssq"], keepdims=1, name="sum_sq"),
            h.make_node("Div", ["ssq", "n"], ["msq"], name="truediv"),
            h.make_node("ReduceSum", ["h", "axes"], ["s"], keepdims=1, name="sum"),
            h.make_node("Div", ["s", "n"], ["mean"], name="truediv_1"),
            h.make_node("Mul", ["mean", "mean"], ["mean2"], name="square_1"),
            h.make_node("Sub", ["msq", "mean2"], ["var"], name="sub"),
            h.make_node("Add", ["var", "eps"], ["ve"], name="add"),
            h.make_node("Sqrt", ["ve"], ["sd"], name="rsqrt_sqrt"),
            h.make_node("Reciprocal", ["sd"], ["inv"], name="rsqrt"),
            h.make_node("Sub", ["h", "mean"], ["d"], name="sub_1"),
            h.make_node("Mul", ["d", "inv"], ["z"], name="mul"),
            h.make_node("Mul", ["z", "gamma"], ["zg"], name="mul_1"),
            h.make_node("Add", ["zg", "beta"], ["y"], name="add_1"),
        ]
    elif style == "keras":
        nodes += [
            h.make_node("ReduceMean", ["h"], ["mean"], axes=[-1], keepdims=1, name="moments/mean"),
            h.make_node("Sub", ["h", "mean"], ["d"], name="moments/SquaredDifference_sub"),
            h.make_node("Mul", ["d", "d"], ["sq"], name="moments/SquaredDifference"),
            h.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], keepdims=1, name="moments/variance"),
            h.make_node("Add", ["var", "eps"], ["ve"], name="batchnorm/add"),
            h.make_node("Sqrt", ["ve"], ["sd"], name="batchnorm/Rsqrt_sqrt"),
            h.make_node("Reciprocal", ["sd"], ["r"], name="batchnorm/Rsqrt"),
            h.make_node("Mul", ["r", "gamma"], ["inv"], name="batchnorm/mul"),
            h.make_node("Mul", ["h", "inv"], ["hx"], name="batchnorm/mul_1"),
            h.make_node("Mul", ["mean", "inv"], ["mx"], name="batchnorm/mul_2"),
            h.make_node("Sub", ["beta", "mx"], ["bm"], name="batchnorm/sub"),
            h.make_node("Add", ["hx", "bm"], ["y"], name="batchnorm/add_1"),
        ]
    elif style == "hand":
        weights += [init("two", 2.0), init("ones", np.ones((width, 1))), init("inv_n", 1.0 / n),
                    init("minus_half", -0.5)]
        nodes += [
            h.make_node("Pow", ["h", "two"], ["sq"], name="pow2"),
            h.make_node("MatMul", ["sq", "ones"], ["ssq"], name="sum_by_matmul"),
            h.make_node("Mul", ["ssq", "inv_n"], ["ms"], name="scale"),
            h.make_node("Add", ["ms", "eps"], ["ve"], name="add_eps"),
            h.make_node("Pow", ["ve", "minus_half"], ["inv"], name="rsqrt"),
            h.make_node("Mul", ["h", "inv"], ["z"], name="normalize"),
            h.make_node("Mul", ["z", "gamma"], ["y"], name="gain"),
        ]
    else:
        raise ValueError(style)
    return model(nodes, [vi("x", T.FLOAT, [2, 4, width])], [vi("y", T.FLOAT, [2, 4, width])], weights)
