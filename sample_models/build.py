"""Build the seeded float32 sample models that ampconv's tests, demo and benchmarks use.

Usage: ``python sample_models/build.py --out DIR`` or ``build_all(out_dir)``.

Every model is built with ``onnx.helper`` at opset 17, passes
``onnx.checker.check_model(full_check=True)`` and runs in onnxruntime CPU. All
weights come from ``numpy.random.default_rng(0)`` so two builds are
byte-identical. Every node has a readable, PyTorch-export-style name
(``/blocks.0/attn/q_proj/MatMul``) because the conversion report quotes them.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
from collections.abc import Callable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
# onnxruntime >= 1.14 loads IR 8; keeping it low keeps the samples loadable by older runtimes too.
IR_VERSION = 8
FLOAT = TensorProto.FLOAT
DEFAULT_OUT = pathlib.Path(__file__).resolve().parent / "out"


class GraphBuilder:
    """Collects nodes and initializers for one graph; names outputs after their node."""

    def __init__(self, rng: np.random.Generator, prefix: str = "") -> None:
        self.rng = rng
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []

    def const(self, name: str, value: np.ndarray | float | bool | Sequence) -> str:
        """Add an initializer holding ``value`` (float32 unless already typed); return its name."""
        array = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=np.float32)
        self.initializers.append(numpy_helper.from_array(array, self.prefix + name))
        return self.prefix + name

    def weight(self, name: str, shape: Sequence[int], scale: float | None = None) -> str:
        """Add a seeded normal weight scaled like a fan-in initialisation; return its name."""
        scale = scale if scale is not None else 1.0 / math.sqrt(shape[0] if len(shape) else 1)
        return self.const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32))

    def op(self, op_type: str, inputs: Sequence[str], name: str, outputs: int = 1, **attrs):
        """Add a node named ``name``; return its output name (or list when ``outputs`` > 1).

        Output names follow the exporter convention ``<node name>_output_<i>`` so a
        report line can be traced back to the node without a lookup table.
        """
        full = self.prefix + name
        out_names = [f"{full}_output_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, list(inputs), out_names, name=full, **attrs))
        return out_names[0] if outputs == 1 else out_names

    def rename_output(self, old: str, new: str) -> str:
        """Give the producer of ``old`` the public name ``new`` (graph outputs)."""
        for node in self.nodes:
            for i, out in enumerate(node.output):
                if out == old:
                    node.output[i] = new
        for node in self.nodes:
            for i, inp in enumerate(node.input):
                if inp == old:
                    node.input[i] = new
        return new

    def graph(self, name: str, inputs, outputs) -> onnx.GraphProto:
        """Return the GraphProto of everything added so far."""
        return helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.initializers)


def _model(graph: onnx.GraphProto, doc: str) -> onnx.ModelProto:
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="ampconv-sample-models",
        doc_string=doc,
    )
    model.ir_version = IR_VERSION
    return model


def _linear(b: GraphBuilder, x: str, scope: str, n_in: int, n_out: int) -> str:
    """MatMul + Add, the way exporters write nn.Linear on a batched tensor."""
    w = b.weight(f"{scope}.weight", [n_in, n_out])
    bias = b.weight(f"{scope}.bias", [n_out], scale=0.02)
    y = b.op("MatMul", [x, w], f"/{scope}/MatMul")
    return b.op("Add", [y, bias], f"/{scope}/Add")


def build_mlp(rng: np.random.Generator, hidden: int = 128) -> onnx.ModelProto:
    """[batch,64] -> Linear -> Relu -> Gemm -> Relu -> Gemm -> Softmax -> [batch,10]."""
    b = GraphBuilder(rng)
    h = _linear(b, "input", "fc1", 64, hidden)
    h = b.op("Relu", [h], "/act1/Relu")
    h = b.op("Gemm", [h, b.weight("fc2.weight", [hidden, 64]), b.weight("fc2.bias", [64], 0.02)],
             "/fc2/Gemm")
    h = b.op("Relu", [h], "/act2/Relu")
    h = b.op("Gemm", [h, b.weight("head.weight", [10, 64]), b.weight("head.bias", [10], 0.02)],
             "/head/Gemm", transB=1)
    b.rename_output(b.op("Softmax", [h], "/softmax/Softmax", axis=-1), "logits")
    graph = b.graph(
        "mlp",
        [helper.make_tensor_value_info("input", FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("logits", FLOAT, ["batch", 10])],
    )
    return _model(graph, "Three-layer MLP classifier with softmax logits.")


def _conv_bn(b: GraphBuilder, x: str, scope: str, c_in: int, c_out: int, k: int = 3,
             stride: int = 1) -> str:
    """Conv (no bias) + BatchNormalization with realistic running statistics.

    A few channels get a variance near 1e3, as real networks have, so that BN
    folding and fp16 range questions show up in the samples.
    """
    w = b.weight(f"{scope}.conv.weight", [c_out, c_in, k, k], scale=math.sqrt(2.0 / (c_in * k * k)))
    y = b.op("Conv", [x, w], f"/{scope}/conv/Conv", kernel_shape=[k, k], strides=[stride, stride],
             pads=[k // 2] * 4)
    var = (np.abs(b.rng.standard_normal(c_out)) + 0.5).astype(np.float32)
    var[:: max(1, c_out // 3)] = 1.0e3
    stats = [
        b.const(f"{scope}.bn.weight", (1.0 + 0.1 * b.rng.standard_normal(c_out)).astype(np.float32)),
        b.const(f"{scope}.bn.bias", (0.1 * b.rng.standard_normal(c_out)).astype(np.float32)),
        b.const(f"{scope}.bn.running_mean", (0.1 * b.rng.standard_normal(c_out)).astype(np.float32)),
        b.const(f"{scope}.bn.running_var", var),
    ]
    return b.op("BatchNormalization", [y] + stats, f"/{scope}/bn/BatchNormalization", epsilon=1e-5)


def _residual_block(b: GraphBuilder, x: str, scope: str, c_in: int, c_out: int, stride: int) -> str:
    h = b.op("Relu", [_conv_bn(b, x, f"{scope}.0", c_in, c_out, stride=stride)], f"/{scope}/relu1/Relu")
    h = _conv_bn(b, h, f"{scope}.1", c_out, c_out)
    skip = x if (c_in == c_out and stride == 1) else _conv_bn(b, x, f"{scope}.down", c_in, c_out, 1, stride)
    return b.op("Relu", [b.op("Add", [h, skip], f"/{scope}/Add")], f"/{scope}/relu2/Relu")


def build_cnn(rng: np.random.Generator) -> onnx.ModelProto:
    """ResNet-style CNN: stem, two residual blocks, pools, classifier. [N,3,32,32] -> [N,10]."""
    b = GraphBuilder(rng)
    h = b.op("Relu", [_conv_bn(b, "input", "stem", 3, 16)], "/stem/relu/Relu")
    h = _residual_block(b, h, "layer1", 16, 16, stride=1)
    h = _residual_block(b, h, "layer2", 16, 32, stride=2)
    h = b.op("MaxPool", [h], "/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("GlobalAveragePool", [h], "/gap/GlobalAveragePool")
    h = b.op("Flatten", [h], "/flatten/Flatten", axis=1)
    h = b.op("Gemm", [h, b.weight("fc.weight", [10, 32]), b.weight("fc.bias", [10], 0.02)],
             "/fc/Gemm", transB=1)
    b.rename_output(h, "logits")
    graph = b.graph(
        "cnn",
        [helper.make_tensor_value_info("input", FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("logits", FLOAT, ["N", 10])],
    )
    return _model(graph, "ResNet-style CNN with BatchNormalization and residual blocks.")


def _layer_norm(b: GraphBuilder, x: str, scope: str, dim: int) -> str:
    scale = b.const(f"{scope}.weight", (1.0 + 0.05 * b.rng.standard_normal(dim)).astype(np.float32))
    bias = b.const(f"{scope}.bias", (0.02 * b.rng.standard_normal(dim)).astype(np.float32))
    return b.op("LayerNormalization", [x, scale, bias], f"/{scope}/LayerNormalization",
                axis=-1, epsilon=1e-5)


def _attention(b: GraphBuilder, x: str, scope: str, dim: int, heads: int, seq: int, mask: str) -> str:
    head_dim = dim // heads
    split = b.const(f"{scope}.split_shape", np.array([0, seq, heads, head_dim], dtype=np.int64))
    merge = b.const(f"{scope}.merge_shape", np.array([0, seq, dim], dtype=np.int64))
    q, k, v = (
        b.op("Reshape", [_linear(b, x, f"{scope}/{p}_proj", dim, dim), split], f"/{scope}/{p}_proj/Reshape")
        for p in ("q", "k", "v")
    )
    q = b.op("Transpose", [q], f"/{scope}/q/Transpose", perm=[0, 2, 1, 3])
    k = b.op("Transpose", [k], f"/{scope}/k/Transpose", perm=[0, 2, 3, 1])
    v = b.op("Transpose", [v], f"/{scope}/v/Transpose", perm=[0, 2, 1, 3])
    scores = b.op("MatMul", [q, k], f"/{scope}/scores/MatMul")
    scores = b.op("Div", [scores, b.const(f"{scope}.scale", np.float32(math.sqrt(head_dim)))],
                  f"/{scope}/scores/Div")
    scores = b.op("Add", [scores, mask], f"/{scope}/mask/Add")
    probs = b.op("Softmax", [scores], f"/{scope}/Softmax", axis=-1)
    ctx = b.op("MatMul", [probs, v], f"/{scope}/context/MatMul")
    ctx = b.op("Transpose", [ctx], f"/{scope}/context/Transpose", perm=[0, 2, 1, 3])
    ctx = b.op("Reshape", [ctx, merge], f"/{scope}/context/Reshape")
    return _linear(b, ctx, f"{scope}/o_proj", dim, dim)


def _gelu_ffn(b: GraphBuilder, x: str, scope: str, dim: int, hidden: int) -> str:
    """Linear -> GELU written with Erf, as torch.onnx exports it -> Linear."""
    h = _linear(b, x, f"{scope}/fc1", dim, hidden)
    e = b.op("Div", [h, b.const(f"{scope}.sqrt2", np.float32(math.sqrt(2.0)))], f"/{scope}/act/Div")
    e = b.op("Erf", [e], f"/{scope}/act/Erf")
    e = b.op("Add", [e, b.const(f"{scope}.one", np.float32(1.0))], f"/{scope}/act/Add")
    g = b.op("Mul", [h, e], f"/{scope}/act/Mul")
    g = b.op("Mul", [g, b.const(f"{scope}.half", np.float32(0.5))], f"/{scope}/act/Mul_1")
    return _linear(b, g, f"{scope}/fc2", hidden, dim)


def build_transformer(rng: np.random.Generator, dim: int = 64, heads: int = 4, seq: int = 16,
                      blocks: int = 2) -> onnx.ModelProto:
    """Two pre-LN transformer blocks with a causal mask of float32 lowest. [batch,16,64] -> same.

    The mask initializer is shared by every block (a tied tensor) and holds
    ``np.finfo(np.float32).min`` above the diagonal: the common out-of-fp16-range
    constant that docs/precision.md sec. 6 says must pin its consumer HIGH and be reported.
    """
    b = GraphBuilder(rng)
    mask = np.triu(np.full((seq, seq), np.finfo(np.float32).min, dtype=np.float32), k=1)
    mask_name = b.const("causal_mask", mask)
    h = "input"
    for i in range(blocks):
        scope = f"blocks.{i}"
        a = _attention(b, _layer_norm(b, h, f"{scope}/ln1", dim), f"{scope}/attn", dim, heads, seq, mask_name)
        h = b.op("Add", [h, a], f"/{scope}/attn/residual/Add")
        f = _gelu_ffn(b, _layer_norm(b, h, f"{scope}/ln2", dim), f"{scope}/mlp", dim, 4 * dim)
        h = b.op("Add", [h, f], f"/{scope}/mlp/residual/Add")
    b.rename_output(h, "output")
    graph = b.graph(
        "transformer",
        [helper.make_tensor_value_info("input", FLOAT, ["batch", seq, dim])],
        [helper.make_tensor_value_info("output", FLOAT, ["batch", seq, dim])],
    )
    return _model(graph, "Two pre-LN transformer blocks with a float32-lowest causal mask and Erf GELU.")


def build_lstm(rng: np.random.Generator, seq: int = 8, features: int = 16, hidden: int = 32,
               classes: int = 8) -> onnx.ModelProto:
    """LSTM over [seq,batch,16] with initial state inputs, then a Linear head on Y_h."""
    b = GraphBuilder(rng)
    w = b.weight("lstm.W", [1, 4 * hidden, features], scale=1.0 / math.sqrt(hidden))
    r = b.weight("lstm.R", [1, 4 * hidden, hidden], scale=1.0 / math.sqrt(hidden))
    bias = b.weight("lstm.B", [1, 8 * hidden], scale=0.05)
    _, y_h, _ = b.op("LSTM", ["input", w, r, bias, "", "h0", "c0"], "/lstm/LSTM", outputs=3,
                     hidden_size=hidden, direction="forward")
    h = b.op("Squeeze", [y_h, b.const("squeeze_axes", np.array([0], dtype=np.int64))], "/lstm/Squeeze")
    b.rename_output(_linear(b, h, "head", hidden, classes), "logits")
    graph = b.graph(
        "lstm",
        [
            helper.make_tensor_value_info("input", FLOAT, [seq, "batch", features]),
            helper.make_tensor_value_info("h0", FLOAT, [1, "batch", hidden]),
            helper.make_tensor_value_info("c0", FLOAT, [1, "batch", hidden]),
        ],
        [helper.make_tensor_value_info("logits", FLOAT, ["batch", classes])],
    )
    return _model(graph, "Single-layer LSTM with initial state inputs and a linear head.")


def _if_branch(rng: np.random.Generator, name: str, body: Callable[[GraphBuilder], str]) -> onnx.GraphProto:
    b = GraphBuilder(rng, prefix="")
    out = b.rename_output(body(b), f"{name}_out")
    return helper.make_graph(b.nodes, name, [], [helper.make_tensor_value_info(out, FLOAT, None)])


def build_control_flow(rng: np.random.Generator, features: int = 8, trips: int = 3) -> onnx.ModelProto:
    """If (on ReduceSum(x) > 0) with branches on captured weights, then a Loop with a Resize.

    - If: then-branch MatMul + Relu on outer ``x`` and ``then.weight``; else-branch
      Gemm + Sigmoid on outer ``else.weight``/``else.bias``. Branches hold no
      initializers, so every weight is captured from the outer graph.
    - Loop: ``trips`` iterations; carried ``acc = acc * loop.scale + x``;
      each iteration also emits ``Resize(nearest, scales=[1,2])`` of the new acc
      as a scan output, so float32-only ``scales`` live inside a subgraph.
    """
    b = GraphBuilder(rng)
    total = b.op("ReduceSum", ["input"], "/cond/ReduceSum", keepdims=0)
    cond = b.op("Greater", [total, b.const("zero", np.float32(0.0))], "/cond/Greater")
    w_then = b.weight("then.weight", [features, features])
    w_else = b.weight("else.weight", [features, features])
    b_else = b.weight("else.bias", [features], 0.02)
    then_g = _if_branch(rng, "then_branch", lambda g: g.op(
        "Relu", [g.op("MatMul", ["input", w_then], "/if/then/MatMul")], "/if/then/Relu"))
    else_g = _if_branch(rng, "else_branch", lambda g: g.op(
        "Sigmoid", [g.op("Gemm", ["input", w_else, b_else], "/if/else/Gemm", transB=1)], "/if/else/Sigmoid"))
    branch_out = b.op("If", [cond], "/if/If", then_branch=then_g, else_branch=else_g)

    scale = b.const("loop.scale", (0.5 + 0.1 * rng.standard_normal(features)).astype(np.float32))
    scales = b.const("resize.scales", np.array([1.0, 2.0], dtype=np.float32))
    body = GraphBuilder(rng)
    acc = body.op("Add", [body.op("Mul", ["acc_in", scale], "/loop/body/Mul"), "input"], "/loop/body/Add")
    acc = body.rename_output(acc, "acc_out")
    up = body.rename_output(body.op("Resize", [acc, "", scales], "/loop/body/Resize", mode="nearest"), "up_out")
    body.rename_output(body.op("Identity", ["cond_in"], "/loop/body/cond/Identity"), "cond_out")
    body_g = helper.make_graph(
        body.nodes, "loop_body",
        [
            helper.make_tensor_value_info("iter", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("acc_in", FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info(acc, FLOAT, None),
            helper.make_tensor_value_info(up, FLOAT, None),
        ],
    )
    trip_count = b.const("loop.trip_count", np.array(trips, dtype=np.int64))
    keep_going = b.const("loop.cond", np.array(True))
    final, stacked = b.op("Loop", [trip_count, keep_going, branch_out], "/loop/Loop", outputs=2, body=body_g)
    b.rename_output(final, "output")
    b.rename_output(stacked, "upsampled")
    graph = b.graph(
        "control_flow",
        [helper.make_tensor_value_info("input", FLOAT, ["batch", features])],
        [
            helper.make_tensor_value_info("output", FLOAT, ["batch", features]),
            helper.make_tensor_value_info("upsampled", FLOAT, [trips, "batch", 2 * features]),
        ],
    )
    return _model(graph, "If with captured weights and a Loop whose body holds a nearest Resize.")


def build_external_data(rng: np.random.Generator) -> onnx.ModelProto:
    """A small MLP whose weights are written to ``external_data.onnx.data`` (see ``build_all``)."""
    model = build_mlp(rng, hidden=96)
    model.graph.name = "external_data"
    model.doc_string = "Small MLP with every initializer stored as external data."
    return model


BUILDERS: dict[str, Callable[[np.random.Generator], onnx.ModelProto]] = {
    "mlp": build_mlp,
    "cnn": build_cnn,
    "transformer": build_transformer,
    "lstm": build_lstm,
    "control_flow": build_control_flow,
    "external_data": build_external_data,
}


def build_all(out_dir: str | pathlib.Path = DEFAULT_OUT) -> dict[str, pathlib.Path]:
    """Build every sample into ``out_dir``; return ``{name: path}`` of the written ``.onnx`` files.

    One generator seeded with 0 is consumed in a fixed order, so every build is
    byte-identical. Each model is checked with the full checker before it is saved.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    paths: dict[str, pathlib.Path] = {}
    for name, build in BUILDERS.items():
        model = build(rng)
        onnx.checker.check_model(model, full_check=True)
        path = out / f"{name}.onnx"
        if name == "external_data":
            data = out / "external_data.onnx.data"
            if data.exists():
                data.unlink()  # onnx appends to an existing data file; start clean.
            onnx.save(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                      location=data.name, size_threshold=0)
        else:
            onnx.save(model, str(path))
        paths[name] = path
    return paths


def build_tiny_constants(rng: np.random.Generator) -> onnx.ModelProto:
    """A Conv (``conv1``) whose weight ``conv1.w`` holds 8 values of 1e5, beyond fp16's 65504, then a Relu.

    The README's "Constants out of range" example: at O2 ``conv1`` stays
    float32 with a reason naming ``--clamp``; with ``--clamp`` it runs LOW.
    """
    weight = (rng.standard_normal((4, 3, 3, 3)) * 0.2).astype(np.float32)
    weight.flat[:8] = 1e5
    b = GraphBuilder(rng)
    w = b.const("conv1.w", weight)
    conv = b.op("Conv", ["image", w], "conv1", pads=[1, 1, 1, 1])
    b.rename_output(b.op("Relu", [conv], "relu1"), "features")
    graph = b.graph("constants", [helper.make_tensor_value_info("image", FLOAT, ["batch", 3, 16, 16])],
                    [helper.make_tensor_value_info("features", FLOAT, ["batch", 4, 16, 16])])
    return _model(graph, "A Conv whose weight holds values beyond the fp16 range.")


def build_conv(rng: np.random.Generator) -> onnx.ModelProto:
    """A Conv and a Relu at opset 17: the README's bf16 example (bfloat16 Conv needs opset 22)."""
    b = GraphBuilder(rng)
    conv = b.op("Conv", ["image", b.weight("conv.w", (8, 3, 3, 3), 0.2)], "/conv/Conv", pads=[1, 1, 1, 1])
    b.rename_output(b.op("Relu", [conv], "/relu/Relu"), "features")
    graph = b.graph("conv", [helper.make_tensor_value_info("image", FLOAT, ["batch", 3, 16, 16])],
                    [helper.make_tensor_value_info("features", FLOAT, ["batch", 8, 16, 16])])
    return _model(graph, "A Conv and a Relu at opset 17.")


def _data_models():
    """tests/data_models.py: the float32 models whose fp16 failure shows only on realistic data (and their data)."""
    return _test_module("data_models")


def _test_module(name: str):
    """A model-building module of tests/ (``data_models``, ``llm_models``), loaded by path."""
    import importlib.util

    path = pathlib.Path(__file__).resolve().parents[1] / "tests" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"ampconv_{name}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def build_readme_examples(out_dir: str | pathlib.Path = DEFAULT_OUT) -> dict[str, pathlib.Path]:
    """The models and sample folders the README's examples name, so each runs as written after ``make samples``.

    ``constants.onnx`` and ``conv.onnx`` (above); ``audio.onnx`` and
    ``cancel.onnx`` with calibration folders ``audio_calib/`` and
    ``cancel_calib/`` (the audio front end and the offset-cancelling MLP of
    tests/data_models.py); ``cnn_inputs/``, eight input samples of the CNN
    sample for the first-model walk-through; ``decoder.onnx``, one attention
    layer's decode step with a KV cache and rotary tables (tests/llm_models.py).
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    paths: dict[str, pathlib.Path] = {}
    for name, build in (("constants", build_tiny_constants), ("conv", build_conv)):
        model = build(rng)
        onnx.checker.check_model(model, full_check=True)
        paths[name] = out / f"{name}.onnx"
        onnx.save(model, str(paths[name]))
    data = _data_models()
    for name, source in (("audio", "audio_frontend"), ("cancel", "cancellation_mlp")):
        paths[name] = out / f"{name}.onnx"
        onnx.save(data.MODELS[source].build(), str(paths[name]))
        paths[f"{name}_calib"] = out / f"{name}_calib"
        data.write_calibration(source, paths[f"{name}_calib"], 16, seed=0)
    inputs = np.random.default_rng(2).standard_normal((8, 1, 3, 32, 32)).astype(np.float32)
    paths["cnn_inputs"] = out / "cnn_inputs"
    data.write_samples(paths["cnn_inputs"], ({"input": x} for x in inputs))
    paths["decoder"] = _test_module("llm_models").decode_step(out / "decoder.onnx")
    return paths


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry: build every sample, and what the README's examples name, into ``--out``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="output directory (default: %(default)s)")
    args = parser.parse_args(argv)
    for name, path in {**build_all(args.out), **build_readme_examples(args.out)}.items():
        print(f"{name:14s} {path}")


if __name__ == "__main__":
    main()
