"""The precisions a decision gives: one enum, compared and serialized as its plain name.

``Precision`` is a ``str`` enum, so ``Precision.LOW == "LOW"``, a report's
JSON holds ``"LOW"``, and a report read back compares equal to the members.
"""

from __future__ import annotations

import enum


class Precision(str, enum.Enum):
    """LOW: float16/bfloat16; HIGH: float32; NONE: no float data to convert; INHERIT: a gray op's policy
    class (it takes its neighbour's precision; never a node's final decision); FALLBACK: the fallback LOW
    type (bfloat16 under ``fallback_dtype="bf16"``) where a guard found the values do not fit float16."""

    LOW = "LOW"
    HIGH = "HIGH"
    FALLBACK = "FALLBACK"
    NONE = "NONE"
    INHERIT = "INHERIT"

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


__all__ = ["Precision"]
