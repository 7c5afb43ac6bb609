"""Blind test set "bnfold": Conv + BatchNormalization converted to bfloat16.

Written without reading ampconv's planner, passes, runtime facts, calibration or pipeline code;
it uses only the public API (``ampconv.convert`` and the report's ``.nodes``).

The class of failure: onnxruntime has no bfloat16 BatchNormalization kernel on any provider, so a
converter that keeps a BatchNormalization as a node must keep it float32, with a Cast on each
side. An inference-mode BatchNormalization with constant statistics right after a Conv with
constant weights can instead be folded into that Conv (``W' = W * g / sqrt(v + eps)`` per output
channel, ``b' = (b - m) * g / sqrt(v + eps) + beta``, computed in float32 and only then rounded to
bfloat16), which leaves no float32 node and no Cast. A GPU user wants the fewest casts and the
most work in bf16, with outputs that stay accurate.

Every case is a small float32 model (seeded weights of realistic magnitude: He-normal Conv
weights; trained-like statistics gamma ~U(0.5,1.5), beta ~N(0,0.2), mean ~N(0,0.5),
var ~U(0.5,2) unless the case says otherwise; every node named), spelled in the style of some
exporter and opset, with 2 seeded samples. Each is converted with
``ampconv.convert(src, dst, Config(dtype="bf16", level="O2", overwrite=True))`` (defaults
otherwise). Two kinds:

* ``+`` positives: every BatchNormalization is foldable (inference mode, constant statistics,
  directly after a Conv with constant weights whose output feeds nothing else).
* ``-`` negatives: folding would be wrong or impossible (statistics that are graph inputs,
  training mode, a Conv output with another consumer, a BN not after a Conv, a weight shared by
  two Convs with different BNs, a weight that is a graph input, ConvTranspose's other channel
  axis, per-activation ``spatial=0`` statistics). They must stay correct, folded or not.

Measured per case:

* ``loads``: onnxruntime's CPU provider builds an InferenceSession on the converted file
  (default options). That provider has no bfloat16 Conv kernel at all (``Could not find an
  implementation for Conv(22)``), so any bf16 Conv fails there whatever the converter did; when
  the CPU session fails only that way (NOT_IMPLEMENTED on a node that computes in bfloat16),
  the file counts as loading when (a) no BatchNormalization computes in bfloat16 (no kernel on
  any provider) and (b) the same graph with every bfloat16 retyped to float16 (values
  converted) builds a CPU session, which checks everything but the bf16 kernel coverage (the
  graph resolves, types agree; the CPU provider casts around its missing fp16 kernels itself).
  The ``cpu`` column shows what the CPU session said of the file as written.
* ``accurate``: judge.py's emulation of the converted model (every bf16 value rounded to bf16,
  arithmetic float32, CPU provider, no graph optimization) against the float32 original on
  onnxruntime, on the 2 samples: per output ``max|err| <= rtol * max|ref| + 1e-5`` with rtol
  0.05 (bf16 keeps 8 significant bits: one rounding is <= 2^-9 = 0.2% relative, a few layers
  of them stay well inside 5%; a case with another rtol says why), no NaN/Inf where the
  reference is finite.
* ``fp32 BN``: BatchNormalization nodes of the converted file that compute in float32 (some
  float input or output float32); ``bf16 BN`` those with a bfloat16 input or output;
  ``casts``: Cast nodes in the converted file; ``fp32 nodes``: ``judge.float32_nodes``.
* ``reaction`` (cases whose statistics are graph inputs): the converted model fed changed
  statistics (emulated) against the float32 model fed the same, same rule as ``accurate``.

``held``:

* positives: loads, accurate, 0 float32 BatchNormalization, and ``casts <= budget`` where the
  budget is the original's float graph inputs + float graph outputs (boundary casts only) plus
  2 for each node other than Conv/BatchNormalization that ampconv's report keeps float32 with
  rule ``hard-gpu-kernel`` (an op with no bf16 kernel on the GPU, e.g. Clip: a cast in and out
  that no folding could save; the column shows the allowance as ``+N``);
* negatives: loads and accurate, and the reaction holds where the case has one.

Run from the repository root: ``.venv/bin/python tests/blind/bnfold.py [--out FILE] [--only
a,b]``. The ``ampconv`` imported is whatever ``PYTHONPATH`` puts first (the repository is appended
last), so ``PYTHONPATH=/path/to/worktree`` measures that worktree; the first line prints which.
"""

from __future__ import annotations

import argparse
import copy
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
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # last: a PYTHONPATH worktree's ampconv wins

import ampconv  # noqa: E402
import judge  # noqa: E402
import onnxruntime as ort  # noqa: E402
import spellings  # noqa: E402
from ampconv.config import Config  # noqa: E402

RTOL = 0.05
N_SAMPLES = 2
BF16, FP16 = TensorProto.BFLOAT16, TensorProto.FLOAT16


# ============================================================================= builder


class B(spellings.Graph):
    """spellings.Graph (every node named, each single output named after its node) with a seeded generator,
    inputs that carry their sample generators, Constant nodes, several outputs and IR/opset per case."""

    producer = "blind-bnfold"

    def __init__(self, name: str):
        super().__init__(name)
        self.r = np.random.default_rng(zlib.crc32(name.encode()))
        self.gens: dict = {}

    # ---- inputs
    def inp(self, name: str, shape, gen: Callable | None = None) -> str:
        shape = list(shape)
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        self.gens[name] = gen or (lambda r, s=tuple(shape): r.normal(0, 1, s))
        return name

    def image(self, name: str, shape) -> str:
        """A normalized image (ImageNet mean/std on 0..1 pixels): about N(0.2, 1.2), in [-1.8, 2.2]."""
        return self.inp(name, shape, lambda r, s=tuple(shape): (r.uniform(0, 1, s) - 0.45) / 0.25)

    # ---- constants
    def const(self, name: str, values, dtype=np.float32) -> str:
        """A Constant node (the PyTorch exporter's / tf2onnx's spelling of a constant input)."""
        t = numpy_helper.from_array(np.asarray(values, dtype=dtype), name + "_value")
        return self.n("Constant", name, value=t)

    def he(self, *shape) -> np.ndarray:
        """He-normal Conv weight (cout, cin/group, *kernel)."""
        return self.r.normal(0, np.sqrt(2.0 / np.prod(shape[1:])), shape)

    def stats(self, c: int, shape=None):
        """Trained-like statistics (gamma, beta, mean, var)."""
        s = shape or (c,)
        r = self.r
        return r.uniform(0.5, 1.5, s), r.normal(0, 0.2, s), r.normal(0, 0.5, s), r.uniform(0.5, 2.0, s)

    def bn(self, name: str, x: str, c: int, stats=None, style: str = "init", keys=None, eps: float = 1e-5,
           momentum: float | None = 0.9, outputs=None, **attrs):
        """A BatchNormalization; ``style``: ``init`` (initializers), ``const`` (Constant nodes)."""
        values = stats if stats is not None else self.stats(c)
        keys = keys or tuple(f"{name}.{k}" for k in ("weight", "bias", "running_mean", "running_var"))
        if style == "init":
            ins = [self.w(k, v) for k, v in zip(keys, values)]
        elif style == "const":
            ins = [self.const(k, v) for k, v in zip(keys, values)]
        else:
            raise ValueError(style)
        if momentum is not None:
            attrs["momentum"] = momentum
        return self.n("BatchNormalization", name, x, *ins, epsilon=eps, outputs=outputs, **attrs)

    def conv(self, name: str, x: str, cout: int, cin: int, k=(3, 3), bias: bool = False, weight=None,
             wname=None, bname=None, **attrs) -> str:
        group = attrs.get("group", 1)
        w = weight if weight is not None else self.he(cout, cin // group, *k)
        ins = [x, self.w(wname or f"{name}.weight", w)]
        if bias:
            ins.append(self.w(bname or f"{name}.bias", self.r.normal(0, 0.05, cout)))
        return self.n("Conv", name, *ins, kernel_shape=list(k), **attrs)

    # ---- model
    def model(self, opset: int, outs, ir: int | None = None, inits_as_inputs: bool = False) -> onnx.ModelProto:
        outs = [outs] if isinstance(outs, str) else list(outs)
        outputs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs]
        inputs = list(self.inputs)
        if inits_as_inputs:
            inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in self.inits]
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=self.producer)
        model.ir_version = ir or max(4, helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        model.graph.ClearField("output")
        model.graph.output.extend(inferred.graph.output)
        onnx.checker.check_model(model, full_check=True)
        return model

    def samples(self, n: int = N_SAMPLES) -> list:
        out = []
        for s in range(n):
            r = np.random.default_rng([zlib.crc32(self.name.encode()), 1000 + s])
            out.append({k: np.asarray(g(r), dtype=np.float32) for k, g in self.gens.items()})
        return out


@dataclass
class Built:
    model: onnx.ModelProto
    samples: list
    changed: list | None = None  # feeds with changed statistics, for the reaction check


# ============================================================================= cases


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "+" foldable, "-" must not be folded wrongly
    what: str
    make: Callable
    rtol: float = RTOL
    rtol_why: str = ""


CASES: list = []


def case(name: str, kind: str, what: str, rtol: float = RTOL, rtol_why: str = ""):
    def register(make):
        CASES.append(Case(name, kind, what, make, rtol, rtol_why))
        return make

    return register


def _changed_stats(b: B, samples: list, stat_names: dict) -> list:
    """Each sample plus changed statistics: ``stat_names`` maps a role (weight/bias/mean/var) to input names."""
    r = np.random.default_rng([zlib.crc32(b.name.encode()), 77])
    inits = {t.name: numpy_helper.to_array(t).astype(np.float32) for t in b.inits}
    out = []
    for s in samples:
        feeds = dict(s)
        for role, names in stat_names.items():
            for nm in names:
                base = feeds.get(nm, inits.get(nm))
                if role == "weight":
                    v = base * r.uniform(0.6, 1.4, base.shape)
                elif role == "bias":
                    v = base + r.normal(0, 0.3, base.shape)
                elif role == "mean":
                    v = base + r.normal(0, 0.5, base.shape)
                else:
                    v = base * r.uniform(0.3, 3.0, base.shape)
                feeds[nm] = v.astype(np.float32)
        out.append(feeds)
    return out


# ----------------------------------------------------------------------------- positives


@case("pos_op9_torch1_conv_bn_relu", "+", "PyTorch 1.x, opset 9: Conv(no bias)-BN(no spatial/is_test)-Relu, "
      "names Conv_0/BatchNormalization_1")
def _p_op9():
    b = B("pos_op9_torch1_conv_bn_relu")
    x = b.image("input.1", (1, 3, 32, 32))
    c = b.conv("Conv_0", x, 16, 3, pads=[1, 1, 1, 1], wname="conv1.weight")
    n = b.bn("BatchNormalization_1", c, 16, keys=("bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"))
    y = b.n("Relu", "Relu_2", n)
    return Built(b.model(9, y), b.samples())


@case("pos_op8_caffe2_spatial1", "+", "Caffe2-style, opset 8 (IR 4): Conv(bias)-BN(spatial=1, is_test-free)-Relu")
def _p_op8():
    b = B("pos_op8_caffe2_spatial1")
    x = b.image("data", (1, 3, 24, 24))
    c = b.conv("conv1", x, 16, 3, bias=True, pads=[1, 1, 1, 1], strides=[1, 1])
    n = b.bn("conv1_spatbn", c, 16, spatial=1, momentum=0.9,
             keys=("conv1_spatbn_s", "conv1_spatbn_b", "conv1_spatbn_rm", "conv1_spatbn_riv"))
    y = b.n("Relu", "conv1_relu", n)
    return Built(b.model(8, y, ir=4), b.samples())


@case("pos_op11_mxnet_bias", "+", "MXNet-style, opset 11: Conv(bias)-BN(eps 2e-5)-Relu, *_fwd names")
def _p_op11():
    b = B("pos_op11_mxnet_bias")
    x = b.image("data", (2, 3, 20, 20))
    c = b.conv("stage1_conv0_fwd", x, 24, 3, bias=True, pads=[1, 1, 1, 1], wname="stage1_conv0_weight")
    n = b.bn("stage1_batchnorm0_fwd", c, 24, eps=2e-5,
             keys=("stage1_batchnorm0_gamma", "stage1_batchnorm0_beta", "stage1_batchnorm0_running_mean",
                   "stage1_batchnorm0_running_var"))
    y = b.n("Relu", "stage1_relu0_fwd", n)
    return Built(b.model(11, y), b.samples())


@case("pos_op13_grouped_resnext", "+", "ResNeXt grouped Conv (group=4, 16->32) -BN-Relu, opset 13")
def _p_grouped():
    b = B("pos_op13_grouped_resnext")
    x = b.inp("x", (1, 16, 16, 16))
    c = b.conv("layer1.0.conv2", x, 32, 16, group=4, pads=[1, 1, 1, 1])
    n = b.bn("layer1.0.bn2", c, 32)
    y = b.n("Relu", "layer1.0.relu", n)
    return Built(b.model(13, y), b.samples())


@case("pos_op14_mbv2_depthwise_relu6", "+", "MobileNetV2 inverted residual, opset 14: pw Conv-BN-Clip(0,6)-depthwise "
      "Conv(group=32)-BN-Clip-pw Conv-BN + identity Add, BN training_mode=0 written")
def _p_mbv2():
    b = B("pos_op14_mbv2_depthwise_relu6")
    x = b.inp("x", (1, 8, 16, 16))
    lo, hi = b.w("relu6_min", np.float32(0)), b.w("relu6_max", np.float32(6))
    c = b.conv("/conv/conv.0/conv.0.0/Conv", x, 32, 8, k=(1, 1))
    n = b.bn("/conv/conv.0/conv.0.1/BatchNormalization", c, 32, training_mode=0)
    h = b.n("Clip", "/conv/conv.0/conv.0.2/Clip", n, lo, hi)
    c = b.conv("/conv/conv.1/conv.1.0/Conv", h, 32, 32, group=32, pads=[1, 1, 1, 1])
    n = b.bn("/conv/conv.1/conv.1.1/BatchNormalization", c, 32, training_mode=0)
    h = b.n("Clip", "/conv/conv.1/conv.1.2/Clip", n, lo, hi)
    c = b.conv("/conv/conv.2/Conv", h, 8, 32, k=(1, 1))
    n = b.bn("/conv/conv.3/BatchNormalization", c, 8, training_mode=0)
    y = b.n("Add", "/Add", x, n)
    return Built(b.model(14, y), b.samples())


@case("pos_op15_conv1d", "+", "1-D Conv (N,C,L)=(2,12,64), k5 pad2 -BN-Relu (audio/time series), opset 15")
def _p_conv1d():
    b = B("pos_op15_conv1d")
    x = b.inp("signal", (2, 12, 64))
    c = b.conv("/encoder/conv1/Conv", x, 24, 12, k=(5,), pads=[2, 2])
    n = b.bn("/encoder/bn1/BatchNormalization", c, 24)
    y = b.n("Relu", "/encoder/relu1/Relu", n)
    return Built(b.model(15, y), b.samples())


@case("pos_op17_conv3d", "+", "3-D Conv (video, 1x3x8x16x16) k3 pad1 -BN-Relu, opset 17")
def _p_conv3d():
    b = B("pos_op17_conv3d")
    x = b.image("clip", (1, 3, 8, 16, 16))
    c = b.conv("/stem/conv/Conv", x, 16, 3, k=(3, 3, 3), pads=[1, 1, 1, 1, 1, 1])
    n = b.bn("/stem/bn/BatchNormalization", c, 16)
    y = b.n("Relu", "/stem/relu/Relu", n)
    return Built(b.model(17, y), b.samples())


@case("pos_op13_dilated_strided", "+", "DeepLab-ish Conv dilation 2, stride 2, asymmetric pads, bias -BN-Relu, opset 13")
def _p_dilated():
    b = B("pos_op13_dilated_strided")
    x = b.inp("feat", (1, 16, 33, 33))
    c = b.conv("aspp.conv1", x, 32, 16, bias=True, dilations=[2, 2], strides=[2, 2], pads=[2, 1, 2, 3])
    n = b.bn("aspp.bn1", c, 32)
    y = b.n("Relu", "aspp.relu1", n)
    return Built(b.model(13, y), b.samples())


@case("pos_op14_hardswish_stem", "+", "MobileNetV3 stem, opset 14: Conv s2 -BN-HardSwish")
def _p_hswish():
    b = B("pos_op14_hardswish_stem")
    x = b.image("input", (1, 3, 32, 32))
    c = b.conv("/features/features.0/features.0.0/Conv", x, 16, 3, strides=[2, 2], pads=[1, 1, 1, 1])
    n = b.bn("/features/features.0/features.0.1/BatchNormalization", c, 16)
    y = b.n("HardSwish", "/features/features.0/features.0.2/HardSwish", n)
    return Built(b.model(14, y), b.samples())


@case("pos_op17_silu", "+", "YOLOv5/EfficientNet SiLU, opset 17: Conv-BN-Sigmoid, Mul(bn, sigmoid)")
def _p_silu():
    b = B("pos_op17_silu")
    x = b.image("images", (1, 3, 32, 32))
    c = b.conv("/model.0/conv/Conv", x, 16, 3, k=(3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
    n = b.bn("/model.0/bn/BatchNormalization", c, 16)
    s = b.n("Sigmoid", "/model.0/act/Sigmoid", n)
    y = b.n("Mul", "/model.0/act/Mul", n, s)
    return Built(b.model(17, y), b.samples())


@case("pos_op9_tf2onnx_relu6_nhwc", "+", "tf2onnx MobileNetV1 (opset 9): NHWC input Transpose-Conv-BN(eps 1e-3)-"
      "Clip(min/max attributes)-Transpose, TF names")
def _p_tf():
    b = B("pos_op9_tf2onnx_relu6_nhwc")
    x = b.inp("input_1:0", (1, 24, 24, 3), lambda r: r.uniform(-1, 1, (1, 24, 24, 3)))
    t = b.n("Transpose", "conv1/Conv2D__6", x, perm=[0, 3, 1, 2])
    c = b.conv("conv1/Conv2D", t, 16, 3, strides=[2, 2], pads=[0, 0, 1, 1], wname="conv1/kernel:0")
    n = b.bn("conv1_bn/FusedBatchNormV3", c, 16, eps=1e-3, momentum=None,
             keys=("conv1_bn/gamma:0", "conv1_bn/beta:0", "conv1_bn/moving_mean:0", "conv1_bn/moving_variance:0"))
    h = b.n("Clip", "conv1_relu/Relu6", n, min=0.0, max=6.0)
    y = b.n("Transpose", "conv1_relu/Relu6__8", h, perm=[0, 2, 3, 1])
    return Built(b.model(9, y), b.samples())


@case("pos_op13_resnet_basic_block", "+", "ResNet basic block, opset 13: Conv-BN-Relu-Conv-BN + identity Add + Relu")
def _p_resnet():
    b = B("pos_op13_resnet_basic_block")
    x = b.inp("x", (1, 16, 16, 16), lambda r: np.maximum(r.normal(0.3, 1, (1, 16, 16, 16)), 0))
    c = b.conv("layer1.0.conv1", x, 16, 16, pads=[1, 1, 1, 1])
    n = b.bn("layer1.0.bn1", c, 16)
    h = b.n("Relu", "layer1.0.relu", n)
    c = b.conv("layer1.0.conv2", h, 16, 16, pads=[1, 1, 1, 1])
    n = b.bn("layer1.0.bn2", c, 16)
    a = b.n("Add", "layer1.0.add", n, x)
    y = b.n("Relu", "layer1.0.relu_1", a)
    return Built(b.model(13, y), b.samples())


@case("pos_op17_inception_branches", "+", "Inception-style branches, opset 17: input feeds a 1x1 Conv-BN-Relu and a "
      "3x3 Conv-BN-Relu (each Conv output feeds exactly one BN), Concat")
def _p_branches():
    b = B("pos_op17_inception_branches")
    x = b.inp("x", (1, 16, 16, 16))
    c1 = b.conv("/branch1x1/conv/Conv", x, 16, 16, k=(1, 1))
    r1 = b.n("Relu", "/branch1x1/Relu", b.bn("/branch1x1/bn/BatchNormalization", c1, 16, eps=1e-3))
    c2 = b.conv("/branch3x3/conv/Conv", x, 24, 16, pads=[1, 1, 1, 1])
    r2 = b.n("Relu", "/branch3x3/Relu", b.bn("/branch3x3/bn/BatchNormalization", c2, 24, eps=1e-3))
    y = b.n("Concat", "/Concat", r1, r2, axis=1)
    return Built(b.model(17, y), b.samples())


@case("pos_op17_const_node_stats", "+", "PyTorch 2 exporter, opset 17: BN statistics as Constant nodes, "
      "training_mode=0, Conv(bias)-BN-Relu")
def _p_const_stats():
    b = B("pos_op17_const_node_stats")
    x = b.image("pixel_values", (1, 3, 24, 24))
    c = b.conv("/embedder/convolution/Conv", x, 32, 3, bias=True, strides=[2, 2], pads=[1, 1, 1, 1])
    n = b.bn("/embedder/normalization/BatchNormalization", c, 32, style="const", training_mode=0,
             keys=tuple(f"/embedder/normalization/Constant_{i}" for i in range(4)))
    y = b.n("Relu", "/embedder/activation/Relu", n)
    return Built(b.model(17, y), b.samples())


@case("pos_op15_tiny_var", "+", "near-dead channels: 4 of 16 channels with running_var 1e-5 = eps (their Conv output "
      "~0.3-0.8 +- 3e-3, matching statistics), Conv(bias)-BN-Relu, opset 15")
def _p_tiny_var():
    b = B("pos_op15_tiny_var")
    x = b.image("input", (1, 3, 16, 16))
    w = b.he(16, 3, 3, 3)
    tiny = np.array([1, 6, 11, 14])
    bias = b.r.normal(0, 0.05, 16)
    bias[tiny] = b.r.uniform(0.3, 0.8, tiny.size)
    probe = B("pos_op15_tiny_var")
    px = probe.image("input", (1, 3, 16, 16))
    pc = probe.n("Conv", "probe", px, probe.w("w", w), probe.w("b", bias), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    probe_samples = probe.samples(8)
    out = np.concatenate([o["probe"] for o in judge.run(probe.model(15, pc), probe_samples)], axis=0)
    std = out.std(axis=(0, 2, 3))
    w[tiny] *= (np.sqrt(1e-5) / std[tiny])[:, None, None, None]
    gamma, beta, mean, var = b.stats(16)
    out = np.concatenate([o["probe"] for o in judge.run(_with_weight(probe.model(15, pc), "w", w), probe_samples)],
                         axis=0)
    mean[tiny] = out.mean(axis=(0, 2, 3))[tiny]
    var[tiny] = 1e-5
    c = b.n("Conv", "conv", x, b.w("conv.weight", w), b.w("conv.bias", bias), kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    n = b.bn("bn", c, 16, stats=(gamma, beta, mean, var), eps=1e-5)
    y = b.n("Relu", "relu", n)
    return Built(b.model(15, y), b.samples())


def _with_weight(model: onnx.ModelProto, name: str, value) -> onnx.ModelProto:
    m = copy.deepcopy(model)
    for i, t in enumerate(m.graph.initializer):
        if t.name == name:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(np.asarray(value, np.float32), name))
    return m


@case("pos_op13_large_gamma", "+", "large gamma: 8 of 32 channels with gamma ~U(20,60) (and beta ~N(0,5)), "
      "Conv-BN-Relu-Conv-BN, opset 13")
def _p_large_gamma():
    b = B("pos_op13_large_gamma")
    x = b.inp("x", (1, 16, 16, 16))
    c = b.conv("features.3", x, 32, 16, pads=[1, 1, 1, 1])
    gamma, beta, mean, var = b.stats(32)
    big = b.r.choice(32, 8, replace=False)
    gamma[big] = b.r.uniform(20, 60, 8)
    beta[big] = b.r.normal(0, 5, 8)
    h = b.n("Relu", "features.5", b.bn("features.4", c, 32, stats=(gamma, beta, mean, var)))
    c = b.conv("features.6", h, 32, 32, pads=[1, 1, 1, 1])
    y = b.bn("features.7", c, 32)
    return Built(b.model(13, y), b.samples())


@case("pos_op11_stacked_vgg", "+", "4 stacked Conv-BN-Relu blocks (8-16-16-32-32, stride 2 in the third), opset 11")
def _p_stacked():
    b = B("pos_op11_stacked_vgg")
    h = b.inp("x", (1, 8, 32, 32))
    chans = [(8, 16, 1), (16, 16, 1), (16, 32, 2), (32, 32, 1)]
    for i, (cin, cout, s) in enumerate(chans):
        c = b.conv(f"features.{3 * i}", h, cout, cin, strides=[s, s], pads=[1, 1, 1, 1])
        n = b.bn(f"features.{3 * i + 1}", c, cout)
        h = b.n("Relu", f"features.{3 * i + 2}", n)
    return Built(b.model(11, h), b.samples())


@case("pos_op11_const_node_weight", "+", "Conv weight and bias as Constant nodes (old scripted/tf2onnx spelling), "
      "BN initializers, Conv-BN-Relu, opset 11")
def _p_const_weight():
    b = B("pos_op11_const_node_weight")
    x = b.image("input", (1, 3, 20, 20))
    wt = b.const("Constant_0", b.he(16, 3, 3, 3))
    bs = b.const("Constant_1", b.r.normal(0, 0.05, 16))
    c = b.n("Conv", "Conv_2", x, wt, bs, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    n = b.bn("BatchNormalization_3", c, 16)
    y = b.n("Relu", "Relu_4", n)
    return Built(b.model(11, y), b.samples())


@case("pos_op13_keras_eps1e3", "+", "keras2onnx-style, opset 13: Conv(bias)-BN(eps 1e-3, momentum 0.99)-Relu, "
      "Keras names")
def _p_keras():
    b = B("pos_op13_keras_eps1e3")
    x = b.image("input_1", (1, 3, 28, 28))
    c = b.conv("conv2d_1", x, 32, 3, bias=True, pads=[1, 1, 1, 1])
    n = b.bn("batch_normalization_1", c, 32, eps=1e-3, momentum=0.99,
             keys=tuple(f"batch_normalization_1/{k}:0" for k in ("gamma", "beta", "moving_mean", "moving_variance")))
    y = b.n("Relu", "activation_1", n)
    return Built(b.model(13, y), b.samples())


# ----------------------------------------------------------------------------- negatives


def _inits_as_inputs(name: str, fed: dict) -> Built:
    b = B(name)
    x = b.image("input.1", (1, 3, 16, 16))
    c = b.conv("Conv_0", x, 16, 3, bias=True, pads=[1, 1, 1, 1], wname="conv1.weight", bname="conv1.bias")
    n = b.bn("BatchNormalization_1", c, 16, keys=("bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var"))
    y = b.n("Relu", "Relu_2", n)
    model = b.model(9, y, ir=4, inits_as_inputs=True)
    samples = b.samples()
    return Built(model, samples, _changed_stats(b, samples, fed))


@case("neg_op9_inits_as_inputs", "-", "old exporter (opset 9, IR 4, keep_initializers_as_inputs): every initializer is also a graph input "
      "(overridable statistics), Conv(bias)-BN-Relu; reaction: fed changed BN statistics")
def _n_inits_inputs():
    return _inits_as_inputs("neg_op9_inits_as_inputs", {
        "weight": ["bn1.weight"], "bias": ["bn1.bias"], "mean": ["bn1.running_mean"], "var": ["bn1.running_var"]})


@case("neg_op9_inits_as_inputs_weight_fed", "-", "the same model; reaction: fed a changed Conv weight and bias "
      "(fine-tuned weights swapped in at run time; a fold or a bf16 copy must not bake the defaults in)")
def _n_inits_inputs_weight():
    return _inits_as_inputs("neg_op9_inits_as_inputs_weight_fed", {"weight": ["conv1.weight"], "bias": ["conv1.bias"]})


@case("neg_op15_stats_fed", "-", "AdaBN: running mean/var are graph inputs with no initializer (fed per domain), "
      "Conv-BN-Relu, opset 15; reaction: fed other statistics")
def _n_stats_fed():
    b = B("neg_op15_stats_fed")
    x = b.image("input", (1, 3, 16, 16))
    c = b.conv("conv", x, 16, 3, pads=[1, 1, 1, 1])
    gamma, beta, mean, var = b.stats(16)
    m = b.inp("bn.running_mean", (16,), lambda r: mean + r.normal(0, 0.1, 16))
    v = b.inp("bn.running_var", (16,), lambda r: var * r.uniform(0.8, 1.25, 16))
    n = b.n("BatchNormalization", "bn", c, b.w("bn.weight", gamma), b.w("bn.bias", beta), m, v, epsilon=1e-5)
    y = b.n("Relu", "relu", n)
    samples = b.samples()
    changed = _changed_stats(b, samples, {"mean": ["bn.running_mean"], "var": ["bn.running_var"]})
    return Built(b.model(15, y), samples, changed)


@case("neg_op14_training_extra_outputs", "-", "training_mode=1 with running_mean/running_var outputs (all graph "
      "outputs), after a Conv, batch 4, opset 14")
def _n_training():
    b = B("neg_op14_training_extra_outputs")
    x = b.image("input", (4, 3, 12, 12))
    c = b.conv("conv", x, 16, 3, pads=[1, 1, 1, 1])
    b.bn("bn", c, 16, training_mode=1, outputs=["bn", "bn.running_mean_out", "bn.running_var_out"])
    return Built(b.model(14, ["bn", "bn.running_mean_out", "bn.running_var_out"]), b.samples())


@case("neg_op15_training_y_only", "-", "training_mode=1 (batch statistics), running_mean/var outputs written but "
      "unused (ONNX requires 3 outputs in training), only Y feeds a Relu, batch 4, opset 15")
def _n_training_y():
    b = B("neg_op15_training_y_only")
    x = b.image("input", (4, 3, 12, 12))
    c = b.conv("conv", x, 16, 3, pads=[1, 1, 1, 1])
    b.bn("bn", c, 16, training_mode=1, outputs=["bn", "bn.running_mean_out", "bn.running_var_out"])
    y = b.n("Relu", "relu", "bn")
    return Built(b.model(15, y), b.samples())


@case("neg_conv_out_graph_output", "-", "Conv output is also a graph output (feature map for another head), "
      "Conv-BN-Relu, opset 13")
def _n_conv_output():
    b = B("neg_conv_out_graph_output")
    x = b.inp("x", (1, 16, 16, 16))
    c = b.conv("backbone.conv", x, 16, 16, pads=[1, 1, 1, 1])
    n = b.bn("backbone.bn", c, 16)
    y = b.n("Relu", "backbone.relu", n)
    return Built(b.model(13, [y, c]), b.samples())


@case("neg_conv_out_add", "-", "Conv output consumed by the BN and by an Add: y = Relu(BN(c)) + c, opset 17")
def _n_conv_add():
    b = B("neg_conv_out_add")
    x = b.inp("x", (1, 16, 16, 16))
    c = b.conv("/conv/Conv", x, 16, 16, pads=[1, 1, 1, 1])
    n = b.bn("/bn/BatchNormalization", c, 16)
    r = b.n("Relu", "/relu/Relu", n)
    y = b.n("Add", "/Add", r, c)
    return Built(b.model(17, y), b.samples())


@case("neg_conv_out_two_bns", "-", "one Conv output feeding two BNs with different statistics (two heads), "
      "both outputs, opset 15")
def _n_two_bns():
    b = B("neg_conv_out_two_bns")
    x = b.inp("x", (1, 16, 16, 16))
    c = b.conv("shared_conv", x, 16, 16, pads=[1, 1, 1, 1])
    y1 = b.n("Relu", "head_a.relu", b.bn("head_a.bn", c, 16))
    y2 = b.n("Relu", "head_b.relu", b.bn("head_b.bn", c, 16))
    return Built(b.model(15, [y1, y2]), b.samples())


@case("neg_bn_on_input", "-", "BN directly on the graph input (input normalization), then Conv-Relu, opset 15")
def _n_on_input():
    b = B("neg_bn_on_input")
    x = b.inp("input", (1, 3, 16, 16), lambda r: r.uniform(0, 1, (1, 3, 16, 16)))
    n = b.bn("bn_in", x, 3, stats=(b.r.uniform(0.8, 1.2, 3), b.r.normal(0, 0.1, 3), b.r.normal(0.45, 0.05, 3),
                                    b.r.uniform(0.05, 0.08, 3)))
    c = b.conv("conv", n, 16, 3, pads=[1, 1, 1, 1])
    y = b.n("Relu", "relu", c)
    return Built(b.model(15, y), b.samples())


@case("neg_bn_after_add", "-", "pre-activation ResNetV2: Conv + identity Add, then BN-Relu-Conv (BN after an Add), "
      "opset 13")
def _n_after_add():
    b = B("neg_bn_after_add")
    x = b.inp("x", (1, 16, 16, 16))
    c = b.conv("block1.conv2", x, 16, 16, pads=[1, 1, 1, 1])
    a = b.n("Add", "block1.add", c, x)
    n = b.bn("block2.preact_bn", a, 16)
    r = b.n("Relu", "block2.preact_relu", n)
    y = b.conv("block2.conv1", r, 16, 16, pads=[1, 1, 1, 1])
    return Built(b.model(13, y), b.samples())


@case("neg_bn_after_matmul", "-", "BatchNorm1d after a Linear (MatMul+Add, features (8,64)), Relu, MatMul, opset 13")
def _n_after_matmul():
    b = B("neg_bn_after_matmul")
    x = b.inp("features", (8, 64))
    h = b.n("MatMul", "fc1.MatMul", x, b.w("fc1.weight_t", b.r.normal(0, 1 / 8, (64, 32))))
    h = b.n("Add", "fc1.Add", h, b.w("fc1.bias", b.r.normal(0, 0.05, 32)))
    n = b.bn("bn1", h, 32)
    r = b.n("Relu", "relu1", n)
    y = b.n("MatMul", "fc2.MatMul", r, b.w("fc2.weight_t", b.r.normal(0, 1 / np.sqrt(32), (32, 10))))
    return Built(b.model(13, y), b.samples())


@case("neg_shared_weight_two_bns", "-", "Siamese: one weight initializer shared by two Convs, each followed by its own "
      "BN with different statistics, opset 13")
def _n_shared():
    b = B("neg_shared_weight_two_bns")
    xa = b.inp("left", (1, 8, 16, 16))
    xb = b.inp("right", (1, 8, 16, 16))
    w = b.w("tower.conv.weight", b.he(16, 8, 3, 3))
    ca = b.n("Conv", "left.conv", xa, w, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    cb = b.n("Conv", "right.conv", xb, w, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    ya = b.n("Relu", "left.relu", b.bn("left.bn", ca, 16))
    yb = b.n("Relu", "right.relu", b.bn("right.bn", cb, 16))
    return Built(b.model(13, [ya, yb]), b.samples())


@case("neg_conv_weight_input", "-", "Conv weight is a graph input (hypernetwork / fed filter), Conv-BN-Relu, opset 13")
def _n_weight_input():
    b = B("neg_conv_weight_input")
    x = b.inp("x", (1, 8, 16, 16))
    w = b.inp("conv.weight", (16, 8, 3, 3), lambda r: r.normal(0, np.sqrt(2 / 72), (16, 8, 3, 3)))
    c = b.n("Conv", "conv", x, w, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    y = b.n("Relu", "relu", b.bn("bn", c, 16))
    return Built(b.model(13, y), b.samples())


@case("neg_convtranspose_bn", "-", "U-Net up path: ConvTranspose (16->8, k4 s2 p1; output channels on W's axis 1) "
      "-BN-Relu, opset 13: a Conv-style fold would scale the wrong axis")
def _n_convtranspose():
    b = B("neg_convtranspose_bn")
    x = b.inp("x", (1, 16, 8, 8))
    w = b.w("up.weight", b.r.normal(0, np.sqrt(2 / (16 * 4)), (16, 8, 4, 4)))
    c = b.n("ConvTranspose", "up", x, w, kernel_shape=[4, 4], strides=[2, 2], pads=[1, 1, 1, 1])
    y = b.n("Relu", "up_relu", b.bn("up_bn", c, 8))
    return Built(b.model(13, y), b.samples())


@case("neg_op7_spatial0", "-", "opset 7 (IR 4): Conv-BN(spatial=0: per-activation statistics of shape CxHxW)-Relu; "
      "no per-channel fold exists")
def _n_spatial0():
    b = B("neg_op7_spatial0")
    x = b.image("data", (1, 3, 8, 8))
    c = b.conv("conv1", x, 8, 3, pads=[1, 1, 1, 1])
    n = b.bn("conv1_bn", c, 8, stats=b.stats(8, shape=(8, 8, 8)), spatial=0)
    y = b.n("Relu", "conv1_relu", n)
    return Built(b.model(7, y, ir=4), b.samples())


# ============================================================================= measuring


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:160] if text else ''}"


def _bn_types(model: onnx.ModelProto, types: dict) -> tuple:
    fp32, low = [], []
    for n in model.graph.node:
        if n.op_type != "BatchNormalization":
            continue
        ts = [types.get(t) for t in list(n.input) + list(n.output) if t]
        if TensorProto.FLOAT in ts:
            fp32.append(n.name)
        if BF16 in ts or FP16 in ts:
            low.append(n.name)
    return fp32, low


def _fp16_stand_in(model: onnx.ModelProto) -> onnx.ModelProto:
    """The same graph with every bfloat16 retyped to float16 (values converted)."""
    m = copy.deepcopy(model)
    g = m.graph

    def conv_tensor(t):
        if t.data_type == BF16:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32).astype(np.float16), t.name))

    for t in g.initializer:
        conv_tensor(t)
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        if vi.type.tensor_type.elem_type == BF16:
            vi.type.tensor_type.elem_type = FP16
    for n in g.node:
        for a in n.attribute:
            if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i == BF16:
                a.i = FP16
            if a.type == onnx.AttributeProto.TENSOR:
                conv_tensor(a.t)
    return m


def _cpu_session(data):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def _loads(path: Path, conv: onnx.ModelProto, types: dict, low_bn: list) -> tuple:
    """(loads, cpu column, detail)."""
    try:
        _cpu_session(str(path))
        return True, "yes", ""
    except Exception as e:  # noqa: BLE001
        first = _first_line(e)
    by_name = {n.name: n for n in conv.graph.node}
    culprit = None
    if "Could not find an implementation for" in first and "node with name '" in first:
        culprit = by_name.get(first.split("node with name '", 1)[1].split("'", 1)[0])
    low_node = culprit is not None and any(types.get(t) == BF16 for t in list(culprit.input) + list(culprit.output) if t)
    if not low_node:
        return False, "NO", first
    cpu = f"no bf16 {culprit.op_type}"
    if low_bn:
        return False, cpu, f"bfloat16 BatchNormalization {low_bn}: no kernel on any provider"
    try:
        _cpu_session(_fp16_stand_in(conv).SerializeToString())
    except Exception as e:  # noqa: BLE001
        return False, cpu, "fp16 stand-in: " + _first_line(e)
    return True, cpu, ""


def _run_mapped(model: onnx.ModelProto, feeds_list: list) -> list:
    """judge.run, but inputs renamed by the emulator (``name__emu_in``) are fed under their original names, and
    overridable initializers (IR >= 4 initializers listed as graph inputs) may be fed."""
    sess = judge.session(model)
    names = {i.name for i in sess.get_inputs()} | {i.name for i in sess.get_overridable_initializers()}
    outs = [o.name for o in sess.get_outputs()]
    results = []
    for feeds in feeds_list:
        mapped = {}
        for k, v in feeds.items():
            if k in names:
                mapped[k] = np.asarray(v, np.float32)
            elif k + "__emu_in" in names:
                mapped[k + "__emu_in"] = np.asarray(v, np.float32)
            else:
                raise KeyError(f"input {k!r} is not an input of the converted model")
        values = sess.run(None, mapped)
        results.append({n: np.asarray(v, dtype=np.float64) for n, v in zip(outs, values)})
    return results


def _low_init_inputs_as_constants(model: onnx.ModelProto) -> tuple:
    """Once (written blind) judge.emulate_converted renamed a 16-bit graph input that is also an initializer
    into a collision, and such inputs were emulated as plain initializers here. The judge now feeds the
    initializer's default through the input's rounding pair, so a fed value reaches the graph as a caller's
    16-bit feed would: the model is emulated as it is (no input dropped)."""
    return model, []


def _boundary(model: onnx.ModelProto) -> int:
    init = {t.name for t in model.graph.initializer}
    ins = [i for i in model.graph.input if i.name not in init and i.type.tensor_type.elem_type == TensorProto.FLOAT]
    outs = [o for o in model.graph.output if o.type.tensor_type.elem_type == TensorProto.FLOAT]
    return len(ins) + len(outs)


def measure(c: Case, work: Path | None = None) -> dict:
    """Everything the table shows for one case; never raises."""
    row = {"case": c.name, "kind": c.kind, "what": c.what, "rtol": c.rtol, "held": False}
    own_tmp = None
    if work is None:
        own_tmp = tempfile.TemporaryDirectory(prefix="blind_bnfold_")
        work = Path(own_tmp.name)
    try:
        try:
            built = c.make()
        except Exception as e:  # noqa: BLE001
            row["error"] = "case build: " + _first_line(e)
            return row
        model = built.model
        row["opset_in"] = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
        row["bn_in"] = sum(n.op_type == "BatchNormalization" for n in model.graph.node)
        row["boundary"] = _boundary(model)
        src, dst = work / f"{c.name}.onnx", work / f"{c.name}.bf16.onnx"
        onnx.save(model, str(src))
        ref = judge.run(model, built.samples)
        t0 = time.perf_counter()
        try:
            report = ampconv.convert(str(src), str(dst), Config(dtype="bf16", level="O2", overwrite=True))
        except Exception as e:  # noqa: BLE001 - a failed conversion is a result
            row["error"] = "convert: " + _first_line(e)
            return row
        row["convert_s"] = time.perf_counter() - t0
        conv = onnx.load(str(dst))
        row["opset_out"] = next((o.version for o in conv.opset_import if o.domain in ("", "ai.onnx")), None)
        hard = []
        try:
            hard = [n["name"] for n in report.nodes if n.get("rule") == "hard-gpu-kernel"
                    and n.get("op_type") not in ("BatchNormalization", "Conv", "ConvTranspose")]
        except Exception:  # noqa: BLE001 - the report's shape is not the point here
            pass
        row["allowance"] = 2 * len(hard)
        row["budget"] = row["boundary"] + row["allowance"]
        types = judge.tensor_types(conv)
        fp32_bn, low_bn = _bn_types(conv, types)
        row["fp32_bn"], row["low_bn"] = len(fp32_bn), len(low_bn)
        row["bn_out"] = sum(n.op_type == "BatchNormalization" for n in conv.graph.node)
        row["casts"] = sum(n.op_type == "Cast" for n in conv.graph.node)
        try:
            fp32 = judge.float32_nodes(conv)
            row["fp32_nodes"] = len(fp32)
            row["fp32_ops"] = sorted({n.op_type for n in conv.graph.node if n.name in set(fp32)})
        except Exception as e:  # noqa: BLE001
            row["fp32_nodes"] = None
            row.setdefault("notes", []).append("float32_nodes: " + _first_line(e))
        row["loads"], row["cpu"], load_detail = _loads(dst, conv, types, low_bn)
        if load_detail:
            row.setdefault("notes", []).append("load: " + load_detail)
        tol = judge.Tolerance(rtol=c.rtol, atol=1e-5)
        try:
            emu_src, dropped = _low_init_inputs_as_constants(conv)
            if dropped:
                row.setdefault("notes", []).append(
                    f"16-bit initializers also listed as graph inputs {dropped}: emulated as constants")
            emu = judge.emulate_converted(emu_src)
            acc = judge.check_accuracy(ref, _run_mapped(emu, built.samples), tol)
            row["accurate"], row["accuracy"] = acc.ok, str(acc)
            row["rel_err"] = _worst(ref, _run_mapped(emu, built.samples))
        except Exception as e:  # noqa: BLE001
            emu = None
            row["accurate"], row["accuracy"] = False, "emulation: " + _first_line(e)
        if built.changed is not None:
            try:
                if emu is None:
                    raise RuntimeError("no emulation")
                ref2 = judge.run(model, built.changed)
                got2 = _run_mapped(emu, built.changed)
                r2 = judge.check_accuracy(ref2, got2, tol)
                moved = _worst(ref, ref2)
                row["reaction"], row["reaction_detail"] = r2.ok, f"{r2} (float32 itself moved {moved:.2f} x max)"
            except Exception as e:  # noqa: BLE001
                row["reaction"], row["reaction_detail"] = False, _first_line(e)
        if c.kind == "+":
            row["held"] = bool(row["loads"] and row["accurate"] and row["fp32_bn"] == 0 and row["low_bn"] == 0
                               and row["casts"] <= row["budget"])
        else:
            row["held"] = bool(row["loads"] and row["accurate"] and row.get("reaction", True))
        return row
    except Exception as e:  # noqa: BLE001 - one case never stops the run
        row["error"] = "measure: " + _first_line(e)
        row["held"] = False
        return row
    finally:
        if own_tmp is not None:
            own_tmp.cleanup()


def _worst(ref: list, got: list) -> float:
    """max over outputs of max|got - ref| / max|ref| (NaN/Inf -> inf)."""
    worst = 0.0
    for name in ref[0]:
        a = np.concatenate([r[name].ravel() for r in ref])
        b = np.concatenate([g[name].ravel() for g in got])
        if not np.all(np.isfinite(b)):
            return float("inf")
        worst = max(worst, float(np.max(np.abs(a - b))) / max(float(np.max(np.abs(a))), 1e-12))
    return worst


# ============================================================================= table


LEGEND = """Columns: *kind* ``+`` foldable (positive), ``-`` must not be folded wrongly (negative); *opset* in -> out;
*loads*: the converted file builds a CPU session, or fails there only for a missing bfloat16 kernel of a bf16
node while no BatchNormalization is bf16 and the fp16 stand-in builds (*cpu*: what the CPU session said of the
file as written); *err*: max|emulated bf16 - float32| / max|float32| over all outputs (bound: rtol, 0.05 unless
noted); *BN in/out*: BatchNormalization nodes before/after; *fp32 BN* / *bf16 BN*: after, computing in
float32 / in a 16-bit type; *casts (budget)*: Cast nodes after, and the most a positive may have (float graph
inputs + outputs, ``+N`` for nodes ampconv keeps float32 as ``hard-gpu-kernel``); *fp32 nodes*:
judge.float32_nodes (their op types); *reaction*: statistics fed at run time still act as in float32.
*held*: positives: loads, accurate, no float32 (or 16-bit) BN, casts <= budget; negatives: loads, accurate,
reaction holds."""


def _fmt(r: dict) -> str:
    if "error" in r and "casts" not in r:
        return "| " + " | ".join([r["case"], r["kind"], "-", "-", "-", "-", "-", "-", "-", "-", "-", "-",
                                  r["error"].replace("|", "/"), "no"]) + " |"
    yn = {True: "yes", False: "**NO**", None: "-"}
    err = r.get("rel_err")
    err_s = "-" if err is None else f"{err:.2e}"
    if r["rtol"] != RTOL:
        err_s += f" (rtol {r['rtol']:g})"
    if r.get("accurate") is False:
        err_s += " FAIL"
    budget = f"{r['boundary']}" + (f"+{r['allowance']}" if r.get("allowance") else "")
    ops = ",".join(r.get("fp32_ops") or [])
    reaction = {True: "yes", False: "**NO**"}.get(r.get("reaction"), "-")
    cells = [r["case"], r["kind"], f"{r.get('opset_in')} -> {r.get('opset_out')}", yn.get(r.get("loads")),
             r.get("cpu", "-"), err_s, f"{r.get('bn_in')} -> {r.get('bn_out')}", str(r.get("fp32_bn")),
             str(r.get("low_bn")), f"{r.get('casts')} ({budget})",
             f"{r.get('fp32_nodes')}" + (f" ({ops})" if ops else ""), reaction,
             "; ".join(r.get("notes", [])).replace("|", "/") or "-", "**yes**" if r.get("held") else "no"]
    return "| " + " | ".join(cells) + " |"


def table(rows: list) -> str:
    head = ["case", "kind", "opset", "loads", "cpu", "err", "BN in -> out", "fp32 BN", "bf16 BN", "casts (budget)",
            "fp32 nodes", "reaction", "notes", "held"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += [_fmt(r) for r in rows]
    out = "\n".join(lines) + "\n\nCases:\n\n" + "\n".join(f"- {r['case']} ({r['kind']}): {r['what']}" for r in rows)
    notes = [f"- {r['case']}: accuracy: {r['accuracy']}" for r in rows if r.get("accurate") is False and "accuracy" in r]
    notes += [f"- {r['case']}: reaction: {r['reaction_detail']}" for r in rows if "reaction_detail" in r]
    notes += [f"- {r['case']}: {r['error']}" for r in rows if r.get("error")]
    notes += [f"- {c.name}: rtol {c.rtol:g}: {c.rtol_why}" for c in CASES if c.rtol_why and c.name in {r['case'] for r in rows}]
    if notes:
        out += "\n\nNotes:\n\n" + "\n".join(notes)
    pos = [r for r in rows if r["kind"] == "+"]
    neg = [r for r in rows if r["kind"] == "-"]
    tot = lambda rs, k: sum(1 for r in rs if r.get(k))  # noqa: E731
    out += "\n\nTotals:\n\n"
    out += (f"- positives: held {tot(pos, 'held')}/{len(pos)} (loads {tot(pos, 'loads')}, accurate "
            f"{tot(pos, 'accurate')}, no float32 BN {sum(1 for r in pos if r.get('fp32_bn') == 0)}, casts within budget "
            f"{sum(1 for r in pos if r.get('casts') is not None and r['casts'] <= r['budget'])})\n")
    out += (f"- negatives: held {tot(neg, 'held')}/{len(neg)} (loads {tot(neg, 'loads')}, accurate "
            f"{tot(neg, 'accurate')}, reaction {tot(neg, 'reaction')}/{sum(1 for r in neg if 'reaction' in r)})\n")
    out += f"- Cast nodes in all converted files: {sum(r.get('casts') or 0 for r in rows)}; float32 BN: " \
           f"{sum(r.get('fp32_bn') or 0 for r in rows)}\n"
    out += f"\n**held: {tot(rows, 'held')}/{len(rows)}**\n"
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the markdown table here too")
    ap.add_argument("--only", help="comma-separated case names")
    ap.add_argument("--label", help="a line written under the first (e.g. which commit the imported ampconv is)")
    args = ap.parse_args(argv)
    cases = CASES
    if args.only:
        wanted = [w for w in args.only.split(",") if w]
        unknown = sorted(set(wanted) - {c.name for c in CASES})
        if unknown:
            print(f"unknown case(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        cases = [c for c in CASES if c.name in set(wanted)]
    head = [f"ampconv: {ampconv.__file__}", f"onnxruntime {ort.__version__}, onnx {onnx.__version__}",
            "config: Config(dtype='bf16', level='O2', overwrite=True), defaults otherwise; accuracy by judge.py's "
            "emulation on onnxruntime's CPUExecutionProvider"]
    if args.label:
        head.insert(1, args.label)
    print("\n".join(head), flush=True)
    t0 = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="blind_bnfold_") as tmp:
        for c in cases:
            rows.append(measure(c, Path(tmp)))
    took = f"({len(rows)} cases: {sum(c.kind == '+' for c in cases)} positive, {sum(c.kind == '-' for c in cases)} " \
           f"negative, in {time.perf_counter() - t0:.1f} s)"
    body = table(rows)
    print(body)
    print(took)
    if args.out:
        Path(args.out).write_text("\n".join(head) + "\n\n" + LEGEND + "\n\n" + body + "\n" + took + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
