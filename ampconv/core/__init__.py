"""The words every unit shares: precisions, LOW types, op domains, graph walks, dimension expressions, shape specs."""
