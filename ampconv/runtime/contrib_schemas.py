"""onnxruntime's own operator sets (``com.microsoft`` and friends) as schemas the planner can read.

onnxruntime's transformer optimizer fuses exported graphs into contrib ops
(Attention, SkipLayerNormalization, BiasGelu, EmbedLayerNormalization,
FastGelu, ...). ``onnx.defs`` does not know them, so without their schemas
every such node, and every ordinary node reading its outputs, would stay
float32. onnxruntime ships them: ``get_all_operator_schema()`` gives, per op
and since-version, the inputs and outputs with their type variables and each
variable's allowed types (SkipLayerNormalization: T in float/float16/bfloat16,
U float only). ``ampconv.runtime.schema`` reads these where ``onnx.defs`` has nothing
for an op, exactly as it reads ``onnx.defs``.

What onnxruntime does not expose is a schema's function body or inference
function, so these ops have no derived type ties (``schema.type_ties``).
Nothing is read until a model has a node onnx does not know; without
onnxruntime, or for a domain neither knows, ``lookup`` answers None.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter
from typing import Dict, FrozenSet, List, Optional, Tuple

import onnx.defs

_OPTION = onnx.defs.OpSchema.FormalParameterOption


@dataclasses.dataclass(frozen=True)
class Formal:
    """One input or output slot: its type string (a variable like ``T`` or a concrete type) and arity."""

    name: str
    type_str: str
    option: object  # onnx.defs.OpSchema.FormalParameterOption
    is_homogeneous: bool = True


@dataclasses.dataclass(frozen=True)
class Constraint:
    """A type variable and the types it admits."""

    type_param_str: str
    allowed_type_strs: Tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class RuntimeSchema:
    """The parts of an onnxruntime schema the planner reads, with ``onnx.defs.OpSchema``'s attribute names."""

    name: str
    domain: str
    since_version: int
    inputs: Tuple[Formal, ...]
    outputs: Tuple[Formal, ...]
    type_constraints: Tuple[Constraint, ...]
    # onnxruntime exposes neither: no function body to expand, no inference to probe.
    has_function: bool = False
    has_context_dependent_function: bool = False
    has_type_and_shape_inference_function: bool = False


def lookup(domain: str, op_type: str, opset: int) -> Optional[RuntimeSchema]:
    """onnxruntime's schema of ``domain::op_type`` in force at ``opset`` (the highest since-version <= opset)."""
    versions = _registry().get((domain, op_type))
    if not versions:
        return None
    chosen = None
    for since, schema in versions:
        if since <= opset:
            chosen = schema
    return chosen


def known(domain: str, op_type: str) -> bool:
    """Whether onnxruntime has a schema of ``domain::op_type`` at any version."""
    return (domain, op_type) in _registry()


def available() -> bool:
    """Whether onnxruntime's schemas could be read (it is installed and answers)."""
    return bool(_registry())


def default_domain_ops() -> FrozenSet[str]:
    """The ops onnxruntime registers in the default domain that the installed onnx does not define."""
    return frozenset(op for domain, op in _registry() if domain == "")


def default_domain_ops_among(nodes) -> Counter:
    """How many of ``nodes`` (onnx_ir nodes) are each such op: the model runs on onnxruntime only."""
    ops = default_domain_ops()
    return Counter(node.op_type for node in nodes if node.op_type in ops and node.domain in ("", "ai.onnx"))


@functools.lru_cache(maxsize=1)
def _registry() -> Dict[Tuple[str, str], List[Tuple[int, RuntimeSchema]]]:
    """(domain, op) -> [(since_version, schema)] sorted, for every op onnxruntime knows and onnx does not."""
    try:
        from onnxruntime.capi import onnxruntime_pybind11_state as ort_state

        schemas = ort_state.get_all_operator_schema()
    except Exception:  # noqa: BLE001 - not installed, or a build without the schema API: no schemas
        return {}
    onnx_known = {(s.domain, s.name) for s in onnx.defs.get_all_schemas()}
    registry: Dict[Tuple[str, str], List[Tuple[int, RuntimeSchema]]] = {}
    for schema in schemas:
        domain = "" if schema.domain == "ai.onnx" else schema.domain
        if (domain, schema.name) in onnx_known:
            continue  # onnx.defs stays the authority for every op it defines
        registry.setdefault((domain, schema.name), []).append((schema.since_version, _convert(schema, domain)))
    for versions in registry.values():
        versions.sort(key=lambda pair: pair[0])
    return registry


def _convert(schema, domain: str) -> RuntimeSchema:
    """An onnxruntime pybind schema as a ``RuntimeSchema``."""
    return RuntimeSchema(
        name=schema.name,
        domain=domain,
        since_version=schema.since_version,
        inputs=tuple(_formal(p) for p in schema.inputs),
        outputs=tuple(_formal(p) for p in schema.outputs),
        type_constraints=tuple(
            Constraint(c.type_param_str, tuple(c.allowed_type_strs)) for c in schema.type_constraints
        ),
    )


def _formal(parameter) -> Formal:
    """One slot, its arity mapped onto onnx's enum (the two libraries bind separate enum types)."""
    option = {0: _OPTION.Single, 1: _OPTION.Optional, 2: _OPTION.Variadic}[int(parameter.option.value)]
    return Formal(parameter.name, parameter.typeStr, option, bool(getattr(parameter, "isHomogeneous", True)))


__all__ = ["Constraint", "Formal", "RuntimeSchema", "available", "default_domain_ops", "default_domain_ops_among", "known", "lookup"]
