"""Per-opset, per-slot type facts from ``onnx.defs`` (computed at run time, cached).

Nothing here is hard-coded per op: which slots share the node's main type
variable, which types a variable admits at the model's opset, and from which
opset a blocked type becomes legal all come from the installed schemas.

One exception, ``TIED_TYPE_VARIABLES``: a few schemas declare two type
variables that their function body (and onnxruntime's kernel) require to be
equal. Attention multiplies softmax(Q K^T) (T1) by V (T2) with one MatMul;
RMSNormalization multiplies the normalized X (T) by scale (V). Converting
only one of them passes the checker's signature check but not the function's
inference nor onnxruntime ("Type parameter (T) of Optype (MatMul) bound to
different types"), so the tied variable is read as the main one.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import FrozenSet, Optional, Tuple

import onnx
import onnx.defs

FLOAT = "tensor(float)"
LOW_TYPE_STRINGS = {"fp16": "tensor(float16)", "bf16": "tensor(bfloat16)"}


def normalize_domain(domain: str) -> str:
    """``ai.onnx`` and the empty string name the same (default) domain."""
    return "" if domain in ("", "ai.onnx") else domain


@dataclasses.dataclass(frozen=True)
class OpInfo:
    """The type signature of one op at one opset, reduced to what planning needs."""

    known: bool
    since_version: int = 0
    input_types: Tuple[str, ...] = ()
    input_variadic: bool = False
    output_types: Tuple[str, ...] = ()
    output_variadic: bool = False
    constraints: Tuple[Tuple[str, FrozenSet[str]], ...] = ()

    def input_type(self, index: int) -> Optional[str]:
        """Type string (a variable like ``T`` or a concrete type) of input slot ``index``."""
        return _slot(self.input_types, self.input_variadic, index)

    def output_type(self, index: int) -> Optional[str]:
        """Type string of output slot ``index``."""
        return _slot(self.output_types, self.output_variadic, index)

    def allowed(self, type_str: Optional[str]) -> FrozenSet[str]:
        """Concrete types a slot with this type string accepts."""
        if type_str is None:
            return frozenset()
        for name, types in self.constraints:
            if name == type_str:
                return types
        return frozenset({type_str})

    def main_type(self) -> Optional[str]:
        """The type variable that carries the node's float data.

        The first output's variable when it admits float (compute and transparent
        ops), else the first input's (sinks such as Equal or ArgMax).
        """
        for candidate in (self.output_type(0), self.input_type(0)):
            if candidate is not None and FLOAT in self.allowed(candidate) and len(self.allowed(candidate)) > 1:
                return candidate
        return None


def _slot(types: Tuple[str, ...], variadic: bool, index: int) -> Optional[str]:
    if index < len(types):
        return types[index]
    if variadic and types:
        return types[-1]
    return None


TIED_TYPE_VARIABLES = {
    ("", "Attention"): {"T2": "T1"},
    ("", "RMSNormalization"): {"T": "V"},
}


@functools.lru_cache(maxsize=None)
def op_info(domain: str, op_type: str, opset: int) -> OpInfo:
    """Signature of ``domain::op_type`` at ``opset``; ``known=False`` when no schema exists."""
    domain = normalize_domain(domain)
    try:
        schema = onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain=domain)
    except onnx.defs.SchemaError:
        return OpInfo(known=False)
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    tied = TIED_TYPE_VARIABLES.get((domain, op_type), {})
    return OpInfo(
        known=True,
        since_version=schema.since_version,
        input_types=tuple(tied.get(p.type_str, p.type_str) for p in schema.inputs),
        input_variadic=bool(schema.inputs) and schema.inputs[-1].option == variadic,
        output_types=tuple(tied.get(p.type_str, p.type_str) for p in schema.outputs),
        output_variadic=bool(schema.outputs) and schema.outputs[-1].option == variadic,
        constraints=tuple(
            (c.type_param_str, frozenset(c.allowed_type_strs)) for c in schema.type_constraints
        ),
    )


@functools.lru_cache(maxsize=None)
def first_opset_allowing(domain: str, op_type: str, opset: int, low: str) -> Optional[int]:
    """The first opset above ``opset`` whose schema lets the main type be ``low``."""
    domain = normalize_domain(domain)
    try:
        latest = onnx.defs.onnx_opset_version() if domain == "" else opset + 30
    except Exception:  # pragma: no cover - defensive
        latest = opset + 30
    for version in range(opset + 1, latest + 1):
        info = op_info(domain, op_type, version)
        if info.known and info.since_version > opset:
            main = info.main_type()
            if main is not None and LOW_TYPE_STRINGS[low] in info.allowed(main):
                return info.since_version
    return None


@functools.lru_cache(maxsize=None)
def default_domain_ops() -> FrozenSet[str]:
    """Every op type of the default ONNX domain known to the installed onnx."""
    return frozenset(s.name for s in onnx.defs.get_all_schemas() if s.domain == "")


@functools.lru_cache(maxsize=None)
def is_known_op(domain: str, op_type: str) -> bool:
    """Whether any schema exists for ``domain::op_type`` (any version)."""
    domain = normalize_domain(domain)
    try:
        onnx.defs.get_schema(op_type, domain=domain)
        return True
    except onnx.defs.SchemaError:
        return False


@dataclasses.dataclass(frozen=True)
class LoopSlots:
    """Where a Loop's or Scan's loop-carried states and scanned tensors sit.

    ``states[k]`` is (node input, body input, body output) of state k;
    ``scanned`` pairs each scanned node input with its body input; body outputs
    from ``first_scan_output`` on are the per-iteration outputs.
    """

    states: Tuple[Tuple[int, int, int], ...]
    scanned: Tuple[Tuple[int, int], ...]
    first_scan_output: int


def loop_slots(op_type: str, n_inputs: int, opset: int, num_scan_inputs: int = 0) -> LoopSlots:
    """The slot layout of a Loop or Scan node with ``n_inputs`` inputs at ``opset``.

    Loop: inputs (M, cond, states...), body (iter, cond, states...) ->
    (cond, states..., scan outputs...). Scan: inputs (states..., scanned...),
    with an optional ``sequence_lens`` first in Scan-8; body (states...,
    scanned...) -> (states..., scan outputs...).
    """
    if op_type == "Loop":
        n_state = max(n_inputs - 2, 0)
        states = tuple((2 + k, 2 + k, 1 + k) for k in range(n_state))
        return LoopSlots(states, (), 1 + n_state)
    offset = 1 if opset < 9 else 0  # Scan-8's sequence_lens; Scan-9 dropped it
    n_state = max(n_inputs - offset - num_scan_inputs, 0)
    states = tuple((offset + k, k, k) for k in range(n_state))
    scanned = tuple((offset + n_state + k, n_state + k) for k in range(num_scan_inputs))
    return LoopSlots(states, scanned, n_state)
