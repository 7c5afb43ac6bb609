"""The names of the facts phases require and ensure (``ampconv.plan.phases.Phase``)."""

INPUTS_DECIDED = "inputs decided"  # every float main-graph input has its interface decision
OUTPUT_NEEDS = "output needs"  # the main graph's kept outputs need float32
NODES_DECIDED = "nodes decided"  # every node of every graph has a decision, the backward pass done
WEIGHTS_SHARED = "weights shared"  # transparent readers of LOW weights read the LOW copy
OUTPUTS_DECIDED = "outputs decided"  # every float main-graph output has its interface decision
SLOTS_FIXED = "slots fixed"  # every node has its NodePlan (final decision, slot needs, output precisions)
PATTERNS_CHECKED = "name patterns checked"  # the user's name patterns that match nothing are warned about
FALLBACK_CHECKED = "fallback opset checked"  # nodes a later opset would run in the fallback type are warned about
ENVELOPE_STATED = "envelope stated"  # how far each float input may grow before a LOW node overflows
