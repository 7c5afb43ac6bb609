"""Work on a big model's file in a second process while this one does its own: onnx's C++ holds the GIL.

Reading a 40,000-node model into onnx-ir costs about 0.6 s of Python; onnx's
shape inference (0.25 s) and its checker (0.07 s basic, 0.2 s full) are C++
that hold the GIL, so a thread beside them gains nothing. A second process on
a second core does them meanwhile:

1. ``Sidecar`` (``python -I -m ampconv.reading.sidecar <model> <max inline bytes>``),
   started once the input is parsed: it reads the file itself, infers its
   types (``infer_types_of``) and runs the basic checker while this process
   deserializes, and writes back, pickled, each value's inferred type (an
   element type, or a TypeProto's bytes for sequences and optionals) and the
   checker's verdict.
2. ``Checker`` (``python -I -m ampconv.reading.sidecar --check``), started before the
   output is written so that its start-up is hidden behind the write: it warms
   onnx's schema tables up, reads the staged file's path from its stdin and
   runs the full checker (``loadcheck.checker_error``) while this process
   builds the load-check probe.

Both are used only where they pay (``big_enough``): a graph of at least
``MIN_NODES`` nodes (and without subgraphs, for the inference: such a model is
read whole from its inferred proto), and two cores this process may use; a
child's start-up (an interpreter, onnx: about 0.2 s) hides only behind a big
graph. Whatever goes wrong in a child (no interpreter, ampconv not importable
in isolated mode, a crash, an unreadable answer), the caller does the work
itself: the result is the same, only slower.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional, Sequence

import onnx

from ampconv.runtime.loadcheck import checker_error

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
    return not subgraphs and big_enough(len(proto.graph.node))


def big_enough(nodes: int) -> bool:
    """Whether a graph of ``nodes`` nodes hides a child's start-up, on a machine with a second core for it."""
    if nodes < MIN_NODES or not sys.executable:
        return False
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return cores >= 2


class _Child:
    """A ``python -I -m ampconv.reading.sidecar ARGS`` child answering on its stdout; no process when it cannot start."""

    def __init__(self, args: Sequence[str], stdin: int) -> None:
        self._process: Optional[subprocess.Popen] = None
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-I", "-m", "ampconv.reading.sidecar", *args],
                stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
        except OSError:  # no interpreter to start: the caller works alone
            self._process = None

    def cancel(self) -> None:
        """Stop the child if it still runs (the caller failed, or is done, before it needed the answer)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait()


class Sidecar(_Child):
    """The child process working on one model file; ``facts()`` waits for its answer."""

    def __init__(self, path: Path, max_inline_bytes: int) -> None:
        super().__init__([str(path), str(max_inline_bytes)], subprocess.DEVNULL)

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


class Checker(_Child):
    """A child that waits for a model path on its stdin and runs the full checker on it (``checker_error``).

    Started before the model is written; ``submit`` the written path, do other
    work, then ``error()``. ``error()`` raises ``Unavailable`` when the child
    could not answer: the caller then runs the checker itself.
    """

    class Unavailable(Exception):
        """The child gave no answer."""

    def __init__(self) -> None:
        super().__init__(["--check"], subprocess.PIPE)

    def submit(self, path: Path, rankless: Sequence[str] = ()) -> None:
        """Ask for the full checker on ``path`` (``rankless``: see ``loadcheck.checker_error``)."""
        if self._process is None:
            return
        try:
            self._process.stdin.write(json.dumps({"path": str(path), "rankless": list(rankless)}).encode() + b"\n")
            self._process.stdin.close()
        except OSError:  # the child died already: error() says so
            pass

    def error(self) -> Optional[Exception]:
        """The checker's exception on the submitted path (None: it passes); raises ``Unavailable``."""
        if self._process is None:
            raise Checker.Unavailable()
        try:
            out = self._process.stdout.read()  # not communicate(): it would flush the stdin submit closed
            if self._process.wait() != 0:
                raise Checker.Unavailable()
            return _error_from(pickle.loads(out))
        except Checker.Unavailable:
            raise
        except Exception:  # noqa: BLE001 - an unreadable answer: the caller checks itself
            raise Checker.Unavailable() from None
        finally:
            self.cancel()


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
    return _ERROR_KINDS.get(kind, RuntimeError)(message)


# The checker's exception types a verdict keeps across the pipe (any other arrives as a RuntimeError).
_ERROR_KINDS = {"validation": onnx.checker.ValidationError, "inference": onnx.shape_inference.InferenceError}


def _error_sent(error: Exception) -> tuple:
    """``error`` in a picklable form: its kind (``_ERROR_KINDS``) and its message."""
    kind = next((k for k, t in _ERROR_KINDS.items() if isinstance(error, t)), "other")
    return kind, str(error)


def _child(path: str, max_inline_bytes: int) -> dict:
    """The child's work on ``path``: types and the checker's verdict, in a picklable form."""
    answer: Dict[str, object] = {"types": None, "checker": None}
    try:
        onnx.checker.check_model(path, full_check=False)
    except Exception as exc:  # noqa: BLE001 - the caller reads anything but a ValidationError as "cannot judge"
        answer["checker"] = _error_sent(exc)
    inferred = infer_types_of(onnx.load(path, load_external_data=False), max_inline_bytes)
    if inferred is not None:
        answer["types"] = {
            name: found if type(found) is int else found.SerializeToString()
            for name, found in element_types(inferred).items()
        }
    return answer


def _warm_up() -> None:
    """Run the full checker once on a one-node model: onnx builds its schema tables on first use (about 0.1 s)."""
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "warm-up",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
    )
    onnx.checker.check_model(onnx.helper.make_model(graph), full_check=True)


def _check_child() -> Optional[tuple]:
    """The ``Checker`` child's work: one request from stdin, the full checker's verdict in a picklable form."""
    _warm_up()  # while the parent still writes
    request = json.loads(sys.stdin.buffer.readline())
    error = checker_error(Path(request["path"]), full=True, rankless=request["rankless"])
    if error is None:
        return None
    return _error_sent(error)


if __name__ == "__main__":
    _answer = _check_child() if sys.argv[1:] == ["--check"] else _child(sys.argv[1], int(sys.argv[2]))
    sys.stdout.buffer.write(pickle.dumps(_answer, protocol=pickle.HIGHEST_PROTOCOL))
    sys.stdout.buffer.flush()
    os._exit(0)  # the parent reads until end of file: skip the interpreter's tear-down (tens of ms)
