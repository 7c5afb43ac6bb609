"""Tiny decoder-only LLMs as people deploy them, for bench_llm.py (issue 27).

Every model is built from a transformers configuration with random weights
(seed 0, nothing downloads from a hub), 2 layers, hidden 256, 4 query / 2 KV
heads (GQA), vocabulary 1024, then exported the ways people export decoders:

- ``dynamo``: ``torch.onnx.export(..., dynamo=True)`` (opset 18) of one decode
  step: ``input_ids``, ``attention_mask``, ``position_ids`` and
  ``past_key_values.{i}.key/value`` in; ``logits`` and ``present.{i}.key/value``
  out.
- ``genai_fp32`` / ``genai_fp16``: onnxruntime-genai's model builder on the
  locally saved random-init model (``-p fp32 -e cpu`` and ``-p fp16 -e cuda``;
  the fp16 graph is built on the CPU, it only needs CUDA to run).
- ``optimized``: onnxruntime's transformers optimizer on the dynamo export
  (``model_type="gpt2"``: fuses RMSNorm into SimplifiedLayerNormalization /
  SkipSimplifiedLayerNormalization).
- ``optimum``: ``python -m optimum.exporters.onnx --task text-generation-with-past``
  (optimum-onnx 0.1.0: the TorchScript exporter, one model with past inputs;
  this version writes no merged If decoder).
- ``optimum_merged``: optimum's merged decoder, an If on ``use_cache_branch``
  between its no-past and with-past decoders (``export_models`` +
  ``optimum.onnx.merge_decoders``, what its older post-processing wrote).

Inputs are real: a prefill of 8 tokens in torch produces the past cache, and
the decode step's inputs (``inputs.npz`` per family, one key per graph input
name the exporters use) continue it. ``reference.npz`` holds torch's logits
and present cache for that step, and ``greedy.npz`` the prompt for a short
greedy decode.

    .venv/bin/python bench/llm_models.py --out /work/llm_zoo [--families llama qwen3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

LAYERS = 2
HIDDEN = 256
HEADS = 4
KV_HEADS = 2
HEAD_DIM = HIDDEN // HEADS
VOCAB = 1024
INTERMEDIATE = 512
PREFILL = 8
SEED = 0

# family -> (transformers config class name, extra config fields)
FAMILIES = {
    "llama": ("LlamaConfig", {}),
    "llama_tied": ("LlamaConfig", {"tie_word_embeddings": True}),
    "qwen3": ("Qwen3Config", {"head_dim": HEAD_DIM, "tie_word_embeddings": False}),
    # A window longer than any sequence here (4096): the same function as full attention. genai_input_dir drops
    # it for the builder, since onnxruntime's GroupQueryAttention refuses a cache shorter than its local window.
    "gemma2": ("Gemma2Config", {"head_dim": HEAD_DIM, "sliding_window": 4096, "query_pre_attn_scalar": HEAD_DIM}),
    # Phi-3's config validation refuses a {"rope_type": "default"} rope_scaling: keep None (the builder shim copes).
    # Gemma-2 whose hidden states reach the thousands (embedding table x 2000): the RMSNorm's
    # mean of squares overflows fp16 (65504), the case a converter must keep float32.
    "gemma2_hot": ("Gemma2Config", {"head_dim": HEAD_DIM, "sliding_window": 4096, "query_pre_attn_scalar": HEAD_DIM,
                                    "tie_word_embeddings": False}),  # untied: the logits keep their scale
    # original == max positions: the 4k form (Phi-3-mini-4k), which the builder makes without LongRoPE caches.
    "phi3": ("Phi3Config", {"tie_word_embeddings": False, "pad_token_id": 0, "rope_scaling": None,
                            "original_max_position_embeddings": 256}),
}
# Families whose embedding table is scaled up (see gemma2_hot).
HOT_EMBEDDING = {"gemma2_hot": 2000.0}
# Realistic width: one model for the memory measurement (built only on request).
WIDE = ("LlamaConfig", {"hidden_size": 2048, "intermediate_size": 8192, "num_attention_heads": 32,
                        "num_key_value_heads": 8, "vocab_size": 128256, "num_hidden_layers": 2,
                        "tie_word_embeddings": True})  # Llama-3.2-1B's width, 2 of its 16 layers


def make_config(family: str, wide: bool = False):
    """The transformers configuration of one family at the zoo's tiny size."""
    import transformers

    cls_name, extra = WIDE if wide else FAMILIES[family]
    fields = dict(
        num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS, vocab_size=VOCAB, intermediate_size=INTERMEDIATE,
        max_position_embeddings=256, bos_token_id=1, eos_token_id=2, rope_theta=10000.0,
        # An explicit default rope: onnxruntime-genai 0.18's builder iterates rope_scaling (None in 4.57 configs).
        rope_scaling={"rope_type": "default"},
    )
    fields.update(extra)
    config = getattr(transformers, cls_name)(**fields)
    config._attn_implementation = "eager"
    return config


def build_torch_model(family: str, wide: bool = False):
    """A random-init causal LM (seed 0), eval mode, float32."""
    import torch
    import transformers

    torch.manual_seed(SEED)
    model = transformers.AutoModelForCausalLM.from_config(make_config(family, wide), attn_implementation="eager")
    model = model.float().eval()
    _scale_weights(model)
    if family in HOT_EMBEDDING and not wide:
        with torch.no_grad():
            model.get_input_embeddings().weight.mul_(HOT_EMBEDDING[family])
    return model


def _scale_weights(model) -> None:
    """Give norms trained-like weights (not all ones/zeros) so that RMSNorm gains matter."""
    import torch

    gen = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") or "layernorm.weight" in name:
                p.add_(0.1 * torch.randn(p.shape, generator=gen))


def cache_names(layers: int = LAYERS):
    """(past input names, present output names) in the layer order key, value."""
    past, present = [], []
    for i in range(layers):
        for kind in ("key", "value"):
            past.append(f"past_key_values.{i}.{kind}")
            present.append(f"present.{i}.{kind}")
    return past, present


class DecodeStep:
    """Wraps a causal LM as a function of flat tensors (the ONNX interface)."""

    def __new__(cls, model):
        import torch

        class _Step(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner

            def forward(self, input_ids, attention_mask, position_ids, *past):
                from transformers import DynamicCache

                cache = DynamicCache()
                for i in range(len(past) // 2):
                    cache.update(past[2 * i], past[2 * i + 1], i)
                out = self.inner(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                 past_key_values=cache, use_cache=True)
                flat = [out.logits]
                for i in range(len(past) // 2):
                    k, v = _layer_kv(out.past_key_values, i)
                    flat += [k, v]
                return tuple(flat)

        return _Step(model)


def _layer_kv(cache, i):
    """Key and value tensors of layer i of a transformers cache (old and new cache APIs)."""
    if hasattr(cache, "layers"):
        return cache.layers[i].keys, cache.layers[i].values
    return cache.key_cache[i], cache.value_cache[i]


def prefill(model, seed: int = SEED):
    """Run PREFILL tokens; return (token ids, flat past list, next token)."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, VOCAB, (1, PREFILL), generator=gen)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
    past = []
    for i in range(model.config.num_hidden_layers):
        k, v = _layer_kv(out.past_key_values, i)
        past += [k.contiguous(), v.contiguous()]
    next_id = out.logits[:, -1].argmax(-1, keepdim=True)
    return ids, past, next_id


def decode_inputs(model, seed: int = SEED):
    """The decode step's inputs after a real prefill, keyed by every name the exporters use."""
    ids, past, next_id = prefill(model, seed)
    total = PREFILL + 1
    feed = {
        "input_ids": next_id.numpy().astype(np.int64),
        "attention_mask": np.ones((1, total), np.int64),
        "position_ids": np.array([[PREFILL]], np.int64),
        "use_cache_branch": np.array([True]),  # optimum's merged decoder: take the with-past branch
    }
    past_names, _ = cache_names(model.config.num_hidden_layers)
    for name, t in zip(past_names, past):
        feed[name] = t.numpy().astype(np.float32)
    return feed, ids.numpy()


def torch_reference(model, feed):
    """Logits and present cache of torch for one decode step."""
    import torch

    step = DecodeStep(model)
    past_names, present_names = cache_names(model.config.num_hidden_layers)
    with torch.no_grad():
        outs = step(torch.from_numpy(feed["input_ids"]), torch.from_numpy(feed["attention_mask"]),
                    torch.from_numpy(feed["position_ids"]), *[torch.from_numpy(feed[n]) for n in past_names])
    ref = {"logits": outs[0].numpy()}
    for name, t in zip(present_names, outs[1:]):
        ref[name] = t.numpy()
    return ref


def export_dynamo(model, feed, path: Path, external_data: bool = False) -> None:
    """torch.onnx.export(dynamo=True, opset 18) of the decode step with dynamic batch/sequence/past."""
    import torch

    step = DecodeStep(model)
    past_names, present_names = cache_names(model.config.num_hidden_layers)
    args = (torch.from_numpy(feed["input_ids"]), torch.from_numpy(feed["attention_mask"]),
            torch.from_numpy(feed["position_ids"]), *[torch.from_numpy(feed[n]) for n in past_names])
    batch = torch.export.Dim("batch", min=1, max=64)
    past_len = torch.export.Dim("past_sequence_length", min=1, max=1024)
    # One new token per step (torch.export cannot add two symbolic dims): the mask is past + 1.
    shapes = ({0: batch}, {0: batch, 1: past_len + 1}, {0: batch},
              tuple({0: batch, 2: past_len} for _ in past_names))
    program = torch.onnx.export(
        step, args, input_names=["input_ids", "attention_mask", "position_ids", *past_names],
        output_names=["logits", *present_names], dynamic_shapes=shapes, opset_version=18,
        dynamo=True, external_data=external_data, verbose=False)
    program.save(str(path), external_data=external_data)


def optimize_ort(src: Path, dst: Path) -> None:
    """onnxruntime's transformers optimizer on the dynamo export (GPT-2 fusions, float32)."""
    from onnxruntime.transformers.optimizer import optimize_model

    opt = optimize_model(str(src), model_type="gpt2", num_heads=HEADS, hidden_size=HIDDEN, opt_level=0)
    opt.save_model_to_file(str(dst), use_external_data_format=False)


def save_hf_dir(model, path: Path) -> None:
    """save_pretrained plus a tiny word-level tokenizer (the genai builder insists on one)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    model.save_pretrained(str(path), safe_serialization=True)
    vocab = {f"t{i}": i for i in range(VOCAB)}
    vocab.update({"<unk>": 0, "<s>": 1, "</s>": 2})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(str(path))


# onnxruntime-genai 0.18's builder imports model classes of transformers 5.x at
# module level; with transformers 4.57 (our pin) those names do not exist. The
# shim makes transformers' lazy module answer a missing *ForConditionalGeneration
# name with a placeholder class (used only for isinstance checks of
# architectures we do not build; patched on the class because importing the
# builder replaces the module object), reads a rope_scaling of None (4.x's "no
# scaling") as {"rope_type": "default"}, and runs the builder's own __main__.
_BUILDER_SHIM = r"""
import runpy, sys
from transformers.utils import import_utils as iu
_orig, _stubs = iu._LazyModule.__getattr__, {}
def _getattr(self, name):
    try:
        return _orig(self, name)
    except (AttributeError, ImportError):
        if self.__name__ == "transformers" and name.endswith("ForConditionalGeneration"):
            return _stubs.setdefault(name, type(name, (), {}))
        raise
iu._LazyModule.__getattr__ = _getattr
import onnxruntime_genai.models  # puts the builder's folder on sys.path
from builders import base
_init = base.Model.make_config_init
def _config_init(self, config):
    if getattr(config, "rope_scaling", 0) is None:  # transformers 4.x: no rope scaling is None, not {}
        config.rope_scaling = {"rope_type": "default"}  # what transformers 5 calls it
    return _init(self, config)
base.Model.make_config_init = _config_init
sys.argv = ["builder"] + sys.argv[1:]
runpy.run_module("onnxruntime_genai.models.builder", run_name="__main__")
"""


def genai_input_dir(hf_dir: Path) -> Path:
    """The builder's copy of the HF folder: a sliding window longer than max positions dropped.

    It never slides at these lengths, but onnxruntime's GroupQueryAttention refuses a
    past cache shorter than its local window (Gemma-2's 4096 against our 8 tokens).
    """
    cfg = json.loads((hf_dir / "config.json").read_text())
    window = cfg.get("sliding_window")
    if not window or window < cfg.get("max_position_embeddings", 0):
        return hf_dir
    dst = hf_dir.parent / "hf_genai"
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(hf_dir, dst)
    cfg["sliding_window"] = None
    (dst / "config.json").write_text(json.dumps(cfg, indent=2))
    return dst


def genai_build(hf_dir: Path, out_dir: Path, precision: str, ep: str, log: Path) -> Path:
    """Run onnxruntime-genai's model builder in a child process; return the model.onnx path."""
    cache = out_dir.parent / (out_dir.name + "_cache")
    hf_dir = genai_input_dir(hf_dir)
    cmd = [sys.executable, "-c", _BUILDER_SHIM, "-i", str(hf_dir), "-o", str(out_dir), "-p", precision,
           "-e", ep, "-c", str(cache)]
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=900)
    shutil.rmtree(cache, ignore_errors=True)
    if proc.returncode != 0:
        raise RuntimeError(f"genai builder -p {precision} -e {ep} exited {proc.returncode}: {_last_line(log)}")
    return out_dir / "model.onnx"


def _last_line(log: Path) -> str:
    """The last non-empty line of a child's log (its exception), for one-line status rows."""
    lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"


def optimum_export(hf_dir: Path, out_dir: Path, log: Path) -> Path:
    """optimum-onnx's merged decoder (text-generation-with-past) in a child process."""
    cmd = [sys.executable, "-m", "optimum.exporters.onnx", "--model", str(hf_dir), "--task",
           "text-generation-with-past", str(out_dir)]
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=900)
    if proc.returncode != 0:
        raise RuntimeError(f"optimum export exited {proc.returncode}: {_last_line(log)}")
    for name in ("decoder_model_merged.onnx", "model.onnx"):
        if (out_dir / name).exists():
            return out_dir / name
    raise RuntimeError(f"optimum export wrote no model in {out_dir}")


# optimum-onnx 0.1.0 exports one decoder with past; the merged form many deployments still
# use (an If on ``use_cache_branch`` between a no-past and a with-past decoder) comes from
# its own pieces: both decoders exported by optimum's ``export_models`` with its configs,
# then ``optimum.onnx.merge_decoders``, as optimum's post-processing did.
_OPTIMUM_MERGED = r"""
import sys
from pathlib import Path
from optimum.exporters.onnx.convert import export_models
from optimum.exporters.tasks import TasksManager
from optimum.onnx import merge_decoders
from transformers import AutoModelForCausalLM
hf, out = sys.argv[1], Path(sys.argv[2])
model = AutoModelForCausalLM.from_pretrained(hf).eval()
ctor = TasksManager.get_exporter_config_constructor(exporter="onnx", model=model, task="text-generation-with-past",
                                                    library_name="transformers")
def config(past_in):
    return ctor(model.config, task="text-generation", use_past=True, use_past_in_inputs=past_in)
out.mkdir(parents=True, exist_ok=True)
export_models({"decoder_model": (model, config(False)), "decoder_with_past_model": (model, config(True))}, out,
              output_names=["decoder_model.onnx", "decoder_with_past_model.onnx"])
merge_decoders(out / "decoder_model.onnx", out / "decoder_with_past_model.onnx",
               save_path=out / "decoder_model_merged.onnx")
"""


def optimum_merged_export(hf_dir: Path, out_dir: Path, log: Path) -> Path:
    """optimum's merged decoder (If on use_cache_branch) in a child process; return its path."""
    cmd = [sys.executable, "-c", _OPTIMUM_MERGED, str(hf_dir), str(out_dir)]
    with open(log, "w") as fh:
        proc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=900)
    path = out_dir / "decoder_model_merged.onnx"
    if proc.returncode != 0 or not path.exists():
        raise RuntimeError(f"optimum merged export exited {proc.returncode}: {_last_line(log)}")
    return path


def ort_loads(path: Path) -> str:
    """'yes' when onnxruntime CPU creates a session, else the first line of its error."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return "yes"
    except Exception as exc:  # noqa: BLE001 - any load failure is a result
        return "no: " + str(exc).splitlines()[0][:200]


def logits_diff(path: Path, feed: dict, ref_logits: np.ndarray) -> str:
    """Max |logits - torch's| of one decode step on onnxruntime CPU (or the run's error)."""
    import onnxruntime as ort

    try:
        sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        got = sess.run(["logits"], feed)[0].astype(np.float32)
        return f"{float(np.abs(got.reshape(ref_logits.shape) - ref_logits).max()):.2e}"
    except Exception as exc:  # noqa: BLE001 - a failed run is a result
        return "run fails: " + str(exc).splitlines()[0][:150]


def io_names(path: Path):
    """(input names, output names) of an ONNX file without loading its weights."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    return [i.name for i in m.graph.input], [o.name for o in m.graph.output]


def feed_for(path: Path, feed: dict) -> dict:
    """The subset of a family's decode inputs that one graph takes (genai: int32 mask where typed so)."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    out = {}
    for inp in m.graph.input:
        if inp.name not in feed:
            continue
        want = onnx.helper.tensor_dtype_to_np_dtype(inp.type.tensor_type.elem_type)
        out[inp.name] = feed[inp.name].astype(want)
    return out


def build_family(family: str, root: Path, what=("dynamo", "optimized", "genai", "optimum")) -> list[dict]:
    """Build every graph of one family under root/family; return one STATUS row per file."""
    fam_dir = root / family
    fam_dir.mkdir(parents=True, exist_ok=True)
    model = build_torch_model(family)
    feed, prompt = decode_inputs(model)
    ref = torch_reference(model, feed)
    np.savez(fam_dir / "inputs_all.npz", **feed)
    np.savez(fam_dir / "reference.npz", **ref)
    np.savez(fam_dir / "greedy.npz", prompt=prompt)
    rows = []

    def record(kind, path, how, err=None):
        row = {"family": family, "kind": kind, "file": str(path), "how": how}
        if err is None and Path(path).exists():
            row["inputs"], row["outputs"] = io_names(path)
            row["loads"] = ort_loads(path)
            np.savez(path.parent / f"{path.stem}.inputs.npz", **feed_for(path, feed))
            if row["loads"] == "yes":
                row["logits_vs_torch"] = logits_diff(path, feed_for(path, feed), ref["logits"])
        else:
            row["loads"] = "not built: " + (err or "missing")[:400]
        rows.append(row)
        print(f"[{family}] {kind}: {row['loads']}", flush=True)

    dyn = fam_dir / "dynamo.onnx"
    if "dynamo" in what:
        _try(record, "dynamo", dyn, "torch.onnx.export(dynamo=True, opset 18), decode step with past",
             lambda: export_dynamo(model, feed, dyn))
    if "optimized" in what and dyn.exists():
        opt = fam_dir / "optimized.onnx"
        _try(record, "optimized", opt, "onnxruntime.transformers.optimizer(model_type=gpt2, opt_level=0) on dynamo.onnx",
             lambda: optimize_ort(dyn, opt))
    hf_dir = fam_dir / "hf"
    if "genai" in what or "optimum" in what:
        shutil.rmtree(hf_dir, ignore_errors=True)
        save_hf_dir(model, hf_dir)
    if "genai" in what:
        for prec, ep in (("fp32", "cpu"), ("fp16", "cuda")):
            out = fam_dir / f"genai_{prec}"
            _try(record, f"genai_{prec}", out / "model.onnx", f"onnxruntime_genai builder -p {prec} -e {ep}",
                 lambda out=out, prec=prec, ep=ep: genai_build(hf_dir, out, prec, ep, fam_dir / f"genai_{prec}.log"))
    if "optimum" in what:
        out = fam_dir / "optimum"
        _try(record, "optimum", out / "model.onnx", "optimum-onnx export, text-generation-with-past",
             lambda: optimum_export(hf_dir, out, fam_dir / "optimum.log"))
        merged = fam_dir / "optimum_merged"
        _try(record, "optimum_merged", merged / "decoder_model_merged.onnx",
             "optimum-onnx export_models (no-past + with-past decoders) + optimum.onnx.merge_decoders: If on "
             "use_cache_branch", lambda: optimum_merged_export(hf_dir, merged, fam_dir / "optimum_merged.log"))
    return rows


def _try(record, kind, path, how, fn):
    """Run one export; record the file or the error text, never stop the zoo."""
    t0 = time.time()
    try:
        res = fn()
        if isinstance(res, Path):
            path = res
        record(kind, path, f"{how} ({time.time() - t0:.1f} s)")
    except Exception as exc:  # noqa: BLE001 - a failed export is a row of the status table
        record(kind, path, how, err=f"{type(exc).__name__}: {exc}")


STATUS_NOTES = [
    "Rebuild: `.venv/bin/python bench/llm_models.py --out /work/llm_zoo [--families F...] [--what dynamo optimized "
    "genai optimum]` in the w-llmzoo worktree (needs onnxruntime-genai, onnxscript, optimum-onnx).",
    "dynamo: sequence length is 1 (a decode step); attention_mask is [batch, past_sequence_length + 1].",
    "genai_*: onnxruntime-genai 0.18 builder run through a shim (transformers 4.57 lacks classes it imports; "
    "rope_scaling None read as default). Gemma-2's window (4096) is dropped from the builder's config copy.",
    "genai_fp16 is built for CUDA: Qwen3's GroupQueryAttention with q/k norm weights does not run on CPU "
    "(onnxruntime: 'q_norm_weight / k_norm_weight inputs are not supported' on CPU); loads fine.",
    "phi3 genai graphs differ from torch by ~1 in logits (the builder's Phi-3, not ours; the fp32 graph is still "
    "its own float32 reference for conversion checks).",
    "optimum: optimum-onnx 0.1.0 exports with the TorchScript exporter, one decoder with past (no merged If); "
    "optimum_merged: its no-past and with-past decoders merged by optimum.onnx.merge_decoders (If on "
    "use_cache_branch; feed use_cache_branch=[True] for a decode step).",
    "Per-family: inputs_all.npz (every input name any exporter uses), reference.npz (torch logits/present of "
    "the step), greedy.npz (the 8-token prompt), hf/ (save_pretrained + a word-level tokenizer).",
]


def write_status(root: Path, rows: list[dict]) -> None:
    """STATUS.md: each file, how it was made, its I/O names, whether onnxruntime loads it."""
    (root / "status.json").write_text(json.dumps(rows, indent=1))
    lines = ["# LLM zoo (bench/llm_models.py)", "",
             f"Random-init transformers models (seed {SEED}), {LAYERS} layers, hidden {HIDDEN}, "
             f"{HEADS} q / {KV_HEADS} kv heads, head_dim {HEAD_DIM}, vocab {VOCAB}, intermediate {INTERMEDIATE}.",
             f"Inputs: a torch prefill of {PREFILL} tokens gives the past cache; `<model>.inputs.npz` beside each "
             "graph is one decode step (past length 8, total 9); `reference.npz` is torch's logits/present for it.",
             "", "| family | kind | file | how | loads in ORT | max abs logits vs torch (ORT CPU) | inputs | outputs |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ins = ", ".join(r.get("inputs", [])) if len(r.get("inputs", [])) <= 4 else \
            ", ".join(r["inputs"][:3]) + f", ... ({len(r['inputs'])})"
        outs = ", ".join(r.get("outputs", [])) if len(r.get("outputs", [])) <= 3 else \
            ", ".join(r["outputs"][:2]) + f", ... ({len(r['outputs'])})"
        lines.append(f"| {r['family']} | {r['kind']} | {r['file']} | {r['how']} | {r['loads']} | {r.get('logits_vs_torch', '')} | {ins} | {outs} |")
    lines += ["", "Notes:"] + [f"- {n}" for n in STATUS_NOTES]
    (root / "STATUS.md").write_text("\n".join(lines) + "\n")


def build_zoo(root: Path, families=None, what=("dynamo", "optimized", "genai", "optimum")) -> list[dict]:
    """Build every family (or the ones named) under root; write STATUS.md as each family finishes."""
    root.mkdir(parents=True, exist_ok=True)
    old = root / "status.json"
    rows = json.loads(old.read_text()) if old.exists() else []
    for fam in families or FAMILIES:
        new = build_family(fam, root, what)
        built = {(r["family"], r["kind"]) for r in new}
        rows = [r for r in rows if (r["family"], r["kind"]) not in built] + new
        write_status(root, rows)
    return rows


def main(argv=None) -> int:
    """CLI: build the zoo into --out."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--families", nargs="*", default=None, choices=sorted(FAMILIES))
    ap.add_argument("--what", nargs="*", default=["dynamo", "optimized", "genai", "optimum"])
    args = ap.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    build_zoo(args.out, args.families, tuple(args.what))
    return 0


if __name__ == "__main__":
    sys.exit(main())
