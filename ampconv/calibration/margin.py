"""The overflow guard's margin, and the nodes ``--tune`` may lower again across it.

By default the ``data-overflow`` guard keeps a node float32 when a value of
its tensors exceeds half the LOW type's largest value (``activations.MARGIN``):
the margin covers inputs a little beyond the calibration set. A node whose
values all stay within the LOW type's real maximum is kept only by that
margin. Under ``--tune`` such a node is a candidate of the accuracy search
like any LOW node: it is lowered again when validation on the calibration
samples passes with it LOW.

What stays hard, whatever validation says:

- real overflow: a tensor of the node exceeds the LOW maximum on a sample
  (emulation would show the inf, but a slightly larger input would too);
- a reduction's running sum over the LOW maximum (``data-accumulation``):
  emulation rounds results, not the running sums inside a kernel, so
  validation cannot see that overflow;
- an explicit ``--data-max``: the user's threshold is not a margin.

The search tells the planner both things in one value, ``SearchPins``: the
nodes it keeps float32 (rule ``data-tune``) and the nodes the margin no
longer keeps (``released``; ``ampconv.plan.data_guards`` re-checks that their values
fit the LOW maximum and that the threshold is the default before it obeys).
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Iterable, Mapping, Optional

import onnx_ir as ir

from ampconv.numerics.activations import MARGIN, Calibration, fmt
from ampconv.core.lowtypes import LowType
from ampconv.plan.search_pins import SearchPins


@dataclasses.dataclass(frozen=True)
class MarginNode:
    """A node the overflow guard keeps float32 only by its margin, with the figure that says so."""

    node: str
    op_type: str
    max_abs: float  # the largest |x| over the node's observed tensors: above the guard, within the LOW max
    tensor: str
    low: LowType
    guard: float

    def evidence(self) -> str:
        """The figures: where the values peak and where the LOW type's range ends."""
        return (f"max |x| {fmt(self.max_abs)} ({self.tensor}) within {self.low.name} max {self.low.max:g}, "
                f"over the guard {self.guard:g} only by its margin")


def margin_nodes(
    model: ir.Model,
    overflow_nodes: Iterable[str],
    calibration: Calibration,
    low: LowType,
) -> Dict[str, MarginNode]:
    """Of the ``overflow_nodes`` (rule ``data-overflow``), those kept only by the margin.

    ``model`` is the float32 input with the converter's node names;
    ``calibration`` the statistics pass: its ``overflowing()`` tensors exceed
    the LOW maximum, its ``near_max()`` ones (tensor -> max |x|) lie between
    the default guard and the LOW maximum. A node qualifies when none of its
    tensors overflow and one lies in the margin.
    """
    wanted = set(overflow_nodes)
    overflowing = set(calibration.overflowing())
    near = calibration.near_max()
    found: Dict[str, MarginNode] = {}
    for node in model.graph:
        if node.name not in wanted:
            continue
        names = [v.name for v in list(node.inputs) + list(node.outputs) if v is not None and v.name]
        if any(name in overflowing for name in names):
            continue  # real overflow: hard
        peak = _peak(names, near)
        if peak is not None:
            found[node.name] = MarginNode(node.name, node.op_type, peak[1], peak[0], low, low.max * MARGIN)
    return found


def _peak(names: Iterable[str], near: Mapping[str, float]) -> Optional[tuple]:
    figures = [(name, float(near[name])) for name in names if name in near]
    return max(figures, key=lambda pair: pair[1]) if figures else None


def release(pins: Mapping[str, str], margins: Mapping[str, MarginNode]) -> SearchPins:
    """The planner's pins for a candidate of the search: ``pins`` kept float32, every other margin node released.

    A margin node named in ``pins`` is not pinned ``data-tune``: it simply
    stays under its ``data-overflow`` rule, whose reason quotes the figures.
    """
    return SearchPins(
        kept={name: reason for name, reason in pins.items() if name not in margins},
        released={name: node.evidence() for name, node in margins.items() if name not in pins},
    )
