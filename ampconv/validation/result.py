"""Validation results as data: what ran, on what inputs, and how far it drifted."""

from __future__ import annotations

import dataclasses
import math

from ampconv.errors import Parameter, Speller, spell_parameters
from ampconv.numerics.metrics import Metrics
from ampconv.validation.advice import fix_advice
from ampconv.validation.criteria import STRICT, Criteria, strict_criteria


@dataclasses.dataclass(frozen=True)
class OutputResult:
    """One model output across all samples (``worst`` folds every sample; ``per_sample`` lists the first 100).

    ``passed`` is the worst sample's verdict; ``worst.decided_by`` says which
    criterion decided it (``criteria.judge``). ``exact``: judged by exact
    match (an integer or bool output); ``in_set``: judged with the other
    members of its detection set, as one set (``validation.detections``), so
    its verdict is the set's.
    """

    name: str
    shape: tuple[int, ...]
    per_sample: tuple[Metrics, ...]
    worst: Metrics | None
    passed: bool
    exact: bool = False
    error: str | None = None
    in_set: bool = False

    @property
    def decided_by(self) -> str | None:
        """Which criterion decided this output's verdict, in words (the error when it could not be compared)."""
        if self.error:
            return self.error
        return self.worst.decided_by if self.worst else None

    def to_dict(self) -> dict:
        """JSON-able dict."""
        return {
            "name": self.name,
            "shape": list(self.shape),
            "passed": self.passed,
            "exact": self.exact,
            "in_set": self.in_set,
            "error": self.error,
            "decided_by": self.decided_by,
            "worst": self.worst.to_dict() if self.worst else None,
            "per_sample": [m.to_dict() for m in self.per_sample],
        }


@dataclasses.dataclass(frozen=True)
class Localization:
    """Where drift starts: the first node (topological order) whose output fails.

    ``node`` is None when no exposed intermediate tensor failed (the drift
    starts at the outputs themselves, or inside a body onnxruntime could not expose).
    """

    backend: str
    sample: int
    checked: int
    node: str | None = None
    op_type: str | None = None
    output: str | None = None
    reason: str | None = None
    max_abs: float | None = None
    max_rel: float | None = None
    new_nonfinite: int = 0
    precision: str | None = None
    rule: str | None = None
    # The LOW node whose own rounding causes the drift (node, op_type, own_error, output,
    # suggestion), which may lie upstream of ``node``; None when no single node's error stands out.
    cause: dict | None = None
    # Every checked node in topological order as [node, error]: the propagated error of its worst
    # float output on ``sample`` (RMS of the difference over RMS of the reference; "inf" for a new
    # NaN/Inf), so a report can show along the graph where error grows and where float32 stops it.
    node_errors: tuple = ()
    # Whether ``node`` is the source of an overflow (its LOW output leaves the LOW range).
    overflow: bool = False
    # What the suggested fix does, checked on ``sample`` under emulation before it is suggested:
    # {"nodes": [...], "suggestion": "--keep-fp32 ...", "passes": bool, "before": str, "after": str}; for an
    # overflow also "runs" ("bf16": the nodes in bfloat16, suggested as "--fallback-dtype bf16 --keep-bf16 ...",
    # or "float32") and, where bfloat16 was tried first and failed, "bf16_after" (its worst output's words).
    fix: dict | None = None
    # The node whose body holds ``node`` ("Loop 'decode'"), when ``node`` runs inside an If/Loop/Scan body.
    inside: str | None = None

    def to_dict(self) -> dict:
        """JSON-able dict."""
        data = {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}
        data["node_errors"] = [[name, _jsonable(error)] for name, error in self.node_errors]
        return data


@dataclasses.dataclass(frozen=True)
class ValidationResult:
    """Outcome of ``validate``: every figure was produced by ``backend`` on ``provider``.

    ``criteria`` is how the outputs were judged (default criteria for
    ``dtype``, or the strict elementwise rule); ``rtol``/``atol`` are the
    elementwise numbers (strict mode's rule; in default mode they only count
    ``mismatched`` elements, give the "needed" tolerances and drive
    localization). ``tolerance_source`` says where the criteria came from.
    """

    reference: str
    converted: str
    passed: bool
    backend: str
    provider: str
    dtype: str
    rtol: float
    atol: float
    tolerance_source: str
    random_inputs: bool
    input_sources: tuple[str, ...]
    outputs: tuple[OutputResult, ...]
    localization: Localization | None = None
    notes: tuple[str, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()
    criteria: Criteria | None = None
    # Samples compared; input_sources and each output's per_sample list the first few (comparison.KEPT_SAMPLES).
    sample_count: int | None = None
    # A decoder with a KV cache: the greedy decode of both models (``validation.decode.DecodeResult``), else None.
    decode: object | None = None
    # ``notes`` with the parameters they advise marked (``ampconv.errors.named``): ``note_texts`` spells them
    # as a reader speaks (``notes`` holds them in Python words). Empty: ``notes`` name none.
    note_templates: tuple[str, ...] = ()
    # The user's metric over the samples (``validation.metric.MetricVerdict``): when given, it decides ``passed``.
    metric: object | None = None

    def note_texts(self, spell: Speller = Parameter.python_text) -> list[str]:
        """The notes, each parameter they advise spelled by ``spell`` (``--inputs`` from the CLI)."""
        if not self.note_templates:
            return list(self.notes)
        return [spell_parameters(text, spell) for text in self.note_templates]

    def summary_line(self) -> str:
        """The verdict in one line: ``PASS: 2/2 outputs pass the default criteria ...; backend: ...``.

        With the user's metric the line opens with its verdict and its words,
        and the outputs' count follows as information.
        """
        failed, total = len(self.failed_outputs), len(self.outputs)
        inputs = "random inputs" if self.random_inputs else "given inputs"
        if self.judged_by.mode == STRICT:
            rule = f"within {self.judged_by.describe()} ({self.tolerance_source})"
        else:
            rule = f"pass the {self.judged_by.describe()}"
        decoded = f"; {self.decode.summary()}" if self.decode is not None else ""
        verdict = 'PASS' if self.passed else 'FAIL'
        if self.metric is not None:
            return (f"{verdict}: {self.metric.summary()}, {inputs}; per output (for information): {total - failed}/"
                    f"{total} {rule}; backend: {self.backend_label}{decoded}")
        return (f"{verdict}: {total - failed}/{total} outputs {rule} on {self.samples} "
                f"sample(s), {inputs}; backend: {self.backend_label}{decoded}")

    def __str__(self) -> str:
        """What ``print(result)`` shows: the verdict, the failed outputs, the notes (``repr`` keeps the fields;
        ``ampconv.validation.render`` gives the CLI's full tables)."""
        lines = [self.summary_line()]
        lines += [f"  {out.name}: FAIL{f' ({out.error})' if out.error else ''}" for out in self.failed_outputs]
        loc = self.localization
        if loc is not None and loc.node is not None:
            lines.append(f"  drift starts at {loc.node!r} ({loc.op_type}): {loc.reason}")
            advice = fix_advice(loc.to_dict())
            if advice:
                lines.append(f"  {advice}")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    @property
    def judged_by(self) -> Criteria:
        """The criteria the outputs were judged by (strict ``rtol``/``atol`` for a result built without them)."""
        return self.criteria if self.criteria is not None else strict_criteria(self.rtol, self.atol)

    @property
    def samples(self) -> int:
        """Number of samples compared."""
        return self.sample_count if self.sample_count is not None else len(self.input_sources)

    @property
    def backend_label(self) -> str:
        """``emulate (fp16 rounding, CPUExecutionProvider)`` or ``native (CUDAExecutionProvider)``."""
        if self.backend == "emulate":
            return f"emulate ({self.dtype} rounding, {self.provider})"
        return f"native ({self.provider})"

    @property
    def failed_outputs(self) -> tuple[OutputResult, ...]:
        """The outputs over tolerance."""
        return tuple(o for o in self.outputs if not o.passed)

    def needed_tolerance(self) -> tuple[float | None, float | None]:
        """(smallest atol at this rtol, smallest rtol at this atol) passing every output."""
        atols, rtols = [], []
        for out in self.outputs:
            if out.error or out.worst is None:
                return None, None
            atols.append(out.worst.needed_atol)
            rtols.append(out.worst.needed_rtol)
        atol = None if any(a is None for a in atols) else max(atols, default=0.0)
        rtol = None if any(r is None for r in rtols) else max(rtols, default=0.0)
        return atol, rtol

    def to_dict(self, spell: Speller = Parameter.python_text) -> dict:
        """JSON-able dict (the ``validation`` section of a report); ``spell``: how its notes name parameters."""
        need_atol, need_rtol = self.needed_tolerance()
        return {
            "passed": self.passed,
            "decode": self.decode.to_dict() if self.decode is not None else None,
            "metric": self.metric.to_dict() if self.metric is not None else None,
            "reference": self.reference,
            "converted": self.converted,
            "backend": self.backend,
            "provider": self.provider,
            "backend_label": self.backend_label,
            "dtype": self.dtype,
            "rtol": self.rtol,
            "atol": self.atol,
            "tolerance_source": self.tolerance_source,
            "mode": self.judged_by.mode,
            "criteria": self.judged_by.to_dict(),
            "needed_atol": _jsonable(need_atol),
            "needed_rtol": _jsonable(need_rtol),
            "random_inputs": self.random_inputs,
            "samples": self.samples,
            "input_sources": list(self.input_sources),
            "outputs": [o.to_dict() for o in self.outputs],
            "localization": self.localization.to_dict() if self.localization else None,
            "notes": self.note_texts(spell),
            "timings": {k: round(v, 6) for k, v in self.timings},
        }


def _jsonable(value):
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
