"""What one float32 pass over a model costs on this machine: FLOPs, bytes and peak memory, in seconds.

The synthetic run (``calibration.synthetic``) is budgeted by its cost, not by
node and weight counts. The cost of one pass of ``numerics.collect`` is the
sum of what it does, each from the model's shapes at the sample's sizes
(``reading.shapes``: onnx inference at concrete input shapes, symbolic dims
from the random-input rules):

- overhead: a fork and a session (``FIXED_SECONDS``), and for every node a
  kernel onnxruntime sets up and an output the pass folds into a statistic
  (``NODE_SECONDS``: a 4,000-node chain of ``[1, 16]`` tensors costs 0.7 s
  of this and nothing else);
- work: arithmetic, the multiply-adds of MatMul, Gemm, Conv, ConvTranspose,
  Einsum and the recurrent ops, two FLOPs each, at ``FLOPS_PER_SECOND``
  (other ops count one FLOP per output element); activations, every float32
  tensor the main graph computes, which leaves the session as an output and
  is read once by the statistics, and every float input, drawn at random and
  read once, counted four times (``ACTIVATION_BYTES_PER_SECOND``); weights,
  the copy the run saves as external data and onnxruntime reads back
  (``WEIGHT_BYTES_PER_SECOND``).

Seconds are CPU seconds of this machine (what the pass takes with the machine
to itself; on a shared machine the wall time is longer). The rates were
measured on the 2-core x86_64 machine the benchmarks run on with models that
isolate each term (``bench/bench_synthetic.py`` measures them again and sets
the estimate beside the run) and rounded to the slow side: the estimate errs
towards skipping. Peak memory is the weights twice (the saved copy and the
session's) plus every activation twice (the session's outputs and the
statistics' working copy).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Optional, Sequence

import onnx_ir as ir

from ampconv.core.graphs import all_graphs
from ampconv.reading.shapes import inferred_shapes
from ampconv.tensors import tensorsize

# Measured rates (see the module docstring), rounded to the slow side; CPU seconds.
FIXED_SECONDS = 0.05  # a fork, a temporary folder, a session of one node
NODE_SECONDS = 180e-6
FLOPS_PER_SECOND = 20e9
ACTIVATION_BYTES_PER_SECOND = 300e6
WEIGHT_BYTES_PER_SECOND = 150e6
# Multiply-add ops: two FLOPs per multiply-add.
_CONTRACTIONS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "FusedMatMul", "MatMulNBits"})
_RECURRENT = frozenset({"LSTM", "GRU", "RNN"})
_FLOAT32 = ir.DataType.FLOAT


@dataclasses.dataclass(frozen=True)
class RunCost:
    """The cost of one float32 pass: FLOPs, bytes of activations and weights, nodes; seconds and peak memory.

    ``unsized``: nodes whose output sizes inference could not find (counted as
    nothing but their node cost: the estimate says so in its text).
    """

    flops: float
    activation_bytes: int
    weight_bytes: int
    nodes: int
    unsized: int = 0

    @property
    def overhead(self) -> float:
        """The estimated seconds the pass spends setting up: the fork, the session, a kernel and a fold per node."""
        return FIXED_SECONDS + self.nodes * NODE_SECONDS

    @property
    def work(self) -> float:
        """The estimated seconds of the pass's arithmetic and bytes: FLOPs, activations, weights."""
        return (self.flops / FLOPS_PER_SECOND + self.activation_bytes / ACTIVATION_BYTES_PER_SECOND
                + self.weight_bytes / WEIGHT_BYTES_PER_SECOND)

    @property
    def seconds(self) -> float:
        """The estimated CPU seconds of the pass on this machine."""
        return self.overhead + self.work

    @property
    def peak_bytes(self) -> int:
        """The estimated peak memory of the pass (the weights and the activations, twice each)."""
        return 2 * self.weight_bytes + 2 * self.activation_bytes

    def describe(self) -> str:
        """How a note says it: ``4.6 GFLOP, 210 MiB of activations, 84 MiB of weights``."""
        text = (f"{self.flops / 1e9:.3g} GFLOP, {self.activation_bytes / 2**20:.0f} MiB of activations, "
                f"{self.weight_bytes / 2**20:.0f} MiB of weights, {self.nodes} nodes")
        return text + (f"; {self.unsized} node(s) of unknown size" if self.unsized else "")


def weight_bytes(model: ir.Model) -> int:
    """Bytes of every initializer of every graph."""
    return sum(tensorsize.nbytes(v.const_value) for graph in all_graphs(model)
               for v in graph.initializers.values() if v.const_value is not None)


def node_count(model: ir.Model) -> int:
    """Nodes of every graph."""
    return sum(len(graph) for graph in all_graphs(model))


def floor_cost(model: ir.Model) -> RunCost:
    """The pass's cost from node and weight counts alone (no shapes: no inference to run).

    Its work is the weights': read once and, as the weights of a contraction,
    one multiply-add per float32 element; activations are not counted.
    """
    weights = weight_bytes(model)
    return RunCost(2.0 * weights / 4, 0, weights, node_count(model))


def estimate(model: ir.Model, input_shapes: Mapping[str, Sequence[int]]) -> RunCost:
    """The cost of one pass of ``model`` on inputs of ``input_shapes`` (graph input name -> concrete shape).

    Sizes come from onnx inference at those shapes (a dimension it leaves
    symbolic counts as the largest size given to a symbolic input dimension);
    a body's nodes count their node cost only (their iterations are not known
    before the run).
    """
    shape_of = inferred_shapes(model, input_shapes)
    unknown = _symbolic_size(model, input_shapes)
    shape_of = _known_dims(shape_of, unknown)
    flops, unsized = 0.0, 0
    # Each float input is drawn at random (a normal draw costs about as much as three reads), then folded.
    activations = 4 * sum(4 * math.prod(dims) for v in model.graph.inputs
                          if v.dtype == _FLOAT32 and (dims := input_shapes.get(v.name)) is not None)
    for node in model.graph:
        named = [v for v in node.outputs if v.name]
        sizes = [_elements(shape_of(v)) for v in named]
        if any(n is None for n in sizes):
            unsized += 1
            continue
        activations += 4 * sum(n for v, n in zip(named, sizes) if v.dtype in (_FLOAT32, None))
        flops += _flops(node, shape_of, sum(sizes))
    return RunCost(flops, activations, weight_bytes(model), node_count(model), unsized)


def _flops(node: ir.Node, shape_of, produced: int) -> float:
    """The FLOPs of ``node``: twice its multiply-adds for contractions, one per output element otherwise."""
    if node.op_type in _CONTRACTIONS:
        macs = _contraction_macs(node, shape_of, produced)
        if macs is not None:
            return 2.0 * macs
    if node.op_type in _RECURRENT:
        weights = [_elements(shape_of(v)) if v is not None else None for v in node.inputs[1:3]]
        first = _dims(shape_of(node.inputs[0])) if node.inputs and node.inputs[0] is not None else None
        if first and len(first) == 3 and all(w is not None for w in weights):
            return 2.0 * first[0] * first[1] * sum(weights)  # every step multiplies both weights
    return float(produced)


def _contraction_macs(node: ir.Node, shape_of, produced: int) -> Optional[float]:
    """Multiply-adds of a contraction: output elements times the length each one sums."""
    dims = [_dims(shape_of(v)) if v is not None else None for v in node.inputs[:2]]
    if len(dims) < 2 or dims[0] is None or dims[1] is None or not dims[0] or not dims[1]:
        return None
    a, w = dims
    op = node.op_type
    if op in ("Conv", "ConvTranspose"):
        if len(w) < 3:
            return None
        kernel = math.prod(w[2:])
        if op == "Conv":
            return float(produced) * w[1] * kernel  # w: [out, in / group, k...]
        return float(_elements_of(a)) * w[1] * kernel  # w: [in, out / group, k...]: every input spreads
    if op == "Gemm":
        attribute = node.attributes.get("transA")
        inner = a[0] if attribute is not None and attribute.value else a[-1]
        return float(produced) * inner
    if op == "Einsum":
        return float(max(_elements_of(a), _elements_of(w), produced)) * max(a[-1], 1)
    return float(produced) * a[-1]  # MatMul and its fused forms: the shared axis is A's last


def _symbolic_size(model: ir.Model, input_shapes: Mapping[str, Sequence[int]]) -> int:
    """The largest size given to a symbolic dimension of an input (1 when none is symbolic): what a dimension
    inference leaves unknown (``unk__0``, a Range's length from a Shape) counts as, mostly a sequence's length."""
    sizes = [1]
    for value in model.graph.inputs:
        given = input_shapes.get(value.name)
        if value.shape is None or given is None:
            continue
        sizes.extend(size for dim, size in zip(value.shape.dims, given) if not isinstance(dim, int))
    return max(sizes)


def _known_dims(shape_of, unknown: int):
    """``shape_of`` with every dimension inference left symbolic counted as ``unknown``."""

    def known(value: ir.Value) -> Optional[ir.Shape]:
        shape = shape_of(value)
        if shape is None or all(isinstance(d, int) for d in shape.dims):
            return shape
        return ir.Shape([d if isinstance(d, int) else unknown for d in shape.dims])

    return known


def _dims(shape: Optional[ir.Shape]) -> Optional[tuple]:
    """The dims of ``shape`` when every one is a number; None otherwise."""
    if shape is None:
        return None
    dims = tuple(shape.dims)
    return dims if all(isinstance(d, int) and d >= 0 for d in dims) else None


def _elements(shape: Optional[ir.Shape]) -> Optional[int]:
    dims = _dims(shape)
    return None if dims is None else math.prod(dims)


def _elements_of(dims: tuple) -> int:
    return math.prod(dims)


__all__ = ["RunCost", "estimate", "floor_cost", "node_count", "weight_bytes"]
