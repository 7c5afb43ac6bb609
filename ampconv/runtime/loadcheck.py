"""The two judges of a model file: onnx.checker and an onnxruntime CPU session.

Both read the model from its path, never through serialized bytes, so models
over 2 GB (external data) are checked like any other. The converter runs them
on every model it writes (``check_written``), and on an input the checker
refuses (``ampconv.reading.repair``), where onnxruntime has the last word.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, List, Optional, Sequence

import onnx

from ampconv.runtime import facts as runtime_facts
from ampconv.runtime.installed import runtime_words
from ampconv.errors import ConversionError
from ampconv.runtime.verdict import ACCEPT, judge, unregistered_default_op


def first_line(exc: BaseException) -> str:
    """The first line of an exception message, trimmed for a one-line error."""
    text = str(exc).strip().splitlines()
    line = text[0].strip() if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


# The domain a checker copy moves onnxruntime's own default-domain ops into (``checker_error``).
RUNTIME_ONLY_DOMAIN = "ampconv.onnxruntime_default"


def checker_error(path: Path, *, full: bool, rankless: Sequence[str] = ()) -> Optional[Exception]:
    """The checker's exception for the file ``path`` (None when it passes).

    ``full`` adds onnx shape inference with type checking (``full_check``).
    ``rankless`` names main-graph inputs/outputs whose rank is not fixed (an
    If whose branches give different ranks, ``ampconv.reading.repair``): onnx.checker
    requires a shape on every main-graph input and output, and no shape can
    be true for them, so the file is checked through a copy that gives them
    one of rank 0 (onnx's inference leaves such a value's rank open, so any
    rank passes it).

    onnxruntime registers a few ops of its own in the default domain
    (SimplifiedLayerNormalization, which onnxruntime-genai's builder and the
    transformers optimizer write); onnx.checker knows no schema for them and
    refuses the whole model. When it refuses for that reason alone, the
    checker judges a copy whose such nodes sit in a custom domain instead
    (which it does not judge): everything else is still checked, and those
    nodes are left to onnxruntime's load check (``runtime_facts.RuntimeFacts.own_default_domain_ops``
    names them). Copies sit beside ``path``, so external data resolves, and
    are removed before this returns.
    """
    copies: List[Path] = []
    target = Path(path)
    try:
        if rankless:
            target = _edited_copy(Path(path), copies, lambda proto: _give_placeholder_shapes(proto, set(rankless)))
        error = _run_checker(target, full)
        if error is not None and unregistered_default_op(str(error)) in runtime_facts.ONNXRUNTIME.own_default_domain_ops():
            target = _edited_copy(target, copies, _move_runtime_only_ops)
            error = _run_checker(target, full)
        return error
    finally:
        for copy in copies:
            copy.unlink(missing_ok=True)


def _run_checker(path: Path, full: bool) -> Optional[Exception]:
    try:
        onnx.checker.check_model(str(path), full_check=full)
    except Exception as exc:  # noqa: BLE001 - the checker raises several types
        return exc
    return None


def _edited_copy(path: Path, copies: List[Path], edit: Callable[[onnx.ModelProto], None]) -> Path:
    """A copy of the model file ``path`` (weights stay in their data files) with ``edit`` applied to its proto."""
    proto = onnx.load(str(path), load_external_data=False)
    edit(proto)
    copy = Path(path).with_name(f".checker-copy{len(copies)}.{Path(path).name.lstrip('.')}")
    onnx.save(proto, str(copy))
    copies.append(copy)
    return copy


def _give_placeholder_shapes(proto: onnx.ModelProto, names: set) -> None:
    """Give the main-graph inputs/outputs in ``names`` that have no shape a rank-0 one (see ``checker_error``)."""
    for info in list(proto.graph.input) + list(proto.graph.output):
        if info.name in names and info.type.HasField("tensor_type") and not info.type.tensor_type.HasField("shape"):
            info.type.tensor_type.shape.SetInParent()


def _move_runtime_only_ops(proto: onnx.ModelProto) -> None:
    """Move every default-domain node whose op only onnxruntime defines into ``RUNTIME_ONLY_DOMAIN``."""
    ops = runtime_facts.ONNXRUNTIME.own_default_domain_ops()
    moved = False
    for node in _all_proto_nodes(proto.graph):
        if node.domain in ("", "ai.onnx") and node.op_type in ops:
            node.domain = RUNTIME_ONLY_DOMAIN
            moved = True
    if moved and all(o.domain != RUNTIME_ONLY_DOMAIN for o in proto.opset_import):
        proto.opset_import.append(onnx.helper.make_opsetid(RUNTIME_ONLY_DOMAIN, 1))


def _all_proto_nodes(graph: onnx.GraphProto):
    """Every node of ``graph`` and of the subgraphs its attributes hold."""
    for node in graph.node:
        yield node
        for attribute in node.attribute:
            for sub in ([attribute.g] if attribute.HasField("g") else []) + list(attribute.graphs):
                yield from _all_proto_nodes(sub)


def runtime_available() -> bool:
    """Whether onnxruntime can be imported."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


# The optimization level of the load check's own sessions (the users' level: ``ampconv.runtime.usersession``).
UNOPTIMIZED = "ORT_DISABLE_ALL"


def runtime_refusal(path: Path, level: str = UNOPTIMIZED) -> Optional[str]:
    """onnxruntime's whole message when a CPU session cannot load ``path``; None when it loads.

    A model at an IR version the runtime cannot read gets ampconv's one line
    instead (``installed.runtime_words``: which runtime reads which IR).

    Also None when onnxruntime is not installed (see ``runtime_available``).
    The session is created at the graph optimization ``level`` (a
    ``GraphOptimizationLevel`` name), with weight pre-packing disabled. At
    ORT_DISABLE_ALL, onnxruntime memory-maps external data and, so configured,
    does not touch it, so the check costs about 60 MB whatever the model size
    (measured on a 1.35 GB float32 model: 58 MB and 0.3 s; with pre-packing
    on, MatMul copies every float32 weight: 1.25 GB and 4.6 s). Any other
    level folds constants (the CPU provider's Casts of float16 weights become
    float32 copies): the users'-session check (``ampconv.checks.users``) loads
    probes of bounded weight there. The model path in the message is dropped:
    it may be a private staging path.
    """
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    options = ort.SessionOptions()
    # Fatal only: onnxruntime's error lines would repeat, on stderr, the
    # failure that ampconv reports as one line.
    options.log_severity_level = 4
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.add_session_config_entry("session.disable_prepacking", "1")
    try:
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 - any refusal is a verdict
        return runtime_words(str(exc).replace(f"Load model from {path} failed:", "").strip())
    # Drop the session now: it holds maps of the data file, which the
    # converter is about to rename (and on Windows could not while mapped).
    del session
    return None


def check_written(
    path: Path,
    *,
    runtime: bool,
    source: Optional[Path] = None,
    runtime_path: Optional[Path] = None,
    timings: Optional[dict] = None,
    rankless: Sequence[str] = (),
) -> Optional[str]:
    """Check a written model: the full checker (``check_with_checker``), then (``runtime``) an onnxruntime session.

    The session loads ``runtime_path`` when given, else the model itself.
    Raises ``ConversionError`` on failure, with the tool's whole message in
    ``detail``. Returns a note when a check was skipped or relaxed.
    """
    timings = timings if timings is not None else {}
    notes = [n for n in [check_with_checker(path, source=source, timings=timings, rankless=rankless)] if n]
    if not runtime:
        return "; ".join(notes + ["onnxruntime load check skipped"])
    if not runtime_available():
        return "; ".join(notes + ["onnxruntime not installed: load check skipped"])
    check_with_runtime(Path(runtime_path) if runtime_path is not None else Path(path), timings=timings)
    return "; ".join(notes) or None


def check_with_checker(
    path: Path, *, source: Optional[Path] = None, timings: Optional[dict] = None, rankless: Sequence[str] = (),
    full_check: Optional[Callable[[], Optional[Exception]]] = None,
) -> Optional[str]:
    """The full onnx.checker on the written model ``path``; raises ``ConversionError``, or returns a note.

    When the full check fails and the ``source`` model fails it too (onnx's
    shape inference cannot expand some valid models, e.g. a
    MeanVarianceNormalization without ``axes``), the output is held to what the
    source passes: the basic checker. The note says so. ``rankless``: see
    ``checker_error``. ``full_check`` gives the full checker's verdict on
    ``path`` when another process ran it (``sidecar.Checker``).
    ``timings["checker_seconds"]`` records the time taken (waited for).
    """
    path = Path(path)
    timings = timings if timings is not None else {}
    note = None
    start = time.perf_counter()
    full = full_check() if full_check is not None else checker_error(path, full=True, rankless=rankless)
    if full is not None:
        source_error = checker_error(source, full=True) if source is not None else None
        if source_error is None:
            raise ConversionError(
                f"converted model fails onnx.checker: {first_line(full)}", str(full), ConversionError.CHECKER
            )
        basic = checker_error(path, full=False, rankless=rankless)
        if basic is not None:
            raise ConversionError(
                f"converted model fails onnx.checker: {first_line(basic)}", str(basic), ConversionError.CHECKER
            )
        note = (
            f"onnx.checker's shape inference fails on the input model too ({first_line(source_error)}); "
            "the output passes the checker without it"
        )
    timings["checker_seconds"] = round(time.perf_counter() - start, 3)
    return note


def check_whole_file(model, path: Path, source: Path, dtype: str) -> List[str]:
    """Both judges on the whole written model ``path`` (written from the onnx_ir ``model``), no probe.

    onnx.checker first (``check_with_checker``, held to what ``source`` passes),
    then an onnxruntime CPU session when onnxruntime is installed. A refusal is
    read by ``verdict.judge`` for the LOW type ``dtype``: one it accepts (a
    provider without a LOW kernel) becomes a note; any other raises the
    judge's ``ConversionError``. Returns the notes. Validation judges a model
    this way; the converter's ``checks.check_staged`` adds the probe and the
    pins that plan again.
    """
    notes: List[str] = []
    try:
        note = check_with_checker(path, source=source)
        notes += [note] if note else []
        if not runtime_available():
            return notes + ["onnxruntime not installed: load check skipped"]
        check_with_runtime(path)
    except ConversionError as exc:
        verdict = judge(exc, model, dtype)
        if verdict.kind != ACCEPT:
            raise
        notes += [verdict.note] if verdict.note else []
    return notes


def check_with_runtime(path: Path, *, timings: Optional[dict] = None, key: str = "runtime_seconds") -> None:
    """An onnxruntime CPU session of ``path``; raises ``ConversionError`` (tool ``RUNTIME``) when refused.

    ``timings[key]`` records the seconds taken.
    """
    timings = timings if timings is not None else {}
    start = time.perf_counter()
    refusal = runtime_refusal(Path(path))
    timings[key] = round(time.perf_counter() - start, 3)
    if refusal is not None:
        raise ConversionError(
            f"converted model does not load in onnxruntime: {first_line(Exception(refusal))}",
            refusal,
            ConversionError.RUNTIME,
        )


__all__ = [
    "check_with_checker",
    "check_with_runtime",
    "check_written",
    "checker_error",
    "first_line",
    "runtime_available",
    "runtime_refusal",
    "UNOPTIMIZED",
]
