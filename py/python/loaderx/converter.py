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
* Long conversions show a progress bar: tqdm when it is installed and stderr is a terminal.
  ``progress=True`` or ``False`` forces it on or off.
"""

import os
import sys
from itertools import chain
from pathlib import Path

import numpy as np

from . import _loaderx
from .zrecord import CODECS, MAX_RECORD_LEN, Zrecord

__all__ = ["from_numpy", "from_iterator", "from_arrow"]

WRITE_CHUNK_BYTES = 64 << 20


class _Progress:
    """A progress bar over a number of records: tqdm if available, else plain stderr lines."""

    def __init__(self, enabled, total, desc):
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

    def update(self, n):
        self._done += n
        if self._bar is not None:
            self._bar.update(n)
        elif self._plain:
            of = f"/{self._total}" if self._total else ""
            print(f"{self._desc}: {self._done}{of} records", file=sys.stderr, flush=True)

    def close(self):
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def _check_codec(codec):
    if codec not in CODECS:
        raise ValueError(f"unknown codec {codec!r}, expected one of {sorted(CODECS)}")


def _describe(schema):
    d = schema.to_dict()
    return f"{d.get('kind')} {d.get('dtype')}{tuple(d.get('item_shape') or ())}"


def _check_existing(path, schema):
    """Refuse, before writing anything, to add data of another kind, dtype or shape. Returns the
    store's schema, if it has one."""
    existing = _loaderx.Schema.read(os.fspath(path))
    if existing is not None and schema is not None and not existing.compatible(schema):
        raise ValueError(f"{path} holds a different store ({_describe(existing)}), cannot append {_describe(schema)}")
    return existing


class _Writer:
    """Appends packed batches to a store; on failure rolls the store back to where it started."""

    def __init__(self, path, codec, dict_size, progress):
        self.path = path
        self.created = not (path / "meta.zr").exists()
        # Directories this call creates (the store and any missing parents), deepest first.
        self.new_dirs = [d for d in (path, *path.parents) if not d.exists()]
        self.store = Zrecord(path, codec=codec)
        self.start = len(self.store)
        self.need_dict = codec == "zstd_dict" and not self.store.has_dict()
        self.dict_size = dict_size
        self.progress = progress
        self.written = 0

    def append(self, src, offsets):
        if self.need_dict:
            # The converters' rule (which records, how big) is the engine's.
            self.store._s.train_dict_for(src, offsets, self.dict_size)
            self.need_dict = False
        self.store.append(src, offsets)
        self.written += len(offsets)
        self.progress.update(len(offsets))

    def finish(self, ok):
        try:
            if not ok:
                extra = len(self.store) - self.start
                if extra > 0:
                    self.store.delete(np.arange(self.start, self.start + extra, dtype=np.uint64))
            self.store.sync()
        finally:
            self.store.close()
            self.progress.close()
        if not ok and self.created:
            # The store did not exist before this call: leave no trace of it.
            for f in self.path.iterdir():
                if f.name in ("meta.zr", "meta.zr.tmp", "dict.zr", "dict.zr.tmp") or (
                    f.suffix == ".zr" and f.stem.isdigit()
                ):
                    f.unlink()
            for d in self.new_dirs:
                try:
                    d.rmdir()
                except OSError:
                    break


def from_numpy(path, array, codec="zstd", chunk_bytes=WRITE_CHUNK_BYTES, dict_size=None, schema=None, progress=None):
    """Persist a stacked NumPy array as a dense store: one record per slice along axis 0.

    A 1-D array (the usual label set) becomes a store of scalar records. Calling it again on
    the same path appends, after checking that dtype and item shape match.

    Args:
        path (str | Path): Destination directory (created if missing).
        array (np.ndarray): Samples stacked along axis 0; may be memory-mapped.
        codec (str): ``"zstd"`` (default), ``"raw"`` or ``"zstd_dict"``.
        chunk_bytes (int): Upper bound on the bytes submitted per append.
        dict_size (int, optional): Dictionary size cap; by default 1% of the sample, clamped
            to 8 KiB .. 1 MiB.
        schema (dict, optional): Saved as ``schema.msgpack``; inferred when omitted.
        progress (bool, optional): Force the progress bar on or off.

    Returns:
        int: Number of records written.
    """
    _check_codec(codec)
    if not isinstance(array, np.ndarray):
        raise TypeError(f"from_numpy expects np.ndarray, got {type(array).__name__}")
    if array.ndim < 1:
        raise ValueError("array must have a sample axis")
    if array.dtype.hasobject:
        raise TypeError("object arrays cannot be stored; convert them to a fixed-size dtype")
    if schema is None:
        schema = {"kind": "dense", "dtype": array.dtype.str, "item_shape": [int(d) for d in array.shape[1:]]}
    itemsize = int(np.prod(array.shape[1:], dtype=np.int64)) * array.dtype.itemsize
    if itemsize > MAX_RECORD_LEN:
        raise ValueError(f"sample of {itemsize} bytes exceeds the {MAX_RECORD_LEN} byte record limit")
    if itemsize == 0:
        raise ValueError("samples of 0 bytes cannot be stored (records are at least 1 byte)")
    path = Path(path)
    schema = _loaderx.Schema.for_converter(dict(schema), "dense", codec)
    existing = _check_existing(path, schema) if path.is_dir() else None
    if existing is not None:
        schema = existing.updated(schema)
    step = max(1, int(chunk_bytes) // itemsize)
    writer = _Writer(path, codec, dict_size, _Progress(progress, len(array), f"converting {path.name}"))
    ok = False
    try:
        for start in range(0, len(array), step):
            block = np.ascontiguousarray(array[start : start + step])
            offsets = np.arange(len(block), dtype=np.uint64) * np.uint64(itemsize)
            writer.append(block.reshape(-1).view(np.uint8), offsets)
        ok = True
    finally:
        writer.finish(ok)
    schema.write(os.fspath(path))
    return len(array)


def _record_bytes(record):
    if isinstance(record, (bytes, bytearray, memoryview)):
        return np.frombuffer(record, dtype=np.uint8), None
    a = np.asarray(record)
    if a.dtype.hasobject:
        raise TypeError("object arrays cannot be stored; convert them to a fixed-size dtype")
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8), a


def from_iterator(path, source, codec="zstd", chunk_bytes=WRITE_CHUNK_BYTES, dict_size=None, schema=None, progress=None):
    """Persist an iterable of records as a ragged store.

    ``source`` may be a list of arrays, a generator, a list of :class:`bytes`, or any other
    iterable of array-like or bytes records. Array records must share their dtype and trailing
    shape (the first one sets them); bytes records make a uint8 store. Records are packed into
    appends of about ``chunk_bytes``.

    Returns:
        int: Number of records written.
    """
    _check_codec(codec)
    end = object()
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
    path = Path(path)
    existing = _check_existing(path, schema) if path.is_dir() else None
    if existing is not None and schema is not None:
        schema = existing.updated(schema)
    # What every record must be: as the first record, else as the store already holds.
    if inferred is not None:
        expect = _loaderx.Schema.for_converter(inferred, "ragged", codec)
    else:
        expect = existing
    total = getattr(source, "__len__", lambda: None)()
    writer = _Writer(path, codec, dict_size, _Progress(progress, total, f"converting {path.name}"))
    buf, sizes, acc = [], [], 0

    def flush():
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
    if schema is not None:
        schema.write(os.fspath(path))
    return writer.written


def from_arrow(path, data, column=None, codec="zstd", chunk_bytes=WRITE_CHUNK_BYTES, dict_size=None, progress=None):
    """Persist one column of Arrow data as a store (needs pyarrow).

    ``data`` is a pyarrow Table or RecordBatchReader, anything with ``__arrow_c_stream__``
    (Polars and DuckDB results), the path of a Parquet file, or an HF ``datasets.Dataset``;
    ``column`` names the column when there are several. Numbers and bools become a dense store
    of scalars, fixed-size lists and fixed-shape tensors of them a dense store of that shape,
    lists of those a ragged store, binary and string columns a store of byte strings (as
    ``from_iterator`` writes ``bytes``). See :mod:`loaderx.arrow` for the mapping.

    Batches stream through in bounded memory, appended in blocks of about ``chunk_bytes``. The
    column's type (and an existing store's schema) is checked before anything is written; a
    null, an empty record or any other failure part-way rolls the store back.

    Returns:
        int: Number of records written.
    """
    from . import arrow

    _check_codec(codec)
    name, field, rows, arrays = arrow.arrow_source(data, column)
    kind, dtype, shape = arrow.column_plan(name, field)
    row_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if kind == "dense" and not 0 < row_bytes <= MAX_RECORD_LEN:
        raise ValueError(f"column {name!r}: records of {row_bytes} bytes are outside the 1..{MAX_RECORD_LEN} byte limit")
    store_kind = "dense" if kind == "dense" else "ragged"
    schema = {"kind": store_kind, "dtype": dtype.str, "item_shape": [int(d) for d in shape]}
    schema = _loaderx.Schema.for_converter(schema, store_kind, codec)
    path = Path(path)
    existing = _check_existing(path, schema) if path.is_dir() else None
    if existing is not None:
        schema = existing.updated(schema)
    pa = arrow._pa()
    writer = _Writer(path, codec, dict_size, _Progress(progress, rows, f"converting {path.name}"))
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
    schema.write(os.fspath(path))
    return writer.written

