"""Read-only facts about a saved ONNX model, computed the same way for every converter."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import onnx
from onnx import TensorProto

# docs/precision.md sec. 2, preset `default`: the ops that must run LOW at every level.
WHITE_OPS = frozenset(
    {"Conv", "ConvTranspose", "DeformConv", "MatMul", "Gemm", "Einsum", "Attention", "LSTM", "GRU", "RNN"}
)
FLOAT_TYPES = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})


def iter_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """Yield ``graph`` and every subgraph (If/Loop/Scan bodies), depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from iter_graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from iter_graphs(sub)


def count_ops(model: onnx.ModelProto, op_type: str) -> int:
    """Number of nodes of ``op_type`` in the model, subgraphs included."""
    return sum(n.op_type == op_type for g in iter_graphs(model.graph) for n in g.node)


def initializer_bytes(model: onnx.ModelProto, float_only: bool = False) -> int:
    """Bytes the initializers hold (from dims and type, so external data need not be read)."""
    total = 0
    for graph in iter_graphs(model.graph):
        for tensor in graph.initializer:
            if float_only and tensor.data_type not in FLOAT_TYPES:
                continue
            count = 1
            for dim in tensor.dims:
                count *= dim
            total += count * onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    return total


def value_types(graph: onnx.GraphProto, outer: dict[str, int] | None = None) -> dict[str, int]:
    """Element type of every named value of ``graph`` (inputs, outputs, value_info,
    initializers, Constant outputs), on top of the enclosing scopes' ``outer``."""
    types = dict(outer or {})
    for info in list(graph.input) + list(graph.value_info) + list(graph.output):
        if info.type.HasField("tensor_type"):
            types[info.name] = info.type.tensor_type.elem_type
    for tensor in graph.initializer:
        types[tensor.name] = tensor.data_type
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    types[node.output[0]] = attr.t.data_type
    return types


def white_ops_not_low(model: onnx.ModelProto, low: int = TensorProto.FLOAT16) -> tuple[int, list[str]]:
    """Check that every WHITE node reads only ``low`` floats.

    Returns (number of WHITE nodes, list of problems "node: input x is FLOAT").
    Types come from shape inference on the model as written, so a missing or
    wrong value_info in the converter's output cannot hide a float32 input.
    Non-float inputs (LSTM sequence_lens) and empty optional inputs are skipped.
    """
    inferred = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False)
    problems: list[str] = []
    n_white = 0

    def visit(graph: onnx.GraphProto, outer: dict[str, int]) -> None:
        nonlocal n_white
        types = value_types(graph, outer)
        for node in graph.node:
            if node.op_type in WHITE_OPS and node.domain in ("", "ai.onnx"):
                n_white += 1
                for name in node.input:
                    elem = types.get(name) if name else None
                    if name and elem is None:
                        problems.append(f"{node.name} ({node.op_type}): input {name!r} has unknown type")
                    elif name and elem in FLOAT_TYPES and elem != low:
                        problems.append(
                            f"{node.name} ({node.op_type}): input {name!r} is "
                            f"{TensorProto.DataType.Name(elem)}")
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    visit(attr.g, types)

    visit(inferred.graph, {})
    return n_white, problems


def ort_load_error(path: pathlib.Path) -> str | None:
    """None if onnxruntime CPU can create a session for ``path``, else the error text."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed"
    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 -- any load failure is data for the report, not a crash
        return f"{type(exc).__name__}: {exc}"[:500]
    return None


def ort_session_seconds(path: pathlib.Path) -> float | str:
    """Seconds to create an onnxruntime CPU session the way ampconv's load check does.

    Optimizations and weight pre-packing off (as ``ampconv.runtime.loadcheck.check_written``
    creates it), so this is the share of ``convert()`` spent in onnxruntime.
    """
    import time

    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.add_session_config_entry("session.disable_prepacking", "1")
    start = time.perf_counter()
    try:
        ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 -- a load failure is data for the report
        return f"{type(exc).__name__}: {exc}"[:300]
    return round(time.perf_counter() - start, 3)


def max_abs_diff(reference: pathlib.Path, converted: pathlib.Path, seed: int = 0) -> dict[str, object]:
    """Largest |converted - reference| per output on one seeded input (symbolic dims = 2).

    Informational only (the validator owns accuracy); non-finite results are
    reported as strings so the JSON stays valid.
    """
    import numpy as np
    import onnxruntime as ort

    ref = ort.InferenceSession(str(reference), providers=["CPUExecutionProvider"])
    new = ort.InferenceSession(str(converted), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    feeds = {}
    for inp in ref.get_inputs():
        shape = [d if isinstance(d, int) else 2 for d in inp.shape]
        feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
    names = [o.name for o in ref.get_outputs()]
    diffs: dict[str, object] = {}
    for name, a, b in zip(names, ref.run(names, feeds), new.run(names, feeds)):
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0
        diffs[name] = diff if np.isfinite(diff) else str(diff)
    return diffs
