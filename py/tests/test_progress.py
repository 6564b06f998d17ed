"""Converters report progress on stderr only when asked to.

Pins: from_numpy / from_iterator with progress=True write a progress display to stderr (with
tqdm: the store name and 100 %; without tqdm: plain "N/TOTAL records" lines) and nothing to
stdout; progress=False, and the default when stderr is not a terminal, write nothing at all.
The store written is the same either way.
"""

import sys

import numpy as np
import pytest

from loaderx.converter import from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset

ROWS = (np.arange(3000 * 16) % 251).astype(np.uint8).reshape(3000, 16)


def test_from_numpy_progress_true_writes_to_stderr(tmp_path, capfd):
    pytest.importorskip("tqdm")
    from_numpy(tmp_path / "withbar", ROWS, progress=True, chunk_bytes=4096)
    out, err = capfd.readouterr()
    assert out == ""
    assert "withbar" in err and "100%" in err
    np.testing.assert_array_equal(DenseDataset(tmp_path / "withbar")[:], ROWS)


def test_from_numpy_progress_false_writes_nothing(tmp_path, capfd):
    from_numpy(tmp_path / "quiet", ROWS, progress=False, chunk_bytes=4096)
    assert capfd.readouterr() == ("", "")
    np.testing.assert_array_equal(DenseDataset(tmp_path / "quiet")[:], ROWS)


def test_default_is_quiet_when_stderr_is_not_a_terminal(tmp_path, capfd):
    assert not sys.stderr.isatty()
    from_numpy(tmp_path / "default", ROWS, chunk_bytes=4096)
    from_iterator(tmp_path / "default_it", list(ROWS[:100]))
    assert capfd.readouterr() == ("", "")


def test_from_iterator_progress(tmp_path, capfd):
    seqs = [np.arange(1 + i % 9, dtype=np.int32) for i in range(500)]
    from_iterator(tmp_path / "it_on", seqs, progress=True, chunk_bytes=256)
    out, err = capfd.readouterr()
    assert out == "" and "it_on" in err
    from_iterator(tmp_path / "it_off", seqs, progress=False, chunk_bytes=256)
    assert capfd.readouterr() == ("", "")
    assert [r.tolist() for r in RaggedDataset(tmp_path / "it_on")[:]] == [s.tolist() for s in seqs]


def test_plain_progress_lines_without_tqdm(tmp_path, capfd, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # makes `import tqdm...` raise ImportError
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    from_numpy(tmp_path / "plain", ROWS, progress=True, chunk_bytes=16 * 1000)
    out, err = capfd.readouterr()
    assert out == ""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 3  # one per block of 1000 rows
    assert "plain" in lines[-1] and "3000/3000" in lines[-1]
    assert "1000/3000" in lines[0]
    from_numpy(tmp_path / "plain_off", ROWS, progress=False)
    assert capfd.readouterr() == ("", "")
