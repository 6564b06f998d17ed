"""Converters: turn NumPy arrays or iterables of records into stores.

Drop-in compatible with ``loaderx.converter`` of loaderx 0.9.11, with these guarantees on top:

* The rules are native, in one conversion session (``loaderx_native::Conversion``) shared with
  ``loaderx convert``; a converter here only cuts its data into blocks. Everything that can be
  checked up front is checked before the first byte is written: the codec, the write mode, the
  item size, and, for a store that already has a schema, that the new data has the same kind,
  dtype and item shape. A record that is empty, over 1 MiB or does not fit the schema is a
  :class:`~loaderx.errors.RecordSizeError` naming its position.
* ``from_numpy`` streams the array in blocks of about ``chunk_bytes``, so a memory-mapped ``.npy``
  is never read into memory at once. ``from_iterator`` buffers records up to ``chunk_bytes``.
* A failure part-way (a bad record from an iterator, a full store) rolls the store back to its
  length before the call: nothing half-written stays visible.
* ``zstd_dict`` trains on byte views, so it works for every dtype.
* A second conversion to the same path appends (as in the reference); ``mode="overwrite"``
  replaces the store (the new one is built beside it and swapped in once complete, so a failed
  overwrite leaves the old store as it was) and ``mode="error"`` refuses. A converter writes only into a new or empty
  directory or a store, and only locally: a URL is a ``BadArgumentError``.
* Long conversions show a progress bar: tqdm when it is installed and stderr is a terminal.
  ``progress=True`` or ``False`` forces it on or off.
"""

from __future__ import annotations

import os
import sys
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Tuple, cast

import numpy as np
import numpy.typing as npt

from . import _loaderx
from .errors import BadArgumentError
from .zrecord import CODECS, _codec_name, _location, _shown, _writable

if TYPE_CHECKING:
    from ._typing import StrPath, WriteMode

__all__ = ["from_numpy", "from_iterator", "from_arrow", "from_images", "image_files"]

WRITE_CHUNK_BYTES = 64 << 20

#: File extensions :func:`image_files` takes (matched case-insensitively).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp")


class _Progress:
    """A progress bar over a number of records: tqdm if available, else plain stderr lines."""

    def __init__(self, enabled: bool | None, total: int | None, desc: str) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self._bar = None
        self._plain = False
        self._done = 0
        self._total = total
        self._desc = desc
        if not enabled:
            return
        try:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, desc=desc, unit="rec", unit_scale=True, file=sys.stderr)
        except ImportError:
            self._plain = True

    def update(self, n: int) -> None:
        self._done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._plain:
            of = f"/{self._total}" if self._total else ""
            print(f"{self._desc}: {self._done}{of} records", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


#: What a converter does with a store that is already at its path.
WRITE_MODES = ("append", "overwrite", "error")

#: A producer of blocks: given the conversion, yields ``(packed bytes, record offsets)``.
_Blocks = Callable[[_loaderx.Conversion], Iterator[Tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]]]


def _target(path: StrPath, what: str) -> Path | str:
    """Where a converter writes: a local directory (a Path), or an ``s3://``, ``gs://`` or
    ``az://`` URL (kept as the string), which the store is staged for (see :func:`_convert`)."""
    where = _location(path)
    if isinstance(where, str):
        if where.split("://", 1)[0].lower() in ("http", "https"):
            raise BadArgumentError.new(
                f"cannot {what} {_shown(where)}: HTTP URLs are read-only; write to s3://, gs://, az:// or a local directory"
            )
        return where
    return _writable(path, what)


def _label(path: Path | str) -> str:
    """The store's name, for the progress bar."""
    return path.name if isinstance(path, Path) else path.rstrip("/").rsplit("/", 1)[-1]


def _convert(
    path: Path | str,
    schema: _loaderx.Schema | None,
    codec: str,
    mode: str,
    dict_size: int | None,
    bar: _Progress,
    blocks: _Blocks,
    storage_options: dict[str, str] | None = None,
) -> int:
    """Runs one conversion through the native session (``_loaderx.Conversion``), which owns the
    rules: the target and mode checks, schema compatibility, record sizes, dictionary training,
    rollback and the schema written last. A converter only produces the blocks.

    A URL target is checked before any record is read (no store there, in any mode: stores at
    URLs are written once, since appending or overwriting in place could show readers a table
    and chunks of two versions). The store is then staged in ``LOADERX_STAGING_DIR`` (or the
    system's temporary directory) and streamed up as it is written: each chunk file goes up part
    by part and its local bytes are released, so the staging space is the table and a few parts,
    not the store. ``meta.zr`` goes up last; the staging directory is removed either way."""
    try:
        # As in the reference, dict_size means something only to the dictionary codec.
        dict_size = dict_size if codec == "zstd_dict" else None
        conversion = _loaderx.Conversion(os.fspath(path), schema, codec, mode, dict_size, storage_options)
        try:
            for src, offsets in blocks(conversion):
                conversion.append(src, offsets)
                bar.update(len(offsets))
            return conversion.finish()
        finally:
            conversion.abort()  # rolls back, unless finished
    finally:
        bar.close()


def _check_plain(dtype: np.dtype[Any]) -> None:
    """Refuse a structured dtype: a schema records one plain dtype, so field names would be lost.
    A plain void dtype (``V8``: opaque bytes, no fields) is stored as such."""
    if dtype.names is not None:
        fields = f" with fields {list(dtype.names)}" if dtype.names else ""
        raise TypeError(
            f"a structured dtype ({dtype}{fields}) cannot be stored: a store holds one plain dtype. "
            "Store each field as its own store (from_numpy(path_x, array['x']), ...) and read them "
            f"as streams of one DataLoader, or store opaque records with array.view('V{dtype.itemsize}') "
            "(loaderx 0.9.11 wrote structured arrays that way, dropping the field names)"
        )


def _check_codec(codec: str) -> str:
    """The codec's name as stored (``zstd-dict`` is ``zstd_dict``), or ValueError."""
    codec = _codec_name(codec)
    if codec not in CODECS:
        raise ValueError(f"unknown codec {codec!r}, expected one of {sorted(CODECS)}")
    return codec


def from_numpy(
    path: StrPath,
    array: npt.NDArray[Any],
    codec: str = "zstd",
    chunk_bytes: int = WRITE_CHUNK_BYTES,
    dict_size: int | None = None,
    schema: Mapping[str, Any] | None = None,
    progress: bool | None = None,
    mode: WriteMode = "append",
    storage_options: dict[str, str] | None = None,
) -> int:
    """Persist a stacked NumPy array as a dense store: one record per slice along axis 0.

    A 1-D array (the usual label set) becomes a store of scalar records. Calling it again on
    the same path appends, after checking that dtype and item shape match (see ``mode``).

    Args:
        path (str | Path): Destination directory (created if missing). It must be new, empty
            or a store: a directory holding other files is refused. Or an ``s3://``, ``gs://``
            or ``az://`` URL where no store is: the store is written in a local staging
            directory (``LOADERX_STAGING_DIR``), copied up (:func:`loaderx.remote.copy`) and the
            staging removed; a URL holding a store is refused in every mode.
        array (np.ndarray): Samples stacked along axis 0; may be memory-mapped.
        codec (str): ``"zstd"`` (default), ``"raw"`` or ``"zstd_dict"``.
        chunk_bytes (int): Upper bound on the bytes submitted per append.
        dict_size (int, optional): Dictionary size cap; by default 1% of the sample, clamped
            to 8 KiB .. 1 MiB.
        schema (dict, optional): Saved as ``schema.msgpack``; inferred when omitted.
        progress (bool, optional): Force the progress bar on or off.
        mode (str): What to do when ``path`` already holds a store: ``"append"`` (the default,
            as in loaderx 0.9.11) adds the records after its own, ``"overwrite"`` replaces the
            store (its records are removed before writing), ``"error"`` raises
            :class:`FileExistsError`.
        storage_options (dict, optional): For a URL ``path``: object_store's options
            (endpoint, credentials), over the environment's.

    Returns:
        int: Number of records written.
    """
    codec = _check_codec(codec)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects np.ndarray, got {type(array).__name__}")
    if array.ndim < 1:
        raise ValueError("array must have a sample axis")
    if array.dtype.hasobject:
        raise TypeError("object arrays cannot be stored; convert them to a fixed-size dtype")
    _check_plain(array.dtype)
    path = _target(path, "convert to")
    if schema is None:
        schema = {"kind": "dense", "dtype": array.dtype.str, "item_shape": [int(d) for d in array.shape[1:]]}
    itemsize = max(1, int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize)

    def blocks(_: _loaderx.Conversion) -> Iterator[tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]]:
        step = max(1, int(chunk_bytes) // itemsize)
        for start in range(0, len(array), step):
            block = np.ascontiguousarray(array[start : start + step])
            yield block.reshape(-1).view(np.uint8), np.arange(len(block), dtype=np.uint64) * np.uint64(itemsize)

    bar = _Progress(progress, len(array), f"converting {_label(path)}")
    return _convert(path, _loaderx.Schema.for_converter(dict(schema), "dense", codec), codec, mode, dict_size, bar, blocks, storage_options)


def _record_bytes(record: npt.ArrayLike) -> tuple[npt.NDArray[np.uint8], npt.NDArray[Any] | None]:
    if isinstance(record, (bytes, bytearray, memoryview)):
        return np.frombuffer(record, dtype=np.uint8), None
    a = np.asarray(record)
    if a.dtype.hasobject:
        raise TypeError("object arrays cannot be stored; convert them to a fixed-size dtype")
    _check_plain(a.dtype)
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8), a


def from_iterator(
    path: StrPath,
    source: Iterable[npt.ArrayLike],
    codec: str = "zstd",
    chunk_bytes: int = WRITE_CHUNK_BYTES,
    dict_size: int | None = None,
    schema: Mapping[str, Any] | None = None,
    progress: bool | None = None,
    mode: WriteMode = "append",
    storage_options: dict[str, str] | None = None,
) -> int:
    """Persist an iterable of records as a ragged store.

    ``source`` may be a list of arrays, a generator, a list of :class:`bytes`, or any other
    iterable of array-like or bytes records. Array records must share their dtype and trailing
    shape (the first one sets them); bytes records make a uint8 store. Records are packed into
    appends of about ``chunk_bytes``. ``path`` and ``mode`` are as for :func:`from_numpy`:
    by default a second call on the same path appends.

    Returns:
        int: Number of records written.
    """
    codec = _check_codec(codec)
    path = _target(path, "convert to")
    end: Any = object()
    inferred: dict[str, object] | None = None  # the schema the first record makes
    if isinstance(source, (bytes, bytearray)):
        # One bytes object is one record, and (as in the reference) no schema is written for it.
        source = [source]
    else:
        it = iter(source)
        first = next(it, end)
        source = [] if first is end else chain([first], it)
        if first is not end:
            _, a = _record_bytes(first)
            dtype, shape = ("|u1", []) if a is None else (a.dtype.str, [int(d) for d in a.shape[1:]])
            inferred = {"kind": "ragged", "dtype": dtype, "item_shape": shape}
    if schema is None:
        schema = inferred
    total = getattr(source, "__len__", lambda: None)()

    def blocks(conversion: _loaderx.Conversion) -> Iterator[tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]]:
        # What every array record must be: as the first record, else as the store already holds.
        # (Sizes, and the fit of bytes records, the conversion checks.)
        expect = _loaderx.Schema.for_converter(inferred, "ragged", codec) if inferred else conversion.existing
        shape = None if expect is None else [int(d) for d in expect.item_shape]

        def checked() -> Iterator[npt.NDArray[np.uint8]]:
            for k, record in enumerate(source):
                b, a = _record_bytes(record)
                if a is not None and expect is not None:
                    if a.dtype.str != expect.dtype or [int(d) for d in a.shape[1:]] != shape:
                        raise BadArgumentError.new(
                            f"record {k} is {a.dtype.str}{tuple(a.shape)}, but the store holds "
                            f"{expect.dtype} rows of shape {tuple(shape or ())}",
                            index=k,
                        )
                yield b

        yield from _in_blocks(checked(), chunk_bytes)

    checked = None if schema is None else _loaderx.Schema.for_converter(dict(schema), "ragged", codec)
    bar = _Progress(progress, total, f"converting {_label(path)}")
    return _convert(path, checked, codec, mode, dict_size, bar, blocks, storage_options)


def _in_blocks(
    records: Iterable[npt.NDArray[np.uint8]], chunk_bytes: int
) -> Iterator[tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]]:
    """Records (byte arrays) as blocks of about ``chunk_bytes``, each cut where a record starts."""
    buf: list[npt.NDArray[np.uint8]] = []
    sizes: list[int] = []
    acc = 0
    for b in records:
        buf.append(b)
        sizes.append(b.size)
        acc += b.size
        if acc >= chunk_bytes:
            yield _packed(buf, sizes)
            buf, sizes, acc = [], [], 0
    if buf:
        yield _packed(buf, sizes)


def _packed(buf: list[npt.NDArray[np.uint8]], sizes: list[int]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]:
    """Records as one block: their bytes end to end, and where each starts."""
    offsets = np.zeros(len(sizes), dtype=np.uint64)
    offsets[1:] = np.cumsum(sizes[:-1])
    return np.concatenate(buf), offsets


def from_arrow(
    path: StrPath,
    data: Any,
    column: str | None = None,
    codec: str = "zstd",
    chunk_bytes: int = WRITE_CHUNK_BYTES,
    dict_size: int | None = None,
    progress: bool | None = None,
    mode: WriteMode = "append",
    storage_options: dict[str, str] | None = None,
    images: bool = False,
) -> int:
    """Persist one column of Arrow data as a store (needs pyarrow).

    ``data`` is a pyarrow Table or RecordBatchReader, anything with ``__arrow_c_stream__``
    (Polars and DuckDB results), the path of a Parquet file, or an HF ``datasets.Dataset``;
    ``column`` names the column when there are several. Numbers and bools become a dense store
    of scalars, fixed-size lists and fixed-shape tensors of them a dense store of that shape,
    lists of those a ragged store, binary and string columns a store of byte strings (as
    ``from_iterator`` writes ``bytes``). See :mod:`loaderx.arrow` for the mapping.

    Batches stream through in bounded memory, appended in blocks of about ``chunk_bytes``. The
    column's type (and an existing store's schema) is checked before anything is written; a
    null, an empty record or any other failure part-way rolls the store back. ``path`` and
    ``mode`` are as for :func:`from_numpy`.

    ``images=True`` stores a column of encoded images as :func:`from_images` does (a binary
    column, or an HF ``Image`` column: a struct whose ``bytes`` field holds them); each record's
    header is checked, and the schema's ``media`` names the formats.

    Returns:
        int: Number of records written.
    """
    from . import arrow

    codec = _check_codec(codec)
    path = _target(path, "convert to")
    name, field, rows, arrays = arrow.arrow_source(data, column)
    if images:
        return _arrow_images(path, name, field, rows, arrays, codec, chunk_bytes, progress, mode, storage_options)
    kind, dtype, shape = arrow.column_plan(name, field)
    store_kind = "dense" if kind == "dense" else "ragged"
    schema = {"kind": store_kind, "dtype": dtype.str, "item_shape": [int(d) for d in shape]}
    pa = arrow._pa()

    def blocks(_: _loaderx.Conversion) -> Iterator[tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]]:
        first_row = 0
        for arr in arrays:
            src, offsets = arrow.column_records(pa, name, kind, dtype, shape, arr, first_row)
            ends = np.append(offsets[1:], np.uint64(src.size)) if offsets.size else offsets
            # Blocks of about chunk_bytes: cut where a record starts.
            start = 0
            while start < offsets.size:
                stop = int(np.searchsorted(offsets, offsets[start] + np.uint64(chunk_bytes), side="left"))
                stop = max(stop, start + 1)
                lo, hi = int(offsets[start]), int(ends[stop - 1])
                yield src[lo:hi], offsets[start:stop] - offsets[start]
                start = stop
            first_row += len(arr)

    checked = _loaderx.Schema.for_converter(cast("dict[str, object]", schema), store_kind, codec)
    bar = _Progress(progress, rows, f"converting {_label(path)}")
    return _convert(path, checked, codec, mode, dict_size, bar, blocks, storage_options)


def image_files(directory: StrPath) -> list[Path]:
    """The image files under ``directory`` (``.jpg``, ``.jpeg``, ``.png``, ``.webp``, in any
    case), recursively, sorted by their path relative to it: the order :func:`from_images` and
    ``loaderx convert --images`` write them in, so labels can be derived from the same list
    (``path.parent.name`` for an ImageNet-style tree)."""
    root = Path(directory)
    if not root.is_dir():
        raise NotADirectoryError(f"{root} is not a directory")
    found = [p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()]
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _image_bytes(item: Any, k: int) -> bytes:
    """Item ``k`` of ``from_images``: its bytes (read from a file path)."""
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    if isinstance(item, (str, os.PathLike)):
        with open(item, "rb") as f:
            return f.read()
    raise TypeError(f"item {k}: from_images takes file paths or bytes, got {type(item).__name__}")


def _image_blocks(
    records: Iterable[tuple[bytes, Any]], chunk_bytes: int
) -> Callable[[_loaderx.Conversion], Iterator[tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]]]:
    """Blocks of encoded images ``(bytes, what to name it by)``, each checked to be an image by
    its header; the formats seen (and the store's, on append) set the schema's ``media``."""

    def blocks(conversion: _loaderx.Conversion) -> Iterator[tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]]:
        existing = conversion.existing
        seen: set[str] = set()
        if existing is not None:
            old = existing.to_dict().get("media")
            seen.update(["jpeg", "png", "webp"] if old == "mixed" else [old] if isinstance(old, str) else [])

        def checked() -> Iterator[npt.NDArray[np.uint8]]:
            for k, (data, name) in enumerate(records):
                try:
                    media = _loaderx.image_header(data)[0]
                except ValueError as e:
                    raise BadArgumentError.new(f"item {k} ({name}) is not an image this engine reads: {e}", index=k) from None
                seen.add(media)
                yield np.frombuffer(data, dtype=np.uint8)

        yield from _in_blocks(checked(), chunk_bytes)
        if seen:
            conversion.set_schema_key("media", _loaderx.media_value(sorted(seen)))

    return blocks


#: The schema of a store of encoded images: ragged uint8 records (byte strings), which loaderx
#: 0.9.11 reads as such; ``media`` (set by the conversion) names the format.
_IMAGE_SCHEMA = {"kind": "ragged", "dtype": "|u1", "item_shape": []}


def from_images(
    path: StrPath,
    items: StrPath | Iterable[StrPath | bytes],
    codec: str = "raw",
    chunk_bytes: int = WRITE_CHUNK_BYTES,
    progress: bool | None = None,
    mode: WriteMode = "append",
    storage_options: dict[str, str] | None = None,
) -> int:
    """Persist encoded images (JPEG, PNG, WebP) as a store that :class:`~loaderx.dataset.
    ImageDataset` reads as pictures.

    ``items`` are file paths or ``bytes`` of encoded images, or one directory (its
    :func:`image_files`). Records keep the files' bytes as they are: a ragged ``uint8`` store
    (loaderx 0.9.11 reads it as byte strings) whose schema's ``media`` says ``"jpeg"``,
    ``"png"``, ``"webp"`` or ``"mixed"``. Every item's header is read first: one that is not an
    image is a :class:`~loaderx.errors.BadArgumentError` naming it, and nothing of the call is
    kept. ``loaderx verify --images`` decodes every pixel.

    ``codec`` is ``"raw"`` by default (encoded images do not compress further); a record is at
    most 1 MiB (the format's limit). ``path``, ``mode`` and ``progress`` are as for
    :func:`from_numpy`.

    Returns:
        int: Number of records written.
    """
    codec = _check_codec(codec)
    path = _target(path, "convert to")
    if isinstance(items, (str, os.PathLike)):
        items = image_files(items)
    elif isinstance(items, (bytes, bytearray)):
        raise TypeError("from_images takes an iterable of images; wrap one image's bytes in a list")
    total = getattr(items, "__len__", lambda: None)()

    def named() -> Iterator[tuple[bytes, Any]]:
        for k, item in enumerate(items):
            yield _image_bytes(item, k), (os.fspath(item) if isinstance(item, (str, os.PathLike)) else f"{len(item)} bytes")

    schema = _loaderx.Schema.for_converter(dict(_IMAGE_SCHEMA), "ragged", codec)
    bar = _Progress(progress, total, f"converting {_label(path)}")
    return _convert(path, schema, codec, mode, None, bar, _image_blocks(named(), chunk_bytes), storage_options)


def _arrow_images(
    path: Path | str,
    name: str,
    field: Any,
    rows: int | None,
    arrays: Iterator[Any],
    codec: str,
    chunk_bytes: int,
    progress: bool | None,
    mode: str,
    storage_options: dict[str, str] | None = None,
) -> int:
    """``from_arrow(..., images=True)``: a binary column, or a struct column with a binary
    ``bytes`` field (HF ``datasets.Image``), stored as :func:`from_images` stores images."""
    pa = __import__("pyarrow")
    t = field.type
    binary = (pa.types.is_binary, pa.types.is_large_binary)
    nested = pa.types.is_struct(t) and t.get_field_index("bytes") >= 0
    if not (any(f(t) for f in binary) or (nested and any(f(t.field("bytes").type) for f in binary))):
        raise TypeError(f"column {name!r} is {t}; images=True takes a binary column or a struct with a binary 'bytes' field")

    def records() -> Iterator[tuple[bytes, Any]]:
        row = 0
        for arr in arrays:
            values = arr.field("bytes") if nested else arr
            for value in values.to_pylist():
                if value is None:
                    raise BadArgumentError.new(f"row {row} of column {name!r} is null, not an image", index=row)
                yield value, f"row {row}"
                row += 1

    schema = _loaderx.Schema.for_converter(dict(_IMAGE_SCHEMA), "ragged", codec)
    bar = _Progress(progress, rows, f"converting {_label(path)}")
    return _convert(path, schema, codec, mode, None, bar, _image_blocks(records(), chunk_bytes), storage_options)
