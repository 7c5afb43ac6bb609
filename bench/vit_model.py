"""A ViT-S/16 at 224x224 as torch's legacy (TorchScript) exporter writes it, built with numpy and onnx.helper.

No torch is needed: the graph is written node by node in the exporter's
spelling, and the weights are seeded random with the scales of a trained
ViT-S (truncated-normal 0.02 linear weights, LayerNorm gains around 1 and
small offsets, a learned position embedding of about 0.02), so a float32
forward pass sees activations of a real model's order of magnitude.

- patch embedding: ``Conv`` 16x16 stride 16, ``Reshape``, ``Transpose``,
  the class token ``Concat``ed in front, the position embedding ``Add``ed;
- every LayerNorm decomposed (opset 13: ``ReduceMean``, ``Sub``, ``Pow`` 2,
  ``ReduceMean``, ``Add`` eps, ``Sqrt``, ``Div``, ``Mul`` gain, ``Add`` offset);
- attention by ``MatMul`` / ``Softmax`` (``Reshape``, ``Transpose``, ``Gather``
  of q, k, v from one projection, the scale as a ``Mul``);
- GELU through ``Erf`` (``Div`` by sqrt 2, ``Erf``, ``Add`` 1, ``Mul``, ``Mul`` 0.5);
- the classifier reads the class token (``Gather``) through a ``Gemm``.

``depth=12`` (the default) is the full model: 22.1M parameters, 88 MiB of
float32 weights, 25 LayerNorms; a smaller depth keeps every spelling for a
quick test (``tests/calibration/test_synthetic_budget.py``).
"""

from __future__ import annotations

import dataclasses
from typing import List

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 8
INPUT = "pixel_values"
OUTPUT = "logits"


@dataclasses.dataclass(frozen=True)
class VitSpec:
    """The shape of the model: ViT-S/16 at 224x224 by default."""

    depth: int = 12
    dim: int = 384
    heads: int = 6
    mlp: int = 1536
    image: int = 224
    patch: int = 16
    classes: int = 1000
    eps: float = 1e-6
    seed: int = 0

    @property
    def tokens(self) -> int:
        """Patches plus the class token."""
        return (self.image // self.patch) ** 2 + 1


class _Builder:
    """Nodes and initializers appended in order, each name unique."""

    def __init__(self, spec: VitSpec) -> None:
        self.spec = spec
        self.rng = np.random.default_rng(spec.seed)
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[TensorProto] = []
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def const(self, stem: str, array) -> str:
        array = np.asarray(array)
        name = self.name(stem)
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def weight(self, stem: str, shape, std: float = 0.02) -> str:
        values = np.clip(self.rng.standard_normal(shape), -2.0, 2.0) * std  # truncated normal, as timm inits
        return self.const(stem, values.astype(np.float32))

    def node(self, op: str, inputs, stem: str | None = None, **attrs) -> str:
        out = self.name(stem or op.lower())
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=f"/{out}/{op}", **attrs))
        return out

    def layer_norm(self, x: str) -> str:
        """LayerNorm over the last axis, decomposed as the legacy exporter writes it."""
        dim = self.spec.dim
        mean = self.node("ReduceMean", [x], "ln_mean", axes=[-1], keepdims=1)
        centred = self.node("Sub", [x, mean], "ln_sub")
        square = self.node("Pow", [centred, self.const("two", np.array(2.0, np.float32))], "ln_pow")
        variance = self.node("ReduceMean", [square], "ln_var", axes=[-1], keepdims=1)
        shifted = self.node("Add", [variance, self.const("eps", np.array(self.spec.eps, np.float32))], "ln_eps")
        root = self.node("Sqrt", [shifted], "ln_sqrt")
        normed = self.node("Div", [centred, root], "ln_div")
        gain = (1.0 + 0.1 * self.rng.standard_normal(dim)).astype(np.float32)
        offset = (0.02 * self.rng.standard_normal(dim)).astype(np.float32)
        scaled = self.node("Mul", [normed, self.const("ln_gain", gain)], "ln_mul")
        return self.node("Add", [scaled, self.const("ln_offset", offset)], "ln_add")

    def linear(self, x: str, fan_in: int, fan_out: int, stem: str) -> str:
        product = self.node("MatMul", [x, self.weight(f"{stem}_w", (fan_in, fan_out))], f"{stem}_matmul")
        bias = self.const(f"{stem}_b", (0.01 * self.rng.standard_normal(fan_out)).astype(np.float32))
        return self.node("Add", [product, bias], f"{stem}_bias")

    def gelu(self, x: str) -> str:
        """GELU through Erf: x * 0.5 * (1 + erf(x / sqrt 2)), as torch exports ``nn.GELU``."""
        scaled = self.node("Div", [x, self.const("sqrt2", np.array(np.sqrt(2.0), np.float32))], "gelu_div")
        erf = self.node("Erf", [scaled], "gelu_erf")
        shifted = self.node("Add", [erf, self.const("one", np.array(1.0, np.float32))], "gelu_add")
        product = self.node("Mul", [x, shifted], "gelu_mul")
        return self.node("Mul", [product, self.const("half", np.array(0.5, np.float32))], "gelu_half")

    def attention(self, x: str) -> str:
        spec = self.spec
        head = spec.dim // spec.heads
        qkv = self.linear(x, spec.dim, 3 * spec.dim, "qkv")
        shaped = self.node("Reshape", [qkv, self.const("qkv_shape", np.array([1, spec.tokens, 3, spec.heads, head]))])
        split = self.node("Transpose", [shaped], "qkv_perm", perm=[2, 0, 3, 1, 4])
        q, k, v = (self.node("Gather", [split, self.const("index", np.array(i))], f"gather_{part}", axis=0)
                   for i, part in enumerate("qkv"))
        kt = self.node("Transpose", [k], "k_t", perm=[0, 1, 3, 2])
        scores = self.node("MatMul", [q, kt], "scores")
        scaled = self.node("Mul", [scores, self.const("scale", np.array(head ** -0.5, np.float32))], "scores_scale")
        probs = self.node("Softmax", [scaled], "softmax", axis=-1)
        context = self.node("MatMul", [probs, v], "context")
        merged = self.node("Transpose", [context], "context_perm", perm=[0, 2, 1, 3])
        flat = self.node("Reshape", [merged, self.const("merge_shape", np.array([1, spec.tokens, spec.dim]))])
        return self.linear(flat, spec.dim, spec.dim, "proj")

    def block(self, x: str) -> str:
        attended = self.node("Add", [x, self.attention(self.layer_norm(x))], "residual_attn")
        hidden = self.gelu(self.linear(self.layer_norm(attended), self.spec.dim, self.spec.mlp, "fc1"))
        return self.node("Add", [attended, self.linear(hidden, self.spec.mlp, self.spec.dim, "fc2")], "residual_mlp")


def build_vit(spec: VitSpec = VitSpec()) -> onnx.ModelProto:
    """The ViT of ``spec`` as an ONNX model: ``pixel_values`` [1, 3, H, W] -> ``logits`` [1, classes]."""
    b = _Builder(spec)
    grid = spec.image // spec.patch
    patches = b.node("Conv", [INPUT, b.weight("patch_w", (spec.dim, 3, spec.patch, spec.patch)),
                              b.const("patch_b", np.zeros(spec.dim, np.float32))], "patch_embed",
                     kernel_shape=[spec.patch, spec.patch], strides=[spec.patch, spec.patch])
    flat = b.node("Reshape", [patches, b.const("flat_shape", np.array([1, spec.dim, grid * grid]))])
    tokens = b.node("Transpose", [flat], "tokens", perm=[0, 2, 1])
    cls = b.weight("cls_token", (1, 1, spec.dim))
    joined = b.node("Concat", [cls, tokens], "with_cls", axis=1)
    x = b.node("Add", [joined, b.weight("pos_embed", (1, spec.tokens, spec.dim))], "pos")
    for _ in range(spec.depth):
        x = b.block(x)
    x = b.layer_norm(x)
    first = b.node("Gather", [x, b.const("cls_index", np.array(0))], "cls_out", axis=1)
    b.node("Gemm", [first, b.weight("head_w", (spec.classes, spec.dim)),
                             b.const("head_b", np.zeros(spec.classes, np.float32))], "head", transB=1)
    b.nodes[-1].output[0] = OUTPUT
    graph = helper.make_graph(
        b.nodes, "vit_s16", [helper.make_tensor_value_info(INPUT, TensorProto.FLOAT, [1, 3, spec.image, spec.image])],
        [helper.make_tensor_value_info(OUTPUT, TensorProto.FLOAT, [1, spec.classes])], initializer=b.inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION)


def pixel_sample(spec: VitSpec = VitSpec(), seed: int = 1) -> np.ndarray:
    """A seeded ImageNet-normalized image batch of one: (pixels in [0, 1] - mean) / std, |x| up to about 2.6."""
    rng = np.random.default_rng(seed)
    pixels = rng.random((1, 3, spec.image, spec.image))
    mean = np.array([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
    std = np.array([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)
    return ((pixels - mean) / std).astype(np.float32)


__all__ = ["INPUT", "OUTPUT", "VitSpec", "build_vit", "pixel_sample"]
