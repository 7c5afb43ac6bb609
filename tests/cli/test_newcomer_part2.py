"""Issue 40, "a newcomer's first hour, part 2": each item as a test that failed before the fix.

1. the FAIL page's advice is one fix, checked on what the verdict was judged on, copied whole;
2. a typo in a policy file's op name is an error with "did you mean", nothing written;
3. every unset dimension in one message, with the relations the graph gives;
5. the library's words (protos accepted, no CLI flags in ``print(result)``);
6. small words; 9. no overflow warning from a double constant's range scan.
(Item 4, the README walk-through twice: ``test_newcomer_readme.py``; items 7 and 8, the option table and
the page in a browser: ``test_newcomer_help.py`` and ``tests/report/test_html_report.py``.)
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import sys
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ampconv
from ampconv import report as summary
from ampconv.errors import Parameter, command_line_text
from ampconv.policy import load_policy
from ampconv.report import render_text
from ampconv.report.html import columns
from ampconv.tensors.low_range import range_stats
from ampconv.validation import advice
from ampconv_cli.main import cli
import llm_models
from conftest import make_model, tiny_mlp

ROOT = Path(__file__).resolve().parents[2]


# --- item 9: no "overflow encountered in cast" from a double constant's range scan ----------------------------


def test_a_double_constant_beyond_float32_is_scanned_without_a_warning_and_counted():
    array = np.array([1e-300, 3.0, 1e300, -1e300, 0.1, -0.0, 7e4, 1e-9, 65504.0, np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = range_stats(array, "fp16")
    # 1e300, -1e300 and 7e4 overflow float16 (the infinity was one already); 1e-300 and 1e-9 round to 0.
    assert stats.overflow == 3 and stats.underflow == 2
    assert stats.example_overflow == pytest.approx(float(np.finfo(np.float32).max))
    assert stats.max_abs == pytest.approx(float(np.finfo(np.float32).max))


# --- item 2: a typo in a policy file's op name is refused, with "did you mean", and nothing is written --------


def _run(runner, *args):
    return runner.invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _one_line_error(result, code, *fragments):
    assert result.exit_code == code, (result.exit_code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ampconv: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def test_a_misspelt_op_in_a_mixlist_is_a_one_line_error_and_nothing_is_written(cli_runner, tmp_path, mlp_path):
    policy = tmp_path / "mix.json"
    policy.write_text(json.dumps({"black-list": {"to-add": ["Erff"]}}))
    before = sorted(p.name for p in tmp_path.iterdir())
    result = _run(cli_runner, "convert", mlp_path, "--mixlist", policy, "-o", tmp_path / "o.onnx",
                  "--report", tmp_path / "r.json")
    _one_line_error(result, 2, f"{policy}: black-list.to-add: op 'Erff' is unknown to onnx.defs",
                    "did you mean 'Erf'?")
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # The library raises the same, before any work.
    with pytest.raises(ampconv.PolicyError, match="did you mean 'Erf'"):
        load_policy(mixlists=[policy])


def test_a_known_framework_name_in_a_mixlist_is_no_typo(tmp_path):
    policy = tmp_path / "mix.json"
    policy.write_text(json.dumps({"white-list": {"to-add": ["MatMulV2"]}, "black-list": {"to-add": ["TransData"]}}))
    read = load_policy(mixlists=[policy])
    assert read.classes["MatMul"] == "WHITE" and read.warnings == ()


def test_an_other_domain_op_in_a_mixlist_is_taken_as_written(tmp_path):
    policy = tmp_path / "mix.json"
    policy.write_text(json.dumps({"black-list": {"to-add": ["com.example::MyOp", "com.microsoft::FusedMatMul"]}}))
    assert load_policy(mixlists=[policy]).warnings == ()


def test_an_op_info_file_keeps_its_many_names_without_an_onnx_op(tmp_path):
    """Operator-info files are written by Ascend's toolkit and list hundreds of Ascend-only ops: no typo there."""
    info = tmp_path / "aic-ops-info.json"
    info.write_text(json.dumps({"Erff": {"precision_reduce": {"flag": "false"}},
                                "MatMulV2": {"precision_reduce": {"flag": "true"}}}))
    read = load_policy(op_info=info)
    assert read.classes["MatMul"] == "WHITE" and any("name no ONNX op" in note for note in read.notes)


# --- item 6: small words that cost minutes ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def samples(tmp_path_factory):
    """The samples ``make samples`` builds (``sample_models/build.py``), in a temporary folder."""
    spec = importlib.util.spec_from_file_location("ampconv_sample_build", ROOT / "sample_models" / "build.py")
    build = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = build
    spec.loader.exec_module(build)
    out = tmp_path_factory.mktemp("samples")
    build.build_all(out)
    build.build_readme_examples(out)
    return out


def test_a_misspelt_command_gets_a_did_you_mean(cli_runner):
    _one_line_error(_run(cli_runner, "conver"), 2, "No such command 'conver'", "did you mean 'convert'?")
    result = _run(cli_runner, "zzz")
    _one_line_error(result, 2, "No such command 'zzz'")
    assert "did you mean" not in result.stderr


def _named_dims_model() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "T"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "T"])],
    )
    return make_model(graph)


def test_a_shape_naming_no_dimension_lists_the_dimension_names(cli_runner, tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(_named_dims_model(), str(src))
    _one_line_error(_run(cli_runner, "validate", src, src, "--shape", "batch:8"), 2,
                    "--shape batch: no input or dimension of that name", "inputs: x", "dimensions: N, T")
    onnx.save(tiny_mlp(), str(src))  # every dimension fixed
    _one_line_error(_run(cli_runner, "validate", src, src, "--shape", "batch:8"), 2,
                    "--shape batch: no input or dimension of that name", "no named dimension")


def test_a_dimension_called_n_is_not_told_to_pass_n_n(tmp_path, cli_runner):
    src = tmp_path / "m.onnx"
    onnx.save(_named_dims_model(), str(src))
    notes = " ".join(ampconv.validate(src, src).notes)
    assert "'N': N" not in notes and "shapes={'N': SIZE, 'T': SIZE}" in notes, notes
    printed = _run(cli_runner, "validate", src, src).stdout
    assert "--shape N:N" not in printed and "--shape N:SIZE --shape T:SIZE" in printed, printed


def test_a_synthetic_run_overflow_is_not_called_calibration_data(samples, tmp_path):
    report = ampconv.convert(samples / "constants.onnx", tmp_path / "o.onnx")
    line = summary.float32_by_rule_line(report)
    assert "overflowing on the synthetic float32 run" in line and "calibration data" not in line, line
    page = columns.page_data(report.to_dict())["summary"]["float32"]
    assert "overflowing on the synthetic float32 run" in page, page


def _constant_node_out_of_range() -> onnx.ModelProto:
    w = np.full((4, 4), 1e5, np.float32)
    graph = helper.make_graph(
        [helper.make_node("Constant", [], ["w"], value=onnx.numpy_helper.from_array(w, "w"), name="cst"),
         helper.make_node("MatMul", ["x", "w"], ["a"], name="mm1"),
         helper.make_node("Add", ["a", "w"], ["y"], name="add1")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
    )
    return make_model(graph)


def test_a_constant_out_of_range_is_reported_once(tmp_path):
    src = tmp_path / "m.onnx"
    onnx.save(_constant_node_out_of_range(), str(src))
    report = ampconv.convert(src, tmp_path / "o.onnx")
    text = render_text(report)
    assert len([line for line in text.splitlines() if "1e+05" in line]) == 1, text
    assert "data guard" not in text
    decisions = {n["name"]: n for n in report.nodes}
    assert decisions["cst"]["rule"] != "data-overflow"
    assert decisions["mm1"]["precision"] == "HIGH" and decisions["mm1"]["rule"] == "hard-constant"


def test_an_already_converted_model_reads_as_such(mlp_path, tmp_path):
    once = ampconv.convert(mlp_path, tmp_path / "once.onnx")
    assert once.count("LOW") > 0
    again = ampconv.convert(tmp_path / "once.onnx", tmp_path / "twice.onnx")
    assert again.unchanged
    text = render_text(again)
    nodes_line = next(line for line in text.splitlines() if line.startswith("  nodes:"))
    assert "0 LOW" not in nodes_line and "already in float16 (converted before)" in nodes_line, nodes_line
    already = int(re.search(r"(\d+) already in float16", nodes_line).group(1))
    assert already >= once.count("LOW")  # the nodes converted before (and the casts it inserted into float16)
    assert {n["rule"] for n in again.nodes if n["op_type"] == "MatMul" or n["op_type"] == "Gemm"} == {"already-low"}


def test_every_cause_of_float32_is_named_in_one_classification(samples, tmp_path):
    """Cos/Sin on the black list read so however many other causes there are ("2 other" named nothing)."""
    nodes = [{"name": f"n{i}", "op_type": "Relu", "precision": "HIGH", "rule": rule, "reason": rule}
             for i, rule in enumerate(["user-keep-fp32", "user-block-op", "hard-schema", "hard-constant",
                                       "range-statistics", "gray-promote", "free-high"])]
    nodes += [{"name": op, "op_type": op, "precision": "HIGH", "rule": "black", "reason": "black"}
              for op in ("Cos", "Sin")]
    line = summary.float32_causes(nodes)
    assert "other" not in line and "2 on the black list" in line, line
    # Every rule that can keep a node float32 has its words (no "by rule range-phase").
    decoder = render_text(ampconv.convert(samples / "decoder.onnx", tmp_path / "d.onnx"))
    assert "by rule" not in decoder and "2 on the black list" in decoder, decoder


# --- item 1: the FAIL page's advice is one fix, stated once, copied whole, with what it was checked against -----


def _repro(cli_runner, samples, *extra):
    """The issue's repro: the offset-cancelling MLP, validated on its 16 samples at rtol=atol=1e-2, localized."""
    return _run(cli_runner, "convert", samples / "cancel.onnx", "-o", "c.onnx", "--validate", "--inputs",
                samples / "cancel_calib", "--rtol", "1e-2", "--atol", "1e-2", "--localize", "--report", "c.json", *extra)


def test_the_fail_page_offers_the_checked_fix_whole_and_it_gives_the_promised_verdict(
        cli_runner, samples, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = _repro(cli_runner, samples)
    assert first.exit_code == 0, first.stderr
    assert _run(cli_runner, "report", "c.json").exit_code == 0
    data = json.loads(Path("c.json").read_text())
    loc = data["validation"]["localization"]
    # The fix checked is the fix suggested: the same nodes, and on the run's 16 samples by its tolerance.
    assert loc["fix"]["nodes"] == loc["cause"]["nodes"] == ["offset_sub", "offset_add"]
    assert loc["fix"]["passes"] is True and loc["fix"]["checked"]["samples"] == 16
    verdict = columns.page_data(data)["verdict"]
    todo, command = verdict["todo"], verdict["command"]
    assert "offset_sub and offset_add float32" in todo and "this fix passes" in todo, todo
    assert "16 sample(s) of this run (given inputs) by strict rtol=0.01 atol=0.01" in todo, todo
    assert todo.count("--keep-fp32") == 1 and "not enough" not in todo  # one fix, stated once
    words = shlex.split(command)
    for option in (["--inputs", str(samples / "cancel_calib")], ["--rtol", "1e-2"], ["--atol", "1e-2"],
                   ["--report", "c.json"], ["--keep-fp32", "^(offset_sub|offset_add)$"]):
        at = words.index(option[0])
        assert words[at:at + len(option)] == option, (option, command)
    assert "--validate" in words and "--overwrite" in words and "YOUR_SAMPLES/" not in command
    # The page's summary names the cause without stating the fix a second time.
    assert '"): fix "' not in Path("c.html").read_text()
    # The CLI says what the page says.
    assert advice.fix_advice(loc, command_line_text) in " ".join(first.stdout.split())
    # Copied as it stands, the command repeats the check and gives the verdict the page promised.
    again = _run(cli_runner, *words[1:])
    assert again.exit_code == 0, again.stderr
    assert "PASS: 1/1 outputs within strict rtol=0.01 atol=0.01 (given) on 16 sample(s)" in again.stdout
    assert json.loads(Path("c.json").read_text())["validation"]["passed"] is True


def test_a_page_completed_by_validate_repeats_that_check(cli_runner, samples, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _run(cli_runner, "convert", samples / "cancel.onnx", "-o", "c.onnx", "--report", "c.json").exit_code == 0
    checked = _run(cli_runner, "validate", samples / "cancel.onnx", "c.onnx", "--inputs", samples / "cancel_calib",
                   "--rtol=1e-2", "--atol", "1e-2", "--localize", "--report", "c.json", "--format", "text")
    assert checked.exit_code == 3, checked.stderr
    data = json.loads(Path("c.json").read_text())
    assert data["validation"]["command_options"] == [
        "--inputs", str(samples / "cancel_calib"), "--rtol=1e-2", "--atol", "1e-2", "--localize"]
    words = shlex.split(columns.page_data(data)["verdict"]["command"])
    assert words[:3] == ["ampconv", "convert", str(samples / "cancel.onnx")] and "--validate" in words
    assert "--rtol=1e-2" in words and "--report" in words and "--format" not in words
    again = _run(cli_runner, *words[1:])
    assert again.exit_code == 0 and "PASS" in again.stdout, again.stderr


def test_a_fix_that_is_not_enough_is_not_offered_to_copy():
    """Negative: a checked fix that fails is said to fail, and the one thing offered is the accuracy search."""
    loc = {"node": "rescale", "op_type": "Mul", "sample": 0,
           "cause": {"node": "offset_sub", "op_type": "Sub", "own_error": 1.0, "output": "cancelled",
                     "nodes": ["offset_sub"], "options": [["keep_fp32", "^offset_sub$"]],
                     "suggestion": "--keep-fp32 '^offset_sub$'"},
           "fix": {"nodes": ["offset_sub"], "options": [["keep_fp32", "^offset_sub$"]], "passes": False,
                   "suggestion": "--keep-fp32 '^offset_sub$'", "after": "elementwise: 22 of 32 element(s) outside",
                   "checked": {"samples": 1, "sample": 3, "criteria": "strict rtol=0.01 atol=0.01"}}}
    report = {"source": "m.onnx", "output": "o.onnx", "nodes": [],
              "command": ["ampconv", "convert", "m.onnx", "-o", "o.onnx", "--validate", "--inputs", "s/",
                          "--localize", "--report", "r.json"],
              "validation": {"passed": False, "samples": 4, "outputs": [{"name": "y", "passed": False}],
                             "localization": loc}}
    verdict = columns.page_data(report)["verdict"]
    assert "is not enough" in verdict["todo"] and "sample 3" in verdict["todo"], verdict["todo"]
    assert "--keep-fp32" not in verdict["command"] and "--tune" in verdict["command"]
    assert "--calibration-data s/" in verdict["command"] and "--inputs s/" in verdict["command"]
    assert advice.fix_advice(loc, command_line_text) in verdict["todo"]


# --- item 3: every unset dimension in one message, with the relations the graph gives ----------------------------


def test_a_dynamo_decoder_without_dimension_names_validates_in_two_runs(cli_runner, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    llm_models.dynamo_unnamed_decoder(tmp_path / "dyn.onnx")
    first = _run(cli_runner, "convert", "dyn.onnx", "-o", "d.onnx", "--report", "d.json", "--validate")
    assert first.exit_code == 1, first.stderr
    error = first.stderr.strip().splitlines()[-1]  # after the summary: one line, every dimension in it
    assert error.startswith("ampconv: error: ") and "size 1" in error, error
    for fragment in ("5 dimension(s) left unset", "s43 = s60 + s70 (Reshape 'mask_reshape')", "s53 = s70",
                     "'s4' (input input_ids, attention_mask, position_ids, past_key, past_value)",
                     "present_key, present_value axis 2 is s60 + s70"):
        assert fragment in error, (fragment, error)
    shapes = re.findall(r"--shape (\S+)", error)
    assert sorted(shapes) == sorted(["s4:1", "s43:2", "s53:1", "s60:1", "s70:1"]), error
    # The synthetic run failed on those sizes too: the summary and the page say what stayed float32 for it.
    assert "no run judged them; give real samples with --calibration-data PATH" in first.stderr
    notes = columns.page_data(json.loads(Path("d.json").read_text()))["summary"]["notes"]
    assert any("--calibration-data PATH" in note and "range-reduction" in note for note in notes), notes
    assert any("s43 = s60 + s70" in note for note in notes), notes
    # The second run, with the sizes the first named: validated.
    second = _run(cli_runner, "validate", "dyn.onnx", "d.onnx", *[w for s in shapes for w in ("--shape", s)])
    assert second.exit_code == 0 and second.stdout.startswith("PASS"), (second.stdout, second.stderr)
    # A consistent set of the user's own sizes works as well (s43 = s60 + s70, s53 = s70).
    own = _run(cli_runner, "validate", "dyn.onnx", "d.onnx", "--shape", "s4:2", "--shape", "s70:3", "--shape",
               "s53:3", "--shape", "s60:5", "--shape", "s43:8")
    assert own.exit_code == 0, own.stderr


def test_the_dims_are_named_at_once_in_python_words_too(tmp_path):
    llm_models.dynamo_unnamed_decoder(tmp_path / "dyn.onnx")
    with pytest.raises(ampconv.AmpconvError) as failed:
        ampconv.validate(tmp_path / "dyn.onnx", tmp_path / "dyn.onnx")
    assert "shapes={'s4': 1, 's70': 1, 's43': 2, 's53': 1, 's60': 1}" in str(failed.value)
    assert "--shape" not in str(failed.value)


def test_without_a_relation_no_size_one_is_suggested(cli_runner, tmp_path):
    """Negative: a dimension size 1 cannot feed (a reflect Pad) is asked for, not offered at 1 again."""
    src = tmp_path / "m.onnx"
    graph = helper.make_graph(
        [helper.make_node("Pad", ["audio", "pads"], ["y"], mode="reflect")], "g",
        [helper.make_tensor_value_info("audio", TensorProto.FLOAT, [1, "T"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "U"])],
        [onnx.numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")])
    onnx.save(make_model(graph), str(src))
    result = _run(cli_runner, "validate", src, src)
    _one_line_error(result, 1, "'T' (input audio)", "pass --shape T:N for the sizes the model will see")
    assert "T:1" not in result.stderr and "relates" not in result.stderr


# --- item 5: the library's words ----------------------------------------------------------------------------------


def test_validate_takes_models_in_memory(mlp_path, tmp_path):
    converted, _report = ampconv.convert_model(onnx.load(str(mlp_path)))
    result = ampconv.validate(onnx.load(str(mlp_path)), converted)
    assert result.passed and result.reference == "<in-memory reference>"
    assert result.converted == "<in-memory converted model>"
    import onnx_ir as ir

    assert ampconv.validate(ir.load(str(mlp_path)), converted).passed
    assert ampconv.validate(mlp_path, converted).reference == str(mlp_path)  # a path stays the path


def test_validate_takes_a_model_in_memory_whose_weights_live_in_a_data_file(mlp_path, tmp_path):
    # Saved as it is, an external tensor keeps its relative location, which the private copy's folder lacks:
    # the copy gets a data file of its own, as convert_model's does (reading.load.copy_needs_data_file).
    import onnx_ir as ir

    stored = tmp_path / "stored" / "mlp.onnx"
    stored.parent.mkdir()
    onnx.save(onnx.load(str(mlp_path)), str(stored), save_as_external_data=True, location="mlp.data",
              size_threshold=0)
    model = ir.load(str(stored))
    assert any(isinstance(v.const_value, ir.ExternalTensor) for v in model.graph.initializers.values())
    result = ampconv.validate(model, model, ampconv.ValidateOptions(backend="emulate"))
    assert result.passed and result.reference == "<in-memory reference>"
    unloaded = onnx.load(str(stored), load_external_data=False)
    with pytest.raises(ampconv.UsageError, match=r"^reference: initializer .* external data that is not loaded"):
        ampconv.validate(unloaded, model)  # the negative: a message whose weights were never read


@pytest.mark.parametrize("bad", [42, b"model", None])
def test_validate_refuses_other_things_with_its_own_error(mlp_path, bad):
    with pytest.raises(ampconv.UsageError, match=r"^converted: expected a path, an onnx.ModelProto or an onnx_ir"):
        ampconv.validate(mlp_path, bad)


def test_print_result_speaks_parameters_not_flags(samples, tmp_path):
    random = ampconv.validate(samples / "cnn.onnx", samples / "cnn.onnx", ampconv.ValidateOptions(backend="native"))
    text = str(random)
    assert "pass inputs for a stronger check" in text and "backend='emulate'" in text, text
    assert not re.search(r"(^|\s|\()--[a-z]", text), text
    converted = tmp_path / "c.onnx"
    ampconv.convert(samples / "cancel.onnx", converted)
    failed = ampconv.validate(samples / "cancel.onnx", converted, ampconv.ValidateOptions(
        inputs=(str(samples / "cancel_calib"),), rtol=1e-2, atol=1e-2, localize=True))
    text = str(failed)
    assert "keep_fp32='^(offset_sub|offset_add)$'" in text and "this fix passes" in text, text
    assert not re.search(r"(^|\s|\()--[a-z]", text), text


# --- item 7: every flag a message tells users to pass is in the README's option tables ----------------------------


def _readme_table_flags() -> set:
    """The flags the first column of the README's option tables names."""
    rows = [line for line in (ROOT / "README.md").read_text().splitlines() if line.startswith("| `")]
    return {flag for row in rows for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])(?![\w-])", row.split("|")[1])}


def _message_flags() -> dict:
    """Flag -> a file whose string literals (docstrings aside) or ``named()`` parameters tell users to pass it."""
    import ast

    found = {}
    # The page's CSS custom properties (--low, --ink) and the sidecar child's own argument are no flags.
    internal = {"ampconv/report/html/style.py", "ampconv/report/html/page.py", "ampconv/reading/sidecar.py"}
    for root in ("ampconv", "ampconv_cli"):
        for path in sorted((ROOT / root).rglob("*.py")):
            where = str(path.relative_to(ROOT))
            tree = ast.parse(path.read_text())
            docs = {id(node.body[0].value) for node in ast.walk(tree)
                    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                    and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs \
                        and where not in internal:
                    for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*[a-z0-9])(?![\w-])", node.value):
                        found.setdefault(flag, where)
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "named" and node.args \
                        and isinstance(node.args[0], ast.Constant):
                    flag = command_line_text(Parameter(node.args[0].value)).split()[0]
                    found.setdefault(flag, where)
    return found


def test_every_flag_a_message_names_is_in_the_readme_option_tables():
    missing = {flag: where for flag, where in _message_flags().items() if flag not in _readme_table_flags()}
    assert missing == {}
    for flag in ("--nature", "--limit", "--synthetic-run", "--no-synthetic-run", "--kv-cache"):
        assert flag in _readme_table_flags(), flag


@pytest.mark.parametrize("command", ["convert", "validate"])
def test_every_option_of_a_command_is_in_the_readme_option_tables(command):
    import importlib

    declared = importlib.import_module(f"ampconv_cli.{command}").command.params
    flags = {opt for p in declared for opt in (*p.opts, *p.secondary_opts) if opt.startswith("--") and opt != "--help"}
    assert flags - _readme_table_flags() == set()
