"""Deployment figures of an ONNX model: Cast nodes, cast traffic, heavy nodes in LOW, weight bytes.

What a GPU deployment of a mixed-precision model pays for, counted the same
way for every converter (issue 20, "Lean on the GPU"):

- ``casts``: Cast nodes in every graph, subgraphs included;
- ``cast_traffic_bytes``: the bytes the Casts move per inference, input plus
  output, ``numel * (input itemsize + output itemsize)`` summed over every
  Cast, at concrete input shapes;
- ``heavy_nodes`` / ``heavy_low``: the compute-heavy nodes (``HEAVY_OPS``) and
  how many of them run LOW (float16/bfloat16);
- ``weight_bytes``: initializers and Constant tensors, from dims and types.

Nothing here reads a weight. A model path is loaded without its external data
(a missing or truncated ``.data`` file does not matter), and tensor sizes come
from onnx shape inference run on a *weight-free copy*: every tensor larger
than ``SMALL_TENSOR_ELEMENTS`` (or stored externally) is replaced by a stub
that keeps its name, dims and type but holds no data, while small inline
tensors stay, since Reshape, Resize, Slice and Expand compute shapes from
their values. The copy's graph inputs get concrete shapes and inference runs
with ``data_prop=True``, so ``Shape -> Gather -> Concat -> Reshape`` chains
resolve. A Cast whose size still cannot be inferred is counted in
``cast_traffic_unknown``, never as 0 bytes.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import os
from collections.abc import Iterator, Mapping, Sequence

import onnx
from onnx import TensorProto

from ampconv.core.heavy_ops import HEAVY_OPS, is_outer_product
from ampconv.tensors.tensorsize import tensor_bytes

# How many of the most expensive Casts ``largest_casts`` names (where a converter's traffic goes).
LARGEST_CASTS = 5
# Tensors up to this many elements stay in the weight-free copy when stored
# inline: shape-computing inputs (Reshape shapes, Resize scales, Slice starts)
# are this small, and keeping them costs at most a few KiB each.
SMALL_TENSOR_ELEMENTS = 1024
# Where a stub tensor "keeps" its data: never read, as shape inference does
# not load external data.
_STUB_LOCATION = "ampconv-figures-weight-free-stub"

FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})
LOW_TYPE_NAMES: Mapping[int, str] = {TensorProto.FLOAT16: "fp16", TensorProto.BFLOAT16: "bf16"}
# Element bits of the types numpy cannot size as onnx packs them (sub-byte types).
# Bodies that run once per iteration: a Cast there is counted for one iteration.
_LOOP_OPS = frozenset({"Loop", "Scan"})
# Nodes that are no computation of their own for ``float_nodes``: a Cast moves a
# value between types, a Constant holds one, a control-flow node runs its bodies.
_NOT_COMPUTE = frozenset({"Cast", "Constant", "If", "Loop", "Scan"})
_DEFAULT_DOMAINS = ("", "ai.onnx")
_MS = "com.microsoft"
# Rounds of "onnx inference, then shape-value folding": each round resolves the
# shape computations that the previous one made computable (usually 2 or 3).
_MAX_INFERENCE_ROUNDS = 12


@dataclasses.dataclass(frozen=True)
class DeployFigures:
    """Deployment figures of one model (see the module docstring for the definitions).

    Attributes:
        casts: Cast nodes in every graph.
        cast_traffic_bytes: bytes moved by the Casts whose size is known, input plus output.
        cast_traffic_unknown: Casts whose element count could not be inferred (not in the bytes).
        casts_in_loop_bodies: Casts inside Loop/Scan bodies; their traffic counts one iteration.
        casts_of_constants: Casts reading an initializer or a Constant (onnxruntime folds them
            at load; they are counted like any other).
        largest_casts: ``(name, bytes)`` of the ``LARGEST_CASTS`` Casts that move the most bytes.
        heavy_nodes, heavy_low, heavy_unknown: heavy nodes (``HEAVY_OPS``), those reading
            float16/bfloat16, and those whose float type could not be inferred.
        heavy_by_op: ``(op_type, low, total)`` per heavy op type.
        heavy_low_names, heavy_other_names: names of the heavy nodes that are LOW, and of
            the others (float32 or unknown); an unnamed node is ``<op_type>#<k>``.
        float_nodes, float_low: nodes with float data (a float input or output of known
            type; Cast, Constant and If/Loop/Scan themselves left out, their bodies
            counted), and those whose first float input (else output) is LOW: the share
            of the model's computation a conversion reached.
        untyped_nodes: nodes of that kind with no tensor of known type (not in ``float_nodes``).
        weight_bytes: bytes of every initializer and Constant tensor, from dims and type.
        low_type: ``"fp16"``, ``"bf16"``, ``"fp16+bf16"`` or None: the LOW types the model holds.
        input_shapes: the concrete shape each graph input was given.
        notes: what was assumed or could not be counted.
    """

    casts: int
    cast_traffic_bytes: int
    cast_traffic_unknown: int
    casts_in_loop_bodies: int
    casts_of_constants: int
    largest_casts: tuple[tuple[str, int], ...]
    heavy_nodes: int
    heavy_low: int
    heavy_unknown: int
    heavy_by_op: tuple[tuple[str, int, int], ...]
    heavy_low_names: tuple[str, ...]
    heavy_other_names: tuple[str, ...]
    float_nodes: int
    float_low: int
    untyped_nodes: int
    weight_bytes: int
    low_type: str | None
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...]
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """The figures as JSON-able plain values (tuples become lists, shapes a dict)."""
        data = dataclasses.asdict(self)
        data["heavy_by_op"] = {op: {"low": low, "total": total} for op, low, total in self.heavy_by_op}
        data["input_shapes"] = {name: list(shape) for name, shape in self.input_shapes}
        return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items()}


def deploy_figures(
    model: onnx.ModelProto | str | os.PathLike,
    dims: Mapping[str, int] | None = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
) -> DeployFigures:
    """Figures of ``model`` (a path or a proto; never modified, no weight read).

    Concrete input shapes for the cast traffic: a fixed dimension stays; a
    symbolic or unknown one takes ``input_shapes[name][axis]`` when that input's
    shape is given (the most specific setting wins, as in ``validate --shape``),
    else ``dims[symbol]``, else 1. Raises ``ValueError`` when a given shape has
    the wrong rank or contradicts a fixed dimension.
    """
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(os.fspath(model), load_external_data=False)
    stub, shapes, symbols = _weight_free_copy(model, dict(dims or {}), dict(input_shapes or {}))
    inferred, notes = _infer(stub, symbols)
    walk = _Walk(symbols)
    walk.visit(stub.graph, inferred.graph, {}, in_loop=False)
    if model.functions:
        notes.append(f"{len(model.functions)} model-local function(s) not looked into")
    if walk.cast_unknown:
        notes.append(f"{walk.cast_unknown} Cast(s) of unknown size, e.g. {', '.join(walk.unknown_examples)}")
    if walk.loop_casts:
        notes.append(f"{walk.loop_casts} Cast(s) inside Loop/Scan bodies counted for one iteration")
    return DeployFigures(
        casts=walk.casts,
        cast_traffic_bytes=walk.cast_bytes,
        cast_traffic_unknown=walk.cast_unknown,
        casts_in_loop_bodies=walk.loop_casts,
        casts_of_constants=walk.constant_casts,
        largest_casts=tuple(sorted(walk.cast_sizes, key=lambda item: -item[1])[:LARGEST_CASTS]),
        heavy_nodes=len(walk.heavy_low_names) + len(walk.heavy_other_names),
        heavy_low=len(walk.heavy_low_names),
        heavy_unknown=walk.heavy_unknown,
        heavy_by_op=tuple((op, low, total) for op, (low, total) in sorted(walk.heavy_by_op.items())),
        heavy_low_names=tuple(walk.heavy_low_names),
        heavy_other_names=tuple(walk.heavy_other_names),
        float_nodes=walk.float_nodes,
        float_low=walk.float_low,
        untyped_nodes=walk.untyped_nodes,
        weight_bytes=weight_bytes(model),
        low_type="+".join(sorted(walk.low_types, key=["fp16", "bf16"].index)) or None,
        input_shapes=tuple(shapes.items()),
        notes=tuple(notes),
    )


def is_heavy(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is one of ``HEAVY_OPS``."""
    domain = "" if node.domain in _DEFAULT_DOMAINS else node.domain
    return node.op_type in HEAVY_OPS.get(domain, ())


def weight_bytes(model: onnx.ModelProto) -> int:
    """Bytes of every initializer (sparse ones: values and indices) and Constant tensor, from dims and types."""
    total = 0
    for graph in iter_graphs(model.graph):
        for tensor in graph.initializer:
            total += tensor_bytes(tensor.data_type, math.prod(tensor.dims)) or 0
        for sparse in graph.sparse_initializer:
            for part in (sparse.values, sparse.indices):
                total += tensor_bytes(part.data_type, math.prod(part.dims)) or 0
        for node in graph.node:
            if node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS:
                total += _constant_bytes(node)
    return total


def iter_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph (If/Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for sub in _subgraphs(node):
            yield from iter_graphs(sub)


# Default-domain ops that hold graphs; other domains' ops are looked at attribute by attribute.
_GRAPH_HOLDERS = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def _subgraphs(node: onnx.NodeProto) -> list[onnx.GraphProto]:
    if node.domain in _DEFAULT_DOMAINS and node.op_type not in _GRAPH_HOLDERS:
        return []  # the common case, without reading the attributes
    graphs = []
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            graphs.append(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            graphs.extend(attr.graphs)
    return graphs


# --- the weight-free copy -------------------------------------------------------------------


def _weight_free_copy(
    model: onnx.ModelProto, dims: dict[str, int], input_shapes: dict[str, Sequence[int]]
) -> tuple[onnx.ModelProto, dict[str, tuple[int, ...]], dict[str, int]]:
    """(stub model with concrete graph inputs, the shape given to each input, symbol -> value).

    Built field by field rather than copied whole, so large inline weights are
    never duplicated in memory.
    """
    stub = onnx.ModelProto(ir_version=model.ir_version, producer_name=model.producer_name)
    stub.opset_import.extend(model.opset_import)
    stub.functions.extend(model.functions)
    stub.graph.CopyFrom(_stub_graph(model.graph))
    symbols = dict(dims)
    shapes: dict[str, tuple[int, ...]] = {}
    initializer_names = {t.name for t in model.graph.initializer}
    for value in stub.graph.input:
        if value.name in initializer_names or not value.type.HasField("tensor_type"):
            continue
        shapes[value.name] = _concretize(value, dims, input_shapes.get(value.name), symbols)
    unknown = set(input_shapes) - set(shapes)
    if unknown:
        raise ValueError(f"input_shapes names no graph input: {', '.join(sorted(unknown))}")
    for graph in iter_graphs(stub.graph):
        _relax_declared_shapes(graph, symbols, skip=set(shapes) if graph is stub.graph else set())
    return stub, shapes, symbols


def _relax_declared_shapes(graph: onnx.GraphProto, symbols: Mapping[str, int], skip: set[str]) -> None:
    """Put the concrete sizes into the shapes the model declares, and forget the symbols that have none.

    A declared ``unk__0`` (an earlier inference's name for "some size") would
    otherwise win over the size inference finds now, as onnx keeps a declared
    symbol when it merges; an unnamed dimension takes the inferred size.
    """
    for info in list(graph.value_info) + list(graph.output) + list(graph.input):
        if info.name in skip or not info.type.tensor_type.HasField("shape"):
            continue
        for dim in info.type.tensor_type.shape.dim:
            if dim.HasField("dim_param"):
                size = symbols.get(dim.dim_param)
                dim.Clear()
                if size is not None:
                    dim.dim_value = size


def _stub_graph(graph: onnx.GraphProto) -> onnx.GraphProto:
    """A copy of ``graph`` whose large tensors (initializers, Constant values, subgraphs') are stubs."""
    stub = onnx.GraphProto(name=graph.name)
    stub.input.extend(graph.input)
    stub.output.extend(graph.output)
    # Declared types of values that onnx infers anyway are left out: a converter
    # may leave a stale one (a float32 declaration on a tensor it made float16),
    # and onnx then gives up on the node instead of inferring it. Only the
    # outputs of ops onnx has no schema for (com.microsoft) keep theirs.
    inferable = {out for node in graph.node if node.domain in _DEFAULT_DOMAINS for out in node.output}
    stub.value_info.extend(v for v in graph.value_info if v.name not in inferable)
    stub.initializer.extend(_stub_tensor(t) for t in graph.initializer)
    for sparse in graph.sparse_initializer:
        dense = TensorProto(name=sparse.values.name, data_type=sparse.values.data_type)
        dense.dims.extend(sparse.dims)
        stub.initializer.append(_stub_tensor(dense, force=True))
    stub.node.extend(_stub_node(n) for n in graph.node)
    return stub


def _stub_node(node: onnx.NodeProto) -> onnx.NodeProto:
    """``node`` itself when it holds no tensor or graph attribute, else a copy with those stubbed."""
    heavy_attrs = (onnx.AttributeProto.TENSOR, onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS,
                   onnx.AttributeProto.SPARSE_TENSOR)
    if not any(a.type in heavy_attrs for a in node.attribute):
        return node
    stub = onnx.NodeProto(op_type=node.op_type, domain=node.domain, name=node.name, overload=node.overload)
    stub.input.extend(node.input)
    stub.output.extend(node.output)
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.TENSOR:
            new = onnx.AttributeProto(name=attr.name, type=attr.type)
            new.t.CopyFrom(_stub_tensor(attr.t))
        elif attr.type == onnx.AttributeProto.GRAPH:
            new = onnx.AttributeProto(name=attr.name, type=attr.type)
            new.g.CopyFrom(_stub_graph(attr.g))
        elif attr.type == onnx.AttributeProto.GRAPHS:
            new = onnx.AttributeProto(name=attr.name, type=attr.type)
            new.graphs.extend(_stub_graph(g) for g in attr.graphs)
        elif attr.type == onnx.AttributeProto.SPARSE_TENSOR:
            # A sparse Constant: a dense stub of its dims keeps the output's type and shape.
            new = onnx.AttributeProto(name="value", type=onnx.AttributeProto.TENSOR)
            new.t.CopyFrom(_stub_tensor(TensorProto(data_type=attr.sparse_tensor.values.data_type,
                                                    dims=attr.sparse_tensor.dims), force=True))
        else:
            new = attr
        stub.attribute.append(new)
    return stub


def _stub_tensor(tensor: TensorProto, force: bool = False) -> TensorProto:
    """``tensor`` when small and inline, else a data-free stub of the same name, dims and type."""
    external = tensor.data_location == TensorProto.EXTERNAL
    if not force and not external and math.prod(tensor.dims) <= SMALL_TENSOR_ELEMENTS:
        return tensor
    stub = TensorProto(name=tensor.name, data_type=tensor.data_type, data_location=TensorProto.EXTERNAL)
    stub.dims.extend(tensor.dims)
    # Shape inference never loads external data, and refuses (for that node only,
    # in non-strict mode) to read values from it: a stub can never be mistaken for data.
    stub.external_data.add(key="location", value=_STUB_LOCATION)
    return stub


def _concretize(value: onnx.ValueInfoProto, dims: Mapping[str, int], given: Sequence[int] | None,
                symbols: dict[str, int]) -> tuple[int, ...]:
    """Give graph input ``value`` concrete dims in place; record its symbols' values in ``symbols``."""
    tensor_type = value.type.tensor_type
    declared = list(tensor_type.shape.dim) if tensor_type.HasField("shape") else None
    if given is not None and declared is not None and len(given) != len(declared):
        raise ValueError(f"input {value.name!r}: shape {list(given)} has rank {len(given)}, "
                         f"the model declares rank {len(declared)}")
    if declared is None:
        if given is None:
            return ()  # rank unknown: leave it so; its consumers' sizes stay unknown
        declared = [onnx.TensorShapeProto.Dimension() for _ in given]
    shape = []
    for axis, dim in enumerate(declared):
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            size = dim.dim_value
            if given is not None and given[axis] != size:
                raise ValueError(f"input {value.name!r}: axis {axis} is fixed at {size}, given {given[axis]}")
        elif given is not None:
            size = int(given[axis])
        else:
            size = int(dims.get(dim.dim_param, 1)) if dim.dim_param else 1
        if dim.dim_param:
            symbols.setdefault(dim.dim_param, size)
        shape.append(size)
    tensor_type.ClearField("shape")
    tensor_type.shape.SetInParent()
    for size in shape:
        tensor_type.shape.dim.add(dim_value=size)
    return tuple(shape)


# --- inference --------------------------------------------------------------------------------


def _infer(stub: onnx.ModelProto, symbols: Mapping[str, int]) -> tuple[onnx.ModelProto, list[str]]:
    """Infer the stub's types and shapes at the concrete input shapes.

    onnx shape inference with data propagation runs on a copy in which the
    com.microsoft ops are replaced by default-domain proxies (``_proxies``),
    then the Cast rule and shape-value folding; in rounds until nothing changes.
    Returns the inferred copy: its values carry the stub's names, but its nodes
    differ (proxies, folded Constants), so only its types are to be read.
    Never raises: a model onnx cannot infer keeps the types it was written
    with, and a note says so.
    """
    notes: list[str] = []
    current = _with_proxies(stub)
    for _ in range(_MAX_INFERENCE_ROUNDS):
        try:
            current = onnx.shape_inference.infer_shapes(current, check_type=False, strict_mode=False,
                                                        data_prop=True)
        except Exception as exc:  # noqa: BLE001 -- inference failing is a figure's caveat, not an error
            notes.append(f"onnx shape inference failed ({type(exc).__name__}: {str(exc)[:200]}); "
                         "types and shapes as written")
            break
        if all(_all_shaped(g) for g in iter_graphs(current.graph)):
            break
        # Both run on every round (no short-circuit): each can unlock the other.
        changed = _apply_cast_rule(current)
        changed = _fold_shape_values(current) or changed
        if not changed:
            break
        # A size this round could not infer got a fresh ``unk__N`` symbol, which the
        # next round would keep over the size it can infer then: forget them.
        for graph in iter_graphs(current.graph):
            _relax_declared_shapes(graph, symbols, skip=set())
    return current, notes


# com.microsoft ops (and onnxruntime's default-domain SimplifiedLayerNormalization)
# whose outputs at these positions have the type and shape of input 0.
_LIKE_INPUT0: Mapping[str, tuple[int, ...]] = {
    "SkipLayerNormalization": (0, 3), "SkipSimplifiedLayerNormalization": (0, 3), "LayerNormalization": (0,),
    "SimplifiedLayerNormalization": (0,), "BiasGelu": (0,), "FastGelu": (0,), "Gelu": (0,), "QuickGelu": (0,),
    "BiasAdd": (0,), "BiasDropout": (0,), "RotaryEmbedding": (0,), "GroupNorm": (0,), "SkipGroupNorm": (0, 1),
    "RMSNormalization": (0,), "BiasSoftmax": (0,),
}


def _with_proxies(stub: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of the stub in which each com.microsoft op onnx cannot infer is replaced by
    default-domain nodes that produce its outputs with the same types and shapes.

    One onnx inference then flows through a chain of fused ops (SkipLayerNormalization,
    MatMul, BiasGelu, MatMul, ...) instead of stopping at the first one.
    """
    if all(_is_sorted(g.node) and not any(n.domain == _MS or n.op_type in _LIKE_INPUT0 for n in g.node)
           for g in iter_graphs(stub.graph)):
        return stub  # nothing to replace (inference returns a new model: the stub stays as it is)
    model = onnx.ModelProto()
    model.CopyFrom(stub)
    for graph in iter_graphs(model.graph):
        dims = {t.name: list(t.dims) for t in graph.initializer}
        nodes = []
        for node in graph.node:
            proxies = _proxies(node, dims) if node.domain == _MS or node.op_type in _LIKE_INPUT0 else None
            nodes.extend(proxies if proxies is not None else [node])
        if not _is_sorted(nodes):
            nodes = _topological(nodes)
        del graph.node[:]
        graph.node.extend(nodes)
    return model


def _is_sorted(nodes) -> bool:
    """Whether no node reads a value that a later node of the same graph produces."""
    later = {out for node in nodes for out in node.output}
    for node in nodes:
        if any(name in later for name in _reads(node)):
            return False
        later.difference_update(node.output)
    return True


def _topological(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """``nodes`` in an order where each comes after the producers of its inputs (stable; a cycle keeps its order).

    onnx inference visits nodes in file order, while onnxruntime sorts them:
    a converter may append a graph-input Cast after its consumers.
    """
    produced = {out: i for i, node in enumerate(nodes) for out in node.output if out}
    waiting_on = [0] * len(nodes)
    consumers: list[list[int]] = [[] for _ in nodes]
    for i, node in enumerate(nodes):
        producers = {produced[name] for name in _reads(node) if name in produced and produced[name] != i}
        waiting_on[i] = len(producers)
        for p in producers:
            consumers[p].append(i)
    ready = [i for i, count in enumerate(waiting_on) if count == 0]
    order: list[int] = []
    heapq.heapify(ready)
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for c in consumers[i]:
            waiting_on[c] -= 1
            if waiting_on[c] == 0:
                heapq.heappush(ready, c)
    seen = set(order)
    order += [i for i in range(len(nodes)) if i not in seen]
    return [nodes[i] for i in order]


def _reads(node: onnx.NodeProto) -> set[str]:
    """Names ``node`` reads: its inputs and, for If/Loop/Scan, every name its bodies read."""
    names = {name for name in node.input if name}
    for graph in _subgraphs(node):
        for inner in graph.node:
            names |= _reads(inner)
    return names


def _proxies(node: onnx.NodeProto, dims: Mapping[str, list[int]]) -> list[onnx.NodeProto] | None:
    """Default-domain nodes computing ``node``'s outputs' types and shapes, or None (unknown op)."""
    make = onnx.helper.make_node
    inputs, outputs = list(node.input), list(node.output)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    if node.op_type in _LIKE_INPUT0 and inputs:
        return [make("Identity", [inputs[0]], [outputs[i]]) for i in _LIKE_INPUT0[node.op_type]
                if i < len(outputs) and outputs[i]]
    if node.op_type == "Attention" and len(inputs) > 1 and len(dims.get(inputs[1], ())) == 2:
        # (batch, sequence, v_hidden): the input's shape when v_hidden is the input's width.
        width, packed = dims[inputs[1]]
        v_hidden = attrs["qkv_hidden_sizes"][2] if "qkv_hidden_sizes" in attrs else packed // 3
        return [make("Identity", [inputs[0]], [outputs[0]])] if v_hidden == width else None
    if node.op_type == "EmbedLayerNormalization" and len(inputs) > 2:
        # (batch, sequence, hidden) of the word table's type: what a Gather of the ids gives.
        made = [make("Gather", [inputs[2], inputs[0]], [outputs[0]])]
        if len(outputs) > 2 and outputs[2]:
            made.append(make("Identity", [outputs[0]], [outputs[2]]))
        return made
    if node.op_type == "GroupQueryAttention" and inputs and outputs:
        return _gqa_proxies(node, inputs, outputs, attrs)
    if node.op_type == "FusedMatMul" and not any(attrs.get(k) for k in ("transA", "transB", "transBatchA",
                                                                          "transBatchB")):
        return [make("MatMul", inputs[:2], outputs[:1])]
    if node.op_type == "FusedGemm":
        keep = {k: v for k, v in attrs.items() if k in ("transA", "transB")}
        return [make("Gemm", inputs[:3], outputs[:1], **keep)]
    if node.op_type == "FusedConv":
        keep = {k: v for k, v in attrs.items() if k in ("auto_pad", "dilations", "group", "kernel_shape", "pads",
                                                         "strides")}
        return [make("Conv", inputs[:3], outputs[:1], **keep)]
    return None


def _gqa_proxies(node: onnx.NodeProto, inputs: list[str], outputs: list[str], attrs: dict) -> list[onnx.NodeProto]:
    """GroupQueryAttention's outputs by shape: (batch, seq, heads x head) and each present = past + the new keys.

    The new keys are read off the key input (or the packed query) reshaped to
    heads; the present caches are the past ones concatenated with them along
    the sequence axis, so a present's length is the past's + seq whatever
    symbol the model names it by (gemma-2's ``total_sliding_length``).
    """
    make = onnx.helper.make_node
    heads, kv_heads = int(attrs["num_heads"]), int(attrs["kv_num_heads"])
    packed = len(inputs) < 2 or not inputs[1]
    tag = f"{outputs[0] or node.name}__gqa"

    def const(name: str, values: list[int]) -> onnx.NodeProto:
        return make("Constant", [], [f"{tag}_{name}"], value=onnx.helper.make_tensor(
            f"{tag}_{name}", onnx.TensorProto.INT64, [len(values)], values))

    query_heads = heads + 2 * kv_heads if packed else heads
    made = [const("qshape", [0, 0, query_heads, -1]), const("kshape", [0, 0, kv_heads if not packed else query_heads, -1]),
            const("zero", [0]), const("heads", [heads]), const("kv", [kv_heads]), const("two", [2]),
            const("one", [1]), const("flat", [0, 0, -1]),
            make("Reshape", [inputs[0], f"{tag}_qshape"], [f"{tag}_q4"]),
            make("Slice", [f"{tag}_q4", f"{tag}_zero", f"{tag}_heads", f"{tag}_two"], [f"{tag}_q"]),
            make("Reshape", [inputs[0] if packed else inputs[1], f"{tag}_kshape"], [f"{tag}_k4"]),
            make("Transpose", [f"{tag}_k4"], [f"{tag}_kt"], perm=[0, 2, 1, 3]),
            make("Slice", [f"{tag}_kt", f"{tag}_zero", f"{tag}_kv", f"{tag}_one"], [f"{tag}_k"])]
    if outputs[0]:
        made.append(make("Reshape", [f"{tag}_q", f"{tag}_flat"], [outputs[0]]))
    for out, past in ((1, 3), (2, 4)):
        if out < len(outputs) and outputs[out]:
            if past < len(inputs) and inputs[past]:
                made.append(make("Concat", [inputs[past], f"{tag}_k"], [outputs[out]], axis=2))
            else:
                made.append(make("Identity", [f"{tag}_k"], [outputs[out]]))
    return made


def _apply_cast_rule(model: onnx.ModelProto) -> bool:
    """Give a Cast whose inference failed its input's shape (type ``to``); True if any was set.

    A converter's output may declare a graph output type that contradicts the
    Cast's ``to``; onnx then gives up on the node, though its shape is its input's.
    """
    added = False
    for graph in iter_graphs(model.graph):
        known = _value_types(graph, {})
        for node in graph.node:
            if node.op_type != "Cast" or node.domain not in _DEFAULT_DOMAINS or not node.input or not node.output:
                continue
            source, old = known.get(node.input[0]), known.get(node.output[0])
            if source is None or not _fully_shaped(source) or (old is not None and _fully_shaped(old)):
                continue
            info = next((v for v in list(graph.value_info) + list(graph.output) if v.name == node.output[0]), None)
            info = info if info is not None else graph.value_info.add(name=node.output[0])
            info.type.CopyFrom(source)
            info.type.tensor_type.elem_type = next((a.i for a in node.attribute if a.name == "to"),
                                                   source.tensor_type.elem_type)
            known[node.output[0]] = info.type
            added = True
    return added


def _all_shaped(graph: onnx.GraphProto) -> bool:
    """Whether every node output of ``graph`` has a type with a concrete shape (nothing left to infer)."""
    shaped = {v.name for v in list(graph.value_info) + list(graph.output)
              if v.type.HasField("tensor_type") and _fully_shaped(v.type)}
    return all(out in shaped for node in graph.node for out in node.output if out)


def _fully_shaped(type_proto: onnx.TypeProto) -> bool:
    """Whether every dimension of a tensor type is a number."""
    tensor = type_proto.tensor_type
    return tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim)


def _value_types(graph: onnx.GraphProto, outer: Mapping[str, onnx.TypeProto]) -> dict[str, onnx.TypeProto]:
    """Name -> TypeProto of every value of ``graph`` known by type (inferred or declared), on top of ``outer``."""
    types = dict(outer)
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        if info.type.HasField("tensor_type") and info.type.tensor_type.elem_type:
            types[info.name] = info.type
    for tensor in graph.initializer:
        types[tensor.name] = _tensor_type(tensor.data_type, tensor.dims)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in _DEFAULT_DOMAINS and node.output:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR:
                    types[node.output[0]] = _tensor_type(attr.t.data_type, attr.t.dims)
    return types


def _tensor_type(data_type: int, dims: Sequence[int]) -> onnx.TypeProto:
    out = onnx.TypeProto()
    out.tensor_type.elem_type = data_type
    out.tensor_type.shape.SetInParent()
    for size in dims:
        out.tensor_type.shape.dim.add(dim_value=size)
    return out


# --- shape-value folding --------------------------------------------------------------------
#
# onnx's data propagation carries Shape values through a few ops, but Slice,
# Range, Expand and others read their shape-giving inputs only from
# initializers: an export's ``Shape -> Gather -> Unsqueeze -> Slice`` chain
# (BERT's position ids) leaves every size after it unknown. At concrete input
# shapes such chains are small integer computations: they are computed here
# with numpy and each folded node becomes a Constant, so the next inference
# round sees the values. A Cast is computed but never replaced: it is counted.


def _fold_shape_values(model: onnx.ModelProto) -> bool:
    """Fold the small computations with known inputs in every graph; True if any node was replaced."""
    changed = False
    for graph in iter_graphs(model.graph):
        changed = _fold_graph(graph) or changed
    return changed


def _fold_graph(graph: onnx.GraphProto) -> bool:
    types = _value_types(graph, {})
    values = {t.name: _small_array(t) for t in graph.initializer}
    values = {name: v for name, v in values.items() if v is not None}
    changed = False
    for index, node in enumerate(graph.node):
        if node.domain not in _DEFAULT_DOMAINS:
            continue
        if node.op_type == "Constant":
            value = _constant_array(node)
            if value is not None and node.output:
                values[node.output[0]] = value
            continue
        result = _fold_node(node, values, types)
        if result is None:
            continue
        values[node.output[0]] = result
        if node.op_type != "Cast":
            constant = onnx.helper.make_node("Constant", [], [node.output[0]], name=node.name,
                                             value=onnx.numpy_helper.from_array(result, node.output[0]))
            graph.node[index].CopyFrom(constant)
            changed = True
    return changed


def _fold_node(node: onnx.NodeProto, values: Mapping[str, object], types: Mapping[str, onnx.TypeProto]):
    """The value of ``node``'s single output when it is small and computable from known values, else None."""
    import numpy as np

    fold = _FOLDERS.get(node.op_type)
    if fold is None or len(node.output) != 1:
        return None
    if node.op_type in ("Shape", "Size"):
        source = types.get(node.input[0]) if node.input else None
        if source is None or not _fully_shaped(source):
            return None
        args = [np.array([d.dim_value for d in source.tensor_type.shape.dim], dtype=np.int64)]
    else:
        args = [values.get(name) if name else None for name in node.input]
        if not args or args[0] is None or any(a is None for a, name in zip(args, node.input) if name):
            return None
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    try:
        with np.errstate(all="ignore"):
            result = np.asarray(fold(args, attrs))
    except Exception:  # noqa: BLE001 -- a value that cannot be computed stays unknown, as before
        return None
    if result.size > SMALL_TENSOR_ELEMENTS or result.dtype == object:
        return None
    return result


def _small_array(tensor: TensorProto):
    """The value of a small inline tensor (never a stub or external data), else None."""
    if tensor.data_location == TensorProto.EXTERNAL or math.prod(tensor.dims) > SMALL_TENSOR_ELEMENTS:
        return None
    if tensor.data_type == TensorProto.STRING:
        return None
    try:
        return onnx.numpy_helper.to_array(tensor)
    except Exception:  # noqa: BLE001 -- an unreadable constant is simply not known
        return None


def _constant_array(node: onnx.NodeProto):
    """The value of a small Constant node (tensor or list attribute), else None."""
    import numpy as np

    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.TENSOR:
            return _small_array(attr.t)
        if attr.name in ("value_int", "value_ints"):
            return np.array(onnx.helper.get_attribute_value(attr), dtype=np.int64)
        if attr.name in ("value_float", "value_floats"):
            return np.array(onnx.helper.get_attribute_value(attr), dtype=np.float32)
    return None


def _axes(args, attrs, position: int):
    """Axes from input ``position`` (newer opsets) or the ``axes`` attribute (older)."""
    if len(args) > position and args[position] is not None:
        return [int(a) for a in args[position]]
    return list(attrs.get("axes", []))


def _shape_of(args, attrs):
    import numpy as np

    dims = args[0]
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return np.asarray(dims[start:end], dtype=np.int64)


def _unsqueeze(args, attrs):
    import numpy as np

    data = args[0]
    rank = data.ndim + len(_axes(args, attrs, 1))
    for axis in sorted(a % rank for a in _axes(args, attrs, 1)):
        data = np.expand_dims(data, axis)
    return data


def _squeeze(args, attrs):
    import numpy as np

    axes = _axes(args, attrs, 1)
    return np.squeeze(args[0], axis=tuple(axes) if axes else None)


def _slice(args, attrs):
    data = args[0]
    if len(args) > 1:  # opset >= 10: starts, ends, axes, steps are inputs
        starts, ends = args[1], args[2]
        axes = args[3] if len(args) > 3 and args[3] is not None else range(len(starts))
        steps = args[4] if len(args) > 4 and args[4] is not None else [1] * len(starts)
    else:
        starts, ends = attrs["starts"], attrs["ends"]
        axes, steps = attrs.get("axes", range(len(starts))), [1] * len(starts)
    index = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps):
        index[int(axis)] = slice(int(start), int(end), int(step))  # Python clamps like ONNX
    return data[tuple(index)]


def _reshape(args, attrs):
    shape = [int(d) for d in args[1]]
    if not attrs.get("allowzero", 0):
        shape = [args[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return args[0].reshape(shape)


def _divide(args, attrs):
    import numpy as np

    a, b = args
    if np.issubdtype(a.dtype, np.integer):
        return (np.trunc(a / b)).astype(a.dtype)  # ONNX integer Div truncates toward zero
    return a / b


def _cast(args, attrs):
    return args[0].astype(onnx.helper.tensor_dtype_to_np_dtype(attrs["to"]))


def _constant_of_shape(args, attrs):
    import numpy as np

    value = attrs.get("value")
    fill = onnx.numpy_helper.to_array(value) if value is not None else np.zeros(1, np.float32)
    return np.full([int(d) for d in args[0]], fill.reshape(-1)[0], dtype=fill.dtype)


def _expand(args, attrs):
    import numpy as np

    shape = np.broadcast_shapes(args[0].shape, tuple(int(d) for d in args[1]))
    return np.broadcast_to(args[0], shape).copy()


def _binary(function):
    return lambda args, attrs: function(args[0], args[1]).astype(args[0].dtype)


def _numpy():
    import numpy as np

    return np


def _folders():
    np = _numpy()
    return {
        "Identity": lambda args, attrs: args[0],
        "Shape": _shape_of,
        "Size": lambda args, attrs: np.array(int(np.prod(args[0])), dtype=np.int64),
        "Gather": lambda args, attrs: np.take(args[0], args[1], axis=attrs.get("axis", 0)),
        "Unsqueeze": _unsqueeze,
        "Squeeze": _squeeze,
        "Concat": lambda args, attrs: np.concatenate(args, axis=attrs["axis"]),
        "Slice": _slice,
        "Reshape": _reshape,
        "Add": _binary(np.add),
        "Sub": _binary(np.subtract),
        "Mul": _binary(np.multiply),
        "Div": _divide,
        "Neg": lambda args, attrs: -args[0],
        "Abs": lambda args, attrs: np.abs(args[0]),
        "Max": lambda args, attrs: np.maximum.reduce(args),
        "Min": lambda args, attrs: np.minimum.reduce(args),
        "Cast": _cast,
        "Equal": lambda args, attrs: np.equal(args[0], args[1]),
        "Less": lambda args, attrs: np.less(args[0], args[1]),
        "Greater": lambda args, attrs: np.greater(args[0], args[1]),
        "Not": lambda args, attrs: np.logical_not(args[0]),
        "Where": lambda args, attrs: np.where(args[0], args[1], args[2]),
        "Range": lambda args, attrs: np.arange(args[0], args[1], args[2]).astype(args[0].dtype),
        "ConstantOfShape": _constant_of_shape,
        "Expand": _expand,
    }


class _LazyFolders(dict):
    """The folder table, built on first use (numpy is imported only when a model needs folding)."""

    def get(self, key, default=None):
        if not self:
            self.update(_folders())
        return super().get(key, default)


_FOLDERS = _LazyFolders()


# --- counting ---------------------------------------------------------------------------------


def _last_dim(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> int | None:
    """A MatMul's reduction length (A's last dimension, or B's next to last) when inference fixed it."""
    for index, axis in ((0, -1), (1, -2)):
        kind = types.get(node.input[index]) if len(node.input) > index else None
        if kind is None or not kind.HasField("tensor_type") or not kind.tensor_type.HasField("shape"):
            continue
        dims = kind.tensor_type.shape.dim
        if len(dims) >= -axis and dims[axis].HasField("dim_value"):
            return dims[axis].dim_value
    return None


class _Walk:
    """One pass over the inferred stub: counts casts, their traffic and the heavy nodes."""

    def __init__(self, symbols: Mapping[str, int]) -> None:
        self.symbols = symbols
        self.casts = self.cast_bytes = self.cast_unknown = self.loop_casts = self.constant_casts = 0
        self.unknown_examples: list[str] = []
        self.cast_sizes: list[tuple[str, int]] = []
        self.heavy_low_names: list[str] = []
        self.heavy_other_names: list[str] = []
        self.heavy_unknown = 0
        self.heavy_by_op: dict[str, list[int]] = {}
        self.low_types: set[str] = set()
        self.float_nodes = self.float_low = self.untyped_nodes = 0
        self._unnamed = 0

    def visit(self, graph: onnx.GraphProto, inferred: onnx.GraphProto, outer: Mapping[str, onnx.TypeProto],
              in_loop: bool) -> None:
        """Count ``graph`` and, recursively, its subgraphs (which see ``graph``'s values).

        The nodes are ``graph``'s (the stub as written); the types come from
        ``inferred``, its inferred copy, where folded nodes became Constants.
        """
        types = _value_types(inferred, outer)
        constants = {t.name for t in graph.initializer} | {
            n.output[0] for n in graph.node if n.op_type == "Constant" and n.output}
        self._low_types(inferred)
        # Nodes holding subgraphs are never proxied or folded: pair them by their outputs.
        inferred_holders = {tuple(n.output): n for n in inferred.node if _subgraphs(n)}
        for node in graph.node:
            if node.op_type == "Cast" and node.domain in _DEFAULT_DOMAINS:
                self._cast(node, types, in_loop, constants)
            elif is_heavy(node) and not is_outer_product(node.op_type, node.domain, _last_dim(node, types)):
                self._heavy(node, types)
            self._float_node(node, types)
            holder = inferred_holders.get(tuple(node.output))
            for sub, inferred_sub in zip(_subgraphs(node), _subgraphs(holder) if holder is not None else []):
                self.visit(sub, inferred_sub, types, in_loop or node.op_type in _LOOP_OPS)

    def _cast(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto], in_loop: bool,
              constants: set[str]) -> None:
        self.casts += 1
        self.loop_casts += in_loop
        self.constant_casts += bool(node.input) and node.input[0] in constants
        to = next((a.i for a in node.attribute if a.name == "to"), TensorProto.UNDEFINED)
        source = types.get(node.input[0]) if node.input else None
        target = types.get(node.output[0]) if node.output else None
        # A Cast keeps its input's shape: whichever side inference reached gives it.
        numel = _numel(source, self.symbols)
        if numel is None:
            numel = _numel(target, self.symbols)
        in_bytes = tensor_bytes(source.tensor_type.elem_type, numel or 0) if source is not None else None
        out_bytes = tensor_bytes(to, numel or 0)
        if numel is None or in_bytes is None or out_bytes is None:
            self.cast_unknown += 1
            if len(self.unknown_examples) < 3:
                self.unknown_examples.append(node.name or node.output[0])
            return
        self.cast_bytes += in_bytes + out_bytes
        self.cast_sizes.append((node.name or node.output[0], in_bytes + out_bytes))

    def _heavy(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> None:
        elem = _first_float_type(node, types)
        low = elem in LOW_TYPE_NAMES
        if elem is None:
            self.heavy_unknown += 1
        if not node.name:
            self._unnamed += 1
        name = node.name or f"{node.op_type}#{self._unnamed}"
        (self.heavy_low_names if low else self.heavy_other_names).append(name)
        counts = self.heavy_by_op.setdefault(node.op_type, [0, 0])
        counts[0] += low
        counts[1] += 1

    def _float_node(self, node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> None:
        if node.op_type in _NOT_COMPUTE and node.domain in _DEFAULT_DOMAINS:
            return
        if not any(name in types for name in list(node.input) + list(node.output) if name):
            self.untyped_nodes += 1
            return
        elem = _first_float_type(node, types)
        if elem is not None:
            self.float_nodes += 1
            self.float_low += elem in LOW_TYPE_NAMES

    def _low_types(self, graph: onnx.GraphProto) -> None:
        """Note which LOW types the graph holds: in values, initializers or Cast targets."""
        codes = {t.data_type for t in graph.initializer}
        codes |= {v.type.tensor_type.elem_type for v in list(graph.input) + list(graph.value_info)
                  + list(graph.output) if v.type.HasField("tensor_type")}
        codes |= {a.i for n in graph.node if n.op_type == "Cast" for a in n.attribute if a.name == "to"}
        self.low_types |= {LOW_TYPE_NAMES[c] for c in codes if c in LOW_TYPE_NAMES}


def _first_float_type(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> int | None:
    """Element type of the first float input of ``node`` whose type is known, else of its first float output."""
    for names in (node.input, node.output):
        for name in names:
            type_proto = types.get(name) if name else None
            if type_proto is not None and type_proto.tensor_type.elem_type in FLOAT_TYPES:
                return type_proto.tensor_type.elem_type
    return None


def _numel(type_proto: onnx.TypeProto | None, symbols: Mapping[str, int]) -> int | None:
    """Element count of a tensor type at the concrete symbol values; None when a dim is unknown."""
    if type_proto is None or not type_proto.tensor_type.HasField("shape"):
        return None
    total = 1
    for dim in type_proto.tensor_type.shape.dim:
        if dim.HasField("dim_value"):
            total *= dim.dim_value
        elif dim.dim_param in symbols:
            total *= symbols[dim.dim_param]
        else:
            return None
    return total


# Bytes per element of a Constant's list and scalar attributes (float32, int64).
_ATTRIBUTE_ITEM_BYTES = {"value_float": 4, "value_floats": 4, "value_int": 8, "value_ints": 8}


def _constant_bytes(node: onnx.NodeProto) -> int:
    """The data bytes of one Constant node, whichever attribute holds its value (strings count 0)."""
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.TENSOR:
            return tensor_bytes(attr.t.data_type, math.prod(attr.t.dims)) or 0
        if attr.type == onnx.AttributeProto.SPARSE_TENSOR:
            values = attr.sparse_tensor.values
            return tensor_bytes(values.data_type, math.prod(values.dims)) or 0
        if attr.name in _ATTRIBUTE_ITEM_BYTES:
            count = len(attr.floats) + len(attr.ints) if attr.name.endswith("s") else 1
            return _ATTRIBUTE_ITEM_BYTES[attr.name] * count
    return 0


__all__ = ["DeployFigures", "HEAVY_OPS", "SMALL_TENSOR_ELEMENTS", "deploy_figures", "is_heavy", "tensor_bytes", "weight_bytes"]
