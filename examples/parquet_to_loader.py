"""From Parquet to a loaderx store to the DataLoader.

scikit-learn's digits go into a Parquet file (images as fixed-size lists of 64 floats, labels as
int64), as any Arrow-based tool would write them. ``from_arrow`` turns each column into a store,
streaming the file's row groups, and the DataLoader trains from the stores. The stores export
Arrow again, so pyarrow (or Polars, or DuckDB) reads them back directly.

    python examples/parquet_to_loader.py --workdir /tmp/parquet-demo
"""

import argparse
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from sklearn.datasets import load_digits

from loaderx.converter import from_arrow
from loaderx.dataloader import DataLoader
from loaderx.dataset import DenseDataset


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(tempfile.mkdtemp(prefix="loaderx-parquet-")))
    args = p.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)

    digits = load_digits()
    images = pa.FixedSizeListArray.from_arrays(pa.array((digits.data / 16).astype(np.float32).reshape(-1)), 64)
    table = pa.table({"image": images, "label": pa.array(digits.target.astype(np.int64))})
    parquet = args.workdir / "digits.parquet"
    pq.write_table(table, parquet, row_group_size=256)
    print(f"wrote {parquet.name}: {table.num_rows} rows, {pq.ParquetFile(parquet).num_row_groups} row groups")

    for column in ("image", "label"):
        n = from_arrow(args.workdir / column, parquet, column=column, progress=False)
        ds = DenseDataset(args.workdir / column)
        print(f"store {column}: {n} records of {ds.item_shape} {ds.dtype}")

    streams = {"x": DenseDataset(args.workdir / "image"), "y": DenseDataset(args.workdir / "label")}
    with DataLoader(streams, batch_size=128, seed=0) as loader:
        batch = next(loader)
    print(f"batch x {batch['x'].shape} {batch['x'].dtype}, y {batch['y'].shape} {batch['y'].dtype}")

    back = pa.table(streams["x"])  # Arrow out: the store as a column of fixed-size lists
    same = np.array_equal(np.stack(back.column("data").to_numpy(zero_copy_only=False)), digits.data / 16)
    print(f"arrow out: {back.num_rows} rows, {back.schema.field('data').type}, equal to the source: {same}")


if __name__ == "__main__":
    main()
