"""Fixtures shared by the loaderx Python tests: the reference interpreter and fixture copies."""

import os

import pytest

from _lxhelpers import FIXTURES, MANIFEST, copy_fixture, find_ref_python, worker_threads


@pytest.fixture(scope="session")
def ref_python():
    """Path of the reference loaderx 0.9.11 interpreter.

    $LOADERX_REF_PYTHON when set, else .venv-ref or /tmp/refvenv, whichever exists. When there
    is none the test is skipped, or fails when $LOADERX_REQUIRE_REF=1 (as under ``make test``).
    """
    path = find_ref_python()
    if path is None:
        msg = (
            "the reference loaderx 0.9.11 interpreter was not found "
            f"(LOADERX_REF_PYTHON={os.environ.get('LOADERX_REF_PYTHON')!r})"
        )
        if os.environ.get("LOADERX_REQUIRE_REF") == "1":
            pytest.fail(msg + " and LOADERX_REQUIRE_REF=1")
        pytest.skip(msg)
    return path


@pytest.fixture(scope="session")
def manifest():
    return MANIFEST


@pytest.fixture(scope="session")
def fixture_copies(tmp_path_factory):
    """A writable copy of every fixture store, made once per session: name -> path.
    Tests that write to a store must make their own copy (see :func:`fixture_store`)."""
    root = tmp_path_factory.mktemp("fixtures")
    return {s["name"]: copy_fixture(s["name"], root / s["name"]) for s in MANIFEST["stores"]}


@pytest.fixture
def fixture_store(tmp_path):
    """``fixture_store(name)`` -> path of a fresh writable copy of that fixture store."""

    def make(name):
        return copy_fixture(name, tmp_path / f"copy-{name}")

    return make


@pytest.fixture(autouse=True)
def _no_leaked_loader_threads():
    """Every test must leave no DataLoader worker thread behind."""
    yield
    import time

    deadline = time.monotonic() + 3.0
    while worker_threads() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not worker_threads(), f"DataLoader threads outlived the test: {worker_threads()}"


assert FIXTURES.is_dir(), f"fixtures missing at {FIXTURES}"
