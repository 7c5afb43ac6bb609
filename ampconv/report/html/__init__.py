"""The report page: one self-contained HTML file built from a ``--report`` JSON file.

``read.read_report_file`` loads and checks the JSON, ``columns.page_data``
shapes it into the compact form the page embeds, ``page.render_page`` writes
the HTML (its CSS and script are the strings in ``style`` and ``script``),
and ``write_page`` does all of it behind the output-path guards of
``ampconv.writing.outputs``. No network access, no third-party code: the page works
from a file on a machine with no internet.
"""

from __future__ import annotations

import os
from pathlib import Path

from ampconv.writing import outputs
from ampconv.errors import AmpconvError


def default_page_path(report: os.PathLike | str) -> Path:
    """``<report stem>.html`` beside the report."""
    report = Path(report)
    return report.with_name(f"{report.stem}.html")


def check_page_path(report: os.PathLike | str, page: os.PathLike | str, overwrite: bool = False) -> None:
    """Refuse a page path that is the report itself, an existing file without ``overwrite``, or unwritable."""
    outputs.check_single_output(page, "the HTML page", inputs=[("the input report", Path(report))],
                                overwrite=overwrite)


def write_page(report: os.PathLike | str, page: os.PathLike | str | None = None, overwrite: bool = False) -> Path:
    """Check the paths, read ``report``, write its page atomically; returns the page's path.

    Nothing is written when the report cannot be read or is not an ampconv
    report (``ampconv.errors.AmpconvError`` with a one-line message).
    """
    from ampconv.report.html.columns import page_data
    from ampconv.report.html.page import render_page
    from ampconv.report.html.read import read_report_file

    if Path(report).is_dir():  # before the default page name: "." has no name to derive one from
        raise AmpconvError(f"{report}: is a directory, not a report file")
    page = Path(page) if page is not None else default_page_path(report)
    check_page_path(report, page, overwrite)
    data = read_report_file(report)
    try:
        text = render_page(page_data(data))
    except (AttributeError, KeyError, TypeError, ValueError, IndexError) as exc:
        # read_report_file checks the keys every page needs; a section edited
        # by hand into another shape still gets a one-line error, not a traceback.
        raise AmpconvError(f"{report}: a malformed section in the report ({type(exc).__name__}: {exc})") from None
    # A lone surrogate in a name (JSON allows "\ud800") cannot be encoded: write a replacement character.
    text = text.encode("utf-8", errors="replace").decode("utf-8")
    outputs.write_text_atomic(page, text, "the HTML page")
    return page
