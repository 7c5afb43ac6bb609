"""Invariants the rewrite must keep, which neither onnx.checker nor a load check sees.

A Loop or Scan carries its state from one iteration to the next: the body's
state output must have the type of the state input it feeds, and the node's
initial value must have it too. onnx.checker accepts a model that breaks this
and onnxruntime loads it, then fails in the middle of a run. The converter
checks these after rewriting, so such a model is never written.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.errors import ConversionError
from ampconv.runtime.schema import loop_slots
from ampconv.core.graphs import all_graphs
from ampconv.core.lowtypes import low_type


def loop_state_pairs(node: ir.Node, opset: int) -> Iterator[Tuple[Optional[ir.Value], ir.Value, ir.Value]]:
    """(initial value, body state input, body state output) for each state of a Loop or Scan."""
    body: ir.Graph = node.attributes["body"].value
    scans = node.attributes["num_scan_inputs"].value if node.op_type == "Scan" else 0
    for node_in, b_in, b_out in loop_slots(node.op_type, len(node.inputs), opset, scans).states:
        if b_in < len(body.inputs) and b_out < len(body.outputs):
            initial = node.inputs[node_in] if node_in < len(node.inputs) else None
            yield initial, body.inputs[b_in], body.outputs[b_out]


def check_loop_state_types(model: ir.Model) -> None:
    """Raise ``ConversionError`` when a Loop/Scan state changes type across an iteration."""
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
    problems: List[str] = []
    graphs = all_graphs(model)
    for graph in graphs if len(graphs) > 1 else ():  # a Loop/Scan holds a body: one graph, none to check
        for node in graph:
            if not is_default(node) or node.op_type not in ("Loop", "Scan"):
                continue
            if "body" not in node.attributes:
                continue
            for initial, state_in, state_out in loop_state_pairs(node, opset):
                types = [v.dtype for v in (initial, state_in, state_out) if v is not None]
                if None not in types and len(set(types)) > 1:
                    problems.append(
                        f"{node.op_type} {node.name}: state {state_in.name} enters as {state_in.dtype.name} "
                        f"but leaves the body as {state_out.dtype.name}"
                    )
    if problems:
        raise ConversionError(f"internal error, the rewrite broke a loop state: {problems[0]}")


# Meta key of a constant the rewrite rounded to a 16-bit float type: its ``Rounding``.
ROUNDING_META = "ampconv.rounding"


@dataclasses.dataclass(frozen=True)
class Rounding:
    """How the rewrite made a 16-bit constant from a float32 one (recorded on the tensor, ``ROUNDING_META``).

    ``key``: the type stored (fp16, bf16); ``clamped_to``: the type whose
    limits a clamp brought the values inside first (None: a plain rounding);
    the float32 source's largest finite magnitude, as ``peak`` when it was at
    hand, or as the constant ``source`` whose range the planner scanned.
    """

    key: str
    clamped_to: Optional[str] = None
    peak: Optional[float] = None
    source: Optional[ir.Value] = dataclasses.field(default=None, compare=False)


def rounded(tensor, rounding: Rounding):
    """``tensor``, its ``rounding`` recorded for ``values_beyond``."""
    tensor.meta[ROUNDING_META] = rounding
    return tensor


def finite_peak(array) -> float:
    """The largest finite magnitude of ``array`` (0 when it has none)."""
    values = np.abs(np.asarray(array, dtype=np.float32)).reshape(-1)
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else 0.0


def batch_peaks(joined: np.ndarray, counts: List[int]) -> List[float]:
    """``finite_peak`` of each consecutive slice of ``joined`` of the given ``counts`` (one vectorized pass)."""
    magnitude = np.abs(joined)
    magnitude[~np.isfinite(magnitude)] = 0
    starts = np.cumsum([0] + counts[:-1])
    peaks = np.maximum.reduceat(magnitude, starts) if magnitude.size else np.zeros(len(counts))
    return [float(p) if c else 0.0 for p, c in zip(peaks.tolist(), counts)]


def values_beyond(model: ir.Model, peak_of: Callable[[Optional[ir.Value], object], Optional[float]]) -> Dict[str, str]:
    """The nodes reading a constant the rewrite rounded past its type's range: node name -> why.

    The invariant: every value a rewrite puts into a 16-bit float type fits
    that type: a finite float32 value never becomes inf there, whichever
    path (LOW, the fallback type, a constant's copy, a tensor attribute) put
    it there. It is read from the rewritten model itself, constant by
    constant (``Rounding`` says how each was made): a plain rounding fits
    when its source's largest finite magnitude is below the type's overflow
    threshold (``peak_of(source, tensor)`` gives it for a lazily rounded
    weight); a clamp fits when it clamped to that very type's limits. Each
    node reading a constant that does not fit is named, to be kept float32.
    """
    found: Dict[str, str] = {}
    for graph in all_graphs(model):
        for value in graph.initializers.values():
            tensor = value.const_value
            why = _misfit(tensor, peak_of) if tensor is not None and ROUNDING_META in tensor.meta else None
            if why is not None:
                for use in value.uses():
                    found.setdefault(use.node.name or "", f"its constant {value.name} {why}")
        for node in graph:
            if node.op_type not in ("Constant", "ConstantOfShape") or "value" not in node.attributes:
                continue
            tensor = node.attributes["value"].value
            why = _misfit(tensor, peak_of) if tensor is not None and ROUNDING_META in tensor.meta else None
            if why is None:
                continue
            for use in node.outputs[0].uses():  # the reader runs in the type: keeping it float32 keeps the value
                found.setdefault(use.node.name or "", f"its constant {node.outputs[0].name} {why}")
    found.pop("", None)
    return found


@functools.lru_cache(maxsize=None)
def _rounds_to_inf(key: str) -> float:
    """The smallest float32 magnitude the LOW type ``key`` rounds to inf (its overflow bits as a float)."""
    return float(np.array(low_type(key).overflow_bits, dtype=np.uint32).view(np.float32))


def _misfit(tensor, peak_of) -> Optional[str]:
    """Why the rounded ``tensor`` does not fit its type (None: it fits)."""
    rounding: Rounding = tensor.meta[ROUNDING_META]
    record = low_type(rounding.key)
    if rounding.clamped_to is not None:
        if rounding.clamped_to == rounding.key:
            return None
        return (f"was clamped to {low_type(rounding.clamped_to).name}'s limits but stored in {record.name}, "
                "whose range is not the same")
    peak = rounding.peak if rounding.peak is not None else peak_of(rounding.source, tensor)
    if peak is None or peak < _rounds_to_inf(rounding.key):
        return None  # fits (or unreadable: the loader reports it)
    return (f"holds |x| = {peak:.5g}, beyond {record.name}'s range (max {record.max:.5g}): stored there it would "
            "become inf")
