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
from typing import List, Optional

import onnx
import onnx_ir as ir

from ampconv.errors import ModelLoadError
from ampconv.load import INFERRED_META_KEY
from ampconv.loadcheck import checker_error, first_line, runtime_available, runtime_refusal
from ampconv.graphs import all_graphs


def accept_input(src: Path) -> Optional[str]:
    """Raise ``ModelLoadError`` when ``src`` is invalid; return the checker's complaint when repairs are due.

    None: the checker accepts the input. A string: the checker refuses it but
    onnxruntime loads it, so the converter repairs its copy (``repair``).
    """
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

    Types and shapes missing from the main graph's inputs and outputs are
    filled by type inference (``prepare.infer_types``), which runs on every
    model; the notes name them.
    """
    notes: List[str] = []
    for kind, values in (("input", model.graph.inputs), ("output", model.graph.outputs)):
        for value in values:
            missing = "type" if value.type is None else "shape" if value.shape is None else None
            if missing is not None:
                notes.append(f"graph {kind} {value.name} has no {missing}: taken from type inference")
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
            # Inference at load saw the nodes out of order: let the prepare pass run it again.
            model.meta.pop(INFERRED_META_KEY, None)
    return notes


def is_topologically_sorted(graph: ir.Graph) -> bool:
    """Whether every node of ``graph`` comes after the producers (in ``graph``) of its inputs."""
    position = {node: i for i, node in enumerate(graph)}
    for i, node in enumerate(graph):
        for value in node.inputs:
            producer = value.producer() if value is not None else None
            if producer is not None and position.get(producer, -1) >= i:
                return False
    return True


__all__ = ["accept_input", "input_refusal", "is_topologically_sorted", "repair"]
