"""``convert``: load -> accept/repair -> plan -> rewrite -> cleanup -> check -> save (atomically).

If onnx.checker or onnxruntime rejects the result for a node (no kernel for
that type, a type clash in inference or in the runtime's graph resolution),
that node is pinned to float32 with the tool's words as the reason, and the
model is planned again (``ampconv.verdict`` reads the words): the tool never
writes a model it knows will not load.
"""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import onnx
import onnx.defs
import onnx_ir as ir

from ampconv.config import Config
from ampconv.conversion_figures import conversion_figures
from ampconv.data.collect import collect
from ampconv.data.samples import calibration_samples
from ampconv.data.stats import Calibration
from ampconv.data.tune import TuneResult, tune_model
from ampconv.errors import AmpconvError, ConversionError, UnsupportedModelError
from ampconv.load import external_data_files, load_model, weight_bytes
from ampconv.checks import check_staged
from ampconv.lowtypes import low_type
from ampconv.opset_upgrade import auto_upgrade_target, default_opset, schema_opset_warning, upgraded_copy
from ampconv.outputs import check_output_path, default_output_path, publish, staging_dir
from ampconv.passes.annotate import AnnotatePass
from ampconv.passes.apply import ApplyPlanPass, ApplyResult
from ampconv.passes.cleanup import CleanupPass, cast_cleanup
from ampconv.passes.interface import UntypeShapelessSubgraphIOPass
from ampconv.passes.opset import EnsureDefaultOpsetPass
from ampconv.passes.pipeline import run_passes
from ampconv.plan import Plan, Planner
from ampconv.plan.coverage import coverage_notes, heavy_warning
from ampconv.plan.ranges import constant_record
from ampconv.policy import Policy, load_policy
from ampconv.prepare import InferTypesPass, NameNodesPass
from ampconv.repair import accept_input, rankless_interface, repair
from ampconv.report import Report
from ampconv.writer import write_model
from ampconv.graphs import all_graphs, fixed_graph_list

MAX_RUNTIME_RETRIES = 8




def convert(src, dst, config: Config, *, dry_run: bool = False) -> Report:
    """See ``ampconv.convert``."""
    # The IR allocates millions of small objects on big graphs; Python's cyclic
    # collector then rescans them repeatedly and makes time grow faster than the
    # node count. Nothing here builds garbage cycles worth collecting mid-run.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        if config.opset is not None:
            return _convert_upgraded(Path(src), dst, config, config.opset, dry_run=dry_run)
        return _convert(src, dst, config, dry_run=dry_run, auto_upgrade=not config.keep_opset)
    finally:
        if was_enabled:
            gc.enable()


def _convert(src, dst, config: Config, *, dry_run: bool = False, auto_upgrade: bool = False) -> Report:
    src = Path(src)
    dst = Path(dst) if dst is not None else default_output_path(src, config.dtype)
    policy = load_policy(
        preset=config.preset,
        mixlists=config.mixlists,
        level=config.level,
        block_ops=config.block_ops,
        target=config.target,
        op_info=config.op_info,
    )
    model = load_model(src, infer_types=True)
    _check_opset(src, model)
    upgrade_failed = None
    target = auto_upgrade_target(model, config.dtype) if auto_upgrade else None
    if target is not None:
        opset, why = target
        try:
            return _convert_upgraded(src, dst, config, opset, dry_run=dry_run, why=why)
        except ConversionError as exc:  # the upgraded copy, or its conversion, failed: convert as it is
            upgrade_failed = (
                f"not upgraded to opset {opset} ({why}): {exc}; converted at the model's opset {default_opset(model)}"
            )
    complaint = accept_input(src)  # raises when the input is invalid for onnxruntime too
    # A model the checker refused is repaired before its types are inferred
    # (repair reports what inference must fill): read it again, as it is.
    infer_at_load = complaint is None
    if not infer_at_load:
        model = load_model(src)
    if not dry_run:
        check_output_path(src, dst, model, config.overwrite)
    data = DataFindings()
    if config.calibration_data:
        data = _data_findings(src, model, policy, config, complaint)
    runtime_pins: Dict[str, str] = {}
    for _attempt in range(MAX_RUNTIME_RETRIES + 1):
        repairs = []
        if complaint is not None:
            repairs = [f"the input fails onnx.checker ({complaint}) but loads in onnxruntime: converted a repaired copy"]
            repairs += repair(model)
        report, model = _convert_once(src, dst, model, policy, config, runtime_pins, dry_run, repairs, data)
        if dry_run or report.output is not None:
            if upgrade_failed:
                report.notes.insert(0, upgrade_failed)
            return report
        model = load_model(src, infer_types=infer_at_load)  # a pin was added: plan again from the original
    raise ConversionError(f"{src}: the checks still reject the model after {MAX_RUNTIME_RETRIES} fixes")


def _convert_upgraded(src: Path, dst, config: Config, opset: int, *, dry_run: bool, why: str = "") -> Report:
    """Convert a copy of ``src`` upgraded to ``opset`` by onnx's version converter.

    The output is checked against the user's own input first (the copy lives
    in a private folder); the report and any error name ``src``. ``why``
    says what the upgrade is for (the default upgrade, ``auto_upgrade_target``).
    """
    dst = Path(dst) if dst is not None else default_output_path(src, config.dtype)
    if not dry_run:
        check_output_path(src, dst, load_model(src), config.overwrite)
    with upgraded_copy(src, opset) as (path, note):
        try:
            report = _convert(path, dst, config, dry_run=dry_run)
        except AmpconvError as exc:
            if path != src:
                exc.args = (str(exc).replace(str(path), str(src)),)
            raise
    report.source = str(src)
    if note:
        reason = f" ({why}; --keep-opset keeps the model's opset)" if why else ""
        report.notes.insert(0, note + reason)
        if report.unchanged:
            # Not "unchanged": the written model has the new opset, and nothing gained by it.
            report.unchanged = False
            report.warnings.append(
                f"no node converts even at opset {opset}: the output differs from the input only by the opset "
                "upgrade; --keep-opset writes the model as it is"
            )
    return report


@dataclasses.dataclass
class DataFindings:
    """What calibration data (and the accuracy search) decided, for every planning attempt."""

    calibration: Optional[Calibration] = None
    tune_pins: Dict[str, str] = dataclasses.field(default_factory=dict)
    tune: Optional[TuneResult] = None


def _data_findings(src: Path, model: ir.Model, policy: Policy, config: Config, complaint) -> DataFindings:
    """Collect activation statistics over the calibration samples, then run the accuracy search if asked.

    ``model`` is only read (its declared inputs); the statistics pass and every
    candidate of the search load copies of ``src`` of their own.
    """
    samples = calibration_samples(model, config)
    calibration = collect(str(src), samples, low_type(config.dtype), random=samples.random)
    calibration.notes = tuple(samples.notes) + tuple(calibration.notes)
    findings = DataFindings(calibration=calibration)
    if not config.tune:
        return findings

    def fresh() -> ir.Model:
        copy = load_model(src, infer_types=complaint is None)
        if complaint is not None:
            repair(copy)
        return copy

    def build(pins):
        report, converted = _convert_once(src, src, fresh(), policy, config, {}, False, [],
                                          DataFindings(calibration, dict(pins)), write=False)
        return converted, report

    findings.tune_pins, findings.tune = tune_model(src, fresh, build, samples, config)
    return findings


def _check_opset(src: Path, model: ir.Model) -> None:
    """Refuse a model whose default opset the installed onnx does not know."""
    supported = onnx.defs.onnx_opset_version()
    default = default_opset(model)
    if default is not None and default > supported:
        raise UnsupportedModelError(
            f"{src}: opset {default} is newer than the installed onnx supports ({supported}); upgrade onnx"
        )


def _convert_once(
    src: Path,
    dst: Path,
    model: ir.Model,
    policy: Policy,
    config: Config,
    runtime_pins: Dict[str, str],
    dry_run: bool,
    repairs: List[str],
    data: Optional[DataFindings] = None,
    *,
    write: bool = True,
) -> Tuple[Report, ir.Model]:
    """Plan and rewrite ``model``; then (``write``, not ``dry_run``) write, check and publish it to ``dst``.

    No step adds or removes a node that holds a subgraph, so the model's graph
    list is walked once for the whole conversion (``fixed_graph_list``).
    """
    with fixed_graph_list(model):
        data = data or DataFindings()
        run_passes(model, NameNodesPass(), InferTypesPass())
        casts_before = _count_casts(model)
        weights_before = weight_bytes(model)
        # Decided before the rewrite: converted initializers become lazy tensors
        # that no longer say they came from external data (hazard 11).
        external = bool(external_data_files(model))
        report = Report(
            source=str(src),
            output=None,
            dtype=config.dtype,
            level=policy.level,
            requested_level=config.level,
            preset=policy.preset,
            policy_sources=list(policy.sources),
            dry_run=dry_run,
            casts_before=casts_before,
            weight_bytes_before=weights_before,
            warnings=list(policy.warnings),
        )
        report.notes.extend(repairs)
        if policy.level_note:
            report.notes.append(policy.level_note)
        report.notes.extend(policy.notes)  # framework names read as ONNX ops, an operator-info base
        report.runtime_pins = [{"node": k, "reason": v} for k, v in sorted(runtime_pins.items())]

        plan: Optional[Plan] = None
        applied = ApplyResult()
        if policy.level != "O0":
            plan = Planner(
                model, policy, config, runtime_pins=runtime_pins, calibration=data.calibration, tune_pins=data.tune_pins
            ).run()
            _fill_plan(report, plan, model)
            opset_warning = schema_opset_warning(plan.nodes, plan.low, model)
            if opset_warning:
                report.warnings.append(opset_warning)
            report.notes.extend(coverage_notes(plan.nodes))
            report.warnings.extend(heavy_warning(plan.nodes, low_type(config.dtype).name))
            # A dry run rewrites too (in memory; converted weights are lazy, so no
            # weight is computed) so that its casts and weights predict the real run.
            # The rewrite checks Loop/Scan state types after it (ConversionError);
            # cleanup repeats its sweep until nothing changes.
            rewrite, sweep, opset = ApplyPlanPass(plan), CleanupPass(), EnsureDefaultOpsetPass()
            run_passes(model, rewrite, cast_cleanup(sweep), opset, UntypeShapelessSubgraphIOPass())
            applied = rewrite.result
            if config.annotate:
                run_passes(model, AnnotatePass(plan))
            report.notes.extend(opset.notes)
            report.initializers = [f.record() for f in applied.initializers]
        elif config.annotate:
            report.warnings.append("annotate: level O0 decides no precision, so no node was stamped")
        report.casts_inserted = applied.casts_inserted
        report.casts_after = _count_casts(model)
        # Derived, so the counts add up: a cast the cleanup bypasses and then drops
        # as dead would otherwise be counted twice.
        report.casts_removed = casts_before + applied.casts_inserted - report.casts_after
        # Measured on the rewritten model (converted tensors are lazy: their size is metadata).
        report.weight_bytes_after = weight_bytes(model)
        report.figures = conversion_figures(model, report.weight_bytes_after, config.shapes).to_dict()
        low_nodes = plan.count("LOW") if plan is not None else 0
        report.unchanged = low_nodes == 0 and applied.casts_inserted == 0 and report.casts_removed == 0
        if data.calibration is not None:
            report.calibration = data.calibration.summary()
        if data.tune is not None:
            report.tune = data.tune.summary()
        if dry_run or not write:
            return report, model

        with staging_dir(dst) as stage:
            staged = stage / dst.name
            written_note = write_model(
                model, staged, external=external, progress=config.progress, max_workers=config.max_workers,
                weights=report.weight_bytes_after,
            )
            if written_note:
                report.notes.append(written_note)
            outcome = check_staged(
                model, staged, src, runtime=config.check_runtime, dtype=config.dtype, known_pins=runtime_pins,
                timings=report.load_check, rankless=rankless_interface(model),
            )
            if outcome.pins:
                runtime_pins.update(outcome.pins)
                return report, model  # output None: the caller plans again
            report.notes.extend(outcome.notes)
            publish(stage, dst)
        report.output = str(dst)
        return report, model


def _fill_plan(report: Report, plan: Plan, model: ir.Model) -> None:
    report.warnings.extend(plan.warnings)
    graph_names = {}
    for graph in all_graphs(model):
        graph_names[graph] = "main" if graph is model.graph else (graph.name or "subgraph")
    for node, node_plan in plan.nodes.items():
        d = node_plan.decision
        report.nodes.append(
            {
                "name": node.name,
                "op_type": node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}",
                "graph": graph_names.get(node.graph, "subgraph"),
                "precision": d.precision,
                "rule": d.rule,
                "reason": d.reason,
                "follows": d.follows,
            }
        )
    final = {node.name: node_plan.decision.precision for node, node_plan in plan.nodes.items()}
    for note in plan.constants:
        report.constants.append(constant_record(note, plan.low, consumer_low=final.get(note.consumer) == "LOW"))


def _count_casts(model: ir.Model) -> int:
    return sum(1 for g in all_graphs(model) for n in g if n.op_type == "Cast" and n.domain in ("", "ai.onnx"))


__all__ = ["convert"]
