"""Type variables that must share a type, derived from the installed onnx (ampconv.runtime.schema.type_ties).

No op-by-op table: the ties come from each schema's function body and type
inference, so an op onnx adds (LinearAttention, opset 27) converts the day it
ships. The walk over every schema keeps the derivation total; the named ops
are the ones whose ties once broke conversions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import onnx
import onnx.defs
import pytest

import ampconv
from ampconv.runtime.schema import op_info, type_ties


def _tied(domain: str, op: str, opset: int, a: str, b: str) -> bool:
    mapping = dict(type_ties(domain, op, opset))
    return mapping.get(a, a) == mapping.get(b, b)


def test_every_installed_schema_derives():
    seen = 0
    for schema in onnx.defs.get_all_schemas_with_history():
        ties = type_ties(schema.domain, schema.name, schema.since_version)
        names = {c.type_param_str for c in schema.type_constraints}
        for variable, canonical in ties:
            assert variable in names and canonical in names and variable != canonical
        info = op_info(schema.domain, schema.name, schema.since_version)
        assert info.known and info.since_version == schema.since_version
        # A tied variable is read as its canonical one everywhere in the signature.
        tied = {v for v, _ in ties}
        assert not tied & set(info.input_types) and not tied & set(info.output_types)
        seen += 1
    assert seen > 500


@pytest.mark.parametrize(
    "op, opset, a, b",
    [
        ("Attention", 23, "T1", "T2"),  # function body: MatMul(softmax(Q K^T), V)
        ("RMSNormalization", 23, "T", "V"),  # function body: Mul(normalized X, scale)
        ("LinearAttention", 27, "T", "S"),  # inference: present_state follows query without past_state
    ],
)
def test_known_ties(op, opset, a, b):
    try:
        onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        pytest.skip(f"the installed onnx has no {op}-{opset}")
    assert _tied("", op, opset, a, b)
    info = op_info("", op, opset)
    # The canonical variable is the main one: the converter moves the whole group.
    main = info.main_type()
    assert {info.input_type(i) for i, p in enumerate(onnx.defs.get_schema(op, opset, "").inputs) if p.type_str in (a, b)} == {main}


def test_independent_variables_stay_apart():
    assert not _tied("", "Cast", 21, "T1", "T2")
    assert not _tied("", "CastLike", 21, "T1", "T2")
    assert not _tied("", "Pow", 15, "T", "T1")  # the exponent's type is free
    assert not _tied("", "LayerNormalization", 17, "T", "U")  # mean/inv-std-dev follow stash_type


def test_import_does_not_derive():
    """Importing ampconv must stay cheap: ties are computed when first asked for."""
    code = "import ampconv, ampconv.runtime.schema as s; print(s.type_ties.cache_info().currsize)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"


CASE = "test_linear_attention_linear_t1_no_past"  # no past_state: present_state's type follows query's


def _linear_attention_model():
    """The backend case's model: from onnx's data folder when shipped, else generated like the corpus does."""
    shipped = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node", CASE, "model.onnx")
    if os.path.exists(shipped):
        return onnx.load(shipped)
    import onnx.backend.test.case.node as node_cases

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        # Unfiltered, as scripts/corpus.py asks: a filtered call would leave the
        # module's shared case list holding only this op for later callers.
        for case in node_cases.collect_testcases():
            if case.name == CASE:
                return case.model
    return None


@pytest.fixture(scope="module")
def linear_attention_model():
    if onnx.defs.onnx_opset_version() < 27:
        pytest.skip("the installed onnx has no LinearAttention")
    model = _linear_attention_model()
    if model is None:
        pytest.skip("the installed onnx has no LinearAttention backend case")
    return model


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_linear_attention_converts_at_o3(tmp_path, linear_attention_model, dtype):
    src = tmp_path / "model.onnx"
    dst = tmp_path / f"model.{dtype}.onnx"
    onnx.save(linear_attention_model, str(src))
    report = ampconv.convert(src, dst, ampconv.Config(level="O3", dtype=dtype, overwrite=True))
    assert report.output == str(dst) and os.path.exists(dst)
    out = onnx.load(str(dst))
    onnx.checker.check_model(out, full_check=True)
    la = [n for n in report.nodes if n["op_type"] == "LinearAttention"]
    assert la and all(n["precision"] == "LOW" for n in la)
    low = {"fp16": onnx.TensorProto.FLOAT16, "bf16": onnx.TensorProto.BFLOAT16}[dtype]
    node = next(n for n in out.graph.node if n.op_type == "LinearAttention")
    inferred = onnx.shape_inference.infer_shapes(out, strict_mode=True)
    types = {v.name: v.type.tensor_type.elem_type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    # present_state follows query's (LOW) type: both slots were moved together.
    assert all(types.get(name, low) == low for name in node.output if name)
