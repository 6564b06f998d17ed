"""The documented examples work as written and give the values NumPy says they should.

Pins: the Quick Start of the reference README (SEED.md: two dense streams converted from
mmapped .npy files, a DataLoader with a transform, 256+ steps, every batch row-aligned across
streams), the "Records" examples (dense gather, ragged from_iterator + pad, the collate
transform), and every ```python block of the repository README.md, run in order in one
directory (only the blocks tagged ```python s3, which need a bucket, are left out here:
test_remote_s3.py runs them against a local S3 server).
"""

import re

import numpy as np
import pytest

from _lxhelpers import OUR_PYTHON, REPO, run_python
from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset, pad

README = REPO / "README.md"


def _python_blocks(text):
    """Every fenced block tagged python/py/python3, in order."""
    return [m.group(2) for m in re.finditer(r"^```[ \t]*(python3?|py)[ \t]*\n(.*?)^```", text, re.M | re.S)]


def test_quick_start(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    n = 1000
    data = np.empty((n, 8, 8), dtype=np.uint8)
    for i in range(n):
        data[i] = (np.arange(64).reshape(8, 8) * 3 + i * 11) % 256
    label = (np.arange(n, dtype=np.int64) * 7919) % 100003  # distinct, so a row identifies its record
    np.save("data.npy", data)
    np.save("label.npy", label)

    assert from_numpy("train_data", np.load("data.npy", mmap_mode="r")) == n
    assert from_numpy("train_label", np.load("label.npy", mmap_mode="r")) == n

    seen = []

    def transform(batch):
        seen.append(1)
        return batch

    loader = DataLoader({"data": DenseDataset("train_data"), "label": DenseDataset("train_label")}, transform=transform)
    try:
        label_to_row = {int(v): i for i, v in enumerate(label)}
        for i, batch in enumerate(loader):
            rows = np.array([label_to_row[int(v)] for v in batch["label"]])
            np.testing.assert_array_equal(batch["data"], data[rows])
            if i >= 256:
                break
    finally:
        loader.close()
    assert i == 256
    assert batch["data"].shape == (256, 8, 8) and batch["data"].dtype == np.uint8
    assert batch["label"].shape == (256,) and batch["label"].dtype == np.int64
    assert len(seen) >= 257  # the transform ran for every batch handed out


def test_quick_start_transform_output_is_what_next_returns(tmp_path):
    x = np.arange(40 * 3, dtype=np.int16).reshape(40, 3)
    from_numpy(tmp_path / "x", x)

    def collate(batch):
        return {"double": batch["x"].astype(np.float64) * 2, "n": len(batch["x"])}

    loader = DataLoader({"x": DenseDataset(tmp_path / "x")}, batch_size=8, mode=0, num_workers=2, transform=collate)
    try:
        for k in range(7):  # wraps around the 40 records: steps 5 and 6 restart at record 0
            out = next(loader)
            rows = (np.arange(8) + 8 * k) % 40
            assert out["n"] == 8
            np.testing.assert_array_equal(out["double"], x[rows].astype(np.float64) * 2)
    finally:
        loader.close()


def test_records_dense_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    src = np.arange(64, dtype=np.float32).reshape(8, 2, 4)
    from_numpy("data", src)
    ds = DenseDataset("data")
    got = ds[[0, 5, 2]]
    assert got.shape == (3, 2, 4) and got.dtype == np.float32
    np.testing.assert_array_equal(got, src[[0, 5, 2]])
    assert len(ds) == 8
    assert ds.item_shape == (2, 4)
    np.testing.assert_array_equal(ds[3], src[3])


def test_records_ragged_example(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    seqs = [np.arange(L, dtype=np.int32) for L in (3, 1, 4, 1, 5)]
    assert from_iterator("tokens", seqs) == 5
    rs = RaggedDataset("tokens")
    assert len(rs) == 5
    records = rs[[0, 2, 4]]
    assert isinstance(records, list) and len(records) == 3
    for got, want in zip(records, [seqs[0], seqs[2], seqs[4]]):
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, want)
    padded, lengths = pad(records)
    expected = np.array([[0, 1, 2, 0, 0], [0, 1, 2, 3, 0], [0, 1, 2, 3, 4]], dtype=np.int32)
    np.testing.assert_array_equal(padded, expected)
    assert padded.dtype == np.int32
    np.testing.assert_array_equal(lengths, [3, 4, 5])
    padded, _ = pad(records, max_len=7, pad_value=-1)
    assert padded.shape == (3, 7)
    np.testing.assert_array_equal(padded[0], [0, 1, 2, -1, -1, -1, -1])
    with pytest.raises(ValueError):
        pad(records, max_len=4)  # longer than max_len: an error, never a silent cut


def test_records_collate_example(tmp_path):
    seqs = [np.arange(1, 1 + (i % 6) + 1, dtype=np.int32) * (i + 1) for i in range(64)]
    padded, _ = pad(seqs, max_len=8)
    from_numpy(tmp_path / "tokens", padded)
    labels = np.arange(64, dtype=np.int64) * 3
    from_numpy(tmp_path / "label", labels)
    dense_tokens, labelset = DenseDataset(tmp_path / "tokens"), DenseDataset(tmp_path / "label")

    def collate(batch):
        return {"input_ids": batch["tokens"], "label": batch["label"]}

    loader = DataLoader({"tokens": dense_tokens, "label": labelset}, batch_size=32, transform=collate)
    try:
        for _ in range(5):
            out = next(loader)
            assert set(out) == {"input_ids", "label"}
            assert out["input_ids"].shape == (32, 8) and out["label"].shape == (32,)
            np.testing.assert_array_equal(out["input_ids"], padded[out["label"] // 3])
    finally:
        loader.close()


def test_readme_exists():
    assert README.is_file()
    assert "loaderx" in README.read_text()


def needs_ml(block):
    """A README block for loaderx.torch, loaderx.jax or loaderx.ray (run by py/tests_ml, not here)."""
    return re.search(r"^\s*(import|from) (torch|jax|ray|loaderx\.torch|loaderx\.jax|loaderx\.ray)\b", block, re.M) is not None


_README_TEXT = README.read_text() if README.is_file() else ""
_BLOCKS = _python_blocks(_README_TEXT)


def test_readme_block_extraction_sees_every_python_fence():
    """The extractor finds exactly as many blocks as there are python fences (none skipped)."""
    fences = re.findall(r"^```[ \t]*(?:python3?|py)[ \t]*$", _README_TEXT, re.M)
    assert len(_BLOCKS) == len(fences)
    assert _python_blocks("x\n```python\nprint(1)\n```\n```bash\nls\n```\n```py\na = 2\n```\n") == [
        "print(1)\n",
        "a = 2\n",
    ]


def _fences(text):
    """``(tags, code)`` of every fenced block whose info string starts with python/py/python3."""
    return [
        ((m.group(2) or "").split(), m.group(3))
        for m in re.finditer(r"^```[ \t]*(python3?|py)([ \t][^\n]*)?\n(.*?)^```", text, re.M | re.S)
    ]


def test_only_the_s3_block_is_left_out():
    """The blocks the in-order run leaves out are tagged ``python s3`` (they need a bucket; the
    S3 suite runs them against a local server) or ``python ray-cluster`` (the two-node Ray suite
    runs it): every other python block runs below."""
    tagged = [(tags, code) for tags, code in _fences(_README_TEXT) if tags]
    assert all(tags in (["s3"], ["ray-cluster"]) for tags, _ in tagged), [tags for tags, _ in tagged]
    assert [tags for tags, _ in tagged].count(["s3"]) == 2 and all("s3://" in code for _, code in tagged)
    # The cluster block runs in py/tests_ml/test_ray_cluster.py, on two Ray nodes.
    assert [tags for tags, _ in tagged].count(["ray-cluster"]) == 1
    assert len(_fences(_README_TEXT)) == len(_BLOCKS) + len(tagged)


def test_readme_python_blocks_run_in_order_in_one_directory(tmp_path):
    """Every python block of README.md, in order, in one directory: a reader who pastes them one
    after another into files and runs them there gets no error (one interpreter per block, as a
    reader runs them; blocks for torch, JAX and Ray run in py/tests_ml)."""
    assert _BLOCKS, "README.md has no python blocks"
    ran = 0
    for index, block in enumerate(_BLOCKS):
        if needs_ml(block):
            # torch, JAX and Ray are not in this venv: py/tests_ml/test_readme_ml.py runs these
            # blocks in the venv that has them (make test-ml), with this same extractor.
            assert (REPO / "py/tests_ml/test_readme_ml.py").is_file()
            continue
        script = tmp_path / f"readme_block_{index}.py"
        script.write_text(block)
        proc = run_python(OUR_PYTHON, [script], cwd=tmp_path, timeout=120, check=False)
        assert proc.returncode == 0, (
            f"README.md python block {index} failed (exit {proc.returncode}) after blocks 0..{index - 1} ran in "
            f"the same directory:\n{block}\n--- stderr\n{proc.stderr[-6000:]}"
        )
        ran += 1
    assert ran >= 5
