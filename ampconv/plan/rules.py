"""What a rule is (``Rule``) and the registry of rule ids: every ``Decision.rule`` the planner can emit.

The report's ``rule`` field, ``docs/precision.md`` and the tests speak in these
ids; ``Decision`` refuses an id that is not registered here. A rule is
defined once, beside its decision function, and registers itself
(``builtin``); ``ampconv.plan.table.RULE_TABLE`` lists the table's rules in
the order they are tried for one node, and ``ampconv.plan.driver.RULE_ORDER``
all ids in that order, the ones decided around the table (backward,
structural, interface, attribute) after them.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Dict, Optional, Tuple

from ampconv.errors import UsageError

# Families, in the order the driver consults them for one node.
HARD = "hard"  # schema and runtime facts: nothing overrides them
CHECK = "check"  # what the checker or onnxruntime said about an earlier attempt
USER = "user"  # the user's own overrides
GUARD = "guard"  # constant range guards
DATA = "data"  # what calibration data showed (activation ranges, the accuracy search)
RELEASE = "release"  # a float32 node tried LOW on the evidence under emulation, and kept LOW (the release step)
RANGE = "range"  # evidence on the model that a gray op once black must stay float32
LEVEL = "level"  # the level table and the op lists
GRAY = "gray"  # the gray rule: follow the activation inputs
BACKWARD = "backward"  # decided by consumers after the forward pass
STRUCTURAL = "structural"  # If/Loop/Scan, planned through their subgraphs
INTERFACE = "interface"  # the main graph's float inputs and outputs (keep_io_types)
ATTRIBUTE = "attribute"  # a precision attribute the plan sets on a node it decided


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule: its id, family and meaning, when it can apply, and its decision, in one object.

    ``decide(ctx, node, facts)`` returns a ``Decision`` whose ``rule`` is
    this id (or one of ``also``), or None to let the next rule decide.
    ``applies(ctx, op)`` (optional) says whether it can decide for nodes of an
    op under the options at all, so the planner skips it elsewhere (a rule for
    another op, an option not given). ``also``: the other ids this rule's
    decision may carry (the level rule says ``white``, ``black`` ...), each a
    Rule of its own family and meaning without a ``decide``.

    The built-in rules are such objects, each defined beside its function in
    its family's module (``plan.hard``, ``plan.evidence`` ...) and listed in
    order in ``plan.table.RULE_TABLE``; the backward, structural, interface
    and attribute rules, decided by the planner's phases around the table, are
    objects without ``decide``. A rule from outside the package
    (``Config(rules=[...])``) is the same object: the planner tries user rules
    after the hard facts, the earlier checks' pins, the user's
    ``block_ops``/``keep_fp32`` and the range and data guards, and before
    ``force_low`` and the level table: a user rule can keep any node float32
    or make it LOW, but not past what the model's numbers forbid.
    """

    id: str
    family: str
    meaning: str
    decide: Optional[Callable] = dataclasses.field(default=None, compare=False, repr=False)
    applies: Optional[Callable] = dataclasses.field(default=None, compare=False, repr=False)
    also: Tuple["Rule", ...] = dataclasses.field(default=(), compare=False, repr=False)

    def ids(self) -> Tuple[str, ...]:
        """This rule's id, then the ids of ``also``."""
        return (self.id,) + tuple(other.id for other in self.also)

    def can_apply(self, ctx, op) -> bool:
        """``applies(ctx, op)``, True when the rule has no such test."""
        return self.applies is None or bool(self.applies(ctx, op))


# Every id a Decision may carry: the built-in rules register as their modules are imported
# (importing any ampconv module imports the whole plan package), user rules through ``register``.
RULES: Dict[str, Rule] = {}
_BUILTIN: set = set()


def builtin(rule: Rule) -> Rule:
    """Register a rule of the package (and the ids of its ``also``); returns it. Called where it is defined."""
    for each in (rule,) + rule.also:
        if each.id in RULES:
            raise ValueError(f"rule id {each.id!r} is defined twice")
        RULES[each.id] = each
        _BUILTIN.add(each.id)
    return rule


def register(rule: Rule) -> Rule:
    """Register a rule from outside the package (``Config(rules=...)`` calls this); returns it.

    Its id must be new, or the id of this same rule registered before; it
    must carry a ``decide`` function.
    """
    if not isinstance(rule, Rule) or rule.decide is None:
        # Config.rules is the Python API's alone (no CLI flag): its errors name it in Python words.
        raise UsageError(f"Config(rules=...) takes ampconv.plan.rules.Rule objects with a decide function, "
                         f"got {rule!r}")
    known = RULES.get(rule.id)
    if known is not None and known.decide is not rule.decide:
        owner = "ampconv" if rule.id in _BUILTIN else "another rule"
        raise UsageError(f"Config(rules=...): rule id {rule.id!r} is already registered by {owner}")
    RULES[rule.id] = rule
    return rule


def builtin_ids() -> frozenset:
    """The ids the package defines (user rules excluded)."""
    return frozenset(_BUILTIN)


def check_rule_id(rule: str) -> None:
    """Raise ``ValueError`` unless ``rule`` is registered: a typo would silently break the report and the docs."""
    if rule not in RULES:
        raise ValueError(f"unregistered rule id {rule!r}")


__all__ = ["RULES", "USER", "Rule", "builtin", "builtin_ids", "check_rule_id", "register"]
