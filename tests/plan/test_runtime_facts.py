"""Runtime facts are one object per runtime (issue 28): its schemas and, per provider, the LOW kernels it lacks.

onnxruntime's is the first and the one in force; another runtime plugs in with ``runtime_facts.use``.
"""

from __future__ import annotations

import onnx
import onnx_ir as ir

import ampconv
from ampconv.runtime import facts as runtime_facts
from ampconv.runtime import contrib_schemas as runtime_schemas
from ampconv.runtime import schema
from ampconv.policy import lists
from ampconv.runtime.facts import CPU, CUDA, ONNXRUNTIME, RuntimeFacts
from ampconv.runtime.contrib_schemas import Constraint, Formal, RuntimeSchema

from tests.helpers import model_from_text, save


def _scatter(reduction):
    attributes = [] if reduction is None else [ir.AttrString("reduction", reduction)]
    return ir.Node("", "ScatterND", [None, None, None], attributes=attributes)


def test_onnxruntime_is_the_runtime_in_force_and_answers_its_schemas():
    assert runtime_facts.active() is ONNXRUNTIME
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


def _twice_rule(tmp_path):
    src = save(model_from_text(TWICE), tmp_path / "twice.onnx")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(synthetic_run=False), dry_run=True)
    return next((n["precision"], n["rule"]) for n in report.nodes if n["op_type"] == "custom.ai::Twice")


def test_another_runtime_plugs_in_with_its_schemas(tmp_path):
    assert _twice_rule(tmp_path) == ("HIGH", "hard-no-schema")  # neither onnx nor onnxruntime defines it
    with runtime_facts.use(_CustomRuntime()) as custom:
        assert runtime_facts.active() is custom
        assert schema.is_known_op("custom.ai", "Twice")
        precision, rule = _twice_rule(tmp_path)
        assert precision == "LOW" and rule != "hard-no-schema"
    assert runtime_facts.active() is ONNXRUNTIME
    assert not schema.is_known_op("custom.ai", "Twice")  # the caches started afresh
    assert _twice_rule(tmp_path) == ("HIGH", "hard-no-schema")
