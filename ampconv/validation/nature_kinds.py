"""What ``--nature OUTPUT=KIND`` may say of an output: a light module, shared by ``options`` (which must not
import numpy) and ``natures`` (which reads them)."""

# values: judged on its RMS, no axis read by its argmax; probability: judged on [0, 1];
# boxes/scores/labels: the members of one detection set, matched as a set (``validation.detections``).
NATURE_OVERRIDES = ("values", "probability", "boxes", "scores", "labels")
