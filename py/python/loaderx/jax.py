"""JAX global arrays from the loaderx DataLoader.

:class:`DataLoader` is :class:`loaderx.dataloader.DataLoader` whose ``next()`` returns every
NumPy array of the batch as one global ``jax.Array`` of shape ``(batch_size, ...)``, sharded
along its leading (batch) axis by ``sharding`` (by default :func:`sharding`: split over all
devices of all processes). Invariants:

* Global and deterministic: batch ``k``'s global array is the same for any number of
  processes and devices. ``np.asarray`` of it (gathered, on one process) equals batch ``k`` of
  the base DataLoader with the same config, and it depends only on ``(seed, k)`` and the config.
* Each process gathers only its slice: rows ``[i * b, (i + 1) * b)`` of the global batch, with
  ``i = shard_index`` and ``b = batch_size // shard_count`` (the rule of
  :class:`loaderx._state.Shard`, the base loader's), read by this process's workers and
  placed on this process's devices only. ``shard_index``/``shard_count`` default to
  :func:`loaderx.dataloader.jax_shard` (``jax.process_index()`` of ``jax.process_count()``).
  The sharding must put exactly those rows on this process's devices, which construction
  checks; the default sharding does after ``jax.distributed.initialize``.
* Workers stay NumPy: reads and the transform run on the workers as in the base loader, and
  the arrays become ``jax.Array`` in the consumer, in ``next()``.
* Elastic resume is the base loader's: ``state_dict`` / ``load_state_dict`` do not depend on
  the process count, the device count or the sharding, so a state saved by any process of a
  run on N processes resumes a run on M processes with the same global ``batch_size``.

A loader holds devices, so it does not pickle: build it in each process.
"""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from ._extras import missing

try:
    import jax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec
except ImportError as e:
    raise missing(e, "loaderx.jax", "jax", "pip install jax") from None

from . import dataloader as _base
from ._state import Shard

if TYPE_CHECKING:
    from ._typing import Stream

__all__ = ["DataLoader", "sharding"]


def sharding(axis: str = "data", devices: Iterable[Any] | None = None) -> Any:
    """A ``NamedSharding`` splitting the leading axis over ``devices`` (default
    ``jax.devices()``: every device of every process) on a 1-D mesh named ``axis``."""
    devices = jax.devices() if devices is None else list(devices)
    return NamedSharding(Mesh(np.array(devices), (axis,)), PartitionSpec(axis))


_default_sharding = sharding  # DataLoader's `sharding` argument shadows the function


def _layout(spec: Any) -> tuple[int, list[tuple[Fraction, Fraction]]]:
    """Where ``spec`` puts a global batch on this process's devices: the number of distinct
    blocks of rows they hold, and those rows as merged ``(start, stop)`` runs, in fractions of
    the batch."""
    n = len(spec.device_set)  # n rows split exactly: a mesh axis's parts divide the mesh size
    rank = max(1, len(getattr(spec, "spec", ())))
    index_map = spec.addressable_devices_indices_map((n,) * rank)
    blocks = sorted({index[0].indices(n)[:2] for index in index_map.values()})
    runs: list[list[int]] = []
    for start, stop in blocks:
        if runs and runs[-1][1] == start:
            runs[-1][1] = stop
        else:
            runs.append([start, stop])
    return len(blocks), [(Fraction(start, n), Fraction(stop, n)) for start, stop in runs]


class DataLoader(_base.DataLoader[Any]):
    """A :class:`loaderx.dataloader.DataLoader` yielding global ``jax.Array`` batches.

    Takes the base loader's arguments, with ``shard_index``/``shard_count`` defaulting to this
    process's place in JAX, and:

    Args:
        sharding (jax.sharding.Sharding): How each global array is laid out over the devices;
            it must split the leading axis so that this process's devices hold rows
            ``[shard_index * b, (shard_index + 1) * b)``, ``b = batch_size // shard_count``.
            Defaults to :func:`sharding`.

    Every NumPy array leaf of the transform's output must have ``b`` rows; other leaves are
    returned as they are.
    """

    def __init__(
        self,
        streams: Mapping[str, Stream],
        *args: Any,
        sharding: Any = None,
        shard_index: int | None = None,
        shard_count: int | None = None,
        **kwargs: Any,
    ) -> None:
        shard = Shard.of(shard_index, shard_count, Shard.jax)
        super().__init__(streams, *args, shard_index=shard.index, shard_count=shard.count, **kwargs)
        self.sharding = _default_sharding() if sharding is None else sharding
        self._check_sharding()

    def _check_sharding(self) -> None:
        spec, count, index = self.sharding, self.shard_count, self.shard_index
        processes = {d.process_index for d in spec.device_set}
        if len(processes) > 1 and count != jax.process_count():
            raise ValueError(
                f"the sharding spans {len(processes)} processes of {jax.process_count()}, so shard_count must be "
                f"jax.process_count() = {jax.process_count()}, got {count}"
            )
        per = self._shard.per(self.batch_size)
        parts, runs = _layout(spec)
        if per % parts:
            raise ValueError(
                f"the per-process batch {per} (batch_size {self.batch_size} / shard_count {count}) is not divisible "
                f"by the {parts} shards the sharding splits it into on this process's "
                f"{len(spec.addressable_devices)} devices; use a batch_size that is a multiple of {count * parts}"
            )
        mine = self._shard.rows(self.batch_size)
        if runs != [self._shard.fraction()]:
            held = ", ".join(f"[{float(a * self.batch_size):g}, {float(b * self.batch_size):g})" for a, b in runs)
            raise ValueError(
                f"this process's devices hold rows {held} of each global batch of {self.batch_size} under the "
                f"sharding, but shard {index} of {count} is rows [{mine.start}, {mine.stop}); use "
                "shard_index=jax.process_index(), shard_count=jax.process_count() with a sharding over "
                "jax.devices(), or a sharding over this process's devices with shard_count=1"
            )

    def _global(self, path: Any, local: Any) -> Any:
        if not isinstance(local, np.ndarray):
            return local
        per = self._shard.per(self.batch_size)
        if local.ndim == 0 or local.shape[0] != per:
            raise ValueError(
                f"batch leaf {jax.tree_util.keystr(path)} has shape {local.shape}, but each leaf must have the "
                f"per-process batch of {per} rows (batch_size {self.batch_size} / shard_count {self.shard_count}) "
                "along its leading axis"
            )
        return jax.make_array_from_process_local_data(self.sharding, local, (self.batch_size, *local.shape[1:]))

    def __next__(self) -> Any:
        return jax.tree_util.tree_map_with_path(self._global, super().__next__())

    def __reduce__(self) -> tuple[Any, ...]:
        raise TypeError(
            "a loaderx.jax.DataLoader holds JAX devices and does not pickle; build the loader in each process "
            "(its state_dict() does pickle, and resumes it there)"
        )
