"""One conversion attempt as typed stages: a ``Request``, a ``Rewritten`` model, a ``CheckOutcome``.

``ampconv.converter`` runs them in a retry loop that owns the runtime pins::

    Request --rewrite(model, pins, data)--> Rewritten --write_checked(pins)--> CheckOutcome
                                               |                                 | pins: plan again
                                               +--report_of(pins, data)--> Report (built once, at the edge)

- ``rewrite`` plans the model (``Planner`` -> ``Plan``) and rewrites it in
  memory (apply the plan, clean casts up, opset, annotate). The accuracy
  search (``--tune``) calls it for each candidate and reads the ``Plan``.
- ``report_of`` turns what the stages found into the ``Report``.
- ``write_checked`` writes the rewritten model into a staging folder, checks
  it (``checks.check_staged``) and publishes it when the checks accept it;
  when they blame nodes it returns their pins and publishes nothing.

No stage mutates what another owns: pins come in as a mapping and leave in a
``CheckOutcome``; the plan and the rewrite's counts leave in ``Rewritten``.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional

import onnx_ir as ir

from ampconv.core.precision import Precision
from ampconv.core.domains import op_label
from ampconv.checks.staged import CheckOutcome, CheckSettings, check_staged
from ampconv.options.groups import DataOptions, PlanOptions, WriteOptions
from ampconv.pipeline.figures import conversion_figures
from ampconv.plan.kvcache import cache_summary
from ampconv.plan.search_pins import SearchPins
from ampconv.numerics.activations import Calibration
from ampconv.calibration.synthetic import Skipped, skipped_note
from ampconv.core.graphs import all_graphs
from ampconv.reading.load import external_data_files, weights_and_casts
from ampconv.core.lowtypes import low_type
from ampconv.pipeline.opset_upgrade import default_opset, schema_opset_warning
from ampconv.writing.outputs import publish, staging_dir
from ampconv.passes.annotate import AnnotatePass
from ampconv.passes.apply import ApplyPlanPass, ApplyResult, fed_low_note
from ampconv.passes.fold_batchnorm import FoldBatchNormPass, Folded, fold_reason, folded_note
from ampconv.passes.cleanup import CleanupPass, cast_cleanup
from ampconv.passes.interface import UntypeShapelessSubgraphIOPass
from ampconv.passes.invariants import values_beyond
from ampconv.passes.opset import EnsureDefaultOpsetPass
from ampconv.passes.pipeline import run_passes
from ampconv.plan import Plan, Planner
from ampconv.runtime.schema import normalize_domain
from ampconv.runtime.target import Target, choose_target
from ampconv.plan.coverage import bf16_kernel_notes, coverage_notes, heavy_warning
from ampconv.plan.evidence import wanting_numbers
from ampconv.plan.ranges import constant_record
from ampconv.policy import Policy
from ampconv.reading.prepare import InferTypesPass, NameNodesPass
from ampconv.reading.repair import rankless_interface
from ampconv.reading.sidecar import Checker, big_enough
from ampconv.runtime.usersession import users_levels
from ampconv.report import Report
from ampconv.writing.writer import write_model

if TYPE_CHECKING:  # annotations only: the release step and the search load when evidence asks for them
    from ampconv.calibration.release import ReleaseResult
    from ampconv.calibration.tune import TuneResult


@dataclasses.dataclass(frozen=True)
class Request:
    """What one conversion was asked to do: from where, to where, with which policy and options."""

    src: Path
    dst: Path
    policy: Policy
    plan_options: PlanOptions
    write_options: WriteOptions
    data_options: DataOptions
    dry_run: bool = False
    repairs: tuple = ()  # what the repair of a checker-refused input did, for the report
    # Where the output will run (the runtime's facts and the provider): the plan's context carries it.
    target: Target = dataclasses.field(default_factory=lambda: choose_target(None))


@dataclasses.dataclass
class DataFindings:
    """What the evidence decided (calibration data or the synthetic run, the accuracy search, the release step),
    for every planning attempt."""

    calibration: Optional[Calibration] = None
    tune_pins: SearchPins = dataclasses.field(default_factory=SearchPins)
    tune: Optional[TuneResult] = None
    release: Optional[ReleaseResult] = None  # what the release step tried (None: it had nothing to try)
    # Why the synthetic run was not made (over its budget or memory); the report says what that cost.
    synthetic_skipped: Optional[Skipped] = None
    # The synthetic run's draw (``calibration.synthetic.synthetic_run``): the release step replays its sample.
    synthetic_draw: Optional[DataOptions] = None


@dataclasses.dataclass
class Rewritten:
    """The model after planning and the in-memory rewrite, and what those steps counted.

    ``plan`` is None at level O0 (nothing decided). ``casts_before`` and
    ``weights_before`` are the input's; ``external`` says whether the input
    kept weights in external data (decided before the rewrite: converted
    initializers become lazy tensors that no longer say so).
    """

    model: ir.Model
    plan: Optional[Plan]
    applied: ApplyResult
    casts_before: int
    weights_before: int
    external: bool
    notes: List[str] = dataclasses.field(default_factory=list)
    # Nodes reading a constant rounded past its type's range (``invariants.values_beyond``): name -> why.
    beyond: Dict[str, str] = dataclasses.field(default_factory=dict)
    # BatchNormalization nodes folded into their Conv before planning (``passes.fold_batchnorm``).
    folded: List[Folded] = dataclasses.field(default_factory=list)


def rewrite(request: Request, model: ir.Model, pins: Mapping[str, str], data: DataFindings) -> Rewritten:
    """Plan ``model`` (edited in place) with the runtime ``pins`` and the data findings, then rewrite it.

    A dry run rewrites too (in memory; converted weights are lazy, so no weight
    is computed), so that its casts and weights predict the real run. The
    rewrite checks Loop/Scan state types after it (``ConversionError``);
    cleanup repeats its sweep until nothing changes. ``done.beyond`` names
    the nodes reading a constant rounded past its type's range
    (``invariants.values_beyond``): the converter keeps them float32 and
    plans again.
    """
    run_passes(model, NameNodesPass(), InferTypesPass(request.target.runtime))
    weights, casts = weights_and_casts(model)
    done = Rewritten(model, None, ApplyResult(), casts, weights, bool(external_data_files(model)))
    if request.policy.level == "O0":
        return done
    done.folded = fold_norms(request, model)
    done.plan = Planner(
        model, request.policy, request.plan_options, runtime_pins=dict(pins), calibration=data.calibration,
        tune_pins=data.tune_pins, target=request.target,
    ).run()
    apply, opset = ApplyPlanPass(done.plan), EnsureDefaultOpsetPass()
    run_passes(model, apply, cast_cleanup(CleanupPass()), opset, UntypeShapelessSubgraphIOPass())
    done.applied = apply.result
    if done.plan.ranges is not None:
        done.beyond = values_beyond(model, done.plan.ranges.source_peak)
    if request.write_options.annotate:
        run_passes(model, AnnotatePass(done.plan))
    done.notes.extend(opset.notes)
    return done


def fold_norms(request: Request, model: ir.Model) -> List[Folded]:
    """Fold the model's Conv -> BatchNormalization pairs where the LOW type has no norm kernel (``fold_reason``)."""
    options = request.plan_options
    reason = fold_reason(options.dtype, request.target, default_opset(model) or 1)
    if reason is None:
        return []
    fold = FoldBatchNormPass(reason, request.policy, [re.compile(p) for p in options.keep_fp32])
    run_passes(model, fold)
    return fold.folded


def report_of(request: Request, done: Rewritten, pins: Mapping[str, str], data: DataFindings) -> Report:
    """The report of one attempt, built from the request, the stages' values and the data findings."""
    policy = request.policy
    report = Report(
        source=str(request.src), output=None, dtype=request.plan_options.dtype, level=policy.level,
        requested_level=policy.requested_level, preset=policy.preset, policy_sources=list(policy.sources),
        dry_run=request.dry_run, casts_before=done.casts_before, weight_bytes_before=done.weights_before,
        warnings=list(policy.warnings),
    )
    if request.plan_options.fallback is not None:  # three classes: LOW, FALLBACK (bf16), HIGH
        report.fallback_dtype = request.plan_options.fallback.key
    report.notes.extend(request.repairs)
    if policy.level_note:
        report.notes.append(policy.level_note)
    report.notes.extend(policy.notes)  # framework names read as ONNX ops, an operator-info base
    report.runtime_pins = [{"node": k, "reason": v} for k, v in sorted(pins.items())]
    if done.plan is not None:
        _fill_plan(report, done.plan, done.model)
        report.notes.extend(done.notes)
        report.initializers = [f.record() for f in done.applied.initializers]
        if done.applied.fed_low:
            report.notes.append(fed_low_note(done.applied.fed_low))
        if done.folded:
            report.folded = [dict(f.record()) for f in done.folded]
            report.notes.append(folded_note(done.folded))
    elif request.write_options.annotate:
        report.warnings.append("annotate: level O0 decides no precision, so no node was stamped")
    _fill_counts(report, done, request.data_options.shapes)
    if data.calibration is not None:
        report.calibration = data.calibration.summary()
    if data.synthetic_skipped is not None and done.plan is not None:
        report.notes.append(skipped_note(data.synthetic_skipped, *wanting_numbers(done.plan)))
    if data.tune is not None:
        report.tune = data.tune.summary()
    if data.release is not None:
        report.release = data.release.summary()
    return report


def _fill_counts(report: Report, done: Rewritten, shapes: tuple) -> None:
    """Casts, weights and the GPU figures, measured on the rewritten model (converted tensors are lazy)."""
    report.casts_inserted = done.applied.casts_inserted
    report.weight_bytes_after, report.casts_after = weights_and_casts(done.model)
    # Derived, so the counts add up: a cast the cleanup bypasses and then drops
    # as dead would otherwise be counted twice.
    report.casts_removed = done.casts_before + done.applied.casts_inserted - report.casts_after
    report.figures = conversion_figures(done.model, report.weight_bytes_after, shapes).to_dict()
    if done.plan is not None:
        given = [name for name, _ in shapes]
        report.kv_cache = cache_summary(done.plan.kv_cache, done.model.graph, report.figures["dims"], given)
    low_nodes = done.plan.count(Precision.LOW) if done.plan is not None else 0
    report.unchanged = low_nodes == 0 and done.applied.casts_inserted == 0 and report.casts_removed == 0


def write_checked(request: Request, done: Rewritten, pins: Mapping[str, str], report: Report) -> CheckOutcome:
    """Write ``done.model`` into a staging folder, check it, and publish it to ``request.dst`` when accepted.

    Returns the checks' outcome: its notes when the model was published, or
    the nodes to pin (nothing published) when a check blames nodes not in
    ``pins``, or the users' session that fails (nothing published). The
    writer's note and the checks' timings go into ``report``.
    """
    options = request.write_options
    # A big graph's full checker runs in a child started now, its start-up hidden behind the write.
    checker = Checker() if big_enough(sum(len(g) for g in all_graphs(done.model))) else None
    try:
        with staging_dir(request.dst) as stage:
            staged = stage / request.dst.name
            written_note = write_model(
                done.model, staged, external=done.external, progress=options.progress,
                max_workers=options.max_workers, weights=report.weight_bytes_after,
            )
            if written_note:
                report.notes.append(written_note)
            settings = CheckSettings(runtime=options.check_runtime, dtype=request.plan_options.dtype,
                                     rankless=rankless_interface(done.model),
                                     levels=users_levels(request.policy.target) if options.check_runtime else ())
            outcome = check_staged(done.model, staged, request.src, settings, known_pins=pins,
                                   timings=report.load_check, checker=checker)
            if not outcome.pins and outcome.users_failure is None:
                publish(stage, request.dst)
    finally:
        if checker is not None:
            checker.cancel()
    return outcome


def plan_warnings(report: Report, plan: Plan, model: ir.Model, dtype: str) -> None:
    """The plan's own warnings: an opset that keeps nodes float32, coverage, heavy ops all float32."""
    opset_warning = schema_opset_warning(plan.nodes, plan.low, model)
    if opset_warning:
        report.warnings.append(opset_warning)
    report.notes.extend(coverage_notes(plan.nodes, plan.target.runtime))
    report.notes.extend(bf16_kernel_notes(plan, {normalize_domain(d): v for d, v in model.opset_imports.items()}))
    report.warnings.extend(heavy_warning(plan.nodes, low_type(dtype).name))


def _fill_plan(report: Report, plan: Plan, model: ir.Model) -> None:
    """Every node's decision, the plan's warnings and the constants' records, into ``report``."""
    report.warnings.extend(plan.warnings)
    plan_warnings(report, plan, model, report.dtype)
    report.interface = [decision.record() for decision in plan.interface]
    if plan.envelope is not None:
        report.envelope = [entry.record() for entry in plan.envelope]
    graph_names = {}
    for graph in all_graphs(model):
        graph_names[graph] = "main" if graph is model.graph else (graph.name or "subgraph")
    for node, node_plan in plan.nodes.items():
        d = node_plan.decision
        report.nodes.append(
            {
                "name": node.name,
                "op_type": op_label(node),
                "graph": graph_names.get(node.graph, "subgraph"),
                "precision": d.precision,
                "rule": d.rule,
                "reason": d.reason,
                "follows": d.follows,
                **_attribute_records(node_plan.attributes),
            }
        )
    final = {node.name: node_plan.decision.precision for node, node_plan in plan.nodes.items()}
    for note in plan.constants:
        record = constant_record(note, plan.low, consumer_low=final.get(note.consumer) == Precision.LOW)
        if plan.fallback and final.get(note.consumer) == Precision.FALLBACK:
            if note.action in ("pinned", "reported"):
                record["action"] = f"consumer runs {plan.fallback}: stored in {plan.fallback}, whose range holds it"
            elif note.action == "mask":
                fallback = low_type(plan.fallback)
                record["action"] = (f"attention-mask fill {note.stats.mask_fill:.4g} stored as {fallback.mask_fill:g}: "
                                    f"its consumer runs {fallback.name}, whose range does not hold float32's lowest "
                                    "(softmax still gives 0; finite, so no NaN rows)")
        report.constants.append(record)


def _attribute_records(attributes) -> dict:
    """The report's ``attributes`` entry of a node: present only on nodes the plan set attributes on."""
    if not attributes:
        return {}
    return {"attributes": [{"name": a.name, "value": a.value, "rule": a.rule, "reason": a.reason} for a in attributes]}
