"""The forms a user writes for input shapes and input ranges, parsed and checked once.

Shared by the conversion's ``DataOptions`` (random calibration inputs, the
report's GPU figures) and validation's ``ValidateOptions``; the command line
parses ``--shape`` and ``--input-range`` with the same functions. Light: no
numpy, onnx or onnxruntime (``import ampconv`` loads it through ``Config``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ampconv.errors import UsageError, named


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
