"""The LOW types, one record each: every fact about float16 and bfloat16 that ampconv uses.

``--dtype`` names a record by its key (``fp16``, ``bf16``); the planner, the
rewrite, the range guards and the validator read the record instead of keeping
tables of their own. ``RangeLimits`` is the record as the constant range guards
and ``--clamp`` see it: its limits, or the ones ``max_finite``/``min_positive``
set in their place (docs/hazards.md, "Range thresholds").
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import ml_dtypes
import numpy as np
import onnx_ir as ir

from ampconv.errors import UsageError

# The float element types as schemas and kernel registries spell them.
FLOAT_TYPE_STRINGS = frozenset({"tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(double)"})


@dataclasses.dataclass(frozen=True)
class LowType:
    """One LOW element type."""

    key: str  # the --dtype value: fp16 or bf16
    name: str  # the ONNX element type's name: float16 or bfloat16
    dtype: ir.DataType
    numpy: np.dtype
    # Bit patterns of |x| as float32 at which rounding to this type overflows to
    # inf (the halfway point above the largest finite value rounds to even = inf),
    # and below which (inclusive) a non-zero value rounds to zero.
    overflow_bits: int
    underflow_bits: int
    max: float  # the largest finite value
    smallest_normal: float  # below it values lose precision (subnormal) and then flush to 0
    # What an attention-mask fill (-1e9, float32 lowest) becomes: far below any
    # real logit, so softmax still gives exactly 0, yet finite, so a score added
    # to it cannot overflow to -inf and a fully masked row cannot produce NaN.
    mask_fill: float
    smallest_subnormal: float  # the smallest positive value: what --clamp raises tiny values to by default
    epsilon: float  # the gap between 1 and the next value (2**-10, 2**-7): the resolution relative to a value

    @property
    def unit_roundoff(self) -> float:
        """Half of ``epsilon``: the largest relative error of rounding one value to this type."""
        return self.epsilon / 2

    @property
    def type_string(self) -> str:
        """The schema's type string, e.g. ``tensor(float16)``."""
        return f"tensor({self.name})"


LOW_TYPES: Dict[str, LowType] = {
    "fp16": LowType("fp16", "float16", ir.DataType.FLOAT16, np.dtype(np.float16), 0x477FF000, 0x33000000, 65504.0,
                    2.0**-14, -32768.0, 2.0**-24, 2.0**-10),
    "bf16": LowType("bf16", "bfloat16", ir.DataType.BFLOAT16, np.dtype(ml_dtypes.bfloat16), 0x7F7F8000, 0x00008000,
                    float(ml_dtypes.finfo(ml_dtypes.bfloat16).max),
                    float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_normal), -1.0e30, 2.0**-133, 2.0**-7),
}


# The same records looked up from the other side: a LOW ONNX element type to its --dtype key.
KEY_OF_DTYPE: Dict[ir.DataType, str] = {record.dtype: key for key, record in LOW_TYPES.items()}


def low_type(key: str) -> LowType:
    """The record of ``key`` (fp16 or bf16)."""
    return LOW_TYPES[key]


CLAMP_SMALL = ("raise", "flush")  # what --clamp does to tiny non-zero values; the first is the default


@dataclasses.dataclass(frozen=True)
class RangeLimits:
    """The range a constant must fit to be stored LOW, and what ``--clamp`` does outside it.

    Too large: a finite |x| whose float32 bits are ``>= overflow_bits``; too
    small: a non-zero |x| whose bits are ``<= underflow_bits``. Comparing bits
    (float32 bit patterns of non-negative values are ordered like the values)
    lets the scan and the clamp use the very same test, so the counts the
    report gives are exactly the values the clamp changes. By default the
    bits are the LOW type's own: too large means "would round to inf", too
    small means "would round to 0". With ``max_finite`` X: |x| > X; with
    ``min_positive`` Y: 0 < |x| < Y.
    """

    low: LowType
    max_finite: float  # the limit in use, as given (default: the LOW max)
    min_positive: float  # the limit in use, as given (default: the LOW smallest subnormal)
    clamp_to: float  # what --clamp makes of +-too large: the largest float32 <= max_finite
    raise_to: float  # what --clamp raise makes of +-too small: the smallest float32 >= min_positive
    overflow_bits: int
    underflow_bits: int
    max_set: bool  # True when max_finite came from the user (else the LOW max)
    min_set: bool  # True when min_positive came from the user (else the LOW smallest subnormal)
    clamp_small: str = CLAMP_SMALL[0]  # "raise" (to +-min_positive) or "flush" (to +-0)

    def too_large(self) -> str:
        """How a reason says a value is too large, quoting the limit and the option that sets it."""
        if self.max_set:
            return f"exceeds max_finite {self.max_finite:g} (--max-finite)"
        return f"exceeds {self.low.name} (max {self.low.max:g}, it would become inf; --max-finite sets a lower limit)"

    def too_small(self) -> str:
        """How a reason says a non-zero value is too small, quoting the limit and the option that sets it."""
        if self.min_set:
            return f"is below min_positive {self.min_positive:g} (--min-positive)"
        edge = float(np.uint32(self.underflow_bits).view(np.float32))
        return f"underflows to 0 in {self.low.name} (|x| <= {edge:.3g}; --min-positive sets a higher limit)"

    def small_target(self) -> str:
        """What clamping makes of a tiny value: ``+-0`` or ``+-<min_positive>``."""
        return "+-0" if self.clamp_small == "flush" else f"+-{self.min_positive:.3g}"


def range_limits(
    key: str, max_finite: Optional[float] = None, min_positive: Optional[float] = None, clamp_small: Optional[str] = None
) -> RangeLimits:
    """The limits of LOW type ``key``, with ``max_finite``/``min_positive`` in place of its own where given.

    Raises ``UsageError`` (naming the parameter) for limits ``check_limits`` refuses.
    """
    record = low_type(key)
    check_limits(key, max_finite, min_positive, clamp_small)
    overflow_bits, top = record.overflow_bits, np.float32(record.max)
    if max_finite is not None:
        overflow_bits = int(_float32_at_most(max_finite).view(np.uint32)) + 1  # |x| > max_finite
        top = _low_at_most(record, max_finite)  # what clamping writes
    underflow_bits, bottom = record.underflow_bits, np.float32(record.smallest_subnormal)
    if min_positive is not None:
        bottom = _float32_at_least(min_positive)
        underflow_bits = int(bottom.view(np.uint32)) - 1  # 0 < |x| < min_positive
    return RangeLimits(
        record,
        record.max if max_finite is None else float(max_finite),
        record.smallest_subnormal if min_positive is None else float(min_positive),
        float(top), float(bottom), overflow_bits, underflow_bits,
        max_finite is not None, min_positive is not None, clamp_small or CLAMP_SMALL[0],
    )


def check_limits(
    key: str, max_finite: Optional[float], min_positive: Optional[float], clamp_small: Optional[str] = None
) -> None:
    """Refuse limits that cannot work for LOW type ``key`` (``UsageError`` naming the parameter).

    Both must be numbers > 0, ``min_positive < max_finite``; ``max_finite`` at
    most the LOW max (a value above it would still become inf); ``min_positive``
    at least the LOW smallest positive value (a value raised to less would
    still become 0, and values between the two would flush unreported).
    """
    record = low_type(key)
    for label, value in (("max_finite", max_finite), ("min_positive", min_positive)):
        if value is not None and not (_is_number(value) and float(value) > 0):
            raise UsageError(f"{label} must be a number > 0, got {value!r}")
    if max_finite is not None and not max_finite <= record.max:
        raise UsageError(f"max_finite {max_finite:g} is above the {record.name} max {record.max:g}")
    if min_positive is not None and min_positive < record.smallest_subnormal:
        raise UsageError(
            f"min_positive {min_positive:g} is below the {record.name} smallest positive value "
            f"{record.smallest_subnormal:.3g} (values raised to it would still become 0)"
        )
    top = record.max if max_finite is None else max_finite
    if min_positive is not None and not min_positive < top:
        raise UsageError(f"min_positive {min_positive:g} must be below max_finite {top:g}")
    if clamp_small is not None and clamp_small not in CLAMP_SMALL:
        raise UsageError(f"unknown clamp_small {clamp_small!r}: choose {' or '.join(CLAMP_SMALL)}")


def _is_number(value: object) -> bool:
    """A real number (numpy scalars included), not a bool or a string."""
    return isinstance(value, (int, float, np.floating, np.integer)) and not isinstance(value, bool)


def _float32_at_most(value: float) -> np.float32:
    """The largest float32 <= ``value`` (a float32 beyond it is then "> value" exactly)."""
    near = np.float32(value)
    return near if float(near) <= value else np.nextafter(near, np.float32(0))


def _low_at_most(record: "LowType", value: float) -> np.float32:
    """The largest value of the LOW type <= ``value``, as float32: a value clamped to it stays <= ``value``.

    The largest float32 <= ``value`` is not enough: the cast to the LOW type
    rounds to nearest and may land above ``value`` (1000.3 -> 1000.5 in fp16).
    """
    near = _float32_at_most(value).astype(record.numpy)
    if float(near) > value:
        near = np.nextafter(near, near.dtype.type(0))
    return np.float32(near)


def _float32_at_least(value: float) -> np.float32:
    """The smallest float32 >= ``value``."""
    near = np.float32(value)
    return near if float(near) >= value else np.nextafter(near, np.float32(np.inf))


__all__ = ["FLOAT_TYPE_STRINGS", "CLAMP_SMALL", "KEY_OF_DTYPE", "LOW_TYPES", "LowType", "RangeLimits", "check_limits", "low_type", "range_limits"]
