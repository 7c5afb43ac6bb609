"""``validate``: run reference and converted models on the same inputs and compare."""

from __future__ import annotations

import copy
import dataclasses
import os
from pathlib import Path
import tempfile
import time

import onnx_ir as ir

from ampconv.errors import AmpconvError, ConversionError, ModelLoadError, UsageError, named, spell_parameters
from ampconv.core.graphs import all_graphs
from ampconv.runtime import facts as runtime_facts
from ampconv.runtime.loadcheck import check_whole_file, first_line
from ampconv.core.lowtypes import low_type
from ampconv.numerics import emulate as emulation
from ampconv.validation import inputs as inputs_mod
from ampconv.numerics import bodies, dimrelations, modelio, runners
from ampconv.validation import comparison, decode, floor, localize, models
from ampconv.validation.metric import MetricError
from ampconv.validation.natures import output_natures, selects
from ampconv.validation.options import ValidateOptions
from ampconv.validation.result import Localization, ValidationResult
from ampconv.validation import criteria as judging
from ampconv.numerics import ownerror
from ampconv.reading.prepare import NameNodesPass
from ampconv.reading.repair import input_refusal
from ampconv.runtime.installed import unreadable_ir

# Notes name the parameters they advise (``named``): the result spells them in Python words, the CLI as flags.
CPU_NATIVE_NOTE = (
    "native on CPUExecutionProvider: onnxruntime's CPU provider computes most float16 ops "
    f"in float32, so fp16 overflow/rounding inside the model can go unseen; use {named('backend', 'emulate')}"
)
RANDOM_NOTE = f"inputs are random (seeded): a weak proxy for real data; pass {named('inputs')} for a stronger check"


# Greedy steps a decoder with a KV cache is decoded for, besides the per-output criteria.
DECODE_STEPS = 8


def validate(reference, converted, options: ValidateOptions | None = None) -> ValidationResult:
    """Compare ``converted`` with the float32 ``reference`` on the same inputs.

    Each model is a path, an ``onnx.ModelProto`` or an ``onnx_ir.Model``
    (``validation.models``: a model in memory runs from a private copy).
    Never raises on drift (read ``result.passed``). Raises ``UsageError`` for
    bad inputs or options (a model of another kind included),
    ``ModelLoadError`` for unreadable models, ``RuntimeMissingError`` without
    onnxruntime, and ``AmpconvError`` when a model cannot be run.
    """
    options = options or ValidateOptions()
    with models.as_files(reference, converted) as (ref_path, conv_path, shown):
        return models.named_as_shown(_validate_files(ref_path, conv_path, options), shown)


def _validate_files(reference: str, converted: str, options: ValidateOptions) -> ValidationResult:
    """``validate`` on two model files."""
    run = _prepare(reference, converted, options)
    timings = {}
    with tempfile.TemporaryDirectory(prefix="ampconv-validate-") as tmp:
        start = time.perf_counter()
        setup = _Setup(backend=run.backend, provider=run.provider, rtol=run.criteria.rtol, atol=run.criteria.atol,
                       tmp=tmp, criteria=run.criteria, metric=options.metric)
        ref_runner, conv_runner = _sessions(run, setup)
        floor_runner = _floor_session(run, setup) if options.floor and run.criteria.mode == judging.DEFAULT else None
        setup = dataclasses.replace(setup, provider=conv_runner.provider)
        timings["prepare_s"] = time.perf_counter() - start
        out_names = ref_runner.output_names()
        # Detection sets read the shapes of the pieces a Concat packs: infer types only for a model that selects.
        typed = run.ref.with_types() if selects(run.ref.model) else run.ref.model
        rules = comparison.Judging(run.criteria, run.dtype, output_natures(typed, dict(options.natures)),
                                   options.metric)
        progress = None
        if options.progress is not None:
            def progress(done, total=run.samples.count):
                options.progress(done, total)
        try:
            compared = _compared(run, (ref_runner, conv_runner, floor_runner), out_names, rules, progress)
        except MetricError:
            raise  # the user's code, not the model: the words name the metric alone
        except AmpconvError as exc:
            raise _with_unset_dims_hint(exc, run, options) from None
        timings["reference_s"] = ref_runner.seconds
        timings["converted_s"] = conv_runner.seconds
        if run.samples.random:
            run.notes.extend(_weak_check_notes(compared.spans, rules.natures))
        decoded = _greedy_decode(run, ref_runner, conv_runner)
        passed = all(o.passed for o in compared.outputs) and (decoded is None or decoded.passed)
        if compared.metric is not None:  # the user's own measure decides; the figures stay for information
            passed = compared.metric.passed
        located = None
        if not passed and options.localize and compared.first_failed is not None:
            start = time.perf_counter()
            check = _FixCheck(run.samples, ref_runner, floor_runner, rules, compared.first_failed,
                              _decode_roles(run))
            located = _localize(run.ref, run.conv, setup, check, options.decisions)
            timings["localize_s"] = time.perf_counter() - start
    return ValidationResult(
        reference=run.ref.path, converted=run.conv.path, passed=passed, backend=run.backend,
        provider=setup.provider, dtype=run.dtype, rtol=run.criteria.rtol, atol=run.criteria.atol,
        tolerance_source=run.source, criteria=run.criteria, random_inputs=run.samples.random,
        input_sources=compared.sources, sample_count=compared.count, outputs=compared.outputs,
        localization=located, notes=tuple(spell_parameters(note) for note in run.notes),
        note_templates=tuple(run.notes), timings=tuple(timings.items()), decode=decoded,
        metric=compared.metric,
    )


def _greedy_decode(run: "_Run", ref_runner: runners.Runner, conv_runner: runners.Runner):
    """For a decoder with a KV cache, a greedy decode of both models from the first sample; else None.

    Per-output criteria judge one step; a decoder's users read the tokens of
    many, each reading the cache the last wrote (``validation.decode``). The
    sessions are the run's own (the converted one emulated or native, as the
    run's backend).
    """
    roles = _decode_roles(run)
    if roles is None:
        return None
    _, first = next(iter(run.samples))
    try:
        return decode.decode_with(ref_runner, conv_runner, roles, first, DECODE_STEPS)
    except AmpconvError as exc:  # a step the first sample cannot continue: the per-output verdict stands alone
        run.notes.append(f"greedy decode not run: {exc}")
        return None


def _decode_roles(run: "_Run"):
    """The decode roles of a decoder with a KV cache (``decode.decode_roles``), else None."""
    try:
        return decode.decode_roles(run.ref.model)
    except UsageError:
        return None


@dataclasses.dataclass(frozen=True)
class _FixCheck:
    """What a suggested fix is checked against: the run's own samples, reference and floor sessions, judging
    and decode roles (so the fix's verdict is the one the run would give), and its first failing sample
    (index, sample, reference outputs), where a fix that is not enough shows first."""

    samples: inputs_mod.SampleStream
    reference: runners.Runner
    floor: runners.Runner | None
    rules: comparison.Judging
    failed: tuple
    decode_roles: object | None = None


@dataclasses.dataclass
class _Run:
    """One validation, prepared: both models read, the LOW type and criteria, the samples, the backend, notes."""

    ref: "_Loaded"
    conv: "_Loaded"
    dtype: str
    criteria: object
    source: str  # where the criteria came from
    samples: inputs_mod.SampleStream
    backend: str
    provider: str
    notes: list


def _prepare(reference: str, converted: str, options: ValidateOptions) -> _Run:
    """Read both models, refuse a pair that is not one model or a converted model no runtime loads, pick the rest."""
    runners.import_runtime()
    ref = _Loaded.read(reference)
    conv = _Loaded.read(converted)
    for loaded in (ref, conv):  # one line naming the runtime and the IR it reads, not onnxruntime's words
        words = unreadable_ir(loaded.model.ir_version)
        if words is not None:
            raise ModelLoadError(f"{loaded.path}: {words}; validate it with an onnxruntime that reads it")
    _check_same_interface(ref.model, conv.model, reference, converted)
    found_dtype = modelio.low_dtype(conv.model)
    _check_order(found_dtype, modelio.low_dtype(ref.model), reference, converted)
    dtype = found_dtype or "fp16"
    load_notes = _loads(conv, reference, dtype)
    criteria, source = options.criteria(dtype)
    samples = _samples(options, modelio.declared_inputs(ref.model), ref.model)
    backend, provider = _pick_backend(options.backend)
    notes = [RANDOM_NOTE] if samples.random else []
    notes.extend(samples.notes)
    if found_dtype is None:
        notes.append(f"{converted}: no float16/bfloat16 tensor found; judged with the fp16 criteria")
    if backend == "native" and provider == runners.CPU:
        notes.append(CPU_NATIVE_NOTE)
    cuda = runners.cuda_state()
    if cuda.listed and not cuda.loads:  # onnxruntime-gpu without CUDA's libraries (a CI runner): said once
        notes.append(f"{cuda.words()}; the converted model ran on the CPU (backend {backend})")
    notes.extend(load_notes)
    return _Run(ref, conv, dtype, criteria, source, samples, backend, provider, notes)


def _sessions(run: _Run, setup: "_Setup") -> tuple:
    """The reference's session (CPU, no graph optimization) and the converted model's, as the backend runs it."""
    conv_path, conv_aliases = _prepare_converted(run.conv, setup, run.notes)
    ref_path, ref_aliases = _prepare_reference(run.ref, setup.tmp)
    ref_runner = runners.make_session(
        ref_path, "reference model", runners.CPU, optimize=False, aliases=ref_aliases, source=run.ref.path
    )
    try:
        conv_runner = runners.make_session(
            conv_path, "converted model", run.provider, optimize=(run.backend == "native"),
            aliases=conv_aliases, source=run.conv.path,
        )
    except AmpconvError as exc:
        if run.backend == "native" and run.provider == runners.CPU:
            # Typically a bfloat16 kernel the CPU provider lacks.
            raise AmpconvError(f"{exc.template} (the CPU provider lacks many LOW kernels: try {named('backend', 'emulate')})") from None
        raise
    if conv_runner.provider != run.provider:
        run.notes.append(f"onnxruntime placed the converted model on {conv_runner.provider}")
    return ref_runner, conv_runner


def _with_unset_dims_hint(exc: AmpconvError, run: "_Run", options: ValidateOptions) -> AmpconvError:
    """A model that fails on random inputs whose open dims were drawn at size 1: the error says so, and how to set them.

    A size-1 axis is a common cause (a reflect Pad needs 2 values, a window
    longer than the input, a mask whose length must be the cache's plus the
    new tokens'): every unset dimension is named at once, with the relations
    the graph records between them and sizes that agree
    (``dimrelations.unset_dims_hint``), so one more run settles them all.
    """
    samples = run.samples
    if not (samples.random and samples.notes):
        return exc
    try:
        model = run.ref.with_types()  # onnx's inference adds the shapes it propagates to those recorded
    except AmpconvError:
        model = run.ref.model
    hint = dimrelations.unset_dims_hint(model, samples.specs, dict(options.shapes)) or samples.notes[0]
    return AmpconvError(f"{exc.template} (the random inputs used size 1 where the model leaves a dimension open, "
                        f"which it may not accept: {hint})")


class _FloorFailed(Exception):
    """The floor model failed on a sample: the comparison starts again without it."""


def _compared(run: "_Run", runners_: tuple, out_names: list, rules, progress) -> comparison.Compared:
    """``comparison.compare`` of the reference, the converted model and the floor (``runners_``).

    The floor is an aid to judgement, never a condition of it: when the
    floor model fails on a sample, every sample is judged again on the
    default criteria alone, and a note says why.
    """
    ref_runner, conv_runner, floor_runner = runners_

    def floor_of(sample):
        try:
            return floor_runner.run(sample)
        except AmpconvError as exc:
            raise _FloorFailed(str(exc)) from None

    def converted(sample):
        return conv_runner.run(sample, out_names)

    try:
        return comparison.compare(run.samples, ref_runner.run, converted, out_names, rules, progress,
                                  run_floor=floor_of if floor_runner is not None else None)
    except _FloorFailed as failed:
        run.notes.append(floor_note(str(failed)))
        return comparison.compare(run.samples, ref_runner.run, converted, out_names, rules, progress)


def floor_note(why: str) -> str:
    """The note of a validation whose floor could not be measured (``why``): the criteria alone judge."""
    return f"the unavoidable error could not be measured ({why}): outputs are judged on the default criteria alone"


def _floor_session(run: _Run, setup: "_Setup"):
    """The floor model's session (``validation.floor``: the reference on its inputs and weights rounded to the
    LOW type; CPU, no graph optimization), or None with a note when it cannot be built or loaded."""
    try:
        run.ref.with_types()  # the floor rounds float32 results: their types must be known
        model = run.ref.copy()
        floor.floor_model(model, low_type(run.dtype))
        before = [v.name for v in run.ref.model.graph.outputs]
        emulation.widen_bfloat16_io(model)
        aliases = _output_aliases(before, model)
        path = modelio.save_derived(model, setup.tmp, "floor", run.ref.external)
        return runners.make_session(path, "floor model", runners.CPU, optimize=False, aliases=aliases,
                                    source=run.ref.path)
    except Exception as exc:  # noqa: BLE001 - the floor is an aid: whatever stops it, the verdict comes without it
        run.notes.append(floor_note(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__))
        return None


# A bounded output whose reference spans less than this share of its range, on random inputs, is a weak check.
WEAK_SPAN = 0.01


def _weak_check_notes(spans: dict, natures: dict) -> list:
    """A hint per bounded output that random inputs leave in a sliver of its range (not a failure)."""
    notes = []
    for name, (low, high) in spans.items():
        nature = natures[name]
        if high - low < WEAK_SPAN * nature.width:
            notes.append(
                f"output {name!r} ({nature.words}) stays within [{low:.3g}, {high:.3g}] on these random inputs: "
                f"a weak check of it; pass real inputs ({named('inputs')}) to judge it where it matters"
            )
    return notes


def _loads(conv: "_Loaded", reference: str, dtype: str) -> list:
    """The converted model's load check (``loadcheck.check_whole_file``: the judges ``convert`` asks, on the
    whole model); raises when it fails, else its notes.

    A model that onnxruntime's graph resolution refuses is refused under
    every backend: emulation would otherwise retype it into a model that
    runs, and pass what no runtime loads. Only a provider without a kernel for
    the LOW type (the CPU provider and bfloat16) is excused, with the
    converter's note. A model onnx.checker refuses but onnxruntime loads
    (nodes out of topological order, as onnxruntime's float16 tool writes
    them; onnxruntime's own ops in the default domain, as onnxruntime-genai's
    builder writes them) is validated, with a note naming who will refuse it.
    """
    try:
        # The whole model is loaded (no probe): validation pays for its sessions anyway.
        notes = check_whole_file(conv.model, Path(conv.path), Path(reference), dtype)
    except ConversionError as exc:
        refusal = input_refusal(Path(reference)) if exc.tool == ConversionError.RUNTIME else None
        if refusal is not None:
            raise ModelLoadError(f"{reference}: the input model is invalid for onnxruntime: {refusal}") from None
        if exc.tool != ConversionError.CHECKER:
            raise ConversionError(f"{conv.path}: {exc}", exc.detail, exc.tool) from None
        return [_checker_only_note(conv.path, exc)]
    return [note for note in notes if "onnxruntime" in note] + _runtime_only_ops_note(conv)


def _runtime_only_ops_note(conv: "_Loaded") -> list:
    """A note when the model holds onnxruntime's own ops in the default domain: onnx.checker leaves them to
    onnxruntime (``loadcheck.checker_error``), and runtimes without them will refuse the model."""
    nodes = (node for graph in all_graphs(conv.model) for node in graph)
    found = sorted(runtime_facts.ONNXRUNTIME.own_default_domain_ops_among(nodes))
    if not found:
        return []
    return [f"{conv.path}: onnx.checker refuses it (No Op registered for {', '.join(found)}: onnxruntime's own ops "
            "in the default domain); onnxruntime runs it, so it was validated, but runtimes without "
            "onnxruntime's own operators (TensorRT, OpenVINO, onnx's reference runtime) will refuse it"]


def _checker_only_note(path: str, exc: ConversionError) -> str:
    """The note for a model onnx.checker refuses: raises unless onnxruntime loads it, else names who refuses it."""
    try:
        runners.make_session(path, "converted model", runners.CPU, optimize=False)
    except AmpconvError as runtime:
        raise ConversionError(f"{path}: {exc}; {runtime}", exc.detail, exc.tool) from None
    words = str(exc).split(": ", 1)[-1]
    if "topologically sorted" in words:
        who = "TensorRT's ONNX parser and other tools that read nodes in order will refuse it"
    elif "No Op registered" in words or "No opset import" in words:
        who = ("runtimes without onnxruntime's own operators (TensorRT, OpenVINO, onnx's reference runtime) "
               "will refuse it")
    else:
        who = "tools that run onnx.checker first (TensorRT's ONNX parser, onnx-simplifier) will refuse it"
    return f"{path}: onnx.checker refuses it ({words}); onnxruntime runs it, so it was validated, but {who}"


@dataclasses.dataclass
class _Loaded:
    """One model file, read once; every session runs the file itself or a copy of ``model``.

    Derivations (emulation, the bfloat16 wrapper, exposing intermediates)
    edit a ``copy()``, never ``model``, so ``model`` stays the model as
    written: localization reads names and types from it. ``Model.clone()``
    copies the graph and shares the weights, so a copy costs no weight I/O.
    """

    path: str
    model: ir.Model
    external: bool  # whether copies are saved with external data (modelio.wants_external)
    typed: bool = False

    @classmethod
    def read(cls, path: str) -> _Loaded:
        model = modelio.load(path)
        return cls(path, model, modelio.wants_external(model, path))

    def with_types(self) -> ir.Model:
        """``model`` with missing tensor types inferred; shape inference runs at most once."""
        if not self.typed:
            modelio.ensure_types(self.model)
            self.typed = True
        return self.model

    def copy(self) -> ir.Model:
        """A copy to derive from (with the types ``with_types`` inferred so far).

        ``Model.clone()`` shares each value's type object too, and setting
        ``Value.dtype`` edits that object in place (emulation retypes LOW
        values that way), so every value of the copy gets its own type.
        """
        try:
            model = self.model.clone()
        except Exception as exc:  # noqa: BLE001 - e.g. a node reading a sparse initializer the IR cannot hold
            raise ModelLoadError(f"{self.path}: cannot be copied to run it for validation ({first_line(exc)})") from None
        for value in modelio.iter_values(model):
            if value.type is not None:
                value.type = copy.deepcopy(value.type)
        return model


@dataclasses.dataclass(frozen=True)
class _Setup:
    """How the converted model runs and how drift is judged, for the check and for localization."""

    backend: str  # "native" or "emulate"
    provider: str  # the converted model's execution provider
    rtol: float
    atol: float
    tmp: str  # folder for derived copies
    criteria: object = None  # criteria.Criteria the outputs are judged by (a fix is checked by them too)
    metric: object = None  # the user's metric (metric.TaskMetric), which decides when given (a fix's check too)


def _check_same_interface(ref_model, conv_model, reference, converted) -> None:
    """Refuse a pair that is not one model before and after conversion, before any session runs.

    Names, then each input's and output's element kind (a float may become
    float16/bfloat16, anything else must stay) and each input's rank and fixed
    dimensions: two unrelated exports often share the names
    ``input``/``output``, and without this the first sign is onnxruntime's raw
    rank or type error mid-run. Output shapes are not compared: a declared
    output shape can be wrong, and the converter writes the inferred one
    where the graph contradicts it (``opset_upgrade.correct_output_shapes``).
    """
    ref_inputs = {s.name: s for s in modelio.declared_inputs(ref_model)}
    conv_inputs = {s.name: s for s in modelio.declared_inputs(conv_model)}
    if sorted(ref_inputs) != sorted(conv_inputs):
        raise UsageError(
            f"{converted}: inputs {list(conv_inputs)} differ from the reference's {list(ref_inputs)} ({reference})"
        )
    ref_out = {v.name: v for v in ref_model.graph.outputs}
    conv_out = {v.name: v for v in conv_model.graph.outputs}
    missing = [n for n in ref_out if n not in conv_out]
    if missing:
        raise UsageError(f"{converted}: lacks the reference's outputs {missing} ({reference})")
    pairs = [("input", n, s.dtype, s.dims, conv_inputs[n].dtype, conv_inputs[n].dims) for n, s in ref_inputs.items()]
    pairs += [("output", n, _elem(v), None, _elem(conv_out[n]), None) for n, v in ref_out.items()]
    for role, name, ref_type, ref_dims, conv_type, conv_dims in pairs:
        problem = _interface_mismatch(ref_type, ref_dims, conv_type, conv_dims)
        if problem:
            raise UsageError(
                f"{converted}: {role} {name!r} {problem} in the reference ({reference}): "
                "these are not one model before and after conversion"
            )


def _elem(value: ir.Value) -> ir.DataType | None:
    return value.type.dtype if isinstance(value.type, ir.TensorType) else None


def _interface_mismatch(ref_type, ref_dims, conv_type, conv_dims) -> str | None:
    """Why a converted input/output cannot stand for the reference's, or None.

    Unknown types, ranks and symbolic dimensions are no evidence either way.
    """
    if ref_type is not None and conv_type is not None and ref_type != conv_type:
        if not (ref_type.is_floating_point() and conv_type.is_floating_point()):
            return f"is {conv_type.name.lower()}, {ref_type.name.lower()}"
    if ref_dims is None or conv_dims is None:
        return None
    if len(ref_dims) != len(conv_dims):
        return f"has rank {len(conv_dims)}, rank {len(ref_dims)}"
    for axis, (a, b) in enumerate(zip(ref_dims, conv_dims)):
        if isinstance(a, int) and isinstance(b, int) and a != b:
            return f"has {b} at axis {axis}, {a}"
    return None


def check_inputs(reference: str, options: ValidateOptions) -> None:
    """Raise ``UsageError`` for inputs ``validate(reference, ..., options)`` would refuse, running nothing.

    ``convert --validate`` calls it before converting, so a sample whose
    names do not match, a missing inputs file or a bad ``--shape`` stops the
    command before the model and report are written. Sample files: the first
    sample is read and checked in full, the names of every ``.npz`` (without
    reading its arrays). Random inputs: shapes resolve and ranges fit.
    """
    ref = modelio.load(os.fspath(reference))
    specs = modelio.declared_inputs(ref)
    stream = _samples(options, specs, ref)
    if stream.random:
        return
    next(iter(stream), None)
    inputs_mod.check_npz_names(options.inputs, specs)


def _samples(options: ValidateOptions, specs, ref_model) -> inputs_mod.SampleStream:
    """The samples as a stream: read or drawn one at a time, so memory never grows with their number."""
    if options.inputs:
        return inputs_mod.SampleStream(options.inputs, specs)
    return inputs_mod.SampleStream((), specs, inputs_mod.RandomDraw(
        options.samples, options.seed, dict(options.shapes), inputs_mod.integer_bounds(ref_model),
        dict(options.input_ranges),
    ))


def _check_order(conv_dtype: str | None, ref_dtype: str | None, reference: str, converted: str) -> None:
    """Refuse a "converted" model without a LOW tensor beside a reference that holds some: swapped arguments.

    Validation compares a model with its float32 reference; with the two
    swapped, the float32 model would be judged against the LOW one and pass.
    """
    if conv_dtype is None and ref_dtype is not None:
        raise AmpconvError(
            f"{converted}: holds no float16/bfloat16 tensor while the reference {reference} holds {ref_dtype} "
            "ones: the arguments look swapped (ampconv validate REFERENCE CONVERTED: the float32 model first)"
        )


def _pick_backend(requested: str) -> tuple[str, str]:
    """(backend, the converted model's provider) for ``requested``: CUDA where it loads, else the CPU."""
    cuda = runners.cuda_available()
    if requested == "auto":
        requested = "native" if cuda else "emulate"
    if requested == "native":
        return "native", runners.CUDA if cuda else runners.CPU
    # Emulation is float32 compute: the CPU provider is exact enough and never uses TF32.
    return "emulate", runners.CPU


def _derive(
    conv: _Loaded, backend: str, float32_nodes=(), bf16_nodes=()
) -> tuple[ir.Model, emulation.EmulationStats | None]:
    """A copy of the converted model as the ``backend`` runs it, and the emulation's stats.

    Emulation needs every tensor's type: they are inferred once on ``conv``
    and every copy inherits them. ``float32_nodes``, ``bf16_nodes``: emulate
    those nodes kept float32, or in bfloat16 (a fix to check).
    """
    if backend == "emulate" or float32_nodes or bf16_nodes:
        conv.with_types()
        model = conv.copy()
        return model, emulation.emulate(model, infer_types=False, float32_nodes=float32_nodes,
                                        bf16_nodes=bf16_nodes)
    model = conv.copy()
    emulation.widen_bfloat16_io(model)
    return model, None


def _output_aliases(before: list[str], model: ir.Model) -> dict[str, str]:
    """Old name -> new name of each main-graph output a derivation renamed.

    Emulation and the bfloat16 wrapper keep the outputs' positions; an output
    that is also a graph input cannot keep its name (the input keeps it, the
    harness feeds it by name), so the runner asks for the new one.
    """
    after = [v.name for v in model.graph.outputs]
    return {old: new for old, new in zip(before, after) if old != new}


def _prepare_reference(ref: _Loaded, tmp: str) -> tuple[str, dict[str, str]]:
    """Path of the model the reference session runs and its output aliases.

    numpy cannot take bfloat16 from onnxruntime ("No corresponding Numpy
    type"). Reading the raw buffer of an OrtValue works only for CPU memory
    and through a private pointer; a copy wrapped with exact Casts to float32
    (``widen_bfloat16_io``) works on every provider and onnxruntime version,
    and every bfloat16 value is exactly a float32, so nothing is lost.
    """
    if not _has_bf16_io(ref.model):
        return ref.path, {}
    before = [v.name for v in ref.model.graph.outputs]
    model = ref.copy()
    emulation.widen_bfloat16_io(model)
    aliases = _output_aliases(before, model)
    return modelio.save_derived(model, tmp, "reference", ref.external), aliases


def _prepare_converted(conv: _Loaded, setup: _Setup, notes: list) -> tuple[str, dict[str, str]]:
    """Path of the model the converted session runs (the emulated copy, a bf16-I/O wrapper, or the file itself) and its output aliases."""
    if setup.backend == "native" and not _has_bf16_io(conv.model):
        return conv.path, {}
    before = [v.name for v in conv.model.graph.outputs]
    model, stats = _derive(conv, setup.backend)
    if stats is not None and stats.untyped:
        notes.append(
            f"{conv.path}: {stats.untyped} tensor(s) have no inferable type and are not rounded by emulation"
        )
    if stats is not None and stats.unrounded:
        notes.append(f"{conv.path}: {stats.unrounded} LOW sequence/optional value(s) are not rounded by emulation")
    aliases = _output_aliases(before, model)
    return modelio.save_derived(model, setup.tmp, "converted", conv.external), aliases


def _has_bf16_io(model: ir.Model) -> bool:
    values = list(model.graph.inputs) + list(model.graph.outputs)
    return any(v.dtype == ir.DataType.BFLOAT16 for v in values)


def _expose_widened(model: ir.Model, names, inner=()) -> dict[str, str]:
    """Expose ``names`` (main graph) and ``inner`` (inside bodies, ``bodies.expose_body_values``) as outputs,
    bfloat16 ones through an exact Cast to float32; returns output aliases (a body value's name -> its output).

    Exposed first, widened second: ``expose`` finds tensors by their names,
    which the wrapper hands to its Casts.
    """
    modelio.expose(model, names)
    routed = bodies.expose_body_values(model, inner)
    before = [v.name for v in model.graph.outputs]
    emulation.widen_bfloat16_io(model)
    renamed = _output_aliases(before, model)
    return {**renamed, **{name: renamed.get(output, output) for name, output in routed.items()}}


def _localize(ref: _Loaded, conv: _Loaded, setup: _Setup, check: _FixCheck, decisions) -> Localization:
    """Run copies of both models exposing their shared float intermediates on the first failing sample.

    A suggested fix is checked against what the run was judged on (``check``).
    """
    index, sample, _expected = check.failed
    ref_floats = localize.float_node_outputs(ref.with_types())
    conv_floats = localize.float_node_outputs(conv.with_types())  # as written: names and types the user sees
    names = [n for n in conv_floats if n in ref_floats]
    ref_inner = localize.float_node_outputs(ref.model, inside_bodies=True)
    inner = [n for n in localize.float_node_outputs(conv.model, inside_bodies=True) if n in ref_inner]
    if not names and not inner:
        return Localization(backend=setup.backend, sample=index, checked=0)
    try:
        fetch, ref_values, conv_values = _run_exposed(ref, conv, setup, sample, names, inner)
    except AmpconvError:
        if not inner:
            raise
        # onnxruntime refused the copies routing body values out: localize on the main graph alone.
        fetch, ref_values, conv_values = _run_exposed(ref, conv, setup, sample, names, [])
    dtype = modelio.low_dtype(conv.model) or "fp16"
    strict = getattr(setup.criteria, "mode", "default") == "strict"
    judge = localize.elementwise_judge(setup.rtol, setup.atol) if strict else localize.drift_judge(dtype)
    keys = modelio.low_keys(conv.model)  # fp16 and bf16 both (a fallback model): fp16's range is the LOW range
    low_max = min(low_type(key).max for key in keys) if keys else low_type(dtype).max
    located = localize.first_divergence(
        conv.model, localize.Observed(fetch, ref_values, conv_values), judge, (setup.backend, index), low_max, decisions
    )
    if located.overflow:
        keep = localize.out_of_range_nodes(conv.model, ref_values, low_max)
        cause = {
            "node": located.node, "op_type": located.op_type, "own_error": "inf", "output": located.output,
            "suggestion": localize.keep_pattern(keep), "options": localize.keep_options(keep), "nodes": keep,
        }
        fix = _overflow_fix(conv, setup, check, cause)
    else:
        cause = _cause(ref, conv, sample, located.node)
        fix = _check_fix(conv, setup, check, cause) if cause is not None else None
    return dataclasses.replace(located, cause=cause, fix=fix)


def _run_exposed(ref: _Loaded, conv: _Loaded, setup: _Setup, sample, names, inner) -> tuple:
    """Run copies of both models exposing ``names`` and the body values ``inner`` on ``sample``.

    Returns (the names both copies return, the reference's values, the converted model's values).
    """
    ref_copy = ref.copy()
    ref_aliases = _expose_widened(ref_copy, names, inner)
    ref_path = modelio.save_derived(ref_copy, setup.tmp, "reference_localize", ref.external)

    conv_copy, _ = _derive(conv, setup.backend)
    conv_aliases = _expose_widened(conv_copy, names, inner)
    conv_path = modelio.save_derived(conv_copy, setup.tmp, "converted_localize", conv.external)

    ref_runner = runners.make_session(
        ref_path, "reference model (localization copy)", runners.CPU, optimize=False,
        aliases=ref_aliases, source=ref.path,
    )
    conv_runner = runners.make_session(
        conv_path, "converted model (localization copy)", setup.provider, optimize=(setup.backend == "native"),
        aliases=conv_aliases, source=conv.path,
    )
    ref_names = set(ref_runner.output_names())
    conv_names = set(conv_runner.output_names())
    fetch = [n for n in list(names) + list(inner) if n in ref_names and n in conv_names]
    try:
        return fetch, ref_runner.run(sample, fetch), conv_runner.run(sample, fetch)
    except AmpconvError as exc:
        raise AmpconvError(f"localization failed: {exc}") from None


def _overflow_fix(conv: _Loaded, setup: _Setup, check: _FixCheck, cause: dict) -> dict | None:
    """The checked fix of an overflow: its nodes in bfloat16 first, float32 when that does not pass.

    In a float16 conversion, bfloat16 holds the range at float16's speed: the
    nodes are emulated as ``--keep-bf16`` would convert them (bfloat16 where
    the schema admits it, ``localize.bf16_split``; float32 elsewhere) and, if
    the outputs pass, ``cause``'s suggestion becomes ``--fallback-dtype bf16
    --keep-bf16 ...``. Otherwise (bfloat16's 8 bits lose what the outputs
    need) float32 is checked and suggested as before, the bfloat16 try's
    words kept in ``bf16_after``. ``fix["runs"]`` says which type the fix puts
    the nodes in.
    """
    nodes = cause["nodes"]
    in_bf16, _ = localize.bf16_split(conv.model, nodes)
    tried = None
    if in_bf16 and "fp16" in modelio.low_keys(conv.model):
        bf16 = dict(cause, suggestion=localize.keep_bf16_pattern(nodes), options=localize.keep_bf16_options(nodes))
        tried = _check_fix(conv, setup, check, bf16, bf16_nodes=in_bf16)
        if tried is not None and tried["passes"]:
            cause["suggestion"], cause["options"] = tried["suggestion"], tried["options"]
            return dict(tried, runs="bf16")
    fix = _check_fix(conv, setup, check, cause)
    if fix is None:
        return None
    fix["runs"] = "float32"
    if tried is not None:
        fix["bf16_after"] = tried["after"]
    return fix


def _check_fix(conv: _Loaded, setup: _Setup, check: _FixCheck, cause: dict, bf16_nodes=()) -> dict | None:
    """Run the suggested fix (its nodes kept float32, under emulation): does it pass what the run was judged on?

    Exactly the fix's nodes (``cause["nodes"]``, what the suggestion names)
    are kept. First on the failing sample, where a fix that is not enough
    shows at once; then, if it passes there, on every sample of the run, by
    the run's criteria (floor included; the user's metric instead, when
    given: the fix passes when it holds) and its greedy decode for a decoder:
    the verdict the fixed conversion would get, so a suggestion is never a
    guess. The worst output's words are quoted, and ``checked`` says on what.
    ``bf16_nodes``: those of the fix's nodes that run bfloat16 (the rest
    float32), still judged by the failing run's criteria (float16's, stricter
    than bfloat16's: a bfloat16 fix must meet the bar the user's float16
    conversion set).
    """
    nodes = cause.get("nodes") or [cause["node"]]
    in_bf16 = set(bf16_nodes)
    model, _ = _derive(conv, "emulate", float32_nodes=[n for n in nodes if n not in in_bf16], bf16_nodes=bf16_nodes)
    path = modelio.save_derived(model, setup.tmp, "converted_fix", conv.external)
    try:
        runner = runners.make_session(path, "converted model with the fix", runners.CPU, optimize=False,
                                      source=conv.path)
        verdict = _fix_verdict(runner, check)
    except MetricError:
        return None  # the user's metric could not judge the fix's outputs: the suggestion stands unchecked
    except (AmpconvError, ValueError):
        return None  # the emulated fix could not run, or an output's shape changed: the suggestion stands unchecked
    passes, after, checked = verdict
    return {"nodes": list(nodes), "suggestion": cause["suggestion"], "options": cause.get("options"),
            "passes": passes, "after": after,
            "checked": {**checked, "backend": "emulate",
                        "criteria": (f"metric {check.rules.metric.name}" if check.rules.metric is not None
                                     else check.rules.criteria.describe()),
                        "random": check.samples.random}}


def _fix_verdict(runner: runners.Runner, check: _FixCheck) -> tuple:
    """(passes, the worst output's words, {"samples": N, "sample": the first failing one or None}) of the fixed
    model: the failing sample first, then every sample of the run and its greedy decode."""
    index, sample, expected = check.failed
    names = [n for n in expected if n in runner.output_names()]
    floor_out = check.floor.run(sample) if check.floor is not None else None
    got = runner.run(sample, names)
    metric = check.rules.metric
    if metric is not None:  # the user's metric decides: the fix passes when it holds
        held = metric.judge(comparison.read_only(expected), comparison.read_only(got), sample=index)
        if not held.held:
            return False, _metric_words(metric, held), {"samples": 1, "sample": index}
        worst = None
    else:
        results = [comparison.judge_output(n, expected, got, check.rules, floor_out)
                   for n in names]  # judged as validate judges: a detection set as a set, a sequence as sequences
        worst = max(results, key=lambda m: (not m.passed, m.severity or 0.0)) if results else None
        if not all(m.passed for m in results):
            return False, worst.decided_by if worst is not None else "", {"samples": 1, "sample": index}
    compared = comparison.compare(check.samples, check.reference.run, lambda s: runner.run(s, names), names,
                                  check.rules, run_floor=check.floor.run if check.floor is not None else None)
    folded = [o.worst for o in compared.outputs if o.worst is not None]
    worst = max(folded, key=lambda m: (not m.passed, m.severity or 0.0)) if folded else worst
    failed_at = compared.first_failed[0] if compared.first_failed is not None else None
    if compared.metric is not None:
        passes, after = compared.metric.passed, compared.metric.summary()
    else:
        passes = all(o.passed for o in compared.outputs)
        after = next((o.decided_by for o in compared.outputs if not o.passed), worst.decided_by if worst else "")
    if passes and check.decode_roles is not None:
        _, first = next(iter(check.samples))
        decoded = decode.decode_with(check.reference, runner, check.decode_roles, first, DECODE_STEPS)
        if not decoded.passed:
            passes, after, failed_at = False, decoded.summary(), 0
    return passes, after, {"samples": compared.count, "sample": failed_at}


def _metric_words(metric, check) -> str:
    """The user's metric's verdict on the fix, in its words."""
    return f"metric {metric.name} {'holds' if check.held else 'fails'}" + (f": {check.words}" if check.words else "")


def _cause(ref: _Loaded, conv: _Loaded, sample, visible: str | None) -> dict | None:
    """The LOW node whose own rounding causes the drift (``localize.name_cause``), measured on ``sample``.

    Each LOW node of the converted model is computed again beside the
    reference from the reference's exact inputs (``ampconv.numerics.ownerror``):
    unlike the first diverging node, this names where precision is lost, not
    where the loss becomes visible.
    """
    dtype = modelio.low_dtype(conv.model) or "fp16"
    slots = ownerror.slots_from_converted(conv.model)
    copy = ref.copy()
    NameNodesPass()(copy)  # the names the converter gave unnamed nodes
    try:
        errors = ownerror.measure(copy, ref.path, slots, [("sample", sample)], low_type(dtype), ref.external)
    except AmpconvError:
        return None  # the twins could not run (an op without a float32 kernel twin): keep the visible node
    return localize.name_cause(conv.model, errors, visible, dtype)
