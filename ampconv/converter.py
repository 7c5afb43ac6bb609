"""``convert``: load -> accept/repair -> plan -> rewrite -> cleanup -> check -> save (atomically).

If onnx.checker or onnxruntime rejects the result for a node (no kernel for
that type, a type clash in inference or in the runtime's graph resolution),
that node is pinned to float32 with the tool's words as the reason, and the
model is planned again (``ampconv.runtime.verdict`` reads the words): the tool never
writes a model it knows will not load.
"""

from __future__ import annotations

import dataclasses
import gc
from pathlib import Path
from typing import Dict, Tuple

import onnx
import onnx.defs
import onnx_ir as ir

from ampconv.config import Config
from ampconv.calibration import synthetic
from ampconv.numerics.collect import collect
from ampconv.calibration.samples import calibration_samples
from ampconv.calibration.tune import tune_model
from ampconv.errors import AmpconvError, ConversionError, UnsupportedModelError, named
from ampconv.reading.load import load_model
from ampconv.core.lowtypes import low_type
from ampconv.pipeline.opset_upgrade import auto_upgrade_target, default_opset, fallback_upgrade_target, upgraded_copy
from ampconv.writing.outputs import check_output_path, default_output_path
from ampconv.policy import Policy, load_policy
from ampconv.reading.repair import accept_input, repair
from ampconv.report import Report
from ampconv.pipeline.stages import DataFindings, Request, Rewritten, report_of, rewrite, write_checked
from ampconv.core.graphs import fixed_graph_list

MAX_RUNTIME_RETRIES = 8




def convert(src, dst, config: Config, *, dry_run: bool = False) -> Report:
    """See ``ampconv.convert``."""
    # The IR allocates millions of small objects on big graphs; Python's cyclic
    # collector then rescans them repeatedly and makes time grow faster than the
    # node count. Nothing here builds garbage cycles worth collecting mid-run.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _convert(Path(src), dst, config, dry_run)
    finally:
        if was_enabled:
            gc.enable()


def _convert(src: Path, dst, config: Config, dry_run: bool) -> Report:
    """One linear pipeline: read the input once, guard the output, upgrade the opset if asked or needed, convert.

    ``config.opset`` upgrades first and fails with the upgrade; the default
    upgrade (``auto_upgrade_target``: the model's opset keeps heavy ops or Q/DQ
    nodes from the LOW type) falls back to the model's own opset, with a note.
    """
    dst = Path(dst) if dst is not None else default_output_path(src, config.dtype)
    policy = load_policy(**dataclasses.asdict(config.policy_options))
    model = load_model(src, infer_types=True)
    _check_opset(src, model)
    if not dry_run:
        check_output_path(src, dst, model, config.overwrite)
    if config.opset is not None:
        return _convert_upgraded(src, dst, config, policy, (config.opset, ""), dry_run)
    target = None if config.keep_opset else auto_upgrade_target(model, config.dtype, policy)
    if target is None:
        return _pipeline(src, dst, config, policy, model, dry_run, may_upgrade=not config.keep_opset)
    try:
        return _convert_upgraded(src, dst, config, policy, target, dry_run)
    except ConversionError as exc:  # the upgraded copy, or its conversion, failed: convert as it is
        return _not_upgraded(_pipeline(src, dst, config, policy, model, dry_run), target, exc, model)


def _not_upgraded(report: Report, target: Tuple[int, str], exc: ConversionError, model: ir.Model) -> Report:
    """``report`` of a conversion at the model's opset after the default upgrade to ``target`` failed, saying so."""
    report.notes.insert(0, f"not upgraded to opset {target[0]} ({target[1]}): {exc}; converted at the "
                           f"model's opset {default_opset(model)}")
    # The opset the upgrade could not reach is no advice: converting there is what failed.
    report.warnings = [w for w in report.warnings if f"--opset {target[0]})" not in w]
    return report


def _pipeline(src: Path, dst: Path, config: Config, policy: Policy, model: ir.Model, dry_run: bool,
              may_upgrade: bool = False) -> Report:
    """Accept (or repair) ``model``, read ``src``'s data, and rewrite, write and check until it loads.

    ``may_upgrade``: the default upgrade may still happen, for heavy ops the
    fallback type (``fallback_dtype``) reaches only at a later opset, which a
    plan shows once the data is read (``_fallback_target``).
    """
    complaint = accept_input(src, model)  # raises when the input is invalid for onnxruntime too
    # A model the checker refused is repaired before its types are inferred
    # (repair reports what inference must fill): read it again, as it is.
    infer_at_load = complaint is None
    if not infer_at_load:
        model = load_model(src)
    data, data_notes = DataFindings(), []
    request = _request(src, dst, policy, config, dry_run)
    if config.calibration_data:
        data = _data_findings(request, model, complaint)
    elif synthetic.wanted(request.data_options, policy.level, policy.range_guards):
        calibration, data_notes, skipped = synthetic.synthetic_run(str(src), model, request.data_options,
                                                                   low_type(config.dtype), fresh=not infer_at_load)
        data = DataFindings(calibration=calibration, synthetic_skipped=skipped)

    def fresh() -> ir.Model:
        # A pin was added: plan again from the original.
        return load_model(src, infer_types=infer_at_load)

    later = _fallback_target(request, model, fresh, data, complaint) if may_upgrade else None
    if later is None:
        report = _attempts(request, model, fresh, complaint, data)
    else:  # the fallback type needs a later opset for heavy ops (plan/fallback.py)
        try:
            return _convert_upgraded(src, dst, config, policy, later, dry_run)
        except ConversionError as exc:
            report = _not_upgraded(_attempts(request, model, fresh, complaint, data), later, exc, model)
    report.notes.extend(data_notes)
    return report


def _attempts(request: Request, model: ir.Model, fresh, complaint, data: DataFindings) -> Report:
    """Rewrite, write and check until the checks accept the model; the loop owns the runtime pins.

    Each refusal that blames nodes not pinned yet pins them (the tool's words
    as the reason) and plans again from a ``fresh()`` copy of the input.
    """
    pins: Dict[str, str] = {}
    for _attempt in range(MAX_RUNTIME_RETRIES + 1):
        repairs = ()
        if complaint is not None:
            repairs = (f"the input fails onnx.checker ({complaint}) but loads in onnxruntime: converted a repaired copy",
                       *repair(model))
        attempt = dataclasses.replace(request, repairs=repairs)
        # No stage adds or removes a node that holds a subgraph: the graph list is walked once.
        with fixed_graph_list(model):
            done = rewrite(attempt, model, pins, data)
            report = report_of(attempt, done, pins, data)
            if attempt.dry_run:
                return report
            outcome = write_checked(attempt, done, pins, report)
        if not outcome.pins:
            report.notes.extend(outcome.notes)
            report.output = str(attempt.dst)
            return report
        pins = {**pins, **outcome.pins}
        model = fresh()
    raise ConversionError(f"{request.src}: the checks still reject the model after {MAX_RUNTIME_RETRIES} fixes")


def _convert_upgraded(src: Path, dst: Path, config: Config, policy: Policy, target: Tuple[int, str],
                      dry_run: bool) -> Report:
    """Convert a copy of ``src`` upgraded to opset ``target[0]`` by onnx's version converter.

    The output was checked against the user's own input first (the copy lives
    in a private folder); the report and any error name ``src``. ``target[1]``
    says what the default upgrade is for (``auto_upgrade_target``; empty for
    ``opset=N``).
    """
    opset, why = target
    with upgraded_copy(src, opset) as (path, note):
        try:
            model = load_model(path, infer_types=True)
            _check_opset(src, model)
            report = _pipeline(path, dst, config, policy, model, dry_run)
        except AmpconvError as exc:
            if path != src:
                exc.replace_text(str(path), str(src))
            raise
    report.source = str(src)
    if note:
        reason = f" ({why}; {named('keep_opset', True)} keeps the model's opset)" if why else ""
        report.notes.insert(0, note + reason)
        if report.unchanged:
            # Not "unchanged": the written model has the new opset, and nothing gained by it.
            report.unchanged = False
            report.warnings.append(
                f"no node converts even at opset {opset}: the output differs from the input only by the opset "
                f"upgrade; {named('keep_opset', True)} writes the model as it is"
            )
    return report


def _fallback_target(request: Request, model: ir.Model, fresh, data: DataFindings, complaint):
    """``fallback_upgrade_target`` of a plan made in memory, or None (only with a fallback type: one plan more).

    Asked only when some heavy op refuses the fallback type at the model's
    opset (cheap to see); an input the checker refused (repaired before
    planning) is converted at its opset.
    """
    fallback_dtype = request.plan_options.fallback_dtype
    if fallback_dtype == "float32" or complaint is not None \
            or auto_upgrade_target(model, fallback_dtype, request.policy) is None:
        return None
    candidate = fresh()
    with fixed_graph_list(candidate):
        done = rewrite(dataclasses.replace(request, dry_run=True), candidate, {}, data)
    if done.plan is None:
        return None
    return fallback_upgrade_target(done.plan, fallback_dtype)


def _request(src: Path, dst: Path, policy: Policy, config: Config, dry_run: bool) -> Request:
    """The typed request of one conversion: ``config`` split into the option groups each stage reads."""
    return Request(src, dst, policy, config.plan_options, config.write_options, config.data_options, dry_run)


def _data_findings(request: Request, model: ir.Model, complaint) -> DataFindings:
    """Collect activation statistics over the calibration samples, then run the accuracy search if asked.

    ``model`` is only read (its declared inputs); the statistics pass and every
    candidate of the search load copies of ``src`` of their own.
    """
    src, options = request.src, request.data_options
    samples = calibration_samples(model, options)
    calibration = collect(str(src), samples, low_type(request.plan_options.dtype), random=samples.random)
    calibration.notes = tuple(samples.notes) + tuple(calibration.notes)
    calibration.reach = {name: max(abs(lo), abs(hi)) for name, (lo, hi) in options.input_ranges}
    findings = DataFindings(calibration=calibration)
    if not options.tune:
        return findings

    def fresh() -> ir.Model:
        copy = load_model(src, infer_types=complaint is None)
        if complaint is not None:
            repair(copy)
        return copy

    # The search's candidates are planned and rewritten in memory only: its output is never written.
    request = dataclasses.replace(request, dry_run=True)

    def build(pins) -> Rewritten:
        model = fresh()
        with fixed_graph_list(model):
            return rewrite(request, model, {}, DataFindings(calibration, pins))

    findings.tune_pins, findings.tune = tune_model(src, fresh, build, samples, request, calibration)
    return findings


def _check_opset(src: Path, model: ir.Model) -> None:
    """Refuse a model whose default opset the installed onnx does not know."""
    supported = onnx.defs.onnx_opset_version()
    default = default_opset(model)
    if default is not None and default > supported:
        raise UnsupportedModelError(
            f"{src}: opset {default} is newer than the installed onnx supports ({supported}); upgrade onnx"
        )


__all__ = ["convert"]
