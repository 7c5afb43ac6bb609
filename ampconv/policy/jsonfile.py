"""Reading a policy file's JSON: every failure a one-line ``PolicyError`` naming the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ampconv.errors import PolicyError


def load_json(path: str | Path, what: str = "policy file") -> Any:
    """The parsed JSON of ``path``; ``what`` names the kind of file in the errors."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise PolicyError(f"{where}: no such {what}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise PolicyError(f"{where}: not a UTF-8 text file") from None
    except json.JSONDecodeError as exc:
        raise PolicyError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise PolicyError(f"{where}: JSON nested too deeply to be a {what}") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise PolicyError(f"{where}: not a usable JSON file ({exc})") from None
    except OSError as exc:  # unreadable: permissions, a device error
        raise PolicyError(f"{where}: cannot read the {what}: {exc.strerror or exc}") from None


def is_name(op: str) -> bool:
    """Whether ``op`` can name an op type (``Name`` or ``domain::Name``): printable, encodable text."""
    try:
        op.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape
        return False
    return bool(op) and op.isprintable() and len(op) <= 200


__all__ = ["is_name", "load_json"]
