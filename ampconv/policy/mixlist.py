"""Reader and validator for Ascend ``modify_mixlist`` JSON files (docs/precision.md sec. 7).

The whole file is validated before anything is applied; every error names the
file, the key and the op.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Tuple

from ampconv.errors import PolicyError
from ampconv.policy.lists import BLACK, GRAY, UNLISTED, WHITE
from ampconv.policy.names import did_you_mean
from ampconv.schema import is_known_op

LIST_KEYS = {"black-list": BLACK, "white-list": WHITE, "gray-list": GRAY}
ACTIONS = ("to-add", "to-remove")


@dataclass(frozen=True)
class MixList:
    """A parsed, self-consistent policy file."""

    path: str
    entries: Dict[str, Dict[str, Tuple[str, ...]]]  # list key -> action -> ops
    warnings: Tuple[str, ...] = field(default=())


def op_key(entry: str) -> str:
    """Normalize ``ai.onnx::Op`` and ``::Op`` to ``Op``; keep ``domain::Op``."""
    if "::" in entry:
        domain, op = entry.split("::", 1)
        return op if domain in ("", "ai.onnx") else f"{domain}::{op}"
    return entry


def _is_name(op: str) -> bool:
    """Whether ``op`` can name an op type (``Name`` or ``domain::Name``): printable, encodable text."""
    try:
        op.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate from a JSON escape
        return False
    return op.isprintable() and len(op) <= 200


def read_mixlist(path: str | Path) -> MixList:
    """Parse and structurally validate one policy file."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise PolicyError(f"{where}: no such policy file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise PolicyError(f"{where}: not a UTF-8 text file") from None
    except json.JSONDecodeError as exc:
        raise PolicyError(f"{where}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except RecursionError:
        raise PolicyError(f"{where}: JSON nested too deeply to be a policy file") from None
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        raise PolicyError(f"{where}: not a usable JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise PolicyError(f"{where}: top level must be an object with black-list/white-list/gray-list")
    entries: Dict[str, Dict[str, Tuple[str, ...]]] = {}
    warnings: List[str] = []
    for key, body in data.items():
        if key not in LIST_KEYS:
            raise PolicyError(
                f"{where}: unknown key {key!r} (expected black-list, white-list or gray-list)"
            )
        if not isinstance(body, dict):
            raise PolicyError(f"{where}: {key} must be an object with to-add/to-remove")
        entries[key] = {}
        for action, ops in body.items():
            if action not in ACTIONS:
                raise PolicyError(f"{where}: {key}: unknown key {action!r} (expected to-add or to-remove)")
            if not isinstance(ops, list) or not all(isinstance(o, str) and o.strip() for o in ops):
                raise PolicyError(f"{where}: {key}.{action} must be a list of op type names")
            for op in ops:
                if not _is_name(op.strip()):
                    raise PolicyError(f"{where}: {key}.{action}: {op!r} is not an op type name")
            normalized = tuple(op_key(o.strip()) for o in ops)
            entries[key][action] = normalized
            for op in normalized:
                domain, name = op.split("::", 1) if "::" in op else ("", op)
                if not is_known_op(domain, name):
                    warnings.append(f"{where}: {key}.{action}: op {op!r} is unknown to onnx.defs{did_you_mean(op)}")
    _check_contradictions(where, entries)
    return MixList(where, entries, tuple(warnings))


def _check_contradictions(where: str, entries: Dict[str, Dict[str, Tuple[str, ...]]]) -> None:
    added: Dict[str, str] = {}
    for key, actions in entries.items():
        for op in actions.get("to-add", ()):
            if op in added and added[op] != key:
                raise PolicyError(f"{where}: op {op!r} is in both {added[op]}.to-add and {key}.to-add")
            added[op] = key
        both = set(actions.get("to-add", ())) & set(actions.get("to-remove", ()))
        if both:
            op = sorted(both)[0]
            raise PolicyError(f"{where}: op {op!r} is in both {key}.to-add and {key}.to-remove")


def apply_mixlist(classes: Dict[str, str], mixlist: MixList) -> Dict[str, str]:
    """Return ``classes`` updated by ``mixlist``: every remove first, then every add."""
    result = dict(classes)
    for key, actions in mixlist.entries.items():
        target = LIST_KEYS[key]
        for op in actions.get("to-remove", ()):
            current = result.get(op, UNLISTED)
            if current != target:
                raise PolicyError(
                    f"{mixlist.path}: {key}.to-remove: op {op!r} is not in the {key} "
                    f"(it is {current.lower()})"
                )
            # Ascend: removed from black/white and not added elsewhere -> gray.
            result[op] = UNLISTED if target == GRAY else GRAY
    for key, actions in mixlist.entries.items():
        for op in actions.get("to-add", ()):
            result[op] = LIST_KEYS[key]
    return result
