"""Small decoder graphs in the spellings LLM exporters write, built by hand (no torch needed).

- ``genai_block``: onnxruntime-genai builder style: SimplifiedLayerNormalization in the default
  domain (onnxruntime registers it there; onnx.defs does not know it), SkipSimplifiedLayerNormalization
  in com.microsoft, an embedding Gather whose table the lm_head reads too (tied embeddings).
- ``t5_decoder_step``: a T5 decoder step with the cross-attention cache, as optimum's ``decoder_with_past``
  writes it: the encoder mask made additive as ``(1 - mask) * float32 lowest`` (-3.4028e38, beyond
  bfloat16's range), RMS norms, tied lm_head; ``t5_decoder_feeds`` gives its first step's inputs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def genai_block(path: Path, hidden: int = 32, vocab: int = 64, opset: int = 21, seed: int = 0) -> Path:
    """A genai-builder-style decoder slice: embed -> norm -> MatMul -> skip norm -> tied lm_head."""
    rng = np.random.default_rng(seed)
    inits = [
        numpy_helper.from_array((rng.standard_normal((vocab, hidden)) * 0.1).astype(np.float32), "embed"),
        numpy_helper.from_array(np.ones(hidden, np.float32), "norm_w"),
        numpy_helper.from_array((rng.standard_normal((hidden, hidden)) * 0.1).astype(np.float32), "proj"),
    ]
    nodes = [
        helper.make_node("Gather", ["embed", "input_ids"], ["h0"], name="embed_gather"),
        helper.make_node("SimplifiedLayerNormalization", ["h0", "norm_w"], ["n0"], name="norm0",
                         axis=-1, epsilon=1e-6, stash_type=1),
        helper.make_node("MatMul", ["n0", "proj"], ["p0"], name="proj_matmul"),
        helper.make_node("SkipSimplifiedLayerNormalization", ["p0", "h0", "norm_w"], ["n1", "", "", "h1"],
                         name="skip_norm1", domain="com.microsoft", epsilon=1e-6),
        helper.make_node("Transpose", ["embed"], ["embed_t"], name="lm_head_transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["n1", "embed_t"], ["logits"], name="lm_head"),
    ]
    graph = helper.make_graph(
        nodes, "genai_block",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                     helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    onnx.save(model, str(path))
    return path


def with_default_domain_op(path: Path, op_type: str) -> Path:
    """A one-node model of ``op_type`` in the default domain (for ops neither onnx nor onnxruntime define)."""
    graph = helper.make_graph(
        [helper.make_node(op_type, ["x"], ["y"], name="n")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10), str(path))
    return path


def _const(name: str, array) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array), name)


def decode_step(path: Path, hidden: int = 32, heads: int = 2, head_dim: int = 16, vocab: int = 64,
                opset: int = 18, seed: int = 0) -> Path:
    """A torch-dynamo-style decode step of one attention layer with a KV cache and rotary embeddings.

    Inputs: ``input_ids`` [1, S], ``position_ids`` [1, S], ``past_key``/``past_value`` [1, heads, P, head_dim].
    Outputs: ``logits`` [1, S, vocab], ``present_key``/``present_value`` [1, heads, P + S, head_dim].
    The rotary tables come from ``Cos``/``Sin`` of position x inverse frequency, as dynamo writes them; the
    embedding table is tied to the lm_head (read through a Transpose).
    """
    rng = np.random.default_rng(seed)
    half = head_dim // 2
    inv_freq = (1.0 / (10000 ** (np.arange(0, half, dtype=np.float32) / half))).astype(np.float32)
    w = lambda *shape: (rng.standard_normal(shape) * 0.1).astype(np.float32)  # noqa: E731
    inits = [
        _const("embed", w(vocab, hidden)), _const("wq", w(hidden, heads * head_dim)),
        _const("wk", w(hidden, heads * head_dim)), _const("wv", w(hidden, heads * head_dim)),
        _const("wo", w(heads * head_dim, hidden)), _const("inv_freq", inv_freq.reshape(1, 1, half)),
        _const("heads_shape", np.array([1, -1, heads, head_dim], np.int64)),
        _const("merge_shape", np.array([1, -1, heads * head_dim], np.int64)),
        _const("unsq_axes", np.array([1], np.int64)), _const("scale", np.array(head_dim ** -0.5, np.float32)),
        _const("split_half", np.array([half, half], np.int64)), _const("pos_axes", np.array([2], np.int64)),
    ]
    nodes = [
        helper.make_node("Gather", ["embed", "input_ids"], ["h"], name="embed_gather"),
        # rotary tables: cos/sin of position x inv_freq, duplicated to head_dim, broadcast over heads
        helper.make_node("Unsqueeze", ["position_ids", "pos_axes"], ["pos3"], name="pos_unsqueeze"),
        helper.make_node("Cast", ["pos3"], ["posf"], name="pos_cast", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["posf", "inv_freq"], ["freqs"], name="freqs_mul"),
        helper.make_node("Concat", ["freqs", "freqs"], ["emb"], name="emb_concat", axis=-1),
        helper.make_node("Cos", ["emb"], ["cos"], name="rotary_cos"),
        helper.make_node("Sin", ["emb"], ["sin"], name="rotary_sin"),
        helper.make_node("Unsqueeze", ["cos", "unsq_axes"], ["cos4"], name="cos_unsqueeze"),
        helper.make_node("Unsqueeze", ["sin", "unsq_axes"], ["sin4"], name="sin_unsqueeze"),
    ]
    for proj in ("q", "k", "v"):
        nodes += [
            helper.make_node("MatMul", ["h", f"w{proj}"], [f"{proj}_flat"], name=f"{proj}_proj"),
            helper.make_node("Reshape", [f"{proj}_flat", "heads_shape"], [f"{proj}_4"], name=f"{proj}_reshape"),
            helper.make_node("Transpose", [f"{proj}_4"], [f"{proj}_t"], name=f"{proj}_transpose", perm=[0, 2, 1, 3]),
        ]
    for proj in ("q", "k"):  # x * cos + rotate_half(x) * sin
        nodes += [
            helper.make_node("Split", [f"{proj}_t", "split_half"], [f"{proj}_1", f"{proj}_2"], name=f"{proj}_split",
                             axis=-1),
            helper.make_node("Neg", [f"{proj}_2"], [f"{proj}_2n"], name=f"{proj}_neg"),
            helper.make_node("Concat", [f"{proj}_2n", f"{proj}_1"], [f"{proj}_rot"], name=f"{proj}_rotate", axis=-1),
            helper.make_node("Mul", [f"{proj}_t", "cos4"], [f"{proj}_c"], name=f"{proj}_mul_cos"),
            helper.make_node("Mul", [f"{proj}_rot", "sin4"], [f"{proj}_s"], name=f"{proj}_mul_sin"),
            helper.make_node("Add", [f"{proj}_c", f"{proj}_s"], [f"{proj}_r"], name=f"{proj}_rope_add"),
        ]
    nodes += [
        helper.make_node("Concat", ["past_key", "k_r"], ["present_key"], name="key_cache_concat", axis=2),
        helper.make_node("Concat", ["past_value", "v_t"], ["present_value"], name="value_cache_concat", axis=2),
        helper.make_node("Transpose", ["present_key"], ["k_T"], name="key_transpose", perm=[0, 1, 3, 2]),
        helper.make_node("MatMul", ["q_r", "k_T"], ["scores_raw"], name="scores_matmul"),
        helper.make_node("Mul", ["scores_raw", "scale"], ["scores"], name="scores_scale"),
        helper.make_node("Softmax", ["scores"], ["probs"], name="softmax", axis=-1),
        helper.make_node("MatMul", ["probs", "present_value"], ["ctx"], name="context_matmul"),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], name="context_transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["ctx_m"], name="context_reshape"),
        helper.make_node("MatMul", ["ctx_m", "wo"], ["attn"], name="o_proj"),
        helper.make_node("Add", ["attn", "h"], ["resid"], name="residual_add"),
        helper.make_node("Transpose", ["embed"], ["embed_t"], name="lm_head_transpose", perm=[1, 0]),
        helper.make_node("MatMul", ["resid", "embed_t"], ["logits"], name="lm_head"),
    ]
    cache = lambda name, length: helper.make_tensor_value_info(  # noqa: E731
        name, TensorProto.FLOAT, [1, heads, length, head_dim])
    graph = helper.make_graph(
        nodes, "decode_step",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "seq"]),
         cache("past_key", "past_sequence_length"), cache("past_value", "past_sequence_length")],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "seq", vocab]),
         cache("present_key", "past_sequence_length + seq"), cache("present_value", "past_sequence_length + seq")],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def decode_feeds(past: int = 5, seq: int = 1, heads: int = 2, head_dim: int = 16, vocab: int = 64, seed: int = 1):
    """Inputs of one ``decode_step`` call: ``seq`` new tokens after ``past`` cached ones."""
    rng = np.random.default_rng(seed)
    return {
        "input_ids": rng.integers(0, vocab, (1, seq)).astype(np.int64),
        "position_ids": np.arange(past, past + seq, dtype=np.int64).reshape(1, seq),
        "past_key": rng.standard_normal((1, heads, past, head_dim)).astype(np.float32),
        "past_value": rng.standard_normal((1, heads, past, head_dim)).astype(np.float32),
    }


def int4_block(path: Path, hidden: int = 64, out: int = 32, vocab: int = 128, block: int = 32, seed: int = 0) -> Path:
    """Weight-only int4 quantization as onnxruntime-genai writes it: GatherBlockQuantized embedding, MatMulNBits."""
    rng = np.random.default_rng(seed)
    blocks = hidden // block
    inits = [
        _const("embed_q", rng.integers(0, 255, (vocab, hidden // 2), dtype=np.uint8)),
        _const("embed_scales", (rng.random((vocab, blocks)) * 0.01).astype(np.float32)),
        _const("proj_q", rng.integers(0, 255, (out, blocks, block // 2), dtype=np.uint8)),
        _const("proj_scales", (rng.random(out * blocks) * 0.01).astype(np.float32)),
    ]
    nodes = [
        helper.make_node("GatherBlockQuantized", ["embed_q", "input_ids", "embed_scales"], ["h"], name="embed",
                         domain="com.microsoft", bits=4, block_size=block, gather_axis=0, quantize_axis=1),
        helper.make_node("MatMulNBits", ["h", "proj_q", "proj_scales"], ["y"], name="proj", domain="com.microsoft",
                         K=hidden, N=out, bits=4, block_size=block),
        helper.make_node("Softmax", ["y"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "int4_block", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "seq"])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, [1, "seq", out])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                     helper.make_opsetid("com.microsoft", 1)], ir_version=10)
    onnx.save(model, str(path))
    return path


def dynamo_unnamed_decoder(path: Path, hidden: int = 32, heads: int = 2, head_dim: int = 16, vocab: int = 64,
                           seed: int = 0) -> Path:
    """``decode_step`` as torch's dynamo exporter writes it when no dimension is named: symbols ``sN``.

    Inputs: ``input_ids`` [s4, s70], ``attention_mask`` [s4, s43], ``position_ids`` [s4, s53],
    ``past_key``/``past_value`` [s4, heads, s60, head_dim]; outputs ``logits`` [s4, s70, vocab] and
    ``present_key``/``present_value`` [s4, heads, s60 + s70, head_dim]. The mask covers the past and the new
    tokens: it is reshaped to [s4, 1, 1, s60 + s70] (its length read from the present key's shape, as dynamo
    computes it) and added to the scores, so a mask whose length is not ``s60 + s70`` fails at run time. The
    exporter's value_info records every intermediate's shape, expressions included, as dynamo writes them.
    """
    step = Path(str(path) + ".step.onnx")
    decode_step(step, hidden, heads, head_dim, vocab, seed=seed)
    model = onnx.load(str(step))
    step.unlink()
    graph = model.graph
    rename = {"seq": "s70", "past_sequence_length": "s60", "past_sequence_length + seq": "s60 + s70"}
    for info in list(graph.input) + list(graph.output):
        for dim in info.type.tensor_type.shape.dim:
            if dim.dim_param:
                dim.dim_param = rename[dim.dim_param]
            elif dim.dim_value == 1 and dim is info.type.tensor_type.shape.dim[0]:
                dim.Clear()
                dim.dim_param = "s4"
    graph.input[1].type.tensor_type.shape.dim[1].dim_param = "s53"  # position_ids
    for init in graph.initializer:  # the batch is open: reshapes copy it (0) instead of fixing it to 1
        if init.name in ("heads_shape", "merge_shape"):
            init.CopyFrom(_const(init.name, np.concatenate([[0], numpy_helper.to_array(init)[1:]]).astype(np.int64)))
    graph.input.insert(1, helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["s4", "s43"]))
    graph.initializer.extend([
        _const("one_f", np.array(1.0, np.float32)), _const("mask_fill", np.array(-10000.0, np.float32)),
        _const("gather_two", np.array([2], np.int64)), _const("ones_11", np.array([1, 1], np.int64)),
        _const("gather_zero", np.array([0], np.int64)),
    ])
    mask_nodes = [
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], name="mask_cast", to=TensorProto.FLOAT),
        helper.make_node("Sub", ["one_f", "mask_f"], ["mask_inv"], name="mask_invert"),
        helper.make_node("Mul", ["mask_inv", "mask_fill"], ["mask_add"], name="mask_scale"),
        helper.make_node("Shape", ["present_key"], ["pk_shape"], name="present_shape"),
        helper.make_node("Gather", ["pk_shape", "gather_two"], ["total_len"], name="total_length", axis=0),
        helper.make_node("Shape", ["input_ids"], ["ids_shape"], name="ids_shape"),
        helper.make_node("Gather", ["ids_shape", "gather_zero"], ["batch"], name="batch_size", axis=0),
        helper.make_node("Concat", ["batch", "ones_11", "total_len"], ["mask_shape"], name="mask_shape", axis=0),
        helper.make_node("Reshape", ["mask_add", "mask_shape"], ["mask4"], name="mask_reshape"),
        helper.make_node("Add", ["scores", "mask4"], ["scores_masked"], name="mask_add"),
    ]
    nodes = list(graph.node)
    softmax = next(i for i, n in enumerate(nodes) if n.op_type == "Softmax")
    nodes[softmax].input[0] = "scores_masked"
    del graph.node[:]
    graph.node.extend(nodes[:softmax] + mask_nodes + nodes[softmax:])
    info = lambda name, dims: helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)  # noqa: E731
    graph.value_info.extend([
        info("mask_add", ["s4", "s43"]), info("mask4", ["s4", 1, 1, "s60 + s70"]),
        info("scores", ["s4", heads, "s70", "s60 + s70"]), info("cos4", ["s4", 1, "s53", head_dim]),
        info("q_t", ["s4", heads, "s70", head_dim]),
    ])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path
# float32's lowest value: what HF's T5 multiplies an inverted attention mask by (``torch.finfo(float32).min``).
FLOAT32_LOWEST = float(np.finfo(np.float32).min)


class _T5Step:
    """Collects the nodes and weights of ``t5_decoder_step``, one exporter-style block at a time."""

    def __init__(self, rng: np.random.Generator, hidden: int, heads: int, head_dim: int, scales: tuple) -> None:
        self.rng, self.hidden, self.heads, self.head_dim = rng, hidden, heads, head_dim
        self.ff_scale, self.score_scale = scales
        self.nodes: list = []
        self.inits = [_const("heads_shape", np.array([1, -1, heads, head_dim], np.int64)),
                      _const("merge_shape", np.array([1, -1, heads * head_dim], np.int64)),
                      _const("two", np.array(2.0, np.float32)), _const("eps", np.array(1e-6, np.float32)),
                      _const("mean_axes", np.array([-1], np.int64))]

    def node(self, op: str, inputs, name: str, **attrs) -> str:
        self.nodes.append(helper.make_node(op, list(inputs), [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"

    def weight(self, name: str, shape, scale: float = 0.1) -> str:
        self.inits.append(_const(name, (self.rng.standard_normal(shape) * scale).astype(np.float32)))
        return name

    def rms_norm(self, x: str, prefix: str) -> str:
        """T5LayerNorm as torch exports it: x * 1/sqrt(mean(x^2) + eps) * weight, no mean subtracted."""
        var = self.node("ReduceMean", [self.node("Pow", [x, "two"], f"{prefix}/pow"), "mean_axes"], f"{prefix}/mean",
                        keepdims=1)
        inv = self.node("Reciprocal", [self.node("Sqrt", [self.node("Add", [var, "eps"], f"{prefix}/add_eps")],
                                                 f"{prefix}/sqrt")], f"{prefix}/reciprocal")
        scale = self.weight(f"{prefix}.weight", [self.hidden], 0.05)
        self.inits[-1] = _const(scale, (1.0 + self.rng.standard_normal(self.hidden) * 0.05).astype(np.float32))
        return self.node("Mul", [scale, self.node("Mul", [x, inv], f"{prefix}/mul")], f"{prefix}/mul_weight")

    def heads_of(self, x: str, prefix: str) -> str:
        return self.node("Transpose", [self.node("Reshape", [x, "heads_shape"], f"{prefix}/reshape")],
                         f"{prefix}/transpose", perm=[0, 2, 1, 3])

    def attend(self, q: str, key: str, value: str, prefix: str, bias: str = None) -> str:
        """T5 attention (no 1/sqrt(d) scaling): softmax(q k^T + bias) v, heads merged, projected."""
        scores = self.node("MatMul", [q, self.node("Transpose", [key], f"{prefix}/key_t", perm=[0, 1, 3, 2])],
                           f"{prefix}/scores")
        if bias is not None:
            scores = self.node("Add", [scores, bias], f"{prefix}/add_mask")
        probs = self.node("Softmax", [scores], f"{prefix}/softmax", axis=-1)
        context = self.node("Transpose", [self.node("MatMul", [probs, value], f"{prefix}/context")],
                            f"{prefix}/context_t", perm=[0, 2, 1, 3])
        merged = self.node("Reshape", [context, "merge_shape"], f"{prefix}/merge")
        return self.node("MatMul", [merged, self.weight(f"{prefix}.o", [self.heads * self.head_dim, self.hidden])],
                         f"{prefix}/o_proj")

    def layer(self, x: str, i: int, mask: str) -> str:
        """Self-attention over the decoder cache, cross-attention over the encoder's cached keys, feed-forward."""
        inner, p = self.heads * self.head_dim, f"decoder.block.{i}"
        h = self.rms_norm(x, f"{p}.self.norm")
        q, k, v = (self.heads_of(self.node("MatMul", [h, self.weight(f"{p}.self.{w}", [self.hidden, inner])],
                                           f"{p}/self/{w}_proj"), f"{p}/self/{w}") for w in "qkv")
        self.nodes.append(helper.make_node("Concat", [f"past_key_values.{i}.decoder.key", k],
                                           [f"present.{i}.decoder.key"], name=f"{p}/self/key_cache", axis=2))
        self.nodes.append(helper.make_node("Concat", [f"past_key_values.{i}.decoder.value", v],
                                           [f"present.{i}.decoder.value"], name=f"{p}/self/value_cache", axis=2))
        x = self.node("Add", [x, self.attend(q, f"present.{i}.decoder.key", f"present.{i}.decoder.value",
                                             f"{p}/self")], f"{p}/self/residual")
        h = self.rms_norm(x, f"{p}.cross.norm")
        q = self.heads_of(self.node("MatMul", [h, self.weight(f"{p}.cross.q", [self.hidden, inner],
                                                             self.score_scale)], f"{p}/cross/q_proj"), f"{p}/cross/q")
        # HF's T5 adds the mask to a zero position bias (cross-attention has no relative bias) before the scores.
        bias = self.node("Add", ["cross_position_bias", mask], f"{p}/cross/position_bias")
        x = self.node("Add", [x, self.attend(q, f"past_key_values.{i}.encoder.key",
                                             f"past_key_values.{i}.encoder.value", f"{p}/cross", bias)],
                      f"{p}/cross/residual")
        h = self.rms_norm(x, f"{p}.ff.norm")
        up = self.node("Relu", [self.node("MatMul", [h, self.weight(f"{p}.wi", [self.hidden, 4 * self.hidden])],
                                          f"{p}/ff/wi")], f"{p}/ff/relu")
        down = self.node("MatMul", [up, self.weight(f"{p}.wo", [4 * self.hidden, self.hidden], self.ff_scale)],
                         f"{p}/ff/wo")
        return self.node("Add", [x, down], f"{p}/ff/residual")


def t5_decoder_step(path: Path, hidden: int = 32, heads: int = 2, head_dim: int = 16, vocab: int = 64,
                    layers: int = 2, ff_scale: float = 0.1, score_scale: float = 0.1, embed_scale: float = 1.0,
                    opset: int = 18, seed: int = 0) -> Path:
    """A T5 decoder step with the cross-attention cache, as optimum's ``decoder_with_past`` export writes it.

    Inputs: ``input_ids`` [1, 1], ``encoder_attention_mask`` [1, E] (int64, 0 = padding), per layer
    ``past_key_values.{i}.decoder.key/value`` [1, heads, P, head_dim] and ``past_key_values.{i}.encoder.key/value``
    [1, heads, E, head_dim]. Outputs: ``logits`` [1, 1, vocab] and ``present.{i}.decoder.key/value``.
    The encoder mask becomes additive the way HF's T5 builds it: ``(1 - mask) * float32 lowest``
    (-3.4028e38), added to a zero position bias and then to the cross-attention scores (unscaled, as
    in T5: ``score_scale`` sets the cross-attention query weights, and with them how far the scores
    go past float16's range); RMS norms (T5LayerNorm), ReLU feed-forward whose output grows with
    ``ff_scale``, lm_head tied to the embedding (its values' scale ``embed_scale``) and scaled by hidden^-0.5.
    """
    step = _T5Step(np.random.default_rng(seed), hidden, heads, head_dim, (ff_scale, score_scale))
    step.inits += [_const("one", np.array(1.0, np.float32)), _const("lowest", np.array(FLOAT32_LOWEST, np.float32)),
                   _const("mask_axes", np.array([1, 2], np.int64)),
                   _const("lm_scale", np.array(hidden ** -0.5, np.float32)),
                   _const("cross_position_bias", np.zeros((1, heads, 1, 1), np.float32))]
    embed = step.weight("shared", [vocab, hidden], embed_scale)
    x = step.node("Gather", [embed, "input_ids"], "decoder/embed_tokens")
    mask = step.node("Cast", [step.node("Unsqueeze", ["encoder_attention_mask", "mask_axes"], "decoder/mask_unsqueeze")],
                     "decoder/mask_cast", to=TensorProto.FLOAT)
    mask = step.node("Mul", [step.node("Sub", ["one", mask], "decoder/mask_invert"), "lowest"], "decoder/mask_fill")
    for i in range(layers):
        x = step.layer(x, i, mask)
    x = step.node("Mul", [step.rms_norm(x, "decoder.final_norm"), "lm_scale"], "decoder/lm_scale")
    lm = step.node("Transpose", [embed], "lm_head/transpose", perm=[1, 0])
    step.nodes.append(helper.make_node("MatMul", [x, lm], ["logits"], name="lm_head"))
    cache = lambda name, length: helper.make_tensor_value_info(name, TensorProto.FLOAT,  # noqa: E731
                                                               [1, heads, length, head_dim])
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 1]),
              helper.make_tensor_value_info("encoder_attention_mask", TensorProto.INT64, [1, "encoder_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab])]
    for i in range(layers):
        inputs += [cache(f"past_key_values.{i}.decoder.{kv}", "past_decoder_sequence_length") for kv in ("key", "value")]
        inputs += [cache(f"past_key_values.{i}.encoder.{kv}", "encoder_sequence_length") for kv in ("key", "value")]
        outputs += [cache(f"present.{i}.decoder.{kv}", "past_decoder_sequence_length + 1") for kv in ("key", "value")]
    graph = helper.make_graph(step.nodes, "t5_decoder_with_past", inputs, outputs, step.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def t5_decoder_feeds(past: int = 2, encoder: int = 16, padding: int = 5, layers: int = 2, heads: int = 2,
                     head_dim: int = 16, token: int = 0, seed: int = 1) -> dict:
    """The first step's inputs of ``t5_decoder_step``: ``past`` cached tokens, ``encoder`` positions of which
    the last ``padding`` are masked (so the mask fill matters)."""
    rng = np.random.default_rng(seed)
    feeds = {"input_ids": np.array([[token]], np.int64),
             "encoder_attention_mask": np.array([[1] * (encoder - padding) + [0] * padding], np.int64)}
    for i in range(layers):
        for kv in ("key", "value"):
            feeds[f"past_key_values.{i}.decoder.{kv}"] = rng.standard_normal((1, heads, past, head_dim)).astype(np.float32)
            feeds[f"past_key_values.{i}.encoder.{kv}"] = rng.standard_normal((1, heads, encoder, head_dim)).astype(
                np.float32)
    return feeds
