"""Render a ValidationResult for people (text, markdown) or machines (json).

Renderers only format; every figure comes from the result, and every table
names the backend that produced it.
"""

from __future__ import annotations

import json
import math
import re

from ampconv.validate.result import ValidationResult


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


def _summary(result: ValidationResult) -> str:
    failed = len(result.failed_outputs)
    total = len(result.outputs)
    inputs = "random inputs" if result.random_inputs else "given inputs"
    return (
        f"{_verdict(result)}: {total - failed}/{total} outputs within rtol={_num(result.rtol)} "
        f"atol={_num(result.atol)} ({result.tolerance_source}) on {result.samples} sample(s), "
        f"{inputs}; backend: {result.backend_label}"
    )


def _rows(result: ValidationResult):
    for out in result.outputs:
        m = out.worst
        status = "ok" if out.passed else "FAIL"
        if out.error or m is None:
            yield [out.name, status, out.error or "-", "", "", "", "", "", "", "", ""]
            continue
        yield [
            out.name,
            status + (" (exact)" if out.exact else ""),
            _num(m.max_abs),
            _num(m.max_rel),
            _num(m.mean_abs),
            _num(m.rmse),
            _num(m.cosine, 6),
            str(m.new_nonfinite),
            "-" if m.top1 is None else f"{m.top1:.1%}",
            _needed(m.needed_atol),
            _needed(m.needed_rtol),
        ]


HEADERS = [
    "output", "status", "max abs", "max rel", "mean abs", "rmse", "cosine",
    "new nan/inf", "top-1", "atol needed", "rtol needed",
]


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


def _localization_lines(result: ValidationResult) -> list[str]:
    loc = result.localization
    if loc is None:
        return []
    if loc.node is None:
        return [
            (
                f"Localization ({loc.backend}, sample {loc.sample}): none of {loc.checked} matched "
                "intermediate tensors is over tolerance; drift starts at the outputs or inside a subgraph."
            )
        ]
    return [
        (
            f"Localization ({loc.backend}, sample {loc.sample}): drift starts at node {loc.node!r} "
            f"({loc.op_type}), output {loc.output!r}: {loc.reason} "
            f"(max abs {_num(loc.max_abs)}, max rel {_num(loc.max_rel)})."
        ),
        (
            f"  precision {loc.precision}: {loc.rule}. To fix: keep it float32 "
            f"(keep_fp32 pattern '^{re.escape(loc.node)}$') and convert again."
        ),
    ]


def _needed_line(result: ValidationResult) -> str | None:
    if result.passed:
        return None
    atol, rtol = result.needed_tolerance()
    if atol is None and rtol is None:
        return "No tolerance would pass: the converted model has NaN/Inf (or mismatched values) the reference lacks."
    return (
        f"Would pass with atol >= {_needed(atol)} at rtol={_num(result.rtol)}, "
        f"or rtol >= {_needed(rtol)} at atol={_num(result.atol)}."
    )


def render_text(result: ValidationResult) -> str:
    """Plain-text report: a verdict line, a table of outputs, hints and notes."""
    lines = [_summary(result), f"reference: {result.reference}", f"converted: {result.converted}", ""]
    rows = [HEADERS] + list(_rows(result))
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
    for r in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    lines.append("")
    lines.extend(_nonfinite_lines(result))
    needed = _needed_line(result)
    if needed:
        lines.append(needed)
    lines.extend(_localization_lines(result))
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines).rstrip() + "\n"


def render_markdown(result: ValidationResult) -> str:
    """GitHub-flavoured markdown, sized for a CI job summary."""
    icon = ":white_check_mark:" if result.passed else ":x:"
    lines = [f"### {icon} ampconv validation: {_verdict(result)}", "", _summary(result), ""]
    lines.append(f"- reference: `{result.reference}`")
    lines.append(f"- converted: `{result.converted}`")
    lines.append("")
    lines.append("| " + " | ".join(HEADERS) + " |")
    lines.append("|" + "---|" * len(HEADERS))
    for r in _rows(result):
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in r) + " |")
    lines.append("")
    for line in _nonfinite_lines(result):
        lines.append(f"- {line}")
    if _nonfinite_lines(result):
        lines.append("")
    needed = _needed_line(result)
    if needed:
        lines.append(needed)
        lines.append("")
    for line in _localization_lines(result):
        lines.append(f"> {line.strip()}")
    for note in result.notes:
        lines.append(f"> **note:** {note}")
    return "\n".join(lines).rstrip() + "\n"


def render_json(result: ValidationResult) -> str:
    """The result's dict as indented JSON."""
    return json.dumps(result.to_dict(), indent=2) + "\n"


RENDERERS = {"text": render_text, "markdown": render_markdown, "json": render_json}


def render(result: ValidationResult, fmt: str) -> str:
    """Render ``result`` as ``text``, ``markdown`` or ``json``."""
    return RENDERERS[fmt](result)
