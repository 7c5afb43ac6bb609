"""The release step: every float32 island tried back in LOW on the evidence, kept LOW where the outputs do not move.

The planner keeps a node float32 on evidence that speaks for the values it
sees (a constant that flushes, an activation past the guard, a norm's
statistics) or because its inputs disagree. Whether that float32 buys anything
is a question about the *outputs*: an Exp whose inf a reciprocal turns into 0,
a 1e-6 layer scale on a residual, a bias of 1e-9 change nothing a user reads.
After planning with evidence (calibration data, or the default synthetic run),
this step asks that question of every float32 island the evidence can judge,
with the machinery ``--tune`` uses (``calibration.tune.Evaluator``: candidates
built by the same plan and rewrite, emulated in float32, judged by the
validator's ``judge_output`` against the floor model):

1. *Islands.* The float32 nodes of the main graph whose rule the evidence can
   overturn (``RELEASABLE``; not the schema's, the checks', the user's, the
   black list's or the search's pins, and not what emulation cannot show: a
   reduction's running sum, rotary phases) are grouped into islands: nodes
   joined by a value. Nodes that touch values computed from integers (shape
   arithmetic, positions: the samples span neither) are not tried; on the
   synthetic run's random sample, neither are nodes whose values grow with a
   float input's scale (degree above 0 in ``plan.degrees``: a norm, written
   out or not, ends that, so what follows one is tried) nor the range rules
   (their evidence is the input's scale).
2. *Baseline.* The planned conversion is evaluated first; its error on each
   output is the reference. If it fails the validator, nothing is released.
3. *Cheapest first, batched.* Islands are ordered by how likely lowering them
   is to move the outputs (``PRIOR``: nodes that only follow others first,
   overflowing values last; then fewer nodes first) and tried all together;
   a batch that fails is bisected (group testing); an island that fails alone
   is tried in parts (``Island.parts``): by class, then in halves, except a
   chain of overflowing values, which is tried whole.
4. *Kept LOW* is a candidate whose every output, on every sample, passes the
   validator and moves no further than ``allowance`` grants: the planned
   conversion's own error, or up to ``FLOOR_FACTOR`` times the floor model's
   (the error no LOW conversion avoids) but never past ``ROUNDINGS``
   roundings of the output's scale, in RMS and in the largest element
   (strict ``--rtol/--atol``: the user's tolerance alone); and whose
   GPU cost (``cost``: bytes every node reads and writes, casts included) is
   no higher than before. So a release that would add a cast pair around a
   node between float32 neighbours is not made: island boundaries are chosen
   by what the GPU moves, not by node counts.
5. *Bounded.* At most ``budget(nodes)`` evaluations, and none starts after
   ``SECONDS`` (or when the mean so far says it would end past them); none at
   all when the float32 pass over the evidence says one evaluation alone
   would take longer (``EVALUATION_COST``); the step runs in a forked child
   (``runtime.isolated``), killed past ``3 * SECONDS + 30`` s: random inputs
   may crash a native kernel.

What it decides reaches the planner as ``SearchPins.lowered`` (rule
``release-low``, the reason naming the evidence and the measured effect);
``ReleaseResult`` is the report's ``release`` section.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx_ir as ir

from ampconv.calibration.tune import Evaluation, Evaluator, Task, judging_for, judging_task, outputs_judge
from ampconv.core.lowtypes import low_type
from ampconv.core.precision import Precision
from ampconv.numerics.activations import Calibration
from ampconv.numerics.modelio import wants_external
from ampconv.plan.degrees import InputDegrees
from ampconv.plan.provenance import FLOAT_TYPES, data_reach
from ampconv.plan.search_pins import SearchPins
from ampconv.reading.prepare import NameNodesPass
from ampconv.runtime.isolated import run_isolated
from ampconv.runtime.loadcheck import first_line
from ampconv.validation.comparison import judge_output
from ampconv.validation.criteria import DEFAULT, FLOOR_FACTOR

# No evaluation starts after this many seconds of the step (the first always may).
SECONDS = 20.0
# An evaluation costs about this many float32 passes over the evidence (a rewrite, the emulated run, the floor's
# and the reference's once): when that alone is over ``SECONDS``, the step tries nothing.
EVALUATION_COST = 3.0
# A share of its allowance an output may pass by: the same element's error recomputed differs in its last bits.
SLACK = 1e-3
# The most a release may move an output beyond the planned conversion's error, in roundings (unit roundoffs) of the
# output's scale and largest value: half of a 1% tolerance on the largest value in fp16 (about 20 roundings).
ROUNDINGS = 10.0
# How likely lowering a node moves the outputs, by the rule that keeps it float32: lower is tried first.
PRIOR = {
    "gray-follow": 0, "gray-promote": 0,
    "hard-constant": 1, "data-underflow": 2, "range-mask": 2,
    "range-statistics": 3, "range-reduction": 3, "data-overflow": 4,
}
# The class of values over the LOW range, and of ``data-overflow`` nodes kept only by the guard's margin.
OVERFLOW, MARGIN = PRIOR["data-overflow"], PRIOR["range-statistics"]
# The rules whose float32 the release step may overturn (``PRIOR``'s keys); on the synthetic run, fewer.
RELEASABLE = frozenset(PRIOR)
_SYNTHETIC_SILENT = frozenset({"range-statistics", "range-reduction"})  # their evidence is the data's scale


@dataclasses.dataclass(frozen=True)
class Island:
    """Float32 nodes joined by values, tried in LOW together: names in graph order, their ops, the rules that
    keep them float32 and each one's ``PRIOR`` class."""

    nodes: Tuple[str, ...]
    ops: Tuple[str, ...]
    rules: Tuple[str, ...]
    classes: Tuple[int, ...]

    @property
    def prior(self) -> int:
        """How likely lowering it moves the outputs (the worst class of its nodes)."""
        return max(self.classes)

    def parts(self) -> List["Island"]:
        """What to try of the island when it fails whole: its nodes split by class, cheapest first; a single
        class is halved in graph order, but values over the LOW range (``OVERFLOW``) stay one part: lowered in
        part, an overflowing chain hands an inf to the rest of it."""
        classes = sorted(set(self.classes))
        if len(classes) > 1:
            return [self._only(lambda i, c=c: self.classes[i] == c) for c in classes]
        if self.prior == OVERFLOW or len(self.nodes) < 2:
            return []
        cut = len(self.nodes) // 2
        return [self._only(lambda i: i < cut), self._only(lambda i: i >= cut)]

    def _only(self, keep) -> "Island":
        picked = [i for i in range(len(self.nodes)) if keep(i)]
        return Island(*(tuple(field[i] for i in picked) for field in (self.nodes, self.ops, self.rules,
                                                                      self.classes)))

    def record(self, **extra) -> Dict[str, object]:
        """The report's entry: nodes, ops, the rules that kept them float32, and ``extra``."""
        return {"nodes": list(self.nodes), "ops": list(self.ops), "rules": list(self.rules), **extra}


@dataclasses.dataclass
class ReleaseResult:
    """What the release step did, for the report's ``release`` section."""

    evidence: str
    islands: int
    nodes: int
    budget: int
    evaluations: List[Evaluation] = dataclasses.field(default_factory=list)
    released: List[Dict[str, object]] = dataclasses.field(default_factory=list)
    kept: List[Dict[str, object]] = dataclasses.field(default_factory=list)
    untried: List[Dict[str, object]] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    notes: List[str] = dataclasses.field(default_factory=list)

    @classmethod
    def of(cls, calibration: Calibration, found: Sequence[Island], **fields) -> "ReleaseResult":
        """The record of a step over the islands ``found`` on ``calibration``'s evidence: their count, their
        nodes and the budget those nodes give; ``fields``: the rest (``untried``, ``seconds``)."""
        nodes = sum(len(island.nodes) for island in found)
        return cls(_evidence(calibration), len(found), nodes, budget(nodes), **fields)

    def lowered(self) -> int:
        """How many nodes the step runs LOW."""
        return sum(len(entry["nodes"]) for entry in self.released)

    def summary(self) -> Dict[str, object]:
        """The report's ``release`` section."""
        return {
            "evidence": self.evidence, "islands": self.islands, "nodes": self.nodes, "lowered": self.lowered(),
            "evaluations": len(self.evaluations), "budget": self.budget, "seconds": round(self.seconds, 3),
            "released": self.released, "kept": self.kept, "untried": self.untried,
            "trials": [{"nodes": len(e.pinned), "passed": e.passed, "detail": e.detail} for e in self.evaluations],
            "notes": self.notes,
        }


def budget(nodes: int) -> int:
    """The most evaluations the step may spend on islands of ``nodes`` nodes in all: the baseline, then
    2 * ceil(log2(nodes + 1)) + 3 (about two per halving, and a few for the splits by class)."""
    return 1 + 2 * math.ceil(math.log2(nodes + 1)) + 3


def islands_of(plan, model: ir.Model, calibration: Calibration, data_max_set: bool) -> List[Island]:
    """The float32 islands of ``plan`` the evidence (``calibration``) may overturn, cheapest first.

    ``model`` is the float32 input with the converter's node names (read for
    its edges and, on the synthetic run, what the float inputs' scale reaches).
    A ``data-overflow`` node none of whose tensors passes the LOW maximum (only
    the guard's margin keeps it) is of the range rules' class, not of the
    overflowing values'.
    """
    rules = {node.name: node_plan.decision.rule for node, node_plan in plan.nodes.items()
             if node.name and node_plan.decision.precision == Precision.HIGH}  # read for main-graph nodes only
    synthetic = calibration.synthetic
    unspoken = _integer_made(model) | (_input_scaled(model) if synthetic else frozenset())
    overflowing = set(calibration.overflowing())
    chosen = {}
    for node in model.graph:
        rule = rules.get(node.name)
        if rule not in RELEASABLE or (synthetic and rule in _SYNTHETIC_SILENT):
            continue
        if rule == "data-overflow" and data_max_set:
            continue  # the user's threshold, not a margin: as --tune, never overturned
        values = [v for v in (*node.inputs, *node.outputs) if v is not None]
        if unspoken and any(v in unspoken for v in values):
            continue  # values the evidence's samples do not speak for
        margin = rule == "data-overflow" and not any(v.name in overflowing for v in values)
        chosen[node] = (rule, MARGIN if margin else PRIOR[rule])
    found = [Island(*(tuple(field) for field in zip(*((n.name, n.op_type, *chosen[n]) for n in group))))
             for group in _joined(model.graph, chosen)]
    return sorted(found, key=lambda island: (island.prior, len(island.nodes)))


def _integer_made(model: ir.Model) -> frozenset:
    """The float values computed from integers (a Shape or a position cast to float, and what follows): their
    range is the shapes' and the positions', which the evidence's few samples do not span (hazard 8: a
    dimension of 4099 that float16 cannot hold)."""
    sources = [out for node in model.graph if node.op_type in ("Cast", "CastLike") and node.inputs
               and node.inputs[0] is not None and node.inputs[0].dtype not in FLOAT_TYPES
               for out in node.outputs if out.dtype in FLOAT_TYPES]
    return frozenset(data_reach(model.graph, sources)) if sources else frozenset()


def _input_scaled(model: ir.Model) -> frozenset:
    """The values whose magnitude grows with a float graph input's (degree above 0 in ``plan.degrees``).

    Not every value the input reaches (``plan.provenance``): past a norm, the
    decomposed spelling included, a value no longer grows with the input, and
    the random sample's figures speak for it as the user's data's would. A
    logarithm of a growing value counts as growing (``shifts``): it moves with
    the input's scale, and a centring after it cancels differently at another
    scale. A value that shrinks as the input grows (a reciprocal standard
    deviation, degree below 0) counts as not growing: it moves toward 0, not
    past the LOW maximum, and only where the values that grow beside it
    overflow first.
    """
    degrees = InputDegrees(model.graph, [v for v in model.graph.inputs if v.dtype in FLOAT_TYPES], shifts=True)
    return frozenset(value for grown in degrees.by_input.values() for value in grown)


def _joined(graph: ir.Graph, chosen: Mapping[ir.Node, str]) -> List[List[ir.Node]]:
    """``chosen`` nodes grouped by the values that join them, each group in graph order."""
    group_of: Dict[ir.Node, int] = {}
    groups: List[List[ir.Node]] = []
    for node in graph:
        if node not in chosen:
            continue
        joined = {group_of[v.producer()] for v in node.inputs
                  if v is not None and v.producer() in group_of}
        if not joined:
            group_of[node] = len(groups)
            groups.append([node])
            continue
        target = min(joined)
        for other in sorted(joined - {target}):  # merge: this node joins groups that met apart
            for member in groups[other]:
                group_of[member] = target
            groups[target].extend(groups[other])
            groups[other] = []
        group_of[node] = target
        groups[target].append(node)
    order = {node: i for i, node in enumerate(graph)}
    return [sorted(group, key=order.__getitem__) for group in groups if group]


class ReleaseJudge:
    """The validator's verdict of one output, and (default criteria) the floor's: no output moves further than
    ``allowance`` grants from the planned conversion's error (``baseline``, recorded by the first evaluation)
    and the floor model's, in RMS and in the largest element. A detection set or a token sequence is judged by
    the validator alone: matched as a set or read as a sequence, its elements are not compared in place."""

    def __init__(self, judging, low) -> None:
        self.judging = judging
        self.low = low
        self.recording = True
        self.baseline: Dict[str, Tuple[float, float]] = {}
        self.worst: Tuple[float, str] = (0.0, "")  # the largest share of its allowance an output used

    def __call__(self, name, ref_out, conv_out, floor_out):
        verdict = judge_output(name, ref_out, conv_out, self.judging, floor_out)
        reference = np.asarray(ref_out[name])
        nature = self.judging.natures.get(name)
        matched = nature is not None and nature.kind in ("detections", "sequence")  # judged as sets or sequences
        if not verdict.passed or self.judging.criteria.mode != DEFAULT or reference.dtype.kind != "f" or matched:
            return verdict
        rms, peak = _errors(reference, conv_out[name])
        if self.recording:
            known = self.baseline.get(name, (0.0, 0.0))
            self.baseline[name] = (max(known[0], rms), max(known[1], peak))
            return verdict
        return self._against_floor(name, reference, (rms, peak), floor_out, verdict)

    def _against_floor(self, name, reference, errors, floor_out, verdict):
        """``verdict``, or a failure when the output moves beyond what ``allowance`` grants it."""
        floor = _errors(reference, floor_out[name]) if floor_out is not None and name in floor_out else (0.0, 0.0)
        base = self.baseline.get(name, (0.0, 0.0))
        allowed = allowance(reference, base, floor, self.low.unit_roundoff)
        rms, peak = errors
        share = max(rms / allowed[0] if allowed[0] else math.inf, peak / allowed[1] if allowed[1] else math.inf)
        words = f"RMS error {rms:.2g}, largest {peak:.2g}"
        if share > 1.0 + SLACK:
            return _Verdict(False, f"output {name!r} moves beyond the floor: {words}, over the allowed "
                                   f"{allowed[0]:.2g} and {allowed[1]:.2g} (the planned conversion's {base[0]:.2g} "
                                   f"and {base[1]:.2g}; the floor model's {floor[0]:.2g} and {floor[1]:.2g})")
        if share >= self.worst[0]:
            self.worst = (share, f"output {name!r}: {words}, within the allowed {allowed[0]:.2g} and "
                                 f"{allowed[1]:.2g}")
        return verdict


def allowance(reference: np.ndarray, base: Tuple[float, float], floor: Tuple[float, float],
              unit_roundoff: float) -> Tuple[float, float]:
    """The (RMS, largest) error a released candidate may show on one output.

    The planned conversion's own error (``base``) always; beyond it, up to
    ``FLOOR_FACTOR`` times the floor model's error (``floor``: the error no
    LOW conversion avoids), but never more than ``ROUNDINGS`` roundings of
    the output's scale (RMS) and of its largest value: the floor rounds every
    elementwise result, so where a guard kept a node float32 against an
    underflow the floor's error is the very error that node avoids; and one
    rounding of the output's scale is always allowed.
    """
    finite = np.abs(np.asarray(reference, dtype=np.float64)[np.isfinite(reference)])
    scale = float(np.sqrt(np.mean(np.square(finite)))) if finite.size else 0.0
    largest = float(finite.max()) if finite.size else 0.0
    rms = max(base[0], min(FLOOR_FACTOR * floor[0], ROUNDINGS * unit_roundoff * scale), unit_roundoff * scale)
    peak = max(base[1], min(FLOOR_FACTOR * floor[1], ROUNDINGS * unit_roundoff * largest),
               unit_roundoff * largest)
    return rms, peak


@dataclasses.dataclass(frozen=True)
class _Verdict:
    passed: bool
    decided_by: str


def _errors(reference: np.ndarray, converted) -> Tuple[float, float]:
    """(RMS, largest) absolute difference over the elements finite in both; inf when ``converted`` is not finite
    where ``reference`` is."""
    ref = np.asarray(reference, dtype=np.float64)
    conv = np.asarray(converted, dtype=np.float64)
    if ref.shape != conv.shape:
        return math.inf, math.inf
    finite = np.isfinite(ref)
    if not np.isfinite(conv[finite]).all():
        return math.inf, math.inf
    diff = np.abs(conv[finite] - ref[finite])
    return (float(np.sqrt(np.mean(np.square(diff)))), float(diff.max())) if diff.size else (0.0, 0.0)


@dataclasses.dataclass
class ReleaseSetting:
    """What the step reads: the float32 input, how to build and cost a candidate, the evidence, the base pins.

    ``build(pins)`` returns the conversion (``stages.Rewritten``) planned with
    ``pins`` (a ``SearchPins``); ``cost(rewritten)`` its GPU cost in bytes
    moved (``pipeline.figures.moved_bytes``); ``samples`` the evidence's
    samples; ``base`` the pins the conversion already has (the accuracy
    search's); ``request`` the conversion's (its plan and data options).
    """

    src: str
    fresh: Callable[[], ir.Model]
    build: Callable
    cost: Callable
    samples: object
    request: object
    calibration: Calibration
    base: SearchPins = dataclasses.field(default_factory=SearchPins)


def worth_trying(plan) -> bool:
    """Whether ``plan`` keeps any node float32 by a rule the step may overturn: without one, nothing is read or
    run (one pass over the plan: the chain benchmark's case)."""
    return any(node_plan.decision.precision == Precision.HIGH and node_plan.decision.rule in RELEASABLE
               for node_plan in plan.nodes.values())


def release(setting: ReleaseSetting, plan) -> Tuple[SearchPins, Optional[ReleaseResult]]:
    """The pins of the conversion after the release step, and its record (None when there is nothing to try).

    ``plan`` is the conversion as planned with ``setting.base``. The
    evaluations run in a forked child (see the module docstring); a child that
    dies or runs past its time leaves the plan as it was, with a note.
    """
    if not worth_trying(plan):
        return setting.base, None
    model = setting.fresh()
    NameNodesPass()(model)
    found = islands_of(plan, model, setting.calibration, setting.request.plan_options.data_max is not None)
    if not found:
        return setting.base, None
    expected = EVALUATION_COST * setting.calibration.seconds
    if expected > SECONDS:  # the float32 pass over the evidence says one evaluation alone would spend the time
        result = ReleaseResult.of(setting.calibration, found, untried=[i.record() for i in found])
        result.notes.append(f"not tried: one evaluation would take about {expected:.0f} s ({EVALUATION_COST:g}x the "
                            f"float32 pass over the evidence), over the step's {SECONDS:g} s")
        return setting.base, result
    start = time.perf_counter()
    try:
        lowered, result = run_isolated(_search, setting, found, timeout=3 * SECONDS + 30)
    except Exception as exc:  # noqa: BLE001 - the release is optional: any failure keeps the plan as it was
        result = ReleaseResult.of(setting.calibration, found, seconds=time.perf_counter() - start)
        result.notes.append(f"the release step could not run ({first_line(exc)}): nothing released")
        return setting.base, result
    return dataclasses.replace(setting.base, lowered=lowered), result


def _evidence(calibration: Calibration) -> str:
    """The evidence in words: the synthetic run's sample, or the calibration samples."""
    if calibration.synthetic:
        return "the synthetic float32 run's seeded random sample"
    kind = "random " if calibration.random else ""
    return f"{calibration.samples} {kind}calibration sample{'s' if calibration.samples != 1 else ''}"


def _search(setting: ReleaseSetting, found: Sequence[Island]) -> Tuple[Dict[str, str], ReleaseResult]:
    """Steps 2-4 of the module docstring, in the child: the lowered nodes with their reasons, and the record."""
    result = ReleaseResult.of(setting.calibration, found)
    start = time.perf_counter()
    trial = Candidates(setting)
    try:
        search = GroupTest(trial, result)
        if search.baseline():
            search.settle(list(found))
    finally:
        trial.close()
        result.seconds = time.perf_counter() - start
    return search.reasons(), result


# trial(islands) -> (the evaluation of the conversion with ``islands`` LOW, its GPU cost, the effect in words).
Trial = Callable[[Sequence[Island]], Tuple[Evaluation, float, str]]


class Candidates:
    """The trials of one release: each candidate built with its islands lowered (``SearchPins.lowered``), costed,
    emulated and judged by ``ReleaseJudge``; the first trial (no island) records the planned conversion's error."""

    def __init__(self, setting: ReleaseSetting) -> None:
        self.setting = setting
        self.costs: List[float] = []
        model = setting.fresh()
        task = judging_task(setting.request, model)  # what validate would judge: the user's metric first
        judging = judging_for(setting.request, model)
        self.judge = ReleaseJudge(judging, low_type(judging.dtype))
        floor_low = low_type(judging.dtype) if judging.criteria.mode == DEFAULT else None
        user_metric = task.judge if setting.request.data_options.metric is not None else None
        self.evaluator = Evaluator(setting.src, setting.samples, self._candidate,
                                   Task(self._sample_judge(user_metric), floor_low, task.decoder),
                                   wants_external(model, setting.src))

    def _sample_judge(self, user_metric):
        """A sample passes when the user's metric (if any) holds and no output moves beyond the floor."""
        outputs = outputs_judge(self.judge)

        def judge(ref, conv, floor_out, index):
            failed = user_metric(ref, conv, floor_out, index) if user_metric is not None else None
            return failed or outputs(ref, conv, floor_out, index)
        return judge

    def __call__(self, islands: Sequence[Island]) -> Tuple[Evaluation, float, str]:
        self.judge.worst = (0.0, "")
        outcome = self.evaluator({name: "a release candidate" for island in islands for name in island.nodes})
        self.judge.recording = False  # the first trial is the baseline
        return outcome, self.costs[-1], self.judge.worst[1] or "every output as the planned conversion's"

    def _candidate(self, pins: Mapping[str, str]) -> ir.Model:
        done = self.setting.build(dataclasses.replace(self.setting.base, lowered=dict(pins)))
        self.costs.append(self.setting.cost(done))
        return done.model

    def close(self) -> None:
        """Remove the candidates' files."""
        self.evaluator.close()


class GroupTest:
    """Steps 2-4 over the islands: what is released so far, its GPU cost, and the record.

    ``trial`` evaluates a candidate (``Candidates``; tests give a fake). The
    budget is ``result.budget`` evaluations and ``seconds`` of time.
    """

    def __init__(self, trial: Trial, result: ReleaseResult, seconds: Optional[float] = None) -> None:
        self.trial = trial
        self.result = result
        self.seconds = SECONDS if seconds is None else seconds
        self.accepted: List[Tuple[Island, str]] = []  # each released island, with the effect measured
        self.cost = math.inf
        self.started = time.perf_counter()

    def _run(self, batch: Sequence[Island]) -> Tuple[Evaluation, float, str]:
        outcome, cost, effect = self.trial([island for island, _ in self.accepted] + list(batch))
        self.result.evaluations.append(outcome)
        return outcome, cost, effect

    def left(self) -> bool:
        """Whether another evaluation may start: budget, and time (the mean so far must end within it)."""
        spent = len(self.result.evaluations)
        if spent >= self.result.budget:
            return False
        elapsed = time.perf_counter() - self.started
        return elapsed + (elapsed / spent if spent else 0.0) <= self.seconds

    def baseline(self) -> bool:
        """Step 2: evaluate the planned conversion, recording its error on each output and its cost."""
        outcome, self.cost, _ = self._run(())
        if not outcome.passed:
            self.result.notes.append(f"the planned conversion does not pass on the evidence ({outcome.detail}): "
                                     "nothing released (the accuracy search, --tune, finds what it needs)")
        return outcome.passed

    def settle(self, batch: List[Island]) -> None:
        """Step 3: try ``batch`` on top of what is released; bisect it when it fails, try an island in parts."""
        if not self.left():
            if not self.result.untried:
                self.result.notes.append(f"the budget ({self.result.budget} evaluations, {self.seconds:g} s) was "
                                         "spent: the islands not tried stay float32")
            self.result.untried.extend(island.record() for island in batch)
            return
        outcome, cost, effect = self._run(batch)
        if outcome.passed and cost <= self.cost:
            self.cost = cost
            self.accepted.extend((island, effect) for island in batch)
            self.result.released.extend(island.record(effect=effect) for island in batch)
            return
        if len(batch) > 1:
            half = len(batch) // 2
            self.settle(batch[:half])
            self.settle(batch[half:])
            return
        parts = batch[0].parts() if not outcome.passed else []
        for part in parts:  # the island itself, part by part
            self.settle([part])
        if not parts:
            why = outcome.detail if not outcome.passed else (
                f"the outputs hold, but the GPU would move more: {cost:.0f} bytes against {self.cost:.0f} (casts "
                "cost more than the float32 they save)")
            self.result.kept.append(batch[0].record(error=why))

    def reasons(self) -> Dict[str, str]:
        """Each lowered node's reason: its rule, the evidence, and the effect measured when it was lowered."""
        reasons = {}
        for island, effect in self.accepted:
            for name, rule in zip(island.nodes, island.rules):
                reasons[name] = (f"float32 by {rule}, tried LOW with {len(island.nodes)} node(s) of its island on "
                                 f"{self.result.evidence} under emulation: the outputs stay within the floor; "
                                 f"{effect}")
        return reasons
