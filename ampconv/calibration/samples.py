"""The calibration samples of a conversion: files the user gave, or seeded random data."""

from __future__ import annotations

import onnx_ir as ir

from ampconv.options.groups import DataOptions
from ampconv.validation import inputs
from ampconv.numerics import modelio

RANDOM = "random"


def calibration_samples(model: ir.Model, options: DataOptions) -> inputs.SampleStream:
    """A re-iterable stream of ``(label, sample)`` for ``model`` (the float32 input) from ``options``.

    ``calibration_data == ("random",)`` draws ``calibration_samples`` seeded
    samples (``shapes`` fixes symbolic dimensions, ``input_ranges`` the
    inputs' value ranges); otherwise the paths are read one sample at a time. Raises ``UsageError`` for unreadable or
    mismatched samples before any work.
    """
    specs = modelio.declared_inputs(model)
    if tuple(options.calibration_data) == (RANDOM,):
        return inputs.SampleStream((), specs, inputs.RandomDraw(
            options.calibration_samples, options.calibration_seed, dict(options.shapes), inputs.integer_bounds(model),
            dict(options.input_ranges),
        ))
    stream = inputs.SampleStream(options.calibration_data, specs)
    for _source, _sample in stream:  # check every sample up front: a bad one fails before any conversion work
        pass
    return stream
