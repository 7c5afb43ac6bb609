"""Write a model into its staging folder, streaming, with peak memory at one tensor.

Every initializer, including the lazily converted ones, is materialized while
it is written and dropped right after. Three things keep peak memory at
"largest tensor plus a fixed overhead":

1. onnx-ir's writer holds at most ``MAX_IN_FLIGHT_BYTES`` of materialized
   tensors (plus one oversized tensor) at a time.
2. After a tensor is written, the source ``ExternalTensor`` it was converted
   from is released (its mmap closed). RSS counts resident file-backed pages, so
   without this every source page read stays in RSS and peak memory grows to the
   size of the model. A source shared by several tensors is released after the
   last of them.
3. Unconverted external tensors are copied file-to-file (``copy_file_range``),
   never through Python memory.

Staging, publishing and output-path checks are ``ampconv.writing.outputs``'s job; the
load check of the written file is ``ampconv.runtime.loadcheck``'s.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import threading
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

import onnx
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.writing import outputs
from ampconv.tensors import tensorsize
from ampconv.tensors.chunks import release_mapped, tensor_sources
from ampconv.errors import OutputError
from ampconv.reading.load import declared_value_info, weight_bytes
from ampconv.runtime.schema import is_known_op
from ampconv.writing.outputs import data_file_name
from ampconv.core.graphs import all_graphs

# Total weight bytes above which a model asked for inline is written with external data anyway:
# protobuf cannot serialize 2 GB, and the margin is for the graph itself. Defined where the output
# guard reads it too (``outputs.check_output_path`` must expect the data file the writer makes).
INLINE_WEIGHT_LIMIT = outputs.INLINE_WEIGHT_LIMIT
# Tensors up to this many bytes stay inline in the .onnx file; larger ones go
# to external data (onnx-ir's default is 256 B; tiny tensors stay inline so
# shape-like constants remain readable). Per tensor, unlike INLINE_WEIGHT_LIMIT.
INLINE_TENSOR_MAX_BYTES = 1024
# Bytes of materialized (converted) tensors the writer may hold at once, on top
# of one tensor larger than this. 64 MiB keeps both workers busy on transformer
# layers (a 1024x4096 fp16 weight is 8 MiB) while staying far below the target
# of a quarter of the weights: measured, a larger budget is not faster (the
# disk is the limit), only bigger.
MAX_IN_FLIGHT_BYTES = 64 * 1024**2

ProgressCallback = Callable[[int, int], None]


def write_model(
    model: ir.Model,
    path: Path,
    *,
    external: bool,
    progress: Optional[ProgressCallback] = None,
    max_workers: int = 2,
    weights: Optional[int] = None,
) -> Optional[str]:
    """Serialize ``model`` to ``path`` (inside a staging folder); return a note or None.

    With ``external``, initializers above ``INLINE_TENSOR_MAX_BYTES`` go to
    ``<name>.data`` beside it; lazily converted tensors are computed while
    written and their memory-mapped sources released right after, so peak memory
    follows the largest tensor, not the model. Without ``external``, a model
    whose weights would bring it near the 2 GB protobuf limit is written with
    external data anyway, and the returned note says so.

    ``progress(done, total)`` is called with weight bytes (of the tensors over
    ``INLINE_TENSOR_MAX_BYTES``, and of small ones read from mapped files when
    saved inline): once with ``done=0`` before writing, after each of them is
    written, and with ``done == total`` at the end. The model is unchanged
    afterwards (its tensors are restored).

    ``weights`` is the model's ``load.weight_bytes`` when the caller has
    measured it already (a walk over every graph saved).
    """
    path = Path(path)
    note = None
    if not external and (weights if weights is not None else weight_bytes(model)) > INLINE_WEIGHT_LIMIT:
        external = True
        note = (
            f"weights exceed the 2 GB protobuf limit inline: written with external data "
            f"{data_file_name(path)}"
        )
    tracker = _WriteTracker(model, external, progress)
    try:
        hidden = hide_undeclared_types(model)
        tracker.install()
        tracker.start()
        _save_model(model, path, external, max_workers)
        tracker.finish()
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise OutputError(f"{path.name}: disk full while writing in {path.parent}") from None
        raise OutputError(f"{path.name}: write failed ({exc.strerror or exc})") from None
    except ValueError as exc:
        if "2GB" in str(exc) or "2 GB" in str(exc) or "exceeds" in str(exc):
            raise OutputError(f"{path.name}: model exceeds 2 GB; it must use external data") from None
        raise
    finally:
        tracker.uninstall()
        restore_types(hidden)
    return note


def _save_model(model: ir.Model, path: Path, external: bool, max_workers: int) -> None:
    """Serialize ``model`` to ``path``: big tensors to ``<name>.data`` with ``external``, else all inline."""
    if external:
        ir.save(
            model,
            str(path),
            external_data=data_file_name(path),
            size_threshold_bytes=INLINE_TENSOR_MAX_BYTES,
            max_workers=max(1, max_workers),
            max_in_flight_bytes=MAX_IN_FLIGHT_BYTES,
        )
    else:
        _save_inline(model, path)


def _save_inline(model: ir.Model, path: Path) -> None:
    """Write ``model`` with every tensor inline, as ``ir.save`` would.

    ``ir.save`` hands the proto to ``onnx.save_model``, which walks every
    tensor of every graph looking for external data to write; a model saved
    inline has none, and on a 40,000-node graph that walk cost 70 ms. A file
    name whose extension onnx maps to a text format still goes through
    ``ir.save``, which writes that format.
    """
    fmt = onnx.serialization.registry.get_format_from_file_extension(path.suffix)
    if fmt not in (None, "protobuf"):
        ir.save(model, str(path))
        return
    proto = ir.serde.serialize_model(model)
    try:
        data = proto.SerializeToString()
    except ValueError:  # protobuf's size limit: let onnx's serializer say it in its words
        data = onnx.serialization.registry.get("protobuf").serialize_proto(proto)
    del proto
    with open(path, "wb") as file:
        file.write(data)


def hide_undeclared_types(model: ir.Model) -> List[Tuple[ir.Value, ir.TypeProtocol, Optional[ir.Shape]]]:
    """Clear, for the save, the types of values the input declared no value_info for and onnx can infer.

    onnx_ir writes a value_info entry for every typed value. They are not
    needed (onnx shape inference and every runtime derive them) and they cost
    bytes: on a quantized model, whose int8 weights do not shrink, they made
    the converted file larger than its input. Kept: what the input declared
    (with its new type), graph inputs and outputs, and the outputs of ops
    onnx has no schema for (onnxruntime's contrib ops), which only the file
    can type for other tools. Returns what to restore (``restore_types``);
    nothing is hidden when the model does not say what its input declared.
    """
    declared = declared_value_info(model)
    if declared is None:
        return []
    hidden = []
    for graph in all_graphs(model):
        interface = set(graph.inputs) | set(graph.outputs)
        candidates = [v for v in graph.initializers.values() if v not in interface]
        for node in graph:
            if is_default(node) and is_known_op("", node.op_type):
                candidates.extend(v for v in node.outputs if v not in interface)
        for value in candidates:
            # Plain tensors only: onnx's inference turns some sequence types into tensor(float).
            if type(value.type) is not ir.TensorType or value.name in declared:
                continue
            if value.metadata_props or value.doc_string:
                continue
            hidden.append((value, value.type, value.shape))
            value.shape = None
            value.type = None
    return hidden


def restore_types(hidden) -> None:
    """Undo ``hide_undeclared_types``."""
    for value, value_type, shape in hidden:
        value.type = value_type
        value.shape = shape


class _Tracked(ir.LazyTensor):
    """Stands in for one initializer while it is written.

    It writes the wrapped tensor (keeping its fast path: file-to-file copy for
    external tensors, one conversion for lazy ones), then tells the tracker,
    which counts progress and releases sources no other tensor still needs.
    """

    def __init__(self, inner: ir.TensorProtocol, tracker: "_WriteTracker") -> None:
        super().__init__(
            functools.partial(_identity, inner),
            dtype=inner.dtype,
            shape=inner.shape,
            name=inner.name,
            doc_string=inner.doc_string,
            metadata_props=dict(inner.metadata_props) if inner.metadata_props else None,
        )
        self.inner = inner
        self.tracker = tracker

    def tofile(self, file) -> None:  # noqa: ANN001 - onnx-ir file protocol
        """Write the wrapped tensor's bytes, then report it written."""
        with self.tracker.source_locks(self.inner):
            if hasattr(self.inner, "tofile"):
                self.inner.tofile(file)
            else:
                file.write(self.inner.tobytes())
        self.tracker.written(self.inner)

    def tobytes(self) -> bytes:
        """Bytes of the wrapped tensor (used when the model is saved inline)."""
        with self.tracker.source_locks(self.inner):
            data = self.inner.tobytes()
        self.tracker.written(self.inner)
        return data


def _identity(tensor: ir.TensorProtocol) -> ir.TensorProtocol:
    return tensor


_MAPPED = (ir.ExternalTensor, ir.LazyTensor)  # tensors that may read a memory-mapped source


class _WriteTracker:
    """Swap initializers for ``_Tracked`` stand-ins for one save, and undo it.

    Sources are reference-counted: a memory-mapped file region read by several
    tensors is released after the last of them is written. Reading a source is
    serialized per source, because two threads materializing one
    ``ExternalTensor`` at once race in its lazy mmap.
    """

    def __init__(self, model: ir.Model, external: bool, progress: Optional[ProgressCallback]) -> None:
        # Tracked: every tensor above INLINE_TENSOR_MAX_BYTES (with external data,
        # exactly those that go to the data file), and in an inline save also every
        # small tensor that reads a mapped source, so that source is released. The
        # thousands of small in-memory tensors of a big graph are left as they are:
        # a stand-in each cost more than writing them.
        self._values: List[Tuple[ir.Value, ir.TensorProtocol, int]] = []
        for graph in all_graphs(model):
            for value in graph.initializers.values():
                tensor = value.const_value
                if tensor is None:
                    continue
                size = tensorsize.nbytes(tensor)
                if size > INLINE_TENSOR_MAX_BYTES or (not external and isinstance(tensor, _MAPPED)):
                    self._values.append((value, tensor, size))
        self._progress = progress
        self.total = sum(size for _, _, size in self._values)
        self._done = 0
        self._lock = threading.Lock()
        self._sources: Dict[int, List[ir.ExternalTensor]] = {}
        self._users: Dict[int, int] = {}
        self._source_locks: Dict[int, threading.Lock] = {}
        for _, tensor, _ in self._values:
            sources = tensor_sources(tensor)
            self._sources[id(tensor)] = sources
            for src in sources:
                self._users[id(src)] = self._users.get(id(src), 0) + 1
                self._source_locks.setdefault(id(src), threading.Lock())

    def install(self) -> None:
        """Replace each initializer by its stand-in."""
        for value, tensor, _ in self._values:
            value.const_value = _Tracked(tensor, self)

    def uninstall(self) -> None:
        """Put the original tensors back and release every source still mapped."""
        for value, tensor, _ in self._values:
            value.const_value = tensor
        for sources in self._sources.values():
            for src in sources:
                release_mapped(src)

    def start(self) -> None:
        """Announce the total before the first byte is written."""
        if self._progress is not None:
            self._progress(0, self.total)

    def finish(self) -> None:
        """Report completion (also when every tensor was inline or empty)."""
        if self._progress is not None and self._done != self.total:
            self._progress(self.total, self.total)

    @contextlib.contextmanager
    def source_locks(self, tensor: ir.TensorProtocol) -> Iterator[None]:
        """Hold the locks of ``tensor``'s sources (in a fixed order: no deadlock)."""
        sources = sorted(self._sources.get(id(tensor), ()), key=id)
        with contextlib.ExitStack() as stack:
            for src in sources:
                stack.enter_context(self._source_locks[id(src)])
            yield

    def written(self, tensor: ir.TensorProtocol) -> None:
        """Count ``tensor`` as written; release sources nobody else needs."""
        with self._lock:
            to_release = []
            for src in self._sources.get(id(tensor), ()):
                self._users[id(src)] -= 1
                if self._users[id(src)] == 0:
                    to_release.append(src)
            self._done += tensorsize.nbytes(tensor)
            # Reported under the lock: workers finish in any order, and a
            # progress bar must never see ``done`` go backwards.
            if self._progress is not None:
                self._progress(self._done, self.total)
        for src in to_release:
            with self._source_locks[id(src)]:
                release_mapped(src)
