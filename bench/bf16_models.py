"""Models whose values do not fit float16 in places, built by hand in ONNX (issue 32, ``--fallback-dtype bf16``).

Each builder returns ``(model, samples)``: the float32 model and a list of
calibration samples (``{input name: array}``) with the range the model meets
in use. The tests (``tests/test_bf16_fallback.py``) and the benchmark
(``bench/bench_bf16.py``) read the same models.

- ``mel_frontend``: frames -> Hann window -> DFT as two MatMuls with a cos/sin
  basis -> power spectrum (re^2 + im^2, ~1e9 on voiced frames) -> mel MatMul ->
  Log (+ floor) -> Whisper's log10, dynamic-range clamp and scaling;
- ``square_sum_layer_norm``: a dense layer, then a layer norm written
  ``Mul(h, h) -> ReduceSum`` (the sum of squares ~2e5) and the centring, eps,
  Sqrt, Reciprocal, gain and bias, then a dense layer;
- ``gemma_rms_norm``: a residual stream with |x| ~ 300 (Gemma-2's scaled
  embeddings reach it), ``Pow 2 -> ReduceMean -> Add eps -> Sqrt -> Div``,
  times ``(1 + weight)``, then a dense layer: the mean of squares ~1e5
  overflows float16.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

Samples = List[Dict[str, np.ndarray]]


def _model(nodes, inputs, outputs, weights, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=weights)
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    made.ir_version = 8
    onnx.checker.check_model(made)
    return made


def _init(name: str, array, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(array, dtype=dtype), name)


def _vi(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _mel_bank(bins: int, mels: int) -> np.ndarray:
    """Triangular filters over the linear bins (HTK-like spacing, enough for the numbers)."""
    edges = np.linspace(0, bins - 1, mels + 2)
    bank = np.zeros((bins, mels), np.float32)
    grid = np.arange(bins, dtype=np.float64)
    for m in range(mels):
        left, centre, right = edges[m], edges[m + 1], edges[m + 2]
        rise = (grid - left) / max(centre - left, 1e-9)
        fall = (right - grid) / max(right - centre, 1e-9)
        bank[:, m] = np.clip(np.minimum(rise, fall), 0, None)
    return bank


def mel_frontend(frames: int = 16, length: int = 512, mels: int = 40, seed: int = 41) -> Tuple[onnx.ModelProto, Samples]:
    """A Whisper-style log-mel front end; its calibration samples are voiced frames (power spectrum ~1e9).

    ``frames * hann -> MatMul cos / MatMul sin -> re^2 + im^2 -> MatMul mel -> Max(floor) -> Log -> / ln 10
    -> Max(x, max(x) - 8) -> (x + 4) / 4``. The samples: harmonics of a pitch with a falling spectral tilt
    over noise, at PCM-like amplitude (hundreds), so the power spectrum reaches ~1e9.
    """
    bins = length // 2 + 1
    n = np.arange(length)
    k = np.arange(bins)
    angle = 2 * np.pi * np.outer(n, k) / length
    weights = [
        _init("window", 0.5 - 0.5 * np.cos(2 * np.pi * n / length)),
        _init("cos_basis", np.cos(angle)), _init("sin_basis", -np.sin(angle)),
        _init("mel_bank", _mel_bank(bins, mels)), _init("floor", 1e-10), _init("inv_ln10", 1.0 / np.log(10.0)),
        _init("eight", 8.0), _init("four", 4.0),
    ]
    nodes = [
        helper.make_node("Mul", ["frames", "window"], ["windowed"], name="window"),
        helper.make_node("MatMul", ["windowed", "cos_basis"], ["re"], name="dft_real"),
        helper.make_node("MatMul", ["windowed", "sin_basis"], ["im"], name="dft_imag"),
        helper.make_node("Mul", ["re", "re"], ["re2"], name="re_squared"),
        helper.make_node("Mul", ["im", "im"], ["im2"], name="im_squared"),
        helper.make_node("Add", ["re2", "im2"], ["power"], name="power"),
        helper.make_node("MatMul", ["power", "mel_bank"], ["mel"], name="mel"),
        helper.make_node("Max", ["mel", "floor"], ["mel_floor"], name="mel_floor"),
        helper.make_node("Log", ["mel_floor"], ["ln_mel"], name="log"),
        helper.make_node("Mul", ["ln_mel", "inv_ln10"], ["log_mel"], name="log10"),
        helper.make_node("ReduceMax", ["log_mel"], ["peak"], keepdims=1, name="peak"),
        helper.make_node("Sub", ["peak", "eight"], ["lowest"], name="peak_minus_8"),
        helper.make_node("Max", ["log_mel", "lowest"], ["clamped"], name="dynamic_range"),
        helper.make_node("Add", ["clamped", "four"], ["shifted"], name="shift"),
        helper.make_node("Div", ["shifted", "four"], ["features"], name="scale"),
    ]
    made = _model(nodes, [_vi("frames", [1, frames, length])], [_vi("features", [1, frames, mels])], weights,
                  opset=18)
    rng = np.random.default_rng(seed)
    samples = []
    time = n[None, :] + length * np.arange(frames)[:, None]
    for s in range(4):
        pitch = 110.0 + 40.0 * s  # Hz at 16 kHz
        voiced = sum(300.0 / h * np.sin(2 * np.pi * pitch * h * time / 16000.0 + h) for h in range(1, 30))
        audio = voiced + 20.0 * rng.standard_normal((frames, length))
        samples.append({"frames": audio[None].astype(np.float32)})
    return made, samples


def square_sum_layer_norm(width: int = 256, gain: float = 30.0, seed: int = 29) -> Tuple[onnx.ModelProto, Samples]:
    """Dense -> layer norm written ``Mul(h, h) -> ReduceSum`` (sum of squares ~2e5) -> dense."""
    rng = np.random.default_rng(seed)
    n = float(width)
    weights = [_init("w", rng.standard_normal((width, width)) * gain / np.sqrt(width)),
               _init("w_out", rng.standard_normal((width, width)) / np.sqrt(width)),
               _init("gamma", 1.0 + 0.1 * rng.standard_normal(width)), _init("beta", 0.1 * rng.standard_normal(width)),
               _init("eps", 1e-6), _init("n", n), _init("axes", [-1], np.int64)]
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="dense"),
        helper.make_node("Mul", ["h", "h"], ["sq"], name="square"),
        helper.make_node("ReduceSum", ["sq", "axes"], ["ssq"], keepdims=1, name="sum_sq"),
        helper.make_node("Div", ["ssq", "n"], ["msq"], name="mean_sq"),
        helper.make_node("ReduceSum", ["h", "axes"], ["s"], keepdims=1, name="sum"),
        helper.make_node("Div", ["s", "n"], ["mean"], name="mean"),
        helper.make_node("Mul", ["mean", "mean"], ["mean2"], name="mean_squared"),
        helper.make_node("Sub", ["msq", "mean2"], ["var"], name="variance"),
        helper.make_node("Add", ["var", "eps"], ["ve"], name="add_eps"),
        helper.make_node("Sqrt", ["ve"], ["sd"], name="std"),
        helper.make_node("Reciprocal", ["sd"], ["inv"], name="inv_std"),
        helper.make_node("Sub", ["h", "mean"], ["d"], name="centre"),
        helper.make_node("Mul", ["d", "inv"], ["z"], name="normalize"),
        helper.make_node("Mul", ["z", "gamma"], ["zg"], name="gain"),
        helper.make_node("Add", ["zg", "beta"], ["y0"], name="bias"),
        helper.make_node("MatMul", ["y0", "w_out"], ["y"], name="dense_out"),
    ]
    made = _model(nodes, [_vi("x", [2, 4, width])], [_vi("y", [2, 4, width])], weights)
    samples = [{"x": rng.standard_normal((2, 4, width)).astype(np.float32)} for _ in range(4)]
    return made, samples


def gemma_rms_norm(width: int = 256, scale: float = 300.0, seed: int = 43) -> Tuple[onnx.ModelProto, Samples]:
    """Gemma-2's RMSNorm on a residual stream of |x| ~ ``scale`` (Gemma-2's scaled embeddings reach it).

    ``embed -> dense -> residual Add -> Pow 2 -> ReduceMean -> Add eps -> Sqrt -> Div -> * (1 + weight) ->
    dense``: the mean of squares (~1e5) overflows float16, the stream itself fits it.
    """
    rng = np.random.default_rng(seed)
    weights = [_init("w_embed", rng.standard_normal((width, width)) * scale / np.sqrt(width)),
               _init("w_in", rng.standard_normal((width, width)) / np.sqrt(width)),
               _init("w_out", rng.standard_normal((width, width)) / np.sqrt(width)),
               _init("norm_weight", 0.1 * rng.standard_normal(width)), _init("one", 1.0),
               _init("two", 2.0), _init("eps", 1e-6), _init("axes", [-1], np.int64)]
    nodes = [
        helper.make_node("MatMul", ["x", "w_embed"], ["stream"], name="embed"),
        helper.make_node("MatMul", ["stream", "w_in"], ["hidden"], name="dense_in"),
        helper.make_node("Add", ["hidden", "stream"], ["residual"], name="residual"),
        helper.make_node("Pow", ["residual", "two"], ["sq"], name="norm/pow"),
        helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1, name="norm/mean"),
        helper.make_node("Add", ["ms", "eps"], ["ms_eps"], name="norm/add_eps"),
        helper.make_node("Sqrt", ["ms_eps"], ["rms"], name="norm/sqrt"),
        helper.make_node("Div", ["residual", "rms"], ["normed"], name="norm/div"),
        helper.make_node("Add", ["norm_weight", "one"], ["gain"], name="norm/one_plus_weight"),
        helper.make_node("Mul", ["normed", "gain"], ["scaled"], name="norm/mul"),
        helper.make_node("MatMul", ["scaled", "w_out"], ["y"], name="dense_out"),
    ]
    made = _model(nodes, [_vi("x", [1, 8, width])], [_vi("y", [1, 8, width])], weights, opset=18)
    samples = [{"x": rng.standard_normal((1, 8, width)).astype(np.float32)} for _ in range(4)]
    return made, samples


BUILDERS = {"mel_frontend": mel_frontend, "square_sum_layer_norm": square_sum_layer_norm,
            "gemma_rms_norm": gemma_rms_norm}


def write(name: str, folder) -> Tuple[str, str]:
    """Write model ``name`` and its calibration samples (``sample_<k>.npz``) under ``folder``; their paths."""
    import pathlib

    folder = pathlib.Path(folder)
    made, samples = BUILDERS[name]()
    data = folder / f"{name}_data"
    data.mkdir(parents=True, exist_ok=True)
    for k, sample in enumerate(samples):
        np.savez(data / f"sample_{k}.npz", **sample)
    path = folder / f"{name}.onnx"
    onnx.save(made, path)
    return str(path), str(data)
