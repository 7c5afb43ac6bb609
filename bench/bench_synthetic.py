"""The synthetic run's cost model (issue 37): its estimate beside the run, on models that isolate each term.

``python bench/bench_synthetic.py --out DIR`` (or through ``bench/run_all.py``).
``ampconv.calibration.cost`` estimates one float32 pass in CPU seconds from
rates measured on the benchmark machine; this bench measures the pass
(``synthetic.synthetic_run`` with ``synthetic_run=True``, in its forked child:
the child's CPU time, user + system, and the wall time) on models built to
isolate each term, and sets the estimate beside it:

- ``nodes``: 2,000 Neg/Relu on a ``[1, 16]`` tensor (per-node set-up);
- ``flops``: six 2048x2048 MatMuls on ``[512, 2048]`` (arithmetic);
- ``activations``: 30 elementwise ops on ``[4, 1024, 1024]`` (values folded);
- ``weights``: four 4096x4096 MatMuls on ``[1, 4096]`` (weights saved and read);
- ``input``: a MatMul on a ``[200000, 64]`` input (the random draw);
- ``vit``: the two-block ViT-S/16 of ``bench/vit_model.py`` (all of it).

Checks: the estimate errs to the slow side (at least ``MIN_RATIO`` of the
measured CPU seconds on every model); the default budget's decisions on the
benchmark shapes: the 4,000-node chain of ``bench/models.py`` is skipped
(all set-up), the ViT-S/16 is run. Results: ``bench_synthetic.json``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import resource
import sys
import time

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from bench.models import build_chain
from bench.vit_model import VitSpec, build_vit

# The estimate may be at most this much faster than the measured CPU seconds (noise on a shared machine).
MIN_RATIO = 0.6


def _model(name: str, nodes, inputs, outputs, weights=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(weights))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _io(name: str, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _chain_of(ops, shape, count: int) -> onnx.ModelProto:
    made, x = [], "x"
    for i in range(count):
        made.append(helper.make_node(ops[i % len(ops)], [x], [f"v{i}"]))
        x = f"v{i}"
    return _model("chain", made, [_io("x", shape)], [_io(x, shape)])


def _matmuls(count: int, size: int, rows: int) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    made, weights, x = [], [], "x"
    for i in range(count):
        weights.append(numpy_helper.from_array((rng.standard_normal((size, size)) * 0.02).astype(np.float32), f"w{i}"))
        made.append(helper.make_node("MatMul", [x, f"w{i}"], [f"v{i}"]))
        x = f"v{i}"
    return _model("matmuls", made, [_io("x", [rows, size])], [_io(x, [rows, size])], weights)


def models() -> dict:
    """The models, each isolating one term of the estimate."""
    rng = np.random.default_rng(1)
    dense = _model("input", [helper.make_node("MatMul", ["x", "w"], ["y"])], [_io("x", [200000, 64])],
                   [_io("y", [200000, 32])], [numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "w")])
    return {
        "nodes": _chain_of(("Neg", "Relu"), [1, 16], 2000),
        "flops": _matmuls(6, 2048, 512),
        "activations": _chain_of(("Relu", "Neg"), [4, 1024, 1024], 30),
        "weights": _matmuls(4, 4096, 1),
        "input": dense,
        "vit": build_vit(VitSpec(depth=2)),
    }


def measure(path: pathlib.Path) -> dict:
    """The estimate and the run (child CPU seconds, wall seconds) of the synthetic run on ``path``."""
    from ampconv.calibration import synthetic
    from ampconv.core.lowtypes import low_type
    from ampconv.options.groups import DataOptions
    from ampconv.reading.load import load_model

    model = load_model(path, infer_types=True)
    choice, _skipped = synthetic.choose(model, DataOptions(synthetic_run=True))
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    calibration, notes, _skipped, _draw = synthetic.synthetic_run(str(path), model, DataOptions(synthetic_run=True),
                                                                   low_type("fp16"))
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"estimate_s": round(choice.cost.seconds, 3), "cpu_s": round(cpu, 3), "wall_s": round(wall, 3),
            "ratio": round(choice.cost.seconds / cpu, 2) if cpu else None, "cost": choice.cost.describe(),
            "ran": calibration is not None, "notes": notes}


def decision(proto: onnx.ModelProto, path: pathlib.Path) -> str:
    """What the default budget decides for ``proto``: "run" or the reason it is skipped."""
    from ampconv.calibration import synthetic
    from ampconv.options.groups import DataOptions
    from ampconv.reading.load import load_model

    onnx.save(proto, path)
    choice, skipped = synthetic.choose(load_model(path, infer_types=True), DataOptions())
    return "run" if choice is not None else skipped.reason


def main(out_dir) -> dict:
    """Measure every model; check the estimate's side and the default decisions; write bench_synthetic.json."""
    out = pathlib.Path(out_dir)
    work = out / "tmp"
    work.mkdir(parents=True, exist_ok=True)
    checks, errors, metrics = [], [], {}
    for name, proto in models().items():
        path = work / f"{name}.onnx"
        onnx.save(proto, path)
        try:
            metrics[name] = found = measure(path)
        except Exception as exc:  # noqa: BLE001 - one model's failure is a result, not the bench's end
            errors.append({"section": name, "error": f"{type(exc).__name__}: {exc}"})
            continue
        checks.append({"id": f"estimate_{name}", "description": f"estimate / measured CPU seconds, {name}",
                       "value": found["ratio"], "unit": "x", "target": f">= {MIN_RATIO}",
                       "passed": bool(found["ran"] and found["ratio"] and found["ratio"] >= MIN_RATIO),
                       "note": f"estimated {found['estimate_s']} s ({found['cost']}); measured {found['cpu_s']} s CPU, "
                               f"{found['wall_s']} s wall"})
    chain = decision(build_chain(4000), work / "chain_4000.onnx")
    vit = decision(build_vit(VitSpec()), work / "vit_s16.onnx")
    checks.append({"id": "default_skips_chain_4000", "description": "default budget: the 4,000-node chain is skipped",
                   "value": chain, "unit": "", "target": "skipped", "passed": chain != "run", "note": ""})
    checks.append({"id": "default_runs_vit_s16", "description": "default budget: the ViT-S/16 gets the run",
                   "value": vit, "unit": "", "target": "run", "passed": vit == "run", "note": ""})
    result = {"checks": checks, "metrics": metrics, "errors": errors}
    (out / "bench_synthetic.json").write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    print(json.dumps(main(args.out)["checks"], indent=2))
