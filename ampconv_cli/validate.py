"""``ampconv validate REFERENCE CONVERTED``: compare a converted model with its float32 original.

Exit codes: 0 every output passes, 3 some output fails (the default criteria,
or the strict elementwise rule with --rtol/--atol), 1 could not run, 2 bad usage.
Registered on the ``ampconv`` group in main.py; errors map to exit codes in errors.py.
"""

from __future__ import annotations

from pathlib import Path

import click
from ampconv.writing import outputs
from ampconv_cli import command_words
from ampconv_cli.errors import handle_errors
from ampconv_cli.options import (
    OptionGroup,
    TopicCommand,
    format_flag,
    overwrite_flag,
    quiet_flag,
    report_flag,
    topics_of,
)
from ampconv_cli.validation_options import (
    FORMATS,
    VALIDATION_PARAMS,
    check_input_range_names,
    options_from_cli,
    run_and_render,
    validation_input_options,
    validation_judging_options,
    validation_options,
)


result_options = OptionGroup(
    "How the result is written.",
    options=(
        format_flag(FORMATS, "Result format; markdown fits a CI job summary."),
        report_flag("Merge the result into this JSON report (top-level 'validation' key); an existing file that "
                    "is not an ampconv report only with --overwrite."),
        overwrite_flag,
        quiet_flag("No progress bar."),
    ),
    title="Result and display",
)
EXAMPLES = (
    ("ampconv validate model.onnx model.fp16.onnx --inputs samples/",
     "judge on your own samples (.npz files or ONNX test_data_set_* folders)"),
    ("ampconv validate model.onnx model.fp16.onnx --shape batch:8 --samples 4 --localize",
     "seeded random inputs at batch 8; on a failure, name the node where drift starts"),
    ("ampconv validate model.onnx model.fp16.onnx --rtol 1e-2 --atol 1e-3 --format markdown",
     "a strict elementwise tolerance, as a CI job summary"),
)


@click.command("validate", cls=TopicCommand, examples=EXAMPLES,
               topics=topics_of(validation_input_options, validation_judging_options, result_options))
@click.argument("reference", type=click.Path(dir_okay=False))
@click.argument("converted", type=click.Path(dir_okay=False))
@validation_options
@result_options
@handle_errors
def command(reference, converted, fmt, report_path, overwrite, quiet, **validation):
    """Compare CONVERTED with the float32 REFERENCE on the same inputs.

    Each output is judged by the default criteria for the converted model's
    type, or by the strict elementwise rule when --rtol or --atol is given.
    Exits 0 when every output passes, 3 when one fails, 1 if a model could
    not be run, 2 on bad usage.
    """
    if report_path:  # before validation runs: a bad --report path fails with nothing done
        check_report(reference, converted, report_path, overwrite, validation["inputs"])
    options = options_from_cli(validation, show_progress=not quiet)
    check_input_range_names(reference, validation["input_ranges"])
    new_report = bool(report_path) and not Path(report_path).exists()
    # The report records the validation options as typed: its page repeats this check with a fix.
    typed = command_words.typed() or []
    recorded = {"command_options": command_words.validation_words(command, typed[2:], VALIDATION_PARAMS)}
    code = run_and_render(reference, converted, options, fmt, report_path, overwrite=overwrite, recorded=recorded)
    if new_report:  # as convert --report: a new report takes the mode of the model it describes
        outputs.match_mode(report_path, converted)
    if code:
        raise SystemExit(code)


def check_report(reference, converted, report_path, overwrite, samples=()) -> None:
    """Refuse a --report path that is an input, or an existing file that is not an ampconv report.

    Inputs are both models, their external data files and the samples. An
    existing ampconv report is merged into; anything else needs --overwrite.
    """
    path = Path(report_path)
    inputs = [("the reference model", Path(reference)), ("the converted model", Path(converted))]
    if path.exists():  # only an existing file can be an input: read the models' data files then
        inputs = (
            outputs.model_input_files(reference, "the reference model")
            + outputs.model_input_files(converted, "the converted model")
            + outputs.sample_input_files(samples)
        )
    outputs.check_report_path(path, inputs=inputs, overwrite=overwrite, merge=True)
