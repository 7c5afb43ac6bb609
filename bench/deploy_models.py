"""The deployment zoo of bench_deploy (issue 20): public architectures, random weights, nothing downloaded.

Each model is built from its public configuration with ``torch`` and
``transformers`` (the sizes shrunk, the structure kept), initialised from a
fixed seed, and exported with ``torch.onnx.export(..., opset_version=17,
dynamo=False)`` with dynamic batch (and sequence) axes:

| name | architecture | sample input |
|---|---|---|
| ``bert`` | BertModel: 2 layers, hidden 256, 4 heads, intermediate 1024 | ids, mask, token types [1, 128] |
| ``gpt2`` | GPT2Model: 2 layers, hidden 256, 4 heads, vocab 50257 | ids [1, 128] |
| ``vit`` | ViTModel: 2 layers, hidden 256, 4 heads, 224x224 image, patch 16 | pixels [1, 3, 224, 224] |
| ``whisper_encoder`` | WhisperEncoder: 2 layers, d_model 384, 6 heads (whisper-tiny's width) | mel [1, 80, 3000] -> 1500 positions |
| ``mobilenet_v3_small`` | MobileNetV3-small in plain torch from the paper's block table | pixels [1, 3, 224, 224] |
| ``convnext_legacy`` | ConvNextForImageClassification: depths 2-2-2-2, widths 48-96-192-384, 100 classes, layer scale 1e-6; exported at opset 14, so every LayerNorm is written out (the final one with eps 1e-12) | pixels [1, 3, 224, 224] |
| ``qdq_cnn`` | a 4-conv CNN quantized by onnxruntime ``quantize_static`` (QDQ, int8), opset 18 | pixels [1, 3, 64, 64] |

and ``<name>_ort`` for each transformer after onnxruntime's transformer
optimizer (float32; Attention, SkipLayerNormalization, BiasGelu, ...
fusions). MobileNetV3-small is written out here because torchvision's wheels on
PyPI are CUDA builds that fail to import beside the CPU torch wheel
(``operator torchvision::nms does not exist``); the block table and the
layers follow torchvision's ``mobilenet_v3_small`` (initialised by fan-in, see the builder).

Exports are cached in the caller's folder under a key of the model's spec and
the torch/transformers/onnxruntime versions, so a re-run reuses them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import pathlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx

SEED = 0
OPSET = 17
QDQ_OPSET = 18
# Bumped when a builder changes in a way its spec does not show.
ZOO_VERSION = 2
SEQUENCE = 128


@dataclasses.dataclass(frozen=True)
class DeployModel:
    """One float32 model of the zoo and how to feed it.

    Attributes:
        name: file stem and table label.
        path: the cached ``.onnx`` file.
        family: ``transformer``, ``cnn`` or ``qdq``.
        dims: symbol -> size at the sample shapes (``batch``, ``sequence``).
        input_shapes: input -> concrete shape at the sample shapes.
        input_ranges: input -> (low, high) for random validation data where
            N(0, 1) or small ids would be wrong (an attention mask is all ones).
        note: how it was built (the optimizer's fusions for ``*_ort``).
    """

    name: str
    path: pathlib.Path
    family: str
    dims: Mapping[str, int]
    input_shapes: Mapping[str, tuple[int, ...]]
    input_ranges: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    note: str = ""


@dataclasses.dataclass(frozen=True)
class _Spec:
    """What a builder needs and what keys the cache: the builder, its sizes, the sample shapes."""

    name: str
    family: str
    build: str                       # name of the builder function in this module
    config: Mapping[str, object]
    inputs: Mapping[str, tuple[int, ...]]  # sample shapes (batch 1)
    dynamic: Mapping[str, Mapping[int, str]]
    ort_model_type: str | None = None  # onnxruntime optimizer's model_type, None: no optimized variant
    input_ranges: Mapping[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    opset: int = OPSET  # below 17 the exporter writes LayerNorm out (ReduceMean, Sub, Pow, ..., Div)


_BATCH_SEQ = {0: "batch", 1: "sequence"}
# Random validation data for BERT: a mask of all ones (a random 0..9 "mask" scales
# the additive mask past float range), segment ids 0 or 1 (the optimized model's
# EmbedLayerNormalization reads them directly, not through a Gather the validator
# could bound). The validator wants low < high and draws the integers of
# [low, high], so (1, 1.5) means "always 1".
_BERT_RANGES = {"attention_mask": (1, 1.5), "token_type_ids": (0, 1)}
SPECS: tuple[_Spec, ...] = (
    _Spec("bert", "transformer", "_bert",
          {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024},
          {"input_ids": (1, SEQUENCE), "attention_mask": (1, SEQUENCE), "token_type_ids": (1, SEQUENCE)},
          {"input_ids": _BATCH_SEQ, "attention_mask": _BATCH_SEQ, "token_type_ids": _BATCH_SEQ,
           "last_hidden_state": _BATCH_SEQ},
          ort_model_type="bert", input_ranges=_BERT_RANGES),
    _Spec("gpt2", "transformer", "_gpt2",
          {"n_layer": 2, "n_embd": 256, "n_head": 4},
          {"input_ids": (1, SEQUENCE)},
          {"input_ids": _BATCH_SEQ, "last_hidden_state": _BATCH_SEQ},
          ort_model_type="gpt2"),
    _Spec("vit", "transformer", "_vit",
          {"num_hidden_layers": 2, "hidden_size": 256, "num_attention_heads": 4, "intermediate_size": 1024,
           "image_size": 224, "patch_size": 16},
          {"pixel_values": (1, 3, 224, 224)},
          {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}},
          ort_model_type="vit"),
    _Spec("whisper_encoder", "transformer", "_whisper_encoder",
          {"encoder_layers": 2, "d_model": 384, "encoder_attention_heads": 6, "encoder_ffn_dim": 1536,
           "num_mel_bins": 80, "max_source_positions": 1500},
          {"input_features": (1, 80, 3000)},
          {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}},
          ort_model_type="bart"),
    _Spec("mobilenet_v3_small", "cnn", "_mobilenet_v3_small",
          {"num_classes": 1000, "image_size": 224},
          {"pixel_values": (1, 3, 224, 224)},
          {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}),
    _Spec("convnext_legacy", "cnn", "_convnext",
          {"depths": [2, 2, 2, 2], "hidden_sizes": [48, 96, 192, 384], "num_labels": 100,
           "layer_scale_init_value": 1e-6, "image_size": 224},
          {"pixel_values": (1, 3, 224, 224)},
          {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}, opset=14),
    _Spec("qdq_cnn", "qdq", "_small_cnn",
          {"channels": [16, 32, 64, 64], "num_classes": 10, "image_size": 64, "calibration_samples": 8},
          {"pixel_values": (1, 3, 64, 64)},
          {"pixel_values": {0: "batch"}, "logits": {0: "batch"}}),
)


def build_zoo(cache_dir: pathlib.Path, names: Sequence[str] | None = None,
              log: Callable[[str], None] = print) -> list[DeployModel]:
    """Export (or reuse from ``cache_dir``) every model of ``SPECS`` and its optimized variant.

    ``names`` filters by spec name (``bert`` also gives ``bert_ort``). Raises
    ImportError when torch or transformers is missing (``make bench`` installs them).
    """
    cache_dir.mkdir(parents=True, exist_ok=True)
    models: list[DeployModel] = []
    for spec in SPECS:
        if names and spec.name not in names:
            continue
        path = _cached(cache_dir, spec, "", lambda p, s=spec: _export(s, p), log)
        models.append(_model(spec, spec.name, path))
        if spec.ort_model_type:
            opt = _cached(cache_dir, spec, "_ort", lambda p, s=spec, src=path: _ort_optimize(s, src, p), log)
            models.append(_model(spec, f"{spec.name}_ort", opt, _fusions_note(opt)))
    return models


def _model(spec: _Spec, name: str, path: pathlib.Path, note: str = "") -> DeployModel:
    dims = {"batch": 1}
    if any(len(shape) == 2 for shape in spec.inputs.values()):
        dims["sequence"] = SEQUENCE
    return DeployModel(name=name, path=path, family=spec.family, dims=dims, input_shapes=dict(spec.inputs),
                       input_ranges=dict(spec.input_ranges), note=note)


def _cached(cache_dir: pathlib.Path, spec: _Spec, suffix: str, make: Callable[[pathlib.Path], None],
            log: Callable[[str], None]) -> pathlib.Path:
    """The file of ``spec`` (+ ``suffix``), made by ``make(path)`` unless a file of the same key exists."""
    path = cache_dir / f"{spec.name}{suffix}-{_cache_key(spec)}.onnx"
    if not path.exists():
        for stale in cache_dir.glob(f"{spec.name}{suffix}-*.onnx"):
            stale.unlink()  # an export of another spec or version: never read again
        log(f"[deploy_models] building {path.name}")
        tmp = path.with_name("tmp-" + path.name)
        make(tmp)
        tmp.replace(path)  # only a finished file ever has the cached name
    return path


def _cache_key(spec: _Spec) -> str:
    """A short hash of the spec and of the versions that shape the export."""
    versions = {}
    for package in ("torch", "transformers", "onnxruntime", "onnx"):
        try:
            versions[package] = __import__(package).__version__
        except ImportError:
            versions[package] = None
    text = json.dumps({"spec": dataclasses.asdict(spec), "versions": versions, "zoo": ZOO_VERSION,
                       "seed": SEED}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:10]


# --- export -------------------------------------------------------------------------------------


def _export(spec: _Spec, path: pathlib.Path) -> None:
    """Build ``spec``'s torch module from the seed and export it (QDQ specs are then quantized)."""
    import torch

    torch.manual_seed(SEED)
    module = globals()[spec.build](spec.config).eval()
    wrapper = _Positional(module, tuple(spec.inputs))
    args = tuple(_sample(name, shape) for name, shape in spec.inputs.items())
    outputs = [name for name in spec.dynamic if name not in spec.inputs]
    float_path = path if spec.family != "qdq" else path.with_name(path.stem + "-float.onnx")
    with torch.no_grad():
        torch.onnx.export(wrapper, args, str(float_path), opset_version=spec.opset, dynamo=False,
                          input_names=list(spec.inputs), output_names=outputs,
                          dynamic_axes={k: dict(v) for k, v in spec.dynamic.items()}, do_constant_folding=True)
    if spec.family == "qdq":
        _quantize(float_path, path, spec)
        float_path.unlink()


def _sample(name: str, shape: tuple[int, ...]):
    """A seeded example tensor of input ``name`` for tracing (ids small, masks all ones)."""
    import torch

    if name == "attention_mask":
        return torch.ones(shape, dtype=torch.int64)
    if name.endswith("_ids"):
        return torch.randint(0, 2, shape, dtype=torch.int64)
    return torch.randn(shape)


def _Positional(module, names: tuple[str, ...]):
    """``module`` wrapped to take positional tensors and return its first output (the legacy exporter's form)."""
    import torch

    class Positional(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, *args):
            out = self.inner(**dict(zip(names, args)))
            return out if isinstance(out, torch.Tensor) else out[0]

    return Positional()


def _bert(config: Mapping[str, object]):
    import transformers

    return transformers.BertModel(transformers.BertConfig(**config, attn_implementation="eager"),
                                  add_pooling_layer=False)


def _gpt2(config: Mapping[str, object]):
    import transformers

    # use_cache=False makes transformers build the causal mask with torch.vmap,
    # which the legacy exporter cannot trace (RuntimeError: unordered_map::at);
    # with the cache on, only output 0 is exported, so the cache costs nothing.
    return transformers.GPT2Model(transformers.GPT2Config(**config, attn_implementation="eager"))


def _vit(config: Mapping[str, object]):
    import transformers

    return transformers.ViTModel(transformers.ViTConfig(**config, attn_implementation="eager"),
                                 add_pooling_layer=False)


def _convnext(config: Mapping[str, object]):
    import transformers

    return transformers.ConvNextForImageClassification(transformers.ConvNextConfig(**config))


def _whisper_encoder(config: Mapping[str, object]):
    import transformers
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    # WhisperEncoder is the encoder half of WhisperModel: two convolutions
    # (the second of stride 2: 3000 frames -> 1500 positions), then the layers.
    return WhisperEncoder(transformers.WhisperConfig(**config, attn_implementation="eager"))


# MobileNetV3-small (Howard et al. 2019, table 2; torchvision's mobilenet_v3_small):
# kernel, expanded channels, output channels, squeeze-excite, activation (RE/HS), stride.
MOBILENET_V3_SMALL = (
    (3, 16, 16, True, "RE", 2),
    (3, 72, 24, False, "RE", 2),
    (3, 88, 24, False, "RE", 1),
    (5, 96, 40, True, "HS", 2),
    (5, 240, 40, True, "HS", 1),
    (5, 240, 40, True, "HS", 1),
    (5, 120, 48, True, "HS", 1),
    (5, 144, 48, True, "HS", 1),
    (5, 288, 96, True, "HS", 2),
    (5, 576, 96, True, "HS", 1),
    (5, 576, 96, True, "HS", 1),
)


def _make_divisible(value: float, divisor: int = 8) -> int:
    """torchvision's channel rounding: to a multiple of ``divisor``, never below 90% of ``value``."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def _mobilenet_v3_small(config: Mapping[str, object]):
    """MobileNetV3-small with torchvision's layers (BatchNorm folds into Conv on export)."""
    from torch import nn

    def conv_bn(cin: int, cout: int, kernel: int, stride: int, groups: int, act: type | None) -> nn.Sequential:
        layers = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
                  nn.BatchNorm2d(cout, eps=0.001, momentum=0.01)]
        return nn.Sequential(*layers, *([act(inplace=True)] if act else []))

    class SqueezeExcite(nn.Module):
        def __init__(self, channels: int) -> None:
            super().__init__()
            squeeze = _make_divisible(channels // 4)
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1, self.fc2 = nn.Conv2d(channels, squeeze, 1), nn.Conv2d(squeeze, channels, 1)
            self.relu, self.gate = nn.ReLU(inplace=True), nn.Hardsigmoid(inplace=True)

        def forward(self, x):
            return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))

    class InvertedResidual(nn.Module):
        def __init__(self, cin: int, kernel: int, expanded: int, cout: int, se: bool, act: str, stride: int):
            super().__init__()
            act_layer = nn.Hardswish if act == "HS" else nn.ReLU
            layers = [] if expanded == cin else [conv_bn(cin, expanded, 1, 1, 1, act_layer)]
            layers.append(conv_bn(expanded, expanded, kernel, stride, expanded, act_layer))
            if se:
                layers.append(SqueezeExcite(expanded))
            layers.append(conv_bn(expanded, cout, 1, 1, 1, None))
            self.block = nn.Sequential(*layers)
            self.residual = stride == 1 and cin == cout

        def forward(self, x):
            y = self.block(x)
            return x + y if self.residual else y

    layers, cin = [conv_bn(3, 16, 3, 2, 1, nn.Hardswish)], 16
    for kernel, expanded, cout, se, act, stride in MOBILENET_V3_SMALL:
        layers.append(InvertedResidual(cin, kernel, expanded, cout, se, act, stride))
        cin = cout
    layers.append(conv_bn(cin, 6 * cin, 1, 1, 1, nn.Hardswish))
    model = nn.Sequential(
        *layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(1),
        nn.Linear(6 * cin, 1024), nn.Hardswish(inplace=True), nn.Dropout(0.2),
        nn.Linear(1024, int(config["num_classes"])),
    )
    for m in model.modules():
        # He initialisation by fan-in: torchvision's fan-out (for a depthwise
        # conv, C*k*k instead of k*k) is meant for training and makes the
        # activations of an untrained network vanish (logits ~1e-6, which no
        # accuracy check can judge).
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.kaiming_normal_(m.weight, mode="fan_in")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return _ForwardAs(model, "pixel_values")


def _small_cnn(config: Mapping[str, object]):
    """Conv-BN-ReLU stages (stride 2 from the second), global pooling and a classifier: the Q/DQ model's float form."""
    from torch import nn

    layers, cin = [], 3
    for i, cout in enumerate(config["channels"]):
        layers += [nn.Conv2d(cin, cout, 3, 1 if i == 0 else 2, 1), nn.BatchNorm2d(cout), nn.ReLU()]
        cin = cout
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(1), nn.Linear(cin, int(config["num_classes"])))
    return _ForwardAs(model, "pixel_values")


def _ForwardAs(model, name: str):
    """A plain module made callable with its input as a keyword, like the transformers models."""
    from torch import nn

    class Keyword(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, **inputs):
            return self.model(inputs[name])

    return Keyword()


# --- onnxruntime: transformer optimizer, static quantization ------------------------------------


def _ort_optimize(spec: _Spec, src: pathlib.Path, dst: pathlib.Path) -> None:
    """onnxruntime's transformer optimizer on ``src`` (float32, fusions only), saved to ``dst``."""
    from onnxruntime.transformers.optimizer import optimize_model

    heads = next(int(v) for k, v in spec.config.items() if k in ("num_attention_heads", "n_head",
                                                                   "encoder_attention_heads"))
    hidden = next(int(v) for k, v in spec.config.items() if k in ("hidden_size", "n_embd", "d_model"))
    optimized = optimize_model(str(src), model_type=spec.ort_model_type, num_heads=heads, hidden_size=hidden,
                               opt_level=0)
    optimized.save_model_to_file(str(dst), use_external_data_format=False)


def _fusions_note(path: pathlib.Path) -> str:
    """The com.microsoft ops the optimizer wrote, e.g. ``Attention x2, SkipLayerNormalization x4``."""
    model = onnx.load(str(path), load_external_data=False)
    counts: dict[str, int] = {}
    for node in model.graph.node:
        if node.domain == "com.microsoft":
            counts[node.op_type] = counts.get(node.op_type, 0) + 1
    fused = ", ".join(f"{op} x{n}" for op, n in sorted(counts.items()))
    return f"onnxruntime optimizer fusions: {fused or 'none'}"


def _quantize(src: pathlib.Path, dst: pathlib.Path, spec: _Spec) -> None:
    """Static int8 QDQ quantization of ``src`` with a tiny seeded calibration set, at opset ``QDQ_OPSET``."""
    from onnx import version_converter
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    upgraded = src.with_name(src.stem + "-opset.onnx")
    onnx.save(version_converter.convert_version(onnx.load(str(src)), QDQ_OPSET), str(upgraded))
    rng = np.random.default_rng(SEED)
    name, shape = next(iter(spec.inputs.items()))
    samples = [{name: rng.standard_normal(shape).astype(np.float32)}
               for _ in range(int(spec.config["calibration_samples"]))]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.items = iter(samples)

        def get_next(self):
            return next(self.items, None)

    quantize_static(str(upgraded), str(dst), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8)
    upgraded.unlink()


def describe(models: Sequence[DeployModel]) -> list[dict[str, object]]:
    """JSON-able rows: name, family, file, sample shapes, note."""
    return [{"name": m.name, "family": m.family, "file": m.path.name, "input_shapes": {k: list(v) for k, v in
             m.input_shapes.items()}, "dims": dict(m.dims), "note": m.note} for m in models]
