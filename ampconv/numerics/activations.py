"""Streaming statistics of float32 activations against one LOW type.

Each accumulator is updated once per calibration sample and keeps a fixed
number of figures, so memory does not grow with the number of samples.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Dict, List, Optional

import numpy as np

from ampconv.core.lowtypes import LowType

# Reductions whose running sum the accumulation statistic follows, and the matrix products it bounds.
REDUCTIONS = frozenset({"ReduceMean", "ReduceSum", "ReduceL1", "ReduceL2", "ReduceSumSquare"})
PRODUCTS = frozenset({"MatMul", "Gemm"})
# The default overflow guard is this share of the LOW type's largest value: a margin for inputs a little
# beyond the calibration set (``ampconv.calibration.margin`` says what --tune may do across it).
MARGIN = 0.5


@dataclasses.dataclass
class TensorStats:
    """What the float32 values of one tensor looked like over the calibration samples.

    ``overflow`` counts values beyond the LOW type's largest finite value (they
    become inf); ``below_normal`` counts non-zero values below its smallest
    normal (they lose precision and, further down, flush to 0).
    """

    name: str
    samples: int = 0
    elements: int = 0
    nonzero: int = 0
    nonfinite: int = 0  # already NaN/inf in float32: not the LOW type's doing
    max_abs: float = 0.0
    min_nonzero_abs: float = math.inf
    overflow: int = 0
    below_normal: int = 0
    max_sample: int = -1  # the sample where max_abs was seen
    # The largest signed value: how far an exponent reaches (exp overflows at ln(max), whatever the negatives do).
    max_value: float = -math.inf

    def update(self, array: np.ndarray, low: LowType, sample: int) -> None:
        """Fold one sample's values of this tensor in.

        A handful of passes over the values (the synthetic run folds every
        activation of a model): non-finite values are looked for only when the
        largest magnitude is not finite, overflow only when it passes the LOW
        maximum, and the smallest non-zero magnitude is read after the zeros
        of this private copy are set to infinity.
        """
        signed = np.asarray(array, dtype=np.float32).ravel()
        values = np.abs(signed)  # a copy of our own: edited below
        self.samples += 1
        self.elements += values.size
        if not values.size:
            return
        peak = float(values.max())
        if not math.isfinite(peak):  # NaN or inf, already in float32: not the LOW type's doing
            finite = np.isfinite(values)
            self.nonfinite += int(values.size - np.count_nonzero(finite))
            values, signed = values[finite], signed[finite]
            if not values.size:
                return
            peak = float(values.max())
        self.max_value = max(self.max_value, float(signed.max()))
        if peak > self.max_abs:
            self.max_abs, self.max_sample = peak, sample
        if peak > low.max:
            self.overflow += int(np.count_nonzero(values > low.max))
        nonzero = int(np.count_nonzero(values))
        self.nonzero += nonzero
        if not nonzero:
            return
        self.below_normal += int(np.count_nonzero(values < low.smallest_normal)) - (values.size - nonzero)
        if nonzero < values.size:
            np.putmask(values, values == 0, np.inf)
        self.min_nonzero_abs = min(self.min_nonzero_abs, float(values.min()))

    @property
    def below_normal_fraction(self) -> float:
        """Share of the non-zero values below the LOW type's smallest normal."""
        return self.below_normal / self.nonzero if self.nonzero else 0.0

    def to_dict(self) -> Dict[str, object]:
        """JSON-ready figures (an unseen minimum is None)."""
        data = dataclasses.asdict(self)
        data["min_nonzero_abs"] = None if math.isinf(self.min_nonzero_abs) else self.min_nonzero_abs
        data["max_value"] = None if math.isinf(self.max_value) else self.max_value
        data["below_normal_fraction"] = round(self.below_normal_fraction, 6)
        return data


@dataclasses.dataclass
class Accumulation:
    """The largest sum a reduction or matrix product builds, and over how many terms.

    Reductions: the running sum behind the output (``max |mean| * terms`` for
    ReduceMean, the sum of squares behind ReduceL2). MatMul/Gemm: the largest
    ``sum_k |a_ik| |b_kj|``, a bound on every partial sum whatever the order of
    accumulation (computed when the product is small enough to repeat in numpy).
    """

    node: str
    op_type: str
    terms: int = 0
    max_sum: float = 0.0

    def update(self, max_sum: float, terms: int) -> None:
        """Fold one sample's largest sum in."""
        self.terms = max(self.terms, terms)
        if math.isfinite(max_sum):
            self.max_sum = max(self.max_sum, max_sum)


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """When the data guards keep a node float32.

    ``max_abs``: values above it overflow (default: half the LOW type's
    largest value, a margin for inputs beyond the calibration set).
    ``below_normal``: the share of non-zero values below the LOW smallest
    normal above which a tensor feeding an error amplifier stays float32.
    """

    max_abs: float
    below_normal: float

    @classmethod
    def default(cls, low: LowType, max_abs: Optional[float] = None, below_normal: Optional[float] = None):
        """The defaults for ``low``, each overridable."""
        return cls(
            max_abs=low.max * MARGIN if max_abs is None else float(max_abs),
            below_normal=0.5 if below_normal is None else float(below_normal),
        )


@dataclasses.dataclass
class Calibration:
    """The statistics of one calibration run, keyed by tensor name and node name."""

    low: LowType
    samples: int
    random: bool
    sources: tuple
    tensors: Dict[str, TensorStats]
    accumulations: Dict[str, Accumulation]
    seconds: float = 0.0
    notes: tuple = ()
    # The default synthetic run (``calibration.synthetic``), not data the user gave: only overflow is read from it.
    synthetic: bool = False
    # How far each float input may reach, where the user said so (``--input-range``: the largest |bound|), beyond
    # the samples' own magnitude: the envelope rule extrapolates the run's figures there (``plan.envelope``).
    reach: Dict[str, float] = dataclasses.field(default_factory=dict)

    def tensor(self, name: Optional[str]) -> Optional[TensorStats]:
        """The statistics of tensor ``name``, None when it was not observed."""
        return self.tensors.get(name) if name else None

    def overflowing(self) -> List[str]:
        """Names of the tensors with values beyond the LOW maximum, sorted."""
        return sorted(n for n, s in self.tensors.items() if s.overflow)

    def near_max(self) -> Dict[str, float]:
        """Tensor -> max |x| of the tensors in range but over the default guard: what only the margin keeps float32."""
        return {
            n: s.max_abs for n, s in sorted(self.tensors.items())
            if not s.overflow and s.max_abs > self.low.max * MARGIN
        }

    def summary(self) -> Dict[str, object]:
        """The report's ``calibration`` section (the per-tensor figures behind decisions are in the reasons)."""
        return {
            "samples": self.samples,
            "random": self.random,
            "synthetic": self.synthetic,
            "sources": list(self.sources[:20]) + ([f"... {len(self.sources) - 20} more"] if len(self.sources) > 20 else []),
            "tensors": len(self.tensors),
            "overflowing": self.overflowing(),
            "near_max": self.near_max(),
            "accumulations": {
                name: {"op_type": a.op_type, "terms": a.terms, "max_sum": a.max_sum}
                for name, a in self.accumulations.items()
            },
            "seconds": round(self.seconds, 3),
            "notes": list(self.notes),
        }


def fmt(value: float) -> str:
    """A figure as people read it in a reason: 4.5e+09, 6.1e-05, 0.25."""
    return f"{value:.3g}"
