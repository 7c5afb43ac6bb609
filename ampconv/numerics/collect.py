"""One float32 pass over the calibration samples, collecting every activation's statistics.

A copy of the float32 model exposes every float32 tensor its main graph
computes as an extra output; onnxruntime runs it on the CPU provider with graph
optimizations off (so no tensor is fused away), one sample at a time. Each
sample's values are folded into fixed-size accumulators (``activations``) and
dropped, so memory depends on one sample's activations, never on how many
samples there are. The copy is saved with external data when the model has it
or is large, so models over 2 GB work.

Tensors inside If/Loop/Scan bodies leave the copy the same way, through the
outputs ``ampconv.numerics.bodies`` adds (a Loop's stacked over its
iterations; an If branch that did not run on a sample gives nothing); when
onnxruntime refuses that copy, the main graph alone is observed and the
report's calibration section says how many nodes that leaves out.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from typing import Dict, Iterable, Mapping, Optional, Tuple

import numpy as np
import onnx_ir as ir

from ampconv.core.domains import is_default
from ampconv.numerics.activations import PRODUCTS, REDUCTIONS, Accumulation, Calibration, TensorStats
from ampconv.core.lowtypes import LowType
from ampconv.reading.prepare import NameNodesPass
from ampconv.errors import AmpconvError
from ampconv.runtime.loadcheck import first_line
from ampconv.numerics import bodies, modelio, runners
from ampconv.core.graphs import all_graphs

# Above this many multiply-adds per sample a product's |A|@|B| bound is not repeated in numpy.
PRODUCT_BOUND_MAX_MACS = 2 * 10**8


def exposable_tensors(model: ir.Model) -> Dict[str, ir.Value]:
    """Main-graph node outputs holding float32 tensors, by name (``collect`` observes body values too)."""
    found = {}
    for node in model.graph:
        for value in node.outputs:
            if value.name and _is_float32_tensor(value):
                found[value.name] = value
    return found


def collect(source: str, samples: Iterable, low: LowType, *, random: bool = False) -> Calibration:
    """Run the float32 model ``source`` over ``samples`` (``(label, {input: array})`` pairs).

    Values inside If/Loop/Scan bodies are observed too (``numerics.bodies``);
    when onnxruntime refuses the copy that routes them out, the pass runs
    again on the main graph alone and a note says what was not observed.
    Raises ``AmpconvError`` when onnxruntime cannot load or run the model on a
    sample (the message names the file).
    """
    try:
        return _collect(source, samples, low, random, with_bodies=True)
    except AmpconvError as exc:
        calibration = _collect(source, samples, low, random, with_bodies=False)
        return bodies_refused(calibration, exc)


def bodies_refused(calibration: Calibration, exc: AmpconvError) -> Calibration:
    """``calibration`` of a main-graph-only pass made after the pass with bodies failed with ``exc``.

    Raises ``exc`` again when there was no body to blame (the model itself
    failed, and the retry passed); else the note on the bodies says why.
    """
    if not calibration.notes:
        raise exc
    note = f"{calibration.notes[0]}: onnxruntime refused the copy that routes them out ({first_line(exc)})"
    return dataclasses.replace(calibration, notes=(note,) + calibration.notes[1:])


def _collect(source: str, samples: Iterable, low: LowType, random: bool, with_bodies: bool) -> Calibration:
    """One float32 pass over a fresh copy of ``source`` (see ``collect``); ``with_bodies``: route body values out."""
    start = time.perf_counter()
    model = modelio.load(source)
    modelio.ensure_types(model)
    return observe(model, source, samples, low, Pass(random, with_bodies), start)


@dataclasses.dataclass(frozen=True)
class Pass:
    """How one float32 pass observes: ``random`` data, body values ``with_bodies``, reductions' sums (``accumulate``).

    The synthetic run reads overflow only: it skips the accumulations, whose
    products repeated in numpy cost more than the run itself.
    """

    random: bool = False
    with_bodies: bool = True
    accumulate: bool = True


def observe(model: ir.Model, source: str, samples: Iterable, low: LowType, how: Pass = Pass(),
            start: Optional[float] = None) -> Calibration:
    """One float32 pass over ``model`` (typed, read from ``source``; edited in place: give a copy or a fork's).

    The statistics of every float32 tensor of the main graph (and, ``with_bodies``,
    of the bodies) over ``samples``; ``start``: when the pass began (its
    ``seconds`` count from there; None: now).
    """
    start = time.perf_counter() if start is None else start
    NameNodesPass()(model)  # the converter's names: accumulations are keyed by node name
    external = modelio.wants_external(model, source) \
        or modelio.estimated_float32_bytes(model) > modelio.CALIBRATION_EXTERNAL_MIN_BYTES
    observed = exposable_tensors(model)
    inner = bodies.body_values(model, _is_float32_tensor) if how.with_bodies else {}
    # Inputs the samples feed: an initializer an old exporter also lists as a graph input is a weight, not fed.
    graph_inputs = {v.name: v for v in model.graph.inputs if v.dtype == ir.DataType.FLOAT and not v.is_initializer()}
    tensors = {name: TensorStats(name) for name in list(graph_inputs) + list(observed) + list(inner)}
    accumulations = {
        node.name: Accumulation(node.name, node.op_type)
        for node in model.graph
        if how.accumulate and is_default(node) and node.op_type in REDUCTIONS | PRODUCTS
    }
    constants = _ConstantArrays(model)
    watched = [node for node in model.graph if node.name in accumulations]
    hidden = 0 if how.with_bodies else sum(1 for graph in all_graphs(model) if graph is not model.graph for _ in graph)
    names = list(observed)
    modelio.expose(model, names)
    routed = bodies.expose_body_values(model, list(inner))
    sources = []

    def fold(index, label, sample, values) -> None:
        for name in graph_inputs:
            tensors[name].update(sample[name], low, index)
        for name in names:
            tensors[name].update(values[name], low, index)
        for name, output in routed.items():
            if np.size(values[output]):  # empty: the If branch that computes it did not run on this sample
                tensors[name].update(values[output], low, index)
        for node in watched:
            _accumulate(accumulations[node.name], node, values, sample, constants)
        sources.append(label)

    run_copy(model, source, "calibration", external, samples, names + list(routed.values()), fold)
    notes = []
    if hidden:
        notes.append(f"{hidden} node(s) inside If/Loop/Scan bodies are not observed")
    return Calibration(
        low=low,
        samples=len(sources),
        random=how.random,
        sources=tuple(sources),
        tensors={name: stats for name, stats in tensors.items() if name not in inner or stats.samples},
        accumulations={k: a for k, a in accumulations.items() if a.terms},
        seconds=time.perf_counter() - start,
        notes=tuple(notes),
    )


def _is_float32_tensor(value: ir.Value) -> bool:
    return value.dtype == ir.DataType.FLOAT and isinstance(value.type, ir.TensorType)


def run_copy(model: ir.Model, source: str, stem: str, external: bool, samples: Iterable, names, fold) -> None:
    """Save ``model`` (a float32 copy of ``source``) to a temporary folder and run it on each sample.

    Weights ``source`` keeps as external data are not written again: the copy
    links the files (``modelio.link_external_data``) where it can.

    Calls ``fold(index, label, sample, {name: array})`` with the outputs
    ``names``, one sample at a time (CPU provider, optimizations off, so every
    exposed tensor exists); a sample's arrays are dropped before the next run.
    """
    with tempfile.TemporaryDirectory(prefix=f"ampconv-{stem}-") as tmp:
        if external and modelio.has_external_data(model) and modelio.link_external_data(model, tmp):
            path = modelio.save_derived(model, tmp, stem, external=False)  # references to the linked files
        else:
            path = modelio.save_derived(model, tmp, stem, external)
        runner = runners.make_session(path, f"float32 model ({stem} copy)", runners.CPU, optimize=False,
                                      source=source)
        for index, (label, sample) in enumerate(samples):
            fold(index, label, sample, runner.run(sample, names))


class _ConstantArrays:
    """Initializer arrays read on first use (a product's weight), kept only while small."""

    def __init__(self, model: ir.Model) -> None:
        self._values = {v.name: v for v in model.graph.initializers.values()}
        self._arrays: Dict[str, Optional[np.ndarray]] = {}

    def get(self, name: str) -> Optional[np.ndarray]:
        if name not in self._arrays:
            value = self._values.get(name)
            tensor = value.const_value if value is not None else None
            if tensor is None or tensor.size > 2**24:
                self._arrays[name] = None
            else:
                self._arrays[name] = np.asarray(tensor.numpy(), dtype=np.float32)
        return self._arrays[name]


def _array(value: Optional[ir.Value], values: Mapping, sample: Mapping, constants: _ConstantArrays):
    if value is None or not value.name:
        return None
    for source in (values, sample):
        if value.name in source:
            return np.asarray(source[value.name])
    return constants.get(value.name)


def _accumulate(acc: Accumulation, node: ir.Node, values, sample, constants) -> None:
    out = values.get(node.outputs[0].name) if node.outputs else None
    if node.op_type in REDUCTIONS:
        data = _array(node.inputs[0], values, sample, constants)
        if out is None or data is None or not np.asarray(out).size:
            return
        out = np.abs(np.asarray(out, dtype=np.float64))
        terms = data.size // out.size
        peak = float(out.max())
        total = {"ReduceMean": peak * terms, "ReduceL2": peak * peak}.get(node.op_type, peak)
        acc.update(total, terms)
        return
    a, b = (_array(node.inputs[i], values, sample, constants) if i < len(node.inputs) else None for i in (0, 1))
    bound = _product_bound(node, a, b)
    if bound is not None:
        acc.update(*bound)


def _product_bound(node: ir.Node, a, b) -> Optional[Tuple[float, int]]:
    """max of |A| @ |B| and the inner dimension, or None when unknown or too costly to repeat."""
    if a is None or b is None or a.ndim < 1 or b.ndim < 1:
        return None
    if node.op_type == "Gemm":
        attrs = node.attributes
        if attrs.get("transA") is not None and attrs["transA"].as_int():
            a = a.T
        if attrs.get("transB") is not None and attrs["transB"].as_int():
            b = b.T
    inner = a.shape[-1]
    macs = a.size * (b.shape[-1] if b.ndim > 1 else 1)
    if macs > PRODUCT_BOUND_MAX_MACS:
        return None
    try:
        bound = np.matmul(np.abs(a.astype(np.float32)), np.abs(b.astype(np.float32)))
    except ValueError:
        return None
    return (float(bound.max()) if bound.size else 0.0), int(inner)
