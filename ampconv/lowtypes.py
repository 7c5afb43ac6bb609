"""The LOW types, one record each: every fact about float16 and bfloat16 that ampconv uses.

``--dtype`` names a record by its key (``fp16``, ``bf16``); the planner, the
rewrite, the range guards and the validator read the record instead of keeping
tables of their own.
"""

from __future__ import annotations

import dataclasses
from typing import Dict, Optional

import ml_dtypes
import numpy as np
import onnx_ir as ir


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

    @property
    def type_string(self) -> str:
        """The schema's type string, e.g. ``tensor(float16)``."""
        return f"tensor({self.name})"


LOW_TYPES: Dict[str, LowType] = {
    "fp16": LowType("fp16", "float16", ir.DataType.FLOAT16, np.dtype(np.float16), 0x477FF000, 0x33000000, 65504.0,
                    2.0**-14, -32768.0),
    "bf16": LowType("bf16", "bfloat16", ir.DataType.BFLOAT16, np.dtype(ml_dtypes.bfloat16), 0x7F7F8000, 0x00008000,
                    float(ml_dtypes.finfo(ml_dtypes.bfloat16).max),
                    float(ml_dtypes.finfo(ml_dtypes.bfloat16).smallest_normal), -1.0e30),
}


def low_type(key: str) -> LowType:
    """The record of ``key`` (fp16 or bf16)."""
    return LOW_TYPES[key]


def low_type_of(dtype: ir.DataType) -> Optional[LowType]:
    """The record whose element type is ``dtype``, or None for any other type."""
    return next((t for t in LOW_TYPES.values() if t.dtype == dtype), None)


__all__ = ["LOW_TYPES", "LowType", "low_type", "low_type_of"]
