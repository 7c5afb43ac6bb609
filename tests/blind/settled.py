"""Blind test set "settled": what follows a normalization needs no float32 without data.

Written without reading ampconv's planner or calibration code. Every case is a small float32
ONNX model (opset 17, IR 8, every node named, weights ~N(0, 1/fan_in), fixed seed) fed a
realistic input (0..1 images, N(0,1) token features, log-mel frames, raw audio, depth in mm,
0..255 pixels), with its own 8 samples and ``needed``: the nodes that must compute in float32
for the converted model to be accurate in true fp16 on those samples, worked out by hand
(``why`` says how) and checked by ``soundness`` below under the blind judge's emulation.

Two kinds:

* ``trap`` (``needed`` empty): a normalization has taken the input's scale out, and after it
  sits something a naive converter keeps float32: an epsilon that flushes to 0 in fp16 (1e-12,
  1e-10, 1e-9) on a variance ~1, a 1e-6 layer scale on a residual, a 1e-9 bias, an Exp whose
  overflow the next ops absorb (Mish, SiLU as x/(1+exp(-x)), sigmoid as 1/(1+exp(-z))), a
  square that overflows only at |x| > 256. All-fp16 is accurate on the samples.
* ``negative``: the same kind of construct, but on a value that still follows the raw input's
  scale (quiet audio's variance under the eps, a 0..255 patch's sum of squares, depth in mm
  squared, a softmax without max on raw-feature scores): fp16 breaks there without the
  float32 nodes in ``needed``, and a default conversion must keep them.

"True fp16" is the blind judge's emulation (tests/blind/judge.py): every value a converted
model stores as fp16 is rounded to fp16 (overflow -> inf), arithmetic inside a node float32,
run with onnxruntime's CPU provider. Running the converted model directly on the CPU provider
would not do: onnxruntime runs fp16 nodes it has no kernel for in float32 through inserted
casts and keeps chains of them float32 (Exp(12) -> x1e-3 gives 162.7 there, inf on a GPU).

Accuracy (per output, over the 8 samples): relative RMS error ``rms(got - ref) / rms(ref) <=
1e-2``, no NaN/Inf where the float32 output is finite, and for classification heads the same
argmax on every row whose float32 top-2 margin is at least 1% of the logits' RMS.

Measurement: ``python tests/blind/settled.py [--json] [--only NAME,...] [--soundness]``
converts each case with defaults (``ampconv.convert(src, dst, Config(overwrite=True))``: no
calibration data, so ampconv runs its own synthetic run) and prints a markdown table. The
``ampconv`` imported is whatever ``PYTHONPATH`` puts first (this file does not put the
repository ahead of it), so ``PYTHONPATH=/path/to/worktree python tests/blind/settled.py``
measures that worktree; the first line says which.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

import numpy as np
import onnx

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))  # last: a PYTHONPATH worktree's ampconv wins

import judge  # noqa: E402
import spellings  # noqa: E402

N_SAMPLES = 8
RTOL_RMS = 1e-2
MARGIN = 1e-2


# ============================================================================= builder


class Graph(spellings.Graph):
    """The first blind set's builder (every node named, each output named after its node) with a seeded
    generator for weights and the layers below."""

    producer = "blind-settled"

    def __init__(self, name: str, seed_name: str | None = None):
        super().__init__(name)
        self.r = np.random.default_rng(zlib.crc32((seed_name or name).encode()))

    # --- layers, weights ~N(0, 1/fan_in)

    def dense(self, x: str, fan_in: int, fan_out: int, prefix: str, bias: bool = True, std: float = 1.0,
              bias_values=None) -> str:
        y = self.n("MatMul", prefix, x, self.w(prefix + "_w", self.r.normal(0, std / math.sqrt(fan_in), (fan_in, fan_out))))
        if not bias:
            return y
        b = self.r.normal(0, 0.02, fan_out) if bias_values is None else bias_values
        return self.n("Add", prefix + "_bias", y, self.w(prefix + "_b", b))

    def conv(self, x: str, cin: int, cout: int, k, prefix: str, group: int = 1, bias_values=None, **attrs) -> str:
        ks = tuple(k) if isinstance(k, (tuple, list)) else (k, k)
        fan_in = (cin // group) * int(np.prod(ks))
        w = self.w(prefix + "_w", self.r.normal(0, 1 / math.sqrt(fan_in), (cout, cin // group) + ks))
        b = self.r.normal(0, 0.02, cout) if bias_values is None else bias_values
        return self.n("Conv", prefix, x, w, self.w(prefix + "_b", b), group=group, **attrs)

    def ln_decomposed(self, x: str, dim: int, eps: float, prefix: str, square: str = "Pow", axes=(-1,),
                      gamma=None, beta=None) -> str:
        """ReduceMean, Sub, Pow/Mul square, ReduceMean, Add eps, Sqrt, Div, Mul gamma, Add beta."""
        mu = self.n("ReduceMean", prefix + "_mean", x, axes=list(axes), keepdims=1)
        d = self.n("Sub", prefix + "_sub", x, mu)
        if square == "Pow":
            sq = self.n("Pow", prefix + "_sq", d, self.w(prefix + "_two", 2.0))
        else:
            sq = self.n("Mul", prefix + "_sq", d, d)
        var = self.n("ReduceMean", prefix + "_var", sq, axes=list(axes), keepdims=1)
        ve = self.n("Add", prefix + "_var_eps", var, self.w(prefix + "_eps", eps))
        sd = self.n("Sqrt", prefix + "_std", ve)
        xn = self.n("Div", prefix + "_div", d, sd)
        g = self.r.uniform(0.8, 1.2, dim) if gamma is None else gamma
        b = self.r.normal(0, 0.05, dim) if beta is None else beta
        sc = self.n("Mul", prefix + "_gamma", xn, self.w(prefix + "_g", g))
        return self.n("Add", prefix + "_beta", sc, self.w(prefix + "_b", b))

    def ln_fused(self, x: str, dim: int, eps: float, prefix: str, gamma=None, beta=None) -> str:
        g = self.r.uniform(0.8, 1.2, dim) if gamma is None else gamma
        b = self.r.normal(0, 0.05, dim) if beta is None else beta
        return self.n("LayerNormalization", prefix, x, self.w(prefix + "_g", g), self.w(prefix + "_b", b), axis=-1,
                      epsilon=eps)


# ============================================================================= cases


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # "trap" or "negative"
    needed: frozenset
    why: str
    make: Callable  # () -> (model, sampler(rng, i) -> feeds)
    classify: bool = False

    def build(self) -> tuple:
        """(onnx.ModelProto, samples: list of feed dicts, needed: set, why: str)."""
        model, samples = _made(self.name)
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        return copy, [dict(s) for s in samples], set(self.needed), self.why

    def __call__(self) -> tuple:
        return self.build()


CASES: list = []


def case(name: str, kind: str, needed, why: str, classify: bool = False):
    assert kind in ("trap", "negative")

    def register(make):
        CASES.append(Case(name, kind, frozenset(needed), why, make, classify))
        return make

    return register


def by_name(name: str) -> Case:
    return next(c for c in CASES if c.name == name)


@lru_cache(maxsize=None)
def _made(name: str):
    model, one = by_name(name).make()
    rng = np.random.default_rng([zlib.crc32(name.encode()), 1000])
    samples = [{k: np.asarray(v, dtype=np.float32) for k, v in one(rng, i).items()} for i in range(N_SAMPLES)]
    return model, samples


# --- realistic inputs


def _photo(rng, shape, scale=1.0) -> np.ndarray:
    """Natural-image-like values in [0, scale]: smooth colour fields, edges and a little sensor noise."""
    b, c, h, w = shape
    yy, xx = np.meshgrid(np.linspace(0, 1, h), np.linspace(0, 1, w), indexing="ij")
    out = np.empty(shape)
    for i in range(b):
        base = rng.uniform(0.2, 0.8, (c, 1, 1))
        grad = rng.normal(0, 0.25, (c, 1, 1)) * (xx * rng.uniform(-1, 1) + yy * rng.uniform(-1, 1))
        blob = rng.uniform(0.1, 0.5) * np.exp(-((xx - rng.uniform()) ** 2 + (yy - rng.uniform()) ** 2) / rng.uniform(0.01, 0.1))
        edge = (xx * rng.uniform(-1, 1) + yy * rng.uniform(-1, 1) > rng.uniform(-0.5, 0.5)) * rng.normal(0, 0.2, (c, 1, 1))
        out[i] = np.clip(base + grad + blob * rng.uniform(-1, 1, (c, 1, 1)) + edge + rng.normal(0, 0.02, (c, h, w)), 0, 1)
    return out * scale


def _log_mel(rng, shape) -> np.ndarray:
    """Natural-log mel energies: ~-11 (silence) .. +3, smooth in time and frequency."""
    base = rng.normal(-5.0, 1.5) + np.cumsum(rng.normal(0, 0.4, shape), axis=-1) * 0.3
    return np.clip(base + rng.normal(0, 1.0, shape), -11.5, 3.5)


def _tokens(rng, shape) -> np.ndarray:
    return rng.normal(0, 1, shape)


# ----------------------------------------------------------------------------- traps


@case("bert_post_ln_eps12", "trap", set(),
      "BERT block, post-LN: fused LN(eps 1e-5) on the N(0,1) features, then both block LNs decomposed with eps 1e-12 "
      "(flushes to 0 in fp16) on residual sums of normalized values (variance ~1-2): eps is nothing next to it", classify=True)
def _bert_post_ln_eps12():
    g = Graph("bert_post_ln_eps12")
    x = g.inp("features", [1, 16, 32])
    h = g.ln_fused(x, 32, 1e-5, "emb_ln")
    q = g.dense(h, 32, 32, "q")
    k = g.dense(h, 32, 32, "k")
    v = g.dense(h, 32, 32, "v")
    kt = g.n("Transpose", "k_t", k, perm=[0, 2, 1])
    s = g.n("MatMul", "scores", q, kt)
    s = g.n("Div", "scores_scaled", s, g.w("sqrt_d", math.sqrt(32)))
    p = g.n("Softmax", "probs", s, axis=-1)
    ctx = g.n("MatMul", "context", p, v)
    ao = g.dense(ctx, 32, 32, "attn_out")
    r1 = g.n("Add", "residual1", h, ao)
    h1 = g.ln_decomposed(r1, 32, 1e-12, "ln1", square="Pow")
    f = g.dense(h1, 32, 64, "ffn_in")
    e = g.n("Div", "gelu_div", f, g.w("sqrt2", math.sqrt(2)))
    e = g.n("Erf", "gelu_erf", e)
    e = g.n("Add", "gelu_add", e, g.w("one", 1.0))
    e = g.n("Mul", "gelu_mul", f, e)
    e = g.n("Mul", "gelu_half", e, g.w("half", 0.5))
    fo = g.dense(e, 64, 32, "ffn_out")
    r2 = g.n("Add", "residual2", h1, fo)
    h2 = g.ln_decomposed(r2, 32, 1e-12, "ln2", square="Pow")
    g.dense(h2, 32, 8, "classifier")
    g.out("classifier_bias")
    return g.model(), lambda rng, i: {"features": _tokens(rng, (1, 16, 32))}


@case("vit_rms_reciprocal_eps10", "trap", set(),
      "ViT-ish: 8x8 patch Conv on a 0..1 image, fused LN, MLP residual, then RMSNorm spelled Reciprocal(Sqrt(mean(x*x)+1e-10)) "
      "on a mean square ~1-2: the 1e-10 (0 in fp16) and the squares (|x| < 10) are harmless", classify=True)
def _vit_rms_reciprocal_eps10():
    g = Graph("vit_rms_reciprocal_eps10")
    x = g.inp("image", [1, 3, 32, 32])
    p = g.conv(x, 3, 32, 8, "patch_embed", strides=[8, 8])
    p = g.n("Reshape", "flatten_patches", p, g.ints("tokens_shape", [1, 32, 16]))
    t = g.n("Transpose", "to_tokens", p, perm=[0, 2, 1])
    h = g.ln_fused(t, 32, 1e-6, "norm0")
    m = g.dense(h, 32, 64, "mlp_fc1")
    m = g.n("Relu", "mlp_relu", m)
    m = g.dense(m, 64, 32, "mlp_fc2")
    r = g.n("Add", "residual", h, m)
    sq = g.n("Mul", "rms_sq", r, r)
    ms = g.n("ReduceMean", "rms_mean", sq, axes=[-1], keepdims=1)
    mse = g.n("Add", "rms_eps", ms, g.w("eps", 1e-10))
    rt = g.n("Sqrt", "rms_sqrt", mse)
    inv = g.n("Reciprocal", "rms_inv", rt)
    xn = g.n("Mul", "rms_normed", r, inv)
    xs = g.n("Mul", "rms_weight", xn, g.w("rms_w", g.r.uniform(0.8, 1.2, 32)))
    pooled = g.n("ReduceMean", "pool", xs, axes=[1], keepdims=0)
    g.dense(pooled, 32, 10, "head", std=3.0)
    g.out("head_bias")
    return g.model(), lambda rng, i: {"image": _photo(rng, (1, 3, 32, 32))}


@case("llama_rms_pow_neg_half_eps9", "trap", set(),
      "LLaMA-ish: RMSNorm (fused-free, Pow(ms+1e-6,-0.5)) after the input projection, SwiGLU MLP residual on the normed "
      "stream, final RMSNorm Pow(ms+1e-9,-0.5): 1e-9 flushes in fp16 but the mean square is ~1", classify=True)
def _llama_rms_pow_neg_half_eps9():
    g = Graph("llama_rms_pow_neg_half_eps9")
    x = g.inp("hidden", [1, 16, 64])
    h = g.n("LayerNormalization", "in_norm", x, g.w("in_norm_g", np.ones(64)), g.w("in_norm_b", np.zeros(64)),
            axis=-1, epsilon=1e-5)
    h = g.dense(h, 64, 64, "in_proj", bias=False)

    def rms(v, eps, prefix):
        sq = g.n("Pow", prefix + "_sq", v, g.w(prefix + "_two", 2.0))
        ms = g.n("ReduceMean", prefix + "_ms", sq, axes=[-1], keepdims=1)
        ve = g.n("Add", prefix + "_eps_add", ms, g.w(prefix + "_eps", eps))
        rs = g.n("Pow", prefix + "_rsqrt", ve, g.w(prefix + "_neg_half", -0.5))
        xn = g.n("Mul", prefix + "_normed", v, rs)
        return g.n("Mul", prefix + "_weight", xn, g.w(prefix + "_w", g.r.uniform(0.8, 1.2, 64)))

    h0 = rms(h, 1e-6, "attn_norm")
    gate = g.dense(h0, 64, 128, "gate_proj", bias=False)
    up = g.dense(h0, 64, 128, "up_proj", bias=False)
    sg = g.n("Sigmoid", "silu_sigmoid", gate)
    sl = g.n("Mul", "silu", gate, sg)
    gu = g.n("Mul", "gate_up", sl, up)
    dn = g.dense(gu, 128, 64, "down_proj", bias=False)
    r = g.n("Add", "residual", h0, dn)
    hf = rms(r, 1e-9, "final_norm")
    g.dense(hf, 64, 12, "lm_head", bias=False, std=3.0)
    g.out("lm_head")
    return g.model(), lambda rng, i: {"hidden": _tokens(rng, (1, 16, 64)) * rng.uniform(0.5, 2.0)}


@case("convnext_layerscale_1e6", "trap", set(),
      "ConvNeXt block on a 0..1 image: stem LN across Transposes (fused), block LN decomposed (eps 1e-6), GELU MLP, "
      "layer scale 1e-6 on the branch, residual, head LN decomposed eps 1e-12 after pooling: the 1e-6 branch is far "
      "below the residual's fp16 step, the eps far below the variance", classify=True)
def _convnext_layerscale_1e6():
    g = Graph("convnext_layerscale_1e6")
    x = g.inp("image", [1, 3, 32, 32])
    s = g.conv(x, 3, 24, 4, "stem", strides=[4, 4])
    t = g.n("Transpose", "stem_nhwc", s, perm=[0, 2, 3, 1])
    t = g.ln_fused(t, 24, 1e-6, "stem_ln")
    s = g.n("Transpose", "stem_nchw", t, perm=[0, 3, 1, 2])
    d = g.conv(s, 24, 24, 7, "dwconv", group=24, pads=[3, 3, 3, 3])
    d = g.n("Transpose", "block_nhwc", d, perm=[0, 2, 3, 1])
    d = g.ln_decomposed(d, 24, 1e-6, "block_ln", square="Pow")
    f = g.dense(d, 24, 96, "pwconv1")
    e = g.n("Div", "gelu_div", f, g.w("sqrt2", math.sqrt(2)))
    e = g.n("Erf", "gelu_erf", e)
    e = g.n("Add", "gelu_add", e, g.w("one", 1.0))
    e = g.n("Mul", "gelu_mul", f, e)
    e = g.n("Mul", "gelu_half", e, g.w("half", 0.5))
    f = g.dense(e, 96, 24, "pwconv2")
    f = g.n("Mul", "layer_scale", f, g.w("ls_gamma", np.full(24, 1e-6)))
    f = g.n("Transpose", "block_nchw", f, perm=[0, 3, 1, 2])
    r = g.n("Add", "residual", s, f)
    p = g.n("GlobalAveragePool", "gap", r)
    p = g.n("Flatten", "flatten", p, axis=1)
    p = g.ln_decomposed(p, 24, 1e-12, "head_ln", square="Pow")
    g.dense(p, 24, 10, "head", std=3.0)
    g.out("head_bias")
    return g.model(), lambda rng, i: {"image": _photo(rng, (1, 3, 32, 32))}


@case("unet_groupnorm_tiny_bias", "trap", set(),
      "UNet-ish: Conv on a 0..1 image, GroupNorm as Reshape+InstanceNormalization+Reshape, SiLU, a Conv whose bias is "
      "~1e-9 (0 in fp16), second GroupNorm, pooled head MatMul + 1e-9 bias: the biases are nothing next to O(1) activations",
      classify=True)
def _unet_groupnorm_tiny_bias():
    g = Graph("unet_groupnorm_tiny_bias")
    x = g.inp("image", [1, 3, 16, 16])

    def group_norm(v, prefix):
        shape = g.n("Shape", prefix + "_shape", v)
        gv = g.n("Reshape", prefix + "_to_groups", v, g.ints(prefix + "_gshape", [0, 4, -1]))
        inn = g.n("InstanceNormalization", prefix + "_in", gv, g.w(prefix + "_ones", np.ones(4)),
                  g.w(prefix + "_zeros", np.zeros(4)), epsilon=1e-5)
        back = g.n("Reshape", prefix + "_from_groups", inn, shape)
        sc = g.n("Mul", prefix + "_gamma", back, g.w(prefix + "_g", g.r.uniform(0.8, 1.2, (16, 1, 1))))
        return g.n("Add", prefix + "_beta", sc, g.w(prefix + "_b", g.r.normal(0, 0.05, (16, 1, 1))))

    def silu(v, prefix):
        return g.n("Mul", prefix, v, g.n("Sigmoid", prefix + "_sigmoid", v))

    c1 = g.conv(x, 3, 16, 3, "conv_in", pads=[1, 1, 1, 1])
    h = silu(group_norm(c1, "gn1"), "silu1")
    c2 = g.conv(h, 16, 16, 3, "conv_mid", pads=[1, 1, 1, 1], bias_values=g.r.normal(0, 1e-9, 16))
    h2 = silu(group_norm(c2, "gn2"), "silu2")
    p = g.n("GlobalAveragePool", "gap", h2)
    p = g.n("Flatten", "flatten", p, axis=1)
    g.dense(p, 16, 10, "head", std=4.0, bias_values=g.r.normal(0, 1e-9, 10))
    g.out("head_bias")
    return g.model(), lambda rng, i: {"image": _photo(rng, (1, 3, 16, 16))}


@case("tabular_mish_exp_overflow", "trap", set(),
      "tabular MLP: fused LN, then Mish written x*tanh(log(1+exp(x))) after a decomposed LN with learned gamma up to 4 "
      "and beta up to 2: exp overflows fp16 for x > 11.1 on a few values, log(inf)=inf, tanh=1, x*1=x, exact", classify=True)
def _tabular_mish_exp_overflow():
    g = Graph("tabular_mish_exp_overflow")
    x = g.inp("features", [32, 48])
    h = g.ln_fused(x, 48, 1e-5, "input_ln")
    h = g.dense(h, 48, 64, "fc1")

    def mish(v, prefix):
        e = g.n("Exp", prefix + "_exp", v)
        a = g.n("Add", prefix + "_add1", e, g.w(prefix + "_one", 1.0))
        sp = g.n("Log", prefix + "_softplus", a)
        th = g.n("Tanh", prefix + "_tanh", sp)
        return g.n("Mul", prefix, v, th)

    big_gamma = lambda: g.r.uniform(1.0, 4.0, 64)  # noqa: E731
    big_beta = lambda: g.r.uniform(0.0, 2.0, 64)  # noqa: E731
    h = g.ln_decomposed(h, 64, 1e-5, "ln1", square="Mul", gamma=big_gamma(), beta=big_beta())
    h = mish(h, "mish1")
    h = g.dense(h, 64, 64, "fc2")
    h = g.ln_decomposed(h, 64, 1e-5, "ln2", square="Pow", gamma=big_gamma(), beta=big_beta())
    h = mish(h, "mish2")
    g.dense(h, 64, 5, "head")
    g.out("head_bias")
    return g.model(), lambda rng, i: {"features": rng.normal(0, 1, (32, 48)) * rng.uniform(0.3, 3.0, 48) + rng.normal(0, 2, 48)}


@case("speech_glu_sigmoid_recip_exp", "trap", set(),
      "speech encoder on log-mel frames: projection, fused LN with gamma ~4, GLU gate whose sigmoid is written "
      "1/(1+exp(-z)) with logits to |z|~30: exp(-z) overflows to inf, 1/inf = 0 is the right gate; then a final RMSNorm "
      "Div(1,Sqrt(ms+1e-9))", classify=True)
def _speech_glu_sigmoid_recip_exp():
    g = Graph("speech_glu_sigmoid_recip_exp")
    x = g.inp("logmel", [1, 24, 40])
    h = g.dense(x, 40, 64, "proj")
    h = g.ln_fused(h, 64, 1e-5, "ln", gamma=g.r.uniform(3.0, 5.0, 64))
    z = g.dense(h, 64, 64, "gate", std=1.5)
    v = g.dense(h, 64, 64, "value")
    nz = g.n("Neg", "gate_neg", z)
    ez = g.n("Exp", "gate_exp", nz)
    dz = g.n("Add", "gate_1p", ez, g.w("one", 1.0))
    sg = g.n("Div", "gate_sigmoid", g.w("one_num", 1.0), dz)
    gv = g.n("Mul", "glu", v, sg)
    o = g.dense(gv, 64, 64, "out")
    r = g.n("Add", "residual", h, o)
    sq = g.n("Mul", "rms_sq", r, r)
    ms = g.n("ReduceMean", "rms_ms", sq, axes=[-1], keepdims=1)
    ve = g.n("Add", "rms_eps_add", ms, g.w("rms_eps", 1e-9))
    sd = g.n("Sqrt", "rms_sqrt", ve)
    inv = g.n("Div", "rms_inv", g.w("rms_one", 1.0), sd)
    xn = g.n("Mul", "rms_normed", r, inv)
    g.dense(xn, 64, 12, "head", std=3.0)
    g.out("head_bias")
    return g.model(), lambda rng, i: {"logmel": _log_mel(rng, (1, 24, 40))}


@case("detector_gn_silu_div_exp", "trap", set(),
      "detector neck: Conv on a 0..1 image, GroupNorm decomposed over Reshape[B,8,-1] (eps 1e-6, gamma 3..6), SiLU "
      "written x/(1+exp(-x)): exp(-x) overflows for x < -11.1, x/inf = -0 against a true -2e-4: harmless", classify=True)
def _detector_gn_silu_div_exp():
    g = Graph("detector_gn_silu_div_exp")
    x = g.inp("image", [2, 3, 16, 16])
    c = g.conv(x, 3, 32, 3, "conv", pads=[1, 1, 1, 1])
    shape = g.n("Shape", "conv_shape", c)
    gv = g.n("Reshape", "to_groups", c, g.ints("gshape", [0, 8, -1]))
    mu = g.n("ReduceMean", "gn_mean", gv, axes=[2], keepdims=1)
    d = g.n("Sub", "gn_sub", gv, mu)
    sq = g.n("Mul", "gn_sq", d, d)
    var = g.n("ReduceMean", "gn_var", sq, axes=[2], keepdims=1)
    ve = g.n("Add", "gn_var_eps", var, g.w("gn_eps", 1e-6))
    sd = g.n("Sqrt", "gn_std", ve)
    xn = g.n("Div", "gn_div", d, sd)
    back = g.n("Reshape", "from_groups", xn, shape)
    sc = g.n("Mul", "gn_gamma", back, g.w("gn_g", g.r.uniform(3.0, 6.0, (32, 1, 1))))
    sh = g.n("Add", "gn_beta", sc, g.w("gn_b", g.r.normal(0, 0.5, (32, 1, 1))))
    ng = g.n("Neg", "silu_neg", sh)
    e = g.n("Exp", "silu_exp", ng)
    den = g.n("Add", "silu_1p", e, g.w("one", 1.0))
    si = g.n("Div", "silu", sh, den)
    c2 = g.conv(si, 32, 16, 1, "conv_pw")
    p = g.n("GlobalAveragePool", "gap", c2)
    p = g.n("Flatten", "flatten", p, axis=1)
    g.n("Gemm", "head", p, g.w("head_w", g.r.normal(0, 4 / math.sqrt(16), (16, 6))), g.w("head_b", np.zeros(6)))
    g.out("head")
    return g.model(), lambda rng, i: {"image": _photo(rng, (2, 3, 16, 16))}


@case("clip_l2norm_sumsq_eps12", "trap", set(),
      "CLIP-ish text tower: fused LN, mean pool, projection, L2 normalization Mul(x,x)/ReduceSum/Add 1e-12/Sqrt/Div and "
      "cosine logits x20: the sum of 32 squares of O(1) values fits, 1e-12 is nothing", classify=True)
def _clip_l2norm_sumsq_eps12():
    g = Graph("clip_l2norm_sumsq_eps12")
    x = g.inp("token_features", [4, 12, 32])
    h = g.dense(x, 32, 48, "embed")
    h = g.ln_fused(h, 48, 1e-5, "ln")
    f = g.dense(h, 48, 48, "mlp")
    f = g.n("Relu", "mlp_relu", f)
    p = g.n("ReduceMean", "pool", f, axes=[1], keepdims=0)
    e = g.dense(p, 48, 32, "text_proj", bias=False)
    sq = g.n("Mul", "l2_sq", e, e)
    ss = g.n("ReduceSum", "l2_sumsq", sq, g.ints("l2_axes", [-1]), keepdims=1)
    se = g.n("Add", "l2_eps_add", ss, g.w("l2_eps", 1e-12))
    nr = g.n("Sqrt", "l2_norm", se)
    en = g.n("Div", "l2_normalized", e, nr)
    protos = g.r.normal(0, 1, (32, 10))
    protos /= np.linalg.norm(protos, axis=0, keepdims=True)
    cos = g.n("MatMul", "cosine", en, g.w("prototypes", protos))
    g.n("Mul", "logit_scale", cos, g.w("scale", 20.0))
    g.out("logit_scale")
    return g.model(), lambda rng, i: {"token_features": _tokens(rng, (4, 12, 32))}


@case("swin_patch_merge_ln_eps12", "trap", set(),
      "Swin-ish: 4x4 patch Conv on a 0..1 image, NHWC fused LN, 2x2 patch merging by Reshape/Transpose/Reshape, then LN "
      "decomposed with eps 1e-12 over the merged 4C: the merged values are normalized (variance ~1)", classify=True)
def _swin_patch_merge_ln_eps12():
    g = Graph("swin_patch_merge_ln_eps12")
    x = g.inp("image", [1, 3, 32, 32])
    p = g.conv(x, 3, 16, 4, "patch_embed", strides=[4, 4])
    t = g.n("Transpose", "to_nhwc", p, perm=[0, 2, 3, 1])
    t = g.ln_fused(t, 16, 1e-5, "embed_ln")
    m = g.n("Reshape", "merge_split", t, g.ints("split_shape", [1, 4, 2, 4, 2, 16]))
    m = g.n("Transpose", "merge_perm", m, perm=[0, 1, 3, 4, 2, 5])
    m = g.n("Reshape", "merge_join", m, g.ints("join_shape", [1, 4, 4, 64]))
    m = g.ln_decomposed(m, 64, 1e-12, "merge_ln", square="Pow")
    m = g.dense(m, 64, 32, "reduction", bias=False)
    pooled = g.n("ReduceMean", "pool", m, axes=[1, 2], keepdims=0)
    g.dense(pooled, 32, 10, "head", std=3.0)
    g.out("head_bias")
    return g.model(), lambda rng, i: {"image": _photo(rng, (1, 3, 32, 32))}


@case("t5_rms_div_tiny_bias", "trap", set(),
      "T5-ish: fused LN on the inputs, RMSNorm Div(x, Sqrt(ms+1e-6)), ReLU FFN whose output bias is ~1e-9, residual, "
      "final RMSNorm Mul(x, Div(1, Sqrt(ms+1e-9))), head + 1e-9 bias: every tiny constant sits on O(1) values",
      classify=True)
def _t5_rms_div_tiny_bias():
    g = Graph("t5_rms_div_tiny_bias")
    x = g.inp("hidden", [2, 16, 32])
    h = g.ln_fused(x, 32, 1e-5, "input_ln")
    h = g.dense(h, 32, 32, "in_proj", bias=False)
    sq = g.n("Pow", "rms1_sq", h, g.w("two", 2.0))
    ms = g.n("ReduceMean", "rms1_ms", sq, axes=[-1], keepdims=1)
    ve = g.n("Add", "rms1_eps_add", ms, g.w("rms1_eps", 1e-6))
    sd = g.n("Sqrt", "rms1_sqrt", ve)
    h0 = g.n("Div", "rms1_div", h, sd)
    h0 = g.n("Mul", "rms1_weight", h0, g.w("rms1_w", g.r.uniform(0.8, 1.2, 32)))
    f = g.dense(h0, 32, 64, "wi", bias=False)
    f = g.n("Relu", "ffn_relu", f)
    f = g.dense(f, 64, 32, "wo", bias_values=g.r.normal(0, 1e-9, 32))
    r = g.n("Add", "residual", h0, f)
    sq2 = g.n("Mul", "rms2_sq", r, r)
    ms2 = g.n("ReduceMean", "rms2_ms", sq2, axes=[-1], keepdims=1)
    ve2 = g.n("Add", "rms2_eps_add", ms2, g.w("rms2_eps", 1e-9))
    sd2 = g.n("Sqrt", "rms2_sqrt", ve2)
    inv = g.n("Div", "rms2_inv", g.w("one", 1.0), sd2)
    h2 = g.n("Mul", "rms2_normed", r, inv)
    h2 = g.n("Mul", "rms2_weight", h2, g.w("rms2_w", g.r.uniform(0.8, 1.2, 32)))
    g.dense(h2, 32, 8, "head", std=3.0, bias_values=g.r.normal(0, 1e-9, 8))
    g.out("head_bias")
    return g.model(), lambda rng, i: {"hidden": _tokens(rng, (2, 16, 32))}


@case("conformer_layerscale_fused_eps12", "trap", set(),
      "audio Conv1d stem on log-mel [B,40,T], LN over channels across a Transpose (decomposed, eps 1e-5), MLP branch with a "
      "1e-6 layer scale, residual, final fused LayerNormalization(epsilon=1e-12): all after the first norm, all O(1)",
      classify=True)
def _conformer_layerscale_fused_eps12():
    g = Graph("conformer_layerscale_fused_eps12")
    x = g.inp("logmel", [1, 40, 64])
    c = g.conv(x, 40, 32, (3,), "stem", pads=[1, 1])
    t = g.n("Transpose", "to_btc", c, perm=[0, 2, 1])
    h = g.ln_decomposed(t, 32, 1e-5, "ln_in", square="Mul")
    f = g.dense(h, 32, 64, "ff1")
    f = g.n("Relu", "ff_relu", f)
    f = g.dense(f, 64, 32, "ff2")
    f = g.n("Mul", "layer_scale", f, g.w("ls", g.r.uniform(0.5e-6, 2e-6, 32)))
    r = g.n("Add", "residual", h, f)
    o = g.ln_fused(r, 32, 1e-12, "final_ln")
    g.dense(o, 32, 6, "head", std=3.0)
    g.out("head_bias")
    return g.model(), lambda rng, i: {"logmel": _log_mel(rng, (1, 40, 64))}


@case("gpt2_gelu_tanh_pow3", "trap", set(),
      "GPT-2-ish MLP on a normalized stream: fused LN on the N(0,1) embeddings, ln_1 decomposed, GELU tanh approximation "
      "with Pow(x,3) (overflows fp16 only for |x| > 40, the values stay < 10), residual, ln_f decomposed eps 1e-5", classify=True)
def _gpt2_gelu_tanh_pow3():
    g = Graph("gpt2_gelu_tanh_pow3")
    x = g.inp("embeddings", [1, 16, 32])
    h = g.ln_fused(x, 32, 1e-5, "emb_ln")
    a = g.ln_decomposed(h, 32, 1e-5, "ln_1", square="Pow")
    f = g.dense(a, 32, 128, "c_fc")
    cube = g.n("Pow", "gelu_cube", f, g.w("three", 3.0))
    inner = g.n("Mul", "gelu_cube_coef", cube, g.w("coef", 0.044715))
    inner = g.n("Add", "gelu_inner", f, inner)
    inner = g.n("Mul", "gelu_scale", inner, g.w("sqrt_2_pi", math.sqrt(2 / math.pi)))
    th = g.n("Tanh", "gelu_tanh", inner)
    th = g.n("Add", "gelu_1p", th, g.w("one", 1.0))
    y = g.n("Mul", "gelu_x", f, th)
    y = g.n("Mul", "gelu_half", y, g.w("half", 0.5))
    y = g.dense(y, 128, 32, "c_proj")
    r = g.n("Add", "residual", h, y)
    o = g.ln_decomposed(r, 32, 1e-5, "ln_f", square="Mul")
    g.dense(o, 32, 16, "lm_head", bias=False, std=3.0)
    g.out("lm_head")
    return g.model(), lambda rng, i: {"embeddings": _tokens(rng, (1, 16, 32))}


@case("convnext_channels_first_ln_eps12", "trap", set(),
      "ConvNeXt 'channels_first' LayerNorm written over axis 1 of NCHW (no Transpose), after a GroupNorm(1) done as "
      "Reshape[B,1,-1]+InstanceNormalization on a 0..1 image's stem: the second norm's eps 1e-12 flushes in fp16, its "
      "variance is ~1", classify=True)
def _convnext_channels_first_ln_eps12():
    g = Graph("convnext_channels_first_ln_eps12")
    x = g.inp("image", [2, 3, 24, 24])
    s = g.conv(x, 3, 16, 4, "stem", strides=[4, 4])
    shape = g.n("Shape", "stem_shape", s)
    gv = g.n("Reshape", "gn1_flatten", s, g.ints("gn1_shape", [0, 1, -1]))
    gv = g.n("InstanceNormalization", "gn1", gv, g.w("gn1_s", np.ones(1)), g.w("gn1_b", np.zeros(1)), epsilon=1e-5)
    h = g.n("Reshape", "gn1_unflatten", gv, shape)
    h = g.n("Mul", "gn1_gamma", h, g.w("gn1_g", g.r.uniform(0.8, 1.2, (16, 1, 1))))
    h = g.n("Add", "gn1_beta", h, g.w("gn1_bb", g.r.normal(0, 0.05, (16, 1, 1))))
    d = g.conv(h, 16, 16, 3, "dwconv", group=16, pads=[1, 1, 1, 1])
    d = g.ln_decomposed(d, 16, 1e-12, "cf_ln", square="Pow", axes=(1,), gamma=g.r.uniform(0.8, 1.2, (16, 1, 1)),
                        beta=g.r.normal(0, 0.05, (16, 1, 1)))
    d = g.conv(d, 16, 32, 1, "pw1")
    d = g.n("Relu", "pw_relu", d)
    d = g.conv(d, 32, 16, 1, "pw2")
    r = g.n("Add", "residual", h, d)
    p = g.n("GlobalAveragePool", "gap", r)
    p = g.n("Flatten", "flatten", p, axis=1)
    g.dense(p, 16, 10, "head", std=3.0)
    g.out("head_bias")
    return g.model(), lambda rng, i: {"image": _photo(rng, (2, 3, 24, 24))}


# ----------------------------------------------------------------------------- negatives


@case("neg_quiet_audio_standardize", "negative", {"std_sq", "std_var", "std_var_eps", "std_sqrt"},
      "per-frame standardization (eps 1e-8) of raw quiet audio (amplitude 1e-4..3e-3): squares ~1e-9..1e-5 flush or keep "
      "few digits in fp16, the variance (~1e-9..1e-5) is near eps on quiet frames and eps flushes: square, mean of squares, "
      "eps-add and sqrt stay float32 (the std, >= 1e-4, fits)")
def _neg_quiet_audio_standardize():
    g = Graph("neg_quiet_audio_standardize")
    x = g.inp("wave", [1, 8, 64])
    mu = g.n("ReduceMean", "std_mean", x, axes=[-1], keepdims=1)
    d = g.n("Sub", "std_sub", x, mu)
    sq = g.n("Mul", "std_sq", d, d)
    var = g.n("ReduceMean", "std_var", sq, axes=[-1], keepdims=1)
    ve = g.n("Add", "std_var_eps", var, g.w("std_eps", 1e-8))
    sd = g.n("Sqrt", "std_sqrt", ve)
    xn = g.n("Div", "std_div", d, sd)
    h = g.dense(xn, 64, 32, "feat")
    h = g.n("Relu", "feat_relu", h)
    h = g.dense(h, 32, 32, "hidden")
    h = g.n("Relu", "hidden_relu", h)
    g.dense(h, 32, 6, "head")
    g.out("head_bias")

    def one(rng, i):
        t = np.arange(8 * 64) / 16000.0
        f0 = rng.uniform(100, 250)
        voiced = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 6)) / k for k in range(1, 6))
        amp = np.exp(rng.uniform(np.log(1e-4), np.log(3e-3), 8)).repeat(64)
        wave = amp * voiced / 2 + rng.normal(0, 1e-5, t.shape)
        return {"wave": wave.reshape(1, 8, 64)}

    return g.model(), one


@case("neg_raw_score_attention_pool", "negative", {"pool_exp", "pool_sum", "pool_div"},
      "attention pooling whose scores come straight from raw log-mel frames (|score| up to ~25) through a softmax written "
      "exp/sum/div without the max: exp overflows fp16 (inf/inf = NaN), so exp, its sum and the divide stay float32; "
      "the value path is normalized (fused LN) and fine")
def _neg_raw_score_attention_pool():
    g = Graph("neg_raw_score_attention_pool")
    x = g.inp("logmel", [4, 20, 16])
    v = g.dense(x, 16, 32, "value")
    v = g.ln_fused(v, 32, 1e-5, "value_ln")
    s = g.dense(x, 16, 1, "score", bias=False)
    e = g.n("Exp", "pool_exp", s)
    z = g.n("ReduceSum", "pool_sum", e, g.ints("item_axis", [1]), keepdims=1)
    a = g.n("Div", "pool_div", e, z)
    wv = g.n("Mul", "weighted", v, a)
    p = g.n("ReduceSum", "pooled", wv, g.ints("item_axis2", [1]), keepdims=0)
    p = g.dense(p, 32, 32, "fc")
    p = g.n("Relu", "fc_relu", p)
    g.dense(p, 32, 5, "head", std=3.0)
    g.out("head_bias")
    return g.model(), lambda rng, i: {"logmel": _log_mel(rng, (4, 20, 16)) * 1.3}


@case("neg_pixel_patch_l2", "negative", {"l2_sumsq", "l2_eps_add", "l2_sqrt"},
      "patches of raw 0..255 pixels L2-normalized before the embedding: each square fits (<= 65025) but the sum over 192 "
      "values (~2e6..1e7) overflows fp16, so the sum, the eps-add and the sqrt that consume it stay float32")
def _neg_pixel_patch_l2():
    g = Graph("neg_pixel_patch_l2")
    x = g.inp("pixels", [1, 3, 32, 32])
    p = g.n("Reshape", "patch_split", x, g.ints("split", [1, 3, 4, 8, 4, 8]))
    p = g.n("Transpose", "patch_perm", p, perm=[0, 2, 4, 1, 3, 5])
    p = g.n("Reshape", "patch_join", p, g.ints("join", [1, 16, 192]))
    sq = g.n("Mul", "l2_sq", p, p)
    ss = g.n("ReduceSum", "l2_sumsq", sq, g.ints("axes", [-1]), keepdims=1)
    se = g.n("Add", "l2_eps_add", ss, g.w("eps", 1e-6))
    nr = g.n("Sqrt", "l2_sqrt", se)
    pn = g.n("Div", "l2_div", p, nr)
    h = g.dense(pn, 192, 32, "embed", std=math.sqrt(192))
    h = g.ln_fused(h, 32, 1e-5, "embed_ln")
    h = g.n("Relu", "embed_relu", h)
    h = g.n("ReduceMean", "pool", h, axes=[1], keepdims=0)
    g.dense(h, 32, 10, "head", std=3.0)
    g.out("head_bias")
    return g.model(), lambda rng, i: {"pixels": np.round(_photo(rng, (1, 3, 32, 32), 255.0))}


@case("neg_depth_mm_standardize", "negative", {"depth_sq", "depth_var", "depth_var_eps", "depth_std"},
      "depth map in millimetres (400..6000) standardized per image with a decomposed norm: (d-mean)^2 reaches ~1e7 and the "
      "variance ~1e6, both past fp16's 65504, so square, mean, eps-add and sqrt stay float32; the std (~1e3) fits")
def _neg_depth_mm_standardize():
    g = Graph("neg_depth_mm_standardize")
    x = g.inp("depth_mm", [1, 1, 32, 48])
    axes = [1, 2, 3]
    mu = g.n("ReduceMean", "depth_mean", x, axes=axes, keepdims=1)
    d = g.n("Sub", "depth_sub", x, mu)
    sq = g.n("Pow", "depth_sq", d, g.w("two", 2.0))
    var = g.n("ReduceMean", "depth_var", sq, axes=axes, keepdims=1)
    ve = g.n("Add", "depth_var_eps", var, g.w("eps", 1e-5))
    sd = g.n("Sqrt", "depth_std", ve)
    xn = g.n("Div", "depth_div", d, sd)
    c = g.conv(xn, 1, 16, 3, "conv1", strides=[2, 2], pads=[1, 1, 1, 1])
    c = g.n("Relu", "relu1", c)
    c = g.conv(c, 16, 16, 3, "conv2", strides=[2, 2], pads=[1, 1, 1, 1])
    c = g.n("InstanceNormalization", "inorm", c, g.w("in_s", np.ones(16)), g.w("in_b", np.zeros(16)), epsilon=1e-5)
    c = g.n("Relu", "relu2", c)
    p = g.n("GlobalAveragePool", "gap", c)
    p = g.n("Flatten", "flatten", p, axis=1)
    g.n("Gemm", "head", p, g.w("head_w", g.r.normal(0, 3 / 4, (16, 8))), g.w("head_b", np.zeros(8)))
    g.out("head")

    def one(rng, i):
        h, w = 32, 48
        yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
        floor = rng.uniform(1500, 4000) + (yy - h) * rng.uniform(20, 60)  # a receding floor plane
        depth = np.maximum(floor, 400.0)
        for _ in range(rng.integers(2, 5)):  # boxes in front
            y0, x0 = rng.integers(0, h - 8), rng.integers(0, w - 8)
            depth[y0:y0 + rng.integers(6, 16), x0:x0 + rng.integers(6, 20)] = rng.uniform(500, 2500)
        wall = rng.uniform(4000, 6000)
        depth[: rng.integers(4, 12)] = wall
        depth = np.round(np.clip(depth + rng.normal(0, 5, depth.shape), 400, 6000))
        return {"depth_mm": depth.reshape(1, 1, h, w)}

    return g.model(), one


@case("neg_raw_count_softplus_rate", "negative", {"rate_exp", "rate_1p", "rate_log"},
      "Poisson-rate head on raw event counts (0..~60 per window): z = counts @ W reaches |z| ~ 40, softplus written "
      "log(1+exp(z)) overflows fp16 (exp > 65504 for z > 11.1) and the output would be inf: exp, the 1+ and the log stay "
      "float32 (log's output fits); the classification branch is normalized by a fused LN and fine")
def _neg_raw_count_softplus_rate():
    g = Graph("neg_raw_count_softplus_rate")
    x = g.inp("counts", [8, 24])
    h = g.ln_fused(x, 24, 1e-5, "count_ln")
    h = g.dense(h, 24, 32, "cls_fc1")
    h = g.n("Relu", "cls_relu1", h)
    h = g.dense(h, 32, 32, "cls_fc2")
    h = g.n("Relu", "cls_relu2", h)
    g.dense(h, 32, 4, "cls_head", std=3.0)
    z = g.dense(x, 24, 3, "rate_logit")
    e = g.n("Exp", "rate_exp", z)
    a = g.n("Add", "rate_1p", e, g.w("one", 1.0))
    g.n("Log", "rate_log", a)
    g.out("cls_head_bias", "rate_log")

    def one(rng, i):
        rates = rng.gamma(2.0, rng.uniform(3, 12), 24)
        return {"counts": rng.poisson(np.broadcast_to(rates, (8, 24))).astype(np.float64)}

    return g.model(), one


# ============================================================================= judging


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a)))) if a.size else 0.0


def accuracy(reference: list, candidate: list, classify: bool) -> dict:
    """Relative RMS error per output, new NaN/Inf, and (classification) argmax on rows with a clear margin."""
    out = {"ok": True, "outputs": {}}
    for name in reference[0]:
        ref = np.stack([r[name] for r in reference])
        got = np.stack([c[name] for c in candidate])
        finite = np.isfinite(ref)
        new_bad = int(np.count_nonzero(finite & ~np.isfinite(got)))
        if new_bad:
            rel = float("inf")
        else:
            rel = _rms(got[finite] - ref[finite]) / max(_rms(ref[finite]), 1e-30)
        entry = {"rel_rms": rel, "new_nan_inf": new_bad}
        ok = new_bad == 0 and rel <= RTOL_RMS
        if classify:
            rows_ref = ref.reshape(-1, ref.shape[-1])
            rows_got = got.reshape(-1, got.shape[-1])
            top2 = np.sort(rows_ref, axis=-1)[:, -2:]
            clear = (top2[:, 1] - top2[:, 0]) >= MARGIN * _rms(rows_ref)
            same = np.argmax(rows_ref, -1) == np.argmax(np.nan_to_num(rows_got, nan=-np.inf), -1)
            flips = int(np.count_nonzero(clear & ~same))
            entry.update({"argmax_rows": int(clear.sum()), "argmax_flips": flips})
            ok = ok and flips == 0
        entry["ok"] = ok
        out["outputs"][name] = entry
        out["ok"] &= ok
    return out


def describe_accuracy(acc: dict) -> str:
    parts = []
    for name, e in acc["outputs"].items():
        s = f"{name}: rel RMS {e['rel_rms']:.2g}"
        if e["new_nan_inf"]:
            s += f", {e['new_nan_inf']} new NaN/Inf"
        if "argmax_flips" in e:
            s += f", argmax flips {e['argmax_flips']}/{e['argmax_rows']}"
        parts.append(s)
    return "; ".join(parts)


def soundness(c: Case) -> dict:
    """The case's own checks, no ampconv: float32 vs float64, all-fp16, ``needed`` suffices, each needed node matters."""
    model, samples, needed, _ = c.build()
    reference = judge.run(model, samples)
    finite = all(np.isfinite(v).all() for r in reference for v in r.values())
    try:
        ref64 = judge.run(judge.to_double(model), samples, dtype=np.float64)
        ref_ok = finite and all(_rms(r[k] - q[k]) <= 1e-4 * max(_rms(q[k]), 1e-30) for r, q in zip(reference, ref64) for k in r)
    except Exception:  # noqa: BLE001 - no double kernel for some op (Erf): finiteness alone
        ref_ok = finite
    all_fp16 = accuracy(reference, judge.run(judge.emulate_mixed(model, set()), samples), c.classify)
    suffices = accuracy(reference, judge.run(judge.emulate_mixed(model, needed), samples), c.classify)
    each = {n: not accuracy(reference, judge.run(judge.emulate_mixed(model, needed - {n}), samples), c.classify)["ok"]
            for n in sorted(needed)}
    return {"reference_ok": ref_ok, "all_fp16_ok": all_fp16["ok"], "all_fp16": describe_accuracy(all_fp16),
            "needed_suffices": suffices["ok"], "needed": describe_accuracy(suffices), "needed_each": each}


def excess_limit(nodes: int) -> float:
    return max(2.0, 0.1 * nodes)


def convert_default(src: Path, dst: Path):
    import ampconv

    return ampconv.convert(str(src), str(dst), ampconv.Config(overwrite=True))


def measure(c: Case, work: Path) -> dict:
    """Convert ``c`` with defaults (no data) and judge the result."""
    model, samples, needed, why = c.build()
    work.mkdir(parents=True, exist_ok=True)
    src, dst = work / f"{c.name}.onnx", work / f"{c.name}.fp16.onnx"
    onnx.save(model, str(src))
    row = {"case": c.name, "kind": c.kind, "nodes": len(model.graph.node), "needed": sorted(needed), "why": why}
    start = time.perf_counter()
    try:
        report = convert_default(src, dst)
    except Exception as error:  # noqa: BLE001 - a failed conversion is a result
        row.update({"error": f"{type(error).__name__}: {error}"[:500], "accurate": False, "held": False,
                    "seconds": time.perf_counter() - start})
        return row
    row["seconds"] = time.perf_counter() - start
    high = sorted(n["name"] for n in report.nodes if n.get("precision") == "HIGH")
    converted = onnx.load(str(dst))
    casts = sum(1 for n in converted.graph.node if n.op_type == "Cast")
    reference = judge.run(model, samples)
    acc = accuracy(reference, judge.run(judge.emulate_converted(converted), samples), c.classify)
    row.update({
        "high": high, "high_count": len(high), "excess": len(high) - len(needed),
        "extra": sorted(set(high) - needed), "missing": sorted(needed - set(high)),
        "casts": casts, "accurate": acc["ok"], "accuracy": describe_accuracy(acc),
        "high_rules": {n["name"]: n.get("rule") for n in report.nodes if n.get("precision") == "HIGH"},
    })
    row["excess_limit"] = excess_limit(row["nodes"])
    row["excess_ok"] = row["excess"] <= row["excess_limit"]
    row["keeps_needed"] = not row["missing"]
    row["told"] = told(report, samples)
    row["held"] = row["accurate"] and row["excess_ok"]
    return row


def told(report, samples: list) -> bool:
    """Whether the default report told the user the model may not hold on these samples: a warning, or an envelope
    entry whose ``holds_to`` is below the samples' largest magnitude of that input (the issue's "told")."""
    if report.warnings:
        return True
    reach = {}
    for sample in samples:
        for name, value in sample.items():
            reach[name] = max(reach.get(name, 0.0), float(np.max(np.abs(value))))
    return any(entry["holds_to"] < reach.get(entry["input"], 0.0) for entry in (report.envelope or []))


def table(rows: list) -> str:
    lines = ["| case | kind | nodes | HIGH nodes | needed | excess | casts | accurate |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['case']} | {r['kind']} | {r['nodes']} | ERROR | {len(r['needed'])} | - | - | NO |")
            continue
        acc = "yes" if r["accurate"] else "NO"
        if r["kind"] == "negative" and r["missing"]:
            acc += f" (needed lowered: {', '.join(r['missing'])})"
        if not r["accurate"]:
            acc += ", told" if r["told"] else ", SILENT"
        lines.append(f"| {r['case']} | {r['kind']} | {r['nodes']} | {r['high_count']} | {len(r['needed'])} | {r['excess']} | "
                     f"{r['casts']} | {acc} |")
    held = sum(1 for r in rows if r.get("held"))
    accurate = sum(1 for r in rows if r.get("accurate"))
    within = sum(1 for r in rows if r.get("excess_ok"))
    negs = [r for r in rows if r["kind"] == "negative"]
    kept = sum(1 for r in negs if r.get("keeps_needed"))
    lines += ["", f"**held (excess <= max(2, 10% of nodes) and accurate): {held}/{len(rows)}**", "",
              f"- accurate: {accurate}/{len(rows)}; within the excess target: {within}/{len(rows)}; "
              f"negatives keeping every needed node float32: {kept}/{len(negs)}",
              f"- Casts in all: {sum(r.get('casts', 0) for r in rows)}; HIGH nodes in all: "
              f"{sum(r.get('high_count', 0) for r in rows)} (needed in all: {sum(len(r['needed']) for r in rows)})"]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the rows as JSON after the table")
    ap.add_argument("--only", default="", help="comma list of case names")
    ap.add_argument("--soundness", action="store_true", help="check the cases themselves (no ampconv)")
    ap.add_argument("--extra", action="store_true", help="list each case's extra float32 nodes under the table")
    args = ap.parse_args(argv)
    cases = [by_name(n) for n in args.only.split(",")] if args.only else CASES
    if args.soundness:
        bad = 0
        for c in cases:
            s = soundness(c)
            good = s["reference_ok"] and s["needed_suffices"] and all(s["needed_each"].values()) and (
                s["all_fp16_ok"] == (c.kind == "trap"))
            bad += not good
            print(f"{'ok ' if good else 'BAD'} {c.name}: ref {s['reference_ok']}, all-fp16 {s['all_fp16_ok']} "
                  f"[{s['all_fp16']}], needed suffices {s['needed_suffices']} [{s['needed']}], each {s['needed_each']}")
        return 1 if bad else 0
    import ampconv

    commit = "?"
    try:
        import subprocess

        commit = subprocess.run(["git", "-C", str(Path(ampconv.__file__).parent), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
    except Exception:  # noqa: BLE001
        pass
    print(f"ampconv from {ampconv.__file__} (commit {commit})")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="blind-settled-") as tmp:
        rows = [measure(c, Path(tmp) / c.name) for c in cases]
    print(table(rows))
    print(f"\n{len(rows)} cases in {time.perf_counter() - start:.1f} s (conversions {sum(r['seconds'] for r in rows):.1f} s)")
    if args.extra:
        print("\n| case | extra float32 nodes (rule) | needed lowered | accuracy |\n|---|---|---|---|")
        for r in rows:
            if "error" in r:
                print(f"| {r['case']} | ERROR {r['error'][:200]} | | |")
                continue
            extra = ", ".join(f"{n} ({r['high_rules'].get(n)})" for n in r["extra"]) or "-"
            print(f"| {r['case']} | {extra} | {', '.join(r['missing']) or '-'} | {r['accuracy']} |")
    if args.json:
        print(json.dumps(rows, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
