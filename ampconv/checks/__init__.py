"""The checks of a written model: the load-check probe, then the staged model judged whole."""
