"""Rules of your own (issue 28): a rule is one object, registered from outside the package in one edit."""

from __future__ import annotations

import pytest

import ampconv
from ampconv.errors import UsageError
from ampconv.plan.decision import Decision
from ampconv.plan.rules import USER, Rule
from ampconv.core.precision import Precision

from tests.helpers import convert_text

MLP = """<ir_version: 8, opset_import: ["" : 18]>
g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}, float[4] b = {0.1, 0.2, 0.3, 0.4}> {
    mm = MatMul (x, w)
    s = Add (mm, b)
    y = Softmax (s)
}""" % ", ".join(["0.5"] * 16)


def _softmax_in_float32(ctx, node, facts):
    if node.op_type == "Softmax":
        return Decision(Precision.HIGH, "keep-softmax-fp32", "my team keeps every Softmax float32")
    return None


KEEP_SOFTMAX = Rule("keep-softmax-fp32", USER, "our deployment keeps Softmax float32", decide=_softmax_in_float32,
                    applies=lambda ctx, op: op.op_type == "Softmax")


def test_a_rule_registered_from_outside_decides_and_is_reported(tmp_path):
    report, _ = convert_text(tmp_path, MLP, rules=[KEEP_SOFTMAX])
    by_op = {n["op_type"]: n for n in report.nodes}
    assert (by_op["Softmax"]["precision"], by_op["Softmax"]["rule"]) == ("HIGH", "keep-softmax-fp32")
    assert by_op["Softmax"]["reason"] == "my team keeps every Softmax float32"
    assert by_op["MatMul"]["precision"] == "LOW"  # applies() screens it out elsewhere


def test_without_the_rule_nothing_changes(tmp_path):
    report, _ = convert_text(tmp_path, MLP)
    assert {n["op_type"]: n["rule"] for n in report.nodes}["Softmax"] != "keep-softmax-fp32"


def test_a_rule_that_declines_leaves_the_table_to_decide(tmp_path):
    silent = Rule("never-decides", USER, "declines every node", decide=lambda ctx, node, facts: None)
    with_rule, _ = convert_text(tmp_path, MLP, rules=silent)
    plain, _ = convert_text(tmp_path, MLP)
    assert [n["rule"] for n in with_rule.nodes] == [n["rule"] for n in plain.nodes]


def test_user_rules_are_checked():
    with pytest.raises(UsageError, match="already registered by ampconv"):
        ampconv.Config(rules=[Rule("white", USER, "a clash", decide=_softmax_in_float32)])
    with pytest.raises(UsageError, match="decide function"):
        ampconv.Config(rules=[Rule("no-decision", USER, "nothing to run")])


def test_a_decision_under_another_rule_id_is_refused(tmp_path):
    liar = Rule("liar", USER, "claims another rule", decide=lambda ctx, node, facts: Decision(
        Precision.HIGH, "white", "not mine"))
    with pytest.raises(ValueError, match="liar"):
        convert_text(tmp_path, MLP, rules=[liar])
