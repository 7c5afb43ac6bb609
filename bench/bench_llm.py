"""LLM decoders as people deploy them (issue 27): ampconv vs the float16 tools on a KV-cache decode step.

``main(out_dir) -> dict`` (what bench/run_all.py calls) or
``python bench/bench_llm.py --out DIR [--families llama qwen3] [--kinds dynamo genai_fp32] [--zoo DIR]``.

The set (bench/llm_models.py): Llama, Llama with tied embeddings, Qwen3,
Gemma-2 and Phi-3, random init, 2 layers, hidden 256, GQA 4/2 heads, vocab
1024, each exported five ways: ``dynamo`` (torch.onnx.export(dynamo=True)
decode step), ``optimized`` (onnxruntime's transformers optimizer on it),
``genai_fp32`` (onnxruntime-genai's model builder, fp32 CPU), ``optimum``
(optimum-onnx's decoder with past) and ``optimum_merged`` (its no-past and
with-past decoders merged into an If on ``use_cache_branch``). Inputs are real: a torch prefill of 8
tokens gives the past cache.

Conversions of every graph (float32 in):

- ``ampconv``: ``ampconv convert SRC -o DST`` (the CLI, defaults; what its summary says of the synthetic
  float32 run, its seconds or why it was skipped, is kept per conversion and listed in ``llm.md``);
- ``ampconv kv-low``: the same with ``--kv-cache low`` when ``ampconv convert --help`` offers it;
- ``ORT tool``: ``onnxruntime.transformers.float16.convert_float_to_float16(model, keep_io_types=True)``;
- ``onnxconverter-common``: its ``convert_float_to_float16(model, keep_io_types=True)``;
- ``builder fp16`` (genai graphs only): the builder's own ``-p fp16 -e cuda`` graph of the same weights.

Per output: converts (the CLI's error line when not), loads in onnxruntime
CPU, ``bench.figures.deploy_figures`` at the decode step's shapes (Casts,
cast traffic per step, heavy nodes LOW, weight bytes), the KV cache bytes
read (past inputs) and written (present outputs) per step in the output's
declared types, and an emulated greedy decode: ``DECODE_STEPS`` steps from the
prefill cache, the float32 source and the output's fp16 emulation
(``ampconv.numerics.emulate``) each feeding its own present cache back as its
next past, both given the float32 model's token (teacher forcing, so one flip
does not change every later input). A step agrees when the argmax matches; a
step whose float32 top-two gap is under ``TIE_FRACTION`` of the logits' std
is a near tie and not counted. Emulation passes when every counted step agrees.

Checks per graph, for each ampconv variant, against the lightest peer that
passes emulation (peers: ORT tool, onnxconverter-common, builder fp16), the
targets of issue 27: converts, loads, passes emulation; Casts <= max(1.25x,
+2); cast traffic <= 1.25x + 0.1 MB; every heavy node LOW; weights <= 1.02x.
For genai graphs with ``--kv-cache low``: within 2 Casts of the builder's own
fp16 graph, with the cache in float16. Optional, one realistic-width model
(hidden 2048, vocab 128256, tied, genai builder with external data): peak RSS
of ``ampconv convert`` <= 24 GiB; skipped with ``AMPCONV_BENCH_LLM_WIDE=0``
or ``--no-wide``. Writes ``OUT/llm.json`` and ``OUT/llm.md``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np
import onnx

from bench import graphstats, llm_models
from bench.bench_deploy import run_tool_child

AMPCONV, AMPCONV_KV, ORT_TOOL, OCC, BUILDER = "ampconv", "ampconv kv-low", "ORT tool", "onnxconverter-common", \
    "builder fp16"
# Issue 32 on a real decoder: --fallback-dtype bf16 where fp16 overflows (the families whose RMSNorm does).
AMPCONV_BF16 = "ampconv fp16+bf16"
FALLBACK_FAMILIES = ("gemma2_hot",)
PEERS = (ORT_TOOL, OCC, BUILDER)
KINDS = ("dynamo", "optimized", "genai_fp32", "optimum", "optimum_merged")
TOOL_TIMEOUT_S = 300.0
CONVERT_TIMEOUT_S = 600.0
DECODE_STEPS = 8
TIE_FRACTION = 0.01
CASTS_FACTOR, CASTS_SLACK = 1.25, 2
TRAFFIC_FACTOR, TRAFFIC_SLACK_MB = 1.25, 0.1
WEIGHT_FACTOR = 1.02
BUILDER_CAST_SLACK = 2
RSS_LIMIT_GIB = 24.0
_FILE_TAGS = {AMPCONV: "ampconv", AMPCONV_KV: "ampconv-kvlow", AMPCONV_BF16: "ampconv-fallback", ORT_TOOL: "ort-fp16",
              OCC: "occ-fp16"}
_LOW_NAMES = {onnx.TensorProto.FLOAT16: "fp16", onnx.TensorProto.BFLOAT16: "bf16", onnx.TensorProto.FLOAT: "fp32"}


# --- the zoo --------------------------------------------------------------------------------------


# The zoo's build steps (llm_models.build_family's ``what``) each kind needs.
_STEPS = {"dynamo": ("dynamo",), "optimized": ("dynamo", "optimized"), "genai_fp32": ("genai",),
          "optimum": ("optimum",), "optimum_merged": ("optimum",)}


def ensure_zoo(zoo: pathlib.Path, families: Sequence[str], kinds: Sequence[str]) -> list[dict]:
    """Build what the families' kinds need under ``zoo`` (a graph its status.json lists as built is reused)."""
    status = zoo / "status.json"
    rows = json.loads(status.read_text()) if status.exists() else []
    have = {(r["family"], r["kind"]) for r in rows if _exists(r.get("file"))}
    for fam in families:
        steps = sorted({step for kind in kinds if (fam, kind) not in have for step in _STEPS[kind]})
        if steps:
            llm_models.build_zoo(zoo, [fam], tuple(steps))
    return json.loads(status.read_text()) if status.exists() else []


def zoo_key() -> str:
    """Cache key of a zoo: llm_models.py's text and the versions of every exporter."""
    from importlib import metadata

    parts = [pathlib.Path(llm_models.__file__).read_text()]
    for dist in ("torch", "transformers", "onnxscript", "onnxruntime", "onnxruntime-genai", "optimum-onnx"):
        try:
            parts.append(f"{dist}=={metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{dist} missing")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


def _exists(path) -> bool:
    """Whether ``path`` (possibly None) names an existing file."""
    return bool(path) and pathlib.Path(path).exists()


# --- conversions ----------------------------------------------------------------------------------


def kv_flag_supported() -> bool:
    """Whether this ampconv's ``convert`` offers ``--kv-cache`` (the lead adds it for issue 27)."""
    done = subprocess.run([_ampconv_exe(), "convert", "--help"], capture_output=True, text=True, check=False)
    return "--kv-cache" in done.stdout


def _ampconv_exe() -> str:
    exe = pathlib.Path(sys.executable).with_name("ampconv")
    return str(exe) if exe.exists() else "ampconv"


def run_ampconv(src: pathlib.Path, dst: pathlib.Path, extra: Sequence[str] = ()) -> dict[str, object]:
    """``ampconv convert SRC -o DST [extra]`` as a process: status, seconds, peak RSS, the error line."""
    cmd = [_ampconv_exe(), "convert", str(src), "-o", str(dst), "--overwrite", *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=CONVERT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"status": "timed out", "seconds": None, "error": f"no result after {CONVERT_TIMEOUT_S:g} s"}
    seconds = round(time.perf_counter() - start, 2)
    rss = _peak_rss_of_last_child()
    if proc.returncode != 0 or not dst.exists():
        lines = [ln for ln in (err or out).splitlines() if ln.strip()]
        error = next((ln for ln in reversed(lines) if "rror" in ln), lines[-1] if lines else "")
        return {"status": "failed", "seconds": seconds, "exit": proc.returncode, "error": error[:600],
                "command": " ".join(cmd[1:]), "peak_rss_mib": rss}
    return {"status": "ok", "seconds": seconds, "peak_rss_mib": rss, "summary_tail": err.strip()[-1500:],
            "synthetic_run": synthetic_words(err)}


def synthetic_words(summary: str) -> str:
    """What a conversion's summary says of the synthetic float32 run (issue 37): the seconds it took and its
    estimate, or why it was skipped."""
    for line in summary.splitlines():
        ran = re.search(r"synthetic float32 run: .*? in ([0-9.]+) s \(estimated ([0-9.]+) s", line)
        if ran:
            return f"ran: {ran.group(1)} s (estimated {ran.group(2)} s)"
        skipped = re.search(r"synthetic float32 run skipped: ([^;]*)", line)
        if skipped:
            return f"skipped: {skipped.group(1)}"
    return "not made"


def _peak_rss_of_last_child():
    """ru_maxrss (MiB) of the waited children: the largest child so far (a fresh process for the wide model)."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)


def convert_all(src: pathlib.Path, work: pathlib.Path, kv_flag: bool, builder_fp16: pathlib.Path | None,
                fallback: bool = False) -> dict:
    """Every conversion of one graph: {variant: {"path", "conversion"}} (``fallback``: with the bf16 one too)."""
    stem = src.stem if src.stem != "model" else src.parent.name
    out = {}
    for variant in (AMPCONV, AMPCONV_KV, AMPCONV_BF16, ORT_TOOL, OCC):
        if (variant == AMPCONV_KV and not kv_flag) or (variant == AMPCONV_BF16 and not fallback):
            continue
        dst = work / f"{stem}.{_FILE_TAGS[variant]}.onnx"
        dst.unlink(missing_ok=True)
        if variant == AMPCONV:
            conv = run_ampconv(src, dst)
        elif variant == AMPCONV_KV:
            conv = run_ampconv(src, dst, ["--kv-cache", "low"])
        elif variant == AMPCONV_BF16:
            conv = run_ampconv(src, dst, ["--fallback-dtype", "bf16"])
        else:
            conv = run_tool_child("ort" if variant == ORT_TOOL else "occ", src, dst, TOOL_TIMEOUT_S)
        out[variant] = {"path": dst if conv["status"] == "ok" else None, "conversion": conv}
    if builder_fp16 is not None and builder_fp16.exists():
        out[BUILDER] = {"path": builder_fp16, "conversion": {"status": "ok", "note": "the builder's own fp16 graph"}}
    return out


# --- measurements ---------------------------------------------------------------------------------


def kv_bytes(path: pathlib.Path, shapes: dict[str, tuple]) -> dict[str, object]:
    """Bytes of the KV cache read (past inputs) and written (present outputs) per step, in declared types."""
    from ampconv.tensors.tensorsize import tensor_bytes

    model = onnx.load(str(path), load_external_data=False)
    past_names, present_names = llm_models.cache_names()
    read = written = 0
    types = set()
    for value in model.graph.input:
        if value.name in past_names:
            elem = value.type.tensor_type.elem_type
            read += tensor_bytes(elem, int(np.prod(shapes[value.name])))
            types.add(_LOW_NAMES.get(elem, str(elem)))
    for value in model.graph.output:
        if value.name in present_names:
            elem = value.type.tensor_type.elem_type
            past = shapes[past_names[present_names.index(value.name)]]
            written += tensor_bytes(elem, int(np.prod(past)) // past[2] * (past[2] + 1))
            types.add(_LOW_NAMES.get(elem, str(elem)))
    logits = next((o for o in model.graph.output if o.name == "logits"), None)
    return {"read": read, "written": written, "cache_types": sorted(types),
            "logits_type": _LOW_NAMES.get(logits.type.tensor_type.elem_type) if logits is not None else None}


def measure(path: pathlib.Path, feed: dict[str, np.ndarray]) -> dict[str, object]:
    """Figures at the decode step's shapes, onnxruntime load, KV bytes of one output."""
    from bench.figures import deploy_figures

    shapes = {k: tuple(v.shape) for k, v in feed.items()}
    entry: dict[str, object] = {"file": str(path)}
    try:
        entry["figures"] = deploy_figures(path, {}, shapes).to_dict()
    except Exception as exc:  # noqa: BLE001 -- a figure that cannot be computed is reported
        entry["figures_error"] = f"{type(exc).__name__}: {exc}"[:600]
    entry["load_error"] = graphstats.ort_load_error(path)
    try:
        entry["kv"] = kv_bytes(path, shapes)
    except Exception as exc:  # noqa: BLE001
        entry["kv_error"] = f"{type(exc).__name__}: {exc}"[:300]
    return entry


def emulated_session(path: pathlib.Path, work: pathlib.Path):
    """An onnxruntime CPU session of the float32 emulation of a LOW model (optimizations off)."""
    import onnx_ir as ir

    from ampconv.numerics.emulate import emulate

    model = ir.load(str(path))
    emulate(model)
    dst = work / (path.parent.name + "." + path.stem + ".emulated.onnx")
    # Every tensor into one new data file: the source's external data lives in another folder.
    ir.save(model, str(dst), external_data=dst.name + ".data")
    return _session(dst, optimize=False)


def _session(path: pathlib.Path, optimize: bool = True):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 4
    if not optimize:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])


def greedy_agreement(ref_sess, conv_sess, feed: dict[str, np.ndarray], steps: int = DECODE_STEPS) -> dict:
    """Teacher-forced greedy decode, each model feeding back its own present cache (see the module docstring)."""
    past_names, present_names = llm_models.cache_names()
    ref_feed, conv_feed = dict(feed), dict(feed)
    agree = counted = ties = 0
    worst_cos, flips = 1.0, []
    for step in range(steps):
        ref_out = dict(zip([o.name for o in ref_sess.get_outputs()], ref_sess.run(None, _typed(ref_sess, ref_feed))))
        conv_out = dict(zip([o.name for o in conv_sess.get_outputs()],
                            conv_sess.run(None, _typed(conv_sess, conv_feed))))
        r = ref_out["logits"].astype(np.float64).reshape(-1)
        c = conv_out["logits"].astype(np.float64).reshape(-1)
        if not np.all(np.isfinite(c)):
            return {"passed": False, "steps": step + 1, "error": f"step {step}: non-finite logits"}
        worst_cos = min(worst_cos, float(r @ c / (np.linalg.norm(r) * np.linalg.norm(c) + 1e-30)))
        top2 = np.sort(r)[-2:]
        token = int(r.argmax())
        if top2[1] - top2[0] < TIE_FRACTION * r.std():
            ties += 1
        else:
            counted += 1
            agree += int(c.argmax()) == token
            if int(c.argmax()) != token:
                flips.append(step)
        for f, out in ((ref_feed, ref_out), (conv_feed, conv_out)):
            _advance(f, out, token, past_names, present_names)
    return {"passed": agree == counted, "agree": agree, "counted": counted, "near_ties": ties, "flipped_steps": flips,
            "worst_logits_cosine": round(worst_cos, 6)}


def _typed(sess, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The feed in the session's declared input types (float16 cache inputs of a native fp16 graph)."""
    kinds = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(int64)": np.int64,
             "tensor(int32)": np.int32}
    return {i.name: feed[i.name].astype(kinds.get(i.type, feed[i.name].dtype)) for i in sess.get_inputs()
            if i.name in feed}


def _advance(feed, out, token, past_names, present_names) -> None:
    """Next step's inputs: the chosen token, the mask one longer, the next position, present as past."""
    total = feed["attention_mask"].shape[1] + 1
    feed["input_ids"] = np.array([[token]], np.int64)
    feed["attention_mask"] = np.ones((1, total), np.int64)
    feed["position_ids"] = np.array([[total - 1]], np.int64)
    for past, present in zip(past_names, present_names):
        feed[past] = out[present].astype(np.float32)


def emulation_verdict(src: pathlib.Path, path: pathlib.Path, feed: dict, work: pathlib.Path) -> dict:
    """Greedy agreement of the emulated output against the float32 source; never raises."""
    try:
        return greedy_agreement(_session(src), emulated_session(path, work), feed)
    except Exception as exc:  # noqa: BLE001 -- an output that cannot be emulated fails, with the reason
        return {"passed": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400]}


def ampconv_validate(src: pathlib.Path, path: pathlib.Path, npz: pathlib.Path) -> dict:
    """ampconv's own verdict (``validate --backend emulate --inputs`` the decode step): info beside the greedy one."""
    import ampconv
    from ampconv.validation import ValidateOptions

    try:
        result = ampconv.validate(str(src), str(path), ValidateOptions(inputs=(str(npz),), backend="emulate"))
        return {"passed": bool(result.passed)}
    except Exception as exc:  # noqa: BLE001
        return {"passed": False, "error": f"{type(exc).__name__}: {exc}"[:400]}


def run_graph(row: dict, zoo: pathlib.Path, work: pathlib.Path, kv_flag: bool, log=print) -> dict:
    """Convert, measure and emulate every variant of one zoo graph."""
    src = pathlib.Path(row["file"])
    npz = src.parent / f"{src.stem}.inputs.npz"
    feed = dict(np.load(npz))
    builder = zoo / row["family"] / "genai_fp16" / "model.onnx" if row["kind"] == "genai_fp32" else None
    gwork = work / f"{row['family']}_{row['kind']}"
    gwork.mkdir(parents=True, exist_ok=True)
    entry = {"family": row["family"], "kind": row["kind"], "source": str(src), "variants": {}}
    entry["variants"]["float32"] = measure(src, feed)
    for variant, out in convert_all(src, gwork, kv_flag, builder, row["family"] in FALLBACK_FAMILIES).items():
        v = {"conversion": out["conversion"]}
        if out["path"] is not None:
            v.update(measure(out["path"], feed))
            v["emulation"] = emulation_verdict(src, out["path"], feed, gwork)
            if variant in (AMPCONV, AMPCONV_KV, AMPCONV_BF16):
                v["ampconv_validate"] = ampconv_validate(src, out["path"], npz)
        entry["variants"][variant] = v
        log(f"  {row['family']}/{row['kind']} {variant}: {out['conversion']['status']}"
            + (f", emulation {'pass' if v.get('emulation', {}).get('passed') else 'FAIL'}" if out["path"] else
               f": {out['conversion'].get('error', '')[:200]}"))
    return entry


# --- checks ---------------------------------------------------------------------------------------


def _check(check_id, description, value, target, passed, unit="", note="") -> dict[str, object]:
    return {"id": check_id, "description": description, "value": value, "unit": unit, "target": target,
            "passed": bool(passed), "note": note}


def lightest_peers(entry: dict, peers: Sequence[str] = PEERS) -> dict[str, object]:
    """Per figure, the lightest value among ``peers`` that load and pass emulation ({} when none passes)."""
    good = {n: v for n, v in entry["variants"].items() if n in peers and v.get("figures")
            and not v.get("load_error") and v.get("emulation", {}).get("passed")}
    if not good:
        return {}
    fig = {n: v["figures"] for n, v in good.items()}
    known = {n: f for n, f in fig.items() if not f["cast_traffic_unknown"]}
    return {
        "casts": min((f["casts"], n) for n, f in fig.items()),
        "traffic": min((f["cast_traffic_bytes"], n) for n, f in known.items()) if known else None,
        "weights": min((f["weight_bytes"], n) for n, f in fig.items()),
    }


def graph_checks(entry: dict) -> list[dict[str, object]]:
    """Issue 27's targets for each ampconv variant of one graph."""
    name = f"{entry['family']}_{entry['kind']}"
    checks = []
    for variant in (AMPCONV, AMPCONV_KV):
        v = entry["variants"].get(variant)
        if v is None:
            continue
        tag = f"{name}_{'kvlow' if variant == AMPCONV_KV else 'default'}"
        # Like for like: the default keeps the float32 interface, as the two tools do with keep_io_types;
        # with the cache LOW the builder's fp16 graph (fp16 cache and logits) is a peer too.
        peers = lightest_peers(entry, PEERS if variant == AMPCONV_KV else (ORT_TOOL, OCC))
        checks += variant_checks(tag, variant, v, peers)
        if variant == AMPCONV_KV and entry["kind"] == "genai_fp32":
            checks.append(builder_check(tag, v, entry["variants"].get(BUILDER)))
    if AMPCONV_BF16 in entry["variants"]:
        checks += fallback_checks(name, entry["variants"][AMPCONV_BF16], entry["variants"].get(AMPCONV))
    return checks


def fallback_checks(name: str, v: dict, default: dict | None) -> list[dict[str, object]]:
    """Issue 32 on a decoder whose norms overflow fp16: the bf16 fallback passes and runs no less LOW (more where
    fp16 alone kept the overflowing statistics float32; the fused graphs compute them inside their norm ops)."""
    tag = f"{name}_fallback"
    conv, emu = v["conversion"], v.get("emulation", {})
    if conv["status"] != "ok" or not v.get("figures"):
        return [_check(f"{tag}_converts", f"{tag}: fp16+bf16 converts", "FAIL", "converts", False,
                       note=_last_line(str(conv.get("error", conv["status"])))[:300])]
    fig = v["figures"]
    base = (default or {}).get("figures")
    low_share = fig["float_low"] / max(fig["float_nodes"], 1)
    base_share = base["float_low"] / max(base["float_nodes"], 1) if base else None
    return [
        _check(f"{tag}_emulated", f"{tag}: greedy decode under emulation (each tensor in its own type)",
               f"{emu.get('agree', 0)}/{emu.get('counted', 0)}", "every non-tie step", bool(emu.get("passed"))),
        _check(f"{tag}_low_share", f"{tag}: float nodes LOW (fp16 or bf16) vs fp16 alone", round(low_share, 3),
               f">= fp16 alone ({base_share:.3f})" if base_share is not None else ">= fp16 alone",
               base_share is not None and low_share >= base_share,
               note=(f"casts {fig['casts']} (fp16 alone {base['casts']}); " if base else "")
               + ("loads on the CPU provider" if not v.get("load_error") else
                  "onnxruntime's CPU provider has no bf16 kernel for some nodes (expected; emulation judges it)")),
    ]


def variant_checks(tag: str, variant: str, v: dict, peers: dict) -> list[dict[str, object]]:
    """converts / loads / emulation, then casts, traffic, heavy LOW, weights against the lightest peers."""
    conv = v["conversion"]
    if conv["status"] != "ok":
        return [_check(f"{tag}_converts", f"{tag}: {variant} converts", "FAIL", "converts", False,
                       note=_last_line(str(conv.get("error", conv["status"])))[:300])]
    emu = v.get("emulation", {})
    checks = [
        _check(f"{tag}_converts", f"{tag}: {variant} converts", "ok", "converts", True),
        _check(f"{tag}_loads", f"{tag}: output loads in onnxruntime CPU", "ok" if not v.get("load_error") else "FAIL",
               "loads", not v.get("load_error"), note=str(v.get("load_error") or "")[:300]),
        _check(f"{tag}_emulated", f"{tag}: greedy decode under fp16 emulation agrees with float32",
               f"{emu.get('agree', 0)}/{emu.get('counted', 0)}", "every non-tie step", bool(emu.get("passed")),
               note=str(emu.get("error") or f"near ties {emu.get('near_ties')}, worst cosine "
                        f"{emu.get('worst_logits_cosine')}")[:300]),
    ]
    fig = v.get("figures")
    if fig is None:
        return checks + [_check(f"{tag}_figures", f"{tag}: figures", None, "computed", False,
                                note=str(v.get("figures_error"))[:300])]
    checks.append(_check(f"{tag}_heavy_low", f"{tag}: every heavy node LOW", f"{fig['heavy_low']}/{fig['heavy_nodes']}",
                         "all", fig["heavy_low"] == fig["heavy_nodes"] and fig["heavy_nodes"] > 0,
                         note=", ".join(fig["heavy_other_names"][:4])))
    checks += peer_checks(tag, fig, peers)
    return checks


def peer_checks(tag: str, fig: dict, peers: dict) -> list[dict[str, object]]:
    """Casts, cast traffic and weights against the lightest passing peer (n/a when no peer passes)."""
    if not peers:
        return [_check(f"{tag}_{i}", f"{tag}: {i} vs lightest passing peer", None, "n/a", True,
                       note="n/a: no peer output loads and passes emulation") for i in ("casts", "traffic", "weights")]
    casts, who = peers["casts"]
    limit = max(CASTS_FACTOR * casts, casts + CASTS_SLACK)
    out = [_check(f"{tag}_casts", f"{tag}: Casts vs lightest passing peer", fig["casts"],
                  f"<= max(1.25x, +2) of {casts} ({who}) = {limit:g}", fig["casts"] <= limit)]
    mb = fig["cast_traffic_bytes"] / 1e6
    if peers["traffic"] is None or fig["cast_traffic_unknown"]:
        out.append(_check(f"{tag}_traffic", f"{tag}: cast traffic per step", round(mb, 4), "<= 1.25x + 0.1 MB",
                          False, "MB", note=f"not comparable: Casts of unknown size (ours "
                                             f"{fig['cast_traffic_unknown']}, or every passing peer's)"))
    else:
        theirs, who = peers["traffic"]
        limit = TRAFFIC_FACTOR * theirs / 1e6 + TRAFFIC_SLACK_MB
        largest = ", ".join(f"{n} {b / 1e6:.3f}" for n, b in fig["largest_casts"][:2])
        out.append(_check(f"{tag}_traffic", f"{tag}: cast traffic per step vs lightest passing peer", round(mb, 4),
                          f"<= 1.25 x {theirs / 1e6:.4f} ({who}) + 0.1 = {limit:.4f} MB", mb <= limit, "MB",
                          note=f"largest Casts (MB): {largest or 'none'}"))
    theirs, who = peers["weights"]
    out.append(_check(f"{tag}_weights", f"{tag}: weight bytes vs lightest passing peer", round(fig["weight_bytes"] / 1e6, 4),
                      f"<= 1.02 x {theirs / 1e6:.4f} ({who}) MB", fig["weight_bytes"] <= WEIGHT_FACTOR * theirs, "MB"))
    return out


def builder_check(tag: str, v: dict, builder: dict | None) -> dict[str, object]:
    """genai graph with --kv-cache low: within 2 Casts of the builder's own fp16 graph, the cache fp16."""
    if not builder or not builder.get("figures") or not v.get("figures"):
        return _check(f"{tag}_vs_builder", f"{tag}: Casts vs the builder's fp16 graph, cache LOW", None,
                      "<= builder + 2, cache fp16", False, note="no figures for ampconv or the builder graph")
    ours, theirs = v["figures"]["casts"], builder["figures"]["casts"]
    cache = v.get("kv", {}).get("cache_types", [])
    ok = ours <= theirs + BUILDER_CAST_SLACK and cache == ["fp16"]
    return _check(f"{tag}_vs_builder", f"{tag}: Casts vs the builder's fp16 graph, cache LOW", ours,
                  f"<= {theirs} + 2, cache fp16", ok, note=f"cache types {cache}")


# --- the wide model (memory) ----------------------------------------------------------------------


def wide_models(wide: pathlib.Path) -> dict[str, pathlib.Path]:
    """Build (once) the realistic-width Llama: genai builder fp32 and a dynamo decode step, both with external data."""
    paths = {"genai_fp32": wide / "genai_fp32" / "model.onnx", "dynamo": wide / "dynamo" / "model.onnx"}
    if all(p.exists() for p in paths.values()):
        return paths
    wide.mkdir(parents=True, exist_ok=True)
    model = llm_models.build_torch_model("llama", wide=True)
    if not paths["genai_fp32"].exists():
        llm_models.save_hf_dir(model, wide / "hf")
        llm_models.genai_build(wide / "hf", wide / "genai_fp32", "fp32", "cpu", wide / "genai.log")
    if not paths["dynamo"].exists():
        feed, _ = llm_models.decode_inputs(model)
        paths["dynamo"].parent.mkdir(exist_ok=True)
        llm_models.export_dynamo(model, feed, paths["dynamo"], external_data=True)
    return paths


def wide_run(work: pathlib.Path, log=print) -> tuple[list[dict], dict]:
    """Peak RSS of ``ampconv convert`` on the realistic-width Llama (each conversion a fresh process)."""
    paths = wide_models(work / "wide")
    kv = kv_flag_supported()
    metrics, checks = {}, []
    for kind, src in paths.items():
        size = sum(p.stat().st_size for p in src.parent.glob("model.onnx*"))
        metrics[kind] = {"source_bytes": size}
        for variant, extra in ((AMPCONV, []), (AMPCONV_KV, ["--kv-cache", "low"])):
            if variant == AMPCONV_KV and not kv:
                continue
            conv = _isolated_convert(src, src.parent / f"model.{_FILE_TAGS[variant]}.onnx", extra)
            metrics[kind][variant] = conv
            log(f"  wide {kind} {variant}: {conv}")
            rss = conv.get("peak_rss_mib")
            ok = conv["status"] == "ok" and rss is not None and rss / 1024 <= RSS_LIMIT_GIB
            tag = "kvlow" if variant == AMPCONV_KV else "default"
            checks.append(_check(
                f"wide_llama_{kind}_{tag}_peak_rss",
                f"realistic width ({kind}; hidden 2048, vocab 128256, {size / 2**30:.2f} GiB float32): "
                f"peak RSS of {variant} convert", None if rss is None else round(rss / 1024, 2),
                f"<= {RSS_LIMIT_GIB:g} GiB and converts", ok, "GiB",
                note=(f"{conv['status']}: " + _last_line(str(conv.get("error", ""))) if conv["status"] != "ok"
                      else f"{conv.get('seconds')} s")[:300]))
    return checks, metrics


def _isolated_convert(src: pathlib.Path, dst: pathlib.Path, extra: Sequence[str]) -> dict:
    """run_ampconv in a fresh child, so ru_maxrss is this conversion's alone."""
    code = ("import json, pathlib, sys; sys.path.insert(0, %r); from bench.bench_llm import run_ampconv; "
            "print(json.dumps(run_ampconv(pathlib.Path(%r), pathlib.Path(%r), %r)))"
            % (str(pathlib.Path(__file__).resolve().parents[1]), str(src), str(dst), list(extra)))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"status": "failed", "error": done.stderr.strip()[-600:]}


# --- report ---------------------------------------------------------------------------------------


def render_markdown(result: dict[str, object]) -> str:
    """One table over every graph and variant, then the failed checks."""
    lines = ["# LLM decoders (bench_llm.py, issue 27)", "",
             f"Decode step at past length {llm_models.PREFILL} (batch 1); greedy decode of {DECODE_STEPS} steps "
             "under fp16 emulation, teacher-forced. kv-low: `--kv-cache low` "
             f"({'offered' if result['metrics'].get('kv_flag') else 'not offered by this ampconv'}).", "",
             "| graph | variant | converts | loads | emulation (agree/counted) | Casts | cast MB/step | heavy LOW |"
             " weights MB | KV read/written KB/step | cache | logits | ampconv validate |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for key, entry in result["metrics"]["graphs"].items():
        for variant, v in entry["variants"].items():
            lines.append(_row(key, variant, v))
    failed = [c for c in result["checks"] if not c["passed"]]
    lines += ["", f"{len(result['checks']) - len(failed)} of {len(result['checks'])} checks passed.", ""]
    if failed:
        lines += ["| failed check | value | target | note |", "|---|---|---|---|"]
        lines += [f"| {c['id']} | {c['value']} | {c['target']} | {str(c['note'])[:160]} |" for c in failed]
    runs = [(key, variant, v["conversion"].get("synthetic_run")) for key, entry in result["metrics"]["graphs"].items()
            for variant, v in entry["variants"].items() if v.get("conversion", {}).get("synthetic_run")]
    if runs:
        lines += ["", "The synthetic float32 run (issue 37) per ampconv conversion:", ""]
        lines += [f"- {key} {variant}: {words}" for key, variant, words in runs]
    wide = result["metrics"].get("wide")
    if wide:
        lines += ["", f"Wide model: {json.dumps(wide, default=str)[:800]}"]
    return "\n".join(lines) + "\n"


def _last_line(text: str) -> str:
    """The last non-empty line of an error text (a child's traceback ends with its exception)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _row(key: str, variant: str, v: dict) -> str:
    conv = v.get("conversion", {"status": "ok"})
    if conv["status"] != "ok":
        err = _last_line(str(conv.get("error", conv["status"]))).replace("|", "/")[:140]
        return f"| {key} | {variant} | **{conv['status']}**: {err} | | | | | | | | | | |"
    fig, kv, emu = v.get("figures") or {}, v.get("kv") or {}, v.get("emulation")
    emu_txt = "-" if emu is None else ("pass " if emu.get("passed") else "**FAIL** ") + \
        (f"{emu.get('agree')}/{emu.get('counted')}" if "agree" in emu else str(emu.get("error", ""))[:80])
    traffic = f"{fig['cast_traffic_bytes'] / 1e6:.4f}" + (f" (+{fig['cast_traffic_unknown']} unknown)"
                                                          if fig.get("cast_traffic_unknown") else "") if fig else "?"
    return (f"| {key} | {variant} | yes | {'yes' if not v.get('load_error') else 'NO'} | {emu_txt} | "
            f"{fig.get('casts', '?')} | {traffic} | {fig.get('heavy_low', '?')}/{fig.get('heavy_nodes', '?')} | "
            f"{fig['weight_bytes'] / 1e6:.3f} | " if fig else f"| {key} | {variant} | yes | ? | {emu_txt} | ? | ? | ? | ? | ") + \
        (f"{kv.get('read', 0) / 1e3:.1f} / {kv.get('written', 0) / 1e3:.1f} | {','.join(kv.get('cache_types', []))} | "
         f"{kv.get('logits_type')} | {_validate_text(v.get('ampconv_validate'))} |")


def _validate_text(verdict: dict | None) -> str:
    if verdict is None:
        return ""
    return "pass" if verdict.get("passed") else "**FAIL** " + _last_line(str(verdict.get("error", "")))[:100]


# --- entry ----------------------------------------------------------------------------------------


def wide_enabled(flag: bool | None) -> bool:
    """The wide model runs unless --no-wide or AMPCONV_BENCH_LLM_WIDE=0."""
    if flag is not None:
        return flag
    return os.environ.get("AMPCONV_BENCH_LLM_WIDE", "1") not in ("0", "no", "false")


def main(out_dir, families: Sequence[str] | None = None, kinds: Sequence[str] | None = None,
         zoo: str | None = None, wide: bool | None = None) -> dict[str, object]:
    """Build (or reuse) the zoo, run every graph, write llm.json and llm.md into ``out_dir``."""
    out = pathlib.Path(out_dir)
    work = out / "tmp" / "llm"
    work.mkdir(parents=True, exist_ok=True)
    zoo_dir = pathlib.Path(zoo) if zoo else work / f"zoo-{zoo_key()}"
    start = time.perf_counter()
    kv_flag = kv_flag_supported()
    result: dict[str, object] = {"name": "llm", "checks": [], "errors": [],
                                 "metrics": {"kv_flag": kv_flag, "graphs": {}, "zoo": str(zoo_dir)}}
    families, kinds = list(families or llm_models.FAMILIES), list(kinds or KINDS)
    try:
        rows = ensure_zoo(zoo_dir, families, kinds)
    except Exception as exc:  # noqa: BLE001 -- without the zoo there is nothing to measure; say why
        result["errors"].append({"section": "zoo", "error": f"{type(exc).__name__}: {exc}",
                                 "traceback": traceback.format_exc()[-3000:]})
        rows = []
    result["metrics"]["zoo_status"] = [{k: r.get(k) for k in ("family", "kind", "loads", "logits_vs_torch")}
                                       for r in rows]
    for row in rows:
        if row["family"] not in families or row["kind"] not in kinds:
            continue
        key = f"{row['family']}_{row['kind']}"
        if not _exists(row.get("file")):
            result["checks"].append(_check(f"{key}_built", f"{key}: exporter produced the graph", "FAIL", "built",
                                           False, note=str(row.get("loads"))[:300]))
            continue
        try:
            entry = run_graph(row, zoo_dir, work, kv_flag)
            result["metrics"]["graphs"][key] = entry
            result["checks"] += graph_checks(entry)
        except Exception as exc:  # noqa: BLE001 -- one graph's crash must not hide the others (a failed check)
            result["errors"].append({"section": key, "error": f"{type(exc).__name__}: {exc}",
                                     "traceback": traceback.format_exc()[-3000:]})
            result["checks"].append(_check(f"{key}_measured", f"{key}: the bench measured the graph", "FAIL",
                                           "measured", False, note=f"{type(exc).__name__}: {exc}"[:300]))
    if wide_enabled(wide):
        try:
            checks, result["metrics"]["wide"] = wide_run(work)
            result["checks"] += checks
        except Exception as exc:  # noqa: BLE001
            result["errors"].append({"section": "wide", "error": f"{type(exc).__name__}: {exc}",
                                     "traceback": traceback.format_exc()[-3000:]})
    result["metrics"]["seconds"] = round(time.perf_counter() - start, 1)
    (out / "llm.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    (out / "llm.md").write_text(render_markdown(result))
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="bench/results", help="folder for llm.json, llm.md and tmp/")
    parser.add_argument("--families", nargs="*", choices=sorted(llm_models.FAMILIES))
    parser.add_argument("--kinds", nargs="*", choices=KINDS)
    parser.add_argument("--zoo", help="reuse (or build) the zoo here instead of OUT/tmp/llm/zoo")
    parser.add_argument("--wide", dest="wide", action="store_true", default=None, help="run the realistic-width model")
    parser.add_argument("--no-wide", dest="wide", action="store_false", help="skip it")
    args = parser.parse_args()
    res = main(args.out, args.families, args.kinds, args.zoo, args.wide)
    failed = [c["id"] for c in res["checks"] if not c["passed"]]
    print(f"{len(res['checks']) - len(failed)} of {len(res['checks'])} checks passed; failed: {failed}")
    sys.exit(0 if not res["errors"] else 1)
