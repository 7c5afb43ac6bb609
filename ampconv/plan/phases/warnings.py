"""Phases ``NamePatterns`` and ``FallbackRefused``: what the plan warns about once every node is decided."""

from __future__ import annotations

from ampconv.errors import named
from ampconv.plan.fallback import refused_warning
from ampconv.plan.phases import Phase
from ampconv.plan.phases.facts import FALLBACK_CHECKED, NODES_DECIDED, PATTERNS_CHECKED
from ampconv.plan.state import PlanState


class NamePatterns(Phase):
    """Warn about --keep-fp32/--keep-bf16/--force-low patterns that match no node, and say which wins where
    both --keep-fp32 and --force-low match."""

    requires = frozenset({NODES_DECIDED})
    ensures = frozenset({PATTERNS_CHECKED})

    def run(self, state: PlanState) -> None:  # noqa: D102
        ctx = state.ctx
        if not (ctx.keep_fp32 or ctx.keep_bf16 or ctx.force_low):
            return
        names = [node.name or "" for node in state.decisions]
        for param, patterns in (("keep_fp32", ctx.keep_fp32), ("keep_bf16", ctx.keep_bf16),
                                ("force_low", ctx.force_low)):
            for pattern in patterns:
                if not any(pattern.search(name) for name in names):
                    state.warnings.append(f"{named(param)} {pattern.pattern!r} matches no node name")
        both = []
        for name in names if ctx.keep_fp32 and ctx.force_low else ():
            keep = next((p for p in ctx.keep_fp32 if p.search(name)), None)
            force = next((p for p in ctx.force_low if p.search(name)), None)
            if keep is not None and force is not None:
                both.append((name, keep.pattern, force.pattern))
        if both:
            name, keep, force = both[0]
            more = f" and {len(both) - 1} more" if len(both) > 1 else ""
            state.warnings.append(
                f"node {name!r}{more} match both {named('keep_fp32')} {keep!r} and {named('force_low')} {force!r}: "
                f"{named('keep_fp32')} wins (it is tried first)"
            )


class FallbackRefused(Phase):
    """Warn about the nodes a later opset would run in the fallback type (``plan.fallback.refused_warning``)."""

    requires = frozenset({NODES_DECIDED})
    ensures = frozenset({FALLBACK_CHECKED})

    def run(self, state: PlanState) -> None:  # noqa: D102
        refused = refused_warning(state.ctx)
        if refused:
            state.warnings.append(refused)
