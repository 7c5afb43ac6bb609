"""Rule family ``hard``: facts of the schema and the runtime that no level, list or user setting overrides.

Each rule's function takes (context, node, facts) and returns a ``Decision``
or None (not this rule's case); its ``Rule`` object (``RULES``) names it and
says for which ops it can decide; ``ampconv.plan.table`` orders them.
"""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import onnx_ir as ir

from ampconv.core.domains import is_default, op_label
from ampconv.plan.context import PlanContext
from ampconv.plan.decision import NONE, Decision
from ampconv.plan.facts import NodeFacts, OpFacts
from ampconv.plan.rules import HARD, Rule, builtin
from ampconv.policy import HIGH
from ampconv.policy.lists import (
    CONTRIB_QUANTIZATION,
    FLOAT32_FUNCTION_BODY,
    QUANTIZATION,
)
from ampconv.plan.upgrade_hints import CONVERTS_LATER, stays_high
from ampconv.runtime.facts import CUDA
from ampconv.runtime.schema import first_opset_allowing, normalize_domain
from ampconv.runtime.target import Target


def no_schema(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """An op without a known schema: its float tensors stay float32 (tried before ``no_float``)."""
    if facts.info.known:
        return None
    if any(facts.float_in) or any(facts.float_out):
        return Decision(HIGH, "hard-no-schema", f"hard: no known schema for {op_label(node)}; kept float32")
    return Decision(NONE, "no-float", "no float32 tensors")


_LOW_DTYPES = frozenset({ir.DataType.FLOAT16, ir.DataType.BFLOAT16})


def no_float(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """No float32 data in the node's main type variable: nothing to convert (``already-low`` when that type is
    already float16/bfloat16: a model converted before)."""
    if facts.main_in or facts.main_out:
        return None
    low = _already_low(node, facts)
    if low is not None:
        return Decision(NONE, "already-low", f"already computes in {low.name.lower()}: nothing to convert")
    return Decision(NONE, "no-float", "no float32 data in its main type")


def _already_low(node: ir.Node, facts: NodeFacts) -> Optional[ir.DataType]:
    """The LOW type of ``node``'s main type variable, when its values there are float16/bfloat16."""
    main = facts.info.main_type()
    if main is None:
        return None
    slots = [(v, facts.info.input_type(i)) for i, v in enumerate(node.inputs)]
    slots += [(v, facts.info.output_type(j)) for j, v in enumerate(node.outputs)]
    return next((v.dtype for v, slot in slots if v is not None and slot == main and v.dtype in _LOW_DTYPES), None)


def unknown_type(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """An input of the main type whose type inference could not tell: it may be float32."""
    if facts.plain:  # every value's type is known
        return None
    main = facts.info.main_type()
    unknown = [
        v.name for i, v in enumerate(node.inputs) if v is not None and v.type is None and facts.info.input_type(i) == main
    ]
    if not unknown:
        return None
    # e.g. it comes from an op of an unknown domain
    return Decision(HIGH, "hard-unknown-type", f"hard: type of input {unknown[0]!r} is unknown; kept float32")


def container(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Sequence and optional values stay float32."""
    if facts.plain:  # every value is a tensor
        return None
    for values in (node.inputs, node.outputs):
        for value in values:
            if value is not None and value.type is not None and not isinstance(value.type, ir.TensorType):
                return Decision(HIGH, "hard-container", "hard: sequence/optional types are kept float32")
    return None


def tensor_attribute(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Float32 tensor attributes (e.g. TreeEnsemble's) must match the input type."""
    if not node.attributes or facts.op.kind == "source":
        return None  # a source's attribute is retyped with it
    for attribute in node.attributes.values():
        if (
            attribute.type == ir.AttributeType.TENSOR
            and attribute.value is not None
            and attribute.value.dtype == ir.DataType.FLOAT
        ):
            return Decision(HIGH, "hard-tensor-attribute", "hard: float32 tensor attributes tie the node to float32")
    return None


def bitcast(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """BitCast reinterprets bits: changing its types changes its meaning."""
    if is_default(node) and node.op_type == "BitCast":
        return Decision(HIGH, "hard-bitcast", "hard: BitCast reinterprets bits; its types are its meaning")
    return None


def function_body(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Ops whose ONNX function body only type-checks in float32."""
    if is_default(node) and node.op_type in FLOAT32_FUNCTION_BODY:
        return Decision(
            HIGH, "hard-function-body", f"hard: {node.op_type}'s ONNX function body only type-checks in float32"
        )
    return None


def runtime_kernel(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """A LOW kernel that a provider the output must run on lacks although the model loads (``ctx.runtime``'s
    facts, for ``ctx.target.runs_on``: onnxruntime's CPU provider and the scatter reductions, which load in
    LOW and then fail at run time)."""
    for provider in ctx.target.runs_on:
        why = ctx.runtime.missing_low_kernel(node, provider)
        if why is not None:
            return Decision(HIGH, "hard-runtime-kernel", f"hard: {why}")
    return None


def _gpu_question(ctx: PlanContext) -> Optional[Tuple[str, str]]:
    """``gpu_question`` of the plan's LOW type and target."""
    return gpu_question(ctx.low, ctx.target)


def gpu_question(low: str, target: Target) -> Optional[Tuple[str, str]]:
    """(GPU provider, LOW type string) LOW nodes of type ``low`` need a kernel for, or None when no GPU is asked.

    bfloat16 is a GPU's type: it always asks the provider bfloat16 is for
    (``Target.bf16_provider``). float16 asks CUDA where the target is CUDA;
    on a CPU target onnxruntime runs a float16 node it has no kernel for in
    float32 with Casts of its own, on the same device.
    """
    if low == "bf16":
        return target.bf16_provider, "tensor(bfloat16)"
    if target.provider == CUDA:
        return CUDA, "tensor(float16)"
    return None


def gpu_kernel(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """A node the target's GPU provider has kernels for, but none in the LOW type, stays float32 on the GPU.

    bfloat16: onnxruntime's CPU provider has almost no bfloat16 kernel, so
    such a node would run on no provider (the session is refused: "Provider
    type for GlobalAveragePool node ... is not set"). float16 on a CUDA
    target: it would run on the CPU, with copies each way (GridSample). The
    answer is the pinned runtime's recorded table (``runtime.cuda_kernels``),
    the same on every machine: a CPU runner cannot ask CUDA.
    """
    question = _gpu_question(ctx)
    opset = ctx.opsets.get(facts.op.domain, 1)
    if question is None or ctx.runtime.gpu_low_kernel(question[0], facts.op.domain, node.op_type, opset,
                                                      question[1]) is not False:
        return None
    short, low = question[0].replace("ExecutionProvider", ""), question[1][len("tensor("):-1]
    elsewhere = ("its CPU provider runs almost none" if ctx.low == "bf16"
                 else "it would run on the CPU, with copies each way")
    return Decision(HIGH, "hard-gpu-kernel", f"hard: onnxruntime's {short} provider has no {low} kernel for "
                    f"{facts.op.label} at opset {opset} ({elsewhere}): float32 on the GPU")


def _no_gpu_low_kernel(ctx: PlanContext, op: OpFacts) -> bool:
    """``applies``: the op has kernels in the GPU provider ``_gpu_question`` asks, none in the LOW type."""
    question = _gpu_question(ctx)
    return question is not None and ctx.runtime.gpu_low_kernel(
        question[0], op.domain, op.op_type, ctx.opsets.get(op.domain, 1), question[1]) is False


def quantization(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """Quantization and training ops keep their float32 scales and states.

    A BatchNormalization in training mode is one: it updates its running
    statistics, which every onnxruntime kernel types as X (``kernel_ties``).
    """
    domain = normalize_domain(node.domain)
    quantized = node.op_type in QUANTIZATION if domain == "" else op_label(node) in CONTRIB_QUANTIZATION
    training = _training_batchnorm(node)
    if quantized or domain == "ai.onnx.preview.training" or training:
        return Decision(HIGH, "hard-quantization", f"hard: {node.op_type} is a quantization/training op"
                        + (" (training_mode=1: it updates its running statistics)" if training else ""))
    return None


def _training_batchnorm(node: ir.Node) -> bool:
    """A default-domain BatchNormalization with ``training_mode=1``."""
    if not is_default(node) or node.op_type != "BatchNormalization":
        return False
    mode = node.attributes.get("training_mode")
    return mode is not None and mode.value == 1


def schema(ctx: PlanContext, node: ir.Node, facts: NodeFacts) -> Optional[Decision]:
    """The op's schema at the model's opset does not admit the LOW type in its main variable."""
    main = facts.info.main_type()
    if ctx.low_type in facts.info.allowed(main):
        return None
    domain = normalize_domain(node.domain)
    opset = ctx.opsets.get(domain, 1)
    later = first_opset_allowing(domain, node.op_type, opset, ctx.low, ctx.runtime)
    hint = ""
    if later and domain == "" and stays_high(ctx.policy, node.op_type):
        hint = f"; it takes {ctx.low_name} from opset {later}, but the level table keeps it float32 anyway"
    elif later:
        hint = f"; {CONVERTS_LATER} {later}"  # schema_opset_warning reads these words
    return Decision(
        HIGH, "hard-schema", f"hard: {node.op_type}.{main} does not accept {ctx.low_name} at opset {opset}{hint}"
    )


def _default_op_in(ops) -> Callable[[PlanContext, OpFacts], bool]:
    """``applies``: a default-domain op among ``ops``."""
    return lambda ctx, op: op.domain == "" and op.op_type in ops


def _has_kernel_gap(ctx: PlanContext, op: OpFacts) -> bool:
    """``applies``: a default-domain op that a provider the output runs on has a LOW kernel gap for (some forms)."""
    gaps = [gap for provider in ctx.target.runs_on for gap in ctx.runtime.kernel_gaps(provider)]
    return op.domain == "" and any(op.op_type in gap.op_types for gap in gaps)


def _quantization_op(ctx: PlanContext, op: OpFacts) -> bool:
    quantized = op.op_type in QUANTIZATION if op.domain == "" else op.label in CONTRIB_QUANTIZATION
    return quantized or op.domain == "ai.onnx.preview.training" or (op.domain == "" and op.op_type == "BatchNormalization")


# The family's rules, in the table's order. Each ``applies`` restates the first check of its
# function, which reads only the op's schema facts and the context: keep the two in step.
RULES = tuple(builtin(rule) for rule in (
    Rule("hard-no-schema", HARD, "no schema is known for the op: its float tensors stay float32",
         decide=no_schema, applies=lambda ctx, op: not op.info.known),
    Rule("no-float", HARD, "no float32 data in the node's main type variable: nothing to convert", decide=no_float,
         also=(Rule("already-low", HARD, "the node's main type variable is already float16/bfloat16 (a model "
                    "converted before): nothing to convert"),)),
    Rule("hard-unknown-type", HARD, "an input's type could not be inferred; it may be float32, so the node stays "
         "float32", decide=unknown_type),
    Rule("hard-container", HARD, "sequence or optional types stay float32", decide=container),
    Rule("hard-tensor-attribute", HARD, "float32 tensor attributes tie the node's type to float32",
         decide=tensor_attribute, applies=lambda ctx, op: op.kind != "source"),
    Rule("hard-bitcast", HARD, "BitCast reinterprets bits: its types are its meaning",
         decide=bitcast, applies=_default_op_in({"BitCast"})),
    Rule("hard-function-body", HARD, "the op's ONNX function body only type-checks in float32",
         decide=function_body, applies=_default_op_in(FLOAT32_FUNCTION_BODY)),
    Rule("hard-runtime-kernel", HARD, "a provider the output runs on (onnxruntime's CPU provider, say) runs this "
         "form of the op only in float32",
         decide=runtime_kernel, applies=_has_kernel_gap),
    Rule("hard-quantization", HARD, "quantization and training ops stay float32",
         decide=quantization, applies=_quantization_op),
    Rule("hard-schema", HARD, "the op's schema at the model's opset does not accept the LOW type",
         decide=schema, applies=lambda ctx, op: ctx.low_type not in op.info.allowed(op.info.main_type())),
    Rule("hard-gpu-kernel", HARD, "an op the GPU provider has kernels for but none in the LOW type (bf16 always, "
         "fp16 on a CUDA target; runtime/cuda_kernels.py): float32 on the GPU, not a node run elsewhere or nowhere",
         decide=gpu_kernel, applies=_no_gpu_low_kernel),
))
