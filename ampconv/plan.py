"""Decide a precision for every node, with the rule that decided it (POLICY.md).

The planner only reads the model. Its output, a ``Plan``, says for every node:
its precision (LOW, HIGH or NONE when it carries no float32 data), the rule and
a human reason, the node a gray op followed, what each input slot needs and
what each output will be. Rewrite passes apply the plan; reports print it.

Rules, in the order they are tried for one node (comments refer to them):
  1. no float32 data in the node's main type variable -> NONE.
  2. hard: sequence/optional types, quantization ops, no schema, BitCast,
     float32 tensor attributes, a float32-only function body, a Scatter
     reduction onnxruntime cannot run in LOW -> HIGH.
  3. hard: the schema at the model's opset does not admit the LOW type -> HIGH.
  4. user: --keep-fp32 regex or --block-op -> HIGH.
  5. hard: a constant input out of the LOW range -> HIGH (unless --clamp).
  6. user: --force-low regex -> LOW.
  7. level table: WHITE/BLACK/UNLISTED (and everything at O3).
  8. gray rule: no voters -> FREE; voters agree -> follow; disagree -> HIGH.
Then a backward pass (sec. 4): FREE nodes become LOW iff every float consumer
is LOW (else HIGH); transparent gray HIGH nodes flip to LOW on the same
condition. A main-graph output that keep_io_types does not keep counts as a
LOW consumer (the user asked for a converted interface) and is cast down if
its producer is float32, unless its values are known not to fit the LOW type
(a producer pinned by an overflowing constant, a constant that does not fit,
or a transparent node forwarding one): then it stays float32 and the plan
warns. Structural nodes (If/Loop/Scan) are planned through their subgraphs
(sec. 5); their own slots obey their schema at the model's opset like any
op's (If and Loop take bfloat16 only from opset 16), and a slot it refuses
keeps the node float32 (rule ``hard-schema``), the subgraph casting up what
flows out.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import onnx_ir as ir

from ampconv.config import Config
from ampconv.constants import RangeStats, range_stats
from ampconv.chunks import read_chunks, release_mapped
from ampconv.policy import BLACK, HIGH, LOW, Policy
from ampconv.policy.mixlist import op_key
from ampconv.policy.lists import (
    ANY_TYPE_INPUT,
    FLOAT32_FUNCTION_BODY,
    QUANTIZATION,
    REDUCTION_NEEDS_FLOAT32,
    STRUCTURAL,
    behaviour_kind,
)
from ampconv.schema import LOW_TYPE_STRINGS, OpInfo, first_opset_allowing, loop_slots, normalize_domain, op_info

NONE = "NONE"
FREE = "FREE"  # transient: decided by consumers in the backward pass
ANY = "ANY"  # input slot requirement: any type, no cast needed
FIXED = "FIXED"  # input slot requirement: keeps its original type

LOW_DTYPES = {"fp16": ir.DataType.FLOAT16, "bf16": ir.DataType.BFLOAT16}


@dataclasses.dataclass(frozen=True)
class Decision:
    """The precision of one node and why."""

    precision: str  # LOW, HIGH or NONE
    rule: str  # short machine-readable rule id
    reason: str  # one human sentence
    follows: Optional[str] = None  # gray rule: the node (or input) it followed


@dataclasses.dataclass(frozen=True)
class ConstantNote:
    """A constant whose values do not fit the LOW type, and what was done."""

    tensor: str
    consumer: str
    stats: RangeStats
    action: str  # "pinned" (consumer kept HIGH), "clamped", "mask", "reported"


@dataclasses.dataclass
class NodePlan:
    """Everything the rewrite needs about one node."""

    decision: Decision
    inputs: Tuple[Optional[str], ...] = ()  # per slot: LOW, HIGH, ANY, or None (not float)
    outputs: Tuple[Optional[str], ...] = ()  # per slot: LOW, HIGH or None (not float)


@dataclasses.dataclass
class Plan:
    """The decisions for a whole model (all graphs)."""

    low: str
    level: str
    nodes: Dict[ir.Node, NodePlan]
    values: Dict[ir.Value, str]  # float32 activations and graph inputs -> LOW/HIGH
    graph_output_needs: Dict[ir.Graph, Tuple[Optional[str], ...]]
    constants: List[ConstantNote]
    clamp_tensors: Mapping[str, object] = dataclasses.field(default_factory=dict)
    # For the report's warnings: what the plan did against the user's request, and why.
    warnings: List[str] = dataclasses.field(default_factory=list)

    def count(self, precision: str) -> int:
        """Number of nodes with this precision."""
        return sum(1 for p in self.nodes.values() if p.decision.precision == precision)


def is_float(value: Optional[ir.Value]) -> bool:
    """Only tensor(float) is ever a conversion candidate (POLICY.md preamble)."""
    return value is not None and isinstance(value.type, ir.TensorType) and value.dtype == ir.DataType.FLOAT


def is_constant(value: ir.Value) -> bool:
    """Initializers and Constant outputs never vote (converting them is free)."""
    if value.is_initializer() or value.const_value is not None:
        return True
    producer = value.producer()
    return producer is not None and producer.op_type == "Constant" and normalize_domain(producer.domain) == ""


def constant_array(value: ir.Value):
    """The float32 numpy data of a constant value, or None."""
    tensor = value.const_value
    if tensor is None:
        producer = value.producer()
        if producer is None or producer.op_type != "Constant":
            return None
        attr = producer.attributes.get("value")
        if attr is not None and attr.type == ir.AttributeType.TENSOR:
            tensor = attr.value
        else:
            for name in ("value_float", "value_floats"):
                a = producer.attributes.get(name)
                if a is not None:
                    import numpy as np

                    return np.asarray(a.value, dtype=np.float32)
            return None
    try:
        array = tensor.numpy()
    except Exception:  # unreadable data is reported by the loader, not here
        return None
    return array


@dataclasses.dataclass(frozen=True)
class _Facts:
    info: OpInfo
    main_in: Tuple[int, ...]  # float inputs in the main type variable
    main_out: Tuple[int, ...]  # float outputs in the main type variable
    any_in: Tuple[int, ...]  # inputs accepting any type


def _reduces(node: ir.Node) -> bool:
    """Whether a Scatter node combines values (``reduction`` other than ``none``)."""
    attr = node.attributes.get("reduction")
    return attr is not None and attr.value not in ("none", b"none")


def _tensor_stats(tensor: ir.TensorProtocol, low: str) -> Optional[RangeStats]:
    """Range facts of a float32 tensor, read chunk by chunk; None when unreadable."""
    try:
        # Streamed chunk by chunk and unmapped after: RSS must not grow with the model.
        return range_stats(None, low, chunks=read_chunks(tensor))
    except Exception:  # unreadable data is reported by the loader, not here
        return None
    finally:
        release_mapped(tensor)


class Planner:
    """Builds a ``Plan``; one instance per conversion (no module-level state)."""

    def __init__(
        self, model: ir.Model, policy: Policy, config: Config, runtime_pins: Optional[Mapping[str, str]] = None
    ) -> None:
        self.model = model
        self.runtime_pins = dict(runtime_pins or {})
        self.policy = policy
        self.config = config
        self.low = config.dtype
        self.low_type = LOW_TYPE_STRINGS[config.dtype]
        self.opsets = {normalize_domain(d): v for d, v in model.opset_imports.items()}
        self.keep_fp32 = [re.compile(p) for p in config.keep_fp32]
        self.force_low = [re.compile(p) for p in config.force_low]
        self.block_ops = {op_key(o) for o in config.block_ops}
        self.nodes: Dict[ir.Node, NodePlan] = {}
        self.decisions: Dict[ir.Node, Decision] = {}
        self.values: Dict[ir.Value, str] = {}
        self.facts: Dict[ir.Node, _Facts] = {}
        self.graph_output_needs: Dict[ir.Graph, Tuple[Optional[str], ...]] = {}
        self.structural_slots: Dict[ir.Node, Tuple[Tuple, Tuple]] = {}
        self.constants: List[ConstantNote] = []
        self._stats: Dict[ir.Value, Optional[RangeStats]] = {}
        self._clamp: Dict[str, object] = {}  # tensor -> True (clamp) or "mask"
        self.warnings: List[str] = []

    # ----------------------------------------------------------------- driver
    def run(self) -> Plan:
        """Plan the main graph (and, through structural nodes, every subgraph)."""
        graph = self.model.graph
        keep = self._kept_io_names()
        for value in graph.inputs:
            if is_float(value):
                self.values[value] = HIGH if value.name in keep else LOW
        needs = tuple(
            (HIGH if v.name in keep else None) if is_float(v) else None for v in graph.outputs
        )
        self.graph_output_needs[graph] = needs
        self._plan_graph(graph)
        self._share_low_initializers()
        # Main-graph outputs the user did not keep float32 are LOW (constants that do not fit excepted).
        self.graph_output_needs[graph] = tuple(
            need if need is not None or not is_float(v) else self._unkept_output_need(v)
            for v, need in zip(graph.outputs, needs)
        )
        self._finalize()
        return Plan(
            low=self.low,
            level=self.policy.level,
            nodes=self.nodes,
            values=self.values,
            graph_output_needs=self.graph_output_needs,
            constants=self.constants,
            clamp_tensors=dict(self._clamp),
            warnings=list(self.warnings),
        )

    def _share_low_initializers(self) -> None:
        """Avoid a float32 duplicate of a weight that LOW consumers already need.

        A transparent node (e.g. an embedding Gather) that reads an initializer
        other consumers need LOW, and reads no activation in its data slots, can
        read the LOW copy instead and have its (small) output cast up: same bits,
        and the weight is stored once.
        """
        for graph in self.model.graphs():
            for value in graph.initializers.values():
                if not is_float(value):
                    continue
                needs = {}
                for use in value.uses():
                    needs.setdefault(self._slot_need(use.node, use.idx), []).append(use.node)
                if LOW not in needs or HIGH not in needs:
                    continue
                readers = needs[HIGH]
                if all(self._can_read_low(node) for node in readers):
                    for node in readers:
                        self._set(
                            node,
                            Decision(
                                LOW,
                                "transparent-shared",
                                f"transparent: reads the {self.low} copy of {value.name} (stored once)",
                            ),
                        )

    def _can_read_low(self, node: ir.Node) -> bool:
        decision = self.decisions.get(node)
        facts = self.facts.get(node)
        if decision is None or facts is None or node in self.structural_slots:
            return False
        if decision.rule not in ("gray-follow", "gray-promote", "free-high"):
            return False
        if behaviour_kind(node.op_type, normalize_domain(node.domain)) != "transparent":
            return False
        if self.low_type not in facts.info.allowed(facts.info.main_type()):
            return False
        return all(is_constant(node.inputs[i]) for i in facts.main_in)

    def _unkept_output_need(self, value: ir.Value) -> str:
        """The precision of a main-graph output that keep_io_types leaves free.

        LOW (the user asked for a converted interface), except where the values
        are known not to fit the LOW type: casting them down would turn them
        into inf or 0, so the output stays float32 and the plan warns.
        """
        if is_constant(value):
            # An initializer output (hazard 10): converting it is free, unless its
            # values do not fit the LOW type.
            stats = self._range(value)
            if stats is not None and not stats.pins():
                return LOW
            why = "its values cannot be read" if stats is None else _misfit(stats, value.name or "?", self.low)
            self.warnings.append(f"output {value.name!r} kept float32 despite --no-keep-io-types: {why}")
            return HIGH
        if value not in self.values or self.values[value] == FREE:
            return HIGH
        misfit = self._known_misfit(value)
        if misfit is not None:
            self.warnings.append(f"output {value.name!r} kept float32 despite --no-keep-io-types: {misfit}")
            return HIGH
        # A float32 producer (e.g. a BLACK Softmax) gets a cast down at the output.
        return LOW

    def _known_misfit(self, value: ir.Value, depth: int = 8) -> Optional[str]:
        """Why ``value``'s data is known not to fit the LOW type, or None.

        Known: its producer was pinned float32 by a constant beyond the LOW
        range, or it is a constant that does not fit, or a transparent float32
        node (Reshape, Concat, ...) forwards such a value (same numbers).
        """
        if is_constant(value):
            stats = self._range(value)
            return _misfit(stats, value.name or "?", self.low) if stats is not None and stats.pins() else None
        producer = value.producer()
        if producer is None or depth == 0:
            return None
        decision = self.decisions.get(producer)
        if decision is None or decision.precision != HIGH:
            return None
        facts = self.facts.get(producer)
        if facts is None:
            return None
        if decision.rule == "hard-constant":
            # An overflowing constant shows in the result (x + 1e6); an underflow
            # pin (an epsilon) keeps the op's meaning, not an out-of-range result.
            for i in facts.main_in:
                stats = self._range(producer.inputs[i]) if is_constant(producer.inputs[i]) else None
                if stats is not None and stats.overflow:
                    what = _misfit(stats, producer.inputs[i].name or "?", self.low)
                    return f"its producer {producer.name or producer.op_type} is float32: {what}"
            return None
        if behaviour_kind(producer.op_type, normalize_domain(producer.domain)) != "transparent":
            return None
        for i in facts.main_in:
            misfit = self._known_misfit(producer.inputs[i], depth - 1)
            if misfit is not None:
                return misfit
        return None

    def _kept_io_names(self) -> set:
        keep = self.config.keep_io_types
        graph = self.model.graph
        names = {v.name for v in graph.inputs} | {v.name for v in graph.outputs}
        if keep is True:
            return names
        if keep is False:
            return set()
        unknown = sorted(set(keep) - names)
        if unknown:
            from ampconv.errors import UsageError

            raise UsageError(f"--keep-io-types names {', '.join(unknown)}: not a graph input or output")
        return set(keep)

    def _plan_graph(self, graph: ir.Graph) -> None:
        order = list(graph)  # ONNX requires topological order; ties keep file order
        for node in order:
            self._forward(node)
        self._backward(graph, order)

    # ---------------------------------------------------------------- forward
    def _forward(self, node: ir.Node) -> None:
        if node.op_type in STRUCTURAL and normalize_domain(node.domain) == "":
            self._plan_structural(node)
            return
        decision = self._decide(node)
        self.decisions[node] = decision
        facts = self.facts.get(node)
        for j, value in enumerate(node.outputs):
            if not is_float(value):
                continue
            if facts is not None and j in facts.main_out and decision.precision in (LOW, FREE):
                self.values[value] = decision.precision
            else:
                self.values[value] = HIGH

    def _facts(self, node: ir.Node) -> _Facts:
        domain = normalize_domain(node.domain)
        opset = self.opsets.get(domain, 1)
        info = op_info(domain, node.op_type, opset)
        if not info.known:
            facts = _Facts(info, (), (), ())
        else:
            main = info.main_type()
            any_in: Tuple[int, ...] = ()
            if domain == "" and node.op_type in ANY_TYPE_INPUT:
                any_in = (0,)
            main_in = tuple(
                i
                for i, v in enumerate(node.inputs)
                if main is not None and info.input_type(i) == main and is_float(v) and i not in any_in
            )
            main_out = tuple(
                j for j, v in enumerate(node.outputs) if main is not None and info.output_type(j) == main and is_float(v)
            )
            if domain == "" and node.op_type in ("Shape", "Size"):
                main_in, main_out = (), ()
            facts = _Facts(info, main_in, main_out, any_in)
        self.facts[node] = facts
        return facts

    def _decide(self, node: ir.Node) -> Decision:
        facts = self._facts(node)
        domain = normalize_domain(node.domain)
        op = node.op_type if domain == "" else f"{domain}::{node.op_type}"
        has_float = any(is_float(v) for v in list(node.inputs) + list(node.outputs))
        # Case 2 (before case 1: an unknown op's float tensors must stay float32).
        if not facts.info.known:
            if has_float:
                return Decision(HIGH, "hard-no-schema", f"hard: no known schema for {op}; kept float32")
            return Decision(NONE, "no-float", "no float32 tensors")
        # Case 1.
        if not facts.main_in and not facts.main_out:
            return Decision(NONE, "no-float", "no float32 data in its main type")
        main = facts.info.main_type()
        unknown = [
            v.name
            for i, v in enumerate(node.inputs)
            if v is not None and v.type is None and facts.info.input_type(i) == main
        ]
        if unknown:
            # Shape inference could not type this input (e.g. it comes from an op
            # of an unknown domain): its real type may be float32, so stay float32.
            return Decision(HIGH, "hard-unknown-type", f"hard: type of input {unknown[0]!r} is unknown; kept float32")
        if _has_container_types(node):
            return Decision(HIGH, "hard-container", "hard: sequence/optional types are kept float32")
        if behaviour_kind(node.op_type, domain) != "source" and any(
            a.type == ir.AttributeType.TENSOR and a.value is not None and a.value.dtype == ir.DataType.FLOAT
            for a in node.attributes.values()
        ):
            # e.g. TreeEnsemble: its float32 tensor attributes must match the input type.
            return Decision(HIGH, "hard-tensor-attribute", "hard: float32 tensor attributes tie the node to float32")
        if domain == "" and node.op_type == "BitCast":
            return Decision(HIGH, "hard-bitcast", "hard: BitCast reinterprets bits; its types are its meaning")
        if domain == "" and node.op_type in FLOAT32_FUNCTION_BODY:
            return Decision(
                HIGH, "hard-function-body", f"hard: {node.op_type}'s ONNX function body only type-checks in float32"
            )
        if domain == "" and node.op_type in REDUCTION_NEEDS_FLOAT32 and _reduces(node):
            return Decision(
                HIGH,
                "hard-runtime-kernel",
                f"hard: onnxruntime's CPU provider runs {node.op_type} with a reduction only in float32",
            )
        if domain == "" and node.op_type in QUANTIZATION or domain == "ai.onnx.preview.training":
            return Decision(HIGH, "hard-quantization", f"hard: {node.op_type} is a quantization/training op")
        # Case 3.
        main = facts.info.main_type()
        if self.low_type not in facts.info.allowed(main):
            opset = self.opsets.get(domain, 1)
            later = first_opset_allowing(domain, node.op_type, opset, self.low)
            hint = f"; allowed from opset {later}" if later else ""
            return Decision(
                HIGH,
                "hard-schema",
                f"hard: {node.op_type}.{main} does not accept {self.low_type[7:-1]} at opset {opset}{hint}",
            )
        # Case 4.
        name = node.name or ""
        if name in self.runtime_pins:
            return Decision(HIGH, "runtime-pin", self.runtime_pins[name])
        if op in self.block_ops:
            return Decision(HIGH, "user-block-op", f"user: --block-op {op}")
        for pattern in self.keep_fp32:
            if pattern.search(name):
                return Decision(HIGH, "user-keep-fp32", f"user: --keep-fp32 {pattern.pattern!r}")
        # Case 5.
        pinned = self._constant_guard(node, facts)
        if pinned is not None:
            return pinned
        # Case 6.
        for pattern in self.force_low:
            if pattern.search(name):
                return Decision(LOW, "user-force-low", f"user: --force-low {pattern.pattern!r}")
        # Case 7.
        op_class = self.policy.class_of(domain, node.op_type)
        rule = self.policy.rule(op_class)
        # Sources (Constant, Cast to float, ...) follow their consumers even at O3:
        # retyping them is free, and forcing them LOW would only add casts back.
        kind = behaviour_kind(node.op_type, domain)
        if self.policy.level == "O3" and kind != "source":
            return Decision(LOW, "level-O3", "level O3: everything LOW")
        if self.policy.level == "O3":  # a source: decided by the gray rule (FREE)
            return self._gray(node, facts)
        if rule == LOW:
            return Decision(LOW, op_class.lower(), f"{op_class.lower()} list at {self.policy.level}")
        if rule == HIGH:
            why = " (range or accumulated rounding)" if op_class == BLACK else ""
            return Decision(HIGH, op_class.lower(), f"{op_class.lower()} list at {self.policy.level}{why}")
        # Case 8: gray rule.
        return self._gray(node, facts)

    def _gray(self, node: ir.Node, facts: _Facts) -> Decision:
        votes: List[Tuple[str, str]] = []
        for i in facts.main_in:
            value = node.inputs[i]
            if is_constant(value):
                continue
            precision = self.values.get(value)
            if precision is None or precision == FREE:
                continue
            votes.append((precision, _origin(value)))
        if not votes:
            return Decision(FREE, "gray-free", "gray: no activation inputs; follows its consumers")
        kinds = {p for p, _ in votes}
        if len(kinds) == 1:
            precision = votes[0][0]
            return Decision(precision, "gray-follow", f"gray: follows {votes[0][1]}", follows=votes[0][1])
        return Decision(HIGH, "gray-promote", "gray: inputs disagree; promoted to float32")

    def _constant_guard(self, node: ir.Node, facts: _Facts) -> Optional[Decision]:
        for i in facts.main_in:
            value = node.inputs[i]
            if not is_constant(value):
                continue
            stats = self._range(value)
            if stats is None or not (stats.overflow or stats.underflow):
                continue
            tensor = value.name or "?"
            if stats.mask_fill is not None and not stats.underflow and _feeds_softmax(node):
                # Attention mask (hazard 6): a single huge negative fill added to
                # scores before a softmax. Replacing it by a finite, very negative
                # LOW value keeps softmax's zeros and avoids NaN rows.
                self.constants.append(ConstantNote(tensor, node.name or "", stats, "mask"))
                self._clamp[tensor] = "mask"
                continue
            if stats.overflow and self.config.clamp:
                self.constants.append(ConstantNote(tensor, node.name or "", stats, "clamped"))
                self._clamp.setdefault(tensor, True)
                continue
            if stats.pins():
                self.constants.append(ConstantNote(tensor, node.name or "", stats, "pinned"))
                if stats.overflow:
                    what = f"constant {stats.example_overflow:.3g} in {tensor} exceeds {self.low}"
                else:
                    what = f"constant {stats.example_underflow:.3g} in {tensor} underflows to 0 in {self.low}"
                return Decision(HIGH, "hard-constant", f"hard: {what} (use --clamp to clamp instead)")
            self.constants.append(ConstantNote(tensor, node.name or "", stats, "reported"))
        return None

    def _range(self, value: ir.Value) -> Optional[RangeStats]:
        if value not in self._stats:
            tensor = value.const_value
            if tensor is not None and tensor.dtype == ir.DataType.FLOAT:
                self._stats[value] = _tensor_stats(tensor, self.low)
            else:
                array = constant_array(value)
                self._stats[value] = None if array is None else range_stats(array, self.low)
                del array
                release_mapped(tensor)  # RSS must not grow with the model
        return self._stats[value]

    # --------------------------------------------------------------- backward
    def _backward(self, graph: ir.Graph, order: Sequence[ir.Node]) -> None:
        for node in reversed(order):
            if node in self.structural_slots:
                continue
            decision = self.decisions[node]
            facts = self.facts.get(node)
            if facts is None or not facts.main_out:
                if decision.precision == FREE:
                    self._set(node, Decision(HIGH, "gray-free", "gray: no activation inputs and no float outputs"))
                continue
            flippable = decision.precision == FREE or (
                decision.precision == HIGH
                and decision.rule in ("gray-follow", "gray-promote")
                and behaviour_kind(node.op_type, normalize_domain(node.domain)) == "transparent"
            )
            if not flippable:
                continue
            needs = self._consumer_needs(node, facts)
            all_low = bool(needs) and all(n == LOW for n in needs)
            if decision.precision == FREE:
                if all_low:
                    self._set(node, Decision(LOW, "free-low", "free: all float consumers are LOW"))
                else:
                    self._set(node, Decision(HIGH, "free-high", "free: a consumer needs float32"))
            elif all_low:
                self._set(
                    node,
                    Decision(LOW, "transparent-low", "transparent: all consumers LOW; cast moved upstream (same bits)"),
                )

    def _set(self, node: ir.Node, decision: Decision) -> None:
        self.decisions[node] = decision
        facts = self.facts[node]
        for j in facts.main_out:
            self.values[node.outputs[j]] = decision.precision

    def _consumer_needs(self, node: ir.Node, facts: _Facts) -> List[str]:
        needs: List[str] = []
        for j in facts.main_out:
            value = node.outputs[j]
            for use in value.uses():
                need = self._slot_need(use.node, use.idx)
                if need is not None and need != ANY:
                    needs.append(need)
            if value.is_graph_output():
                for graph in [value.graph] if value.graph is not None else []:
                    need = self.graph_output_needs.get(graph, ())
                    index = [i for i, v in enumerate(graph.outputs) if v is value]
                    for i in index:
                        n = need[i] if i < len(need) else None
                        if n is None and graph is self.model.graph:
                            # An output keep_io_types does not keep accepts LOW,
                            # unless its values are known not to fit.
                            n = LOW if self._known_misfit(value) is None else HIGH
                        needs.append(n if n is not None else "UNKNOWN")
        return needs

    def _slot_need(self, node: ir.Node, index: int) -> Optional[str]:
        """What input slot ``index`` of ``node`` needs: LOW, HIGH, ANY or None."""
        if node in self.structural_slots:
            inputs, _ = self.structural_slots[node]
            return inputs[index] if index < len(inputs) else None
        value = node.inputs[index]
        if not is_float(value):
            return None
        facts = self.facts.get(node)
        decision = self.decisions.get(node)
        if facts is None or decision is None:
            return HIGH
        if index in facts.any_in:
            return ANY
        if index in facts.main_in and decision.precision in (LOW, HIGH):
            return decision.precision
        if index in facts.main_in and decision.precision == FREE:
            return "UNKNOWN"
        return HIGH  # FIXED slot, NONE node, unknown op: keeps float32

    # ------------------------------------------------------------- structural
    def _plan_structural(self, node: ir.Node) -> None:
        """Plan an If/Loop/Scan through its subgraphs; its own slots obey its schema like any op's."""
        blocked = self._structural_blocked(node)
        if node.op_type == "If":
            self._plan_if(node, blocked)
        else:
            self._plan_loop_like(node, blocked)
        inputs, outputs = self.structural_slots[node]
        for value, precision in zip(node.outputs, outputs):
            if precision is not None:
                self.values[value] = precision
        low_out = any(p == LOW for p in outputs)
        precision = LOW if low_out else (HIGH if any(p == HIGH for p in outputs) else NONE)
        floats = [p for p in list(inputs) + list(outputs) if p in (LOW, HIGH)]
        if blocked is not None and floats:
            self.decisions[node] = Decision(HIGH, "hard-schema", blocked)
            return
        self.decisions[node] = Decision(
            precision, "structural", f"{node.op_type}: outputs follow its subgraphs ({_summary(outputs)})"
        )

    def _structural_blocked(self, node: ir.Node) -> Optional[str]:
        """Why the node's own schema keeps its float slots float32, or None when it admits LOW.

        If and Loop before opset 16 and Scan before its bfloat16 opset type
        their outputs and loop-carried values (V) without bfloat16: LOW slots
        there fail the checker however the subgraphs are planned.
        """
        opset = self.opsets.get("", 1)
        info = op_info("", node.op_type, opset)
        if not info.known:
            return f"hard: no known schema for {node.op_type} at opset {opset}; kept float32"
        slots = [info.output_type(j) for j, v in enumerate(node.outputs) if is_float(v)]
        slots += [info.input_type(i) for i, v in enumerate(node.inputs) if is_float(v)]
        refused = sorted({t for t in slots if t is not None and self.low_type not in info.allowed(t)})
        if not refused:
            return None
        later = first_opset_allowing("", node.op_type, opset, self.low)
        hint = f"; allowed from opset {later}" if later else ""
        return (
            f"hard: {node.op_type}.{refused[0]} does not accept {self.low_type[7:-1]} at opset {opset}{hint}; "
            "its outputs and loop-carried values stay float32"
        )

    def _plan_if(self, node: ir.Node, blocked: Optional[str]) -> None:
        branches = [node.attributes[k].value for k in ("then_branch", "else_branch") if k in node.attributes]
        for branch in branches:
            # A blocked If takes float32 from both branches: their producers plan for that.
            self.graph_output_needs[branch] = tuple(
                HIGH if blocked is not None and is_float(v) else None for v in branch.outputs
            )
            self._plan_graph(branch)
        outputs: List[Optional[str]] = []
        for j, value in enumerate(node.outputs):
            if not is_float(value):
                outputs.append(None)
                continue
            precs = [self._value_precision(b.outputs[j]) for b in branches if j < len(b.outputs)]
            low = blocked is None and precs and all(p == LOW for p in precs)
            outputs.append(LOW if low else HIGH)
        for branch in branches:
            self.graph_output_needs[branch] = tuple(outputs[: len(branch.outputs)])
        self.structural_slots[node] = (tuple(None for _ in node.inputs), tuple(outputs))

    def _plan_loop_like(self, node: ir.Node, blocked: Optional[str]) -> None:
        body: ir.Graph = node.attributes["body"].value
        scans = node.attributes["num_scan_inputs"].value if node.op_type == "Scan" else 0
        slots = loop_slots(node.op_type, len(node.inputs), self.opsets.get("", 1), scans)
        state_inputs = [i for i, _, _ in slots.states]  # node input index of each state
        body_state_inputs = [b for _, b, _ in slots.states]
        body_state_outputs = [o for _, _, o in slots.states]
        scan_in_pairs = list(slots.scanned)
        first_scan_out = slots.first_scan_output

        def initial(i: int) -> Optional[str]:
            value = node.inputs[i] if i < len(node.inputs) else None
            if not is_float(value):
                return None
            if blocked is not None:  # the node's schema takes only float32 here
                return HIGH
            if is_constant(value):
                return LOW if self.policy.level != "O1" else HIGH
            p = self.values.get(value, HIGH)
            return HIGH if p == FREE else p

        # A blocked node's per-iteration outputs leave the body as float32.
        scan_need = HIGH if blocked is not None else None
        state = [initial(i) for i in state_inputs]
        for _attempt in range(2):  # plan once, recolour once (POLICY.md sec. 5)
            for k, b_in in enumerate(body_state_inputs):
                value = body.inputs[b_in] if b_in < len(body.inputs) else None
                if is_float(value) and state[k] is not None:
                    self.values[value] = state[k]
            for node_in, b_in in scan_in_pairs:
                value = body.inputs[b_in] if b_in < len(body.inputs) else None
                if is_float(value):
                    self.values[value] = initial(node_in) or HIGH
            needs: List[Optional[str]] = [
                scan_need if j >= first_scan_out and is_float(v) else None for j, v in enumerate(body.outputs)
            ]
            for k, b_out in enumerate(body_state_outputs):
                needs[b_out] = state[k]
            self.graph_output_needs[body] = tuple(needs)
            self._plan_graph(body)
            changed = False
            for k, b_out in enumerate(body_state_outputs):
                if state[k] == LOW and self._value_precision(body.outputs[b_out]) != LOW:
                    state[k] = HIGH
                    changed = True
            if not changed:
                break
        scan_outs = [
            (scan_need or self._value_precision(v)) if is_float(v) else None for v in body.outputs[first_scan_out:]
        ]
        needs = [None] * len(body.outputs)
        for k, b_out in enumerate(body_state_outputs):
            needs[b_out] = state[k]
        for k, precision in enumerate(scan_outs):
            needs[first_scan_out + k] = precision
        self.graph_output_needs[body] = tuple(needs)
        inputs: List[Optional[str]] = [None] * len(node.inputs)
        for k, i in enumerate(state_inputs):
            inputs[i] = state[k]
        for node_in, _ in scan_in_pairs:
            # A scanned tensor is read as it comes, unless the schema takes only float32.
            inputs[node_in] = (HIGH if blocked is not None else ANY) if is_float(node.inputs[node_in]) else None
        outputs = list(state) + scan_outs
        outputs = [p if j < len(node.outputs) and is_float(node.outputs[j]) else None for j, p in enumerate(outputs)]
        self.structural_slots[node] = (tuple(inputs), tuple(outputs[: len(node.outputs)]))

    def _value_precision(self, value: ir.Value) -> str:
        if not is_float(value):
            return NONE
        if value in self.values:
            p = self.values[value]
            return HIGH if p == FREE else p
        return HIGH  # constants and outer values default to float32

    # --------------------------------------------------------------- finalize
    def _finalize(self) -> None:
        for node, decision in self.decisions.items():
            if decision.precision == FREE:  # unreachable in a well-formed graph; stay safe
                decision = Decision(HIGH, "free-high", "free: undecided; kept float32")
                self.decisions[node] = decision
            if node in self.structural_slots:
                inputs, outputs = self.structural_slots[node]
            else:
                inputs = tuple(self._slot_need(node, i) if v is not None else None for i, v in enumerate(node.inputs))
                inputs = tuple(HIGH if n == "UNKNOWN" else n for n in inputs)
                outputs = tuple(self.values.get(v) if is_float(v) else None for v in node.outputs)
            self.nodes[node] = NodePlan(decision, inputs, outputs)
        for value, precision in list(self.values.items()):
            if precision == FREE:
                self.values[value] = HIGH


_MASK_PATH = frozenset({"Add", "Sub", "Where", "Reshape", "Transpose", "Unsqueeze", "Squeeze", "Expand", "Cast", "Identity", "Div", "Mul"})


def _feeds_softmax(node: ir.Node, depth: int = 4) -> bool:
    """Whether ``node``'s output reaches a Softmax through at most ``depth`` mask-path ops."""
    frontier = [node]
    for _ in range(depth):
        following = []
        for current in frontier:
            for out in current.outputs:
                for use in out.uses():
                    if use.node.op_type in ("Softmax", "LogSoftmax"):
                        return True
                    if use.node.op_type in _MASK_PATH:
                        following.append(use.node)
        frontier = following
    return False


def _has_container_types(node: ir.Node) -> bool:
    for value in list(node.inputs) + list(node.outputs):
        if value is not None and value.type is not None and not isinstance(value.type, ir.TensorType):
            return True
    return False


def _origin(value: ir.Value) -> str:
    producer = value.producer()
    if producer is not None:
        return producer.name or producer.op_type
    return f"input {value.name}"


def _misfit(stats: RangeStats, tensor: str, low: str) -> str:
    """One phrase: how the values of ``tensor`` do not fit the LOW type."""
    if stats.overflow:
        return f"constant {stats.example_overflow:.3g} in {tensor} exceeds {low} (it would become inf)"
    return f"constant {stats.example_underflow:.3g} in {tensor} underflows to 0 in {low}"


def _summary(outputs: Sequence[Optional[str]]) -> str:
    parts = [p for p in outputs if p is not None]
    return ", ".join(parts) if parts else "no float outputs"


def make_plan(model: ir.Model, policy: Policy, config: Config) -> Plan:
    """Plan ``model`` under ``policy`` and ``config``; reads only."""
    return Planner(model, policy, config).run()


__all__ = ["ANY", "Decision", "NodePlan", "Plan", "make_plan", "is_float", "is_constant", "LOW_DTYPES"]
