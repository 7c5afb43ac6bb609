"""Blind test set "settled" (tests/blind/settled.py): past a normalization, without data.

Written without reading the planner or the calibration code. Each case is a small model whose
input a normalization takes the scale out of, with something after it that looks alarming
(an eps that flushes in fp16, a 1e-6 layer scale, a 1e-9 bias, an Exp whose overflow the next
ops absorb, a cube far inside fp16's range): ``trap`` cases, ``needed`` empty. ``negative``
cases hold the same constructs on values that still follow the raw input's scale, where fp16
does break.

* ``test_case_is_sound``: the case itself, without ampconv: float32 agrees with float64 (or is
  finite where onnxruntime has no double kernel), a trap is accurate all-fp16, a negative is
  not, and ``needed`` in float32 with everything else fp16 is accurate, each needed node
  mattering.
* ``test_default_conversion``: ``ampconv.convert`` with defaults (no calibration data) gives a
  model accurate in true fp16 on the case's samples (a trap always; a negative, whose input
  scale no random sample knows, is accurate or the report told the user: a warning or an
  envelope entry below the samples' reach, issue 37's "without data" rule). How many float32
  nodes a trap keeps beyond ``needed`` is not asserted here: ``python tests/blind/settled.py``
  reports it.

About 10 s on 2 cores.
"""

from __future__ import annotations

import numpy as np
import pytest

import settled

NAMES = [c.name for c in settled.CASES]


def test_the_set_is_well_formed():
    kinds = [c.kind for c in settled.CASES]
    assert len(settled.CASES) >= 12 and kinds.count("trap") >= 9 and kinds.count("negative") >= 3
    assert len(set(NAMES)) == len(NAMES)
    for c in settled.CASES:
        model, samples, needed, why = c.build()
        assert model.ir_version == 8 and model.opset_import[0].version == 17, c.name
        names = [n.name for n in model.graph.node]
        assert 10 <= len(names) <= 60, (c.name, len(names))
        assert all(names) and len(set(names)) == len(names), c.name
        assert needed <= set(names), (c.name, needed - set(names))
        assert (c.kind == "trap") == (not needed), c.name
        assert why and "\n" not in why, c.name
        assert len(samples) == settled.N_SAMPLES
        inputs = {i.name for i in model.graph.input}
        assert all(set(s) == inputs and all(v.dtype == np.float32 for v in s.values()) for s in samples), c.name


@pytest.mark.parametrize("name", NAMES)
def test_case_is_sound(name):
    c = settled.by_name(name)
    found = settled.soundness(c)
    assert found["reference_ok"], "the float32 model disagrees with float64 (or is not finite)"
    assert found["needed_suffices"], f"needed in float32 is not enough: {found['needed']}"
    if c.kind == "trap":
        assert found["all_fp16_ok"], f"a trap must be accurate all-fp16: {found['all_fp16']}"
    else:
        assert not found["all_fp16_ok"], f"a negative must break all-fp16: {found['all_fp16']}"
        assert all(found["needed_each"].values()), f"a needed node that fp16 alone does not break: {found['needed_each']}"


# Known misses, said in the closing note of issue 37: the envelope extrapolates a learned layer's output from the
# random sample (zero-mean, independent entries); raw log-mel frames are correlated, so their score grows past what
# the sample's ratio says and the unguarded exp overflows inside the envelope it states (holds to 16.1, reaches 14.3).
SILENT = {"neg_raw_score_attention_pool"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason="silent: see SILENT"))
                                  if n in SILENT else n for n in NAMES])
def test_default_conversion(name, tmp_path):
    c = settled.by_name(name)
    row = settled.measure(c, tmp_path)
    assert "error" not in row, row.get("error")
    if c.kind == "trap":
        assert row["accurate"], f"inaccurate in true fp16 on the case's samples: {row['accuracy']}"
    else:
        assert row["accurate"] or row["told"], (
            f"wrong without a word: needed nodes lowered {row['missing']} ({c.why}); {row['accuracy']}")
