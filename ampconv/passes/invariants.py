"""Type invariants the rewrite must keep, which neither onnx.checker nor a load check sees.

A Loop or Scan carries its state from one iteration to the next: the body's
state output must have the type of the state input it feeds, and the node's
initial value must have it too. onnx.checker accepts a model that breaks this
and onnxruntime loads it, then fails in the middle of a run. The converter
checks these after rewriting, so such a model is never written.
"""

from __future__ import annotations

from typing import Iterator, List, Optional, Tuple

import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.errors import ConversionError
from ampconv.runtime.schema import loop_slots
from ampconv.core.graphs import all_graphs


def loop_state_pairs(node: ir.Node, opset: int) -> Iterator[Tuple[Optional[ir.Value], ir.Value, ir.Value]]:
    """(initial value, body state input, body state output) for each state of a Loop or Scan."""
    body: ir.Graph = node.attributes["body"].value
    scans = node.attributes["num_scan_inputs"].value if node.op_type == "Scan" else 0
    for node_in, b_in, b_out in loop_slots(node.op_type, len(node.inputs), opset, scans).states:
        if b_in < len(body.inputs) and b_out < len(body.outputs):
            initial = node.inputs[node_in] if node_in < len(node.inputs) else None
            yield initial, body.inputs[b_in], body.outputs[b_out]


def check_loop_state_types(model: ir.Model) -> None:
    """Raise ``ConversionError`` when a Loop/Scan state changes type across an iteration."""
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
    problems: List[str] = []
    graphs = all_graphs(model)
    for graph in graphs if len(graphs) > 1 else ():  # a Loop/Scan holds a body: one graph, none to check
        for node in graph:
            if not is_default(node) or node.op_type not in ("Loop", "Scan"):
                continue
            if "body" not in node.attributes:
                continue
            for initial, state_in, state_out in loop_state_pairs(node, opset):
                types = [v.dtype for v in (initial, state_in, state_out) if v is not None]
                if None not in types and len(set(types)) > 1:
                    problems.append(
                        f"{node.op_type} {node.name}: state {state_in.name} enters as {state_in.dtype.name} "
                        f"but leaves the body as {state_out.dtype.name}"
                    )
    if problems:
        raise ConversionError(f"internal error, the rewrite broke a loop state: {problems[0]}")
