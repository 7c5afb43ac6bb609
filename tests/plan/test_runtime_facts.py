"""Runtime facts are one object per runtime (issue 28): its schemas and, per provider, the LOW kernels it lacks.

onnxruntime's is the first and the default; another runtime plugs in through ``Config(runtime=...)``, for
that conversion alone: the plan's context carries it (no process-wide switch).
"""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest

import ampconv
from ampconv.runtime import facts as runtime_facts
from ampconv.runtime import contrib_schemas as runtime_schemas
from ampconv.runtime import schema
from ampconv.policy import lists
from ampconv.errors import UsageError
from ampconv.runtime.facts import CPU, CUDA, ONNXRUNTIME, KernelGap, RuntimeFacts
from ampconv.runtime.target import choose_target
from ampconv.runtime.contrib_schemas import Constraint, Formal, RuntimeSchema

from tests.helpers import model_from_text, save


def _scatter(reduction):
    attributes = [] if reduction is None else [ir.AttrString("reduction", reduction)]
    return ir.Node("", "ScatterND", [None, None, None], attributes=attributes)


def test_onnxruntime_is_the_default_runtime_and_answers_its_schemas():
    assert choose_target(None).runtime is ONNXRUNTIME
    assert not hasattr(runtime_facts, "use") and not hasattr(runtime_facts, "active")  # no process-wide switch
    skip = ONNXRUNTIME.schema("com.microsoft", "SkipLayerNormalization", 1)
    assert skip == runtime_schemas.lookup("com.microsoft", "SkipLayerNormalization", 1) and skip is not None
    assert ONNXRUNTIME.knows("com.microsoft", "SkipLayerNormalization")
    assert not ONNXRUNTIME.knows("com.microsoft", "NoSuchOp")
    assert ONNXRUNTIME.own_default_domain_ops() == runtime_schemas.default_domain_ops()


def test_the_cpu_provider_lacks_the_low_scatter_reductions():
    words = ONNXRUNTIME.missing_low_kernel(_scatter("max"), CPU)
    assert words == "onnxruntime's CPU provider runs ScatterND with a reduction only in float32"
    assert ONNXRUNTIME.missing_low_kernel(_scatter("none"), CPU) is None
    assert ONNXRUNTIME.missing_low_kernel(_scatter(None), CPU) is None
    assert ONNXRUNTIME.missing_low_kernel(_scatter("max"), CUDA) is None  # no gap known there
    assert lists.REDUCTION_NEEDS_FLOAT32 == {"ScatterND", "ScatterElements"}  # the policy lists re-export the runtime's fact


TWICE = """<ir_version: 8, opset_import: ["" : 18, "custom.ai" : 1]>
g (float[2, 4] x) => (float[2, 4] y) {
    t = custom.ai.Twice (x)
    y = Relu (t)
}"""


class _CustomRuntime(RuntimeFacts):
    """A runtime of a user's, defining ``custom.ai::Twice`` for float and float16."""

    name = "custom"

    def schema(self, domain, op_type, opset):
        if (domain, op_type) != ("custom.ai", "Twice"):
            return None
        option = onnx.defs.OpSchema.FormalParameterOption.Single
        return RuntimeSchema("Twice", "custom.ai", 1, (Formal("X", "T", option),), (Formal("Y", "T", option),),
                             (Constraint("T", ("tensor(float)", "tensor(float16)")),))

    def knows(self, domain, op_type):
        return (domain, op_type) == ("custom.ai", "Twice")


def _twice_rule(tmp_path, runtime=None):
    src = save(model_from_text(TWICE), tmp_path / "twice.onnx")
    config = ampconv.Config(synthetic_run=False, runtime=runtime)
    report = ampconv.convert(src, tmp_path / "out.onnx", config, dry_run=True)
    return next((n["precision"], n["rule"]) for n in report.nodes if n["op_type"] == "custom.ai::Twice")


def test_another_runtime_plugs_in_with_its_schemas(tmp_path):
    assert _twice_rule(tmp_path) == ("HIGH", "hard-no-schema")  # neither onnx nor onnxruntime defines it
    custom = _CustomRuntime()
    assert schema.is_known_op("custom.ai", "Twice", custom)
    precision, rule = _twice_rule(tmp_path, runtime=custom)
    assert precision == "LOW" and rule != "hard-no-schema"
    assert not schema.is_known_op("custom.ai", "Twice")  # the default runtime's answers are its own
    assert _twice_rule(tmp_path) == ("HIGH", "hard-no-schema")


def test_a_runtime_that_is_not_runtime_facts_is_a_usage_error():
    with pytest.raises(UsageError, match="runtime"):
        ampconv.Config(runtime="onnxruntime-gpu")


class _CudaGaps(_CustomRuntime):
    """A runtime whose CUDA provider (and not its CPU one) lacks the LOW Relu."""

    def listed_providers(self):
        return (CUDA, CPU)

    def kernel_gaps(self, provider):
        if provider != CUDA:
            return ()
        return (KernelGap(CUDA, frozenset({"Relu"}), lambda node: True, "the test's CUDA provider lacks LOW {op}"),)


RELU = """<ir_version: 8, opset_import: ["" : 18]>
g (float[2, 4] x) => (float[2, 4] y) {
    t = Relu (x)
    y = Sigmoid (t)
}"""


def _relu_rule(tmp_path, target):
    src = save(model_from_text(RELU), tmp_path / "relu.onnx")
    config = ampconv.Config(synthetic_run=False, runtime=_CudaGaps(), target=target, keep_io_types=False)
    report = ampconv.convert(src, tmp_path / "out.onnx", config, dry_run=True)
    return next((n["precision"], n["rule"], n["reason"]) for n in report.nodes if n["op_type"] == "Relu")


def test_the_plan_asks_the_kernel_gaps_of_the_target_provider(tmp_path):
    """``hard-runtime-kernel`` asks the context's target: its provider and the CPU (never a hard-coded one)."""
    precision, rule, reason = _relu_rule(tmp_path, "cuda")
    assert (precision, rule) == ("HIGH", "hard-runtime-kernel") and "test's CUDA provider lacks LOW Relu" in reason
    precision, rule, _ = _relu_rule(tmp_path, "cpu")  # negative: a CPU target never runs on that provider
    assert rule != "hard-runtime-kernel" and precision == "LOW"


def test_a_target_runs_on_its_provider_and_the_cpu():
    assert choose_target("cuda").runs_on == (CUDA, CPU)
    assert choose_target("cpu").runs_on == (CPU,)
    assert choose_target(None, _CudaGaps()).name == "cuda"  # chosen from what the runtime lists
    assert choose_target(None, _CustomRuntime()).name == "cpu"  # negative: no CUDA listed
