"""``ampconv validate REFERENCE CONVERTED``: compare a converted model with its float32 original.

Exit codes: 0 within tolerance, 3 over tolerance, 1 could not run, 2 bad usage.
The lead registers ``command`` on the ``ampconv`` group.
"""

from __future__ import annotations

import click
from ampconv_cli.validation_options import (
    FORMATS,
    options_from_cli,
    run_and_render,
    validation_options,
)

from ampconv.errors import AmpconvError


@click.command("validate")
@click.argument("reference", type=click.Path(dir_okay=False))
@click.argument("converted", type=click.Path(dir_okay=False))
@validation_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Result format; markdown fits a CI job summary.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Merge the result into this JSON report (top-level 'validation' key).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def command(ctx, reference, converted, fmt, report_path, quiet, **validation):
    """Compare CONVERTED with the float32 REFERENCE on the same inputs.

    Exits 0 within tolerance, 3 over tolerance, 1 if a model could not be
    run, 2 on bad usage.
    """
    try:
        options = options_from_cli(show_progress=not quiet, **validation)
        code = run_and_render(reference, converted, options, fmt, report_path)
    except AmpconvError as exc:
        # One place maps library errors to exit codes (until cli/errors.py is shared).
        click.echo(f"ampconv: error: {exc}", err=True)
        ctx.exit(exc.exit_code)
    ctx.exit(code)
