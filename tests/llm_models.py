"""Small decoder graphs in the spellings LLM exporters write, built by hand (no torch needed).

- ``genai_block``: onnxruntime-genai builder style: SimplifiedLayerNormalization in the default
  domain (onnxruntime registers it there; onnx.defs does not know it), SkipSimplifiedLayerNormalization
  in com.microsoft, an embedding Gather whose table the lm_head reads too (tied embeddings).
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
