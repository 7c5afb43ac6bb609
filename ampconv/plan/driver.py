"""The planner's driver: runs the rule table over every graph, recursing through If/Loop/Scan.

For each graph, in file order (ONNX's topological order): every node is
decided by ``ampconv.plan.table.decide`` (the forward pass), structural nodes
by planning their subgraphs, then the backward pass (``ampconv.plan.gray``)
settles FREE and transparent nodes. After the main graph: LOW weight copies
are shared with transparent readers, main-graph outputs that keep_io_types
leaves free get their precision (with a warning when values do not fit), and
each node's slot needs are fixed for the rewrite.

Structural nodes (docs/precision.md sec. 5): an If's output is LOW only if every
branch makes it LOW; a Loop/Scan state is LOW only if its initial value and its
body output are, the body being planned again once when a state is demoted.
Their own slots obey their schema at the model's opset like any op's (If and
Loop take bfloat16 only from opset 16): a slot it refuses keeps the node float32
(rule ``hard-schema``), the subgraph casting up what flows out.
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.errors import named
from ampconv.options.groups import PlanOptions
from ampconv.plan.search_pins import SearchPins
from ampconv.numerics.activations import Calibration
from ampconv.plan import gray, interface
from ampconv.plan import attributes
from ampconv.plan.attributes import attribute_decisions
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import ANY, FREE, NONE, UNKNOWN, Decision, NodePlan, Plan
from ampconv.plan.envelope import input_envelope
from ampconv.plan.fallback import FALLBACK, refused_warning as fallback_refused
from ampconv.plan.facts import NodeFacts, node_facts
from ampconv.plan.ranges import misfit
from ampconv.plan.rules import BACKWARD, STRUCTURAL, Rule, builtin
from ampconv.plan.table import RULE_TABLE, decide
from ampconv.plan.values import is_constant, is_float
from ampconv.policy import HIGH, LOW, Policy
from ampconv.policy.lists import behaviour_kind
from ampconv.runtime.schema import first_opset_allowing, loop_slots, normalize_domain, op_info
from ampconv.core.graphs import all_graphs


# Ops that return some of their data input's elements unchanged (an embedding lookup, a slice of a table).
# Decided by the driver around the table (no ``decide``: the methods named in each meaning are).
DRIVER_RULES = tuple(builtin(rule) for rule in (
    Rule("transparent-shared", BACKWARD, "data movement that reads the LOW copy of a weight other nodes need LOW"),
    Rule("transparent-weight", BACKWARD, "a selection (Gather, Slice) from a large weight no LOW op reads: the "
         "weight is stored LOW and the selected values are cast"),
    Rule("structural", STRUCTURAL, "If/Loop/Scan: outputs follow the subgraphs"),
))
# Every rule id in the order the planner tries them: the table's for one node, then the passes around it.
RULE_ORDER: Tuple[str, ...] = tuple(
    rule_id for rule in (*RULE_TABLE, *gray.BACKWARD_RULES, *DRIVER_RULES, *interface.RULES, *attributes.RULES)
    for rule_id in rule.ids()
)
SELECTION_OPS = frozenset({"Gather", "GatherElements", "GatherND", "Slice"})
# Below this many elements a weight read only by selections stays float32: a cast per step costs more.
SELECTED_WEIGHT_MIN_ELEMENTS = 16384


def _numel(value: ir.Value) -> int:
    """Elements of a value of static shape; 0 when its shape is not known in full."""
    shape = value.shape
    if shape is None or not all(isinstance(d, int) for d in shape.dims):
        return 0
    return math.prod(shape.dims)


class Planner:
    """Builds a ``Plan``; one instance per conversion (no module-level state)."""

    def __init__(
        self,
        model: ir.Model,
        policy: Policy,
        options: PlanOptions,
        runtime_pins: Optional[Mapping[str, str]] = None,
        calibration: Optional[Calibration] = None,
        tune_pins: Optional[SearchPins] = None,
    ) -> None:
        self.ctx = PlanContext.create(model, policy, options, runtime_pins or {}, calibration, tune_pins)
        self.values = self.ctx.values  # shared: the gray rule reads what the driver records
        self.nodes: Dict[ir.Node, NodePlan] = {}
        self.decisions: Dict[ir.Node, Decision] = {}
        self.facts: Dict[ir.Node, NodeFacts] = {}
        self.graph_output_needs: Dict[ir.Graph, Tuple[Optional[str], ...]] = {}
        self.structural_slots: Dict[ir.Node, Tuple[Tuple, Tuple]] = {}
        self.warnings: List[str] = []

    def run(self) -> Plan:
        """Plan the main graph (and, through structural nodes, every subgraph)."""
        graph = self.ctx.model.graph
        keep = interface.kept_names(graph, self.ctx.options.keep_io_types)
        cache = self.ctx.cache_pairs()
        low_cache = interface.low_cache_names(cache, self.ctx.options.kv_cache)
        keep = keep - low_cache.keys()
        decided: List[interface.InterfaceDecision] = []
        for value in graph.inputs:
            if is_float(value):
                made = self._interface_input(value.name, keep, low_cache)
                self.values[value] = made.precision
                decided.append(made)
        needs = tuple((HIGH if v.name in keep else None) if is_float(v) else None for v in graph.outputs)
        self.graph_output_needs[graph] = needs
        self.ctx.ranges.prefetch(v for g in all_graphs(self.ctx.model) for v in g.initializers.values())
        self._plan_graph(graph)
        self._share_low_initializers()
        self._check_name_patterns()
        # Main-graph outputs the user did not keep float32 are LOW (values that do not fit excepted).
        outputs = [(v, interface.kept(v.name, interface.OUTPUT) if need is not None
                    else self._unkept_output(v, low_cache.get(v.name)))
                   for v, need in zip(graph.outputs, needs) if is_float(v)]
        decided.extend(made for _, made in outputs)
        made_of = dict(outputs)
        self.graph_output_needs[graph] = tuple(
            made_of[v].precision if v in made_of else None for v in graph.outputs
        )
        self._finalize()
        decided_nodes = {node: node_plan.decision for node, node_plan in self.nodes.items()}
        limits = input_envelope(self.ctx, decided_nodes, self.facts)
        refused = fallback_refused(self.ctx)  # nodes a later opset would run in the fallback type
        if refused:
            self.warnings.append(refused)
        return Plan(
            low=self.ctx.low,
            fallback=None if self.ctx.options.fallback_dtype == "float32" else self.ctx.options.fallback_dtype,
            fallback_refused=tuple((op, opset, n) for (op, opset), n in
                                   sorted(self.ctx.memo.get("fallback_refused", {}).items())),
            level=self.ctx.policy.level,
            nodes=self.nodes,
            values=self.values,
            graph_output_needs=self.graph_output_needs,
            constants=self.ctx.constants,
            clamp_tensors=dict(self.ctx.clamp),
            limits=self.ctx.ranges.limits,
            warnings=list(self.warnings),
            interface=tuple(decided),
            kv_cache=cache,
            envelope=limits,
        )

    @staticmethod
    def _interface_input(name: str, keep, low_cache) -> interface.InterfaceDecision:
        """The decision on a float main-graph input: a LOW cache input, kept float32, or converted."""
        if name in low_cache:
            return interface.cache_low(name, interface.INPUT, low_cache[name])
        return (interface.kept if name in keep else interface.converted)(name, interface.INPUT)

    def _check_name_patterns(self) -> None:
        """Warn about --keep-fp32/--keep-bf16/--force-low patterns that match no node, and say which wins where both
        --keep-fp32 and --force-low match."""
        if not (self.ctx.keep_fp32 or self.ctx.keep_bf16 or self.ctx.force_low):
            return
        names = [node.name or "" for node in self.decisions]
        for param, patterns in (("keep_fp32", self.ctx.keep_fp32), ("keep_bf16", self.ctx.keep_bf16),
                                ("force_low", self.ctx.force_low)):
            for pattern in patterns:
                if not any(pattern.search(name) for name in names):
                    self.warnings.append(f"{named(param)} {pattern.pattern!r} matches no node name")
        both = []
        for name in names if self.ctx.keep_fp32 and self.ctx.force_low else ():
            keep = next((p for p in self.ctx.keep_fp32 if p.search(name)), None)
            force = next((p for p in self.ctx.force_low if p.search(name)), None)
            if keep is not None and force is not None:
                both.append((name, keep.pattern, force.pattern))
        if both:
            name, keep, force = both[0]
            more = f" and {len(both) - 1} more" if len(both) > 1 else ""
            self.warnings.append(
                f"node {name!r}{more} match both {named('keep_fp32')} {keep!r} and {named('force_low')} {force!r}: "
                f"{named('keep_fp32')} wins (it is tried first)"
            )

    def _plan_graph(self, graph: ir.Graph) -> None:
        order = list(graph)  # ONNX requires topological order; ties keep file order
        unsettled = []  # the nodes the backward pass may change, in order: it passes over the others
        for node in order:
            decision = self._forward(node)
            if decision is not None and gray.may_settle(decision):
                unsettled.append(node)
        gray.backward(self, unsettled)

    def _forward(self, node: ir.Node) -> Optional[Decision]:
        """Decide ``node`` and record its outputs' precision; None for a structural node (planned through its subgraphs)."""
        ctx, values = self.ctx, self.values
        facts = node_facts(node, ctx.opsets, ctx.ops)
        if facts.op.kind == "structural":  # a default-domain If, Loop or Scan
            self._plan_structural(node)
            return None
        self.facts[node] = facts
        decision = self.decisions[node] = decide(ctx, node, facts)
        precision = decision.precision
        # A LOW, FALLBACK or FREE node's main outputs take its precision; every other float output is HIGH.
        main_out = facts.main_out if precision in _CARRIED else ()
        for j, is_float_out in enumerate(facts.float_out):
            if is_float_out:
                values[node.outputs[j]] = precision if j in main_out else HIGH
        return decision

    def set_decision(self, node: ir.Node, decision: Decision) -> None:
        """Replace ``node``'s decision (backward pass, shared weights) and its outputs' precision."""
        self.decisions[node] = decision
        for j in self.facts[node].main_out:
            self.values[node.outputs[j]] = decision.precision

    def _share_low_initializers(self) -> None:
        """Avoid a float32 duplicate of a weight that LOW consumers already need.

        A transparent node (e.g. an embedding Gather) that reads an initializer
        other consumers need LOW, and reads no activation in its data slots, can
        read the LOW copy instead and have its (small) output cast up: same bits,
        and the weight is stored once. A large weight that only float32
        selections read is stored LOW too (``_select_from_low_weight``).
        """
        for graph in all_graphs(self.ctx.model):
            for value in graph.initializers.values():
                uses = value.uses()
                if not uses or not is_float(value):
                    continue
                needs = {}
                for use in uses:
                    needs.setdefault(self._slot_need(use.node, use.idx), []).append(use.node)
                if HIGH not in needs:
                    continue
                if LOW not in needs:
                    self._select_from_low_weight(value, needs[HIGH])
                    continue
                readers = needs[HIGH]
                if all(self._can_read_low(node) for node in readers):
                    for node in readers:
                        self.set_decision(
                            node,
                            Decision(
                                LOW,
                                "transparent-shared",
                                f"transparent: reads the {self.ctx.low} copy of {value.name} (stored once)",
                            ),
                        )

    def _select_from_low_weight(self, value: ir.Value, readers: List[ir.Node]) -> None:
        """Store a large weight read only by float32 selection ops (an embedding Gather) LOW.

        A selection (Gather, Slice, ...) returns some of its input's elements
        unchanged, so it can select from the LOW copy and cast the rows it took
        up to float32: the weight is stored at half the bytes and a step casts
        only what it selected, not the table. Kept float32: small weights (the
        saving would not pay for the cast a step adds) and weights whose values
        do not fit the LOW type.
        """
        if _numel(value) < SELECTED_WEIGHT_MIN_ELEMENTS:
            return
        stats = self.ctx.ranges.stats(value)
        if stats is None or stats.pins():
            return
        if not all(node.op_type in SELECTION_OPS and self._can_read_low(node) for node in readers):
            return
        for node in readers:
            self.set_decision(node, Decision(
                LOW, "transparent-weight",
                f"selection from the weight {value.name}: reads it stored {self.ctx.low} and casts the "
                "selected values (same numbers as the LOW weight)",
            ))

    def _can_read_low(self, node: ir.Node) -> bool:
        decision = self.decisions.get(node)
        facts = self.facts.get(node)
        if decision is None or facts is None or node in self.structural_slots:
            return False
        if decision.rule not in ("gray-follow", "gray-promote", "free-high"):
            return False
        if facts.op.kind != "transparent":
            return False
        if self.ctx.low_type not in facts.info.allowed(facts.info.main_type()):
            return False
        return all(is_constant(node.inputs[i]) for i in facts.main_in)

    def _unkept_output(self, value: ir.Value, cache_pair=None) -> interface.InterfaceDecision:
        """The decision on a main-graph output that keep_io_types leaves free.

        LOW (the user asked for a converted interface), except where the values
        are known not to fit the LOW type: casting them down would turn them
        into inf or 0, so the output stays float32 and the plan warns.
        """
        if is_constant(value):
            # An initializer output (hazard 10): converting it is free, unless its
            # values do not fit the LOW type.
            stats = self.ctx.ranges.stats(value)
            if stats is not None and not stats.pins():
                return interface.converted(value.name, interface.OUTPUT)
            why = "its values cannot be read" if stats is None else misfit(stats, value.name or "?", self.ctx.low)
            self.warnings.append(f"output {value.name!r} kept float32 despite --no-keep-io-types: {why}")
            return interface.misfit_output(value.name, why)
        if value not in self.values or self.values[value] == FREE:
            return interface.undecided_output(value.name)
        why_not = self.known_misfit(value)
        if why_not is not None:
            self.warnings.append(f"output {value.name!r} kept float32 despite --no-keep-io-types: {why_not}")
            return interface.misfit_output(value.name, why_not)
        # A float32 producer (e.g. a BLACK Softmax) gets a cast down at the output.
        if cache_pair is not None:
            return interface.cache_low(value.name, interface.OUTPUT, cache_pair)
        return interface.converted(value.name, interface.OUTPUT)

    def known_misfit(self, value: ir.Value, depth: int = 8) -> Optional[str]:
        """Why ``value``'s data is known not to fit the LOW type, or None.

        Known: its producer was pinned float32 by a constant beyond the LOW
        range, or it is a constant that does not fit, or a transparent float32
        node (Reshape, Concat, ...) forwards such a value (same numbers).
        """
        if is_constant(value):
            stats = self.ctx.ranges.stats(value)
            return misfit(stats, value.name or "?", self.ctx.low) if stats is not None and stats.pins() else None
        producer = value.producer()
        if producer is None or depth == 0:
            return None
        decision = self.decisions.get(producer)
        if decision is not None and decision.precision == FALLBACK:
            runs = self.ctx.options.fallback_dtype
            return f"its producer {producer.name or producer.op_type} runs {runs}: {decision.reason}"
        if decision is None or decision.precision != HIGH:
            return None
        facts = self.facts.get(producer)
        if facts is None:
            return None
        if decision.rule == "hard-constant":
            # An overflowing constant shows in the result (x + 1e6); an underflow
            # pin (an epsilon) keeps the op's meaning, not an out-of-range result.
            for i in facts.main_in:
                stats = self.ctx.ranges.stats(producer.inputs[i]) if is_constant(producer.inputs[i]) else None
                if stats is not None and stats.overflow:
                    what = misfit(stats, producer.inputs[i].name or "?", self.ctx.low)
                    return f"its producer {producer.name or producer.op_type} is float32: {what}"
            return None
        if behaviour_kind(producer.op_type, normalize_domain(producer.domain)) != "transparent":
            return None
        for i in facts.main_in:
            why_not = self.known_misfit(producer.inputs[i], depth - 1)
            if why_not is not None:
                return why_not
        return None

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
            precision, "structural", f"{node.op_type}: outputs follow its subgraphs ({summary(outputs)})"
        )

    def _structural_blocked(self, node: ir.Node) -> Optional[str]:
        """Why the node's own schema keeps its float slots float32, or None when it admits LOW.

        If and Loop before opset 16 and Scan before its bfloat16 opset type
        their outputs and loop-carried values (V) without bfloat16: LOW slots
        there fail the checker however the subgraphs are planned.
        """
        opset = self.ctx.opsets.get("", 1)
        info = op_info("", node.op_type, opset)
        if not info.known:
            return f"hard: no known schema for {node.op_type} at opset {opset}; kept float32"
        slots = [info.output_type(j) for j, v in enumerate(node.outputs) if is_float(v)]
        slots += [info.input_type(i) for i, v in enumerate(node.inputs) if is_float(v)]
        refused = sorted({t for t in slots if t is not None and self.ctx.low_type not in info.allowed(t)})
        if not refused:
            return None
        later = first_opset_allowing("", node.op_type, opset, self.ctx.low)
        hint = f"; allowed from opset {later}" if later else ""
        return (
            f"hard: {node.op_type}.{refused[0]} does not accept {self.ctx.low_name} at opset {opset}{hint}; "
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
        slots = loop_slots(node.op_type, len(node.inputs), self.ctx.opsets.get("", 1), scans)
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
                return LOW if self.ctx.policy.level != "O1" else HIGH
            p = self.values.get(value, HIGH)
            return HIGH if p in (FREE, FALLBACK) else p  # a loop state in the fallback type runs float32

        # A blocked node's per-iteration outputs leave the body as float32.
        scan_need = HIGH if blocked is not None else None
        state = [initial(i) for i in state_inputs]
        for _attempt in range(2):  # plan once, recolour once (docs/precision.md sec. 5)
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
        """Fix every node's ``NodePlan``: its final decision, what each input slot needs, each output's precision.

        An input's need is ``_slot_need`` (an UNKNOWN need read as HIGH). For a
        planned node it depends only on the op, which slots are float and main,
        and the node's precision, so it is computed once per such pattern
        (``shared``): one loop over tens of thousands of nodes, kept tight.
        """
        shared: Dict[tuple, Tuple] = {}
        nodes, structural_slots, facts_of, values = self.nodes, self.structural_slots, self.facts, self.values
        for node, decision in self.decisions.items():
            precision = decision.precision
            if precision == FREE:  # unreachable in a well-formed graph; stay safe
                decision = Decision(HIGH, "free-high", "free: undecided; kept float32")
                self.decisions[node] = decision
                precision = HIGH
            slots = structural_slots.get(node)
            facts = facts_of.get(node) if slots is None else None
            if slots is not None:
                inputs, outputs = slots
            elif facts is None:  # not planned by the forward pass: every slot asks the general way
                inputs, outputs = self._general_slots(node)
            else:
                # A main slot needs the node's precision; a NONE node's main slots need HIGH.
                main_need = precision if precision in _NEEDS else HIGH
                key = (facts.op, facts.float_in, facts.main_in, main_need)
                inputs = shared.get(key)
                if inputs is None:
                    any_in, main_in = facts.any_in, facts.main_in
                    inputs = shared[key] = tuple([
                        None if not is_float_in else ANY if i in any_in else main_need if i in main_in else HIGH
                        for i, is_float_in in enumerate(facts.float_in)
                    ])
                outputs = tuple([
                    values.get(v) if is_float_out else None for v, is_float_out in zip(node.outputs, facts.float_out)
                ])
            nodes[node] = NodePlan(decision, inputs, outputs, attribute_decisions(node, decision))
        for value, precision in list(values.items()):
            if precision == FREE:
                values[value] = HIGH

    def _general_slots(self, node: ir.Node) -> Tuple[Tuple, Tuple]:
        """``_finalize``'s slots of a node without facts: ``_slot_need`` per input, the recorded output precisions."""
        inputs = tuple(self._slot_need(node, i) if v is not None else None for i, v in enumerate(node.inputs))
        outputs = tuple(self.values.get(v) if is_float(v) else None for v in node.outputs)
        return tuple(HIGH if n == UNKNOWN else n for n in inputs), outputs

    def consumer_needs(self, node: ir.Node, facts: NodeFacts) -> List[str]:
        """What each float consumer of ``node``'s main outputs needs (LOW, HIGH, or UNKNOWN while FREE).

        A slot that takes any type (Shape, Size, Cast) needs nothing, so a FREE
        chain that only feeds shape arithmetic stays float32 (hazard 8); but a
        Cast the plan made LOW (a ``Cast(to=FLOAT)`` retargeted to the LOW type)
        reads LOW: fed LOW it is a no-op the cleanup removes.
        """
        needs: List[str] = []
        for j in facts.main_out:
            value = node.outputs[j]
            for use in value.uses():
                need = self._slot_need(use.node, use.idx)
                if need == ANY and self._is_low_cast(use.node):
                    needs.append(self.decisions[use.node].precision)  # LOW, or FALLBACK
                elif need is not None and need != ANY:
                    needs.append(need)
            if value.is_graph_output():
                for graph in [value.graph] if value.graph is not None else []:
                    need = self.graph_output_needs.get(graph, ())
                    index = [i for i, v in enumerate(graph.outputs) if v is value]
                    for i in index:
                        n = need[i] if i < len(need) else None
                        if n is None and graph is self.ctx.model.graph:
                            # An output keep_io_types does not keep accepts LOW,
                            # unless its values are known not to fit.
                            n = LOW if self.known_misfit(value) is None else HIGH
                        needs.append(n if n is not None else UNKNOWN)
        return needs

    def _is_low_cast(self, node: ir.Node) -> bool:
        """Whether ``node`` is a Cast whose (float) output the plan has made LOW."""
        decision = self.decisions.get(node)
        return (
            node.op_type == "Cast" and is_default(node)
            and decision is not None and decision.precision in (LOW, FALLBACK)
        )

    def _slot_need(self, node: ir.Node, index: int) -> Optional[str]:
        """What input slot ``index`` of ``node`` needs: LOW, HIGH, ANY or None."""
        if node in self.structural_slots:
            inputs, _ = self.structural_slots[node]
            return inputs[index] if index < len(inputs) else None
        facts = self.facts.get(node)
        decision = self.decisions.get(node)
        if facts is None or decision is None:
            return HIGH if is_float(node.inputs[index]) else None
        if not facts.float_in[index]:
            return None
        if index in facts.any_in:
            return ANY
        if index in facts.main_in and decision.precision in _NEEDS:
            return decision.precision
        if index in facts.main_in and decision.precision == FREE:
            return UNKNOWN
        return HIGH  # a slot outside the main type, a NONE node, an unknown op: keeps float32


# The precisions a node's main outputs carry (``_forward``), and those its main input slots need (``_finalize``).
_CARRIED = (LOW, FREE, FALLBACK)
_NEEDS = (LOW, HIGH, FALLBACK)


def summary(outputs: Sequence[Optional[str]]) -> str:
    """The precisions of a structural node's float outputs, for its reason."""
    parts = [p for p in outputs if p is not None]
    return ", ".join(parts) if parts else "no float outputs"
