"""Converters: turn NumPy arrays or iterables of records into stores.

Drop-in compatible with ``loaderx.converter`` of loaderx 0.9.11, with these guarantees on top:

* Everything that can be checked up front is checked before the first byte is written: the
  codec, the record size (1 byte .. 1 MiB), and, for a store that already has a schema, that
  the new data has the same kind, dtype and item shape.
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
import shutil
import sys
from itertools import chain
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, cast

import numpy as np
import numpy.typing as npt

from . import _loaderx
from .errors import BadArgumentError
from .zrecord import CODECS, MAX_RECORD_LEN, Zrecord, _codec_name, _writable

if TYPE_CHECKING:
    from ._typing import StrPath, WriteMode

__all__ = ["from_numpy", "from_iterator", "from_arrow"]

WRITE_CHUNK_BYTES = 64 << 20


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


def _is_store_file(name: str) -> bool:
    """Whether ``name`` is one of the files a store keeps in its directory."""
    return _loaderx.is_store_file(name[:-4] if name.endswith(".tmp") else name)


def _target(path: StrPath, mode: str) -> tuple[Path, bool]:
    """The directory a converter writes, checked before anything is written, and whether the
    store there is to be replaced. A URL is refused (stores on URLs are read-only), and so is a
    directory that is neither empty nor a store (a manifest's directory, a project folder), so
    a converter never mixes its files into other files."""
    if mode not in WRITE_MODES:
        raise ValueError(f"mode must be one of {', '.join(map(repr, WRITE_MODES))}, got {mode!r}")
    path = _writable(path, "convert to")
    if path.exists() and not path.is_dir():
        raise BadArgumentError.new(f"{path} is a file; a converter writes a store into a directory")
    if not path.is_dir():
        return path, False
    if not (path / _loaderx.META_FILE).exists():
        found = sorted(os.listdir(path))
        if found:
            shown = ", ".join(found[:5]) + (", ..." if len(found) > 5 else "")
            raise BadArgumentError.new(
                f"{path} is neither empty nor a store (it holds {shown}); write the store into a new "
                "or empty directory"
            )
        return path, False
    if mode == "error":
        raise FileExistsError(
            f"{path} already holds a store (mode='error'); use mode='append' to add to it or "
            "mode='overwrite' to replace it"
        )
    return path, mode == "overwrite"




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


def _describe(schema: _loaderx.Schema) -> str:
    d: dict[str, Any] = schema.to_dict()
    return f"{d.get('kind')} {d.get('dtype')}{tuple(d.get('item_shape') or ())}"


def _check_existing(path: Path, schema: _loaderx.Schema | None) -> _loaderx.Schema | None:
    """Refuse, before writing anything, to add data of another kind, dtype or shape. Returns the
    store's schema, if it has one."""
    existing = _loaderx.Schema.read(os.fspath(path))
    if existing is not None and schema is not None and not existing.compatible(schema):
        raise ValueError(f"{path} holds a different store ({_describe(existing)}), cannot append {_describe(schema)}")
    return existing


class _Writer:
    """Appends packed batches to a store; on failure rolls the store back to where it started."""

    def __init__(self, path: Path, codec: str, dict_size: int | None, progress: _Progress, replace: bool = False) -> None:
        # mode="overwrite" writes a new store beside the old one, which stays whole until the new
        # one is complete (publish swaps them); a failed conversion leaves the old store as it was.
        self.final = path
        self.replace = replace
        if replace:
            path = path.parent / f".{path.name}.loaderx-overwrite-{os.getpid()}"
            if path.exists():
                shutil.rmtree(path)  # left by a conversion of this process id that died
        self.path = path
        self.created = not (path / _loaderx.META_FILE).exists()
        # Directories this call creates (the store and any missing parents), deepest first.
        self.new_dirs = [d for d in (path, *path.parents) if not d.exists()]
        self.store = Zrecord(path, codec=codec)
        self.start = len(self.store)
        self.need_dict = codec == "zstd_dict" and not self.store.has_dict()
        self.dict_size = dict_size
        self.progress = progress
        self.written = 0

    def append(self, src: npt.NDArray[np.uint8], offsets: npt.NDArray[np.uint64]) -> None:
        if self.need_dict:
            # The converters' rule (which records, how big) is the engine's.
            self.store._s.train_dict_for(src, offsets, self.dict_size)
            self.need_dict = False
        self.store.append(src, offsets)
        self.written += len(offsets)
        self.progress.update(len(offsets))

    def finish(self, ok: bool) -> None:
        try:
            if not ok:
                extra = len(self.store) - self.start
                if extra > 0:
                    self.store.delete(np.arange(self.start, self.start + extra, dtype=np.uint64))
            self.store.sync()
        finally:
            self.store.close()
            self.progress.close()
        if not ok and self.replace:
            shutil.rmtree(self.path, ignore_errors=True)  # the new store; the old one is untouched
            return
        if not ok and self.created:
            # The store did not exist before this call: leave no trace of it.
            for f in self.path.iterdir():
                if _is_store_file(f.name):
                    f.unlink()
            for d in self.new_dirs:
                try:
                    d.rmdir()
                except OSError:
                    break

    def publish(self, schema: _loaderx.Schema | None) -> None:
        """Writes the schema and, for ``mode="overwrite"``, puts the new store in the old one's
        place in one directory rename; files of the old directory that are not store files move
        over to the new one."""
        try:
            if schema is not None:
                schema.write(os.fspath(self.path))
        except BaseException:
            if self.replace:
                shutil.rmtree(self.path, ignore_errors=True)
            raise
        if not self.replace:
            return
        old = self.final.parent / f".{self.final.name}.loaderx-replaced-{os.getpid()}"
        os.rename(self.final, old)
        os.rename(self.path, self.final)
        for f in old.iterdir():
            if not _is_store_file(f.name):
                os.rename(f, self.final / f.name)
        shutil.rmtree(old)


def from_numpy(
    path: StrPath,
    array: npt.NDArray[Any],
    codec: str = "zstd",
    chunk_bytes: int = WRITE_CHUNK_BYTES,
    dict_size: int | None = None,
    schema: Mapping[str, Any] | None = None,
    progress: bool | None = None,
    mode: WriteMode = "append",
) -> int:
    """Persist a stacked NumPy array as a dense store: one record per slice along axis 0.

    A 1-D array (the usual label set) becomes a store of scalar records. Calling it again on
    the same path appends, after checking that dtype and item shape match (see ``mode``).

    Args:
        path (str | Path): Destination directory (created if missing). It must be new, empty
            or a store: a directory holding other files is refused, and so is a URL (stores on
            URLs are read-only).
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
    path, replace = _target(path, mode)
    if schema is None:
        schema = {"kind": "dense", "dtype": array.dtype.str, "item_shape": [int(d) for d in array.shape[1:]]}
    itemsize = int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize
    if itemsize > MAX_RECORD_LEN:
        raise ValueError(f"sample of {itemsize} bytes exceeds the {MAX_RECORD_LEN} byte record limit")
    if itemsize == 0:
        raise ValueError("samples of 0 bytes cannot be stored (records are at least 1 byte)")
    schema = _loaderx.Schema.for_converter(dict(schema), "dense", codec)
    existing = _check_existing(path, schema) if path.is_dir() and not replace else None
    if existing is not None:
        schema = existing.updated(schema)
    step = max(1, int(chunk_bytes) // itemsize)
    writer = _Writer(path, codec, dict_size, _Progress(progress, len(array), f"converting {path.name}"), replace)
    ok = False
    try:
        for start in range(0, len(array), step):
            block = np.ascontiguousarray(array[start : start + step])
            offsets = np.arange(len(block), dtype=np.uint64) * np.uint64(itemsize)
            writer.append(block.reshape(-1).view(np.uint8), offsets)
        ok = True
    finally:
        writer.finish(ok)
    writer.publish(schema)
    return len(array)


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
    path, replace = _target(path, mode)
    end: Any = object()
    inferred: dict[str, object] | None  # the schema the first record makes
    if isinstance(source, (bytes, bytearray)):
        # One bytes object is one record, and (as in the reference) no schema is written for it.
        source = [source]
        inferred = None
    else:
        it = iter(source)
        first = next(it, end)
        source = [] if first is end else chain([first], it)
        inferred = None
        if first is not end:
            _, a = _record_bytes(first)
            if a is None:
                inferred = {"kind": "ragged", "dtype": "|u1", "item_shape": []}
            else:
                shape = [int(d) for d in a.shape[1:]]
                inferred = {"kind": "ragged", "dtype": a.dtype.str, "item_shape": shape}
    if schema is None:
        schema = inferred
    if schema is not None:
        schema = _loaderx.Schema.for_converter(dict(schema), "ragged", codec)
    existing = _check_existing(path, schema) if path.is_dir() and not replace else None
    if existing is not None and schema is not None:
        schema = existing.updated(schema)
    # What every record must be: as the first record, else as the store already holds.
    if inferred is not None:
        expect = _loaderx.Schema.for_converter(inferred, "ragged", codec)
    else:
        expect = existing
    total = getattr(source, "__len__", lambda: None)()
    writer = _Writer(path, codec, dict_size, _Progress(progress, total, f"converting {path.name}"), replace)
    buf: list[npt.NDArray[np.uint8]]
    sizes: list[int]
    buf, sizes, acc = [], [], 0

    def flush() -> None:
        nonlocal buf, sizes, acc
        offsets = np.zeros(len(sizes), dtype=np.uint64)
        offsets[1:] = np.cumsum(sizes[:-1])
        writer.append(np.concatenate(buf), offsets)
        buf, sizes, acc = [], [], 0

    ok = False
    try:
        for k, record in enumerate(source):
            b, a = _record_bytes(record)
            if a is not None and expect is not None:
                shape = [int(d) for d in expect.item_shape]
                if a.dtype.str != expect.dtype or [int(d) for d in a.shape[1:]] != shape:
                    raise ValueError(
                        f"record {k} is {a.dtype.str}{tuple(a.shape)}, but the store holds "
                        f"{expect.dtype} rows of shape {tuple(shape)}"
                    )
            elif expect is not None and b.size:
                misfit = expect.misfit(k, b.size)
                if misfit is not None:
                    raise ValueError(misfit)
            if b.size == 0 or b.size > MAX_RECORD_LEN:
                raise ValueError(f"record {k} of {b.size} bytes is outside the 1..{MAX_RECORD_LEN} byte record limit")
            buf.append(b)
            sizes.append(b.size)
            acc += b.size
            if acc >= chunk_bytes:
                flush()
        if buf:
            flush()
        ok = True
    finally:
        writer.finish(ok)
    writer.publish(schema)
    return writer.written


def from_arrow(
    path: StrPath,
    data: Any,
    column: str | None = None,
    codec: str = "zstd",
    chunk_bytes: int = WRITE_CHUNK_BYTES,
    dict_size: int | None = None,
    progress: bool | None = None,
    mode: WriteMode = "append",
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

    Returns:
        int: Number of records written.
    """
    from . import arrow

    codec = _check_codec(codec)
    path, replace = _target(path, mode)
    name, field, rows, arrays = arrow.arrow_source(data, column)
    kind, dtype, shape = arrow.column_plan(name, field)
    row_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if kind == "dense" and not 0 < row_bytes <= MAX_RECORD_LEN:
        raise ValueError(f"column {name!r}: records of {row_bytes} bytes are outside the 1..{MAX_RECORD_LEN} byte limit")
    store_kind = "dense" if kind == "dense" else "ragged"
    schema = {"kind": store_kind, "dtype": dtype.str, "item_shape": [int(d) for d in shape]}
    schema = _loaderx.Schema.for_converter(cast("dict[str, object]", schema), store_kind, codec)
    existing = _check_existing(path, schema) if path.is_dir() and not replace else None
    if existing is not None:
        schema = existing.updated(schema)
    pa = arrow._pa()
    writer = _Writer(path, codec, dict_size, _Progress(progress, rows, f"converting {path.name}"), replace)
    ok, first_row = False, 0
    try:
        for arr in arrays:
            src, offsets = arrow.column_records(pa, name, kind, dtype, shape, arr, first_row)
            ends = np.append(offsets[1:], np.uint64(src.size)) if offsets.size else offsets
            sizes = ends - offsets
            if sizes.size and int(sizes.max()) > MAX_RECORD_LEN:
                row = first_row + int(np.argmax(sizes > MAX_RECORD_LEN))
                raise ValueError(f"column {name!r}: record {row} is over the {MAX_RECORD_LEN} byte record limit")
            # Blocks of about chunk_bytes: cut where a record starts.
            start = 0
            while start < offsets.size:
                stop = int(np.searchsorted(offsets, offsets[start] + np.uint64(chunk_bytes), side="left"))
                stop = max(stop, start + 1)
                lo, hi = int(offsets[start]), int(ends[stop - 1])
                writer.append(src[lo:hi], offsets[start:stop] - offsets[start])
                start = stop
            first_row += len(arr)
        ok = True
    finally:
        writer.finish(ok)
    writer.publish(schema)
    return writer.written

