"""`.ci/run` prints how long each suite of `make test` took: with LOADERX_SUITE_TIMES set, the
Makefile runs every recipe line through scripts/timed_shell.sh, which adds the line's time to
that file under its target's name, and scripts/suite_times.sh prints the table, also after a
failure (the failing suite is the last row).

Run: .venv/bin/python -m pytest tests/tooling -q   (make test-tooling)
"""

import os
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _makefile(tmp_path, body):
    """A Makefile with the repository's timing switch (copied from its Makefile) and `body`."""
    ours = (REPO / "Makefile").read_text()
    switch = re.search(r"^ifdef LOADERX_SUITE_TIMES\n.*?^endif\n", ours, re.M | re.S)
    assert switch, "the Makefile has no LOADERX_SUITE_TIMES switch"
    (tmp_path / "Makefile").write_text(f"CURDIR := {REPO}\n{switch.group(0)}{body}")


def _run(tmp_path, times):
    env = {**os.environ, "LOADERX_SUITE_TIMES": str(times)}
    make = subprocess.run(["make", "-s", "-C", str(tmp_path)], env=env, capture_output=True, text=True)
    table = subprocess.run([REPO / "scripts" / "suite_times.sh", times], capture_output=True, text=True, check=True)
    rows = {line.split()[0]: line.split()[1] for line in table.stdout.splitlines()[1:]}
    return make, rows


def test_each_target_gets_its_lines_time_and_the_total_adds_up(tmp_path):
    _makefile(tmp_path, "all: slow quick\nslow:\n\tsleep 0.4\n\tsleep 0.3\nquick:\n\ttrue\n")
    times = tmp_path / "times.txt"
    make, rows = _run(tmp_path, times)
    assert make.returncode == 0, make.stderr
    assert list(rows) == ["slow", "quick", "total"]
    assert float(rows["slow"]) >= 0.7, rows  # both lines of `slow`, added up
    assert float(rows["total"]) == float(rows["slow"]) + float(rows["quick"])


def test_a_failing_line_still_fails_make_and_is_timed(tmp_path):
    _makefile(tmp_path, "all: ok broken after\nok:\n\ttrue\nbroken:\n\texit 3\nafter:\n\ttrue\n")
    times = tmp_path / "times.txt"
    make, rows = _run(tmp_path, times)
    assert make.returncode != 0
    assert list(rows) == ["ok", "broken", "total"], "make stops at the failing suite, which is timed"


def test_ci_run_sets_the_times_file_and_prints_the_table_on_exit():
    ci = (REPO / ".ci" / "run").read_text()
    assert "export LOADERX_SUITE_TIMES=" in ci
    trap = next(line for line in ci.splitlines() if line.startswith("trap "))
    assert "suite_times.sh" in trap and "EXIT" in trap
    assert ci.rstrip().endswith("make test")
