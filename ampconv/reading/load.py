"""Load an ONNX model lazily, refusing at once what cannot be read.

onnx-ir keeps external data memory-mapped; nothing is read until a tensor's
bytes are needed. Before any work starts we check that every name is valid
UTF-8 and that every external data file exists, stays inside the model's
folder and is long enough, so a missing or truncated file is an error that
names the tensor and the file, and nothing is written. With ``infer_types``
the values get the element types onnx shape inference finds (see
``_merge_types`` for why shapes are left out); a big graph's inference runs
in a child process while this one deserializes (``ampconv.reading.sidecar``). One
walk over the parsed file (``_scan``) gathers what these checks need. The
metadata helpers here (``external_tensors``, ``external_data_files``,
``weight_bytes``, ``weights_and_casts``) read no weights.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import warnings
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import onnx
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.errors import ModelLoadError
from ampconv.runtime.loadcheck import first_line
from ampconv.reading import sidecar
from ampconv.tensors import tensorsize
from ampconv.core.graphs import all_graphs


# Meta key set on a model whose types onnx shape inference filled at load.
INFERRED_META_KEY = "ampconv.onnx_inferred"
# Meta key: the names the input model declared in value_info, in any graph (``declared_value_info``).
DECLARED_META_KEY = "ampconv.declared_value_info"
# Meta key: whether the file had any tensor in external data (``external_tensors`` reads it:
# ampconv never makes a tensor external in memory, so a model read without one has none).
EXTERNAL_META_KEY = "ampconv.external_data"
# Meta key: onnx.checker's basic verdict on the file (its exception, or None), when the sidecar ran it.
CHECKER_META_KEY = "ampconv.input_checker_error"
# Inline weights up to this many bytes are inferred with the model as read:
# onnx's inference copies the whole proto, weights included, so above this the
# inference runs later on a weight-free copy (``prepare.InferTypesPass``).
INFER_AT_LOAD_MAX_BYTES = 64 * 1024**2


def load_model(path: os.PathLike | str, *, infer_types: bool = False) -> ir.Model:
    """Load ``path`` as an onnx-ir model with external data left memory-mapped.

    With ``infer_types``, onnx shape inference runs on the model as read
    (when its inline weights are small), so it is parsed into the IR once, with
    its types; ``model.meta[INFERRED_META_KEY]`` then says so.

    Raises ``ModelLoadError`` naming the file when it is missing, a folder,
    empty, not ONNX, or when its external data is missing, truncated or outside
    the model's folder.
    """
    path = Path(path)
    if not path.exists():
        raise ModelLoadError(f"{path}: no such file")
    if path.is_dir():
        raise ModelLoadError(f"{path}: is a directory, expected an .onnx file")
    if path.stat().st_size == 0:
        raise ModelLoadError(f"{path}: file is empty")
    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError, RuntimeWarning, ...
        raise ModelLoadError(f"{path}: not a readable ONNX model ({first_line(exc)})") from None
    if not proto.graph.node and not proto.graph.output:
        # An arbitrary byte string often parses as an empty ModelProto.
        raise ModelLoadError(f"{path}: not an ONNX model (no graph found)")
    scan = _scan(proto)
    if scan.not_utf8 is not None:
        raise ModelLoadError(f"{path}: {scan.not_utf8} is not valid UTF-8 text; the file is corrupt")
    helper = None
    if infer_types and sidecar.worth_it(proto, scan.subgraphs):
        helper = sidecar.Sidecar(path, INFER_AT_LOAD_MAX_BYTES)  # infers while this process deserializes
    try:
        model, inferred = _read(path, proto, scan, infer_types, helper)
    finally:
        if helper is not None:
            helper.cancel()
    if inferred:
        model.meta[INFERRED_META_KEY] = True
    model.meta[DECLARED_META_KEY] = scan.declared
    model.meta[EXTERNAL_META_KEY] = scan.external
    if scan.external:  # both walk every tensor of every graph: skipped when the file names no data file
        # An absolute base dir keeps tensor paths valid if the process changes folder.
        ir.external_data.set_base_dir(model.graph, str(path.parent.absolute()))
        check_external_data(model, path)
    return model


def _read(path: Path, proto: onnx.ModelProto, scan: "_Scan", infer_types: bool,
          helper: Optional[sidecar.Sidecar]) -> Tuple[ir.Model, bool]:
    """``proto`` read into the IR, with its inferred types when asked; (model, whether types were inferred).

    A graph without subgraphs is deserialized as read and given the element
    types inference found, from ``helper`` when it delivers them (it also
    records the checker's verdict on the file, ``CHECKER_META_KEY``), else
    inferred here. A graph with subgraphs is read from the inferred proto whole.
    """
    inferred = sidecar.infer_types_of(proto, INFER_AT_LOAD_MAX_BYTES) if infer_types and helper is None else None
    if inferred is not None and scan.subgraphs:  # control flow: read the inferred model whole (types and shapes)
        return _deserialize(path, inferred), True
    model = _deserialize(path, proto)
    facts = helper.facts() if helper is not None else None
    if facts is not None:
        model.meta[CHECKER_META_KEY] = facts.checker_error
        types = facts.types
    else:
        if helper is not None:  # the child failed: infer here, as for a small graph
            inferred = sidecar.infer_types_of(proto, INFER_AT_LOAD_MAX_BYTES)
        types = sidecar.element_types(inferred) if inferred is not None else None
    if types is not None:
        _merge_types(model.graph, types)
    return model, types is not None


def _deserialize(path: Path, proto: onnx.ModelProto) -> ir.Model:
    """``proto`` as an onnx-ir model; ``ModelLoadError`` naming ``path`` when the IR cannot read it."""
    try:
        # onnx-ir logs (and warns about) what it finds wrong in a graph, a
        # dangling input for example; the checks that follow turn those into
        # one clear error, so its own lines would only be noise on stderr.
        with _quiet_ir():
            return ir.serde.deserialize_model(proto)
    except Exception as exc:
        raise ModelLoadError(f"{path}: cannot be read into the IR ({first_line(exc)})") from None


def input_checker_error(model: ir.Model) -> Tuple[bool, Optional[Exception]]:
    """(known, error): onnx.checker's basic verdict on the file ``model`` was read from, when the sidecar ran it.

    ``known`` is False when nobody ran it (the caller runs ``loadcheck.checker_error``).
    """
    if CHECKER_META_KEY not in model.meta:
        return False, None
    return True, model.meta[CHECKER_META_KEY]


def declared_value_info(model: ir.Model) -> Optional[frozenset]:
    """The value names the file ``model`` was read from declared in value_info (any graph); None if unknown."""
    return model.meta.get(DECLARED_META_KEY)


def _merge_types(graph: ir.Graph, types: Dict[str, object]) -> None:
    """Give each untyped node output of ``graph`` the type inference found for it (``sidecar.element_types``).

    Types only, for graphs without control flow: the element types are what
    planning needs, and deserializing every inferred shape costs a third of
    reading a big graph (and would write into the output value_info shapes
    the input never declared). A model with If/Loop/Scan is read whole from
    the inferred proto instead: a body output without a shape is written
    untyped (``passes.interface``), so body types and shapes must stay exact.
    Each value gets a type object of its own: the rewrite changes dtypes in place.
    """
    tensor_type, data_type = ir.TensorType, ir.DataType
    for node in graph:
        for value in node.outputs:
            if value.type is not None:
                continue
            found = types.get(value.name)
            if type(found) is int:
                if found:
                    try:
                        value.type = tensor_type(data_type(found))
                    except ValueError:  # an element type this onnx_ir does not know: left to InferTypesPass
                        pass
            elif found is not None:
                value.type = ir.serde.deserialize_type_proto_for_type(found)


@contextlib.contextmanager
def _quiet_ir() -> Iterator[None]:
    """Silence onnx-ir's log warnings and Python warnings while a model is deserialized."""
    logger = logging.getLogger("onnx_ir")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


@dataclasses.dataclass
class _Scan:
    """What one walk over the parsed proto found (``_scan``)."""

    not_utf8: Optional[str]  # what holds the first name that is not valid UTF-8, or None
    declared: frozenset  # value_info names, every graph
    subgraphs: bool  # whether any node holds a subgraph
    external: bool  # whether any tensor (initializer or attribute) is in external data


def _scan(proto: onnx.ModelProto) -> _Scan:
    """One walk over ``proto``: its names' UTF-8 validity, its declared value_info names, whether it has subgraphs.

    protobuf hands a string field that is not valid UTF-8 over as bytes. The
    fast path gathers every name-like string and checks them all with one
    join and one encode at C speed; only a corrupt file pays for the walk
    that says where (``_first_non_utf8_name``).
    """
    texts: List[str] = [text for _, text in _model_names(proto)]
    declared: List[str] = []
    found = _graph_texts(proto.graph, texts, declared)
    try:
        "\0".join(texts).encode("utf-8")
        not_utf8 = None
    except (TypeError, UnicodeEncodeError):
        not_utf8 = _first_non_utf8_name(proto)
    return _Scan(not_utf8, frozenset(declared), _SUBGRAPHS in found, _EXTERNAL in found)


_GRAPH_ATTRIBUTES = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
_TENSOR_ATTRIBUTES = (onnx.AttributeProto.TENSOR, onnx.AttributeProto.TENSORS)
_EXTERNAL_LOCATION = onnx.TensorProto.EXTERNAL
_SUBGRAPHS, _EXTERNAL = "subgraphs", "external"  # what ``_graph_texts`` reports having found


def _graph_texts(graph: onnx.GraphProto, out: List[str], declared: List[str]) -> set:
    """Append every name-like string of ``graph`` and its subgraphs to ``out``, value_info names to ``declared``.

    Returns what it found among ``_SUBGRAPHS`` (a node holds a graph) and
    ``_EXTERNAL`` (a tensor's data is in an external file).
    """
    found = set()
    out += (graph.name, graph.doc_string)
    extend = out.extend
    for node in graph.node:
        extend((node.op_type, node.name, node.domain, node.doc_string))
        extend(node.input)
        extend(node.output)
        for attribute in node.attribute:
            out.append(attribute.name)
            if attribute.type in _GRAPH_ATTRIBUTES:
                found.add(_SUBGRAPHS)
                for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                    found |= _graph_texts(sub, out, declared)
            elif attribute.type in _TENSOR_ATTRIBUTES:
                tensors = [attribute.t] if attribute.HasField("t") else list(attribute.tensors)
                if any(t.data_location == _EXTERNAL_LOCATION for t in tensors):
                    found.add(_EXTERNAL)
    for tensor in graph.initializer:
        out.append(tensor.name)
        extend(entry.value for entry in tensor.external_data)
        if tensor.data_location == _EXTERNAL_LOCATION:
            found.add(_EXTERNAL)
    extend(info.name for info in graph.input)
    extend(info.name for info in graph.output)
    for info in graph.value_info:
        out.append(info.name)
        declared.append(info.name)
    return found


def _graph_names(graph: onnx.GraphProto) -> Iterator[Tuple[str, str]]:
    """(what, text) for every name-like string of ``graph`` and its subgraphs (the slow path: says where)."""
    yield from (("a graph name", graph.name), (f"the doc string of graph {graph.name!r}", graph.doc_string))
    for node in graph.node:
        yield from ((f"op type of node {node.name!r}", node.op_type), ("a node name", node.name))
        yield from ((f"domain of node {node.name!r}", node.domain), (f"doc string of node {node.name!r}", node.doc_string))
        for name in list(node.input) + list(node.output):
            yield f"a value name of node {node.name!r}", name
        for attribute in node.attribute:
            yield f"an attribute name of node {node.name!r}", attribute.name
            if attribute.HasField("g"):
                yield from _graph_names(attribute.g)
            for sub in attribute.graphs:
                yield from _graph_names(sub)
    for tensor in graph.initializer:
        yield "an initializer name", tensor.name
        for entry in tensor.external_data:
            yield f"external data of initializer {tensor.name!r}", entry.value
    for info in list(graph.input) + list(graph.output) + list(graph.value_info):
        yield "a graph input, output or value_info name", info.name


def _model_names(proto: onnx.ModelProto) -> List[Tuple[str, str]]:
    """(what, text) for the model-level strings."""
    names = [
        ("the producer name", proto.producer_name),
        ("the producer version", proto.producer_version),
        ("the model domain", proto.domain),
        ("the model doc string", proto.doc_string),
    ]
    names += [("an opset domain", opset.domain) for opset in proto.opset_import]
    names += [("a metadata entry", text) for entry in proto.metadata_props for text in (entry.key, entry.value)]
    return names


def _first_non_utf8_name(proto: onnx.ModelProto) -> Optional[str]:
    """What holds the first name that is not valid UTF-8 (the slow walk that says where), or None."""
    for what, text in list(_graph_names(proto.graph)) + _model_names(proto):
        try:
            text.encode("utf-8")
        except (AttributeError, UnicodeEncodeError):
            return what
    return None


def external_tensors(model: ir.Model) -> Iterator[ir.ExternalTensor]:
    """Yield every initializer tensor of every graph that lives in external data.

    Nothing, without a walk, for a model read from a file that had none
    (``EXTERNAL_META_KEY``).
    """
    if model.meta.get(EXTERNAL_META_KEY) is False:
        return
    for graph in all_graphs(model):
        for value in graph.initializers.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                yield value.const_value


def external_data_files(model: ir.Model) -> List[Path]:
    """Return the resolved paths of all external data files the model reads."""
    return sorted({Path(t.path).resolve() for t in external_tensors(model)})


# A private copy of a model given in memory (``ampconv.convert_model``, ``ampconv.validate``) with more weight
# bytes than this keeps them in a data file: a protobuf message cannot exceed 2 GB.
COPY_INLINE_MAX_BYTES = 1 << 30


def copy_needs_data_file(model: ir.Model) -> bool:
    """Whether a copy of ``model`` saved in another folder needs a data file: big weights, or weights that live
    in files already (an external tensor saved as it is keeps its relative location, which would not resolve
    from the copy's folder)."""
    return weight_bytes(model) > COPY_INLINE_MAX_BYTES or next(external_tensors(model), None) is not None


def unloaded_external_tensor(model: onnx.ModelProto) -> Optional[str]:
    """The name of the first initializer, in any graph of ``model``, whose data is external and not loaded
    (``onnx.load(path, load_external_data=False)``); None when every weight is in the message."""
    graphs = [model.graph]
    while graphs:
        graph = graphs.pop()
        for tensor in graph.initializer:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                return tensor.name
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    graphs.append(attr.g)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    graphs.extend(attr.graphs)
    return None


def check_external_data(model: ir.Model, model_path: Path) -> None:
    """Fail early, naming tensor and file, when external data is missing, short or unsafe.

    The containment and hard-link rules are onnx-ir's (it refuses to read such
    files); checking them here turns a late failure halfway through writing into
    an early, clear one.
    """
    model_path = Path(model_path)
    base = model_path.parent.resolve()
    seen: Dict[Path, Optional[int]] = {}
    for tensor in external_tensors(model):
        location = str(tensor.location or "")
        if not location:
            raise ModelLoadError(f"{model_path}: tensor {tensor.name!r} has external data without a location")
        if any(int(d) < 0 for d in tensor.shape.numpy()):
            raise ModelLoadError(f"{model_path}: tensor {tensor.name!r} declares a negative dimension {tensor.shape}")
        try:
            _ = tensor.dtype.bitwidth
        except TypeError:  # STRING, UNDEFINED: no fixed width, so no byte range to read
            raise ModelLoadError(
                f"{model_path}: tensor {tensor.name!r} of type {tensor.dtype.name} cannot be external data"
            ) from None
        data_path = Path(tensor.path)
        if data_path not in seen:
            resolved = data_path.resolve()
            if os.path.isabs(location) or (resolved != base and base not in resolved.parents):
                raise ModelLoadError(
                    f"{model_path}: external data {location!r} of tensor {tensor.name!r} is outside "
                    f"the model's folder {base}; move the data file beside the model"
                )
            size: Optional[int] = None
            if data_path.is_file():
                st = data_path.stat()
                if st.st_nlink > 1:
                    raise ModelLoadError(
                        f"{model_path}: external data file {data_path} (tensor {tensor.name!r}) has "
                        f"{st.st_nlink} hard links, which onnx-ir refuses to read; copy it instead"
                    )
                size = st.st_size
            seen[data_path] = size
        size = seen[data_path]
        if size is None:
            raise ModelLoadError(
                f"{model_path}: external data file {data_path} for tensor {tensor.name!r} is missing"
            )
        offset = tensor.offset or 0
        length = tensor.length if tensor.length is not None else tensor.nbytes
        if length < tensor.nbytes:
            raise ModelLoadError(
                f"{model_path}: tensor {tensor.name!r} in {data_path} declares length {length} "
                f"but its shape needs {tensor.nbytes} bytes"
            )
        if offset + length > size:
            raise ModelLoadError(
                f"{model_path}: external data file {data_path} is truncated: tensor {tensor.name!r} "
                f"needs bytes {offset}..{offset + length} but the file has {size}"
            )


def weight_bytes(model: ir.Model) -> int:
    """Total bytes of all weights, from metadata only: initializers and Constant nodes' tensors (all graphs).

    Exporters store weights either way (PyTorch's exporter often as Constant
    nodes), so both count, or a model would report its weights unchanged. A
    Constant's ``value_float(s)``/``value_int(s)`` count as float32/int64.
    """
    return weights_and_casts(model)[0]


def weights_and_casts(model: ir.Model) -> Tuple[int, int]:
    """(``weight_bytes``, the number of default-domain Cast nodes) of ``model``, from one walk over every graph.

    The converter counts both before and after the rewrite; one walk each time
    instead of two.
    """
    total = casts = 0
    for graph in all_graphs(model):
        for value in graph.initializers.values():
            if value.const_value is not None:
                total += tensorsize.nbytes(value.const_value)
        for node in graph:
            op_type = node.op_type
            if op_type == "Constant" and is_default(node):
                total += _constant_bytes(node)
            elif op_type == "Cast" and is_default(node):
                casts += 1
    return total, casts


# Bytes per element of a Constant's list and scalar attributes (float32, int64).
_ATTRIBUTE_ITEM_BYTES = {"value_float": 4, "value_floats": 4, "value_int": 8, "value_ints": 8}


def _constant_bytes(node: ir.Node) -> int:
    """The data bytes of one Constant node, whichever of its attributes holds the value."""
    for name, attr in node.attributes.items():
        if name == "value" and attr.type == ir.AttributeType.TENSOR:
            return tensorsize.nbytes(attr.value)
        if name in _ATTRIBUTE_ITEM_BYTES:
            count = len(attr.value) if isinstance(attr.value, (list, tuple)) else 1
            return _ATTRIBUTE_ITEM_BYTES[name] * count
    return 0
