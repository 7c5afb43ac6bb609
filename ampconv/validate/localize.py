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
    node names, op types and tensor types are those the user sees.
    """
    wanted = set(names)
    checked = 0
    for node in converted.graph:
        for value in node.outputs:
            if value.name not in wanted or value.name not in ref_values or value.name not in conv_values:
                continue
            ref = np.asarray(ref_values[value.name])
            conv = np.asarray(conv_values[value.name])
            if ref.shape != conv.shape:
                continue  # a shape mismatch is not drift; the output check reports it
            checked += 1
            reason = _failure(ref, conv, rtol, atol)
            if reason is None:
                continue
            m = metrics.compare(ref, conv, rtol, atol)
            precision, rule = _decision(node, value, decisions)
            return Localization(
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
    return Localization(backend=backend, sample=sample, checked=checked)


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
