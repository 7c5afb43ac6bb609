"""The default synthetic float32 run: one seeded random sample through a small model, as calibration observes it.

Without ``--calibration-data``, a model small enough to run in a few seconds
on the CPU is run once in float32 on one seeded random sample (shapes from
``--shape`` or the model, symbolic axes at 1, integer inputs inside the
tables they index), and every activation's range is recorded exactly as
``--calibration-data random`` records it (``numerics.collect``). The planner then
keeps float32 the nodes whose values overflow the LOW type on that sample
(``data-overflow``; random data says nothing trustworthy about underflow, so
only overflow is read). The magnitude analysis (``plan.magnitude``) speaks
whether or not the run happened; a model that is too large, or that cannot
run on random inputs, is left to it, and the report says why. The run is
made in a forked child (``ampconv.runtime.isolated``): random inputs (and symbolic
axes at 1) can make onnxruntime's native kernels die (an integer division by
zero, SIGFPE), which must cost the run, not the conversion.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import List, Optional, Tuple

import numpy as np
import onnx_ir as ir

from ampconv.tensors import tensorsize
from ampconv.options.groups import DataOptions
from ampconv.errors import UsageError, command_line_text, named, spell_parameters
from ampconv.numerics import dimrelations, modelio
from ampconv.numerics.collect import collect
from ampconv.calibration.samples import calibration_samples
from ampconv.numerics.activations import Calibration
from ampconv.runtime.isolated import run_isolated
from ampconv.runtime.loadcheck import first_line
from ampconv.core.lowtypes import LowType
from ampconv.core.graphs import all_graphs

# "A few seconds on the CPU": at most this many nodes and this many bytes of float32 weights.
MAX_NODES = 1500
MAX_WEIGHT_BYTES = 32 * 2**20
SEED = 0
# How a note tells the user to give real data or turn the run off.
REAL_DATA = f"give real samples with {named('calibration_data', 'PATH')}"
ADVICE = f"{REAL_DATA}, or turn the run off with {named('synthetic_run', False)}"
# The rules whose float32 a float32 run that saw the values fit can lift (plan.evidence).
RUN_CLEARS = ("range-statistics", "range-reduction")


def wanted(options: DataOptions, level: str, range_guards: bool) -> bool:
    """Whether a conversion runs the synthetic pass: no data given, the run not turned off, range guards at O1/O2."""
    return options.synthetic_run and not options.calibration_data and range_guards and level in ("O1", "O2")


def too_large(model: ir.Model) -> Optional[str]:
    """Why ``model`` is too large for a run of a few seconds (None: small enough)."""
    nodes = sum(len(graph) for graph in all_graphs(model))
    if nodes > MAX_NODES:
        return f"{nodes} nodes (the run is made up to {MAX_NODES})"
    weights = sum(tensorsize.nbytes(v.const_value) for v in model.graph.initializers.values()
                  if v.const_value is not None)
    if weights > MAX_WEIGHT_BYTES:
        return f"{weights / 2**20:.0f} MiB of weights (the run is made up to {MAX_WEIGHT_BYTES // 2**20} MiB)"
    return None


def synthetic_run(src: str, model: ir.Model, options: DataOptions, low: LowType) -> Tuple[Optional[Calibration], List[str]]:
    """The synthetic run's ``Calibration`` (None when it was not made) and the notes that say what happened."""
    reason = too_large(model)
    if reason is not None:
        return None, [f"synthetic float32 run skipped: the model has {reason}; the magnitude analysis alone guards "
                      f"ranges ({REAL_DATA})"]
    draw = _draw(options)
    try:  # in a forked child: random inputs can crash the runtime itself (an integer division by zero: SIGFPE)
        calibration, shapes, sample_notes = run_isolated(_draw_and_run, src, model, draw, low)
    except Exception as exc:  # noqa: BLE001 - the run is optional evidence: any failure falls back to the analysis
        # A run that failed on the sizes it drew (not on a bad --shape): every unset dimension, and how they relate.
        hint = None if isinstance(exc, UsageError) else dimrelations.unset_dims_hint(
            model, modelio.declared_inputs(model), dict(options.shapes))
        dims = f"; if it failed for the sizes it drew: {hint}" if hint else ""
        return None, [f"synthetic float32 run could not run on random inputs ({first_line(exc)}); the magnitude "
                      f"analysis alone guards ranges{dims}"]
    note = (f"synthetic float32 run: 1 seeded random sample (seed {SEED}; {shapes}) in "
            f"{calibration.seconds:.2f} s; nodes whose values overflow {low.name} there stay float32 "
            f"(data-overflow); {ADVICE}")
    # The calibration section's notes are plain text (the report's own notes are spelled as they are read).
    notes = tuple(spell_parameters(text, command_line_text) for text in (note, *sample_notes))
    calibration = dataclasses.replace(calibration, synthetic=True, notes=notes + tuple(calibration.notes))
    return calibration, []


def unjudged_note(nodes) -> Optional[str]:
    """With no float32 run (skipped, failed): the nodes a run that saw their values fit could have lowered,
    and how to give one (``nodes``: the report's entries); None when there are none."""
    kept = Counter(n["rule"] for n in nodes if n["precision"] == "HIGH" and n["rule"] in RUN_CLEARS)
    if not kept:
        return None
    which = ", ".join(f"{rule} x{count}" for rule, count in sorted(kept.items()))
    return (f"{sum(kept.values())} node(s) stay float32 that a float32 run seeing their values fit could lower "
            f"({which}): no run judged them; {REAL_DATA}")


def _draw(options: DataOptions) -> DataOptions:
    """The options of the run's draw: one seeded random sample, at ``options``' shapes."""
    return dataclasses.replace(options, calibration_data=("random",), calibration_samples=1, calibration_seed=SEED,
                               tune=False)


def evidence_samples(model: ir.Model, options: DataOptions):
    """The run's sample again (seeded: the same arrays), for the release step's evaluations (``calibration.release``)."""
    return calibration_samples(model, _draw(options))


def _draw_and_run(src: str, model: ir.Model, draw: DataOptions, low: LowType) -> Tuple[Calibration, str, tuple]:
    """Draw the seeded sample and collect its statistics: (calibration, the sample's shapes, the draw's notes)."""
    samples = calibration_samples(model, draw)
    with np.errstate(all="ignore"):  # float32 overflow in the model itself is the model's, not news
        calibration = collect(src, samples, low, random=True)
    _label, sample = next(iter(samples))  # seeded: the same arrays collect drew
    shapes = ", ".join(f"{name} {list(array.shape)}" for name, array in sample.items()) or "no inputs"
    return calibration, shapes, tuple(samples.notes)
