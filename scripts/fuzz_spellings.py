"""Seeded generator of normalization and reduction spellings (issue 29), judged under emulation.

Each case is a MatMul whose outputs reach a chosen magnitude, then a layer
norm or an RMS norm over ``width`` values spelled one of the ways exporters
write it: the square as ``Mul(d, d)``, ``Pow(d, 2)`` or inside
``ReduceSumSquare``; the sum or mean as ``ReduceSum``, ``ReduceMean`` or a
``MatMul`` with a ones vector, then ``Div`` by N or ``Mul`` by 1/N; the root
as ``Sqrt -> Div``, ``Sqrt -> Reciprocal -> Mul`` or ``Pow(-0.5) -> Mul``;
with or without epsilon, with ``keepdims`` or an ``Unsqueeze`` back, over the
last axis or behind a ``Transpose``. Magnitudes are drawn so that the sum of
squares either passes float16's 65504 by 4-16x or stays 16-256x below it.

Every case is converted twice with the library: at ``--level O3`` (every op
float16) and with the defaults. The O3 output is validated under emulation
(float32 with float16 rounding at every LOW op): a case whose O3 output fails
"overflows". Then:

- a case that overflows must convert accurately by default (validation passes);
- a case that does not must keep every node LOW by default; the statistics of
  the decomposed normalizations ``range-statistics`` recognises (torch's and
  paddle's spellings) stay float32 by policy, as LayerNormalization's
  ``stash_type`` keeps them (docs/hazards.md 5): such cases are counted apart,
  as are those the synthetic run's guard keeps only by its margin (a value seen
  between 32752 and 65504 on its one sample; the reason says so).

Case ``i`` of seed ``S`` draws everything from ``random.Random(f"{S}:{i}")``.

Usage::

    python scripts/fuzz_spellings.py --cases 300 --seed 1
    python scripts/fuzz_spellings.py --seed 1 --case 17 -v
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import List, Optional

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

MAX16 = 65504.0
OPSET = 18


@dataclasses.dataclass(frozen=True)
class Spelling:
    """One way of writing the normalization (every field a choice the generator made)."""

    kind: str  # layer (centred) or rms
    mean: str  # how a mean is taken: reduce_mean, sum_div, sum_mul, matmul
    square: str  # mul, pow, sumsq
    root: str  # sqrt_div, reciprocal_mul, pow_mul
    eps: bool
    keepdims: bool
    transpose: bool
    width: int
    gain: float
    overflow_drawn: bool  # the magnitude was drawn to pass 65504 (the emulation decides the label)

    def describe(self) -> str:
        """One line naming every choice."""
        return (f"{self.kind} norm over {self.width}: mean {self.mean}, square {self.square}, root {self.root}, "
                f"eps {'on' if self.eps else 'off'}, keepdims {'on' if self.keepdims else 'off'}, "
                f"{'transposed' if self.transpose else 'last axis'}, gain {self.gain:.3g}")


def draw(seed: int, index: int) -> Spelling:
    """The spelling of case ``index`` of ``seed``."""
    rng = random.Random(f"{seed}:{index}")
    width = rng.choice([16, 64, 256, 1024])
    overflow = rng.random() < 0.5
    ratio = rng.uniform(4, 16) if overflow else 1 / rng.uniform(16, 256)
    gain = float(np.sqrt(MAX16 * ratio / width))
    return Spelling(
        kind=rng.choice(["layer", "rms"]), mean=rng.choice(["reduce_mean", "sum_div", "sum_mul", "matmul"]),
        square=rng.choice(["mul", "pow", "sumsq"]), root=rng.choice(["sqrt_div", "reciprocal_mul", "pow_mul"]),
        eps=rng.random() < 0.7, keepdims=rng.random() < 0.7, transpose=rng.random() < 0.25, width=width,
        gain=gain, overflow_drawn=overflow,
    )


class _Graph:
    """Nodes and initializers of one case, with fresh names."""

    def __init__(self, spelling: Spelling) -> None:
        self.s = spelling
        self.nodes: list = []
        self.inits: list = []
        self.axis = 1 if spelling.transpose else 2

    def const(self, name: str, array, dtype=np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array, dtype=dtype), name))
        return name

    def op(self, op: str, inputs: List[str], **attributes) -> str:
        name = f"{op.lower()}_{len(self.nodes)}"
        self.nodes.append(h.make_node(op, inputs, [name], name=name, **attributes))
        return name

    def reduce(self, op: str, x: str) -> str:
        """A reduction over the normalized axis, kept or squeezed and unsqueezed back (``keepdims``)."""
        axes = self.const(f"axes_{len(self.nodes)}", [self.axis], np.int64)
        out = self.op(op, [x, axes], keepdims=1 if self.s.keepdims else 0)
        return out if self.s.keepdims else self.op("Unsqueeze", [out, axes])

    def mean(self, x: str) -> str:
        """The mean over the normalized axis, spelled as ``mean`` says."""
        n = float(self.s.width)
        if self.s.mean == "reduce_mean":
            return self.reduce("ReduceMean", x)
        if self.s.mean == "matmul" and not self.s.transpose:
            return self.op("MatMul", [x, self.const(f"ones_{len(self.nodes)}", np.full((self.s.width, 1), 1 / n))])
        total = self.reduce("ReduceSum", x)
        if self.s.mean == "sum_mul":
            return self.op("Mul", [total, self.const(f"inv_n_{len(self.nodes)}", 1 / n)])
        return self.op("Div", [total, self.const(f"n_{len(self.nodes)}", n)])

    def mean_square(self, d: str) -> str:
        if self.s.square == "sumsq":
            total = self.reduce("ReduceSumSquare", d)
            return self.op("Div", [total, self.const(f"n_{len(self.nodes)}", float(self.s.width))])
        if self.s.square == "pow":
            return self.mean(self.op("Pow", [d, self.const(f"two_{len(self.nodes)}", 2.0)]))
        return self.mean(self.op("Mul", [d, d]))

    def normalized(self, d: str, var: str) -> str:
        if self.s.eps:
            var = self.op("Add", [var, self.const(f"eps_{len(self.nodes)}", 1e-5)])
        if self.s.root == "sqrt_div":
            return self.op("Div", [d, self.op("Sqrt", [var])])
        if self.s.root == "reciprocal_mul":
            return self.op("Mul", [d, self.op("Reciprocal", [self.op("Sqrt", [var])])])
        return self.op("Mul", [d, self.op("Pow", [var, self.const(f"mhalf_{len(self.nodes)}", -0.5)])])


def build(spelling: Spelling, seed: int = 0) -> onnx.ModelProto:
    """The float32 model of ``spelling``: x [2, 4, width] -> MatMul (gain) -> the norm -> y."""
    g = _Graph(spelling)
    rng = np.random.default_rng(seed)
    width = spelling.width
    weight = rng.standard_normal((width, width)) * spelling.gain / np.sqrt(width)
    x = g.op("MatMul", ["x", g.const("w", weight)])
    if spelling.transpose:
        x = g.op("Transpose", [x], perm=[0, 2, 1])
    d = g.op("Sub", [x, g.mean(x)]) if spelling.kind == "layer" else x
    y = g.normalized(d, g.mean_square(d))
    if spelling.transpose:
        y = g.op("Transpose", [y], perm=[0, 2, 1])
    g.nodes.append(h.make_node("Identity", [y], ["y"], name="out"))
    graph = h.make_graph(g.nodes, "spelling", [h.make_tensor_value_info("x", T.FLOAT, [2, 4, width])],
                         [h.make_tensor_value_info("y", T.FLOAT, [2, 4, width])], initializer=g.inits)
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], ir_version=8)
    onnx.checker.check_model(proto, full_check=True)
    return proto


@dataclasses.dataclass
class Outcome:
    """What one case showed: its label (O3 overflows under emulation) and whether the default held."""

    index: int
    spelling: Spelling
    overflows: bool
    passed: bool  # overflowing: the default converts accurately; otherwise: every node LOW
    detail: str = ""
    statistics: bool = False  # did not overflow; float32 only by the range-statistics policy
    margin: bool = False  # did not overflow; float32 only by the data guard's margin (seen within 2x of 65504)


def run_case(seed: int, index: int, folder: Optional[Path] = None) -> Outcome:
    """Build, convert at O3 and by default, validate under emulation; judge the default (see the module docstring)."""
    import ampconv
    from ampconv.validation.options import ValidateOptions

    spelling = draw(seed, index)
    with tempfile.TemporaryDirectory(prefix="ampconv-spelling-") as tmp:
        root = Path(folder or tmp)
        src = root / "case.onnx"
        onnx.save(build(spelling, seed=index), src)
        options = ValidateOptions(backend="emulate", samples=2)
        ampconv.convert(src, root / "o3.onnx", ampconv.Config(level="O3", overwrite=True))
        overflows = not ampconv.validate(src, root / "o3.onnx", options).passed
        report = ampconv.convert(src, root / "default.onnx", ampconv.Config(overwrite=True))
        statistics = margin = False
        if overflows:
            passed = ampconv.validate(src, root / "default.onnx", options).passed
            detail = "" if passed else "overflows under emulation, and the default output fails validation"
        else:
            high = [n for n in report.nodes if n["precision"] != "LOW"]
            statistics = bool(high) and _statistics_policy(high)
            margin = bool(high) and not statistics and _margin_only(high)
            passed = not high or statistics or margin
            detail = "" if not high else "no overflow, but kept float32: " + ", ".join(
                f"{n['name']} ({n['rule']})" for n in high)
    return Outcome(index, spelling, overflows, passed, detail, statistics, margin)


def _margin_only(high: list) -> bool:
    """Whether the synthetic run's guard kept these nodes only by its margin: values seen between half the LOW
    maximum and the maximum itself (the reason says so), with the statistics policy and followers around them.
    One random sample is no bound on the next (case 66 of seed 1 overflowed on the judge's second sample)."""
    guards = [n for n in high if n["rule"] == "data-overflow"]
    rules = {n["rule"] for n in high}
    return bool(guards) and all("only the guard's margin keeps it" in n["reason"] for n in guards) and rules <= {
        "data-overflow", "range-statistics", "gray-follow", "gray-promote", "free-high"}


def _statistics_policy(high: list) -> bool:
    """Whether ``range-statistics`` (float32 statistics for the decomposed normalizations it recognises, as
    LayerNormalization's stash_type keeps them; docs/hazards.md 5) and the ops that follow it are all that stayed
    float32: a policy the default keeps on purpose, counted apart, not an overflow guard that misjudged."""
    rules = {n["rule"] for n in high}
    return "range-statistics" in rules and rules <= {"range-statistics", "gray-follow", "gray-promote", "free-high"}


def summary(outcomes: List[Outcome], seed: int) -> str:
    """The counts the issue asks for, then each failing case with the command that replays it."""
    counts = Counter((o.overflows, o.passed) for o in outcomes)
    policy = sum(1 for o in outcomes if o.statistics)
    margin = sum(1 for o in outcomes if o.margin)
    lines = [
        f"{len(outcomes)} spellings (seed {seed}): {counts[(True, True)] + counts[(True, False)]} overflow float16 "
        f"under emulation at O3, {counts[(True, True)]} of them converted accurate by default; "
        f"{counts[(False, True)] + counts[(False, False)]} do not, {counts[(False, True)] - policy - margin} of them "
        f"all LOW by default, {policy} LOW but for the statistics range-statistics keeps float32 by policy, "
        f"{margin} kept float32 only by the data guard's margin (seen within 2x of 65504 on the synthetic sample), "
        f"{counts[(False, False)]} kept float32 otherwise",
    ]
    for o in outcomes:
        if not o.passed:
            lines.append(f"  FAIL case {o.index}: {o.spelling.describe()}: {o.detail} "
                         f"(python scripts/fuzz_spellings.py --seed {seed} --case {o.index} -v)")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    """Run the cases; exit 1 when any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--case", type=int, default=None, help="run this one case only")
    parser.add_argument("--keep", type=Path, default=None, help="with --case: leave its files in this folder")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args(argv)
    indices = [args.case] if args.case is not None else range(args.cases)
    outcomes = []
    for index in indices:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
        outcome = run_case(args.seed, index, args.keep if args.case is not None else None)
        outcomes.append(outcome)
        if args.verbose:
            label = "overflows" if outcome.overflows else "fits"
            print(f"case {index}: {label}, {'ok' if outcome.passed else 'FAIL'}: {outcome.spelling.describe()}"
                  + (f": {outcome.detail}" if outcome.detail else ""))
    print(summary(outcomes, args.seed))
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
