"""Arrow in and out, through pyarrow (``pip install pyarrow``).

Out: :func:`reader` streams one dataset, or named datasets of equal length as columns, as a
``pyarrow.RecordBatchReader``; datasets also export ``__arrow_c_stream__`` (the Arrow PyCapsule
stream interface), so pyarrow, Polars and DuckDB read them directly. Records map to Arrow types
by the store's schema:

* dense records of shape ``()`` become a primitive column, of shape ``(k,)`` a
  ``fixed_size_list<k>``, of more dimensions the ``arrow.fixed_shape_tensor`` extension type,
  all with the store's dtype;
* ragged records ``(rows, *item_shape)`` become a ``large_list`` of the dense type of one row;
  ragged ``uint8`` records without an item shape (byte strings, as ``from_iterator`` writes
  ``bytes``) and stores without a schema become ``large_binary``.

Batches hold about ``batch_bytes`` of records (16 MiB by default), so memory stays bounded
whatever the store's size. Each batch is one gather, and its arrays are wrapped, not copied
(except ``bool``, which Arrow packs into bits).

In: :func:`arrow_source` turns what :func:`loaderx.converter.from_arrow` accepts (a Table, a
RecordBatchReader, anything with ``__arrow_c_stream__``, a Parquet file, an HF
``datasets.Dataset``) into record batches, and :func:`column_plan` maps an Arrow type back to a
store: the inverse of the mapping above, plus ``list`` and ``binary``/``string`` of 32-bit
offsets. Any other type is an error naming the column.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Tuple, TypeVar, cast

import numpy as np
import numpy.typing as npt

from .errors import RecordSizeError

#: ``(kind, dtype, item_shape)``: how a column's records are stored.
_Plan = Tuple[str, "np.dtype[Any]", Tuple[int, ...]]
#: A dataset or Zrecord (see :class:`Exports`).
_E = TypeVar("_E", bound="Exports")
#: Makes one Arrow array of ``n`` rows from the rows' flat values.
_MakeRows = Callable[["npt.NDArray[Any]", int], Any]

__all__ = ["reader", "arrow_source", "column_plan", "column_records"]

BATCH_BYTES = 16 << 20
_BYTES = "bytes"  # the kind of a column of byte strings


def _pa() -> Any:
    try:
        import pyarrow as pa
    except ImportError:
        raise ImportError("Arrow export and import need pyarrow: pip install pyarrow") from None
    return pa


# ---------------------------------------------------------------------------------------------
# Out


class Exports:
    """What datasets and Zrecord share: Arrow export of their records."""

    if TYPE_CHECKING:

        def __len__(self) -> int: ...

    def arrow_reader(self, batch_bytes: int = BATCH_BYTES, column: str = "data") -> Any:
        """The records as a ``pyarrow.RecordBatchReader`` of one column, streamed in batches of
        about ``batch_bytes`` (see :mod:`loaderx.arrow` for the types)."""
        return reader(self, batch_bytes, column)

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        """The Arrow PyCapsule stream of :meth:`arrow_reader`: ``pyarrow.table(ds)``,
        ``polars.DataFrame(ds)`` and DuckDB read the records directly."""
        return self.arrow_reader().__arrow_c_stream__(requested_schema)


def _spec(ds: Any) -> _Plan:
    """(kind, dtype, item_shape) of a dataset or a Zrecord: kind is dense, ragged or bytes."""
    schema = getattr(ds, "_schema", None)
    if schema is None:  # a Zrecord: its records are byte strings unless a schema says more
        from ._loaderx import Schema

        schema = Schema.read(os.fspath(ds.path)) if Path(os.fspath(ds.path)).is_dir() else None
        if schema is None:
            return _BYTES, np.dtype(np.uint8), ()
    kind, dtype, shape = schema.kind, np.dtype(schema.dtype), tuple(int(d) for d in schema.item_shape)
    if kind == "ragged" and dtype == np.uint8 and shape == ():
        return _BYTES, dtype, shape
    return kind, dtype, shape


def _row_type(pa: Any, dtype: np.dtype[Any], shape: tuple[int, ...]) -> tuple[Any, _MakeRows]:
    """The Arrow type of one dense row, and a function making that array from the rows'
    values (a flat NumPy array of ``n * prod(shape)`` items)."""
    prim = pa.from_numpy_dtype(dtype)
    size = int(np.prod(shape, dtype=np.int64))
    if shape == ():
        return prim, lambda flat, n: pa.array(flat, type=prim)
    fsl = pa.list_(prim, size)
    if len(shape) == 1:
        return fsl, lambda flat, n: pa.FixedSizeListArray.from_arrays(pa.array(flat, type=prim), size)
    tensor = pa.fixed_shape_tensor(prim, list(shape))

    def make(flat: npt.NDArray[Any], n: int) -> Any:
        storage = pa.FixedSizeListArray.from_arrays(pa.array(flat, type=prim), size)
        return pa.ExtensionArray.from_storage(tensor, storage)

    return tensor, make


class _Column:
    """How one dataset becomes batches of one Arrow column."""

    def __init__(self, pa: Any, ds: Any) -> None:
        self.ds = ds
        self.kind, self.dtype, self.shape = _spec(ds)
        self.row_bytes = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        if self.kind == _BYTES:
            self.type = pa.large_binary()
        else:
            row_type, self.make_rows = _row_type(pa, self.dtype, self.shape)
            self.type = row_type if self.kind == "dense" else pa.large_list(row_type)

    def record_bytes(self, n: int) -> int:
        """Mean bytes per record, from up to the first 1024 records."""
        if self.kind == "dense":
            return self.row_bytes
        k = min(n, 1024)
        return max(1, int(self._lengths(np.arange(k, dtype=np.uint64)).mean())) if k else 1

    def _lengths(self, idxs: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        # A dataset's engine handle, or a Zrecord's (both have one).
        return np.asarray(self.ds.engine.lengths(idxs), dtype=np.int64)

    def batch(self, pa: Any, start: int, stop: int) -> Any:
        idxs = np.arange(start, stop, dtype=np.uint64)
        n = stop - start
        if self.kind == "dense":
            values = self.ds.__getitems__(idxs)
            return self.make_rows(values.reshape(-1), n)
        # Ragged and bytes: one gather into one buffer, records back to back.
        lens = self._lengths(idxs)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=offsets[1:])
        data = np.empty(int(offsets[-1]), dtype=np.uint8)
        self.ds.engine.gather(idxs, data, offsets[:-1].astype(np.uint64))
        if self.kind == _BYTES:
            return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        rows = self.make_rows(data.view(self.dtype), int(offsets[-1]) // self.row_bytes)
        return pa.LargeListArray.from_arrays(pa.array(offsets // self.row_bytes, type=pa.int64()), rows)


def reader(
    data: Exports | Dict[str, _E],
    batch_bytes: int = BATCH_BYTES,
    column: str = "data",
    start: int = 0,
    stop: int | None = None,
) -> Any:
    """A ``pyarrow.RecordBatchReader`` over ``data``: a dataset (``DenseDataset``,
    ``RaggedDataset``, a manifest's, or a ``Zrecord``) as one column named ``column``, or a dict
    ``{name: dataset}`` of equal lengths as one column each, in record order; records
    ``start <= i < stop`` only (default: all)."""
    export = _Export(data, batch_bytes, column)
    return _pa().RecordBatchReader.from_batches(export.schema, export.batches(start, stop))


class _Export:
    """The Arrow view of ``data`` (as :func:`reader` takes it): its schema, length and mean
    bytes per record, worked out once, and its record batches over any range."""

    def __init__(self, data: Exports | Dict[str, _E], batch_bytes: int, column: str = "data") -> None:
        pa = _pa()
        streams = dict(data) if isinstance(data, dict) else {column: data}
        if not streams:
            raise ValueError("need at least one dataset")
        lengths = {name: len(ds) for name, ds in streams.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"all datasets must have the same length, got {lengths}")
        self.length = next(iter(lengths.values()))
        self.columns = {name: _Column(pa, ds) for name, ds in streams.items()}
        self.record_bytes = sum(c.record_bytes(self.length) for c in self.columns.values())
        self.step = max(1, int(batch_bytes) // max(1, self.record_bytes))
        fields = []
        for name, c in self.columns.items():
            meta = {"loaderx.kind": c.kind, "loaderx.dtype": c.dtype.str, "loaderx.item_shape": repr(list(c.shape))}
            fields.append(pa.field(name, c.type, nullable=False, metadata=meta))
        self.schema = pa.schema(fields)

    def batches(self, start: int = 0, stop: int | None = None) -> Iterator[Any]:
        """A generator of the record batches over ``[start, stop)``."""
        pa, n = _pa(), self.length
        stop = n if stop is None else int(stop)
        if not 0 <= int(start) <= stop <= n:
            raise IndexError(f"records {start}..{stop} are not within 0..{n}")

        def batches() -> Iterator[Any]:
            for lo in range(int(start), stop, self.step):
                hi = min(stop, lo + self.step)
                yield pa.record_batch([c.batch(pa, lo, hi) for c in self.columns.values()], schema=self.schema)

        return batches()


# ---------------------------------------------------------------------------------------------
# In


def arrow_source(data: Any, column: str | None = None) -> tuple[str, Any, int | None, Iterator[Any]]:
    """``(name, field, rows or None, iterator of that column's arrays)`` for ``data`` (see the
    module doc); ``column`` picks one of several columns."""
    pa = _pa()
    if isinstance(data, (str, os.PathLike)):
        import pyarrow.parquet as pq

        path = Path(data)
        if not path.exists():
            raise FileNotFoundError(f"{path}: no such Parquet file")
        data = pq.ParquetFile(path)
    if type(data).__module__.startswith("pyarrow.parquet"):
        name, field = _pick(data.schema_arrow, column)
        kind, dtype, shape = column_plan(name, field)
        # Batches of about 8 MiB: pyarrow's default of 65,536 rows reads large records slowly
        # and holds them all at once.
        row = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if kind == "dense" else 8 << 10
        batches = data.iter_batches(batch_size=max(1, (8 << 20) // max(1, row)), columns=[name])
        return name, field, data.metadata.num_rows, (b.column(0) for b in batches)
    if type(data).__module__.startswith("datasets") and hasattr(data, "data"):
        # HF datasets: Arrow inside. After select or shuffle, an indices mapping says which rows
        # of that table the dataset holds, in which order; the table alone would be wrong.
        if getattr(data, "_indices", None) is not None:
            raise ValueError("an HF dataset with an indices mapping (after select/shuffle): call .flatten_indices() first")
        data = data.data.table if hasattr(data.data, "table") else data.data
    rows = None
    if isinstance(data, pa.Table):
        rows, data = data.num_rows, data.to_reader()
    elif not isinstance(data, pa.RecordBatchReader):
        if not hasattr(data, "__arrow_c_stream__"):
            raise TypeError(
                f"from_arrow takes a pyarrow Table or RecordBatchReader, an object with __arrow_c_stream__, a "
                f"Parquet file path or an HF datasets.Dataset; got {type(data).__name__}"
            )
        data = pa.RecordBatchReader.from_stream(data)
    name, field = _pick(data.schema, column)
    index = data.schema.get_field_index(name)
    return name, field, rows, (b.column(index) for b in data)


def _pick(schema: Any, column: str | None) -> tuple[str, Any]:
    names = list(schema.names)
    if column is None:
        if len(names) != 1:
            raise ValueError(f"the data has columns {names}: pass column= to pick one")
        column = names[0]
    if column not in names:
        raise KeyError(f"no column {column!r}; the data has {names}")
    return column, schema.field(column)


def column_plan(name: str, field: Any) -> _Plan:
    """``(kind, dtype, item_shape)`` for an Arrow field: what store its column becomes. An
    unsupported type raises ``TypeError`` naming the column."""
    pa = _pa()
    t = field.type

    def bad(why: str = "") -> TypeError:
        return TypeError(
            f"column {name!r} has Arrow type {t}, which no store holds{why}: use primitive numbers or bools, "
            "fixed-size lists or fixed-shape tensors of them (dense), lists of those (ragged), or binary/string (bytes)"
        )

    def dense(u: Any) -> tuple[np.dtype[Any], tuple[int, ...]] | None:
        """(dtype, item_shape) of a dense row type, or None."""
        shape = []
        if isinstance(u, pa.BaseExtensionType) and u.extension_name == "arrow.fixed_shape_tensor":
            if u.permutation is not None and list(u.permutation) != list(range(len(u.shape))):
                raise bad(" (a permuted tensor layout)")
            shape, u = list(u.shape), u.storage_type.value_type
        while pa.types.is_fixed_size_list(u):
            shape.append(u.list_size)
            u = u.value_type
        if pa.types.is_boolean(u) or pa.types.is_integer(u) or pa.types.is_floating(u):
            return np.dtype(u.to_pandas_dtype()), tuple(shape)
        return None

    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return _BYTES, np.dtype(np.uint8), ()
    got = dense(t)
    if got is not None:
        return ("dense", *got)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        got = dense(t.value_type)
        if got is not None:
            return ("ragged", *got)
    raise bad()


def column_records(
    pa: Any, name: str, kind: str, dtype: np.dtype[Any], shape: tuple[int, ...], arr: Any, first_row: int
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.uint64]]:
    """The records of one Arrow array as ``(flat bytes, record offsets)`` for an append; nulls
    and empty records are errors naming the column and the row."""
    if arr.null_count:
        row = first_row + int(np.flatnonzero(~np.asarray(arr.is_valid()))[0])
        raise ValueError(f"column {name!r} has a null at row {row}; stores have no nulls")
    row_bytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if kind == "dense":
        flat = _dense_values(pa, name, arr).astype(dtype, copy=False)
        offsets = np.arange(len(arr), dtype=np.uint64) * np.uint64(row_bytes)
        return np.ascontiguousarray(flat).reshape(-1).view(np.uint8), offsets
    if kind == _BYTES:
        if pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type):
            arr = arr.cast(pa.large_binary() if pa.types.is_large_string(arr.type) else pa.binary())
        width = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
        bufs = arr.buffers()
        offs = np.frombuffer(bufs[1], dtype=width)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
        data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
        data = data[offs[0] : offs[-1]]
        offs -= offs[0]
    else:
        offs = np.asarray(arr.offsets, dtype=np.int64)
        offs = (offs - offs[0]) * row_bytes
        values = _dense_values(pa, name, arr.flatten()).astype(dtype, copy=False)
        data = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
    empty = np.flatnonzero(np.diff(offs) == 0)
    if empty.size:
        row = first_row + int(empty[0])
        raise RecordSizeError.new(f"column {name!r} has an empty record at row {row}; records are at least 1 byte", index=row)
    return data, offs[:-1].astype(np.uint64)


def _dense_values(pa: Any, name: str, arr: Any) -> npt.NDArray[Any]:
    """The flat NumPy values of an array of dense rows (fixed-size lists unwrapped, slices kept),
    without a copy where the buffer allows it; a null anywhere inside is an error naming the
    column."""
    if isinstance(arr.type, pa.BaseExtensionType):
        arr = arr.storage
    while True:
        if arr.null_count:
            raise ValueError(f"column {name!r} has a null inside a record; stores have no nulls")
        if not pa.types.is_fixed_size_list(arr.type):
            break
        size = arr.type.list_size
        arr = arr.values.slice(arr.offset * size, len(arr) * size)  # flatten() copies; a slice does not
    if pa.types.is_boolean(arr.type):
        return cast("npt.NDArray[Any]", arr.to_numpy(zero_copy_only=False))  # Arrow packs bools into bits
    dtype = np.dtype(arr.type.to_pandas_dtype())
    return np.frombuffer(arr.buffers()[1], dtype=dtype)[arr.offset : arr.offset + len(arr)]
