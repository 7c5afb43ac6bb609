"""Every sample model at O1/O2/O3 in fp16 and bf16: converts, passes the full checker,
loads in onnxruntime (bf16: resolves; the CPU provider has no bf16 kernels), and stays
close to float32 (fp16 natively and emulated; bf16 emulated)."""


import numpy as np
import onnx
import pytest

import ampconv
from helpers import run

from sample_models.build import build_all

SHAPES = {"batch": 2, "N": 2, "seq": 5}


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    return build_all(tmp_path_factory.mktemp("samples"))


def feeds_for(path):
    model = onnx.load(str(path), load_external_data=False)
    rng = np.random.default_rng(0)
    feeds = {}
    init = {t.name for t in model.graph.initializer}
    for inp in model.graph.input:
        if inp.name in init:
            continue
        tt = inp.type.tensor_type
        shape = [d.dim_value if d.dim_value else SHAPES.get(d.dim_param, 2) for d in tt.shape.dim]
        if tt.elem_type == onnx.TensorProto.FLOAT:
            feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
        elif tt.elem_type == onnx.TensorProto.BOOL:
            feeds[inp.name] = np.ones(shape, bool)
        else:
            feeds[inp.name] = np.ones(shape, onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type))
    return feeds


@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_every_sample_converts_loads_and_stays_close(samples, tmp_path, level, dtype):
    for name, src in samples.items():
        dst = tmp_path / f"{name}.{level}.{dtype}.onnx"
        report = ampconv.convert(src, dst, ampconv.Config(level=level, dtype=dtype))
        onnx.checker.check_model(str(dst), full_check=True)
        feeds = feeds_for(src)
        if dtype == "fp16":
            got, ref = run(dst, feeds), run(src, feeds)
            for g, r in zip(got, ref):
                np.testing.assert_allclose(g, r, rtol=2e-2, atol=2e-2, err_msg=f"{name} {level}")
        else:
            assert not any("does not load" in n for n in report.notes)
        npz = tmp_path / f"{name}.npz"
        np.savez(npz, **feeds)
        result = ampconv.validate(src, dst, ampconv.ValidateOptions(backend="emulate", inputs=(str(npz),)))
        assert result.passed, (name, level, dtype, result.to_dict()["outputs"])
