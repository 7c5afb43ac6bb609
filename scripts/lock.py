"""Write constraints.txt: the exact versions a fresh install of ampconv's extras resolves to.

``make lock`` runs this with a throw-away virtual environment in which
``pip install ".[test,bench,cpu]"`` was just run without constraints, so the
file records the newest releases that install together. The GPU runtime is
never installed beside the CPU one (they share the ``onnxruntime`` module), so
its pin is looked up separately: the newest onnxruntime-gpu release not newer
than the CPU build that was resolved.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HEADER = """\
# Exact versions that `make test`, `make demo` and CI install (pip install -c constraints.txt).
# Regenerated on purpose with `make lock`; `make test-latest` checks the newest releases.
# setup.cfg keeps version ranges for users; this file is what the tests ran against.
"""


def _version_key(version: str):
    """Numeric sort key for plain release versions like 1.31.1."""
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def frozen(python: str) -> list[str]:
    """``name==version`` of every distribution in the environment of ``python`` but ampconv."""
    listing = json.loads(
        subprocess.run(
            [python, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
            check=True, capture_output=True, text=True,
        ).stdout
    )
    return sorted(
        (f"{d['name']}=={d['version']}" for d in listing if d["name"].lower() != "ampconv"),
        key=str.lower,
    )


def gpu_pin(python: str, cpu_version: str) -> str | None:
    """The newest onnxruntime-gpu release not newer than ``cpu_version`` (None if none is served)."""
    out = subprocess.run(
        [python, "-m", "pip", "index", "versions", "onnxruntime-gpu", "--disable-pip-version-check"],
        capture_output=True, text=True,
    ).stdout
    for line in out.splitlines():
        if line.strip().startswith("Available versions:"):
            versions = [v.strip() for v in line.split(":", 1)[1].split(",")]
            fitting = [v for v in versions if _version_key(v) <= _version_key(cpu_version)]
            if fitting:
                return f"onnxruntime-gpu=={max(fitting, key=_version_key)}"
    return None


def main() -> int:
    """Entry point: ``python scripts/lock.py --python VENV/bin/python --out constraints.txt``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", required=True, help="interpreter of the freshly resolved environment")
    parser.add_argument("--out", type=Path, default=Path("constraints.txt"))
    args = parser.parse_args()
    pins = frozen(args.python)
    cpu = next((p.split("==")[1] for p in pins if p.lower().startswith("onnxruntime==")), None)
    if cpu is None:
        print("lock: onnxruntime is not in the resolved environment", file=sys.stderr)
        return 1
    gpu = gpu_pin(args.python, cpu)
    if gpu is not None:
        pins.append(gpu)
    tmp = args.out.with_name(args.out.name + ".tmp")
    tmp.write_text(HEADER + "\n".join(pins) + "\n", encoding="utf-8")
    tmp.replace(args.out)
    print(f"lock: {len(pins)} pins written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
