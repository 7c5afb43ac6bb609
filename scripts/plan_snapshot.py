"""Every plan and verdict of the sample, bench and test models, as one JSON: compare two checkouts.

A refactor that claims "every behaviour is unchanged" proves it here: run this
script on the commit before and on the commit after, then ``--compare`` the two
files. It uses the public API only (``ampconv.convert``, ``Config``,
``ampconv.validate``), so it runs unchanged across internal moves.

    python scripts/plan_snapshot.py --out before.json          # on the old commit
    python scripts/plan_snapshot.py --out after.json           # on the new one
    python scripts/plan_snapshot.py --compare before.json after.json

Recorded per (model, configuration): every node's precision, rule and reason,
the warnings and notes, the cast count, and for the small models the verdict
of ``ampconv.validate`` under emulation (passed, and each output's figures).
The onnx backend corpus adds its node models' plans (default configuration).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Appended, not prepended: ``ampconv`` comes from the interpreter's own install (the checkout
# being measured), the model builders from this one.
sys.path += [str(ROOT), str(ROOT / "tests"), str(ROOT / "sample_models")]

# (label, Config keywords); the calibration ones only for models small enough to validate.
CONFIGS = (
    ("fp16", {}),
    ("bf16", {"dtype": "bf16"}),
    ("fallback", {"fallback_dtype": "bf16"}),
    ("O1", {"level": "O1"}),
    ("O3", {"level": "O3"}),
    ("no-synthetic", {"synthetic_run": False}),
)
DATA_CONFIGS = (
    ("random", {"calibration_data": ("random",), "calibration_samples": 2}),
    ("tune", {"calibration_data": ("random",), "calibration_samples": 2, "tune": True}),
)


def _models(folder: pathlib.Path) -> dict:
    """``{name: (path, validate?)}`` of every model this snapshot covers, written under ``folder``."""
    import onnx

    import build as samples
    import llm_models

    from bench import bf16_models

    found = {f"sample/{name}": (str(path), name not in ("external_data",))
             for name, path in samples.build_all(folder / "samples").items()}
    for name, path in samples.build_readme_examples(folder / "samples").items():
        if str(path).endswith(".onnx"):  # the examples' sample folders are inputs, not models
            found[f"readme/{name}"] = (str(path), True)
    for name in sorted(bf16_models.BUILDERS):
        model, _ = bf16_models.BUILDERS[name]()
        path = folder / f"bf16_{name}.onnx"
        onnx.save(model, str(path))
        found[f"bf16/{name}"] = (str(path), True)
    for name, build in (("decode_step", llm_models.decode_step), ("genai_block", llm_models.genai_block),
                        ("int4_block", llm_models.int4_block)):
        found[f"llm/{name}"] = (str(build(folder / f"llm_{name}.onnx")), False)
    return found


def _plan(src: str, dst: str, keywords: dict) -> dict:
    import ampconv

    try:
        report = ampconv.convert(src, dst, ampconv.Config(overwrite=True, **keywords))
    except ampconv.AmpconvError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    data = report.to_dict()
    return {"nodes": [[n["name"], n["precision"], n["rule"], n["reason"]] for n in data["nodes"]],
            "warnings": data["warnings"], "notes": data["notes"],
            "casts": data.get("casts_after", data.get("casts"))}


def _verdict(src: str, dst: str) -> dict:
    import ampconv

    try:
        result = ampconv.validate(src, dst, ampconv.ValidateOptions(backend="emulate", samples=2))
    except ampconv.AmpconvError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    data = json.loads(json.dumps(result.to_dict(), default=str))
    return {"passed": result.passed, "outputs": data.get("outputs")}


def _corpus(folder: pathlib.Path, limit: int) -> dict:
    """The default plans of the model files onnx ships for its backend tests (``limit`` of them)."""
    import onnx

    base = pathlib.Path(onnx.__file__).parent / "backend" / "test" / "data"
    models = sorted(base.glob("light/*.onnx")) + sorted(base.glob("*/*/model.onnx"))
    found = {}
    for model in models[:limit]:
        key = f"corpus/{model.relative_to(base).with_suffix('')}"
        found[key] = _plan(str(model), str(folder / "corpus.onnx"), {})
    return found


def snapshot(limit: int) -> dict:
    """Every plan and verdict this script covers."""
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        for name, (path, validate) in sorted(_models(folder).items()):
            configs = CONFIGS + (DATA_CONFIGS if validate else ())
            for label, keywords in configs:
                dst = str(folder / "out.onnx")
                entry = _plan(path, dst, keywords)
                if validate and "error" not in entry and label in ("fp16", "bf16", "fallback"):
                    entry["verdict"] = _verdict(path, dst)
                out[f"{name}@{label}"] = entry
                print(f"{name}@{label}: {len(entry.get('nodes', ()))} nodes", file=sys.stderr)
        out.update(_corpus(folder, limit))
    return out


def _without_folders(entry):
    """``entry`` with a run's private folders written as ``<tmp>`` and ``<site>`` (they differ run to run)."""
    text = re.sub(r"/tmp/[A-Za-z0-9_]+", "<tmp>", json.dumps(entry))
    return json.loads(re.sub(r"/[^ \"']*?/site-packages/", "<site>/", text))


def compare(before: dict, after: dict) -> int:
    """Print every difference (temporary folders aside); return how many entries differ."""
    before, after = _without_folders(before), _without_folders(after)
    differ = 0
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            differ += 1
            print(f"DIFFERS {key}")
            old, new = before.get(key) or {}, after.get(key) or {}
            for field in sorted(set(old) | set(new)):
                if old.get(field) != new.get(field):
                    print(f"  {field}: {str(old.get(field))[:300]}\n  -> {str(new.get(field))[:300]}")
    print(f"{len(set(before) | set(after))} entries, {differ} differ")
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out")
    parser.add_argument("--corpus", type=int, default=400, help="how many onnx backend node models")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(pathlib.Path(p).read_text()) for p in args.compare)
        sys.exit(1 if compare(before, after) else 0)
    data = snapshot(args.corpus)
    pathlib.Path(args.out).write_text(json.dumps(data, indent=1, sort_keys=True, default=str))
    print(f"{len(data)} entries -> {args.out}")


if __name__ == "__main__":
    main()
