"""Find where drift starts: the first node whose output leaves tolerance.

Both models get copies that expose the float intermediate tensors of their
main graph as extra outputs. Tensors are matched by name (the converter keeps
original names on node outputs; the casts it inserts get new names, which the
reference lacks, so they are skipped). The converted model's nodes are walked
in topological order and the first node with an output that is over
tolerance, or non-finite where the reference is finite, is named together with
the precision decision that put it there.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir

from ampconv.validate import metrics
from ampconv.validate.modelio import LOW_TYPES
from ampconv.validate.result import Localization

_FLOATS = set(LOW_TYPES) | {ir.DataType.FLOAT, ir.DataType.DOUBLE}


def float_node_outputs(model: ir.Model) -> dict[str, ir.DataType]:
    """Names and types of main-graph node outputs with a floating-point tensor type."""
    found = {}
    for node in model.graph:
        for value in node.outputs:
            if value.name and value.dtype in _FLOATS and isinstance(value.type, ir.TensorType):
                found[value.name] = value.dtype
    return found


def expose(model: ir.Model, names: Sequence[str]) -> int:
    """Add the main-graph node outputs named in ``names`` as graph outputs; returns how many."""
    wanted = set(names)
    present = {v.name for v in model.graph.outputs}
    added = 0
    for node in model.graph:
        for value in node.outputs:
            if value.name in wanted and value.name not in present:
                model.graph.outputs.append(value)
                present.add(value.name)
                added += 1
    return added


def first_divergence(
    converted: ir.Model,
    names: Sequence[str],
    ref_values: Mapping[str, np.ndarray],
    conv_values: Mapping[str, np.ndarray],
    rtol: float,
    atol: float,
    backend: str,
    sample: int,
    decisions: Mapping[str, Mapping[str, str]] | None = None,
) -> Localization:
    """Walk ``converted``'s main graph in order; return the first node whose output fails.

    ``converted`` is the converted model as written (not the emulated copy), so
    node names, op types and tensor types are those the user sees. The walk
    goes on past the first failure to record every checked node's error
    (``Localization.node_errors``); ``checked`` counts the tensors checked up
    to the first failure.
    """
    wanted = set(names)
    checked = 0
    first = None
    node_errors = []
    for node in converted.graph:
        worst = None
        for value in node.outputs:
            if value.name not in wanted or value.name not in ref_values or value.name not in conv_values:
                continue
            ref = np.asarray(ref_values[value.name])
            conv = np.asarray(conv_values[value.name])
            if ref.shape != conv.shape:
                continue  # a shape mismatch is not drift; the output check reports it
            error = scaled_error(ref, conv)
            worst = error if worst is None else max(worst, error)
            if first is not None:
                continue
            checked += 1
            reason = _failure(ref, conv, rtol, atol)
            if reason is None:
                continue
            m = metrics.compare(ref, conv, rtol, atol)
            precision, rule = _decision(node, value, decisions)
            first = Localization(
                backend=backend,
                sample=sample,
                checked=checked,
                node=node.name,
                op_type=node.op_type if not node.domain else f"{node.domain}::{node.op_type}",
                output=value.name,
                reason=reason,
                max_abs=m.max_abs,
                max_rel=m.max_rel,
                new_nonfinite=m.new_nonfinite,
                precision=precision,
                rule=rule,
            )
        if worst is not None and node.name:
            node_errors.append((node.name, float(f"{worst:.4g}")))
    if first is None:
        first = Localization(backend=backend, sample=sample, checked=checked)
    return dataclasses.replace(first, node_errors=tuple(node_errors))


def scaled_error(ref: np.ndarray, conv: np.ndarray) -> float:
    """RMS of ``conv - ref`` over RMS of ``ref`` (at least 1e-12); inf when ``conv`` turns a finite value non-finite.

    Elements non-finite in the reference are left out: they say nothing of precision.
    """
    ref64 = ref.astype(np.float64, copy=False)
    conv64 = conv.astype(np.float64, copy=False)
    if ref64.size == 0:
        return 0.0
    finite = np.isfinite(ref64)
    if np.any(finite & ~np.isfinite(conv64)):
        return math.inf
    diff = conv64[finite] - ref64[finite]
    if diff.size == 0:
        return 0.0
    scale = max(float(np.sqrt(np.mean(np.square(ref64[finite])))), 1e-12)
    return float(np.sqrt(np.mean(np.square(diff)))) / scale


def _failure(ref: np.ndarray, conv: np.ndarray, rtol: float, atol: float) -> str | None:
    ref64 = ref.astype(np.float64, copy=False)
    conv64 = conv.astype(np.float64, copy=False)
    new_bad = int(np.count_nonzero(metrics.new_nonfinite_mask(ref64, conv64)))
    if new_bad:
        return f"{new_bad} value(s) non-finite where the reference is finite"
    if not metrics.close_mask(ref64, conv64, rtol, atol).all():
        return "over tolerance"
    return None


def _decision(node: ir.Node, value: ir.Value, decisions) -> tuple[str, str]:
    entry = decisions.get(node.name) if decisions else None
    if entry is not None:
        # A mapping from the converter's report, or a plan Decision object.
        get = entry.get if isinstance(entry, Mapping) else (lambda key, default=None: getattr(entry, key, default))
        rule, reason = get("rule", None), get("reason", None)
        text = f"{rule}: {reason}" if rule and reason and reason != rule else (rule or reason or "?")
        return str(get("precision", "?")), str(text)
    dtype = value.dtype
    if dtype in LOW_TYPES:
        return "LOW", f"inferred from its {dtype.name.lower()} output (no converter decisions given)"
    return "HIGH", f"inferred from its {dtype.name.lower()} output (no converter decisions given)"


# A node "causes" drift when its own error is this many times the LOW type's unit roundoff:
# rounding one output alone gives about 0.6 of it (RMS), so 10x is well beyond plain rounding.
CAUSE_ROUNDOFFS = 10.0
UNIT_ROUNDOFF = {"fp16": 2.0**-11, "bf16": 2.0**-8}


def name_cause(converted: ir.Model, errors: Mapping, visible: str | None, dtype: str) -> dict | None:
    """The LOW node whose own error (``ampconv.data.ownerror``) causes the drift, with a fix that changes it.

    Among the LOW nodes upstream of ``visible`` (the first diverging node; all
    nodes when unknown) the one with the largest own error, when that error is
    at least ``CAUSE_ROUNDOFFS`` unit roundoffs; None when no single node's own
    error stands out (drift accumulated over many nodes). The suggested
    ``--keep-fp32`` names the cause, and the LOW producers of its inputs when
    rounding those inputs (not its output) makes most of its error: keeping the
    cause alone float32 cannot undo rounding they did.
    """
    if not errors:
        return None
    nodes = {node.name: node for node in converted.graph if node.name}
    candidates = _upstream(nodes.get(visible)) if visible in nodes else set(nodes)
    pool = [e for name, e in errors.items() if name in candidates] or list(errors.values())
    worst = max(pool, key=lambda e: e.error)
    if worst.error < CAUSE_ROUNDOFFS * UNIT_ROUNDOFF.get(dtype, UNIT_ROUNDOFF["fp16"]):
        return None
    names = [worst.node]
    if worst.output_error < worst.error / 2:
        # Most of its error comes from its rounded inputs: their LOW producers must stay float32 too.
        names += [p for p in dict.fromkeys(_low_producers(nodes[worst.node])) if p != worst.node]
    pattern = f"^{names[0]}$" if len(names) == 1 else "^(" + "|".join(names) + ")$"
    return {
        "node": worst.node,
        "op_type": worst.op_type,
        "own_error": worst.error if np.isfinite(worst.error) else "inf",
        "output": worst.output,
        "suggestion": f"--keep-fp32 '{pattern}'",
    }


def _upstream(node: ir.Node) -> set:
    """Names of ``node`` and every main-graph node it depends on."""
    seen, stack = set(), [node]
    while stack:
        current = stack.pop()
        if current is None or current.name in seen:
            continue
        seen.add(current.name)
        stack.extend(v.producer() for v in current.inputs if v is not None and v.producer() is not None)
    return seen


def _low_producers(node: ir.Node) -> list:
    """LOW nodes whose outputs reach ``node``'s LOW inputs, looking through Casts."""
    found = []
    for value in node.inputs:
        if value is None or value.dtype not in LOW_TYPES:
            continue
        producer = value.producer()
        while producer is not None and producer.op_type == "Cast" and producer.inputs:
            producer = producer.inputs[0].producer() if producer.inputs[0] is not None else None
        if producer is not None and any(o.dtype in LOW_TYPES for o in producer.outputs) and producer.name:
            found.append(producer.name)
    return found
