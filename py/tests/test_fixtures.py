"""Every store the reference 0.9.11 wrote (tests/fixtures/v3) reads back exactly.

Pins: DenseDataset / RaggedDataset return the expected values (dtype, shape and bytes, incl.
big-endian, float16, bool, void, 1 MiB records, an empty store, deleted and compacted stores,
zstd_dict), Zrecord.lengths equals lengths.npy, Zrecord.stats() equals the manifest and
has_dict() reflects dict.zr; reading never modifies the (truncated) files; and the Sampler's
SEQUENTIAL batches equal the reference's recorded ones (sampler.json) while IID/CYCLIC keep
the reference's structural guarantees.
"""

import hashlib
import json

import numpy as np
import pytest

from _lxhelpers import FIXTURES, MANIFEST, snapshot
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.sampler import Sampler
from loaderx.zrecord import Zrecord

DENSE = [s["name"] for s in MANIFEST["stores"] if s["kind"] == "dense"]
RAGGED = [s["name"] for s in MANIFEST["stores"] if s["kind"] == "ragged"]
ALL = [s["name"] for s in MANIFEST["stores"]]
BY_NAME = {s["name"]: s for s in MANIFEST["stores"]}
SAMPLER = json.loads((FIXTURES / "sampler.json").read_text())


def expected(name, key):
    return np.load(FIXTURES / BY_NAME[name]["expected"][key], allow_pickle=False)


def assert_same_array(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.tobytes() == want.tobytes()


def test_manifest_covers_the_required_kinds():
    for name in (
        "be_i4_raw",
        "f16_zstd",
        "bool_zstd",
        "void12_raw",
        "bigrec_1mib_zstd",
        "empty_dense",
        "deleted_compacted",
        "deleted_uncompacted",
        "u8img_zstd_dict",
        "tokens_i32_ragged_zstd_dict",
    ):
        assert name in BY_NAME
    assert len(ALL) == 19


@pytest.mark.parametrize("name", DENSE)
def test_dense_fixture_reads_expected_values(name, fixture_copies):
    store = fixture_copies[name]
    want = expected(name, "values")
    ds = DenseDataset(store)
    try:
        assert len(ds) == BY_NAME[name]["length"] == len(want)
        assert ds.dtype == np.dtype(BY_NAME[name]["dtype"])
        assert ds.item_shape == tuple(BY_NAME[name]["item_shape"])
        assert_same_array(ds[:], want)
        n = len(want)
        if n:
            rng = np.random.default_rng(len(name))
            idx = rng.integers(0, n, size=min(3 * n, 300))
            assert_same_array(ds[idx], want[idx])
            assert_same_array(ds[::-1], want[::-1])
            assert ds[n - 1].tobytes() == want[n - 1].tobytes()
            assert ds[0].tobytes() == want[0].tobytes()
    finally:
        ds.close()


@pytest.mark.parametrize("name", RAGGED)
def test_ragged_fixture_reads_expected_values(name, fixture_copies):
    store = fixture_copies[name]
    values, splits = expected(name, "values"), expected(name, "row_splits")
    rs = RaggedDataset(store)
    try:
        n = BY_NAME[name]["length"]
        assert len(rs) == n == len(splits) - 1
        got = rs[:]
        assert isinstance(got, list) and len(got) == n
        for i, rec in enumerate(got):
            assert_same_array(rec, values[splits[i] : splits[i + 1]])
        rng = np.random.default_rng(7)
        idx = rng.integers(0, n, size=50)
        for i, rec in zip(idx, rs[idx]):
            assert_same_array(rec, values[splits[i] : splits[i + 1]])
        assert_same_array(rs[-1], values[splits[n - 1] : splits[n]])
    finally:
        rs.close()


@pytest.mark.parametrize("name", ALL)
def test_zrecord_lengths_stats_and_dict(name, fixture_copies):
    entry = BY_NAME[name]
    z = Zrecord(fixture_copies[name])
    try:
        n = entry["length"]
        assert len(z) == n
        lengths = z.lengths(np.arange(n, dtype=np.uint64))
        want = expected(name, "lengths")
        assert lengths.dtype == np.uint32
        np.testing.assert_array_equal(lengths, want)
        assert dict(z.stats()) == entry["stats"]
        assert z.has_dict() == (entry["dict"] is not None)
        checked, bad = z.verify()
        assert checked == n and bad == []
    finally:
        z.close()


@pytest.mark.parametrize("name", ALL)
def test_zrecord_gather_matches_expected_bytes(name, fixture_copies):
    """Raw gather of every record equals the expected values' bytes, record by record."""
    entry = BY_NAME[name]
    n = entry["length"]
    if n == 0:
        with Zrecord(fixture_copies[name]) as z:
            z.gather(np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.uint8), np.zeros(0, dtype=np.uint64))
            assert z.lengths(np.zeros(0, dtype=np.uint64)).size == 0
        return
    values = expected(name, "values")
    lengths = expected(name, "lengths").astype(np.uint64)
    z = Zrecord(fixture_copies[name])
    try:
        order = np.random.default_rng(3).permutation(n).astype(np.uint64)
        offsets = np.zeros(n, dtype=np.uint64)
        offsets[1:] = np.cumsum(lengths[order])[:-1]
        dst = np.zeros(int(lengths.sum()), dtype=np.uint8)
        z.gather(order, dst, offsets)
        flat = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
        starts = np.zeros(n + 1, dtype=np.uint64)
        starts[1:] = np.cumsum(lengths)
        for k, i in enumerate(order):
            a, b = int(starts[i]), int(starts[i + 1])
            o = int(offsets[k])
            assert dst[o : o + (b - a)].tobytes() == flat[a:b].tobytes(), f"record {i}"
    finally:
        z.close()


def test_reading_leaves_fixture_files_unchanged(fixture_copies):
    """Opening and reading the truncated fixture stores must not extend or rewrite any file."""
    before = {name: snapshot(path) for name, path in fixture_copies.items()}
    for name, path in fixture_copies.items():
        entry = BY_NAME[name]
        cls = DenseDataset if entry["kind"] == "dense" else RaggedDataset
        with cls(path) as ds:
            if len(ds):
                ds[:]
        with Zrecord(path) as z:
            z.stats()
            z.has_dict()
    after = {name: snapshot(path) for name, path in fixture_copies.items()}
    assert after == before
    for name, path in fixture_copies.items():
        for fname, digest in BY_NAME[name]["trunc_sha256"].items():
            assert hashlib.sha256((path / fname).read_bytes()).hexdigest() == digest, (name, fname)


def test_original_fixture_files_untouched():
    """The suite never writes into tests/fixtures (checked against the manifest hashes)."""
    for entry in MANIFEST["stores"]:
        store = FIXTURES / entry["store"]
        for fname, size in entry["trunc_files"].items():
            data = (store / fname).read_bytes()
            assert len(data) == size
            assert hashlib.sha256(data).hexdigest() == entry["trunc_sha256"][fname], (entry["name"], fname)


def _case_id(c):
    return f"L{c['length']}-B{c['batch_size']}-m{c['mode']}-s{c['seed']}"


@pytest.mark.parametrize("case", [c for c in SAMPLER["cases"] if c["mode"] == 0], ids=_case_id)
def test_sequential_sampler_matches_reference_recording(case):
    s = Sampler(case["length"], case["batch_size"], case["mode"], case["seed"])
    got = [s.next().tolist() for _ in case["steps"]]
    assert got == case["steps"]
    for step, want in case["seek_then_next"].items():
        s.seek(int(step))
        assert s.next().tolist() == want
        assert s.step == int(step) + 1


@pytest.mark.parametrize("case", [c for c in SAMPLER["cases"] if c["mode"] != 0], ids=_case_id)
def test_random_sampler_has_reference_structure(case):
    """Our IID/CYCLIC streams differ from the reference's, but their shape rules are the same."""
    L, B, mode, seed = case["length"], case["batch_size"], case["mode"], case["seed"]
    s = Sampler(L, B, mode, seed)
    steps = [s.next() for _ in range(len(case["steps"]))]
    for got, ref in zip(steps, case["steps"]):
        assert len(got) == len(ref)
        assert got.dtype == np.uint64
        assert int(got.max()) < L
    if mode == 2:
        per_epoch = max(1, L // B)
        for e in range(len(steps) // per_epoch):
            epoch = np.concatenate(steps[e * per_epoch : (e + 1) * per_epoch])
            assert len(np.unique(epoch)) == len(epoch) == min(L, per_epoch * B)
    # seek then next equals the stepped stream
    for k in sorted({0, 1, min(5, len(steps) - 1), len(steps) - 1}):
        s.seek(k)
        np.testing.assert_array_equal(s.next(), steps[k])


@pytest.mark.parametrize("name", ["tokens_i32_ragged_zstd", "tokens_i32_ragged_zstd_dict", "zrecord_mixed_codecs"])
def test_threaded_zstd_gathers_of_variable_length_records_are_exact(name):
    """The reference crashes now and then in exactly this call (Zrecord.gather of variable-length
    zstd records on several threads; docs/reference-defects.md). Ours is gathered from four
    threads, many times, and every byte of every batch is checked."""
    from concurrent.futures import ThreadPoolExecutor

    values = expected(name, "values").tobytes()
    lengths = expected(name, "lengths").astype(np.uint64)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.uint64)
    assert len(set(lengths.tolist())) > 10, "the records must vary in length"
    z = Zrecord(str(FIXTURES / BY_NAME[name]["store"]))

    def rounds(t):
        rng = np.random.default_rng(t)
        for _ in range(60):
            idx = rng.integers(0, len(lengths), int(rng.integers(1, 257)), dtype=np.uint64)
            lens = lengths[idx]
            offsets = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.uint64)
            dst = np.full(int(lens.sum()), 0xA5, dtype=np.uint8)
            z.gather(idx, dst, offsets)
            want = b"".join(values[int(starts[i]) : int(starts[i] + lengths[i])] for i in idx)
            assert dst.tobytes() == want
        return True

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(rounds, range(4)))
