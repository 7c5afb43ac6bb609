"""Measure what the default validation criteria read, on real conversions and on deliberate breakage.

Usage: ``python scripts/verdict_measure.py [--out DIR] [--markdown] [--only SUBSTRING]``

Every model is converted with ``ampconv.convert`` at O2 to fp16 and to bf16
and validated under emulation (CPU, 2 seeded random samples, batch 2 where
free) with the default criteria (``ampconv.validation.criteria``). One row per
output gives the statistics the criteria read (cosine, scaled p99 and max
error, argmax agreement on clear rows and on all rows) and two verdicts:
*strict*, the elementwise rule ``|conv - ref| <= atol + rtol*|ref|`` at the
dtype's rtol/atol (1e-2 fp16, 5e-2 bf16; read from the same run: no element
``mismatched``), and *default*, with the criterion that decided. A
conversion that made no node LOW is left out (listed at the end).

Models (docs/validation.md, "The measurements that chose the thresholds",
quotes the table):

- the sample models of ``sample_models/build.py``;
- the ONNX backend test "light" models shipped in the onnx package
  (``onnx/backend/test/data/light``): as shipped (every weight 0.02: fp16
  overflows), and with seeded fan-in-scaled random weights in place of the
  constant fills, upgraded to opset 22, which makes them working CNN
  classifiers of the real architectures (the logits are exposed too);
- four small models built here like common deployments whose outputs the
  elementwise rule judges badly: an unnormalized embedding, a
  low-confidence 1000-way classifier, a CRNN (conv + LSTM + per-frame
  logits) and a layout-style detector with a sigmoid heat map and a
  near-zero ReLU feature map;
- deliberately broken conversions, made by editing the converted model: an
  output scaled by 1.3, a last axis reversed (labels permuted, a map
  mirrored), one element per row offset.

Runs in about 30 s on 2 cores.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import math
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper, version_converter

import ampconv
from ampconv.validation import ValidateOptions, validate

ROOT = Path(__file__).resolve().parent.parent
# The models built here use opset 22 (IR 10), where Conv takes bfloat16: bf16 converts them too.
OPSET = 22
IR_VERSION = 10
LIGHT_SHIPPED = ("light_squeezenet", "light_inception_v1")
# Without the big fully connected models (alexnet, zfnet512, vgg19): their
# random weights alone would take most of the time budget.
LIGHT_RANDOM = ("light_squeezenet", "light_inception_v1", "light_inception_v2", "light_resnet50", "light_shufflenet")
SAMPLES = 2  # random samples per model; free dimensions (batch) are 2


@dataclasses.dataclass(frozen=True)
class Case:
    """One model to convert and validate; ``breaker`` edits the converted model (None: as converted)."""

    name: str
    path: Path
    breaker: Callable[[onnx.ModelProto], None] | None = None


# ----------------------------------------------------------------- models


def sample_models(out: Path) -> list[Case]:
    """The sample models of sample_models/build.py."""
    spec = importlib.util.spec_from_file_location("ampconv_sample_build", ROOT / "sample_models" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return [Case(name, Path(path)) for name, path in build.build_all(out / "samples").items()]


def _light_dir() -> Path:
    return Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def light_models(out: Path) -> list[Case]:
    """Shipped light models (constant weights) and the same architectures with random weights."""
    folder = _light_dir()
    cases = []
    for name in LIGHT_SHIPPED:
        path = folder / f"{name}.onnx"
        if path.exists():
            cases.append(Case(f"{name} (shipped)", path))
    for name in LIGHT_RANDOM:
        path = folder / f"{name}.onnx"
        if not path.exists():
            continue
        model = _expose_logits(_random_weights(onnx.load(str(path)), seed=0))
        model.ir_version = 8  # IR 3 wants every initializer listed as an input; the new ones are not
        # Conv takes bfloat16 from opset 22: upgraded, the copies convert to bf16 too.
        model = version_converter.convert_version(model, OPSET)
        model.ir_version = IR_VERSION
        target = out / f"{name}_random.onnx"
        onnx.save(model, str(target))
        cases.append(Case(f"{name} (random weights)", target))
    return cases


def _expose_logits(model: onnx.ModelProto) -> onnx.ModelProto:
    """Add the final Softmax's input (the logits) as a graph output: softmax saturates and hides their drift."""
    softmax = next(n for n in reversed(model.graph.node) if n.op_type == "Softmax")
    model.graph.output.append(helper.make_tensor_value_info(softmax.input[0], TensorProto.FLOAT, None))
    return model


def _random_weights(model: onnx.ModelProto, seed: int) -> onnx.ModelProto:
    """Replace each ConstantOfShape weight fill (all 0.02) by a seeded initializer.

    Conv/Gemm weights get He (Conv) or LeCun (Gemm) normal scales from their
    fan-in, biases N(0, 0.01), BatchNormalization scale 1, bias 0, mean 0 and
    variance 1; other fills are kept.
    """
    rng = np.random.default_rng(seed)
    inits = {t.name: t for t in model.graph.initializer}
    users = defaultdict(list)
    for node in model.graph.node:
        for index, name in enumerate(node.input):
            users[name].append((node, index))
    kept, new = [], []
    for node in model.graph.node:
        value = _fill(node, inits, users, rng)
        if value is None:
            kept.append(node)
        else:
            new.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
    del model.graph.node[:]
    model.graph.node.extend(kept)
    model.graph.initializer.extend(new)
    return model


def _fill(node, inits, users, rng) -> np.ndarray | None:
    if node.op_type != "ConstantOfShape" or node.input[0] not in inits or not users[node.output[0]]:
        return None
    shape = tuple(int(v) for v in numpy_helper.to_array(inits[node.input[0]]))
    consumer, index = users[node.output[0]][0]
    op = consumer.op_type
    if op == "Conv" and index == 1:
        return rng.standard_normal(shape) * math.sqrt(2.0 / int(np.prod(shape[1:])))
    if op == "Gemm" and index == 1:
        trans_b = next((a.i for a in consumer.attribute if a.name == "transB"), 0)
        return rng.standard_normal(shape) * math.sqrt(1.0 / (shape[1] if trans_b else shape[0]))
    if op in ("Conv", "Gemm") and index == 2:
        return rng.standard_normal(shape) * 0.01
    if op == "BatchNormalization":
        return np.ones(shape) if index in (1, 4) else np.zeros(shape)
    return None


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))
    return path


def _w(rng, name, shape, scale):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def build_embedding(out: Path) -> Case:
    """[batch, 200 frames, 40 mel] -> 2 ReLU layers -> mean over time -> Linear -> [batch, 192] of RMS ~20."""
    rng = np.random.default_rng(1)
    inits = [
        _w(rng, "w1", [40, 256], math.sqrt(2 / 40)), _w(rng, "w2", [256, 256], math.sqrt(2 / 256)),
        # Speaker-embedding heads are not normalized: RMS about 20 here.
        _w(rng, "w3", [256, 192], 30 / math.sqrt(256)),
        numpy_helper.from_array(np.array([1], np.int64), "time_axis"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
        helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
        helper.make_node("MatMul", ["r1", "w2"], ["h2"], name="fc2"),
        helper.make_node("Relu", ["h2"], ["r2"], name="relu2"),
        helper.make_node("ReduceMean", ["r2", "time_axis"], ["pooled"], keepdims=0, name="pool"),
        helper.make_node("MatMul", ["pooled", "w3"], ["embedding"], name="head"),
    ]
    graph = helper.make_graph(
        nodes, "embedding", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 200, 40])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", 192])], inits,
    )
    return Case("embedding (built)", _save(graph, out / "embedding.onnx"))


def build_classifier(out: Path) -> Case:
    """[batch, 64] -> ReLU layer -> 1000-way softmax of low confidence: every probability under 1e-2."""
    rng = np.random.default_rng(4)
    inits = [
        _w(rng, "w1", [64, 256], math.sqrt(2 / 64)),
        # Logits of spread ~0.8: the top class gets about 1% (an unsure classifier, or hard input).
        _w(rng, "w2", [256, 1000], 0.8 / math.sqrt(256)),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h1"], name="fc1"),
        helper.make_node("Relu", ["h1"], ["r1"], name="relu1"),
        helper.make_node("MatMul", ["r1", "w2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=-1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes, "classifier", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 1000])], inits,
    )
    return Case("classifier (built)", _save(graph, out / "classifier.onnx"))


def build_crnn(out: Path) -> Case:
    """[batch, 1, 32, 128] -> 2x (Conv, ReLU, MaxPool) -> LSTM over 32 columns -> logits [32, batch, 37]."""
    rng = np.random.default_rng(2)
    hidden = 64
    inits = [
        _w(rng, "c1", [16, 1, 3, 3], math.sqrt(2 / 9)), _w(rng, "c2", [32, 16, 3, 3], math.sqrt(2 / 144)),
        numpy_helper.from_array(np.array([0, 256, 32], np.int64), "seq_shape"),
        _w(rng, "W", [1, 4 * hidden, 256], 1 / math.sqrt(256)), _w(rng, "R", [1, 4 * hidden, hidden], 1 / math.sqrt(hidden)),
        _w(rng, "B", [1, 8 * hidden], 0.05),
        numpy_helper.from_array(np.array([1], np.int64), "dir_axis"),
        # CTC heads give confident per-frame logits: RMS about 13 here.
        _w(rng, "head", [hidden, 37], 30 / math.sqrt(hidden)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1"], ["a1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2], name="pool1"),
        helper.make_node("Conv", ["p1", "c2"], ["a2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["a2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2], name="pool2"),
        helper.make_node("Reshape", ["p2", "seq_shape"], ["cols"], name="columns"),
        helper.make_node("Transpose", ["cols"], ["seq"], perm=[2, 0, 1], name="time_major"),
        helper.make_node("LSTM", ["seq", "W", "R", "B"], ["Y"], hidden_size=hidden, name="lstm"),
        helper.make_node("Squeeze", ["Y", "dir_axis"], ["feats"], name="squeeze"),
        helper.make_node("MatMul", ["feats", "head"], ["logits"], name="classifier"),
    ]
    graph = helper.make_graph(
        nodes, "crnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 1, 32, 128])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [32, "batch", 37])], inits,
    )
    return Case("crnn (built)", _save(graph, out / "crnn.onnx"))


def build_detector(out: Path) -> Case:
    """[batch, 3, 64, 64] -> 2 Conv+ReLU -> sigmoid heat map (mostly near 0) and a ReLU map of RMS ~2.6e-4."""
    rng = np.random.default_rng(3)
    inits = [
        _w(rng, "c1", [16, 3, 3, 3], math.sqrt(2 / 27)), _w(rng, "c2", [16, 16, 3, 3], math.sqrt(2 / 144)),
        _w(rng, "c3", [4, 16, 1, 1], 1.0),
        # Most of a page is background: the heat map's bias keeps it near 0.
        numpy_helper.from_array(np.full(4, -6.0, np.float32), "b3"),
        # A small-valued feature map: exact zeros where ReLU cuts, values up to ~2e-3 elsewhere.
        _w(rng, "c4", [8, 16, 1, 1], 1e-4),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "c1"], ["a1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["a1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "c2"], ["a2"], pads=[1, 1, 1, 1], name="conv2"),
        helper.make_node("Relu", ["a2"], ["r2"], name="relu2"),
        helper.make_node("Conv", ["r2", "c3", "b3"], ["logit"], name="heat_conv"),
        helper.make_node("Sigmoid", ["logit"], ["heat"], name="heat_sigmoid"),
        helper.make_node("Conv", ["r2", "c4"], ["a4"], name="feat_conv"),
        helper.make_node("Relu", ["a4"], ["feat"], name="feat_relu"),
    ]
    graph = helper.make_graph(
        nodes, "detector", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3, 64, 64])],
        [helper.make_tensor_value_info("heat", TensorProto.FLOAT, ["batch", 4, 64, 64]),
         helper.make_tensor_value_info("feat", TensorProto.FLOAT, ["batch", 8, 64, 64])], inits,
    )
    return Case("detector (built)", _save(graph, out / "detector.onnx"))


# ----------------------------------------------------------------- breakage


def _rewire(model: onnx.ModelProto, output: str) -> str:
    """Rename the producer's output so a new node can produce ``output``; return the new inner name."""
    inner = f"{output}__before_break"
    for node in model.graph.node:
        node.output[:] = [inner if o == output else o for o in node.output]
        node.input[:] = [inner if i == output else i for i in node.input]
    return inner


def _elem_type(model: onnx.ModelProto, output: str) -> int:
    return next(o.type.tensor_type.elem_type for o in model.graph.output if o.name == output)


def scale_output(output: str, factor: float) -> Callable[[onnx.ModelProto], None]:
    """A breaker multiplying ``output`` by ``factor`` (a wrong constant folded into the last layer)."""

    def edit(model: onnx.ModelProto) -> None:
        inner = _rewire(model, output)
        dtype = helper.tensor_dtype_to_np_dtype(_elem_type(model, output))
        model.graph.initializer.append(numpy_helper.from_array(np.array(factor, dtype=dtype), "break_factor"))
        model.graph.node.append(helper.make_node("Mul", [inner, "break_factor"], [output], name="break_scale"))

    return edit


def reverse_last_axis(output: str, size: int) -> Callable[[onnx.ModelProto], None]:
    """A breaker reversing ``output``'s last axis of ``size`` (labels permuted, a map mirrored)."""

    def edit(model: onnx.ModelProto) -> None:
        inner = _rewire(model, output)
        model.graph.initializer.append(numpy_helper.from_array(np.arange(size - 1, -1, -1, dtype=np.int64), "break_order"))
        model.graph.node.append(helper.make_node("Gather", [inner, "break_order"], [output], axis=-1, name="break_reverse"))

    return edit


def offset_one_element(output: str, shape: tuple[int, ...], amount: float) -> Callable[[onnx.ModelProto], None]:
    """A breaker adding ``amount`` to the first element of each row of ``output`` (one wrong channel)."""

    def edit(model: onnx.ModelProto) -> None:
        inner = _rewire(model, output)
        spike = np.zeros(shape, dtype=np.float32)
        spike[..., 0] = amount
        model.graph.initializer.append(numpy_helper.from_array(spike, "break_spike"))
        model.graph.node.append(helper.make_node("Add", [inner, "break_spike"], [output], name="break_offset"))

    return edit


def broken_cases(cases: dict[str, Case]) -> list[Case]:
    """Deliberately broken conversions of models already in ``cases``."""
    wanted = [
        ("mlp", "scaled x1.3", scale_output("logits", 1.3)),
        ("mlp", "labels reversed", reverse_last_axis("logits", 10)),
        ("embedding (built)", "scaled x1.3", scale_output("embedding", 1.3)),
        # One element of 192 per row: under 1% of the output, so p99 does not see it.
        ("embedding (built)", "element 0 off by 10", offset_one_element("embedding", (192,), 10.0)),
        ("classifier (built)", "labels reversed", reverse_last_axis("probs", 1000)),
        ("crnn (built)", "labels reversed", reverse_last_axis("logits", 37)),
        ("detector (built)", "feat map mirrored", reverse_last_axis("feat", 64)),
    ]
    out = []
    for base, what, breaker in wanted:
        if base in cases:
            source = cases[base]
            out.append(dataclasses.replace(source, name=f"{base.split(' (')[0]}: {what}", breaker=breaker))
    return out


# ----------------------------------------------------------------- measuring


@dataclasses.dataclass(frozen=True)
class Row:
    """One output of one validated conversion."""

    model: str
    dtype: str
    output: str
    max_rel: float
    cosine: float
    p99: float | None
    worst: float | None
    clear: str
    top1: str
    strict: bool
    default: bool
    decided_by: str
    floor_ratio: float | None = None  # RMS error over the floor model's ("N times the unavoidable error")
    task: bool | None = None  # the default criteria's verdict without the floor


def _symbols(path: Path) -> dict[str, tuple[int, ...]]:
    model = onnx.load(str(path), load_external_data=False)
    dims = {d.dim_param for i in model.graph.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    return {s: (2,) for s in dims}


def measure(case: Case, dtype: str, tmp: Path) -> list[Row] | None:
    """Convert ``case`` to ``dtype`` (O2), break it if asked, validate with the default criteria.

    None when the converter made no node LOW (nothing to measure: opset 9
    Conv has no bfloat16, for one).
    """
    dst = tmp / f"{case.name.replace(' ', '_').replace(':', '').replace('/', '_')}.{dtype}.onnx"
    report = ampconv.convert(str(case.path), str(dst), ampconv.Config(level="O2", dtype=dtype, overwrite=True))
    if not any(_precision(d) == "LOW" for d in report.decisions_by_node().values()):
        return None
    if case.breaker is not None:
        model = onnx.load(str(dst))
        case.breaker(model)
        onnx.save(model, str(dst))
    options = ValidateOptions(backend="emulate", samples=SAMPLES, shapes=_symbols(case.path))
    result = validate(str(case.path), str(dst), options)
    rows = []
    for out in result.outputs:
        m = out.worst
        if m is None:
            rows.append(Row(case.name, dtype, out.name, math.nan, math.nan, None, None, "-", "-", False, False,
                            out.error or "?", None, False))
            continue
        rows.append(Row(
            model=case.name,
            dtype=dtype,
            output=out.name,
            max_rel=m.max_rel,
            cosine=m.cosine,
            p99=m.scaled_p99_error,
            worst=m.scaled_max_error,
            clear="-" if m.label_agreement is None else f"{m.label_agreement:.0%} of {m.clear_rows}",
            top1="-" if m.top1 is None else f"{m.top1:.0%}",
            strict=m.mismatched == 0 and m.unmatched_nonfinite == 0,
            default=out.passed,
            decided_by=m.decided_by or "-",
            floor_ratio=m.floor_ratio,
            task=out.passed and m.criterion != "floor",
        ))
    return rows


def _precision(decision) -> str | None:
    return decision.get("precision") if isinstance(decision, dict) else getattr(decision, "precision", None)


def _fmt(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf"
    if value == 0:
        return "0"
    return f"{value:.{digits}g}"


def _cos(value: float) -> str:
    if math.isnan(value):
        return "nan"
    return f"{value:.7f}"


HEADERS = ["model", "dtype", "output", "max rel", "cosine", "scaled p99", "scaled max", "clear top-1", "top-1",
           "x floor", "strict", "no floor", "default", "decided by"]


def _cells(row: Row) -> list[str]:
    return [row.model, row.dtype, row.output, _fmt(row.max_rel), _cos(row.cosine), _fmt(row.p99), _fmt(row.worst), row.clear,
            row.top1, _fmt(row.floor_ratio), "pass" if row.strict else "FAIL", "pass" if row.task else "FAIL",
            "pass" if row.default else "FAIL", row.decided_by]


def render(rows: list[Row], markdown: bool) -> str:
    """The table as aligned text or as a markdown table."""
    table = [HEADERS] + [_cells(r) for r in rows]
    if markdown:
        lines = ["| " + " | ".join(HEADERS) + " |", "|" + "---|" * len(HEADERS)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |" for cells in table[1:]]
        return "\n".join(lines) + "\n"
    widths = [max(len(r[i]) for r in table) for i in range(len(HEADERS))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in table) + "\n"


# ----------------------------------------------------------------- stability over seeds (issue 30)


def _tests_models():
    sys.path.insert(0, str(ROOT / "tests"))
    import validate_models  # noqa: PLC0415 - the hand-built models of the tests

    return validate_models


def _top1_task(ref: dict, conv: dict) -> bool:
    """Top-1 kept on every row whose reference lead is 5% of the scale or more, on every float output."""
    for name, r in ref.items():
        r, c = np.asarray(r, np.float64), np.asarray(conv[name], np.float64)
        if r.ndim < 2 or r.shape[-1] < 2:
            continue
        r, c = r.reshape(-1, r.shape[-1]), c.reshape(-1, r.shape[-1])
        top2 = -np.sort(-r, axis=-1)[:, :2]
        clear = top2[:, 0] - top2[:, 1] > 0.05 * np.maximum(np.abs(top2[:, 0]), np.sqrt(np.mean(r**2)))
        if not np.all(np.argmax(r[clear], -1) == np.argmax(c[clear], -1)):
            return False
    return True


def _map_task(ref: dict, conv: dict) -> bool:
    """A probability map's text area over 0.3 (DB's threshold): IoU >= 0.9 or both empty."""
    r, c = next(iter(ref.values())) > 0.3, next(iter(conv.values())) > 0.3
    union = np.count_nonzero(r | c)
    return (np.count_nonzero(r & c) / union if union else 1.0) >= 0.9


def _detection_task(packed: bool, cut: float | None):
    """Reference detections scoring over the cut + 0.01: >= 95% matched (same label, IoU >= 0.5), <= 5% extra."""
    from ampconv.validation.detections import iou

    def rows(out):
        if packed:
            d = np.asarray(out["detections"]).reshape(-1, 6)
            return d[:, :4], d[:, 4], np.rint(d[:, 5]).astype(int)
        return np.asarray(out["boxes"]), np.asarray(out["scores"]), np.asarray(out["labels"])

    def task(ref: dict, conv: dict) -> bool:
        (rb, rs, rl), (cb, cs, cl) = rows(ref), rows(conv)
        floor = (cut if cut is not None else float(rs.min())) + 0.01
        overlaps = iou(rb.astype(float), cb.astype(float)) * (rl[:, None] == cl[None, :])
        wanted, taken = np.flatnonzero(rs > floor), set()
        for i in wanted[np.argsort(-rs[wanted])]:
            free = [j for j in np.argsort(-overlaps[i]) if j not in taken and overlaps[i, j] >= 0.5]
            if free:
                taken.add(free[0])
        extra = sum(1 for j in np.flatnonzero(cs > floor) if j not in taken)
        return len(taken) >= 0.95 * len(wanted) and extra <= 0.05 * max(len(wanted), 1)

    return task


def _psnr_task(ref: dict, conv: dict) -> bool:
    """A decoded image in [-1, 1]: PSNR >= 30 dB."""
    r, c = (np.asarray(next(iter(x.values())), np.float64) for x in (ref, conv))
    mse = float(np.mean((r - c) ** 2))
    return mse == 0 or 10 * np.log10(4.0 / mse) >= 30


@dataclasses.dataclass(frozen=True)
class SeedCase:
    """A hand-built model validated on many seeds against its task metric; ``options`` go to ValidateOptions."""

    name: str
    build: Callable[[], onnx.ModelProto]
    task: Callable[[dict, dict], bool]
    options: dict = dataclasses.field(default_factory=dict)
    breaker: Callable[[onnx.ModelProto], None] | None = None


def seed_cases() -> list[SeedCase]:
    """The issue-30 models: a near-zero sigmoid map, a DB map detector, an fp16-sensitive classifier, an NMS head,
    a packed TopK head, an image decoder, and the light CNNs with random weights; some broken on purpose."""
    vm = _tests_models()
    return [
        SeedCase("text detector (near-zero sigmoid map)", vm.text_detector, _map_task),
        SeedCase("DB map detector", lambda: vm.prob_map_detector(size=32), _map_task,
                 {"input_ranges": {"x": (-1.0, 1.0)}}),
        SeedCase("DB map detector: map transposed", lambda: vm.prob_map_detector(size=32), _map_task,
                 {"input_ranges": {"x": (-1.0, 1.0)}}, _transposed("maps")),
        SeedCase("sensitive classifier (offset 200)", lambda: vm.sensitive_classifier(offset=200.0), _top1_task,
                 {"shapes": {"batch": (64,)}}),
        SeedCase("sensitive classifier: labels reversed", lambda: vm.sensitive_classifier(offset=200.0),
                 _top1_task, {"shapes": {"batch": (64,)}}, reverse_last_axis("logits", 10)),
        SeedCase("NMS head", vm.nms_detector, _detection_task(False, 0.5)),
        SeedCase("NMS head: labels shifted", vm.nms_detector, _detection_task(False, 0.5), {}, _labels_shifted),
        SeedCase("TopK head (packed)", vm.topk_detector, _detection_task(True, None)),
        SeedCase("image decoder", vm.image_decoder, _psnr_task),
        SeedCase("image decoder: scaled x0.8", vm.image_decoder, _psnr_task, {}, scale_output("image", 0.8)),
    ]


def _transposed(output: str) -> Callable[[onnx.ModelProto], None]:
    def breaker(model: onnx.ModelProto) -> None:
        source = _rewire(model, output)
        model.graph.node.append(helper.make_node("Transpose", [source], [output], perm=[0, 1, 3, 2]))

    return breaker


def _labels_shifted(model: onnx.ModelProto) -> None:
    source = _rewire(model, "labels")
    model.graph.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "label_shift"))
    model.graph.node.append(helper.make_node("Add", [source, "label_shift"], ["labels"]))


def _captured(src: str, dst: str, seed: int, options: dict, floor: bool) -> tuple:
    """(result, reference outputs, converted outputs) of one seeded validation."""
    from ampconv.numerics import runners

    seen, original = {}, runners.Runner.run

    def run(self, sample, names=None):
        outputs = original(self, sample, names)
        seen[self.label] = outputs
        return outputs

    runners.Runner.run = run
    try:
        result = validate(src, dst, ValidateOptions(seed=seed, backend="emulate", floor=floor, **options))
    finally:
        runners.Runner.run = original
    return result, seen["reference model"], seen["converted model"]


def stability(case: SeedCase, dtype: str, tmp: Path, seeds: int) -> list[str]:
    """One row: passes with and without the floor, task passes, agreement, flips, the largest ratio, a verdict."""
    model = case.build()
    model.ir_version = IR_VERSION if model.ir_version > IR_VERSION else model.ir_version
    slug = case.name.replace(" ", "_").replace(":", "").replace("(", "").replace(")", "")
    src = tmp / f"{slug}.onnx"
    onnx.save(model, str(src))
    dst = tmp / f"{slug}.{dtype}.onnx"
    ampconv.convert(str(src), str(dst), ampconv.Config(dtype=dtype, overwrite=True))
    if case.breaker is not None:
        converted = onnx.load(str(dst))
        case.breaker(converted)
        onnx.save(converted, str(dst))
    passes = without = tasks = agree = 0
    ratios, words = [], ""
    for seed in range(seeds):
        result, ref, conv = _captured(str(src), str(dst), seed, case.options, True)
        task = case.task(ref, conv)
        passes += result.passed
        tasks += task
        agree += result.passed == task
        without += validate(str(src), str(dst), ValidateOptions(seed=seed, backend="emulate", floor=False,
                                                                **case.options)).passed
        ratios += [o.worst.floor_ratio for o in result.outputs if o.worst and o.worst.floor_ratio is not None]
        if not words or not result.passed:
            words = result.outputs[0].decided_by or ""
    flips = "yes" if 0 < passes < seeds else "no"
    return [case.name, dtype, f"{tasks}/{seeds}", f"{without}/{seeds}", f"{passes}/{seeds}", f"{agree}/{seeds}", flips,
            _fmt(max(ratios)) if ratios else "-", words[:140]]


SEED_HEADERS = ["model", "dtype", "task passes", "verdict without floor", "verdict", "agrees with task", "flips",
                "max x floor", "decided by (a failing seed, else the last)"]


def main(argv: list[str] | None = None) -> int:
    """Build, convert, validate and print the table; exit 0."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="folder for the models (default: a temporary folder)")
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    parser.add_argument("--only", default="", help="measure only models whose name contains this")
    parser.add_argument("--seeds", type=int, default=0,
                        help="instead: validate the issue-30 models on this many seeds each, against their task")
    args = parser.parse_args(argv)
    if args.seeds:
        return _main_seeds(args)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ampconv-verdict-") as scratch:
        out = Path(args.out) if args.out else Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        built = [build_embedding(out), build_classifier(out), build_crnn(out), build_detector(out)]
        cases = sample_models(out) + light_models(out) + built
        cases += broken_cases({c.name: c for c in cases})
        cases = [c for c in cases if args.only in c.name]
        rows, skipped = [], []
        for case in cases:
            for dtype in ("fp16", "bf16"):
                measured = measure(case, dtype, out)
                if measured is None:
                    skipped.append(f"{case.name} {dtype}")
                else:
                    rows.extend(measured)
    sys.stdout.write(render(rows, args.markdown))
    if skipped:
        sys.stdout.write(f"\nNothing converted LOW (left out): {', '.join(skipped)}\n")
    sys.stderr.write(f"{len(rows)} outputs in {time.perf_counter() - start:.0f} s\n")
    return 0


def _main_seeds(args) -> int:
    """The stability table: every seed case in fp16 and bf16."""
    start = time.perf_counter()
    rows = []
    with tempfile.TemporaryDirectory(prefix="ampconv-seeds-") as scratch:
        out = Path(args.out) if args.out else Path(scratch)
        out.mkdir(parents=True, exist_ok=True)
        for case in seed_cases():
            if args.only in case.name:
                rows += [stability(case, dtype, out, args.seeds) for dtype in ("fp16", "bf16")]
    lines = ["| " + " | ".join(SEED_HEADERS) + " |", "|" + "---|" * len(SEED_HEADERS)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in rows]
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stderr.write(f"{len(rows)} rows in {time.perf_counter() - start:.0f} s\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
