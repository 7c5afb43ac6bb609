"""Input samples for validation: read from files, or drawn at random, then checked.

Sources, in order of preference (docs/validation.md):

1. ``FILE.npz``: one sample, arrays keyed by input name.
2. A folder of ``.npz`` files: one sample each, in name order.
3. ONNX test-data folders: a model folder holding ``test_data_set_*`` or one
   ``test_data_set_N`` folder, with ``input_<i>.pb`` tensors.
4. Nothing given: seeded random data from the declared types and shapes.

Every sample is checked against the reference model's declared names, element
kinds, ranks and fixed dimensions, with a ``UsageError`` naming the mismatch.
A dimension declared -1 or with neither a value nor a name (Paddle exports
declare ``[-1, 3, ?, ?]``) fixes nothing: any size is accepted, and random
data uses 1 there unless ``--shape`` sets it (as Polygraphy does).
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
from collections.abc import Mapping, Sequence

import ml_dtypes
import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.errors import UsageError, named
from ampconv.numerics.modelio import InputSpec
from ampconv.core.shapespec import dims_text, is_fixed, resolve_all

Sample = Mapping[str, np.ndarray]
# Integer inputs are usually indices or token ids: keep random values small.
MAX_RANDOM_INT = 10


@dataclasses.dataclass(frozen=True)
class Samples:
    """Loaded samples, where they came from, whether they are random, and notes for the result."""

    samples: tuple[Sample, ...]
    sources: tuple[str, ...]
    random: bool
    notes: tuple[str, ...] = ()


def iter_samples(paths: Sequence[str], specs: Sequence[InputSpec]):
    """Yield ``(source, sample)`` from ``paths`` one at a time, each checked (rules 1-3).

    Only one sample is in memory at a time: calibration reads any number of them.
    """
    for path in paths:
        for source, read in _read_path(path, specs):
            sample = read()
            check_sample(sample, specs, source)
            yield source, sample


@dataclasses.dataclass(frozen=True)
class RandomDraw:
    """How random samples are drawn: ``count`` of them from ``seed``, at ``shapes``, integers under
    ``int_bounds``, values in ``ranges`` (see ``random_samples``)."""

    count: int = 8
    seed: int = 0
    shapes: Mapping[str, tuple[int, ...]] = dataclasses.field(default_factory=dict)
    int_bounds: Mapping[str, int] = dataclasses.field(default_factory=dict)
    ranges: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)


class SampleStream:
    """Samples read again on every iteration, one at a time, so memory never grows with their number.

    From files (``paths``) or, given a ``RandomDraw``, drawn from a seeded
    generator exactly as ``random_samples`` draws them.
    """

    def __init__(self, paths: Sequence[str], specs: Sequence[InputSpec], draw: RandomDraw | None = None) -> None:
        self.paths = tuple(paths)
        self.specs = tuple(specs)
        self.random = draw is not None
        self.notes: tuple[str, ...] = ()
        self._draw = draw or RandomDraw()
        if draw is not None:
            self._resolved, self.notes = resolve_all(self.specs, dict(draw.shapes))
            check_ranges(self.specs, dict(draw.ranges), dict(draw.int_bounds))
        self.count = self._draw.count if self.random else sum(1 for _ in self._sources())

    def _sources(self):
        for path in self.paths:
            for source, _read in _read_path(path, self.specs):
                yield source

    def __iter__(self):
        if not self.random:
            yield from iter_samples(self.paths, self.specs)
            return
        draw = self._draw
        rng = np.random.default_rng(draw.seed)
        for index in range(draw.count):
            sample = {
                s.name: _random_array(s, self._resolved[s.name], rng, draw.int_bounds.get(s.name), draw.ranges.get(s.name))
                for s in self.specs
            }
            yield f"random sample {index} (seed {draw.seed})", sample


def _read_path(path: str, specs: Sequence[InputSpec]):
    """``(source, read)`` pairs for the samples ``path`` holds; ``read()`` loads one (lazily)."""
    if os.path.isfile(path):
        if not path.endswith(".npz"):
            raise UsageError(f"{path}: not an .npz file or a folder of inputs")
        return [(path, lambda: _read_npz(path))]
    if not os.path.isdir(path):
        raise UsageError(f"{path}: no such inputs file or folder")
    if _input_pbs(path):
        return [(path, lambda: _read_test_set(path, specs))]
    sets = sorted(glob.glob(os.path.join(path, "test_data_set_*")), key=_natural)
    sets = [s for s in sets if os.path.isdir(s)]
    if sets:
        return [(s, lambda s=s: _read_test_set(s, specs)) for s in sets]
    npzs = sorted(glob.glob(os.path.join(path, "*.npz")), key=_natural)
    if npzs:
        return [(p, lambda p=p: _read_npz(p)) for p in npzs]
    raise UsageError(f"{path}: no .npz files or test_data_set_* folders inside")


def check_npz_names(paths: Sequence[str], specs: Sequence[InputSpec]) -> None:
    """Raise ``UsageError`` naming the first ``.npz`` among ``paths`` whose array names are not the model's inputs.

    Reads each archive's index only, not its arrays.
    """
    declared = [s.name for s in specs]
    names = ", ".join(declared) or "none"
    for path in paths:
        for source, _read in _read_path(path, specs):
            if not source.endswith(".npz"):
                continue
            try:
                with np.load(source, allow_pickle=False) as data:
                    found = list(data.files)
            except Exception as exc:  # noqa: BLE001 -- zipfile and numpy errors all mean "not a usable .npz"
                raise UsageError(f"{source}: cannot read as .npz: {exc}") from None
            for name in found:
                if name not in declared:
                    raise UsageError(f"{source}: unknown input {name!r} (model inputs: {names})")
            for name in declared:
                if name not in found:
                    raise UsageError(f"{source}: missing input {name!r} (model inputs: {names})")


def _natural(text: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text)]


def _read_npz(path: str) -> Sample:
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: np.asarray(data[name]) for name in data.files}
    except Exception as exc:  # noqa: BLE001 -- zipfile, pickle and numpy errors all mean "not a usable .npz"
        raise UsageError(f"{path}: cannot read as .npz: {exc}") from None


def _input_pbs(folder: str) -> list[str]:
    return sorted(glob.glob(os.path.join(folder, "input_*.pb")), key=_natural)


def _read_test_set(folder: str, specs: Sequence[InputSpec]) -> Sample:
    import onnx
    from onnx import numpy_helper

    pbs = _input_pbs(folder)
    if not pbs:
        raise UsageError(f"{folder}: no input_*.pb files")
    if len(pbs) > len(specs):
        raise UsageError(f"{folder}: {len(pbs)} input files but the model declares {len(specs)} inputs")
    sample = {}
    for index, pb in enumerate(pbs):
        tensor = onnx.TensorProto()
        try:
            with open(pb, "rb") as f:
                tensor.ParseFromString(f.read())
            array = numpy_helper.to_array(tensor)
        except Exception as exc:  # noqa: BLE001 -- protobuf or numpy_helper: not a tensor we can use
            raise UsageError(f"{pb}: cannot read as an ONNX tensor: {exc}") from None
        # Unnamed tensors follow the declared input order (the ONNX test-data convention).
        sample[tensor.name or specs[index].name] = array
    return sample


def _kind(dtype: np.dtype) -> str:
    if dtype.kind in "iu":
        return "integer"
    if dtype.kind == "f" or dtype.name == "bfloat16":
        return "float"
    if dtype.kind == "b":
        return "bool"
    return dtype.name


def check_sample(sample: Sample, specs: Sequence[InputSpec], source: str) -> None:
    """Raise UsageError naming the first input whose name, kind, rank or dims mismatch."""
    declared = {s.name: s for s in specs}
    names = ", ".join(declared) or "none"
    for name in sample:
        if name not in declared:
            raise UsageError(f"{source}: unknown input {name!r} (model inputs: {names})")
    for spec in specs:
        if spec.name not in sample:
            raise UsageError(f"{source}: missing input {spec.name!r} (model inputs: {names})")
        array = sample[spec.name]
        want = _kind(spec.numpy_dtype)
        got = _kind(array.dtype)
        if want != got:
            raise UsageError(
                f"{source}: input {spec.name!r} has dtype {array.dtype}, the model declares {spec.dtype.name.lower()}"
            )
        if spec.dims is None:
            continue
        if array.ndim != len(spec.dims):
            raise UsageError(
                f"{source}: input {spec.name!r} has rank {array.ndim} (shape {list(array.shape)}), "
                f"the model declares rank {len(spec.dims)} ({dims_text(spec.dims)})"
            )
        for axis, (want_dim, got_dim) in enumerate(zip(spec.dims, array.shape)):
            if is_fixed(want_dim) and want_dim != got_dim:
                raise UsageError(
                    f"{source}: input {spec.name!r} has shape {list(array.shape)}, "
                    f"the model declares {dims_text(spec.dims)} (axis {axis})"
                )


def random_samples(
    specs: Sequence[InputSpec],
    shapes: Mapping[str, tuple[int, ...]],
    count: int,
    seed: int,
    int_bounds: Mapping[str, int] | None = None,
    ranges: Mapping[str, tuple[float, float]] | None = None,
) -> Samples:
    """Draw ``count`` seeded samples: floats ~ N(0, 1), ints in [0, bound), random bools.

    ``int_bounds`` caps integer inputs (e.g. the size of the table a Gather
    indexes); otherwise they lie in ``[0, MAX_RANDOM_INT)``. ``ranges``
    (input name -> ``(low, high)``) overrides both for the inputs it names:
    floats uniform in ``[low, high)``, integers in ``[low, high]`` (models
    fed int16-scale audio or 0-255 pixels). -1 and unnamed dims that
    ``shapes`` leaves open are 1, and ``Samples.notes`` says so.
    """
    stream = SampleStream((), specs, RandomDraw(count, seed, dict(shapes), dict(int_bounds or {}), dict(ranges or {})))
    drawn = list(stream)
    return Samples(tuple(s for _, s in drawn), tuple(src for src, _ in drawn), random=True, notes=stream.notes)


def check_ranges(
    specs: Sequence[InputSpec], ranges: Mapping[str, tuple[float, float]], int_bounds: Mapping[str, int] | None = None
) -> None:
    """Raise ``UsageError`` for a range naming no input or a bool input, or an integer range that cannot be fed.

    An integer range needs an integer of the input's type inside it, and stays
    inside the table the input indexes (``int_bounds``, see ``integer_bounds``):
    the run would fail there. Run before any sample is drawn.
    """
    int_bounds = int_bounds or {}
    declared = {s.name: s for s in specs}
    for name, (low, high) in ranges.items():
        spec = declared.get(name)
        if spec is None:
            raise UsageError(f"{named('input_ranges', entry=repr(name))}: no input of that name (inputs: {', '.join(declared) or 'none'})")
        if spec.dtype == ir.DataType.BOOL or not (spec.dtype.is_floating_point() or spec.dtype.is_integer()):
            raise UsageError(f"{named('input_ranges', entry=repr(name))}: the input is {spec.dtype.name.lower()}; a range needs a number type")
        if spec.dtype.is_floating_point():
            top = float(ml_dtypes.finfo(spec.numpy_dtype).max)
            if max(abs(low), abs(high)) > top:
                raise UsageError(
                    f"{named('input_ranges', entry=repr(name))}: [{low:g}, {high:g}] exceeds the finite range of "
                    f"{spec.dtype.name.lower()} (+-{top:g})"
                )
        if spec.dtype.is_integer():
            info = np.iinfo(spec.numpy_dtype)
            lo, hi = _integer_range(low, high)
            if lo > hi:
                raise UsageError(f"{named('input_ranges', entry=repr(name))}: no integer in [{low:g}, {high:g}]")
            if lo < info.min or hi > info.max:
                raise UsageError(
                    f"{named('input_ranges', entry=repr(name))}: [{low:g}, {high:g}] exceeds {spec.dtype.name.lower()} "
                    f"[{info.min}, {info.max}]"
                )
            rows = int_bounds.get(name)
            if rows is not None and (lo < -rows or hi >= rows):
                raise UsageError(
                    f"{named('input_ranges', entry=repr(name))}: [{low:g}, {high:g}] indexes outside the {rows} rows of the table "
                    f"the input gathers from (valid: {-rows} to {rows - 1})"
                )


def _integer_range(low: float, high: float) -> tuple[int, int]:
    """The integers of ``[low, high]`` as (first, last): both ends included (-32768..32767, 0..255)."""
    import math

    return math.ceil(low), math.floor(high)


def _random_array(
    spec: InputSpec, shape, rng: np.random.Generator, bound: int | None, value_range: tuple[float, float] | None = None
) -> np.ndarray:
    dtype = spec.dtype
    if value_range is not None:
        low, high = value_range
        if dtype.is_integer():
            lo, hi = _integer_range(low, high)
            # Drawn in the input's own type: uint64 ranges exceed int64, numpy's default.
            return rng.integers(lo, hi, size=shape, endpoint=True, dtype=spec.numpy_dtype)
        values = rng.uniform(low, high, size=shape)
        if spec.numpy_dtype == np.float64:
            return values
        # Through float32 as the N(0, 1) path (numpy casts to bfloat16 from there); rounding may land on an end.
        return values.astype(np.float32).astype(spec.numpy_dtype)
    if dtype.is_floating_point():
        return rng.standard_normal(shape, dtype=np.float32).astype(spec.numpy_dtype)
    if dtype == ir.DataType.BOOL:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.is_integer():
        high = max(1, min(MAX_RANDOM_INT, bound or MAX_RANDOM_INT))
        return rng.integers(0, high, size=shape).astype(spec.numpy_dtype)
    raise UsageError(
        f"cannot make random data for input {spec.name!r} of type {dtype.name.lower()}: pass sample files ({named('inputs')})"
    )


# Ops that read rows of a constant table by an integer input: (domain, op) -> {index slot: table slot}.
# onnxruntime's EmbedLayerNormalization reads input_ids, segment_ids and position_ids this way.
_TABLE_LOOKUPS = {
    ("", "Gather"): {1: 0},
    ("com.microsoft", "EmbedLayerNormalization"): {0: 2, 1: 4, 8: 3},
}
# Integer ops an id passes through on its way to the lookup (the transformer optimizer casts ids to int32).
_ID_PASSTHROUGH = frozenset({"Cast", "Identity", "Reshape", "Unsqueeze", "Squeeze", "Flatten"})


def integer_bounds(model: ir.Model) -> dict[str, int]:
    """For integer graph inputs used as indices into a constant table, the table size.

    The lookups are Gather (on axis 0 of its data) and onnxruntime's fused
    EmbedLayerNormalization (``_TABLE_LOOKUPS``), reached directly or through a
    Cast, Reshape or (Un)Squeeze. Random token ids then stay inside an
    embedding table of fewer than ``MAX_RANDOM_INT`` rows instead of failing
    the run.
    """
    bounds: dict[str, int] = {}
    for value in model.graph.inputs:
        if value.dtype is None or not value.dtype.is_integer():
            continue
        for node, index in _id_uses(value):
            table_slot = _TABLE_LOOKUPS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type), {})
            if index not in table_slot or table_slot[index] >= len(node.inputs):
                continue
            data = node.inputs[table_slot[index]]
            if data is None or data.shape is None:
                continue
            axis_attr = node.attributes.get("axis") if node.op_type == "Gather" else None
            axis = axis_attr.as_int() if axis_attr is not None else 0
            dim = data.shape[axis] if -len(data.shape) <= axis < len(data.shape) else None
            if isinstance(dim, int) and dim > 0:
                bounds[value.name] = min(bounds.get(value.name, dim), dim)
    return bounds


def _id_uses(value: ir.Value, depth: int = 3):
    """(node, input index) of every use of ``value``, following ``_ID_PASSTHROUGH`` ops up to ``depth``."""
    for node, index in value.uses():
        if node.op_type in _ID_PASSTHROUGH and is_default(node) and depth > 0 and node.outputs:
            yield from _id_uses(node.outputs[0], depth - 1)
        else:
            yield node, index
