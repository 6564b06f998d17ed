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
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _loaderx
from ._state import Shard
from .errors import BadArgumentError

if TYPE_CHECKING:
    from ._typing import Batch
    from .dataset import RaggedDataset

__all__ = ["PACKINGS", "DEFAULT_BINS", "PackedSource"]

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


class PackedSource:
    """The gather half of a packed loader's step: this shard's rows of global batch ``step``.

    Pickles as the dataset and the packing arguments; the plan is made again where it is
    unpickled (a worker process), on first use.
    """

    def __init__(
        self,
        dataset: RaggedDataset,
        seq_len: int,
        batch_size: int,
        packing: str,
        bins: int,
        mode: int,
        seed: int,
        shard: Shard,
    ) -> None:
        self.dataset = dataset
        self.seq_len, self.batch_size, self.packing, self.bins = seq_len, batch_size, packing, bins
        self.mode, self.seed, self.shard = mode, seed, shard
        self.rows = shard.per(batch_size)
        self._packer: _loaderx.Packer | None = None
        self._lock = threading.Lock()

    @property
    def packer(self) -> _loaderx.Packer:
        """The plan (made on first use: the documents' lengths are read from the table)."""
        with self._lock:
            if self._packer is None:
                self._packer = self._plan()
            return self._packer

    def _plan(self) -> _loaderx.Packer:
        ds = self.dataset
        n = len(ds)
        if n == 0:
            raise BadArgumentError.new(f"{ds!r} holds no documents: nothing to pack")
        byte_lens = ds.engine.lengths(np.arange(n, dtype=np.uint64))
        lengths = (byte_lens // ds.dtype.itemsize).astype(np.uint32)
        return _loaderx.Packer(lengths, self.seq_len, self.packing, self.bins, self.mode, self.seed)

    def batch(self, step: int) -> Batch:
        first = step * self.batch_size + self.shard.index * self.rows
        ds = self.dataset
        tokens, ids, pos, doc, off = self.packer.rows(ds.engine, first, self.rows, ds.dtype.itemsize)
        shape = (self.rows, self.seq_len)
        return {
            "tokens": tokens.view(ds.dtype).reshape(shape),
            "segment_ids": ids.reshape(shape),
            "positions": pos.reshape(shape),
            "doc_index": doc.reshape(shape),
            "doc_offset": off.reshape(shape),
        }

    def config(self) -> dict[str, Any]:
        """What a state records of the packing (besides the sampler's mode and seed)."""
        out: dict[str, Any] = {"seq_len": self.seq_len, "packing": self.packing}
        if self.packing == "best_fit":
            out["bins"] = self.bins
        return out

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_packer"] = None
        del state["_lock"]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
