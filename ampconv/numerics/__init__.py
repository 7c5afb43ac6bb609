"""Numbers on models, shared by calibration, the accuracy search and validation.

Both ``ampconv.calibration`` (calibration samples, the synthetic run, ``--tune``) and
``ampconv.validation`` (the verdict) build on this unit; it imports neither of
them, nor the planner. Modules: ``modelio`` (loading, types, derived copies,
values exposed as outputs), ``runners`` (onnxruntime sessions), ``emulate``
(a float32 copy that rounds like fp16/bf16), ``metrics`` (error figures),
``bodies`` (values inside If/Loop/Scan routed to outputs), ``activations``
(activation statistics in fixed-size accumulators, and the thresholds the data
guards read: the planner's calibration input), ``collect`` (the float32 pass
that fills them), ``amplifiers`` (the ops that amplify an input's relative
error), ``ownerror`` (each LOW node computed alone from exact inputs).

Light to import: the modules load numpy, onnx-ir and onnxruntime, this
package file does not.
"""
