"""The benchmark harness runs end to end on tiny sizes.

Timings are recorded but never asserted here (CI machines are noisy); the
non-timing properties are: WHITE ops LOW, weights <= 52%, Casts <= baseline.
"""

from __future__ import annotations

import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

from bench import run_all


def _is_timing(check_id: str) -> bool:
    return "_seconds" in check_id or check_id.startswith(("chain_time_ratio", "whole_process_", "startup_"))


def test_run_all_records_results_and_failures(tmp_path):
    good = tmp_path / "bench_good.py"
    good.write_text("def main(out_dir):\n    return {'checks': [{'id': 'x', 'description': 'x', 'value': 1,"
                    " 'target': '< 2', 'passed': True}], 'metrics': {'m': 1.5}, 'errors': []}\n")
    bad = tmp_path / "bench_bad.py"
    bad.write_text("def main(out_dir):\n    raise RuntimeError('boom')\n")
    out = tmp_path / "results"
    entries = {p.stem: run_all.run_bench(p, out, timeout_s=60) for p in (good, bad)}
    assert entries["bench_good"]["status"] == "ok"
    assert entries["bench_bad"]["status"] == "failed" and "boom" in entries["bench_bad"]["error"]
    summary = {"started": "now", "seconds": 1.0, "machine": {"cpu_count": 2}, "benches": entries}
    text = run_all.render_markdown(summary)
    assert "| bench_good | ok |" in text and "| bench_bad | failed |" in text and "boom" in text


def test_discover_finds_bench_convert():
    assert "bench_convert" in [p.stem for p in run_all.discover()]
    assert [p.stem for p in run_all.discover(["convert"])] == ["bench_convert"]


@pytest.fixture(scope="module")
def convert_result(tmp_path_factory):
    pytest.importorskip("ampconv.converter", reason="converter not written yet")
    pytest.importorskip("onnxconverter_common")
    pytest.importorskip("onnxruntime")
    from bench import bench_convert

    out = tmp_path_factory.mktemp("bench")
    result = bench_convert.main(out, chain_sizes=(200, 400), repeats=1, baseline_timeout_s=120)
    assert json.loads((out / "convert.json").read_text()) == result
    return result


def test_convert_bench_structure(convert_result):
    assert convert_result["errors"] == [], convert_result["errors"]
    ids = {c["id"] for c in convert_result["checks"]}
    assert {"chain_200_seconds", "chain_400_seconds", "chain_time_ratio",
            "chain_time_ratio_without_runtime_check"} <= ids
    for check in convert_result["checks"]:
        assert set(check) >= {"id", "description", "value", "target", "passed"}


# Check id -> reason, for findings reported to the lead and not fixed yet
# (xfail, non-strict so the fix does not break CI). Empty: all fixed.
KNOWN_FAILURES: dict[str, str] = {}


def _non_timing_ids():
    from bench import bench_convert

    ids = ["chain_200_white_low"]
    for name in bench_convert.WEIGHT_SAMPLES:
        ids += [f"{name}_O2_white_low", f"{name}_O2_weight_ratio", f"{name}_O2_loads"]
    for name in bench_convert.CAST_SAMPLES:
        for label in ("O3", "O3_clamp"):
            ids += [f"{name}_{label}_casts", f"{name}_{label}_loads"]
    return ids


@pytest.mark.parametrize("check_id", [
    pytest.param(i, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[i], strict=False))
    if i in KNOWN_FAILURES else i
    for i in _non_timing_ids()
])
def test_convert_bench_non_timing_check(convert_result, check_id):
    checks = {c["id"]: c for c in convert_result["checks"]}
    assert check_id in checks, sorted(checks)
    assert checks[check_id]["passed"], json.dumps(checks[check_id], indent=1)


def test_timing_checks_are_recorded(convert_result):
    """Timings are not asserted here (CI is noisy), but every one of them is measured and recorded."""
    recorded = {c["id"] for c in convert_result["checks"]}
    assert {"whole_process_chain_200", "whole_process_chain_400", "startup__version", "startup__help"} <= recorded
    for check in convert_result["checks"]:
        if check["id"].startswith("whole_process_"):
            assert check["value"] > 0 and "onnxconverter-common" in check["note"]


def test_every_non_timing_check_is_covered(convert_result):
    recorded = {c["id"] for c in convert_result["checks"] if not _is_timing(c["id"])}
    assert recorded == set(_non_timing_ids())


# --- bench_llm: the LLM bench's pipeline on a hand-built decode step (no torch) --------------------


def _tiny_decoder(path: pathlib.Path, hidden=16, kv_heads=2, head_dim=8, vocab=32, past=4) -> dict:
    """A 2-layer decode step in plain ONNX (embedding, single-query attention over past+new, lm_head),
    with bench_llm's interface: past_key_values.{i}.key/value in, present.{i}.key/value out."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from bench import llm_models

    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def weight(name, *shape, scale=0.3):
        inits.append(numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name))
        return name

    def const(name, values):
        inits.append(numpy_helper.from_array(np.array(values, np.int64), name))
        return name

    def node(op, inputs, output, **attrs):
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    const("heads_shape", [1, 1, kv_heads, head_dim])
    const("flat_shape", [1, 1, kv_heads * head_dim])
    x = node("Gather", [weight("embed", vocab, hidden), "input_ids"], "x0")
    x = node("Add", [x, node("Gather", [weight("pos", 64, hidden), "position_ids"], "pos_x")], "x")
    past_names, present_names = llm_models.cache_names()
    for i in range(2):
        proj = {}
        for kind in ("q", "k", "v"):
            flat = node("MatMul", [x, weight(f"w{kind}{i}", hidden, kv_heads * head_dim)], f"{kind}{i}_flat")
            proj[kind] = node("Transpose", [node("Reshape", [flat, "heads_shape"], f"{kind}{i}_4d")], f"{kind}{i}",
                              perm=[0, 2, 1, 3])
        k_all = node("Concat", [past_names[2 * i], proj["k"]], present_names[2 * i], axis=2)
        v_all = node("Concat", [past_names[2 * i + 1], proj["v"]], present_names[2 * i + 1], axis=2)
        scores = node("MatMul", [proj["q"], node("Transpose", [k_all], f"kt{i}", perm=[0, 1, 3, 2])], f"s{i}")
        attn = node("MatMul", [node("Softmax", [scores], f"p{i}", axis=-1), v_all], f"a{i}")
        back = node("Reshape", [node("Transpose", [attn], f"at{i}", perm=[0, 2, 1, 3]), "flat_shape"], f"af{i}")
        x = node("Add", [x, node("MatMul", [back, weight(f"wo{i}", kv_heads * head_dim, hidden)], f"o{i}")],
                 f"x{i + 1}")
    node("MatMul", [x, weight("lm_head", hidden, vocab)], "logits")
    cache = ["batch", kv_heads, "past_sequence_length", head_dim]
    graph = helper.make_graph(
        nodes, "tiny_decoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", 1]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "total"]),
         helper.make_tensor_value_info("position_ids", TensorProto.INT64, ["batch", 1])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, cache) for n in past_names],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1, vocab])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in present_names],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    onnx.save(model, str(path))
    feed = {"input_ids": np.array([[3]], np.int64), "attention_mask": np.ones((1, past + 1), np.int64),
            "position_ids": np.array([[past]], np.int64)}
    feed.update({n: (rng.standard_normal((1, kv_heads, past, head_dim)) * 0.5).astype(np.float32)
                 for n in past_names})
    np.savez(path.parent / f"{path.stem}.inputs.npz", **feed)
    return feed


@pytest.fixture(scope="module")
def llm_entry(tmp_path_factory):
    pytest.importorskip("onnxconverter_common")
    pytest.importorskip("onnxruntime")
    from bench import bench_llm

    zoo = tmp_path_factory.mktemp("llm_zoo")
    (zoo / "tiny").mkdir()
    src = zoo / "tiny" / "dynamo.onnx"
    _tiny_decoder(src)
    work = tmp_path_factory.mktemp("llm_work")
    entry = bench_llm.run_graph({"family": "tiny", "kind": "dynamo", "file": str(src)}, zoo, work,
                                bench_llm.kv_flag_supported(), log=lambda *_: None)
    return entry


def test_llm_bench_measures_every_variant(llm_entry):
    from bench import bench_llm

    variants = llm_entry["variants"]
    assert {"float32", bench_llm.AMPCONV, bench_llm.ORT_TOOL, bench_llm.OCC} <= set(variants)
    source = variants["float32"]
    # 2 layers x (key, value), [1, 2, 4, 8] float32 read, one position longer written.
    assert source["kv"] == {"read": 4 * 2 * 4 * 8 * 4, "written": 4 * 2 * 5 * 8 * 4, "cache_types": ["fp32"],
                            "logits_type": "fp32"}
    assert source["figures"]["heavy_nodes"] == 2 * 3 + 2 * 2 + 2 + 1  # q/k/v, two attention MatMuls, o, lm_head
    ort_tool = variants[bench_llm.ORT_TOOL]
    assert ort_tool["conversion"]["status"] == "ok" and ort_tool["emulation"]["passed"], ort_tool
    assert ort_tool["emulation"]["counted"] + ort_tool["emulation"]["near_ties"] == bench_llm.DECODE_STEPS


def test_llm_bench_checks_each_ampconv_output(llm_entry):
    from bench import bench_llm

    checks = {c["id"]: c for c in bench_llm.graph_checks(llm_entry)}
    assert "tiny_dynamo_default_converts" in checks
    if checks["tiny_dynamo_default_converts"]["passed"]:
        for suffix in ("loads", "emulated", "heavy_low", "casts", "traffic", "weights"):
            assert f"tiny_dynamo_default_{suffix}" in checks
    for check in checks.values():
        assert set(check) == {"id", "description", "value", "unit", "target", "passed", "note"}
    text = bench_llm.render_markdown({"checks": list(checks.values()),
                                      "metrics": {"kv_flag": False, "graphs": {"tiny_dynamo": llm_entry}}})
    assert "| tiny_dynamo | ORT tool | yes | yes | pass" in text


def test_llm_greedy_agreement_catches_a_flipped_token():
    """A converted model whose logits differ in argmax fails; one with a near tie is not counted."""
    import numpy as np

    from bench import bench_llm, llm_models

    class _Session:
        def __init__(self, logits):
            self.logits = logits

        def get_outputs(self):
            return [type("O", (), {"name": n})() for n in ["logits", *llm_models.cache_names()[1]]]

        def get_inputs(self):
            return []

        def run(self, _names, feed):
            past = np.zeros((1, 2, 1, 4), np.float32)
            return [self.logits[None, None, :]] + [past] * 4

    feed = {"attention_mask": np.ones((1, 2), np.int64)}
    ref = _Session(np.array([0.0, 1.0, 5.0], np.float32))
    assert bench_llm.greedy_agreement(ref, _Session(np.array([0.0, 1.0, 4.0], np.float32)), feed, 3)["passed"]
    flipped = bench_llm.greedy_agreement(ref, _Session(np.array([0.0, 6.0, 5.0], np.float32)), feed, 3)
    assert not flipped["passed"] and flipped["flipped_steps"] == [0, 1, 2]
    tie = _Session(np.array([0.0, 5.0, 5.0001], np.float32))
    assert bench_llm.greedy_agreement(tie, _Session(np.array([0.0, 5.1, 5.0], np.float32)), feed, 2)["near_ties"] == 2



def test_gpu_latency_times_every_variant_of_a_batch_in_turn(tmp_path):
    """bench/gpu_latency.py on the CPU provider (its ``--cpu-dry-run`` path): one row per (batch, variant),
    float32 first; a file that does not exist, or a conversion that failed, is a row with its error."""
    import numpy as np
    import onnx

    from bench import gpu_latency
    from sample_models.build import BUILDERS

    src = tmp_path / "cnn.onnx"
    onnx.save(BUILDERS["cnn"](np.random.default_rng(0)), src)
    model = gpu_latency.GpuModel("cnn", src)
    files = {"float32": src, "missing": tmp_path / "nope.onnx", "failed conversion": "ValueError: no"}
    rows = gpu_latency.measure_model(model, files, warmup=1, runs=4, rounds=2, provider="CPUExecutionProvider")
    assert [(r["batch"], r["variant"]) for r in rows] == [(b, v) for b in gpu_latency.BATCHES for v in files]
    assert all(r["ms"] > 0 for r in rows if r["variant"] == "float32")
    assert all("error" in r and "ms" not in r for r in rows if r["variant"] != "float32")


def test_gpu_latency_rounds_alternate_the_variants():
    from bench import gpu_latency

    order = []

    class Session:
        def __init__(self, name):
            self.name = name

        def run(self, _outputs, _inputs):
            order.append(self.name)

    timed = gpu_latency.interleaved_ms({k: (Session(k), {}) for k in ("a", "b")}, runs=4, rounds=2)
    assert set(timed) == {"a", "b"} and order == ["a", "a", "b", "b", "a", "a", "b", "b"]
