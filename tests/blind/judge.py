"""The blind judge: a "true fp16" emulator, a float32-node count and an accuracy rule of its own.

Nothing here imports ampconv. A converted model is judged as follows:

* ``emulate_converted``: every float16/bfloat16 tensor type of the graph becomes float32
  (initializers and Constant values converted exactly), a Cast to float16/bfloat16 becomes a
  Cast to float32 followed by a rounding pair, and after every node output that was
  float16 (bfloat16) a pair ``Cast(to=FLOAT16) -> Cast(to=FLOAT)`` (``BFLOAT16``) is
  inserted, so each stored value is rounded (overflow -> inf) exactly as a real fp16
  kernel would store it; the arithmetic inside a node is float32. onnxruntime's CPU
  provider runs the result with every graph optimization off (so no rounding pair is
  folded away).
* ``emulate_mixed``: the same rounding applied to an *original* float32 model, with the
  nodes of a given set kept float32 and every other node computed from fp16-rounded
  inputs and storing fp16-rounded outputs. ``emulate_mixed(model, set())`` is the all-fp16
  model; ``emulate_mixed(model, case.needed)`` checks that a case's ``needed`` set suffices.
* ``float32_nodes``: the nodes of a converted model that compute in float32 (some float
  input or output is float32), Casts, Shape/Size, Constant and nodes without float data
  left out.
* ``check_accuracy``: per output, over all samples: no NaN/Inf where the reference is
  finite, and ``max|conv - ref| <= rtol * max|ref| + atol``.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

LOW_TYPES = (TensorProto.FLOAT16, TensorProto.BFLOAT16)
FLOAT_TYPES = (TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE)
NOT_COUNTED = frozenset({"Cast", "CastLike", "Shape", "Size", "Constant"})


@dataclass(frozen=True)
class Tolerance:
    """What a user accepts for every output: error relative to the output's own scale."""

    rtol: float = 1e-2
    atol: float = 1e-5

    def describe(self) -> str:
        return f"max|err| <= {self.rtol:g}*max|ref| + {self.atol:g}, no new NaN/Inf"


@dataclass
class Accuracy:
    ok: bool
    details: list = field(default_factory=list)

    def __str__(self) -> str:
        return "; ".join(self.details)


# ----------------------------------------------------------------------------- types


def _no_subgraphs(graph: onnx.GraphProto) -> None:
    for node in graph.node:
        for attr in node.attribute:
            if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
                raise NotImplementedError(f"node {node.name} ({node.op_type}) holds a subgraph; the blind judge has none")


def tensor_types(model: onnx.ModelProto) -> dict:
    """Element type of every named tensor of the main graph (after onnx's type inference)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001 - fall back to what the model declares
        inferred = model
    graph = inferred.graph
    types = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types[vi.name] = vi.type.tensor_type.elem_type
    for init in graph.initializer:
        types[init.name] = init.data_type
    for node in graph.node:
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    types[node.output[0]] = attr.t.data_type
    return types


def float32_nodes(model: onnx.ModelProto) -> list:
    """Names of the nodes that compute in float32: some float input or output is float32."""
    _no_subgraphs(model.graph)
    types = tensor_types(model)
    names = []
    for node in model.graph.node:
        if node.op_type in NOT_COUNTED:
            continue
        floats = [types.get(t) for t in list(node.input) + list(node.output) if t and types.get(t) in FLOAT_TYPES]
        missing = [t for t in list(node.input) + list(node.output) if t and t not in types]
        if missing and not floats:
            raise ValueError(f"node {node.name}: no type known for {missing}")
        if TensorProto.FLOAT in floats:
            names.append(node.name)
    return names


# ----------------------------------------------------------------------------- emulation


def _round_pair(src: str, dst: str, low: int) -> list:
    return [
        helper.make_node("Cast", [src], [dst + "__emu_low"], name="emu_to_low/" + dst, to=low),
        helper.make_node("Cast", [dst + "__emu_low"], [dst], name="emu_to_f32/" + dst, to=TensorProto.FLOAT),
    ]


def _tensor_to_f32(tensor: onnx.TensorProto) -> onnx.TensorProto:
    values = numpy_helper.to_array(tensor).astype(np.float32)
    return numpy_helper.from_array(values, tensor.name)


def emulate_converted(model: onnx.ModelProto) -> onnx.ModelProto:
    """A float32 model that stores every value the converted model stores in fp16/bf16 rounded to that type."""
    _no_subgraphs(model.graph)
    types = tensor_types(model)
    untyped = [o for n in model.graph.node for o in n.output if o and o not in types]
    if untyped:
        raise ValueError(f"no element type inferred for {untyped[:5]}: the emulator cannot tell which values are fp16")
    emu = copy.deepcopy(model)
    graph = emu.graph
    nodes = []
    initializers = {init.name: init for init in graph.initializer}
    for inp in graph.input:
        low = inp.type.tensor_type.elem_type
        if low in LOW_TYPES:
            inp.type.tensor_type.elem_type = TensorProto.FLOAT
            name = inp.name
            inp.name = name + "__emu_in"
            if name in initializers:  # an initializer listed as an input: its default is fed through the pair too
                initializers[name].name = inp.name
            nodes += _round_pair(inp.name, name, low)
    for i, init in enumerate(graph.initializer):
        if init.data_type in LOW_TYPES:
            graph.initializer[i].CopyFrom(_tensor_to_f32(init))
    for node in graph.node:
        for attr in node.attribute:
            if attr.name in ("to", "dtype") and attr.type == onnx.AttributeProto.INT and attr.i in LOW_TYPES:
                attr.i = TensorProto.FLOAT
            if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_type in LOW_TYPES:
                attr.t.CopyFrom(_tensor_to_f32(attr.t))
        rounded = []
        for i, out in enumerate(node.output):
            if out and types.get(out) in LOW_TYPES:
                node.output[i] = out + "__emu_raw"
                rounded.append((out, types[out]))
        nodes.append(node)
        for out, low in rounded:
            nodes += _round_pair(out + "__emu_raw", out, low)
    for out in graph.output:
        if out.type.tensor_type.elem_type in LOW_TYPES:
            out.type.tensor_type.elem_type = TensorProto.FLOAT
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return emu


def emulate_mixed(model: onnx.ModelProto, high, low: int = TensorProto.FLOAT16) -> onnx.ModelProto:
    """The float32 ``model`` with every node outside ``high`` computed from and storing ``low``-rounded values."""
    _no_subgraphs(model.graph)
    high = set(high)
    types = tensor_types(model)
    emu = copy.deepcopy(model)
    graph = emu.graph
    nodes, rounded_copy, already_low = [], {}, set()

    def low_input(name: str) -> str:
        if name in already_low:
            return name
        if name not in rounded_copy:
            rounded_copy[name] = name + "__emu_r"
            nodes.extend(_round_pair(name, rounded_copy[name], low))
        return rounded_copy[name]

    for node in graph.node:
        if node.name in high or node.op_type in ("Shape", "Size"):
            nodes.append(node)
            continue
        for i, name in enumerate(node.input):
            if name and types.get(name) == TensorProto.FLOAT:
                node.input[i] = low_input(name)
        outs = []
        for i, out in enumerate(node.output):
            if out and types.get(out) == TensorProto.FLOAT:
                node.output[i] = out + "__emu_raw"
                outs.append(out)
        nodes.append(node)
        for out in outs:
            nodes.extend(_round_pair(out + "__emu_raw", out, low))
            already_low.add(out)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.value_info[:]
    return emu


def to_double(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with every float32 tensor in float64: the reference's own reference."""
    emu = copy.deepcopy(model)
    graph = emu.graph
    for vi in list(graph.input) + list(graph.output):
        if vi.type.tensor_type.elem_type == TensorProto.FLOAT:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for i, init in enumerate(graph.initializer):
        if init.data_type == TensorProto.FLOAT:
            graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(init).astype(np.float64), init.name))
    for node in graph.node:
        for attr in node.attribute:
            if attr.name in ("to", "dtype") and attr.type == onnx.AttributeProto.INT and attr.i == TensorProto.FLOAT:
                attr.i = TensorProto.DOUBLE
    del graph.value_info[:]
    return emu


# ----------------------------------------------------------------------------- running


def session(model: onnx.ModelProto):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def run(model: onnx.ModelProto, samples: list, dtype=np.float32) -> list:
    """One dict {output name: array} per sample."""
    sess = session(model)
    names = [o.name for o in sess.get_outputs()]
    results = []
    for feeds in samples:
        values = sess.run(None, {k: np.asarray(v).astype(dtype) for k, v in feeds.items()})
        results.append({n: np.asarray(v, dtype=np.float64) for n, v in zip(names, values)})
    return results


def check_accuracy(reference: list, candidate: list, tolerance: Tolerance) -> Accuracy:
    """Every output over all samples: no NaN/Inf where the reference is finite, and the scaled error bound."""
    verdict = Accuracy(ok=True)
    for name in reference[0]:
        ref = np.concatenate([r[name].ravel() for r in reference])
        got = np.concatenate([c[name].ravel() for c in candidate])
        finite = np.isfinite(ref)
        new_bad = int(np.count_nonzero(finite & ~np.isfinite(got)))
        scale = float(np.max(np.abs(ref[finite]))) if finite.any() else 0.0
        err = float(np.max(np.abs(got[finite] - ref[finite]))) if new_bad == 0 and finite.any() else float("inf")
        bound = tolerance.rtol * scale + tolerance.atol
        ok = new_bad == 0 and err <= bound
        verdict.ok &= ok
        if new_bad:
            verdict.details.append(f"{name}: {new_bad} NaN/Inf where the reference is finite")
        else:
            verdict.details.append(f"{name}: max err {err:.3g} vs bound {bound:.3g} ({'ok' if ok else 'FAIL'})")
    return verdict


def judge_accuracy(original: onnx.ModelProto, emulated: onnx.ModelProto, samples: list, tolerance: Tolerance,
                   reference: list | None = None) -> Accuracy:
    reference = reference if reference is not None else run(original, samples)
    return check_accuracy(reference, run(emulated, samples), tolerance)


def told_user(report: dict, max_abs_input: dict) -> tuple:
    """Did a default conversion's report warn the user? A warning, or an envelope entry below the samples' range."""
    warnings = [w for w in (report.get("warnings") or []) if w]
    if warnings:
        return True, "warning: " + str(warnings[0])[:200]
    for entry in report.get("envelope") or []:
        try:
            name, holds_to = entry["input"], float(entry["holds_to"])
        except (KeyError, TypeError, ValueError):
            continue
        if name in max_abs_input and holds_to < max_abs_input[name]:
            return True, f"envelope: {name} holds to {holds_to:g} (samples reach {max_abs_input[name]:g}), limited by {entry.get('limited_by')}"
    return False, "no warning, no envelope entry below the samples' range"


# ----------------------------------------------------------------------------- soundness of a case


def soundness(model: onnx.ModelProto, samples: list, needed, tolerance: Tolerance, minimality: bool = True) -> dict:
    """The case's own checks, none involving ampconv.

    ``reference_ok``: float32 agrees with float64 (where onnxruntime has double kernels; else: finite);
    ``all_fp16_ok``: every node in fp16 is accurate (should be False exactly when ``needed`` is non-empty);
    ``needed_suffices``: ``needed`` in float32 and the rest in fp16 is accurate;
    ``needed_each``: for each needed node, whether dropping it alone to fp16 breaks accuracy.
    """
    reference = run(model, samples)
    finite = all(np.isfinite(v).all() for r in reference for v in r.values())
    try:
        ref64 = run(to_double(model), samples, dtype=np.float64)
        reference_ok = finite and check_accuracy(ref64, reference, Tolerance(rtol=1e-3, atol=1e-6)).ok
        reference_how = "float64"
    except Exception:  # noqa: BLE001 - no double kernel for some op: finiteness alone
        reference_ok, reference_how = finite, "finite"
    all_fp16 = check_accuracy(reference, run(emulate_mixed(model, set()), samples), tolerance)
    suffices = check_accuracy(reference, run(emulate_mixed(model, needed), samples), tolerance)
    each = {}
    if minimality:
        for name in sorted(needed):
            each[name] = not check_accuracy(reference, run(emulate_mixed(model, set(needed) - {name}), samples), tolerance).ok
    return {
        "reference_ok": reference_ok, "reference_how": reference_how,
        "all_fp16_ok": all_fp16.ok, "all_fp16": str(all_fp16),
        "needed_suffices": suffices.ok, "needed_detail": str(suffices),
        "needed_each": each,
    }
