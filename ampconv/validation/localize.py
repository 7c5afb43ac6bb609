"""Find where drift starts, and name the fix.

Both models get copies that expose their float intermediate tensors as extra
outputs: the main graph's, and those inside If/Loop/Scan bodies
(``bodies.expose_body_values``: a Loop's stacked over its iterations, an If
branch's empty on a sample that does not take it). Tensors are matched by name (the converter keeps
original names on node outputs; the casts it inserts get new names, which the
reference lacks, so they are skipped). The converted model's nodes are walked
in topological order, a node's body nodes before the node (``bodies.walk``):

1. **Overflow first.** The first node whose LOW output turns non-finite where
   the reference is finite, or whose reference output lies beyond the LOW
   maximum, is the source of an overflow: everything downstream inherits it,
   and no amount of ordinary rounding upstream explains it. The fix keeps
   float32 every LOW node that makes or reads a tensor beyond the LOW range
   (``out_of_range_nodes``): the tensor is never cast down on its way, until
   a node brings it back in range. Kept nodes only grow, so following the
   suggestions converges. In a float16 conversion those nodes are first
   tried in bfloat16 (float32's range at float16's speed: ``bf16_split``,
   ``keep_bf16_pattern``); float32 is suggested only when that fix fails
   (a cancellation bfloat16's 8 bits cannot hold).
2. Otherwise the first node whose output fails ``judge`` (default criteria:
   an error beyond ordinary rounding, ``DRIFT_ROUNDOFFS`` unit roundoffs of
   RMS relative error; strict mode: the elementwise rule) is where drift
   becomes visible, and ``name_cause`` names the node whose own rounding
   causes it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from ampconv.core.precision import Precision
from ampconv.core.domains import op_label
from ampconv.core.graphs import subgraphs_of
from ampconv.numerics import bodies, metrics
from ampconv.core.lowtypes import KEY_OF_DTYPE, LOW_TYPES
from ampconv.runtime.schema import normalize_domain, op_info
from ampconv.validation.result import Localization

_FLOATS = set(KEY_OF_DTYPE) | {ir.DataType.FLOAT, ir.DataType.DOUBLE}


def float_node_outputs(model: ir.Model, inside_bodies: bool = False) -> dict[str, ir.DataType]:
    """Names and types of node outputs with a floating-point tensor type: the main graph's, or (``inside_bodies``)
    those of nodes inside If/Loop/Scan bodies."""
    if inside_bodies:
        return {name: v.dtype for name, v in bodies.body_values(model, _is_float_tensor).items()}
    found = {}
    for node in model.graph:
        for value in node.outputs:
            if value.name and _is_float_tensor(value):
                found[value.name] = value.dtype
    return found


def _is_float_tensor(value: ir.Value) -> bool:
    return value.dtype in _FLOATS and isinstance(value.type, ir.TensorType)


def parents(model: ir.Model) -> dict[str, str]:
    """Node name -> ``"<op> '<name>'"`` of the node whose body holds it, for nodes inside bodies (innermost)."""
    found = {}

    def visit(graph: ir.Graph, parent: str | None) -> None:
        for node in graph:
            if parent is not None and node.name:
                found[node.name] = parent
            for body in subgraphs_of(node):
                visit(body, f"{node.op_type} {node.name!r}")

    visit(model.graph, None)
    return found


# Drift becomes visible (default criteria) where a tensor's RMS relative error exceeds this many
# unit roundoffs of the LOW type: one rounding alone gives about 0.6 of one.
DRIFT_ROUNDOFFS = 10.0
TensorJudge = Callable[[np.ndarray, np.ndarray], "str | None"]


def drift_judge(dtype: str) -> TensorJudge:
    """The default-mode test of an intermediate tensor: new NaN/Inf, or an error beyond ordinary rounding."""
    limit = DRIFT_ROUNDOFFS * _unit_roundoff(dtype)

    def judge(ref: np.ndarray, conv: np.ndarray) -> str | None:
        new_bad = int(np.count_nonzero(metrics.new_nonfinite_mask(ref.astype(np.float64), conv.astype(np.float64))))
        if new_bad:
            return f"{new_bad} value(s) non-finite where the reference is finite"
        error = metrics.relative_rms_error(ref, conv)
        if error > limit:
            return f"error {error:.3g} of the tensor's RMS, beyond ordinary {dtype} rounding ({limit:.2g})"
        return None

    return judge


def elementwise_judge(rtol: float, atol: float) -> TensorJudge:
    """The strict-mode test of an intermediate tensor: the elementwise rule the user gave."""
    return lambda ref, conv: _failure(ref, conv, rtol, atol)


@dataclasses.dataclass(frozen=True)
class Observed:
    """The intermediate tensors both copies returned on one sample: their names, the reference's and ours."""

    names: Sequence[str]
    reference: Mapping[str, np.ndarray]
    converted: Mapping[str, np.ndarray]


def first_divergence(
    converted: ir.Model,
    observed: Observed,
    judge: TensorJudge,
    place: tuple,
    low_max: float,
    decisions: Mapping[str, Mapping[str, str]] | None = None,
) -> Localization:
    """Walk ``converted``'s nodes in order; return the overflow source, else the first node that fails ``judge``.

    ``converted`` is the converted model as written (not the emulated copy), so
    node names, op types and tensor types are those the user sees. ``place``
    is (backend, sample index). The walk goes on past the first failure to
    record every checked node's error (``Localization.node_errors``);
    ``checked`` counts the tensors checked up to the first failure.
    """
    names, ref_values, conv_values = observed.names, observed.reference, observed.converted
    backend, sample = place
    source = overflow_source(converted, names, ref_values, conv_values, low_max)
    inside = parents(converted)
    wanted = set(names)
    checked = 0
    first = None
    node_errors = []
    for node in bodies.walk(converted.graph):
        worst = None
        for value in node.outputs:
            if value.name not in wanted or value.name not in ref_values or value.name not in conv_values:
                continue
            ref = np.asarray(ref_values[value.name])
            conv = np.asarray(conv_values[value.name])
            if ref.shape != conv.shape or ref.size == 0:
                continue  # a shape mismatch is not drift (the output check reports it); empty: a branch not taken
            error = metrics.relative_rms_error(ref, conv)
            worst = error if worst is None else max(worst, error)
            if first is not None:
                continue
            checked += 1
            if source is not None:
                reason = source[2] if value is source[1] else None
            else:
                reason = judge(ref, conv)
            if reason is None:
                continue
            m = metrics.compare(ref, conv, 0.0, 0.0)
            precision, rule = _decision(node, value, decisions)
            first = Localization(
                backend=backend, sample=sample, checked=checked, node=node.name,
                op_type=op_label(node),
                output=value.name, reason=reason, max_abs=m.max_abs, max_rel=m.max_rel,
                new_nonfinite=m.new_nonfinite, precision=precision, rule=rule, overflow=source is not None,
                inside=inside.get(node.name),
            )
        if worst is not None and node.name:
            node_errors.append((node.name, float(f"{worst:.4g}")))
    if first is None:
        first = Localization(backend=backend, sample=sample, checked=checked)
    return dataclasses.replace(first, node_errors=tuple(node_errors))


def overflow_source(converted: ir.Model, names, ref_values, conv_values, low_max: float):
    """(node, output, reason) of the first node whose LOW output overflows (new NaN/Inf, or a reference beyond ``low_max``)."""
    wanted = set(names)
    for node in bodies.walk(converted.graph):
        for value in node.outputs:
            if value.name not in wanted or value.dtype not in KEY_OF_DTYPE or value.name not in ref_values:
                continue
            ref = np.asarray(ref_values[value.name], dtype=np.float64)
            if ref.size == 0:
                continue
            conv = np.asarray(conv_values.get(value.name, ref), dtype=np.float64)
            finite = ref[np.isfinite(ref)]
            peak = float(np.max(np.abs(finite))) if finite.size else 0.0
            new_bad = int(np.count_nonzero(metrics.new_nonfinite_mask(ref, conv)))
            limit = max(low_max, LOW_TYPES[KEY_OF_DTYPE[value.dtype]].max)  # a bf16 tensor beside fp16 ones: its own
            beyond = f"the reference reaches {peak:.4g}, beyond the LOW maximum {limit:g}"
            if new_bad:
                where = f": {beyond}" if peak > limit else ""
                return node, value, f"{new_bad} value(s) non-finite where the reference is finite{where}"
            if peak > limit:
                return node, value, f"its output leaves the LOW range: {beyond}"
    return None


def out_of_range_nodes(converted: ir.Model, ref_values: Mapping[str, np.ndarray], low_max: float) -> list[str]:
    """The nodes to keep float32 against an overflow: every non-Cast node that makes or reads a tensor beyond the range.

    Readers are found through Casts (a converter casts a float32 tensor down in
    front of its LOW readers, which is where the inf appears). Walk order.
    """
    beyond = {
        name for name, array in ref_values.items()
        if np.size(array) and float(np.max(np.abs(np.nan_to_num(np.asarray(array, np.float64), posinf=0.0,
                                                                neginf=0.0)))) > low_max
    }
    keep = []
    for node in bodies.walk(converted.graph):
        if node.op_type == "Cast" or not node.name or _holds_range(node, low_max):
            continue
        makes = any(v.name in beyond for v in node.outputs)
        reads = any(_source_name(v) in beyond for v in node.inputs if v is not None)
        if makes or reads:
            keep.append(node.name)
    return keep


def _holds_range(node: ir.Node, low_max: float) -> bool:
    """Whether ``node`` computes in a LOW type wider than ``low_max`` (bf16 beside fp16: the fallback type)."""
    return any(v.dtype in KEY_OF_DTYPE and LOW_TYPES[KEY_OF_DTYPE[v.dtype]].max > low_max for v in node.outputs)


def _source_name(value: ir.Value) -> str:
    """The name of the tensor ``value`` carries, looking back through Casts."""
    producer = value.producer()
    while producer is not None and producer.op_type == "Cast" and producer.inputs and producer.inputs[0] is not None:
        value = producer.inputs[0]
        producer = value.producer()
    return value.name or ""


def keep_pattern(names: Sequence[str]) -> str:
    """The ``--keep-fp32`` option naming exactly ``names``."""
    return f"--keep-fp32 '{_names_regex(names)}'"


def keep_bf16_pattern(names: Sequence[str]) -> str:
    """The options that put exactly ``names`` in bfloat16 beside float16: ``--fallback-dtype bf16 --keep-bf16``."""
    return f"--fallback-dtype bf16 --keep-bf16 '{_names_regex(names)}'"


def keep_options(names: Sequence[str]) -> list:
    """``keep_pattern`` as the conversion's parameters: ``[["keep_fp32", pattern]]`` (spelled by the reader)."""
    return [["keep_fp32", _names_regex(names)]]


def keep_bf16_options(names: Sequence[str]) -> list:
    """``keep_bf16_pattern`` as the conversion's parameters."""
    return [["fallback_dtype", "bf16"], ["keep_bf16", _names_regex(names)]]


def _names_regex(names: Sequence[str]) -> str:
    escaped = [re.escape(n) for n in names]
    body = escaped[0] if len(escaped) == 1 else "(" + "|".join(escaped) + ")"
    return f"^{body}$"


# Cast takes bfloat16 from this opset on: below it ``--keep-bf16`` keeps every node float32 (plan/fallback.py).
_CAST_BF16_OPSET = 13


def bf16_split(converted: ir.Model, names: Sequence[str]) -> tuple[list[str], list[str]]:
    """``names`` split into the nodes ``--keep-bf16`` would run in bfloat16 and those it would keep float32.

    bfloat16 where the node's schema at the converted model's opset admits it
    in its main type variable (as the rule ``user-keep-bf16`` asks), float32
    elsewhere: the fix is checked as it would be converted.
    """
    opsets = {normalize_domain(d): v for d, v in converted.opset_imports.items()}
    wanted = set(names)
    admitted = set()
    if opsets.get("", 1) >= _CAST_BF16_OPSET:
        for node in bodies.walk(converted.graph):
            if node.name not in wanted:
                continue
            domain = normalize_domain(node.domain)
            info = op_info(domain, node.op_type, opsets.get(domain, 1))
            if info.known and LOW_TYPES["bf16"].type_string in info.allowed(info.main_type()):
                admitted.add(node.name)
    return [n for n in names if n in admitted], [n for n in names if n not in admitted]


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
    if dtype in KEY_OF_DTYPE:
        return Precision.LOW, f"inferred from its {dtype.name.lower()} output (no converter decisions given)"
    return Precision.HIGH, f"inferred from its {dtype.name.lower()} output (no converter decisions given)"


# A node "causes" drift when its own error is this many times the LOW type's unit roundoff:
# rounding one output alone gives about 0.6 of it (RMS), so 10x is well beyond plain rounding.
CAUSE_ROUNDOFFS = 10.0


def _unit_roundoff(dtype: str) -> float:
    """The unit roundoff of the LOW type ``dtype`` (fp16's when the key is unknown)."""
    return LOW_TYPES.get(dtype, LOW_TYPES["fp16"]).unit_roundoff


def name_cause(converted: ir.Model, errors: Mapping, visible: str | None, dtype: str) -> dict | None:
    """The LOW node whose own error (``ampconv.numerics.ownerror``) causes the drift, with a fix that changes it.

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
    if worst.error < CAUSE_ROUNDOFFS * _unit_roundoff(dtype):
        return None
    names = [worst.node]
    if worst.output_error < worst.error / 2:
        # Most of its error comes from its rounded inputs: their LOW producers must stay float32 too.
        names += [p for p in dict.fromkeys(_low_producers(nodes[worst.node])) if p != worst.node]
    return {
        "node": worst.node,
        "op_type": worst.op_type,
        "own_error": worst.error if np.isfinite(worst.error) else "inf",
        "output": worst.output,
        "nodes": names,  # every node the fix keeps float32: the check runs exactly these
        "suggestion": keep_pattern(names),
        "options": keep_options(names),
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
        if value is None or value.dtype not in KEY_OF_DTYPE:
            continue
        producer = value.producer()
        while producer is not None and producer.op_type == "Cast" and producer.inputs:
            producer = producer.inputs[0].producer() if producer.inputs[0] is not None else None
        if producer is not None and any(o.dtype in KEY_OF_DTYPE for o in producer.outputs) and producer.name:
            found.append(producer.name)
    return found
