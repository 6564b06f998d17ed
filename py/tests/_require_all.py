"""The require-all policy for every pytest suite of the repository (py/tests, py/tests_ml,
tests/tooling, tests/release): with ``LOADERX_REQUIRE_ALL=1``, which ``make test`` sets, a test
or a module that would be skipped fails instead, and its report names what is missing (the skip
reason: a server such as moto S3, nginx or Azurite, a tool, an optional package).

Invariant: under the policy, the only skips are those in :data:`ALLOWED`, each intended and
documented: a platform limit, or a check that another suite of ``make test`` runs. They are listed
at the end of the run. Without the variable, skips stay skips, so a partial setup still runs what it can.

Each suite's conftest.py imports the hooks below into its namespace; this module is the one place
that holds the rule. The node:test suites follow js/test/helpers/require_all.mjs. Intended skips
outside pytest: native/tests/golden_stores_read_identically.rs returns early under `make test-rust`
(no LOADERX_GOLDEN; tests/golden/run.sh runs it on the golden set), and
native/tests/interop_reference.rs under wine (scripts/test_windows.sh; the Linux run covers it).
"""

import os

import pytest

VARIABLE = "LOADERX_REQUIRE_ALL"

#: Skip reasons (prefixes) that stay skips under the policy, and why each is intended.
ALLOWED = {
    "worker processes are POSIX only": "platform: loaderx's worker processes need fork (test_process_workers.py)",
    "needs the source tree": "packaging: the wheel's test run reads no Cargo.toml (test_version.py)",
    "torch lives in the ML venv": "covered there: make test-ml runs torch's DataLoader workers (py/tests_ml/test_torch.py)",
}


def required():
    """Whether the policy is on."""
    return os.environ.get(VARIABLE) == "1"


def skip_reason(report):
    """The reason text of a skipped report (``Skipped: `` removed)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def allowed(reason):
    """The :data:`ALLOWED` entry ``reason`` falls under, or None."""
    return next((key for key in ALLOWED if reason.startswith(key)), None)


_allowed_seen = {}


def _enforce(report, where):
    if not (report.skipped and required()) or hasattr(report, "wasxfail"):
        return
    reason = skip_reason(report)
    key = allowed(reason)
    if key is not None:
        _allowed_seen[key] = _allowed_seen.get(key, 0) + 1
        return
    report.outcome = "failed"
    report.longrepr = f"{where} would be skipped, and {VARIABLE}=1 (make test) allows no skip: {reason}"


def pytest_configure(config):
    # A module that would be skipped whole is an error under the policy; the other modules still run.
    if required():
        config.option.continue_on_collection_errors = True


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _enforce(outcome.get_result(), item.nodeid)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _enforce(outcome.get_result(), collector.nodeid or "the collection")


def pytest_terminal_summary(terminalreporter):
    if required():
        reporter = terminalreporter
        reporter.write_sep("-", f"{VARIABLE}=1: skips fail, except the intended ones")
        for key, why in ALLOWED.items():
            reporter.write_line(f"allowed ({_allowed_seen.get(key, 0)} seen): {key!r}: {why}")
