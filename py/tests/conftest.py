"""Fixtures shared by the loaderx Python tests: the reference interpreter and fixture copies."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import _require_all
from _lxhelpers import FIXTURES, MANIFEST, copy_fixture, find_ref_python, worker_threads
from _require_all import (  # noqa: F401  (LOADERX_REQUIRE_ALL)
    pytest_make_collect_report,
    pytest_runtest_makereport,
    pytest_terminal_summary,
)


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


# --- Opt-in export of the stores the tests write, for the Node suite ------------------------
#
# With LOADERX_EXPORT_STORES=<dir>, after each test every store directory (a directory holding
# meta.zr) under the test's tmp_path is copied, trimmed to its used bytes, to
# <dir>/<test id>/<n>/, with an expected.json beside the store files: the schema, the length, the
# stats and, per record, its length and the sha256 of its bytes as our Python Zrecord decodes them
# from the copy, plus the records that do not fit the schema ("misfits"; some tests write them on
# purpose). At the end of the session the stores of module- and session-scoped fixtures go to
# <dir>/session-*/<n>/ the same way. js/test/python_stores.test.mjs reads them all with the wasm
# reader. Stores that do not open or do not verify in Python (the deliberately broken ones) get
# an expected.json that only says {"broken": reason} and are listed in <dir>/skipped.jsonl.
# Nothing here may fail a test: every error is recorded there instead.

EXPORT_DIR = os.environ.get("LOADERX_EXPORT_STORES")
#: Largest amount of real (non-hole) data one exported store may hold.
EXPORT_MAX_BYTES = 1 << 30


def _copy_prefix(src, dst, size):
    """Copies the first ``size`` bytes of ``src`` to ``dst``, data regions only, so a sparse
    chunk file stays sparse. Returns the real bytes copied."""
    import errno

    copied = 0
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        fd, off = fin.fileno(), 0
        size = min(size, os.fstat(fd).st_size)
        while off < size:
            try:
                start = os.lseek(fd, off, os.SEEK_DATA)
                end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
                break  # only a hole is left
            if start >= size:
                break
            fin.seek(start)
            fout.seek(start)
            while start < end:
                block = fin.read(min(end - start, 1 << 20))
                if not block:
                    break
                fout.write(block)
                start += len(block)
                copied += len(block)
            off = end
        fout.truncate(size)
    return copied


def _trimmed_copy(src, dst):
    """Copies a store with meta.zr cut to 16 + 16 * length and each chunk file cut to the end of
    the last live record in it (docs/format.md "Files": readers accept both)."""
    import numpy as np

    dst.mkdir(parents=True)
    with open(src / "meta.zr", "rb") as f:
        header = f.read(16)
        length = int.from_bytes(header[12:16], "little") if len(header) == 16 else 0
        table = np.frombuffer(f.read(16 * length), dtype=np.uint8)
    entries = table[: table.size - table.size % 16].reshape(-1, 16)
    offset = entries[:, 0:4].copy().view("<u4").ravel().astype(np.uint64)
    phys = entries[:, 4:8].copy().view("<u4").ravel().astype(np.uint64)
    logic = entries[:, 8:12].copy().view("<u4").ravel().astype(np.uint64)
    chunk = entries[:, 12:14].copy().view("<u2").ravel()
    end = offset + np.where(entries[:, 14] == 0, logic, phys)
    total = _copy_prefix(src / "meta.zr", dst / "meta.zr", 16 + 16 * length)
    tail_chunk = int.from_bytes(header[6:8], "little") if len(header) == 16 else 0
    for k in range(tail_chunk + 1):
        if (src / f"{k}.zr").is_file():
            need = int(end[chunk == k].max()) if (chunk == k).any() else 0
            need = min(need, (src / f"{k}.zr").stat().st_size)
            total += _copy_prefix(src / f"{k}.zr", dst / f"{k}.zr", need)
            if total > EXPORT_MAX_BYTES:
                raise ValueError(f"more than {EXPORT_MAX_BYTES} bytes of data")
    for name in ("dict.zr", "schema.msgpack"):
        if (src / name).is_file():
            shutil.copyfile(src / name, dst / name)


def _expected(store):
    """What Python reads from the exported store, or raises if it does not read cleanly."""
    import hashlib

    import msgpack
    import numpy as np

    from loaderx.zrecord import Zrecord

    schema = None
    if (store / "schema.msgpack").is_file():
        schema = msgpack.unpackb((store / "schema.msgpack").read_bytes(), raw=False)
    with Zrecord(store) as z:
        checked, bad = z.verify()
        if bad:
            raise ValueError(f"verify lists {len(bad)} bad records, first {bad[0]}")
        n = len(z)
        lengths = z.lengths(np.arange(n)).astype(np.int64) if n else np.zeros(0, np.int64)
        ends = np.cumsum(lengths)
        digests, start = [], 0
        while start < n:  # gather in batches of about 64 MiB (at least one record)
            base = int(ends[start - 1]) if start else 0
            stop = max(start + 1, int(np.searchsorted(ends, base + (64 << 20), side="right")))
            offs = np.concatenate([[0], ends[start:stop] - base]).astype(np.uint64)
            buf = np.empty(int(offs[-1]), dtype=np.uint8)
            z.gather(np.arange(start, stop), buf, offs[:-1])
            digests += [hashlib.sha256(buf[a:b]).hexdigest() for a, b in zip(offs[:-1], offs[1:])]
            start = stop
        stats = {k: int(v) for k, v in z.stats().items()}
        has_dict = bool(z.has_dict())
    exp = {"length": n, "schema": schema, "stats": stats, "has_dict": has_dict, "lengths": lengths.tolist(), "sha256": digests}
    if schema is not None:
        # Records the typed datasets refuse (some tests write them on purpose): a dense record
        # not of the row size, a ragged one not a whole number of rows.
        try:
            row = int(np.prod(schema["item_shape"], dtype=np.int64)) * np.dtype(schema["dtype"]).itemsize
            if row <= 0:
                raise ValueError(f"rows of {row} bytes")
            dense = schema["kind"] == "dense"
            exp["misfits"] = np.flatnonzero(lengths != row if dense else lengths % row).tolist()
        except Exception as e:
            exp["schema_error"] = f"{type(e).__name__}: {e}"
    return exp


#: Store directories already exported (or skipped), so the session sweep does not repeat them.
_EXPORTED = set()


def _note(out_root, **line):
    """Appends a line to <dir>/skipped.jsonl (best effort)."""
    import json

    try:
        with open(out_root / "skipped.jsonl", "a") as f:
            f.write(json.dumps(line, default=repr) + "\n")
    except Exception:
        pass


def _export_stores(nodeid, tmp_path, out_root):
    import hashlib
    import json
    import re

    key = nodeid + os.environ.get("PYTEST_XDIST_WORKER", "")
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", nodeid)[:120] + "-" + hashlib.sha1(key.encode()).hexdigest()[:8]
    stores = sorted(Path(d) for d, _, files in os.walk(tmp_path) if "meta.zr" in files)
    stores = [s for s in stores if s.resolve() not in _EXPORTED]
    _EXPORTED.update(s.resolve() for s in stores)
    for n, src in enumerate(stores):
        dst = out_root / name / str(n)
        source = str(src.relative_to(tmp_path))
        try:
            shutil.rmtree(dst, ignore_errors=True)
            _trimmed_copy(src, dst)
        except Exception as e:
            shutil.rmtree(dst, ignore_errors=True)
            _note(out_root, nodeid=nodeid, source=source, reason=f"not copied: {type(e).__name__}: {e}")
            continue
        try:
            exp = _expected(dst)
        except Exception as e:  # the deliberately broken stores: Node must find them broken too
            exp = {"broken": f"{type(e).__name__}: {e}"}
            _note(out_root, nodeid=nodeid, source=source, reason=exp["broken"])
        exp.update(nodeid=nodeid, source=source)
        (dst / "expected.json").write_text(json.dumps(exp, default=repr))


def pytest_configure(config):
    _require_all.pytest_configure(config)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    # Before the fixtures are torn down, so tmp_path is still there.
    tmp_path = getattr(item, "funcargs", {}).get("tmp_path") if EXPORT_DIR else None
    if tmp_path is not None:
        try:
            Path(EXPORT_DIR).mkdir(parents=True, exist_ok=True)
            _export_stores(item.nodeid, Path(tmp_path), Path(EXPORT_DIR))
        except Exception as e:
            _note(Path(EXPORT_DIR), nodeid=item.nodeid, reason=f"export failed: {e!r}")
    yield


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session):
    # Stores written by module- and session-scoped fixtures (tmp_path_factory) are under no
    # test's tmp_path: export what is left of them under the session's base temp directory.
    factory = getattr(session.config, "_tmp_path_factory", None) if EXPORT_DIR else None
    if factory is not None:
        try:
            Path(EXPORT_DIR).mkdir(parents=True, exist_ok=True)
            _export_stores("session", factory.getbasetemp(), Path(EXPORT_DIR))
        except Exception as e:
            _note(Path(EXPORT_DIR), nodeid="session", reason=f"export failed: {e!r}")


@pytest.fixture(scope="session")
def golden_stores(tmp_path_factory):
    """The cross-language golden stores (tests/golden/generate.py), written once per session:
    name -> store directory."""
    out = tmp_path_factory.mktemp("golden")
    script = Path(__file__).resolve().parents[2] / "tests" / "golden" / "generate.py"
    subprocess.run([sys.executable, str(script), str(out)], check=True, capture_output=True)
    stores = json.loads((out / "manifest.json").read_text())["stores"]
    return {name: out / entry["path"] for name, entry in stores.items()}


@pytest.fixture(scope="session")
def spread_store(tmp_path_factory):
    """A store of 2,000 incompressible 12 KiB records (zstd): 256 random ones lie far apart,
    so a gather needs many separate ranges. Returns (the directory holding it, its name)."""
    import numpy as np

    from loaderx.converter import from_numpy

    root = tmp_path_factory.mktemp("spread")
    rng = np.random.default_rng(1)
    from_numpy(root / "store", rng.integers(0, 256, size=(2000, 12 << 10), dtype=np.uint8), codec="zstd", progress=False)
    return root, "store"


@pytest.fixture(scope="module")
def stores():
    """The property tests' read-only stores (_strategies.read_only_stores), built once per module."""
    from _strategies import read_only_stores

    yield from read_only_stores()
