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
from typing import Callable, Dict, List

import onnx
import onnx.defs
import onnx_ir as ir

from ampconv.config import Config
from ampconv.calibration import synthetic
from ampconv.numerics.collect import collect
from ampconv.calibration.samples import calibration_samples
from ampconv.errors import AmpconvError, ConversionError, UnsupportedModelError, command_line_text, named, spell_parameters
from ampconv.reading.load import load_model
from ampconv.core.lowtypes import low_type
from ampconv.pipeline.opset_upgrade import auto_upgrade_target, default_opset, fallback_upgrade_target, upgraded_copy
from ampconv.writing.outputs import check_output_path, default_output_path
from ampconv.policy import Policy, load_policy
from ampconv.reading.repair import accept_input, repair
from ampconv.runtime.installed import unreadable_ir
from ampconv.runtime.target import Target, choose_target
from ampconv.report import Report
from ampconv.pipeline.figures import moved_bytes
from ampconv.pipeline.stages import DataFindings, Request, Rewritten, report_of, rewrite, write_checked
from ampconv.plan.search_pins import SearchPins
from ampconv.pipeline.users_repair import users_pins
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
    """Read the input once, guard the output, choose the opset, then run one linear pipeline.

    The opset is chosen first, in a stage of its own (``_choose_opset``):
    ``config.opset``, else the default upgrade when the model's opset keeps
    heavy ops or Q/DQ nodes from the LOW type or from the fallback type. The
    pipeline then runs once, on the upgraded copy or on the model as it is;
    it never calls back into this choice. ``config.opset`` fails with its
    upgrade; a default upgrade that fails converts the model at its own opset,
    with a note.
    """
    dst = Path(dst) if dst is not None else default_output_path(src, config.dtype)
    target = choose_target(config.target, config.runtime)
    policy = load_policy(**{**dataclasses.asdict(config.policy_options), "target": target})
    model = load_model(src, infer_types=True)
    _check_opset(src, model)
    if config.check_runtime:
        _check_ir(src, model)
    if not dry_run:
        check_output_path(src, dst, model, config.overwrite)
    request = _request(src, dst, policy, config, dry_run, target)
    choice, at_model = _choose_opset(request, model, config)
    if choice is None:
        return _pipeline(at_model or _Prepared.of(request, model))
    try:
        return _convert_upgraded(request, choice)
    except ConversionError as exc:  # the upgraded copy, or its conversion, failed
        if choice.forced:
            raise
        return _not_upgraded(_pipeline(at_model or _Prepared.of(request, model)), choice, exc, model)


@dataclasses.dataclass(frozen=True)
class _OpsetChoice:
    """The opset the pipeline runs at: ``target``, why (empty for ``opset=N``), and whether the user asked it."""

    target: int
    why: str
    forced: bool


def _choose_opset(request: Request, model: ir.Model, config: Config):
    """The opset stage: ``(choice or None, the model prepared at its own opset or None)``.

    ``opset=N`` is forced; ``keep_opset`` keeps the model's; else the default
    upgrade for the LOW type (``auto_upgrade_target``, read from the graph).
    With a fallback type, heavy ops whose values do not fit the LOW type may
    need a later opset for bf16 too: which ones the plan alone says, so the
    model is prepared (accepted, its data read) and planned once in memory
    (``_fallback_target``); the preparation is handed on for the pipeline when
    no upgrade follows.
    """
    if config.opset is not None:
        return _OpsetChoice(config.opset, "", True), None
    if config.keep_opset:
        return None, None
    target = auto_upgrade_target(model, config.dtype, request.policy)
    if target is not None:
        return _OpsetChoice(target[0], target[1], False), None
    fallback = request.plan_options.fallback
    if fallback is None or auto_upgrade_target(model, fallback.key, request.policy) is None:
        return None, None
    prepared = _Prepared.of(request, model)
    later = _fallback_target(prepared)
    return (None if later is None else _OpsetChoice(later[0], later[1], False)), prepared


def _not_upgraded(report: Report, choice: _OpsetChoice, exc: ConversionError, model: ir.Model) -> Report:
    """``report`` of a conversion at the model's opset after the default upgrade to ``choice`` failed, saying so."""
    report.notes.insert(0, f"not upgraded to opset {choice.target} ({choice.why}): {exc}; converted at the "
                           f"model's opset {default_opset(model)}")
    # The opset the upgrade could not reach is no advice: converting there is what failed.
    report.warnings = [w for w in report.warnings if f"--opset {choice.target})" not in w]
    return report


@dataclasses.dataclass
class _Prepared:
    """A model accepted (or repaired) and its evidence read: what the attempts start from."""

    request: Request
    model: ir.Model
    complaint: object  # the checker's refusal of an input onnxruntime loads, or None
    data: DataFindings
    data_notes: List[str]

    @classmethod
    def of(cls, request: Request, model: ir.Model) -> "_Prepared":
        """Accept ``model`` (read from ``request.src``) and read its evidence: calibration data or the synthetic run."""
        src, policy = request.src, request.policy
        complaint = accept_input(src, model)  # raises when the input is invalid for onnxruntime too
        # A model the checker refused is repaired before its types are inferred
        # (repair reports what inference must fill): read it again, as it is.
        if complaint is not None:
            model = _read_again(src, complaint)
        data, data_notes = DataFindings(), []
        if request.data_options.calibration_data:
            data = _data_findings(request, model, complaint)
        elif synthetic.wanted(request.data_options, policy.level, policy.range_guards):
            calibration, data_notes, skipped, draw = synthetic.synthetic_run(
                str(src), model, request.data_options, low_type(request.plan_options.dtype),
                fresh=complaint is not None)
            data = DataFindings(calibration=calibration, synthetic_skipped=skipped, synthetic_draw=draw)
        return cls(request, model, complaint, data, list(data_notes))

    def fresh(self) -> ir.Model:
        """A new copy of the input, read as this preparation read it (a pin was added: plan again)."""
        return _read_again(self.request.src, self.complaint)


def _pipeline(prepared: _Prepared) -> Report:
    """Rewrite, write and check ``prepared`` until it loads; the evidence's notes close the report."""
    report = _attempts(prepared.request, prepared.model, prepared.fresh, prepared.complaint, prepared.data)
    report.notes.extend(prepared.data_notes)
    if prepared.data_notes and prepared.data.calibration is None:  # the synthetic run was wanted but not made
        unjudged = synthetic.unjudged_note(report.nodes)
        if unjudged:
            report.notes.append(unjudged)
    return report


def _attempts(request: Request, model: ir.Model, fresh, complaint, data: DataFindings) -> Report:
    """Rewrite, write and check until the checks accept the model; the loop owns the runtime pins.

    The first plan is the release step's (``_released``: its float32 islands
    tried back in LOW on the evidence), reused when it lowers nothing. Each
    refusal that blames nodes not pinned yet pins them (the tool's words as
    the reason) and plans again from a ``fresh()`` copy of the input: a
    constant the rewrite would round past its type's range, a node the load
    check refuses, a session users build that crashes or refuses
    (``pipeline.users_repair``).
    """
    pins: Dict[str, str] = {}
    repairs_said: List[str] = []
    done = None
    release_pending = _release_wanted(request, data)
    for _attempt in range(MAX_RUNTIME_RETRIES + 1):
        repairs = ()
        if complaint is not None:
            repairs = (f"the input fails onnx.checker ({complaint}) but loads in onnxruntime: converted a repaired copy",
                       *repair(model))
        attempt = dataclasses.replace(request, repairs=repairs)
        if release_pending:  # once, on the first plan: its float32 islands are what the step tries
            release_pending = False
            with fixed_graph_list(model):
                done = rewrite(attempt, model, pins, data)
            data = _released(request, done.plan, fresh, data, complaint)
            if data.tune_pins.lowered:
                model = _repaired_copy(fresh(), complaint)
        # No stage adds or removes a node that holds a subgraph: the graph list is walked once.
        with fixed_graph_list(model):
            done = done if _planned(model, done) else rewrite(attempt, model, pins, data)
            beyond = {name: why for name, why in done.beyond.items() if name not in pins}
            if beyond:  # a constant rounded past its type's range: its readers run float32, planned again
                pins = {**pins, **{name: f"the rewrite's value check: {why}" for name, why in beyond.items()}}
                model = fresh()
                continue
            report = report_of(attempt, done, pins, data)
            if attempt.dry_run:
                return report
            outcome = write_checked(attempt, done, pins, report)
        if outcome.users_failure is not None:
            fixed = users_pins(attempt, lambda: _repaired_copy(fresh(), complaint), pins, data, done.plan,
                               outcome.users_failure)
            if fixed is None or set(fixed.pins) <= set(pins):
                raise _unrepaired(request.src, outcome.users_failure)
            repairs_said.append(fixed.note)
            pins = {**pins, **fixed.pins}
        elif not outcome.pins:
            report.notes.extend(outcome.notes + repairs_said)
            report.output = str(attempt.dst)
            return report
        else:
            pins = {**pins, **outcome.pins}
        model = fresh()
    raise ConversionError(f"{request.src}: the checks still reject the model after {MAX_RUNTIME_RETRIES} fixes")


def _release_wanted(request: Request, data: DataFindings) -> bool:
    """Whether the release step runs: evidence exists (calibration data or the synthetic run) and it is not off."""
    return request.data_options.release and data.calibration is not None and request.policy.level != "O0"


def _planned(model: ir.Model, done) -> bool:
    """Whether ``done`` (a ``Rewritten`` or None) is the rewrite of ``model`` already."""
    return done is not None and done.model is model


def _released(request: Request, plan, fresh, data: DataFindings, complaint) -> DataFindings:
    """``data`` with the nodes the release step lowers (``calibration.release``) and its record.

    Its candidates are built like ``--tune``'s: the same plan and rewrite, in
    memory only, on the evidence's samples (calibration data, or the synthetic
    run's seeded draw).
    """
    # Imported here, not at the top: a conversion without evidence never needs the release step or the
    # search, and their modules (with parts of the validation package under them) cost about 15 ms of every start.
    from ampconv.calibration.release import ReleaseSetting, release, worth_trying

    if plan is None or not worth_trying(plan):
        return data
    options = request.data_options

    def fresh_repaired() -> ir.Model:
        return _repaired_copy(fresh(), complaint)

    build = _candidates(dataclasses.replace(request, dry_run=True), fresh_repaired, data)
    model = fresh_repaired()
    samples = calibration_samples(model, data.synthetic_draw if data.calibration.synthetic else options)
    setting = ReleaseSetting(str(request.src), fresh_repaired, build,
                             lambda done: moved_bytes(done.model, options.shapes), samples, request,
                             data.calibration, data.tune_pins)
    pins, result = release(setting, plan)
    return dataclasses.replace(data, tune_pins=pins, release=result)


def _candidates(dry: Request, fresh_repaired: Callable[[], ir.Model], data: DataFindings
                ) -> Callable[[SearchPins], Rewritten]:
    """How the search and the release step build a candidate: a fresh (repaired) copy of the input, planned with
    the candidate's pins over ``data`` and rewritten in memory only (``dry``: its output is never written)."""

    def build(search_pins: SearchPins) -> Rewritten:
        model = fresh_repaired()
        with fixed_graph_list(model):
            return rewrite(dry, model, {}, dataclasses.replace(data, tune_pins=search_pins))

    return build


def _read_again(src: Path, complaint) -> ir.Model:
    """A new copy of the input, read as the preparation read it: types inferred unless the checker refused it."""
    return load_model(src, infer_types=complaint is None)


def _repaired_copy(model: ir.Model, complaint) -> ir.Model:
    """``model`` as an attempt plans it: repaired first when the input failed onnx.checker (``complaint``)."""
    if complaint is not None:
        repair(model)
    return model


def _unrepaired(src: Path, failure) -> ConversionError:
    """The error when a users' session fails and no float32 pin of the converted nodes makes it load."""
    return ConversionError(
        f"{src}: the converted model does not load the way users load it: {failure.verdict.summary()} "
        "(it loads at ORT_DISABLE_ALL), and keeping the converted nodes float32 does not help",
        failure.verdict.words, ConversionError.RUNTIME,
    )


def _convert_upgraded(request: Request, choice: _OpsetChoice) -> Report:
    """Run the pipeline on a copy of ``request.src`` upgraded to ``choice.target`` by onnx's version converter.

    The output was checked against the user's own input first (the copy lives
    in a private folder); the report and any error name the user's file.
    """
    src = request.src
    with upgraded_copy(src, choice.target) as (path, note):
        try:
            model = load_model(path, infer_types=True)
            _check_opset(src, model)
            report = _pipeline(_Prepared.of(dataclasses.replace(request, src=path), model))
        except AmpconvError as exc:
            if path != src:
                exc.replace_text(str(path), str(src))
            raise
    report.source = str(src)
    if note:
        reason = f" ({choice.why}; {named('keep_opset', True)} keeps the model's opset)" if choice.why else ""
        report.notes.insert(0, note + reason)
        if report.unchanged:
            # Not "unchanged": the written model has the new opset, and nothing gained by it.
            report.unchanged = False
            report.warnings.append(
                f"no node converts even at opset {choice.target}: the output differs from the input only by the "
                f"opset upgrade; {named('keep_opset', True)} writes the model as it is"
            )
    return report


def _fallback_target(prepared: _Prepared):
    """``fallback_upgrade_target`` of ``prepared`` planned once in memory, or None.

    Asked only when some heavy op refuses the fallback type at the model's
    opset (cheap to see); an input the checker refused (repaired before
    planning) is converted at its opset.
    """
    if prepared.complaint is not None:
        return None
    request = prepared.request
    candidate = prepared.fresh()
    with fixed_graph_list(candidate):
        done = rewrite(dataclasses.replace(request, dry_run=True), candidate, {}, prepared.data)
    if done.plan is None:
        return None
    return fallback_upgrade_target(done.plan, request.plan_options.fallback.key)


def _request(src: Path, dst: Path, policy: Policy, config: Config, dry_run: bool, target: Target) -> Request:
    """The typed request of one conversion: ``config`` split into the option groups each stage reads, for the
    ``target`` the policy was loaded for."""
    return Request(src, dst, policy, config.plan_options, config.write_options, config.data_options, dry_run,
                   target=target)


def _data_findings(request: Request, model: ir.Model, complaint) -> DataFindings:
    """Collect activation statistics over the calibration samples, then run the accuracy search if asked.

    ``model`` is only read (its declared inputs); the statistics pass and every
    candidate of the search load copies of ``src`` of their own.
    """
    src, options = request.src, request.data_options
    samples = calibration_samples(model, options)
    calibration = collect(str(src), samples, low_type(request.plan_options.dtype), random=samples.random)
    # Plain text in the calibration section (its notes name the command line's --shape).
    calibration.notes = tuple(spell_parameters(n, command_line_text) for n in samples.notes) + tuple(calibration.notes)
    calibration.reach = {name: max(abs(lo), abs(hi)) for name, (lo, hi) in options.input_ranges}
    findings = DataFindings(calibration=calibration)
    if not options.tune:
        return findings
    from ampconv.calibration.tune import tune_model  # here, not at the top: see _released

    def fresh() -> ir.Model:
        return _repaired_copy(_read_again(src, complaint), complaint)

    # The search's candidates are planned and rewritten in memory only: its output is never written.
    dry = dataclasses.replace(request, dry_run=True)
    build = _candidates(dry, fresh, DataFindings(calibration=calibration))
    findings.tune_pins, findings.tune = tune_model(src, fresh, build, samples, dry, calibration)
    return findings


def _check_opset(src: Path, model: ir.Model) -> None:
    """Refuse a model whose default opset the installed onnx does not know."""
    supported = onnx.defs.onnx_opset_version()
    default = default_opset(model)
    if default is not None and default > supported:
        raise UnsupportedModelError(
            f"{src}: opset {default} is newer than the installed onnx supports ({supported}); upgrade onnx"
        )


def _check_ir(src: Path, model: ir.Model) -> None:
    """Refuse a model at an IR version the installed onnxruntime cannot read: its load check could not judge
    the output (one line naming the runtime and the newest IR it reads, not onnxruntime's own words)."""
    words = unreadable_ir(model.ir_version)
    if words is not None:
        raise UnsupportedModelError(f"{src}: {words}, so its load check cannot judge the output; use an "
                                    "onnxruntime that reads it, or export the model at a lower IR version")


__all__ = ["convert"]
