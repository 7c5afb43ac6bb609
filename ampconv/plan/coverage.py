"""What a plan leaves float32 that the user must hear about, and what would change it.

Two things a GPU user cannot afford to miss in a summary:

- nodes kept float32 because no schema is known for their op (an op
  onnxruntime defines, with onnxruntime not installed; a custom domain), and
  the nodes after them whose input types are therefore unknown: one note per
  domain with the counts and the remedy;
- a model holding onnxruntime's own ops in the default domain
  (SimplifiedLayerNormalization): it runs on onnxruntime only, and a note says so;
- a model whose heavy ops (``figures.HEAVY_OPS``: MatMul, Conv, attention,
  fused norms) all stay float32: converted, it is no faster, so that is a
  warning with the rules that kept them, never a silent 100%;
- nodes written in bfloat16 that the GPU provider has no bfloat16 kernel for
  (``bf16_kernel_notes``), asked of the target runtime's kernel registry
  (``Plan.target``): onnxruntime would run them elsewhere, with copies; or,
  once, why that could not be asked (a provider listed but not loadable here).
"""

from __future__ import annotations

from collections import Counter
from typing import Dict, List, Mapping

import onnx_ir as ir

from ampconv.core.heavy_ops import HEAVY_OPS
from ampconv.plan.decision import NodePlan, Plan
from ampconv.core.precision import Precision
from ampconv.policy import HIGH, LOW
from ampconv.runtime.facts import RuntimeFacts
from ampconv.runtime.schema import normalize_domain

# Domains whose schemas onnxruntime ships (com.microsoft and its layout variants).
RUNTIME_DOMAINS = frozenset({"com.microsoft", "com.microsoft.nchwc", "com.ms.internal.nhwc"})


def coverage_notes(nodes: Mapping[ir.Node, NodePlan], runtime: RuntimeFacts) -> List[str]:
    """One note per domain whose nodes stayed float32 for want of a schema (``runtime``'s or onnx's), with
    the remedy."""
    missing: Dict[str, Counter] = {}
    unknown_inputs = 0
    for node, plan in nodes.items():
        rule = plan.decision.rule
        if rule == "hard-no-schema":
            missing.setdefault(normalize_domain(node.domain) or "ai.onnx", Counter())[node.op_type] += 1
        elif rule == "hard-unknown-type":
            unknown_inputs += 1
    notes = _runtime_only_note(nodes, runtime)
    after = f", and {unknown_inputs} node(s) reading their outputs (input types unknown)" if unknown_inputs else ""
    for domain, ops in sorted(missing.items()):
        listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in ops.most_common(4))
        more = f" and {len(ops) - 4} more op types" if len(ops) > 4 else ""
        notes.append(
            f"{sum(ops.values())} node(s) of domain {domain} ({listed}{more}){after} stay float32: "
            f"no schema is known for them; {_remedy(domain, runtime)}"
        )
        after = ""  # said once, with the first domain
    return notes


def _runtime_only_note(nodes: Mapping[ir.Node, NodePlan], runtime: RuntimeFacts) -> List[str]:
    """A note when the model holds onnxruntime's own ops in the default domain (its output loads there only)."""
    found = runtime.own_default_domain_ops_among(nodes)
    if not found:
        return []
    listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in found.most_common(4))
    return [f"{sum(found.values())} node(s) are onnxruntime's own ops in the default domain ({listed}): onnx.checker "
            "has no schema for them, so onnxruntime's load check judged them; runtimes without onnxruntime's own "
            "operators (TensorRT, OpenVINO) will refuse the model, as they refuse the input"]


def _remedy(domain: str, runtime: RuntimeFacts) -> str:
    """What would let ampconv decide the nodes of ``domain``."""
    if domain in RUNTIME_DOMAINS and not runtime.schemas_available():
        return "install onnxruntime (pip install 'ampconv[cpu]'), whose contrib operator schemas decide them"
    if domain in RUNTIME_DOMAINS:
        return "the installed onnxruntime does not define these ops; a newer onnxruntime may"
    return "no installed library defines this domain, so their types cannot be known and no option changes them"


def heavy_warning(nodes: Mapping[ir.Node, NodePlan], low_name: str) -> List[str]:
    """A warning when the model has heavy ops and none of them runs LOW (empty otherwise)."""
    heavy = [(node, plan) for node, plan in nodes.items() if is_heavy(node)]
    kept = [plan for _, plan in heavy if plan.decision.precision == HIGH]
    # A heavy op with no float32 data (already LOW in the input) is no loss.
    if not kept or any(plan.decision.precision == LOW for _, plan in heavy):
        return []
    rules = Counter(plan.decision.rule for plan in kept)
    why = ", ".join(f"{rule} x{n}" for rule, n in rules.most_common(3))
    return [
        f"none of the {len(kept)} heavy op(s) (MatMul, Conv, attention, fused norms) runs in {low_name}: "
        f"the converted model will be no faster on a GPU (kept float32 by {why}; the report's nodes say why)"
    ]


def is_heavy(node: ir.Node) -> bool:
    """Whether ``node`` is one of ``figures.HEAVY_OPS``."""
    return node.op_type in HEAVY_OPS.get(normalize_domain(node.domain), ())


def bf16_kernel_notes(plan: Plan, opsets: Mapping[str, int]) -> List[str]:
    """Where the output runs as written on the GPU: bfloat16 nodes the target's GPU provider has no kernel for.

    The nodes asked about are those the plan writes in bfloat16: every LOW node
    under ``dtype="bf16"``, the FALLBACK nodes under ``fallback_dtype="bf16"``.
    The answer comes from the target runtime's kernel registry
    (``plan.target``), which lists CUDA's kernels only in a build with the
    CUDA provider (onnxruntime-gpu), and only where that provider loads: when
    it cannot be asked, one note says why (a fallback conversion always; a
    plain bf16 conversion only when the runtime lists the provider: the user
    installed it for this).
    """
    wanted = [Precision.LOW] if plan.low == "bf16" else []
    if plan.fallback == "bf16":
        wanted.append(Precision.FALLBACK)
    written = [node for node, node_plan in plan.nodes.items() if node_plan.decision.precision in wanted]
    if not written:
        return []
    facts, provider = plan.target.runtime, plan.target.bf16_provider
    short = provider.replace("ExecutionProvider", "")
    if provider not in facts.kernel_providers():
        if plan.fallback != "bf16" and provider not in facts.listed_providers():
            return []
        if provider in facts.listed_providers():
            return [f"{facts.why_no_kernels(provider)}; whether its bfloat16 kernels cover the {len(written)} "
                    "node(s) written in bfloat16 could not be checked"]
        return [f"{len(written)} node(s) run bfloat16 as the fallback type; whether onnxruntime's {short} provider "
                f"has bfloat16 kernels for them could not be asked: {facts.why_no_kernels(provider)}"]
    missing = Counter()
    for node in written:
        domain = normalize_domain(node.domain)
        if not facts.has_kernel(provider, domain, node.op_type, opsets.get(domain, 1), "tensor(bfloat16)"):
            missing[node.op_type] += 1
    if not missing:
        return [f"every one of the {len(written)} node(s) written in bfloat16 has a bfloat16 kernel in "
                f"{facts.name}'s {short} provider"]
    listed = ", ".join(f"{op} x{n}" if n > 1 else op for op, n in missing.most_common(6))
    return [f"{sum(missing.values())} of the {len(written)} node(s) written in bfloat16 have no bfloat16 kernel in "
            f"{facts.name}'s {short} provider ({listed}): onnxruntime runs them on another provider, with copies "
            "between devices"]


__all__ = ["RUNTIME_DOMAINS", "bf16_kernel_notes", "coverage_notes", "heavy_warning", "is_heavy"]
