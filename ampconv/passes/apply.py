"""Apply a ``Plan``: retype values, rewrite dtype attributes, insert casts.

Rules (docs/precision.md sec. 8; comments refer to them):
  1. Every float32 value planned LOW gets the LOW dtype.
  2. A LOW source node is retyped through its attribute (Cast.to, Constant.value,
     ConstantOfShape.value, dtype/output_datatype), never by adding a Cast.
  3. Where a consumer slot needs another precision than its value has, one Cast
     per (value, type, graph scope) is shared by all such consumers; a cast of a
     captured value goes inside the subgraph that needs it, unless an enclosing
     graph already has that cast (then the subgraph captures it: fewer nodes, and
     a Loop body does not pay for the cast on every iteration).
  4. A constant (initializer or Constant output) needing another precision is
     copied once, converted, instead of cast at run time.
     Under IR version < 4 the copy is also listed as a graph input, as that
     IR requires of every initializer.
  5. Initializers are stored LOW when every consumer needs LOW, kept float32
     when every consumer needs float32, duplicated once when they disagree.
     Conversion is lazy: the bytes are computed while the model is written.
     An initializer that is also a graph input (a default a caller may feed:
     old exporters list every weight so) is never copied, since a copy would
     not see what the caller feeds: stored LOW it is retyped with its graph
     input (the caller then feeds the LOW type); kept float32, its LOW readers
     read it through a Cast (rule 3).
  6. Graph outputs keep their public names: a LOW value feeding a kept-float32
     output is renamed and the Cast that widens it takes the public name.
  7. With a fallback type (``Plan.fallback``, precision FALLBACK: bfloat16 beside
     float16), each rule above holds for it as for LOW; a cast between the two
     LOW types is one direct Cast, and a weight both need stays float32 with a
     copy per type (each rounded once, from float32).

``ApplyPlanPass`` does this as an in-place ``onnx_ir`` pass; its post-condition
is the Loop/Scan state invariant (``invariants.check_loop_state_types``).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy as np
import onnx
import onnx_ir as ir
from onnx_ir.passes import InPlacePass, PassResult

from ampconv.core.domains import is_default
from ampconv.tensors.chunks import CastTensor
from ampconv.tensors.low_range import to_low
from ampconv.passes.invariants import Rounding, batch_peaks, check_loop_state_types, finite_peak, rounded
from ampconv.core.lowtypes import range_limits
from ampconv.plan import ANY, LOW_DTYPES, Plan, constant_array, is_float
from ampconv.policy import HIGH, LOW
from ampconv.policy.lists import DTYPE_ATTRIBUTE
from ampconv.core.precision import Precision
from ampconv.tensors import tensorsize
from ampconv.core.graphs import all_graphs, subgraphs_of

FALLBACK = Precision.FALLBACK
_LOWS = (LOW, FALLBACK)  # the precisions stored in a 16-bit type


@dataclasses.dataclass
class InitializerFate:
    """What happened to one float32 initializer."""

    name: str
    graph: str
    shape: Tuple[int, ...]
    bytes_before: int
    fate: str  # "LOW", "HIGH", "duplicated"
    bytes_after: int

    def record(self) -> Dict[str, object]:
        """The report's entry: ``dataclasses.asdict`` without its deep copy (thousands per big graph)."""
        return {"name": self.name, "graph": self.graph, "shape": self.shape, "bytes_before": self.bytes_before,
                "fate": self.fate, "bytes_after": self.bytes_after}


@dataclasses.dataclass
class ApplyResult:
    """Counts and facts from applying a plan (for the report)."""

    casts_inserted: int = 0
    constants_copied: int = 0
    attributes_rewritten: int = 0
    values_retyped: int = 0
    outputs_rerouted: int = 0
    initializers: List[InitializerFate] = dataclasses.field(default_factory=list)
    # Initializers that are also graph inputs, stored (and now fed) in a 16-bit type: name -> type key.
    fed_low: Dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """Whether the rewrite changed the model at all."""
        return bool(
            self.casts_inserted
            or self.constants_copied
            or self.attributes_rewritten
            or self.values_retyped
            or self.outputs_rerouted
            or any(f.fate == "LOW" for f in self.initializers)
        )


def fed_low_note(fed_low: Dict[str, str]) -> str:
    """The report's line on initializers that are also graph inputs and now take a 16-bit type (rule 5)."""
    names = sorted(fed_low)
    shown = ", ".join(f"'{name}'" for name in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    types = sorted(set(fed_low.values()))
    return (f"{len(names)} initializer{'s' if len(names) != 1 else ''} that the model also lists as graph inputs "
            f"(weights a caller may feed) now take {' or '.join(types)}, as the nodes reading them do: a caller "
            f"feeding one feeds that type ({shown})")


class _Rewriter:
    def __init__(self, model: ir.Model, plan: Plan, clamp_tensors) -> None:
        self.model = model
        self.plan = plan
        self.low_dtype = LOW_DTYPES[plan.low]
        self.suffix = plan.low
        # Each precision's element type and name tag (rule 7: FALLBACK is the fallback LOW type).
        self.key_of = {LOW: plan.low, FALLBACK: plan.fallback or plan.low}
        self.dtype_of = {LOW: self.low_dtype, FALLBACK: LOW_DTYPES[self.key_of[FALLBACK]], HIGH: ir.DataType.FLOAT}
        self.tag_of = {LOW: plan.low, FALLBACK: self.key_of[FALLBACK], HIGH: "fp32"}
        self.clamp = clamp_tensors
        self.limits = plan.limits  # the limits clamped tensors are brought inside (max_finite, min_positive)
        # The fallback type's own limits: a clamp or a mask fill stored in it is brought inside them.
        self.fallback_limits = range_limits(self.key_of[FALLBACK]) if plan.fallback else None
        self.result = ApplyResult()
        graphs = all_graphs(model)
        self.names: Set[str] = set()
        for graph in graphs:
            self.names.update(v.name for v in graph.inputs)
            self.names.update(graph.initializers)  # keyed by name
            for node in graph:
                self.names.add(node.name)
                self.names.update(v.name for v in node.outputs)
        self.names.discard("")
        self.names.discard(None)
        self.parent: Dict[int, ir.Graph] = {}
        for graph in graphs if len(graphs) > 1 else ():  # one graph: no subgraph has a parent
            for node in graph:
                for sub in subgraphs_of(node) if node.attributes else ():
                    self.parent[id(sub)] = graph
        self.actual: Dict[ir.Value, str] = {}
        self.cast_cache: Dict[Tuple[ir.Value, str, int], ir.Value] = {}
        self.const_cache: Dict[Tuple[ir.Value, str], ir.Value] = {}

    # ------------------------------------------------------------------ names
    def unique(self, base: str) -> str:
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}_{k}"
        self.names.add(name)
        return name

    # ------------------------------------------------------------------ main
    def run(self) -> ApplyResult:
        plan = self.plan
        # Snapshot needs before any dtype changes (is_float reads the dtype).
        uses: List[Tuple[ir.Node, int, ir.Value, str]] = []
        for node, node_plan in plan.nodes.items():
            for i, need in enumerate(node_plan.inputs):
                value = node.inputs[i] if i < len(node.inputs) else None
                if value is not None and need in _NEEDS and is_float(value):
                    uses.append((node, i, value, need))
        outputs: List[Tuple[ir.Graph, int, ir.Value, str]] = []
        for graph, needs in plan.graph_output_needs.items():
            for k, need in enumerate(needs):
                if k < len(graph.outputs) and need in _NEEDS and is_float(graph.outputs[k]):
                    outputs.append((graph, k, graph.outputs[k], need))
        for value, precision in plan.values.items():
            self.actual[value] = precision
        self._convert_initializers(uses, outputs)  # rule 5
        for node, node_plan in plan.nodes.items():  # rule 2
            if node_plan.decision.precision in _LOWS:
                self._retype_source(node, node_plan.decision.precision)
            for attribute in node_plan.attributes:  # the plan's precision attributes (plan.attributes)
                node.attributes[attribute.name] = ir.AttrInt64(attribute.name, attribute.value)
                self.result.attributes_rewritten += 1
        for value, precision in plan.values.items():  # rule 1
            if precision in _LOWS and is_float(value):
                value.dtype = self.dtype_of[precision]
                self.result.values_retyped += 1
        if self.parent:  # outer scopes first (rule 3); a model without subgraphs has one scope
            uses.sort(key=lambda use: self._depth(use[0].graph))
        for node, i, value, need in uses:  # rules 3, 4
            if self._precision_of(value) != need:
                node.replace_input_with(i, self._converted(value, need, node.graph))
        for graph, k, value, need in outputs:  # rule 6
            if self._precision_of(value) != need:
                self._fix_output(graph, k, value, need)
        return self.result

    def _precision_of(self, value: ir.Value) -> str:
        return self.actual.get(value, HIGH)

    # ------------------------------------------------------------ initializers
    def _convert_initializers(self, uses, outputs) -> None:
        needs: Dict[ir.Value, Set[str]] = {}
        for _, _, value, need in uses:
            if value.is_initializer():
                needs.setdefault(value, set()).add(need)
        for _, _, value, need in outputs:
            if value.is_initializer():
                # A kept output initializer stays float32; one keep_io_types leaves
                # free is planned LOW when its values fit (hazard 10).
                needs.setdefault(value, set()).add(need)
        # Weights that are graph inputs keep_io_types names: kept float32 (the plan's interface says which).
        named = {d.name for d in self.plan.interface if d.kind == "input" and d.precision == HIGH}
        batch: List[Tuple[ir.Value, bytes]] = []  # small plain casts, made together below
        for graph in all_graphs(self.model):
            for value in list(graph.initializers.values()):
                if not is_float(value) or value.const_value is None:
                    continue
                wanted = needs.get(value, set())
                before = tensorsize.nbytes(value.const_value)
                shape = tensorsize.dims(value.const_value)
                fed = value.is_graph_input()
                if fed and value.name in named:
                    wanted = wanted | {HIGH}
                if wanted == {LOW}:
                    raw = self._batchable(value)
                    if raw is not None:
                        batch.append((value, raw))
                    else:
                        value.const_value = self._lazy_low(value.const_value, value.name, source=value)
                    value.dtype = self.low_dtype
                    self.actual[value] = LOW
                    fate, after = "LOW", before // 2
                    if fed:
                        self.result.fed_low[value.name or ""] = self.key_of[LOW]
                elif wanted == {FALLBACK}:  # rule 7: stored in the fallback type
                    value.const_value = self._lazy_low(value.const_value, value.name, FALLBACK, source=value)
                    value.dtype = self.dtype_of[FALLBACK]
                    self.actual[value] = FALLBACK
                    fate, after = "LOW", before // 2
                    if fed:
                        self.result.fed_low[value.name or ""] = self.key_of[FALLBACK]
                elif fed:  # float32 kept: its LOW readers cast what the caller feeds (rule 5)
                    self.actual[value] = HIGH
                    fate, after = "HIGH", before
                elif wanted & set(_LOWS):  # float32 kept, a copy per LOW type needed
                    self.actual[value] = HIGH
                    fate, after = "duplicated", before + (before // 2) * len(wanted & set(_LOWS))
                else:
                    self.actual[value] = HIGH
                    fate, after = "HIGH", before
                self.result.initializers.append(
                    InitializerFate(value.name or "", graph.name or "main", shape, before, fate, after)
                )
        self._cast_batch(batch)

    def _batchable(self, value: ir.Value) -> Optional[bytes]:
        """The float32 bytes of a small initializer held in the proto and cast without clamping; else None."""
        if self.clamp.get(value.name or ""):
            return None
        return tensorsize.proto_float32_bytes(value.const_value, EAGER_MAX_ELEMENTS)

    def _cast_batch(self, batch: Sequence[Tuple[ir.Value, bytes]]) -> None:
        """Convert small initializers with one cast over their joined bytes (a bias or scale each, thousands).

        Each gets its slice of the LOW bytes: the same bits as ``to_low`` one
        by one (round to nearest even), without its per-call set-up.
        """
        if not batch:
            return
        joined = np.frombuffer(b"".join(raw for _, raw in batch), dtype="<f4")
        low = to_low(joined, self.plan.low)
        data = low.view(np.uint16).astype("<u2", copy=False).tobytes()  # both LOW types are 16 bits
        peaks = batch_peaks(joined, [len(raw) // 4 for _, raw in batch])
        data_type, offset = self.low_dtype.value, 0
        for (value, raw), peak in zip(batch, peaks):
            count = len(raw) // 4
            # A TensorProto-backed tensor, like the ones read from the file: half of
            # ir.Tensor's set-up, and the writer copies its proto instead of re-encoding it.
            proto = onnx.TensorProto(name=value.name, data_type=data_type, dims=tensorsize.dims(value.const_value),
                                     raw_data=data[2 * offset : 2 * (offset + count)])
            value.const_value = rounded(ir.serde.TensorProtoTensor(proto), Rounding(self.plan.low, peak=peak))
            offset += count

    def _clamp_of(self, name: Optional[str], precision: str):
        """(the clamp of constant ``name`` stored in ``precision``'s type, the limits it brings values inside).

        The planner sets clamps (``--clamp``, a mask fill) against the LOW
        type's limits. Stored in the fallback type, the same clamp brings the
        values inside that type's own limits: a mask fill of float32's lowest,
        which bfloat16 rounds to -inf, becomes bfloat16's mask value (-1e30),
        as it does under ``dtype="bf16"``.
        """
        clamp = self.clamp.get(name or "", False)
        if not clamp or precision == LOW:
            return clamp, self.limits
        return clamp, self.fallback_limits

    def _lazy_low(self, tensor: ir.TensorProtocol, name: Optional[str], precision: str = LOW,
                  source: Optional[ir.Value] = None) -> ir.TensorProtocol:
        """``tensor`` (the constant of ``source``) rounded to ``precision``'s type, clamped as ``_clamp_of`` says."""
        low, dtype = self.key_of[precision], self.dtype_of[precision]
        clamp, limits = self._clamp_of(name, precision)
        if tensorsize.size(tensor) <= EAGER_MAX_ELEMENTS and not isinstance(tensor, ir.ExternalTensor):
            # A small in-memory tensor (a bias, a scale) is converted now: the lazy
            # machinery costs more than the cast, thousands of times on big graphs.
            # Same bits: to_low is numpy's round-to-nearest-even, as the lazy cast is.
            array = tensor.numpy()
            return rounded(ir.Tensor(to_low(array, low, clamp, limits), dtype=dtype, name=name),
                           Rounding(low, limits.low.key if clamp else None, peak=finite_peak(array)))
        # Elementwise, so the streamed write clamps chunk by chunk (chunks.CastTensor).
        convert = (lambda a: to_low(a, low, clamp, limits)) if clamp else None  # None: the plain RNE cast
        return rounded(CastTensor(tensor, dtype, convert, name),
                       Rounding(low, limits.low.key if clamp else None, source=source))

    # ----------------------------------------------------------- conversions
    def _converted(self, value: ir.Value, need: str, scope: ir.Graph) -> ir.Value:
        producer = value.producer()
        if value.is_initializer() and value.const_value is not None and not value.is_graph_input():
            return self._initializer_copy(value, need)
        if producer is not None and producer.op_type == "Constant" and is_default(producer):
            return self._constant_copy(producer, value, need)
        return self._cast(value, need, scope)

    def _depth(self, graph: Optional[ir.Graph]) -> int:
        depth = 0
        while graph is not None and id(graph) in self.parent:
            graph = self.parent[id(graph)]
            depth += 1
        return depth

    def _cast(self, value: ir.Value, need: str, scope: ir.Graph) -> ir.Value:
        key = (value, need, id(scope))
        enclosing: Optional[ir.Graph] = scope
        while enclosing is not None:  # rule 3: reuse a cast of an enclosing scope
            cached = self.cast_cache.get((value, need, id(enclosing)))
            if cached is not None:
                return cached
            enclosing = self.parent.get(id(enclosing))
        dtype, tag = self.dtype_of[need], self.tag_of[need]  # rule 7: fp16 <-> bf16 is one direct Cast
        base = value.name or "tensor"
        cast = ir.Node(
            "",
            "Cast",
            [value],
            [ir.AttrInt64("to", dtype.value)],
            name=self.unique(f"{base}/Cast_to_{tag}"),
            num_outputs=1,
        )
        out = cast.outputs[0]
        out.name = self.unique(f"{base}__{tag}")
        out.dtype = dtype
        out.shape = value.shape
        self._insert(cast, value, scope)
        self.actual[out] = need
        self.cast_cache[key] = out
        self.result.casts_inserted += 1
        return out

    def _insert(self, node: ir.Node, value: ir.Value, scope: ir.Graph) -> None:
        producer = value.producer()
        if producer is not None and producer.graph is scope:
            scope.insert_after(producer, node)
        elif len(scope) > 0:
            scope.insert_before(next(iter(scope)), node)
        else:
            scope.append(node)

    def _initializer_copy(self, value: ir.Value, need: str) -> ir.Value:
        key = (value, need)
        if key in self.const_cache:
            return self.const_cache[key]
        graph = value.graph
        tensor = value.const_value
        if need in _LOWS:
            converted = self._lazy_low(tensor, value.name, need, source=value)
            name = self.unique(f"{value.name}__{self.tag_of[need]}")
            dtype = self.dtype_of[need]
        else:  # a LOW initializer needed in float32 (only for pre-existing LOW data)
            data = tensor.numpy().astype(np.float32)
            converted = ir.Tensor(data)
            name = self.unique(f"{value.name}__fp32")
            dtype = ir.DataType.FLOAT
        converted.name = name
        copy = ir.Value(name=name, shape=value.shape, type=ir.TensorType(dtype), const_value=converted)
        graph.register_initializer(copy)
        if graph is self.model.graph and self.model.ir_version is not None and self.model.ir_version < 4:
            # IR < 4: every initializer must also be a graph input (rule 4).
            graph.inputs.append(copy)
        self.actual[copy] = need
        self.const_cache[key] = copy
        self.result.constants_copied += 1
        return copy

    def _constant_copy(self, producer: ir.Node, value: ir.Value, need: str) -> ir.Value:
        key = (value, need)
        if key in self.const_cache:
            return self.const_cache[key]
        array = constant_array(value) if need in _LOWS else None
        if need in _LOWS and array is None:
            return self._cast(value, need, producer.graph)
        if need in _LOWS:
            clamp, limits = self._clamp_of(value.name, need)
            data = to_low(array, self.key_of[need], clamp, limits)
            tensor = rounded(ir.Tensor(data, dtype=self.dtype_of[need]),
                             Rounding(self.key_of[need], limits.low.key if clamp else None, peak=finite_peak(array)))
            tag = self.tag_of[need]
        else:
            attr = producer.attributes.get("value")
            if attr is None or attr.type != ir.AttributeType.TENSOR:
                return self._cast(value, need, producer.graph)
            tensor = ir.Tensor(attr.value.numpy().astype(np.float32))
            tag = "fp32"
        node = ir.Node(
            "",
            "Constant",
            [],
            [ir.AttrTensor("value", tensor)],
            name=self.unique(f"{producer.name or 'Constant'}__{tag}"),
            num_outputs=1,
        )
        out = node.outputs[0]
        out.name = self.unique(f"{value.name}__{tag}")
        out.dtype = tensor.dtype
        out.shape = value.shape
        producer.graph.insert_after(producer, node)
        self.actual[out] = need
        self.const_cache[key] = out
        self.result.constants_copied += 1
        return out

    # ---------------------------------------------------------- source retype
    def _retype_source(self, node: ir.Node, precision: str = LOW) -> None:
        if node.domain != "":
            return
        op = node.op_type
        low, key = self.dtype_of[precision], self.key_of[precision]
        if op == "Constant":
            array = constant_array(node.outputs[0])
            if array is None:
                return
            clamp, limits = self._clamp_of(node.outputs[0].name, precision)
            data = to_low(array, key, clamp, limits)
            for name in ("value", "value_float", "value_floats"):
                if name in node.attributes:
                    del node.attributes[name]
            node.attributes["value"] = ir.AttrTensor("value", rounded(
                ir.Tensor(data, dtype=low), Rounding(key, limits.low.key if clamp else None, peak=finite_peak(array))))
        elif op == "ConstantOfShape":
            attr = node.attributes.get("value")
            array = attr.value.numpy() if attr is not None else np.zeros((1,), np.float32)
            node.attributes["value"] = ir.AttrTensor(
                "value", rounded(ir.Tensor(to_low(array, key), dtype=low), Rounding(key, peak=finite_peak(array)))
            )
        elif op in DTYPE_ATTRIBUTE:
            name = DTYPE_ATTRIBUTE[op]
            node.attributes[name] = ir.AttrInt64(name, low.value)
        else:
            return
        self.result.attributes_rewritten += 1

    # ---------------------------------------------------------------- outputs
    def _fix_output(self, graph: ir.Graph, k: int, value: ir.Value, need: str) -> None:
        if graph is self.model.graph or self._produced_here(value, graph):
            # Rule 6: the widened (or narrowed) cast output takes the public name. In a subgraph too:
            # an exporter may name a branch output as the If output it becomes (optimum's merged
            # decoder), and onnx's inference reads a subgraph name the outer scope also has with the
            # outer type; the value that stays inside, in the other type, must not keep that name.
            public = value.name
            value.name = self.unique(f"{public}__{self.tag_of.get(self._precision_of(value), 'fp32')}")
            self.names.discard(public)
            out = self._cast(value, need, graph)
            self.names.discard(out.name)
            out.name = public
            self.names.add(public)
            cast = out.producer()
            cast.name = self.unique(f"{public}/Cast_output")
        else:
            out = self._converted(value, need, graph)
            if out.is_graph_output() or out.is_graph_input() or out.is_initializer():
                # A value may appear once in outputs: give this slot its own Identity.
                ident = ir.Node("", "Identity", [out], name=self.unique(f"{value.name}/Identity"), num_outputs=1)
                ident.outputs[0].name = self.unique(f"{value.name}__out")
                ident.outputs[0].dtype = out.dtype
                ident.outputs[0].shape = out.shape
                graph.append(ident)
                out = ident.outputs[0]
        graph.outputs[k] = out
        self.result.outputs_rerouted += 1


    @staticmethod
    def _produced_here(value: ir.Value, graph: ir.Graph) -> bool:
        """Whether ``value`` is made by a node of ``graph`` (not a graph input, an initializer or an outer value)."""
        producer = value.producer()
        return producer is not None and producer.graph is graph and value.name is not None


# The slot needs the rewrite serves with a value of that precision (ANY needs nothing).
_NEEDS = (LOW, HIGH, FALLBACK)

# In-memory tensors of at most this many elements are converted when the plan is
# applied instead of lazily while writing (16 KiB of float32).
EAGER_MAX_ELEMENTS = 4096


class ApplyPlanPass(InPlacePass):
    """Rewrite the model in place according to ``plan`` (rules 1-6 above); ``result`` has the counts.

    Post-condition: every Loop/Scan state keeps its type across an iteration
    (``check_loop_state_types`` raises ``ConversionError`` otherwise).
    """

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.result = ApplyResult()

    def call(self, model: ir.Model) -> PassResult:
        self.result = _Rewriter(model, self.plan, dict(self.plan.clamp_tensors)).run()
        return PassResult(model, modified=self.result.changed)

    def ensures(self, model: ir.Model) -> None:
        check_loop_state_types(model)


__all__ = ["ApplyPlanPass", "ApplyResult", "InitializerFate", "ANY"]


