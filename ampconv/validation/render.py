"""Render a ValidationResult for people (text, markdown) or machines (json).

Renderers only format; every figure comes from the result, and every table
names the backend that produced it and, per output, which criterion decided.
"""

from __future__ import annotations

import json
import math

from ampconv.core.precision import Precision
from ampconv.errors import Parameter, Speller, named, spell_parameters
from ampconv.validation.advice import fix_advice
from ampconv.validation.criteria import FLOOR_FACTOR, STRICT, Criteria
from ampconv.validation.result import ValidationResult


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    if value == 0:
        return "0"
    return f"{value:.{digits}g}"


def _needed(value: float | None) -> str:
    return "none passes" if value is None else _num(value)


def _verdict(result: ValidationResult) -> str:
    return "PASS" if result.passed else "FAIL"


def _strict(result: ValidationResult) -> bool:
    return result.judged_by.mode == STRICT


def _summary(result: ValidationResult) -> str:
    return result.summary_line()


def _criteria_line(criteria: Criteria, spell: Speller = Parameter.python_text) -> str | None:
    """The default thresholds in one sentence (strict mode's rule is on the summary line)."""
    if criteria.mode == STRICT:
        return None
    return (
        f"Default criteria for {criteria.dtype}, per output and sample: no new NaN/Inf; "
        f"argmax agreement >= {criteria.min_label_agreement:g} on rows whose top-1 leads by more than "
        f"{criteria.clear_margin:g} x scale; cosine >= {criteria.min_cosine:g} (from {criteria.cosine_min_size} "
        f"elements); error / scale <= {criteria.p99_error:g} at p99 and <= {criteria.max_error:g} at max, "
        f"scale = RMS of the reference (at least {criteria.scale_floor:g}); integers exact. "
        f"A figure within {FLOOR_FACTOR:g}x the unavoidable error passes (x floor: the float32 model with its "
        "weights, inputs, products, elementwise results and outputs rounded to the LOW type; docs/validation.md). "
        + spell_parameters(f"Pass {named('rtol')}/{named('atol')} for the strict elementwise rule.", spell)
    )


def _metric_line(result: ValidationResult) -> str | None:
    """Whose verdict it is when the user's metric decides: the metric's, the rows' status for information."""
    metric = result.metric
    if metric is None:
        return None
    return (f"The verdict is the metric's: {metric.summary()}. Each row's status is the "
            f"{'elementwise rule' if _strict(result) else 'default criteria'}'s, shown for information.")


def _clear_top1(m) -> str:
    if m.label_agreement is None:
        return "-"
    return f"{m.label_agreement:.1%} of {m.clear_rows}"


def _rows(result: ValidationResult):
    strict = _strict(result)
    width = len(_headers(result))
    for out in result.outputs:
        m = out.worst
        status = "ok" if out.passed else "FAIL"
        if out.error or m is None:
            yield [out.name, status, out.error or "-"] + [""] * (width - 3)
            continue
        row = [
            out.name,
            status + (" (set)" if out.in_set else " (exact)" if out.exact else ""),
            _num(m.max_abs),
            _num(m.max_rel),
            _num(m.mean_abs),
            _num(m.rmse),
            _num(m.cosine, 6),
            str(m.new_nonfinite),
            "-" if m.top1 is None else f"{m.top1:.1%}",
        ]
        if strict:
            row += [_needed(m.needed_atol), _needed(m.needed_rtol)]
        elif out.exact:
            row += ["-", "-", "-", "-", "-"]
        else:
            row += [_num(m.scale), _num(m.scaled_p99_error), _num(m.scaled_max_error), _clear_top1(m),
                    _floor_ratio(m)]
        yield row + [m.decided_by or "-"]


HEADERS = [
    "output", "status", "max abs", "max rel", "mean abs", "rmse", "cosine",
    "new nan/inf", "top-1", "atol needed", "rtol needed", "decided by",
]
DEFAULT_HEADERS = HEADERS[:9] + ["scale", "p99 err/scale", "max err/scale", "clear top-1", "x floor", "decided by"]


def _floor_ratio(m) -> str:
    """The RMS error over the floor model's ("2.1x"), or "-" when the floor was not measured."""
    return "-" if m.floor_ratio is None else f"{_num(m.floor_ratio, 2)}x"


def _headers(result: ValidationResult) -> list[str]:
    return HEADERS if _strict(result) else DEFAULT_HEADERS


def _nonfinite_lines(result: ValidationResult) -> list[str]:
    """For outputs with unmatched NaN/Inf: why the row reads inf/nan, and the finite part's figures."""
    lines = []
    for out in result.outputs:
        m = out.worst
        if out.error or m is None or not m.unmatched_nonfinite:
            continue
        new = f", {m.new_nonfinite} of them new in the converted model" if m.new_nonfinite else ""
        if m.finite_size:
            rest = (
                f"over the {m.finite_size} element(s) finite in both: max abs {_num(m.finite_max_abs)}, "
                f"cosine {_num(m.finite_cosine, 6)}"
            )
        else:
            rest = "no element is finite in both"
        lines.append(
            f"{out.name}: {m.unmatched_nonfinite} of {m.size} value(s) are NaN/Inf in one model only{new}, "
            f"so its errors are inf and its cosine nan; {rest}."
        )
    return lines


def _localization_lines(result: ValidationResult, spell: Speller = Parameter.python_text) -> list[str]:
    loc = result.localization
    if loc is None:
        return []
    if loc.node is None:
        return [
            (
                f"Localization ({loc.backend}, sample {loc.sample}): none of {loc.checked} matched "
                "intermediate tensors is over tolerance; drift starts at the outputs themselves (or inside a body onnxruntime could not expose)."
            )
        ]
    return [
        (
            f"Localization ({loc.backend}, sample {loc.sample}): drift starts at node {loc.node!r} "
            f"({loc.op_type}{f', inside {loc.inside}' if loc.inside else ''}), output {loc.output!r}: {loc.reason} "
            f"(max abs {_num(loc.max_abs)}, max rel {_num(loc.max_rel)})."
        ),
        f"  precision {loc.precision}: {loc.rule}.",
        _cause_line(loc, spell),
    ]


def _cause_line(loc, spell: Speller = Parameter.python_text) -> str:
    """The node that loses the precision (or overflows), and the fix checked before it is suggested
    (``advice.fix_advice``: the report page says the same)."""
    cause = loc.cause
    tune = spell(Parameter("tune"))
    if cause is not None and loc.overflow:
        runs = (loc.fix or {}).get("runs")
        action = ("run in bf16 (float32's range) every node that makes or reads a tensor beyond it"
                  if runs == "bf16" else "keep float32 every node that makes or reads a tensor beyond it")
        return (
            f"  Cause: node {cause['node']!r} ({cause['op_type']}) is where the values leave the LOW range: "
            f"{action}. {fix_advice(loc.to_dict(), spell)}"
        )
    if cause is not None:
        error = cause["own_error"]
        figure = "a new inf/NaN" if error == "inf" else f"scaled error {_num(error)}"
        return (
            f"  Cause: node {cause['node']!r} ({cause['op_type']}) in low precision: computed alone from the "
            f"reference's exact inputs, its output {cause['output']!r} has {figure}. {fix_advice(loc.to_dict(), spell)}"
        )
    if loc.precision == Precision.LOW:
        return (
            "  No single low-precision node's own rounding stands out (the drift accumulates over many): "
            f"convert with {tune} to find the fewest nodes to keep float32."
        )
    return (
        "  This node is already float32 and no single low-precision node's own error explains the drift "
        f"(it accumulates over many): convert with {tune} to find the fewest nodes to keep float32."
    )


def _needed_line(result: ValidationResult) -> str | None:
    """What tolerance would pass (strict mode), or why none would: only what is true of these outputs."""
    if result.passed:
        return None
    atol, rtol = result.needed_tolerance()
    if atol is None and rtol is None:
        reasons = _no_tolerance_reasons(result)
        return f"No tolerance would pass: {'; '.join(reasons)}." if reasons else None
    if not _strict(result):
        return None  # the default criteria have no tolerance to loosen; "decided by" says what failed
    return (
        f"Would pass with atol >= {_needed(atol)} at rtol={_num(result.rtol)}, "
        f"or rtol >= {_needed(rtol)} at atol={_num(result.atol)}."
    )


def _no_tolerance_reasons(result: ValidationResult) -> list[str]:
    """Why no elementwise tolerance passes, per output that makes it so: one that could not be compared, or
    NaN/Inf in one model only. A detection set has no tolerance either, but that is how it is judged, not
    why it fails: its rows say what failed."""
    reasons = []
    for out in result.outputs:
        m = out.worst
        if out.error or m is None:
            reasons.append(f"{out.name} could not be compared ({out.error or 'no sample'})")
        elif m.new_nonfinite:
            reasons.append(f"{out.name} has {m.new_nonfinite} NaN/Inf value(s) where the reference is finite")
        elif m.unmatched_nonfinite:
            reasons.append(f"{out.name} has {m.unmatched_nonfinite} value(s) NaN/Inf in one model only")
    return reasons


def render_text(result: ValidationResult, spell: Speller = Parameter.python_text) -> str:
    """Plain-text report: a verdict line, a table of outputs, hints and notes (``spell``: how the parameters
    they advise read; Python words by default, the CLI passes its flags)."""
    lines = [_summary(result), f"reference: {result.reference}", f"converted: {result.converted}", ""]
    headers = _headers(result)
    rows = [headers] + list(_rows(result))
    widths = [max(len(r[i]) for r in rows) for i in range(len(headers))]
    for r in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    lines.append("")
    lines.extend(line for line in (_metric_line(result), _criteria_line(result.judged_by, spell)) if line)
    lines.extend(_nonfinite_lines(result))
    needed = _needed_line(result)
    if needed:
        lines.append(needed)
    lines.extend(_localization_lines(result, spell))
    lines.extend(f"note: {n}" for n in result.note_texts(spell))
    return "\n".join(lines).rstrip() + "\n"


def render_markdown(result: ValidationResult, spell: Speller = Parameter.python_text) -> str:
    """GitHub-flavoured markdown, sized for a CI job summary."""
    icon = ":white_check_mark:" if result.passed else ":x:"
    lines = [f"### {icon} ampconv validation: {_verdict(result)}", "", _summary(result), ""]
    lines.append(f"- reference: `{result.reference}`")
    lines.append(f"- converted: `{result.converted}`")
    lines.append("")
    headers = _headers(result)
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "---|" * len(headers))
    for r in _rows(result):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    lines.append("")
    for line in (_metric_line(result), _criteria_line(result.judged_by, spell)):
        if line:
            lines.extend([line, ""])
    for line in _nonfinite_lines(result):
        lines.append(f"- {line}")
    if _nonfinite_lines(result):
        lines.append("")
    needed = _needed_line(result)
    if needed:
        lines.append(needed)
        lines.append("")
    for line in _localization_lines(result, spell):
        lines.append(f"> {line.strip()}")
    for note in result.note_texts(spell):
        lines.append(f"> **note:** {note}")
    return "\n".join(lines).rstrip() + "\n"


def render_json(result: ValidationResult, spell: Speller = Parameter.python_text) -> str:
    """The result's dict as indented JSON."""
    return json.dumps(result.to_dict(spell), indent=2) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}


def render(result: ValidationResult, fmt: str, spell: Speller = Parameter.python_text) -> str:
    """Render ``result`` as ``text``, ``markdown`` or ``json`` (``spell``: Python words, or the CLI's flags)."""
    return RENDERERS[fmt](result, spell)
