"""Rule family ``range``: what on this model keeps a once-black op float32 (docs/precision.md sec. 2).

The default preset used to keep normalizations, softmaxes, reductions, Exp and
Pow float32 on every model, each with a cast pair. What such an op risks in
LOW is the range of its inputs and outputs: LayerNormalization computes its
statistics in float32 whatever its I/O type (``stash_type``), and GPU kernels
of Softmax and the reductions accumulate in float32. So they are gray (they
follow their neighbours, as onnxruntime's and TensorRT's fp16 paths run them)
unless evidence on the model says the range does not hold. The evidence these
rules read, each only for a gray op at O1/O2 in a preset with range guards
(the default; ``--preset mindspore`` reproduces MindSpore's lists exactly):

- ``range-statistics``: a normalization decomposed into ops (a mean, a
  centring Sub, a square, a mean of squares, eps, Sqrt or Reciprocal, the
  division): its statistics stay float32, as the fused op keeps them, unless
  a float32 run (calibration data, or the synthetic run: for squares that
  grow with a float input, up to the input envelope it reports,
  ``plan.envelope``) saw the squares fit with ``OBSERVED_HEADROOM`` to spare. A square of
  |x| > 256 overflows fp16, and residual streams reach that. bfloat16 has
  float32's range, so under ``--dtype bf16`` the statistics follow the gray rule.
- ``range-reduction``: an fp16 sum over a static extent so long that a modest
  mean overflows it: a ReduceSum of 20,000 values overflows once their mean
  |x| exceeds 3.3. Sums over ``SUM_EXTENT`` values or more, and sums of squares
  or products over ``SQUARE_EXTENT`` or more, stay float32.
- ``range-mask``: a Softmax whose input carries a constant attention mask with
  a fully masked row: that row's softmax is decided by how fill + score
  rounds, so it is computed as the original computes it.

Constants, calibration data (``plan.data``) and the accuracy search are the
other evidence; they apply to every op and come earlier in the rule table.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping, Optional, Set, Tuple

import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import Decision
from ampconv.plan.facts import NodeFacts, OpFacts
from ampconv.plan.guards import MASK_PATH
from ampconv.plan.magnitude import MagnitudeAnalysis, describe, threshold
from ampconv.plan.ranges import RangeReader
from ampconv.plan.rules import RANGE, Rule, builtin
from ampconv.plan.values import constant_array, is_constant
from ampconv.policy import GRAY, HIGH
from ampconv.policy.lists import BLACK
from ampconv.runtime.schema import normalize_domain

# fp16 sums over at least this many values stay float32 (mean |x| > 65504 / 4096 = 16 overflows).
SUM_EXTENT = 4096
# Sums of squares or products over at least this many values (RMS > 16 overflows).
SQUARE_EXTENT = 256
# A value that overflows LOW once activations pass this magnitude stays float32 (the same 16 as the extents:
# residual streams and unnormalized features reach it).
ACTIVATION_LIMIT = 16.0
FLOAT32_MAX = float(np.finfo(np.float32).max)
# A value a float32 run saw so far below the LOW maximum that activations 4x larger still fit runs LOW.
OBSERVED_HEADROOM = 4.0
_SUMS = frozenset({"ReduceSum", "ReduceL1", "ReduceLogSum", "ReduceLogSumExp"})
_SQUARES = frozenset({"ReduceSumSquare", "ReduceL2", "ReduceProd"})
# A mask fill: exp(fill - score) is 0 for any score a softmax sees.
MASK_FILL = -1e4
_MEANS = frozenset({"ReduceMean", "ReduceSum"})
# What follows a mean of squares on its way to the division: eps, the root, the reciprocal.
_STATISTIC_TAIL = frozenset({"Add", "Sqrt", "Pow", "Reciprocal", "Div", "Mul", "Cast"})


def _guarded(ctx: PlanContext, node: ir.Node) -> bool:
    """Whether the range rules speak for ``node``: a gray op at O1/O2 under a preset with range guards."""
    return _guarded_op(ctx, normalize_domain(node.domain), node.op_type)


def _guarded_op(ctx: PlanContext, domain: str, op_type: str) -> bool:
    """``_guarded`` for any node of ``domain::op_type`` (``domain`` normalized)."""
    return numbers_guarded(ctx) and ctx.policy.class_of(domain, op_type) == GRAY


def numbers_guarded(ctx: PlanContext) -> bool:
    """Whether range evidence speaks at all: a preset with range guards, at O1 or O2."""
    return ctx.policy.range_guards and ctx.policy.level in ("O1", "O2")


def statistics(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``range-statistics``: a node of a decomposed normalization whose squares no float32 run saw fit float16.

    float16 only (bfloat16 holds any square float32 does). The numbers
    decide where there are numbers: when a float32 run (calibration data, or
    the default synthetic run) saw the normalization's squares and their mean
    with ``OBSERVED_HEADROOM`` to spare (|x| up to 4x larger would still fit),
    its statistics follow the gray rule like any other op. Without a run, or
    when the run saw them near or past the maximum, they stay float32.
    """
    if ctx.low != "fp16" or not _guarded(ctx, node):
        return None
    evidence = _normalization_nodes(ctx).get(node)
    if evidence is None:
        return None
    peaks = [stats.max_abs for value in evidence
             if ctx.calibration is not None and (stats := ctx.calibration.tensor(value.name)) is not None]
    run = f"the {'synthetic ' if ctx.calibration.synthetic else ''}float32 run" if ctx.calibration is not None else ""
    if peaks and all(_observed_room(ctx, value, 2.0) for value in evidence):
        # The run saw every square fit with room: the numbers overrule the spelling. Squares that grow with a
        # float input hold as far as the envelope says (plan.envelope: the summary names the limit).
        return None
    if peaks:
        seen = (f"; {run} saw its squares reach {max(peaks):.3g}, within {OBSERVED_HEADROOM:g}x in |x| of "
                f"{ctx.low_name}'s max")
    elif run:
        seen = f"; {run} did not see its squares"
    else:
        seen = "; no float32 run saw its squares (--calibration-data shows whether they fit)"
    return Decision(
        HIGH,
        "range-statistics",
        "range: part of a normalization decomposed into ops; its statistics need float32's range, which "
        f"LayerNormalization's stash_type gives them (a square of |x| > 256 overflows float16){seen}",
    )


def _normalization_nodes(ctx: PlanContext) -> Mapping[ir.Node, Tuple[ir.Value, ...]]:
    """``decomposed_normalizations`` of every graph, found once (``ctx.memo``).

    Subgraphs too: optimum's merged decoder holds the whole decoder, its
    RMSNorms included, inside the branches of an If.
    """
    if "statistics" not in ctx.memo:
        index = ctx.nodes_by_op()
        means = [node for op in sorted(_MEANS) for node in index.get(op, ())]
        ctx.memo["statistics"] = decomposed_normalizations(ctx.model.graph, means)
    return ctx.memo["statistics"]


def reduction(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``range-reduction``: a value of ``node`` that the model's numbers make overflow LOW at modest activations.

    Two kinds of evidence, both numbers: an fp16 reduction over a static
    extent so long that a modest mean overflows its accumulation (a gray
    Reduce op), and the magnitude analysis (``plan.magnitude``): a main
    input or output that scales as ``factor * |x| ** degree`` and passes the
    LOW maximum once activations exceed ``ACTIVATION_LIMIT``, whatever ops
    spell it (a sum of squares as ``Square -> ReduceSum``, ``Pow -> MatMul``
    with ones, ``ReduceSumSquare``). A black op is left to the level table.
    """
    if not numbers_guarded(ctx) or ctx.policy.class_of(normalize_domain(node.domain), node.op_type) == BLACK:
        return None
    if node.op_type in _SQUARES | _SUMS and is_default(node) and ctx.low == "fp16" and _guarded(ctx, node) \
            and not _observed_room(ctx, node.outputs[0], 2.0 if node.op_type in _SQUARES else 1.0):
        decision = _long_reduction(ctx, node)
        if decision is not None:
            return decision
    return _scaled_overflow(ctx, node, facts)


def _long_reduction(ctx: PlanContext, node: ir.Node) -> Optional[Decision]:
    """The accumulation check: a gray fp16 Reduce op over ``SUM_EXTENT`` (``SQUARE_EXTENT`` for squares) values."""
    squares = node.op_type in _SQUARES
    extent = reduced_extent(ctx, node)
    limit = SQUARE_EXTENT if squares else SUM_EXTENT
    if extent is None or extent < limit:
        return None
    bound = ctx.low_record.max / extent
    what = f"RMS |x| exceeds {bound ** 0.5:.3g}" if squares else f"mean |x| exceeds {bound:.3g}"
    return Decision(
        HIGH,
        "range-reduction",
        f"range: a {node.op_type} over {extent} values overflows float16 once their {what}; needs float32's "
        f"range (over fewer than {limit} values it runs LOW)",
    )


def _scaled_overflow(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """The magnitude analysis's verdict on ``node``'s main values (None: every one fits past ``ACTIVATION_LIMIT``)."""
    suspects = _suspects(ctx)
    if not suspects:
        return None
    worst = None
    for kind, values in (("input", [node.inputs[i] for i in facts.main_in]),
                         ("output", [node.outputs[j] for j in facts.main_out])):
        for value in values:
            found = suspects.get(value)
            if found is None or _observed_room(ctx, value, found[1].degree):
                continue  # fits at common activations, or the run saw room
            if worst is None or found[0] < worst[0]:
                worst = (found[0], kind, value, found[1])
    if worst is None:
        return None
    limit, kind, value, scale = worst
    seen = ""
    stats = ctx.calibration.tensor(value.name) if ctx.calibration is not None else None
    if stats is not None:
        seen = f"; the {'synthetic ' if ctx.calibration.synthetic else ''}float32 run saw max |x| = {stats.max_abs:.3g} there"
    return Decision(
        HIGH,
        "range-reduction",
        f"range: {kind} {value.name} scales as {describe(scale)} (from the model's constants, extents and op "
        f"semantics) and passes {ctx.low_name}'s max {ctx.low_record.max:g} once activations exceed "
        f"|x| = {limit:.3g}; needs float32's range (activations past {ACTIVATION_LIMIT:g} are common){seen}",
    )


def _suspects(ctx: PlanContext) -> dict:
    """Value -> (threshold, scale) of every value that passes the LOW maximum at activations of at most
    ``ACTIVATION_LIMIT`` while float32 holds it there (constants and bounded values never: degree <= 0); once."""
    found = ctx.memo.get("magnitude_suspects")
    if found is None:
        found = {}
        for value, scale in magnitudes(ctx).scales.items():
            if scale.degree <= 0:
                continue
            limit = threshold(scale, ctx.low_record.max)
            if limit <= ACTIVATION_LIMIT and threshold(scale, FLOAT32_MAX) > ACTIVATION_LIMIT:
                found[value] = (limit, scale)
        ctx.memo["magnitude_suspects"] = found
    return found


def _observed_room(ctx: PlanContext, value: Optional[ir.Value], degree: float) -> bool:
    """Whether a float32 run (the synthetic one, or calibration data) saw ``value`` with room to grow.

    A value of degree ``d`` seen at ``v`` passes the LOW maximum only when the
    activations grow by ``(max / v) ** (1 / d)``; at ``OBSERVED_HEADROOM`` or more
    the run's numbers overrule the estimate (the analysis assumes activations of
    ``ACTIVATION_LIMIT`` it cannot see). Without a run, or unseen: False.
    """
    stats = ctx.calibration.tensor(value.name) if ctx.calibration is not None and value is not None else None
    if stats is None or stats.nonfinite or degree <= 0:
        return False
    if stats.max_abs == 0:
        return True
    return (ctx.low_record.max / stats.max_abs) ** (1.0 / degree) >= OBSERVED_HEADROOM


def magnitudes(ctx: PlanContext) -> MagnitudeAnalysis:
    """The magnitude analysis of the main graph, made once per plan (``ctx.memo``)."""
    analysis = ctx.memo.get("magnitudes")
    if analysis is None:
        analysis = ctx.memo["magnitudes"] = MagnitudeAnalysis(ctx.model.graph, ctx.ranges,
                                                              lambda node: reduced_extent(ctx, node))
    return analysis


def mask(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """``range-mask``: a softmax over scores with a constant mask that masks a whole row."""
    if node.op_type not in ("Softmax", "LogSoftmax") or not is_default(node):
        return None
    if not _guarded(ctx, node) or not _last_axis(node, ctx.opsets.get("", 1)):
        return None
    found = _fully_masked_constant(node.inputs[0], ctx.ranges)
    if found is None:
        return None
    name, row = found
    return Decision(
        HIGH,
        "range-mask",
        f"range: row {row} of mask {name} masks every key, so that row's softmax is decided by how "
        "fill + score rounds; kept float32, as the original computes it",
    )


# Each ``applies`` restates the first checks of its rule (the op, the LOW type, ``_guarded``): keep them in step.
def _statistics_applies(ctx: PlanContext, op: OpFacts) -> bool:
    # bf16, or no decomposed normalization in the model (one walk): silent
    return _guarded_op(ctx, op.domain, op.op_type) and ctx.low == "fp16" and bool(_normalization_nodes(ctx))


def _reduction_applies(ctx: PlanContext, op: OpFacts) -> bool:
    # the magnitude check leaves black ops to the level table; the accumulation check needs a gray Reduce op
    if not numbers_guarded(ctx) or ctx.policy.class_of(op.domain, op.op_type) == BLACK:
        return False
    long_reduction = ctx.low == "fp16" and op.domain == "" and op.op_type in _SUMS | _SQUARES \
        and _guarded_op(ctx, op.domain, op.op_type)
    return long_reduction or bool(_suspects(ctx))


def _mask_applies(ctx: PlanContext, op: OpFacts) -> bool:
    return _guarded_op(ctx, op.domain, op.op_type) and op.domain == "" and op.op_type in ("Softmax", "LogSoftmax")


RULES = tuple(builtin(rule) for rule in (
    Rule("range-statistics", RANGE, "part of a normalization decomposed into ops whose squares no float32 run saw "
         "fit: statistics float32", decide=statistics, applies=_statistics_applies),
    Rule("range-reduction", RANGE, "fp16 sum over so many values that a modest mean overflows it",
         decide=reduction, applies=_reduction_applies),
    Rule("range-mask", RANGE, "softmax over a constant mask with a fully masked row", decide=mask,
         applies=_mask_applies),
))


# Rules a float32 run's numbers can overrule: without a run, their nodes stay float32 for want of numbers.
WANTING_NUMBERS = frozenset({"range-statistics", "range-reduction"})


def wanting_numbers(plan) -> Tuple[int, int, int]:
    """``(nodes, normalizations, sums)`` a plan made without a float32 run keeps float32 for want of numbers.

    Nodes: those of ``WANTING_NUMBERS`` rules, and the gray nodes float32
    because of them (following one, or promoted for reading one), in plan
    order; normalizations: the distinct decomposed normalizations among them;
    sums: the ``range-reduction`` nodes.
    """
    decisions = {node: node_plan.decision for node, node_plan in plan.nodes.items()}
    by_name = {node.name: node for node in decisions if node.name}
    wanting: Set[ir.Node] = set()
    for node, decision in decisions.items():  # plan order: what a node follows or reads is settled before it
        if decision.precision != HIGH:
            continue
        if decision.rule in WANTING_NUMBERS \
                or (decision.rule == "gray-follow" and by_name.get(decision.follows) in wanting) \
                or (decision.rule == "gray-promote" and any(v is not None and v.producer() in wanting
                                                            for v in node.inputs)):
            wanting.add(node)
    statistics = [node for node in wanting if decisions[node].rule == "range-statistics"]
    norms = set()
    for graph in {node.graph for node in statistics}:
        found = decomposed_normalizations(graph)
        norms |= {found[node] for node in statistics if node in found}
    sums = sum(1 for node in wanting if decisions[node].rule == "range-reduction")
    return len(wanting), len(norms), sums


# ------------------------------------------------------------------ evidence
def decomposed_normalizations(graph: ir.Graph, means: Optional[Iterable[ir.Node]] = None
                               ) -> Mapping[ir.Node, Tuple[ir.Value, ...]]:
    """Every node of a normalization in ``graph`` decomposed into ops (see ``range-statistics``), each mapped to
    its normalization's evidence: the square and the mean of squares, the values a float32 run must see fit.

    ``means``: the graph's ReduceMean and ReduceSum nodes, in any order, when
    the caller has them (``PlanContext.nodes_by_op``); None: ``graph`` is walked.

    Anchored on a mean (ReduceMean/ReduceSum) of a square (``Pow(d, 2)`` or
    ``Mul(d, d)``); ``d`` is either the input itself (RMS normalization) or
    ``Sub(a, mean(a))``, whose mean and Sub join. From the mean of squares the
    walk follows eps, Sqrt, Pow and Reciprocal forward to the node that also
    reads ``d`` (or ``a``): the division or multiplication that normalizes.
    """
    found: Dict[ir.Node, Tuple[ir.Value, ...]] = {}
    for node in graph if means is None else means:
        if node.op_type not in _MEANS or not is_default(node) or not node.inputs:
            continue
        square = node.inputs[0].producer() if node.inputs[0] is not None else None
        centred = _squared(square)
        if centred is None:
            continue
        members = {node, square}
        sources = {centred}
        sub = centred.producer()
        if sub is not None and sub.op_type == "Sub" and _is_mean_of(sub.inputs[1], sub.inputs[0]):
            members |= {sub, sub.inputs[1].producer()}
            sources.add(sub.inputs[0])
        tail = _normalizing_tail(node, sources)
        if tail:
            evidence = (square.outputs[0], node.outputs[0])
            found.update((member, evidence) for member in members | tail)
    return found


def _squared(node: Optional[ir.Node]) -> Optional[ir.Value]:
    """``d`` when ``node`` is ``Pow(d, 2)`` or ``Mul(d, d)``; else None."""
    if node is None or not is_default(node):
        return None
    if node.op_type == "Mul" and len(node.inputs) == 2 and node.inputs[0] is node.inputs[1]:
        return node.inputs[0]
    if node.op_type == "Pow" and len(node.inputs) == 2 and is_constant(node.inputs[1]):
        exponent = constant_array(node.inputs[1])
        if exponent is not None and exponent.size == 1 and float(exponent.reshape(-1)[0]) == 2.0:
            return node.inputs[0]
    return None


def _is_mean_of(value: Optional[ir.Value], of: Optional[ir.Value]) -> bool:
    producer = value.producer() if value is not None else None
    return (
        producer is not None and producer.op_type in _MEANS and is_default(producer)
        and bool(producer.inputs) and producer.inputs[0] is of
    )


def _normalizing_tail(mean: ir.Node, sources: Set[ir.Value], depth: int = 4) -> Set[ir.Node]:
    """The nodes from a mean of squares to the node that divides a source by them; empty if there is none."""
    frontier = [(mean, frozenset())]
    for _ in range(depth):
        following = []
        for current, path in frontier:
            for out in current.outputs:
                for use in out.uses():
                    reader = use.node
                    if not is_default(reader) or reader.op_type not in _STATISTIC_TAIL:
                        continue
                    if reader.op_type in ("Div", "Mul") and any(v in sources for v in reader.inputs):
                        return set(path) | {reader}
                    following.append((reader, path | {reader}))
        frontier = following
    return set()


def reduced_extent(ctx: PlanContext, node: ir.Node) -> Optional[int]:
    """How many values one output of the reduction sums (None when a reduced dim is not static)."""
    data = node.inputs[0] if node.inputs else None
    shape = ctx.shapes(data) if data is not None else None
    if shape is None:
        return None
    dims = list(shape.dims)
    axes = _axes(node, len(dims))
    if axes is None:
        return None
    extent = 1
    for axis in axes:
        dim = dims[axis]
        if not isinstance(dim, int):
            return None
        extent *= dim
    return extent


def _axes(node: ir.Node, rank: int) -> Optional[Iterable[int]]:
    """The reduced axes (all when none are given and ``noop_with_empty_axes`` is off); None when computed."""
    axes = None
    attribute = node.attributes.get("axes")
    if attribute is not None:
        axes = list(attribute.value)
    elif len(node.inputs) > 1 and node.inputs[1] is not None and node.inputs[1].name:
        array = constant_array(node.inputs[1])
        if array is None:
            return None
        axes = [int(a) for a in array.reshape(-1)]
    if not axes:
        noop = node.attributes.get("noop_with_empty_axes")
        return [] if noop is not None and noop.value else range(rank)
    return [a % rank for a in axes] if rank else None


def _last_axis(node: ir.Node, opset: int) -> bool:
    """Whether the softmax normalizes over the last axis (where a mask's rows lie)."""
    attribute = node.attributes.get("axis")
    axis = attribute.value if attribute is not None else (-1 if opset >= 13 else 1)
    if axis == -1:
        return True
    data = node.inputs[0]
    return data is not None and data.shape is not None and axis == len(data.shape) - 1


def _fully_masked_constant(value: Optional[ir.Value], ranges: RangeReader, depth: int = 4):
    """(constant name, row) of a constant mask reaching ``value`` with a row of fills only; None if none does.

    A constant that ``ranges`` already knows to hold only finite values
    smaller in magnitude than ``MASK_FILL`` holds no fill: it is not read.
    """
    frontier = [value]
    for _ in range(depth):
        following = []
        for current in frontier:
            producer = current.producer() if current is not None else None
            if producer is None or producer.op_type not in MASK_PATH:
                continue
            for source in producer.inputs:
                if source is None:
                    continue
                bound = ranges.finite_bound(source)  # known for small weights only (so a constant)
                if bound is not None and bound < -MASK_FILL:  # every value > MASK_FILL: no fill to find
                    continue
                if is_constant(source):
                    row = _masked_row(constant_array(source))
                    if row is not None:
                        return source.name or "?", row
                else:
                    following.append(source)
        frontier = following
    return None


def _masked_row(array: Optional[np.ndarray]) -> Optional[int]:
    """The first row (over the last axis) whose every value is a mask fill; None when no row is."""
    # dtype kind "f": numpy's floating types (what np.issubdtype(.., np.floating) accepts), at a tenth of the cost
    if array is None or array.ndim == 0 or array.size == 0 or array.dtype.kind != "f":
        return None
    if array.shape[-1] < 2 or array.min() > MASK_FILL:  # a row too short, or no fill at all (a NaN min looks on)
        return None
    rows = array.reshape(-1, array.shape[-1])
    full = np.all(rows <= MASK_FILL, axis=-1)
    hits = np.flatnonzero(full)
    return int(hits[0]) if hits.size else None
