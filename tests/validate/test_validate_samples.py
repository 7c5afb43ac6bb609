"""The sample models converted by ampconv pass validation with the default tolerances.

Also: localization explains a failure with the converter's own decision, and
keeping the named nodes float32 (the automatic fix) makes the model pass.
"""

import importlib.util
import pathlib

import numpy as np
import pytest
import validate_models as vm

import ampconv
from ampconv.validation import ValidateOptions, validate

BUILD = pathlib.Path(__file__).resolve().parents[2] / "sample_models" / "build.py"


def _load_build():
    spec = importlib.util.spec_from_file_location("ampconv_sample_build", BUILD)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    if not BUILD.exists():
        pytest.skip("sample_models/build.py is not there")
    out = tmp_path_factory.mktemp("samples")
    return _load_build().build_all(out)


def _batch_symbol(path):
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    symbols = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    return {s: (2,) for s in symbols}


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer", "lstm", "control_flow", "external_data"])
def test_sample_model_converted_at_o2_passes_with_defaults(samples, tmp_path, name, dtype):
    src = samples[name]
    dst = tmp_path / f"{name}.{dtype}.onnx"
    ampconv.convert(str(src), str(dst), ampconv.Config(level="O2", dtype=dtype))
    result = validate(str(src), str(dst), ValidateOptions(samples=2, shapes=_batch_symbol(src)))
    assert result.dtype == dtype and result.backend == "emulate"
    assert result.passed, [(o.name, o.worst) for o in result.outputs]
    for out in result.outputs:
        assert out.worst.new_nonfinite == 0
        assert out.worst.cosine > 0.999


def test_localization_uses_converter_decisions_and_the_fix_passes(tmp_path):
    ref, _ = vm.overflow_pair(tmp_path)
    npz = tmp_path / "in.npz"
    np.savez(npz, **vm.overflow_inputs())
    opts = ValidateOptions(inputs=(str(npz),), localize=True)
    low = tmp_path / "o3.onnx"
    report = ampconv.convert(ref, str(low), ampconv.Config(level="O3", dtype="fp16"))
    result = validate(ref, str(low), ValidateOptions(**{**_fields(opts), "decisions": report.decisions_by_node()}))
    assert not result.passed
    assert result.localization.node == "scale_up"
    assert result.localization.precision == "LOW" and "O3" in result.localization.rule
    fixed = tmp_path / "o3_fixed.onnx"
    ampconv.convert(ref, str(fixed), ampconv.Config(level="O3", dtype="fp16", keep_fp32=("^scale_",)))
    assert validate(ref, str(fixed), opts).passed


def _fields(options):
    import dataclasses

    return {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}


def test_layernorm_forced_low_is_localized_to_the_overflowing_node(tmp_path):
    # docs/hazards.md 5: a decomposed LayerNorm on inputs near +-3e4 stays float32 at
    # O2; forced LOW (O3) the square overflows fp16 and validation names it.
    import onnx
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper

    nodes = [
        h.make_node("ReduceMean", ["x"], ["mean"], axes=[-1], name="ln/mean"),
        h.make_node("Sub", ["x", "mean"], ["centered"], name="ln/sub"),
        h.make_node("Pow", ["centered", "two"], ["sq"], name="ln/pow"),
        h.make_node("ReduceMean", ["sq"], ["var"], axes=[-1], name="ln/var"),
        h.make_node("Add", ["var", "eps"], ["var_eps"], name="ln/add_eps"),
        h.make_node("Sqrt", ["var_eps"], ["std"], name="ln/sqrt"),
        h.make_node("Div", ["centered", "std"], ["y"], name="ln/div"),
    ]
    graph = h.make_graph(
        nodes, "ln", [h.make_tensor_value_info("x", T.FLOAT, [2, 8])], [h.make_tensor_value_info("y", T.FLOAT, [2, 8])],
        [numpy_helper.from_array(np.float32(2.0), "two"), numpy_helper.from_array(np.float32(1e-5), "eps")],
    )
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    model.ir_version = 9
    ref = str(tmp_path / "ln.onnx")
    onnx.save(model, ref)
    npz = tmp_path / "big.npz"
    # Exactly representable in fp16 (spacing 16 near 3e4), so rounding the input
    # is exact and the first drift is the square's overflow, not cancellation.
    k = np.arange(16)
    np.savez(npz, x=(np.where(k % 2, 1, -1) * (30000 + 16 * k)).astype(np.float32).reshape(2, 8))
    opts = ValidateOptions(inputs=(str(npz),), localize=True)
    o2 = tmp_path / "ln.o2.onnx"
    ampconv.convert(ref, str(o2), ampconv.Config(level="O2", dtype="fp16"))
    assert validate(ref, str(o2), opts).passed
    o3 = tmp_path / "ln.o3.onnx"
    ampconv.convert(ref, str(o3), ampconv.Config(level="O3", dtype="fp16"))
    result = validate(ref, str(o3), opts)
    assert not result.passed
    assert result.localization.node == "ln/pow" and result.localization.op_type == "Pow"
    assert "non-finite" in result.localization.reason
