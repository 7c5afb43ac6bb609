"""Criteria a user adds (issue 30): a ``Criterion`` object, and per-output thresholds of the built-in ones.

``Criterion`` says what it measures, its default per LOW type and how it
reads; ``ValidateOptions(extra_criteria=...)`` judges outputs by it beside
the built-in criteria, and the floor explains its failures as it does theirs.
``ValidateOptions(limits=...)`` / ``--limit OUTPUT:CRITERION=VALUE`` sets a
built-in threshold for one output.
"""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest

import ampconv
from ampconv.errors import UsageError
from ampconv.validation import ValidateOptions, validate
from ampconv.validation.criteria import AT_LEAST, AT_MOST, BUILTIN, Criterion, default_criteria, judge
from ampconv_cli.validate import command

import validate_models as vm


def psnr(ref, conv):
    """Peak signal-to-noise ratio of an image in [-1, 1], in dB (inf when equal)."""
    mse = float(np.mean((np.asarray(conv, np.float64) - np.asarray(ref, np.float64)) ** 2))
    return 10 * np.log10(4.0 / mse) if mse > 0 else float("inf")


PSNR = Criterion("psnr", "peak signal-to-noise ratio of the decoded image, dB", AT_LEAST,
                 {"fp16": 30.0, "bf16": 30.0}, figure=psnr, outputs=("image",))


def _relative_rms(ref, conv):
    ref, conv = np.asarray(ref, np.float64), np.asarray(conv, np.float64)
    return float(np.sqrt(np.mean((conv - ref) ** 2)) / max(np.sqrt(np.mean(ref**2)), 1e-12))


NOISE = Criterion("relative_rms", "RMS error over RMS of a noise prediction", AT_MOST,
                  {"fp16": 0.02, "bf16": 0.02}, figure=_relative_rms)


def test_the_builtin_criteria_are_described_as_criterion_objects():
    assert [c.key for c in BUILTIN] == ["nonfinite", "label", "cosine", "p99", "max"]
    cosine = next(c for c in BUILTIN if c.key == "cosine")
    assert cosine.reads == AT_LEAST and cosine.threshold("fp16") == default_criteria("fp16").min_cosine
    assert "cosine similarity" in cosine.measures
    with pytest.raises(ValueError, match="reads must be"):
        Criterion("x", "y", "roughly", {})


def test_an_added_criterion_judges_beside_the_builtin_ones():
    rng = np.random.default_rng(0)
    ref = np.tanh(rng.standard_normal((1, 3, 16, 16))).astype(np.float32)
    criteria = ValidateOptions(extra_criteria=(PSNR,)).criteria("fp16")[0]
    close = judge(ref, ref + np.float32(1e-3), criteria, output="image")
    assert close.passed
    blurred = judge(ref, (ref * 0.9).astype(np.float32), criteria, output="image")
    assert not blurred.passed
    # A task stricter than the built-in criteria: 60 dB. Noise the built-ins pass fails it, and it says so.
    strict = ValidateOptions(extra_criteria=(Criterion("psnr", "PSNR, dB", AT_LEAST, {"fp16": 60.0}, psnr,
                                                       ("image",)),)).criteria("fp16")[0]
    noisy = (ref + rng.standard_normal(ref.shape).astype(np.float32) * 0.003).astype(np.float32)
    assert judge(ref, noisy, criteria, output="image").passed
    m = judge(ref, noisy, strict, output="image")
    assert not m.passed and m.criterion == "psnr" and m.decided_by.startswith("psnr 56") and "< 60" in m.decided_by
    assert judge(ref, noisy, strict, output="other").passed  # it judges "image" only
    assert judge(ref, noisy, ValidateOptions(extra_criteria=strict.extra).criteria("bf16")[0],
                 output="image").passed  # no bf16 threshold: not judged for bf16


def test_a_decoder_is_judged_by_its_psnr_and_the_criterion_is_in_the_json(tmp_path):
    model = vm.image_decoder()
    model.ir_version = vm.IR_VERSION
    src = str(tmp_path / "decoder.onnx")
    onnx.save(model, src)
    for dtype in ("fp16", "bf16"):
        dst = str(tmp_path / f"decoder.{dtype}.onnx")
        ampconv.convert(src, dst, ampconv.Config(dtype=dtype, overwrite=True))
        for seed in range(10):
            result = validate(src, dst, ValidateOptions(seed=seed, backend="emulate", extra_criteria=(PSNR,)))
            assert result.passed, result.outputs[0].decided_by
    data = json.loads(json.dumps(result.to_dict()))
    assert data["criteria"]["extra"][0]["key"] == "psnr" and data["criteria"]["extra"][0]["threshold"] == 30.0


def test_a_noise_prediction_criterion_fails_a_wrong_scale():
    ref = np.random.default_rng(1).standard_normal((1, 4, 8, 8)).astype(np.float32)
    criteria = ValidateOptions(extra_criteria=(NOISE,)).criteria("fp16")[0]
    assert judge(ref, ref * np.float32(1.001), criteria).passed
    m = judge(ref, ref * np.float32(1.05), criteria)
    assert not m.passed


def test_a_per_output_threshold_loosens_or_tightens_one_output():
    ref = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32)
    noisy = (ref + np.random.default_rng(1).standard_normal(ref.shape).astype(np.float32) * 0.02).astype(np.float32)
    plain = ValidateOptions().criteria("fp16")[0]
    assert not judge(ref, noisy, plain, output="emb").passed  # cosine 0.9998 < 0.9999
    loose = ValidateOptions(limits={"emb": {"cosine": 0.999, "p99": 0.1, "max": 0.3}}).criteria("fp16")[0]
    assert judge(ref, noisy, loose, output="emb").passed
    assert not judge(ref, noisy, loose, output="other").passed  # only that output
    tight = ValidateOptions(limits=[("emb", "p99", 1e-6)]).criteria("fp16")[0]
    assert not judge(ref, ref + np.float32(1e-4), tight, output="emb").passed
    with pytest.raises(UsageError, match="unknown criterion 'cosin'"):
        ValidateOptions(limits={"emb": {"cosin": 0.9}})


def test_the_cli_takes_per_output_limits(tmp_path, cli_runner):
    ref, conv = vm.mlp_pair(tmp_path)
    strict = cli_runner.invoke(command, [ref, conv, "--limit", "logits:p99=1e-7", "--format", "json"])
    assert strict.exit_code == 3, strict.output
    assert json.loads(strict.stdout)["criteria"]["limits"] == [{"output": "logits", "criterion": "p99",
                                                                 "threshold": 1e-7}]
    assert cli_runner.invoke(command, [ref, conv, "--limit", "logits:p99=0.5"]).exit_code == 0
    bad = cli_runner.invoke(command, [ref, conv, "--limit", "logits:psnr=30"])
    assert bad.exit_code == 2 and "unknown criterion 'psnr'" in bad.stderr


def test_the_floor_is_quoted_but_never_excuses_what_the_user_demands(tmp_path):
    ref, conv = vm.mlp_pair(tmp_path)
    result = validate(ref, conv, ValidateOptions(limits=[("logits", "p99", 1e-7)]))
    words = result.outputs[0].decided_by
    assert not result.passed and "x the unavoidable error" in words and "within" not in words
    # A criterion added with floor_explains=True lets the floor model's own failure excuse it.
    impossible = Criterion("relative_rms", "RMS error over RMS", AT_MOST, {"fp16": 1e-9}, _relative_rms)
    kind = Criterion("relative_rms", "RMS error over RMS", AT_MOST, {"fp16": 1e-9}, _relative_rms,
                     floor_explains=True)
    failed = validate(ref, conv, ValidateOptions(extra_criteria=(impossible,)))
    assert not failed.passed and "the floor model reads" in failed.outputs[0].decided_by
    excused = validate(ref, conv, ValidateOptions(extra_criteria=(kind,)))
    assert excused.passed and excused.outputs[0].worst.criterion == "floor"
