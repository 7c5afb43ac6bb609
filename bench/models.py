"""Model generators shared by the benchmarks: long op chains and the seeded sample models."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[1]

# One period of the chain: WHITE (MatMul), BLACK (Softmax, Exp) and GRAY ops, so
# the planner has real decisions to make: LOW spreads from each MatMul through the
# GRAY ops until a BLACK op, and HIGH spreads from the BLACK ops to the next MatMul.
# Values stay bounded: Softmax/Sigmoid give (0,1), Exp of that is < e, Tanh < 1.
CHAIN_PERIOD = ("MatMul", "Add", "Relu", "Mul", "Softmax", "Sigmoid", "Exp", "Tanh")
CHAIN_WIDTH = 16


def build_chain(n_nodes: int, seed: int = 0) -> onnx.ModelProto:
    """Return a [1,16] -> [1,16] model that is a single chain of ``n_nodes`` nodes.

    MatMul, Add and Mul each get their own initializer (as in a real network),
    so the initializer count grows with the node count too.
    """
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    x = "input"
    for i in range(n_nodes):
        op = CHAIN_PERIOD[i % len(CHAIN_PERIOD)]
        name = f"/chain/{i}/{op}"
        inputs = [x]
        if op in ("MatMul", "Add", "Mul"):
            shape = [CHAIN_WIDTH, CHAIN_WIDTH] if op == "MatMul" else [CHAIN_WIDTH]
            scale = 0.25 if op == "MatMul" else 0.5
            value = (rng.standard_normal(shape) * scale).astype(np.float32)
            inits.append(numpy_helper.from_array(value, f"chain.{i}.{op.lower()}"))
            inputs.append(inits[-1].name)
        out = "output" if i == n_nodes - 1 else f"{name}_output_0"
        attrs = {"axis": -1} if op == "Softmax" else {}
        nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        x = out
    graph = helper.make_graph(
        nodes,
        f"chain_{n_nodes}",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, CHAIN_WIDTH])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, CHAIN_WIDTH])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def build_samples(out_dir: pathlib.Path) -> dict[str, pathlib.Path]:
    """Build the seeded sample models (sample_models/build.py) into ``out_dir``."""
    spec = importlib.util.spec_from_file_location("ampconv_sample_build", ROOT / "sample_models" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build_all(out_dir)
