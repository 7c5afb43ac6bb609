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
        calibration_data: paths of calibration samples (``.npz`` files,
            folders of them, ONNX ``test_data_set_*`` folders), or
            ``("random",)`` for seeded random inputs. Empty: no data guards.
        calibration_samples, calibration_seed: how many random samples, and the seed.
        shapes: ``(name, dims)`` pairs fixing symbolic dimensions of random
            calibration inputs (the forms of ``ValidateOptions.shapes``).
        data_max: the data guard keeps a node float32 when a value exceeds
            this (None: half the LOW type's largest value).
        underflow_fraction: the share of non-zero values below the LOW normal
            range above which a tensor feeding an error amplifier stays float32
            (None: 0.5).
        tune: after the data guards, validate on the calibration samples and
            keep float32 the fewest nodes that make the check pass.
        rtol, atol: the strict elementwise tolerance for ``tune`` (None: the
            validator's default criteria for the LOW type).
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
    calibration_data: Tuple[str, ...] = ()
    calibration_samples: int = 8
    calibration_seed: int = 0
    shapes: Tuple[Tuple[str, Tuple[int, ...]], ...] = ()
    data_max: Optional[float] = None
    underflow_fraction: Optional[float] = None
    tune: bool = False
    rtol: Optional[float] = None
    atol: Optional[float] = None
    progress: Optional[Callable[[int, int], None]] = dataclasses.field(
        default=None, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        # Accept what people type: one string where a list goes, "o2", "float16".
        for name in ("mixlists", "keep_fp32", "force_low", "block_ops", "calibration_data"):
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
        self._check_data_options()

    def _check_data_options(self) -> None:
        if isinstance(self.shapes, dict):
            object.__setattr__(self, "shapes", tuple((k, tuple(v)) for k, v in self.shapes.items()))
        if self.tune and not self.calibration_data:
            raise UsageError("tune needs calibration data (calibration_data / --calibration-data)")
        if not self.tune and (self.rtol is not None or self.atol is not None):
            raise UsageError("rtol/atol set the tolerance of tune; without tune they do nothing")
        if "random" in self.calibration_data and len(self.calibration_data) > 1:
            raise UsageError("calibration data 'random' cannot be mixed with sample paths")
        if self.calibration_samples < 1:
            raise UsageError(f"calibration_samples must be at least 1, got {self.calibration_samples}")
        if self.data_max is not None and not self.data_max > 0:
            raise UsageError(f"data_max must be a number > 0, got {self.data_max}")
        if self.underflow_fraction is not None and not 0 < self.underflow_fraction <= 1:
            raise UsageError(f"underflow_fraction must be in (0, 1], got {self.underflow_fraction}")
        for label, value in (("rtol", self.rtol), ("atol", self.atol)):
            if value is not None and not value >= 0:
                raise UsageError(f"{label} must be a number >= 0, got {value}")


def _check_regex(pattern: str) -> None:
    import re

    try:
        re.compile(pattern)
    except re.error as exc:
        raise UsageError(f"bad node-name regex {pattern!r}: {exc}") from None
