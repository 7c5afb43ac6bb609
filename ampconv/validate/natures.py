"""What scale each output of a model lives on, read from the graph that makes it.

The default verdict measures an output's error against its scale. For most
outputs that is the RMS of the reference; some outputs say more about
themselves:

- a **bounded** output (a Sigmoid, HardSigmoid or Softmax: [0, 1]; a Tanh,
  Softsign, Erf, Sin or Cos: [-1, 1]; a Clip with constant bounds), reached
  through ops that only move or select values, lives on its natural range: a
  probability map that is near zero everywhere on random inputs is still a
  map on [0, 1], and an error of 2e-5 there is nothing, however small its RMS;
- a **grid** output (a DequantizeLinear with a constant scale) lives on its
  quantization grid: one step is the smallest difference it can show, and a
  LOW conversion that flips a rounding decision upstream moves it by a step;
- a **sequence** output (integers a Loop or Scan stacks, step by step, along
  axis 0: a decoder's tokens) is read as sequences (``criteria.judge_sequence``);
  any other integer output of rank 2 or more is read along its last axis.

``output_natures`` returns a ``Nature`` for each such output; the others are
judged on their RMS (``criteria.judge``).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import numpy as np
import onnx_ir as ir

from ampconv.domains import is_default
from ampconv.plan.values import constant_array

# Producers whose outputs lie in a fixed range.
_RANGES = {
    "Sigmoid": (0.0, 1.0, "sigmoid"),
    "HardSigmoid": (0.0, 1.0, "hard sigmoid"),
    "Softmax": (0.0, 1.0, "softmax"),
    "Tanh": (-1.0, 1.0, "tanh"),
    "Softsign": (-1.0, 1.0, "softsign"),
    "Erf": (-1.0, 1.0, "erf"),
    "Sin": (-1.0, 1.0, "sin"),
    "Cos": (-1.0, 1.0, "cos"),
}
# Ops that only move, select or average values: the output stays in its input's range (or on its grid,
# for the first group).
_MOVE = frozenset(
    """Identity Reshape Flatten Squeeze Unsqueeze Transpose Slice Gather GatherElements GatherND Split Expand
    Tile Concat DepthToSpace SpaceToDepth""".split()
)
_AVERAGE = frozenset({"Resize", "MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool", "ReduceMax",
                      "ReduceMin", "ReduceMean"})


@dataclasses.dataclass(frozen=True)
class Nature:
    """The scale an output lives on: ``bounded`` in [low, high], or a ``grid`` of ``step``."""

    kind: str  # "bounded", "grid" or "sequence"
    words: str  # e.g. "a sigmoid output in [0, 1]"
    low: float = 0.0
    high: float = 0.0
    step: float = 0.0
    axis: int = -1  # a sequence's step axis

    @property
    def width(self) -> float:
        """The length errors are measured against: the range's width, or one grid step."""
        return self.high - self.low if self.kind == "bounded" else self.step


def output_natures(model: ir.Model) -> Dict[str, Nature]:
    """Output name -> its ``Nature``, for the main-graph outputs that have one."""
    natures = {}
    for value in model.graph.outputs:
        nature = _nature(value, depth=16)
        if nature is not None:
            natures[value.name] = nature
    return natures


def _nature(value: Optional[ir.Value], depth: int) -> Optional[Nature]:
    """The nature of ``value``, looking back through value-moving ops (at most ``depth``)."""
    producer = value.producer() if value is not None else None
    if producer is None or depth == 0 or not is_default(producer):
        return None
    op = producer.op_type
    if op in _RANGES:
        low, high, name = _RANGES[op]
        return Nature("bounded", f"a {name} output in [{low:g}, {high:g}]", low, high)
    if op == "Clip":
        return _clip(producer)
    if op == "DequantizeLinear":
        return _grid(producer)
    if op in ("Loop", "Scan") and value.dtype is not None and value.dtype.is_integer() and _is_scan_output(producer, value):
        return Nature("sequence", f"integers {op} stacks step by step", axis=0)
    if op == "Cast" and value.dtype is not None and value.dtype.is_floating_point():
        return _nature(producer.inputs[0], depth - 1)
    if op in _MOVE or (op in _AVERAGE):
        sources = [v for v in producer.inputs[:1 if op != "Concat" else None] if v is not None]
        natures = [_nature(v, depth - 1) for v in sources]
        if not natures or any(n is None for n in natures) or len({n for n in natures}) != 1:
            return None
        nature = natures[0]
        return nature if nature.kind == "bounded" or op in _MOVE else None
    return None


def _is_scan_output(node: ir.Node, value: ir.Value) -> bool:
    """Whether ``value`` is one of the per-iteration outputs a Loop or Scan stacks (not a final state)."""
    body = node.attributes["body"].value if "body" in node.attributes else None
    if body is None:
        return False
    states = len(body.outputs) - (1 if node.op_type == "Loop" else 0)  # Loop's body also returns its condition
    index = list(node.outputs).index(value)
    scans = node.attributes["num_scan_inputs"].value if node.op_type == "Scan" else 0
    n_state = (len(node.inputs) - 2) if node.op_type == "Loop" else (len(node.inputs) - scans)
    return index >= n_state and states > 0


def _clip(node: ir.Node) -> Optional[Nature]:
    """A Clip with constant min and max bounds its output (opset 11+: inputs; before: attributes)."""
    bounds = []
    for index, name in ((1, "min"), (2, "max")):
        attribute = node.attributes.get(name)
        if attribute is not None:
            bounds.append(float(attribute.value))
            continue
        array = constant_array(node.inputs[index]) if index < len(node.inputs) and node.inputs[index] is not None else None
        if array is None or array.size != 1:
            return None
        bounds.append(float(np.asarray(array).reshape(-1)[0]))
    low, high = bounds
    if not high > low:
        return None
    return Nature("bounded", f"a clip output in [{low:g}, {high:g}]", low, high)


def _grid(node: ir.Node) -> Optional[Nature]:
    """A DequantizeLinear with a constant scale: its output's grid step (the largest, per channel)."""
    scale = constant_array(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] is not None else None
    if scale is None or scale.size == 0:
        return None
    step = float(np.max(np.abs(np.asarray(scale, dtype=np.float64))))
    if not step > 0:
        return None
    return Nature("grid", f"a dequantized output on a grid of step {step:.3g}", step=step)


__all__ = ["Nature", "output_natures"]
