"""``ampconv convert MODEL``: the main job."""

from __future__ import annotations

from pathlib import Path

import click

import ampconv
from ampconv.writing import outputs
from ampconv.config import Config
from ampconv.options.conversion import OPTIONS
from ampconv.writing.outputs import default_output_path
from ampconv.report import render_plan, render_text, render_warnings
from ampconv.validation import check_inputs
from ampconv_cli import collection, command_words
from ampconv_cli.errors import flag_of, handle_errors
from ampconv_cli.options import (
    CONFIG_GROUPS,
    OptionGroup,
    TopicCommand,
    constant_options,
    data_options,
    model_argument,
    format_flag,
    model_options,
    output_flag,
    policy_options,
    precision_options,
    quiet_flag,
    report_flag,
)
from ampconv_cli.progress import make_progress
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


# The command's own options, grouped for --help like the groups that build Config.
output_options = OptionGroup(
    "Where the model and report go, and the checks of the written model.",
    (OPTIONS["overwrite"], OPTIONS["check_runtime"]),
    (
        output_flag("Output path (default: <stem>.<dtype>.onnx beside the input)."),
        report_flag("Write the conversion report (every node, rule, initializer) as JSON; "
                    "'ampconv report FILE' makes it a page."),
        click.option("--dry-run", is_flag=True, help="Print the plan; write no model."),
    ),
    title="Output and checks",
)
validate_run_options = OptionGroup(
    "--validate and what it does with the verdict.",
    options=(
        click.option("--validate", "do_validate", is_flag=True,
                     help="Validate the written model against the input (the options below apply)."),
        click.option("--fail-on-drift", is_flag=True,
                     help="With --validate: exit 3 when over tolerance (without it the exit status stays 0)."),
        format_flag(FORMATS, "Format of the validation result."),
    ),
    title="Validation (with --validate)",
)
display_options = OptionGroup(
    "How much the command prints.",
    options=(
        click.option("-v", "--verbose", is_flag=True,
                     help="List every node's decision, and every line the summary groups."),
        quiet_flag("No summary, no progress bar (errors and warnings still print)."),
    ),
    title="Display",
)
# The --help sections: each lists the options of its groups (the Config-building groups and the command's own).
HELP_TOPICS = (
    ("Policy: which ops run LOW", (policy_options, precision_options)),
    ("Constants out of the LOW range", (constant_options,)),
    ("Calibration and tune", (data_options,)),
    ("Output and checks", (output_options, model_options)),
    ("Validation (with --validate)", (validate_run_options, validation_input_options, validation_judging_options)),
    ("Display", (display_options,)),
)
EXAMPLES = (
    ("ampconv convert model.onnx", "fp16 at O2: writes model.fp16.onnx beside it and prints a summary"),
    ("ampconv convert model.onnx --overwrite --validate --inputs samples/ --report r.json && ampconv report r.json",
     "again (replacing it), validated on your own samples, with the report page r.html"),
    ("ampconv convert model.onnx --dtype bf16 --mixlist mix.json --dry-run",
     "bf16 with a policy file: print each node's decision, write nothing"),
)


@click.command("convert", cls=TopicCommand, topics=HELP_TOPICS, examples=EXAMPLES)
@click.argument("model", type=click.Path(dir_okay=True), required=False)
@output_options
@policy_options
@precision_options
@constant_options
@model_options
@data_options
@display_options
@validate_run_options
@validation_options
@handle_errors
def command(**params):
    """Convert MODEL (float32 ONNX) to float16/bfloat16 mixed precision.

    Prints a summary on stderr; exit 0 ok, 1 error, 2 bad usage or policy,
    3 over tolerance with --validate --fail-on-drift.
    """
    ctx = click.get_current_context()
    model = model_argument(ctx, params["model"])
    given = frozenset(name for name in ctx.params
                      if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE)
    validation = {name: params[name] for name in VALIDATION_PARAMS}
    _check_command_flags(params, given)
    # The option groups build their parts of the request (their own usage errors first, before any work).
    fields: dict = {}
    for group in CONFIG_GROUPS + (output_options,):
        fields.update(group.config_fields(params, given))
    tune = fields["tune"]
    # Random inputs a conversion draws: --calibration-data random's, or the synthetic run's (no data given).
    random_data = fields["calibration_data"] == ("random",) or (
        fields["calibration_data"] == () and fields["synthetic_run"] is not False)
    fields.update(
        shapes=tuple(validation["shapes"]),
        input_ranges=tuple(validation["input_ranges"]) if random_data else (),
        rtol=validation["rtol"] if tune else None, atol=validation["atol"] if tune else None,
        # --tune judges its candidates as --validate would: the same metric, limits and natures.
        metric=validation["metric"] if tune else None, limits=tuple(validation["limits"]) if tune else (),
        natures=tuple(validation["natures"]) if tune else (),
    )
    do_validate, report_path = params["do_validate"], params["report_path"]
    # Before any work: a bad output path fails with nothing written (the model's
    # own checks against its input run in ampconv.convert, before converting).
    samples = (tuple(validation["inputs"]) if do_validate else ()) + tuple(
        p for p in fields["calibration_data"] if p != "random"
    )
    check_outputs(model, params["output"], fields["dtype"], report_path, params["overwrite"], params["dry_run"],
                  samples)
    check_input_range_names(model, validation["input_ranges"])
    if do_validate:
        # Inputs validation would refuse stop the command here, before the model and report are written.
        check_inputs(model, options_from_cli(_validation_only(validation)))
    report = _convert_and_print(model, params, fields)
    if do_validate:
        _validate_written(model, report, params, validation)


def _check_command_flags(params, given) -> None:
    """Usage errors of flags that would do nothing with the others given (the groups check their own)."""
    if params["quiet"] and params["verbose"]:
        raise click.UsageError("-q/--quiet and -v/--verbose contradict each other")
    do_validate = params["do_validate"]
    if not do_validate:
        # Options that only shape validation would silently do nothing; --tune judges by some of them.
        tune_reads = {"rtol", "atol", "metric", "limits", "natures"} if params["tune"] else set()
        judging = (("metric", "--metric"), ("limits", "--limit"), ("natures", "--nature"))
        for name, flag in (("fmt", "--format"), *((p, f"--{p}") for p in ("inputs", "rtol", "atol", "backend",
                                                                             "samples", "seed", "localize"))):
            if name in given and name not in tune_reads:
                raise click.UsageError(f"{flag} needs --validate")
        for name, flag in judging:
            if name in given and name not in tune_reads:
                raise click.UsageError(f"{flag} needs --validate or --tune")
    _check_random_input_flags(given, params, params["calibration_data"], do_validate)
    if params["fail_on_drift"] and not do_validate:
        raise click.UsageError("--fail-on-drift needs --validate")
    if params["dry_run"] and do_validate:
        raise click.UsageError("--dry-run writes no model to validate")


def _convert_and_print(model, params, fields):
    """Convert (the collector deferred, a progress bar unless -q), print the summary or plan, write --report."""
    quiet, report_path = params["quiet"], params["report_path"]
    # The model is cyclic garbage once converted: see ampconv_cli.collection.
    with collection.deferred():
        with make_progress(quiet) as progress:
            config = Config(progress=progress, **fields)
            report = ampconv.convert(model, params["output"], config, dry_run=params["dry_run"])
        if params["dry_run"]:
            click.echo(render_plan(report, spell=flag_of))
        elif not quiet:
            click.echo(render_text(report, verbose=params["verbose"], spell=flag_of), err=True)
        elif report.warnings:  # -q silences the summary, never a warning
            click.echo(render_warnings(report, spell=flag_of), err=True)
        if report_path:
            # A new report takes the written model's mode (same privacy); a replaced one keeps its own.
            outputs.write_json_atomic(report_path, report_data(report, command_words.typed()),
                                      mode_like=report.output)
    return report


def _validate_written(model, report, params, validation) -> None:
    """--validate: compare the written model with MODEL; drift is a warning, or exit 3 with --fail-on-drift."""
    collection.resume()
    validation = _validation_only(validation)
    options = options_from_cli(validation, decisions=report.decisions_by_node(), show_progress=not params["quiet"])
    outputs.set_phase("validation")  # an interrupt or error now names the files written
    code = run_and_render(model, report.output, options, params["fmt"], params["report_path"])
    if code != 0:
        if params["fail_on_drift"]:
            click.echo("ampconv: converted model drifts beyond tolerance (written; see above)", err=True)
            raise SystemExit(code)
        # The exit status stays 0 here (the model is written): say so where the FAIL is read.
        click.echo("ampconv: warning: converted model drifts beyond tolerance (FAIL above); the exit status "
                   "stays 0 without --fail-on-drift (then 3)", err=True)


def _validation_only(validation: dict) -> dict:
    """The validation parameters as validation reads them: with --inputs, --shape/--input-range were for
    the random calibration samples only."""
    if validation["inputs"]:
        return {**validation, "shapes": (), "input_ranges": ()}
    return validation


def _check_random_input_flags(given, validation, calibration_data, do_validate) -> None:
    """--shape and --input-range shape random inputs: usage errors where no random input is drawn.

    Random inputs are drawn by --validate without --inputs, by
    --calibration-data random and by the synthetic run (no --calibration-data,
    not --no-synthetic-run).
    """
    random_validation = do_validate and not validation["inputs"]
    synthetic = not calibration_data and validation["synthetic_run"] is not False
    if random_validation or tuple(calibration_data) == ("random",) or synthetic:
        return
    # --shape also sets the shapes the summary's GPU figures are counted at: never idle.
    for name, flag in (("input_ranges", "--input-range"),):
        if name not in given:
            continue
        if do_validate:
            raise click.UsageError(f"{flag} sets random inputs; with --inputs (and neither the synthetic run nor "
                                   "--calibration-data random) it does nothing")
        if not calibration_data:
            raise click.UsageError(f"{flag} sets the range of the synthetic run's inputs, which --no-synthetic-run "
                                   "turns off; drop one, or give --validate or --calibration-data random")
        raise click.UsageError(f"{flag} sets random inputs: the synthetic run's (no --calibration-data), "
                               "--calibration-data random's or --validate's; with sample files it does nothing")


def check_outputs(model, output, dtype, report_path, overwrite, dry_run, samples=()) -> None:
    """Check what this run writes besides the model, before it starts (``ampconv.writing.outputs`` rules).

    The model (``-o`` or the default name) and its data file may not be a
    validation sample. ``--report`` may not be an input (the model, its
    external data files, the samples) nor the model or its data file; an
    existing report file needs ``--overwrite``: the report is rewritten whole.
    """
    if Path(model).is_dir():  # before the default output name: "." has no name to derive one from
        raise ampconv.ModelLoadError(f"{model}: is a directory, expected an .onnx file")
    dst = Path(output) if output is not None else default_output_path(Path(model), dtype)
    produced = [] if dry_run else [
        ("the converted model", dst),
        ("the converted model's data file", dst.parent / outputs.data_file_name(dst)),
    ]
    sample_files = outputs.sample_input_files(samples)
    for what, path in produced:
        for sample_what, sample in sample_files:
            if outputs.same_file(path, sample):
                raise ampconv.OutputError(f"{dst}: {what} would overwrite {sample_what} {sample}; choose another -o")
    if not report_path:
        return
    path = Path(report_path)
    inputs = [("the input model", Path(model))]
    if path.exists():  # only an existing file can be an input: read the model's data files then
        inputs = outputs.model_input_files(model) + sample_files
    outputs.check_report_path(path, inputs=inputs, outputs=produced, overwrite=overwrite)


def report_data(report, command=None) -> dict:
    """The --report JSON: the report's dict, marked as an ampconv report (``outputs.REPORT_MARKER``), its
    notes in the command line's words, with the ``command`` as typed (``command_words``; the page repeats it)."""
    data = {outputs.REPORT_MARKER: outputs.REPORT_FORMAT, **report.to_dict(spell=flag_of)}
    if command:
        data["command"] = list(command)
    return data
