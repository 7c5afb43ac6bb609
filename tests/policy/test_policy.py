"""Policy: presets, levels, mixlist parsing/validation/application (docs/precision.md sec. 1, 2, 7)."""

import json
import re

import pytest

from ampconv.errors import PolicyError, UsageError
from ampconv.policy import BLACK, GRAY, HIGH, INHERIT, LOW, UNLISTED, WHITE, load_policy, resolve_level
from ampconv.policy.lists import MINDSPORE_BLACK, MINDSPORE_WHITE
from ampconv.policy.mixlist import read_mixlist


def write(tmp_path, data, name="mix.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return str(path)


def test_default_preset_classes():
    p = load_policy()
    assert p.class_of("", "MatMul") == WHITE
    assert p.class_of("", "Cos") == BLACK
    assert p.class_of("", "Softmax") == GRAY  # once black: kept float32 only on evidence (range guards)
    assert p.class_of("", "Add") == GRAY
    assert p.class_of("", "QuantizeLinear") == GRAY  # its schema decides (LOW scales from opset 19)
    assert p.class_of("", "QLinearConv") == UNLISTED  # integer arithmetic: not ordinary
    assert p.class_of("com.microsoft", "FusedMatMul") == WHITE
    assert p.class_of("com.microsoft", "SkipLayerNormalization") == GRAY
    assert p.class_of("com.microsoft", "QAttention") == UNLISTED
    assert p.class_of("ai.onnx", "MatMul") == WHITE


def test_mindspore_preset_is_exactly_the_seed_lists():
    p = load_policy(preset="mindspore")
    lists = p.lists()
    assert set(lists[WHITE]) == MINDSPORE_WHITE
    assert set(lists[BLACK]) == MINDSPORE_BLACK
    assert lists[GRAY] == ()
    assert p.class_of("", "Add") == UNLISTED


@pytest.mark.parametrize(
    "level, expected",
    [
        ("O1", {WHITE: LOW, BLACK: HIGH, GRAY: INHERIT, UNLISTED: HIGH}),
        ("O2", {WHITE: LOW, BLACK: HIGH, GRAY: INHERIT, UNLISTED: LOW}),
        ("O3", {WHITE: LOW, BLACK: LOW, GRAY: LOW, UNLISTED: LOW}),
    ],
)
def test_level_table(level, expected):
    p = load_policy(level=level)
    assert {c: p.rule(c) for c in expected} == expected


def test_auto_level_by_target():
    assert resolve_level("auto", "cuda")[0] == "O2"
    level, note, _ = resolve_level("auto", "cpu")
    assert level == "O0" and "CPU" in note
    assert resolve_level("O3", "cpu")[0] == "O3"


def test_unknown_preset_is_usage_error():
    with pytest.raises(UsageError, match="unknown preset"):
        load_policy(preset="nope")


def test_mixlist_add_moves_and_remove_makes_gray(tmp_path):
    path = write(
        tmp_path,
        {
            "black-list": {"to-add": ["MatMul"], "to-remove": ["Cos"]},
            "white-list": {"to-add": ["Add"], "to-remove": ["Conv"]},
            "gray-list": {"to-add": [], "to-remove": []},
        },
    )
    p = load_policy(mixlists=[path])
    assert p.class_of("", "MatMul") == BLACK
    assert p.class_of("", "Cos") == GRAY  # removed, not added elsewhere -> gray
    assert p.class_of("", "Add") == WHITE
    assert p.class_of("", "Conv") == GRAY
    assert path in p.sources


def test_gray_remove_makes_unlisted_and_domain_entries(tmp_path):
    path = write(
        tmp_path,
        {"gray-list": {"to-remove": ["Add"]}, "white-list": {"to-add": ["com.microsoft::FusedMatMul", "ai.onnx::Mul"]}},
    )
    p = load_policy(mixlists=[path])
    assert p.class_of("", "Add") == UNLISTED
    assert p.class_of("com.microsoft", "FusedMatMul") == WHITE
    assert p.class_of("", "Mul") == WHITE


def test_files_apply_left_to_right(tmp_path):
    first = write(tmp_path, {"black-list": {"to-add": ["Add"]}}, "a.json")
    second = write(tmp_path, {"white-list": {"to-add": ["Add"]}}, "b.json")
    assert load_policy(mixlists=[first, second]).class_of("", "Add") == WHITE
    assert load_policy(mixlists=[second, first]).class_of("", "Add") == BLACK


def test_removes_apply_before_adds_within_a_file(tmp_path):
    # Removing Cos from black and adding it to white in one file is legal.
    path = write(tmp_path, {"black-list": {"to-remove": ["Cos"]}, "white-list": {"to-add": ["Cos"]}})
    assert load_policy(mixlists=[path]).class_of("", "Cos") == WHITE


def test_removing_an_op_the_preset_moved_out_of_black_is_a_note(tmp_path):
    """A mixlist written for the old default lists (Softmax black) keeps working: its remove is already so."""
    path = write(tmp_path, {"black-list": {"to-remove": ["Softmax"]}, "white-list": {"to-add": ["Softmax"]}})
    p = load_policy(mixlists=[path])
    assert p.class_of("", "Softmax") == WHITE
    assert any("Softmax" in n and "already gray" in n for n in p.notes)
    alone = write(tmp_path, {"black-list": {"to-remove": ["Softmax"]}}, "alone.json")
    assert load_policy(mixlists=[alone]).class_of("", "Softmax") == GRAY
    # Negative: an op that was never black is still an error to remove from the black list.
    never = write(tmp_path, {"black-list": {"to-remove": ["Relu"]}}, "never.json")
    with pytest.raises(PolicyError, match="is not in the black-list"):
        load_policy(mixlists=[never])
    # Under the mindspore preset nothing was moved: the old rule holds.
    with pytest.raises(PolicyError, match="is not in the black-list"):
        load_policy(preset="mindspore", mixlists=[alone])


@pytest.mark.parametrize(
    "content, message",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "top level must be an object"),
        (json.dumps({"grey-list": {}}), "unknown key 'grey-list'"),
        (json.dumps({"black-list": {"to-append": []}}), "unknown key 'to-append'"),
        (json.dumps({"black-list": {"to-add": "MatMul"}}), "must be a list"),
        (json.dumps({"black-list": {"to-add": [1]}}), "must be a list"),
        (json.dumps({"black-list": []}), "must be an object"),
        (json.dumps({"black-list": {"to-add": ["Add"]}, "white-list": {"to-add": ["Add"]}}), "in both"),
        (json.dumps({"white-list": {"to-add": ["Add"], "to-remove": ["Add"]}}), "in both"),
        (json.dumps({"white-list": {"to-remove": ["Softmax"]}}), "is not in the white-list"),
    ],
)
def test_mixlist_errors_name_file_and_key(tmp_path, content, message):
    path = write(tmp_path, content)
    with pytest.raises(PolicyError, match=message) as info:
        load_policy(mixlists=[path])
    assert path in str(info.value)


def test_missing_mixlist_is_policy_error(tmp_path):
    with pytest.raises(PolicyError, match="no such policy file"):
        load_policy(mixlists=[str(tmp_path / "absent.json")])


def test_unknown_op_is_an_error_naming_the_file_key_and_op(tmp_path):
    """Issue 40: a name onnx does not know would leave the policy silently unapplied: refused, as --block-op is."""
    path = write(tmp_path, {"white-list": {"to-add": ["NotAnOp"]}})
    with pytest.raises(PolicyError, match=rf"^{re.escape(str(path))}: white-list.to-add: op 'NotAnOp' is unknown "):
        read_mixlist(path)
    with pytest.raises(PolicyError, match="'NotAnOp'"):
        load_policy(mixlists=[path])


def test_block_ops_are_recorded_not_reclassed():
    """One route: the planner's user-block-op rule reads ``blocked``; the list classes stay as they were."""
    p = load_policy(block_ops=["MatMul", "ai.onnx::Softmax", "com.microsoft::Gelu"])
    assert p.blocked == frozenset({"MatMul", "Softmax", "com.microsoft::Gelu"})
    assert p.class_of("", "MatMul") == WHITE
    assert load_policy().blocked == frozenset()


def test_policy_show_lists_blocked_ops_and_reads_target():
    from click.testing import CliRunner

    from ampconv_cli.main import cli

    result = CliRunner().invoke(cli, ["policy", "show", "--block-op", "MatMul", "--level", "auto", "--target", "cpu"])
    assert result.exit_code == 0, result.output
    assert "BLOCKED, float32 at every level (1): MatMul" in result.output
    assert "level O0" in result.output  # --target cpu decides --level auto
    result = CliRunner().invoke(cli, ["policy", "show", "--level", "auto", "--target", "cuda"])
    assert "level O2" in result.output


def test_sample_mixlist_is_valid():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "sample_models" / "mixlist.json"
    p = load_policy(mixlists=[str(path)])
    assert not p.warnings


def test_block_ops_take_comma_lists_and_refuse_unknown_ops_with_a_hint():
    p = load_policy(block_ops=["MatMul,Softmax", "Softmax"])
    assert {"MatMul", "Softmax"} <= p.blocked
    # Issue 31: an unknown default-domain op matches no valid node, so blocking it would do nothing.
    for typo, hint in (("matmul", "MatMul"), ("Sofmax", "Softmax")):
        with pytest.raises(UsageError, match=f"did you mean '{hint}'"):
            load_policy(block_ops=["MatMul", typo])
    # Ascend's Conv2D is no longer unknown: it is read as ONNX Conv (tests/policy/test_policy_formats.py).
    assert load_policy(block_ops=["MatMul", "com.microsoft::Gelu"]).warnings == ()  # known or other-domain: silent


def test_mixlist_unknown_op_error_suggests_the_name(tmp_path):
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"black-list": {"to-add": ["softmax"]}}))
    with pytest.raises(PolicyError, match="'softmax' is unknown to onnx.defs and would match no node "
                                          r"\(did you mean 'Softmax'\?\)$"):
        load_policy(mixlists=[str(path)])
    path.write_text(json.dumps({"black-list": {"to-add": ["Zzzqqq"]}}))
    with pytest.raises(PolicyError) as refused:
        load_policy(mixlists=[str(path)])
    assert "'Zzzqqq'" in str(refused.value) and "did you mean" not in str(refused.value)


def test_config_accepts_what_people_type():
    import ampconv

    config = ampconv.Config(keep_fp32="ln1", force_low="attn", mixlists="x.json", block_ops="MatMul,Softmax",
                            keep_io_types="y", level="o3", dtype="bfloat16")
    assert config.keep_fp32 == ("ln1",) and config.force_low == ("attn",) and config.mixlists == ("x.json",)
    assert config.block_ops == ("MatMul,Softmax",) and config.keep_io_types == ("y",)
    assert (config.level, config.dtype) == ("O3", "bf16")
    with pytest.raises(ampconv.UsageError, match="unknown dtype"):
        ampconv.Config(dtype="half")
