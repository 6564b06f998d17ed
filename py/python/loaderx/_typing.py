"""Names for the types the public API takes and returns, for annotations (checked by
``mypy --strict`` in ``make lint``)."""

import os
from typing import Any, Dict, Sequence, SupportsIndex, Tuple, Union

import numpy as np
import numpy.typing as npt

#: A local path (str or path-like) or, where stores may be remote, a URL.
StrPath = Union[str, "os.PathLike[str]"]

#: A remote store's disk cache: ``(directory, max_bytes)``.
Cache = Tuple[StrPath, int]

#: Record indices as a Zrecord takes them: an integer, integers, or an integer array.
Indices = Union[SupportsIndex, Sequence[SupportsIndex], "npt.NDArray[np.integer[Any]]"]

#: What indexes a dataset: an integer (negative counts from the end), a slice, integers or an
#: integer array, or a boolean mask.
Index = Union[Indices, slice, "npt.NDArray[np.bool_]"]

#: A batch as the DataLoader gathers it: ``{stream name: values}``, an array for a dense stream
#: and a list of arrays for a ragged one.
Batch = Dict[str, Any]
