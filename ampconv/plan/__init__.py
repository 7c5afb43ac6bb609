"""Decide a precision for every node, with the rule that decided it (docs/precision.md).

The planner only reads the model. Its output, a ``Plan``, says for every node
its precision (LOW, HIGH, or NONE when it carries no float32 data), the rule
and a human reason, the node a gray op followed, what each input slot needs and
what each output will be. Rewrite passes apply the plan; reports print it.

Where a decision is made, in one step:
- ``rules``: what a rule is (``Rule``: id, family, one-line meaning, when it
  applies, its decision) and the registry of ids; the report's ``rule`` field
  is one of these ids;
- ``table``: the order in which the rules are tried for one node, as the
  list of Rule objects the driver runs (per op, the rules that can apply
  there: ``table.active_rules``);
- one module per family: ``hard`` (schema and runtime facts), ``user`` (user
  overrides and checker/runtime pins), ``guards`` (constant ranges),
  ``levels`` (level table and op lists), ``gray`` (gray rule and backward pass);
- ``phases``: the steps around the table, each declaring what it requires and
  ensures (inputs, every graph with If/Loop/Scan through their subgraphs and
  the backward pass, shared weights, outputs, slot needs); ``state``: what
  they share; ``driver``: orders them and makes the ``Plan``;
- ``decision``: the data (Decision, NodePlan, Plan); ``context``: what rules
  read; ``facts``: an op's schema facts and a node's float slots; ``ranges``:
  weights' range facts.
"""

from __future__ import annotations

from ampconv.plan.decision import ANY, FREE, LOW_DTYPES, NONE, ConstantNote, Decision, NodePlan, Plan
from ampconv.plan.driver import Planner
from ampconv.plan.values import constant_array, is_constant, is_float

__all__ = [
    "ANY",
    "ConstantNote",
    "Decision",
    "FREE",
    "LOW_DTYPES",
    "NONE",
    "NodePlan",
    "Plan",
    "Planner",
    "constant_array",
    "is_constant",
    "is_float",
]
