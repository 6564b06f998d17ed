"""loaderx inside ``torch.utils.data``: datasets, a sampler and a collate function.

Three entry points, each usable with torch's own ``DataLoader`` (worker processes under fork or
spawn, ``pin_memory``) and with torchdata's ``StatefulDataLoader``:

* :class:`IterableDataset` runs a loaderx :class:`~loaderx.dataloader.DataLoader` (plain or
  :meth:`~loaderx.dataloader.DataLoader.mix`) as torch's dataset: an endless stream of batches,
  tensors without a copy, so use ``torch.utils.data.DataLoader(ds, batch_size=None)``. With
  ``W`` torch workers, worker ``w`` computes steps ``w, w + W, ...`` and torch hands them out
  round-robin, so the consumer sees steps 0, 1, 2, ... in order, the same batches as the
  loaderx loader itself for any ``W``.
* :class:`Dataset` is map-style over named streams, for torch's own samplers and collation.
  Its ``__getitems__`` gathers a whole batch in one read. With :func:`collate` the batch becomes
  tensors without a copy; torch's default collation also works, at the cost of a copy.
* :class:`BatchSampler` gives each rank its slice of loaderx's global batches, as
  ``DistributedSampler`` does for torch's samplers: ``torch.utils.data.DataLoader(Dataset(...),
  batch_sampler=BatchSampler(...), collate_fn=collate)``.

Resume. Each of :class:`IterableDataset` and :class:`BatchSampler` has ``state_dict`` and
``load_state_dict``, which is the protocol StatefulDataLoader looks for, so its checkpoints
include the loader's position. Their states are loaderx loader states
(:class:`loaderx._state.LoaderState`: versioned, and every earlier version loads): global steps,
the same on every rank, so a state saved by any rank with any shard count loads on any rank of
any shard count (see :mod:`loaderx.dataloader`, "Elastic"). Without StatefulDataLoader, count the steps
taken and save ``state_dict(step=k)``. StatefulDataLoader itself refuses a different number of
workers on resume; a state from ``state_dict(step=k)`` loads under any worker count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from ._extras import missing

try:
    import torch
    from torch.utils import data as _tud
except ImportError as e:
    raise missing(e, "loaderx.torch", "torch", "pip install torch") from None

from ._state import LoaderState, Shard, base_config
from .dataloader import DataLoader
from .sampler import Sampler

if TYPE_CHECKING:
    from ._typing import Index
    from .dataset import DenseDataset, RaggedDataset

__all__ = ["BatchSampler", "Dataset", "IterableDataset", "collate", "to_torch"]


def to_torch(value: Any) -> Any:
    """NumPy arrays in ``value`` (nested in dicts, lists and tuples) as tensors sharing their
    memory. Arrays of a dtype torch lacks, and other values, are returned unchanged."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biufc":
            if not value.flags.writeable:
                value = value.copy()  # torch tensors are writable; never alias a read-only buffer
            return torch.from_numpy(value)
        return value
    if isinstance(value, dict):
        return {k: to_torch(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_torch(v) for v in value)
    return value


class IterableDataset(_tud.IterableDataset):
    """An endless stream of batches from a loaderx ``DataLoader``, as tensors.

    Args:
        loader (DataLoader): The loader to run; its batch size, sampler mode, seed, transform
            and shard decide every batch. It pickles as its config and position, so it reaches
            spawned workers. Inside a torch worker each batch is computed on the worker's own
            thread; with ``num_workers=0`` the loader's own worker threads prefetch.

    Every iterator starts at the same step: the loader's when the dataset was made, or the
    step of the last :meth:`load_state_dict`, whatever the torch worker count. The stream is
    endless, so iterate it once (``for step, batch in zip(range(n), loader)``); to continue
    in a new iterator, load ``state_dict(step=k)`` first.
    """

    def __init__(self, loader: DataLoader[Any]) -> None:
        if not isinstance(loader, DataLoader):
            raise TypeError(f"IterableDataset takes a loaderx DataLoader, got {type(loader).__name__}")
        self.loader = loader
        self._base = loader.step  # the first step of worker 0 (of the only iterator without workers)
        self._next: int | None = None  # the next step this process's iterator yields, once iterating

    def __iter__(self) -> Iterator[Any]:
        info = _tud.get_worker_info()
        if info is None:
            return self._in_process(self._base)
        return self._in_worker(self._base + info.id, info.num_workers)

    def _in_process(self, start: int) -> Iterator[Any]:
        loader = self.loader
        loader.seek(start)
        self._next = start
        while True:
            batch = next(loader)
            self._next += 1
            yield to_torch(batch)

    def _in_worker(self, start: int, stride: int) -> Iterator[Any]:
        self._next = start
        produce = self.loader._produce
        while True:
            batch = produce(self._next)
            self._next += stride
            yield to_torch(batch)

    def state_dict(self, step: int | None = None) -> dict[str, Any]:
        """The loader state to resume from: at global ``step`` when given (the number of batches
        the training loop has taken), else where this iterator stands (what StatefulDataLoader
        records in each worker)."""
        if step is None:
            step = self._base if self._next is None else self._resume_base()
        return self.loader._state_at(step).to_dict()

    def _resume_base(self) -> int:
        # In worker w of W, after yielding step s the next is s + W: recording (next - w) as
        # the base makes the restored worker w start at base + w = next again.
        info = _tud.get_worker_info()
        return self._next - (info.id if info is not None else 0)  # type: ignore[operator]  # iterating

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at the state's step (refused, with the differences, when the state comes from
        another loader config)."""
        self._base, self._next = self.loader._load_state(state).step, None

    def metrics(self) -> dict[str, Any]:
        """The loader's :meth:`~loaderx.dataloader.DataLoader.metrics` in this process. With
        ``num_workers=0`` that is the whole run (its own worker threads' stages, and what each
        batch waited); under torch worker processes each worker records its own steps' stages
        in its copy of the loader, so this process shows none of them."""
        return self.loader.metrics()


class _Rows:
    """A gathered batch as the list of samples torch's default collation expects, built lazily
    from the batch arrays; :func:`collate` takes the arrays as they are."""

    __slots__ = ("arrays", "n")

    def __init__(self, arrays: Any, n: int) -> None:
        self.arrays, self.n = arrays, n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(self.n))]
        if not -self.n <= i < self.n:
            raise IndexError(i)
        if isinstance(self.arrays, dict):
            return {name: values[i] for name, values in self.arrays.items()}
        return self.arrays[i]

    def __iter__(self) -> Iterator[Any]:
        return (self[i] for i in range(self.n))


class Dataset(_tud.Dataset):
    """Map-style access to named streams (``{name: DenseDataset or RaggedDataset}``, all of one
    length, record ``i`` lined up across them), or to one dataset.

    ``ds[i]`` is a sample (``{name: array}``, or the array); ``ds.__getitems__(indices)``, which
    torch's DataLoader calls for a whole batch, reads each stream once. Datasets pickle by path,
    so this works in worker processes under fork and spawn.
    """

    def __init__(self, streams: Mapping[str, DenseDataset | RaggedDataset] | DenseDataset | RaggedDataset) -> None:
        self.streams: Any = dict(streams) if isinstance(streams, dict) else streams
        sizes = {len(s) for s in self.streams.values()} if isinstance(self.streams, dict) else {len(self.streams)}
        if len(sizes) != 1:
            raise ValueError(f"all streams must have the same length, got {sorted(sizes)}")
        self._len = sizes.pop()

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, i: Index) -> Any:
        if isinstance(self.streams, dict):
            return {name: s[i] for name, s in self.streams.items()}
        return self.streams[i]

    def __getitems__(self, indices: Sequence[int] | npt.NDArray[np.integer[Any]]) -> _Rows:
        idx = np.asarray(indices, dtype=np.int64)
        if isinstance(self.streams, dict):
            arrays = {name: s[idx] for name, s in self.streams.items()}
        else:
            arrays = self.streams[idx]
        return _Rows(arrays, len(idx))


def collate(batch: Any) -> Any:
    """torch's ``collate_fn`` for :class:`Dataset`: a batch from ``__getitems__`` becomes
    tensors sharing the gathered arrays' memory (ragged streams stay lists of tensors); any
    other batch goes to torch's ``default_collate``."""
    if isinstance(batch, _Rows):
        return to_torch(batch.arrays)
    return _tud.default_collate(batch)


class BatchSampler(_tud.Sampler):
    """This rank's slice of loaderx's global batches, for ``batch_sampler=``.

    Args:
        length (int): Records in the dataset.
        batch_size (int): The global batch size; ``shard_count`` must divide it.
        mode (str | int): Sampler mode, ``"sequential"``, ``"iid"`` (the default) or ``"cyclic"``
            (or 0, 1, 2; see :mod:`loaderx.sampler`).
        seed (int): Defaults to 42.
        shard_index, shard_count (int): This rank's place; each defaults to torch.distributed's
            rank or world size (0 of 1 when it is not initialised).
        steps (int): Batches per iteration (a torch "epoch"); each iteration continues where the
            last one stopped. ``None`` (the default) iterates without end.

    Step ``k``'s global batch is ``Sampler(length, batch_size, mode, seed).batch_at(k)``; rank
    ``r`` of ``R`` takes its ``r``-th slice of ``batch_size / R`` indices (the rule of
    :class:`loaderx._state.Shard`, as in the DataLoader).
    """

    def __init__(
        self,
        length: int,
        batch_size: int,
        mode: int | str = 1,
        seed: int = 42,
        *,
        shard_index: int | None = None,
        shard_count: int | None = None,
        steps: int | None = None,
    ) -> None:
        self.sampler = Sampler(length, batch_size, mode, seed)
        self._shard = Shard.of(shard_index, shard_count, Shard.torch)
        self.shard_index, self.shard_count = self._shard.index, self._shard.count
        self._rows = self._shard.rows(self.sampler.batch_len)  # the global batch must split evenly
        if steps is not None and int(steps) < 1:
            raise ValueError(f"steps must be at least 1 or None, got {steps}")
        self.steps = None if steps is None else int(steps)
        self._next = 0
        s = self.sampler
        self._config = base_config(s.length, s.batch_size, int(s.mode), s.seed)

    def __len__(self) -> int:
        if self.steps is None:
            raise TypeError("an endless BatchSampler has no length; pass steps=")
        return self.steps

    def __iter__(self) -> Iterator[list[int]]:
        end = None if self.steps is None else self._next + self.steps
        while end is None or self._next < end:
            idxs = self.sampler.batch_at(self._next)[self._rows]
            self._next += 1
            yield idxs.tolist()

    def state_dict(self, step: int | None = None) -> dict[str, Any]:
        """The loader state at ``step`` (default: the next step this sampler hands out)."""
        return LoaderState(self._next if step is None else int(step), dict(self._config), self.shard_count).to_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at the state's step (refused, with the differences, when the state comes
        from another length, batch size, mode or seed)."""
        self._next = LoaderState.load(state, self._config).step
