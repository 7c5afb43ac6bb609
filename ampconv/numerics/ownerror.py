"""Each LOW node's own error: the node computed in LOW precision from exact float32 inputs.

Validation sees the *propagated* error: a node far downstream of the culprit
drifts too. To name the cause, and to rank nodes for the accuracy search,
every LOW node is measured on its own, in one run:

- a float32 copy of the reference model gets, beside each LOW node, a twin
  that reads the reference's own (exact) input values, rounded to the LOW type
  in the slots that the conversion makes LOW, and whose LOW outputs are
  rounded the same way (``Cast(to=LOW) -> Cast(to=FLOAT)``, as emulation does);
- one onnxruntime session (CPU, optimizations off) runs it per sample and
  returns each twin's outputs next to the originals.

The own error of a node is the worst, over its LOW outputs and samples, of the
twin's error relative to the output's own scale (RMS of the difference over RMS
of the reference), infinite when the twin turns a finite value non-finite. When
the output reaches an error amplifier (Log, a divisor, Sqrt, ...: see
``ampconv.plan.data_guards.AMPLIFIERS``), the RMS of each element's relative error
counts too: the amplifier makes small values' errors as large as big ones'.
Twins exist only for main-graph nodes without subgraphs: onnxruntime cannot
expose tensors inside If/Loop/Scan bodies.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.numerics.collect import run_copy
from ampconv.core.lowtypes import LowType
from ampconv.numerics import modelio
from ampconv.numerics.metrics import relative_rms_error
from ampconv.numerics.emulate import NameMaker, round_trip
from ampconv.core.graphs import all_graphs
from ampconv.numerics.amplifiers import AMPLIFIERS, feeds_amplifier

FLOAT = ir.DataType.FLOAT
_TWIN = "__ampconv_own"


@dataclasses.dataclass(frozen=True)
class LowSlots:
    """Which input and output slots of a node the conversion makes LOW."""

    inputs: Tuple[int, ...]
    outputs: Tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class OwnError:
    """One node's own error, the output where it is worst, and on which sample."""

    node: str
    op_type: str
    error: float  # scaled RMS error; inf for a new NaN/inf
    output: str
    sample: int
    max_abs: float  # the largest absolute difference on that output
    output_error: float = 0.0  # the same error with exact inputs: what rounding the output alone costs


def slots_from_converted(converted: ir.Model) -> Dict[str, LowSlots]:
    """LOW slots of every main-graph node of a converted model, read from its tensor types."""
    low = {ir.DataType.FLOAT16, ir.DataType.BFLOAT16}
    found = {}
    for node in converted.graph:
        if node.op_type == "Cast" and is_default(node):
            continue  # the converter's own casts: their rounding is the LOW node's input rounding
        ins = tuple(i for i, v in enumerate(node.inputs) if v is not None and v.dtype in low)
        outs = tuple(j for j, v in enumerate(node.outputs) if v.dtype in low)
        if outs and node.name:
            found[node.name] = LowSlots(ins, outs)
    return found


def measure(
    reference: ir.Model,
    source: str,
    slots: Mapping[str, LowSlots],
    samples: Iterable,
    low: LowType,
    external: bool = False,
) -> Dict[str, OwnError]:
    """The own error of every node named in ``slots`` that has a twin, over ``samples``.

    ``reference`` is a float32 model (edited in place: pass a copy) whose node
    names match the converted model's; ``source`` names it in messages.
    """
    modelio.ensure_types(reference)

    # Where an amplifier (Log, a divisor, ...) follows, it turns each element's relative error into
    # the result's error: small values count as much as large ones there.
    elementwise = {
        node.name for node in reference.graph
        if node.name in slots and any(feeds_amplifier(out) is not None for out in node.outputs)
    }
    twins = _add_twins(reference, slots, low)
    if not twins:
        return {}
    fetch = sorted({name for pairs in twins.values() for pair in pairs for name in pair})
    results: Dict[str, OwnError] = {}

    def fold(index, _label, _sample, values) -> None:
        for node_name, pairs in twins.items():
            for exact_name, twin_name in pairs:
                exact = values[exact_name]
                error, max_abs = _error(exact, values[twin_name], node_name in elementwise)
                # The part of it that rounding the output alone makes (inputs exact).
                with np.errstate(over="ignore"):  # overflow to inf is what is measured
                    alone = np.asarray(exact, dtype=np.float32).astype(low.numpy).astype(np.float32)
                output_error, _ = _error(exact, alone, node_name in elementwise)
                best = results.get(node_name)
                if best is None or error > best.error:
                    results[node_name] = OwnError(node_name, pairs.op_type, error, exact_name, index, max_abs,
                                                  max(output_error, best.output_error if best else 0.0))

    run_copy(reference, source, "own_error", external, samples, fetch, fold)
    return results


class _Pairs(list):
    """(exact output name, twin output name) pairs of one node, with its op type."""

    op_type: str = ""


def _add_twins(model: ir.Model, slots: Mapping[str, LowSlots], low: LowType) -> Dict[str, _Pairs]:
    graph = model.graph
    names = NameMaker(_TWIN)
    rounded: Dict[ir.Value, ir.Value] = {}
    twins: Dict[str, _Pairs] = {}
    for node in list(graph):
        want = slots.get(node.name or "")
        if want is None or any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
                               for a in node.attributes.values()):
            continue
        inputs = []
        for i, value in enumerate(node.inputs):
            if i in want.inputs and value is not None and value.dtype == FLOAT:
                value = _rounded(graph, value, low, rounded, node, names)
            inputs.append(value)
        twin = ir.Node(
            node.domain, node.op_type, inputs,
            attributes=[_copy_attr(a) for a in node.attributes.values()],
            num_outputs=len(node.outputs), name=f"{node.name}{_TWIN}", overload=node.overload,
        )
        graph.insert_after(node, [twin])
        pairs = _Pairs()
        pairs.op_type = node.op_type
        for j, (exact, out) in enumerate(zip(node.outputs, twin.outputs)):
            out.name = f"{exact.name}{_TWIN}_raw"
            if exact.type is not None:
                out.type, out.shape = exact.type, exact.shape
            if j not in want.outputs or exact.dtype != FLOAT or not exact.name:
                continue
            casts, twin_out = round_trip(out, low.dtype, names)
            twin_out.name = f"{exact.name}{_TWIN}"
            graph.insert_after(twin, casts)
            _expose(graph, exact)
            graph.outputs.append(twin_out)
            pairs.append((exact.name, twin_out.name))
        if pairs:
            twins[node.name] = pairs
    return twins


def _rounded(graph: ir.Graph, value: ir.Value, low: LowType, cache: Dict, before: ir.Node, names) -> ir.Value:
    """``value`` rounded to the LOW type (one round trip per value, placed before its first twin)."""
    if value not in cache:
        casts, cache[value] = round_trip(value, low.dtype, names)
        cache[value].name = names(value.name, "in")
        graph.insert_before(before, casts)
    return cache[value]


def _copy_attr(attr: ir.Attr) -> ir.Attr:
    return ir.Attr(attr.name, attr.type, attr.value, ref_attr_name=attr.ref_attr_name)


def _expose(graph: ir.Graph, value: ir.Value) -> None:
    if value not in list(graph.outputs):
        graph.outputs.append(value)


def scaled_error(exact: np.ndarray, approx: np.ndarray) -> Tuple[float, float]:
    """(``metrics.relative_rms_error``, max |difference| over values finite in both)."""
    error = relative_rms_error(exact, approx)
    if error == 0.0 or math.isinf(error):
        return error, error
    exact64 = np.asarray(exact, dtype=np.float64)
    approx64 = np.asarray(approx, dtype=np.float64)
    both = np.isfinite(exact64) & np.isfinite(approx64)
    return error, float(np.abs(approx64[both] - exact64[both]).max())

def _error(exact: np.ndarray, approx: np.ndarray, elementwise: bool) -> Tuple[float, float]:
    error, max_abs = scaled_error(exact, approx)
    if elementwise:
        error = max(error, relative_error(exact, approx))
    return error, max_abs


def relative_error(exact: np.ndarray, approx: np.ndarray) -> float:
    """RMS over elements of |approx - exact| / |exact| (1 where a non-zero value flushed to 0; 0 where both are 0)."""
    exact = np.asarray(exact, dtype=np.float64).ravel()
    approx = np.asarray(approx, dtype=np.float64).ravel()
    both = np.isfinite(exact) & np.isfinite(approx)
    if not both.any():
        return 0.0
    exact, approx = exact[both], approx[both]
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(exact == 0, np.where(approx == 0, 0.0, 1.0), np.abs(approx - exact) / np.abs(exact))
    return float(np.sqrt(np.mean(np.minimum(rel, 1.0) ** 2)))


def ranked(
    errors: Mapping[str, OwnError],
    names: Sequence[str],
    weight: Mapping[str, float],
    consumers: Mapping[str, Sequence[str]] = None,
    discrete: Iterable[str] = (),
) -> list:
    """``names`` ordered most harmful first.

    A node's score is its own error times ``weight``. A LOW node's twin rounds
    its inputs too, and pinning that node alone does not undo the rounding of
    an input its LOW producer already did: so a producer also scores what its
    measured LOW ``consumers`` (node name -> consumer names) score, and lands
    next to them in the ranking (an unmeasured consumer's median is a
    placeholder, no evidence about its inputs: nothing to inherit). The converse holds for a ``discrete`` node (ArgMax,
    TopK, a comparison: no LOW output of its own): its LOW input slot rounds
    its producer's output again, and that rounding is the harm the weight
    charges to the producer (a different answer); so it scores what its LOW
    producers score and lands next to them. Unmeasured nodes (inside
    subgraphs) use the median own error.
    """
    measured = sorted(e.error for e in errors.values() if math.isfinite(e.error))
    typical = measured[len(measured) // 2] if measured else 1e-3
    position = {name: i for i, name in enumerate(names)}
    links = consumers or {}
    decisive = set(discrete)
    producers: Dict[str, list] = {}
    for producer, readers in links.items():
        for reader in readers:
            if reader in decisive:
                producers.setdefault(reader, []).append(producer)

    def own(name: str) -> float:
        return (errors[name].error if name in errors else typical) * weight.get(name, 1.0)

    def score(name: str) -> float:
        inherited = [own(c) for c in links.get(name, ()) if c in position and c in errors]
        inherited += [own(p) for p in producers.get(name, ()) if p in position]
        return max([own(name), *inherited])

    return sorted(names, key=lambda n: (-score(n), position[n]))


def low_consumers(model: ir.Model, names: Iterable[str]) -> Dict[str, list]:
    """For each node named in ``names`` (subgraphs included), the nodes of ``names`` that read one of its outputs."""
    wanted = set(names)
    found: Dict[str, list] = {}
    for graph in all_graphs(model):
        for node in graph:
            if node.name not in wanted:
                continue
            readers = {use.node.name for out in node.outputs for use in out.uses() if use.node.name in wanted}
            found[node.name] = sorted(readers)
    return found


def op_types(model: ir.Model, names: Iterable[str]) -> Dict[str, str]:
    """The op type of each node named in ``names``, subgraphs included."""
    wanted = set(names)
    return {node.name: node.op_type for graph in all_graphs(model) for node in graph if node.name in wanted}


def amplification(model: ir.Model, names: Optional[Iterable[str]] = None) -> Dict[str, float]:
    """A structural estimate of how much the graph downstream of each node magnifies its error.

    A discrete decision downstream (ArgMax, TopK, a comparison, Round...)
    turns a rounding difference into a different answer: x100, divided by the
    number of ops in between. An op that magnifies relative error (Log, a
    divisor, Pow, Sqrt, a normalization) downstream: x10 likewise. Subgraph
    nodes count the ops of their own body.
    """
    wanted = set(names) if names is not None else None
    weights: Dict[str, float] = {}
    for graph in all_graphs(model):
        for node in graph:
            if wanted is not None and node.name not in wanted:
                continue
            weight = 1.0
            hops = _hops_to(node, lambda n, slot: n.op_type in DISCRETE)
            if hops is not None:
                weight *= 1 + 99 / hops
            hops = _hops_to(node, lambda n, slot: slot in AMPLIFIERS.get(n.op_type, ()))
            if hops is not None:
                weight *= 1 + 9 / hops
            weights[node.name] = weight
    return weights


DISCRETE = frozenset({"ArgMax", "ArgMin", "TopK", "Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal",
                      "Round", "Floor", "Ceil", "Sign", "NonZero", "NonMaxSuppression"})


def _hops_to(node: ir.Node, match, limit: int = 6) -> Optional[int]:
    """How many edges from ``node`` to the nearest consumer that ``match`` accepts (None: not within ``limit``)."""
    frontier, seen = [node], {node}
    for hops in range(1, limit + 1):
        following = []
        for current in frontier:
            for out in current.outputs:
                for use in out.uses():
                    if match(use.node, use.idx):
                        return hops
                    if use.node not in seen:
                        seen.add(use.node)
                        following.append(use.node)
        frontier = following
    return None
