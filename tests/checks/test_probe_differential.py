"""The load-check probe decides what a whole-model onnxruntime session decides (tests/probe_differential.py).

For every operator-corpus case (a seeded sample here; all of them under the
``corpus`` marker) and every model the tests build, converted at O2 and O3 in
fp16 and bf16: the converter's load verdict equals the whole model's, and the
raw probe never accepts what the whole model refuses. Raw false rejections
are allowed (the whole model overrules them) and counted in the summary.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
import tempfile
from pathlib import Path

import onnx
import pytest

import accept_models
import data_models
import hazard_models
from probe_differential import compare

ROOT = Path(__file__).resolve().parents[2]
from bench.models import build_chain


def _load_script(name: str, path: Path):
    """Import a script of the repository by path (scripts/ and sample_models/ are not packages)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


sample_build = _load_script("ampconv_sample_build_diff", ROOT / "sample_models" / "build.py")
corpus = _load_script("ampconv_corpus_diff", ROOT / "scripts" / "corpus.py")

COMBOS = [("O2", "fp16"), ("O3", "fp16"), ("O2", "bf16"), ("O3", "bf16")]
SAMPLE, SEED = 80, 7


def _test_models():
    """(name, ModelProto) for every model builder of the test suite that takes no argument (or a default)."""
    models = []
    for module in (hazard_models, accept_models):
        for name, builder in inspect.getmembers(module, inspect.isfunction):
            if builder.__module__ != module.__name__ or name.startswith("_"):
                continue
            required = [p for p in inspect.signature(builder).parameters.values() if p.default is p.empty]
            if required:
                continue
            built = builder()
            model = built[0] if isinstance(built, tuple) else built
            if isinstance(model, onnx.ModelProto):
                models.append((f"{module.__name__}.{name}", model))
    models += [(f"hazard_models.resize[{v}]", hazard_models.resize(v)) for v in ("scales", "empty")]
    models += [(f"hazard_models.attention[{v}]", hazard_models.attention(v)) for v in (-1e9, -3.4e38)]
    models += [(f"accept_models.repairable[{k}]", accept_models.repairable(k, True)[0])
               for k in accept_models.REPAIR_KINDS if k != "ir3-initializer"]
    models += [(f"accept_models.computed_size_classifier[{o}]", accept_models.computed_size_classifier(o)[0])
               for o in (12, 13)]
    models += [(f"data_models.{name}", entry.build()) for name, entry in sorted(data_models.MODELS.items())]
    rng = __import__("numpy").random.default_rng(0)
    models += [(f"sample_models.{name}", builder(rng)) for name, builder in (
        ("mlp", sample_build.build_mlp), ("cnn", sample_build.build_cnn), ("transformer", sample_build.build_transformer),
        ("lstm", sample_build.build_lstm), ("control_flow", sample_build.build_control_flow))]
    models.append(("bench.models.chain_400", build_chain(400)))
    return models


def _check_rows(rows):
    disagree = [r for r in rows if not r["agree"]]
    false_accepts = [r for r in rows if r["false_accept"]]
    assert not disagree, "\n".join(f"{r['name']} {r['combo']}: whole {r['whole']} vs decided {r['decided']}"
                                   for r in disagree)
    assert not false_accepts, "\n".join(f"{r['name']} {r['combo']}: raw probe {r['raw_probe']} vs whole {r['whole']}"
                                        for r in false_accepts)


def _rows_for(name, path, folder):
    rows = []
    for level, dtype in COMBOS:
        row = compare(path, level, dtype, folder)
        if row is not None:
            rows.append(dict(row, name=name, combo=f"{level}/{dtype}"))
    return rows


def test_probe_agrees_with_whole_model_on_every_test_model(tmp_path):
    rows = []
    for name, model in _test_models():
        folder = tmp_path / name.replace("[", "_").replace("]", "").replace(".", "_")
        folder.mkdir()
        path = folder / "model.onnx"
        onnx.save(model, str(path))
        rows += _rows_for(name, str(path), str(folder))
    assert len({r["name"] for r in rows}) >= 30  # the models really ran
    _check_rows(rows)


def _corpus_rows(cases):
    rows = []
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="ampconv-probe-diff-") as tmp:
            try:
                mat = corpus.materialize(case, tmp)
                corpus._run(mat.model, mat.feeds)  # ineligible when onnxruntime refuses the original
            except Exception:  # noqa: BLE001 - the corpus script's own eligibility rule
                continue
            rows += _rows_for(case.key, mat.model, tmp)
    return rows


@pytest.mark.corpus
def test_probe_agrees_with_whole_model_on_a_corpus_sample():
    cases = corpus.sample_cases(corpus.collect_cases(), SAMPLE, SEED)
    rows = _corpus_rows(cases)
    assert len(rows) >= 2 * SAMPLE  # most cases are eligible and convert
    _check_rows(rows)


@pytest.mark.corpus
@pytest.mark.slow
def test_probe_agrees_with_whole_model_on_the_whole_corpus():
    rows = _corpus_rows(corpus.collect_cases())
    _check_rows(rows)
    rejects = sum(r["false_reject"] for r in rows)
    print(f"\nprobe differential: {len(rows)} conversions, {rejects} raw false rejections (overruled), 0 false accepts")
