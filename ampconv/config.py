"""Conversion options as one immutable value (no settings as mutable class attributes)."""

from __future__ import annotations

import dataclasses
import os
from typing import Callable, Optional, Tuple, Union

from ampconv.errors import UsageError

LEVELS = ("O0", "O1", "O2", "O3", "auto")
DTYPES = ("fp16", "bf16")
TARGETS = ("cuda", "cpu")
# Other spellings of the dtype keys: the ONNX names of the types, any case.
DTYPE_ALIASES = {"fp16": "fp16", "bf16": "bf16", "float16": "fp16", "bfloat16": "bf16"}
_LEVEL_NAMES = {level.lower(): level for level in LEVELS}


@dataclasses.dataclass(frozen=True)
class Config:
    """Everything that decides a conversion.

    Attributes:
        level: O0 (no change), O1 (white list LOW), O2 (all LOW but black),
            O3 (all LOW), or ``auto`` (by ``target``).
        dtype: ``fp16`` or ``bf16``: the LOW type.
        target: ``cuda`` or ``cpu``; only ``auto`` reads it. None: from the
            installed onnxruntime.
        preset: name of the built-in op lists (``default`` or ``mindspore``).
        mixlists: policy files (Ascend ``modify_mixlist`` JSON), applied in order.
            A single path may be given as a string; so may one pattern for
            ``keep_fp32``/``force_low`` and one name for ``keep_io_types``.
        keep_io_types: True keeps every graph input/output float32, False
            converts them, a tuple names the ones to keep float32.
        keep_fp32: node-name regexes forced HIGH.
        force_low: node-name regexes forced LOW (schema constraints still win).
        block_ops: op types forced HIGH (``OpType`` or ``domain::OpType``); an
            entry may be a comma list.
        clamp: clamp out-of-range constants instead of pinning their consumers HIGH.
        check_runtime: load the result in onnxruntime (when installed) before writing.
        overwrite: allow replacing an existing output file (never the input).
        max_workers: threads used to convert/write external data.
        progress: optional callback(bytes_done, bytes_total) while writing weights.
    """

    level: str = "O2"
    dtype: str = "fp16"
    target: Optional[str] = None
    preset: str = "default"
    mixlists: Tuple[str, ...] = ()
    keep_io_types: Union[bool, Tuple[str, ...]] = True
    keep_fp32: Tuple[str, ...] = ()
    force_low: Tuple[str, ...] = ()
    block_ops: Tuple[str, ...] = ()
    clamp: bool = False
    check_runtime: bool = True
    overwrite: bool = False
    max_workers: int = 2
    progress: Optional[Callable[[int, int], None]] = dataclasses.field(
        default=None, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        # Accept what people type: one string where a list goes, "o2", "float16".
        for name in ("mixlists", "keep_fp32", "force_low", "block_ops"):
            value = getattr(self, name)
            if isinstance(value, (str, os.PathLike)):
                value = (value,)
            object.__setattr__(self, name, tuple(os.fspath(v) if isinstance(v, os.PathLike) else v for v in value))
        if isinstance(self.keep_io_types, str):
            object.__setattr__(self, "keep_io_types", (self.keep_io_types,))
        level = _LEVEL_NAMES.get(str(self.level).lower(), self.level)
        object.__setattr__(self, "level", level)
        object.__setattr__(self, "dtype", DTYPE_ALIASES.get(str(self.dtype).lower(), self.dtype))
        if self.level not in LEVELS:
            raise UsageError(f"unknown level {self.level!r}: choose one of {', '.join(LEVELS)}")
        if self.dtype not in DTYPES:
            raise UsageError(f"unknown dtype {self.dtype!r}: choose fp16 or bf16")
        if self.target is not None and self.target not in TARGETS:
            raise UsageError(f"unknown target {self.target!r}: choose cuda or cpu")
        for pattern in self.keep_fp32 + self.force_low:
            _check_regex(pattern)


def _check_regex(pattern: str) -> None:
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"bad node-name regex {pattern!r}: {exc}") from None
