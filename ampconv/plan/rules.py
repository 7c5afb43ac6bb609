"""The registry of rule ids: every ``Decision.rule`` the planner can emit, with its family and meaning.

The report's ``rule`` field, ``docs/precision.md`` and the tests speak in these
ids; ``Decision`` refuses an id that is not registered here. The order of this
table is the order in which the planner tries the rules for one node (the
driver runs ``ampconv.plan.table.RULE_TABLE``, which follows it); the rules of
the ``backward`` and ``structural`` families are applied after or around the
forward pass, as their meanings say.
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
RANGE = "range"  # evidence on the model that a gray op once black must stay float32
LEVEL = "level"  # the level table and the op lists
GRAY = "gray"  # the gray rule: follow the activation inputs
BACKWARD = "backward"  # decided by consumers after the forward pass
STRUCTURAL = "structural"  # If/Loop/Scan, planned through their subgraphs
INTERFACE = "interface"  # the main graph's float inputs and outputs (keep_io_types)
ATTRIBUTE = "attribute"  # a precision attribute the plan sets on a node it decided


@dataclasses.dataclass(frozen=True)
class Rule:
    """One rule id: its family and what it means, in one line.

    A rule from outside the package (``Config(rules=[...])``) is one object
    with its decision too: ``decide(ctx, node, facts)`` returns a
    ``Decision`` whose ``rule`` is this id, or None to let the next rule
    decide; ``applies(ctx, op)`` (optional) says whether it can decide for
    nodes of an op at all, so the planner skips it elsewhere. The planner
    tries user rules after the hard facts, the earlier checks' pins, the
    user's ``block_ops``/``keep_fp32`` and the range and data guards, and
    before ``force_low`` and the level table: a user rule can keep any node
    float32 or make it LOW, but not past what the model's numbers forbid.
    """

    id: str
    family: str
    meaning: str
    decide: Optional[Callable] = dataclasses.field(default=None, compare=False, repr=False)
    applies: Optional[Callable] = dataclasses.field(default=None, compare=False, repr=False)


_TABLE: Tuple[Rule, ...] = (
    Rule("hard-no-schema", HARD, "no schema is known for the op: its float tensors stay float32"),
    Rule("no-float", HARD, "no float32 data in the node's main type variable: nothing to convert"),
    Rule("hard-unknown-type", HARD, "an input's type could not be inferred; it may be float32, so the node stays float32"),
    Rule("hard-container", HARD, "sequence or optional types stay float32"),
    Rule("hard-tensor-attribute", HARD, "float32 tensor attributes tie the node's type to float32"),
    Rule("hard-bitcast", HARD, "BitCast reinterprets bits: its types are its meaning"),
    Rule("hard-function-body", HARD, "the op's ONNX function body only type-checks in float32"),
    Rule("hard-runtime-kernel", HARD, "onnxruntime's CPU provider runs this form of the op only in float32"),
    Rule("hard-quantization", HARD, "quantization and training ops stay float32"),
    Rule("hard-schema", HARD, "the op's schema at the model's opset does not accept the LOW type"),
    Rule("runtime-pin", CHECK, "onnx.checker or onnxruntime rejected this node in LOW in an earlier attempt"),
    Rule("user-block-op", USER, "--block-op: the op type stays float32 at every level, O3 included"),
    Rule("user-keep-fp32", USER, "--keep-fp32: the node name matches a pattern"),
    Rule("hard-constant", GUARD, "a constant input holds values beyond the LOW range (or that flush to 0)"),
    Rule("data-tune", DATA, "--tune: the accuracy search found this node's LOW rounding fails validation"),
    Rule("data-overflow", DATA, "calibration data: an input or output exceeds the LOW range (with margin)"),
    Rule("data-accumulation", DATA, "calibration data: a reduction's running sum exceeds the LOW range"),
    Rule("data-underflow", DATA, "calibration data: an output mostly below the LOW normal range feeds an error amplifier"),
    Rule("user-force-low", USER, "--force-low: the node name matches a pattern"),
    Rule("range-statistics", RANGE, "part of a normalization decomposed into ops whose squares no float32 run saw fit: statistics float32"),
    Rule("range-reduction", RANGE, "fp16 sum over so many values that a modest mean overflows it"),
    Rule("range-mask", RANGE, "softmax over a constant mask with a fully masked row"),
    Rule("range-phase", RANGE, "computes the angle of a Cos/Sin from an integer (positions): kept float32"),
    Rule("level-O3", LEVEL, "level O3: every op LOW"),
    Rule("white", LEVEL, "the op is on the white list: LOW at O1-O3"),
    Rule("black", LEVEL, "the op is on the black list: float32 at O1 and O2"),
    Rule("unlisted", LEVEL, "the op is on no list: float32 at O1, LOW at O2 and O3"),
    Rule("gray-follow", GRAY, "gray op: follows the precision of its activation inputs"),
    Rule("gray-promote", GRAY, "gray op: its activation inputs disagree, so it runs in float32"),
    Rule("gray-narrow", GRAY, "gray op whose float32 voters are bounded by their op's semantics (cos, sin, "
         "softmax): they are cast down and the op follows its LOW inputs"),
    Rule("gray-free", GRAY, "gray op without activation inputs: decided by its consumers"),
    Rule("free-low", BACKWARD, "decided by consumers: every float consumer is LOW"),
    Rule("free-high", BACKWARD, "decided by consumers: a consumer needs float32"),
    Rule("transparent-low", BACKWARD, "data movement whose consumers are all LOW: the cast moves upstream (same bits)"),
    Rule("transparent-shared", BACKWARD, "data movement that reads the LOW copy of a weight other nodes need LOW"),
    Rule("transparent-weight", BACKWARD, "a selection (Gather, Slice) from a large weight no LOW op reads: the weight "
         "is stored LOW and the selected values are cast"),
    Rule("structural", STRUCTURAL, "If/Loop/Scan: outputs follow the subgraphs"),
    Rule("io-kept", INTERFACE, "keep_io_types keeps this main-graph input or output float32"),
    Rule("io-converted", INTERFACE, "keep_io_types does not keep this main-graph input or output: it is LOW"),
    Rule("io-kv-cache", INTERFACE, "kv_cache='low': a decoder's KV cache input or output is LOW"),
    Rule("io-misfit", INTERFACE, "an output keep_io_types leaves free stays float32: its values are known not to fit LOW"),
    Rule("io-undecided", INTERFACE, "an output keep_io_types leaves free stays float32: its producer was not planned"),
    Rule("attention-softmax-fp32", ATTRIBUTE,
         "a LOW Attention computes its softmax in float32 (softmax_precision = FLOAT): scores are what LOW risks"),
)

RULES: Dict[str, Rule] = {rule.id: rule for rule in _TABLE}
_BUILTIN = frozenset(RULES)
ORDER: Tuple[str, ...] = tuple(rule.id for rule in _TABLE)


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


def check_rule_id(rule: str) -> None:
    """Raise ``ValueError`` unless ``rule`` is registered: a typo would silently break the report and the docs."""
    if rule not in RULES:
        raise ValueError(f"unregistered rule id {rule!r}")


__all__ = ["ORDER", "RULES", "USER", "Rule", "check_rule_id", "register"]
