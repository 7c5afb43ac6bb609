"""Regenerate ``ampconv/runtime/kernel_ties.py``'s table from the installed onnxruntime's kernel registry.

Run with the pinned environment (``.venv/bin/python scripts/kernel_ties.py``);
``make lock`` runs it after pinning a new onnxruntime. Prints the table and
rewrites the ``SOURCE``/``TIES`` block in place.
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    """Rewrite the generated block; exit 0."""
    import onnxruntime

    from ampconv.runtime.installed import kernel_rows
    from ampconv.runtime.kernel_ties import derive_ties

    table = derive_ties(kernel_rows())
    path = ROOT / "ampconv" / "runtime" / "kernel_ties.py"
    text = path.read_text()
    lines = [f"    {key!r}: {ranges!r}," for key, ranges in sorted(table.items())]
    block = f'SOURCE = "onnxruntime {onnxruntime.__version__}"\nTIES: TieTable = {{\n' + "\n".join(lines) + "\n}\n"
    new = re.sub(r'SOURCE = "[^"]*"\nTIES: TieTable = \{.*?\n(?=\n\ndef derive_ties)', lambda _m: block, text, flags=re.S)
    new = re.sub(r"from onnxruntime [0-9.]+ \(every provider", f"from onnxruntime {onnxruntime.__version__} (every provider",
                 new)
    path.write_text(new)
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
