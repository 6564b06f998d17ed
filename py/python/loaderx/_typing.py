"""Names for the types the public API takes and returns, for annotations (checked by
``mypy --strict`` in ``make lint``)."""

import os
from typing import Any, Dict, Literal, Protocol, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

#: A local path (str or path-like) or, where stores may be remote, a URL.
StrPath = Union[str, "os.PathLike[str]"]

#: A remote store's disk cache: ``(directory, max_bytes)``.
Cache = Tuple[StrPath, int]

#: One record index (negative counts from the end where a length is known).
IndexScalar = Union[int, "np.integer[Any]"]

#: Record indices as a Zrecord takes them: an integer, integers, or an integer array.
Indices = Union[IndexScalar, Sequence[IndexScalar], "npt.NDArray[np.integer[Any]]"]

#: What selects many records of a dataset: a slice, integers or an integer array (of any shape,
#: as in NumPy), or a boolean mask.
IndexArray = Union[
    slice,
    Sequence[IndexScalar],
    Sequence[Sequence[IndexScalar]],
    "npt.NDArray[np.integer[Any]]",
    "npt.NDArray[np.bool_]",
]

#: What indexes a dataset: one record or many.
Index = Union[IndexScalar, IndexArray]

#: A batch as the DataLoader gathers it: ``{stream name: values}``, an array for a dense stream
#: and a list of arrays for a ragged one.
Batch = Dict[str, Any]

#: What a converter does with a store already at its path.
WriteMode = Literal["append", "overwrite", "error"]


class Stream(Protocol):
    """What a DataLoader reads a stream from: a dataset, or anything with a length and a read of
    many records at once."""

    def __len__(self) -> int: ...

    def __getitems__(self, idxs: "npt.NDArray[np.uint64]", /) -> Any: ...
