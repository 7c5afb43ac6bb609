"""Seeded generator of *valid* float32 ONNX models in the graph shapes that broke the converter.

The malformed family of scripts/fuzz.py breaks models on purpose; this family
builds models that onnxruntime loads and runs, in the forms real exporters
leave behind and that once made ``ampconv convert`` refuse a good model
(issue 19): a ``Resize`` whose ``roi``/``scales``/``sizes`` are empty
Constant nodes, omitted (``''``) or computed from ``Shape`` (opset 11-13 style,
as in onnxconverter-common's ``image_classifier32.onnx``), and ``If``/``Loop``/
``Scan`` bodies with untyped (``type {}``) outputs and value_info plus a
main-graph output without a type (its ``test_subgraph.onnx``).

A case is a chain of *stages* on one float activation, drawn from the
ingredients in ``INGREDIENTS``:

- value-reading ops whose shape inference reads input values: ``resize`` (roi,
  scales and sizes from initializers, Constant nodes, empty tensors, omitted
  inputs or Shape/Gather/Slice/Concat/Cast/Mul/Div/Floor/Unsqueeze/
  ConstantOfShape subgraphs, opset 11-21 forms, ``axes`` and
  ``keep_aspect_ratio_policy`` from 18), ``upsample`` (opset 9), ``reshape``,
  ``expand``, ``tile``, ``slice``, ``pad``, ``constant_of_shape``, ``range``,
  ``topk``, ``onehot``, ``squeeze_unsqueeze`` (axes as inputs, opset >= 13);
- empty optional inputs: ``clip`` (no min / no max), ``dropout`` (ratio
  omitted), ``layernorm`` (no bias), besides ``pad`` without a constant value
  and ``resize`` with ``''`` roi;
- control flow whose bodies have untyped or shapeless value_info and outputs
  and compute shapes: ``if``, ``loop``, ``scan``;
- ordinary float compute around them: ``conv``, ``matmul``, ``relu``, ``add``,
  ``softmax`` (and ``layernorm``).

Every model also varies what the generator does not pick per stage: the opset
(11..21; 9 for ``upsample``), the IR version, fixed or symbolic input dims
(symbolic dims are fed a small number), how names look (exporter styles, empty
node names), whether small tensors are initializers or Constant nodes (one
leaning per model, as exporters have) and how a Constant holds its value
(``value`` or ``value_ints``/``value_float``...), the element types of index
constants (int64/int32/float where the op allows), value_info entries with no
shape or no type, and graph outputs declared in full, without a shape or
without a type. Scale factors are exact in float16, so output sizes are known.

A few forms the ONNX schemas allow are left out because onnxruntime 1.32
mishandles them, each noted where it would be drawn: LayerNormalization with
bias ``''`` (SIGSEGV at load), a float16/double Resize roi (refused at load),
negative Resize ``axes`` with a ``keep_aspect_ratio_policy`` (not resized at
run time), OneHot index/depth type pairs without a CPU kernel, Scan bodies
without input shapes (refused at run time). What onnxruntime still refuses is
skipped by the harness, and counted.

``make_case(seed, index)`` draws everything from ``random.Random(f"{seed}:{index}")``
(``ingredient=`` forces one into the case, for tests); ``reference`` runs a
saved model in onnxruntime (CPU) and says why not when it refuses it;
``check_converted`` loads (and runs) a converted model and compares its
outputs with the reference. scripts/fuzz.py (``--family valid``) runs the
conversions and judges them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import random
from fractions import Fraction
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

FLOAT, INT64, INT32, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
# Activations stay small: the family is about graph forms, not sizes, and a case should take milliseconds.
MAX_ELEMENTS = 4096
MAX_DIM = 32
MAX_RANK = 5
INT64_MAX = 2**63 - 1
OPSETS = tuple(range(11, 22))
UPSAMPLE_OPSET = 9
# Output comparison of a converted model: within TOLERANCE * max|reference| (and relatively) counts as equal.
TOLERANCE = 5e-2


# --------------------------------------------------------------------------- tracked values


@dataclasses.dataclass(frozen=True)
class Dim:
    """One dimension of an activation: its run-time ``value`` and what a declared shape may say.

    ``decl`` is an int (a fixed dim), a str (a symbolic dim of a graph input,
    carried unchanged) or None (derived from a symbolic dim: unknown when declared).
    """

    value: int
    decl: Union[int, str, None]

    def to(self, value: int) -> "Dim":
        """This dim changed to ``value``: still fixed if it was, else unknown."""
        return Dim(value, value if isinstance(self.decl, int) else None)


def fixed(value: int) -> Dim:
    """A dim every declared shape states as a number."""
    return Dim(value, value)


@dataclasses.dataclass(frozen=True)
class Act:
    """The float activation the stages thread through: a value name and its dims."""

    name: str
    dims: Tuple[Dim, ...]

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(d.value for d in self.dims)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def with_dims(self, name: str, dims: Sequence[Dim]) -> "Act":
        return Act(name, tuple(dims))


def untyped_value_info(name: str, empty_type: bool = True) -> onnx.ValueInfoProto:
    """A value_info with ``type {}`` (what old exporters write), or with no type field at all."""
    value = onnx.ValueInfoProto()
    value.name = name
    if empty_type:
        value.type.SetInParent()
    return value


def declared_value_info(name: str, elem: int, dims: Optional[Sequence[Dim]], how: str) -> onnx.ValueInfoProto:
    """``name`` declared ``full`` (type and shape), ``elem`` (type, no shape), ``untyped`` or ``bare`` (no type field)."""
    if how == "untyped":
        return untyped_value_info(name)
    if how == "bare":
        return untyped_value_info(name, empty_type=False)
    if how == "elem" or dims is None:
        return helper.make_tensor_value_info(name, elem, None)
    return helper.make_tensor_value_info(name, elem, [d.decl if d.decl is not None else None for d in dims])


# --------------------------------------------------------------------------- the builder

NAME_STYLES = ("torch", "numeric", "onnx", "plain")
NODE_NAME_STYLES = ("op_index", "torch", "empty")


class Builder:
    """Collects the nodes, initializers and declarations of one case; every random draw goes through ``rng``."""

    def __init__(self, rng: random.Random, opset: int) -> None:
        self.rng = rng
        self.opset = opset
        self.np = np.random.default_rng(rng.randrange(2**32))
        self.nodes: List[onnx.NodeProto] = []
        self.initializers: List[onnx.TensorProto] = []
        self.inputs: List[onnx.ValueInfoProto] = []
        self.outputs: List[Tuple[str, int, Optional[Tuple[Dim, ...]]]] = []  # name, elem type, dims if known
        self.value_info: List[onnx.ValueInfoProto] = []
        self.feeds: Dict[str, np.ndarray] = {}
        self.acts: List[Act] = []  # every activation, for value_info decorations
        self.notes: List[str] = []
        self.stage = 0
        self.counter = 0
        self.name_style = rng.choice(NAME_STYLES)
        self.node_name_style = rng.choice(NODE_NAME_STYLES)
        # How often a small tensor is a Constant node rather than an initializer: exporters lean
        # one way for a whole model (torch of the opset-11 era wrote Constant nodes everywhere).
        self.constant_share = rng.choice([0.1, 0.5, 0.9])

    # ----------------------------------------------------------------- names

    def fresh(self, hint: str) -> str:
        """A new value name in the case's style (exporters differ: ``/blk/Op_output_0``, ``17``, ``onnx::Op_3``)."""
        self.counter += 1
        k = self.counter
        if self.name_style == "torch":
            return f"/stage{self.stage}/{hint}_{k}_output_0"
        if self.name_style == "numeric":
            return str(k)
        if self.name_style == "onnx":
            return f"onnx::{hint}_{k}"
        return f"{hint}_{k}"

    def _node_name(self, op_type: str) -> str:
        self.counter += 1
        if self.node_name_style == "empty":  # several exporters leave node names empty
            return ""
        if self.node_name_style == "torch":
            return f"/stage{self.stage}/{op_type}_{self.counter}"
        return f"{op_type}_{self.counter}"

    # ----------------------------------------------------------------- nodes and constants

    def op(self, op_type: str, inputs: Sequence[str], outputs: int = 1, **attrs) -> Union[str, List[str]]:
        """Append a node; return its output name (or names when ``outputs`` > 1)."""
        names = [self.fresh(op_type) for _ in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), names, name=self._node_name(op_type), **attrs))
        return names[0] if outputs == 1 else names

    def initializer(self, array: np.ndarray, hint: str) -> str:
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def constant(self, array: np.ndarray, hint: str) -> str:
        """A Constant node holding ``array``, in one of the attribute forms its dtype and rank allow."""
        array = np.asarray(array)
        forms = ["value"]
        if self.opset >= 12:  # value_ints/value_float... arrived in opset 12
            if array.dtype == np.int64:
                forms.append("value_int" if array.ndim == 0 else "value_ints" if array.ndim == 1 else "value")
            elif array.dtype == np.float32:
                forms.append("value_float" if array.ndim == 0 else "value_floats" if array.ndim == 1 else "value")
        form = self.rng.choice(forms)
        name = self.fresh(hint)
        if form == "value":
            attr = {"value": numpy_helper.from_array(array, name)}
        elif form in ("value_int", "value_float"):
            attr = {form: array.item()}
        else:  # the type spelled out: an empty list is a valid empty 1-D constant that helper cannot type
            kind = onnx.AttributeProto.INTS if form == "value_ints" else onnx.AttributeProto.FLOATS
            attr = {form: helper.make_attribute(form, array.tolist(), attr_type=kind)}
        node = helper.make_node("Constant", [], [name], name=self._node_name("Constant"))
        for key, value in attr.items():
            node.attribute.append(value if isinstance(value, onnx.AttributeProto) else helper.make_attribute(key, value))
        self.nodes.append(node)
        return name

    def static(self, array, hint: str, dtype=None) -> str:
        """``array`` as an initializer or a Constant node (exporters use both)."""
        array = np.asarray(array, dtype=dtype)
        if self.rng.random() < self.constant_share:
            return self.constant(array, hint)
        return self.initializer(array, hint)

    def empty(self, np_dtype, hint: str) -> str:
        """An empty 1-D tensor, as an initializer or a Constant (the 'not given' of opset-11 Resize)."""
        return self.static(np.zeros(0, dtype=np_dtype), hint)

    def weights(self, *shape: int, fan_in: int = 1) -> np.ndarray:
        """Float weights scaled so that stacked layers keep values near 1 (fp16 keeps its precision there)."""
        return (self.np.standard_normal(shape) / np.sqrt(max(fan_in, 1))).astype(np.float32)

    # ----------------------------------------------------------------- shape subgraphs

    def shape_of(self, x: Act, start: int = 0, end: Optional[int] = None) -> str:
        """int64 [end-start]: ``x``'s dims ``start:end``, computed the way exporters do (several ways)."""
        end = x.rank if end is None else end
        ways = ["gather", "unsqueeze_concat"] + (["slice"] if self.opset >= 10 else [])  # Slice-10: inputs
        if start == 0 and end == x.rank:
            ways.append("shape")
        if self.opset >= 15:
            ways.append("shape_attr")
        way = self.rng.choice(ways)
        if way == "shape":
            return self.op("Shape", [x.name])
        if way == "shape_attr":  # Shape-15's start/end attributes, sometimes negative
            attrs = {}
            if start:
                attrs["start"] = start if self.rng.random() < 0.5 else start - x.rank
            if end != x.rank:
                attrs["end"] = end if self.rng.random() < 0.5 else end - x.rank
            elif self.rng.random() < 0.3:
                attrs["end"] = end  # said explicitly (a negative one would be 0: nothing)
            return self.op("Shape", [x.name], **attrs)
        shape = self.op("Shape", [x.name])
        if way == "slice":
            starts = self.static([start if self.rng.random() < 0.6 else start - x.rank], "starts", np.int64)
            stop = end if end != x.rank or self.rng.random() < 0.5 else INT64_MAX
            ends = self.static([stop], "ends", np.int64)
            args = [shape, starts, ends]
            if self.rng.random() < 0.6:  # axes given, else the default (the first axis)
                args.append(self.static([0], "axes", np.int64))
            return self.op("Slice", args)
        if way == "gather":
            indices = self.static(list(range(start, end)), "indices", np.int64)
            return self.op("Gather", [shape, indices], axis=0)
        parts = [self.unsqueeze(self.op("Gather", [shape, self.static(np.int64(i), "index")], axis=0), [0])
                 for i in range(start, end)]
        return parts[0] if len(parts) == 1 else self.op("Concat", parts, axis=0)

    def dim_scalar(self, x: Act, axis: int) -> str:
        """int64 scalar: ``x``'s dim ``axis`` (Shape -> Gather with a scalar index)."""
        index = axis if self.rng.random() < 0.6 else axis - x.rank
        return self.op("Gather", [self.op("Shape", [x.name]), self.static(np.int64(index), "index")], axis=0)

    def unsqueeze(self, name: str, axes: Sequence[int]) -> str:
        """Unsqueeze in the form of the opset: axes an attribute before 13, an input from 13."""
        if self.opset < 13:
            return self.op("Unsqueeze", [name], axes=list(axes))
        return self.op("Unsqueeze", [name, self.static(list(axes), "axes", np.int64)])

    def concat(self, names: Sequence[str]) -> str:
        names = [n for n in names if n]
        return names[0] if len(names) == 1 else self.op("Concat", names, axis=0)

    def cast(self, name: str, to: int) -> str:
        return self.op("Cast", [name], to=to)

    # ----------------------------------------------------------------- subgraphs

    @contextlib.contextmanager
    def body(self) -> Iterator[List[onnx.NodeProto]]:
        """Nodes made inside the block go to a subgraph's node list (yielded), not the main graph."""
        saved, self.nodes = self.nodes, []
        body_nodes = self.nodes
        try:
            yield body_nodes
        finally:
            self.nodes = saved

    def body_decl(self, name: str, elem: int, dims: Optional[Sequence[Dim]], choices=("untyped", "bare", "elem",
                                                                                      "full")) -> onnx.ValueInfoProto:
        """A subgraph input/output declaration, typed as randomly as exporters leave them."""
        return declared_value_info(name, elem, dims, self.rng.choice(choices))

    # ----------------------------------------------------------------- the graph

    def graph_input(self, rank: int) -> Act:
        """The model's float input: NCHW-like dims, each fixed or symbolic, fed with seeded normal values."""
        name = self.rng.choice(["input", "modelInput", "x", "input.1", "images", "data"])
        params = [["batch_size", "N", "batch"], ["channels", "C"], ["height", "H", "seq"], ["width", "W", "len"],
                  ["depth", "D"]]
        dims = []
        for axis in range(rank):
            if axis == 0:
                value = self.rng.choice([1, 2, 2, 3])
            elif axis == 1 and rank >= 3:
                value = self.rng.choice([2, 3, 4])
            else:
                value = self.rng.choice([4, 6, 8, 5])
            symbolic = self.rng.random() < (0.6 if axis == 0 else 0.25)
            # A symbolic dim is fed a small number other than 1, so that size-1 logic stays out of it.
            value = max(value, 2) if symbolic else value
            dims.append(Dim(value, self.rng.choice(params[min(axis, 4)]) if symbolic else value))
        self.inputs.append(declared_value_info(name, FLOAT, dims, "full"))
        self.feeds[name] = self.np.standard_normal([d.value for d in dims]).astype(np.float32)
        act = Act(name, tuple(dims))
        self.acts.append(act)
        return act

    def produced(self, act: Act) -> Act:
        """Record an activation (value_info decorations pick among them)."""
        self.acts.append(act)
        return act

    def side_output(self, name: str, elem: int, dims: Optional[Sequence[Dim]] = None) -> None:
        """A second graph output (TopK indices, a Loop's scan output...)."""
        self.outputs.append((name, elem, None if dims is None else tuple(dims)))

    def note(self, text: str) -> None:
        self.notes.append(text)

    def model(self, final: Act) -> onnx.ModelProto:
        """The ModelProto: ``final`` first among the outputs, declarations typed as drawn."""
        outputs = [(final.name, FLOAT, final.dims)] + self.outputs
        declared = []
        for name, elem, dims in outputs:
            # Old exporters leave outputs without a shape or without any type; onnxruntime runs them.
            how = self.rng.choices(["full", "elem", "untyped", "bare"], weights=[6, 2, 2, 1])[0]
            declared.append(declared_value_info(name, elem, dims, how))
            if how != "full":
                self.note(f"output {name!r} {how}")
        self._decorate_value_info(outputs)
        graph = helper.make_graph(self.nodes, "fuzz_valid", self.inputs, declared, self.initializers,
                                  value_info=self.value_info)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)],
                                  producer_name="ampconv-fuzz-valid")
        low = helper.find_min_ir_version_for([helper.make_opsetid("", self.opset)])
        model.ir_version = self.rng.randint(low, max(low, 10))  # onnxruntime 1.2x-1.3x read IR <= 11
        return model

    def _decorate_value_info(self, outputs) -> None:
        """value_info for a few intermediate activations: full, elem-only, ``type {}`` or no type."""
        named = {name for name, _, _ in outputs} | {v.name for v in self.inputs} | {v.name for v in self.value_info}
        candidates = [a for a in self.acts if a.name not in named]
        for act in self.rng.sample(candidates, k=min(len(candidates), self.rng.randint(0, 3))):
            how = self.rng.choice(["full", "elem", "untyped", "bare"])
            self.value_info.append(declared_value_info(act.name, FLOAT, act.dims, how))
            self.note(f"value_info {act.name!r} {how}")


# --------------------------------------------------------------------------- ingredients


@dataclasses.dataclass(frozen=True)
class Ingredient:
    """A stage: ``build(builder, act) -> act``, usable at ``opsets`` on activations of ``ranks`` (inclusive)."""

    name: str
    build: Callable[[Builder, Act], Act]
    opsets: Tuple[int, int]
    ranks: Tuple[int, int]
    compute: bool = False  # ordinary float compute: filler between the ingredients that matter
    changes_rank: bool = False
    min_last: int = 1  # the smallest last dim it takes

    def fits(self, opset: int, act: Act) -> bool:
        return (self.opsets[0] <= opset <= self.opsets[1] and self.ranks[0] <= act.rank <= self.ranks[1]
                and act.dims[-1].value >= self.min_last)


INGREDIENTS: Dict[str, Ingredient] = {}


def ingredient(name: str, opsets=(11, 21), ranks=(2, MAX_RANK), compute=False, changes_rank=False, min_last=1):
    """Register a stage builder under ``name``."""

    def register(func):
        INGREDIENTS[name] = Ingredient(name, func, opsets, ranks, compute, changes_rank, min_last)
        return func

    return register


# ----------------------------------------------------------------- ordinary compute


@ingredient("conv", opsets=(9, 21), ranks=(4, 4), compute=True)
def _conv(b: Builder, x: Act) -> Act:
    channels, out = x.dims[1].value, b.rng.randint(2, 6)
    kernel = b.rng.choice([1, 3])
    args = [x.name, b.initializer(b.weights(out, channels, kernel, kernel, fan_in=channels * kernel * kernel), "W")]
    if b.rng.random() < 0.7:
        args.append(b.initializer(b.weights(out, fan_in=4), "B"))
    y = b.op("Conv", args, kernel_shape=[kernel, kernel], pads=[kernel // 2] * 4)
    return b.produced(x.with_dims(y, [x.dims[0], fixed(out), x.dims[2], x.dims[3]]))


@ingredient("matmul", opsets=(9, 21), compute=True)
def _matmul(b: Builder, x: Act) -> Act:
    width, out = x.dims[-1].value, b.rng.randint(2, 8)
    y = b.op("MatMul", [x.name, b.initializer(b.weights(width, out, fan_in=width), "W")])
    if b.rng.random() < 0.5:
        y = b.op("Add", [y, b.initializer(b.weights(out, fan_in=4), "bias")])
    return b.produced(x.with_dims(y, x.dims[:-1] + (fixed(out),)))


@ingredient("relu", opsets=(9, 21), compute=True)
def _relu(b: Builder, x: Act) -> Act:
    return b.produced(x.with_dims(b.op("Relu", [x.name]), x.dims))


@ingredient("add", opsets=(9, 21), compute=True)
def _add(b: Builder, x: Act) -> Act:
    if b.rng.random() < 0.5:
        other = b.initializer(b.weights(x.dims[-1].value, fan_in=4), "bias")
    else:  # a residual
        other = b.op("Sigmoid", [x.name])
    return b.produced(x.with_dims(b.op("Add", [x.name, other]), x.dims))


@ingredient("softmax", opsets=(9, 21), compute=True)
def _softmax(b: Builder, x: Act) -> Act:
    return b.produced(x.with_dims(b.op("Softmax", [x.name], axis=-1), x.dims))


# Over 2-3 values a normalization turns rounding noise into sign flips: float16 cannot be compared there.
@ingredient("layernorm", opsets=(17, 21), compute=True, min_last=4)
def _layernorm(b: Builder, x: Act) -> Act:
    """LayerNormalization over the last axis, its optional bias given or omitted."""
    width = x.dims[-1].value
    args = [x.name, b.initializer((1 + 0.1 * b.np.standard_normal(width)).astype(np.float32), "gamma")]
    # Not named '' : onnxruntime 1.32 dies (SIGSEGV) loading LayerNormalization(x, scale, '').
    bias = b.rng.choice(["given", "absent"])
    if bias == "given":
        args.append(b.initializer(b.weights(width, fan_in=16), "beta"))
    b.note(f"layernorm(bias {bias})")
    return b.produced(x.with_dims(b.op("LayerNormalization", args, axis=-1, epsilon=1e-5), x.dims))


# ----------------------------------------------------------------- Resize and Upsample


def _resize_factors(b: Builder, x: Act, axes: Sequence[int], integer: bool) -> List[Fraction]:
    """One scale factor per resized axis giving whole output dims, exact in float16 as in float32: an
    output size is then the same whatever float type computes it, and the generator can predict it."""
    factors = []
    size = x.size
    for axis in axes:
        dim = x.dims[axis].value
        options = [Fraction(2), Fraction(3)] if integer else [
            Fraction(2), Fraction(1, 2), Fraction(3, 2), Fraction(3)]
        # 1 always fits (a flattened dim may already be past MAX_DIM)
        options = [Fraction(1)] + [f for f in options if (dim * f).denominator == 1 and 1 <= dim * f <= MAX_DIM
                                   and size * f <= MAX_ELEMENTS]
        factor = b.rng.choice(options)
        size = int(size * factor)
        factors.append(factor)
    return factors


def _roi(b: Builder, length: int, resized: int, crop: bool) -> Tuple[str, str]:
    """Resize's roi over ``length`` axes (the last ``resized`` resized): for tf_crop_and_resize a box
    cropping the resized axes, else empty, omitted, or an ignored full box."""
    # roi is T2 (float16/float/double) in the schema, but onnxruntime 1.32 loads only a float one
    # ("Tensor type mismatch"): float32 here, and a float16 roi is for the converter not to write.
    if crop:
        starts = [0.0] * (length - resized) + [0.125] * resized
        ends = [1.0] * (length - resized) + [0.875] * resized
        return b.static(np.array(starts + ends, np.float32), "roi"), "box"
    kinds = ["empty", "ignored_box"] + (["omitted"] if b.opset >= 13 else [])  # roi is optional from opset 13
    kind = b.rng.choices(kinds, weights=[5, 2, 4][: len(kinds)])[0]
    if kind == "omitted":
        return "", kind
    if kind == "empty":
        return b.empty(np.float32, "roi"), kind
    return b.static(np.array([0.0] * length + [1.0] * length, np.float32), "roi"), kind


def _scales_source(b: Builder, x: Act, axes: Sequence[int], factors, full: bool) -> Tuple[str, str]:
    """Float scales for the resized axes (all axes when ``full``): static or computed in three ways."""
    per_axis = dict(zip(axes, factors))
    listed = list(range(x.rank)) if full else list(axes)
    values = np.array([float(per_axis.get(a, 1)) for a in listed], dtype=np.float32)
    kinds = ["static", "concat"]
    if full:
        kinds.append("div_shapes")
        if len(listed) > len(axes):
            kinds.append("constant_of_shape")
    kind = b.rng.choice(kinds)
    if kind == "static":
        return b.static(values, "scales"), kind
    lead = len(listed) - len(axes)
    if kind == "concat":
        parts = [b.static(values[:lead], "scales_lead")] if lead else []
        return b.concat(parts + [b.static(values[lead:], "scales_tail")]), kind
    if kind == "constant_of_shape":  # ones of a computed length, then the factors
        ones = b.op("ConstantOfShape", [b.static([lead], "ones_len", np.int64)],
                    value=numpy_helper.from_array(np.array([1.0], np.float32), "one"))
        return b.concat([ones, b.static(values[lead:], "scales_tail")]), kind
    # scales = Cast(target sizes) / Cast(Shape(x)): float arithmetic on shapes, as tracing exporters write it
    target, how = _sizes_source(b, x, axes, factors, full=True, computed_only=True)
    scales = b.op("Div", [b.cast(target, FLOAT), b.cast(b.shape_of(x), FLOAT)])
    return scales, f"div_shapes({how})"


def _sizes_source(b: Builder, x: Act, axes: Sequence[int], factors, full: bool,
                  computed_only: bool = False) -> Tuple[str, str]:
    """int64 sizes for the resized axes (all axes when ``full``): static or computed from Shape(x)."""
    per_axis = dict(zip(axes, factors))
    listed = list(range(x.rank)) if full else list(axes)
    target = [int(x.dims[a].value * per_axis.get(a, 1)) for a in listed]
    kinds = ["mul_div", "float_floor"] + (["static"] if not computed_only else [])
    lead = len(listed) - len(axes)
    if full and lead:
        kinds += ["shape_slice_concat", "gather_unsqueeze"]
    # image_classifier32's form weighs double: the one issue 19 was about
    kind = b.rng.choice(kinds + ["shape_slice_concat"] * ("shape_slice_concat" in kinds))
    if kind == "static":
        return b.static(np.array(target, np.int64), "sizes"), kind
    if kind == "shape_slice_concat":  # image_classifier32: Concat(Slice(Shape(x), 0, 2), initializer)
        return b.concat([b.shape_of(x, 0, lead), b.static(np.array(target[lead:], np.int64), "hw")]), kind
    if kind == "gather_unsqueeze":  # torch legacy: one Unsqueeze(Gather) per kept dim
        kept = [b.unsqueeze(b.dim_scalar(x, a), [0]) for a in listed[:lead]]
        return b.concat(kept + [b.static(np.array(target[lead:], np.int64), "hw")]), kind
    dims = b.shape_of(x, listed[0], listed[-1] + 1)
    mults = [per_axis.get(a, Fraction(1)) for a in listed]
    if kind == "float_floor":
        scaled = b.op("Mul", [b.cast(dims, FLOAT), b.static(np.array([float(m) for m in mults], np.float32), "mult")])
        return b.cast(b.op("Floor", [scaled]), INT64), kind
    num = b.op("Mul", [dims, b.static(np.array([m.numerator for m in mults], np.int64), "num")])
    return b.op("Div", [num, b.static(np.array([m.denominator for m in mults], np.int64), "den")]), kind


RESIZE_CTM = ["half_pixel", "asymmetric", "pytorch_half_pixel", "align_corners", "tf_crop_and_resize"]


def _resize_attrs(b: Builder, mode: str, crop: bool) -> Dict[str, object]:
    """Mode-dependent attributes, each given or left to its default."""
    modes = [m for m in RESIZE_CTM if m != "tf_crop_and_resize"]
    if b.opset <= 12 and mode == "nearest":
        modes.append("tf_half_pixel_for_nn")
    if b.opset >= 19:
        modes.append("half_pixel_symmetric")
    attrs: Dict[str, object] = {"mode": mode} if mode != "nearest" or b.rng.random() < 0.7 else {}
    ctm = "tf_crop_and_resize" if crop else b.rng.choice(modes)
    if crop or ctm != "half_pixel" or b.rng.random() < 0.5:
        attrs["coordinate_transformation_mode"] = ctm
    if crop:
        attrs["extrapolation_value"] = 0.0
    if mode == "nearest" and b.rng.random() < 0.6:
        attrs["nearest_mode"] = b.rng.choice(["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
    if mode == "cubic":
        attrs["cubic_coeff_a"] = b.rng.choice([-0.75, -0.5])
        attrs["exclude_outside"] = b.rng.choice([0, 1])
    if b.opset >= 18 and mode != "nearest" and b.rng.random() < 0.3:
        attrs["antialias"] = 1
    return attrs


@ingredient("resize", opsets=(11, 21), ranks=(2, MAX_RANK))
def _resize(b: Builder, x: Act) -> Act:
    """Resize with roi/scales/sizes given, empty, omitted or computed, in the form of the model's opset."""
    rng, rank = b.rng, x.rank
    # onnxruntime: linear/cubic on 2-D, or 4-D with the outer two scales 1.
    mode = rng.choice(["nearest", "linear", "cubic"]) if rank in (2, 4) else "nearest"
    count = rng.choice([1, 2]) if rank == 2 else 2 if mode != "nearest" or rng.random() < 0.7 else 1
    axes = list(range(rank - count, rank))
    by_sizes = rng.random() < 0.5
    policy = b.rng.choice(["stretch", "not_larger", "not_smaller"]) if by_sizes and b.opset >= 18 else "stretch"
    # Resize-18: scales/sizes name only these axes. A policy's common factor applies to every listed
    # axis, so with one the axes are listed: N and C keep their size.
    with_axes = b.opset >= 18 and (policy != "stretch" or rng.random() < 0.4)
    factors = _resize_factors(b, x, axes, integer=policy != "stretch")
    crop = mode != "cubic" and rng.random() < 0.15
    attrs = _resize_attrs(b, mode, crop)
    if with_axes:
        # onnxruntime 1.32 ignores negative axes at run time when a policy is set (its shape
        # inference does not): the output would not be resized. Negative ones only without a policy.
        negative = policy == "stretch" and rng.random() < 0.5
        attrs["axes"] = [a - rank if negative else a for a in axes]
    if policy != "stretch" or (by_sizes and b.opset >= 18 and rng.random() < 0.3):
        attrs["keep_aspect_ratio_policy"] = policy
    roi, roi_how = _roi(b, len(axes) if with_axes else rank, len(axes), crop)
    if by_sizes:
        sizes, sizes_how = _sizes_source(b, x, axes, factors, full=not with_axes)
        # opset 11/12 need an (empty) scales input before sizes; 13+ may also name none ('').
        if b.opset >= 13 and rng.random() < 0.6:
            scales, scales_how = "", "omitted"
        else:
            scales, scales_how = b.empty(np.float32, "scales"), "empty"
        inputs = [x.name, roi, scales, sizes]
    else:
        scales, scales_how = _scales_source(b, x, axes, factors, full=not with_axes)
        sizes_how = "absent"
        inputs = [x.name, roi, scales] if rng.random() < 0.8 else [x.name, roi, scales, ""]
    y = b.op("Resize", inputs, **attrs)
    new = _resized_dims(x, axes, factors, policy)
    b.note(f"resize(mode={mode} axes={'attr' if with_axes else 'all'} roi={roi_how} scales={scales_how} "
           f"sizes={sizes_how}{' policy=' + policy if policy != 'stretch' else ''})")
    return b.produced(x.with_dims(y, new))


def _resized_dims(x: Act, axes: Sequence[int], factors: Sequence[Fraction], policy: str) -> List[Dim]:
    """Output dims of a Resize: floor(dim * factor), or with keep_aspect_ratio_policy one common factor."""
    if policy != "stretch":  # every resized axis scaled by the smallest (not_larger) or largest factor
        common = min(factors) if policy == "not_larger" else max(factors)
        factors = [common] * len(factors)
    dims = list(x.dims)
    for axis, factor in zip(axes, factors):
        dims[axis] = dims[axis].to(int(dims[axis].value * factor))
    return dims


@ingredient("upsample", opsets=(UPSAMPLE_OPSET, UPSAMPLE_OPSET), ranks=(4, 4))
def _upsample(b: Builder, x: Act) -> Act:
    """Upsample-9: scales an input (static, a Concat of constants, or Cast(Shape) arithmetic)."""
    mode = b.rng.choice(["nearest", "linear"])
    factors = _resize_factors(b, x, [2, 3], integer=True)
    scales, how = _scales_source(b, x, [2, 3], factors, full=True)
    y = b.op("Upsample", [x.name, scales], mode=mode)
    b.note(f"upsample(mode={mode} scales={how})")
    return b.produced(x.with_dims(y, _resized_dims(x, [2, 3], factors, "stretch")))


# ----------------------------------------------------------------- other value-reading ops


@ingredient("reshape", changes_rank=True)
def _reshape(b: Builder, x: Act) -> Act:
    """Reshape to a shape computed from Shape(x): flatten, merge or split the last dims, or copy with 0s."""
    rank = x.rank
    kinds = ["same_shape", "zeros"]
    if rank >= 3:
        kinds += ["flatten", "merge_last"]
    if rank < MAX_RANK and x.dims[-1].value % 2 == 0:
        kinds.append("split_last")
    kind = b.rng.choice(kinds)
    attrs = {"allowzero": 0} if b.opset >= 14 and b.rng.random() < 0.3 else {}
    if kind == "same_shape":
        shape, dims = b.shape_of(x), list(x.dims)
    elif kind == "zeros":  # 0 copies the input dim
        shape, dims = b.static([0] * (rank - 1) + [-1], "shape", np.int64), list(x.dims)
    elif kind == "flatten":
        rest = int(np.prod(x.shape[1:]))
        shape = b.concat([b.shape_of(x, 0, 1), b.static([-1], "minus_one", np.int64)])
        dims = [x.dims[0], Dim(rest, rest if all(isinstance(d.decl, int) for d in x.dims[1:]) else None)]
    elif kind == "merge_last":
        merged = b.op("Mul", [b.shape_of(x, rank - 2, rank - 1), b.shape_of(x, rank - 1, rank)])
        shape = b.concat([b.shape_of(x, 0, rank - 2), merged])
        value = x.dims[-2].value * x.dims[-1].value
        both_fixed = isinstance(x.dims[-2].decl, int) and isinstance(x.dims[-1].decl, int)
        dims = list(x.dims[:-2]) + [Dim(value, value if both_fixed else None)]
    else:
        shape = b.concat([b.shape_of(x, 0, rank - 1), b.static([2, -1], "split", np.int64)])
        dims = list(x.dims[:-1]) + [fixed(2), x.dims[-1].to(x.dims[-1].value // 2)]
    b.note(f"reshape({kind})")
    return b.produced(x.with_dims(b.op("Reshape", [x.name, shape], **attrs), dims))


@ingredient("expand", opsets=(9, 21))
def _expand(b: Builder, x: Act) -> Act:
    """Expand a small weight to Shape(x) (then Add), or x to a shape of ones (broadcast identity)."""
    if b.rng.random() < 0.7:
        width = x.dims[-1].value
        small = b.initializer(b.weights(*([1] * b.rng.randint(0, x.rank - 1)), width, fan_in=4), "w")
        y = b.op("Add", [x.name, b.op("Expand", [small, b.shape_of(x)])])
        b.note("expand(weight to Shape(x))")
    else:
        y = b.op("Expand", [x.name, b.static([1] * b.rng.randint(1, x.rank), "ones", np.int64)])
        b.note("expand(x to ones)")
    return b.produced(x.with_dims(y, x.dims))


@ingredient("tile")
def _tile(b: Builder, x: Act) -> Act:
    """Tile the last axis twice (when small) with repeats static, concatenated or computed as Shape/Shape."""
    times = 2 if x.dims[-1].value * 2 <= MAX_DIM and x.size * 2 <= MAX_ELEMENTS else 1
    repeats = np.array([1] * (x.rank - 1) + [times], np.int64)
    kind = b.rng.choice(["static", "concat", "shape_div"])
    if kind == "static":
        source = b.static(repeats, "repeats")
    elif kind == "concat":
        source = b.concat([b.static(repeats[:-1], "ones"), b.static(repeats[-1:], "times")])
    else:  # Shape(x) / Shape(x) = ones, plus the extra repeats
        ones = b.op("Div", [b.shape_of(x), b.shape_of(x)])
        source = b.op("Add", [ones, b.static(repeats - 1, "extra")])
    b.note(f"tile({kind} x{times})")
    dims = list(x.dims[:-1]) + [x.dims[-1].to(x.dims[-1].value * times)]
    return b.produced(x.with_dims(b.op("Tile", [x.name, source]), dims))


@ingredient("slice")
def _slice(b: Builder, x: Act) -> Act:
    """Slice with starts/ends computed from Shape(x), int64 or int32 indices, axes/steps given or omitted."""
    rank = x.rank
    axis = b.rng.choice([rank - 1, rank - 1, b.rng.randrange(1, rank)])
    dim = x.dims[axis].value
    kind = b.rng.choice(["half", "tail", "step", "leading"] if dim >= 2 else ["step", "leading"])
    index_type = b.rng.choice([np.int64, np.int64, np.int32])
    onnx_type = INT64 if index_type == np.int64 else INT32

    def computed(name: str) -> str:
        return name if index_type == np.int64 else b.cast(name, onnx_type)

    steps = None
    if kind == "half":
        starts = b.static([0], "starts", index_type)
        ends = computed(b.op("Div", [b.shape_of(x, axis, axis + 1), b.static([2], "two", np.int64)]))
        kept = range(dim)[0:dim // 2]
    elif kind == "tail":
        count = b.rng.randint(1, max(1, dim - 1))
        starts = computed(b.op("Sub", [b.shape_of(x, axis, axis + 1), b.static([count], "count", np.int64)]))
        ends = b.static([np.iinfo(index_type).max], "ends", index_type)
        kept = range(dim)[dim - count:]
    elif kind == "step":
        starts, ends = b.static([0], "starts", index_type), computed(b.shape_of(x, axis, axis + 1))
        steps = b.static([2], "steps", index_type)
        kept = range(dim)[0:dim:2]
    else:  # no axes input: starts/ends apply to the leading axes, here the first
        axis = 0
        dim = x.dims[0].value
        starts, ends = b.static([0], "starts", index_type), computed(b.shape_of(x, 0, 1))
        kept = range(dim)
    inputs = [x.name, starts, ends]
    if kind != "leading":
        inputs.append(b.static([axis if b.rng.random() < 0.5 else axis - rank], "axes", index_type))
        if steps is not None:
            inputs.append(steps)
    elif b.rng.random() < 0.5:
        inputs += ["", b.static([1], "steps", index_type)]  # axes omitted by '', steps given
    dims = list(x.dims)
    dims[axis] = dims[axis].to(len(kept)) if kind != "leading" else dims[axis]
    b.note(f"slice({kind} axis={axis} {np.dtype(index_type).name})")
    return b.produced(x.with_dims(b.op("Slice", inputs), dims))


@ingredient("pad")
def _pad(b: Builder, x: Act) -> Act:
    """Pad the last two axes with pads static or computed, constant_value given, omitted or ''."""
    rank = x.rank
    mode = b.rng.choice(["constant", "constant", "reflect", "edge"])
    padded = [rank - 2, rank - 1]
    amounts = {}
    for axis in padded:
        top = min(2, x.dims[axis].value - 1) if mode == "reflect" else 2  # reflect needs pad < dim
        amounts[axis] = (b.rng.randint(0, top), b.rng.randint(0, top))
    with_axes = b.opset >= 18 and b.rng.random() < 0.4
    listed = padded if with_axes else list(range(rank))
    begins = [amounts.get(a, (0, 0))[0] for a in listed]
    ends = [amounts.get(a, (0, 0))[1] for a in listed]
    kind = b.rng.choice(["static", "concat", "constant_of_shape"])
    if kind == "static":
        pads = b.static(np.array(begins + ends, np.int64), "pads")
    elif kind == "concat":
        pads = b.concat([b.static(np.array(begins, np.int64), "begins"), b.static(np.array(ends, np.int64), "ends")])
    else:  # zeros of a computed length (the unpadded leading axes) + the rest, as torch's pad export does
        lead = len(listed) - 2
        zeros = (b.op("ConstantOfShape", [b.static([lead], "lead", np.int64)],
                      value=numpy_helper.from_array(np.array([0], np.int64), "zero")) if lead else "")
        pads = b.concat([zeros, b.static(np.array(begins[lead:], np.int64), "begins"),
                         b.static(np.array(ends, np.int64), "ends")])
    inputs = [x.name, pads]
    value = b.rng.choice(["absent", "given", "empty_name"]) if mode == "constant" else "absent"
    if value == "given":
        inputs.append(b.static(np.float32(b.rng.choice([0.0, 0.5, -1.0])), "pad_value"))
    elif value == "empty_name" or with_axes:
        inputs.append("")
    if with_axes:
        inputs.append(b.static([a if b.rng.random() < 0.5 else a - rank for a in padded], "axes", np.int64))
    dims = list(x.dims)
    for axis, (lo, hi) in amounts.items():
        dims[axis] = dims[axis].to(dims[axis].value + lo + hi)
    b.note(f"pad({mode} pads={kind} value={value}{' axes' if with_axes else ''})")
    return b.produced(x.with_dims(b.op("Pad", inputs, mode=mode), dims))


@ingredient("constant_of_shape", opsets=(9, 21))
def _constant_of_shape(b: Builder, x: Act) -> Act:
    """ConstantOfShape(Shape(x) or a broadcastable computed shape), value float/int/absent, added to x."""
    shape = b.shape_of(x)
    if b.rng.random() < 0.4:  # [dims..., 1]: broadcast along the last axis
        shape = b.concat([b.shape_of(x, 0, x.rank - 1), b.static([1], "one", np.int64)])
    kind = b.rng.choice(["absent", "float", "int64", "int32"])
    attrs = {}
    if kind != "absent":
        np_dtype = {"float": np.float32, "int64": np.int64, "int32": np.int32}[kind]
        attrs["value"] = numpy_helper.from_array(np.array([1 if kind != "float" else 0.5], np_dtype), "value")
    y = b.op("ConstantOfShape", [shape], **attrs)
    if kind in ("int64", "int32"):
        y = b.cast(y, FLOAT)
    b.note(f"constant_of_shape(value={kind})")
    return b.produced(x.with_dims(b.op("Add", [x.name, y]), x.dims))


@ingredient("range")
def _range(b: Builder, x: Act) -> Act:
    """Range(0, last dim of x, 1) in int64, int32 or float, scaled and added along the last axis."""
    limit = b.dim_scalar(x, x.rank - 1)
    kind = b.rng.choice(["int64", "int32", "float"])
    if kind == "int64":
        r = b.op("Range", [b.static(np.int64(0), "start"), limit, b.static(np.int64(1), "delta")])
    elif kind == "int32":
        r = b.op("Range", [b.static(np.int32(0), "start"), b.cast(limit, INT32), b.static(np.int32(1), "delta")])
    else:
        r = b.op("Range", [b.static(np.float32(0), "start"), b.cast(limit, FLOAT), b.static(np.float32(1), "delta")])
    if kind != "float":
        r = b.cast(r, FLOAT)
    y = b.op("Add", [x.name, b.op("Mul", [r, b.static(np.float32(0.125), "step")])])
    b.note(f"range({kind})")
    return b.produced(x.with_dims(y, x.dims))


@ingredient("topk")
def _topk(b: Builder, x: Act) -> Act:
    """TopK with k static or computed (half the axis), indices sometimes a second graph output."""
    axis = b.rng.choice([x.rank - 1, x.rank - 1, b.rng.randrange(1, x.rank)])
    dim = x.dims[axis].value
    kind = b.rng.choice(["static", "half", "minus_one"])
    if kind == "static":
        k, count = b.static([max(1, dim // 2)], "k", np.int64), max(1, dim // 2)
    elif kind == "half":
        k = b.op("Div", [b.shape_of(x, axis, axis + 1), b.static([2], "two", np.int64)])
        count = dim // 2
    else:
        k, count = b.op("Sub", [b.shape_of(x, axis, axis + 1), b.static([1], "one", np.int64)]), dim - 1
    if count < 1:
        k, count = b.static([1], "k", np.int64), 1
    attrs = {"axis": axis if b.rng.random() < 0.5 else axis - x.rank}
    if b.rng.random() < 0.5:
        attrs["largest"] = b.rng.choice([0, 1])
    values, indices = b.op("TopK", [x.name, k], outputs=2, **attrs)
    dims = list(x.dims)
    dims[axis] = dims[axis].to(count)
    if b.rng.random() < 0.5:
        # Compared by shape only: fp16 rounding may reorder near ties.
        b.side_output(indices, INT64, dims)
    b.note(f"topk(k={kind} axis={axis})")
    return b.produced(x.with_dims(values, dims))


@ingredient("onehot", opsets=(9, 21))
def _onehot(b: Builder, x: Act) -> Act:
    """MatMul by a transposed OneHot whose depth is x's last dim (computed), indices of a seeded dtype."""
    width, picks = x.dims[-1].value, b.rng.randint(2, 6)
    # The (indices, depth) element types onnxruntime's CPU OneHot implements (values float).
    index_type, depth_type = b.rng.choice([(np.int64, INT64), (np.int64, INT32), (np.int64, FLOAT),
                                           (np.int32, INT32), (np.int32, FLOAT), (np.float32, FLOAT)])
    low = -width if b.opset >= 11 else 0  # negative indices count from the end from opset 11
    indices = b.static(b.np.integers(low, width, size=picks).astype(index_type), "indices")
    depth_kind = b.rng.choice(["scalar", "vector", "static"])
    if depth_kind == "scalar":
        depth = b.dim_scalar(x, x.rank - 1)
    elif depth_kind == "vector":
        depth = b.shape_of(x, x.rank - 1, x.rank)
    else:
        depth = b.static(np.array([width], np.int64), "depth")
    if depth_type != INT64:
        depth = b.cast(depth, depth_type)
    values = b.static(np.array([0.0, 1.0], np.float32), "onoff")
    onehot = b.op("OneHot", [indices, depth, values], axis=-1)
    y = b.op("MatMul", [x.name, b.op("Transpose", [onehot], perm=[1, 0])])
    b.note(f"onehot(indices {np.dtype(index_type).name}, depth {depth_kind} {TensorProto.DataType.Name(depth_type)})")
    return b.produced(x.with_dims(y, x.dims[:-1] + (fixed(picks),)))


@ingredient("squeeze_unsqueeze", opsets=(13, 21), ranks=(2, MAX_RANK - 1))
def _squeeze_unsqueeze(b: Builder, x: Act) -> Act:
    """Unsqueeze then Squeeze with axes as inputs (opset 13): static, computed (Shape(Shape(x))) or omitted."""
    kind = b.rng.choice(["first", "last_negative", "computed_rank"])
    if kind == "first":
        axes, axis = b.static([0], "axes", np.int64), 0
    elif kind == "last_negative":
        axes, axis = b.static([-1], "axes", np.int64), x.rank
    else:  # Shape(Shape(x)) = [rank]: a new last axis
        axes, axis = b.op("Shape", [b.op("Shape", [x.name])]), x.rank
    grown = b.op("Unsqueeze", [x.name, axes])
    grown = b.op("Relu", [grown]) if b.rng.random() < 0.5 else grown
    # Squeeze without axes removes every 1: only when no other dim is 1.
    squeeze_kind = b.rng.choice(["same", "omitted"]) if 1 not in x.shape else "same"
    if squeeze_kind == "same":
        axes_again = axes if b.rng.random() < 0.5 else b.static([axis], "axes", np.int64)
        y = b.op("Squeeze", [grown, axes_again])
    else:
        y = b.op("Squeeze", [grown])
    b.note(f"squeeze_unsqueeze(axes {kind}, squeeze {squeeze_kind})")
    return b.produced(x.with_dims(y, x.dims))


# ----------------------------------------------------------------- empty optional inputs


@ingredient("clip")
def _clip(b: Builder, x: Act) -> Act:
    """Clip-11+: min and max each given, omitted, or named '' (a min-less Clip is ReLU6's export)."""
    form = b.rng.choice(["none", "min", "max_only", "both", "min_empty_max"])
    low, high = b.static(np.float32(-1.5), "min"), None
    if form == "none":
        inputs = [x.name]
    elif form == "min":
        inputs = [x.name, low]
    elif form == "max_only":
        high = b.static(np.float32(1.5), "max")
        inputs = [x.name, "", high]
    elif form == "both":
        high = b.static(np.float32(1.5), "max")
        inputs = [x.name, low, high]
    else:
        inputs = [x.name, low, ""]
    b.note(f"clip({form})")
    return b.produced(x.with_dims(b.op("Clip", inputs), x.dims))


@ingredient("dropout", opsets=(12, 21))
def _dropout(b: Builder, x: Act) -> Act:
    """Dropout-12+ in inference: ratio/training_mode omitted, '' or given; the mask output sometimes named."""
    form = b.rng.choice(["bare", "empty_ratio", "empty_both", "ratio"])
    inputs = {"bare": [x.name], "empty_ratio": [x.name, ""], "empty_both": [x.name, "", ""],
              "ratio": [x.name, b.static(np.float32(0.25), "ratio")]}[form]
    outputs = 2 if b.rng.random() < 0.3 else 1
    y = b.op("Dropout", inputs, outputs=outputs)
    y = y[0] if outputs == 2 else y
    b.note(f"dropout({form}{', mask' if outputs == 2 else ''})")
    return b.produced(x.with_dims(y, x.dims))


# ----------------------------------------------------------------- control flow


def _body_value_info(b: Builder, names: Sequence[str]) -> List[onnx.ValueInfoProto]:
    """value_info for body intermediates: untyped, no type at all, or elem_type without shape."""
    return [declared_value_info(n, FLOAT, None, b.rng.choice(["untyped", "bare", "elem"]))
            for n in names if b.rng.random() < 0.6]


def _branch(b: Builder, x: Act, kind: str, tag: str) -> onnx.GraphProto:
    """An If branch reading ``x`` from the outer scope; same output shape as ``x``."""
    with b.body() as nodes:
        if kind == "matmul":
            width = x.dims[-1].value
            inner = b.op("MatMul", [x.name, b.initializer(b.weights(width, width, fan_in=width), "Wb")])
            out = b.op(b.rng.choice(["Relu", "Tanh"]), [inner])
        elif kind == "reshape":  # a body that computes a shape
            inner = b.op("Mul", [x.name, b.static(np.float32(0.5), "half")])
            out = b.op("Reshape", [inner, b.shape_of(x)])
        else:
            inner = b.op("Neg", [x.name])
            out = b.op("Identity", [inner])
    decl = b.body_decl(out, FLOAT, x.dims)
    return helper.make_graph(nodes, f"{tag}_body", [], [decl], value_info=_body_value_info(b, [inner]))


@ingredient("if")
def _if(b: Builder, x: Act) -> Act:
    """If with a condition computed from Shape(x) or a static bool, bodies with untyped outputs/value_info."""
    cond_kind = b.rng.choice(["shape_true", "shape_false", "static"])
    if cond_kind == "static":
        cond = b.static(np.array(b.rng.random() < 0.5) if b.rng.random() < 0.5 else np.array([True]), "cond")
    else:  # decided by shapes, which conversion cannot change
        op = "Greater" if cond_kind == "shape_true" else "Less"
        cond = b.op(op, [b.dim_scalar(x, 0), b.static(np.int64(0), "zero")])
    kinds = ["matmul", "reshape", "neg"]
    then_branch = _branch(b, x, b.rng.choice(kinds), "then")
    else_branch = _branch(b, x, b.rng.choice(kinds), "else")
    y = b.op("If", [cond], then_branch=then_branch, else_branch=else_branch)
    b.note(f"if(cond {cond_kind}, then {then_branch.output[0].type.WhichOneof('value') or 'untyped'})")
    return b.produced(x.with_dims(y, x.dims))


@ingredient("loop")
def _loop(b: Builder, x: Act) -> Act:
    """Loop with a trip count from Shape(x) (or static), carried state from ConstantOfShape, a scan output."""
    trips_kind = b.rng.choice(["shape", "static"])
    trips = b.dim_scalar(x, 0) if trips_kind == "shape" else b.static(np.int64(b.rng.randint(1, 3)), "trips")
    cond = b.static(np.array(True), "cond") if b.rng.random() < 0.5 else ""
    start_kind = b.rng.choice(["input", "zeros"])
    start = x.name if start_kind == "input" else b.op("ConstantOfShape", [b.shape_of(x)])
    iteration, cond_in, carried = b.fresh("iter"), b.fresh("cond_in"), b.fresh("carried")
    with b.body() as nodes:
        cond_out = b.op("Identity", [cond_in])
        term = b.op("Mul", [b.op("Relu", [x.name]), b.static(np.float32(0.25), "w")])
        carried_out = b.op("Add", [carried, term])
        scanned = b.op("Sigmoid", [carried_out])
    body_inputs = [helper.make_tensor_value_info(iteration, INT64, []), helper.make_tensor_value_info(cond_in, BOOL, []),
                   b.body_decl(carried, FLOAT, x.dims, ("full", "elem", "untyped"))]
    body_outputs = [b.body_decl(cond_out, BOOL, ()), b.body_decl(carried_out, FLOAT, x.dims),
                    b.body_decl(scanned, FLOAT, None)]
    body = helper.make_graph(nodes, "loop_body", body_inputs, body_outputs, value_info=_body_value_info(b, [term]))
    final, stacked = b.op("Loop", [trips, cond, start], outputs=2, body=body)
    trip_count = x.dims[0] if trips_kind == "shape" else None
    if b.rng.random() < 0.5:
        b.side_output(stacked, FLOAT, None if trip_count is None else (trip_count,) + x.dims)
    b.note(f"loop(trips {trips_kind}, cond {'given' if cond else 'omitted'}, start {start_kind})")
    return b.produced(x.with_dims(final, x.dims))


@ingredient("scan")
def _scan(b: Builder, x: Act) -> Act:
    """Scan over one axis with its initial state shaped by a computed ConstantOfShape, untyped body outputs."""
    rank = x.rank
    axis = b.rng.randrange(rank)
    rest = [d for i, d in enumerate(x.dims) if i != axis]
    parts = ([b.shape_of(x, 0, axis)] if axis else []) + ([b.shape_of(x, axis + 1, rank)] if axis + 1 < rank else [])
    state0 = b.op("ConstantOfShape", [b.concat(parts)])
    state_in, item = b.fresh("state_in"), b.fresh("item")
    with b.body() as nodes:
        state_out = b.op("Add", [state_in, b.op("Mul", [item, b.static(np.float32(0.5), "w")])])
        out = b.op("Tanh", [b.op("Add", [item, state_out])])
    body = helper.make_graph(
        nodes, "scan_body",
        # Inputs keep their shape: onnxruntime runs a Scan body only when it can infer every output's shape.
        [b.body_decl(state_in, FLOAT, rest, ("full",)), b.body_decl(item, FLOAT, rest, ("full",))],
        [b.body_decl(state_out, FLOAT, rest), b.body_decl(out, FLOAT, rest)])
    attrs = {"num_scan_inputs": 1}
    if axis or b.rng.random() < 0.3:
        signed = axis if b.rng.random() < 0.5 else axis - rank
        attrs.update(scan_input_axes=[signed], scan_output_axes=[signed])
    final, stacked = b.op("Scan", [state0, x.name], outputs=2, body=body, **attrs)
    if b.rng.random() < 0.5:
        b.side_output(final, FLOAT, rest)
    b.note(f"scan(axis {axis})")
    return b.produced(x.with_dims(stacked, x.dims))


VALUE_READING = sorted(n for n, i in INGREDIENTS.items() if not i.compute)
COMPUTE = sorted(n for n, i in INGREDIENTS.items() if i.compute)


# --------------------------------------------------------------------------- cases


@dataclasses.dataclass
class ValidCase:
    """One generated model: its bytes, the feeds to run it on, and what went into it."""

    seed: int
    index: int
    opset: int
    ingredients: Tuple[str, ...]
    description: str
    model: bytes
    feeds: Dict[str, np.ndarray]

    @property
    def repro(self) -> str:
        return f"seed={self.seed} case={self.index}: opset {self.opset} [{' '.join(self.ingredients)}] {self.description}"


def _pick_opset(rng: random.Random, forced: Optional[str]) -> int:
    """Opsets 11..21 (11-13 weighted up: the exporters of issue 19), 9 for Upsample."""
    weighted = OPSETS + (11, 12, 13)
    if forced is not None:
        low, high = INGREDIENTS[forced].opsets
        return rng.choice([o for o in weighted if low <= o <= high] or [low])
    if rng.random() < 0.05:
        return UPSAMPLE_OPSET
    return rng.choice(weighted)


def _pick(rng: random.Random, names: Sequence[str], opset: int, act: Act, fixed_rank: bool) -> Optional[str]:
    fitting = [n for n in names if INGREDIENTS[n].fits(opset, act) and not (fixed_rank and INGREDIENTS[n].changes_rank)]
    return rng.choice(fitting) if fitting else None


def _plan(rng: random.Random, opset: int, forced: Optional[str]) -> List[Optional[str]]:
    """Stage slots: 1-3 value-reading ones (None: drawn when reached) each among 0-2 compute stages."""
    specials: List[Optional[str]] = [None] * rng.randint(1, 3)
    if opset == UPSAMPLE_OPSET and forced is None:
        forced = "upsample"  # an opset-9 case is an Upsample case
    if forced is not None:
        specials[rng.randrange(len(specials))] = forced
    plan: List[Optional[str]] = []
    for special in specials:
        plan += ["compute"] * rng.randint(0, 2) + [special]
    return plan + ["compute"] * rng.randint(0, 2)


def make_case(seed: int, index: int, ingredient: Optional[str] = None) -> ValidCase:
    """Case ``index`` of ``seed``, every draw from ``random.Random(f"{seed}:{index}")``; ``ingredient`` forces one in."""
    rng = random.Random(f"{seed}:{index}" if ingredient is None else f"{seed}:{index}:{ingredient}")
    opset = _pick_opset(rng, ingredient)
    plan = _plan(rng, opset, ingredient)
    forced = [s for s in plan if s not in (None, "compute")]
    low, high = (INGREDIENTS[forced[0]].ranks if forced else (2, 4))
    rank = rng.choice([r for r in (4, 4, 4, 3, 2) if low <= r <= min(high, 4)] or [low])
    b = Builder(rng, opset)
    x = b.graph_input(rank)
    used: List[str] = []
    for position, slot in enumerate(plan):
        b.stage = position
        # Until a forced ingredient is reached, keep the rank it was given.
        fixed_rank = any(s in forced for s in plan[position:])
        if slot == "compute":
            slot = _pick(rng, COMPUTE, opset, x, fixed_rank)
        elif slot is None:
            slot = _pick(rng, VALUE_READING, opset, x, fixed_rank)
        if slot is None:
            continue
        x = INGREDIENTS[slot].build(b, x)
        used.append(slot)
    model = b.model(x)
    return ValidCase(seed, index, opset, tuple(used), "; ".join(b.notes), model.SerializeToString(), b.feeds)


# --------------------------------------------------------------------------- onnxruntime


def first_line(error: BaseException) -> str:
    """An exception's first non-empty line, whitespace squeezed."""
    lines = [ln for ln in str(error).splitlines() if ln.strip()]
    return " ".join((lines[0] if lines else type(error).__name__).split())


def session(path):
    """A CPU onnxruntime session, quiet (its warnings would drown the fuzz log) and on one thread."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4  # a refusal is reported by its exception, not a log line besides
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def reference(path, feeds: Dict[str, np.ndarray]) -> Tuple[Optional[List[np.ndarray]], Optional[str]]:
    """Run the model at ``path``: (outputs, None), or (None, why onnxruntime refuses to load or run it)."""
    try:
        sess = session(path)
    except Exception as exc:  # noqa: BLE001 -- any refusal makes the case invalid
        return None, f"load: {first_line(exc)}"
    try:
        return sess.run(None, feeds), None
    except Exception as exc:  # noqa: BLE001
        return None, f"run: {first_line(exc)}"


def _typed_feeds(sess, feeds: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
    """The feeds cast to the session's input types (``--no-keep-io-types`` makes float inputs float16)."""
    typed = {}
    for arg in sess.get_inputs():
        value = feeds[arg.name]
        typed[arg.name] = value.astype(np.float16) if arg.type == "tensor(float16)" else value
    return typed


def check_converted(path, feeds: Dict[str, np.ndarray], expected: Sequence[np.ndarray], *, run: bool,
                    original=None) -> Optional[str]:
    """None when the converted model at ``path`` loads (and with ``run`` runs and matches ``expected``), else why not.

    Without ``run`` (bf16) a NOT_IMPLEMENTED kernel error counts as loaded: the
    graph resolved; the CPU provider lacks many bfloat16 kernels. When the
    converted model takes float16 inputs and ``original`` (the float32 model's
    path) is given, ``expected`` is recomputed from the inputs rounded to
    float16: the converted model never sees more, and an ill-conditioned model
    amplifies that rounding alone past any tolerance.
    """
    try:
        sess = session(path)
    except Exception as exc:  # noqa: BLE001
        if not run and "NOT_IMPLEMENTED" in str(exc):
            return None
        return f"converted model does not load in onnxruntime: {first_line(exc)}"
    if not run:
        return None
    typed = _typed_feeds(sess, feeds)
    try:
        got = sess.run(None, typed)
    except Exception as exc:  # noqa: BLE001
        return f"converted model does not run: {first_line(exc)}"
    if original is not None and any(v.dtype == np.float16 for v in typed.values()):
        rounded = {k: v.astype(np.float32) if v.dtype == np.float16 else v for k, v in typed.items()}
        expected, refusal = reference(original, rounded)
        if refusal is not None:
            return f"the float32 model refuses the float16-rounded inputs: {refusal}"
    names = [o.name for o in sess.get_outputs()]
    for name, want, have in zip(names, expected, got):
        problem = compare(name, np.asarray(want), np.asarray(have))
        if problem:
            return problem
    return None


def compare(name: str, want: np.ndarray, have: np.ndarray) -> Optional[str]:
    """Loose comparison of one output: same shape; float values within TOLERANCE of the output's scale.

    Integer and bool outputs (TopK indices) are compared by shape only: fp16
    rounding may reorder near ties, which is not the converter's fault.
    """
    if want.shape != have.shape:
        return f"output {name!r}: shape {list(have.shape)}, expected {list(want.shape)}"
    if want.dtype.kind != "f" or want.size == 0:
        return None
    want64, have64 = want.astype(np.float64), have.astype(np.float64)
    finite = np.isfinite(want64)
    lost = finite & ~np.isfinite(have64)
    if lost.any():
        where = tuple(int(i) for i in np.argwhere(lost)[0])
        return f"output {name!r}: {int(lost.sum())} non-finite value(s) where float32 is finite, e.g. at {where}: " \
               f"{have64[where]} (float32 {want64[where]:.4g})"
    scale = float(np.max(np.abs(want64[finite]))) if finite.any() else 0.0
    atol = TOLERANCE * max(scale, 1e-6)
    diff = np.where(finite, np.abs(have64 - want64), 0.0)
    bad = diff > atol + TOLERANCE * np.abs(np.where(finite, want64, 0.0))
    if bad.any():
        where = tuple(int(i) for i in np.unravel_index(int(np.argmax(diff)), diff.shape))
        return (f"output {name!r}: {int(bad.sum())} of {want.size} value(s) differ; max |diff| {diff[where]:.4g} "
                f"at {where} (got {have64[where]:.4g}, float32 {want64[where]:.4g}); scale {scale:.4g}, "
                f"tolerance {atol:.4g} + {TOLERANCE:g}*|x|")
    return None
