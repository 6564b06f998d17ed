"""The require-all policy (py/tests/_require_all.py) for every pytest suite under tests/
(tests/tooling, tests/release): under LOADERX_REQUIRE_ALL=1 a test that would skip fails instead,
naming what is missing."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "py" / "tests"))

from _require_all import (  # noqa: E402, F401  (LOADERX_REQUIRE_ALL)
    pytest_configure,
    pytest_make_collect_report,
    pytest_runtest_makereport,
    pytest_terminal_summary,
)
