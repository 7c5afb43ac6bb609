"""A verdict that always comes (issue 38, part 3): the floor is an aid to judgement, never a condition of it.

``ampconv validate`` on a ViT-S saliency model's bf16 output stopped with "onnxruntime failed to run
the floor model: Reshape ...": the floor rounded a shape packed in float (577 tokens became 576 in
bfloat16). The floor no longer rounds values that count sizes (``floor.sizes_counted``); and a floor
that fails on any sample, whatever the reason, leaves the verdict to the default criteria, with a note.
"""

from __future__ import annotations

import pytest

import ampconv
from ampconv.validation import floor

import validate_models

pytest.importorskip("onnxruntime")


@pytest.fixture
def token_grid(tmp_path):
    src = validate_models.token_grid_reshape(tmp_path)
    out = tmp_path / "token_grid.bf16.onnx"
    ampconv.convert(src, out, ampconv.Config(dtype="bf16"))
    return src, out


def test_the_floor_of_a_shape_packed_in_float_runs(token_grid):
    src, out = token_grid
    result = ampconv.validate(src, out)
    assert not [n for n in result.notes if "unavoidable error could not be measured" in n]
    assert all(o.worst.floor_ratio is not None for o in result.outputs)
    assert result.passed


def test_a_floor_that_fails_leaves_the_verdict_to_the_criteria_with_a_note(token_grid, monkeypatch):
    """Negative case: with the size rule off the floor's Reshape fails again; the verdict still comes."""
    src, out = token_grid
    monkeypatch.setattr(floor, "sizes_counted", lambda graph: set())
    result = ampconv.validate(src, out)
    note = next(n for n in result.notes if "unavoidable error could not be measured" in n)
    assert "Reshape" in note and "criteria alone" in note
    assert all(o.worst.floor_ratio is None for o in result.outputs)
    assert result.passed  # judged on the criteria: the conversion is fine


def test_sizes_counted_are_the_shape_path_not_the_data(tmp_path):
    from ampconv.reading.load import load_model

    model = load_model(validate_models.token_grid_reshape(tmp_path), infer_types=True)
    counted = {v.name for v in floor.sizes_counted(model.graph)}
    assert counted == {"batch_f", "count_f", "batch_1", "count_1", "packed"}  # not q, q_heads, saliency
