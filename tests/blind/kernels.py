"""Blind test set "kernels": after conversion, does every node still match an onnxruntime kernel?

Written without reading ampconv's planner, runtime facts or calibration code; it uses only the
public API (``ampconv.convert`` and the report's ``.nodes``).

The hazard: ONNX types some ops' inputs with more than one type variable (BatchNormalization
opset 14/15 statistics U / T1 / T2 apart from X's T, GridSample X vs grid, Pow base vs exponent,
Resize X vs roi, Dropout data vs ratio, LayerNormalization's T vs U, Attention's mask, Clip's
min/max, DequantizeLinear's scale ...). A converter may legally write a mix (float16 X, float32
statistics), which onnx.checker accepts, but which no onnxruntime kernel may take: onnxruntime
then loads the model and quietly makes it runnable itself (its InsertCastTransformer wraps the
node in Cast nodes, or the node falls back to another provider). On a GPU that becomes copies
to the CPU and back.

Every case is a small float32 model (seeded weights of realistic magnitude, every node named),
spelled in the style of some exporter and opset, with one seeded input. Each is converted with
``ampconv.convert(src, dst, Config(dtype="fp16", level="O2", overwrite=True))`` (defaults
otherwise) and measured with onnxruntime's CPUExecutionProvider:

* ``loads``: an InferenceSession is created on the converted file;
* ``inserted``: Cast nodes in the graph onnxruntime actually runs (the model it saves through
  ``SessionOptions.optimized_model_filepath`` at the default optimization level) minus the Cast
  nodes in the converted file, counted only when positive (onnxruntime's own optimizations may
  also remove casts; ``ort casts`` shows how many Cast nodes of the optimized graph carry a name
  that is not in the converted file, i.e. were made by onnxruntime, whatever the net count);
* ``BN left``: for a BatchNormalization after a Conv, whether the optimized graph still holds a
  BatchNormalization (onnxruntime folds Conv+BatchNormalization when the types allow and the
  statistics are not overridable graph inputs), beside the same for the float32 original;
* ``rel err``: max |converted - float32| over the output, divided by the output's RMS, both run
  on onnxruntime's CPU provider on the same seeded input;
* ``signature``: the element type of each type variable of the probed node in the converted file
  (h = float16, f = float32, i8/i64/b = int8/int64/bool), and ``cpu kernel``: whether
  onnxruntime's CPU kernel registry (``get_all_opkernel_def``) has a kernel for exactly that
  binding. This column does not decide ``held``; it shows what the CPU measurement cannot:
  onnxruntime's CPU provider has float32-only kernels for most of these ops (Conv,
  BatchNormalization, GridSample, Pow, Resize, InstanceNormalization, MatMul ...), so on this
  machine every float16 node of them is run through casts anyway, and those casts mostly cancel
  against the converter's own; a mixed signature that a CUDA kernel would refuse may therefore
  pass here unseen.

``held`` = loads, no inserted casts, and rel err <= the case's tolerance (0.05 unless the case
says otherwise and why). ``held at probe`` = loads, rel err within tolerance, and no probed node
whose signature is ``MIX`` (no CPU kernel as written, one with its float32 variables tied to
float16): on this CPU provider most casts onnxruntime inserts come from its missing float16
MatMul/Gemm kernels (MatMul+Add fused to Gemm between fp16 Reshapes, for one), which any fp16
conversion pays, negatives included; ``held at probe`` sets those aside.

Run from the repository root: ``.venv/bin/python tests/blind/kernels.py [--out FILE] [--only
a,b]``. The ``ampconv`` imported is whatever ``PYTHONPATH`` puts first (the repository is appended
last), so ``PYTHONPATH=/path/to/worktree`` measures that worktree; the first line prints which.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # last: a PYTHONPATH worktree's ampconv wins

import ampconv  # noqa: E402
import judge  # noqa: E402
import spellings  # noqa: E402
import onnxruntime as ort  # noqa: E402

TOL = 0.05
TARGET = None  # --target: Config(target=...) when given

# ============================================================================= builder


def _ir_for(opset: int) -> int:
    return helper.find_min_ir_version_for([helper.make_opsetid("", opset)])


class G(spellings.Graph):
    """The first blind set's builder (every node named, each single output named after its node) with a seeded
    generator, inputs that carry their feeds, several outputs per node, and initializers listed as inputs."""

    producer = "blind-kernels"

    def __init__(self, name: str):
        super().__init__(name)
        self.r = np.random.default_rng(zlib.crc32(name.encode()))
        self.feeds: dict = {}

    def inp(self, name: str, value) -> str:
        value = np.asarray(value, dtype=np.float32)
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(value.shape)))
        self.feeds[name] = value
        return name

    def const(self, name: str, values, dtype=np.float32) -> str:
        """A Constant node (the PyTorch exporter's spelling of a constant input)."""
        t = numpy_helper.from_array(np.asarray(values, dtype=dtype), name + "_value")
        return self.n("Constant", name, value=t)

    def n(self, op: str, name: str, *inputs, outputs=None, **attrs):
        outs = outputs or [name]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs if outputs else name

    def conv_w(self, cout: int, cin: int, k: int) -> np.ndarray:
        return self.r.normal(0, 1 / np.sqrt(cin * k * k), (cout, cin, k, k))

    def lin_w(self, fin: int, fout: int) -> np.ndarray:
        return self.r.normal(0, 1 / np.sqrt(fin), (fin, fout))

    def bn_stats(self, c: int):
        """Trained-like statistics: gamma ~U(0.5,1.5), beta ~N(0,0.1), mean ~N(0,0.1), var ~U(0.5,1.5)."""
        r = self.r
        return r.uniform(0.5, 1.5, c), r.normal(0, 0.1, c), r.normal(0, 0.1, c), r.uniform(0.5, 1.5, c)

    def model(self, opset: int, out: str, inits_as_inputs: bool = False):
        """(the checked model, its seeded input feeds). ``inits_as_inputs`` also lists every initializer as a
        graph input (``keep_initializers_as_inputs=True``, the old exporters' default)."""
        self.outputs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)]
        inputs = list(self.inputs)
        if inits_as_inputs:
            inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in self.inits]
        graph = helper.make_graph(self.nodes, self.name, inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=self.producer)
        model.ir_version = _ir_for(opset)
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        model.graph.ClearField("output")
        model.graph.output.extend(inferred.graph.output)
        onnx.checker.check_model(model, full_check=True)
        return model, dict(self.feeds)


def _image(g: G, name: str, shape) -> str:
    """A normalized image (ImageNet-style mean/std on 0..1 pixels): roughly N(0,1), smooth-ish."""
    x = g.r.uniform(0, 1, shape)
    return g.inp(name, (x - 0.45) / 0.25)


def _tokens(g: G, name: str, shape) -> str:
    return g.inp(name, g.r.normal(0, 1, shape))


# ============================================================================= cases


@dataclass(frozen=True)
class Case:
    name: str
    probes: str
    probe_nodes: tuple
    make: Callable
    tol: float = TOL
    tol_why: str = ""
    conv_bn: bool = False
    negative: bool = False


CASES: list = []


def case(name, probes, probe_nodes, tol=TOL, tol_why="", conv_bn=False, negative=False):
    def register(make):
        CASES.append(Case(name, probes, tuple(probe_nodes), make, tol, tol_why, conv_bn, negative))
        return make

    return register


def _conv_bn(g: G, x: str, cin: int, cout: int, prefix: str, bn_opset: int, stats="init", training_mode=None,
             conv_bias=False) -> str:
    ins = [x, g.w(prefix + "conv.weight", g.conv_w(cout, cin, 3))]
    if conv_bias:
        ins.append(g.w(prefix + "conv.bias", g.r.normal(0, 0.05, cout)))
    c = g.n("Conv", prefix + "conv", *ins, pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    gamma, beta, mean, var = g.bn_stats(cout)
    names = ("bn.weight", "bn.bias", "bn.running_mean", "bn.running_var")
    if stats == "init":
        s = [g.w(prefix + k, v) for k, v in zip(names, (gamma, beta, mean, var))]
    else:
        s = [g.const(prefix + k.replace(".", "_") + "_const", v) for k, v in zip(names, (gamma, beta, mean, var))]
    attrs = {"epsilon": 1e-5, "momentum": 0.9}
    if training_mode is not None:
        attrs["training_mode"] = training_mode
    return g.n("BatchNormalization", prefix + "bn", c, *s, **attrs)


# ----------------------------------------------------------------------------- BatchNormalization


@case("bn9_conv_init", "BN opset 9 (one type T) after Conv, statistics initializers", ["bn"], conv_bn=True)
def _bn9_conv_init():
    g = G("bn9_conv_init")
    x = _image(g, "input", (1, 3, 16, 16))
    b = _conv_bn(g, x, 3, 16, "", 9)
    g.n("Relu", "relu", b)
    return g.model(9, "relu")


@case("bn14_conv_train0", "BN opset 14 (T, U) after Conv, training_mode=0 written out", ["bn"], conv_bn=True)
def _bn14_conv_train0():
    g = G("bn14_conv_train0")
    x = _image(g, "input", (1, 3, 16, 16))
    b = _conv_bn(g, x, 3, 16, "", 14, training_mode=0)
    g.n("Relu", "relu", b)
    return g.model(14, "relu")


@case("bn15_conv_bias_init", "BN opset 15 (T, T1, T2) after a Conv with bias, statistics initializers", ["bn"],
      conv_bn=True)
def _bn15_conv_bias_init():
    g = G("bn15_conv_bias_init")
    x = _image(g, "input", (2, 3, 16, 16))
    b = _conv_bn(g, x, 3, 16, "", 15, conv_bias=True)
    g.n("Relu", "relu", b)
    return g.model(15, "relu")


@case("bn15_conv_constnodes_train0", "BN opset 15 after Conv, statistics as Constant nodes, training_mode=0",
      ["bn"], conv_bn=True)
def _bn15_conv_constnodes_train0():
    g = G("bn15_conv_constnodes_train0")
    x = _image(g, "input", (1, 3, 16, 16))
    b = _conv_bn(g, x, 3, 16, "", 15, stats="const", training_mode=0)
    g.n("Relu", "relu", b)
    return g.model(15, "relu")


@case("bn17_torch_stem", "BN at opset 17 (PyTorch exporter names, Constant-node statistics) in Conv-BN-Relu-MaxPool",
      ["/bn1/BatchNormalization"], conv_bn=True)
def _bn17_torch_stem():
    g = G("bn17_torch_stem")
    x = _image(g, "input", (1, 3, 32, 32))
    c = g.n("Conv", "/conv1/Conv", x, g.w("conv1.weight", g.conv_w(16, 3, 3)), pads=[1, 1, 1, 1], strides=[2, 2])
    gamma, beta, mean, var = g.bn_stats(16)
    s = [g.const(f"/bn1/Constant_{i}", v) for i, v in enumerate((gamma, beta, mean, var))]
    b = g.n("BatchNormalization", "/bn1/BatchNormalization", c, *s, epsilon=1e-5, momentum=0.9)
    r = g.n("Relu", "/relu/Relu", b)
    g.n("MaxPool", "/maxpool/MaxPool", r, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    return g.model(17, "/maxpool/MaxPool")


@case("bn17_two_blocks", "two Conv-BN-Relu blocks at opset 17, statistics initializers (ResNet body)",
      ["b1.bn", "b2.bn"], conv_bn=True)
def _bn17_two_blocks():
    g = G("bn17_two_blocks")
    x = _image(g, "input", (1, 8, 16, 16))
    b = _conv_bn(g, x, 8, 16, "b1.", 15)
    r = g.n("Relu", "b1.relu", b)
    b = _conv_bn(g, r, 16, 16, "b2.", 15)
    g.n("Add", "residual", b, r)
    return g.model(17, "residual")


@case("bn9_inits_as_inputs", "Conv-BN-Relu at opset 9 with every initializer also a graph input "
      "(keep_initializers_as_inputs=True, the old exporters' default)", ["bn"], conv_bn=True)
def _bn9_inits_as_inputs():
    g = G("bn9_inits_as_inputs")
    x = _image(g, "input", (1, 3, 16, 16))
    b = _conv_bn(g, x, 3, 16, "", 9, conv_bias=True)
    g.n("Relu", "relu", b)
    return g.model(9, "relu", inits_as_inputs=True)


@case("bn15_inits_as_inputs", "Conv-BN-Relu at opset 15 with every initializer also a graph input (overridable "
      "statistics)", ["bn"], conv_bn=True)
def _bn15_inits_as_inputs():
    g = G("bn15_inits_as_inputs")
    x = _image(g, "input", (1, 3, 16, 16))
    b = _conv_bn(g, x, 3, 16, "", 15)
    g.n("Relu", "relu", b)
    return g.model(15, "relu", inits_as_inputs=True)


@case("bn15_identity_stats", "BN opset 15 after Conv whose statistics come through Identity nodes (torch.onnx's "
      "spelling of a shared/deduplicated parameter)", ["bn"], conv_bn=True)
def _bn15_identity_stats():
    g = G("bn15_identity_stats")
    x = _image(g, "input", (1, 3, 16, 16))
    c = g.n("Conv", "conv", x, g.w("conv.weight", g.conv_w(16, 3, 3)), pads=[1, 1, 1, 1])
    stats = [g.n("Identity", f"Identity_{i}", g.w(f"onnx::BatchNormalization_{100 + i}", v))
             for i, v in enumerate(g.bn_stats(16))]
    b = g.n("BatchNormalization", "bn", c, *stats, epsilon=1e-5)
    g.n("Relu", "relu", b)
    return g.model(15, "relu")


@case("bn15_gemm_1d", "1-D BN over features (N, C) after Gemm(transB=1), opset 15, statistics initializers",
      ["bn1d"])
def _bn15_gemm_1d():
    g = G("bn15_gemm_1d")
    x = _tokens(g, "features", (8, 32))
    h = g.n("Gemm", "fc1", x, g.w("fc1.weight", g.lin_w(32, 64).T), g.w("fc1.bias", g.r.normal(0, 0.05, 64)),
            transB=1)
    gamma, beta, mean, var = g.bn_stats(64)
    b = g.n("BatchNormalization", "bn1d", h, g.w("bn1d.weight", gamma), g.w("bn1d.bias", beta),
            g.w("bn1d.running_mean", mean), g.w("bn1d.running_var", var), epsilon=1e-5)
    r = g.n("Relu", "relu", b)
    g.n("Gemm", "fc2", r, g.w("fc2.weight", g.lin_w(64, 10)), g.w("fc2.bias", g.r.normal(0, 0.05, 10)))
    return g.model(15, "fc2")


@case("bn14_matmul_seq_1d", "BatchNorm1d over channels of a sequence: MatMul+Add -> Transpose -> BN (N,C,L) opset 14",
      ["bn_seq"])
def _bn14_matmul_seq_1d():
    g = G("bn14_matmul_seq_1d")
    x = _tokens(g, "tokens", (2, 12, 32))
    h = g.n("MatMul", "proj", x, g.w("proj.weight", g.lin_w(32, 24)))
    h = g.n("Add", "proj_bias", h, g.w("proj.bias", g.r.normal(0, 0.05, 24)))
    t = g.n("Transpose", "to_ncl", h, perm=[0, 2, 1])
    gamma, beta, mean, var = g.bn_stats(24)
    b = g.n("BatchNormalization", "bn_seq", t, g.w("bn.weight", gamma), g.w("bn.bias", beta),
            g.w("bn.running_mean", mean), g.w("bn.running_var", var), epsilon=1e-5, training_mode=0)
    g.n("Transpose", "to_nlc", b, perm=[0, 2, 1])
    return g.model(14, "to_nlc")


@case("bn15_on_input", "BN opset 15 directly on the float32 graph input (input normalization), then Conv",
      ["bn_in"])
def _bn15_on_input():
    g = G("bn15_on_input")
    x = g.inp("input", g.r.uniform(0, 1, (1, 3, 16, 16)))
    b = g.n("BatchNormalization", "bn_in", x, g.w("bn_in.weight", g.r.uniform(0.8, 1.2, 3)),
            g.w("bn_in.bias", g.r.normal(0, 0.1, 3)), g.w("bn_in.running_mean", g.r.normal(0.45, 0.05, 3)),
            g.w("bn_in.running_var", g.r.uniform(0.05, 0.08, 3)), epsilon=1e-5)
    c = g.n("Conv", "conv", b, g.w("conv.weight", g.conv_w(8, 3, 3)), pads=[1, 1, 1, 1])
    g.n("Relu", "relu", c)
    return g.model(15, "relu")


# ----------------------------------------------------------------------------- GridSample

GS_TOL, GS_WHY = 0.1, ("the sampled maps are white noise (neighbouring pixels differ by ~1.4x the map's RMS) and "
                       "the grid is a computed value: a grid coordinate ~1 carries fp16 rounding (2^-11) from each op "
                       "that computes it, ~1e-3 in normalized units = ~0.008 px on 16 px, which moves a bilinear "
                       "sample by ~0.01-0.03 of the RMS (max over 256-768 samples); 0.1 leaves room for that and "
                       "still fails a grid that lost its precision (fp16 grid off by 0.1 px or more)")


def _theta(g: G, feat: str, name: str) -> str:
    """A localisation head: Gemm(feat) with a small weight and an identity bias -> theta [N,2,3]."""
    th = g.n("Gemm", name, feat, g.w(name + ".weight", g.r.normal(0, 0.02, (8, 6))),
             g.w(name + ".bias", [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]))
    return g.n("Reshape", name + "_theta", th, g.ints(name + "_shape", [-1, 2, 3]))


@case("gridsample16_manual_affine", "GridSample 16 (T1 X, T2 grid) on a grid computed by MatMul(base, theta^T), "
      "theta from a Gemm (STN, pre-AffineGrid spelling)", ["grid_sample"], tol=GS_TOL, tol_why=GS_WHY)
def _gridsample16_manual_affine():
    g = G("gridsample16_manual_affine")
    img = _image(g, "image", (1, 3, 16, 16))
    feat = _tokens(g, "feat", (1, 8))
    th = _theta(g, feat, "loc")
    lin = (np.arange(16) * 2 + 1) / 16 - 1
    ys, xs = np.meshgrid(lin, lin, indexing="ij")
    base = np.stack([xs.ravel(), ys.ravel(), np.ones(256)], axis=1)[None]  # [1, 256, 3]
    tt = g.n("Transpose", "theta_t", th, perm=[0, 2, 1])
    grid = g.n("MatMul", "grid_mm", g.w("base_grid", base), tt)
    grid = g.n("Reshape", "grid", grid, g.ints("grid_shape", [1, 16, 16, 2]))
    g.n("GridSample", "grid_sample", img, grid, mode="bilinear", padding_mode="zeros", align_corners=0)
    return g.model(16, "grid_sample")


@case("gridsample20_affinegrid_conv", "GridSample 20 (mode linear) of a Conv map, grid from AffineGrid(theta from "
      "Gemm)", ["grid_sample"], tol=GS_TOL, tol_why=GS_WHY)
def _gridsample20_affinegrid_conv():
    g = G("gridsample20_affinegrid_conv")
    img = _image(g, "image", (1, 3, 16, 16))
    feat = _tokens(g, "feat", (1, 8))
    c = g.n("Conv", "conv", img, g.w("conv.weight", g.conv_w(8, 3, 3)), pads=[1, 1, 1, 1])
    th = _theta(g, feat, "loc")
    grid = g.n("AffineGrid", "affine_grid", th, g.ints("grid_size", [1, 8, 16, 16]), align_corners=0)
    g.n("GridSample", "grid_sample", c, grid, mode="linear", padding_mode="border", align_corners=0)
    return g.model(20, "grid_sample")


@case("gridsample22_flow", "GridSample 22 of a Conv map along a flow field: grid = base + Tanh(Conv(map))*0.1, "
      "transposed to NHWC (optical-flow warp)", ["warp"], tol=GS_TOL, tol_why=GS_WHY)
def _gridsample22_flow():
    g = G("gridsample22_flow")
    img = _image(g, "image", (1, 3, 16, 16))
    c = g.n("Conv", "conv", img, g.w("conv.weight", g.conv_w(8, 3, 3)), pads=[1, 1, 1, 1])
    f = g.n("Conv", "flow_conv", c, g.w("flow.weight", g.conv_w(2, 8, 3) * 0.5), pads=[1, 1, 1, 1])
    f = g.n("Tanh", "flow_tanh", f)
    f = g.n("Mul", "flow_scale", f, g.w("flow_gain", np.float32(0.1)))
    f = g.n("Transpose", "flow_nhwc", f, perm=[0, 2, 3, 1])
    lin = (np.arange(16) * 2 + 1) / 16 - 1
    ys, xs = np.meshgrid(lin, lin, indexing="ij")
    grid = g.n("Add", "grid", f, g.w("base_grid", np.stack([xs, ys], axis=-1)[None]))
    g.n("GridSample", "warp", c, grid, mode="linear", padding_mode="border", align_corners=0)
    return g.model(22, "warp")


# ----------------------------------------------------------------------------- Pow

@case("pow13_gem_pool", "GeM pooling (opset 13): Pow(Clip(x), p) with p a float32 [1] parameter, mean, "
      "Pow(., Reciprocal(p)): an initializer exponent and a computed one", ["gem_pow", "gem_root"])
def _pow13_gem_pool():
    g = G("pow13_gem_pool")
    x = _image(g, "image", (1, 3, 16, 16))
    c = g.n("Conv", "conv", x, g.w("conv.weight", g.conv_w(16, 3, 3)), pads=[1, 1, 1, 1])
    c = g.n("Relu", "relu", c)
    cl = g.n("Clip", "gem_clip", c, g.w("gem_eps", np.float32(1e-6)), "")
    p = g.w("gem.p", [3.0])
    pw = g.n("Pow", "gem_pow", cl, p)
    m = g.n("GlobalAveragePool", "gem_mean", pw)
    inv = g.n("Reciprocal", "gem_inv_p", p)
    rt = g.n("Pow", "gem_root", m, inv)
    g.n("Flatten", "flatten", rt, axis=1)
    return g.model(13, "flatten")


@case("pow15_computed_exponent", "Pow (opset 15) with base and exponent both computed: Sigmoid(Gemm)+0.5 raised "
      "to Softplus(Gemm) (learned per-feature gamma curve)", ["gamma_pow"])
def _pow15_computed_exponent():
    g = G("pow15_computed_exponent")
    x = _tokens(g, "features", (4, 16))
    a = g.n("Gemm", "base_fc", x, g.w("base_fc.weight", g.lin_w(16, 16)), g.w("base_fc.bias", np.zeros(16)))
    a = g.n("Sigmoid", "base_sig", a)
    a = g.n("Add", "base_shift", a, g.w("half", np.float32(0.5)))
    e = g.n("Gemm", "exp_fc", x, g.w("exp_fc.weight", g.lin_w(16, 16) * 0.5), g.w("exp_fc.bias", np.zeros(16)))
    e = g.n("Softplus", "exp_softplus", e)
    g.n("Pow", "gamma_pow", a, e)
    return g.model(15, "gamma_pow")


@case("pow12_scalar_square", "Pow(x - mean, 2.0) with a 0-d float32 exponent (LayerNorm decomposed by an old "
      "exporter, opset 12)", ["ln_pow"])
def _pow12_scalar_square():
    g = G("pow12_scalar_square")
    x = _tokens(g, "tokens", (2, 8, 32))
    h = g.n("MatMul", "proj", x, g.w("proj.weight", g.lin_w(32, 32)))
    mu = g.n("ReduceMean", "ln_mean", h, axes=[-1], keepdims=1)
    d = g.n("Sub", "ln_sub", h, mu)
    sq = g.n("Pow", "ln_pow", d, g.w("two", np.float32(2.0)))
    var = g.n("ReduceMean", "ln_var", sq, axes=[-1], keepdims=1)
    ve = g.n("Add", "ln_add_eps", var, g.w("eps", np.float32(1e-5)))
    sd = g.n("Sqrt", "ln_sqrt", ve)
    xn = g.n("Div", "ln_div", d, sd)
    g.n("Mul", "ln_scale", xn, g.w("ln.weight", g.r.uniform(0.8, 1.2, 32)))
    return g.model(12, "ln_scale")


# ----------------------------------------------------------------------------- Resize

@case("resize11_roi_scales", "Resize opset 11 (T1 X, T2 roi) with an empty float roi initializer and scales, "
      "linear/asymmetric, between Convs (FPN upsample)", ["upsample"])
def _resize11_roi_scales():
    g = G("resize11_roi_scales")
    x = _image(g, "image", (1, 3, 8, 8))
    c = g.n("Conv", "conv", x, g.w("conv.weight", g.conv_w(8, 3, 3)), pads=[1, 1, 1, 1])
    u = g.n("Resize", "upsample", c, g.w("roi", np.zeros(0)), g.w("scales", [1.0, 1.0, 2.0, 2.0]),
            mode="linear", coordinate_transformation_mode="asymmetric")
    g.n("Conv", "conv2", u, g.w("conv2.weight", g.conv_w(8, 8, 3)), pads=[1, 1, 1, 1])
    return g.model(11, "conv2")


@case("resize13_crop_roi", "Resize opset 13 tf_crop_and_resize with a real float32 roi and sizes (roi carries "
      "values)", ["crop_resize"])
def _resize13_crop_roi():
    g = G("resize13_crop_roi")
    x = _image(g, "image", (1, 3, 16, 16))
    c = g.n("Conv", "conv", x, g.w("conv.weight", g.conv_w(8, 3, 3)), pads=[1, 1, 1, 1])
    g.n("Resize", "crop_resize", c, g.w("roi", [0, 0, 0.125, 0.25, 1, 1, 0.875, 0.75]), "",
        g.ints("sizes", [1, 8, 12, 12]), mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
        extrapolation_value=0.0)
    return g.model(13, "crop_resize")


@case("resize19_sizes_from_shape", "Resize opset 19, roi and scales empty (\"\"), sizes computed from "
      "Shape(skip) (U-Net decoder), then Concat with the skip", ["up"])
def _resize19_sizes_from_shape():
    g = G("resize19_sizes_from_shape")
    x = _image(g, "image", (1, 3, 16, 16))
    skip = g.n("Conv", "enc", x, g.w("enc.weight", g.conv_w(8, 3, 3)), pads=[1, 1, 1, 1])
    low = g.n("Conv", "down", skip, g.w("down.weight", g.conv_w(8, 8, 3)), pads=[1, 1, 1, 1], strides=[2, 2])
    shp = g.n("Shape", "skip_shape", skip)
    hw = g.n("Slice", "skip_hw", shp, g.ints("s2", [2]), g.ints("s4", [4]))
    sizes = g.n("Concat", "up_sizes", g.ints("nc", [1, 8]), hw, axis=0)
    up = g.n("Resize", "up", low, "", "", sizes, mode="linear", coordinate_transformation_mode="half_pixel")
    cat = g.n("Concat", "cat", up, skip, axis=1)
    g.n("Conv", "dec", cat, g.w("dec.weight", g.conv_w(8, 16, 3)), pads=[1, 1, 1, 1])
    return g.model(19, "dec")


# ----------------------------------------------------------------------------- normalizations

@case("ln17_bias", "LayerNormalization 17 (T, U) with scale and bias between MatMuls (transformer block)",
      ["ln"])
def _ln17_bias():
    g = G("ln17_bias")
    x = _tokens(g, "tokens", (2, 10, 32))
    h = g.n("MatMul", "fc1", x, g.w("fc1.weight", g.lin_w(32, 32)))
    h = g.n("Add", "fc1_bias", h, g.w("fc1.bias", g.r.normal(0, 0.05, 32)))
    ln = g.n("LayerNormalization", "ln", h, g.w("ln.weight", g.r.uniform(0.8, 1.2, 32)),
             g.w("ln.bias", g.r.normal(0, 0.05, 32)), axis=-1, epsilon=1e-5)
    g.n("MatMul", "fc2", ln, g.w("fc2.weight", g.lin_w(32, 16)))
    return g.model(17, "fc2")


@case("ln17_nobias_stats", "LayerNormalization 17 without bias, its Mean and InvStdDev outputs (U) also declared "
      "(exporter with training outputs left in)", ["ln"])
def _ln17_nobias_stats():
    g = G("ln17_nobias_stats")
    x = _tokens(g, "tokens", (2, 10, 32))
    h = g.n("MatMul", "fc1", x, g.w("fc1.weight", g.lin_w(32, 32)))
    g.n("LayerNormalization", "ln", h, g.w("ln.weight", g.r.uniform(0.8, 1.2, 32)),
        outputs=["ln_y", "ln_mean", "ln_inv_std"], axis=-1, epsilon=1e-5)
    g.n("MatMul", "fc2", "ln_y", g.w("fc2.weight", g.lin_w(32, 16)))
    return g.model(17, "fc2")


@case("rms23", "RMSNormalization 23 (T X, V scale) between MatMuls (Llama-style block)", ["rms"])
def _rms23():
    g = G("rms23")
    x = _tokens(g, "tokens", (2, 8, 32))
    h = g.n("MatMul", "fc1", x, g.w("fc1.weight", g.lin_w(32, 32)))
    r = g.n("RMSNormalization", "rms", h, g.w("rms.weight", g.r.uniform(0.8, 1.2, 32)), axis=-1, epsilon=1e-6)
    g.n("MatMul", "fc2", r, g.w("fc2.weight", g.lin_w(32, 16)))
    return g.model(23, "fc2")


@case("instnorm17_conv", "InstanceNormalization 17 after Conv (style transfer block), then Relu", ["inorm"])
def _instnorm17_conv():
    g = G("instnorm17_conv")
    x = _image(g, "image", (1, 3, 16, 16))
    c = g.n("Conv", "conv", x, g.w("conv.weight", g.conv_w(16, 3, 3)), g.w("conv.bias", g.r.normal(0, 0.05, 16)),
            pads=[1, 1, 1, 1])
    n = g.n("InstanceNormalization", "inorm", c, g.w("inorm.weight", g.r.uniform(0.5, 1.5, 16)),
            g.w("inorm.bias", g.r.normal(0, 0.1, 16)), epsilon=1e-5)
    g.n("Relu", "relu", n)
    return g.model(17, "relu")


# ----------------------------------------------------------------------------- Clip, Dropout, Attention, DQ

@case("clip13_relu6_constnodes", "Clip 13 with min/max as Constant-node inputs (ReLU6 from the PyTorch exporter, "
      "MobileNet)", ["/act/Clip"])
def _clip13_relu6_constnodes():
    g = G("clip13_relu6_constnodes")
    x = _image(g, "image", (1, 3, 16, 16))
    c = g.n("Conv", "/conv/Conv", x, g.w("conv.weight", g.conv_w(16, 3, 3) * 3), pads=[1, 1, 1, 1])
    lo = g.const("/act/Constant", np.float32(0.0))
    hi = g.const("/act/Constant_1", np.float32(6.0))
    a = g.n("Clip", "/act/Clip", c, lo, hi)
    g.n("Conv", "/pw/Conv", a, g.w("pw.weight", g.conv_w(8, 16, 1)))
    return g.model(13, "/pw/Conv")


@case("clip11_max_only", "Clip 11 with min omitted (\"\") and max a float32 initializer, after MatMul", ["clip"])
def _clip11_max_only():
    g = G("clip11_max_only")
    x = _tokens(g, "tokens", (4, 32))
    h = g.n("MatMul", "fc", x, g.w("fc.weight", g.lin_w(32, 32)))
    c = g.n("Clip", "clip", h, "", g.w("clip_max", np.float32(1.0)))
    g.n("MatMul", "fc2", c, g.w("fc2.weight", g.lin_w(32, 8)))
    return g.model(11, "fc2")


@case("dropout13_ratio", "Dropout 13 (T data, T1 ratio, T2 bool) with a float32 ratio and training_mode=False "
      "inputs, both outputs (inference export)", ["drop"])
def _dropout13_ratio():
    g = G("dropout13_ratio")
    x = _tokens(g, "tokens", (2, 8, 32))
    h = g.n("MatMul", "fc", x, g.w("fc.weight", g.lin_w(32, 32)))
    g.n("Dropout", "drop", h, g.w("drop_ratio", np.float32(0.1)), g.w("drop_training", np.bool_(False), np.bool_),
        outputs=["drop_out", "drop_mask"])
    g.n("Add", "residual", "drop_out", x)
    return g.model(13, "residual")


@case("attention23_float_mask", "Attention 23 (T1 Q/K, T2 V, U mask) with an additive float32 causal mask "
      "initializer (-1e4 above the diagonal), Q/K/V from MatMuls", ["attn"])
def _attention23_float_mask():
    g = G("attention23_float_mask")
    x = _tokens(g, "tokens", (1, 8, 32))
    qkv = []
    for k in "qkv":
        p = g.n("MatMul", k + "_proj", x, g.w(k + ".weight", g.lin_w(32, 32)))
        p = g.n("Reshape", k + "_heads", p, g.ints(k + "_shape", [1, 8, 4, 8]))
        qkv.append(g.n("Transpose", k + "_bhsd", p, perm=[0, 2, 1, 3]))
    mask = np.triu(np.full((8, 8), -1e4, np.float32), 1)[None, None]
    a = g.n("Attention", "attn", *qkv, g.w("causal_mask", mask))
    a = g.n("Transpose", "attn_bshd", a, perm=[0, 2, 1, 3])
    a = g.n("Reshape", "attn_merge", a, g.ints("merge_shape", [1, 8, 32]))
    g.n("MatMul", "o_proj", a, g.w("o.weight", g.lin_w(32, 32)))
    return g.model(23, "o_proj")


@case("dq19_int8_weight", "DequantizeLinear 19 (T1 int8 weight, T2 float32 scale) feeding a MatMul "
      "(weight-only int8 export)", ["w_dq"])
def _dq19_int8_weight():
    g = G("dq19_int8_weight")
    x = _tokens(g, "tokens", (4, 32))
    w = g.lin_w(32, 16)
    scale = np.abs(w).max(axis=0) / 127
    q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    dq = g.n("DequantizeLinear", "w_dq", g.w("w_q", q, np.int8), g.w("w_scale", scale),
             g.w("w_zp", np.zeros(16), np.int8), axis=1)
    h = g.n("MatMul", "fc", x, dq)
    g.n("Add", "fc_bias", h, g.w("fc.bias", g.r.normal(0, 0.05, 16)))
    return g.model(19, "fc_bias")


@case("maxpool12_indices", "MaxPool 12 (T, I int64) with its Indices output declared, after Conv (SegNet encoder)",
      ["pool"])
def _maxpool12_indices():
    g = G("maxpool12_indices")
    x = _image(g, "image", (1, 3, 16, 16))
    c = g.n("Conv", "conv", x, g.w("conv.weight", g.conv_w(8, 3, 3)), pads=[1, 1, 1, 1])
    g.n("MaxPool", "pool", c, outputs=["pool_y", "pool_idx"], kernel_shape=[2, 2], strides=[2, 2])
    g.n("Relu", "relu", "pool_y")
    return g.model(12, "relu")


@case("attention23_bool_mask", "Attention 23 with a bool causal mask (U=bool, nothing float to tie) and is_causal "
      "off, Q/K/V from MatMuls: the control of attention23_float_mask", ["attn"])
def _attention23_bool_mask():
    g = G("attention23_bool_mask")
    x = _tokens(g, "tokens", (1, 8, 32))
    qkv = []
    for k in "qkv":
        p = g.n("MatMul", k + "_proj", x, g.w(k + ".weight", g.lin_w(32, 32)))
        p = g.n("Reshape", k + "_heads", p, g.ints(k + "_shape", [1, 8, 4, 8]))
        qkv.append(g.n("Transpose", k + "_bhsd", p, perm=[0, 2, 1, 3]))
    mask = np.tril(np.ones((8, 8), bool))[None, None]
    a = g.n("Attention", "attn", *qkv, g.w("causal_mask", mask, np.bool_))
    a = g.n("Transpose", "attn_bshd", a, perm=[0, 2, 1, 3])
    a = g.n("Reshape", "attn_merge", a, g.ints("merge_shape", [1, 8, 32]))
    g.n("MatMul", "o_proj", a, g.w("o.weight", g.lin_w(32, 32)))
    return g.model(23, "o_proj")


@case("attention23_padding_mask", "Attention 23 with an additive mask computed from a float32 padding-mask input: "
      "(1 - m) * -1e4, Unsqueezed to [B,1,1,S] and added to a causal mask (Hugging Face decoder spelling)", ["attn"])
def _attention23_padding_mask():
    g = G("attention23_padding_mask")
    x = _tokens(g, "tokens", (2, 8, 32))
    m = g.inp("attention_mask", np.array([[1] * 8, [1] * 5 + [0] * 3], np.float32))
    inv = g.n("Sub", "mask_invert", g.w("one", np.float32(1.0)), m)
    add = g.n("Mul", "mask_scale", inv, g.w("mask_min", np.float32(-1e4)))
    add = g.n("Unsqueeze", "mask_b11s", add, g.ints("mask_axes", [1, 2]))
    causal = np.triu(np.full((8, 8), -1e4, np.float32), 1)[None, None]
    add = g.n("Add", "mask_combined", add, g.w("causal_mask", causal))
    qkv = []
    for k in "qkv":
        p = g.n("MatMul", k + "_proj", x, g.w(k + ".weight", g.lin_w(32, 32)))
        p = g.n("Reshape", k + "_heads", p, g.ints(k + "_shape", [2, 8, 4, 8]))
        qkv.append(g.n("Transpose", k + "_bhsd", p, perm=[0, 2, 1, 3]))
    a = g.n("Attention", "attn", *qkv, add)
    a = g.n("Transpose", "attn_bshd", a, perm=[0, 2, 1, 3])
    a = g.n("Reshape", "attn_merge", a, g.ints("merge_shape", [2, 8, 32]))
    g.n("MatMul", "o_proj", a, g.w("o.weight", g.lin_w(32, 32)))
    return g.model(23, "o_proj")


@case("qdq19_activation", "QuantizeLinear 19 (x and y_scale share T1) -> DequantizeLinear on an activation "
      "between MatMuls (QDQ export), float32 scale initializers", ["act_q", "act_dq"])
def _qdq19_activation():
    g = G("qdq19_activation")
    x = _tokens(g, "tokens", (4, 32))
    h = g.n("MatMul", "fc1", x, g.w("fc1.weight", g.lin_w(32, 32)))
    scale = np.float32(4.0 / 127)
    q = g.n("QuantizeLinear", "act_q", h, g.w("act_scale", scale), g.w("act_zp", np.uint8(128), np.uint8))
    dq = g.n("DequantizeLinear", "act_dq", q, g.w("act_scale_dq", scale), g.w("act_zp_dq", np.uint8(128), np.uint8))
    g.n("MatMul", "fc2", dq, g.w("fc2.weight", g.lin_w(32, 16)))
    return g.model(19, "fc2")


# ----------------------------------------------------------------------------- negatives (one type variable)

@case("neg_conv_relu", "negative: Conv+Relu (one type variable T)", ["conv"], negative=True)
def _neg_conv_relu():
    g = G("neg_conv_relu")
    x = _image(g, "image", (1, 3, 16, 16))
    c = g.n("Conv", "conv", x, g.w("conv.weight", g.conv_w(16, 3, 3)), g.w("conv.bias", g.r.normal(0, 0.05, 16)),
            pads=[1, 1, 1, 1])
    r = g.n("Relu", "relu", c)
    g.n("Conv", "conv2", r, g.w("conv2.weight", g.conv_w(8, 16, 3)), pads=[1, 1, 1, 1])
    return g.model(17, "conv2")


@case("neg_matmul_add", "negative: MatMul+Add+Gelu-free MLP (one type variable T)", ["fc1"], negative=True)
def _neg_matmul_add():
    g = G("neg_matmul_add")
    x = _tokens(g, "tokens", (2, 8, 32))
    h = g.n("MatMul", "fc1", x, g.w("fc1.weight", g.lin_w(32, 64)))
    h = g.n("Add", "fc1_bias", h, g.w("fc1.bias", g.r.normal(0, 0.05, 64)))
    h = g.n("Relu", "act", h)
    h = g.n("MatMul", "fc2", h, g.w("fc2.weight", g.lin_w(64, 32)))
    g.n("Add", "fc2_bias", h, g.w("fc2.bias", g.r.normal(0, 0.05, 32)))
    return g.model(17, "fc2_bias")


@case("neg_softmax", "negative: scaled scores MatMul -> Softmax(axis=-1) at opset 13 (one type variable T)",
      ["softmax"], negative=True)
def _neg_softmax():
    g = G("neg_softmax")
    x = _tokens(g, "tokens", (2, 8, 32))
    q = g.n("MatMul", "q", x, g.w("q.weight", g.lin_w(32, 32)))
    kt = g.n("Transpose", "kt", x, perm=[0, 2, 1])
    s = g.n("MatMul", "scores", q, kt)
    s = g.n("Mul", "scale", s, g.w("inv_sqrt_d", np.float32(1 / np.sqrt(32))))
    g.n("Softmax", "softmax", s, axis=-1)
    return g.model(13, "softmax")


@case("neg_einsum", "negative: Einsum bilinear 'bij,jk->bik' (one type variable T) then Add", ["einsum"],
      negative=True)
def _neg_einsum():
    g = G("neg_einsum")
    x = _tokens(g, "tokens", (2, 8, 32))
    e = g.n("Einsum", "einsum", x, g.w("w", g.lin_w(32, 16)), equation="bij,jk->bik")
    g.n("Add", "bias", e, g.w("b", g.r.normal(0, 0.05, 16)))
    return g.model(12, "bias")


# What a conversion that holds looks like, per case (the "held" criteria are the same for all: see LEGEND).
_BN_TIED = ("statistics in X's type: the CPU registry read here holds BatchNormalization-{v} only with {vars} "
            "(float or double), and ampconv's own commit d31e994 says no onnxruntime kernel takes the mix")
EXPECT = {
    "bn9_conv_init": "one type variable: nothing to tie; the BN folds into the Conv",
    "bn14_conv_train0": _BN_TIED.format(v=14, vars="T = U") + "; folds into the Conv",
    "bn15_conv_bias_init": _BN_TIED.format(v=15, vars="T = T1 = T2") + "; folds into the Conv",
    "bn15_conv_constnodes_train0": _BN_TIED.format(v=15, vars="T = T1 = T2") + " (Constant nodes too); folds",
    "bn17_torch_stem": _BN_TIED.format(v=15, vars="T = T1 = T2") + "; folds",
    "bn17_two_blocks": _BN_TIED.format(v=15, vars="T = T1 = T2") + "; both fold",
    "bn9_inits_as_inputs": "one type variable; the statistics, being graph inputs too, may be overridden: "
                           "whatever the converter does with such an input, the BN's T stays one type",
    "bn15_inits_as_inputs": _BN_TIED.format(v=15, vars="T = T1 = T2") + ", also when the statistics are "
                            "overridable graph inputs (a float32 input must reach the BN in X's type)",
    "bn15_identity_stats": _BN_TIED.format(v=15, vars="T = T1 = T2") + ", also through Identity nodes; folds",
    "bn15_gemm_1d": _BN_TIED.format(v=15, vars="T = T1 = T2"),
    "bn14_matmul_seq_1d": _BN_TIED.format(v=14, vars="T = U"),
    "bn15_on_input": "float32 or LOW, but X and statistics in one type",
    "gridsample16_manual_affine": "X and grid in one type (the CPU registry holds GridSample only with T1 = T2)",
    "gridsample20_affinegrid_conv": "X and grid in one type (the CPU registry holds GridSample only with T1 = T2)",
    "gridsample22_flow": "X and grid in one type (the CPU registry holds GridSample only with T1 = T2)",
    "pow13_gem_pool": "a float32 exponent is legal (T1 independent of T); CPU runs Pow in float32 either way; "
                      "accurate (x^3 of ~1 values, mean, cube root)",
    "pow15_computed_exponent": "as pow13_gem_pool, with a computed exponent",
    "pow12_scalar_square": "as pow13_gem_pool; the square of deviations ~1 fits fp16",
    "resize11_roi_scales": "roi float32 is normal (the CPU kernels constrain only T1 and read roi as float)",
    "resize13_crop_roi": "roi float32 is normal; crop box kept exact",
    "resize19_sizes_from_shape": "sizes int64 from Shape; X in either type",
    "ln17_bias": "X/scale/bias in one type T, Mean/InvStdDev U float32 (CPU registers T=f16 with U=f32)",
    "ln17_nobias_stats": "T one type, U float32 (CPU registers T=f16 with U=f32 only)",
    "rms23": "X (T) and scale (V) in one type: CPU registers (f16, f16) and (f32, f32) only",
    "instnorm17_conv": "one type variable; CPU runs it in float32",
    "clip13_relu6_constnodes": "min/max in x's type (one T): CPU has a float16 Clip-13",
    "clip11_max_only": "max in x's type (one T)",
    "dropout13_ratio": "ratio in any float type (T1 independent); an inference no-op",
    "attention23_float_mask": "the float mask (U) in Q/K/V's type: CPU registers (T1 = T2 = U) in f16 and f32 only, "
                              "so a mixed Attention is inlined as its function body instead of running its kernel",
    "attention23_bool_mask": "bool mask: nothing to tie; native float16 Attention kernel",
    "attention23_padding_mask": "as attention23_float_mask, with a computed mask",
    "dq19_int8_weight": "scale (T2) in the output's type",
    "qdq19_activation": "QuantizeLinear's x and y_scale in one type T1; DequantizeLinear's scale in its output type",
    "maxpool12_indices": "indices int64, values in one type",
    "neg_conv_relu": "one type variable: no mix possible, no inserted cast expected",
    "neg_matmul_add": "one type variable: no mix possible, no inserted cast expected",
    "neg_softmax": "one type variable: no mix possible, no inserted cast expected",
    "neg_einsum": "one type variable: no mix possible, no inserted cast expected",
}


# ============================================================================= measurement

_SHORT = {"float16": "h", "float": "f", "double": "d", "bfloat16": "bf", "int64": "i64", "int32": "i32",
          "int8": "i8", "uint8": "u8", "bool": "b"}


def _opset(model: onnx.ModelProto, domain: str = "") -> int:
    for o in model.opset_import:
        if o.domain in (domain, "ai.onnx" if domain == "" else domain):
            return o.version
    return 0


def _signature(model: onnx.ModelProto, node: onnx.NodeProto, types: dict):
    """(type variable -> type name, since_version) of ``node`` in ``model``."""
    schema = onnx.defs.get_schema(node.op_type, _opset(model, node.domain), node.domain)
    binding = {}

    def bind(formals, actuals):
        for i, name in enumerate(actuals):
            if not name:
                continue
            f = formals[min(i, len(formals) - 1)]
            if name in types and f.type_str in {c.type_param_str for c in schema.type_constraints}:
                binding.setdefault(f.type_str, TensorProto.DataType.Name(types[name]).lower())

    bind(schema.inputs, node.input)
    bind(schema.outputs, node.output)
    return binding, schema.since_version


_REGISTRY = None


def _cpu_kernel(op: str, domain: str, since: int, binding: dict) -> bool:
    global _REGISTRY
    if _REGISTRY is None:
        from onnxruntime.capi import _pybind_state as C

        _REGISTRY = [k for k in C.get_all_opkernel_def() if k.provider == "CPUExecutionProvider"]
    for k in _REGISTRY:
        if k.op_name != op or (k.domain or "") not in (domain, "ai.onnx" if domain == "" else domain):
            continue
        lo, hi = k.version_range
        if not lo <= since <= hi:
            continue
        if all(binding[v] is None or f"tensor({binding[v]})" in allowed
               for v, allowed in k.type_constraints.items() if v in binding):
            return True
    return False


def _kernel_verdict(op: str, domain: str, since: int, binding: dict) -> str:
    """``yes``: a CPU kernel takes the binding as written; ``MIX``: none does, but one takes it with its float32
    type variables tied to float16 (the mix is what blocks it); ``no fp16``: none does either way."""
    if _cpu_kernel(op, domain, since, binding):
        return "yes"
    values = set(binding.values())
    if {"float16", "float"} <= values:
        tied = {k: ("float16" if v == "float" else v) for k, v in binding.items()}
        if _cpu_kernel(op, domain, since, tied):
            return "MIX"
    return "no fp16" if "float16" in values else "no"


def _session(path: Path, optimized: Path | None = None):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if optimized is not None:
        so.optimized_model_filepath = str(optimized)
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _casts(model: onnx.ModelProto) -> list:
    return [n.name for n in model.graph.node if n.op_type == "Cast"]


def measure(c: Case, work: Path) -> dict:
    model, feeds = c.make()
    src, dst, opt = work / f"{c.name}.onnx", work / f"{c.name}.fp16.onnx", work / f"{c.name}.fp16.opt.onnx"
    onnx.save(model, src)
    ref_sess = _session(src, work / f"{c.name}.opt.onnx" if c.conv_bn else None)
    if c.conv_bn:
        row_orig_bn = any(n.op_type == "BatchNormalization" for n in onnx.load(work / f"{c.name}.opt.onnx").graph.node)
    ref = ref_sess.run(None, feeds)[0].astype(np.float64)
    row = {"case": c.name, "probes": c.probes, "tol": c.tol}
    t0 = time.perf_counter()
    try:
        extra = {"target": TARGET} if TARGET else {}
        report = ampconv.convert(str(src), str(dst), ampconv.Config(dtype="fp16", level="O2", overwrite=True, **extra))
    except Exception as e:  # noqa: BLE001 - a failed conversion is a result
        row.update(error=f"convert: {type(e).__name__}: {str(e).splitlines()[0][:120]}", held=False)
        return row
    row["convert_s"] = time.perf_counter() - t0
    decided = {n["name"]: n for n in report.nodes}
    def _prec(p):
        d = decided.get(p, {})
        value = getattr(d.get("precision"), "value", d.get("precision"))
        return f"{value} ({d.get('rule')})"

    row["precision"] = ", ".join(_prec(p) for p in c.probe_nodes)
    conv = onnx.load(dst)
    types = judge.tensor_types(conv)
    sigs, verdicts, bindings = [], [], {}
    by_name = {n.name: n for n in conv.graph.node}
    for p in c.probe_nodes:
        node = by_name.get(p)
        if node is None:
            sigs.append("(gone)")
            continue
        binding, since = _signature(conv, node, types)
        bindings[p] = (node.op_type, binding)
        sigs.append(" ".join(f"{k}={_SHORT.get(v, v)}" for k, v in sorted(binding.items())))
        verdicts.append(_kernel_verdict(node.op_type, node.domain, since, binding))
    row["signature"] = "; ".join(sigs)
    row["cpu_kernel"] = ", ".join(verdicts) or "-"
    row["mix_blocked"] = "MIX" in verdicts
    row["casts_file"] = len(_casts(conv))
    try:
        sess = _session(dst, opt)
        row["loads"] = True
    except Exception as e:  # noqa: BLE001
        row.update(loads=False, error=f"load: {str(e).splitlines()[0][:120]}", held=False)
        return row
    optimized = onnx.load(opt)
    file_names = {n.name for n in conv.graph.node}
    row["casts_opt"] = len(_casts(optimized))
    row["inserted"] = max(0, row["casts_opt"] - row["casts_file"])
    row["ort_casts"] = sum(1 for n in _casts(optimized) if n not in file_names)
    opt_types = judge.tensor_types(optimized)
    opt_by_name = {n.name: n for n in optimized.graph.node}
    ran = []
    for p, (op, binding) in bindings.items():
        node = opt_by_name.get(p)
        if node is None:
            ran.append("gone")
        elif node.op_type != op:
            ran.append(f"became {node.op_type}")
        else:
            b2, _ = _signature(optimized, node, opt_types)
            common = sorted(set(b2) & set(binding))
            if not common:
                ran.append("kept (types unknown)")
            elif all(b2[k] == binding[k] for k in common):
                ran.append("as written")
            else:
                ran.append("retyped " + " ".join(f"{k}={_SHORT.get(b2[k], b2[k])}" for k in common))
    row["ran_as"] = "; ".join(ran) or "-"
    if c.conv_bn:
        row["bn_left_orig"] = row_orig_bn
        row["bn_left"] = any(n.op_type == "BatchNormalization" for n in optimized.graph.node)
    got = sess.run(None, feeds)[0].astype(np.float64)
    rms = float(np.sqrt(np.mean(ref ** 2)))
    err = float(np.max(np.abs(got - ref))) if np.all(np.isfinite(got)) else float("inf")
    row["rel_err"] = err / rms
    row["held"] = row["loads"] and row["inserted"] == 0 and row["rel_err"] <= c.tol
    row["held_probe"] = row["loads"] and not row["mix_blocked"] and row["rel_err"] <= c.tol
    return row


def _fmt_row(r: dict) -> str:
    def f(x, spec):
        return format(x, spec) if isinstance(x, (int, float)) else "-"

    loads = {True: "yes", False: "NO"}.get(r.get("loads"), "-")
    bn = {True: "BN kept", False: "folded"}.get(r.get("bn_left"), "-")
    if "bn_left_orig" in r:
        bn += " (float32: " + ("kept" if r["bn_left_orig"] else "folded") + ")"
    tol = "" if r["tol"] == TOL else f" (tol {r['tol']:g})"
    cells = [r["case"], r["probes"], r.get("precision", "-"), r.get("signature", "-"), r.get("cpu_kernel", "-"),
             r.get("ran_as", "-"), loads, f"{f(r.get('casts_file'), 'd')} -> {f(r.get('casts_opt'), 'd')}",
             f(r.get("inserted"), "d"), f(r.get("ort_casts"), "d"), bn, f(r.get("rel_err"), ".2e") + tol,
             "**yes**" if r.get("held") else "no", "**yes**" if r.get("held_probe") else "no"]
    return "| " + " | ".join(cells) + " |"


LEGEND = """Columns: *precision* of the probed node(s) in ampconv's report (its rule in brackets); *signature*: element type of each type
variable of the probed node in the converted file (h float16, f float32, b bool, i8/i64 int8/int64);
*cpu kernel*: onnxruntime's CPU registry has a kernel for that binding (``yes``), has none but would have one
with the float32 variables tied to float16 (``MIX``: the mix itself is what no kernel takes), or has none in
float16 either way (``no fp16``: onnxruntime's CPU provider runs this op in float32 only, so it casts around
any float16 node of it; a CPU measurement cannot tell a good signature from a bad one there); *ran as*: the
probed node in the graph onnxruntime runs (``gone``: folded or fused away; ``became X``: replaced, e.g. a
function inlined because no kernel matched); *casts file -> ran*: Cast nodes in the converted file and in
onnxruntime's optimized graph; *inserted*: the increase, if any; *ort casts*: Cast nodes of the optimized graph
that onnxruntime made (names absent from the file), whatever the net count; *Conv+BN*: whether onnxruntime
folded the BatchNormalization into the Conv (and, in brackets, whether it does in the float32 original); *rel err*: max abs
error / output RMS against the float32 original, both on the CPU provider.
*held* (the brief's definition): loads, inserted = 0, rel err <= tolerance (0.05 unless noted).
*held at probe*: loads, rel err <= tolerance, and no probed node is ``MIX`` (casts that onnxruntime's CPU
provider inserts only because it lacks float16 kernels for MatMul/Gemm/Conv/... are set aside)."""


def table(rows: list) -> str:
    head = ["case", "probes", "precision", "signature (converted)", "cpu kernel", "ran as", "loads",
            "casts file -> ran", "inserted", "ort casts", "Conv+BN", "rel err", "held", "held at probe"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r.get("error") and "loads" not in r:
            lines.append("| " + " | ".join([r["case"], r["probes"]] + ["-"] * 9 + [r["error"], "no", "no"]) + " |")
            continue
        lines.append(_fmt_row(r))
    held = sum(1 for r in rows if r.get("held"))
    held_probe = sum(1 for r in rows if r.get("held_probe"))
    notes = [f"- {r['case']}: tolerance {r['tol']:g}: {c.tol_why}" for r in rows
             for c in CASES if c.name == r["case"] and c.tol_why]
    notes += [f"- {r['case']}: {r['error']}" for r in rows if r.get("error")]
    out = "\n".join(lines) + "\n"
    if notes:
        out += "\nNotes:\n" + "\n".join(dict.fromkeys(notes)) + "\n"
    out += "\nWhat a held conversion looks like, per case:\n\n" + "\n".join(
        f"- {r['case']}: {EXPECT.get(r['case'], '-')}" for r in rows) + "\n"
    out += f"\n**held at probe: {held_probe}/{len(rows)}**\n"
    out += f"\n**held: {held}/{len(rows)}**\n"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the markdown table here too")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--target", help="pass Config(target=...) (default: none, the library's own default)")
    args = ap.parse_args(argv)
    global TARGET
    TARGET = args.target
    cases = CASES
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in CASES if c.name in wanted]
    extra = f", target={TARGET!r}" if TARGET else ""
    head = [f"ampconv: {ampconv.__file__}", f"onnxruntime {ort.__version__}, onnx {onnx.__version__}",
            f"config: Config(dtype='fp16', level='O2', overwrite=True{extra}), defaults otherwise; measured on "
            "onnxruntime's CPUExecutionProvider"]
    print("\n".join(head), flush=True)
    rows = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="blind_kernels_") as tmp:
        for c in cases:
            rows.append(measure(c, Path(tmp)))
    took = f"({len(rows)} cases in {time.perf_counter() - t0:.1f} s)"
    body = table(rows)
    print(body)
    print(took)
    if args.out:
        Path(args.out).write_text("\n".join(head) + "\n\n" + LEGEND + "\n\n" + body + "\n" + took + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
