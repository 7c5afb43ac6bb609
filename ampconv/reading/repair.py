"""Decide whether an input model is acceptable, and repair our copy of one that needs it.

The rule: ampconv converts every model onnxruntime accepts. onnx.checker is
stricter than onnxruntime in a few places that old exporters trip over:

- IR version 3 requires every initializer to be a graph input; exporters of
  that era (CoreML converters, early PyTorch) often did not list them;
- a graph input or output without a type or without a shape;
- nodes not in topological order (onnxruntime sorts them itself).

When the checker refuses the input, onnxruntime (when installed) gets the last
word: if it loads the model, ampconv repairs its in-memory copy so that the
converted model passes the checker, and every repair is reported. If
onnxruntime refuses the input too, the input is invalid and the error says so,
with both tools' words. Without onnxruntime the checker's verdict stands.

Some inputs pass the checker but not onnxruntime (two nodes with one name);
``input_refusal`` tells the converter when an output that fails to load
failed because of its input, so the error blames the input, not the output.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Tuple

import onnx
import onnx_ir as ir

from ampconv.errors import ModelLoadError, UnsupportedModelError
from ampconv.reading.load import INFERRED_META_KEY, input_checker_error
from ampconv.runtime.loadcheck import checker_error, first_line, runtime_available, runtime_refusal
from ampconv.core.graphs import all_graphs
from ampconv.reading.prepare import infer_types

# Meta key of the main-graph inputs/outputs whose rank is not fixed (``rankless_interface``).
RANKLESS_META_KEY = "ampconv.rankless_interface"


def accept_input(src: Path, model: Optional[ir.Model] = None) -> Optional[str]:
    """Raise ``ModelLoadError`` when ``src`` is invalid; return the checker's complaint when repairs are due.

    None: the checker accepts the input. A string: the checker refuses it but
    onnxruntime loads it, so the converter repairs its copy (``repair``).
    ``model``, read from ``src``, may carry the checker's verdict already
    (``load.input_checker_error``: the load's sidecar ran it).
    """
    known, error = input_checker_error(model) if model is not None else (False, None)
    if not known:
        error = checker_error(Path(src), full=False)
    # Anything but a ValidationError: the checker cannot read some inputs the IR loader can.
    if not isinstance(error, onnx.checker.ValidationError):
        return None
    complaint = first_line(error) or "invalid model"
    if not runtime_available():
        raise ModelLoadError(f"{src}: the input model fails onnx.checker: {complaint}")
    refusal = input_refusal(src)
    if refusal is not None:
        raise ModelLoadError(f"{src}: the input model is invalid: onnx.checker: {complaint}; onnxruntime: {refusal}")
    return complaint


def input_refusal(src: Path) -> Optional[str]:
    """onnxruntime's one-line complaint about the input ``src``; None when it loads or cannot judge.

    A custom op onnxruntime does not know makes it unable to judge the model,
    not a reason to call the model invalid.
    """
    refusal = runtime_refusal(src)
    if refusal is None or "is not a registered function/op" in refusal:
        return None
    return first_line(Exception(refusal))


def repair(model: ir.Model) -> List[str]:
    """Make an onnxruntime-accepted model checker-valid in place; one note per repair made.

    Nodes are put in topological order first, then types are inferred
    (``prepare.infer_types``) so that the main graph's inputs and outputs that
    lack a type or shape take what inference finds, and the notes say what it
    found. An interface value whose rank inference cannot fix (an If whose
    branches return different ranks: ONNX then wants no shape declared) keeps
    its element type alone and is recorded for the checker
    (``rankless_interface``). No value is left half-typed in any graph: a
    value with a shape but no element type (an untyped ``value_info`` the
    input gave a shape) loses the shape, so it is written without a type, as
    the input meant it.
    """
    notes: List[str] = []
    if (model.ir_version or 0) < 4:
        loose = [
            name
            for graph in all_graphs(model)
            for name in graph.initializers
            if name not in {v.name for v in graph.inputs}
        ]
        if loose:
            # IR 4 dropped the rule that initializers be graph inputs, and
            # changed nothing else; listing them as inputs instead would add
            # overridable inputs to the model's interface.
            notes.append(
                f"IR version {model.ir_version} requires initializers to be graph inputs and "
                f"{len(loose)} are not (e.g. {loose[0]}): IR version raised to 4"
            )
            model.ir_version = 4
    for graph in all_graphs(model):
        if not is_topologically_sorted(graph):
            graph.sort()
            notes.append(f"graph {graph.name or 'main'}: nodes put in topological order")
    interface = [("input", v, _missing(v)) for v in model.graph.inputs]
    interface += [("output", v, _missing(v)) for v in model.graph.outputs]
    infer_types(model)
    model.meta[INFERRED_META_KEY] = True  # done here, on the repaired graph: not again
    rankless: List[str] = []
    for kind, value, missing in interface:
        if value.type is None:
            raise UnsupportedModelError(
                f"graph {kind} {value.name!r} has no type and type inference cannot tell it; declare its type"
            )
        if value.shape is None:
            rankless.append(value.name)
            notes.append(
                f"graph {kind} {value.name} has no fixed rank (type inference cannot tell one; an If whose "
                "branches return different ranks, for example): written with its element type only, as ONNX "
                "asks of such a value, and checked by onnx.checker with that one field set aside"
            )
        elif missing is not None:
            notes.append(f"graph {kind} {value.name} has no {missing}: taken from type inference")
    if rankless:
        model.meta[RANKLESS_META_KEY] = tuple(rankless)
    shapes_dropped = _drop_half_types(model)
    if shapes_dropped:
        notes.append(f"{shapes_dropped} value(s) with a shape but no element type: written without either")
    return notes


def rankless_interface(model: ir.Model) -> Tuple[str, ...]:
    """Main-graph inputs and outputs whose rank is not fixed (set by ``repair``; see ``loadcheck.checker_error``)."""
    return tuple(model.meta.get(RANKLESS_META_KEY, ()))


def _missing(value: ir.Value) -> Optional[str]:
    """What an interface value lacks before repair: ``type``, ``shape`` or None."""
    return "type" if value.type is None else "shape" if value.shape is None else None


def _drop_half_types(model: ir.Model) -> int:
    """Remove the shape of every value that has one but no type (it would be written as a type without elem_type)."""
    dropped = 0
    for graph in all_graphs(model):
        values = list(graph.inputs) + list(graph.outputs) + [v for node in graph for v in node.outputs]
        for value in values:
            if value.type is None and value.shape is not None:
                value.shape = None
                dropped += 1
    return dropped


def is_topologically_sorted(graph: ir.Graph) -> bool:
    """Whether every node of ``graph`` comes after the producers (in ``graph``) of its inputs."""
    position = {node: i for i, node in enumerate(graph)}
    for i, node in enumerate(graph):
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and position.get(producer, -1) >= i:
                return False
    return True


__all__ = [
    "RANKLESS_META_KEY",
    "accept_input",
    "input_refusal",
    "is_topologically_sorted",
    "rankless_interface",
    "repair",
]
