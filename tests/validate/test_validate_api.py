"""The public entry points: ``ampconv.validate`` and the lazy onnxruntime import."""

import sys
import types

import numpy as np
import pytest
import validate_models as vm

import ampconv
import ampconv.validation  # the subpackage is already imported: this binds nothing over the function
import ampconv.validation.render
from ampconv.validation import ValidateOptions, validate


def test_top_level_validate_is_the_function_after_importing_the_subpackage(tmp_path):
    assert type(sys.modules["ampconv.validation"]) is types.ModuleType  # a plain module, no class swap
    assert isinstance(ampconv.validate, types.FunctionType)
    assert ampconv.validate is validate and ampconv.ValidateOptions is ValidateOptions
    ref, conv = vm.mlp_pair(tmp_path)
    result = ampconv.validate(ref, conv, ampconv.ValidateOptions(shapes={"batch": (2,)}))
    assert isinstance(result, ampconv.ValidationResult) and result.passed


def test_missing_onnxruntime_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)
    ref, conv = vm.mlp_pair(tmp_path)
    with pytest.raises(ampconv.RuntimeMissingError, match=r"pip install 'ampconv\[cpu\]'"):
        ampconv.validate(ref, conv)


def test_result_to_dict_is_strict_json(tmp_path):
    import json

    ref, conv = vm.overflow_pair(tmp_path)
    npz = tmp_path / "in.npz"
    np.savez(npz, **vm.overflow_inputs())
    result = ampconv.validate(ref, conv, ampconv.ValidateOptions(inputs=(str(npz),), localize=True))
    data = json.loads(json.dumps(result.to_dict(), allow_nan=False))
    assert data["backend_label"].startswith("emulate") and data["localization"]["node"] == "scale_up"
