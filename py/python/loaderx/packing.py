"""Packed token batches for language-model training: :meth:`loaderx.dataloader.DataLoader.packed`.

A source of documents (a :class:`~loaderx.dataset.RaggedDataset` of integer tokens, one document
per record, over a store or a manifest) becomes dense ``(rows, seq_len)`` batches. Which tokens
fill each row is planned in ``loaderx-core`` (``loaderx_core::pack``, which the wasm build
shares) and read by the engine: each document a batch needs is read once, through the same read
path (and checksum checks) as every other read. A batch is a dict of ``(rows, seq_len)`` arrays:

* ``tokens``: the source's dtype; padding is 0;
* ``segment_ids`` (int32): 1, 2, … for each document within a row, 0 for padding (the attention
  mask: a slot attends to the earlier slots of its own segment);
* ``positions`` (int32): from 0 in each segment of a row;
* ``doc_index`` and ``doc_offset`` (int64): the record, and the token of it, each slot came
  from; -1 for padding.

Two packings (``packing=``):

* ``"concat"``: the documents, in the sampler's order, as one token stream cut into rows. Rows
  are always full; a document may continue from one row into the next. Every epoch holds
  exactly the store's tokens, so in ``"cyclic"`` and ``"sequential"`` mode the first epoch's
  batches hold every token of every document exactly once.
* ``"best_fit"``: whole documents, each into the open row with the least room that still fits
  it (at most ``bins`` rows open; when all are open, the fullest is closed to make room). A
  document longer than ``seq_len`` is split into ``seq_len``-token rows of its own and a rest,
  which is packed like a document. Padding fills what whole documents leave.

Batch ``k`` is rows ``[k * batch_size, (k + 1) * batch_size)`` of the stream: a pure function of
the seed and ``k``, so resume, seek and elastic resume (another ``shard_count``) work exactly as
for dense streams.

Exclusion masks (``exclude=``, :mod:`loaderx.mask`): a source's stream is planned over its kept
records alone, exactly as over a store holding only them; ``doc_index`` names the records
themselves, so an excluded record never feeds a row.

Mixing: given several sources and ``weights`` (or a schedule), each source is its own packed
stream (source ``j`` seeded with :func:`source_seed`), and each batch's rows are split among
them by weight exactly as :meth:`~loaderx.dataloader.DataLoader.mix` splits records: the
largest-remainder share of the batch, at every step, each source's rows taken in its stream's
order. A state records each stream's position, and resumes with new weights or a new schedule.
A mixed batch also holds ``source`` (int32, one per row): the source each row came from, whose
records its ``doc_index`` counts.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from . import _loaderx
from ._state import Shard
from .errors import BadArgumentError

if TYPE_CHECKING:
    from ._typing import Batch
    from .dataset import RaggedDataset
    from .mask import Mask
    from .mix import MixSampler

__all__ = ["DEFAULT_BINS", "KEYS", "PACKINGS", "PackedSource", "source_seed"]

#: The arrays of a packed batch, in the order the engine returns them.
KEYS = ("tokens", "segment_ids", "positions", "doc_index", "doc_offset")

#: The packings :meth:`~loaderx.dataloader.DataLoader.packed` takes.
PACKINGS = ("concat", "best_fit")
#: Rows ``"best_fit"`` keeps open at once by default.
DEFAULT_BINS = 128


def check_packing(seq_len: Any, packing: Any, bins: Any) -> tuple[int, str, int]:
    """The packing arguments, checked."""
    if packing not in PACKINGS:
        raise BadArgumentError.new(f"packing must be one of {PACKINGS}, got {packing!r}")
    for name, value in (("seq_len", seq_len), ("bins", bins)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < 1:
            raise BadArgumentError.new(f"{name} must be a positive integer, got {value!r}")
    if int(seq_len) >= 1 << 31:
        raise BadArgumentError.new(f"seq_len must be below 2^31, got {seq_len}")
    return int(seq_len), str(packing), int(bins)


def check_source(source: Any) -> RaggedDataset:
    """The source as a RaggedDataset of integer tokens, or a TypeError saying what it takes."""
    from .dataset import RaggedDataset

    if not isinstance(source, RaggedDataset):
        raise TypeError(
            f"packed() takes a RaggedDataset of tokens (one document per record), got a {type(source).__name__}"
        )
    if source.item_shape != () or source.dtype.kind not in "iu":
        raise TypeError(
            f"packed() packs 1-D records of integer tokens; {source!r} holds records of "
            f"{source.dtype} rows of shape {source.item_shape}"
        )
    return source


def source_seed(seed: int, j: int) -> int:
    """The seed of mixed source ``j``'s packed stream (source 0's is ``seed``), as core's mixer
    keys its streams."""
    return (seed ^ _rotl((j * 0x9E3779B97F4A7C15) % 2**64, 17)) % 2**64


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) % 2**64


class PackedSource:
    """The gather half of a packed loader's step: this shard's rows of global batch ``step``.
    With a ``mix``, each dataset is its own packed stream and the mix says which rows of which
    stream fill each batch (:class:`loaderx.mix.MixSampler`, by stream position).

    Pickles as the datasets and the packing arguments; the plans are made again where it is
    unpickled (a worker process), on first use.
    """

    def __init__(
        self,
        datasets: Sequence[RaggedDataset],
        seq_len: int,
        batch_size: int,
        packing: str,
        bins: int,
        mode: int,
        seed: int,
        shard: Shard,
        mix: MixSampler | None = None,
        masks: Sequence[Mask | None] | None = None,
    ) -> None:
        self.datasets = list(datasets)
        #: Each source's exclusion mask (or None): its stream packs the kept records only.
        self.masks = list(masks) if masks is not None else [None] * len(self.datasets)
        self.seq_len, self.batch_size, self.packing, self.bins = seq_len, batch_size, packing, bins
        self.mode, self.seed, self.shard, self.mix = mode, seed, shard, mix
        self.rows = shard.per(batch_size)
        self.dtype = self.datasets[0].dtype
        self._packers: list[_loaderx.Packer | None] = [None] * len(self.datasets)
        self._lock = threading.Lock()

    def packer(self, j: int = 0) -> _loaderx.Packer:
        """Source ``j``'s plan (made on first use: the documents' lengths are read from the
        table)."""
        with self._lock:
            p = self._packers[j]
            if p is None:
                p = self._packers[j] = self._plan(j)
            return p

    def _plan(self, j: int) -> _loaderx.Packer:
        ds, mask = self.datasets[j], self.masks[j]
        n = len(ds)
        if n == 0:
            raise BadArgumentError.new(f"{ds!r} holds no documents: nothing to pack")
        docs = np.arange(n, dtype=np.uint64) if mask is None else mask.select(np.arange(mask.kept, dtype=np.uint64))
        byte_lens = ds.engine.lengths(docs)
        lengths = (byte_lens // ds.dtype.itemsize).astype(np.uint32)
        seed = source_seed(self.seed, j)
        inner = None if mask is None else mask._m
        return _loaderx.Packer(lengths, self.seq_len, self.packing, self.bins, self.mode, seed, inner)

    def _read(self, j: int, first: int, rows: int) -> tuple[Any, ...]:
        ds = self.datasets[j]
        tokens, ids, pos, doc, off = self.packer(j).rows(ds.engine, first, rows, ds.dtype.itemsize)
        shape = (rows, self.seq_len)
        return (tokens.view(ds.dtype).reshape(shape), *(a.reshape(shape) for a in (ids, pos, doc, off)))

    def batch(self, step: int) -> Batch:
        return self.batch_timed(step)[0]

    def batch_timed(self, step: int) -> tuple[Batch, float]:
        """The batch, and the clock when its rows were chosen (the engine plans each row's
        documents as it reads them)."""
        from ._metrics import clock

        if self.mix is None:
            first = step * self.batch_size + self.shard.index * self.rows
            sampled = clock()
            return dict(zip(KEYS, self._read(0, first, self.rows))), sampled
        sources, positions = self.mix.slots_at(step)
        cut = self.shard.rows(self.batch_size)
        sources, positions = sources[cut], positions[cut]
        sampled = clock()
        shape = (self.rows, self.seq_len)
        out = [np.zeros(shape, self.dtype), *(np.zeros(shape, t) for t in (np.int32, np.int32, np.int64, np.int64))]
        for j in np.unique(sources).tolist():
            slots = np.flatnonzero(sources == j)
            # A source's slots hold consecutive positions of its stream.
            got = self._read(j, int(positions[slots[0]]), len(slots))
            for array, part in zip(out, got):
                array[slots] = part
        batch = dict(zip(KEYS, out))
        # Which source each row came from (its doc_index counts that source's records).
        batch["source"] = sources.astype(np.int32)
        return batch, sampled

    def config(self) -> dict[str, Any]:
        """What a state records of the packing (besides the sampler's mode and seed)."""
        out: dict[str, Any] = {"seq_len": self.seq_len, "packing": self.packing}
        if self.packing == "best_fit":
            out["bins"] = self.bins
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_packers"] = [None] * len(self.datasets)
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
