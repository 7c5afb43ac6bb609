"""The rule table and its families, unit-tested on in-memory models (no disk, no onnxruntime)."""

from __future__ import annotations

import re
from pathlib import Path

import onnx.parser
import onnx_ir as ir
import pytest

from ampconv.config import Config
from ampconv.errors import spell_parameters
from ampconv.plan import Decision, evidence, gray, guards, hard, levels, user
from ampconv.plan.context import PlanContext
from ampconv.plan.facts import node_facts
from ampconv.plan.driver import RULE_ORDER
from ampconv.plan.rules import RULES, builtin_ids
from ampconv.plan.table import RULE_TABLE, active_rules, decide
from ampconv.policy import HIGH, LOW, load_policy

ROOT = Path(__file__).resolve().parents[2]


def _model(text: str) -> ir.Model:
    """Parse ONNX text; nodes are named after their first output (the text format has no node names)."""
    model = ir.serde.deserialize_model(onnx.parser.parse_model(text))
    for node in model.graph:
        node.name = node.outputs[0].name
    return model


def _ctx(model: ir.Model, level: str = "O2", pins=None, **config) -> PlanContext:
    block_ops = config.pop("block_ops", ())
    policy = load_policy(level=level, block_ops=block_ops)
    return PlanContext.create(model, policy, Config(level=level, block_ops=block_ops, **config).plan_options, pins or {})


def _node(model: ir.Model, name: str) -> ir.Node:
    return next(n for n in model.graph if n.name == name)


MLP = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 4] x) => (float[2, 3] y) <float[4, 3] W = {1,2,3,4,5,6,7,8,9,10,11,12}, float[3] big = {1e6, 1, 1}> {
    mm = MatMul (x, W)
    h = MatMul (x, W)
    a = Add (h, big)
    y = Relu (a)
}
"""


def test_every_registered_rule_is_documented():
    text = (ROOT / "docs" / "precision.md").read_text(encoding="utf-8")
    missing = [rule for rule in RULES if f"`{rule}`" not in text]
    assert missing == []


def test_decision_refuses_an_unregistered_rule_id():
    assert Decision(LOW, "white", "white list at O2").rule == "white"
    with pytest.raises(ValueError, match="unregistered rule id"):
        Decision(LOW, "whitelist", "a typo")


def test_each_rule_is_one_object_with_its_decision_in_the_table_order():
    """The table holds Rule objects, each with its function; RULE_ORDER lists every registered id once,
    the table's first in its order (the documented contract), then the rules decided around it."""
    assert all(rule.decide is not None for rule in RULE_TABLE)
    assert RULE_TABLE[-1].decide is gray.gray and RULE_TABLE[0].decide is hard.no_schema
    assert [rule.id for rule in evidence.RULES] == ["range-statistics", "range-reduction", "range-mask"]
    builtin = [rule for rule in RULE_ORDER]
    assert sorted(builtin) == sorted(builtin_ids())
    assert len(set(builtin)) == len(builtin)
    table_ids = [rule_id for rule in RULE_TABLE for rule_id in rule.ids()]
    assert builtin[:len(table_ids)] == table_ids
    assert builtin.index("user-keep-fp32") < builtin.index("hard-constant") < builtin.index("user-force-low") \
        < builtin.index("range-statistics") < builtin.index("white") < builtin.index("gray-follow") \
        < builtin.index("free-low") < builtin.index("structural") < builtin.index("io-kept")


def test_a_rule_applies_only_where_its_function_can_decide():
    """``applies`` replaces the old per-family screens: a BitCast rule is skipped for a MatMul, kept for a BitCast."""
    model = _model(MLP)
    ctx = _ctx(model)
    mm = _node(model, "mm")
    active = active_rules(ctx, node_facts(mm, ctx.opsets).op)
    assert hard.bitcast not in active and user.keep_fp32 not in active and gray.gray in active
    with_pattern = _ctx(model, keep_fp32=("^m",))
    assert user.keep_fp32 in active_rules(with_pattern, node_facts(mm, with_pattern.opsets).op)


def test_hard_schema_rule_names_the_opset_that_allows_it():
    model = _model("""<ir_version: 8, opset_import: ["" : 13]>
    g (float[1, 1, 4, 4] x, float[1, 1, 3, 3] w) => (float[1, 1, 2, 2] y) { y = Conv (x, w) }""")
    node = next(iter(model.graph))
    ctx = _ctx(model, dtype="bf16")
    decision = hard.schema(ctx, node, node_facts(node, ctx.opsets))
    assert decision.precision == HIGH and decision.rule == "hard-schema" and "allowed from opset 22" in decision.reason
    fp16 = _ctx(model, dtype="fp16")
    assert hard.schema(fp16, node, node_facts(node, fp16.opsets)) is None  # negative: fp16 is accepted


def test_user_rules_match_and_do_not_match():
    model = _model(MLP)
    node = _node(model, "mm")
    ctx = _ctx(model, keep_fp32=("^m",), force_low=("^zz",), block_ops=("MatMul",), pins={"mm": "onnxruntime: x"})
    facts = node_facts(node, ctx.opsets)
    assert user.keep_fp32(ctx, node, facts).rule == "user-keep-fp32"
    assert user.block_op(ctx, node, facts).reason == "user: --block-op MatMul"
    assert user.runtime_pin(ctx, node, facts).reason == "onnxruntime: x"
    assert user.force_low(ctx, node, facts) is None
    plain = _ctx(model)
    assert all(rule(plain, node, facts) is None for rule in (user.keep_fp32, user.block_op, user.runtime_pin))


def test_constant_guard_pins_overflow_and_records_it():
    model = _model(MLP)
    add = next(n for n in model.graph if n.op_type == "Add")
    ctx = _ctx(model)
    decision = guards.constant_range(ctx, add, node_facts(add, ctx.opsets))
    assert decision.rule == "hard-constant" and "1e+06" in decision.reason
    assert [(c.tensor, c.action) for c in ctx.constants] == [("big", "pinned")]
    clamp = _ctx(model, clamp=True)
    assert guards.constant_range(clamp, add, node_facts(add, clamp.opsets)) is None
    assert clamp.clamp == {"big": True}
    relu = next(n for n in model.graph if n.op_type == "Relu")
    assert guards.constant_range(ctx, relu, node_facts(relu, ctx.opsets)) is None  # no constant input


def test_level_rule_by_level_and_class():
    model = _model(MLP)
    relu = next(n for n in model.graph if n.op_type == "Relu")
    mm = _node(model, "mm")
    for level, node, expected in (("O1", mm, ("white", LOW)), ("O2", relu, None), ("O3", relu, ("level-O3", LOW))):
        ctx = _ctx(model, level=level)
        decision = levels.level(ctx, node, node_facts(node, ctx.opsets))
        assert (decision.rule, decision.precision) == expected if expected else decision is None


def test_gray_rule_follows_and_promotes():
    model = _model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] a, float[2] b) => (float[2] y) { s = Add (a, b) y = Relu (s) }""")
    add = next(iter(model.graph))
    a, b = add.inputs
    ctx = _ctx(model)
    facts = node_facts(add, ctx.opsets)
    ctx.values.update({a: LOW, b: LOW})
    assert gray.gray(ctx, add, facts).rule == "gray-follow"
    ctx.values[b] = HIGH
    assert gray.gray(ctx, add, facts).rule == "gray-promote"
    ctx.values.clear()
    assert gray.gray(ctx, add, facts).rule == "gray-free"


def test_decide_runs_the_table_in_order():
    """A node both blocked and white: the earlier rule (user-block-op) wins."""
    model = _model(MLP)
    node = _node(model, "mm")
    ctx = _ctx(model, block_ops=("MatMul",))
    assert decide(ctx, node, node_facts(node, ctx.opsets)).rule == "user-block-op"
    assert decide(_ctx(model), node, node_facts(node, ctx.opsets)).rule == "white"


def test_rule_ids_in_the_code_are_registered():
    """Every literal rule id in ampconv/plan is in the registry (Decision checks at run time; this catches dead ones)."""
    source = "".join(p.read_text() for p in (ROOT / "ampconv" / "plan").glob("*.py") if p.name != "rules.py")
    used = set(re.findall(r'Decision\(\s*\w+,\s*"([a-z0-9-]+)"', source))
    assert used and used <= set(RULES)


def test_name_patterns_that_match_nothing_or_collide_are_reported():
    from ampconv.plan import Planner

    model = _model(MLP)
    policy = load_policy()
    plan = Planner(model, policy, Config(keep_fp32=("^zzz", "^m"), force_low=("^mm$",)).plan_options).run()
    warnings = [spell_parameters(w) for w in plan.warnings]  # named parameters in Python words
    assert "keep_fp32 '^zzz' matches no node name" in warnings
    assert not any("'^m' matches no node" in w for w in warnings)
    collide = [w for w in warnings if "match both" in w]
    assert len(collide) == 1 and "'mm'" in collide[0] and "keep_fp32 wins" in collide[0]
    quiet = Planner(_model(MLP), policy, Config(keep_fp32=("^mm$",)).plan_options).run()
    assert quiet.warnings == []


# Configurations under which the rule screens (``table.active_rules``) are checked: each turns on
# what some screen looks at (pins, lists, name patterns, the LOW type, the level).
_SCREEN_CONFIGS = (
    dict(level="O2"),
    dict(level="O1", dtype="bf16"),
    dict(level="O3", keep_fp32=(".",), force_low=("a",), block_ops=("Relu", "MatMul"), pins="every"),
)


def _backend_models():
    """Every node model of onnx's backend test cases, types inferred (the corpus the screens meet)."""
    import warnings

    import numpy as np
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases()  # unfiltered: see test_schema_ties
    for case in cases:
        proto = case.model
        try:
            proto = onnx.shape_inference.infer_shapes(proto)
        except Exception:  # noqa: BLE001 - a model inference refuses is still a model to plan
            pass
        yield case.name, ir.serde.deserialize_model(proto)


def test_rule_screens_skip_only_rules_that_stay_silent():
    """A rule ``active_rules`` leaves out for a node's op returns None for that node: ``applies`` changes no decision.

    Each rule's ``applies`` restates its function's first check from the op
    and the context; this holds them to the rules on every node of onnx's
    backend models.
    """
    from ampconv.core.graphs import all_graphs
    from ampconv.plan.table import active_rules

    wrong, nodes = [], 0
    for name, model in _backend_models():
        for config in _SCREEN_CONFIGS:
            config = dict(config)
            pins = {n.name: "a check said so" for g in all_graphs(model) for n in g} if config.pop("pins", None) else {}
            ctx = _ctx(model, pins=pins, **config)
            for graph in all_graphs(model):
                for node in graph:
                    facts = node_facts(node, ctx.opsets, ctx.ops)
                    active = active_rules(ctx, facts.op)
                    nodes += 1
                    for rule in RULE_TABLE:
                        if rule.decide not in active and rule.decide(ctx, node, facts) is not None:
                            wrong.append(f"{name}: {rule.id} decides {node.op_type}")
    assert nodes > 3000  # the corpus was there: every op onnx knows, in several forms
    assert wrong == [], wrong[:10]
