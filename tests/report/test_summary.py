"""The conversion summary: grouped to fit a screen by default, complete with -v; -q keeps warnings."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner

from ampconv.report import GROUP_OVER, Report, render_text
from ampconv_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
# Issue 12: the default summary of the 24-layer GPT sample fits a screen.
MAX_SUMMARY_LINES = 40


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def _gpt_module():
    from sample_models import gpt

    return gpt


@pytest.fixture(scope="module")
def gpt24(tmp_path_factory):
    """The 24-layer GPT sample, narrow (hidden 64) so it builds in a second.

    At hidden 1024 a few float32 weights of every matrix round to 0 in fp16 (one
    "stored rounded" line each, 92 lines in all); here one such value is put in
    every matrix so the narrow model has the same lines.
    """
    gpt = _gpt_module()
    plain = gpt._weights

    def with_tiny_values(spec, seed):
        for name, arr in plain(spec, seed):
            if arr.ndim == 2:
                arr.flat[0] = 1e-8  # below fp16's smallest subnormal: rounds to 0
            yield name, arr

    gpt._weights = with_tiny_values
    try:
        spec = gpt.GptSpec(layers=24, hidden=64, vocab=500, max_positions=64)
        return gpt.build(tmp_path_factory.mktemp("gpt24"), spec, seed=1)
    finally:
        gpt._weights = plain


def _summary_lines(result) -> list:
    assert result.exit_code == 0, result.output
    return result.stderr.splitlines()


def test_default_summary_of_the_24_layer_gpt_fits_a_screen(gpt24, tmp_path):
    result = _run("convert", gpt24, "--level", "O2", "-o", tmp_path / "o.onnx")
    lines = _summary_lines(result)
    assert len(lines) <= MAX_SUMMARY_LINES, "\n".join(lines)
    grouped = [line for line in lines if "constants" in line and "stored rounded" in line]
    assert len(grouped) == 1 and grouped[0].strip().startswith("98 constants")
    assert any("more (-v lists every one; --report FILE keeps them all)" in line for line in lines)


def test_verbose_summary_lists_every_constant(gpt24, tmp_path):
    report = tmp_path / "r.json"
    result = _run("convert", gpt24, "--level", "O2", "-o", tmp_path / "o.onnx", "-v", "--report", report)
    lines = _summary_lines(result)
    import json

    constants = json.loads(report.read_text())["constants"]
    listed = "\n".join(line for line in lines if line.startswith("  constant "))
    assert len(constants) == 99  # 97 matrices, the tied embedding twice
    for c in constants:
        assert f"constant {c['tensor']} (" in listed and c["consumer"] in listed
    assert len(lines) > MAX_SUMMARY_LINES


@pytest.mark.slow
def test_default_summary_of_the_full_size_gpt_sample(tmp_path):
    """The sample as built (1.35 GB of float32 weights): 110 summary lines before grouping."""
    gpt = _gpt_module()
    model = gpt.build(tmp_path / "gpt", gpt.GptSpec())
    result = _run("convert", model, "--level", "O2", "-o", tmp_path / "o.onnx")
    lines = _summary_lines(result)
    assert len(lines) <= MAX_SUMMARY_LINES, "\n".join(lines)


def _report(**fields) -> Report:
    base = dict(source="m.onnx", output="o.onnx", dtype="fp16", level="O2", requested_level="O2",
                preset="default", policy_sources=[])
    return Report(**{**base, **fields})


def _mask(consumer: str) -> dict:
    return {"tensor": "causal_mask", "consumer": consumer, "overflow": 120, "underflow": 0, "max_abs": 3.4e38,
            "detail": "120 value(s) beyond fp16 range (e.g. -3.403e+38)",
            "action": "attention-mask fill -3.403e+38 stored as -32768"}


def test_one_constant_used_by_many_nodes_is_one_line():
    report = _report(constants=[_mask(f"/blocks.{i}/attn/mask/Add") for i in range(24)])
    text = render_text(report)
    assert text.count("causal_mask") == 1
    assert "used by 24 nodes, e.g. /blocks.0/attn/mask/Add, /blocks.1/attn/mask/Add" in text
    verbose = render_text(report, verbose=True)
    assert all(f"/blocks.{i}/attn/mask/Add" in verbose for i in range(24))


def test_few_constants_are_listed_as_they_are():
    report = _report(constants=[_mask("/a/Add"), {**_mask("/b/Add"), "tensor": "other_mask"}])
    text = render_text(report)
    assert "constant causal_mask (used by /a/Add)" in text and "constant other_mask (used by /b/Add)" in text
    assert "more" not in text


def test_repeated_notes_are_grouped_by_kind():
    notes = [f"graph input 'x{i}' has no shape: taken from type inference" for i in range(10)]
    notes.append("added default-domain opset 17 for the inserted casts")
    report = _report(notes=notes)
    lines = render_text(report).splitlines()
    assert sum("has no shape" in line for line in lines) == 2
    assert any("... and 8 more like these" in line for line in lines)
    assert any("added default-domain opset 17" in line for line in lines)
    assert sum("has no shape" in line for line in render_text(report, verbose=True).splitlines()) == 10


def test_notes_of_different_kinds_are_not_grouped():
    notes = [f"note kind {chr(97 + i)} about something" for i in range(GROUP_OVER + 2)]
    text = render_text(_report(notes=notes))
    assert all(note in text for note in notes) and "more like these" not in text


def test_warnings_are_never_grouped():
    warnings = [f"--keep-fp32 'p{i}' matches no node name" for i in range(10)]
    text = render_text(_report(warnings=warnings))
    assert all(w in text for w in warnings)


# --- -q -------------------------------------------------------------------------


@pytest.fixture
def model(tmp_path):
    from conftest import tiny_mlp

    path = tmp_path / "m.onnx"
    onnx.save(tiny_mlp(), str(path))
    return path


def test_quiet_prints_nothing_on_success(model, tmp_path):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "-q")
    assert result.exit_code == 0 and result.output == ""


def test_quiet_still_prints_warnings(model, tmp_path):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "-q", "--keep-fp32", "^zzz")
    assert result.exit_code == 0
    assert result.stderr.strip() == "ampconv: warning: --keep-fp32 '^zzz' matches no node name"
    assert "nodes:" not in result.output  # the summary itself stays silent


def test_quiet_still_prints_the_drift_warning(model, tmp_path):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "-q", "--validate", "--rtol", "0", "--atol", "0")
    assert result.exit_code == 0
    assert "ampconv: warning: converted model drifts beyond tolerance" in result.stderr


# --- --keep-fp32 and --force-low on one node ---------------------------------------------


def test_a_node_matched_by_keep_fp32_and_force_low_names_the_winner(model, tmp_path):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "--keep-fp32", "^mm$", "--force-low", "m")
    assert result.exit_code == 0, result.output
    assert "node 'mm' match both --keep-fp32 '^mm$' and --force-low 'm': --keep-fp32 wins" in result.stderr
    quiet = _run("convert", model, "-o", tmp_path / "q.onnx", "-q", "--keep-fp32", "^mm$", "--force-low", "m")
    assert "--keep-fp32 wins" in quiet.stderr  # a warning: -q keeps it


def test_several_colliding_nodes_are_grouped(model, tmp_path):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "--keep-fp32", ".", "--force-low", ".")
    assert result.exit_code == 0, result.output
    collide = [line for line in result.stderr.splitlines() if "match both" in line]
    assert len(collide) == 1 and "and 2 more" in collide[0]


def test_no_collision_note_when_one_rule_matches(model, tmp_path):
    result = _run("convert", model, "-o", tmp_path / "o.onnx", "--keep-fp32", "^mm$", "--force-low", "^add$")
    assert result.exit_code == 0 and "match both" not in result.output



def test_input_range_draws_uint64_beyond_int64_and_refuses_a_float_range_beyond_the_type():
    import numpy as np
    import onnx_ir as ir

    from ampconv.errors import UsageError
    from ampconv.validation.inputs import InputSpec, check_ranges, random_samples

    big = InputSpec("x", ir.DataType.UINT64, (64,))
    (sample,) = random_samples([big], {}, 1, 0, None, {"x": (0, 1.8e19)}).samples
    assert sample["x"].dtype == np.uint64 and int(sample["x"].max()) > 2**63
    half = InputSpec("h", ir.DataType.FLOAT16, (4,))
    with pytest.raises(UsageError, match="exceeds the finite range of float16"):
        check_ranges([half], {"h": (-1e6, 1e6)})
    check_ranges([half], {"h": (-1e4, 1e4)})  # within fp16: accepted


def _many_constants(path):
    """Ten Adds, each reading a constant with 1..10 values beyond fp16."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    inits, nodes, prev = [], [], "x"
    for i in range(10):
        a = np.ones(32, np.float32)
        a[: i + 1] = 70000.0
        inits.append(numpy_helper.from_array(a, f"K{i}"))
        nodes.append(helper.make_node("Add", [prev, f"K{i}"], [f"a{i}"], name=f"add{i}"))
        prev = f"a{i}"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [32])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.parametrize("extra, header", [
    (("--clamp",), "10 constants (55 value(s) beyond the fp16 range in all) -> each as its line says"),
    ((), "10 constants (55 value(s) beyond the fp16 range in all) -> consumer kept float32"),
    (("--max-finite", "100"), "10 constants (55 value(s) above max_finite 100 in all)"),
])
def test_constants_group_by_kind_of_action_and_name_the_limit_in_use(tmp_path, extra, header):
    src = _many_constants(tmp_path / "m.onnx")
    result = CliRunner().invoke(cli, ["convert", str(src), "-o", str(tmp_path / "o.onnx"), *extra])
    assert result.exit_code == 0, result.output
    assert header in result.output
    assert result.output.count("(used by add") == 2  # two examples, the rest counted
