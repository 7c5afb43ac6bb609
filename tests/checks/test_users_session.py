"""The session users build (issue 38, part 1): onnxruntime at its default level, in a forked child, repaired.

The load check builds its sessions at ORT_DISABLE_ALL; users get ORT_ENABLE_ALL. The converter checks
that level too (``checks.users``, on neighbourhood probes or the whole model), and a crash or refusal
there is repaired by keeping the nodes to blame float32 (bisection, ``pipeline.users_repair``). The
real crash (onnxruntime 1.32's NCHWc transformer on a float16 Transpose feeding a MatMul) is tried
first; stand-ins (a session factory that dies or refuses only at the optimized level, for chosen nodes
in float16) pin down the mechanism whatever the runtime.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import onnx
import pytest

import ampconv
from ampconv.checks import neighborhoods
from ampconv.checks.bisect import culprits
from ampconv.errors import ConversionError
from ampconv.runtime import usersession
from ampconv.runtime.loadcheck import UNOPTIMIZED, runtime_refusal
from ampconv.runtime.usersession import CRASHED, LOADS, REFUSED, UNCHECKED, session_verdict

import runtime_models

ort = pytest.importorskip("onnxruntime")


def _float16_nodes(path: Path) -> set:
    """The names of the nodes of the model file ``path`` whose first output is float16 (types inferred)."""
    model = onnx.shape_inference.infer_shapes(onnx.load(str(path), load_external_data=False))
    types = {v.name: v.type.tensor_type.elem_type for v in list(model.graph.value_info) + list(model.graph.output)}
    return {n.name for n in model.graph.node if n.output and types.get(n.output[0]) == onnx.TensorProto.FLOAT16}


def _standin(victims, how="crash", levels=("ORT_ENABLE_ALL",)):
    """A stand-in for ``runtime_refusal`` in the users' child: at ``levels``, with a ``victims`` node in float16,
    it dies of SIGSEGV (``how="crash"``), refuses (``"refuse"``) or is killed from outside (``"kill"``)."""

    def refusal(path, level=UNOPTIMIZED):
        if level in levels and (victims == "any" or _float16_nodes(Path(path)) & set(victims)):
            if how == "refuse":
                return "[ONNXRuntimeError] : 1 : FAIL : stand-in optimizer refuses a float16 node"
            os.kill(os.getpid(), signal.SIGKILL if how == "kill" else signal.SIGSEGV)
        return runtime_refusal(path, level)

    return refusal


def _report_of(report, name):
    return next(n for n in report.nodes if n["name"] == name)


# ----------------------------------------------------------------------------- the real crash
def test_bigru_tagger_in_float16_crashes_onnxruntime_at_its_default_level_only(tmp_path):
    """The reported model, written all LOW: the default session dies (a verdict, not our death); EXTENDED loads."""
    path = runtime_models.bigru_tagger(tmp_path / "bigru16.onnx", dtype="fp16")
    default, extended = session_verdict(path, "ORT_ENABLE_ALL"), session_verdict(path, "ORT_ENABLE_EXTENDED")
    assert extended.kind == LOADS
    if ort.__version__.startswith("1.32"):
        assert default.kind == CRASHED and "SIGSEGV" in default.summary(), default
    assert session_verdict(path, UNOPTIMIZED).kind == LOADS  # what the load check saw


def test_bigru_tagger_converts_to_a_model_that_loads_at_the_default_level(tmp_path):
    src = runtime_models.bigru_tagger(tmp_path / "bigru.onnx")
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert session_verdict(tmp_path / "out.onnx", "ORT_ENABLE_ALL").kind == LOADS
    pinned = [n for n in report.nodes if n["rule"] == "runtime-pin"]
    if session_verdict(runtime_models.bigru_tagger(tmp_path / "b16.onnx", dtype="fp16"), "ORT_ENABLE_ALL").kind == LOADS:
        assert not pinned  # a runtime without the crash: nothing to repair, nothing kept float32
        return
    # What was pinned and why: few nodes (the GRUs and the projection stay float16), the crash named.
    assert 1 <= len(pinned) <= 3, pinned
    assert all("SIGSEGV" in n["reason"] and "ORT_ENABLE_ALL" in n["reason"] for n in pinned)
    assert {_report_of(report, name)["precision"] for name in ("gru0", "gru1", "proj")} == {"LOW"}
    note = next(t for t in report.note_texts() if "bisection" in t)
    assert "SIGSEGV" in note and all(n["name"] in note for n in pinned)
    assert report.load_check["users_levels"] == ["ORT_ENABLE_ALL"]


# ----------------------------------------------------------------------------- stand-ins
@pytest.mark.parametrize("how", ["crash", "refuse"])
def test_a_failure_only_with_optimizations_pins_the_node_to_blame(tmp_path, monkeypatch, how):
    monkeypatch.setattr(usersession, "runtime_refusal", _standin({"block3/relu"}, how))
    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=6)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    pinned = {n["name"] for n in report.nodes if n["rule"] == "runtime-pin"}
    # block3/relu, or a class it stands for: identical blocks share their neighbourhoods
    assert "block3/relu" in pinned and all(name.endswith("/relu") for name in pinned), pinned
    assert all(n["precision"] == "LOW" for n in report.nodes if n["name"].endswith("/matmul"))
    words = "SIGSEGV" if how == "crash" else "stand-in optimizer refuses"
    assert all(words in n["reason"] for n in report.nodes if n["name"] in pinned)
    assert (tmp_path / "out.onnx").exists()


def test_a_repeated_pattern_is_one_culprit_pinned_in_every_layer_at_once(tmp_path, monkeypatch):
    """40 identical blocks: the probe holds a few; the culprit found there stands for its whole class."""
    monkeypatch.setattr(usersession, "runtime_refusal", _standin({f"block{i}/relu" for i in range(40)}))
    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=40)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    relus = [n for n in report.nodes if n["name"].endswith("/relu")]
    assert all(n["rule"] == "runtime-pin" for n in relus)
    assert report.load_check["users_probes"] >= 1 and report.load_check["users_probe_nodes"] < 80


def _float16_interface(path: Path) -> bool:
    model = onnx.load(str(path), load_external_data=False)
    return any(v.type.tensor_type.elem_type == onnx.TensorProto.FLOAT16 for v in model.graph.input)


def test_a_failure_float32_cannot_help_is_a_clear_error_and_nothing_is_written(tmp_path, monkeypatch):
    """A stand-in that dies on a float16 graph input: converted nodes kept float32 leave the interface float16."""

    def refusal(path, level=UNOPTIMIZED):
        if level == "ORT_ENABLE_ALL" and _float16_interface(Path(path)):
            os.kill(os.getpid(), signal.SIGSEGV)
        return runtime_refusal(path, level)

    monkeypatch.setattr(usersession, "runtime_refusal", refusal)
    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=3)
    with pytest.raises(ConversionError, match="does not load the way users load it.*SIGSEGV.*ORT_ENABLE_ALL"):
        ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(keep_io_types=False))
    assert not (tmp_path / "out.onnx").exists()


def test_a_failure_the_input_shares_is_the_inputs_and_the_model_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(usersession, "runtime_refusal", _standin("any", "crash"))
    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=3)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert not [n for n in report.nodes if n["rule"] == "runtime-pin"]
    assert any("on the input model too" in t and "SIGSEGV" in t for t in report.note_texts())
    assert (tmp_path / "out.onnx").exists()


def test_a_session_killed_from_outside_is_no_verdict(tmp_path, monkeypatch):
    """SIGKILL (the out-of-memory killer, a timeout) says nothing about the model: written, with a note."""
    monkeypatch.setattr(usersession, "runtime_refusal", _standin("any", "kill"))
    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=3)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert not [n for n in report.nodes if n["rule"] == "runtime-pin"]
    assert any("gave no verdict" in t and "SIGKILL" in t for t in report.note_texts())
    assert (tmp_path / "out.onnx").exists()


def test_target_cuda_checks_the_extended_level_too(tmp_path, monkeypatch):
    monkeypatch.setattr(usersession, "runtime_refusal", _standin({"block1/relu"}, "crash", ("ORT_ENABLE_EXTENDED",)))
    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=3)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(target="cuda"))
    assert report.load_check["users_levels"] == ["ORT_ENABLE_ALL", "ORT_ENABLE_EXTENDED"]
    assert _report_of(report, "block1/relu")["rule"] == "runtime-pin"
    plain = ampconv.convert(src, tmp_path / "cpu.onnx", ampconv.Config(target="cpu"))
    assert plain.load_check["users_levels"] == ["ORT_ENABLE_ALL"]
    assert _report_of(plain, "block1/relu")["precision"] == "LOW"  # no cuda user: the extended crash is not theirs


def test_no_runtime_check_builds_no_users_session(tmp_path, monkeypatch):
    monkeypatch.setattr(usersession, "runtime_refusal", _standin("any", "crash"))
    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=3)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config(check_runtime=False))
    assert "users_levels" not in report.load_check


# ----------------------------------------------------------------------------- the probe
def test_the_probe_holds_each_neighbourhood_once(tmp_path):
    from ampconv.reading.load import load_model

    model = load_model(runtime_models.stacked_layers(tmp_path / "m.onnx", n=40), infer_types=True)
    probes = neighborhoods.users_probes(model)
    assert probes is not None and sum(p.nodes for p in probes) <= 60  # of 160 nodes: the ends, and one middle
    members = {name: m for p in probes for name, m in p.members.items()}
    middle = next(m for name, m in members.items() if name.endswith("/relu") and len(m) > 1)
    assert len(middle) >= 30  # the middle blocks are one class
    small = load_model(runtime_models.stacked_layers(tmp_path / "s.onnx", n=2), infer_types=True)
    assert neighborhoods.users_probes(small) is None  # no saving: the whole model is loaded


def test_probes_are_split_by_weight_budget_and_reference_the_written_data(tmp_path):
    from ampconv.reading.load import load_model

    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=40, width=64)
    model = load_model(src, infer_types=True)
    probes = neighborhoods.users_probes(model, weight_budget=20_000)  # a 64x64 float32 weight is 16 KiB
    assert len(probes) > 1
    external = tmp_path / "ext.onnx"
    onnx.save(onnx.load(str(src)), str(external), save_as_external_data=True, all_tensors_to_one_file=True,
              location="ext.onnx.data", size_threshold=1024)
    path = neighborhoods.save_users_probe(probes[0], external)
    written = onnx.load(str(path), load_external_data=False)
    assert any(t.data_location == onnx.TensorProto.EXTERNAL and t.external_data[0].value == "ext.onnx.data"
               for t in written.graph.initializer)
    assert path.stat().st_size < 4096  # the weights stay in the data file: referenced, not copied
    assert session_verdict(path, "ORT_ENABLE_ALL").kind == LOADS


# ----------------------------------------------------------------------------- bisection
def test_bisection_finds_one_culprit_two_culprits_or_none():
    nodes = [f"n{i}" for i in range(50)]
    one = culprits(nodes, lambda pins: "n37" not in pins)
    assert one.nodes == {"n37"} and one.complete and one.checks <= 10
    two = culprits(nodes, lambda pins: not ({"n3", "n41"} <= pins))
    assert two.nodes == {"n3", "n41"}
    assert culprits(nodes, lambda pins: True) is None  # float32 everywhere does not help
    capped = culprits(nodes, lambda pins: "n37" not in pins, max_checks=3)
    assert not capped.complete and "n37" in capped.nodes


def test_a_crashed_session_is_told_from_a_refusal_and_from_no_verdict(tmp_path, monkeypatch):
    path = runtime_models.stacked_layers(tmp_path / "m.onnx", n=2)
    assert session_verdict(path, "ORT_ENABLE_ALL").kind == LOADS
    for how, kind in (("crash", CRASHED), ("refuse", REFUSED), ("kill", UNCHECKED)):
        monkeypatch.setattr(usersession, "runtime_refusal", _standin("any", how))
        assert session_verdict(path, "ORT_ENABLE_ALL").kind == kind


def test_a_big_weight_is_fed_not_folded_and_keeps_a_small_model_on_probes(tmp_path, monkeypatch):
    """Memory stays flat: a weight over BIG_WEIGHT_BYTES enters its probe as a graph input (shape and type kept),
    and a model whose weights exceed one probe's budget is never loaded whole."""
    from ampconv.reading.load import load_model

    model = load_model(runtime_models.stacked_layers(tmp_path / "m.onnx", n=2, width=64), infer_types=True)
    assert neighborhoods.users_probes(model) is None  # 32 KiB of weights: the whole model, as it is cheap
    monkeypatch.setattr(neighborhoods, "BIG_WEIGHT_BYTES", 1024)  # a 64x64 float32 weight is 16 KiB
    probes = neighborhoods.users_probes(model, weight_budget=8 * 1024)
    assert probes is not None and sum(p.fed for p in probes) >= 2
    fed = {v.name: v for p in probes for v in p.model.graph.inputs}
    assert "W0" in fed and list(fed["W0"].shape) == [64, 64] and fed["W0"].dtype == onnx.TensorProto.FLOAT
    assert all("W0" not in p.model.graph.initializers for p in probes)


def test_a_probe_failure_the_whole_model_does_not_repeat_is_overruled_unless_too_big_to_load(tmp_path, monkeypatch):
    from ampconv.checks import users

    def probe_only(path, level=UNOPTIMIZED):  # fails on probes (and the bisection's regions), not the written model
        if level == "ORT_ENABLE_ALL" and Path(path).name not in ("out.onnx", "big.onnx") \
                and _float16_nodes(Path(path)) & {f"block{i}/relu" for i in range(40)}:
            return "[ONNXRuntimeError] : 1 : FAIL : stand-in refuses the probe only"
        return runtime_refusal(path, level)

    monkeypatch.setattr(usersession, "runtime_refusal", probe_only)
    src = runtime_models.stacked_layers(tmp_path / "m.onnx", n=40)
    report = ampconv.convert(src, tmp_path / "out.onnx", ampconv.Config())
    assert report.load_check["users_probe_confirmed"] is False
    assert not [n for n in report.nodes if n["rule"] == "runtime-pin"]
    monkeypatch.setattr(users, "CONFIRM_WEIGHT_BYTES", 0)  # the model too big to load whole: the probe stands
    report = ampconv.convert(src, tmp_path / "big.onnx", ampconv.Config())
    pinned = [n["name"] for n in report.nodes if n["rule"] == "runtime-pin"]
    assert pinned and all(name.endswith("/relu") for name in pinned)  # repaired on the probe's word
    assert any("bisection" in t for t in report.note_texts())
