"""Typed NumPy views over a store, one class per record shape.

Drop-in compatible with ``loaderx.dataset`` of loaderx 0.9.11. A ``schema.msgpack`` in the store
records the per-row dtype, ``item_shape`` and ``kind``:

* :class:`DenseDataset`: every record is exactly one row of ``item_shape``. A read gathers at a
  fixed stride straight into the array it returns, and a record of the wrong size is an error.
  This is what :class:`loaderx.dataloader.DataLoader` reads.
* :class:`RaggedDataset`: a record is ``(rows, *item_shape)``; a read returns a list of arrays.
  :func:`pad` turns such a list into a dense batch.
* :class:`ImageDataset`: a store of encoded images (``from_images``) read as dense
  ``(B, H, W, 3)`` pictures, decoded, cropped, resized and mirrored by the engine.

Indexing takes an int (negative counts from the end), a slice, a list or integer array, or a
boolean mask, and out-of-range indices raise :class:`IndexError`. Datasets pickle by path and
reopen their store after ``fork()``, so they work inside torch ``DataLoader`` workers.
"""

from __future__ import annotations

import operator
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence, cast, overload

import numpy as np
import numpy.typing as npt

from . import _loaderx
from ._closing import Closing
from .arrow import Exports
from .errors import BadArgumentError, StoreClosedError, StoreNotFoundError
from .manifest import _Joined, _manifest_file, _Records
from .zrecord import CODECS, SCHEMA, Zrecord, _engine_ready, _indices, _location, _shown

if TYPE_CHECKING:
    from typing_extensions import Self

    from ._typing import Cache, Index, IndexArray, StrPath

__all__ = ["DenseDataset", "RaggedDataset", "ImageDataset", "pad"]


def pad(
    records: Sequence[npt.NDArray[Any]], max_len: int | None = None, pad_value: Any = 0
) -> tuple[npt.NDArray[Any], npt.NDArray[np.int64]]:
    """Pad a list of ragged arrays into a dense ``(B, max_len, *tail)`` stack.

    Returns ``(padded, lengths)``, where ``lengths`` is each record's row count. ``max_len``
    defaults to the longest record; a record longer than an explicit ``max_len`` is an error,
    never a silent truncation.
    """
    b = len(records)
    if b == 0:
        raise ValueError("pad needs at least one record")
    records = [np.asarray(r) for r in records]
    lengths = np.array([len(r) for r in records], dtype=np.int64)
    longest = int(lengths.max())
    ml = longest if max_len is None else int(max_len)
    if longest > ml:
        raise ValueError(f"a record has {longest} rows, over max_len={ml}")
    first = records[0]
    padded = np.full((b, ml, *first.shape[1:]), pad_value, dtype=first.dtype)
    for i, r in enumerate(records):
        padded[i, : len(r)] = r
    return padded, lengths


def _open(
    path: StrPath, kind: str | None, storage_options: dict[str, str] | None, cache: Cache | None, verify: str = "fetched"
) -> tuple[Zrecord | _Records, _loaderx.Schema]:
    """The store at ``path`` (a directory or a URL), or the stores of a manifest
    (:mod:`loaderx.manifest`), and the schema, checked for ``kind`` by the engine. Opening never
    creates a store."""
    where = _location(path)
    shown = _shown(where) if isinstance(where, str) else os.fspath(where)
    if isinstance(where, Path) and not where.exists():
        raise StoreNotFoundError.new(f"{shown}: no such directory; there is no dataset there")
    if isinstance(where, Path) and where.is_file() and where.suffix != ".json":
        raise StoreNotFoundError.new(f"{shown} is a file; a dataset is a store's directory or a manifest (.json)")
    missing = StoreNotFoundError.new(f"{shown}: no {SCHEMA} there; it is not a loaderx dataset")
    listed = _manifest_file(where)
    if listed is not None:
        store = _Records(listed, storage_options, cache, verify)
    elif isinstance(where, Path) and not (where / _loaderx.META_FILE).is_file():
        raise missing
    else:
        store = Zrecord._existing(where, storage_options, cache, verify)
    schema = store.engine.schema()
    if schema is None:
        store.close()
        raise missing
    schema.validate(kind)
    return store, schema


class _Base(Exports, Closing):
    """What both kinds share: the schema, the store handle and index parsing."""

    _kind: ClassVar[str | None] = None
    _store: Zrecord | _Records | _Joined | None
    _schema: _loaderx.Schema

    if TYPE_CHECKING:

        def __getitems__(self, idxs: Index) -> Any: ...
        def _shaped(self, got: Any, shape: tuple[int, ...]) -> Any: ...

    def __init__(
        self, path: StrPath, storage_options: dict[str, str] | None = None, cache: Cache | None = None, verify: str = "fetched"
    ) -> None:
        self._setup(*_open(path, self._kind, storage_options, cache, verify))

    @classmethod
    def _join(cls, parts: Sequence[_Base]) -> Self:
        """``parts`` (datasets of this class, with one record layout) as one dataset, in order:
        part ``j``'s record ``e`` is record ``sum(len(parts[:j])) + e``, read by the engine's
        join (``loaderx_native::Joined``). How mixing reads its sources; pickles as its parts."""
        joined = cls.__new__(cls)
        joined._setup(_Joined(parts), parts[0]._schema)
        return joined

    def _setup(self, store: Zrecord | _Records | _Joined, schema: _loaderx.Schema) -> None:
        self._store = store
        self._schema = schema
        self.path = self._store.path
        self.dtype = np.dtype(self._schema.dtype)
        self.item_shape = tuple(self._schema.item_shape)
        self._row_bytes = self._schema.item_bytes
        self.schema = self._schema.to_dict()
        codec = self._schema.codec
        self.codec = codec if codec is not None else "zstd"
        self._store.codec = self.codec if self.codec in CODECS else "zstd"

    def _open_store(self) -> Zrecord | _Records | _Joined:
        """The store handle, or :class:`StoreClosedError` after :meth:`close`."""
        store = self._store
        if store is None:
            raise StoreClosedError.new(f"I/O operation on a closed {type(self).__name__}")
        return store

    @property
    def engine(self) -> _loaderx.Handle:
        """The native handle the dataset reads through (its store's, a manifest's or a mix's);
        :class:`~loaderx.errors.StoreClosedError` after :meth:`close`."""
        return self._open_store().engine

    @property
    def verify_mode(self) -> str:
        """Which reads are checked against the checksums: ``"off"``, ``"fetched"`` or
        ``"always"`` (see :data:`loaderx.zrecord.VERIFY_MODES`)."""
        return self._open_store().verify_mode

    def _set_verify(self, verify: str) -> None:
        """Change which reads are checked (how ``DataLoader(verify=...)`` sets its streams)."""
        self._open_store().set_verify(verify)

    @property
    def digest(self) -> str | None:
        """The digest of the dataset's content (``"sha256:..."``; a manifest's or a mix's
        combines its stores' in order), from schemas, tables and checksums, never the records.
        ``None`` unless checksums cover every record (``loaderx checksum add``)."""
        return self.engine.digest()

    def __len__(self) -> int:
        return len(self._open_store())

    def __repr__(self) -> str:
        state = "closed" if self._store is None else f"{len(self)} x"
        return f"{type(self).__name__}({_shown(os.fspath(self.path))!r}, {state} {self.item_shape} {self.dtype})"

    def __reduce__(self) -> tuple[Any, ...]:
        if isinstance(self._store, _Joined):
            return (type(self)._join, (self._store.parts,))
        store = self._store
        return (type(self), (os.fspath(self.path), store.storage_options, store.cache, store.verify_mode))  # type: ignore[union-attr]

    def _idxs(self, idx: Index) -> npt.NDArray[np.uint64]:
        """Any supported index as a contiguous uint64 array, bounds-checked (by the engine)."""
        if _engine_ready(idx):  # what samplers and loaders pass; small batches are mostly overhead
            return idx
        n = len(self)
        if isinstance(idx, slice):
            return np.arange(*idx.indices(n), dtype=np.uint64)
        if isinstance(idx, (int, np.integer)):
            idx = [operator.index(idx)]
        a = np.asarray(idx) if not isinstance(idx, np.ndarray) else idx
        if a.dtype == np.bool_:
            if a.shape != (n,):
                raise IndexError(f"boolean mask of shape {a.shape} does not match a dataset of {n} records")
            return np.flatnonzero(a).astype(np.uint64)
        return _indices(idx, n)

    def _listing(self) -> list[list[Any]] | None:
        """For a dataset over a manifest, its stores as listed with their records (what a loader
        state records, so a state from another set of stores is refused); None for one store."""
        listing = getattr(self._store, "listing", None)
        return listing() if listing is not None else None

    def __getitem__(self, idx: Index) -> Any:
        if isinstance(idx, (int, np.integer)):
            return self.__getitems__(idx)[0]
        shape: tuple[int, ...] = ()
        if isinstance(idx, np.ndarray):
            shape = idx.shape
        elif isinstance(idx, (list, tuple)) and idx and isinstance(idx[0], (list, tuple, np.ndarray)):
            shape = np.shape(cast("npt.ArrayLike", idx))  # nested lists: NumPy's shape, as for an array
        got = self.__getitems__(idx)
        if len(shape) > 1 and not (isinstance(idx, np.ndarray) and idx.dtype == np.bool_):
            return self._shaped(got, shape)  # as NumPy: an index array of shape S gives S + item
        return got

    def close(self) -> None:
        store = getattr(self, "_store", None)
        if store is not None:
            store.close()
            self._store = None


class DenseDataset(_Base):
    """Fixed-shape records: ``ds[idxs]`` is an array of shape ``(len(idxs), *item_shape)``,
    ``ds[i]`` one sample of shape ``item_shape``. An index array of more dimensions gives its
    shape followed by ``item_shape``, as in NumPy.

    Args:
        path (str | Path): The store's directory, a manifest (``manifest.json`` or a directory
            holding one, :mod:`loaderx.manifest`), a ``file://`` URL of either, or a remote
            store's URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``; read-only). Opening
            never creates anything: a path with no dataset is a
            :class:`~loaderx.errors.StoreNotFoundError`.
        storage_options (dict, optional): For URLs: credentials, endpoint, region and the like,
            as ``object_store`` names them (``{"aws_endpoint": ..., "aws_allow_http": "true"}``);
            by default they come from the environment (``AWS_ACCESS_KEY_ID``, ...).
        cache (tuple, optional): ``(directory, max_bytes)``: for a URL, keep fetched chunk
            blocks in ``directory`` on local disk, at most ``max_bytes`` (least recently used
            go first), shared by every process that names it. Ignored for local stores.
        verify (str): Which reads are checked against the per-record checksums
            (``checksums.lx``): ``"off"``, ``"fetched"`` (the default: every byte that comes
            over the network, before it is returned or cached) or ``"always"`` (local reads
            too). A mismatch raises :class:`~loaderx.errors.ChecksumError`.

    Close with :meth:`close` (or ``with``); after it, ``len()`` and indexing raise
    :class:`~loaderx.errors.StoreClosedError`.
    """

    _kind = "dense"

    if TYPE_CHECKING:

        @overload
        def __getitem__(self, idx: int | np.integer[Any]) -> Any: ...
        @overload
        def __getitem__(self, idx: IndexArray) -> npt.NDArray[Any]: ...
        def __getitem__(self, idx: Index) -> Any: ...

    def __getitems__(self, idxs: Index) -> npt.NDArray[Any]:
        idxs = self._idxs(idxs)
        flat = self.engine.gather_fixed_new(idxs, self._row_bytes)
        return flat.view(self.dtype).reshape((idxs.size, *self.item_shape))

    def _shaped(self, batch: npt.NDArray[Any], shape: tuple[int, ...]) -> npt.NDArray[Any]:
        return batch.reshape((*shape, *self.item_shape))


class RaggedDataset(_Base):
    """Variable-length records: ``ds[i]`` is one ``(rows, *item_shape)`` array, ``ds[idxs]``
    a list of them (views into one gathered buffer); an index array of more dimensions gives
    nested lists of its shape. Takes the arguments of :class:`DenseDataset` (``path``,
    ``storage_options``, ``cache``)."""

    _kind = "ragged"

    if TYPE_CHECKING:

        @overload
        def __getitem__(self, idx: int | np.integer[Any]) -> npt.NDArray[Any]: ...
        @overload
        def __getitem__(self, idx: slice | Sequence[int | np.integer[Any]]) -> list[npt.NDArray[Any]]: ...
        @overload
        def __getitem__(self, idx: IndexArray) -> list[Any]: ...
        def __getitem__(self, idx: Index) -> Any: ...

    def __getitems__(self, idxs: Index) -> list[npt.NDArray[Any]]:
        idxs = self._idxs(idxs)
        # One engine call: every length checked against the schema, the records back to back in
        # a recycled buffer. The samples are views into it, cut at Python-int row bounds.
        flat, byte_lens = self.engine.gather_ragged_new(idxs, self._schema)
        values = flat.view(self.dtype).reshape((flat.size // self._row_bytes, *self.item_shape))
        ends = np.cumsum(byte_lens // self._row_bytes, dtype=np.int64).tolist()
        return [values[a:b] for a, b in zip([0, *ends], ends)]

    def _shaped(self, records: list[Any], shape: tuple[int, ...]) -> list[Any]:
        """The records as nested lists of ``shape`` (NumPy's shape of the index array)."""
        if len(shape) == 1:
            return records
        step = len(records) // shape[0] if shape[0] else 0
        return [self._shaped(records[k * step : (k + 1) * step], shape[1:]) for k in range(shape[0])]


#: The crops :class:`ImageDataset` makes.
CROPS = ("center", "random_resized", "none")
RESIZES = ("fast", "exact")


class ImageDataset(_Base):
    """A store of encoded images (JPEG, PNG, WebP; :func:`loaderx.converter.from_images`) read
    as a dense stream of pictures: ``ds[idxs]`` is a ``(len(idxs), H, W, 3)`` array.

    Each record is decoded, cropped, resized (bilinear with antialiasing, as Pillow and
    torchvision's v2 ``Resize`` do; only the crop is filtered, as in ``crop(box).resize(size)``)
    and mirrored on the engine's threads with the GIL released.
    Grey and CMYK images become RGB, alpha is dropped and the EXIF orientation is applied.

    Args:
        path: The store, as for :class:`DenseDataset` (also a manifest or a URL).
        size: ``(H, W)`` of every picture (an int for a square).
        crop: ``"center"``: the largest centred part with the output's aspect ratio, resized;
            ``"random_resized"``: torchvision's ``RandomResizedCrop(size, scale, ratio)``;
            ``"none"``: the whole image, which must already be ``H x W`` (else an
            :class:`~loaderx.errors.ImageDecodeError`).
        flip: The probability of a horizontal mirror; ``True`` is 0.5 (torchvision's
            ``RandomHorizontalFlip``), ``False`` never.
        dtype: ``np.uint8`` (the default) or ``np.float32`` (values scaled to ``[0, 1]``, as
            torchvision's ``ToDtype(torch.float32, scale=True)``).
        scale, ratio: ``RandomResizedCrop``'s area share and aspect-ratio range.
        resize: ``"fast"`` (the default): SIMD fixed-point arithmetic within 2 of Pillow's, and
            JPEGs decoded at a reduced DCT scale where the crop stays at least twice the output;
            ``"exact"``: Pillow's own arithmetic at full decode scale, so a lossless image (PNG,
            lossless WebP) gives exactly Pillow's ``crop(box).resize(size, BILINEAR)``, at about
            half the resize speed.
        seed: Keys the random crops and mirrors. ``None`` (the default) takes the DataLoader's
            seed; read directly (``ds[idxs]``), it is 0.
        max_pixels: The largest image (width x height) decoded; a larger one is an
            :class:`~loaderx.errors.ImageDecodeError` before any pixel is decoded (Pillow's
            decompression-bomb limit by default).
        storage_options, cache, verify: As for :class:`DenseDataset`.

    The crop and mirror of record ``i`` at loader step ``k`` depend only on ``(seed, k, i)``, so
    batches are the same for any worker count and a resumed run repeats them exactly. A record
    that does not decode raises :class:`~loaderx.errors.ImageDecodeError` naming it.
    """

    _kind = "ragged"

    def __init__(
        self,
        path: StrPath,
        size: int | tuple[int, int],
        crop: str = "center",
        flip: bool | float = False,
        dtype: Any = np.uint8,
        scale: tuple[float, float] = (0.08, 1.0),
        ratio: tuple[float, float] = (3 / 4, 4 / 3),
        seed: int | None = None,
        max_pixels: int = _loaderx.MAX_PIXELS,
        storage_options: dict[str, str] | None = None,
        cache: Cache | None = None,
        verify: str = "fetched",
        resize: str = "fast",
    ) -> None:
        self._options = _image_options(size, crop, flip, dtype, scale, ratio, seed, max_pixels, resize)
        super().__init__(path, storage_options, cache, verify)

    def _setup(self, store: Zrecord | _Records | _Joined, schema: _loaderx.Schema) -> None:
        super()._setup(store, schema)
        if self.dtype != np.uint8 or self.item_shape != ():
            shown = _shown(os.fspath(self.path))
            self.close()
            raise BadArgumentError.new(
                f"{shown} holds {self.dtype} records of rows {self.item_shape}; an ImageDataset reads a "
                "store of encoded images (uint8 byte strings, as from_images writes)"
            )
        o = self._options
        height, width = o["size"]
        self._images = _loaderx.Images(
            height, width, o["crop"], o["scale"], o["ratio"], o["flip"], o["max_pixels"], o["resize"]
        )
        self.media = self.schema.get("media")
        self.dtype = np.dtype(o["dtype"])
        self.item_shape = (*o["size"], 3)

    @classmethod
    def _join(cls, parts: Sequence[_Base]) -> Self:
        joined = cls.__new__(cls)
        joined._options = cast("ImageDataset", parts[0])._options
        joined._setup(_Joined(parts), parts[0]._schema)
        return joined

    def __reduce__(self) -> tuple[Any, ...]:
        if isinstance(self._store, _Joined):
            return (type(self)._join, (self._store.parts,))
        store = cast("Zrecord | _Records", self._store)
        where = (os.fspath(self.path), store.storage_options, store.cache, store.verify_mode)
        return (_reopen_images, (where, self._options))

    @property
    def seed(self) -> int | None:
        """The seed of the crops and mirrors (``None``: the DataLoader's)."""
        return cast("int | None", self._options["seed"])

    def __getitems__(self, idxs: Index) -> npt.NDArray[Any]:
        return self.at_step(idxs, 0)

    def at_step(self, idxs: Index, step: int, seed: int | None = None) -> npt.NDArray[Any]:
        """The pictures of records ``idxs`` as loader step ``step`` makes them: the crops and
        mirrors keyed by ``(seed, step, record)``. ``seed`` is the dataset's own when it has
        one, else this argument (the DataLoader passes its own), else 0."""
        idxs = self._idxs(idxs)
        own = self._options["seed"]
        key = own if own is not None else (seed if seed is not None else 0)
        batch = self._images.read(self.engine, idxs, int(key) & (2**64 - 1), int(step))
        if self.dtype == np.uint8:
            return batch
        out = batch.astype(np.float32)
        out *= np.float32(1 / 255)
        return out

    def _shaped(self, batch: npt.NDArray[Any], shape: tuple[int, ...]) -> npt.NDArray[Any]:
        return batch.reshape((*shape, *self.item_shape))

    def __repr__(self) -> str:
        state = "closed" if self._store is None else f"{len(self)} x"
        o = self._options
        return (
            f"ImageDataset({_shown(os.fspath(self.path))!r}, {state} {self.item_shape} {self.dtype}, "
            f"crop={o['crop']!r}, flip={o['flip']})"
        )


def _image_options(
    size: int | tuple[int, int],
    crop: str,
    flip: bool | float,
    dtype: Any,
    scale: tuple[float, float],
    ratio: tuple[float, float],
    seed: int | None,
    max_pixels: int,
    resize: str = "fast",
) -> dict[str, Any]:
    """ImageDataset's arguments, checked (the engine checks the numbers again)."""
    hw = (size, size) if isinstance(size, (int, np.integer)) else tuple(size)
    if len(hw) != 2 or not all(isinstance(v, (int, np.integer)) and v > 0 for v in hw):
        raise ValueError(f"size must be a positive int or (height, width), got {size!r}")
    if crop not in CROPS:
        raise ValueError(f"crop must be one of {CROPS}, got {crop!r}")
    if resize not in RESIZES:
        raise ValueError(f"resize must be one of {RESIZES}, got {resize!r}")
    p = 0.5 if flip is True else 0.0 if flip is False else float(flip)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"flip must be True, False or a probability in [0, 1], got {flip!r}")
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.uint8), np.dtype(np.float32)):
        raise ValueError(f"dtype must be uint8 or float32, got {dt}")
    if seed is not None:
        seed = operator.index(seed)
    return {
        "size": (int(hw[0]), int(hw[1])),
        "crop": crop,
        "flip": p,
        "dtype": dt.str,
        "scale": (float(scale[0]), float(scale[1])),
        "ratio": (float(ratio[0]), float(ratio[1])),
        "seed": seed,
        "max_pixels": int(max_pixels),
        "resize": resize,
    }


def _reopen_images(where: tuple[Any, ...], options: dict[str, Any]) -> ImageDataset:
    """Unpickles an :class:`ImageDataset`: the store reopened by path, the options as they were."""
    ds = ImageDataset.__new__(ImageDataset)
    ds._options = options
    ds._setup(*_open(where[0], "ragged", where[1], where[2], where[3]))
    return ds
