"""The forms a user writes for input shapes and input ranges, parsed and checked once, and resolved.

Shared by the conversion's ``DataOptions`` (random calibration inputs, the
report's GPU figures) and validation's ``ValidateOptions``; the command line
parses ``--shape`` and ``--input-range`` with the same functions. A model's
declared inputs take their concrete shapes from them here too
(``resolve_shape``: random samples, the report's per-inference figures). Light: no
numpy, onnx or onnxruntime (``import ampconv`` loads it through ``Config``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Optional, Protocol

from ampconv.core.dimexpr import evaluate_dim, symbols_of, unset_symbols
from ampconv.errors import UsageError, named


class DeclaredInput(Protocol):
    """A model input as declared (``numerics.modelio.InputSpec``): its name and dims (int, symbol or None)."""

    name: str
    dims: Optional[tuple]


def shape_pairs(shapes) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """``shapes`` as ``(name, dims)`` pairs: a dict or pairs; one int stands for ``(int,)``.

    ``{"batch": 2, "x": (1, 3, 224, 224)}``, ``[("batch", (2,))]``, the
    command line's strings (``{"x": "1x3x48x192"}``, ``"x:1x3x48x192"`` or a
    list of them) are all accepted. Raises ``UsageError`` for negative or missing dims.
    """
    items = shapes.items() if isinstance(shapes, Mapping) else [shapes] if isinstance(shapes, str) else shapes
    pairs = []
    for item in items:
        try:
            # "x:1x3x48x192", as --shape takes it, or a (name, dims) pair
            name, dims = parse_shape(item) if isinstance(item, str) else item
        except (TypeError, ValueError):
            raise UsageError(f"bad {named('shapes')} entry {item!r}: expected (name, dims)") from None
        dims = (dims,) if isinstance(dims, int) else dims
        dims = dims.lower().split("x") if isinstance(dims, str) else dims  # "1x3x48x192", as --shape writes it
        try:
            dims = tuple(int(d) for d in dims)
        except (TypeError, ValueError):
            raise UsageError(f"bad shape for {name!r}: {dims!r} (expected integers)") from None
        if not dims or any(d < 0 for d in dims):
            raise UsageError(f"bad shape for {name!r}: {dims}")
        pairs.append((str(name), dims))
    return tuple(pairs)


def range_pairs(ranges) -> tuple[tuple[str, tuple[float, float]], ...]:
    """``input_ranges`` as ``(name, (low, high))`` pairs: a dict ``{"audio": (-32768, 32767)}`` or pairs.

    ``low == high`` is a constant input (a sample rate, a fixed flag).
    Raises ``UsageError`` unless ``low <= high`` are finite numbers, or for a
    name given twice.
    """
    import math

    items = ranges.items() if isinstance(ranges, Mapping) else ranges
    pairs: dict[str, tuple[float, float]] = {}
    for item in items:
        try:
            name, (low, high) = item
            low, high = float(low), float(high)
        except (TypeError, ValueError):
            raise UsageError(f"bad {named('input_ranges')} entry {item!r}: expected (name, (low, high))") from None
        if not (math.isfinite(low) and math.isfinite(high)) or not low <= high:
            raise UsageError(f"{named('input_ranges', entry=repr(name))}: expected finite low <= high, got ({low:g}, {high:g})")
        if name in pairs:
            raise UsageError(f"{named('input_ranges', entry=repr(name))}: given twice")
        pairs[str(name)] = (low, high)
    return tuple(pairs.items())


def parse_input_range(text: str) -> tuple[str, tuple[float, float]]:
    """Parse one ``NAME:LOW,HIGH`` (e.g. ``audio:-32768,32767``) into ``(name, (low, high))``.

    ``sr:16000,16000`` (equal ends) makes the input a constant. Raises
    ``UsageError`` with a one-line message for any other form or for
    ``low > high``.
    """
    name, sep, bounds = text.rpartition(":")
    low, comma, high = bounds.partition(",")
    if not sep or not name or not comma:
        raise UsageError(f"bad input range {text!r}: expected NAME:LOW,HIGH, e.g. audio:-32768,32767")
    try:
        values = (float(low), float(high))
    except ValueError:
        raise UsageError(f"bad input range {text!r}: LOW and HIGH must be numbers, e.g. pixels:0,255") from None
    if values[0] > values[1]:  # nan and inf are caught by range_pairs
        raise UsageError(f"bad input range {text!r}: LOW must not exceed HIGH")
    return range_pairs([(name, values)])[0]


# ``NAME[AXIS]``: one axis of one input (AXIS may count from the end, -1 = last).
_AXIS_KEY = re.compile(r"^(?P<name>.+)\[(?P<axis>-?\d+)\]$")
SHAPE_SYNTAX = "NAME:DIMxDIM... (whole input), SYMBOL:N (named dimension) or NAME[AXIS]:N (one axis)"


def split_axis(key: str) -> tuple[str, int] | None:
    """``"x[2]"`` -> ``("x", 2)``; None when ``key`` is not of the ``NAME[AXIS]`` form."""
    match = _AXIS_KEY.match(key)
    if match is None:
        return None
    return match.group("name"), int(match.group("axis"))


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse one ``--shape`` value into ``(name, dims)``.

    Three forms: ``NAME:1x3x224x224`` (whole shape of input NAME),
    ``SYMBOL:8`` (every dimension named SYMBOL) and ``NAME[AXIS]:48`` (one
    axis of one input, for ``-1`` or unnamed dimensions; the key stays
    ``"NAME[AXIS]"``). Raises ``UsageError`` with a one-line message otherwise.
    """
    name, sep, dims = text.rpartition(":")
    if not sep or not name or not dims:
        raise UsageError(f"bad shape {text!r}: expected {SHAPE_SYNTAX}, e.g. input:1x3x224x224")
    if name.strip() == "?" or re.fullmatch(r"\s*-?\d+\s*", name):
        # "?" and -1 are how unnamed dimensions are displayed: they name nothing to bind.
        raise UsageError(
            f"bad shape {text!r}: {name.strip()!r} is not a name; set an unnamed or -1 dimension "
            "by input and axis, e.g. x[2]:48, or give the whole input shape, e.g. x:1x3x48x192"
        )
    if "[" in name and split_axis(name) is None:
        raise UsageError(f"bad shape {text!r}: expected NAME[AXIS]:N with an integer AXIS, e.g. x[2]:48")
    try:
        values = tuple(int(d) for d in dims.lower().split("x"))
    except ValueError:
        raise UsageError(f"bad shape {text!r}: dimensions must be integers separated by 'x'") from None
    if any(v < 0 for v in values):
        raise UsageError(f"bad shape {text!r}: dimensions must be >= 0 (unset dimensions default to 1)")
    if split_axis(name) is not None and len(values) != 1:
        raise UsageError(f"bad shape {text!r}: NAME[AXIS] takes one size, e.g. {name}:48")
    return name, values


def _shape_entry(entry: str) -> str:
    """An entry of the ``shapes`` parameter as an error names it (``--shape ENTRY`` at the command line)."""
    return named("shapes", entry=entry, words="shapes entry")


def is_fixed(dim) -> bool:
    """Whether a declared dim is a fixed size."""
    # A negative dim_value (-1 in Paddle/TF exports) means "any size", like an unnamed dim.
    return isinstance(dim, int) and dim >= 0


def _is_unnamed(dim) -> bool:
    """-1 (or any negative) dim_value, a dim with neither value nor name, or one named "?" (no --shape name)."""
    return dim is None or dim == "?" or (isinstance(dim, int) and dim < 0)


def dims_text(dims) -> str:
    """Declared dims as an error shows them: ``[1, ?, 224]``."""
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def _axis_bindings(spec: DeclaredInput, shapes: Mapping[str, tuple[int, ...]]) -> dict[int, int]:
    """``--shape NAME[AXIS]:N`` bindings of ``spec`` as ``{axis >= 0: size}``."""
    bound: dict[int, int] = {}
    for key, values in shapes.items():
        split = split_axis(key) if key != spec.name else None
        if split is None or split[0] != spec.name:
            continue
        name, axis = split
        if spec.dims is None:
            raise UsageError(
                f"{_shape_entry(key)}: input {name!r} has no declared shape: pass its whole shape, "
                f"{_shape_entry(name + ':DIMxDIM...')}"
            )
        rank = len(spec.dims)
        if not -rank <= axis < rank:
            raise UsageError(f"{_shape_entry(key)}: input {name!r} has rank {rank} ({dims_text(spec.dims)}), no axis {axis}")
        values = tuple(values)
        if len(values) != 1:
            raise UsageError(f"{_shape_entry(key)}: one axis takes one size, got {len(values)}")
        bound[axis % rank] = int(values[0])
    return bound


def resolve_shape(spec: DeclaredInput, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    """Concrete shape of a random input: declared dims plus ``--shape`` bindings.

    ``shapes[input_name]`` gives the whole shape, ``shapes["input[axis]"]``
    one axis and ``shapes[symbol]`` every dim of that name; dims left unbound
    (-1, unnamed or a symbol) are 1.
    """
    return _resolve(spec, shapes)[0]


def _resolve(spec: DeclaredInput, shapes) -> tuple[tuple[int, ...], tuple[int, ...]]:
    axes = _axis_bindings(spec, shapes)
    if spec.name in shapes:
        if axes:
            raise UsageError(
                f"{_shape_entry(spec.name)}: the whole shape and single axes ({spec.name}[...]) are both given; pass one"
            )
        given = tuple(shapes[spec.name])
        if spec.dims is not None:
            if len(given) != len(spec.dims):
                raise UsageError(
                    f"{_shape_entry(spec.name)}: rank {len(given)} given, the model declares rank {len(spec.dims)} "
                    f"({dims_text(spec.dims)})"
                )
            for axis, (want, got) in enumerate(zip(spec.dims, given)):
                if is_fixed(want) and want != got:
                    raise UsageError(
                        f"{_shape_entry(spec.name)}: axis {axis} is {got}, the model fixes it to {want}"
                    )
        return given, ()
    if spec.dims is None:
        raise UsageError(
            f"input {spec.name!r} has no declared shape: pass {_shape_entry(spec.name + ':DIMxDIM...')}"
        )
    resolved, unbound = [], []
    for axis, dim in enumerate(spec.dims):
        if is_fixed(dim):
            if axis in axes and axes[axis] != dim:
                raise UsageError(
                    f"{_shape_entry(f'{spec.name}[{axis}]')}: {axes[axis]} given, the model fixes axis {axis} to {dim}"
                )
            resolved.append(dim)
        elif axis in axes:
            # The most specific binding wins over a dimension symbol.
            resolved.append(axes[axis])
        elif isinstance(dim, str) and dim in shapes:
            bound = tuple(shapes[dim])
            if len(bound) != 1:
                raise UsageError(f"{_shape_entry(str(dim))}: a dimension symbol takes one value, got {len(bound)}")
            resolved.append(bound[0])
        elif isinstance(dim, str) and symbols_of(dim) != {dim}:
            # An exporter's expression of symbols (``past_sequence_length + 1``): evaluated from the
            # bound ones, so the inputs of one step agree; a symbol left unbound counts 1 and is noted.
            sizes = {name: tuple(shapes[name])[0] for name in symbols_of(dim) if name in shapes}
            resolved.append(max(evaluate_dim(dim, sizes), 1))
            if len(sizes) < len(symbols_of(dim)):
                unbound.append(axis)
        else:
            # Unset (-1, unnamed, or a symbol nobody bound): size 1, and a note says so.
            resolved.append(1)
            unbound.append(axis)
    return tuple(resolved), tuple(unbound)


def dimension_names(specs: Sequence[DeclaredInput]) -> list[str]:
    """The dimension symbols the inputs declare, those inside expressions (``past + 1``) included, sorted."""
    names = set()
    for spec in specs:
        for dim in spec.dims or ():
            if isinstance(dim, str) and not _is_unnamed(dim):
                names |= symbols_of(dim)
    return sorted(names)


def placeholder(names) -> str:
    """The size a note asks for, ``N`` (``SIZE`` where a dimension or input is itself called ``N``)."""
    return "SIZE" if "N" in names else "N"


def unset_symbols_of(specs: Sequence[DeclaredInput], shapes: Mapping[str, tuple[int, ...]]) -> dict[str, list[str]]:
    """Each dimension symbol no ``shapes`` entry sets -> the inputs that use it (in input order)."""
    found: dict[str, list[str]] = {}
    for spec in specs:
        if spec.dims is None:
            continue  # no declared shape: no symbol to name (``_resolve`` asks for the whole shape)
        _, unbound = _resolve(spec, shapes)
        for axis in unbound:
            if isinstance(spec.dims[axis], str) and not _is_unnamed(spec.dims[axis]):
                # a derived dimension (past_sequence_length + 1) is set through the symbols it is made of
                for symbol in unset_symbols([spec.dims[axis]], shapes) or (spec.dims[axis],):
                    found.setdefault(symbol, [])
                    if spec.name not in found[symbol]:
                        found[symbol].append(spec.name)
    return found


def resolve_all(specs: Sequence[DeclaredInput], shapes: Mapping[str, tuple[int, ...]]):
    """The shape of every input for random data, and notes on the axes left at 1 (every unset symbol in one)."""
    known = {s.name for s in specs}
    symbols = set(dimension_names(specs)) | {d for s in specs for d in (s.dims or ()) if isinstance(d, str)}
    for name in shapes:
        split = split_axis(name)
        if name in known or name in symbols or (split is not None and split[0] in known):
            continue
        named_dims = dimension_names(specs)
        dims = f"dimensions: {', '.join(named_dims)}" if named_dims else "the model has no named dimension"
        raise UsageError(
            f"{_shape_entry(name)}: no input or dimension of that name (inputs: {', '.join(sorted(known))}; {dims})"
        )
    resolved, notes = {}, []
    for spec in specs:
        shape, unbound = _resolve(spec, shapes)
        resolved[spec.name] = shape
        unnamed = [axis for axis in unbound if _is_unnamed(spec.dims[axis])]
        if unnamed:
            axes = ", ".join(str(a) for a in unnamed)
            axes = f"axis {axes} is" if len(unnamed) == 1 else f"axes {axes} are"
            size = placeholder({spec.name})
            notes.append(
                f"input {spec.name!r} {dims_text(spec.dims)}: {axes} -1 or unnamed, random data "
                f"uses size 1 there (shape {list(shape)}); set an axis with "
                f"{named('shapes', {f'{spec.name}[{unnamed[-1]}]': size})} "
                f"or the whole shape with {named('shapes', {spec.name: list(shape)})}"
            )
    unset = unset_symbols_of(specs, shapes)
    if unset:
        notes.append(unset_note(unset))
    return resolved, tuple(notes)


def unset_note(unset: Mapping[str, Sequence[str]]) -> str:
    """One note naming every unset dimension symbol (``unset_symbols_of``) and the inputs that use it."""
    size = placeholder(unset)
    wanted = named("shapes", {symbol: size for symbol in unset})
    if len(unset) == 1:
        ((symbol, names),) = unset.items()
        return (f"dimension {symbol!r} (input {', '.join(names)}) is not set: random data uses size 1 there; "
                f"pass {wanted} for the size the model will see")
    listed = ", ".join(f"{symbol!r} (input {', '.join(names)})" for symbol, names in unset.items())
    return (f"dimensions {listed} are not set: random data uses size 1 there; "
            f"pass {wanted} for the sizes the model will see")
