"""Ray Data reads and writes loaderx stores (``pip install "ray[data]"``).

* :class:`LoaderxDatasource`: ``ray.data.read_datasource(LoaderxDatasource(location))`` reads a
  store, a manifest of stores or a URL (or ``{column: location}`` of equal lengths). Each read
  task covers one contiguous range of records and yields blocks of about ``batch_bytes``, as
  Arrow tables (the types of :mod:`loaderx.arrow`) or, with ``block_format="numpy"``, as NumPy
  batches that Ray turns into its own tensor columns.
* :class:`LoaderxDatasink`: ``ds.write_datasink(LoaderxDatasink(path, column=...))`` writes one
  column into a manifest of stores. It is two-phase: every write task (every attempt of it)
  writes its own new store, named by the job, the task and the attempt; only
  ``on_write_complete``, on the driver, lists the stores the successful attempts returned, in
  one atomic manifest commit (:func:`loaderx.manifest.commit`). A task that failed, or an
  attempt that was retried, leaves no store in the manifest, and its leftovers are removed.
  ``path`` may be an ``s3://``, ``gs://`` or ``az://`` URL: each task then stages its store on
  its own node and copies it up (:mod:`loaderx.remote`), and the driver commits the manifest
  there with a conditional write, so a cluster of several machines needs no shared disk.

Ray schedules everything; loaderx adds no scheduler.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

from ._extras import missing

try:
    from ray.data import Datasink, Datasource, ReadTask
    from ray.data.block import BlockAccessor, BlockMetadata
except ImportError as e:
    raise missing(e, "loaderx.ray", "ray", 'pip install "ray[data]"') from None

from . import arrow, manifest
from .converter import from_arrow, from_numpy
from .dataset import DenseDataset, RaggedDataset
from .errors import BadArgumentError
from .zrecord import Zrecord, _location

if TYPE_CHECKING:
    import numpy.typing as npt

    from ._typing import StrPath

__all__ = ["LoaderxDatasink", "LoaderxDatasource"]

PARTS = "parts"


def open_any(
    location: StrPath, storage_options: dict[str, str] | None = None
) -> DenseDataset | RaggedDataset | Zrecord:
    """The dataset at ``location``: dense or ragged by its schema, a ``Zrecord`` of byte
    strings when it has none."""
    try:
        return DenseDataset(location, storage_options)
    except BadArgumentError:
        return RaggedDataset(location, storage_options)
    except FileNotFoundError:
        return Zrecord._existing(_location(location), storage_options, None)


def _open_all(
    locations: Mapping[str, StrPath], storage_options: dict[str, str] | None
) -> dict[str, DenseDataset | RaggedDataset | Zrecord]:
    return {name: open_any(loc, storage_options) for name, loc in locations.items()}


class LoaderxDatasource(Datasource):
    """Records of a store, a manifest or a URL as a Ray dataset (see the module doc).

    Args:
        location: A store or manifest path or URL, or ``{column: location}``.
        column (str): The column name for a single location. Defaults to ``"data"``.
        block_format (str): ``"arrow"`` (default) or ``"numpy"``.
        batch_bytes (int): About how many bytes each block holds.
        storage_options (dict): For URLs, as the datasets take them.
    """

    def __init__(
        self,
        location: StrPath | dict[str, StrPath],
        column: str = "data",
        block_format: str = "arrow",
        batch_bytes: int = arrow.BATCH_BYTES,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        if block_format not in ("arrow", "numpy"):
            raise ValueError(f"block_format must be 'arrow' or 'numpy', got {block_format!r}")
        self.locations: dict[str, StrPath] = dict(location) if isinstance(location, dict) else {column: location}
        self.block_format = block_format
        self.batch_bytes = int(batch_bytes)
        self.storage_options = storage_options
        export = arrow._Export(_open_all(self.locations, storage_options), self.batch_bytes)
        self.schema, self.length, self.record_bytes = export.schema, export.length, export.record_bytes

    def get_name(self) -> str:
        return "Loaderx"

    def estimate_inmemory_data_size(self) -> int:
        return self.length * self.record_bytes

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None, data_context: Any = None) -> list[Any]:
        tasks: list[Any]
        n, tasks = self.length, []
        parts = max(1, min(int(parallelism), n))
        bounds = [n * k // parts for k in range(parts + 1)]
        for lo, hi in zip(bounds, bounds[1:]):
            if hi > lo:
                meta = BlockMetadata(num_rows=hi - lo, size_bytes=(hi - lo) * self.record_bytes, input_files=None,
                                     exec_stats=None)
                tasks.append(ReadTask(_Read(self, lo, hi), meta, schema=self.schema,
                                      per_task_row_limit=per_task_row_limit))
        return tasks


class _Read:
    """One read task: records ``[lo, hi)``, opened in the worker."""

    def __init__(self, source: LoaderxDatasource, lo: int, hi: int) -> None:
        self.locations, self.storage_options = source.locations, source.storage_options
        self.block_format, self.batch_bytes = source.block_format, source.batch_bytes
        self.lo, self.hi = lo, hi

    def __call__(self) -> Iterator[Any]:
        opened = _open_all(self.locations, self.storage_options)
        for batch in arrow._Export(opened, self.batch_bytes).batches(self.lo, self.hi):
            if self.block_format == "arrow":
                yield arrow._pa().Table.from_batches([batch])
            else:
                yield BlockAccessor.batch_to_block({name: _numpy(opened[name], batch.column(name)) for name in opened})


def _numpy(ds: object, column: Any) -> npt.NDArray[Any]:
    """A column of a batch as NumPy: an array of rows for dense data, else a list of records."""
    if isinstance(ds, DenseDataset):
        return arrow._dense_values(arrow._pa(), "", column).reshape((len(column), *ds.item_shape))
    import numpy as np

    out = np.empty(len(column), dtype=object)
    out[:] = [np.asarray(v) for v in column.to_numpy(zero_copy_only=False)]
    return out


class LoaderxDatasink(Datasink):
    """Writes columns of a Ray dataset into manifests of stores at ``path``, two-phase (see the
    module doc).

    Args:
        path: A local directory, or an ``s3://``, ``gs://`` or ``az://`` URL. One column goes to
            the manifest there (``manifest.json`` and ``parts/``); several go to one manifest
            each, in ``path/<column>``, whose stores line up record for record (the
            DataLoader's streams). Open the result by ``path`` (a URL: ``path/manifest.json``).
        column (str | list[str]): The column or columns to store; may be omitted when the data
            has one column.
        codec (str): As the converters take it.
        storage_options (dict, optional): For a URL: object_store's options, as the converters
            take them (each node also reads its environment: ``AWS_*``, ...).

    With several columns, the manifests are committed one after another: a crash between two
    commits leaves them with different lengths, which the DataLoader refuses to pair.
    """

    def __init__(
        self,
        path: StrPath,
        column: str | Sequence[str] | None = None,
        codec: str = "zstd",
        storage_options: dict[str, str] | None = None,
    ) -> None:
        from .converter import _target

        # A URL is checked here, on the driver (an HTTP one refused).
        self.path: Path | str = _target(path, "write a Ray dataset to")
        self.columns = [column] if isinstance(column, str) else (list(column) if column is not None else None)
        self.codec = codec
        self.storage_options = dict(storage_options) if storage_options else None
        self.job = uuid.uuid4().hex[:8]
        self.removed: list[str] = []

    def get_name(self) -> str:
        return "Loaderx"

    def _root(self, column: str) -> Path | str:
        """Where a column's manifest goes."""
        if self.columns is None or len(self.columns) == 1:
            return self.path
        return _join(self.path, column)

    def _roots(self) -> list[Path | str]:
        return [self._root(c) for c in self.columns] if self.columns else [self.path]

    def on_write_start(self, schema: Any = None) -> None:
        for root in self._roots():
            if isinstance(root, Path):
                (root / PARTS).mkdir(parents=True, exist_ok=True)

    def write(self, blocks: Iterable[Any], ctx: Any) -> dict[str, Any] | None:
        name = f"{PARTS}/{self.job}-{ctx.task_idx:05d}-{uuid.uuid4().hex[:8]}"
        rows = 0
        for block in blocks:
            acc = BlockAccessor.for_block(block)
            if acc.num_rows() == 0:
                continue
            table = acc.to_arrow()
            for column in self.columns or [_only(table.column_names)]:
                self._write_column(_join(self._root(column), name), acc, table, column)
            rows += acc.num_rows()
        if not rows:
            return None
        import ray

        return {"store": name, "rows": rows, "node": ray.get_runtime_context().get_node_id()}

    def _write_column(self, store: Path | str, acc: Any, table: Any, column: str) -> None:
        if column not in table.column_names:
            raise KeyError(f"no column {column!r}; the data has {table.column_names}")
        if getattr(table.schema.field(column).type, "extension_name", "").startswith("ray."):
            # Ray's own tensor columns: through NumPy, which Ray converts them to.
            values = acc.to_numpy(column)
            if values.dtype == object:
                raise TypeError(f"column {column!r} holds tensors of varying shapes; pad them or store lists")
            from_numpy(store, values, codec=self.codec, progress=False, storage_options=self.storage_options)
        else:
            from_arrow(store, table, column=column, codec=self.codec, progress=False, storage_options=self.storage_options)

    def on_write_complete(self, write_result: Any) -> None:
        written = [r for r in write_result.write_returns if r]
        #: Where each listed store was written (Ray node ids), for the record.
        self.nodes = sorted({r.get("node", "") for r in written})
        if written:
            for root in self._roots():
                manifest.commit(root, [r["store"] for r in written], self.storage_options)
        self._remove_leftovers({r["store"] for r in written})

    def on_write_failed(self, error: Exception) -> None:
        self._remove_leftovers(set())

    def _remove_leftovers(self, keep: set[str]) -> None:
        """Removes the stores this job started and did not list (from failed or retried
        attempts); ``self.removed`` names them."""
        self.removed = []
        for root in self._roots():
            if isinstance(root, str):
                from . import remote

                parts = f"{root.rstrip('/')}/{PARTS}"
                for name in remote.list_stores(parts, self.storage_options):
                    if name.startswith(f"{self.job}-") and f"{PARTS}/{name}" not in keep:
                        self.removed.append(name)
                        # A retried attempt may have published its store: no manifest lists it.
                        remote.remove_partial(f"{parts}/{name}", self.storage_options, published=True)
                continue
            for d in sorted((root / PARTS).glob(f"{self.job}-*")):
                if f"{PARTS}/{d.name}" not in keep:
                    self.removed.append(d.name)
                    shutil.rmtree(d, ignore_errors=True)


def _join(root: Path | str, name: str) -> Path | str:
    """``root/name`` for a local directory or a URL."""
    return root / name if isinstance(root, Path) else f"{root.rstrip('/')}/{name}"


def _only(names: Sequence[str]) -> str:
    if len(names) != 1:
        raise ValueError(f"the data has columns {names}: pass column= to LoaderxDatasink")
    return names[0]
