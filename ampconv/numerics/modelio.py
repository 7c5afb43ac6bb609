"""Read models for validation and write the derived copies validation runs.

Sessions are always built from paths: a derived model is saved into a
temporary folder, with external data when the source had it or when the
float32 copy could approach the 2 GB protobuf limit.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx_ir as ir

from ampconv.core.graphs import all_graphs

from ampconv.errors import ModelLoadError
from ampconv.reading.prepare import infer_types
from ampconv.reading.load import load_model
from ampconv.core.lowtypes import KEY_OF_DTYPE
from ampconv.reading.repair import accept_input, repair

# A derived copy whose estimated size (whole model) is above this is saved with
# external data; well under 2 GiB because widening fp16 weights to float32
# doubles them. (Not ampconv.writing.writer.INLINE_TENSOR_MAX_BYTES, which is per tensor.)
DERIVED_MODEL_INLINE_MAX_BYTES = int(1.5 * 1024**3)
# A calibration copy with more weight bytes than this keeps them as external data: protobuf's serialization and
# onnxruntime's parse of inline weights cost about twice the raw write and read (256 MiB: 2.4 s of CPU, 1.0 s).
CALIBRATION_EXTERNAL_MIN_BYTES = 1 << 20
# A copy that links the source's external data files may keep inline tensors up to this size each.
LINKED_INLINE_MAX_BYTES = 1 << 20

Dim = int | str | None


@dataclasses.dataclass(frozen=True)
class InputSpec:
    """A declared graph input: name, element type and dims (int, symbol or None)."""

    name: str
    dtype: ir.DataType
    dims: tuple[Dim, ...] | None

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype of the element type (ml_dtypes for bfloat16)."""
        return self.dtype.numpy()


def load(path: str) -> ir.Model:
    """Load a model the way ``convert`` does (external data stays on disk until read).

    The same acceptance rule holds: a model that neither onnx.checker nor
    onnxruntime accepts (a truncated weight, say) is refused here, with both
    tools' words, before any copy of it is derived and run.
    """
    if not os.path.isfile(path):
        raise ModelLoadError(f"{path}: no such model file")
    model = load_model(path)
    if accept_input(Path(path)) is not None:
        repair(model)  # e.g. nodes out of order: put them in order, as convert does
    return model


def declared_inputs(model: ir.Model) -> list[InputSpec]:
    """Graph inputs that need feeding (inputs that are initializers are skipped)."""
    specs = []
    for value in model.graph.inputs:
        if value.is_initializer():
            continue
        dims = None
        if value.shape is not None:
            dims = tuple(_dim(d) for d in value.shape)
        dtype = value.dtype if value.dtype is not None else ir.DataType.UNDEFINED
        specs.append(InputSpec(value.name, dtype, dims))
    return specs


def _dim(d) -> Dim:
    if isinstance(d, int):
        return d
    return d.value if getattr(d, "value", None) else None


def iter_values(model: ir.Model):
    """Every value of every graph (subgraphs included): inputs, initializers, node outputs."""
    for graph in all_graphs(model):
        yield from graph.inputs
        yield from graph.initializers.values()
        for node in graph:
            yield from node.outputs


def low_dtype(model: ir.Model) -> str | None:
    """"bf16" if any tensor or cast target is bfloat16, else "fp16" if any is float16, else None."""
    found = low_keys(model)
    if "bf16" in found:
        return "bf16"
    return "fp16" if "fp16" in found else None


def low_keys(model: ir.Model) -> set:
    """The LOW types (``fp16``, ``bf16``) any tensor or cast target of ``model`` holds (both: a fallback model)."""
    found = set()
    for value in iter_values(model):
        if value.dtype in KEY_OF_DTYPE:
            found.add(KEY_OF_DTYPE[value.dtype])
    for graph in all_graphs(model):
        for node in graph:
            for attr in node.attributes.values():
                is_dtype = attr.type == ir.AttributeType.INT and attr.name in ("to", "dtype")
                if is_dtype and attr.value in KEY_OF_DTYPE:
                    found.add(KEY_OF_DTYPE[ir.DataType(attr.value)])
    return found


def has_external_data(model: ir.Model) -> bool:
    """True when any initializer still lives in an external file."""
    for graph in all_graphs(model):
        for value in graph.initializers.values():
            if isinstance(value.const_value, ir.ExternalTensor):
                return True
    return False


def estimated_float32_bytes(model: ir.Model) -> int:
    """Upper bound of the derived copy's weights once LOW tensors are widened."""
    total = 0
    for graph in all_graphs(model):
        for value in graph.initializers.values():
            tensor = value.const_value
            if tensor is None:
                continue
            n = tensor.nbytes
            total += 2 * n if tensor.dtype in KEY_OF_DTYPE else n
    return total


def save_derived(model: ir.Model, folder: str, stem: str, external: bool) -> str:
    """Save a derived model into ``folder`` and return its path."""
    path = os.path.join(folder, f"{stem}.onnx")
    if external:
        ir.save(model, path, external_data=f"{stem}.data")
    else:
        ir.save(model, path)
    return path


def link_external_data(model: ir.Model, folder: str) -> bool:
    """Hard-link the external data files of ``model`` into ``folder`` under the names its tensors give.

    Then a copy of the model saved in ``folder`` with its external tensors as
    references (``ir.save`` without ``external_data``) reads the original
    weights: nothing is rewritten (onnxruntime refuses a symbolic link that
    leaves the model's folder; a hard link is the file itself). False, with
    nothing usable, when a tensor lives inline above ``LINKED_INLINE_MAX_BYTES``
    (it would be written into the copy's protobuf), or a file cannot be linked
    (another file system, no permission, a location outside the folder).
    """
    files = {}
    for graph in all_graphs(model):
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                files[tensor.location] = os.path.join(tensor.base_dir, tensor.location)
            elif tensor is not None and tensor.nbytes > LINKED_INLINE_MAX_BYTES:
                return False
    root = os.path.abspath(folder)
    for location, source in files.items():
        target = os.path.normpath(os.path.join(root, location))
        if not target.startswith(root + os.sep):
            return False
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            os.link(source, target)
        except OSError:
            return False
    return True


def wants_external(model: ir.Model, source_path: str) -> bool:
    """Whether a derived copy of ``model`` (loaded from ``source_path``) needs external data."""
    if has_external_data(model):
        return True
    size = max(os.path.getsize(source_path), estimated_float32_bytes(model))
    return size > DERIVED_MODEL_INLINE_MAX_BYTES


def ensure_types(model: ir.Model) -> None:
    """Fill in missing tensor types the way the converter does (``prepare.infer_types``).

    Emulation and localization read each tensor's element type, and a converted
    model declares value_info only where its input did. onnx shape inference
    runs first; the schema pass after it types what onnx cannot, the outputs
    of onnxruntime's contrib ops (read through onnxruntime's schemas) and the
    ops after them, so emulation rounds those too.
    """
    if all(v.dtype is not None for v in iter_values(model)):
        return
    try:
        infer_types(model)
    except Exception:  # noqa: BLE001, S110 -- unusual models: keep the types we have
        pass


def untyped_values(model: ir.Model) -> int:
    """How many node outputs still have no known element type."""
    return sum(1 for graph in all_graphs(model) for node in graph for v in node.outputs if v.dtype is None and v.type is None)


def expose(model: ir.Model, names: Sequence[str]) -> int:
    """Add the main-graph node outputs named in ``names`` as graph outputs; returns how many."""
    wanted = set(names)
    present = {v.name for v in model.graph.outputs}
    added = 0
    for node in model.graph:
        for value in node.outputs:
            if value.name in wanted and value.name not in present:
                model.graph.outputs.append(value)
                present.add(value.name)
                added += 1
    return added
