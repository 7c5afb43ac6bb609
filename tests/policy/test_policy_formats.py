"""Every policy the user brings: Ascend operator-info files, framework op names, their order (docs/precision.md sec. 7)."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import ampconv
from ampconv.errors import PolicyError, UsageError, spell_parameters
from ampconv.policy import BLACK, GRAY, UNLISTED, WHITE, load_policy
from ampconv.policy.framework_names import FRAMEWORK_NAMES, markdown_table
from ampconv.policy.opinfo import looks_like_op_info
from ampconv.runtime.schema import default_domain_ops
from ampconv_cli.main import cli
from helpers import model_from_text, save

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_models" / "aic-ops-info.json"

TEXT = '<ir_version: 8, opset_import: ["" : 17]>' + """
g (float[2, 4] x) => (float[2, 4] y) <float[4, 4] w = {%s}> {
    mm = MatMul (x, w)
    s = Softmax (mm)
    y = Relu (s)
}
""" % ", ".join(str(0.125 * k - 0.75) for k in range(16))


def write(tmp_path, data, name="policy.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def record(flag=None):
    """An operator-info record as CANN writes it; ``flag`` None: no precision_reduce."""
    rec = {"input0": {"dtype": "float16,float32", "name": "x"}, "opFile": {"value": "op"}}
    if flag is not None:
        rec["precision_reduce"] = {"flag": flag}
    return rec


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def model(tmp_path):
    return save(model_from_text(TEXT), tmp_path / "m.onnx")


def node_of(report_nodes, op_type):
    return next(n for n in report_nodes if n["op_type"] == op_type)


# ------------------------------------------------------------- op-info classes
def test_op_info_flags_make_white_black_and_gray(tmp_path):
    path = write(tmp_path, {"Relu": record("true"), "Erf": record("false"), "Conv": record()})
    p = load_policy(op_info=path)
    assert p.class_of("", "Relu") == WHITE  # gray in the preset
    assert p.class_of("", "Erf") == BLACK  # gray in the preset
    assert p.class_of("", "Conv") == GRAY  # white in the preset: no precision_reduce -> gray
    assert f"op-info {path}" in p.sources


def test_op_info_leaves_ops_it_does_not_name_alone(tmp_path):
    path = write(tmp_path, {"Relu": record("true")})
    base, with_info = load_policy(), load_policy(op_info=path)
    changed = {op for op in set(base.classes) | set(with_info.classes) if base.classes.get(op) != with_info.classes.get(op)}
    assert changed == {"Relu"}
    assert with_info.class_of("", "Cos") == BLACK and with_info.class_of("", "MatMul") == WHITE


def test_op_info_replaces_the_mindspore_presets_unlisted_ops(tmp_path):
    path = write(tmp_path, {"Add": record(), "LayerNorm": record("true")})
    p = load_policy(preset="mindspore", op_info=path)
    assert p.class_of("", "Add") == GRAY and p.class_of("", "LayerNormalization") == WHITE
    assert load_policy(preset="mindspore").class_of("", "Add") == UNLISTED


def test_sample_op_info_file():
    p = load_policy(op_info=SAMPLE)
    assert p.class_of("", "Conv") == WHITE and p.class_of("", "MatMul") == WHITE  # Conv2D, MatMulV2 true
    assert p.class_of("", "Softmax") == BLACK and p.class_of("", "ReduceMean") == BLACK  # SoftmaxV2, ReduceMeanD false
    assert p.class_of("", "Gelu") == GRAY  # GeLU without precision_reduce
    assert p.unmatched == {str(SAMPLE): ("ApplyAdamD", "TransData")}
    assert not p.warnings


# ----------------------------------------------------------- op-info via --mixlist
def test_op_info_given_as_mixlist_is_recognized_with_a_note(tmp_path):
    by_mixlist = load_policy(mixlists=[str(SAMPLE)])
    by_op_info = load_policy(op_info=SAMPLE)
    assert by_mixlist.classes == by_op_info.classes
    assert any("read as an Ascend operator-info file" in n and str(SAMPLE) in n for n in by_mixlist.notes)
    assert not any("read as an Ascend operator-info file" in n for n in by_op_info.notes)


@pytest.mark.parametrize(
    "data",
    [
        {"grey-list": {}},  # a misspelt list key: its body has no op-info key
        {"blacklist": {"to-add": ["Add"]}},  # a body with to-add is a mixlist body
        {"black-list": {"to-add": []}, "Conv2D": record("true")},  # a mixlist key: not op-info
    ],
)
def test_a_broken_mixlist_is_not_taken_for_op_info(tmp_path, data):
    assert not looks_like_op_info(data)
    with pytest.raises(PolicyError, match="unknown key"):
        load_policy(mixlists=[write(tmp_path, data)])


def test_op_info_given_as_mixlist_is_a_base_under_the_mixlists_before_it(tmp_path):
    mix = write(tmp_path, {"white-list": {"to-add": ["Softmax"]}}, "mix.json")
    info = write(tmp_path, {"SoftmaxV2": record("false")}, "info.json")
    # Given after the mixlist, the op-info file still applies first: the mixlist wins.
    assert load_policy(mixlists=[mix, info]).class_of("", "Softmax") == WHITE


# ------------------------------------------------------------------- malformed
MALFORMED = [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "top level must be an object"),
    (json.dumps({"Conv2D": ["input0"]}), "op 'Conv2D': the record must be an object, not an array"),
    (json.dumps({"Conv2D": {"precision_reduce": "true"}}), "precision_reduce must be an object"),
    (json.dumps({"Conv2D": {"precision_reduce": {"flag": "yes"}}}), 'flag must be "true" or "false", got \'yes\''),
    (json.dumps({"Conv2D": {"precision_reduce": {"flag": True}}}), 'flag must be "true" or "false", got True'),
    (json.dumps({"Conv2D": {"precision_reduce": {}}}), "got no flag"),
    (json.dumps({"": record()}), "is not an op name"),
]


@pytest.mark.parametrize("content, message", MALFORMED)
def test_malformed_op_info_is_a_policy_error_naming_the_file(tmp_path, content, message):
    path = write(tmp_path, content)
    with pytest.raises(PolicyError, match=re.escape(message)) as info:
        load_policy(op_info=path)
    assert path in str(info.value) and "\n" not in str(info.value)


def test_malformed_record_is_an_error_in_a_file_given_as_mixlist(tmp_path):
    path = write(tmp_path, {"Conv2D": record("true"), "Exp": {"opFile": {}, "precision_reduce": {"flag": "maybe"}}})
    with pytest.raises(PolicyError, match="op 'Exp': precision_reduce.flag"):
        load_policy(mixlists=[path])


def test_a_mixlist_given_as_op_info_is_refused(tmp_path):
    path = write(tmp_path, {"black-list": {"to-add": ["Erf"]}})
    with pytest.raises(PolicyError, match="modify_mixlist file .* give it in mixlists"):
        load_policy(op_info=path)
    assert load_policy(mixlists=[path]).class_of("", "Erf") == BLACK


def test_missing_op_info_file(tmp_path):
    with pytest.raises(PolicyError, match="no such operator-info file"):
        load_policy(op_info=tmp_path / "absent.json")


@pytest.mark.parametrize("content, message", MALFORMED[:4])
def test_cli_malformed_op_info_exits_2_with_one_line(model, tmp_path, content, message):
    path = write(tmp_path, content, "aic-bad-ops-info.json")
    result = invoke("convert", model, "--op-info", path, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "aic-bad-ops-info.json" in result.stderr and message in result.stderr
    assert not (tmp_path / "o.onnx").exists()
    shown = invoke("policy", "show", "--op-info", path)
    assert shown.exit_code == 2 and shown.stderr.count("\n") == 1


def test_cli_well_formed_op_info_exits_0(model, tmp_path):
    result = invoke("convert", model, "--op-info", SAMPLE, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "o.onnx").exists()


# --------------------------------------------------------------------- order
def test_order_preset_then_op_info_then_mixlists(tmp_path):
    info = write(tmp_path, {"BiasAdd": record("true"), "Exp": record("true")}, "info.json")
    mix = write(tmp_path, {"white-list": {"to-remove": ["Add"]}, "black-list": {"to-add": ["Exp"]}}, "mix.json")
    p = load_policy(op_info=info, mixlists=[mix])
    # The mixlist's to-remove sees the op-info base (Add white from BiasAdd) and wins over it for Exp.
    assert p.class_of("", "Add") == GRAY and p.class_of("", "Exp") == BLACK
    assert p.sources == ("preset default", f"op-info {info}", mix)
    # Without the base, Add is not white and the same mixlist is refused.
    with pytest.raises(PolicyError, match="not in the white-list"):
        load_policy(mixlists=[mix])


def test_mixlists_apply_left_to_right_over_the_base(tmp_path):
    info = write(tmp_path, {"Relu": record("false")}, "info.json")
    first = write(tmp_path, {"white-list": {"to-add": ["Relu"]}}, "a.json")
    second = write(tmp_path, {"gray-list": {"to-add": ["Relu"]}}, "b.json")
    assert load_policy(op_info=info, mixlists=[first, second]).class_of("", "Relu") == GRAY
    assert load_policy(op_info=info, mixlists=[second, first]).class_of("", "Relu") == WHITE
    assert load_policy(op_info=info).class_of("", "Relu") == BLACK


# ------------------------------------------------------- framework-name mapping
def test_mixlist_framework_names_are_read_as_onnx_ops_with_notes(tmp_path):
    path = write(tmp_path, {"black-list": {"to-add": ["MatMulV2", "Dense"]}, "white-list": {"to-add": ["LayerNorm"]}})
    p = load_policy(mixlists=[path])
    assert p.class_of("", "MatMul") == BLACK and p.class_of("", "Gemm") == BLACK
    assert p.class_of("", "LayerNormalization") == WHITE
    assert "MatMulV2" not in p.classes and "Dense" not in p.classes
    assert f"{path}: black-list.to-add: 'MatMulV2' (Ascend) read as ONNX 'MatMul'" in p.notes
    assert f"{path}: black-list.to-add: 'Dense' (MindSpore) read as ONNX 'Gemm' and 'MatMul'" in p.notes
    assert not p.warnings
    assert p.origins["MatMul"] == f"{path}: black-list.to-add as 'Dense'" or "MatMulV2" in p.origins["MatMul"]


def test_onnx_names_are_never_translated(tmp_path):
    # TensorFlow's Sum is a reduction, ONNX's an elementwise sum: a name onnx knows is ONNX's.
    path = write(tmp_path, {"black-list": {"to-add": ["Sum", "MatMul"]}})
    p = load_policy(mixlists=[path])
    assert p.class_of("", "Sum") == BLACK and p.class_of("", "ReduceSum") == GRAY  # ReduceSum: the preset's
    assert p.notes == () and p.warnings == ()


def test_framework_names_in_block_ops(tmp_path):
    p = load_policy(block_ops=["BatchMatMulV2,Softmax", "Conv2D"])
    assert p.blocked == frozenset({"MatMul", "Softmax", "Conv"})
    notes = [spell_parameters(note) for note in p.notes]
    assert "block_ops: 'BatchMatMulV2' (Ascend, TensorFlow) read as ONNX 'MatMul'" in notes
    assert not p.warnings
    assert load_policy(block_ops=["MatMul"]).notes == ()


def test_framework_names_in_config_block_ops_reach_the_planner(tmp_path, model):
    report = ampconv.convert(model, tmp_path / "o.onnx", ampconv.Config(block_ops="MatMulV2", level="O3"))
    mm = node_of(report.nodes, "MatMul")
    assert mm["precision"] == "HIGH" and mm["rule"] == "user-block-op"
    assert any("'MatMulV2' (Ascend) read as ONNX 'MatMul'" in n for n in report.notes)


def test_mapped_names_that_collide_in_a_mixlist_are_an_error_naming_both(tmp_path):
    path = write(tmp_path, {"white-list": {"to-add": ["MatMulV2"]}, "black-list": {"to-add": ["BatchMatMul"]}})
    with pytest.raises(PolicyError, match=r"op 'MatMul' \(written 'BatchMatMul'\) is in both"):
        load_policy(mixlists=[path])
    same = write(tmp_path, {"white-list": {"to-add": ["MatMulV2", "BatchMatMul", "MatMul"]}}, "same.json")
    assert load_policy(mixlists=[same]).class_of("", "MatMul") == WHITE


def test_mixlist_to_remove_of_a_mapped_name(tmp_path):
    path = write(tmp_path, {"black-list": {"to-remove": ["SoftmaxV2"]}})
    assert load_policy(mixlists=[path]).class_of("", "Softmax") == GRAY
    wrong = write(tmp_path, {"white-list": {"to-remove": ["SoftmaxV2"]}}, "wrong.json")
    with pytest.raises(PolicyError, match=r"op 'Softmax' \(written 'SoftmaxV2'\) is not in the white-list"):
        load_policy(mixlists=[wrong])


def test_op_info_conflicts_keep_the_ops_own_record_else_the_cautious_one(tmp_path):
    path = write(tmp_path, {"Pooling": record("true"), "AvgPool": record("false"), "MaxPool": record("true"),
                            "GlobalMaxPool": record()})
    p = load_policy(op_info=path)
    assert p.class_of("", "AveragePool") == BLACK  # AvgPool false over Pooling true: more float32
    assert p.class_of("", "GlobalAveragePool") == WHITE  # only Pooling names it
    assert p.class_of("", "MaxPool") == WHITE  # its own record
    assert p.class_of("", "GlobalMaxPool") == GRAY  # its own record over Pooling
    conflict = [n for n in p.notes if "records disagree" in n]
    assert len(conflict) == 1 and "'AveragePool' black" in conflict[0]
    agreeing = write(tmp_path, {"MatMulV2": record("true"), "BatchMatMul": record("true")}, "agree.json")
    assert not any("records disagree" in n for n in load_policy(op_info=agreeing).notes)


def test_the_table_targets_known_onnx_ops_and_never_shadows_one():
    known = default_domain_ops()
    assert not [name for name in FRAMEWORK_NAMES if name in known]
    assert not [(name, op) for name, r in FRAMEWORK_NAMES.items() for op in r.onnx if op not in known]
    for name in ("MatMulV2", "BatchMatMulV2", "BiasAdd", "Dense", "BatchNorm2d", "LayerNorm", "RealDiv", "Rsqrt"):
        assert FRAMEWORK_NAMES[name].onnx, name


def test_docs_show_the_generated_table():
    assert markdown_table() in (ROOT / "docs" / "precision.md").read_text()


# --------------------------------------------------------- unknown names, hints
@pytest.mark.parametrize(
    "written, hint",
    [
        ("Batchnorm2d", "did you mean 'BatchNorm2d', MindSpore's name for ONNX 'BatchNormalization'?"),
        ("MatmulV2", "did you mean 'MatMulV2', Ascend's name for ONNX 'MatMul'?"),
        ("softmax", "did you mean 'Softmax'?"),
    ],
)
def test_unknown_names_are_refused_with_a_hint_that_knows_framework_names(tmp_path, written, hint):
    path = write(tmp_path, {"black-list": {"to-add": [written]}})
    with pytest.raises(PolicyError) as refused:  # issue 40: a typo is an error, as for --block-op
        load_policy(mixlists=[path])
    assert str(refused.value).startswith(f"{path}: black-list.to-add: op {written!r}") and hint in str(refused.value)
    # block_ops refuses an unknown op (issue 31), with the same hint.
    with pytest.raises(UsageError) as refused:
        load_policy(block_ops=[written])
    assert hint in str(refused.value)


def test_unknown_name_without_a_close_one_has_no_hint(tmp_path):
    path = write(tmp_path, {"black-list": {"to-add": ["Zzzqqq"]}})
    with pytest.raises(PolicyError) as refused:
        load_policy(mixlists=[path])
    assert "'Zzzqqq' is unknown to onnx.defs" in str(refused.value) and "did you mean" not in str(refused.value)


# ------------------------------------------------------ no ONNX counterpart
def test_mixlist_name_without_onnx_counterpart_is_a_note_not_a_class(tmp_path):
    path = write(tmp_path, {"black-list": {"to-add": ["TransData"]}})
    p = load_policy(mixlists=[path])
    assert "TransData" not in p.classes and p.classes == load_policy().classes
    assert p.notes == (f"{path}: black-list.to-add: 'TransData' (Ascend) has no ONNX counterpart and matches no node",)
    assert p.warnings == ()


def test_op_info_records_without_onnx_op_make_one_note(tmp_path):
    data = {f"AscendOnlyOp{k}": record("true") for k in range(300)}
    data.update({"TransData": record(), "Conv2D": record("true")})
    path = write(tmp_path, data)
    p = load_policy(op_info=path)
    unmatched_notes = [n for n in p.notes if "name no ONNX op" in n]
    assert len(unmatched_notes) == 1 and "301 op record(s)" in unmatched_notes[0] and "293 more" in unmatched_notes[0]
    assert len(p.unmatched[path]) == 301 and "TransData" in p.unmatched[path]
    assert p.warnings == ()
    assert not any(name.startswith("AscendOnlyOp") for name in p.classes)


def test_op_info_with_every_record_matched_has_no_unmatched_note(tmp_path):
    p = load_policy(op_info=write(tmp_path, {"Conv2D": record("true"), "Relu": record()}))
    assert not any("name no ONNX op" in n for n in p.notes) and p.unmatched == {str(tmp_path / "policy.json"): ()}


# ---------------------------------------------------------------- Config, CLI
def test_config_op_info_takes_str_or_pathlike():
    assert ampconv.Config(op_info=SAMPLE).op_info == str(SAMPLE)
    assert ampconv.Config(op_info=str(SAMPLE)).op_info == str(SAMPLE)
    assert ampconv.Config().op_info is None


def test_config_op_info_end_to_end(tmp_path, model):
    black = write(tmp_path, {"MatMulV2": record("false"), "TransData": record()}, "aic-ops-info.json")
    report = ampconv.convert(model, tmp_path / "o.onnx", ampconv.Config(op_info=black))
    mm = node_of(report.nodes, "MatMul")
    assert (mm["precision"], mm["rule"]) == ("HIGH", "black")
    assert f"op-info {black}" in report.policy_sources
    assert any("1 op record(s) name no ONNX op" in n for n in report.notes)
    plain = ampconv.convert(model, tmp_path / "p.onnx", ampconv.Config())
    assert node_of(plain.nodes, "MatMul")["precision"] == "LOW"


def test_cli_op_info_end_to_end(tmp_path, model):
    # The default preset runs this Softmax LOW (it follows its MatMul); flag false makes it black.
    info = write(tmp_path, {"SoftmaxV2": record("false")}, "aic-ops-info.json")
    report = tmp_path / "r.json"
    result = invoke("convert", model, "--op-info", info, "--report", report, "-o", tmp_path / "o.onnx")
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text())
    assert node_of(data["nodes"], "Softmax")["precision"] == "HIGH"
    assert "'SoftmaxV2' as 'Softmax'" in result.stderr
    default = tmp_path / "d.json"
    assert invoke("convert", model, "--report", default, "-o", tmp_path / "d.onnx").exit_code == 0
    assert node_of(json.loads(default.read_text())["nodes"], "Softmax")["precision"] == "LOW"


def test_policy_show_says_where_each_class_came_from():
    result = invoke("policy", "show", "--op-info", SAMPLE, "--mixlist", ROOT / "sample_models" / "mixlist.json",
                    "--block-op", "BatchMatMulV2")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert re.search(r"^  MatMul +WHITE +op-info .*'MatMulV2' flag true, 'BatchMatMulV2' flag true$", out, re.M)
    assert re.search(r"^  Erf +BLACK +.*mixlist.json: black-list.to-add$", out, re.M)
    assert f"no ONNX counterpart in {SAMPLE} (2): ApplyAdamD TransData" in out
    assert "note: --block-op: 'BatchMatMulV2' (Ascend, TensorFlow) read as ONNX 'MatMul'" in result.stderr
    assert "BLOCKED, float32 at every level (1): MatMul" in out


def test_policy_show_without_files_has_no_origins():
    result = invoke("policy", "show")
    assert result.exit_code == 0 and "set by policy files" not in result.stdout and "note:" not in result.stderr
