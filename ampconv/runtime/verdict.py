"""Turn a failed check of a written model into a value the converter acts on.

``check_written`` raises ``ConversionError`` with the checking tool's words.
``judge`` reads them once, here, and answers one of:

- ``accept``: the model is fine for what can be judged here (the CPU provider
  has no bfloat16 kernel; onnxruntime does not know a custom op that was in the
  input already): write it, with a note;
- ``pin``: the tool blames nodes; keep them float32, with the tool's words as
  the reason, and plan again;
- ``fail``: nothing to act on; the error stands.

Nothing else in the package parses checker or onnxruntime messages.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, Mapping, Optional

import onnx.defs
import onnx_ir as ir

from ampconv.errors import ConversionError
from ampconv.core.graphs import all_graphs

ACCEPT, PIN, FAIL = "accept", "pin", "fail"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a failed check means: ``kind`` is accept, pin or fail."""

    kind: str
    note: Optional[str] = None  # accept: why the model is written anyway
    pins: Mapping[str, str] = dataclasses.field(default_factory=dict)  # pin: node name -> reason


def judge(error: ConversionError, model: ir.Model, dtype: str) -> Verdict:
    """Read a check failure of ``model`` (converted to ``dtype``) into a ``Verdict``."""
    message = error.detail
    if error.tool == ConversionError.CHECKER:
        pins = checker_pins(message, model)
        return Verdict(PIN, pins=pins) if pins else Verdict(FAIL)
    if "NOT_IMPLEMENTED" in message and (dtype == "bf16" or _blames_bfloat16(message, model)):
        # The graph resolved (types are consistent); the CPU provider simply
        # has no bfloat16 kernels. That is a deployment fact, not a defect. Under
        # fallback_dtype="bf16" the blamed node is one of the bfloat16 nodes.
        return Verdict(
            ACCEPT,
            note=(
                "onnxruntime resolves the graph, but its CPU provider has no bfloat16 kernel "
                f"({_kernel_name(message)}); run it on CUDA, validate with --backend emulate"
            ),
        )
    custom = unregistered_op(message)
    if custom is not None:
        return Verdict(
            ACCEPT,
            note=(
                f"onnxruntime load check skipped: it does not know the op {custom} "
                "(register its custom-op library to run the model)"
            ),
        )
    pins = runtime_pins(message, model)
    return Verdict(PIN, pins=pins) if pins else Verdict(FAIL)


def checker_pins(message: str, model: ir.Model) -> Dict[str, str]:
    """The nodes onnx.checker blames in ``message`` (node name -> reason); empty if none is named.

    The checker names a node in two forms: shape inference's
    ``(op_type:Foo, node name: bar)`` and the node check's
    ``Bad node spec for node. Name: bar OpType: Foo``.
    """
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    words = lines[0] if lines else "rejected"
    names = {m.group(1).strip() for m in re.finditer(r"node name: ([^)]+)\)", message)}
    names |= {m.group(1) for m in re.finditer(r"Name: (\S+) OpType:", message)}
    known = {n.name for g in all_graphs(model) for n in g if n.name}
    words = re.sub(r"^\[\w+\] Inference error\(s\): ", "", words)
    return {name: f"onnx.checker: {words[:200]}" for name in sorted(names & known)}


def runtime_pins(message: str, model: ir.Model) -> Dict[str, str]:
    """The nodes to pin to float32 for the node onnxruntime blamed; empty if none is found.

    onnxruntime names the node, or, when the failing node sits inside a
    function body it expanded (``node ()``: a LOW Clip or
    SoftmaxCrossEntropyLoss whose body uses an op without that type), names a
    value: either one of the converted model's own values (the function
    node's input or output) or one of the body's (``_inlfunc_<Op>_...``), and
    then every node of that op type is pinned.
    """
    kind = "no kernel for this type" if "NOT_IMPLEMENTED" in message or "implementation" in message else "type error"
    match = (
        re.search(r"node with name '([^']+)'", message)
        or re.search(r"(?:of|in) node \(([^)]+)\)", message)
        or re.search(r"Node \(([^)]+)\)", message)
    )
    if match is not None:
        return {match.group(1): f"onnxruntime: {kind}"}
    value = re.search(r"(?:input parameter|output arg) \(([^)]+)\)", message)
    if value is None:
        return {}
    name = value.group(1)
    reason = f"onnxruntime: {kind} in its expanded function body"
    inlined = re.match(r"_inlfunc_([A-Za-z0-9]+)_", name)
    if inlined is not None:
        return {n.name: reason for g in all_graphs(model) for n in g if n.op_type == inlined.group(1) and n.name}
    touching = [
        node
        for graph in all_graphs(model)
        for node in graph
        # Casts are the converter's own; the function node is what to pin.
        if node.op_type != "Cast" and node.name
        and any(v is not None and v.name == name for v in list(node.inputs) + list(node.outputs))
    ]
    # A value read by several nodes: the one onnxruntime expanded is a function op.
    touching.sort(key=lambda node: not _is_function_op(node, model))
    return {touching[0].name: reason} if touching else {}


def _is_function_op(node: ir.Node, model: ir.Model) -> bool:
    """Whether ``node``'s op has an ONNX function body at the model's opset."""
    domain = node.domain if node.domain != "ai.onnx" else ""
    try:
        schema = onnx.defs.get_schema(node.op_type, model.opset_imports.get(domain, 1), domain)
    except Exception:  # noqa: BLE001 - not a standard op
        return False
    return bool(schema.has_function or schema.has_context_dependent_function)


def unregistered_op(message: str) -> Optional[str]:
    """``domain::Op`` when onnxruntime failed only because it does not know that op.

    Conversion adds only Cast, Constant and Identity, so an unknown op was
    already in the source model: its runtime check is impossible, not failed.
    """
    match = re.search(r"([\w.]*):(\w+)\(-?\d+\) is not a registered function/op", message)
    if match is None:
        return None
    return f"{match.group(1)}::{match.group(2)}" if match.group(1) else match.group(2)


def unregistered_default_op(message: str) -> Optional[str]:
    """The op onnx.checker found no schema for in the default domain (``No Op registered for X``), else None."""
    match = re.search(r"No Op registered for (\w+) with domain_version", message)
    return match.group(1) if match else None


def _blames_bfloat16(message: str, model: ir.Model) -> bool:
    """Whether the node onnxruntime names in ``message`` has a bfloat16 input or output (a fallback-type node).

    A node onnxruntime made by expanding a function (an Attention's body: it
    names it ``''``) stands for the function node it came from: any bfloat16
    node whose op has a function body.
    """
    blamed = set(runtime_pins(message, model))
    known = {node.name for graph in all_graphs(model) for node in graph}
    expanded = not blamed or not blamed & known
    return any(
        (node.name in blamed or (expanded and _is_function_op(node, model)))
        and any(v is not None and v.dtype == ir.DataType.BFLOAT16 for v in list(node.inputs) + list(node.outputs))
        for graph in all_graphs(model) for node in graph
    )


def _kernel_name(message: str) -> str:
    match = re.search(r"implementation for (\S+)", message)
    return f"first missing: {match.group(1)}" if match else "no bfloat16 kernels"


__all__ = ["ACCEPT", "FAIL", "PIN", "Verdict", "checker_pins", "judge", "runtime_pins", "unregistered_default_op", "unregistered_op"]
