"""``ampconv report REPORT.json``: the report as one self-contained HTML page.

Registered on the ``ampconv`` group in main.py; errors map to exit codes in errors.py.
"""

from __future__ import annotations

import click

from ampconv_cli.errors import handle_errors
from ampconv_cli.options import output_flag, overwrite_flag


@click.command("report")
@click.argument("report", type=click.Path(dir_okay=True))
@output_flag("Page path (default: <report stem>.html beside the report).")
@overwrite_flag
@handle_errors
def command(report, output, overwrite):
    """Write a self-contained HTML page from a conversion REPORT (JSON).

    The page shows the summary, LOW/HIGH per op type, every node's precision
    in topological order, a searchable node table and, when the report has
    them, per-node errors along the graph. It loads nothing from the network.
    Exit 0 ok, 1 error (the report cannot be read, the page cannot be written).
    """
    from ampconv.report.html import write_page

    page = write_page(report, output, overwrite=overwrite)
    click.echo(f"ampconv: wrote {page}", err=True)
