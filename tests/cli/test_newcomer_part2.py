"""Issue 40, "a newcomer's first hour, part 2": each item as a test that failed before the fix.

1. the FAIL page's advice is one fix, checked on what the verdict was judged on, copied whole;
2. a typo in a policy file's op name is an error with "did you mean", nothing written;
3. every unset dimension in one message, with the relations the graph gives;
5. the library's words (protos accepted, no CLI flags in ``print(result)``);
6. small words; 9. no overflow warning from a double constant's range scan.
(Item 4, the README walk-through twice: ``test_newcomer_readme.py``; items 7 and 8, the option table and
the page in a browser: ``test_newcomer_help.py`` and ``tests/report/test_html_report.py``.)
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ampconv.tensors.low_range import range_stats


# --- item 9: no "overflow encountered in cast" from a double constant's range scan ----------------------------


def test_a_double_constant_beyond_float32_is_scanned_without_a_warning_and_counted():
    array = np.array([1e-300, 3.0, 1e300, -1e300, 0.1, -0.0, 7e4, 1e-9, 65504.0, np.inf])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stats = range_stats(array, "fp16")
    # 1e300, -1e300 and 7e4 overflow float16 (the infinity was one already); 1e-300 and 1e-9 round to 0.
    assert stats.overflow == 3 and stats.underflow == 2
    assert stats.example_overflow == pytest.approx(float(np.finfo(np.float32).max))
    assert stats.max_abs == pytest.approx(float(np.finfo(np.float32).max))
