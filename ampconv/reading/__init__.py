"""Reading a model: lazy load, the big-graph sidecar, type inference, real shapes, and repair of an input the checker refuses."""
