"""Per-output comparison metrics and the pass rule (pure numpy, no onnxruntime).

The pass rule, stated once and used everywhere (metrics, localization, the
"tolerance that would have passed"):

1. An element is *close* when both are finite and
   ``|conv - ref| <= atol + rtol * |ref|`` (numpy's ``isclose`` rule with the
   float32 reference as ``b``), or when both are equal (so equal infinities
   are close), or when both are NaN.
2. An element is a *new non-finite* when the converted value is NaN/Inf and the
   reference value at that place is finite. Those always fail.
3. A tensor passes when every element is close (1); 2 is a subset of "not close".

Error statistics (max/mean abs, RMSE, max rel, cosine) must never look
perfect next to a failure: when some element is NaN/Inf in one model and not
matched in the other (an *unmatched non-finite*), its error is unbounded, so
max abs, max rel, mean abs and RMSE are inf and cosine is NaN. The same
statistics over the elements finite in both models are kept apart
(``finite_max_abs``, ``finite_cosine``, ``finite_size``), so one inf does not
hide how far the rest drifted. Matched non-finites (the same inf, NaN in both)
are not errors and leave the statistics alone.

Statistics the default criteria read (``ampconv.validation.criteria``) are also
computed here: errors relative to the output's own scale (``scaled_errors``)
and label agreement on rows whose reference top-1 is clear
(``label_agreement``). This module measures; ``criteria`` decides.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np


@dataclasses.dataclass(frozen=True)
class Metrics:
    """Drift of one output on one sample (or the worst over samples).

    ``needed_atol`` is the smallest atol that passes at the given rtol and
    ``needed_rtol`` the smallest rtol that passes at the given atol; None when
    no tolerance can pass (a new NaN/Inf, or an error where the reference is 0
    for ``needed_rtol``).

    ``unmatched_nonfinite`` counts elements NaN/Inf in one model and not the
    other (``new_nonfinite`` is the part where the reference is finite); when
    it is not 0, ``max_abs``/``max_rel``/``mean_abs``/``rmse`` are inf and
    ``cosine`` is NaN. ``finite_max_abs`` and ``finite_cosine`` are computed
    over the ``finite_size`` elements finite in both (None when there are
    none).

    Set by ``criteria.judge`` (None/0 from ``compare`` alone): ``scale`` is
    the RMS of the reference's finite values (floored, see
    ``scaled_errors``); ``scaled_p99_error``, ``scaled_max_error`` and
    ``scaled_p999_error`` are the 99th percentile, the max and the 99.9th
    percentile of ``|conv - ref| / max(scale, |ref|)`` (inf with an
    unmatched non-finite); ``label_agreement`` is the share of
    ``clear_rows`` (rows of a class-like output whose reference top-1 leads
    top-2 by a clear margin, see ``label_agreement``) whose argmax agrees,
    None when no row is clear. ``criterion`` is the key
    of the criterion that decided (``nonfinite``, ``label``, ``cosine``,
    ``p99``, ``max``, ``exact``, ``elementwise``), ``decided_by`` says it in
    words with its figure and threshold, and ``severity`` is how far that
    figure went towards its threshold (above 1 fails).
    """

    max_abs: float
    max_rel: float
    mean_abs: float
    rmse: float
    cosine: float
    new_nonfinite: int
    mismatched: int
    size: int
    top1: float | None
    needed_atol: float | None
    needed_rtol: float | None
    passed: bool
    unmatched_nonfinite: int = 0
    finite_size: int = 0
    finite_max_abs: float | None = None
    finite_cosine: float | None = None
    scale: float | None = None
    scaled_p99_error: float | None = None
    scaled_max_error: float | None = None
    scaled_p999_error: float | None = None
    label_agreement: float | None = None
    clear_rows: int = 0
    criterion: str | None = None
    decided_by: str | None = None
    severity: float | None = None
    # Set by ``criteria.judge`` given the floor model's output (``validation.floor``): how many times the
    # unavoidable error this output's error is, the one number ``decided_by`` quotes ("N times the unavoidable
    # error": the RMS error over the floor model's, or for a failing figure of size the larger of that and the
    # figure over the floor's same figure), and the floor model's RMS error.
    floor_ratio: float | None = None
    floor_rmse: float | None = None

    def to_dict(self) -> dict:
        """JSON-able dict; non-finite floats become strings ("inf", "nan")."""
        return {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def close_mask(ref: np.ndarray, conv: np.ndarray, rtol: float, atol: float) -> np.ndarray:
    """Elementwise pass rule (cases 1 and 2 of the module docstring)."""
    ref = np.asarray(ref, dtype=np.float64)
    conv = np.asarray(conv, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        # Only finite pairs are compared by distance: with ref=inf the bound
        # atol + rtol*|ref| is inf and would accept any value.
        within = (np.abs(conv - ref) <= atol + rtol * np.abs(ref)) & np.isfinite(ref) & np.isfinite(conv)
    return within | (conv == ref) | (np.isnan(conv) & np.isnan(ref))


def new_nonfinite_mask(ref: np.ndarray, conv: np.ndarray) -> np.ndarray:
    """Where the converted value is NaN/Inf and the reference is finite (case 2)."""
    return ~np.isfinite(conv) & np.isfinite(ref)


def compare(ref: np.ndarray, conv: np.ndarray, rtol: float, atol: float) -> Metrics:
    """Compare one converted output with its float32 reference.

    Raises ValueError when the shapes differ (the caller turns it into a
    failure message naming the output).
    """
    ref = np.asarray(ref)
    conv = np.asarray(conv)
    if ref.shape != conv.shape:
        raise ValueError(f"shape {conv.shape} differs from the reference shape {ref.shape}")
    top1 = top1_agreement(ref, conv)
    ref = ref.astype(np.float64, copy=False)
    conv = conv.astype(np.float64, copy=False)
    close = close_mask(ref, conv, rtol, atol)
    new_bad = int(np.count_nonzero(new_nonfinite_mask(ref, conv)))
    finite = np.isfinite(ref) & np.isfinite(conv)
    # Non-finite elements that do not match (inf vs finite, inf vs nan) make
    # every tolerance fail; matching ones (same inf, nan/nan) need none.
    unmatched = int(np.count_nonzero(~close & ~finite))
    unfixable = unmatched > 0
    r, c = ref[finite], conv[finite]
    diff = np.abs(c - r)
    absref = np.abs(r)
    max_abs = float(diff.max()) if diff.size else 0.0
    mean_abs = float(diff.mean()) if diff.size else 0.0
    rmse = float(np.sqrt(np.mean(diff * diff))) if diff.size else 0.0
    max_rel = _max_rel(diff, absref)
    cosine = cosine_similarity(r, c)
    finite_max_abs = max_abs if diff.size else None
    finite_cosine = cosine if diff.size else None
    if unfixable:
        # An unmatched NaN/Inf is an unbounded error: the figures say so
        # instead of describing only the finite part (cosine 1, max abs 0).
        max_abs = max_rel = mean_abs = rmse = math.inf
        cosine = math.nan
    return Metrics(
        max_abs=max_abs,
        max_rel=max_rel,
        mean_abs=mean_abs,
        rmse=rmse,
        cosine=cosine,
        new_nonfinite=new_bad,
        mismatched=int(close.size - np.count_nonzero(close)),
        size=int(close.size),
        top1=top1,
        needed_atol=None if unfixable else _needed_atol(diff, absref, rtol),
        needed_rtol=None if unfixable else _needed_rtol(diff, absref, atol),
        passed=bool(close.all()),
        unmatched_nonfinite=unmatched,
        finite_size=int(diff.size),
        finite_max_abs=finite_max_abs,
        finite_cosine=finite_cosine,
    )


def _max_rel(diff: np.ndarray, absref: np.ndarray) -> float:
    # |a-b| / |ref|; an error where the reference is exactly 0 is infinitely relative.
    if not diff.size:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(diff == 0, 0.0, diff / absref)
    return float(rel.max())


def _needed_atol(diff: np.ndarray, absref: np.ndarray, rtol: float) -> float:
    if not diff.size:
        return 0.0
    return float(max(0.0, (diff - rtol * absref).max()))


def _needed_rtol(diff: np.ndarray, absref: np.ndarray, atol: float) -> float | None:
    over = diff > atol
    if not np.any(over):
        return 0.0
    if np.any(absref[over] == 0):
        return None
    return float(((diff[over] - atol) / absref[over]).max())


def cosine_similarity(ref: np.ndarray, conv: np.ndarray) -> float:
    """Cosine of the angle between the flattened tensors (1.0 when both are zero)."""
    ref = np.asarray(ref, dtype=np.float64).ravel()
    conv = np.asarray(conv, dtype=np.float64).ravel()
    nr, nc = float(np.linalg.norm(ref)), float(np.linalg.norm(conv))
    if nr == 0.0 and nc == 0.0:
        return 1.0
    if nr == 0.0 or nc == 0.0:
        return 0.0
    return float(np.clip(np.dot(ref, conv) / (nr * nc), -1.0, 1.0))


def is_float_dtype(dtype) -> bool:
    """numpy floats and ml_dtypes' bfloat16 (whose numpy kind is 'V', not 'f')."""
    dtype = np.dtype(dtype)
    return dtype.kind == "f" or dtype.name == "bfloat16"


def is_class_like(array: np.ndarray) -> bool:
    """Float output of rank >= 2 whose last axis has at least 2 entries (logits-like)."""
    array = np.asarray(array)
    return is_float_dtype(array.dtype) and array.ndim >= 2 and array.shape[-1] >= 2 and array.size > 0


def top1_agreement(ref: np.ndarray, conv: np.ndarray) -> float | None:
    """Fraction of rows whose argmax over the last axis agrees; None if not class-like."""
    ref = np.asarray(ref)
    conv = np.asarray(conv)
    if not (is_class_like(ref) and ref.shape == conv.shape):
        return None
    a = np.argmax(ref.astype(np.float32), axis=-1)
    b = np.argmax(conv.astype(np.float32), axis=-1)
    return float(np.mean(a == b))


def relative_rms_error(ref: np.ndarray, conv: np.ndarray) -> float:
    """RMS of ``conv - ref`` over RMS of ``ref``: one node's or one tensor's error as a single number.

    Elements non-finite in the reference are left out (they say nothing of
    precision); a finite reference value that ``conv`` turns non-finite, or a
    shape mismatch, is inf. No difference is 0 whatever the reference; a
    difference against an all-zero reference is inf (there is no scale to
    call it small against). Localization and the own-error measure of
    calibration both use it, so their columns on the report page agree.
    """
    ref64 = np.asarray(ref, dtype=np.float64)
    conv64 = np.asarray(conv, dtype=np.float64)
    if ref64.shape != conv64.shape:
        return math.inf
    finite = np.isfinite(ref64)
    if np.any(finite & ~np.isfinite(conv64)):
        return math.inf
    diff = conv64[finite] - ref64[finite]
    if not diff.size:
        return 0.0
    rms_diff = float(np.sqrt(np.mean(diff * diff)))
    if rms_diff == 0.0:
        return 0.0
    rms_ref = float(np.sqrt(np.mean(np.square(ref64[finite]))))
    return rms_diff / rms_ref if rms_ref > 0 else math.inf


def scaled_errors(ref: np.ndarray, conv: np.ndarray, floor: float) -> tuple[float, float, float, float]:
    """(scale, p99, max, p99.9) of the scaled error ``|conv - ref| / max(scale, |ref|)``.

    ``scale`` is the RMS of the reference's finite values, at least
    ``floor``. Each element's error is measured against the larger of its
    own magnitude and the output's scale: a large element relative to
    itself (the peak of a softmax is not judged against the tiny RMS of a
    1000-way output), a small one against the output's scale (an element
    where the reference is 0 adds its error like any other: no "max rel
    inf"). ``floor`` judges an all-zero or vanishing reference in absolute
    terms. Statistics run over the elements finite in both; an unmatched
    NaN/Inf makes p99 and max inf (as ``compare`` does for max abs).
    """
    ref = np.asarray(ref, dtype=np.float64)
    conv = np.asarray(conv, dtype=np.float64)
    scale = output_scale(ref, floor)
    finite = np.isfinite(ref) & np.isfinite(conv)
    unmatched = ~finite & ~((conv == ref) | (np.isnan(conv) & np.isnan(ref)))
    if np.any(unmatched):
        return scale, math.inf, math.inf, math.inf
    r, c = ref[finite], conv[finite]
    if not r.size:
        return scale, 0.0, 0.0, 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        # 0/0 (floor 0, reference 0, no error) is no error; x/0 is unbounded.
        scaled = np.where(c == r, 0.0, np.abs(c - r) / np.maximum(scale, np.abs(r)))
    # "higher": an observed error, never a value interpolated between two. Below 100
    # elements p99 is the max, below 1000 p99.9 is (criteria.judge reads them so).
    p99, p999 = np.percentile(scaled, [99, 99.9], method="higher")
    return scale, float(p99), float(scaled.max()), float(p999)


def output_scale(ref: np.ndarray, floor: float) -> float:
    """RMS of the reference's finite values, at least ``floor``: the magnitude errors are measured against."""
    ref = np.asarray(ref, dtype=np.float64)
    finite = ref[np.isfinite(ref)]
    rms = float(np.sqrt(np.mean(finite * finite))) if finite.size else 0.0
    return max(rms, floor)


def label_agreement(ref: np.ndarray, conv: np.ndarray, tolerance: float, scale: float) -> tuple[float | None, int]:
    """(share of clear rows whose argmax agrees, number of clear rows); (None, 0) when none is clear.

    Rows run over the last axis of a class-like output (``is_class_like``). A
    row is *clear* when it is finite and its reference top-1 leads its top-2
    by more than both can move within ``tolerance`` scaled errors (each by
    ``tolerance * max(scale, |value|)``, see ``scaled_errors``): a near-tie
    may flip on rounding alone and says nothing about the conversion, a
    clear lead should not flip.
    """
    ref = np.asarray(ref)
    conv = np.asarray(conv)
    if not (is_class_like(ref) and ref.shape == conv.shape):
        return None, 0
    last = ref.shape[-1]
    r = ref.astype(np.float64).reshape(-1, last)
    c = conv.astype(np.float64).reshape(-1, last)
    finite = np.isfinite(r).all(axis=-1)
    r, c = r[finite], c[finite]
    if not r.size:
        return None, 0
    top2 = -np.partition(-r, 1, axis=-1)[:, :2]  # the two largest, largest first
    slack = tolerance * (np.maximum(scale, np.abs(top2[:, 0])) + np.maximum(scale, np.abs(top2[:, 1])))
    clear = top2[:, 0] - top2[:, 1] > slack
    rows = int(np.count_nonzero(clear))
    if not rows:
        return None, 0
    agree = np.argmax(r[clear], axis=-1) == np.argmax(c[clear], axis=-1)
    return float(np.mean(agree)), rows


def worst(per_sample: list[Metrics]) -> Metrics:
    """Combine per-sample metrics of one output into the worst case over samples.

    Error figures take their worst over samples. The verdict fields
    (``criterion``, ``decided_by``, ``severity``, ``scale``, ``floor_ratio``,
    ``floor_rmse``) come from the worst sample (``worst_sample``); ``label_agreement`` is the lowest of any
    sample and ``clear_rows`` the total judged.
    """
    if len(per_sample) == 1:
        return per_sample[0]

    def _max_or_none(values):
        return None if any(v is None for v in values) else max(values)

    def _known(values):
        return [v for v in values if v is not None]

    tops = [m.top1 for m in per_sample if m.top1 is not None]
    total = sum(m.size for m in per_sample)
    cosines = [m.cosine for m in per_sample]
    finite_abs = _known(m.finite_max_abs for m in per_sample)
    finite_cos = _known(m.finite_cosine for m in per_sample)
    labels = _known(m.label_agreement for m in per_sample)
    decider = worst_sample(per_sample)
    return Metrics(
        max_abs=max(m.max_abs for m in per_sample),
        max_rel=max(m.max_rel for m in per_sample),
        mean_abs=sum(m.mean_abs * m.size for m in per_sample) / total if total else 0.0,
        rmse=math.sqrt(sum(m.rmse**2 * m.size for m in per_sample) / total) if total else 0.0,
        # min() with a NaN depends on the order; a NaN cosine is the worst.
        cosine=math.nan if any(math.isnan(c) for c in cosines) else min(cosines),
        new_nonfinite=sum(m.new_nonfinite for m in per_sample),
        mismatched=sum(m.mismatched for m in per_sample),
        size=total,
        top1=min(tops) if tops else None,
        needed_atol=_max_or_none([m.needed_atol for m in per_sample]),
        needed_rtol=_max_or_none([m.needed_rtol for m in per_sample]),
        passed=all(m.passed for m in per_sample),
        unmatched_nonfinite=sum(m.unmatched_nonfinite for m in per_sample),
        finite_size=sum(m.finite_size for m in per_sample),
        finite_max_abs=max(finite_abs) if finite_abs else None,
        finite_cosine=min(finite_cos) if finite_cos else None,
        scale=decider.scale,
        scaled_p99_error=_max_or_none([m.scaled_p99_error for m in per_sample]),
        scaled_max_error=_max_or_none([m.scaled_max_error for m in per_sample]),
        scaled_p999_error=_max_or_none([m.scaled_p999_error for m in per_sample]),
        label_agreement=min(labels) if labels else None,
        clear_rows=sum(m.clear_rows for m in per_sample),
        criterion=decider.criterion,
        decided_by=decider.decided_by,
        severity=decider.severity,
        # The deciding sample's, as ``decided_by`` quotes it: another sample's larger ratio (of a smaller
        # error over an even smaller floor) would give the row two multiples of one thing.
        floor_ratio=decider.floor_ratio,
        floor_rmse=decider.floor_rmse,
    )


# Order in which failing criteria are named (criteria.judge checks them in this order).
CRITERIA_ORDER = ("nonfinite", "exact", "detections", "label", "cosine", "p99", "max", "beyond_floor", "elementwise",
                  "floor")


def worst_sample(per_sample: list[Metrics]) -> Metrics:
    """The sample whose verdict stands for the output.

    A failing sample beats a passing one; among failing samples the one whose
    deciding criterion comes first in ``CRITERIA_ORDER``, then the highest
    severity; among passing samples the highest severity (least headroom).
    The first sample wins ties.
    """

    def key(m: Metrics):
        rank = CRITERIA_ORDER.index(m.criterion) if m.criterion in CRITERIA_ORDER else len(CRITERIA_ORDER)
        severity = m.severity if m.severity is not None and not math.isnan(m.severity) else 0.0
        return (0, rank, -severity) if not m.passed else (1, 0, -severity)

    return min(per_sample, key=key)
