"""Fold an inference BatchNormalization into the Conv (or Gemm) before it, in float32, where the LOW type has no
norm kernel.

Why. onnxruntime has no bfloat16 BatchNormalization kernel on any provider
(the CUDA table, ``ampconv.runtime.cuda_kernels``; its CPU provider has none
either), so a bfloat16 plan keeps every norm float32 (``hard-gpu-kernel``)
between two Casts: a ResNet pays two Casts per norm and runs half its nodes
float32. A norm in inference mode right after a Conv (or a Gemm: PyTorch's
Linear then BatchNorm1d) is an affine map per output channel, ``y = (x - mean) * scale + beta`` with
``scale = gamma / sqrt(var + epsilon)``; put into the Conv's weights and bias

    W' = W * scale (per output channel)    b' = (b - mean) * scale + beta

(for a Gemm, B's output columns scale, and ``beta * C`` is taken into the new
C with ``beta`` set to 1)
(computed in float64, stored float32 like the rest of the input; the rewrite
then rounds them to the LOW type as it does any weight, once), it costs
nothing at run time and leaves one node that has a LOW kernel. onnxruntime
makes the same fold at load for float32 and float16 (its Conv+BatchNorm
fusion), so where a norm kernel exists in the LOW type nothing is folded
here: the graph keeps the user's nodes.

When (``fold_reason``): the level converts something (not O0) and the GPU
provider the plan's LOW type is for (``plan.hard.gpu_question``) has
BatchNormalization kernels at the model's opset, none in the LOW type: the
question ``hard-gpu-kernel`` asks of each norm, asked once. Today that is
bfloat16 at every opset; float16 never.

Which pairs: a default-domain BatchNormalization with its five inputs,
``training_mode`` off, ``spatial`` not 0 (opsets 7-8), no output read but
``Y``, statistics that are constants (initializers that are not also graph
inputs, or Constant nodes) of one value per channel, reading a Conv or Gemm
whose only output only the norm reads (not a graph output), whose weight and
bias are constants read by that node alone, all float32 (a Gemm's bias one
value per column; not the opset-6 Gemm with ``broadcast``). A norm the user or the
policy keeps float32 is left (``--keep-fp32`` naming the norm or its Conv,
``--block-op`` of either op, a list that puts either op float32 at this
level: MindSpore's O2 keeps BatchNormalization float32, and so does ampconv
with that preset); so is a norm whose statistics a caller may feed at run
time. The norm's output value stays (the Conv now produces it under the same
name), so graph outputs, calibration statistics and value names read by
later steps still match.
"""

from __future__ import annotations

import dataclasses
from typing import List, Mapping, Optional, Sequence

import numpy as np
import onnx_ir as ir
from onnx_ir.passes import InPlacePass, PassResult

from ampconv.core.domains import is_default
from ampconv.plan.hard import gpu_question
from ampconv.plan.values import constant_array, is_float
from ampconv.policy import HIGH, Policy
from ampconv.runtime.target import Target

BATCH_NORM = "BatchNormalization"
_FLOAT = ir.DataType.FLOAT


@dataclasses.dataclass(frozen=True)
class Folded:
    """One norm folded: its name, the Conv that now computes it, and why norms were folded."""

    node: str
    into: str
    reason: str

    def record(self) -> Mapping[str, str]:
        """The report's entry (``Report.folded``)."""
        return {"node": self.node, "into": self.into, "reason": self.reason}


def fold_reason(low: str, target: Target, opset: int) -> Optional[str]:
    """Why norms are folded for a plan of LOW type ``low`` on ``target`` at default-domain ``opset`` (None: no
    fold; see the module docstring)."""
    question = gpu_question(low, target)
    if question is None:
        return None
    provider, type_string = question
    if target.runtime.gpu_low_kernel(provider, "", BATCH_NORM, opset, type_string) is not False:
        return None
    short, name = provider.replace("ExecutionProvider", ""), type_string[len("tensor("):-1]
    return (f"onnxruntime's {short} provider has no {name} BatchNormalization kernel at opset {opset}: the norm "
            f"would run float32 between two Casts")


def folded_note(folded: Sequence[Folded]) -> str:
    """The report's one line on the folded norms: how many, why, and the first pairs."""
    shown = ", ".join(f"'{f.node}' into '{f.into}'" for f in folded[:3])
    more = f" and {len(folded) - 3} more" if len(folded) > 3 else ""
    count = f"{len(folded)} BatchNormalization node{'s' if len(folded) != 1 else ''}"
    return (f"folded {count} into the Conv or Gemm before each, in float32 arithmetic ({folded[0].reason}): "
            f"{shown}{more}")


class FoldBatchNormPass(InPlacePass):
    """Fold every foldable Conv/Gemm -> BatchNormalization pair of the main graph (module docstring); ``folded``
    lists them.

    ``keep_fp32``: the compiled ``--keep-fp32`` patterns; a norm or producer
    whose name one matches is left, as is one whose op the ``policy`` blocks or
    keeps float32 at its level.
    """

    def __init__(self, reason: str, policy: Policy, keep_fp32: Sequence) -> None:
        super().__init__()
        self.reason = reason
        self.policy = policy
        self.keep_fp32 = tuple(keep_fp32)
        self.folded: List[Folded] = []

    def call(self, model: ir.Model) -> PassResult:
        if not self._op_allowed(BATCH_NORM):
            return PassResult(model, modified=False)
        graph = model.graph
        for norm in [node for node in graph if node.op_type == BATCH_NORM and is_default(node)]:
            producer = self._foldable(graph, norm)
            if producer is not None:
                self._fold(graph, producer, norm)
                self.folded.append(Folded(norm.name or "", producer.name or "", self.reason))
        return PassResult(model, modified=bool(self.folded))

    def _op_allowed(self, op_type: str) -> bool:
        """Whether the policy lets ``op_type`` run LOW at this level (not blocked, not a float32 class)."""
        if op_type in self.policy.blocked or f"ai.onnx::{op_type}" in self.policy.blocked:
            return False
        return self.policy.rule(self.policy.class_of("", op_type)) != HIGH

    def _kept(self, node: ir.Node) -> bool:
        return any(pattern.search(node.name or "") for pattern in self.keep_fp32)

    def _foldable(self, graph: ir.Graph, norm: ir.Node) -> Optional[ir.Node]:
        """The Conv or Gemm ``norm`` folds into, or None (the module docstring's conditions)."""
        if len(norm.inputs) != 5 or any(v is None for v in norm.inputs) or self._kept(norm):
            return None
        for name, off in (("training_mode", 1), ("spatial", 0)):
            attribute = norm.attributes.get(name)
            if attribute is not None and attribute.value == off:
                return None
        if any(v.uses() or v.is_graph_output() for v in norm.outputs[1:]):
            return None
        x = norm.inputs[0]
        producer = x.producer()
        if (producer is None or producer.op_type not in _AFFINE or not is_default(producer) or self._kept(producer)
                or not self._op_allowed(producer.op_type)):
            return None
        if len(producer.outputs) != 1 or x.is_graph_output() or len(x.uses()) != 1:
            return None
        if not all(is_float(v) for v in (x, norm.outputs[0], *norm.inputs[1:])):
            return None
        weight = producer.inputs[1] if len(producer.inputs) > 1 else None
        bias = producer.inputs[2] if len(producer.inputs) > 2 else None
        if (weight is None or not _own_constant(weight, producer)
                or (bias is not None and not _own_constant(bias, producer))):
            return None
        stats = [_stat(v) for v in norm.inputs[1:]]
        w = constant_array(weight)
        if any(s is None for s in stats) or w is None:
            return None
        channels = _channels(producer, w)
        if channels is None or any(s.shape != (channels,) for s in stats):
            return None
        if bias is not None:
            b = constant_array(bias)
            if b is None or b.shape not in ((channels,), (1, channels)):
                return None
        return producer

    def _fold(self, graph: ir.Graph, conv: ir.Node, norm: ir.Node) -> None:
        """Move ``norm``'s affine map into ``conv``'s (a Conv's or Gemm's) weight and bias; it then produces
        ``norm``'s output."""
        eps = norm.attributes.get_float("epsilon", 1e-5)
        gamma, beta, mean, var = (constant_array(v).astype(np.float64) for v in norm.inputs[1:])
        scale = gamma / np.sqrt(var + eps)
        weight = conv.inputs[1]
        w = constant_array(weight).astype(np.float64)
        bias = conv.inputs[2] if len(conv.inputs) > 2 else None
        b = constant_array(bias).astype(np.float64).reshape(-1) if bias is not None else np.zeros_like(mean)
        if conv.op_type == "Gemm":  # Y = alpha * A B' + beta * C: output column j of B' scales; beta goes into C
            w = w * (scale[:, None] if conv.attributes.get_int("transB", 0) else scale[None, :])
            b = b * conv.attributes.get_float("beta", 1.0)
            conv.attributes["beta"] = ir.AttrFloat32("beta", 1.0)
        else:  # Conv: W[out, in/group, k...], one output channel per row
            w = w * scale.reshape((-1,) + (1,) * (w.ndim - 1))
        folded_w = w.astype(np.float32)
        folded_b = ((b - mean) * scale + beta).astype(np.float32)
        if bias is not None:  # refilled in place: the value keeps its shape ((N,) or a Gemm's (1, N))
            folded_b = folded_b.reshape(constant_array(bias).shape)
        conv.replace_input_with(1, _initializer(graph, folded_w, weight, f"{conv.name or 'Conv'}.folded_weight"))
        new_bias = _initializer(graph, folded_b, bias, f"{conv.name or 'Conv'}.folded_bias")
        if bias is None:
            conv.resize_inputs(3)
        conv.replace_input_with(2, new_bias)
        x, y = conv.outputs[0], norm.outputs[0]
        ir.convenience.replace_all_uses_with(y, x, replace_graph_outputs=True)
        stats = list(norm.inputs[1:])
        graph.remove(norm, safe=True)
        name, x.name, y.name = y.name, None, None
        x.name = name
        x.type, x.shape = y.type, y.shape if y.shape is not None else x.shape
        for value in stats + ([weight] if weight is not conv.inputs[1] else []) + (
                [bias] if bias is not None and bias is not conv.inputs[2] else []):
            _drop_if_unused(graph, value)


# The producers a norm folds into: a Conv (output channels on axis 1) and a Gemm (its N columns on axis 1).
_AFFINE = ("Conv", "Gemm")


def _channels(producer: ir.Node, w: np.ndarray) -> Optional[int]:
    """How many output channels ``producer`` makes with weight ``w`` (None: not a form the fold handles)."""
    if producer.op_type == "Conv":
        return w.shape[0] if w.ndim >= 3 else None
    if w.ndim != 2 or "broadcast" in producer.attributes:  # Gemm before opset 7 broadcast C by attribute
        return None
    return w.shape[0] if producer.attributes.get_int("transB", 0) else w.shape[1]


def _own_constant(value: ir.Value, reader: ir.Node) -> bool:
    """A float32 constant that only ``reader`` reads and no caller can feed (not a graph input)."""
    if not is_float(value) or value.is_graph_input() or value.is_graph_output():
        return False
    if any(use.node is not reader for use in value.uses()):
        return False
    return value.const_value is not None or (value.producer() is not None and value.producer().op_type == "Constant")


def _stat(value: ir.Value) -> Optional[np.ndarray]:
    """A norm statistic's data, or None when a caller could feed it (a graph input) or it is not constant."""
    if value.is_graph_input() or value.is_graph_output():
        return None
    data = constant_array(value)
    return data if data is not None and data.dtype == np.float32 else None


def _initializer(graph: ir.Graph, data: np.ndarray, old: Optional[ir.Value], fallback_name: str) -> ir.Value:
    """An initializer holding ``data``: ``old``'s, refilled, when it is one; else a new one named after ``fallback_name``."""
    if old is not None and old.is_initializer():
        old.const_value = ir.tensor(data, name=old.name)
        return old
    name = fallback_name
    taken = set(graph.initializers)
    suffix = 0
    while name in taken:
        suffix += 1
        name = f"{fallback_name}_{suffix}"
    value = ir.Value(name=name, type=ir.TensorType(_FLOAT), shape=ir.Shape(data.shape),
                     const_value=ir.tensor(data, name=name))
    graph.register_initializer(value)
    return value


def _drop_if_unused(graph: ir.Graph, value: ir.Value) -> None:
    """Remove ``value`` once nothing reads it: its initializer entry, or the Constant node that made it."""
    if value.uses() or value.is_graph_output() or value.is_graph_input():
        return
    if value.is_initializer():
        graph.initializers.pop(value.name, None)
        return
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and producer.graph is graph:
        graph.remove(producer, safe=True)


__all__ = ["BATCH_NORM", "FoldBatchNormPass", "Folded", "fold_reason", "folded_note"]
