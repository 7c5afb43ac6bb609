"""The calibration samples of a conversion: files the user gave, or seeded random data."""

from __future__ import annotations

import onnx_ir as ir

from ampconv.config import Config
from ampconv.validate import inputs, modelio

RANDOM = "random"


def calibration_samples(model: ir.Model, config: Config) -> inputs.SampleStream:
    """A re-iterable stream of ``(label, sample)`` for ``model`` (the float32 input) from ``config``.

    ``calibration_data == ("random",)`` draws ``calibration_samples`` seeded
    samples (``shapes`` fixes symbolic dimensions, ``input_ranges`` the
    inputs' value ranges); otherwise the paths are read one sample at a time. Raises ``UsageError`` for unreadable or
    mismatched samples before any work.
    """
    specs = modelio.declared_inputs(model)
    if tuple(config.calibration_data) == (RANDOM,):
        return inputs.SampleStream((), specs, inputs.RandomDraw(
            config.calibration_samples, config.calibration_seed, dict(config.shapes), inputs.integer_bounds(model),
            dict(config.input_ranges),
        ))
    stream = inputs.SampleStream(config.calibration_data, specs)
    for _source, _sample in stream:  # check every sample up front: a bad one fails before any conversion work
        pass
    return stream
