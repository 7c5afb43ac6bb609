"""Schema facts of one node at the model's opset: which float slots carry its main type."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Tuple

import onnx_ir as ir

from ampconv.plan.values import is_float
from ampconv.policy.lists import ANY_TYPE_INPUT
from ampconv.schema import OpInfo, normalize_domain, op_info


@dataclasses.dataclass(frozen=True)
class NodeFacts:
    """The node's signature and the float slots that follow its main type variable."""

    info: OpInfo
    main_in: Tuple[int, ...]  # float inputs in the main type variable
    main_out: Tuple[int, ...]  # float outputs in the main type variable
    any_in: Tuple[int, ...]  # inputs accepting any type (no cast ever needed)


def node_facts(node: ir.Node, opsets: Mapping[str, int]) -> NodeFacts:
    """The facts of ``node`` (``opsets``: normalized domain -> version)."""
    domain = normalize_domain(node.domain)
    info = op_info(domain, node.op_type, opsets.get(domain, 1))
    if not info.known:
        return NodeFacts(info, (), (), ())
    main = info.main_type()
    any_in: Tuple[int, ...] = (0,) if domain == "" and node.op_type in ANY_TYPE_INPUT else ()
    if main is None or (domain == "" and node.op_type in ("Shape", "Size")):
        return NodeFacts(info, (), (), any_in)
    main_in = tuple(
        i for i, v in enumerate(node.inputs) if info.input_type(i) == main and is_float(v) and i not in any_in
    )
    main_out = tuple(j for j, v in enumerate(node.outputs) if info.output_type(j) == main and is_float(v))
    return NodeFacts(info, main_in, main_out, any_in)
