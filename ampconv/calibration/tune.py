"""Accuracy-driven exclusion (``--tune``): the fewest nodes to keep float32 so validation passes.

The search works on candidates: a candidate is the conversion with a set of
extra nodes pinned float32 (rule ``data-tune``). Evaluating one means building
it, emulating its LOW rounding in float32 (``ampconv.numerics.emulate``) and
comparing every output with the float32 reference on every calibration sample
under the validator's criteria. An evaluation is the expensive unit; the
search spends at most ``2 * ceil(log2 N) + 4`` of them, N being the LOW nodes
left after the range guards:

1. Evaluate the conversion as planned (margin nodes LOW). If it passes, stop.
2. Rank the LOW nodes, most harmful first, by their own error (each node
   computed in LOW from exact inputs, ``ownerror``; one float32 run) weighted
   by a structural estimate of how much the graph after it amplifies error.
3. Exponential then binary search for the shortest prefix of that ranking
   whose pinning passes: ``k`` pinned nodes cost about ``2 * log2 k``
   evaluations, so a good ranking keeps the search short.
4. The last node of that prefix is needed (the prefix without it failed).
   Lower again what the search kept but did not need: if the needed nodes
   alone fail, search the rest of the prefix the same way for the next needed
   node, and so on. For a monotone failure this ends with a set in which every
   node is needed; with one culprit it costs one more evaluation.

Nodes the ``data-overflow`` guard keeps float32 only by its margin (values
over half the LOW max but within it, ``ampconv.calibration.margin``) count among the
N candidates: every candidate, the first included, has them LOW unless the
search keeps them, so they are lowered again exactly when validation passes
without them. Real overflow, accumulation and a user's ``--data-max`` are
never candidates. Their evaluations come out of the same budget. Under
``fallback_dtype="bf16"`` a margin node the search keeps runs bfloat16 (its
rule's float32 widened); when no candidate passes so, the search runs again
with the kept margin nodes pinned float32 (``_search_again``): bfloat16
before float32, as localization answers.

Only a candidate that passed an evaluation is ever returned. The reference's
outputs are computed once and kept when they fit ``REFERENCE_CACHE_BYTES``;
otherwise the reference runs again with each evaluation, so memory never
grows with the number of samples.
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
import time
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx_ir as ir

from ampconv.core.precision import Precision
from ampconv.calibration import margin
from ampconv.numerics import ownerror
from ampconv.numerics.ownerror import OwnError
from ampconv.core.lowtypes import low_type
from ampconv.passes.pipeline import run_passes
from ampconv.reading.prepare import InferTypesPass, NameNodesPass
from ampconv.numerics import emulate as emulation
from ampconv.numerics import modelio, runners
from ampconv.validation.comparison import Judging, judge_output, read_only
from ampconv.errors import AmpconvError, UsageError
from ampconv.validation import decode, floor
from ampconv.validation.core import DECODE_STEPS
from ampconv.validation.criteria import DEFAULT, FLOOR_FACTOR, NEAR_TIE_WORDS
from ampconv.validation.natures import output_natures
from ampconv.validation.options import ValidateOptions

REFERENCE_CACHE_BYTES = 256 * 1024**2

# build(pins) -> the converted model (in memory) for a candidate.
Build = Callable[[Mapping[str, str]], ir.Model]
# judge(reference outputs, converted outputs, floor model's outputs or None, sample index) -> None when the
# sample passes, else (what failed, in words: "output 'y'", "metric m:f"; why).
SampleJudge = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray], Optional[Mapping[str, np.ndarray]], int],
                       Optional[Tuple[str, str]]]


@dataclasses.dataclass(frozen=True)
class Task:
    """What a candidate must do to pass: what ``validate`` would judge on the calibration samples.

    ``judge`` reads each sample's outputs (``SampleJudge``); ``floor``: the
    LOW type whose floor model runs beside the reference (the default
    criteria; None: the user's tolerance or metric alone); ``decoder``: a
    decoder's roles (``decode.decode_roles``), whose greedy decode each
    candidate must keep too, as ``validate``'s verdict does; ``passes``: the
    words of a pass.
    """

    judge: SampleJudge
    floor: object = None
    decoder: object = None
    passes: str = "every output passes on every sample"


@dataclasses.dataclass
class Evaluation:
    """One candidate's outcome: which nodes were pinned, pass or fail, and the output that decided."""

    pinned: Tuple[str, ...]
    passed: bool
    detail: str


@dataclasses.dataclass
class TuneResult:
    """What the search did, for the report's ``tune`` section."""

    passed: bool
    low_nodes: int
    budget: int
    evaluations: List[Evaluation] = dataclasses.field(default_factory=list)
    kept: List[Dict[str, object]] = dataclasses.field(default_factory=list)
    ranking: List[str] = dataclasses.field(default_factory=list)
    lowered: List[Dict[str, object]] = dataclasses.field(default_factory=list)  # margin nodes lowered again
    margin_nodes: int = 0  # of ``low_nodes``: nodes the overflow guard kept float32 only by its margin
    # node -> its own error (``ownerror``) as measured for the ranking; empty when the planned conversion passed.
    own_errors: Dict[str, float] = dataclasses.field(default_factory=dict)
    seconds: float = 0.0
    notes: List[str] = dataclasses.field(default_factory=list)

    def summary(self) -> Dict[str, object]:
        """The report's ``tune`` section."""
        return {
            "passed": self.passed,
            "evaluations": len(self.evaluations),
            "budget": self.budget,
            "low_nodes": self.low_nodes,
            "kept": self.kept,
            "margin_nodes": self.margin_nodes,
            "lowered": self.lowered,
            "trials": [
                {"pinned": len(e.pinned), "passed": e.passed, "detail": e.detail} for e in self.evaluations
            ],
            "ranking_head": self.ranking[:10],
            "own_errors": {name: _jsonable(float(f"{e:.4g}")) for name, e in self.own_errors.items()},
            "seconds": round(self.seconds, 3),
            "notes": self.notes,
        }


def budget(low_nodes: int) -> int:
    """The most evaluations the search may spend: 2 * ceil(log2 N) + 4."""
    return 2 * math.ceil(math.log2(max(low_nodes, 1))) + 4 if low_nodes > 1 else 4


class Evaluator:
    """Runs candidates against the float32 reference on the calibration samples, judged by ``task``.

    With ``task.floor`` (default criteria), the floor model (``validation.floor``:
    the reference on its weights, inputs, products, elementwise results and
    outputs rounded to that type) runs beside the reference and every
    candidate is judged against the error it shows too, as ``validate``
    judges: a conversion whose failure the floor explains passes its first
    evaluation, and nothing is pinned for it. With ``task.decoder`` the
    reference's greedy decode from the first sample is made once and every
    candidate decodes against it (``validation.decode``).
    """

    def __init__(self, reference: str, samples: Iterable, build: Build, task: Task, external: bool) -> None:
        self.reference = reference
        self.samples = samples
        self.build = build
        self.task = task
        self.external = external
        self.notes: List[str] = []
        self._tmp = tempfile.TemporaryDirectory(prefix="ampconv-tune-")
        self._ref_runner = runners.make_session(reference, "float32 model", runners.CPU, optimize=False)
        self._floor_runner = self._floor_session(task.floor) if task.floor is not None else None
        self._names = self._ref_runner.output_names()
        self._cache = self._reference_outputs()
        self._decoded = self._reference_decode() if task.decoder is not None else None
        self.count = 0

    def _floor_session(self, low):
        """The floor model's session (CPU, no optimization), or None when onnxruntime cannot run it."""
        try:
            model = modelio.load(self.reference)
            modelio.ensure_types(model)
            floor.floor_model(model, low)
            path = modelio.save_derived(model, self._tmp.name, "floor", self.external)
            return runners.make_session(path, "floor model", runners.CPU, optimize=False, source=self.reference)
        except AmpconvError:
            return None  # judged on the criteria alone, as validate does when the floor cannot run

    def _reference_decode(self):
        """(first sample, the reference's greedy decode from it), or None with a note when it cannot run."""
        _label, first = next(iter(self.samples))
        try:
            return first, decode.reference_decode(self._ref_runner, self.task.decoder, first, DECODE_STEPS)
        except AmpconvError as exc:  # as validate: a step the first sample cannot continue is no verdict
            self.notes.append(f"greedy decode not judged: {exc}")
            return None

    def _expected(self, sample) -> Tuple[Dict[str, np.ndarray], Optional[Dict[str, np.ndarray]]]:
        """The reference's outputs on ``sample`` and the floor model's (None without a floor)."""
        ref = self._ref_runner.run(sample, self._names)
        return ref, self._floor_runner.run(sample, self._names) if self._floor_runner is not None else None

    def close(self) -> None:
        """Remove the candidates' temporary files."""
        self._tmp.cleanup()

    def _reference_outputs(self) -> Optional[List[tuple]]:
        kept, size = [], 0
        for _label, sample in self.samples:
            outputs, floor_outputs = self._expected(sample)
            size += sum(np.asarray(a).nbytes for a in outputs.values()) * (2 if floor_outputs else 1)
            if size > REFERENCE_CACHE_BYTES:
                return None  # too big to keep: run the reference again with each evaluation
            kept.append((outputs, floor_outputs))
        return kept

    def __call__(self, pins: Mapping[str, str]) -> Evaluation:
        """Build, emulate and check the candidate with ``pins``."""
        self.count += 1
        model = self.build(pins)
        emulation.emulate(model)
        path = modelio.save_derived(model, self._tmp.name, f"candidate{self.count}", self.external)
        del model
        runner = runners.make_session(path, "candidate (emulated)", runners.CPU, optimize=False,
                                      source=self.reference)
        for index, (_label, sample) in enumerate(self.samples):
            ref, floor_out = self._cache[index] if self._cache is not None else self._expected(sample)
            failed = self.task.judge(ref, runner.run(sample, self._names), floor_out, index)
            if failed is not None:
                return Evaluation(tuple(pins), False, f"{failed[0]} on sample {index}: {failed[1]}")
        if self._decoded is not None:
            first, reference = self._decoded
            decoded = decode.decode_against(reference, runner, self.task.decoder, first)
            if not decoded.passed:
                return Evaluation(tuple(pins), False, f"the greedy decode from sample 0: {decoded.summary()}")
        return Evaluation(tuple(pins), True, self.task.passes)


def search(
    evaluate: Callable[[Mapping[str, str]], Evaluation],
    low_nodes: Sequence[str],
    rank: Callable[[], Tuple[List[str], Mapping[str, OwnError]]],
    node_floor: float = 0.0,
    decisive: Iterable[str] = (),
) -> Tuple[Dict[str, str], TuneResult]:
    """Steps 1-4 of the module docstring; returns the pins of the passing candidate and the record.

    ``rank`` is called only when the planned conversion fails: it returns the
    LOW node names, most harmful first, and their measured own errors. A node
    whose measured own error is at most ``node_floor`` (what rounding its own
    data does: ``node_floor_of``) is never pinned: keeping it float32 buys
    nothing rounding elsewhere would not take back. ``decisive`` nodes stay
    candidates whatever their own error: a discrete decision and the
    producers it reads (their harm is a flipped decision, not a size), and a
    producer whose LOW reader's own error is over the floor (that reader's
    twin rounds the producer's output: the loss may be the producer's, a
    large value rounded before a cancellation).
    """
    start = time.perf_counter()
    state = _Search(evaluate, TuneResult(passed=False, low_nodes=len(low_nodes), budget=budget(len(low_nodes))))
    result = state.result
    first = state.run({})
    if first.passed or not low_nodes:
        result.passed = first.passed
        if not first.passed:
            result.notes.append("no LOW node left to keep float32: the failure is not LOW precision's")
        result.seconds = time.perf_counter() - start
        return {}, result
    state.order, state.errors = rank()
    result.ranking = list(state.order)
    result.own_errors = {name: e.error for name, e in state.errors.items()}
    state.order = _above_floor(state.order, state.errors, node_floor, set(decisive), result)
    if not state.order:
        result.seconds = time.perf_counter() - start
        return {}, result
    found = state.shortest_prefix(first)
    if found is None:
        result.seconds = time.perf_counter() - start
        return {}, result
    pins = state.keep(state.prune(*found))
    result.seconds = time.perf_counter() - start
    return pins, result


class _Search:
    """The search's state: the evaluations so far (in ``result``), the ranking, and why each node is kept."""

    def __init__(self, evaluate: Callable[[Mapping[str, str]], Evaluation], result: TuneResult) -> None:
        self.evaluate = evaluate
        self.result = result
        self.order: List[str] = []
        self.errors: Mapping[str, OwnError] = {}
        self.why: Dict[str, str] = {}

    def run(self, pins: Dict[str, str]) -> Evaluation:
        """Evaluate one candidate and record it."""
        outcome = self.evaluate(pins)
        self.result.evaluations.append(outcome)
        return outcome

    def left(self) -> int:
        """Evaluations left in the budget."""
        return self.result.budget - len(self.result.evaluations)

    def attempt(self, names: Sequence[str]) -> Evaluation:
        """Evaluate the candidate that keeps ``names`` float32."""
        return self.run({name: self.reason(name) for name in names})

    def reason(self, name: str) -> str:
        """Why ``name`` is kept: the failure lowering it caused, else its own error."""
        return self.why.get(name) or _why(name, self.errors)

    def shortest_prefix(self, first: Evaluation) -> Optional[Tuple[int, Dict[int, Evaluation]]]:
        """Step 3: the shortest passing prefix of the ranking (exponential, then binary search).

        Returns its length and the failing outcomes by prefix length; None (with
        a note) when no prefix passes within the budget.
        """
        order = self.order
        lo, hi, k, failed_at = 0, None, 1, {0: first}
        while hi is None and self.left() > 0:
            k = min(k, len(order))
            outcome = self.attempt(order[:k])
            if outcome.passed:
                hi = k
            else:
                lo, failed_at[k] = k, outcome
                if k == len(order):
                    break
                k *= 2
        if hi is None:
            self.result.notes.append(
                "keeping every LOW node float32 does not pass either: the failure is not LOW precision's "
                "(check the tolerance)" if lo == len(order) else "evaluation budget spent before a passing candidate"
            )
            return None
        return _shortest(lambda j: self.attempt(order[:j]), lo, hi, failed_at, self.left), failed_at

    def prune(self, hi: int, failed_at: Dict[int, Evaluation]) -> List[str]:
        """Step 4: ``order[hi - 1]`` is needed; find the other needed nodes of the prefix one by one."""
        order = self.order
        best = list(order[:hi])
        needed = [order[hi - 1]]
        upper = hi - 1 if hi - 1 in failed_at else 0  # else: budget spent, keep the passing prefix
        if upper or hi == 1:
            self.why[needed[0]] = f"lowering it fails validation ({failed_at[hi - 1].detail})"
        while upper > 0 and self.left() > 0:
            alone = self.attempt(needed)
            if alone.passed:
                return list(needed)
            failed_at = {0: alone}
            # order[:upper] + needed is the last passing set: search below it.
            j = _shortest(lambda j: self.attempt(order[:j] + needed), 0, upper, failed_at, self.left)
            best = list(order[:j]) + needed
            if j - 1 not in failed_at:
                break  # budget spent before order[j - 1] was shown to be needed
            needed.append(order[j - 1])
            self.why[order[j - 1]] = f"lowering it fails validation ({failed_at[j - 1].detail})"
            upper = j - 1
        return best

    def keep(self, best: Sequence[str]) -> Dict[str, str]:
        """Record ``best`` as the passing set, in ranking order; returns its pins."""
        chosen = set(best)
        kept = [name for name in self.order if name in chosen]
        errors = self.errors
        self.result.passed = True
        self.result.kept = [
            {
                "node": name,
                "op_type": errors[name].op_type if name in errors else None,
                "own_error": _jsonable(errors[name].error) if name in errors else None,
                "evidence": self.reason(name),
            }
            for name in kept
        ]
        return {name: self.reason(name) for name in kept}


def node_floor_of(low) -> float:
    """The own error (relative RMS) within which a node is never pinned: ``FLOOR_FACTOR`` unit roundoffs of
    the LOW type, the error of rounding the node's data a few times (one rounding gives about 0.6 of one)."""
    return FLOOR_FACTOR * low.unit_roundoff


def _above_floor(order: List[str], errors: Mapping[str, OwnError], node_floor: float, decisive: set,
                 result: TuneResult) -> List[str]:
    """``order`` without the measured nodes whose own error is within ``node_floor`` (``decisive`` ones kept)."""
    within = [name for name in order if name in errors and name not in decisive and errors[name].error <= node_floor]
    if within:
        result.notes.append(
            f"{len(within)} LOW node(s) whose own error is within {node_floor:.2g} (what rounding their own "
            "data does) are never pinned: keeping them float32 would buy nothing"
        )
    kept = [name for name in order if name not in set(within)]
    if not kept:
        result.notes.append("every LOW node's own error is within that floor: the failure is the model's own "
                            "sensitivity to the LOW type, which no pin removes; nothing is pinned")
    return kept


def _shortest(passes_with, lo: int, hi: int, failed_at: Dict[int, Evaluation], left: Callable[[], int]) -> int:
    """Binary search for the smallest j in (lo, hi] whose candidate passes (lo fails, hi passes).

    Failing outcomes are recorded in ``failed_at``; stops early when the budget
    is spent, returning the smallest j known to pass.
    """
    while hi - lo > 1 and left() > 0:
        mid = (lo + hi) // 2
        outcome = passes_with(mid)
        if outcome.passed:
            hi = mid
        else:
            lo, failed_at[mid] = mid, outcome
    return hi


def _why(name: str, errors: Mapping[str, OwnError]) -> str:
    own = errors.get(name)
    if own is None:
        return "kept by the accuracy search (its own error is not measurable inside a subgraph)"
    figure = "a new inf/NaN" if math.isinf(own.error) else f"scaled error {own.error:.3g}"
    return f"kept by the accuracy search: computed alone in LOW it gives {figure} on {own.output}"


def _jsonable(value: float):
    return value if math.isfinite(value) else str(value)


def tune_model(src, fresh: Callable[[], ir.Model], build, samples, request, calibration) -> Tuple[margin.SearchPins, TuneResult]:
    """Run the search for the conversion of ``src`` as ``request`` asks (its plan and data options); returns (pins, record).

    ``fresh()`` loads the float32 input again; ``build(pins)`` returns the
    ``stages.Rewritten`` conversion under ``pins`` (a ``margin.SearchPins``:
    nodes kept float32, nodes released from the overflow guard's margin), whose
    ``plan`` the search reads. ``calibration`` is the statistics pass's
    ``Calibration``. Nodes kept only by the margin are candidates of the
    search like the LOW nodes: every candidate starts with them LOW, and one
    the search keeps stays under its ``data-overflow`` rule (``ampconv.calibration.margin``).
    """
    low = low_type(request.plan_options.dtype)
    notes: List[str] = []
    planned = build(margin.SearchPins())
    margins = _margin_candidates(planned.plan, calibration, fresh, request, notes)
    if margins:
        del planned
        planned = build(margin.release({}, margins))
        lowered = set(_low_names(planned.plan))
        margins = {name: m for name, m in margins.items() if name in lowered}  # else a later rule keeps it
    low_nodes = _low_names(planned.plan)
    slots = ownerror.slots_from_converted(planned.model)
    del planned
    external = modelio.wants_external(fresh(), str(src))
    kinds: Dict[str, str] = {}  # node -> op type, for the ranking and the report
    decisive: set = set()  # candidates whatever their own error (``search``)

    def rank():
        copy = fresh()
        run_passes(copy, NameNodesPass(), InferTypesPass())
        errors = ownerror.measure(copy, str(src), slots, _first(samples, RANKING_SAMPLES), low, external)
        kinds.update(ownerror.op_types(copy, low_nodes))
        discrete = [name for name, op in kinds.items() if op in ownerror.DISCRETE]
        consumers = ownerror.low_consumers(copy, low_nodes)
        floor_error = node_floor_of(low)
        decisive.update(discrete)
        decisive.update(p for p, readers in consumers.items() if set(readers) & set(discrete))
        decisive.update(p for p, readers in consumers.items()
                        if any(errors[r].error > floor_error for r in readers if r in errors))
        order = ownerror.ranked(errors, low_nodes, ownerror.amplification(copy, low_nodes), consumers, discrete)
        return order, errors

    ranked = []  # the ranking is measured once, though the search may run twice

    def rank_once():
        if not ranked:
            ranked.append(rank())
        return ranked[0]

    release = margin.release
    pins, result = _search_with(release, (src, fresh, samples, build, request, external), margins,
                                (low_nodes, rank_once, node_floor_for(request), decisive))
    if not result.passed and margins and request.plan_options.fallback is not None:
        release = _float32_margins
        pins, result = _search_again(result, release, (src, fresh, samples, build, request, external), margins,
                                     (low_nodes, rank_once, node_floor_for(request), decisive))
    return _finish(result, pins, margins, notes, kinds, request, release)


def _search_with(release, setting, margins, space) -> Tuple[Dict[str, str], TuneResult]:
    """One ``search`` whose candidates are built with ``release(pins, margins)``."""
    src, fresh, samples, build, request, external = setting
    evaluator = _evaluator(src, fresh, samples, lambda pins: build(release(pins, margins)).model, request, external)
    try:
        pins, result = search(evaluator, *space)
        result.notes.extend(evaluator.notes)
        return pins, result
    finally:
        evaluator.close()


def _search_again(first: TuneResult, release, setting, margins, space) -> Tuple[Dict[str, str], TuneResult]:
    """The search again with the margin nodes it keeps float32, after no candidate passed with them in bf16.

    Under ``fallback_dtype="bf16"`` a margin node the search keeps stays under
    its ``data-overflow`` rule, so it runs bfloat16: float32's range, fewer
    bits than float16. Where that fails (a signal of +-10 on 4e4 that
    bfloat16's 8 bits lose), the margin nodes are tried float32. The record
    holds both searches' evaluations and budgets.
    """
    pins, result = _search_with(release, setting, margins, space)
    result.evaluations = first.evaluations + result.evaluations
    result.budget += first.budget
    result.seconds += first.seconds
    result.notes.insert(0, f"with the margin nodes it keeps in bf16 (the fallback type) no candidate passed in "
                           f"{len(first.evaluations)} evaluation(s); searched again with them float32")
    return pins, result


def _float32_margins(pins: Mapping[str, str], margins: Mapping[str, margin.MarginNode]) -> margin.SearchPins:
    """``margin.release``, but a margin node in ``pins`` is pinned float32 (``data-tune``), not left to its guard."""
    released = margin.release(pins, margins)
    kept = {name: f"{margins[name].evidence()}; in bf16 (the fallback type) validation fails"
            for name in pins if name in margins}
    return dataclasses.replace(released, kept={**released.kept, **kept})


def _low_names(plan) -> List[str]:
    """Names of the nodes ``plan`` makes LOW, in plan order (empty at O0)."""
    if plan is None:
        return []
    return [node.name for node, node_plan in plan.nodes.items() if node_plan.decision.precision == Precision.LOW]


def _evaluator(src, fresh, samples, candidate, request, external: bool) -> Evaluator:
    """Candidates judged by what validate would judge (``judging_task``)."""
    return Evaluator(str(src), samples, candidate, judging_task(request, fresh()), external)


def judging_task(request, model: ir.Model) -> Task:
    """What a candidate must do, as ``validate`` with the same options would judge it.

    The user's metric when given (``Config.metric``): it holds on every
    sample. Otherwise every output passes the verdict's own judge (natures,
    detection sets, token sequences; ``comparison.judge_output``) under the
    criteria ``validate`` would use: the strict rule with ``rtol``/``atol``,
    else the default criteria with the user's ``limits`` and
    ``extra_criteria``, against the floor model's error; and a decoder with a
    cache keeps its greedy decode (``validation.decode``), as validate's
    verdict requires.
    """
    data = request.data_options
    if data.metric is not None:
        return Task(_metric_judge(data.metric), passes=f"metric {data.metric.name} holds on every sample")
    judging = judging_for(request, model)
    low = low_type(judging.dtype) if judging.criteria.mode == DEFAULT else None  # strict: the user's tolerance alone
    return Task(outputs_judge(lambda name, ref, conv, floor_out: judge_output(name, ref, conv, judging, floor_out)),
                low, decoder_roles(model))


def judging_for(request, model: ir.Model) -> Judging:
    """The per-output judge ``validate`` would use with the request's options: the strict rule with
    ``rtol``/``atol``, else the default criteria with the user's ``limits`` and ``extra_criteria``; the
    outputs' natures (the user's ``natures`` first)."""
    data, dtype = request.data_options, request.plan_options.dtype
    options = ValidateOptions(rtol=data.rtol, atol=data.atol, limits=data.limits, extra_criteria=data.extra_criteria,
                              natures=data.natures)
    criteria, _source = options.criteria(dtype)
    return Judging(criteria, dtype, output_natures(model, dict(data.natures)))


def decoder_roles(model: ir.Model):
    """A decoder's roles (``decode.decode_roles``), or None when the model is no decoder with a cache."""
    try:
        return decode.decode_roles(model)
    except UsageError:
        return None  # no decoder with a cache: its outputs are its task


def outputs_judge(judge_one: Callable) -> SampleJudge:
    """A sample passes when every output passes ``judge_one(name, reference outputs, converted outputs, floor
    outputs)`` (an object with ``passed`` and ``decided_by``: ``comparison.judge_output``'s verdict); else the
    first failing output's words."""
    def judge(ref, conv, floor_out, _index):
        for name in ref:
            verdict = judge_one(name, ref, conv, floor_out)
            if not verdict.passed:
                return f"output {name!r}", getattr(verdict, "decided_by", None) or "over tolerance"
        return None
    return judge


def _metric_judge(metric) -> SampleJudge:
    """A sample passes when the user's metric holds on its outputs (read-only); else the metric's words."""
    def judge(ref, conv, _floor_out, index):
        check = metric.judge(read_only(ref), read_only(conv), index)
        return None if check.held else (f"metric {metric.name}", check.words or "it does not hold")
    return judge


def node_floor_for(request) -> float:
    """``node_floor_of`` the LOW type, or 0 when the user's own demand judges (a metric, limits, criteria of
    their own): a node whose own error is a rounding's may be what keeps a tighter bound, and the floor
    excuses nothing the user asked for."""
    data = request.data_options
    if data.metric is not None or data.limits or data.extra_criteria:
        return 0.0
    return node_floor_of(low_type(request.plan_options.dtype))


def _finish(result: TuneResult, pins, margins, notes, kinds, request,
            release=margin.release) -> Tuple[margin.SearchPins, TuneResult]:
    """The search's record completed with its notes, kept nodes' op types and margin nodes; the pins."""
    result.margin_nodes = len(margins)
    result.notes.extend(notes)
    result.notes.extend(why_so_much(result, request.plan_options.dtype))
    ranking = " and one ranked the nodes by their own error" if result.ranking else ""
    result.notes.append(
        f"evaluations count candidate validations; besides them one float32 pass collected the statistics{ranking}"
    )
    if not result.passed:
        return margin.SearchPins(), result  # the conversion as planned: the margin keeps its nodes float32
    for entry in result.kept:
        entry["op_type"] = entry["op_type"] or kinds.get(entry["node"])  # unmeasured (subgraph) nodes too
    _record_margin(result, margins, pins, low_type(request.plan_options.dtype))
    return release(pins, margins), result


# From this share of the LOW nodes kept float32, the search says why the price is what it is.
MOSTLY_KEPT = 0.5


def why_so_much(result: TuneResult, dtype: str) -> List[str]:
    """Notes on why the search kept most LOW nodes float32 or gave up, from what its failing trials showed.

    A failing output that diverged at a near-tie (a decoder's greedy step whose
    top two scores lie within the LOW type's resolution) is the usual cause:
    rounding anywhere upstream of that step can flip it, so nothing short of
    keeping that path float32 passes. Empty when the search kept little.
    """
    kept = len(result.kept)
    heavy = result.passed and result.low_nodes and kept >= MOSTLY_KEPT * result.low_nodes
    if result.passed and not heavy:
        return []
    failing = [e for e in result.evaluations if not e.passed]
    tie = next((e.detail for e in failing if NEAR_TIE_WORDS in e.detail), None)
    share = f"kept {kept} of {result.low_nodes} LOW node(s) float32" if result.passed else "found no passing candidate"
    if tie is not None:
        return [
            f"{share}: a token sequence diverges at a near-tie ({tie.split(':')[0]}): at that step the reference's "
            f"top two scores lie within {dtype}'s resolution, so rounding anywhere upstream can flip it and the "
            "rest of the sequence cannot agree; only keeping that path float32 passes. That is the honest price "
            "of this decoder in LOW, not a search failure: judge it on its task with real inputs (--inputs) "
            "before accepting the float32 share"
        ]
    if not failing:
        return []
    return [
        f"{share}: every smaller candidate failed ({failing[-1].detail}); the outputs are sensitive to the "
        "rounding of most nodes, so most of the model stays float32"
    ]


def _margin_candidates(plan, calibration, fresh, request, notes: List[str]) -> Dict[str, margin.MarginNode]:
    """The nodes the planned conversion keeps float32 only by the overflow guard's margin."""
    overflow = [node.name for node, node_plan in (plan.nodes.items() if plan is not None else ())
                if node_plan.decision.rule == "data-overflow"]
    if not overflow or calibration is None:
        return {}
    low = low_type(request.plan_options.dtype)
    if request.plan_options.data_max is not None:
        notes.append(f"--data-max {request.plan_options.data_max:g} is the user's threshold, not a margin: the "
                     f"{len(overflow)} node(s) over it stay float32 and the search does not lower them")
        return {}
    copy = fresh()
    NameNodesPass()(copy)
    found = margin.margin_nodes(copy, overflow, calibration, low)
    hard = len(overflow) - len(found)
    if hard:
        notes.append(f"{hard} node(s) with values over the {low.name} max {low.max:g} stay float32: "
                     "the search never lowers real overflow")
    return found


def _record_margin(result: TuneResult, margins: Mapping[str, margin.MarginNode], pins, low) -> None:
    """Say, for every margin node, whether validation let the search lower it, with the figures."""
    for entry in result.kept:
        if entry["node"] in margins:
            entry["evidence"] = f"{margins[entry['node']].evidence()}; {entry['evidence']}"
    for name, node in margins.items():
        if name in pins:
            continue
        evidence = f"{node.evidence()}; validation passes with it {low.name} on every calibration sample"
        result.lowered.append({"node": name, "op_type": node.op_type, "max_abs": node.max_abs,
                               "evidence": evidence})
        result.notes.append(f"{name} ({node.op_type}) lowered again: {evidence}")


# The own-error ranking reads this many samples (errors of rounding show on the first few already).
RANKING_SAMPLES = 4


def _first(samples, count: int):
    for index, pair in enumerate(samples):
        if index >= count:
            return
        yield pair
