"""Schema facts of one node at the model's opset: which float slots carry its main type.

Two layers, because the planner asks for every node of graphs with tens of
thousands of them: ``OpFacts`` holds what the schema says of an op at an opset
(the same for every node of that op: the planner makes it once per conversion,
``PlanContext.ops``), ``NodeFacts`` adds what only the node can tell (which of
its values are float32).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Mapping, NamedTuple, Optional, Sequence, Tuple

import onnx_ir as ir

from ampconv.policy.lists import ANY_TYPE_INPUT, behaviour_kind
from ampconv.runtime.facts import ONNXRUNTIME, RuntimeFacts
from ampconv.runtime.schema import OpInfo, normalize_domain, op_info

_TENSOR_TYPE = ir.TensorType
_FLOAT = ir.DataType.FLOAT


@dataclasses.dataclass(frozen=True, eq=False)
class OpFacts:
    """What the schema says of one op at one opset, shared by all its nodes.

    The planner keeps one per op for a conversion (``PlanContext.ops``), so
    identity is equality (``eq=False``): its per-op caches key on the object.
    Not cached for the process: each plan asks its own runtime (``PlanContext.runtime``).
    """

    domain: str  # normalized: "" for the default domain
    op_type: str
    info: OpInfo
    kind: str  # ``behaviour_kind``: transparent, source, sink, structural or compute
    label: str  # ``Op`` or ``domain::Op``, as policies and reasons name it
    any_in: Tuple[int, ...]  # inputs accepting any type (no cast ever needed)
    main: Optional[str]  # the type variable of the slots ``main_slots`` picks; None: no such slot

    def main_slots(self, count: int, outputs: bool) -> Tuple[int, ...]:
        """The slots, among ``count`` inputs (or outputs), typed by the main variable (any-typed inputs excluded)."""
        if self.main is None:
            return ()
        if outputs:
            return tuple(j for j in range(count) if self.info.output_type(j) == self.main)
        return tuple(i for i in range(count) if self.info.input_type(i) == self.main and i not in self.any_in)


def op_facts(domain: str, op_type: str, opset: int, runtime: RuntimeFacts = ONNXRUNTIME) -> OpFacts:
    """The ``OpFacts`` of ``domain::op_type`` at ``opset`` (``domain`` normalized; ``runtime``: whose schemas
    answer for ops onnx does not define)."""
    info = op_info(domain, op_type, opset, runtime)
    label = op_type if domain == "" else f"{domain}::{op_type}"
    kind = behaviour_kind(op_type, domain)
    if not info.known:
        return OpFacts(domain, op_type, info, kind, label, (), None)
    any_in: Tuple[int, ...] = (0,) if domain == "" and op_type in ANY_TYPE_INPUT else ()
    # Shape and Size read only a tensor's metadata: none of their slots carries float data.
    main = None if domain == "" and op_type in ("Shape", "Size") else info.main_type()
    return OpFacts(domain, op_type, info, kind, label, any_in, main)


class NodeFacts(NamedTuple):
    """The node's op facts and the float slots that follow its main type variable.

    A NamedTuple, not a frozen dataclass: one is built for every node, and a
    tuple is built several times faster.
    """

    op: OpFacts
    main_in: Tuple[int, ...]  # float inputs in the main type variable
    main_out: Tuple[int, ...]  # float outputs in the main type variable
    float_in: Tuple[bool, ...]  # per input slot: is it a float32 tensor (``values.is_float``)
    float_out: Tuple[bool, ...]  # per output slot: the same
    # Every input and output present is a tensor of a known type: no value is
    # a sequence/optional, none untyped (the ``hard-container`` and
    # ``hard-unknown-type`` rules have nothing to find).
    plain: bool

    @property
    def info(self) -> OpInfo:
        """The op's signature at the model's opset."""
        return self.op.info

    @property
    def any_in(self) -> Tuple[int, ...]:
        """Inputs accepting any type (no cast ever needed)."""
        return self.op.any_in


def node_facts(node: ir.Node, opsets: Mapping[str, int], ops: Optional[Dict[tuple, tuple]] = None,
               runtime: RuntimeFacts = ONNXRUNTIME) -> NodeFacts:
    """The facts of ``node`` (``opsets``: normalized domain -> version).

    ``ops``: a dict in which to keep what is found once per op for these
    ``opsets`` and this ``runtime`` (the planner's ``PlanContext.ops``; its
    layout is this module's); None: found anew. ``runtime``: whose schemas
    answer for ops onnx does not define (the plan's context's).
    """
    inputs, outputs = node.inputs, node.outputs
    known = ops.get((node.domain, node.op_type, len(inputs), len(outputs))) if ops is not None else None
    if known is None:
        known = _op_slots(node, opsets, len(inputs), len(outputs), ops, runtime)
    op, in_slots, out_slots = known
    float_in, plain_in = _float_flags(inputs)
    float_out, plain_out = _float_flags(outputs)
    main_in = tuple([i for i in in_slots if float_in[i]])
    main_out = tuple([j for j in out_slots if float_out[j]])
    return NodeFacts(op, main_in, main_out, float_in, float_out, plain_in and plain_out)


def _op_slots(node: ir.Node, opsets: Mapping[str, int], n_in: int, n_out: int, ops: Optional[dict],
              runtime: RuntimeFacts) -> tuple:
    """(``OpFacts``, main input slots, main output slots) of ``node``'s op with this many inputs and outputs.

    Kept in ``ops`` under (domain, op type, n_in, n_out), with the op's one
    ``OpFacts`` under (domain, op type): every arity of an op shares it.
    """
    op_key = (node.domain, node.op_type)
    op = ops.get(op_key) if ops is not None else None
    if op is None:
        domain = normalize_domain(node.domain)
        op = op_facts(domain, node.op_type, opsets.get(domain, 1), runtime)
    known = (op, op.main_slots(n_in, False), op.main_slots(n_out, True))
    if ops is not None:
        ops[op_key] = op
        ops[op_key + (n_in, n_out)] = known
    return known


def _float_flags(values: Sequence[Optional[ir.Value]]) -> Tuple[Tuple[bool, ...], bool]:
    """Per value, ``values.is_float`` (inlined: one type read per value); and whether all present are typed tensors."""
    flags = []
    plain = True
    for value in values:
        if value is None:
            flags.append(False)
            continue
        kind = value.type
        if type(kind) is _TENSOR_TYPE:
            flags.append(kind.dtype == _FLOAT)
        else:
            flags.append(False)
            plain = False
    return tuple(flags), plain


__all__ = ["NodeFacts", "OpFacts", "node_facts", "op_facts"]
