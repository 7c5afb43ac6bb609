"""The fix a failed validation's localization found, said once: the options, the nodes they keep, and what
the fix was checked against.

The CLI's ``--localize`` text (``render``) and the report page's advice
(``ampconv.report.html.columns``) both say it with ``fix_advice``, from the
same fields of the localization (its ``cause`` and ``fix``): the nodes the
check ran are the nodes the options name, and both readers give one verdict.
A fix that does not pass is no advice to copy: the words then point to the
accuracy search (``tune``), the one fix left.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ampconv.errors import Parameter, Speller

# How many node names a sentence shows before "and N more".
SHOWN = 3


def fix_options(loc: Mapping) -> list[tuple[str, object]]:
    """The conversion parameters of the localization's fix (``[("keep_fp32", pattern)]``); [] for a report
    written before they were recorded (then only the command line's ``suggestion`` is known)."""
    fix, cause = loc.get("fix") or {}, loc.get("cause") or {}
    return [tuple(option) for option in (fix.get("options") or cause.get("options") or [])]


def options_text(loc: Mapping, spell: Speller = Parameter.python_text) -> str:
    """The fix's parameters spelled by ``spell`` (``--keep-fp32 '^(a|b)$'`` or ``keep_fp32='^(a|b)$'``)."""
    options = fix_options(loc)
    if options:
        return " ".join(spell(Parameter(name, value)) for name, value in options)
    return str((loc.get("fix") or {}).get("suggestion") or (loc.get("cause") or {}).get("suggestion") or "")


def nodes_text(names: Sequence[str]) -> str:
    """``offset_sub and offset_add``; ``a, b, c and 4 more``."""
    names = list(names)
    if len(names) > SHOWN:
        return f"{', '.join(names[:SHOWN])} and {len(names) - SHOWN} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def checked_text(fix: Mapping, sample=None) -> str:
    """On what the fix was checked and what it gave: ``checked under emulation on the 16 sample(s) of this run
    (given inputs) by strict rtol=0.01 atol=0.01: this fix passes (worst output then: ...)``."""
    checked = fix.get("checked") or {}
    by = f" by {checked['criteria']}" if checked.get("criteria") else ""
    inputs = "random inputs" if checked.get("random") else "given inputs"
    # The user's metric speaks for the whole sample: its words, not an output's.
    judged_by_metric = str(checked.get("criteria", "")).startswith("metric ")
    after = f" ({'then: ' if judged_by_metric else 'worst output then: '}{fix['after']})" if fix.get("after") else ""
    if fix.get("passes"):
        where = (f"the {checked['samples']} sample(s) of this run ({inputs})" if checked.get("samples")
                 else f"sample {sample}")
        return f"checked under emulation on {where}{by}: this fix passes{after}"
    failed_at = checked.get("sample", sample)
    where = f"sample {failed_at}" if failed_at is not None else f"the {checked.get('samples')} sample(s) of this run"
    return f"checked under emulation on {where}{by}: not enough{after}"


def fix_advice(loc: Mapping, spell: Speller = Parameter.python_text) -> str:
    """The one thing to do about a localized failure, in one or two sentences ("" without a cause).

    ``loc`` is a localization as a dict (``Localization.to_dict``, or a report's). A checked fix that passes:
    the options to convert again with, the nodes they keep and on what it passed. One that does not: that it
    is not enough, where, and the accuracy search to run instead. Unchecked: the options, marked so.
    """
    cause, fix = loc.get("cause") or {}, loc.get("fix")
    if not cause:
        return ""
    names = (fix or {}).get("nodes") or cause.get("nodes") or [cause.get("node")]
    runs = "in bf16 (float32's range)" if (fix or {}).get("runs") == "bf16" else "float32"
    options = options_text(loc, spell)
    if fix is None:
        return f"To fix, convert again with {options}: it keeps {nodes_text(names)} {runs} (not checked: the " \
               "fixed copy could not run)."
    tried = (f" The same nodes in bf16 were checked first and do not pass ({fix['bf16_after']})."
             if fix.get("bf16_after") else "")
    if fix.get("passes"):
        return (f"To fix, convert again with {options}: it keeps {nodes_text(names)} {runs}; "
                f"{checked_text(fix, loc.get('sample'))}.{tried}")
    search = f"{spell(Parameter('tune'))} with your samples as {spell(Parameter('calibration_data'))}"
    return (f"Keeping {nodes_text(names)} {runs} ({options}) is not enough: {checked_text(fix, loc.get('sample'))}."
            f"{tried} Search for the fewest nodes to keep float32 instead: convert with {search}.")
