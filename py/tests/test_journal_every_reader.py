"""A store whose native delete was stopped after its ``delete.journal`` became durable
(tests/journal, made by native/tests/journal_every_reader.rs: the table as before the delete, or
already rewritten) reads as the finished deletion in every native reader that cannot finish it on
disk: a local open while a live writer holds the lock, and the remote reader over HTTP (nginx) and
S3 (moto). A damaged journal is a CorruptStoreError naming delete.journal in each of them."""

import fcntl
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_remote_s3 import BUCKET, s3  # noqa: F401  (the moto S3 server fixture)

from _lxhelpers import NGINX, nginx_serving
from loaderx import errors
from loaderx.zrecord import Zrecord

JOURNALS = Path(__file__).resolve().parents[2] / "tests" / "journal"
KILLED = ("before_table", "after_table")


def _records(z):
    """Every record's bytes, in index order."""
    idxs = np.arange(len(z), dtype=np.uint64)
    lens = z.lengths(idxs).astype(np.uint64)
    offs = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.uint64)
    buf = np.empty(int(lens.sum()), np.uint8)
    z.gather(idxs, buf, offs)
    return [buf[o : o + n].tobytes() for o, n in zip(offs.tolist(), lens.tolist())]


@pytest.fixture(scope="module")
def finished():
    z = Zrecord._existing(JOURNALS / "finished")
    try:
        return _records(z)
    finally:
        z.close()


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The killed stores and copies with damaged journals (a flipped byte; a journal beside a
    table it does not apply to), side by side: name -> directory."""
    root = tmp_path_factory.mktemp("journals")
    for case in (*KILLED, "finished"):
        shutil.copytree(JOURNALS / case, root / case)
    flipped = root / "flipped"
    shutil.copytree(JOURNALS / "before_table", flipped)
    journal = bytearray((flipped / "delete.journal").read_bytes())
    journal[10] ^= 0x20
    (flipped / "delete.journal").write_bytes(journal)
    # The journal of the delete from 40 to 35 records beside a table of 34.
    other = root / "other_length"
    shutil.copytree(JOURNALS / "finished", other)
    shutil.copy(JOURNALS / "before_table" / "delete.journal", other / "delete.journal")
    meta = bytearray((other / "meta.zr").read_bytes())
    meta[12:16] = (34).to_bytes(4, "little")
    (other / "meta.zr").write_bytes(meta[: 16 + 16 * 34])
    return root


DAMAGED = ("flipped", "other_length")


def _assert_names_the_journal(excinfo):
    err = excinfo.value
    assert err.file is not None and err.file.endswith("delete.journal"), err
    assert "delete.journal is damaged" in str(err)


@pytest.mark.parametrize("case", KILLED)
def test_a_locked_local_store_reads_the_finished_deletion_in_memory(tmp_path, finished, case):
    shutil.copytree(JOURNALS / case, tmp_path / "s")
    journal = (tmp_path / "s" / "delete.journal").read_bytes()
    # The lock a live writer holds on meta.zr (the engine's is the same flock).
    with open(tmp_path / "s" / "meta.zr", "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        z = Zrecord._existing(tmp_path / "s")
        assert len(z) == len(finished) == 35
        assert _records(z) == finished
        assert z.stats()["records"] == 35
        z.close()
        assert (tmp_path / "s" / "delete.journal").read_bytes() == journal, "a locked open writes nothing"
    # Unlocked, the open finishes the delete on disk, with the same records.
    z = Zrecord._existing(tmp_path / "s")
    assert not (tmp_path / "s" / "delete.journal").exists()
    assert _records(z) == finished
    z.close()


@pytest.mark.parametrize("case", DAMAGED)
def test_a_damaged_journal_is_corrupt_locally_locked_or_not(tmp_path, stores, case):
    for locked in (True, False):
        shutil.copytree(stores / case, tmp_path / str(locked))
        with open(tmp_path / str(locked) / "meta.zr", "rb") as held:
            if locked:
                fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
            with pytest.raises(errors.CorruptStoreError) as excinfo:
                Zrecord._existing(tmp_path / str(locked))
        _assert_names_the_journal(excinfo)


@pytest.fixture(scope="module")
def http(tmp_path_factory, stores):
    if NGINX is None:
        pytest.skip("nginx is not installed (scripts/setup.sh installs nginx-light)")
    with nginx_serving(
        tmp_path_factory.mktemp("nginx-journal"), f"        root {stores};", "/finished/meta.zr"
    ) as base:
        yield base


@pytest.fixture(scope="module")
def s3_journals(s3, stores):  # noqa: F811  (s3 is the imported fixture)
    for store in stores.iterdir():
        for f in store.iterdir():
            s3.upload_file(str(f), BUCKET, f"journal/{store.name}/{f.name}")
    return f"s3://{BUCKET}/journal"


@pytest.mark.parametrize("case", KILLED)
def test_a_killed_delete_reads_as_the_finished_deletion_over_http(http, finished, case):
    z = Zrecord(f"{http}/{case}")
    assert len(z) == 35 and _records(z) == finished
    assert z.stats()["records"] == 35


@pytest.mark.parametrize("case", KILLED)
def test_a_killed_delete_reads_as_the_finished_deletion_from_s3(s3_journals, finished, case):
    z = Zrecord(f"{s3_journals}/{case}")
    assert len(z) == 35 and _records(z) == finished


@pytest.mark.parametrize("case", DAMAGED)
def test_a_damaged_journal_is_corrupt_over_http_and_from_s3(http, s3_journals, case):
    for url in (f"{http}/{case}", f"{s3_journals}/{case}"):
        with pytest.raises(errors.CorruptStoreError) as excinfo:
            Zrecord(url)
        _assert_names_the_journal(excinfo)
