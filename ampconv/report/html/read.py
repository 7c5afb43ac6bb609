"""Read a ``--report`` JSON file for the page, with a one-line error for anything else."""

from __future__ import annotations

import json
import os

from ampconv.writing import outputs
from ampconv.errors import AmpconvError

# Keys the page reads from every node entry.
_NODE_KEYS = ("name", "op_type", "precision")
# Keys every conversion report has, marked or not (reports written before the marker existed).
_CONVERSION_KEYS = frozenset({"source", "output", "dtype", "level", "nodes"})


def read_report_file(path: os.PathLike | str) -> dict:
    """The report dict in ``path``; ``AmpconvError`` naming the file and the problem otherwise.

    Accepted: what ``convert --report`` writes (marked with
    ``outputs.REPORT_MARKER``), and older conversion reports with every key of
    one. A validation-only report (``validate --report`` into a new file) has
    no nodes to show and is refused with that reason.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise AmpconvError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AmpconvError(f"{path}: is a directory, not a report file") from None
    except OSError as exc:
        raise AmpconvError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise AmpconvError(f"{path}: not a JSON file (not UTF-8 text)") from None
    except ValueError as exc:
        raise AmpconvError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise AmpconvError(f"{path}: not an ampconv report (JSON {type(data).__name__}, not an object)")
    # outputs.read_report's rule, on the data already parsed (a 40,000-node report is megabytes).
    if not (outputs.REPORT_MARKER in data or "validation" in data or _CONVERSION_KEYS <= data.keys()):
        raise AmpconvError(f"{path}: not an ampconv report (no {outputs.REPORT_MARKER!r} key)")
    if not isinstance(data.get("nodes"), list):
        raise AmpconvError(
            f"{path}: an ampconv report without conversion nodes (a validation-only report?); "
            "write one with 'ampconv convert MODEL --report FILE.json'"
        )
    for index, node in enumerate(data["nodes"]):
        if not isinstance(node, dict) or any(not isinstance(node.get(k), str) for k in _NODE_KEYS):
            raise AmpconvError(f"{path}: not a valid ampconv report (node {index} lacks name/op_type/precision)")
    return data
