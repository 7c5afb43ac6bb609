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
  any other integer output of rank 2 or more is read along its last axis;
- a **detections** output is one member of a set of detections: boxes,
  scores and labels that a NonMaxSuppression or a TopK selects (their count
  and order depend on the data), as separate outputs (torchvision's
  ``boxes``/``scores``/``labels``) or packed in the columns of one output
  (YOLO's ``[x1, y1, x2, y2, score, class]``, read from the Concat that packs
  them). The members of one selection are matched as sets
  (``validation.detections``), never by position; NMS's constant score
  threshold, when the graph holds one, says which detections are clear.

``output_natures`` returns a ``Nature`` for each such output; the others are
judged on their RMS (``criteria.judge``).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.plan.values import constant_array
from ampconv.validation.nature_kinds import NATURE_OVERRIDES

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

    kind: str  # "bounded", "grid", "sequence", "detections" or "values"
    words: str  # e.g. "a sigmoid output in [0, 1]"
    low: float = 0.0
    high: float = 0.0
    step: float = 0.0
    axis: int = -1  # a sequence's step axis
    # detections: the selection this output belongs to (the NMS/TopK node's name, or "user"), its role
    # ("boxes", "scores", "labels" or "packed"), the columns of a packed output (box x4, score, label),
    # and NMS's constant score threshold (None when the graph holds none).
    group: str = ""
    role: str = ""
    columns: tuple = ()
    score_threshold: Optional[float] = None

    @property
    def width(self) -> float:
        """The length errors are measured against: the range's width, or one grid step."""
        return self.high - self.low if self.kind == "bounded" else self.step


def output_natures(model: ir.Model, overrides: Optional[Dict[str, str]] = None) -> Dict[str, Nature]:
    """Output name -> its ``Nature``, for the main-graph outputs that have one.

    Detection sets come first (a sigmoid score inside one is a member of the
    set, not a map). ``overrides``: output name -> one of ``OVERRIDES``, which
    replaces what the graph says (``values``: no nature, judged on its RMS).
    """
    natures = detection_natures(model)
    for value in model.graph.outputs:
        if value.name in natures:
            continue
        nature = _nature(value, depth=16)
        if nature is not None:
            natures[value.name] = nature
    for name, kind in (overrides or {}).items():
        natures[name] = overridden(kind)
    return _whole_sets(natures)


def _whole_sets(natures: Dict[str, Nature]) -> Dict[str, Nature]:
    """``natures`` without the detection members of a set left with no boxes (an override took them)."""
    boxed = {n.group for n in natures.values() if n.kind == "detections" and n.role in ("boxes", "packed")}
    return {name: n for name, n in natures.items() if n.kind != "detections" or n.group in boxed}


# What ``--nature NAME=KIND`` may say of an output.
OVERRIDES = NATURE_OVERRIDES


def overridden(kind: str) -> Nature:
    """The nature ``--nature NAME=KIND`` gives an output (raises ValueError for an unknown kind).

    ``boxes``, ``scores`` and ``labels`` make the outputs so named one set of
    detections (group ``user``); ``probability`` a bounded output in [0, 1].
    """
    if kind == "values":
        return Nature("values", "values (given)")
    if kind == "probability":
        return Nature("bounded", "a probability in [0, 1] (given)", 0.0, 1.0)
    if kind in ("boxes", "scores", "labels"):
        return Nature("detections", f"detection {kind} (given)", group="user", role=kind)
    raise ValueError(f"unknown output nature {kind!r}: choose one of {', '.join(OVERRIDES)}")


# Ops that select detections: their outputs' count or order depends on the data (NonZero: the anchors a
# score threshold keeps, Greater -> NonZero -> Gather).
_SELECTORS = frozenset({"NonMaxSuppression", "TopK", "NonZero"})
# How many nodes the walk back from one output may visit to find its selector.
_SELECTOR_WALK = 4000


def selects(model: ir.Model) -> bool:
    """Whether the main graph holds a NonMaxSuppression or TopK (a model that may output detection sets)."""
    return any(node.op_type in _SELECTORS and is_default(node) for node in model.graph)


def detection_natures(model: ir.Model) -> Dict[str, Nature]:
    """The outputs that are members of a detection set, by the NMS/TopK that selects them.

    A selection is a detection set when one of its outputs holds boxes (a
    float output whose last axis is 4, or a packed output with 4 box columns);
    its other float outputs are scores and its integer ones labels.
    """
    members: Dict[str, list] = {}
    for value in model.graph.outputs:
        selector = _selector(value)
        if selector is not None:
            members.setdefault(selector.name or str(id(selector)), []).append((value, selector))
    natures = {}
    for group, values in members.items():
        threshold = _score_threshold(values[0][1])
        roles = {value.name: _role(value, selector) for value, selector in values}
        if not any(role in ("boxes", "packed") for role, _ in roles.values()):
            continue
        for name, (role, columns) in roles.items():
            if role is None:
                continue
            words = f"detection {role} selected by {values[0][1].op_type} (matched as a set)"
            natures[name] = Nature("detections", words, group=group, role=role, columns=columns,
                                   score_threshold=threshold)
    return natures


def _selector(value: ir.Value) -> Optional[ir.Node]:
    """The nearest NonMaxSuppression or TopK that ``value`` is computed from (main graph), or None."""
    seen, queue, visited = set(), [value], 0
    while queue and visited < _SELECTOR_WALK:
        current = queue.pop(0)
        node = current.producer()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        visited += 1
        if node.op_type in _SELECTORS and is_default(node):
            return node
        queue.extend(v for v in node.inputs if v is not None)
    return None


def _role(value: ir.Value, selector: ir.Node) -> tuple:
    """(role, packed columns) of a member of a detection set; (None, ()) when it has none.

    What the selector itself returns (TopK's four best values, moved or
    cast) is scores or indices, never boxes, whatever its width.
    """
    dtype = value.dtype
    if dtype is None:
        return None, ()
    if not dtype.is_floating_point():
        return "labels", ()
    last = _last_dim(value)
    if last == 4 and not _selected_directly(value, selector):
        return "boxes", ()
    columns = _packed_columns(value) if last is not None and last >= 6 else None
    if columns is not None:
        return "packed", columns
    return "scores", ()


def _selected_directly(value: ir.Value, selector: ir.Node, depth: int = 8) -> bool:
    """Whether ``value`` is an output of ``selector``, looking back through value-moving ops and Casts."""
    for _ in range(depth):
        node = value.producer() if value is not None else None
        if node is None:
            return False
        if node is selector:
            return True
        if node.op_type not in _MOVE and node.op_type != "Cast":
            return False
        value = node.inputs[0]
    return False


def _last_dim(value: ir.Value) -> Optional[int]:
    if value.shape is None or len(value.shape) == 0:
        return None
    last = value.shape[-1]
    return last if isinstance(last, int) else None


def _packed_columns(value: ir.Value) -> Optional[tuple]:
    """(x1, y1, x2, y2, score, label) column indices of an output a Concat packs along its last axis, or None.

    Read from the Concat's pieces: the one 4 wide holds the boxes; of the
    1-wide ones, one computed from integers (a Cast from an ArgMax or a
    TopK's indices) holds the label and another the score.
    """
    node = value.producer()
    while node is not None and node.op_type in ("Identity", "Reshape", "Squeeze", "Unsqueeze", "Cast"):
        node = node.inputs[0].producer() if node.inputs and node.inputs[0] is not None else None
    if node is None or node.op_type != "Concat":
        return None
    start, boxes, scores, labels = 0, None, [], []
    for piece in node.inputs:
        width = _last_dim(piece) if piece is not None else None
        if width is None:
            return None
        if width == 4 and boxes is None:
            boxes = start
        elif width == 1:
            (labels if _from_integers(piece) else scores).append(start)
        start += width
    if boxes is None or not scores or not labels:
        return None
    return (boxes, boxes + 1, boxes + 2, boxes + 3, scores[-1], labels[-1])


def _from_integers(value: ir.Value, depth: int = 8) -> bool:
    """Whether ``value`` is integers cast to float (a class index), looking back through value-moving ops."""
    node = value.producer()
    for _ in range(depth):
        if node is None:
            return False
        if node.op_type == "Cast":
            source = node.inputs[0]
            return source is not None and source.dtype is not None and not source.dtype.is_floating_point()
        if node.op_type in ("ArgMax", "ArgMin"):
            return True
        if node.op_type == "TopK":
            return value is node.outputs[1]
        if node.op_type not in _MOVE:
            return False
        value = node.inputs[0]
        node = value.producer() if value is not None else None
    return False


def _score_threshold(selector: ir.Node) -> Optional[float]:
    """NMS's constant score threshold (its fifth input), or None."""
    if selector.op_type != "NonMaxSuppression" or len(selector.inputs) < 5 or selector.inputs[4] is None:
        return None
    array = constant_array(selector.inputs[4])
    if array is None or np.size(array) != 1:
        return None
    return float(np.asarray(array).reshape(-1)[0])


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


__all__ = ["OVERRIDES", "Nature", "detection_natures", "output_natures", "overridden", "selects"]
