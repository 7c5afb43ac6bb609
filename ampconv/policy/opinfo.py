"""Ascend operator-info files (``aic-<soc>-ops-info.json``) as a base policy (docs/precision.md sec. 7).

Such a file maps Ascend op names to records; a record's
``precision_reduce.flag`` says whether Ascend may run the op in float16:
``"true"`` is the white list, ``"false"`` the black list, and a record without
``precision_reduce`` is gray. Names are read as ONNX op types through
``framework_names``; a real file holds hundreds of ops without an ONNX
counterpart, which are listed (``OpInfoFile.unmatched``) and summarized in one
note, not warned about one by one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Tuple

from ampconv.errors import PolicyError, named
from ampconv.policy.jsonfile import is_name, load_json
from ampconv.policy.lists import BLACK, GRAY, WHITE
from ampconv.policy.mixlist import ACTIONS, LIST_KEYS
from ampconv.policy.names import read_name

FLAGS = {"true": WHITE, "false": BLACK}
# Keys of a record that only an operator-info file has: how a file given as a
# mixlist is recognized (a misspelt mixlist key must stay a mixlist error).
RECORD_KEYS = frozenset(
    """precision_reduce op opFile opInterface dynamicShapeSupport dynamicFormat dynamicRankSupport
    dynamicCompileStatic heavyOp needCheckSupport slicePattern imply_type attr async binfile kernel
    partial""".split()
)
_SLOT = re.compile(r"(input|output)\d+")
# A conflict between records keeps the class that leaves more float32.
_CAUTION = {WHITE: 0, GRAY: 1, BLACK: 2}
# How many names a one-line note shows before "and N more".
_SHOWN = 8


@dataclass(frozen=True)
class OpInfoFile:
    """A parsed operator-info file, read as ONNX op classes."""

    path: str
    classes: Dict[str, str]  # ONNX op key -> WHITE/BLACK/GRAY
    origins: Dict[str, str]  # ONNX op key -> which record decided it
    unmatched: Tuple[str, ...] = ()  # names with no ONNX counterpart (sorted)
    notes: Tuple[str, ...] = field(default=())


def looks_like_op_info(data: Any) -> bool:
    """Whether parsed JSON has the shape of an operator-info file, not of a mixlist.

    No mixlist key at the top, every value an object without to-add/to-remove,
    and one record at least with a key only operator-info records have.
    """
    if not isinstance(data, dict) or not data or any(key in LIST_KEYS for key in data):
        return False
    records = list(data.values())
    if not all(isinstance(r, dict) and not any(a in r for a in ACTIONS) for r in records):
        return False
    return any(key in RECORD_KEYS or _SLOT.fullmatch(str(key)) for r in records for key in r)


def read_op_info(path: str | Path) -> OpInfoFile:
    """Parse and validate one operator-info file."""
    where = str(path)
    data = load_json(path, "operator-info file")
    if isinstance(data, dict) and data and all(key in LIST_KEYS for key in data):
        raise PolicyError(
            f"{where}: a modify_mixlist file (black-list/white-list/gray-list), not an operator-info file: "
            f"give it in {named('mixlists')}"
        )
    return op_info_from_data(where, data)


def record_class(where: str, name: str, record: Any) -> str:
    """WHITE, BLACK or GRAY for one record; a malformed record is a ``PolicyError``."""
    if not isinstance(record, dict):
        raise PolicyError(f"{where}: op {name!r}: the record must be an object, not {_json_type(record)}")
    if "precision_reduce" not in record:
        return GRAY
    reduce = record["precision_reduce"]
    if not isinstance(reduce, dict):
        raise PolicyError(f"{where}: op {name!r}: precision_reduce must be an object with a flag")
    flag = reduce.get("flag")
    if flag not in FLAGS:
        got = "no flag" if "flag" not in reduce else f"{flag!r}"
        raise PolicyError(f'{where}: op {name!r}: precision_reduce.flag must be "true" or "false", got {got}')
    return FLAGS[flag]


def op_info_from_data(where: str, data: Any) -> OpInfoFile:
    """Validate the parsed JSON of an operator-info file at ``where`` and read it as ONNX op classes."""
    if not isinstance(data, dict):
        raise PolicyError(f"{where}: top level must be an object mapping op names to records")
    # ONNX op key -> [(class, written name, exact)]: exact when the record names the op itself.
    claims: Dict[str, List[Tuple[str, str, bool]]] = {}
    unmatched: List[str] = []
    translated: List[str] = []
    for name, record in data.items():
        if not name.strip() or not is_name(name.strip()):
            raise PolicyError(f"{where}: {name!r} is not an op name")
        cls = record_class(where, name, record)
        reading = read_name(name.strip())
        # Another domain's op (domain::Op) is taken as written: onnx.defs cannot judge it.
        if not reading.ops or not (reading.known or "::" in reading.ops[0]):
            unmatched.append(name)
            continue
        if reading.framework is not None:
            translated.append(f"{name!r} as {' and '.join(map(repr, reading.ops))}")
        for op in reading.ops:
            claims.setdefault(op, []).append((cls, name, reading.framework is None))
    classes, origins, conflicts = _decide(claims)
    notes = []
    if translated:
        notes.append(f"{where}: {len(translated)} framework op name(s) read as ONNX ops: {_some(translated)}")
    if unmatched:
        notes.append(
            f"{where}: {len(unmatched)} op record(s) name no ONNX op and match no node: "
            f"{_some(sorted(map(repr, unmatched)))} (Policy.unmatched and `ampconv policy show` list them all)"
        )
    if conflicts:
        notes.append(
            f"{where}: records disagree on {len(conflicts)} ONNX op(s); the op's own record, else the one "
            f"keeping more float32, decides: {_some(conflicts)}"
        )
    return OpInfoFile(where, classes, origins, tuple(sorted(unmatched)), tuple(notes))


def _decide(claims: Dict[str, List[Tuple[str, str, bool]]]) -> Tuple[Dict[str, str], Dict[str, str], List[str]]:
    """One class per ONNX op from the records naming it; conflicts described."""
    classes: Dict[str, str] = {}
    origins: Dict[str, str] = {}
    conflicts: List[str] = []
    for op, options in claims.items():
        exact = [c for c in options if c[2]]
        cls, name, _ = max(exact or options, key=lambda c: _CAUTION[c[0]])
        classes[op] = cls
        others = ", ".join(_describe(n, c) for c, n, _ in options if n != name)
        if len({c[0] for c in options}) > 1:
            origins[op] = f"{_describe(name, cls)} over {others}"
            conflicts.append(f"{op!r} {cls.lower()} ({origins[op]})")
        else:
            origins[op] = ", ".join(filter(None, (_describe(name, cls), others)))
    return classes, origins, conflicts


def _describe(name: str, cls: str) -> str:
    """``'Conv2D' flag true`` / ``'Add' without precision_reduce``."""
    if cls == GRAY:
        return f"{name!r} without precision_reduce"
    return f"{name!r} flag {'true' if cls == WHITE else 'false'}"


def _some(items: List[str]) -> str:
    """The first few items, then how many more."""
    shown = ", ".join(items[:_SHOWN])
    return shown if len(items) <= _SHOWN else f"{shown} and {len(items) - _SHOWN} more"


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type."""
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "an array"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


__all__ = ["OpInfoFile", "looks_like_op_info", "op_info_from_data", "read_op_info", "record_class"]
