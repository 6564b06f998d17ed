"""The dictionary codec is ``zstd_dict`` in stores and schemas; ``zstd-dict``, the CLI's
spelling, is taken as the same codec wherever a codec is named (converters, Zrecord)."""

import numpy as np
import pytest

from loaderx.converter import from_iterator, from_numpy
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.zrecord import Zrecord


@pytest.mark.parametrize("spelling", ["zstd_dict", "zstd-dict"])
def test_both_spellings_write_zstd_dict(tmp_path, spelling):
    rows = np.random.default_rng(0).integers(0, 4, (3000, 64), dtype=np.uint8)
    from_numpy(tmp_path / "d", rows, codec=spelling, progress=False)
    ds = DenseDataset(tmp_path / "d")
    assert ds.codec == "zstd_dict" and np.array_equal(ds[[5, 0]], rows[[5, 0]])
    from_iterator(tmp_path / "r", [np.arange(n, dtype=np.int32) for n in range(1, 40)], codec=spelling, progress=False)
    assert RaggedDataset(tmp_path / "r").codec == "zstd_dict"
    z = Zrecord(tmp_path / "d", codec=spelling)
    assert z.append(rows[0].tobytes(), [0]) == 3000
    assert z.engine.lengths(np.array([3000], np.uint64)).tolist() == [64]
    z.close()


def test_other_spellings_are_refused(tmp_path):
    for bad in ("zstd dict", "ZSTD_DICT", "lz4"):
        with pytest.raises(ValueError, match="unknown codec"):
            from_numpy(tmp_path / "x", np.zeros((3, 4), np.uint8), codec=bad, progress=False)
        with pytest.raises(ValueError, match="unknown codec"):
            Zrecord(tmp_path / "y", codec=bad)
