"""ampconv benchmarks: ``python bench/run_all.py --out bench/results`` (see bench/README.md)."""
