"""CNN exports built by hand (onnx.helper) for issue 29: BatchNorm folded with beta 0, dead channels.

``mobilenet_v3``, ``efficientnet`` and ``ssdlite`` follow their networks'
block structure (inverted residuals with depthwise Convs, squeeze-excite,
HardSwish / Swish, a classifier or SSD heads) at small widths. Every Conv has a
folded bias (BatchNorm folding writes ``beta - mean * gamma / sqrt(var + eps)``:
with beta 0 and a mean near 0, ~1e-9) and a few dead channels whose weights
weight decay drove to ~1e-9. Weights are He-scaled so activations stay in a
trained network's range.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from hazard_models import init, model, vi

TINY = 1e-9


class _Builder:
    """Appends nodes and initializers; each Conv gets a folded bias with ~1e-9 entries and dead channels."""

    def __init__(self, seed: int, dead: bool, tiny_bias: bool) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.dead, self.tiny_bias = dead, tiny_bias
        self.count = 0

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def conv(self, x: str, cin: int, cout: int, k: int = 1, stride: int = 1, group: int = 1) -> str:
        name = self.name("conv")
        fan_in = cin // group * k * k
        weight = self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)
        bias = 0.05 * self.rng.standard_normal(cout)
        if self.tiny_bias:  # beta 0, mean ~0: the folded bias holds ~1e-9 in a third of its channels
            picked = self.rng.random(cout) < 0.34
            bias[picked] = TINY * self.rng.standard_normal(int(picked.sum()))
        if self.dead and cout >= 8:  # a few channels decayed to ~1e-9
            gone = self.rng.choice(cout, size=max(1, cout // 8), replace=False)
            weight[gone] = TINY * self.rng.standard_normal(weight[gone].shape)
            bias[gone] = TINY * self.rng.standard_normal(gone.size)
        self.inits += [init(f"{name}.w", weight), init(f"{name}.b", bias)]
        self.nodes.append(h.make_node("Conv", [x, f"{name}.w", f"{name}.b"], [name], name=name,
                                      kernel_shape=[k, k], strides=[stride, stride], pads=[k // 2] * 4, group=group))
        return name

    def op(self, op: str, inputs: list, **attributes) -> str:
        name = self.name(op.lower())
        self.nodes.append(h.make_node(op, inputs, [name], name=name, **attributes))
        return name

    def activation(self, x: str, kind: str) -> str:
        if kind == "hswish":
            return self.op("HardSwish", [x])
        if kind == "swish":
            return self.op("Mul", [x, self.op("Sigmoid", [x])])
        return self.op("Relu", [x])

    def squeeze_excite(self, x: str, channels: int, gate: str) -> str:
        pooled = self.op("GlobalAveragePool", [x])
        squeezed = self.activation(self.conv(pooled, channels, max(8, channels // 4)), "relu")
        expanded = self.conv(squeezed, max(8, channels // 4), channels)
        scale = self.op("HardSigmoid", [expanded], alpha=1 / 6) if gate == "hard" else self.op("Sigmoid", [expanded])
        return self.op("Mul", [x, scale])

    def block(self, x: str, cin: int, expand: int, cout: int, stride: int, act: str, gate: str) -> str:
        """An inverted residual: 1x1 expand, 3x3 depthwise, squeeze-excite, 1x1 project (+ the input)."""
        mid = cin * expand
        y = self.activation(self.conv(x, cin, mid), act)
        y = self.activation(self.conv(y, mid, mid, k=3, stride=stride, group=mid), act)
        y = self.squeeze_excite(y, mid, gate)
        y = self.conv(y, mid, cout)
        return self.op("Add", [x, y]) if stride == 1 and cin == cout else y


def _network(b: _Builder, act: str, gate: str, stages) -> tuple:
    x = b.activation(b.conv("image", 3, 16, k=3, stride=2), act)
    channels = 16
    features = []
    for expand, cout, stride in stages:
        x = b.block(x, channels, expand, cout, stride, act, gate)
        channels = cout
        features.append((x, channels))
    return x, channels, features


_STAGES = ((1, 16, 1), (4, 24, 2), (3, 24, 1), (3, 40, 2), (3, 40, 1), (6, 48, 1), (6, 64, 2))


def _classifier(b: _Builder, x: str, channels: int, act: str) -> str:
    head = b.activation(b.conv(x, channels, 128), act)
    flat = b.op("Flatten", [b.op("GlobalAveragePool", [head])])
    b.inits += [init("fc.w", b.rng.standard_normal((10, 128)) * np.sqrt(1 / 128)), init("fc.b", np.zeros(10))]
    b.nodes.append(h.make_node("Gemm", [flat, "fc.w", "fc.b"], ["logits"], name="classifier", transB=1))
    return "logits"


def mobilenet_v3(dead: bool = True, tiny_bias: bool = True, seed: int = 3) -> onnx.ModelProto:
    """MobileNetV3-small-like: HardSwish, hard-sigmoid squeeze-excite, a Gemm classifier."""
    b = _Builder(seed, dead, tiny_bias)
    x, channels, _ = _network(b, "hswish", "hard", _STAGES)
    out = _classifier(b, x, channels, "hswish")
    return model(b.nodes, [vi("image", T.FLOAT, [1, 3, 64, 64])], [vi(out, T.FLOAT, [1, 10])], b.inits,
                 opset=17, name="mobilenet_v3")


def efficientnet(dead: bool = True, tiny_bias: bool = True, seed: int = 5) -> onnx.ModelProto:
    """EfficientNet-B0-like: Swish as x * Sigmoid(x), sigmoid squeeze-excite."""
    b = _Builder(seed, dead, tiny_bias)
    x, channels, _ = _network(b, "swish", "sigmoid", _STAGES)
    out = _classifier(b, x, channels, "swish")
    return model(b.nodes, [vi("image", T.FLOAT, [1, 3, 64, 64])], [vi(out, T.FLOAT, [1, 10])], b.inits,
                 opset=17, name="efficientnet")


def ssdlite(dead: bool = True, tiny_bias: bool = True, seed: int = 7) -> onnx.ModelProto:
    """SSDlite-like: a MobileNetV3 backbone, depthwise-separable box and class heads on two feature maps."""
    b = _Builder(seed, dead, tiny_bias)
    _x, _channels, features = _network(b, "hswish", "hard", _STAGES)
    boxes, scores = [], []
    b.inits += [init("box_shape", [1, -1, 4], np.int64), init("cls_shape", [1, -1, 6], np.int64)]
    for x, channels in (features[-2], features[-1]):
        for kind, width, shape, into in (("box", 4, "box_shape", boxes), ("cls", 6, "cls_shape", scores)):
            depthwise = b.activation(b.conv(x, channels, channels, k=3, group=channels), "relu")
            head = b.conv(depthwise, channels, 3 * width)
            into.append(b.op("Reshape", [b.op("Transpose", [head], perm=[0, 2, 3, 1]), shape]))
    box = b.op("Concat", boxes, axis=1)
    cls = b.op("Softmax", [b.op("Concat", scores, axis=1)], axis=-1)
    return model(b.nodes, [vi("image", T.FLOAT, [1, 3, 64, 64])],
                 [vi(box, T.FLOAT, [1, "anchors", 4]), vi(cls, T.FLOAT, [1, "anchors", 6])], b.inits, opset=17,
                 name="ssdlite")


CNNS = {"mobilenet_v3": mobilenet_v3, "efficientnet": efficientnet, "ssdlite": ssdlite}


# ---------------------------------------------------------------- detector exports at opsets 17-20 (bf16 upgrades)
def yolo(opset: int = 17, seed: int = 11) -> onnx.ModelProto:
    """YOLOv8-like: Conv + SiLU blocks, a float ``Range`` building the anchor grid (black: Range stays float32)."""
    b = _Builder(seed, dead=False, tiny_bias=False)
    x = b.activation(b.conv("image", 3, 16, k=3, stride=2), "swish")
    x = b.activation(b.conv(x, 16, 32, k=3, stride=2), "swish")
    head = b.conv(x, 32, 8)  # 16x16 cells of 8 values
    b.inits += [init("start", 0.0), init("limit", 16.0), init("delta", 1.0), init("grid_shape", [1, 1, 16], np.int64),
                init("flat", [1, 8, -1], np.int64)]
    grid = b.op("Reshape", [b.op("Range", ["start", "limit", "delta"]), "grid_shape"])
    cells = b.op("Reshape", [head, "flat"])
    b.inits.append(init("tiles", [1, 8, 16], np.int64))
    out = b.op("Add", [b.op("Sigmoid", [cells]), b.op("Tile", [grid, "tiles"])])
    return model(b.nodes, [vi("image", T.FLOAT, [1, 3, 64, 64])], [vi(out, T.FLOAT, [1, 8, 256])], b.inits,
                 opset=opset, name="yolo")


def faster_rcnn(opset: int = 20, seed: int = 13) -> onnx.ModelProto:
    """Faster R-CNN-like: a Conv backbone, RoiAlign over fixed proposals, a Gemm box head."""
    b = _Builder(seed, dead=False, tiny_bias=False)
    x = b.activation(b.conv("image", 3, 16, k=3, stride=2), "relu")
    features = b.activation(b.conv(x, 16, 32, k=3, stride=2), "relu")
    b.inits += [init("rois", [[0, 0, 8, 8], [4, 4, 15, 15], [2, 6, 10, 14]]), init("batch", [0, 0, 0], np.int64),
                init("head.w", b.rng.standard_normal((32 * 4 * 4, 8)) * 0.05), init("head.b", np.zeros(8))]
    pooled = b.op("RoiAlign", [features, "rois", "batch"], output_height=4, output_width=4, sampling_ratio=2)
    flat = b.op("Flatten", [pooled])
    b.nodes.append(h.make_node("Gemm", [flat, "head.w", "head.b"], ["boxes"], name="box_head"))
    return model(b.nodes, [vi("image", T.FLOAT, [1, 3, 64, 64])], [vi("boxes", T.FLOAT, [3, 8])], b.inits,
                 opset=opset, name="faster_rcnn")


# ---------------------------------------------------------------- an int8 QDQ transformer (onnxruntime's quantizer)
def transformer(layers: int = 2, width: int = 64, heads: int = 4, seq: int = 16, seed: int = 17,
                opset: int = 18) -> onnx.ModelProto:
    """A float32 encoder: LayerNormalization, attention (MatMul, Softmax), an Erf GELU MLP, residual Adds."""
    rng = np.random.default_rng(seed)
    nodes, inits = [], [init("shape_heads", [1, seq, heads, width // heads], np.int64),
                        init("shape_flat", [1, seq, width], np.int64), init("scale", np.sqrt(width // heads)),
                        init("sqrt2", np.sqrt(2.0)), init("one", 1.0), init("half", 0.5)]

    def dense(x, name, cin, cout):
        inits.extend([init(f"{name}.w", rng.standard_normal((cin, cout)) / np.sqrt(cin)),
                      init(f"{name}.b", 0.02 * rng.standard_normal(cout))])
        nodes.append(h.make_node("MatMul", [x, f"{name}.w"], [f"{name}.mm"], name=f"{name}.mm"))
        nodes.append(h.make_node("Add", [f"{name}.mm", f"{name}.b"], [name], name=f"{name}.add"))
        return name

    def node(op, inputs, name, **attributes):
        nodes.append(h.make_node(op, inputs, [name], name=name, **attributes))
        return name

    x = "tokens"
    for layer in range(layers):
        p = f"l{layer}"
        inits.extend([init(f"{p}.g1", np.ones(width)), init(f"{p}.b1", np.zeros(width)),
                      init(f"{p}.g2", np.ones(width)), init(f"{p}.b2", np.zeros(width))])
        n1 = node("LayerNormalization", [x, f"{p}.g1", f"{p}.b1"], f"{p}.ln1", axis=-1)
        q, k, v = (node("Transpose", [node("Reshape", [dense(n1, f"{p}.{t}", width, width), "shape_heads"],
                                          f"{p}.{t}.heads")], f"{p}.{t}.t", perm=perm)
                   for t, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])))
        scores = node("Div", [node("MatMul", [q, k], f"{p}.qk"), "scale"], f"{p}.scaled")
        context = node("MatMul", [node("Softmax", [scores], f"{p}.softmax", axis=-1), v], f"{p}.ctx")
        merged = node("Reshape", [node("Transpose", [context], f"{p}.ctx.t", perm=[0, 2, 1, 3]), "shape_flat"],
                      f"{p}.merged")
        x = node("Add", [x, dense(merged, f"{p}.o", width, width)], f"{p}.res1")
        n2 = node("LayerNormalization", [x, f"{p}.g2", f"{p}.b2"], f"{p}.ln2", axis=-1)
        up = dense(n2, f"{p}.up", width, 4 * width)
        erf = node("Erf", [node("Div", [up, "sqrt2"], f"{p}.gelu.div")], f"{p}.gelu.erf")
        gelu = node("Mul", [node("Mul", [up, node("Add", [erf, "one"], f"{p}.gelu.add")], f"{p}.gelu.mul"), "half"],
                    f"{p}.gelu")
        x = node("Add", [x, dense(gelu, f"{p}.down", 4 * width, width)], f"{p}.res2")
    return model(nodes, [vi("tokens", T.FLOAT, [1, seq, width])], [vi(x, T.FLOAT, [1, seq, width])], inits,
                 opset=opset, name="transformer")


def qdq_transformer(folder, name: str = "qdq", **kwargs) -> str:
    """``transformer`` quantized to int8 QDQ by onnxruntime's static quantizer (every op it quantizes); a path."""
    import os

    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    proto = transformer(**kwargs)
    shape = [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim]

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.samples = iter([{"tokens": rng.standard_normal(shape).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.samples, None)

    float_path = os.path.join(os.fspath(folder), f"{name}.float.onnx")
    onnx.save(proto, float_path)
    path = os.path.join(os.fspath(folder), f"{name}.onnx")
    quantize_static(float_path, path, Reader(), quant_format=QuantFormat.QDQ, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, op_types_to_quantize=None,
                    extra_options={"ForceQuantizeNoInputCheck": True})
    return path
