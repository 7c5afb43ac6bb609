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
from ampconv.validate import ValidateOptions, validate

BUILD = pathlib.Path(__file__).resolve().parents[1] / "sample_models" / "build.py"


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
