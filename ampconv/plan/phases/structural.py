"""If/Loop/Scan, planned through their subgraphs (rule ``structural``; docs/precision.md sec. 5).

An If's output is LOW only if every branch makes it LOW; a Loop/Scan state is
LOW only if its initial value and its body output are, the body being planned
again once when a state is demoted. Their own slots obey their schema at the
model's opset like any op's (If and Loop take bfloat16 only from opset 16): a
slot it refuses keeps the node float32 (rule ``hard-schema``), the subgraph
casting up what flows out.
"""

from __future__ import annotations

from typing import Callable, List, Optional, Sequence

import onnx_ir as ir

from ampconv.plan.decision import ANY, FREE, NONE, Decision
from ampconv.plan.fallback import FALLBACK
from ampconv.plan.rules import STRUCTURAL, Rule, builtin
from ampconv.plan.state import PlanState
from ampconv.plan.values import is_constant, is_float
from ampconv.policy import HIGH, LOW
from ampconv.runtime.schema import first_opset_allowing, loop_slots, op_info

RULES = (builtin(Rule("structural", STRUCTURAL, "If/Loop/Scan: outputs follow the subgraphs")),)

# Plans one graph: ``graphs.plan_graph``, passed in (it calls back here for the nodes that hold subgraphs).
GraphPlanner = Callable[[PlanState, ir.Graph], None]


def plan_structural(state: PlanState, node: ir.Node, plan_graph: GraphPlanner) -> None:
    """Plan an If/Loop/Scan through its subgraphs; its own slots obey its schema like any op's."""
    blocked = _structural_blocked(state, node)
    if node.op_type == "If":
        _plan_if(state, node, blocked, plan_graph)
    else:
        _plan_loop_like(state, node, blocked, plan_graph)
    inputs, outputs = state.structural_slots[node]
    for value, precision in zip(node.outputs, outputs):
        if precision is not None:
            state.values[value] = precision
    low_out = any(p == LOW for p in outputs)
    precision = LOW if low_out else (HIGH if any(p == HIGH for p in outputs) else NONE)
    floats = [p for p in list(inputs) + list(outputs) if p in (LOW, HIGH)]
    if blocked is not None and floats:
        state.decisions[node] = Decision(HIGH, "hard-schema", blocked)
        return
    state.decisions[node] = Decision(
        precision, "structural", f"{node.op_type}: outputs follow its subgraphs ({summary(outputs)})"
    )


def _structural_blocked(state: PlanState, node: ir.Node) -> Optional[str]:
    """Why the node's own schema keeps its float slots float32, or None when it admits LOW.

    If and Loop before opset 16 and Scan before its bfloat16 opset type
    their outputs and loop-carried values (V) without bfloat16: LOW slots
    there fail the checker however the subgraphs are planned.
    """
    ctx = state.ctx
    opset = ctx.opsets.get("", 1)
    info = op_info("", node.op_type, opset, ctx.runtime)
    if not info.known:
        return f"hard: no known schema for {node.op_type} at opset {opset}; kept float32"
    slots = [info.output_type(j) for j, v in enumerate(node.outputs) if is_float(v)]
    slots += [info.input_type(i) for i, v in enumerate(node.inputs) if is_float(v)]
    refused = sorted({t for t in slots if t is not None and ctx.low_type not in info.allowed(t)})
    if not refused:
        return None
    later = first_opset_allowing("", node.op_type, opset, ctx.low, ctx.runtime)
    hint = f"; allowed from opset {later}" if later else ""
    return (
        f"hard: {node.op_type}.{refused[0]} does not accept {ctx.low_name} at opset {opset}{hint}; "
        "its outputs and loop-carried values stay float32"
    )


def _plan_if(state: PlanState, node: ir.Node, blocked: Optional[str], plan_graph: GraphPlanner) -> None:
    branches = [node.attributes[k].value for k in ("then_branch", "else_branch") if k in node.attributes]
    for branch in branches:
        # A blocked If takes float32 from both branches: their producers plan for that.
        state.graph_output_needs[branch] = tuple(
            HIGH if blocked is not None and is_float(v) else None for v in branch.outputs
        )
        plan_graph(state, branch)
    outputs: List[Optional[str]] = []
    for j, value in enumerate(node.outputs):
        if not is_float(value):
            outputs.append(None)
            continue
        precs = [state.value_precision(b.outputs[j]) for b in branches if j < len(b.outputs)]
        low = blocked is None and precs and all(p == LOW for p in precs)
        outputs.append(LOW if low else HIGH)
    for branch in branches:
        state.graph_output_needs[branch] = tuple(outputs[: len(branch.outputs)])
    state.structural_slots[node] = (tuple(None for _ in node.inputs), tuple(outputs))


def _plan_loop_like(state: PlanState, node: ir.Node, blocked: Optional[str], plan_graph: GraphPlanner) -> None:
    ctx = state.ctx
    body: ir.Graph = node.attributes["body"].value
    scans = node.attributes["num_scan_inputs"].value if node.op_type == "Scan" else 0
    slots = loop_slots(node.op_type, len(node.inputs), ctx.opsets.get("", 1), scans)
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
            return LOW if ctx.policy.level != "O1" else HIGH
        p = state.values.get(value, HIGH)
        return HIGH if p in (FREE, FALLBACK) else p  # a loop state in the fallback type runs float32

    # A blocked node's per-iteration outputs leave the body as float32.
    scan_need = HIGH if blocked is not None else None
    carried = [initial(i) for i in state_inputs]
    for _attempt in range(2):  # plan once, recolour once (docs/precision.md sec. 5)
        for k, b_in in enumerate(body_state_inputs):
            value = body.inputs[b_in] if b_in < len(body.inputs) else None
            if is_float(value) and carried[k] is not None:
                state.values[value] = carried[k]
        for node_in, b_in in scan_in_pairs:
            value = body.inputs[b_in] if b_in < len(body.inputs) else None
            if is_float(value):
                state.values[value] = initial(node_in) or HIGH
        needs: List[Optional[str]] = [
            scan_need if j >= first_scan_out and is_float(v) else None for j, v in enumerate(body.outputs)
        ]
        for k, b_out in enumerate(body_state_outputs):
            needs[b_out] = carried[k]
        state.graph_output_needs[body] = tuple(needs)
        plan_graph(state, body)
        changed = False
        for k, b_out in enumerate(body_state_outputs):
            if carried[k] == LOW and state.value_precision(body.outputs[b_out]) != LOW:
                carried[k] = HIGH
                changed = True
        if not changed:
            break
    scan_outs = [
        (scan_need or state.value_precision(v)) if is_float(v) else None for v in body.outputs[first_scan_out:]
    ]
    needs = [None] * len(body.outputs)
    for k, b_out in enumerate(body_state_outputs):
        needs[b_out] = carried[k]
    for k, precision in enumerate(scan_outs):
        needs[first_scan_out + k] = precision
    state.graph_output_needs[body] = tuple(needs)
    inputs: List[Optional[str]] = [None] * len(node.inputs)
    for k, i in enumerate(state_inputs):
        inputs[i] = carried[k]
    for node_in, _ in scan_in_pairs:
        # A scanned tensor is read as it comes, unless the schema takes only float32.
        inputs[node_in] = (HIGH if blocked is not None else ANY) if is_float(node.inputs[node_in]) else None
    outputs = list(carried) + scan_outs
    outputs = [p if j < len(node.outputs) and is_float(node.outputs[j]) else None for j, p in enumerate(outputs)]
    state.structural_slots[node] = (tuple(inputs), tuple(outputs[: len(node.outputs)]))


def summary(outputs: Sequence[Optional[str]]) -> str:
    """The precisions of a structural node's float outputs, for its reason."""
    parts = [p for p in outputs if p is not None]
    return ", ".join(parts) if parts else "no float outputs"
