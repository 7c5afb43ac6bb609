"""Per-opset, per-slot type facts from ``onnx.defs`` (computed at run time, cached).

Nothing here is hard-coded per op: which slots share the node's main type
variable, which types a variable admits at the model's opset, and from which
opset a blocked type becomes legal all come from the installed schemas:
``onnx.defs``, and for ops onnx does not define (onnxruntime's contrib
operator sets, ``com.microsoft``), the runtime's (``ampconv.runtime.facts``; onnxruntime's by
default, read through ``ampconv.runtime.contrib_schemas``).

Some schemas declare two type variables that must nevertheless be equal.
Attention multiplies softmax(Q K^T) (T1) by V (T2) with one MatMul in its
function body; RMSNormalization multiplies the normalized X (T) by scale (V);
LinearAttention's type inference gives ``present_state`` (S) the type of
``query`` (T) when ``past_state`` is absent. Converting only one of them passes
the checker's signature check but not the function's inference, the node's
own inference, nor onnxruntime ("Type parameter (T) of Optype (MatMul) bound
to different types"). ``type_ties`` finds such ties from the installed onnx
(the function body and the op's inference function, see there), so an op is
handled the day onnx ships it; ``op_info`` reads a tied variable as the one
it is tied to. The runtime adds the variables its kernels never bind apart
(BatchNormalization's statistics: ``ampconv.runtime.kernel_ties``): ONNX
admits the mix, onnxruntime has no kernel for it.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Dict, FrozenSet, Hashable, List, Mapping, Optional, Sequence, Tuple

import onnx
import onnx.defs

from ampconv.runtime import contrib_schemas as runtime_schemas
from ampconv.runtime.facts import ONNXRUNTIME, RuntimeFacts
from ampconv.core.domains import normalize_domain
from ampconv.core.lowtypes import FLOAT_TYPE_STRINGS, low_type

FLOAT = "tensor(float)"


def _per_runtime(function):
    """``function`` cached once per argument tuple and runtime (its last parameter, ``runtime``).

    A call that leaves the runtime out asks onnxruntime's (``ONNXRUNTIME``)
    and shares the entries of one that names it: the planner passes its
    context's runtime, type inference and the opset upgrade do not, and
    neither computes what the other did. Different runtimes never share an
    entry, so no cache is cleared when a conversion asks another runtime.
    """
    cached = functools.lru_cache(maxsize=None)(function)
    arity = function.__code__.co_argcount

    @functools.wraps(function)
    def call(*args, runtime=None):
        if len(args) == arity:
            return cached(*args)
        return cached(*args, runtime if runtime is not None else ONNXRUNTIME)

    call.cache_clear, call.cache_info = cached.cache_clear, cached.cache_info
    return call


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
        ops), else the first input's (sinks such as Equal or ArgMax). Computed
        once per signature (``op_info`` caches the signatures, the planner asks
        for every node).
        """
        if "_main_type" in self.__dict__:
            return self.__dict__["_main_type"]
        found = None
        for candidate in (self.output_type(0), self.input_type(0)):
            if candidate is not None and FLOAT in self.allowed(candidate) and len(self.allowed(candidate)) > 1:
                found = candidate
                break
        self.__dict__["_main_type"] = found  # a frozen dataclass: a memo outside its fields
        return found


def _slot(types: Tuple[str, ...], variadic: bool, index: int) -> Optional[str]:
    if index < len(types):
        return types[index]
    if variadic and types:
        return types[-1]
    return None


@_per_runtime
def op_info(domain: str, op_type: str, opset: int, runtime: RuntimeFacts = ONNXRUNTIME) -> OpInfo:
    """Signature of ``domain::op_type`` at ``opset``; ``known=False`` when no schema exists.

    A type variable tied to another one (``type_ties``) is read as that one,
    and admits only the types both admit. ``runtime`` answers for the ops
    onnx does not define (the plan passes its context's; every answer is kept
    per runtime, so two runtimes never share one).
    """
    domain = normalize_domain(domain)
    schema = _schema(domain, op_type, opset, runtime)
    if schema is None:
        return OpInfo(known=False)
    variadic = onnx.defs.OpSchema.FormalParameterOption.Variadic
    tied = dict(type_ties(domain, op_type, opset, runtime))
    constraints = {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints}
    for variable, canonical in tied.items():
        constraints[canonical] = constraints[canonical] & constraints[variable]
    return OpInfo(
        known=True,
        since_version=schema.since_version,
        input_types=tuple(tied.get(p.type_str, p.type_str) for p in schema.inputs),
        input_variadic=bool(schema.inputs) and schema.inputs[-1].option == variadic,
        output_types=tuple(tied.get(p.type_str, p.type_str) for p in schema.outputs),
        output_variadic=bool(schema.outputs) and schema.outputs[-1].option == variadic,
        constraints=tuple(constraints.items()),
    )


@_per_runtime
def _schema(domain: str, op_type: str, opset: int, runtime: RuntimeFacts = ONNXRUNTIME):
    """``onnx.defs``' schema of the op at ``opset``; for an op onnx does not define, ``runtime``'s (or None)."""
    try:
        return onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain=domain)
    except onnx.defs.SchemaError:
        return runtime.schema(domain, op_type, opset)


# ------------------------------------------------------------------ type ties
@_per_runtime
def type_ties(domain: str, op_type: str, opset: int, runtime: RuntimeFacts = ONNXRUNTIME) -> Tuple[Tuple[str, str], ...]:
    """Pairs (variable, canonical) of type variables that must hold one type.

    Two sources, both read from the installed onnx at ``opset``:

    * the function body (plain or context-dependent): a body node whose schema
      binds two values to one of *its* type variables forces the op's variables
      those values come from to be equal (Attention's MatMul of T1 by T2);
    * the op's type inference: probing it with one variable's inputs set to
      another float type, an output of a second variable that follows, or an
      error that goes away when the second variable follows too, ties the two
      (LinearAttention's ``present_state`` without ``past_state``).

    and a third from the runtime: variables that every kernel it registers
    binds to one type (``runtime.kernel_ties``: BatchNormalization's
    statistics, GridSample's grid), which a mixed node would run without.

    Only variables that admit float32 and another type matter to conversion;
    ``canonical`` is the group's first variable in slot order, outputs first
    (Attention: T1, the type of Y). Ties are read per op, not per node: one
    that holds only without an optional input or attribute (LinearAttention
    without ``past_state``) is kept, as moving both variables together is
    always type-correct. Schemas whose body or inference cannot be built from
    a synthetic node simply have fewer ties.
    """
    domain = normalize_domain(domain)
    schema = _schema(domain, op_type, opset, runtime)
    if schema is None:
        return ()
    constraints = {c.type_param_str: tuple(c.allowed_type_strs) for c in schema.type_constraints}
    floaty = [v for v in _variables_in_slot_order(schema) if FLOAT in constraints[v] and len(constraints[v]) > 1]
    if len(floaty) < 2:
        return ()
    groups = _UnionFind()
    if isinstance(schema, runtime_schemas.RuntimeSchema):
        found = _twin_ties(constraints, floaty)
    else:
        found = _body_ties(schema, opset, constraints, runtime) + _inference_ties(schema, opset, constraints, floaty)
    found += [pair for pair in runtime.kernel_ties(domain, op_type, opset) if set(pair) <= set(floaty)]
    for a, b in found:
        groups.union(("outer", a), ("outer", b))
    pairs = []
    for i, variable in enumerate(floaty):
        for canonical in floaty[:i]:
            if groups.find(("outer", variable)) == groups.find(("outer", canonical)):
                pairs.append((variable, canonical))
                break
    return tuple(pairs)


def _twin_ties(constraints: Mapping[str, Tuple[str, ...]], floaty: Sequence[str]) -> List[Tuple[str, str]]:
    """Ties of an onnxruntime schema: float variables that admit the same float types move together.

    onnxruntime exposes neither a function body nor type inference to probe.
    Its ops that name two float variables with the same admitted types do so
    to allow mixed kernels (SimplifiedLayerNormalization's ``T`` for X and
    ``V`` for the scale and Y; GroupQueryAttention's ``T_CACHE``, which also
    admits int8 for a quantized cache), and their all-float16 form is the one
    its builders write; moving such twins together is what keeps the node's
    input in the LOW type instead of casting it to float32. The load check
    confirms each signature, as for every op.
    """
    floats = {v: frozenset(constraints[v]) & FLOAT_TYPE_STRINGS for v in floaty}
    ties = []
    for i, variable in enumerate(floaty):
        twin = next((c for c in floaty[:i] if floats[c] == floats[variable]), None)
        if twin is not None:
            ties.append((variable, twin))
    return ties


def _variables_in_slot_order(schema: onnx.defs.OpSchema) -> List[str]:
    """The schema's type variables, ordered by first use: outputs, then inputs."""
    names = {c.type_param_str for c in schema.type_constraints}
    order: List[str] = []
    for p in list(schema.outputs) + list(schema.inputs):
        if p.type_str in names and p.type_str not in order:
            order.append(p.type_str)
    return order


class _UnionFind:
    def __init__(self) -> None:
        self.parent: Dict[Hashable, Hashable] = {}

    def find(self, item: Hashable) -> Hashable:
        parent = self.parent.setdefault(item, item)
        if parent != item:
            parent = self.parent[item] = self.find(parent)
        return parent

    def union(self, a: Hashable, b: Hashable) -> None:
        self.parent[self.find(a)] = self.find(b)


_ELEM_TYPES = {name.lower(): number for name, number in onnx.TensorProto.DataType.items() if number}


def _type_proto(type_str: str) -> Optional[onnx.TypeProto]:
    """A ``TypeProto`` for a schema type string such as ``seq(tensor(float))``; None if unsupported."""
    proto = onnx.TypeProto()
    if type_str.startswith("tensor(") and type_str.endswith(")"):
        elem = _ELEM_TYPES.get(type_str[7:-1])
        if elem is None:
            return None
        proto.tensor_type.elem_type = elem
        return proto
    for kind in ("seq", "optional"):
        if type_str.startswith(kind + "(") and type_str.endswith(")"):
            inner = _type_proto(type_str[len(kind) + 1 : -1])
            if inner is None:
                return None
            target = proto.sequence_type if kind == "seq" else proto.optional_type
            target.elem_type.CopyFrom(inner)
            return proto
    return None


def _dummy_attribute(name: str, kind) -> Optional[onnx.AttributeProto]:
    """A placeholder value for a required attribute, so a synthetic node can be built."""
    types = onnx.defs.OpSchema.AttrType
    values = {
        types.INT: 1,
        types.FLOAT: 1.0,
        types.STRING: "",
        types.INTS: [1],
        types.FLOATS: [1.0],
        types.STRINGS: [""],
    }
    if kind not in values:
        return None
    return onnx.helper.make_attribute(name, values[kind])


def _synthetic_node(schema: onnx.defs.OpSchema, with_optional: bool) -> Optional[onnx.NodeProto]:
    """A node of ``schema`` with every input (or only the required ones) and every output."""
    optional = onnx.defs.OpSchema.FormalParameterOption.Optional
    inputs = [
        f"in{i}" if with_optional or p.option != optional else "" for i, p in enumerate(schema.inputs)
    ]
    while inputs and not inputs[-1]:
        inputs.pop()
    attributes = []
    for name, attr in schema.attributes.items():
        if attr.required:
            proto = _dummy_attribute(name, attr.type)
            if proto is None:
                return None
            attributes.append(proto)
    node = onnx.helper.make_node(
        schema.name, inputs, [f"out{j}" for j in range(len(schema.outputs))], domain=schema.domain
    )
    node.attribute.extend(attributes)
    return node


def _slot_type(type_str: str, constraints: Mapping[str, Tuple[str, ...]], chosen: Mapping[str, str]) -> str:
    """The concrete type a synthetic input gets: ``chosen`` per variable, float32 if allowed, else the first."""
    if type_str not in constraints:
        return type_str
    if type_str in chosen:
        return chosen[type_str]
    allowed = constraints[type_str]
    return FLOAT if FLOAT in allowed else sorted(allowed)[0]


def _input_types(
    schema: onnx.defs.OpSchema, node: onnx.NodeProto, constraints, chosen: Mapping[str, str]
) -> Optional[Dict[str, onnx.TypeProto]]:
    types: Dict[str, onnx.TypeProto] = {}
    for i, name in enumerate(node.input):
        if not name:
            continue
        proto = _type_proto(_slot_type(schema.inputs[i].type_str, constraints, chosen))
        if proto is None:
            return None
        types[name] = proto
    return types


def _function_body(schema: onnx.defs.OpSchema, opset: int, node: onnx.NodeProto, types) -> Optional[onnx.FunctionProto]:
    """The op's function body at ``opset`` (plain, or built for ``node`` and ``types``), or None."""
    try:
        if schema.has_function:
            versions = [v for v in schema.function_opset_versions if v <= opset]
            data = schema.get_function_with_opset_version(max(versions)) if versions else None
            if data is None:
                return schema.function_body if schema.function_body.node else None
        elif schema.has_context_dependent_function:
            versions = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
            if not versions:
                return None
            data = schema.get_context_dependent_function_with_opset_version(
                max(versions), node.SerializeToString(), [types[n].SerializeToString() for n in node.input if n]
            )
        else:
            return None
    except Exception:  # a builder that rejects the synthetic node: no body ties
        return None
    body = onnx.FunctionProto()
    body.ParseFromString(data)
    return body if body.node else None


def _body_ties(schema: onnx.defs.OpSchema, opset: int, constraints, runtime: RuntimeFacts) -> List[Tuple[str, str]]:
    """Pairs of the op's type variables that its function body binds to one type variable."""
    if not (schema.has_function or schema.has_context_dependent_function):
        return []
    ties: List[Tuple[str, str]] = []
    for with_optional in (True, False):
        node = _synthetic_node(schema, with_optional)
        types = None if node is None else _input_types(schema, node, constraints, {})
        body = None if types is None else _function_body(schema, opset, node, types)
        if body is None:
            continue
        groups = _UnionFind()
        for formals, names in ((schema.inputs, body.input), (schema.outputs, body.output)):
            for k, name in enumerate(names):
                if formals and formals[min(k, len(formals) - 1)].type_str in constraints:
                    groups.union(("value", name), ("outer", formals[min(k, len(formals) - 1)].type_str))
        versions = {normalize_domain(o.domain): o.version for o in body.opset_import}
        for index, inner in enumerate(body.node):
            _bind_inner_node(groups, index, inner, versions, runtime)
        outer = list(constraints)
        for i, a in enumerate(outer):
            for b in outer[:i]:
                if groups.find(("outer", a)) == groups.find(("outer", b)):
                    ties.append((a, b))
    return ties


def _bind_inner_node(groups: _UnionFind, index: int, node: onnx.NodeProto, versions: Mapping[str, int],
                     runtime: RuntimeFacts) -> None:
    """Join each value of a body node with the type variable its slot is bound to."""
    domain = normalize_domain(node.domain)
    schema = _schema(domain, node.op_type, versions.get(domain, 1), runtime)
    if schema is None:
        return
    tied = dict(type_ties(domain, node.op_type, versions.get(domain, 1), runtime))
    names = {c.type_param_str for c in schema.type_constraints}
    for formals, values in ((schema.inputs, node.input), (schema.outputs, node.output)):
        for k, value in enumerate(values):
            if not value or not formals:
                continue
            formal = formals[min(k, len(formals) - 1)]
            if formal.type_str not in names:
                continue
            variable = tied.get(formal.type_str, formal.type_str)
            # A heterogeneous variadic (Loop's, Scan's V) binds each position to its own type.
            position = k if k >= len(formals) - 1 and not formal.is_homogeneous else None
            groups.union(("value", value), ("inner", index, variable, position))


def _inference_ties(schema: onnx.defs.OpSchema, opset: int, constraints, floaty: Sequence[str]) -> List[Tuple[str, str]]:
    """Pairs of float variables the op's type inference makes follow each other (see ``type_ties``)."""
    if not schema.has_type_and_shape_inference_function:
        return []
    import onnx.shape_inference  # only when a tie is first asked for: keeps importing ampconv fast

    ties: List[Tuple[str, str]] = []
    opsets = [onnx.helper.make_opsetid(schema.domain, opset)]
    if schema.domain != "":
        opsets.append(onnx.helper.make_opsetid("", onnx.defs.onnx_opset_version()))

    def infer(node: onnx.NodeProto, chosen: Mapping[str, str]):
        types = _input_types(schema, node, constraints, chosen)
        if types is None:
            return None
        try:
            out = onnx.shape_inference.infer_node_outputs(schema, node, types, opset_imports=opsets)
        except Exception:  # a type clash (or a synthetic node the inference cannot read)
            return None
        return {
            name: p.tensor_type.elem_type for name, p in out.items() if p.WhichOneof("value") == "tensor_type"
        }

    for with_optional in (True, False):
        node = _synthetic_node(schema, with_optional)
        if node is None or infer(node, {}) is None:
            continue
        outputs = {f"out{j}": p.type_str for j, p in enumerate(schema.outputs)}
        for a in floaty:
            alt = _other_float(constraints[a])
            if alt is None:
                continue
            result = infer(node, {a: alt})
            if result is None:  # refused: find the variable that must follow
                for b in floaty:
                    if b != a and alt in constraints[b] and infer(node, {a: alt, b: alt}) is not None:
                        ties.append((a, b))
                continue
            for name, elem in result.items():
                b = outputs.get(name)
                if b in floaty and b != a and elem == _ELEM_TYPES[alt[7:-1]]:
                    ties.append((a, b))
    return ties


def _other_float(allowed: Sequence[str]) -> Optional[str]:
    """A float type other than float32 that a variable admits (the one a probe switches to)."""
    for candidate in ("tensor(float16)", "tensor(bfloat16)", "tensor(double)"):
        if candidate in allowed:
            return candidate
    return None


@_per_runtime
def first_opset_allowing(domain: str, op_type: str, opset: int, low: str,
                         runtime: RuntimeFacts = ONNXRUNTIME) -> Optional[int]:
    """The first opset above ``opset`` whose schema (``runtime``'s where onnx has none) lets the main type be ``low``."""
    domain = normalize_domain(domain)
    try:
        latest = onnx.defs.onnx_opset_version() if domain == "" else opset + 30
    except Exception:  # pragma: no cover - defensive
        latest = opset + 30
    for version in range(opset + 1, latest + 1):
        info = op_info(domain, op_type, version, runtime)
        if info.known and info.since_version > opset:
            main = info.main_type()
            if main is not None and low_type(low).type_string in info.allowed(main):
                return info.since_version
    return None


@functools.lru_cache(maxsize=None)
def default_domain_ops() -> FrozenSet[str]:
    """Every op type of the default ONNX domain known to the installed onnx."""
    return frozenset(s.name for s in onnx.defs.get_all_schemas() if s.domain == "")


@_per_runtime
def is_known_op(domain: str, op_type: str, runtime: RuntimeFacts = ONNXRUNTIME) -> bool:
    """Whether any schema exists for ``domain::op_type`` (any version): onnx's, else ``runtime``'s."""
    domain = normalize_domain(domain)
    try:
        onnx.defs.get_schema(op_type, domain=domain)
        return True
    except onnx.defs.SchemaError:
        return runtime.knows(domain, op_type)


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
