"""Seeded fuzzer for the ``ampconv`` CLI: malformed models, policy files and inputs; and valid models.

Two families of cases, chosen with ``--family`` (``malformed`` is the default,
and what this script did before the valid family existed; ``make fuzz`` runs
both, one after the other):

- ``malformed`` (below): broken inputs must end in a clean error or a valid model;
- ``valid``: models that onnxruntime loads and runs, built by scripts/fuzz_valid.py
  in the graph shapes that once made the converter refuse good models (issue 19:
  Resize inputs that are empty Constants, omitted or computed from Shape;
  If/Loop/Scan bodies and graph outputs without types; other ops whose shape
  inference reads input values; empty optional inputs). A case onnxruntime
  refuses (to load, or to run on the seeded inputs) is skipped and counted. Every
  other case must convert four ways -- default options (fp16, O2), ``--level
  O3``, ``--dtype bf16``, ``--no-keep-io-types`` -- each with exit 0 and an
  output that loads in onnxruntime (bf16: a NOT_IMPLEMENTED kernel error counts
  as loaded), and but for bf16 runs on the same inputs and matches float32
  within 5% of each output's scale (fuzz_valid.compare; with float16 inputs,
  float32 runs on the same rounded inputs). Each case runs in a forked child,
  so an onnxruntime crash or hang costs that case, not the run. The summary
  counts generated, skipped, converted OK per kind and failed cases, then each
  distinct failure (names and numbers masked) with the command that replays it.

Malformed family. Every case starts from a small valid float32 model built in code (an MLP, a
conv net, a model with an ``If`` subgraph, a model with external data) and
breaks one thing, or a few: the serialized bytes (flipped bytes, truncation),
the graph (a node's inputs dropped, a graph output's type dropped, an
initializer's data dropped, wrong element types, dangling inputs, cycles, dims
of 2**40, attributes of the wrong type, duplicate node names, nodes out of
topological order, IR version 3 with initializers not listed as inputs, bad
external-data references), a ``--mixlist`` policy file (truncated, wrong types,
unknown keys, non-UTF-8 bytes, deep nesting, huge numbers, lone surrogates) or
an ``--inputs`` .npz for ``validate`` (wrong dtype, wrong shape, missing or
unknown names, not a zip, a pickled object array).

Each case runs the CLI in-process (``click.testing.CliRunner`` on the
``ampconv`` group that ``ampconv_cli.main:main`` runs, ``catch_exceptions=True``)
in a fresh temporary folder that holds only the case's inputs, and must end
in one of:

- exit 0: ``convert`` wrote a model that passes ``onnx.checker`` (``validate``
  writes nothing); new files only the output, its ``.data`` file and the report;
- exit 1 or 2 (3 for ``validate``: over tolerance): exactly one stderr line,
  starting with ``ampconv: error:`` (``validate`` exit 3 prints its result on
  stdout and nothing on stderr), and no new file in the folder.

Never a traceback (``result.exception`` other than ``SystemExit``, or
"Traceback" in the output), never a Python warning on an error path (the real
CLI would print it as a second stderr line), and the inputs byte-identical
afterwards (SHA-256 before and after).

Cases are deterministic: case ``i`` of seed ``S`` draws everything from
``random.Random(f"{S}:{i}")``, so ``--seed S --case i`` replays one case and
``--keep DIR`` leaves its folder (inputs and whatever the CLI wrote) for a look.

Usage::

    python scripts/fuzz.py --cases 1000 --seed 0
    python scripts/fuzz.py --seed 0 --case 17 --keep /tmp/case17 -v
    python scripts/fuzz.py --family valid --cases 500 --seed 1
    python scripts/fuzz.py --family valid --seed 1 --case 45 -v --keep /tmp/valid45

(``--keep`` of a valid case holds the model, every converted output and the
inputs as ``inputs.npz``.)

Importable: ``make_case``, ``run_case``, ``run_fuzz`` and ``render_summary``
(malformed), ``run_valid_case``, ``run_valid_fuzz``, ``render_valid_summary``,
``convert_and_check`` and ``run_in_child`` (valid) are what tests/end_to_end/test_fuzz.py uses.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import functools
import hashlib
import io
import json
import logging
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings
import zipfile
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

CASE_TIMEOUT_S = 30.0
OPSET = 17
IR_VERSION = 8
HUGE = 2**40
EXT_DATA = "weights.bin"
MODEL = "model.onnx"
CONVERTED = "converted.onnx"
OUTPUT = "out.onnx"
REPORT = "report.json"
POLICY = "policy.json"
INPUTS = "inputs.npz"

# --------------------------------------------------------------------------- base models


def _model(graph: onnx.GraphProto, opset: int = OPSET) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="ampconv-fuzz")
    model.ir_version = IR_VERSION
    return model


def _weights(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def mlp_model() -> onnx.ModelProto:
    """x[2,4] -> MatMul -> Add -> Relu -> MatMul -> Softmax -> y[2,3]."""
    rng = np.random.default_rng(1)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W1"], ["h"], name="mm1"),
            helper.make_node("Add", ["h", "b1"], ["a"], name="add1"),
            helper.make_node("Relu", ["a"], ["r"], name="relu"),
            helper.make_node("MatMul", ["r", "W2"], ["z"], name="mm2"),
            helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=-1),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [
            numpy_helper.from_array(_weights(rng, 4, 8), "W1"),
            numpy_helper.from_array(_weights(rng, 8), "b1"),
            numpy_helper.from_array(_weights(rng, 8, 3), "W2"),
        ],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 8])],
    )
    return _model(graph)


def conv_model() -> onnx.ModelProto:
    """x[1,3,8,8] -> Conv -> BatchNorm -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> y[1,2]."""
    rng = np.random.default_rng(2)
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "Wc", "Bc"], ["c"], name="conv", kernel_shape=[3, 3],
                             pads=[1, 1, 1, 1], strides=[1, 1]),
            helper.make_node("BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"],
                             name="bn", epsilon=1e-5),
            helper.make_node("Relu", ["bn"], ["r"], name="relu"),
            helper.make_node("GlobalAveragePool", ["r"], ["p"], name="gap"),
            helper.make_node("Flatten", ["p"], ["f"], name="flatten", axis=1),
            helper.make_node("Gemm", ["f", "Wg", "Bg"], ["y"], name="gemm", transB=1, alpha=1.0),
        ],
        "convnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
        [
            numpy_helper.from_array(_weights(rng, 4, 3, 3, 3), "Wc"),
            numpy_helper.from_array(_weights(rng, 4), "Bc"),
            numpy_helper.from_array(np.abs(_weights(rng, 4)) + 0.5, "gamma"),
            numpy_helper.from_array(_weights(rng, 4), "beta"),
            numpy_helper.from_array(_weights(rng, 4), "mean"),
            numpy_helper.from_array(np.abs(_weights(rng, 4)) + 0.5, "var"),
            numpy_helper.from_array(_weights(rng, 2, 4), "Wg"),
            numpy_helper.from_array(_weights(rng, 2), "Bg"),
        ],
    )
    return _model(graph)


def if_model() -> onnx.ModelProto:
    """x[2,4]: If(ReduceSum(x) > 0) then Relu(x @ Wt) else Tanh(x @ We) -> y[2,3] (outer-scope reads)."""
    rng = np.random.default_rng(3)
    then_graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "Wt"], ["tm"], name="then_mm"),
            helper.make_node("Relu", ["tm"], ["then_out"], name="then_relu"),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [2, 3])],
    )
    else_graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "We"], ["em"], name="else_mm"),
            helper.make_node("Tanh", ["em"], ["else_out"], name="else_tanh"),
        ],
        "else",
        [],
        [helper.make_tensor_value_info("else_out", TensorProto.FLOAT, [2, 3])],
    )
    graph = helper.make_graph(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["cond"], name="gt"),
            helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then_graph,
                             else_branch=else_graph),
        ],
        "ifnet",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [
            numpy_helper.from_array(_weights(rng, 4, 3), "Wt"),
            numpy_helper.from_array(_weights(rng, 4, 3), "We"),
            numpy_helper.from_array(np.array(0.0, dtype=np.float32), "zero"),
        ],
    )
    return _model(graph)


def external_model() -> onnx.ModelProto:
    """The MLP with every initializer in one external data file (``weights.bin``)."""
    return mlp_model()


BASES: Dict[str, Callable[[], onnx.ModelProto]] = {
    "mlp": mlp_model,
    "conv": conv_model,
    "if": if_model,
    "ext": external_model,
}


@functools.lru_cache(maxsize=None)
def base_files(name: str) -> Tuple[bytes, Tuple[Tuple[str, bytes], ...]]:
    """The serialized base model and its side files (the external data file for ``ext``)."""
    model = BASES[name]()
    if name != "ext":
        return model.SerializeToString(), ()
    with tempfile.TemporaryDirectory(prefix="ampconv-fuzz-base-") as tmp:
        path = Path(tmp) / MODEL
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=EXT_DATA, size_threshold=0)
        return path.read_bytes(), ((EXT_DATA, (Path(tmp) / EXT_DATA).read_bytes()),)


def base_proto(name: str) -> onnx.ModelProto:
    """A fresh copy of the base model proto (external references left unresolved)."""
    data, _ = base_files(name)
    model = onnx.ModelProto()
    model.ParseFromString(data)
    return model


@functools.lru_cache(maxsize=None)
def converted_files(name: str) -> Tuple[Tuple[str, bytes], ...]:
    """The base model converted (fp16, defaults) by the library: the CONVERTED side of ``validate`` cases."""
    import ampconv
    from ampconv.config import Config

    data, side = base_files(name)
    with tempfile.TemporaryDirectory(prefix="ampconv-fuzz-conv-") as tmp:
        folder = Path(tmp)
        (folder / MODEL).write_bytes(data)
        for side_name, side_data in side:
            (folder / side_name).write_bytes(side_data)
        ampconv.convert(str(folder / MODEL), str(folder / CONVERTED), Config())
        return tuple((p.name, p.read_bytes()) for p in sorted(folder.iterdir()) if p.name.startswith(CONVERTED))


# --------------------------------------------------------------------------- model mutations


def all_graphs(graph: onnx.GraphProto) -> List[onnx.GraphProto]:
    """``graph`` and every subgraph (If/Loop/Scan bodies), outermost first."""
    graphs = [graph]
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                graphs.extend(all_graphs(attr.g))
            elif attr.type == AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    graphs.extend(all_graphs(sub))
    return graphs


def all_nodes(model: onnx.ModelProto) -> List[onnx.NodeProto]:
    return [node for graph in all_graphs(model.graph) for node in graph.node]


def all_value_infos(model: onnx.ModelProto) -> List[onnx.ValueInfoProto]:
    out = []
    for graph in all_graphs(model.graph):
        out.extend(graph.input)
        out.extend(graph.output)
        out.extend(graph.value_info)
    return out


ELEM_TYPES = [
    TensorProto.UNDEFINED, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT64,
    TensorProto.INT32, TensorProto.INT8, TensorProto.UINT8, TensorProto.BOOL, TensorProto.STRING,
    TensorProto.COMPLEX64, TensorProto.FLOAT8E4M3FN, TensorProto.INT4, 9999, -1,
]


class Mutation:
    """A named model mutation: ``apply(rng, model, side)`` returns a description, or None if it does not apply."""

    registry: Dict[str, Callable] = {}


def mutation(name: str):
    def register(func):
        Mutation.registry[name] = func
        return func

    return register


@mutation("drop_node_input")
def _drop_node_input(rng: random.Random, model: onnx.ModelProto, side: Dict[str, bytes]) -> Optional[str]:
    nodes = [n for n in all_nodes(model) if n.input]
    if not nodes:
        return None
    node = rng.choice(nodes)
    index = rng.randrange(len(node.input))
    if rng.random() < 0.5:
        del node.input[index]
        return f"drop input {index} of node {node.name!r}"
    node.input[index] = ""
    return f"blank input {index} of node {node.name!r}"


@mutation("drop_node_output")
def _drop_node_output(rng, model, side):
    nodes = [n for n in all_nodes(model) if n.output]
    node = rng.choice(nodes)
    if rng.random() < 0.5:
        del node.output[:]
        return f"drop all outputs of node {node.name!r}"
    node.output[0] = ""
    return f"blank output 0 of node {node.name!r}"


@mutation("drop_output_type")
def _drop_output_type(rng, model, side):
    graph = rng.choice(all_graphs(model.graph))
    if not graph.output:
        return None
    value = rng.choice(graph.output)
    choice = rng.randrange(3)
    if choice == 0:
        value.ClearField("type")
        return f"graph {graph.name!r} output {value.name!r}: type cleared"
    if choice == 1:
        value.type.tensor_type.ClearField("elem_type")
        return f"graph {graph.name!r} output {value.name!r}: elem_type cleared"
    value.type.tensor_type.ClearField("shape")
    return f"graph {graph.name!r} output {value.name!r}: shape cleared"


@mutation("drop_graph_io")
def _drop_graph_io(rng, model, side):
    graph = model.graph
    if rng.random() < 0.5:
        del graph.output[:]
        return "main graph: all outputs removed"
    del graph.input[:]
    return "main graph: all inputs removed"


@mutation("drop_initializer_data")
def _drop_initializer_data(rng, model, side):
    inits = [t for g in all_graphs(model.graph) for t in g.initializer]
    if not inits:
        return None
    tensor = rng.choice(inits)
    if tensor.data_location == TensorProto.EXTERNAL:
        what = rng.choice(["external_data", "location", "data_location", "length"])
        if what == "external_data":
            del tensor.external_data[:]
        elif what == "data_location":
            tensor.data_location = TensorProto.DEFAULT
        else:
            kept = [e for e in tensor.external_data if e.key != what]
            del tensor.external_data[:]
            tensor.external_data.extend(kept)
        return f"initializer {tensor.name!r}: {what} dropped"
    for field in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
        tensor.ClearField(field)
    if rng.random() < 0.3:
        tensor.ClearField("dims")
        return f"initializer {tensor.name!r}: data and dims dropped"
    return f"initializer {tensor.name!r}: data dropped"


@mutation("short_initializer_data")
def _short_initializer_data(rng, model, side):
    inits = [t for g in all_graphs(model.graph) for t in g.initializer if t.raw_data]
    if not inits:
        return None
    tensor = rng.choice(inits)
    cut = rng.randrange(len(tensor.raw_data))
    tensor.raw_data = tensor.raw_data[:cut]
    return f"initializer {tensor.name!r}: raw_data cut to {cut} bytes"


@mutation("wrong_elem_type")
def _wrong_elem_type(rng, model, side):
    elem = rng.choice(ELEM_TYPES)
    inits = [t for g in all_graphs(model.graph) for t in g.initializer]
    if inits and rng.random() < 0.5:
        tensor = rng.choice(inits)
        tensor.data_type = elem
        return f"initializer {tensor.name!r}: data_type {elem}"
    value = rng.choice(all_value_infos(model))
    value.type.tensor_type.elem_type = elem
    return f"value {value.name!r}: elem_type {elem}"


@mutation("dangling_input")
def _dangling_input(rng, model, side):
    nodes = [n for n in all_nodes(model) if n.input]
    node = rng.choice(nodes)
    index = rng.randrange(len(node.input))
    node.input[index] = rng.choice(["nobody_produces_this", "x ", "", "y", "then_out"])
    return f"node {node.name!r} input {index} -> {node.input[index]!r}"


@mutation("cycle")
def _cycle(rng, model, side):
    graph = rng.choice([g for g in all_graphs(model.graph) if len(g.node) >= 1])
    nodes = graph.node
    if len(nodes) >= 2 and rng.random() < 0.7:
        first, last = nodes[0], nodes[len(nodes) - 1]
        if not first.input:
            return None
        first.input[0] = last.output[0]
        return f"graph {graph.name!r}: node {first.name!r} reads {last.output[0]!r} (cycle)"
    node = rng.choice(list(nodes))
    if not node.input:
        return None
    node.input[0] = node.output[0]
    return f"graph {graph.name!r}: node {node.name!r} reads its own output (self-loop)"


@mutation("huge_dims")
def _huge_dims(rng, model, side):
    dim = rng.choice([HUGE, HUGE * 1024, 2**62, -5, 0])
    inits = [t for g in all_graphs(model.graph) for t in g.initializer]
    if inits and rng.random() < 0.4:
        tensor = rng.choice(inits)
        if tensor.dims:
            tensor.dims[rng.randrange(len(tensor.dims))] = dim
        else:
            tensor.dims.append(dim)
        return f"initializer {tensor.name!r}: a dim set to {dim}"
    values = [v for v in all_value_infos(model) if v.type.tensor_type.shape.dim]
    if not values:
        return None
    value = rng.choice(values)
    dims = value.type.tensor_type.shape.dim
    dims[rng.randrange(len(dims))].dim_value = dim
    return f"value {value.name!r}: a dim set to {dim}"


def _set_wrong_attribute(rng: random.Random, attr: AttributeProto) -> str:
    kind = rng.randrange(5)
    name, old = attr.name, attr.type
    if kind == 0:  # declared type changed, payload kept
        attr.type = rng.choice([t for t in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0, 99) if t != old])
        return f"attribute {name!r}: type {old} -> {attr.type} (payload kept)"
    attr.Clear()
    attr.name = name
    if kind == 1:
        attr.type, attr.s = AttributeProto.STRING, b"\xff\xfenot-a-number"
    elif kind == 2:
        attr.type, attr.f = AttributeProto.FLOAT, 1.5
    elif kind == 3:
        attr.type = AttributeProto.INTS
        attr.ints.extend([HUGE, -1, 0])
    else:
        attr.type = AttributeProto.GRAPH
        attr.g.CopyFrom(helper.make_graph([], "empty", [], []))
    return f"attribute {name!r}: replaced by type {attr.type}"


@mutation("wrong_attr_type")
def _wrong_attr_type(rng, model, side):
    nodes = [n for n in all_nodes(model) if n.attribute]
    if nodes and rng.random() < 0.8:
        node = rng.choice(nodes)
        attr = rng.choice(list(node.attribute))
        return f"node {node.name!r} " + _set_wrong_attribute(rng, attr)
    node = rng.choice(all_nodes(model))
    attr = node.attribute.add()
    attr.name = rng.choice(["axis", "perm", "kernel_shape", "to", "bogus"])
    desc = _set_wrong_attribute(rng, attr)
    return f"node {node.name!r} added " + desc


@mutation("duplicate_node_names")
def _duplicate_node_names(rng, model, side):
    nodes = all_nodes(model)
    if len(nodes) < 2:
        return None
    a, b = rng.sample(nodes, 2)
    b.name = a.name
    return f"node names duplicated: {a.name!r}"


@mutation("duplicate_output_names")
def _duplicate_output_names(rng, model, side):
    graph = model.graph
    a, b = rng.sample(list(graph.node), 2)
    b.output[0] = a.output[0]
    return f"two nodes produce {a.output[0]!r}"


@mutation("out_of_order")
def _out_of_order(rng, model, side):
    graph = rng.choice([g for g in all_graphs(model.graph) if len(g.node) >= 2])
    nodes = list(graph.node)
    if rng.random() < 0.5:
        nodes.reverse()
        how = "reversed"
    else:
        rng.shuffle(nodes)
        how = "shuffled"
    del graph.node[:]
    graph.node.extend(nodes)
    return f"graph {graph.name!r}: nodes {how}"


@mutation("ir3_initializers_not_inputs")
def _ir3(rng, model, side):
    model.ir_version = 3
    model.opset_import[0].version = rng.choice([7, 8, 9, OPSET])
    init_names = {t.name for t in model.graph.initializer}
    kept = [v for v in model.graph.input if v.name not in init_names]
    del model.graph.input[:]
    model.graph.input.extend(kept)
    return f"ir_version 3, opset {model.opset_import[0].version}, initializers not graph inputs"


@mutation("ir3_initializers_as_inputs")
def _ir3_as_inputs(rng, model, side):
    model.ir_version = 3
    model.opset_import[0].version = rng.choice([8, 9])
    for tensor in model.graph.initializer:
        model.graph.input.append(helper.make_tensor_value_info(tensor.name, tensor.data_type, list(tensor.dims)))
    return f"ir_version 3, opset {model.opset_import[0].version}, initializers also graph inputs"


@mutation("bad_versions")
def _bad_versions(rng, model, side):
    choice = rng.randrange(5)
    if choice == 0:
        model.ir_version = rng.choice([0, 1, 2, 99, -1])
        return f"ir_version {model.ir_version}"
    if choice == 1:
        model.opset_import[0].version = rng.choice([0, 1, 5, 999, -3])
        return f"opset {model.opset_import[0].version}"
    if choice == 2:
        del model.opset_import[:]
        return "no opset_import"
    if choice == 3:
        model.opset_import.append(helper.make_opsetid("", 13))
        return "opset '' imported twice (17 and 13)"
    node = rng.choice(all_nodes(model))
    node.domain = rng.choice(["com.unknown", "ai.onnx.ml", "com.microsoft"])
    return f"node {node.name!r} domain {node.domain!r} (not imported)"


@mutation("unknown_op")
def _unknown_op(rng, model, side):
    node = rng.choice(all_nodes(model))
    node.op_type = rng.choice(["NoSuchOp", "", "relu", "If", "Loop", "Cast", "Constant"])
    return f"node {node.name!r} op_type -> {node.op_type!r}"


@mutation("graph_output_is_input")
def _graph_output_is_input(rng, model, side):
    graph = model.graph
    choice = rng.randrange(3)
    if choice == 0:
        graph.output[0].name = graph.input[0].name if graph.input else "x"
        return "graph output renamed to the graph input"
    if choice == 1:
        graph.output[0].name = graph.initializer[0].name
        return f"graph output renamed to initializer {graph.initializer[0].name!r}"
    graph.output.append(copy.deepcopy(graph.output[0]))
    return "graph output listed twice"


@mutation("duplicate_initializer")
def _duplicate_initializer(rng, model, side):
    graph = model.graph
    tensor = rng.choice(list(graph.initializer))
    dup = graph.initializer.add()
    dup.CopyFrom(tensor)
    if rng.random() < 0.5 and dup.data_location != TensorProto.EXTERNAL:
        dup.CopyFrom(numpy_helper.from_array(np.zeros(3, np.float32), tensor.name))
        return f"initializer {tensor.name!r} defined twice (different shapes)"
    return f"initializer {tensor.name!r} defined twice"


@mutation("initializer_shadows_input")
def _initializer_shadows_input(rng, model, side):
    graph = model.graph
    name = graph.input[0].name
    graph.initializer.append(numpy_helper.from_array(np.ones((2, 2), np.float32), name))
    return f"initializer named like graph input {name!r} (wrong shape)"


@mutation("weird_values")
def _weird_values(rng, model, side):
    inits = [t for g in all_graphs(model.graph) for t in g.initializer
             if t.data_type == TensorProto.FLOAT and t.data_location != TensorProto.EXTERNAL]
    if not inits:
        return None
    tensor = rng.choice(inits)
    array = numpy_helper.to_array(tensor).copy()
    value = rng.choice([np.nan, np.inf, -np.inf, 1e30, 7e4, 1e-30])
    array.flat[rng.randrange(array.size)] = value
    tensor.CopyFrom(numpy_helper.from_array(array, tensor.name))
    return f"initializer {tensor.name!r}: an element set to {value}"


@mutation("subgraph_break")
def _subgraph_break(rng, model, side):
    ifs = [n for n in all_nodes(model) if n.op_type == "If"]
    if not ifs:
        return None
    node = ifs[0]
    choice = rng.randrange(4)
    if choice == 0:
        keep = [a for a in node.attribute if a.name != "else_branch"]
        del node.attribute[:]
        node.attribute.extend(keep)
        return "If node without else_branch"
    branch = next(a for a in node.attribute if a.name == "then_branch").g
    if choice == 1:
        del branch.output[:]
        return "then_branch without outputs"
    if choice == 2:
        branch.output.append(helper.make_tensor_value_info("extra", TensorProto.FLOAT, [1]))
        return "then_branch with an extra (unproduced) output"
    branch.output[0].type.tensor_type.elem_type = TensorProto.INT64
    return "then_branch output typed int64 (else float)"


@mutation("external_data_refs")
def _external_data_refs(rng, model, side):
    inits = [t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    if not inits:
        return None
    tensor = rng.choice(inits)
    key = rng.choice(["location", "offset", "length"])
    value = {
        "location": rng.choice(["../outside.bin", "/etc/hostname", "missing.bin", ".", "", MODEL, "sub/../" + EXT_DATA]),
        "offset": rng.choice(["-1", str(HUGE), "abc", "3", "1e3"]),
        "length": rng.choice(["0", "-4", str(HUGE), "xyz", "7"]),
    }[key]
    for entry in tensor.external_data:
        if entry.key == key:
            entry.value = value
            break
    else:
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    return f"initializer {tensor.name!r}: external {key} = {value!r}"


@mutation("external_data_file")
def _external_data_file(rng, model, side):
    if EXT_DATA not in side:
        return None
    choice = rng.randrange(3)
    if choice == 0:
        del side[EXT_DATA]
        return f"{EXT_DATA} missing"
    data = side[EXT_DATA]
    if choice == 1:
        cut = rng.randrange(len(data))
        side[EXT_DATA] = data[:cut]
        return f"{EXT_DATA} truncated to {cut} bytes"
    side[EXT_DATA] = data + b"\0" * rng.randrange(1, 64)
    return f"{EXT_DATA} padded (longer than referenced)"


@mutation("empty_graph")
def _empty_graph(rng, model, side):
    graph = model.graph
    del graph.node[:]
    return "main graph: no nodes (outputs unproduced)"


@mutation("sparse_initializer")
def _sparse_initializer(rng, model, side):
    graph = model.graph
    inits = [t for t in graph.initializer if t.data_location != TensorProto.EXTERNAL and len(t.dims) == 2]
    if not inits:
        return None
    tensor = rng.choice(inits)
    array = numpy_helper.to_array(tensor)
    flat = np.flatnonzero(array)
    values = numpy_helper.from_array(array.flatten()[flat], tensor.name)
    indices = numpy_helper.from_array(flat.astype(np.int64) + (array.size if rng.random() < 0.3 else 0), "")
    sparse = helper.make_sparse_tensor(values, indices, list(array.shape))
    graph.sparse_initializer.append(sparse)
    graph.initializer.remove(tensor)
    return f"initializer {tensor.name!r} moved to sparse_initializer"


@mutation("local_function")
def _local_function(rng, model, side):
    node = rng.choice([n for n in model.graph.node if n.op_type in ("Relu", "Softmax", "Tanh", "Gemm", "MatMul")]
                      or list(model.graph.node))
    body_op = rng.choice(["Relu", "NoSuchOp", "Sigmoid"])
    inputs = [f"i{k}" for k in range(len(node.input))]
    function = helper.make_function(
        "local.fn", "Wrapped", inputs, ["o"],
        [helper.make_node(body_op, inputs[:1], ["o"], name="inner")],
        [helper.make_opsetid("", rng.choice([OPSET, 7]))],
    )
    model.functions.append(function)
    if rng.random() < 0.7:
        model.opset_import.append(helper.make_opsetid("local.fn", 1))
    node.op_type, node.domain = "Wrapped", "local.fn"
    del node.attribute[:]
    return f"node {node.name!r} calls local function local.fn::Wrapped (body {body_op})"


@mutation("constant_node")
def _constant_node(rng, model, side):
    graph = model.graph
    inits = [t for t in graph.initializer if t.data_location != TensorProto.EXTERNAL]
    if not inits:
        return None
    tensor = rng.choice(inits)
    attr = rng.choice(["value", "value_float", "value_ints", "value_string", "sparse_value"])
    if attr == "value":
        node = helper.make_node("Constant", [], [tensor.name], name="const", value=tensor)
    elif attr == "value_float":
        node = helper.make_node("Constant", [], [tensor.name], name="const", value_float=1.0)
    elif attr == "value_ints":
        node = helper.make_node("Constant", [], [tensor.name], name="const", value_ints=[1, 2, 3])
    elif attr == "value_string":
        node = helper.make_node("Constant", [], [tensor.name], name="const", value_string="abc")
    else:
        node = helper.make_node("Constant", [], [tensor.name], name="const", value_float=1.0, value_int=3)
    graph.initializer.remove(tensor)
    graph.node.insert(0, node)
    return f"initializer {tensor.name!r} -> Constant node ({attr}{', two values' if attr == 'sparse_value' else ''})"


@mutation("value_info_lie")
def _value_info_lie(rng, model, side):
    graph = model.graph
    produced = [o for n in graph.node for o in n.output if o and o not in {v.name for v in graph.output}]
    if not produced:
        return None
    name = rng.choice(produced)
    elem = rng.choice([TensorProto.INT64, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.FLOAT])
    dims = rng.choice([[1], [7, 7, 7], [], [HUGE]])
    kept = [v for v in graph.value_info if v.name != name]
    del graph.value_info[:]
    graph.value_info.extend(kept)
    graph.value_info.append(helper.make_tensor_value_info(name, elem, dims))
    return f"value_info {name!r} says {TensorProto.DataType.Name(elem)}{dims}"


STRUCTURAL = sorted(Mutation.registry)


def flip_bytes(rng: random.Random, data: bytes) -> Tuple[bytes, str]:
    buf = bytearray(data)
    count = rng.choice([1, 1, 2, 4, 16])
    spots = sorted(rng.randrange(len(buf)) for _ in range(count))
    for spot in spots:
        buf[spot] ^= rng.randrange(1, 256)
    return bytes(buf), f"flip {count} byte(s) at {spots[:4]}{'...' if count > 4 else ''}"


def truncate(rng: random.Random, data: bytes) -> Tuple[bytes, str]:
    cut = rng.randrange(len(data))
    return data[:cut], f"truncate to {cut}/{len(data)} bytes"


# --------------------------------------------------------------------------- policy mutations

VALID_POLICY = {
    "black-list": {"to-add": ["Softmax"], "to-remove": []},
    "white-list": {"to-add": ["MatMul", "Relu"], "to-remove": []},
    "gray-list": {"to-add": ["Add"]},
}

ODD_VALUES = [None, 1, -1.5, True, "Relu", [], {}, [1, 2], [["Relu"]], {"Relu": 1}, ["Relu", None], [""], ["  "],
              ["::"], ["a::"], ["::Relu"], ["ai.onnx::Softmax"], ["com.microsoft::"], ["\x00"], ["Relu\nBlack"],
              ["\ud800"], ["x" * 5000], ["MatMul", "MatMul"], float("nan")]


def _json_text(value) -> str:
    return json.dumps(value, allow_nan=True)


def policy_case(rng: random.Random) -> Tuple[bytes, str]:
    """Bytes of a malformed (or odd-but-valid) mixlist file and what was done."""
    policy = copy.deepcopy(VALID_POLICY)
    choice = rng.randrange(14)
    if choice == 0:
        text = json.dumps(policy).encode()
        cut = rng.randrange(len(text))
        return text[:cut], f"policy truncated to {cut} bytes"
    if choice == 1:
        key = rng.choice(list(policy))
        policy[key] = rng.choice(ODD_VALUES)
        return _json_text(policy).encode("utf-8", "surrogatepass"), f"policy {key} = {policy[key]!r:.60}"
    if choice == 2:
        key = rng.choice(list(policy))
        action = rng.choice(["to-add", "to-remove"])
        policy[key][action] = rng.choice(ODD_VALUES)
        return _json_text(policy).encode("utf-8", "surrogatepass"), f"policy {key}.{action} = {policy[key][action]!r:.60}"
    if choice == 3:
        where = rng.choice(["top", "action"])
        if where == "top":
            policy[rng.choice(["grey-list", "BLACK-LIST", "", "modify_mixlist", "black-list "])] = {"to-add": []}
        else:
            policy["white-list"][rng.choice(["to_add", "add", "to-delete", ""])] = ["Relu"]
        return json.dumps(policy).encode(), f"policy unknown key at {where}"
    if choice == 4:
        text = json.dumps(policy).encode()
        spot = rng.randrange(len(text))
        bad = rng.choice([b"\xff", b"\xfe\xff", b"\xc3", b"\xe9", b"\x80\x80", b"\xed\xa0\x80"])
        return text[:spot] + bad + text[spot:], f"policy with non-UTF-8 bytes {bad!r} at {spot}"
    if choice == 5:
        enc = rng.choice(["utf-16", "utf-8-sig", "latin-1", "utf-32"])
        policy["white-list"]["to-add"].append("Relu\u00e9")
        return json.dumps(policy, ensure_ascii=False).encode(enc), f"policy encoded as {enc}"
    if choice == 6:
        depth = rng.choice([100, 2000, 100_000])
        where = rng.choice(["top", "to-add"])
        nest = "[" * depth + "]" * depth
        if where == "top":
            text = nest
        else:
            text = '{"black-list": {"to-add": ' + nest + "}}"
        if rng.random() < 0.3:
            text = text[: len(text) // 2]  # unclosed
        return text.encode(), f"policy nested {depth} deep at {where}"
    if choice == 7:
        depth = rng.choice([1000, 100_000])
        text = '{"a":' * depth + "1" + "}" * depth
        return text.encode(), f"policy objects nested {depth} deep"
    if choice == 8:
        literal = rng.choice(["1" * 5000, "1e999", "-1e999", "NaN", "Infinity", "0x10"])
        text = '{"black-list": {"to-add": ' + literal + "}}"
        return text.encode(), f"policy number literal {literal[:12]!r}"
    if choice == 9:
        text = rng.choice([b"", b"   \n", b"null", b"[]", b'"black-list"', b"0", b"{}", b'{"black-list": {}}'])
        return text, f"policy file {text!r}"
    if choice == 10:
        op = rng.choice(["Softmax", "MatMul", "NoSuchOp"])
        policy["white-list"]["to-add"].append(op)
        policy["black-list"]["to-remove"] = [rng.choice(["Relu", "Softmax", "Conv"])]
        return json.dumps(policy).encode(), f"policy contradictions ({op} in two lists, a remove)"
    if choice == 11:
        text = '{"black-list": {"to-add": ["Softmax"]}, "black-list": {"to-add": "x"}}'
        return text.encode(), "policy duplicate key (last one wins)"
    if choice == 12:
        text = '{"white-list": {"to-add": ["\\ud800", "\\udfff"]}}'
        return text.encode(), "policy op names with lone surrogate escapes"
    text = json.dumps(policy).encode()
    text, how = flip_bytes(rng, text)
    return text, f"policy bytes: {how}"


# --------------------------------------------------------------------------- npz mutations


def _npz_bytes(arrays: Dict[str, np.ndarray], compressed: bool = False) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def _input_spec(base: str) -> Tuple[str, Tuple[int, ...]]:
    model = BASES[base]()
    value = model.graph.input[0]
    return value.name, tuple(d.dim_value for d in value.type.tensor_type.shape.dim)


def npz_case(rng: random.Random, base: str) -> Tuple[bytes, str]:
    """Bytes of a malformed (or odd-but-valid) --inputs .npz for the base model and what was done."""
    name, shape = _input_spec(base)
    nprng = np.random.default_rng(rng.randrange(2**32))
    good = nprng.standard_normal(shape).astype(np.float32)
    choice = rng.randrange(12)
    if choice == 0:
        dtype = rng.choice(["float64", "float16", "int32", "int64", "bool", "complex64", "uint8", "<U3", "S4",
                            "datetime64[s]", "timedelta64[ms]", "V8"])
        try:
            array = good.astype(dtype)
        except (TypeError, ValueError):
            array = np.zeros(shape, dtype=dtype)
        return _npz_bytes({name: array}), f"npz {name} as {dtype}"
    if choice == 1:
        dtype = np.dtype([("a", "<f4"), ("b", "<i4")])
        return _npz_bytes({name: np.zeros(shape, dtype)}), f"npz {name} structured dtype"
    if choice == 2:
        new_shape = rng.choice([(), (1,), shape + (1,), shape[:-1], tuple(d + 1 for d in shape), (0,) + shape[1:],
                                tuple(reversed(shape)), (1,) * 9])
        array = nprng.standard_normal(new_shape).astype(np.float32)
        return _npz_bytes({name: array}), f"npz {name} shape {new_shape}"
    if choice == 3:
        arrays = rng.choice([{}, {"X": good}, {"input": good}, {name + " ": good}, {name: good, "extra": good},
                             {"y": good}])
        return _npz_bytes(arrays), f"npz names {sorted(arrays)}"
    if choice == 4:
        data = rng.choice([b"", b"not a zip at all", b"PK\x03\x04" + bytes(range(64)), b"\x93NUMPY"])
        return data, f"npz not a zip: {data[:12]!r}"
    if choice == 5:
        data = _npz_bytes({name: good}, compressed=rng.random() < 0.5)
        cut = rng.randrange(len(data))
        return data[:cut], f"npz truncated to {cut}/{len(data)} bytes"
    if choice == 6:
        obj = np.empty(shape[:1], dtype=object)
        obj[:] = [{"pickled": i} for i in range(shape[0])]
        return _npz_bytes({name: obj}), "npz object array (pickle)"
    if choice == 7:
        buf = io.BytesIO()
        np.save(buf, good)
        return buf.getvalue(), "npz is a plain .npy file"
    if choice == 8:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as zf:
            zf.writestr(f"{name}.npy", rng.choice([b"garbage", b"\x93NUMPY\x01\x00\x10\x00{'descr': 1}   \n"]))
            if rng.random() < 0.5:
                zf.writestr("notes.txt", b"hello")
        return buf.getvalue(), "npz zip with a bad .npy member"
    if choice == 9:
        array = good.copy()
        array.flat[0] = rng.choice([np.nan, np.inf, -np.inf, 1e30])
        return _npz_bytes({name: array}), f"npz {name} with {array.flat[0]}"
    if choice == 10:
        array = np.asfortranarray(good) if rng.random() < 0.5 else good.astype(">f4")
        return _npz_bytes({name: array}), f"npz {name} {'fortran order' if array.flags.f_contiguous else 'big-endian'}"
    data = _npz_bytes({name: good})
    data, how = flip_bytes(rng, data)
    return data, f"npz bytes: {how}"


# --------------------------------------------------------------------------- cases


@dataclasses.dataclass
class Case:
    """One fuzz case: files to lay out, CLI arguments ({dir} -> the case folder) and what it is."""

    seed: int
    index: int
    command: str  # "convert", "validate" or "policy"
    base: str
    description: str
    files: Dict[str, bytes]
    args: List[str]
    allowed_new: Tuple[str, ...] = ()

    @property
    def repro(self) -> str:
        return f"seed={self.seed} case={self.index}: {self.command} [{self.base}] {self.description}"

    def argv(self, folder: Path) -> List[str]:
        return [a.replace("{dir}", str(folder)) for a in self.args]


def _model_mutation(rng: random.Random, base: str) -> Tuple[Dict[str, bytes], str]:
    data, side_items = base_files(base)
    side = dict(side_items)
    steps = []
    kind = rng.random()
    if kind < 0.65:  # structural mutation(s), then maybe a byte-level one
        model = base_proto(base)
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            name = rng.choice(STRUCTURAL)
            try:
                desc = Mutation.registry[name](rng, model, side)
            except (IndexError, ValueError, StopIteration):
                desc = None
            if desc:
                steps.append(f"{name}({desc})")
        data = model.SerializeToString()
        if rng.random() < 0.1:
            data, how = flip_bytes(rng, data)
            steps.append(how)
    elif kind < 0.85:
        data, how = flip_bytes(rng, data)
        steps.append(how)
    else:
        data, how = truncate(rng, data)
        steps.append(how)
    files = {MODEL: data, **side}
    return files, "; ".join(steps) or "unmutated"


def make_case(seed: int, index: int) -> Case:
    """Case ``index`` of ``seed``: everything drawn from ``random.Random(f"{seed}:{index}")``."""
    rng = random.Random(f"{seed}:{index}")
    roll = rng.random()
    if roll < 0.58:
        base = rng.choice(list(BASES))
        files, desc = _model_mutation(rng, base)
        args = ["convert", "{dir}/" + MODEL, "-o", "{dir}/" + OUTPUT]
        allowed = [OUTPUT, OUTPUT + ".data"]
        if rng.random() < 0.3:
            args += ["--report", "{dir}/" + REPORT]
            allowed.append(REPORT)
        if rng.random() < 0.25:
            args += ["--dtype", "bf16"]
        if rng.random() < 0.25:
            args += ["--level", rng.choice(["O1", "O3"])]
        return Case(seed, index, "convert", base, desc, files, args, tuple(allowed))
    if roll < 0.80:
        policy, desc = policy_case(rng)
        if rng.random() < 0.3:
            return Case(seed, index, "policy", "-", desc, {POLICY: policy},
                        ["policy", "show", "--mixlist", "{dir}/" + POLICY])
        base = rng.choice(["mlp", "conv"])
        data, _ = base_files(base)
        args = ["convert", "{dir}/" + MODEL, "-o", "{dir}/" + OUTPUT, "--mixlist", "{dir}/" + POLICY]
        return Case(seed, index, "convert", base, desc, {MODEL: data, POLICY: policy}, args, (OUTPUT, OUTPUT + ".data"))
    base = rng.choice(["mlp", "conv", "if"])
    data, _ = base_files(base)
    files = {MODEL: data, **dict(converted_files(base))}
    if roll < 0.95:
        npz, desc = npz_case(rng, base)
        files[INPUTS] = npz
        args = ["validate", "{dir}/" + MODEL, "{dir}/" + CONVERTED, "--inputs", "{dir}/" + INPUTS]
        return Case(seed, index, "validate", base, desc, files, args)
    # validate against a mutated converted model (random inputs)
    conv = onnx.ModelProto()
    conv.ParseFromString(files[CONVERTED])
    name = rng.choice(STRUCTURAL)
    try:
        desc = Mutation.registry[name](rng, conv, {})
    except (IndexError, ValueError, StopIteration):
        desc = None
    files[CONVERTED] = conv.SerializeToString()
    desc = f"converted model {name}({desc})" if desc else "converted model unmutated"
    args = ["validate", "{dir}/" + MODEL, "{dir}/" + CONVERTED]
    return Case(seed, index, "validate", base, desc, files, args)


# --------------------------------------------------------------------------- running


@dataclasses.dataclass
class Outcome:
    case: Case
    status: str  # ok, error (clean), drift, or a failure kind
    exit_code: Optional[int]
    detail: str = ""
    signature: str = ""
    seconds: float = 0.0
    trace: str = ""  # the full traceback of a traceback failure

    @property
    def failed(self) -> bool:
        return self.status not in ("ok", "error", "drift")


class CaseTimeout(BaseException):
    """Raised by SIGALRM inside a case that runs past its limit."""


def snapshot(folder: Path) -> Dict[str, str]:
    """Every file and folder under ``folder`` (hidden ones too) -> SHA-256 (folders: 'dir')."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = "link"
        elif path.is_dir():
            out[rel] = "dir"
        else:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def _runner():
    from click.testing import CliRunner

    try:
        return CliRunner(mix_stderr=False)
    except TypeError:  # click >= 8.2 always separates stderr
        return CliRunner()


_OUR_CODE = ("/ampconv/", "/ampconv_cli/")


def traceback_signature(exc_info) -> str:
    """``ExcType at file:function:line`` of the innermost ampconv frame (else the innermost frame)."""
    etype, exc, tb = exc_info
    frames = traceback.extract_tb(tb)
    ours = [f for f in frames if any(part in f.filename for part in _OUR_CODE) and "click" not in f.filename]
    frame = (ours or frames or [None])[-1]
    where = "?"
    if frame is not None:
        parts = Path(frame.filename).parts
        where = "/".join(parts[-2:]) + f":{frame.name}:{frame.lineno}"
    return f"{etype.__name__} at {where}"


@contextlib.contextmanager
def _alarm(seconds: float):
    if seconds <= 0 or not hasattr(signal, "setitimer") or signal.getsignal(signal.SIGALRM) is None:
        yield
        return

    def on_alarm(signum, frame):
        raise CaseTimeout(f"case ran past {seconds:g} s")

    try:
        previous = signal.signal(signal.SIGALRM, on_alarm)
    except ValueError:  # not the main thread
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _check_model(path: Path) -> Optional[str]:
    try:
        onnx.checker.check_model(str(path))
    except Exception as exc:  # noqa: BLE001 -- any checker complaint is the finding
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    return None


class _StderrLogHandler(logging.Handler):
    """What Python's last-resort handler does (WARNING and up, message only, to the current
    ``sys.stderr``), so a case sees the same stderr under pytest (whose logging plugin installs
    handlers of its own) as in a terminal, plus a record of who logged."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: List[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        try:
            sys.stderr.write(record.getMessage() + "\n")
        except Exception:  # noqa: BLE001 -- like logging.lastResort, never raise from a handler
            pass


def _default_warning_filters() -> None:
    """Python's own default filters (what a user running ``ampconv`` sees), not pytest's:
    DeprecationWarning, PendingDeprecationWarning, ImportWarning and ResourceWarning hidden,
    every other warning shown (and recorded here)."""
    warnings.resetwarnings()
    warnings.simplefilter("always")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)


@contextlib.contextmanager
def _capture_logging():
    handler = _StderrLogHandler()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def _keep_copy(folder: Path, keep: Path, symlinks: bool = False) -> None:
    """Replace ``keep`` with a copy of a case's ``folder`` (--keep: what a failing case left, to reproduce it)."""
    if keep.exists():
        shutil.rmtree(keep)
    shutil.copytree(folder, keep, symlinks=symlinks)


def run_case(case: Case, keep: Optional[Path] = None, timeout: float = CASE_TIMEOUT_S) -> Outcome:
    """Lay out the case in a fresh folder, run the CLI in-process and judge the result."""
    from ampconv_cli.main import cli

    tmp = Path(tempfile.mkdtemp(prefix=f"ampconv-fuzz-{case.seed}-{case.index}-"))
    folder = tmp / "case"
    folder.mkdir()
    for name, data in case.files.items():
        (folder / name).write_bytes(data)
    before = snapshot(folder)
    start = time.perf_counter()
    try:
        with warnings.catch_warnings(record=True) as caught, _capture_logging() as logged:
            _default_warning_filters()
            with _alarm(timeout):
                result = _runner().invoke(cli, case.argv(folder), catch_exceptions=True)
        seconds = time.perf_counter() - start
        after = snapshot(folder)
        outcome = judge(case, folder, result, before, after, caught, logged.records)
        outcome.seconds = seconds
        return outcome
    finally:
        if keep is not None:
            _keep_copy(folder, Path(keep), symlinks=True)
        shutil.rmtree(tmp, ignore_errors=True)


def judge(case: Case, folder: Path, result, before: Dict[str, str], after: Dict[str, str], caught,
          logged: Sequence[logging.LogRecord] = ()) -> Outcome:
    code = result.exit_code
    stdout = result.stdout or ""
    try:
        stderr = result.stderr or ""
    except ValueError:
        stderr = ""
    changed = sorted(n for n in before if after.get(n) != before[n])
    new = sorted(set(after) - set(before))
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        if isinstance(exc, CaseTimeout):
            return Outcome(case, "timeout", code, str(exc), "timeout")
        sig = traceback_signature(result.exc_info)
        last = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        trace = "".join(traceback.format_exception(*result.exc_info))
        return Outcome(case, "traceback", code, last, sig, trace=trace)
    if "Traceback" in stdout or "Traceback" in stderr:
        line = next((ln for ln in reversed(stderr.splitlines() + stdout.splitlines()) if ln.strip()), "")
        return Outcome(case, "traceback", code, f"'Traceback' printed: {line[:200]}", f"printed traceback: {line[:80]}")
    if changed:
        return Outcome(case, "changed_input", code, f"inputs changed: {changed}", f"changed input {changed}")
    if code == 0:
        stray = [n for n in new if n not in case.allowed_new]
        if stray:
            return Outcome(case, "stray_file", code, f"exit 0 left {stray}", f"stray on success: {_shape_names(stray)}")
        if case.command == "convert":
            if OUTPUT not in after:
                return Outcome(case, "no_output", code, "exit 0 but no output written", "exit 0 without output")
            problem = _check_model(folder / OUTPUT)
            if problem:
                return Outcome(case, "invalid_output", code, problem, f"invalid output: {problem.split(':')[0]}")
        return Outcome(case, "ok", code)
    error_codes = {1, 2, 3} if case.command == "validate" else {1, 2}
    if code not in error_codes:
        return Outcome(case, "bad_exit", code, f"exit {code}; stderr {stderr.strip()[-200:]!r}", f"exit code {code}")
    if new:
        return Outcome(case, "stray_file", code, f"exit {code} left {new}", f"stray on error: {_shape_names(new)}")
    if case.command == "validate" and code == 3:
        if stderr.strip():
            return Outcome(case, "bad_stderr", code, f"exit 3 with stderr {stderr.strip()[:200]!r}", "stderr on drift")
        return Outcome(case, "drift", code)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if caught:
        first = caught[0]
        text = f"{first.category.__name__}: {first.message}"
        lines.append(text)
        return Outcome(case, "warning_on_error", code, text[:300],
                       f"python warning on error path: {first.category.__name__} "
                       f"at {'/'.join(Path(first.filename).parts[-2:])}:{first.lineno}: {_template(first.message)}")
    if logged:
        record = logged[0]
        return Outcome(case, "log_on_error", code, f"logged: {record.getMessage()[:240]!r} | {lines[-1][:200]}",
                       f"{record.levelname} logged on error path by logger {record.name!r} at "
                       f"{'/'.join(Path(record.pathname).parts[-2:])}:{record.funcName}: {_template(record.msg)}")
    if len(lines) != 1 or not lines[0].startswith("ampconv: error:"):
        return Outcome(case, "bad_stderr", code, f"stderr {stderr.strip()[:300]!r}",
                       f"stderr not one 'ampconv: error:' line ({len(lines)} lines)")
    return Outcome(case, "error", code, lines[0][:300])


def _template(text) -> str:
    """A log message with quoted names and numbers masked, for grouping."""
    import re

    text = re.sub(r"'[^']*'", "'…'", str(text).splitlines()[0] if str(text) else "")
    return re.sub(r"\d+", "N", text)[:100]


def _shape_names(names: Sequence[str]) -> str:
    """Names with the random part of temporary names masked, for grouping."""
    import re

    return ", ".join(sorted({re.sub(r"\.[A-Za-z0-9_]{6,}\.", ".*.", n) for n in names}))


def run_fuzz(cases: int, seed: int, *, start: int = 0, timeout: float = CASE_TIMEOUT_S, verbose: bool = False,
             log=None) -> List[Outcome]:
    """Run cases ``start .. start+cases-1`` of ``seed``; return every outcome."""
    outcomes = []
    for index in range(start, start + cases):
        case = make_case(seed, index)
        outcome = run_case(case, timeout=timeout)
        outcomes.append(outcome)
        if log is not None and (verbose or outcome.failed):
            mark = "FAIL " + outcome.status if outcome.failed else outcome.status
            log(f"[{index}] {mark} exit={outcome.exit_code} {outcome.seconds:.2f}s {case.repro} :: {outcome.detail}")
    return outcomes


def render_summary(outcomes: Sequence[Outcome]) -> str:
    """Counts, then the distinct failure signatures with counts and the first repro of each."""
    count = lambda status: sum(1 for o in outcomes if o.status == status)  # noqa: E731
    failures = [o for o in outcomes if o.failed]
    lines = [
        f"cases run:       {len(outcomes)}",
        f"ok:              {count('ok')}",
        f"clean errors:    {count('error')}",
        f"drift (exit 3):  {count('drift')}",
        f"tracebacks:      {count('traceback')}",
        f"stray files:     {count('stray_file')}",
        f"changed inputs:  {count('changed_input')}",
        f"other failures:  {len(failures) - count('traceback') - count('stray_file') - count('changed_input')}",
        f"time:            {sum(o.seconds for o in outcomes):.1f} s",
    ]
    if failures:
        groups: Dict[str, List[Outcome]] = {}
        for o in failures:
            groups.setdefault(f"{o.status}: {o.signature}", []).append(o)
        lines.append(f"distinct failures: {len(groups)}")
        for sig, group in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            lines.append(f"  [{len(group)}x] {sig}")
            for o in group[:3]:
                lines.append(f"      {o.case.repro}")
                lines.append(f"        -> exit {o.exit_code}: {o.detail[:240]}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the valid family


def _load_fuzz_valid():
    """scripts/fuzz_valid.py by path: scripts/ is no package, and tests load this file by path too."""
    import importlib.util

    if "fuzz_valid" not in sys.modules:
        spec = importlib.util.spec_from_file_location("fuzz_valid", Path(__file__).resolve().parent / "fuzz_valid.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["fuzz_valid"] = module  # before running it: dataclasses look their module up there
        spec.loader.exec_module(module)
    return sys.modules["fuzz_valid"]


fuzz_valid = _load_fuzz_valid()

# The conversions every valid case must survive: the arguments after ``convert MODEL -o OUT``, and
# whether the output must also run and match the float32 outputs (bf16 only has to load: the CPU
# provider lacks most bfloat16 kernels, and a NOT_IMPLEMENTED kernel error means the graph resolved).
VALID_KINDS: Dict[str, Tuple[Tuple[str, ...], bool]] = {
    "fp16": ((), True),
    "O3": (("--level", "O3"), True),
    "bf16": (("--dtype", "bf16"), False),
    "no-keep-io": (("--no-keep-io-types",), True),
}
VALID_CASE_TIMEOUT_S = 120.0


@dataclasses.dataclass
class KindResult:
    """One conversion of a valid case: ``ok`` or a failure (traceback, exit, no_output, output, crash,
    timeout, harness)."""

    kind: str
    status: str
    detail: str = ""
    seconds: float = 0.0
    trace: str = ""

    @property
    def failed(self) -> bool:
        return self.status != "ok"

    @property
    def signature(self) -> str:
        """The failure with names, numbers and paths masked: what groups equal failures of different cases."""
        return f"{self.status}: {_mask(self.detail)}"


@dataclasses.dataclass
class ValidOutcome:
    """A valid case's fate: skipped (onnxruntime refuses the input: why), or one result per conversion."""

    case: "fuzz_valid.ValidCase"
    skipped: str = ""
    results: List[KindResult] = dataclasses.field(default_factory=list)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return any(r.failed for r in self.results)


def _mask(text: str) -> str:
    """``text`` with quoted names, node names, temporary paths and numbers masked, for grouping."""
    import re

    text = re.sub(r"\S*ampconv-fuzz-valid-[^/\s]*/", "…/", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    text = re.sub(r"\bNode \([^)]*\)", "Node (…)", text)
    text = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "N", text)
    return text[:160]


def _first_stderr_line(result) -> str:
    try:
        stderr = result.stderr or ""
    except ValueError:  # click < 8.2 without mix_stderr=False
        stderr = result.output or ""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    return lines[0] if lines else "(no stderr)"


def convert_and_check(case, folder: Path, kind: str, expected) -> KindResult:
    """Run ``ampconv convert`` (in-process, like the malformed family) for one conversion kind and judge it."""
    from ampconv_cli.main import cli

    args, must_run = VALID_KINDS[kind]
    out = folder / f"out.{kind}.onnx"
    start = time.perf_counter()
    result = _runner().invoke(cli, ["convert", str(folder / MODEL), "-o", str(out), *args], catch_exceptions=True)
    seconds = time.perf_counter() - start
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        line = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
        trace = "".join(traceback.format_exception(*result.exc_info))
        return KindResult(kind, "traceback", f"{traceback_signature(result.exc_info)}: {line}", seconds, trace)
    if result.exit_code != 0:
        return KindResult(kind, "exit", f"exit {result.exit_code}: {_first_stderr_line(result)}", seconds)
    if not out.exists():
        return KindResult(kind, "no_output", "exit 0 but no output written", seconds)
    problem = fuzz_valid.check_converted(out, case.feeds, expected, run=must_run, original=folder / MODEL)
    seconds = time.perf_counter() - start
    return KindResult(kind, "output", problem, seconds) if problem else KindResult(kind, "ok", seconds=seconds)


def _valid_steps(case, folder: Path, send: Callable[[tuple], None]) -> None:
    """The steps of one valid case; ``send`` reports each as it starts and ends, so a crash keeps what was done."""
    model = folder / MODEL
    model.write_bytes(case.model)
    send(("stage", "reference"))
    expected, refusal = fuzz_valid.reference(model, case.feeds)
    if refusal is not None:
        send(("skipped", refusal))
        return
    for kind in VALID_KINDS:
        send(("stage", kind))
        send(("result", dataclasses.astuple(convert_and_check(case, folder, kind, expected))))


def _child_main(target: Callable, sender) -> None:
    try:
        target(sender.send)
    except BaseException as exc:  # noqa: BLE001 -- a bug of the harness itself: report it, do not hide it
        sender.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        sender.close()


def run_in_child(target: Callable[[Callable[[tuple], None]], None], timeout: float) -> Tuple[List[tuple], str]:
    """Run ``target(send)`` in a forked child; return the messages it sent and, if it died, how ("" if not).

    onnxruntime can die on a model (SIGSEGV on LayerNormalization with bias '' in 1.32) or hang: a
    child costs one case, not the whole run, and can be killed at ``timeout``. Without fork (not
    Linux/macOS) it runs in this process.
    """
    import multiprocessing
    import os

    if not hasattr(os, "fork"):
        messages: List[tuple] = []
        target(messages.append)
        return messages, ""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(target, sender), daemon=True)
    child.start()
    sender.close()  # the child holds the only write end now: its exit ends the stream
    messages, death = [], ""
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not receiver.poll(remaining):
            child.kill()
            death = f"ran past {timeout:g} s"
            break
        try:
            messages.append(receiver.recv())
        except EOFError:
            break
    child.join()
    receiver.close()
    if not death and child.exitcode:
        code = child.exitcode
        death = f"died of {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
    return messages, death


def _valid_outcome(case, messages: Sequence[tuple], death: str) -> ValidOutcome:
    outcome = ValidOutcome(case)
    stage = ""
    for message in messages:
        tag = message[0]
        if tag == "stage":
            stage = message[1]
        elif tag == "skipped":
            outcome.skipped = message[1]
        elif tag == "result":
            outcome.results.append(KindResult(*message[1]))
            stage = ""
        elif tag == "error":
            outcome.results.append(KindResult(stage or "harness", "harness", message[1], trace=message[2]))
            return outcome
    if death and stage == "reference":  # onnxruntime's own failure on a model it should take: not ours to judge
        outcome.skipped = f"onnxruntime {death} on the input"
    elif death:
        status = "timeout" if death.startswith("ran past") else "crash"
        outcome.results.append(KindResult(stage or "harness", status, f"the case process {death} during {stage or '?'}"))
    return outcome


def run_valid_case(case, keep: Optional[Path] = None, timeout: float = VALID_CASE_TIMEOUT_S) -> ValidOutcome:
    """Check onnxruntime runs ``case``, then convert it every VALID_KINDS way and judge each output."""
    tmp = Path(tempfile.mkdtemp(prefix=f"ampconv-fuzz-valid-{case.seed}-{case.index}-"))
    start = time.perf_counter()
    try:
        messages, death = run_in_child(functools.partial(_valid_steps, case, tmp), timeout)
        outcome = _valid_outcome(case, messages, death)
        outcome.seconds = time.perf_counter() - start
        return outcome
    finally:
        if keep is not None:
            _keep_copy(tmp, Path(keep))
            np.savez(Path(keep) / INPUTS, **case.feeds)  # for `ampconv validate ... --inputs`
        shutil.rmtree(tmp, ignore_errors=True)


def valid_replay(case) -> str:
    """The command that replays one valid case."""
    return f"python scripts/fuzz.py --family valid --seed {case.seed} --case {case.index}"


def run_valid_fuzz(cases: int, seed: int, *, start: int = 0, timeout: float = VALID_CASE_TIMEOUT_S,
                   verbose: bool = False, log=None) -> List[ValidOutcome]:
    """Generate and run valid cases ``start .. start+cases-1`` of ``seed``; return every outcome."""
    outcomes = []
    for index in range(start, start + cases):
        case = fuzz_valid.make_case(seed, index)
        outcome = run_valid_case(case, timeout=timeout)
        outcomes.append(outcome)
        if log is None or not (verbose or outcome.failed):
            continue
        if outcome.skipped:
            log(f"[{index}] skipped {outcome.seconds:.2f}s {case.repro} :: {outcome.skipped}")
            continue
        failed = [r for r in outcome.results if r.failed]
        mark = "FAIL " + ",".join(r.kind for r in failed) if failed else "ok"
        log(f"[{index}] {mark} {outcome.seconds:.2f}s {case.repro}" + (f" :: {failed[0].detail}" if failed else ""))
    return outcomes


def render_valid_summary(outcomes: Sequence[ValidOutcome]) -> str:
    """Counts (generated, skipped, converted OK per kind, failures), then each distinct failure with replays."""
    run = [o for o in outcomes if not o.skipped]
    skipped = [o for o in outcomes if o.skipped]
    per_kind = {kind: [r for o in run for r in o.results if r.kind == kind] for kind in VALID_KINDS}
    failed = [o for o in run if o.failed]
    seconds = sum(o.seconds for o in outcomes)
    lines = [
        "valid family: models onnxruntime runs, each converted " + ", ".join(VALID_KINDS),
        f"generated:          {len(outcomes)}",
        f"skipped (invalid):  {len(skipped)} (onnxruntime refuses to load or run them)",
    ]
    reasons: Dict[str, int] = {}
    for o in skipped:
        key = _mask(o.skipped)
        reasons[key] = reasons.get(key, 0) + 1
    lines += [f"    [{n}x] {reason}" for reason, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:5]]
    lines.append("converted OK:       " + ", ".join(
        f"{kind} {sum(1 for r in results if not r.failed)}/{len(run)}" for kind, results in per_kind.items()))
    lines.append(f"failed cases:       {len(failed)} of {len(run)} (" + ", ".join(
        f"{kind} {sum(1 for r in results if r.failed)}" for kind, results in per_kind.items()) + ")")
    lines.append(f"time:               {seconds:.1f} s ({seconds / max(len(outcomes), 1):.2f} s per case)")
    groups: Dict[str, List[Tuple[ValidOutcome, KindResult]]] = {}
    for o in failed:
        for r in o.results:
            if r.failed:
                groups.setdefault(r.signature, []).append((o, r))
    if groups:
        lines.append(f"distinct failures:  {len(groups)}")
    for signature, members in sorted(groups.items(), key=lambda kv: -len({o.case.index for o, _ in kv[1]})):
        cases = sorted({o.case.index for o, _ in members})
        kinds: Dict[str, int] = {}
        for _, r in members:
            kinds[r.kind] = kinds.get(r.kind, 0) + 1
        lines.append(f"  [{len(cases)} case(s); " + ", ".join(f"{k} {n}" for k, n in kinds.items()) + f"] {signature}")
        shown = set()
        for o, r in members:
            if o.case.index in shown or len(shown) == 3:
                continue
            shown.add(o.case.index)
            lines.append(f"      {valid_replay(o.case)}  # {r.kind}: {o.case.repro[:200]}")
            lines.append(f"        -> {r.detail[:300]}")
    return "\n".join(lines)


def _replay_valid(args) -> int:
    """``--family valid --case N``: one case, every conversion's result (``-v``: tracebacks in full)."""
    case = fuzz_valid.make_case(args.seed, args.case)
    outcome = run_valid_case(case, keep=args.keep, timeout=args.timeout or VALID_CASE_TIMEOUT_S)
    print(case.repro)
    if outcome.skipped:
        print(f"skipped (invalid): {outcome.skipped}")
        return 0
    for r in outcome.results:
        print(f"{r.kind:11s} {r.status:9s} {r.seconds:.2f}s {r.detail}")
        if r.trace and args.verbose:
            print(r.trace)
    return 1 if outcome.failed else 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=["malformed", "valid"], default="malformed",
                        help="malformed: broken models, policies and inputs (the default); valid: models "
                             "onnxruntime runs, each converted four ways (scripts/fuzz_valid.py)")
    parser.add_argument("--cases", type=int, default=200, help="number of cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first case index")
    parser.add_argument("--case", type=int, default=None, help="run only this case index (a repro)")
    parser.add_argument("--keep", type=Path, default=None, help="with --case: copy the case folder here afterwards")
    parser.add_argument("--timeout", type=float, default=None,
                        help=f"seconds per case (default {CASE_TIMEOUT_S:g}; valid family {VALID_CASE_TIMEOUT_S:g})")
    parser.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = parser.parse_args(argv)
    log = functools.partial(print, flush=True)
    if args.family == "valid":
        if args.case is not None:
            return _replay_valid(args)
        outcomes = run_valid_fuzz(args.cases, args.seed, start=args.start,
                                  timeout=args.timeout or VALID_CASE_TIMEOUT_S, verbose=args.verbose, log=log)
        print(render_valid_summary(outcomes))
        return 1 if any(o.failed for o in outcomes) else 0
    args.timeout = CASE_TIMEOUT_S if args.timeout is None else args.timeout
    if args.case is not None:
        case = make_case(args.seed, args.case)
        outcome = run_case(case, keep=args.keep, timeout=args.timeout)
        print(f"{case.repro}\nargv: ampconv {' '.join(case.args)}\nstatus: {outcome.status} exit={outcome.exit_code} "
              f"{outcome.signature}\n{outcome.detail}")
        if outcome.trace and args.verbose:
            print(outcome.trace)
        return 1 if outcome.failed else 0
    outcomes = run_fuzz(args.cases, args.seed, start=args.start, timeout=args.timeout, verbose=args.verbose, log=log)
    print(render_summary(outcomes))
    return 1 if any(o.failed for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
