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
from ampconv_cli.errors import flag_of
from ampconv_cli.options import OptionGroup
from ampconv.validation import ValidateOptions, parse_shape, validate
from ampconv.validation.nature_kinds import NATURE_OVERRIDES
from ampconv.core.shapespec import parse_input_range
from ampconv.validation.options import parse_limit, parse_nature
from ampconv.validation.render import render
from ampconv.validation.reportfile import merge_into_report

VALIDATION_PARAMS = ("inputs", "rtol", "atol", "backend", "samples", "seed", "shapes", "input_ranges", "localize",
                     "natures", "limits", "metric")
FORMATS = ("text", "json", "markdown")
EXIT_OK = 0
EXIT_DRIFT = 3


def _parse_each(ctx, param, values, parse) -> list:
    """``parse`` applied to every value of a repeatable option; its ``UsageError`` becomes click's."""
    try:
        return [parse(text) for text in values]
    except UsageError as exc:
        raise click.BadParameter(exc.render(flag_of), ctx=ctx, param=param) from None


def _parse_shapes(ctx, param, values):
    return tuple(_parse_each(ctx, param, values, parse_shape))


def _parse_limits(ctx, param, values):
    return tuple(_parse_each(ctx, param, values, parse_limit))


def _parse_natures(ctx, param, values):
    return tuple(_parse_each(ctx, param, values, parse_nature))


def _parse_input_ranges(ctx, param, values):
    parsed = _parse_each(ctx, param, values, parse_input_range)
    names = [name for name, _ in parsed]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise click.BadParameter(f"input {twice[0]!r} given twice", ctx=ctx, param=param)
    return tuple(parsed)


validation_input_options = OptionGroup(
    "What the two models are fed: samples from files, or seeded random inputs and their shapes and ranges.",
    (
        click.option(
            "--inputs", "inputs", multiple=True, metavar="PATH",
            help="Input sample(s): FILE.npz, a folder of .npz, or ONNX test-data folder(s) "
            "(test_data_set_*/input_*.pb). Repeatable. Default: seeded random data.",
        ),
        click.option(
            "--shape", "shapes", multiple=True, metavar="NAME:DIMS", callback=_parse_shapes,
            help="Shape of a random input (x:1x3x224x224), value of a dimension symbol (batch:1), or "
            "size of one axis of an input (x[2]:48, axis from 0; x[-1]:192 counts from the end). "
            "Dimensions left unset (-1, unnamed '?', or a symbol not given) are 1, with a note. Repeatable.",
        ),
        click.option(
            "--input-range", "input_ranges", multiple=True, metavar="NAME:LOW,HIGH", callback=_parse_input_ranges,
            help="Value range of a random input (audio:-32768,32767, image:0,255): floats uniform in "
            "[LOW, HIGH), integers in [LOW, HIGH]; equal ends hold it constant (sr:16000,16000). "
            "Default: floats N(0, 1), integers small indices. Repeatable; not with --inputs.",
        ),
        click.option("--samples", type=click.IntRange(min=1), default=1, show_default=True, metavar="N",
                     help="Number of random samples (without --inputs)."),
        click.option("--seed", type=int, default=0, show_default=True, metavar="S", help="Seed for random inputs."),
    ),
    title="Validation inputs",
)


validation_judging_options = OptionGroup(
    "How the outputs are judged and on what: the tolerance rule, the backend, localization of a failure.",
    (
        click.option("--rtol", type=click.FloatRange(min=0), default=None, metavar="R",
                     help="Relative tolerance of the strict elementwise rule |conv-ref| <= atol + rtol*|ref| "
                     "(the other defaults per dtype: fp16 1e-2, bf16 5e-2). Without --rtol/--atol the default "
                     "criteria judge each output: no new NaN/Inf, argmax on clear rows, cosine, p99/max error "
                     "against the output's scale (docs/validation.md)."),
        click.option("--atol", type=click.FloatRange(min=0), default=None, metavar="A",
                     help="Absolute tolerance: switches to the strict elementwise rule (see --rtol; "
                     "default per dtype: fp16 1e-2, bf16 5e-2)."),
        click.option(
            "--backend", type=click.Choice(["auto", "native", "emulate"]), default="auto", show_default=True,
            help="native: run the converted model as is (CUDA if available); emulate: float32 compute "
            "rounded to fp16/bf16 after every LOW tensor (faithful on a CPU); auto: native on CUDA, else emulate.",
        ),
        click.option("--localize/--no-localize", default=False, show_default=True,
                     help="On failure, name the first node whose output drifts."),
        click.option(
            "--nature", "natures", multiple=True, metavar="OUTPUT=KIND", callback=_parse_natures,
            help=f"How to judge an output, in place of what the graph says ({', '.join(NATURE_OVERRIDES)}): "
            "boxes/scores/labels make outputs one detection set, matched as a set; probability judges on "
            "[0, 1]; values on the output's RMS with no argmax read. Repeatable (docs/validation.md).",
        ),
        click.option(
            "--limit", "limits", multiple=True, metavar="OUTPUT:CRITERION=VALUE", callback=_parse_limits,
            help="A default-criteria threshold for one output: cosine, p99, max or label "
            "(logits:cosine=0.999, heat:p99=0.05). Repeatable (docs/validation.md).",
        ),
        click.option(
            "--metric", "metric", default=None, metavar="MODULE:FUNCTION",
            help="Your own measure of success, which decides the verdict: FUNCTION(reference, converted) from "
            "MODULE (working directory or PYTHONPATH), called per sample with dicts output name -> array, "
            "returns a bool or (bool, words). Exit 0 when it holds on every sample, 3 when not; the table "
            "still shows each output's figures (docs/validation.md, 'Your own metric').",
        ),
    ),
    title="Validation criteria",
)


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
    return ValidateOptions(
        inputs=tuple(inputs),
        rtol=params["rtol"],
        atol=params["atol"],
        backend=params["backend"],
        samples=params["samples"],
        seed=params["seed"],
        shapes=tuple((name, tuple(dims)) for name, dims in shapes),
        input_ranges=tuple(input_ranges),
        localize=params["localize"],
        natures=tuple(params.get("natures", ())),
        limits=tuple(params.get("limits", ())),
        metric=params.get("metric"),
        decisions=decisions,
        show_progress=show_progress,
    )


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
    console=None,
    overwrite: bool = False,
) -> int:
    """Validate, print the result in ``fmt``, merge it into ``report_path``; return 0 or 3.

    ``console`` is a rich Console for the result (stdout when None). A
    progress bar goes to stderr when ``options.show_progress`` is set, stderr
    is a terminal and more than one sample runs. ``overwrite`` lets the report
    replace an existing file that is not an ampconv report.
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
    text = render(result, fmt)
    if console is None:
        click.echo(text, nl=False)
    else:
        console.print(text, markup=False, highlight=False, soft_wrap=True, end="")
    if report_path:
        merge_into_report(report_path, result.to_dict(), overwrite=overwrite)
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
