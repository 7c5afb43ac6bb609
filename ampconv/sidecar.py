"""Type inference and the checker's verdict on a big input, in a second process while this one reads the model.

Reading a 40,000-node model into onnx-ir costs about 0.6 s of Python. onnx's
shape inference (0.25 s) and its basic checker (0.07 s) on the same file are
C++ that hold the GIL, so a thread gains nothing; a second process on a second
core does them in the time the first spends deserializing. The child runs
``python -I -m ampconv.sidecar <model> <max inline bytes>``: it reads the
file itself, runs ``infer_types_of`` and the checker, and writes back, pickled,
each value's inferred type (an element type, or a TypeProto's bytes for
sequences and optionals) and the checker's verdict.

It is used only where it pays (``worth_it``): a graph of at least
``MIN_NODES`` nodes without subgraphs, and two cores this process may use.
The child's start-up (interpreter, onnx import: about 0.2 s) is then hidden
behind the deserialization. Whatever goes wrong in the child (no interpreter,
ampconv not importable in isolated mode, a crash, an unreadable answer), the
caller does the work itself (``Sidecar.facts`` answers None): the result is
the same, only slower.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

import onnx

# Graphs smaller than this are inferred in-process: the child's ~0.2 s start-up would not be hidden
# behind a deserialization that takes about 15 us a node.
MIN_NODES = 16_000


def infer_types_of(proto: onnx.ModelProto, max_inline_bytes: int) -> Optional[onnx.ModelProto]:
    """``proto`` with onnx's inferred value_info; None when its inline weights exceed ``max_inline_bytes`` or inference fails.

    Inference copies the whole proto, weights included: a model with large
    inline weights is inferred later on a weight-free copy (``prepare.InferTypesPass``).
    """
    inline = sum(t.ByteSize() for t in proto.graph.initializer)
    if inline > max_inline_bytes:
        return None
    try:
        return onnx.shape_inference.infer_shapes(proto, check_type=False, strict_mode=False, data_prop=False)
    except Exception:  # noqa: BLE001 - inference is best effort; InferTypesPass tries again
        return None


def element_types(inferred: onnx.ModelProto) -> Dict[str, object]:
    """The inferred type of each main-graph value: its element type (int) for a tensor, else the TypeProto."""
    types: Dict[str, object] = {}
    for info in inferred.graph.value_info:
        proto = info.type
        types[info.name] = proto.tensor_type.elem_type if proto.HasField("tensor_type") else proto
    return types


@dataclasses.dataclass(frozen=True)
class InputFacts:
    """What the child found: the inferred types (None: not inferred) and the basic checker's exception (None: passes)."""

    types: Optional[Dict[str, object]]
    checker_error: Optional[Exception]


def worth_it(proto: onnx.ModelProto, subgraphs: bool) -> bool:
    """Whether inferring ``proto`` in a child process pays: a big graph without subgraphs, and a second core."""
    if subgraphs or len(proto.graph.node) < MIN_NODES or not sys.executable:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return cores >= 2


class Sidecar:
    """The child process working on one model file; ``facts()`` waits for its answer."""

    def __init__(self, path: Path, max_inline_bytes: int) -> None:
        self._process: Optional[subprocess.Popen] = None
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-m", "ampconv.sidecar", str(path), str(max_inline_bytes)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
        except OSError:  # no interpreter to start: the caller works alone
            self._process = None

    def facts(self) -> Optional[InputFacts]:
        """The child's findings; None when it could not deliver them (the caller then does the work)."""
        if self._process is None:
            return None
        try:
            out, _ = self._process.communicate()
            if self._process.returncode != 0:
                return None
            answer = pickle.loads(out)
            return InputFacts(_types_from(answer["types"]), _error_from(answer["checker"]))
        except Exception:  # noqa: BLE001 - any failure of the child: the caller infers in-process
            return None
        finally:
            self.cancel()

    def cancel(self) -> None:
        """Stop the child if it still runs (the caller failed before it needed the answer)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


def _types_from(sent: Optional[Dict[str, object]]) -> Optional[Dict[str, object]]:
    """The types as ``element_types`` gives them, from what the child pickled (TypeProtos as bytes)."""
    if sent is None:
        return None
    return {name: found if type(found) is int else onnx.TypeProto.FromString(found) for name, found in sent.items()}


def _error_from(sent: Optional[tuple]) -> Optional[Exception]:
    """The checker's exception, rebuilt: a ``ValidationError`` stays one (the caller tells refusals by type)."""
    if sent is None:
        return None
    kind, message = sent
    return onnx.checker.ValidationError(message) if kind == "validation" else RuntimeError(message)


def _child(path: str, max_inline_bytes: int) -> dict:
    """The child's work on ``path``: types and the checker's verdict, in a picklable form."""
    answer: Dict[str, object] = {"types": None, "checker": None}
    try:
        onnx.checker.check_model(path, full_check=False)
    except onnx.checker.ValidationError as exc:
        answer["checker"] = ("validation", str(exc))
    except Exception as exc:  # noqa: BLE001 - the caller reads any other failure as "cannot judge"
        answer["checker"] = ("other", str(exc))
    inferred = infer_types_of(onnx.load(path, load_external_data=False), max_inline_bytes)
    if inferred is not None:
        answer["types"] = {
            name: found if type(found) is int else found.SerializeToString()
            for name, found in element_types(inferred).items()
        }
    return answer


if __name__ == "__main__":
    _answer = _child(sys.argv[1], int(sys.argv[2]))
    sys.stdout.buffer.write(pickle.dumps(_answer, protocol=pickle.HIGHEST_PROTOCOL))
