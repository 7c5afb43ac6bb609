"""Blind test set: hazards of fp16 conversion, each spelled in an unusual way.

Written without reading ampconv's planner: every case is a small float32 model (opset 17,
IR 8, every node named), its own realistic samples (8 per case, seeded) and ``needed``, the
set of nodes that must compute in float32 on those samples, worked out by hand under the
judge's "true fp16" semantics (``judge.py``): a node in fp16 computes in float32 internally
but stores its outputs rounded to fp16 (overflow -> inf, values under 2.98e-8 -> 0), and a
node in fp16 whose input comes from a float32 node sees that input rounded to fp16. So a
node is needed when its stored output cannot be fp16 without hurting the outputs, or when
it consumes such a value before it is back in range. ``why`` is the one-line reasoning.

Cases with an empty ``needed`` are traps: a constant or an intermediate looks alarming
(1e-6 layer scale, 1e-9 dead-channel bias, Exp overflowing inside Mish), but fp16 gives an
accurate output there.

fp16 figures used below: max 65504; exp(x) overflows for x > 11.09; x*x overflows for
|x| > 255.9; smallest normal 6.10e-5, smallest subnormal 5.96e-8; relative step 2^-11.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from judge import Tolerance

N_SAMPLES = 8


# ----------------------------------------------------------------------------- model builder


class Graph:
    """A tiny builder: every node named, tensors named after the node that makes them."""

    producer = "blind-spellings"

    def __init__(self, name: str):
        self.name = name
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []

    def inp(self, name: str, shape) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def w(self, name: str, values, dtype=np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(values, dtype=dtype), name))
        return name

    def ints(self, name: str, values) -> str:
        return self.w(name, values, np.int64)

    def n(self, op: str, name: str, *inputs, outputs=None, **attrs):
        outs = outputs or [name]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs if outputs else name

    def out(self, *names: str) -> None:
        self.outputs += [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in names]

    def model(self, opset: int = 17) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name=self.producer)
        model.ir_version = 8
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        model.graph.ClearField("output")
        model.graph.output.extend(inferred.graph.output)
        onnx.checker.check_model(model, full_check=True)
        return model


@dataclass(frozen=True)
class Case:
    name: str
    klass: str
    needed: frozenset
    why: str
    make: Callable
    tolerance: Tolerance = Tolerance()

    def build(self) -> onnx.ModelProto:
        model = onnx.ModelProto()
        model.CopyFrom(_made(self.name)[0])
        return model

    def samples(self, seed: int = 0) -> list:
        return _made(self.name)[1](seed)

    def max_abs_input(self, seed: int = 0) -> dict:
        found = {}
        for sample in self.samples(seed):
            for k, v in sample.items():
                found[k] = max(found.get(k, 0.0), float(np.max(np.abs(v))))
        return found

    @property
    def hazard(self) -> bool:
        return bool(self.needed)


CASES: list = []


def case(name: str, klass: str, needed, why: str, tolerance: Tolerance = Tolerance()):
    def register(make):
        CASES.append(Case(name, klass, frozenset(needed), why, make, tolerance))
        return make

    return register


@lru_cache(maxsize=None)
def _made(name: str):
    return next(c for c in CASES if c.name == name).make()


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


def _rng(name: str, *more) -> np.random.Generator:
    return np.random.default_rng([zlib.crc32(name.encode()), *more])


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _sampler(name: str, one: Callable) -> Callable:
    """samples(seed) -> N_SAMPLES dicts, each drawn by ``one(rng, index)``."""

    def samples(seed: int = 0) -> list:
        rng = _rng(name, 1000 + seed)
        return [{k: _f32(v) for k, v in one(rng, i).items()} for i in range(N_SAMPLES)]

    return samples


def _pinv_inputs(logits: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Features h with h @ w + b == logits (w has more rows than columns): a head's input for chosen logits."""
    return (logits - b) @ np.linalg.pinv(w.astype(np.float64))


def _orthogonal(rng: np.random.Generator, dim: int) -> np.ndarray:
    """A random orthogonal matrix: a projection that keeps the scale of what it maps."""
    q, r = np.linalg.qr(rng.normal(0, 1, (dim, dim)))
    return q * np.sign(np.diag(r))


def _layer_norm_tail(g: Graph, x: str, gamma, beta, eps: float, prefix: str = "") -> str:
    """Sub, square, mean, eps, sqrt, divide, scale, shift over the last axis: returns the shifted tensor."""
    mu = g.n("ReduceMean", prefix + "mean", x, axes=[-1], keepdims=1)
    d = g.n("Sub", prefix + "centered", x, mu)
    sq = g.n("Mul", prefix + "sq", d, d)
    var = g.n("ReduceMean", prefix + "var", sq, axes=[-1], keepdims=1)
    ve = g.n("Add", prefix + "var_eps", var, g.w(prefix + "eps", eps))
    sd = g.n("Sqrt", prefix + "std", ve)
    xn = g.n("Div", prefix + "normed", d, sd)
    sc = g.n("Mul", prefix + "scaled", xn, g.w(prefix + "gamma", gamma))
    return g.n("Add", prefix + "shifted", sc, g.w(prefix + "beta", beta))


# ============================================================================= A. norms across a layout change


@case("ln_nhwc_transpose", "norm-across-layout", {"sq", "var", "var_eps", "std"},
      "patchify stem (Conv 4x4/4) on 0..255 pixels, then NCHW->NHWC and LayerNorm over C: deviations from the channel mean ~500 (up to ~2e3), so (x-mu)^2 and its mean overflow, eps-add and sqrt consume them; std fits")
def _ln_nhwc_transpose():
    name = "ln_nhwc_transpose"
    r = _rng(name)
    g = Graph(name)
    g.inp("image", [1, 3, 32, 32])
    stem = g.n("Conv", "stem", "image", g.w("stem_w", r.normal(0, 0.6, (16, 3, 4, 4))), g.w("stem_b", r.normal(0, 1, 16)),
               strides=[4, 4])
    t = g.n("Transpose", "to_nhwc", stem, perm=[0, 2, 3, 1])
    s = _layer_norm_tail(g, t, r.uniform(0.8, 1.2, 16), r.normal(0, 0.1, 16), 1e-6)
    back = g.n("Transpose", "to_nchw", s, perm=[0, 3, 1, 2])
    g.n("Conv", "pw_conv", back, g.w("pw_w", r.normal(0, 0.25, (16, 16, 1, 1))), g.w("pw_b", r.normal(0, 0.1, 16)))
    g.out("pw_conv")

    return g.model(), _sampler(name, lambda rng, i: {"image": _photo(rng, (1, 3, 32, 32))})


@case("gn_reshape_groups", "norm-across-layout", {"sq_pow", "var", "var_eps", "std"},
      "UNet first Conv on 0..255 pixels, then GroupNorm as Reshape[B,8,-1]+ReduceMean: deviations from the group mean ~400 (up to ~1.9e3), so Pow(d,2) and its mean overflow; eps-add and sqrt consume them; std fits")
def _gn_reshape_groups():
    name = "gn_reshape_groups"
    r = _rng(name)
    g = Graph(name)
    g.inp("image", [2, 3, 16, 16])
    x = g.n("Conv", "conv_in", "image", g.w("conv_in_w", r.normal(0, 0.8, (32, 3, 3, 3))), g.w("conv_in_b", r.normal(0, 1, 32)),
            pads=[1, 1, 1, 1])
    grouped = g.n("Reshape", "to_groups", x, g.ints("group_shape", [0, 8, -1]))
    mu = g.n("ReduceMean", "mean", grouped, axes=[2], keepdims=1)
    d = g.n("Sub", "centered", grouped, mu)
    sq = g.n("Pow", "sq_pow", d, g.w("two", 2.0))
    var = g.n("ReduceMean", "var", sq, axes=[2], keepdims=1)
    ve = g.n("Add", "var_eps", var, g.w("eps", 1e-5))
    sd = g.n("Sqrt", "std", ve)
    xn = g.n("Div", "normed", d, sd)
    shape = g.n("Shape", "x_shape", x)
    back = g.n("Reshape", "from_groups", xn, shape)
    sc = g.n("Mul", "scaled", back, g.w("gamma", r.uniform(0.8, 1.2, (32, 1, 1))))
    sh = g.n("Add", "shifted", sc, g.w("beta", r.normal(0, 0.1, (32, 1, 1))))
    sig = g.n("Sigmoid", "silu_gate", sh)
    g.n("Mul", "silu", sh, sig)
    g.out("silu")

    return g.model(), _sampler(name, lambda rng, i: {"image": _photo(rng, (2, 3, 16, 16))})


@case("rms_transpose_btc", "norm-across-layout", {"sq", "mean_sq", "mean_sq_eps", "rms"},
      "speech front end Conv1d(k=16,s=16) on int16-scale audio -> [B,C,T] transposed to [B,T,C], RMSNorm with Reciprocal: features ~250 (up to ~2.7e3), so x*x and its mean overflow; eps-add and sqrt consume them; rms fits")
def _rms_transpose_btc():
    name = "rms_transpose_btc"
    r = _rng(name)
    g = Graph(name)
    g.inp("wave", [1, 1, 384])
    feats = g.n("Conv", "frontend", "wave", g.w("frontend_w", r.normal(0, 0.05, (32, 1, 16))), strides=[16])
    t = g.n("Transpose", "to_btc", feats, perm=[0, 2, 1])
    sq = g.n("Mul", "sq", t, t)
    ms = g.n("ReduceMean", "mean_sq", sq, axes=[-1], keepdims=1)
    mse = g.n("Add", "mean_sq_eps", ms, g.w("eps", 1e-6))
    rt = g.n("Sqrt", "rms", mse)
    inv = g.n("Reciprocal", "inv_rms", rt)
    xn = g.n("Mul", "normed", t, inv)
    sc = g.n("Mul", "scaled", xn, g.w("gamma", r.uniform(0.5, 1.5, 32)))
    g.n("MatMul", "proj", sc, g.w("proj_w", r.normal(0, 0.18, (32, 16))))
    g.out("proj")

    def one(rng, i):
        t = np.arange(384) / 16000.0
        voiced = sum(np.sin(2 * np.pi * f * t + rng.uniform(0, 6)) / k for k, f in enumerate(rng.uniform(120, 220) * np.arange(1, 6), 1))
        return {"wave": np.round(rng.uniform(3000, 9000) * voiced / 2.3 + rng.normal(0, 200, 384)).reshape(1, 1, 384)}

    return g.model(), _sampler(name, one)


@case("ln_flatten_sumsquare", "norm-across-layout", {"sum_sq", "var"},
      "Conv then LayerNorm over C*H*W after Reshape[B,-1], variance as ReduceSumSquare/N: each square (std ~15, max ~80) fits but the sum over 1024 (~2e5..4e5) overflows; Div by N consumes it, var ~200..360 fits")
def _ln_flatten_sumsquare():
    name = "ln_flatten_sumsquare"
    r = _rng(name)
    g = Graph(name)
    g.inp("feats", [2, 8, 8, 8])
    x = g.n("Conv", "conv", "feats", g.w("conv_w", r.normal(0, 0.3, (16, 8, 3, 3))), g.w("conv_b", r.normal(0, 1, 16)),
            pads=[1, 1, 1, 1])
    fl = g.n("Reshape", "flatten", x, g.ints("flat_shape", [0, -1]))
    mu = g.n("ReduceMean", "mean", fl, axes=[1], keepdims=1)
    d = g.n("Sub", "centered", fl, mu)
    ss = g.n("ReduceSumSquare", "sum_sq", d, axes=[1], keepdims=1)
    var = g.n("Div", "var", ss, g.w("count", 1024.0))
    ve = g.n("Add", "var_eps", var, g.w("eps", 1e-5))
    sd = g.n("Sqrt", "std", ve)
    xn = g.n("Div", "normed", d, sd)
    back = g.n("Reshape", "unflatten", xn, g.n("Shape", "x_shape", x))
    sc = g.n("Mul", "scaled", back, g.w("gamma", r.uniform(0.8, 1.2, (16, 1, 1))))
    sh = g.n("Add", "shifted", sc, g.w("beta", r.normal(0, 0.1, (16, 1, 1))))
    g.n("Relu", "relu", sh)
    g.out("relu")

    def one(rng, i):
        return {"feats": np.maximum(rng.normal(0, 1, (2, 8, 8, 8)) * rng.uniform(8, 12), 0)}

    return g.model(), _sampler(name, one)


@case("ln_one_pass_ex2", "norm-across-layout", {"sq", "mean_sq", "var", "var_eps", "std"},
      "projection then one-pass LayerNorm var = E[x^2]-E[x]^2 on hidden states ~400: x*x, E[x^2] (~1e5..2.5e5), the difference and eps-add overflow, sqrt consumes; mean^2 (<4e4) and std fit")
def _ln_one_pass_ex2():
    name = "ln_one_pass_ex2"
    r = _rng(name)
    w_in = _orthogonal(r, 64)
    g = Graph(name)
    g.inp("x", [1, 16, 64])
    h = g.n("MatMul", "in_proj", "x", g.w("in_w", w_in))
    mu = g.n("ReduceMean", "mean", h, axes=[-1], keepdims=1)
    sq = g.n("Mul", "sq", h, h)
    ex2 = g.n("ReduceMean", "mean_sq", sq, axes=[-1], keepdims=1)
    mu2 = g.n("Mul", "mean_squared", mu, mu)
    var = g.n("Sub", "var", ex2, mu2)
    ve = g.n("Add", "var_eps", var, g.w("eps", 1e-5))
    sd = g.n("Sqrt", "std", ve)
    d = g.n("Sub", "centered", h, mu)
    xn = g.n("Div", "normed", d, sd)
    sc = g.n("Mul", "scaled", xn, g.w("gamma", r.uniform(0.8, 1.2, 64)))
    sh = g.n("Add", "shifted", sc, g.w("beta", r.normal(0, 0.1, 64)))
    g.n("MatMul", "proj", sh, g.w("proj_w", r.normal(0, 0.125, (64, 32))))
    g.out("proj")

    def one(rng, i):
        return {"x": (rng.normal(0, 1, (1, 16, 64)) * 400 + rng.normal(0, 30, (1, 16, 1))) @ w_in.T}

    return g.model(), _sampler(name, one)


# ============================================================================= B. GroupNorm through InstanceNormalization


@case("gn_instnorm_adc_offset", "groupnorm-via-instancenorm", {"to_instances", "instnorm"},
      "GroupNorm as Reshape[1,B*G,-1]+InstanceNormalization on raw 16-bit ADC counts 32768+-100: fp16's step at 32768 is 32, so rounding the input (Reshape or the norm's input) errs up to 0.16 std; both must see float32")
def _gn_instnorm_adc_offset():
    name = "gn_instnorm_adc_offset"
    r = _rng(name)
    g = Graph(name)
    g.inp("adc", [2, 16, 64])
    inst = g.n("Reshape", "to_instances", "adc", g.ints("inst_shape", [1, 8, -1]))
    nrm = g.n("InstanceNormalization", "instnorm", inst, g.w("inst_scale", np.ones(8)), g.w("inst_bias", np.zeros(8)),
              epsilon=1e-5)
    back = g.n("Reshape", "from_instances", nrm, g.ints("adc_shape", [2, 16, 64]))
    sc = g.n("Mul", "scaled", back, g.w("gamma", r.uniform(0.8, 1.2, (16, 1))))
    sh = g.n("Add", "shifted", sc, g.w("beta", r.normal(0, 0.1, (16, 1))))
    g.n("Conv", "conv1d", sh, g.w("conv_w", r.normal(0, 0.15, (8, 16, 3))), g.w("conv_b", r.normal(0, 0.1, 8)),
        pads=[1, 1])
    g.out("conv1d")

    def one(rng, i):
        t = np.arange(64) / 64.0
        wave = 60 * np.sin(2 * np.pi * rng.uniform(1, 4, (2, 16, 1)) * t + rng.uniform(0, 6, (2, 16, 1)))
        return {"adc": 32768 + rng.normal(0, 10, (2, 16, 1)) + wave + rng.normal(0, 40, (2, 16, 64))}

    return g.model(), _sampler(name, one)


@case("gn_instnorm_unet", "groupnorm-via-instancenorm", set(),
      "trap: Conv then GroupNorm via InstanceNormalization on UNet features ~50: fp16 stores them to 0.05% and the norm's statistics are computed inside the node; nothing needs float32")
def _gn_instnorm_unet():
    name = "gn_instnorm_unet"
    r = _rng(name)
    g = Graph(name)
    g.inp("feats", [1, 16, 8, 8])
    x = g.n("Conv", "conv_in", "feats", g.w("conv_in_w", r.normal(0, 0.3, (16, 16, 3, 3))), g.w("conv_in_b", r.normal(0, 5, 16)),
            pads=[1, 1, 1, 1])
    inst = g.n("Reshape", "to_instances", x, g.ints("inst_shape", [1, 4, -1]))
    nrm = g.n("InstanceNormalization", "instnorm", inst, g.w("inst_scale", np.ones(4)), g.w("inst_bias", np.zeros(4)),
              epsilon=1e-5)
    back = g.n("Reshape", "from_instances", nrm, g.n("Shape", "x_shape", x))
    sc = g.n("Mul", "scaled", back, g.w("gamma", r.uniform(0.8, 1.2, (16, 1, 1))))
    sh = g.n("Add", "shifted", sc, g.w("beta", r.normal(0, 0.1, (16, 1, 1))))
    sig = g.n("Sigmoid", "silu_gate", sh)
    act = g.n("Mul", "silu", sh, sig)
    g.n("Conv", "conv", act, g.w("conv_w", r.normal(0, 0.08, (16, 16, 3, 3))), g.w("conv_b", r.normal(0, 0.1, 16)),
        pads=[1, 1, 1, 1])
    g.out("conv")

    def one(rng, i):
        return {"feats": rng.normal(0, 1, (1, 16, 8, 8)) * 5 + rng.normal(0, 2, (1, 16, 1, 1))}

    return g.model(), _sampler(name, one)


# ============================================================================= C. means as Gemm / MatMul


@case("ln_gemm_alpha_mean", "mean-as-gemm-matmul", {"sq", "var_gemm", "var_eps", "std"},
      "Gemm projection then LayerNorm whose means are Gemm(h, ones, alpha=1/64) on hidden states ~600: the squares (up to ~1e7) and their Gemm mean (~3.6e5) overflow; eps-add and sqrt consume; std fits")
def _ln_gemm_alpha_mean():
    name = "ln_gemm_alpha_mean"
    r = _rng(name)
    w_in = _orthogonal(r, 64)
    g = Graph(name)
    g.inp("tokens", [16, 64])
    h = g.n("Gemm", "in_proj", "tokens", g.w("in_w", w_in))
    ones = g.w("ones_col", np.ones((64, 1)))
    mu = g.n("Gemm", "mean_gemm", h, ones, alpha=1.0 / 64)
    d = g.n("Sub", "centered", h, mu)
    sq = g.n("Mul", "sq", d, d)
    var = g.n("Gemm", "var_gemm", sq, ones, alpha=1.0 / 64)
    ve = g.n("Add", "var_eps", var, g.w("eps", 1e-5))
    sd = g.n("Sqrt", "std", ve)
    xn = g.n("Div", "normed", d, sd)
    sc = g.n("Mul", "scaled", xn, g.w("gamma", r.uniform(0.8, 1.2, 64)))
    sh = g.n("Add", "shifted", sc, g.w("beta", r.normal(0, 0.1, 64)))
    g.n("Gemm", "fc", sh, g.w("fc_w", r.normal(0, 0.125, (64, 32))), g.w("fc_b", r.normal(0, 0.1, 32)))
    g.out("fc")

    def one(rng, i):
        x = rng.normal(0, 1, (16, 64)) * 600
        x[:, 7] *= 3.0
        return {"tokens": x @ w_in.T}

    return g.model(), _sampler(name, one)


@case("rms_matmul_invn_col", "mean-as-gemm-matmul", {"sq", "mean_sq_mm", "mean_sq_eps", "rms"},
      "projection then RMSNorm whose mean is MatMul(h*h, column of 1/96) on hidden states ~350 with two massive dims (~2e3): squares and mean (~1.5e5) overflow; eps-add and sqrt consume; rms fits")
def _rms_matmul_invn_col():
    name = "rms_matmul_invn_col"
    r = _rng(name)
    w_in = _orthogonal(r, 96)
    g = Graph(name)
    g.inp("x", [1, 12, 96])
    h = g.n("MatMul", "in_proj", "x", g.w("in_w", w_in))
    sq = g.n("Mul", "sq", h, h)
    ms = g.n("MatMul", "mean_sq_mm", sq, g.w("inv_n_col", np.full((96, 1), 1.0 / 96)))
    mse = g.n("Add", "mean_sq_eps", ms, g.w("eps", 1e-6))
    rt = g.n("Sqrt", "rms", mse)
    xn = g.n("Div", "normed", h, rt)
    sc = g.n("Mul", "scaled", xn, g.w("gamma", r.uniform(0.5, 1.5, 96)))
    g.n("MatMul", "up_proj", sc, g.w("up_w", r.normal(0, 0.1, (96, 64))))
    g.out("up_proj")

    def one(rng, i):
        x = rng.normal(0, 1, (1, 12, 96)) * 350
        x[..., [11, 60]] = rng.uniform(1500, 2500, (1, 12, 2)) * rng.choice([-1, 1], (1, 12, 2))
        return {"x": x @ w_in.T}

    return g.model(), _sampler(name, one)


@case("image_standardize_matmul", "mean-as-gemm-matmul", {"pixel_sum", "pixel_mean", "sq_sum", "pixel_var"},
      "per-image standardization with sums as MatMul(flat pixels 0..255, ones[3072,1]): the sums (~4e5) and sums of squares (~1e7) overflow; the *1/N that consume them give mean ~130 and var ~5e3, which fit")
def _image_standardize_matmul():
    name = "image_standardize_matmul"
    r = _rng(name)
    g = Graph(name)
    g.inp("image", [2, 3, 32, 32])
    fl = g.n("Flatten", "flatten", "image", axis=1)
    ones = g.w("ones_col", np.ones((3072, 1)))
    inv_n = g.w("inv_n", 1.0 / 3072)
    s = g.n("MatMul", "pixel_sum", fl, ones)
    m = g.n("Mul", "pixel_mean", s, inv_n)
    d = g.n("Sub", "centered", fl, m)
    sq = g.n("Mul", "sq", d, d)
    ss = g.n("MatMul", "sq_sum", sq, ones)
    var = g.n("Mul", "pixel_var", ss, inv_n)
    sd = g.n("Sqrt", "std", var)
    adj = g.n("Max", "std_floor", sd, g.w("min_std", 1.0 / np.sqrt(3072)))
    xn = g.n("Div", "standardized", d, adj)
    img = g.n("Reshape", "unflatten", xn, g.ints("img_shape", [2, 3, 32, 32]))
    g.n("Conv", "stem", img, g.w("stem_w", r.normal(0, 0.2, (8, 3, 3, 3))), g.w("stem_b", r.normal(0, 0.1, 8)),
        strides=[2, 2], pads=[1, 1, 1, 1])
    g.out("stem")

    def one(rng, i):
        base = rng.uniform(60, 190, (2, 3, 1, 1))
        yy, xx = np.meshgrid(np.linspace(-1, 1, 32), np.linspace(-1, 1, 32), indexing="ij")
        img = base + 50 * np.sin(3 * xx + rng.uniform(0, 6)) * np.cos(2 * yy) + rng.normal(0, 15, (2, 3, 32, 32))
        return {"image": np.clip(np.round(img), 0, 255)}

    return g.model(), _sampler(name, one)


# ============================================================================= D. sums as Einsum


def _photo(rng, shape):
    """Natural-looking 0..255 images: a colour cast, a gradient, texture."""
    b, c, h, w = shape
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    img = rng.uniform(70, 180, (b, c, 1, 1)) + 60 * (xx - 0.5) * rng.normal(0, 1, (b, c, 1, 1)) + 40 * yy
    return np.clip(np.round(img + rng.normal(0, 20, shape)), 0, 255)


@case("einsum_pixel_pool", "einsum-sums", {"chan_sum", "chan_mean"},
      "global colour statistics as Einsum('bchw->bc') over 48x48 pixels 0..255: the sums (~3e5) overflow; the Div by 2304 consumes them and gives ~130")
def _einsum_pixel_pool():
    name = "einsum_pixel_pool"
    r = _rng(name)
    g = Graph(name)
    g.inp("image", [2, 3, 48, 48])
    s = g.n("Einsum", "chan_sum", "image", equation="bchw->bc")
    m = g.n("Div", "chan_mean", s, g.w("count", 2304.0))
    c = g.n("Sub", "chan_centered", m, g.w("pix_mean", [123.7, 116.3, 103.5]))
    z = g.n("Div", "chan_z", c, g.w("pix_std", [58.4, 57.1, 57.4]))
    h = g.n("Gemm", "fc1", z, g.w("fc1_w", r.normal(0, 0.8, (3, 16))), g.w("fc1_b", r.normal(0, 0.1, 16)))
    a = g.n("Relu", "relu", h)
    g.n("Gemm", "fc2", a, g.w("fc2_w", r.normal(0, 0.4, (16, 4))), g.w("fc2_b", r.normal(0, 0.1, 4)))
    g.out("fc2")
    return g.model(), _sampler(name, lambda rng, i: {"image": _photo(rng, (2, 3, 48, 48))})


@case("einsum_l2_normalize", "einsum-sums", {"sq_norm", "norm"},
      "projection head, then L2-normalized retrieval embeddings with |e|^2 as Einsum('bij,bij->bi') on pooled features ~60 over 128 dims: |e|^2 (~4.6e5) overflows; Sqrt consumes it and gives ~700")
def _einsum_l2_normalize():
    name = "einsum_l2_normalize"
    r = _rng(name)
    bank = r.normal(0, 1, (128, 32))
    bank /= np.linalg.norm(bank, axis=0, keepdims=True)
    w_in = _orthogonal(r, 128)
    g = Graph(name)
    g.inp("pooled", [2, 8, 128])
    emb = g.n("MatMul", "embed_proj", "pooled", g.w("embed_w", w_in))
    n2 = g.n("Einsum", "sq_norm", emb, emb, equation="bij,bij->bi")
    n = g.n("Sqrt", "norm", n2)
    nu = g.n("Unsqueeze", "norm_col", n, g.ints("last_axis", [-1]))
    en = g.n("Div", "unit", emb, nu)
    g.n("MatMul", "cosine", en, g.w("bank", bank))
    g.out("cosine")

    def one(rng, i):
        e = rng.normal(0, 1, (2, 8, 128)) * rng.uniform(40, 80, (2, 8, 1)) + rng.normal(0, 10, 128)
        return {"pooled": e @ w_in.T}

    return g.model(), _sampler(name, one)


@case("einsum_row_profile", "einsum-sums", {"row_sum", "row_profile"},
      "document-scan row profile Einsum('bij->bi') over 512 pixels 0..255 (mostly white): row sums (~1.2e5) overflow; the *1/(512*255) consumes them and gives 0..1")
def _einsum_row_profile():
    name = "einsum_row_profile"
    r = _rng(name)
    g = Graph(name)
    g.inp("page", [2, 32, 512])
    rows = g.n("Einsum", "row_sum", "page", equation="bij->bi")
    prof = g.n("Mul", "row_profile", rows, g.w("inv_full", 1.0 / (512 * 255)))
    ink = g.n("Sub", "ink", g.w("one", 1.0), prof)
    h = g.n("MatMul", "line_head", ink, g.w("head_w", r.normal(0, 1.0, (32, 8))))
    g.n("Add", "line_logits", h, g.w("head_b", r.normal(0, 0.1, 8)))
    g.out("line_logits")

    def one(rng, i):
        page = 245 + rng.normal(0, 5, (2, 32, 512))
        for b in range(2):
            for line in rng.choice(32, 6, replace=False):
                page[b, line] -= rng.uniform(40, 120) * (rng.random(512) < 0.4)
        return {"page": np.clip(np.round(page), 0, 255)}

    return g.model(), _sampler(name, one)


@case("rms_einsum_sumsq", "einsum-sums", {"sum_sq", "mean_sq"},
      "projection then T5-style RMSNorm with sum of squares as Einsum('btc,btc->bt') on activations ~100 (a few at ~400) over 64 dims: the sum (~6e5..1.5e6) overflows; Div by 64 consumes it and gives <3e4")
def _rms_einsum_sumsq():
    name = "rms_einsum_sumsq"
    r = _rng(name)
    w_in = _orthogonal(r, 64)
    g = Graph(name)
    g.inp("x", [1, 16, 64])
    h = g.n("MatMul", "in_proj", "x", g.w("in_w", w_in))
    ss = g.n("Einsum", "sum_sq", h, h, equation="btc,btc->bt")
    ms = g.n("Div", "mean_sq", ss, g.w("dim", 64.0))
    mse = g.n("Add", "mean_sq_eps", ms, g.w("eps", 1e-6))
    rt = g.n("Sqrt", "rms", mse)
    rtu = g.n("Unsqueeze", "rms_col", rt, g.ints("last_axis", [-1]))
    xn = g.n("Div", "normed", h, rtu)
    sc = g.n("Mul", "scaled", xn, g.w("gamma", r.uniform(0.5, 1.5, 64)))
    g.n("MatMul", "ffn_in", sc, g.w("ffn_w", r.normal(0, 0.125, (64, 48))))
    g.out("ffn_in")

    def one(rng, i):
        x = rng.normal(0, 1, (1, 16, 64)) * 100
        x[..., 5] = rng.uniform(300, 450, (1, 16))
        return {"x": x @ w_in.T}

    return g.model(), _sampler(name, one)


# ============================================================================= E. roots spelled otherwise


@case("rms_rsqrt_explog", "roots", {"sq", "mean_sq", "mean_sq_eps", "log_ms"},
      "projection then RMSNorm with rsqrt = Exp(-0.5*Log(ms)) on hidden states ~500: x*x and its mean (~2.5e5) overflow; eps-add and Log consume them; Log ~12.4 is back in range")
def _rms_rsqrt_explog():
    name = "rms_rsqrt_explog"
    r = _rng(name)
    w_in = _orthogonal(r, 64)
    g = Graph(name)
    g.inp("x", [1, 16, 64])
    h = g.n("MatMul", "in_proj", "x", g.w("in_w", w_in))
    sq = g.n("Mul", "sq", h, h)
    ms = g.n("ReduceMean", "mean_sq", sq, axes=[-1], keepdims=1)
    mse = g.n("Add", "mean_sq_eps", ms, g.w("eps", 1e-6))
    lg = g.n("Log", "log_ms", mse)
    half = g.n("Mul", "neg_half_log", lg, g.w("neg_half", -0.5))
    rs = g.n("Exp", "rsqrt", half)
    xn = g.n("Mul", "normed", h, rs)
    sc = g.n("Mul", "scaled", xn, g.w("gamma", r.uniform(0.5, 1.5, 64)))
    g.n("MatMul", "proj", sc, g.w("proj_w", r.normal(0, 0.125, (64, 32))))
    g.out("proj")
    return g.model(), _sampler(name, lambda rng, i: {"x": rng.normal(0, 1, (1, 16, 64)) * rng.uniform(400, 600) @ w_in.T})


@case("rms_pow_half_quiet_audio", "roots", {"sq", "mean_sq", "mean_sq_eps", "rms_pow"},
      "per-frame RMS gain control with Pow(ms+1e-8, 0.5) on waveforms with near-silent frames (~1e-4): squares ~1e-8 and eps 1e-8 flush to 0 in fp16 (x/0); the mean, eps-add and Pow consume them; rms >= 1e-4 fits")
def _rms_pow_half_quiet_audio():
    name = "rms_pow_half_quiet_audio"
    r = _rng(name)
    g = Graph(name)
    g.inp("frames", [2, 16, 160])
    sq = g.n("Mul", "sq", "frames", "frames")
    ms = g.n("ReduceMean", "mean_sq", sq, axes=[-1], keepdims=1)
    mse = g.n("Add", "mean_sq_eps", ms, g.w("eps", 1e-8))
    rms = g.n("Pow", "rms_pow", mse, g.w("half", 0.5))
    xn = g.n("Div", "gain_normed", "frames", rms)
    g.n("MatMul", "filterbank", xn, g.w("fb_w", np.abs(r.normal(0, 0.08, (160, 32)))))
    g.out("filterbank")

    def one(rng, i):
        amp = np.where(rng.random((2, 16, 1)) < 0.4, rng.uniform(5e-5, 2e-4, (2, 16, 1)), rng.uniform(0.01, 0.3, (2, 16, 1)))
        t = np.arange(160) / 16000.0
        tone = np.sin(2 * np.pi * rng.uniform(100, 1000, (2, 16, 1)) * t)
        return {"frames": amp * (0.7 * tone + 0.3 * rng.normal(0, 1, (2, 16, 160)))}

    return g.model(), _sampler(name, one)


@case("patch_distance_pow", "roots", {"sum_sq", "dist"},
      "pixel-space patch distance Pow(ReduceSum(Pow(a-b,2)),0.5) on 0..255 patches: each squared difference fits (<=65025) but the sum over 3072 (~2e6) overflows; Pow(.,0.5) consumes it, ~1.4e3 fits")
def _patch_distance_pow():
    name = "patch_distance_pow"
    g = Graph(name)
    g.inp("patch_a", [2, 3, 32, 32])
    g.inp("patch_b", [2, 3, 32, 32])
    d = g.n("Sub", "diff", "patch_a", "patch_b")
    sq = g.n("Pow", "sq_diff", d, g.w("two", 2.0))
    ss = g.n("ReduceSum", "sum_sq", sq, g.ints("axes", [1, 2, 3]), keepdims=0)
    dist = g.n("Pow", "dist", ss, g.w("half", 0.5))
    g.n("Mul", "rmse", dist, g.w("inv_sqrt_n", 1.0 / np.sqrt(3072)))
    g.out("rmse")

    def one(rng, i):
        a = _photo(rng, (2, 3, 32, 32))
        b = np.clip(np.round(a + rng.normal(0, rng.uniform(10, 40), a.shape)), 0, 255)
        return {"patch_a": a, "patch_b": b}

    return g.model(), _sampler(name, one)


# ============================================================================= F. softmax without max subtraction


def _head_weights(name: str, feats: int, classes: int, scale: float = 0.5):
    r = _rng(name, 7)
    return r.normal(0, scale, (feats, classes)), r.normal(0, 0.1, classes)


def _confident_logits(rng, rows: int, classes: int, top: tuple, spread: float) -> np.ndarray:
    """Logits of a confident classifier: one class at ``top`` (uniform range), the rest N(0, spread) shifted down."""
    logits = rng.normal(-2.0, spread, (rows, classes))
    win = rng.integers(0, classes, rows)
    logits[np.arange(rows), win] = rng.uniform(*top, rows)
    return logits


@case("softmax_nomax_head", "softmax-without-max", {"exp", "exp_sum", "probs"},
      "classifier head, softmax spelled Exp(x)/ReduceSum(Exp(x)) without max subtraction, confident logits up to ~16: Exp (up to ~9e6) and the sum overflow; the Div consumes both, probabilities fit")
def _softmax_nomax_head():
    name = "softmax_nomax_head"
    w, b = _head_weights(name, 32, 10)
    g = Graph(name)
    g.inp("feats", [4, 32])
    mm = g.n("MatMul", "head_mm", "feats", g.w("head_w", w))
    lg = g.n("Add", "logits", mm, g.w("head_b", b))
    e = g.n("Exp", "exp", lg)
    s = g.n("ReduceSum", "exp_sum", e, g.ints("axes", [1]), keepdims=1)
    g.n("Div", "probs", e, s)
    g.out("probs")

    def one(rng, i):
        return {"feats": _pinv_inputs(_confident_logits(rng, 4, 10, (8, 16), 2.0), w, b)}

    return g.model(), _sampler(name, one)


@case("softmax_temperature_reciprocal", "softmax-without-max", {"exp", "exp_sum", "inv_sum", "probs"},
      "teacher head then distillation softmax Exp(z/0.4)*Reciprocal(ReduceSum) on teacher logits up to 6.5 (16 after T): Exp and sum overflow; Reciprocal consumes the sum and its 1/s (~1e-7) is below fp16's normals; the Mul consumes both")
def _softmax_temperature_reciprocal():
    name = "softmax_temperature_reciprocal"
    w, b = _head_weights(name, 48, 20)
    g = Graph(name)
    g.inp("teacher_feats", [4, 48])
    lg = g.n("Add", "teacher_logits", g.n("MatMul", "teacher_mm", "teacher_feats", g.w("head_w", w)), g.w("head_b", b))
    z = g.n("Div", "tempered", lg, g.w("temperature", 0.4))
    e = g.n("Exp", "exp", z)
    s = g.n("ReduceSum", "exp_sum", e, g.ints("axes", [-1]), keepdims=1)
    inv = g.n("Reciprocal", "inv_sum", s)
    g.n("Mul", "probs", e, inv)
    g.out("probs")
    return g.model(), _sampler(name, lambda rng, i: {"teacher_feats": _pinv_inputs(_confident_logits(rng, 4, 20, (4.5, 6.5), 1.0), w, b)})


# ============================================================================= G. attention scaled after QK^T


def _sink_tokens(rng, tokens: int, dim: int, direction: np.ndarray) -> np.ndarray:
    """Hidden states with an attention-sink token 0 whose activations are massive along ``direction``."""
    x = rng.normal(0, 1, (1, tokens, dim))
    x[0, 0] += direction * rng.uniform(35, 45)
    return x


@case("attn_qk_then_div", "attention-unscaled-logits", {"scores", "scaled_scores"},
      "attention with QK^T computed before /sqrt(64), an attention-sink token with massive activations: q0.k0 (~1.3e5) overflows; the Div by 8 consumes it and gives ~1.6e4, which fits")
def _attn_qk_then_div():
    name = "attn_qk_then_div"
    r = _rng(name)
    dim = 64
    wq = r.normal(0, 1 / np.sqrt(dim), (dim, dim))
    wk = wq + r.normal(0, 0.3 / np.sqrt(dim), (dim, dim))
    g = Graph(name)
    g.inp("x", [1, 16, dim])
    q = g.n("MatMul", "q_proj", "x", g.w("wq", wq))
    k = g.n("MatMul", "k_proj", "x", g.w("wk", wk))
    v = g.n("MatMul", "v_proj", "x", g.w("wv", r.normal(0, 1 / np.sqrt(dim), (dim, dim))))
    kt = g.n("Transpose", "k_t", k, perm=[0, 2, 1])
    sc = g.n("MatMul", "scores", q, kt)
    ss = g.n("Div", "scaled_scores", sc, g.w("sqrt_d", 8.0))
    p = g.n("Softmax", "attn", ss, axis=-1)
    o = g.n("MatMul", "context", p, v)
    g.n("MatMul", "o_proj", o, g.w("wo", r.normal(0, 1 / np.sqrt(dim), (dim, dim))))
    g.out("o_proj")
    direction = r.normal(0, 1, dim)
    direction /= np.linalg.norm(direction) / np.sqrt(dim) * 1.0
    return g.model(), _sampler(name, lambda rng, i: {"x": _sink_tokens(rng, 16, dim, direction)})


@case("attn_einsum_then_mul", "attention-unscaled-logits", {"scores", "scaled_scores"},
      "multi-head attention as Einsum('bqhd,bkhd->bhqk') then Mul(1/sqrt(32)) with a sink token: the raw score of the sink (~1e5) overflows; the Mul consumes it and gives ~1.8e4 which fits, mask add and softmax stay fp16")
def _attn_einsum_then_mul():
    name = "attn_einsum_then_mul"
    r = _rng(name)
    dim, heads, hd, tokens = 64, 2, 32, 12
    wq = r.normal(0, 1 / np.sqrt(dim), (dim, dim))
    wk = wq + r.normal(0, 0.3 / np.sqrt(dim), (dim, dim))
    mask = np.triu(np.full((tokens, tokens), -30000.0), 1)
    g = Graph(name)
    g.inp("x", [1, tokens, dim])
    split = g.ints("head_shape", [1, tokens, heads, hd])
    q = g.n("Reshape", "q_heads", g.n("MatMul", "q_proj", "x", g.w("wq", wq)), split)
    k = g.n("Reshape", "k_heads", g.n("MatMul", "k_proj", "x", g.w("wk", wk)), split)
    v = g.n("Reshape", "v_heads", g.n("MatMul", "v_proj", "x", g.w("wv", r.normal(0, 1 / np.sqrt(dim), (dim, dim)))), split)
    sc = g.n("Einsum", "scores", q, k, equation="bqhd,bkhd->bhqk")
    ss = g.n("Mul", "scaled_scores", sc, g.w("inv_sqrt_d", 1 / np.sqrt(hd)))
    ms = g.n("Add", "masked_scores", ss, g.w("causal_mask", mask))
    p = g.n("Softmax", "attn", ms, axis=-1)
    ctx = g.n("Einsum", "context", p, v, equation="bhqk,bkhd->bqhd")
    merged = g.n("Reshape", "merge_heads", ctx, g.ints("merged_shape", [1, tokens, dim]))
    g.n("MatMul", "o_proj", merged, g.w("wo", r.normal(0, 1 / np.sqrt(dim), (dim, dim))))
    g.out("o_proj")
    direction = r.normal(0, 1, dim)
    direction /= np.linalg.norm(direction) / np.sqrt(dim)
    return g.model(), _sampler(name, lambda rng, i: {"x": _sink_tokens(rng, tokens, dim, direction)})


# ============================================================================= H. log of softmax


@case("log_of_softmax", "log-of-softmax", {"softmax", "log_probs"},
      "CTC head Log(Softmax(logits)) with confident frames (peak ~18, others ~N(-2,3)): the losing probabilities (~1e-9..1e-15) flush to 0 in fp16 and Log gives -inf; Log consumes them and gives >= -40, which fits")
def _log_of_softmax():
    name = "log_of_softmax"
    w, b = _head_weights(name, 32, 16)
    g = Graph(name)
    g.inp("enc", [2, 20, 32])
    mm = g.n("MatMul", "ctc_mm", "enc", g.w("ctc_w", w))
    lg = g.n("Add", "ctc_logits", mm, g.w("ctc_b", b))
    sm = g.n("Softmax", "softmax", lg, axis=-1)
    g.n("Log", "log_probs", sm)
    g.out("log_probs")

    def one(rng, i):
        logits = _confident_logits(rng, 40, 16, (14, 20), 3.0).reshape(2, 20, 16)
        return {"enc": _pinv_inputs(logits, w, b)}

    return g.model(), _sampler(name, one)


@case("log_div_exp_sum", "log-of-softmax", {"exp", "exp_sum", "probs", "log_probs"},
      "retrieval log-probabilities Log(Exp(s)/ReduceSum(Exp(s))) over query.document scores in [-16, 16]: Exp and the sum overflow, small probabilities (~1e-14) flush to 0; Div and Log consume them, Log >= -35 fits")
def _log_div_exp_sum():
    name = "log_div_exp_sum"
    docs_t = _rng(name).normal(0, 0.3, (32, 12))
    g = Graph(name)
    g.inp("query", [4, 32])
    sc = g.n("MatMul", "scores", "query", g.w("docs_t", docs_t))
    e = g.n("Exp", "exp", sc)
    s = g.n("ReduceSum", "exp_sum", e, g.ints("axes", [-1]), keepdims=1)
    p = g.n("Div", "probs", e, s)
    g.n("Log", "log_probs", p)
    g.out("log_probs")

    def one(rng, i):
        s = rng.uniform(-16, 6, (4, 12))
        s[np.arange(4), rng.integers(0, 12, 4)] = rng.uniform(12, 16, 4)
        return {"query": _pinv_inputs(s, docs_t, np.zeros(12))}

    return g.model(), _sampler(name, one)


# ============================================================================= I. Exp box decodes


def _anchors(rng, count: int, image: int, smallest: float, largest: float) -> np.ndarray:
    cx, cy = rng.uniform(0, image, count), rng.uniform(0, image, count)
    side = np.exp(rng.uniform(np.log(smallest), np.log(largest), count))
    ratio = np.exp(rng.uniform(-0.7, 0.7, count))
    return np.stack([cx, cy, side * np.sqrt(ratio), side / np.sqrt(ratio)], axis=1)


@case("ssd_decode_fpn_level", "exp-box-decode", {"area", "sqrt_area"},
      "SSD loc head (Conv) and decode w=exp(0.2*dw)*anchor_w on a 1024 image, then FPN level 4+log2(sqrt(w*h)/224): w*h of large boxes (~1e6) overflows; Sqrt consumes it, ~1e3 fits")
def _ssd_decode_fpn_level():
    name = "ssd_decode_fpn_level"
    r = _rng(name)
    a = _anchors(r, 64, 1024, 32, 900)
    g = Graph(name)
    g.inp("feats", [1, 32, 4, 4])
    head = g.n("Conv", "loc_head", "feats", g.w("loc_w", r.normal(0, 0.06, (16, 32, 3, 3))), g.w("loc_b", r.normal(0, 0.05, 16)),
               pads=[1, 1, 1, 1])
    loc = g.n("Reshape", "loc", g.n("Transpose", "loc_nhwc", head, perm=[0, 2, 3, 1]), g.ints("loc_shape", [1, 64, 4]))
    dx, dy, dw, dh = g.n("Split", "split_loc", loc, g.ints("split_sizes", [1, 1, 1, 1]), axis=2,
                         outputs=["dx", "dy", "dw", "dh"])
    aw, ah = g.w("anchor_w", a[:, 2:3]), g.w("anchor_h", a[:, 3:4])
    v_xy, v_wh = g.w("var_xy", 0.1), g.w("var_wh", 0.2)
    cx = g.n("Add", "cx", g.n("Mul", "cx_off", g.n("Mul", "dx_var", dx, v_xy), aw), g.w("anchor_cx", a[:, 0:1]))
    cy = g.n("Add", "cy", g.n("Mul", "cy_off", g.n("Mul", "dy_var", dy, v_xy), ah), g.w("anchor_cy", a[:, 1:2]))
    w = g.n("Mul", "box_w", g.n("Exp", "exp_w", g.n("Mul", "dw_var", dw, v_wh)), aw)
    h = g.n("Mul", "box_h", g.n("Exp", "exp_h", g.n("Mul", "dh_var", dh, v_wh)), ah)
    half = g.w("half", 0.5)
    hw, hh = g.n("Mul", "half_w", w, half), g.n("Mul", "half_h", h, half)
    corners = [g.n("Sub", "x1", cx, hw), g.n("Sub", "y1", cy, hh), g.n("Add", "x2", cx, hw), g.n("Add", "y2", cy, hh)]
    g.n("Concat", "boxes", *corners, axis=2)
    area = g.n("Mul", "area", w, h)
    side = g.n("Sqrt", "sqrt_area", area)
    ratio = g.n("Mul", "side_ratio", side, g.w("inv_224", 1.0 / 224))
    log2 = g.n("Mul", "log2_ratio", g.n("Log", "log_ratio", ratio), g.w("inv_ln2", 1.0 / np.log(2.0)))
    g.n("Add", "fpn_level", log2, g.w("base_level", 4.0))
    g.out("boxes", "fpn_level")
    return g.model(), _sampler(name, lambda rng, i: {"feats": np.maximum(rng.normal(0, 1.4, (1, 32, 4, 4)), 0)})


@case("yolo_decode_area", "exp-box-decode", {"area"},
      "YOLOv3 head (1x1 Conv) and decode w=anchor_w*exp(tw) on a 1280 image with large anchors, box area w*h as its own output for NMS: area (1e4..1e7) overflows fp16; nothing consumes it after")
def _yolo_decode_area():
    name = "yolo_decode_area"
    r = _rng(name)
    count = 100
    grid = np.stack([np.arange(count) % 10, np.arange(count) // 10], axis=1).astype(np.float64)
    anchor = np.array([[232, 180], [460, 398], [746, 652]], dtype=np.float64)[r.integers(0, 3, count)]
    g = Graph(name)
    g.inp("feats", [1, 32, 10, 10])
    head = g.n("Conv", "det_head", "feats", g.w("det_w", r.normal(0, 0.07, (4, 32, 1, 1))), g.w("det_b", r.normal(0, 0.05, 4)))
    flat = g.n("Reshape", "det_flat", head, g.ints("det_shape", [1, 4, count]))
    raw = g.n("Transpose", "raw", flat, perm=[0, 2, 1])
    tx, ty, tw, th = g.n("Split", "split_raw", raw, g.ints("split_sizes", [1, 1, 1, 1]), axis=2,
                         outputs=["tx", "ty", "tw", "th"])
    stride = g.w("stride", 128.0)
    bx = g.n("Mul", "bx", g.n("Add", "bx_cell", g.n("Sigmoid", "sig_x", tx), g.w("grid_x", grid[:, 0:1])), stride)
    by = g.n("Mul", "by", g.n("Add", "by_cell", g.n("Sigmoid", "sig_y", ty), g.w("grid_y", grid[:, 1:2])), stride)
    bw = g.n("Mul", "bw", g.n("Exp", "exp_w", tw), g.w("anchor_w", anchor[:, 0:1]))
    bh = g.n("Mul", "bh", g.n("Exp", "exp_h", th), g.w("anchor_h", anchor[:, 1:2]))
    g.n("Concat", "boxes", bx, by, bw, bh, axis=2)
    g.n("Mul", "area", bw, bh)
    g.out("boxes", "area")
    return g.model(), _sampler(name, lambda rng, i: {"feats": np.maximum(rng.normal(0, 1.4, (1, 32, 10, 10)), 0)})


# ============================================================================= J. epsilon clips


@case("clip_eps_sigmoid_log", "epsilon-clip", {"exp_neg", "one_plus", "sigmoid", "clip_eps", "log_p"},
      "multi-label log-probabilities Log(Clip(1/(1+Exp(-z)), 1e-12, 1)) with confident negatives z down to -20: Exp(-z) (~5e8) and 1+Exp overflow, the sigmoid (~2e-9) and the 1e-12 floor flush to 0 in fp16 (Log -> -inf); Reciprocal, Clip and Log consume them, Log >= -20 fits")
def _clip_eps_sigmoid_log():
    # The sigmoid is spelled through Exp: onnxruntime's float32 Sigmoid kernel is only accurate to ~6e-8 absolute,
    # so Log(Sigmoid(-20)) is wrong in float32 already; Exp and Reciprocal are accurate relative to the value.
    name = "clip_eps_sigmoid_log"
    w, b = _head_weights(name, 32, 20)
    g = Graph(name)
    g.inp("feats", [8, 32])
    z = g.n("Add", "logits", g.n("MatMul", "head_mm", "feats", g.w("head_w", w)), g.w("head_b", b))
    e = g.n("Exp", "exp_neg", g.n("Neg", "neg_logits", z))
    p = g.n("Reciprocal", "sigmoid", g.n("Add", "one_plus", e, g.w("one", 1.0)))
    pc = g.n("Clip", "clip_eps", p, g.w("p_min", 1e-12), g.w("p_max", 1.0))
    g.n("Log", "log_p", pc)
    g.out("log_p")

    def one(rng, i):
        z = rng.uniform(-20, -6, (8, 20))
        pos = rng.random((8, 20)) < 0.15
        z[pos] = rng.uniform(2, 12, pos.sum())
        return {"feats": _pinv_inputs(z, w, b)}

    return g.model(), _sampler(name, one)


@case("max_eps_l2norm", "epsilon-clip", set(),
      "trap: projection then e / Max(||e||, 1e-10) on embeddings with norms 3..20: 1e-10 flushes to 0 in fp16 but the Max never picks it; sum of squares (<500) fits")
def _max_eps_l2norm():
    name = "max_eps_l2norm"
    w_in = _orthogonal(_rng(name), 32)
    g = Graph(name)
    g.inp("feats", [4, 32])
    emb = g.n("MatMul", "embed_proj", "feats", g.w("embed_w", w_in))
    ss = g.n("ReduceSumSquare", "sum_sq", emb, axes=[-1], keepdims=1)
    n = g.n("Sqrt", "norm", ss)
    nc = g.n("Max", "norm_floor", n, g.w("tiny", 1e-10))
    g.n("Div", "unit", emb, nc)
    g.out("unit")
    return g.model(), _sampler(name, lambda rng, i: {"feats": rng.normal(0, 1, (4, 32)) * rng.uniform(0.5, 3.5, (4, 1)) @ w_in.T})


# ============================================================================= K. layer scale


@case("convnext_layer_scale", "layer-scale", set(),
      "trap: ConvNeXt block whose gamma is 1e-6 on most channels: 1e-6 is an fp16 subnormal (1.3% off) and gamma*branch (~1e-6..1e-5) is far below the residual's own fp16 step (~1e-3); nothing needs float32")
def _convnext_layer_scale():
    name = "convnext_layer_scale"
    r = _rng(name)
    gamma = np.full(32, 1e-6)
    gamma[r.choice(32, 6, replace=False)] = r.uniform(0.05, 0.3, 6)
    g = Graph(name)
    g.inp("x", [1, 32, 8, 8])
    dw = g.n("Conv", "dwconv", "x", g.w("dw_w", r.normal(0, 0.1, (32, 1, 7, 7))), g.w("dw_b", r.normal(0, 0.05, 32)),
             group=32, pads=[3, 3, 3, 3])
    t = g.n("Transpose", "to_nhwc", dw, perm=[0, 2, 3, 1])
    ln = g.n("LayerNormalization", "norm", t, g.w("ln_scale", r.uniform(0.8, 1.2, 32)), g.w("ln_bias", r.normal(0, 0.1, 32)),
             axis=-1, epsilon=1e-6)
    up = g.n("MatMul", "pw_up", ln, g.w("up_w", r.normal(0, 0.18, (32, 128))))
    erf = g.n("Erf", "gelu_erf", g.n("Mul", "gelu_scale", up, g.w("inv_sqrt2", 1 / np.sqrt(2))))
    gate = g.n("Mul", "gelu_gate", g.n("Add", "gelu_one", erf, g.w("one", 1.0)), g.w("half", 0.5))
    act = g.n("Mul", "gelu", up, gate)
    down = g.n("MatMul", "pw_down", act, g.w("down_w", r.normal(0, 0.09, (128, 32))))
    scaled = g.n("Mul", "layer_scale", down, g.w("gamma", gamma))
    back = g.n("Transpose", "to_nchw", scaled, perm=[0, 3, 1, 2])
    g.n("Add", "residual", "x", back)
    g.out("residual")
    return g.model(), _sampler(name, lambda rng, i: {"x": rng.normal(0, 2, (1, 32, 8, 8))})


# ============================================================================= L. tiny biases on dead channels


@case("dead_bias_relu_mlp", "tiny-bias", set(),
      "trap: MLP whose pruned hidden units have zero weights and bias 1e-9: 1e-9 flushes to 0 in fp16, and 0 vs 1e-9 through Relu and the next MatMul changes the output by ~1e-9")
def _dead_bias_relu_mlp():
    name = "dead_bias_relu_mlp"
    r = _rng(name)
    w1 = r.normal(0, 0.15, (64, 128))
    b1 = r.normal(0, 0.1, 128)
    dead = r.choice(128, 16, replace=False)
    w1[:, dead], b1[dead] = 0.0, 1e-9
    g = Graph(name)
    g.inp("x", [4, 64])
    h = g.n("Add", "fc1_bias", g.n("MatMul", "fc1", "x", g.w("fc1_w", w1)), g.w("fc1_b", b1))
    a = g.n("Relu", "relu", h)
    g.n("Add", "fc2_bias", g.n("MatMul", "fc2", a, g.w("fc2_w", r.normal(0, 0.12, (128, 10)))), g.w("fc2_b", r.normal(0, 0.1, 10)))
    g.out("fc2_bias")
    return g.model(), _sampler(name, lambda rng, i: {"x": rng.normal(0, 1, (4, 64))})


@case("dead_bias_conv_log", "tiny-bias", {"conv", "relu", "log_intensity"},
      "log-intensity head Log(Relu(Conv)) whose pruned channels have zero weights and bias 1e-9: the Conv's 1e-9 flushes to 0 in fp16 (Log -> -inf); Relu and Log consume it, Log = -20.7 fits")
def _dead_bias_conv_log():
    name = "dead_bias_conv_log"
    r = _rng(name)
    w = np.abs(r.normal(0, 0.2, (16, 8, 1, 1)))
    b = r.uniform(0.05, 0.2, 16)
    dead = r.choice(16, 4, replace=False)
    w[dead], b[dead] = 0.0, 1e-9
    g = Graph(name)
    g.inp("feats", [1, 8, 16, 16])
    c = g.n("Conv", "conv", "feats", g.w("conv_w", w), g.w("conv_b", b))
    a = g.n("Relu", "relu", c)
    g.n("Log", "log_intensity", a)
    g.out("log_intensity")
    return g.model(), _sampler(name, lambda rng, i: {"feats": np.abs(rng.normal(0, 2, (1, 8, 16, 16)))})


# ============================================================================= M. Mish and softplus through Exp


@case("mish_explog_bn", "mish-softplus", set(),
      "trap: Conv+BatchNorm+Mish spelled x*tanh(log(1+exp(x))) with BN outputs up to ~25: exp overflows for x>11 but log(inf)=inf, tanh=1, x*1=x as in float32; for x<<0 exp->0 gives 0 as float32 does (~1e-7)")
def _mish_explog_bn():
    name = "mish_explog_bn"
    r = _rng(name)
    g = Graph(name)
    g.inp("x", [1, 8, 16, 16])
    c = g.n("Conv", "conv", "x", g.w("conv_w", r.normal(0, 0.2, (16, 8, 3, 3))), pads=[1, 1, 1, 1])
    bn = g.n("BatchNormalization", "bn", c, g.w("bn_scale", r.uniform(2.0, 5.0, 16)), g.w("bn_bias", r.normal(0, 1.5, 16)),
             g.w("bn_mean", r.normal(0, 0.3, 16)), g.w("bn_var", r.uniform(1.5, 4.0, 16)), epsilon=1e-5)
    e = g.n("Exp", "mish_exp", bn)
    sp = g.n("Log", "mish_softplus", g.n("Add", "mish_one_plus", e, g.w("one", 1.0)))
    m = g.n("Mul", "mish", bn, g.n("Tanh", "mish_tanh", sp))
    g.n("Conv", "pw_conv", m, g.w("pw_w", r.normal(0, 0.1, (8, 16, 1, 1))), g.w("pw_b", r.normal(0, 0.05, 8)))
    g.out("pw_conv")
    return g.model(), _sampler(name, lambda rng, i: {"x": rng.normal(0, 1, (1, 8, 16, 16)) * rng.uniform(0.8, 1.4)})


@case("softplus_explog_scale", "mish-softplus", {"sp_exp", "sp_one_plus", "sigma"},
      "heteroscedastic head sigma = Log(Add(Exp(raw), 1)) with raw up to ~22: Exp (up to ~3e9) overflows, the +1 and Log consume it; sigma ~22 fits")
def _softplus_explog_scale():
    name = "softplus_explog_scale"
    w, b = _head_weights(name, 16, 4, 0.6)
    g = Graph(name)
    g.inp("feats", [8, 16])
    raw = g.n("Add", "raw", g.n("MatMul", "head_mm", "feats", g.w("head_w", w)), g.w("head_b", b))
    e = g.n("Exp", "sp_exp", raw)
    a = g.n("Add", "sp_one_plus", e, g.w("one", 1.0))
    g.n("Log", "sigma", a)
    g.out("sigma")

    def one(rng, i):
        raw = rng.normal(2, 5, (8, 4))
        raw[rng.integers(0, 8, 2), rng.integers(0, 4, 2)] = rng.uniform(12, 18, 2)
        return {"feats": _pinv_inputs(raw, w, b)}

    return g.model(), _sampler(name, one)


# ============================================================================= N. long sums and unguarded Exp


@case("pixel_autoexposure_sum", "long-sum-unguarded-exp", {"brightness_sum", "brightness"},
      "auto-exposure: image / (ReduceSum over C,H,W of 0..255 pixels / 3072 + 1): the sum (~4e5) overflows; the Div by 3072 consumes it and gives ~130")
def _pixel_autoexposure_sum():
    name = "pixel_autoexposure_sum"
    r = _rng(name)
    g = Graph(name)
    g.inp("image", [2, 3, 32, 32])
    s = g.n("ReduceSum", "brightness_sum", "image", g.ints("axes", [1, 2, 3]), keepdims=1)
    m = g.n("Div", "brightness", s, g.w("count", 3072.0))
    xn = g.n("Div", "exposed", "image", g.n("Add", "brightness_1", m, g.w("one", 1.0)))
    c = g.n("Relu", "relu", g.n("Conv", "conv", xn, g.w("conv_w", r.normal(0, 0.3, (8, 3, 3, 3))), g.w("conv_b", r.normal(0, 0.1, 8)),
                                 pads=[1, 1, 1, 1]))
    p = g.n("Flatten", "flatten", g.n("GlobalAveragePool", "gap", c), axis=1)
    g.n("Gemm", "fc", p, g.w("fc_w", r.normal(0, 0.5, (8, 5))), g.w("fc_b", r.normal(0, 0.1, 5)))
    g.out("fc")
    return g.model(), _sampler(name, lambda rng, i: {"image": _photo(rng, (2, 3, 32, 32))})


@case("house_price_exp", "long-sum-unguarded-exp", {"price"},
      "tabular regressor trained on log-price, output Exp(pred) with pred 11.7..12.7: the prices (1.2e5..3.4e5) overflow fp16; Exp is the last node")
def _house_price_exp():
    name = "house_price_exp"
    r = _rng(name)
    g = Graph(name)
    g.inp("tabular", [8, 12])
    h = g.n("Relu", "relu", g.n("Add", "fc1_bias", g.n("MatMul", "fc1", "tabular", g.w("fc1_w", r.normal(0, 0.3, (12, 16)))),
                                 g.w("fc1_b", r.normal(0.2, 0.1, 16))))
    pred = g.n("Add", "log_price", g.n("MatMul", "fc2", h, g.w("fc2_w", r.normal(0, 0.08, (16, 1)))), g.w("fc2_b", 12.4))
    g.n("Exp", "price", pred)
    g.out("price")
    return g.model(), _sampler(name, lambda rng, i: {"tabular": rng.normal(0, 1, (8, 12))})


@case("energy_logsumexp", "long-sum-unguarded-exp", {"exp", "exp_sum", "log_sum"},
      "out-of-distribution energy -Log(ReduceSum(Exp(logits))) with confident logits up to ~20: Exp (~5e8) and the sum overflow; Log consumes them, ~20 fits")
def _energy_logsumexp():
    name = "energy_logsumexp"
    w, b = _head_weights(name, 24, 10)
    g = Graph(name)
    g.inp("feats", [8, 24])
    lg = g.n("Add", "logits", g.n("MatMul", "head_mm", "feats", g.w("head_w", w)), g.w("head_b", b))
    e = g.n("Exp", "exp", lg)
    s = g.n("ReduceSum", "exp_sum", e, g.ints("axes", [-1]), keepdims=1)
    g.n("Neg", "energy", g.n("Log", "log_sum", s))
    g.out("energy")

    def one(rng, i):
        return {"feats": _pinv_inputs(_confident_logits(rng, 8, 10, (10, 20), 2.0), w, b)}

    return g.model(), _sampler(name, one)
