"""``ampconv validate REFERENCE CONVERTED``: compare a converted model with its float32 original.

Exit codes: 0 within tolerance, 3 over tolerance, 1 could not run, 2 bad usage.
Registered on the ``ampconv`` group in main.py; errors map to exit codes in errors.py.
"""

from __future__ import annotations

import click
from ampconv_cli.errors import handle_errors
from ampconv_cli.validation_options import (
    FORMATS,
    options_from_cli,
    run_and_render,
    validation_options,
)


@click.command("validate")
@click.argument("reference", type=click.Path(dir_okay=False))
@click.argument("converted", type=click.Path(dir_okay=False))
@validation_options
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Result format; markdown fits a CI job summary.")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), default=None,
              help="Merge the result into this JSON report (top-level 'validation' key).")
@click.option("-q", "--quiet", is_flag=True, help="No progress bar.")
@handle_errors
def command(reference, converted, fmt, report_path, quiet, **validation):
    """Compare CONVERTED with the float32 REFERENCE on the same inputs.

    Exits 0 within tolerance, 3 over tolerance, 1 if a model could not be
    run, 2 on bad usage.
    """
    options = options_from_cli(show_progress=not quiet, **validation)
    code = run_and_render(reference, converted, options, fmt, report_path)
    if code:
        raise SystemExit(code)
