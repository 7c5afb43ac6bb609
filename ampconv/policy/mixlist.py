"""Reader and validator for Ascend ``modify_mixlist`` JSON files (docs/precision.md sec. 7).

The whole file is validated before anything is applied; every error names the
file, the key and the op. Framework op names (``MatMulV2``, ``Dense``) are
read as ONNX op types (``framework_names``), each with a note. Any other
default-domain name onnx does not know is an error with a hint (a typo would
leave the policy silently unapplied); another domain's op (``domain::Op``)
is taken as written.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, List, Tuple

from ampconv.errors import PolicyError
from ampconv.policy.jsonfile import is_name, load_json
from ampconv.policy.lists import BLACK, GRAY, UNLISTED, WHITE
from ampconv.policy.names import did_you_mean, op_key, read_name

LIST_KEYS = {"black-list": BLACK, "white-list": WHITE, "gray-list": GRAY}
ACTIONS = ("to-add", "to-remove")


@dataclass(frozen=True)
class MixList:
    """A parsed, self-consistent policy file."""

    path: str
    entries: Dict[str, Dict[str, Tuple[str, ...]]]  # list key -> action -> op keys (ONNX names)
    warnings: Tuple[str, ...] = field(default=())
    notes: Tuple[str, ...] = field(default=())
    # ONNX op key -> the framework name written for it (only translated entries).
    written: Dict[str, str] = field(default_factory=dict)

    def named(self, op: str) -> str:
        """``'MatMul'``, or ``'MatMul' (written 'MatMulV2')`` for a translated entry."""
        return f"{op!r} (written {self.written[op]!r})" if op in self.written else repr(op)


def read_mixlist(path: str | Path) -> MixList:
    """Parse and structurally validate one policy file."""
    return mixlist_from_data(str(path), load_json(path))


def mixlist_from_data(where: str, data: Any) -> MixList:
    """Validate the parsed JSON of a mixlist file at ``where``; translate framework names."""
    if not isinstance(data, dict):
        raise PolicyError(f"{where}: top level must be an object with black-list/white-list/gray-list")
    entries: Dict[str, Dict[str, Tuple[str, ...]]] = {}
    notes: List[str] = []
    written: Dict[str, str] = {}
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
                if not is_name(op.strip()):
                    raise PolicyError(f"{where}: {key}.{action}: {op!r} is not an op type name")
            keys: List[str] = []
            for op in ops:
                reading = read_name(op.strip())
                if reading.framework is not None:
                    notes.append(f"{where}: {key}.{action}: {reading.framework.describe()}")
                    written.update({onnx: reading.written for onnx in reading.ops})
                elif not reading.known and "::" not in op_key(op.strip()):
                    # A default-domain op onnx does not know matches no valid node: the policy would silently
                    # not apply (as --block-op refuses it). Another domain's op cannot be judged: taken as written.
                    name = op_key(op.strip())
                    raise PolicyError(f"{where}: {key}.{action}: op {name!r} is unknown to onnx.defs and would "
                                      f"match no node{did_you_mean(name)}")
                # Two names for one ONNX op (MatMul, MatMulV2) are one entry.
                keys.extend(k for k in reading.ops if k not in keys)
            entries[key][action] = tuple(keys)
    mixlist = MixList(where, entries, (), tuple(notes), written)
    _check_contradictions(mixlist)
    return mixlist


def _check_contradictions(mixlist: MixList) -> None:
    where, entries = mixlist.path, mixlist.entries
    added: Dict[str, str] = {}
    for key, actions in entries.items():
        for op in actions.get("to-add", ()):
            if op in added and added[op] != key:
                raise PolicyError(f"{where}: op {mixlist.named(op)} is in both {added[op]}.to-add and {key}.to-add")
            added[op] = key
        both = set(actions.get("to-add", ())) & set(actions.get("to-remove", ()))
        if both:
            op = sorted(both)[0]
            raise PolicyError(f"{where}: op {mixlist.named(op)} is in both {key}.to-add and {key}.to-remove")


def apply_mixlist(
    classes: Dict[str, str], mixlist: MixList, already_gray: FrozenSet[str] = frozenset()
) -> Tuple[Dict[str, str], List[str]]:
    """Return ``classes`` updated by ``mixlist`` (every remove first, then every add) and notes.

    ``already_gray``: ops the preset has moved out of the black list into the
    gray one. A ``black-list.to-remove`` of such an op, still gray, asks for
    what is already so: a note, so that files written for the old lists keep
    working; any other remove of an op not in that list is an error.
    """
    result = dict(classes)
    notes: List[str] = []
    for key, actions in mixlist.entries.items():
        target = LIST_KEYS[key]
        for op in actions.get("to-remove", ()):
            current = result.get(op, UNLISTED)
            if target == BLACK and current == GRAY and op in already_gray:
                notes.append(
                    f"{mixlist.path}: {key}.to-remove: op {mixlist.named(op)} is already gray in this preset "
                    "(kept float32 only on evidence, docs/precision.md sec. 2): nothing to remove"
                )
                continue
            if current != target:
                raise PolicyError(
                    f"{mixlist.path}: {key}.to-remove: op {mixlist.named(op)} is not in the {key} "
                    f"(it is {current.lower()})"
                )
            # Ascend: removed from black/white and not added elsewhere -> gray.
            result[op] = UNLISTED if target == GRAY else GRAY
    for key, actions in mixlist.entries.items():
        for op in actions.get("to-add", ()):
            result[op] = LIST_KEYS[key]
    return result, notes


def mixlist_origins(mixlist: MixList) -> Dict[str, str]:
    """Op key -> where its class came from in this file (``FILE: white-list.to-add``), adds over removes."""
    origins: Dict[str, str] = {}
    for action in ("to-remove", "to-add"):
        for key, actions in mixlist.entries.items():
            for op in actions.get(action, ()):
                written = f" as {mixlist.written[op]!r}" if op in mixlist.written else ""
                origins[op] = f"{mixlist.path}: {key}.{action}{written}"
    return origins


__all__ = ["ACTIONS", "LIST_KEYS", "MixList", "apply_mixlist", "mixlist_from_data", "mixlist_origins", "op_key",
           "read_mixlist"]
