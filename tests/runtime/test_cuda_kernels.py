"""The CUDA provider's LOW kernels (``ampconv.runtime.cuda_kernels``) and the ``hard-gpu-kernel`` rule.

bfloat16 is a GPU's type: onnxruntime's CPU provider runs almost nothing in
it, so a node written in bfloat16 that CUDA has no bfloat16 kernel for runs on
no provider, and onnxruntime refuses the session. Measured on an H200 with
onnxruntime-gpu 1.31.1: ampconv's bf16 MobileNetV3-small ("Provider type for
GlobalAveragePool node ... is not set") and its bf16 Q/DQ CNN did not load
before the rule (bench/results/gpu_latency.md). The table is that runtime's
registry as read there; a CPU runner cannot read it.
"""

from __future__ import annotations

import pathlib

import onnx
import pytest

import ampconv
from ampconv.runtime import cuda_kernels
from ampconv.runtime.facts import CUDA, ONNXRUNTIME, RuntimeFacts

from tests.helpers import model_from_text, save

ROOT = pathlib.Path(__file__).resolve().parents[2]
BF16, HALF = "tensor(bfloat16)", "tensor(float16)"


def test_table_is_the_dump_it_was_generated_from():
    from scripts.cuda_kernels import load_dump, low_table

    dump = load_dump(ROOT / cuda_kernels.DUMP)
    assert low_table(dump["kernels"]) == cuda_kernels.LOW_KERNELS
    assert dump["onnxruntime"] in cuda_kernels.SOURCE


@pytest.mark.parametrize("op, opset, type_string, has", [
    ("Conv", 22, BF16, True), ("Conv", 17, BF16, False), ("Conv", 17, HALF, True),  # bf16 Conv from opset 22
    ("MatMul", 13, BF16, True),
    ("GlobalAveragePool", 22, BF16, False), ("GlobalAveragePool", 22, HALF, True),
    ("BatchNormalization", 15, BF16, False),
    ("NoSuchOp", 22, HALF, None), ("LinearAttention", 27, BF16, None),  # CUDA runs no form of it: no say
])
def test_low_kernel_reads_the_recorded_registry(op, opset, type_string, has):
    assert cuda_kernels.low_kernel("", op, opset, type_string) is has


def test_a_domain_the_table_does_not_cover_is_unknown():
    assert cuda_kernels.low_kernel("custom.ai", "Twice", 1, BF16) is None
    assert ONNXRUNTIME.gpu_low_kernel("CPUExecutionProvider", "", "Conv", 22, BF16) is None  # no table for it
    assert ONNXRUNTIME.gpu_low_kernel(CUDA, "", "Conv", 22, BF16) is True
    assert RuntimeFacts().gpu_low_kernel(CUDA, "", "Conv", 22, BF16) is None


POOL = """<ir_version: 10, opset_import: ["" : 22]>
g (float[1, 3, 8, 8] x, float[4, 3, 3, 3] w) => (float[1, 4, 1, 1] y) {
    c = Conv <pads = [1, 1, 1, 1]> (x, w)
    r = Relu (c)
    y = GlobalAveragePool (r)
}"""


def _decisions(tmp_path, dtype, runtime=None):
    src = save(model_from_text(POOL), tmp_path / "pool.onnx")
    config = ampconv.Config(dtype=dtype, synthetic_run=False, overwrite=True,
                            **({"runtime": runtime} if runtime is not None else {}))
    report = ampconv.convert(src, tmp_path / "out.onnx", config)
    return {n["op_type"]: (n["precision"], n["rule"], n["reason"]) for n in report.nodes}, tmp_path / "out.onnx"


def test_a_bf16_node_cuda_has_no_kernel_for_stays_float32(tmp_path):
    decisions, out = _decisions(tmp_path, "bf16")
    precision, rule, reason = decisions["GlobalAveragePool"]
    assert (precision, rule) == ("HIGH", "hard-gpu-kernel")
    assert "CUDA provider has no bfloat16 kernel for GlobalAveragePool at opset 22" in reason
    assert decisions["Conv"][0] == "LOW" and decisions["Relu"][0] == "LOW"  # CUDA runs both in bfloat16
    pool = next(n for n in onnx.load(out).graph.node if n.op_type == "GlobalAveragePool")
    types = {v.name: v.type.tensor_type.elem_type for v in onnx.shape_inference.infer_shapes(onnx.load(out)).graph.value_info}
    assert types.get(pool.input[0]) == onnx.TensorProto.FLOAT


def test_fp16_and_a_runtime_without_a_table_are_untouched(tmp_path):
    decisions, _ = _decisions(tmp_path, "fp16")  # CUDA runs GlobalAveragePool in float16
    assert decisions["GlobalAveragePool"][1] != "hard-gpu-kernel" and decisions["GlobalAveragePool"][0] == "LOW"
    (tmp_path / "other").mkdir()
    decisions, _ = _decisions(tmp_path / "other", "bf16", runtime=RuntimeFacts())
    assert decisions["GlobalAveragePool"][1] != "hard-gpu-kernel"


GRID = """<ir_version: 8, opset_import: ["" : 16]>
g (float[1, 2, 4, 4] x, float[1, 3, 3, 2] grid) => (float[1, 2, 3, 3] y) {
    y = GridSample (x, grid)
}"""


@pytest.mark.parametrize("target, rule", [("cuda", "hard-gpu-kernel"), ("cpu", None)])
def test_fp16_asks_cuda_only_for_a_cuda_target(tmp_path, target, rule):
    """CUDA's GridSample has no float16 kernel: on a CUDA target the node stays float32 on the GPU; on a CPU
    target onnxruntime runs float16 nodes it lacks in float32 itself (negative: the rule is silent)."""
    src = save(model_from_text(GRID), tmp_path / "grid.onnx")
    config = ampconv.Config(dtype="fp16", synthetic_run=False, overwrite=True, target=target)
    report = ampconv.convert(src, tmp_path / "out.onnx", config)
    node = next(n for n in report.nodes if n["op_type"] == "GridSample")
    if rule:
        assert (node["precision"], node["rule"]) == ("HIGH", rule)
        assert "CUDA provider has no float16 kernel for GridSample at opset 16" in node["reason"]
    else:
        assert node["rule"] != "hard-gpu-kernel"
