"""Detection sets judged as sets: matched by label, IoU and score, never by position.

A detector that ends in NonMaxSuppression or TopK (``natures.detection_natures``)
returns a set: how many detections and in which order depend on the data, so a
score that moves by one unit in the last place can add a detection, drop one
or swap two. Compared by position, boxes read as class scores and labels
"differ" where the same detections come in another order (issue 30). Here:

1. The members of one selection (boxes, scores, labels; or the columns of one
   packed output) give each image's detections, in the reference and in the
   converted model.
2. A detection is *clear* when its score lies above the selection's score
   threshold (NMS's constant when the graph holds one, else the lowest
   reference score: a TopK's cut) by more than rounding may move it: twice
   the largest score change the floor model shows (``validation.floor``), and
   at least ``CLEAR_ULPS`` units in the last place of the LOW type at the
   cut. One nearer the cut may appear or vanish on rounding alone.
3. Reference detections, best score first, take the unmatched converted
   detection with the same label and the highest IoU, if that IoU is at least
   ``MATCH_IOU`` (the task's rule: a detection at IoU 0.5 with the same label
   is the same detection).
4. The set passes when at most ``MAX_UNMATCHED`` of the clear reference
   detections find no match and as few clear converted ones are extra, as
   few matched boxes moved beyond the criteria's max error in ``1 - IoU``
   (another anchor's box NMS kept at a near tie of scores: ``_verdict``), and
   the 99th percentile of the score's change (over the scores' range) stays
   within that max error.
   Like the other figures of size, a failure within ``FLOOR_FACTOR`` times what
   the floor model's detections show passes (``criteria``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ampconv.core.lowtypes import LOW_TYPES
from ampconv.validation import criteria as rules
from ampconv.numerics.metrics import Metrics

# A converted detection is the reference's when its label is the same and its box overlaps at IoU >= this.
MATCH_IOU = 0.5
# The share of clear detections that may go unmatched (missing, or extra in the converted model).
MAX_UNMATCHED = 0.05
# A clear detection's score passes the cut by at least this many units in the last place of the LOW type.
CLEAR_ULPS = 8


@dataclasses.dataclass(frozen=True)
class Detections:
    """One image's detections: boxes [N, 4] (x1, y1, x2, y2), scores [N] (or None), labels [N] (or None)."""

    boxes: np.ndarray
    scores: np.ndarray | None
    labels: np.ndarray | None

    def __len__(self) -> int:
        return int(self.boxes.shape[0])


@dataclasses.dataclass(frozen=True)
class Matching:
    """What matching one selection's detections found, over every image."""

    clear: int  # clear reference detections
    missed: int  # of them, unmatched
    extra: int  # clear converted detections left unmatched
    one_minus_iou: np.ndarray  # of the matched clear detections
    score_change: np.ndarray  # of the matched clear detections, over the scores' range
    box_change: np.ndarray  # absolute coordinate changes of the matched detections
    nonfinite: int  # converted values NaN/Inf where the reference's are finite
    swapped: int = 0  # clear reference detections found with another label at a near tie of scores

    @property
    def unmatched(self) -> int:
        return self.missed + self.extra

    def p99(self, values: np.ndarray) -> float:
        return float(np.percentile(values, 99, method="higher")) if values.size else 0.0


def images(members: dict, outputs: dict) -> list[Detections]:
    """The detections of every image from one selection's outputs (``members``: output name -> its Nature).

    Raises ValueError when the members disagree on the number of detections.
    """
    arrays = {nature.role: (np.asarray(outputs[name]), nature) for name, nature in members.items() if name in outputs}
    if "packed" in arrays:
        array, nature = arrays["packed"]
        rows = array.reshape(-1, array.shape[-2], array.shape[-1]) if array.ndim >= 2 else array.reshape(1, -1, 1)
        cols = list(nature.columns)
        return [Detections(r[:, cols[:4]].astype(np.float64), r[:, cols[4]].astype(np.float64),
                           np.rint(r[:, cols[5]]).astype(np.int64)) for r in rows]
    if "boxes" not in arrays:
        raise ValueError("a detection set needs its boxes")
    boxes = arrays["boxes"][0].astype(np.float64)
    per_image = boxes.reshape(-1, boxes.shape[-2] if boxes.ndim >= 2 else 0, 4) if boxes.size else boxes.reshape(1, 0, 4)
    count, found = per_image.shape[0], []
    scores = _split(arrays.get("scores"), count, per_image.shape[1])
    labels = _split(arrays.get("labels"), count, per_image.shape[1])
    for index in range(count):
        found.append(Detections(per_image[index], None if scores is None else scores[index].astype(np.float64),
                                None if labels is None else labels[index].astype(np.int64)))
    return found


def _split(entry, images_: int, per_image: int):
    """A member of one value per detection, split per image; ValueError when its count is not the boxes'."""
    if entry is None:
        return None
    array = np.asarray(entry[0])
    if array.size != images_ * per_image:
        raise ValueError(f"{entry[1].role}: {array.size} value(s) for {images_ * per_image} box(es)")
    return array.reshape(images_, per_image)


def xyxy(boxes: np.ndarray, corners: bool) -> np.ndarray:
    """Boxes as corners: as given when ``corners``, else from (cx, cy, w, h)."""
    if corners:
        return boxes
    cx, cy, w, h = boxes.T
    return np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)


def iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box in ``a`` [N, 4] with every box in ``b`` [M, 4] (corners): [N, M]. NaN boxes give 0."""
    x1 = np.maximum(a[:, None, 0], b[None, :, 0])
    y1 = np.maximum(a[:, None, 1], b[None, :, 1])
    x2 = np.minimum(a[:, None, 2], b[None, :, 2])
    y2 = np.minimum(a[:, None, 3], b[None, :, 3])
    with np.errstate(invalid="ignore", over="ignore"):
        inter = np.clip(x2 - x1, 0, None) * np.clip(y2 - y1, 0, None)
        area_a = np.abs((a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1]))
        area_b = np.abs((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))
        union = area_a[:, None] + area_b[None, :] - inter
        result = np.where(union > 0, inter / np.where(union > 0, union, 1), (union == 0) * 1.0)
    return np.nan_to_num(result, nan=0.0)


def match(ref: list[Detections], conv: list[Detections], threshold: float | None, margin: float) -> Matching:
    """Match each image's detections (steps 2 and 3 of the module docstring) and count what matched.

    A clear reference detection left unmatched that a converted one covers
    (IoU >= ``MATCH_IOU``) with another label and a score within ``margin``
    is *swapped*: its two best classes scored alike, within what rounding
    moves (an ArgMax at a near tie), so it is neither missed nor extra.
    """
    corners = all(_corners(d.boxes) for d in ref)
    clear = missed = extra = nonfinite = swapped = 0
    ious, scores, coords = [], [], []
    for r, c in zip(ref, conv):
        cut = _cut(r, threshold) + margin
        clear_ref = np.ones(len(r), bool) if r.scores is None else r.scores > cut
        clear_conv = np.ones(len(c), bool) if c.scores is None else c.scores > cut
        nonfinite += int(np.count_nonzero(~np.isfinite(c.boxes))) - int(np.count_nonzero(~np.isfinite(r.boxes)))
        pairs = _greedy(r, c, corners)
        ties = _near_ties(r, c, corners, pairs, margin)
        matched_conv = {j for _, j in pairs} | {j for _, j in ties}
        matched_ref = {i: j for i, j in pairs}
        tied_ref = {i for i, _ in ties}
        clear += int(np.count_nonzero(clear_ref))
        swapped += sum(1 for i in tied_ref if clear_ref[i])
        missed += sum(1 for i in np.flatnonzero(clear_ref) if i not in matched_ref and i not in tied_ref)
        extra += sum(1 for j in np.flatnonzero(clear_conv) if j not in matched_conv)
        for i, j in pairs:
            if not clear_ref[i]:
                continue
            ious.append(1.0 - float(iou(xyxy(r.boxes[i:i + 1], corners), xyxy(c.boxes[j:j + 1], corners))[0, 0]))
            coords.extend(np.abs(c.boxes[j] - r.boxes[i]).tolist())
            if r.scores is not None:
                scores.append(abs(float(c.scores[j]) - float(r.scores[i])))
    if len(conv) != len(ref):
        extra += sum(len(c) for c in conv[len(ref):])
    return Matching(clear, missed, extra, np.asarray(ious), np.asarray(scores), np.asarray(coords), max(nonfinite, 0),
                    swapped)


def _near_ties(r: Detections, c: Detections, corners: bool, pairs, margin: float) -> list[tuple[int, int]]:
    """Unmatched reference detections covered by an unmatched converted one of another label, scores within
    ``margin``: pairs (reference index, converted index)."""
    if r.labels is None or r.scores is None or c.scores is None or not len(r) or not len(c):
        return []
    used_ref, used_conv = {i for i, _ in pairs}, {j for _, j in pairs}
    overlaps = iou(xyxy(r.boxes, corners), xyxy(c.boxes, corners))
    ties = []
    for i in np.argsort(-r.scores, kind="stable"):
        if i in used_ref:
            continue
        close = np.abs(c.scores - r.scores[i]) <= margin
        row = np.where(close & (overlaps[i] >= MATCH_IOU), overlaps[i], -1.0)
        row[list(used_conv)] = -1.0
        j = int(np.argmax(row))
        if row[j] >= MATCH_IOU:
            used_conv.add(j)
            ties.append((int(i), j))
    return ties


def _corners(boxes: np.ndarray) -> bool:
    finite = boxes[np.isfinite(boxes).all(axis=1)]
    return bool(np.all(finite[:, 2] >= finite[:, 0]) and np.all(finite[:, 3] >= finite[:, 1]))


def _cut(dets: Detections, threshold: float | None) -> float:
    """The score a detection must pass to be kept: NMS's threshold, else the lowest reference score."""
    if dets.scores is None or not len(dets):
        return -math.inf
    if threshold is not None:
        return threshold
    return float(np.min(dets.scores))


def _greedy(r: Detections, c: Detections, corners: bool) -> list[tuple[int, int]]:
    """Pairs (reference index, converted index): best reference score first, same label, highest IoU >= MATCH_IOU."""
    if not len(r) or not len(c):
        return []
    overlaps = iou(xyxy(r.boxes, corners), xyxy(c.boxes, corners))
    if r.labels is not None and c.labels is not None:
        overlaps = np.where(r.labels[:, None] == c.labels[None, :], overlaps, 0.0)
    order = np.argsort(-r.scores, kind="stable") if r.scores is not None else np.arange(len(r))
    taken, pairs = np.zeros(len(c), bool), []
    for i in order:
        row = np.where(taken, -1.0, overlaps[i])
        j = int(np.argmax(row))
        if row[j] >= MATCH_IOU:
            taken[j] = True
            pairs.append((int(i), j))
    return pairs


def _margin(ref: list[Detections], floor: list[Detections] | None, threshold: float | None, dtype,
            limit: float | None = None) -> float:
    """How far above the cut a clear detection's score lies: twice the floor's largest score change, at least
    ``CLEAR_ULPS`` units in the last place of the LOW type at the cut.

    A floor detection whose box moved beyond ``limit`` (1 - IoU) is another
    anchor's box NMS kept (``_verdict``): its score is that anchor's, not the
    reference's moved by rounding, and is left out. On SSDLite one such pair
    (scores 0.98 and 0.56) made the margin 0.84 and no detection clear: the set
    passed as a weak check on no evidence.
    """
    record = LOW_TYPES.get(dtype or "fp16") or LOW_TYPES["fp16"]
    cuts = [abs(_cut(d, threshold)) for d in ref if d.scores is not None and len(d)]
    margin = CLEAR_ULPS * record.epsilon * max(cuts + [0.0])
    if floor is not None:
        found = match(ref, floor, threshold, 0.0)
        moved = found.score_change
        if limit and moved.size == found.one_minus_iou.size:
            moved = moved[found.one_minus_iou <= limit]
        margin = max(margin, 2.0 * float(moved.max()) if moved.size else 0.0)
    return margin


def score_width(ref: list[Detections]) -> float:
    """The range scores live on: 1 for probabilities, else the RMS of the reference's scores (at least 1e-5)."""
    values = np.concatenate([d.scores for d in ref if d.scores is not None and len(d)] or [np.zeros(0)])
    values = values[np.isfinite(values)]
    if not values.size or (values.min() >= 0 and values.max() <= 1):
        return 1.0
    return max(float(np.sqrt(np.mean(values**2))), 1e-5)


def judge_detections(members: dict, ref_out: dict, conv_out: dict, criteria, floor_out: dict | None = None) -> dict:
    """Judge one selection's outputs as a set of detections; output name -> its ``Metrics`` (one verdict for all).

    ``members``: output name -> its ``Nature`` (``natures.detection_natures``).
    The max error the boxes and scores are held to is the box member's
    (``--limit boxes:max=0.2`` sets it; ``criteria.Criteria.for_output``).
    Raises ValueError when the members disagree on the number of detections.
    """
    boxes = next((name for name, nature in members.items() if nature.role in ("boxes", "packed")), None)
    criteria = criteria.for_output(boxes)
    ref, conv = images(members, ref_out), images(members, conv_out)
    threshold = next(iter(members.values())).score_threshold
    width = score_width(ref)
    floor = images(members, floor_out) if floor_out is not None else None
    margin = _margin(ref, floor, threshold, criteria.dtype, criteria.max_error)
    found = match(ref, conv, threshold, margin)
    check = _verdict(found, criteria, width)
    if floor is not None and not check.passed and check.key != "nonfinite":
        check = _against_floor(check, found, match(ref, floor, threshold, margin), criteria, width)
    return {name: _metrics(name, nature, found, _member_check(check, name, ref_out, conv_out, members), ref_out,
                           width)
            for name, nature in members.items()}


def _member_check(check: _Check, name: str, ref_out: dict, conv_out: dict, members: dict) -> _Check:
    """The set's failing verdict as one member's row says it: a member whose own values equal the reference's
    says so, so the row never reads as if its values differed (the set fails, not they)."""
    if check.passed or not _identical(ref_out.get(name), conv_out.get(name)):
        return check
    others = ", ".join(n for n in members if n != name)
    return dataclasses.replace(check, words=f"{name} identical to the reference's; its detection set (with {others}) "
                                            f"fails: {check.words}")


def _identical(ref, conv) -> bool:
    """Same shape and the same values (NaN where NaN)."""
    if ref is None or conv is None:
        return False
    ref, conv = np.asarray(ref), np.asarray(conv)
    if ref.shape != conv.shape:
        return False
    nan = ref.dtype.kind == "f" and conv.dtype.kind == "f"
    return bool(np.array_equal(ref, conv, equal_nan=nan))


@dataclasses.dataclass(frozen=True)
class _Check:
    key: str
    passed: bool
    severity: float
    words: str
    floor_ratio: float | None = None


def _figures(found: Matching, width: float, limit: float | None) -> dict:
    """The figures a set is judged by: the shares of clear detections unmatched, swapped at a label's near
    tie and moved beyond ``limit`` (1 - IoU; None: boxes not judged), and the p99 of the score change."""
    clear = max(found.clear, 1)
    moved = int(np.count_nonzero(found.one_minus_iou > limit)) if limit else 0
    return {
        "unmatched": found.unmatched / clear,
        "swapped": found.swapped / clear,
        "moved": moved / clear,
        "score": found.p99(found.score_change) / width,
    }


def _verdict(found: Matching, criteria, width: float) -> _Check:
    """The set's verdict: a new NaN/Inf, then unmatched detections, then how far matched ones moved.

    A matched box counts as *moved* when its 1 - IoU with the reference's is
    over the max-error threshold; as many clear detections may move so as may
    go unmatched (``MAX_UNMATCHED``). Where two candidate boxes of one object
    score within rounding of each other, rounding alone can make NMS keep the
    other: the kept box is the same detection by the task's rule (same label,
    IoU >= 0.5), moved by up to 1 - NMS's IoU threshold. On SSDLite-320 the
    conversion shows 3 such boxes in about 7,000 matched detections and the
    floor model 9, while every other box's p99 1 - IoU stays 0.015 to 0.059
    (docs/validation.md, "Detection sets"; scripts/ssdlite_boxes.py): a p99
    over ~150 detections reads two of them as 0.2 to 0.5 whatever the
    conversion.
    """
    summary = (f"detections: {found.clear - found.missed} of {found.clear} clear reference detection(s) matched "
               f"(same label, IoU >= {MATCH_IOU:g}), {found.extra} extra")
    if found.swapped:
        summary += f", {found.swapped} with another label at a near tie of class scores"
    if not found.clear:
        summary += " (no score lies clear of the cut by more than rounding moves it: a weak check)"
    if found.nonfinite:
        return _Check("nonfinite", False, math.inf, f"{summary}; {found.nonfinite} new NaN/Inf box value(s)")
    limit = criteria.max_error
    figures = _figures(found, width, limit)
    allowed = max(MAX_UNMATCHED, 0.0)

    def share(key: str, count: float) -> float:
        return figures[key] / allowed if allowed else (0.0 if not count else math.inf)

    severities = {
        "unmatched": share("unmatched", found.unmatched),
        "swapped": share("swapped", found.swapped),
        "moved": share("moved", figures["moved"]),
        "score": figures["score"] / limit if limit else 0.0,
    }
    key = max(severities, key=severities.get)
    passed = all(v <= 1.0 for v in severities.values())
    return _Check("detections", passed, severities[key], summary + _matched_words(found, figures, limit, allowed))


def _matched_words(found: Matching, figures: dict, limit: float | None, allowed: float) -> str:
    """How far the matched detections moved, in words: the boxes beyond the limit, the rest's p99 1 - IoU,
    the p99 score change, and the limits."""
    if not limit:
        return f"; matched: p99 1 - IoU {found.p99(found.one_minus_iou):.2g} (boxes and scores not judged)"
    moved = int(np.count_nonzero(found.one_minus_iou > limit))
    rest = found.one_minus_iou[found.one_minus_iou <= limit]
    beyond = f"{moved} box(es) moved beyond 1 - IoU {limit:g}, " if moved else ""
    return (f"; matched: {beyond}p99 1 - IoU {found.p99(rest):.2g}{' of the rest' if moved else ''}, "
            f"p99 score change {figures['score']:.2g} (limits {allowed:g} unmatched, {allowed:g} moved beyond "
            f"1 - IoU {limit:g}, {limit:g} score change)")


def _against_floor(check: _Check, found: Matching, floor: Matching, criteria, width: float) -> _Check:
    """A failing set passes when each figure is within ``FLOOR_FACTOR`` times the floor model's same figure."""
    mine, base = _figures(found, width, criteria.max_error), _figures(floor, width, criteria.max_error)
    ratios = []
    for key in mine:
        if mine[key] <= 0:
            ratios.append(0.0)
        else:
            ratios.append(mine[key] / base[key] if base[key] > 0 else math.inf)
    ratio = max(ratios)
    what = f"the unavoidable error ({rules.FLOOR_WORDS.format(low=criteria.dtype or 'the LOW type')})"
    if ratio <= rules.FLOOR_FACTOR:
        words = (f"{check.words}, but that is {rules._times(ratio)} {what} (the floor model's detections: "
                 f"{floor.unmatched} unmatched), within {rules.FLOOR_FACTOR:g}x")
        return _Check("floor", True, ratio / rules.FLOOR_FACTOR, words, ratio)
    return dataclasses.replace(check, words=f"{check.words}; {rules._times(ratio)} {what}", floor_ratio=ratio)


def _metrics(name: str, nature, found: Matching, check: _Check, ref_out: dict, width: float) -> Metrics:
    """The ``Metrics`` row of one member: the set's verdict, with figures of the matched detections."""
    changes = {"boxes": found.box_change, "packed": found.box_change, "scores": found.score_change * 1.0}.get(
        nature.role, np.zeros(0))
    max_abs = float(changes.max()) if changes.size else 0.0
    mean_abs = float(changes.mean()) if changes.size else 0.0
    rmse = float(np.sqrt(np.mean(changes**2))) if changes.size else 0.0
    return Metrics(
        max_abs=max_abs, max_rel=math.nan, mean_abs=mean_abs, rmse=rmse, cosine=math.nan,
        new_nonfinite=found.nonfinite, mismatched=found.unmatched, size=int(np.asarray(ref_out[name]).size),
        top1=None, needed_atol=None, needed_rtol=None, passed=check.passed,
        finite_size=int(np.asarray(ref_out[name]).size), criterion=check.key, decided_by=check.words,
        severity=check.severity, floor_ratio=check.floor_ratio, scale=width,
    )


__all__ = ["Detections", "MATCH_IOU", "MAX_UNMATCHED", "Matching", "judge_detections", "match"]
