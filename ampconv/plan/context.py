"""What every rule reads: the policy, the user's settings, the target runtime, the weights' ranges and the planning so far."""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, FrozenSet, List, Mapping, Optional, Tuple

import onnx_ir as ir

from ampconv.options.groups import PlanOptions
from ampconv.plan.search_pins import SearchPins
from ampconv.numerics.activations import Calibration, Thresholds
from ampconv.core.graphs import all_graphs
from ampconv.plan.decision import ConstantNote
from ampconv.plan.facts import OpFacts
from ampconv.plan.kvcache import CachePair, find_cache_pairs
from ampconv.plan.ranges import RangeReader
from ampconv.policy import Policy
from ampconv.core.lowtypes import LowType, low_type, range_limits
from ampconv.runtime.facts import RuntimeFacts
from ampconv.runtime.schema import normalize_domain
from ampconv.runtime.target import Target, choose_target
from ampconv.reading.shapes import ShapeSource, inferred_shapes


@dataclasses.dataclass
class PlanContext:
    """One conversion's planning inputs, and the two things guards record (notes, clamps)."""

    model: ir.Model
    policy: Policy
    options: PlanOptions  # the user's settings the planner reads (no others)
    runtime_pins: Mapping[str, str]
    low: str  # the LOW type's key: fp16 or bf16
    low_record: LowType
    fallback: Optional[LowType]  # the fallback type's record (bf16), None when float32 is the fallback
    opsets: Mapping[str, int]  # normalized domain -> version
    keep_fp32: Tuple["re.Pattern[str]", ...]
    keep_bf16: Tuple["re.Pattern[str]", ...]  # node names put in the fallback type (``fallback_dtype="bf16"``)
    force_low: Tuple["re.Pattern[str]", ...]
    blocked: FrozenSet[str]  # op keys (``Op`` or ``domain::Op``) kept float32 at every level
    ranges: RangeReader
    calibration: Optional[Calibration]  # activation statistics from --calibration-data (None: no data)
    thresholds: Thresholds  # when the data guards keep a node float32
    # What the accuracy search decided: nodes it keeps float32, and nodes the overflow
    # guard kept only by its margin that it lowers again (``plan.search_pins.SearchPins``).
    tune_pins: SearchPins
    shapes: ShapeSource  # real shapes of values, inferred once when first asked (range guards)
    # Where the output will run: the runtime (its facts: schemas, kernels, providers) and the provider.
    target: Target = dataclasses.field(default_factory=lambda: choose_target(None))
    values: Dict[ir.Value, str] = dataclasses.field(default_factory=dict)  # precision of float values so far
    constants: List[ConstantNote] = dataclasses.field(default_factory=list)
    clamp: Dict[str, object] = dataclasses.field(default_factory=dict)  # tensor -> True (clamp) or "mask"
    # Outputs of float32 nodes that hand on LOW (``plan.handoff``): value -> the evidence that they fit.
    handed: Dict[ir.Value, str] = dataclasses.field(default_factory=dict)
    memo: Dict[str, object] = dataclasses.field(default_factory=dict)  # whole-graph facts a rule found once
    # The schema facts of each op met, and its main slots per arity (``facts.node_facts`` keeps them).
    ops: Dict[tuple, object] = dataclasses.field(default_factory=dict)
    # Per ``OpFacts``: the rules of the table that can decide for its nodes (``table.active_rules``).
    active_rules: Dict[OpFacts, Tuple] = dataclasses.field(default_factory=dict)

    @classmethod
    def create(
        cls,
        model: ir.Model,
        policy: Policy,
        options: PlanOptions,
        runtime_pins: Mapping[str, str],
        calibration: Optional[Calibration] = None,
        tune_pins: Optional[SearchPins] = None,
        target: Optional[Target] = None,
    ) -> "PlanContext":
        """The context of planning ``model`` under ``policy`` and ``options`` (and calibration data, if any),
        for ``target`` (None: chosen from the installed onnxruntime, ``runtime.target.choose_target``)."""
        record = low_type(options.dtype)
        return cls(
            model=model,
            policy=policy,
            options=options,
            runtime_pins=dict(runtime_pins),
            low=options.dtype,
            low_record=low_type(options.dtype),
            fallback=options.fallback,
            opsets={normalize_domain(d): v for d, v in model.opset_imports.items()},
            keep_fp32=tuple(re.compile(p) for p in options.keep_fp32),
            keep_bf16=tuple(re.compile(p) for p in options.keep_bf16),
            force_low=tuple(re.compile(p) for p in options.force_low),
            blocked=policy.blocked,
            ranges=RangeReader(
                options.dtype, range_limits(options.dtype, options.max_finite, options.min_positive, options.clamp_small)
            ),
            calibration=calibration,
            thresholds=Thresholds.default(record, options.data_max, options.underflow_fraction),
            tune_pins=tune_pins or SearchPins(),
            shapes=inferred_shapes(model),
            target=target if target is not None else choose_target(None),
        )

    def nodes_by_op(self) -> Dict[str, List[ir.Node]]:
        """Every node of the model (all graphs, in graph order) by op type, from one walk kept in ``memo``.

        Rules that look for a few ops across the model (fill values,
        decomposed normalizations) read it instead of walking it each.
        """
        index = self.memo.get("nodes_by_op")
        if index is None:
            index = {}
            for graph in all_graphs(self.model):
                for node in graph:
                    found = index.get(node.op_type)
                    if found is None:
                        index[node.op_type] = [node]
                    else:
                        found.append(node)
            self.memo["nodes_by_op"] = index
        return index

    def cache_pairs(self) -> Tuple[CachePair, ...]:
        """The main graph's KV-cache past/present pairs (``plan.kvcache``), found once and kept in ``memo``.

        The driver's interface decisions and the provenance walk both read them.
        """
        pairs = self.memo.get("cache_pairs")
        if pairs is None:
            pairs = self.memo["cache_pairs"] = find_cache_pairs(self.model.graph)
        return pairs

    @property
    def runtime(self) -> RuntimeFacts:
        """The facts of the runtime the output will run on (the target's)."""
        return self.target.runtime

    @property
    def low_type(self) -> str:
        """The LOW type's schema type string, e.g. ``tensor(float16)``."""
        return self.low_record.type_string

    @property
    def low_name(self) -> str:
        """The LOW element type as people write it: float16 or bfloat16."""
        return self.low_record.name


