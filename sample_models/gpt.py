"""Build a seeded GPT-style decoder with its weights in external data.

The default size (24 layers, hidden 1024, vocab 32000, tied embeddings) holds
about 1.35 GB of float32 weights: the size where fp16/bf16 conversion matters
and where converters that load the whole model fail. Weights are generated and
written one tensor at a time, so building a model needs memory for one tensor,
not for the model.

Layouts (``--layout``), the forms users meet:

1. ``single``: every weight in one file, ``<model>.onnx.data``.
2. ``per-tensor``: one file per tensor, named after the tensor.
3. ``shards``: several files ``<model>-0000k-of-0000n.data`` of about
   ``--shard-mb`` each.
4. ``other-folder``: one data file in a sub-folder (``<model>_weights/``); ONNX
   locations must stay inside the model's folder, so a sub-folder is the only
   portable "other folder".
5. ``inline``: no external data (refused when the model would reach 2 GB).

Usage::

    python sample_models/gpt.py --out /tmp/gpt --layers 24 --hidden 1024 --vocab 32000
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
import sys
from pathlib import Path
from typing import BinaryIO, Dict, Iterator, List, Optional, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper

LAYOUTS = ("single", "per-tensor", "shards", "other-folder", "inline")
OPSET = 17
MAX_POSITIONS = 2048
# Tensors at or below this size stay inline whatever the layout, as exporters do
# (onnx.save's default threshold is 1024 bytes).
INLINE_THRESHOLD = 1024
PROTOBUF_LIMIT = 2 * 1024**3


@dataclasses.dataclass(frozen=True)
class GptSpec:
    """The size of the generated decoder."""

    layers: int = 24
    hidden: int = 1024
    vocab: int = 32000
    max_positions: int = MAX_POSITIONS

    @property
    def heads(self) -> int:
        """Attention heads of width 64 (at least one)."""
        return max(1, self.hidden // 64)


def weight_shapes(spec: GptSpec) -> List[Tuple[str, Tuple[int, ...]]]:
    """Every initializer name and shape, in the order the graph uses them."""
    h = spec.hidden
    shapes: List[Tuple[str, Tuple[int, ...]]] = [
        ("wte", (spec.vocab, h)),
        ("wpe", (spec.max_positions, h)),
    ]
    for i in range(spec.layers):
        p = f"h.{i}."
        shapes += [
            (p + "ln_1.weight", (h,)),
            (p + "ln_1.bias", (h,)),
            (p + "attn.c_attn.weight", (h, 3 * h)),
            (p + "attn.c_attn.bias", (3 * h,)),
            (p + "attn.c_proj.weight", (h, h)),
            (p + "attn.c_proj.bias", (h,)),
            (p + "ln_2.weight", (h,)),
            (p + "ln_2.bias", (h,)),
            (p + "mlp.c_fc.weight", (h, 4 * h)),
            (p + "mlp.c_fc.bias", (4 * h,)),
            (p + "mlp.c_proj.weight", (4 * h, h)),
            (p + "mlp.c_proj.bias", (h,)),
        ]
    shapes += [("ln_f.weight", (h,)), ("ln_f.bias", (h,))]
    return shapes


def weight_bytes(spec: GptSpec) -> int:
    """Total float32 bytes of the weights of ``spec``."""
    return sum(4 * math.prod(shape) for _, shape in weight_shapes(spec))


def spec_for_bytes(target_bytes: int, hidden: int = 512, vocab: int = 8000) -> GptSpec:
    """The spec with ``hidden``/``vocab`` whose weights come closest to ``target_bytes``.

    Only the layer count changes, so the largest tensor stays the same as the
    model grows: what a memory-flatness comparison needs.
    """
    base = weight_bytes(GptSpec(layers=0, hidden=hidden, vocab=vocab))
    per_layer = weight_bytes(GptSpec(layers=1, hidden=hidden, vocab=vocab)) - base
    layers = max(1, round((target_bytes - base) / per_layer))
    return GptSpec(layers=layers, hidden=hidden, vocab=vocab)


def _weights(spec: GptSpec, seed: int) -> Iterator[Tuple[str, np.ndarray]]:
    """Yield (name, float32 array) one at a time, seeded and reproducible."""
    rng = np.random.default_rng(seed)
    for name, shape in weight_shapes(spec):
        if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
            arr = (1.0 + 0.05 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
        elif name.endswith(".bias"):
            arr = (0.01 * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
        else:
            arr = rng.standard_normal(shape, dtype=np.float32)
            arr *= np.float32(0.02)
        yield name, arr


def _graph_nodes(spec: GptSpec) -> Tuple[List[onnx.NodeProto], List[TensorProto]]:
    """The decoder's nodes plus the small constant initializers they need."""
    h, nh = spec.hidden, spec.heads
    hd = h // nh
    nodes: List[onnx.NodeProto] = []
    consts: List[TensorProto] = []

    def const(name: str, values, dtype=np.int64) -> str:
        consts.append(onnx.numpy_helper.from_array(np.array(values, dtype=dtype), name))
        return name

    def node(op: str, inputs: List[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    c_zero = const("const.zero", 0)
    c_one = const("const.one", 1)
    c_one_f = const("const.one_f", 1.0, np.float32)
    c_half = const("const.half", 0.5, np.float32)
    c_rsqrt2 = const("const.rsqrt2", 1.0 / math.sqrt(2.0), np.float32)
    c_neg = const("const.mask_value", -10000.0, np.float32)
    c_scale = const("const.attn_scale", 1.0 / math.sqrt(hd), np.float32)
    c_heads = const("const.heads_shape", [0, 0, nh, hd])
    c_merge = const("const.merge_shape", [0, 0, h])
    c_split = const("const.qkv_split", [h, h, h])

    shape = node("Shape", ["input_ids"], "/pos/shape")
    seq = node("Gather", [shape, c_one], "/pos/seq", axis=0)
    pos = node("Range", [c_zero, seq, c_one], "/pos/range")
    tok = node("Gather", ["wte", "input_ids"], "/embed/tok", axis=0)
    pemb = node("Gather", ["wpe", pos], "/embed/pos", axis=0)
    x = node("Add", [tok, pemb], "/embed/add")
    # Causal mask: 0 on and below the diagonal, -1e4 above (fits fp16).
    seq2 = node("Concat", [node("Unsqueeze", [seq, c_zero], "/mask/s"), "/mask/s"], "/mask/ss", axis=0)
    ones = node("ConstantOfShape", [seq2], "/mask/ones",
                value=onnx.numpy_helper.from_array(np.array([1.0], np.float32)))
    tri = node("Trilu", [ones], "/mask/tri", upper=0)
    inv = node("Sub", [c_one_f, tri], "/mask/inv")
    mask = node("Mul", [inv, c_neg], "/mask/value")

    for i in range(spec.layers):
        p, w = f"/h.{i}", f"h.{i}."
        ln1 = node("LayerNormalization", [x, w + "ln_1.weight", w + "ln_1.bias"], p + "/ln_1", axis=-1, epsilon=1e-5)
        qkv = node("Add", [node("MatMul", [ln1, w + "attn.c_attn.weight"], p + "/attn/qkv_mm"),
                           w + "attn.c_attn.bias"], p + "/attn/qkv")
        nodes.append(helper.make_node("Split", [qkv, c_split], [p + "/attn/q", p + "/attn/k", p + "/attn/v"],
                                      name=p + "/attn/split", axis=-1))
        heads = {}
        for part, perm in (("q", [0, 2, 1, 3]), ("k", [0, 2, 3, 1]), ("v", [0, 2, 1, 3])):
            r = node("Reshape", [p + f"/attn/{part}", c_heads], p + f"/attn/{part}_heads")
            heads[part] = node("Transpose", [r], p + f"/attn/{part}_t", perm=perm)
        scores = node("Mul", [node("MatMul", [heads["q"], heads["k"]], p + "/attn/qk"), c_scale], p + "/attn/scaled")
        probs = node("Softmax", [node("Add", [scores, mask], p + "/attn/masked")], p + "/attn/softmax", axis=-1)
        ctx = node("MatMul", [probs, heads["v"]], p + "/attn/ctx")
        ctx = node("Reshape", [node("Transpose", [ctx], p + "/attn/ctx_t", perm=[0, 2, 1, 3]), c_merge],
                   p + "/attn/merge")
        proj = node("Add", [node("MatMul", [ctx, w + "attn.c_proj.weight"], p + "/attn/proj_mm"),
                            w + "attn.c_proj.bias"], p + "/attn/proj")
        x = node("Add", [x, proj], p + "/res_1")
        ln2 = node("LayerNormalization", [x, w + "ln_2.weight", w + "ln_2.bias"], p + "/ln_2", axis=-1, epsilon=1e-5)
        fc = node("Add", [node("MatMul", [ln2, w + "mlp.c_fc.weight"], p + "/mlp/fc_mm"), w + "mlp.c_fc.bias"],
                  p + "/mlp/fc")
        # GELU written with Erf so the graph needs only opset 17.
        erf = node("Erf", [node("Mul", [fc, c_rsqrt2], p + "/mlp/gelu_scale")], p + "/mlp/gelu_erf")
        gelu = node("Mul", [node("Mul", [fc, c_half], p + "/mlp/gelu_half"),
                            node("Add", [erf, c_one_f], p + "/mlp/gelu_add")], p + "/mlp/gelu")
        out = node("Add", [node("MatMul", [gelu, w + "mlp.c_proj.weight"], p + "/mlp/proj_mm"),
                           w + "mlp.c_proj.bias"], p + "/mlp/proj")
        x = node("Add", [x, out], p + "/res_2")

    lnf = node("LayerNormalization", [x, "ln_f.weight", "ln_f.bias"], "/ln_f", axis=-1, epsilon=1e-5)
    # Tied embeddings: the LM head reuses wte through a Transpose.
    wte_t = node("Transpose", ["wte"], "/lm_head/wte_t", perm=[1, 0])
    nodes.append(helper.make_node("MatMul", [lnf, wte_t], ["logits"], name="/lm_head/matmul"))
    return nodes, consts


def _sanitize(name: str) -> str:
    """A file name for a tensor (per-tensor layout)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


class _DataWriter:
    """Append tensors to the layout's data files and record where each went."""

    def __init__(self, out_dir: Path, stem: str, layout: str, shard_bytes: int, total: int) -> None:
        self.out_dir, self.stem, self.layout = out_dir, stem, layout
        self.shard_bytes = shard_bytes
        self.n_shards = max(1, math.ceil(total / shard_bytes)) if layout == "shards" else 1
        self._file: Optional[BinaryIO] = None
        self._location: Optional[str] = None
        self._offset = 0
        self._shard = 0
        self.files: List[Path] = []

    def _open(self, location: str) -> None:
        self.close()
        path = self.out_dir / location
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(path, "wb")  # noqa: SIM115 - closed by close()
        self._location, self._offset = location, 0
        self.files.append(path)

    def write(self, name: str, arr: np.ndarray) -> Tuple[str, int, int]:
        """Write ``arr`` and return (location, offset, length)."""
        if self.layout == "per-tensor":
            self._open(_sanitize(name))
        elif self._file is None:
            self._open(self._first_location())
        elif self.layout == "shards" and self._offset and self._offset + arr.nbytes > self.shard_bytes \
                and self._shard + 1 < self.n_shards:
            self._shard += 1
            self._open(self._shard_location())
        assert self._file is not None and self._location is not None
        offset = self._offset
        arr.tofile(self._file)
        self._offset += arr.nbytes
        return self._location, offset, arr.nbytes

    def _first_location(self) -> str:
        if self.layout == "shards":
            return self._shard_location()
        if self.layout == "other-folder":
            return f"{self.stem}_weights/weights.bin"
        return f"{self.stem}.onnx.data"

    def _shard_location(self) -> str:
        return f"{self.stem}-{self._shard + 1:05d}-of-{self.n_shards:05d}.data"

    def close(self) -> None:
        """Close the current data file."""
        if self._file is not None:
            self._file.close()
            self._file = None


def build(
    out_dir: os.PathLike | str,
    spec: GptSpec = GptSpec(),
    *,
    layout: str = "single",
    seed: int = 0,
    name: str = "gpt",
    shard_mb: float = 400,
) -> Path:
    """Write ``<out_dir>/<name>.onnx`` (plus data files) and return its path.

    Weights are streamed to disk one tensor at a time; with ``inline`` they are
    embedded in the model, which must stay below 2 GB.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}: choose one of {', '.join(LAYOUTS)}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    total = weight_bytes(spec)
    if layout == "inline" and total >= PROTOBUF_LIMIT - 64 * 1024**2:
        raise ValueError(f"inline layout needs < 2 GB of weights; this spec has {total / 1e9:.2f} GB")
    nodes, consts = _graph_nodes(spec)
    writer = _DataWriter(out_dir, name, layout, int(shard_mb * 1024**2), total)
    initializers: List[TensorProto] = []
    try:
        for tname, arr in _weights(spec, seed):
            if layout == "inline" or arr.nbytes <= INLINE_THRESHOLD:
                initializers.append(onnx.numpy_helper.from_array(arr, tname))
                continue
            location, offset, length = writer.write(tname, arr)
            tensor = TensorProto(name=tname, data_type=TensorProto.FLOAT, dims=arr.shape)
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            initializers.append(tensor)
            del arr
    finally:
        writer.close()
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", spec.vocab])],
        initializer=initializers + consts,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="ampconv-sample-gpt")
    model.ir_version = 8
    path = out_dir / f"{name}.onnx"
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    return path


def data_files(model_path: Path) -> List[Path]:
    """The external data files a built model references (from the proto, no weights read)."""
    proto = onnx.load(str(model_path), load_external_data=False)
    found: Dict[str, None] = {}
    for t in proto.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                found[entry.value] = None
    return [model_path.parent / loc for loc in found]


def main(argv: Optional[List[str]] = None) -> int:
    """Command line: build one model and print its path and size."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--layers", type=int, default=24)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--layout", choices=LAYOUTS, default="single")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="gpt")
    parser.add_argument("--shard-mb", type=float, default=400, help="shard size for --layout shards")
    args = parser.parse_args(argv)
    spec = GptSpec(layers=args.layers, hidden=args.hidden, vocab=args.vocab)
    path = build(args.out, spec, layout=args.layout, seed=args.seed, name=args.name, shard_mb=args.shard_mb)
    print(f"{path}  ({weight_bytes(spec) / 1e9:.3f} GB float32 weights, layout {args.layout})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
