"""The planner's output: a precision per node, the rule that chose it, and what the rewrite needs."""

from __future__ import annotations

import dataclasses
from typing import Dict, List, Mapping, Optional, Tuple

import onnx_ir as ir

from ampconv.core.precision import Precision
from ampconv.tensors.low_range import RangeStats
from ampconv.core.lowtypes import LOW_TYPES, RangeLimits
from ampconv.plan.interface import InterfaceDecision
from ampconv.plan.kvcache import CachePair
from ampconv.plan.rules import check_rule_id
from ampconv.runtime.target import Target, choose_target

# Precisions. LOW and HIGH come from the policy (the LOW type and float32).
NONE = Precision.NONE  # no float32 data in the node's main type
FREE = "FREE"  # transient: decided by consumers in the backward pass
ANY = "ANY"  # input slot requirement: any type, no cast needed
UNKNOWN = "UNKNOWN"  # transient slot requirement of a FREE consumer

# The rewrite's view of the LOW types (ampconv.core.lowtypes holds every fact about them).
LOW_DTYPES = {key: record.dtype for key, record in LOW_TYPES.items()}


@dataclasses.dataclass(frozen=True)
class Decision:
    """The precision of one node and why: ``rule`` is an id of ``ampconv.plan.rules.RULES``."""

    precision: str  # LOW, HIGH, FALLBACK, NONE (FREE while planning)
    rule: str
    reason: str  # one human sentence
    follows: Optional[str] = None  # gray rule: the node (or input) it followed

    def __post_init__(self) -> None:
        check_rule_id(self.rule)


@dataclasses.dataclass(frozen=True)
class AttributeDecision:
    """An integer attribute the rewrite sets on a node, and the rule that chose it (``plan.attributes``)."""

    name: str
    value: int
    rule: str
    reason: str

    def __post_init__(self) -> None:
        check_rule_id(self.rule)


@dataclasses.dataclass(frozen=True)
class ConstantNote:
    """A constant whose values do not fit the LOW type, and what was done."""

    tensor: str
    consumer: str
    stats: RangeStats
    action: str  # "pinned" (consumer kept HIGH), "clamped", "mask", "reported"
    effect: str = ""  # a reported constant judged by its effect on the consumer's output (``plan.effect``)


@dataclasses.dataclass
class NodePlan:
    """Everything the rewrite needs about one node."""

    decision: Decision
    inputs: Tuple[Optional[str], ...] = ()  # per slot: LOW, HIGH, ANY, or None (not float)
    outputs: Tuple[Optional[str], ...] = ()  # per slot: LOW, HIGH or None (not float)
    attributes: Tuple[AttributeDecision, ...] = ()  # precision attributes the rewrite sets


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
    limits: Optional[RangeLimits] = None  # what clamp_tensors clamp to (None: the LOW type's own limits)
    # For the report's warnings: what the plan did against the user's request, and why.
    warnings: List[str] = dataclasses.field(default_factory=list)
    # The main graph's float inputs and outputs, each with its rule (ampconv.plan.interface).
    interface: Tuple[InterfaceDecision, ...] = ()
    # A decoder's KV cache: the past/present pairs found by structure (ampconv.plan.kvcache).
    kv_cache: Tuple[CachePair, ...] = ()
    # The fallback LOW type's key (``bf16``) where nodes whose values do not fit ``low`` run in it
    # (precision FALLBACK, ``plan.fallback``); None: such nodes run float32.
    fallback: Optional[str] = None
    # Nodes whose values do not fit ``low`` but whose schema refuses the fallback type at the model's opset:
    # (op type, first opset that admits it, count) (``plan.fallback``; the default upgrade reads it).
    fallback_refused: Tuple[Tuple[str, int, int], ...] = ()
    # Where the output will run, as the plan's context had it (the runtime's facts and the provider): the
    # notes on what the plan leaves to the runtime (``plan.coverage``) ask it.
    target: Target = dataclasses.field(default_factory=lambda: choose_target(None))
    # The range scans of the constants (``plan.ranges.RangeReader``): the rewrite's value invariant reads them.
    ranges: Optional[object] = None
    # How far each float input may grow before a LOW node overflows (``plan.envelope.EnvelopeEntry``); None
    # without a float32 run to read it from.
    envelope: Optional[tuple] = None

    def count(self, precision: str) -> int:
        """Number of nodes with this precision."""
        return sum(1 for p in self.nodes.values() if p.decision.precision == precision)
