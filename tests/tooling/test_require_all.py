"""The require-all policy holds in both test runners: under LOADERX_REQUIRE_ALL=1 a test that would
skip for something missing fails and names it, an intended skip (py/tests/_require_all.py ALLOWED)
stays a skip, and without the variable skips stay skips. `make test` sets the variable for every
suite it runs.

Run: .venv/bin/python -m pytest tests/tooling/test_require_all.py -q
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(REPO / "py" / "tests")!r})
from _require_all import pytest_configure, pytest_make_collect_report, pytest_runtest_makereport, pytest_terminal_summary
"""

TESTS = """
import pytest

def test_runs():
    pass

def test_needs_a_server():
    pytest.skip("moto_server is not installed")

@pytest.mark.skipif(True, reason="worker processes are POSIX only")
def test_platform():
    pass

@pytest.mark.xfail(reason="a known bug", strict=True)
def test_known_bug():
    raise AssertionError
"""

MODULE_SKIP = """
import pytest
pytest.importorskip("loaderx_no_such_package_h2", reason="the package loaderx_no_such_package_h2 is not installed")

def test_never_collected():
    pass
"""


def _pytest(tmp_path, require, body=TESTS, other=None):
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_tiny.py").write_text(body)
    if other is not None:
        (tmp_path / "test_other.py").write_text(other)
    env = {k: v for k, v in os.environ.items() if k != "LOADERX_REQUIRE_ALL"}
    if require:
        env["LOADERX_REQUIRE_ALL"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _counts(out):
    last = out.stdout.strip().splitlines()[-1]
    return {word: int(n) for n, word in re.findall(r"(\d+) (\w+)", last)}


def test_without_the_variable_skips_stay_skips(tmp_path):
    run = _pytest(tmp_path, require=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert _counts(run) == {"passed": 1, "skipped": 2, "xfailed": 1}


def test_under_the_policy_a_missing_server_fails_and_is_named(tmp_path):
    run = _pytest(tmp_path, require=True)
    assert run.returncode == 1, run.stdout + run.stderr
    # The intended skip stays, the xfail stays an xfail, the missing server fails.
    assert _counts(run) == {"failed": 1, "passed": 1, "skipped": 1, "xfailed": 1}
    assert re.search(r"FAILED .*test_needs_a_server", run.stdout)
    assert "LOADERX_REQUIRE_ALL=1 (make test) allows no skip: moto_server is not installed" in run.stdout
    assert "allowed (1 seen): 'worker processes are POSIX only'" in run.stdout


def test_under_the_policy_a_module_level_importorskip_fails_and_the_rest_runs(tmp_path):
    other = "def test_elsewhere():\n    pass\n"
    run = _pytest(tmp_path, require=False, body=MODULE_SKIP, other=other)
    assert run.returncode == 0 and _counts(run) == {"passed": 1, "skipped": 1}, run.stdout
    run = _pytest(tmp_path, require=True, body=MODULE_SKIP, other=other)
    assert run.returncode == 1 and _counts(run) == {"passed": 1, "error": 1}, run.stdout + run.stderr
    assert "the package loaderx_no_such_package_h2 is not installed" in run.stdout


def test_every_pytest_suite_loads_the_policy():
    """Every folder of test_*.py files under py/ and tests/ has the policy's hooks from a conftest.py
    there or in a folder above it (up to py/ or tests/, those included)."""
    def loads_policy(folder):
        for f in (folder, *folder.parents):
            conftest = f / "conftest.py"
            if conftest.is_file() and re.search(r"from _require_all import \((?:\s*#[^\n]*)?[\w\s,]*pytest_runtest_makereport", conftest.read_text()):
                return True
            if f in (REPO / "py", REPO / "tests"):
                return False
        return False

    folders = {p.parent for top in ("py", "tests") for p in (REPO / top).rglob("test_*.py")
               if not any(part.startswith(".") or part == "node_modules" for part in p.relative_to(REPO).parts)}
    assert {REPO / "py" / "tests", REPO / "py" / "tests_ml", REPO / "tests" / "tooling"} <= folders
    missing = sorted(str(f.relative_to(REPO)) for f in folders if not loads_policy(f))
    assert not missing, f"test folders without the require-all hooks: {missing}"


def test_every_node_test_skip_goes_through_the_policy_helper():
    """No t.skip(), test.skip, describe.skip, { skip: ... } or todo in js/test but the helper's own."""
    pattern = re.compile(r"\.skip\(|\b(test|it|describe)\.(skip|todo)\b|\{\s*(skip|todo)\s*:|,\s*(skip|todo)\s*:|\.todo\(")
    helper = REPO / "js" / "test" / "helpers" / "require_all.mjs"
    files = sorted((REPO / "js" / "test").rglob("*.mjs"))
    assert len(files) > 20  # the scan saw the suites
    offenders = [f"{p.relative_to(REPO)}:{n}: {line.strip()}" for p in files if p != helper
                 for n, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders, "skips that bypass js/test/helpers/require_all.mjs:\n" + "\n".join(offenders)
    assert pattern.search("t.skip(missing)") and pattern.search("test('x', { skip: true }, f)")


NODE_TEST = """
import { test } from 'node:test';
import { skipUnlessRequired } from %s;
test('needs a browser', (t) => skipUnlessRequired(t, 'no Chromium at /nowhere/chromium'));
test('runs', () => {});
"""


@pytest.mark.parametrize("require", [False, True])
def test_node_helper_skips_or_fails(tmp_path, require):
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not installed (scripts/setup.sh installs it)")
    helper = (REPO / "js" / "test" / "helpers" / "require_all.mjs").as_uri()
    (tmp_path / "tiny.test.mjs").write_text(NODE_TEST % repr(helper))
    env = {k: v for k, v in os.environ.items() if k != "LOADERX_REQUIRE_ALL" and k != "NODE_TEST_CONTEXT"}
    if require:
        env["LOADERX_REQUIRE_ALL"] = "1"
    run = subprocess.run([node, "--test", str(tmp_path / "tiny.test.mjs")], env=env, capture_output=True, text=True,
                         timeout=120)
    counts = {k: int(v) for k, v in re.findall(r"^# (pass|fail|skipped) (\d+)$", run.stdout, re.M)}
    if require:
        assert run.returncode == 1 and counts == {"pass": 1, "fail": 1, "skipped": 0}, run.stdout
        assert "no Chromium at /nowhere/chromium (LOADERX_REQUIRE_ALL=1: nothing may skip)" in run.stdout
    else:
        assert run.returncode == 0 and counts == {"pass": 1, "fail": 0, "skipped": 1}, run.stdout


def _probe(target):
    """What LOADERX_REQUIRE_ALL is inside a prerequisite of ``target`` (make -n: nothing runs)."""
    makefile = f"include Makefile\n{target}: lx-probe\nlx-probe:\n\t@echo lx-probe=[$(LOADERX_REQUIRE_ALL)]\n"
    env = {k: v for k, v in os.environ.items() if k != "LOADERX_REQUIRE_ALL"}
    run = subprocess.run(["make", "-n", "-f", "-", target], cwd=REPO, input=makefile, env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return re.findall(r"lx-probe=\[(.*)\]", run.stdout)


def test_make_test_sets_the_policy_for_every_suite():
    """`make test` passes LOADERX_REQUIRE_ALL=1 to its prerequisites; a single suite's target does not."""
    assert _probe("test") == ["1"]
    assert _probe("test-py") == [""]
