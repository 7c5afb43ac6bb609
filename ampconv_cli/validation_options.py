"""Validation options shared by ``ampconv validate`` and ``ampconv convert --validate``.

- ``validation_options``: decorator adding the two option groups
  (``validation_input_options``: ``--inputs``, ``--shape``,
  ``--input-range``, ``--samples``, ``--seed``; ``validation_judging_options``:
  ``--rtol``, ``--atol``, ``--backend``, ``--localize``, ``--nature``,
  ``--limit``, ``--metric``). Their parameter
  names are ``VALIDATION_PARAMS``.
- ``options_from_cli``: those parameters -> ``ValidateOptions``.
- ``run_and_render``: validate, print the result, merge it into a report, and
  return the exit code (0 every output passes, 3 some output fails: the
  default criteria, or the strict elementwise rule with ``--rtol``/``--atol``;
  with ``--metric``, 0 when the user's metric holds on every sample, 3 when not). ``AmpconvError``
  propagates so the caller maps it to its exit code in one place.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

import click

from ampconv.errors import AmpconvError, UsageError
from ampconv.runtime.isolated import IsolatedFailure, run_isolated
from ampconv.options.declared import by_name, pick
from ampconv_cli.errors import flag_of
from ampconv_cli.options import OptionGroup
from ampconv.validation import ValidateOptions, validate
from ampconv.validation.options import VALIDATION_OPTIONS
from ampconv.validation.render import render
from ampconv.validation.reportfile import merge_into_report

FORMATS = ("text", "json", "markdown")
_OPTIONS = by_name(VALIDATION_OPTIONS)
EXIT_OK = 0
EXIT_DRIFT = 3


validation_input_options = OptionGroup(
    "What the two models are fed: samples from files, or seeded random inputs and their shapes and ranges.",
    pick(_OPTIONS, "inputs", "shapes", "input_ranges", "samples", "seed"),
    title="Validation inputs",
)


validation_judging_options = OptionGroup(
    "How the outputs are judged and on what: the tolerance rule, the backend, localization of a failure.",
    pick(_OPTIONS, "rtol", "atol", "backend", "localize", "natures", "limits", "metric"),
    title="Validation criteria",
)
VALIDATION_PARAMS = validation_input_options.param_names() + validation_judging_options.param_names()


def validation_options(func: Callable) -> Callable:
    """Add both validation option groups to a click command (their parameters are ``VALIDATION_PARAMS``)."""
    return validation_input_options(validation_judging_options(func))


def options_from_cli(
    params: Mapping, *, decisions: Mapping | None = None, show_progress: bool = False
) -> ValidateOptions:
    """Build ``ValidateOptions`` from the option group's parameters (``VALIDATION_PARAMS`` of ``params``).

    ``decisions`` (node name -> precision/rule) lets ``convert --validate``
    explain a localized node; ``show_progress`` asks ``run_and_render`` for a
    progress bar.
    """
    inputs, shapes, input_ranges = params["inputs"], params["shapes"], params["input_ranges"]
    if inputs and shapes:
        raise UsageError("--shape sets the shape of random inputs; with --inputs it does nothing")
    if inputs and input_ranges:
        raise UsageError("--input-range sets the values of random inputs; with --inputs it does nothing")
    fields = {}
    for group in (validation_input_options, validation_judging_options):
        fields.update(group.config_fields(params))
    return ValidateOptions(**fields, decisions=decisions, show_progress=show_progress)


def check_input_range_names(model_path, input_ranges: Sequence) -> None:
    """An ``--input-range`` naming no graph input of ``model_path``: a one-line usage error listing the inputs.

    ``convert`` calls it before any work, so a typo does not surface only
    after the model is written. An unreadable model is left to the conversion
    to report in its own words.
    """
    if not input_ranges:
        return
    import onnx

    try:
        graph = onnx.load(str(model_path), load_external_data=False).graph
    except Exception:  # noqa: BLE001 -- protobuf or OS errors: the conversion names them
        return
    initializers = {t.name for t in graph.initializer}
    names = [v.name for v in graph.input if v.name not in initializers]
    for name, _ in input_ranges:
        if name not in names:
            raise UsageError(f"--input-range {name}: no input of that name (inputs: {', '.join(names) or 'none'})")


def run_and_render(
    reference: str,
    converted: str,
    options: ValidateOptions,
    fmt: str = "text",
    report_path: str | None = None,
    overwrite: bool = False,
    recorded: Mapping | None = None,
) -> int:
    """Validate, print the result in ``fmt``, merge it into ``report_path``; return 0 or 3.

    The result goes to stdout, in the command line's words (``flag_of``). A
    progress bar goes to stderr when ``options.show_progress`` is set, stderr
    is a terminal and more than one sample runs. ``overwrite`` lets the report
    replace an existing file that is not an ampconv report. ``recorded``: what the report's ``validation``
    section keeps besides the result (the validation options as typed).
    """
    import dataclasses

    if fmt not in FORMATS:
        raise UsageError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    with_bar = options.show_progress and sys.stderr.isatty()

    def step():
        # In a forked child (ampconv.runtime.isolated): a runtime that dies running the models (SIGFPE in a native kernel
        # on inputs it cannot take) is a one-line error here, not "Floating point exception" and no verdict.
        if not with_bar:
            return validate(reference, converted, options)
        bar = _progress_bar()
        task = bar.add_task("validating", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        with bar:
            return validate(reference, converted, dataclasses.replace(options, progress=progress))

    try:
        result = run_isolated(step, timeout=None)
    except IsolatedFailure as exc:
        raise AmpconvError(f"{converted}: validation could not run the models ({exc})") from None
    click.echo(render(result, fmt, flag_of), nl=False)
    if report_path:
        merge_into_report(report_path, {**result.to_dict(flag_of), **(recorded or {})}, overwrite=overwrite)
    return EXIT_OK if result.passed else EXIT_DRIFT


def _progress_bar():
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
