"""Every loaderx object that holds a store or workers is a context manager with one rule
(loaderx._closing): ``with obj as o`` gives ``obj`` itself and closes it on the way out, after an
exception too, which propagates."""

import numpy as np
import pytest

from loaderx.converter import from_iterator, from_numpy
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset, RaggedDataset
from loaderx.errors import StoreClosedError
from loaderx.zrecord import Zrecord


@pytest.fixture
def opened(tmp_path):
    """name -> (open the object, read from it)."""
    from_numpy(tmp_path / "d", np.arange(12).reshape(6, 2), progress=False)
    from_iterator(tmp_path / "r", [np.arange(n) for n in (1, 2, 3)], progress=False)
    return {
        "Zrecord": (lambda: Zrecord(tmp_path / "d"), lambda z: z.lengths([0])),
        "DenseDataset": (lambda: DenseDataset(tmp_path / "d"), lambda ds: ds[0]),
        "RaggedDataset": (lambda: RaggedDataset(tmp_path / "r"), lambda ds: ds[0]),
        "DataLoader": (lambda: DataLoader({"x": DenseDataset(tmp_path / "d")}, num_workers=1, batch_size=2), next),
    }


CLOSED = {"Zrecord": StoreClosedError, "DenseDataset": StoreClosedError, "RaggedDataset": StoreClosedError,
          "DataLoader": ValueError}


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_with_gives_the_object_and_closes_it(opened, name):
    make, read = opened[name]
    obj = make()
    with obj as inside:
        assert inside is obj
        read(obj)  # open inside the block
    with pytest.raises(CLOSED[name], match="closed"):
        read(obj)


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_an_exception_in_the_block_propagates_and_the_object_is_closed(opened, name):
    make, read = opened[name]
    obj = make()
    with pytest.raises(KeyError, match="from the block"), obj:
        raise KeyError("from the block")
    with pytest.raises(CLOSED[name], match="closed"):
        read(obj)
