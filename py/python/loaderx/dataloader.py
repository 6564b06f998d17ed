"""DataLoader: an endless, step-based, deterministic batch pipeline over dense streams.

Drop-in compatible with ``loaderx.dataloader`` of loaderx 0.9.11, with these guarantees on top:

* Deterministic: batch ``k`` depends only on ``(seed, k)`` and the config, never on the number
  of workers or thread timing. Worker threads compute steps in any order and the consumer
  receives them in step order.
* Resumable: :attr:`DataLoader.step`, :meth:`seek` and :meth:`state_dict` /
  :meth:`load_state_dict` restart exactly. The state is a versioned dict of a few counters plus
  the config and its fingerprint (:class:`loaderx._state.LoaderState`); a state from a
  different config is refused, and states of every earlier version (0.10.0 on) load.
* Elastic: the state does not depend on the process's shard. A state saved by any rank, with
  any ``shard_count``, loads on any rank of any ``shard_count`` that divides the same global
  ``batch_size``: step ``k``'s global batch is the same for every shard count, so the run's
  samples are exactly those of an uninterrupted run, none repeated and none skipped. A state
  with another global ``batch_size`` is refused: step ``k`` of a different batch size draws
  other samples, so no step resumes it exactly.
* Multi-host: ``shard_index``/``shard_count`` give each process its slice of the same global
  batch (``batch_size`` is the global size), so no other coordination is needed. Shard ``i``
  of ``n`` takes rows ``[i * b, (i + 1) * b)``, ``b = batch_size // n`` (:class:`loaderx._state.
  Shard`, the rule loaderx.torch and loaderx.jax use too).
  :func:`jax_shard` and :func:`torch_shard` read the process's place from JAX or
  torch.distributed.
* Robust: an exception in a read or a transform is raised by ``next()`` at that step, with its
  original traceback. ``close()`` never hangs, no thread outlives ``close()`` or garbage
  collection, and a loader used in a forked child restarts its threads there.

Workers are threads by default: a step costs no IPC and batches are the gathered arrays
themselves. A transform that holds the GIL (a Python loop over samples) serializes on threads
under a GIL build. ``workers="processes"`` runs each step (gather and transform) in one of
``num_workers`` spawned processes instead and hands the result back through shared memory, with
the guarantees above unchanged. See :mod:`loaderx._process_workers` for that design.
"""

from __future__ import annotations

import operator
import os
import pickle
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Generic, Literal, Mapping, Sequence, TypeVar, cast

from . import _process
from ._closing import Closing
from ._metrics import Metrics, clock, produce_timed
from ._state import LoaderState, Shard, base_config
from .errors import BadArgumentError
from .mask import Mask, Masked, as_mask
from .packing import DEFAULT_BINS, PackedSource, check_packing, check_source
from .sampler import Sampler, _mode

if TYPE_CHECKING:
    import typing_extensions
    from typing_extensions import Self

    from ._process_workers import ProcessPipeline
    from ._typing import Batch, Stream
    from .dataset import RaggedDataset
    from .mix import MixSampler

    # What ``next()`` returns: the transform's result, else the batch dict. The default (PEP
    # 696) is what a type checker takes where no transform is given; the runtime needs none.
    _T = typing_extensions.TypeVar("_T", default=Batch)
    _R = typing_extensions.TypeVar("_R", default=Batch)
else:
    _T = TypeVar("_T")

__all__ = ["DataLoader", "default_workers", "jax_shard", "torch_shard"]

#: How long ``close()`` waits for a worker that is inside a long transform before leaving it
#: (daemon threads end with the process; their results are dropped).
JOIN_TIMEOUT = 5.0


def jax_shard() -> dict[str, int]:
    """``{"shard_index": jax.process_index(), "shard_count": jax.process_count()}``."""
    return Shard.jax().as_kwargs()


def torch_shard() -> dict[str, int]:
    """This process's rank and world size under torch.distributed (0 of 1 when not initialised)."""
    return Shard.torch().as_kwargs()


class _Pipeline:
    """Worker threads computing ``produce(step)`` for consecutive steps, handed out in order.

    Holds no reference to the DataLoader, so the loader can be garbage-collected while the
    threads run; its finalizer stops them. ``stop()`` reads time through ``clock`` (seconds,
    monotonic), which a test may replace.
    """

    def __init__(self, produce: Callable[[int], Any], start: int, num_workers: int, window: int) -> None:
        self.clock: Callable[[], float] = time.monotonic
        self._produce = produce
        self._cond = threading.Condition()
        self._claim = start  # next step a worker takes
        self._next = start  # next step the consumer takes
        self._ready: dict[int, tuple[bool, Any]] = {}  # step -> (ok, batch or exception)
        self._window = window  # steps in flight or ready, at most
        self._stopped = False
        self.pid = _process.current()
        self._threads = [
            threading.Thread(target=self._work, name=f"loaderx-worker-{i}", daemon=True) for i in range(num_workers)
        ]
        for t in self._threads:
            t.start()

    @property
    def next_step(self) -> int:
        return self._next

    def ready_count(self) -> int:
        """Batches made and not yet taken."""
        return len(self._ready)

    def _work(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while not self._stopped and self._claim - self._next >= self._window:
                    cond.wait()
                if self._stopped:
                    return
                step = self._claim
                self._claim += 1
            try:
                result = (True, self._produce(step))
            except BaseException as e:  # handed to the consumer, raised there
                result = (False, e)
            with cond:
                if self._stopped:
                    return
                self._ready[step] = result
                cond.notify_all()

    def get(self) -> Any:
        with self._cond:
            while self._next not in self._ready:
                if self._stopped:
                    raise ValueError("the DataLoader is closed")
                self._cond.wait()
            ok, value = self._ready.pop(self._next)
            self._next += 1
            self._cond.notify_all()
        if ok:
            return value
        raise value

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._ready.clear()
            self._cond.notify_all()
        me = threading.current_thread()
        # One deadline for all workers: N stuck workers must not cost N * JOIN_TIMEOUT.
        deadline = self.clock() + JOIN_TIMEOUT
        for t in self._threads:
            if t is not me:
                t.join(max(0.0, deadline - self.clock()))


def _identity(batch: Batch) -> Batch:
    return batch


def default_workers() -> int:
    """One worker per core this process may run on (its CPU affinity where the system has
    one, else every core): the DataLoader's default ``num_workers``."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def _check_mask(mask: Mask, streams: Mapping[str, Stream]) -> None:
    """A mask must be for one of the (aligned) streams' stores: its identity and length."""
    problems = []
    for name, ds in streams.items():
        if getattr(ds, "engine", None) is None:
            raise TypeError(f"exclude= needs loaderx datasets as streams; {name!r} is a {type(ds).__name__}")
        try:
            mask.check(ds)
            return
        except BadArgumentError as e:
            problems.append(f"{name!r}: {e}")
    raise BadArgumentError.new(f"the mask (for {mask.identity}) is for none of these streams' stores: " + "; ".join(problems))


def _packed_masks(exclude: Any, datasets: Sequence[Any]) -> list[Mask | None] | None:
    """A packed loader's masks, one (or None) per source, each checked against its source."""
    if exclude is None:
        return None
    if not isinstance(exclude, (list, tuple)):
        raise TypeError("exclude= of several sources is a list: one mask (or None) per source")
    if len(exclude) != len(datasets):
        raise ValueError(f"exclude has {len(exclude)} entries for {len(datasets)} sources: one mask (or None) per source")
    masks = [None if e is None else as_mask(e) for e in exclude]
    for k, (mask, ds) in enumerate(zip(masks, datasets)):
        if mask is not None:
            _check_mask(mask, {f"source {k}": ds})
    return masks


def _streams(streams: Mapping[str, Stream]) -> dict[str, Stream]:
    """The named streams as a dict, or a TypeError that shows the form."""
    if isinstance(streams, dict):
        return dict(streams)
    if hasattr(streams, "__getitems__") or hasattr(streams, "item_shape"):
        raise TypeError(
            f"DataLoader takes named streams, a dict such as {{'data': dataset}}, not a "
            f"{type(streams).__name__}; batches are dicts with the same names"
        )
    try:
        return dict(streams)
    except (TypeError, ValueError):
        raise TypeError(
            f"DataLoader takes named streams, a dict such as {{'data': dataset}}, got {type(streams).__name__}"
        ) from None


class _BatchSource:
    """The gather half of a step: the sampler's indices, this shard's slice of them, one read
    per stream. Pickles (streams by path), so worker processes gather for themselves."""

    def __init__(self, streams: dict[str, Stream], sampler: Sampler | MixSampler, shard: Shard) -> None:
        self.streams = streams
        self.sampler = sampler
        self.shard = shard

    def batch(self, step: int) -> Batch:
        return self.batch_timed(step)[0]

    def batch_timed(self, step: int) -> tuple[Batch, float]:
        """The batch, and the clock when its indices were ready (the end of sampling)."""
        idxs = self.shard.take(self.sampler.batch_at(step))
        sampled = clock()
        return {name: _read(ds, idxs, step, self.sampler.seed) for name, ds in self.streams.items()}, sampled


def _read(ds: Stream, idxs: Any, step: int, seed: int) -> Any:
    """One stream's records of a step. A stream whose records depend on the step (an
    :class:`~loaderx.dataset.ImageDataset`'s random crops) has ``at_step``."""
    at_step = getattr(ds, "at_step", None)
    return ds.__getitems__(idxs) if at_step is None else at_step(idxs, step, seed)


class DataLoader(Closing, Generic[_T]):
    """Endless batches ``{name: values}`` gathered from named dense streams.

    Args:
        streams (dict[str, DenseDataset]): Named streams of equal length, all gathered at the
            same indices so record ``i`` lines up across them.
        num_workers (int): Workers (threads, or processes with ``workers="processes"``).
            Defaults to one per core this process may run on (:func:`default_workers`). Over
            local stores, where decoding keeps a worker busy, that is fastest (more share the
            cores by time slices: 4 workers on 2 cores ran 0-10% slower over zstd and 17-27%
            slower over raw records, docs/benchmarks.md); over remote stores more workers keep
            more requests in flight.
        batch_size (int): Global batch size. Defaults to 256.
        prefetch_size (int): Batches ready ahead of the consumer. Defaults to 4.
        mode (str | int): Sampler mode: ``"sequential"`` (0), ``"iid"`` (1, the default, as
            in the reference: random with replacement) or ``"cyclic"`` (2: a fresh permutation
            per pass, each record once per pass, the usual choice for training). See
            :mod:`loaderx.sampler`. There is no ``shuffle=``: ``mode="cyclic"`` is what it
            means elsewhere.
        seed (int): Sampler seed. Defaults to 42.
        transform (callable): Maps a batch dict to what ``next()`` returns (the collate
            step). Runs on the workers. None (the default) returns the batch dict.
        shard_index (int): This process's shard, ``0 <= shard_index < shard_count``
            (default 0).
        shard_count (int): Processes sharing each global batch; must divide ``batch_size``
            (default 1).
        workers (str): ``"threads"`` (the default) or ``"processes"``: spawned worker
            processes for a transform that holds the GIL. The transform and the streams must
            then pickle: define the transform at module level (a function defined in
            ``python -c``, a notebook cell or a script without an ``if __name__ ==
            "__main__":`` guard is sent by value; see :func:`loaderx._process_workers.
            payload_dumps`). Its result comes back through
            shared memory (arrays of 4 KiB and more without a copy in this process), and an
            exception in a worker, or a worker's death, is raised by ``next()`` at its step.
            POSIX only.
        trace (str | PathLike, optional): Writes the loader's stages and waits as Chrome trace
            events (JSON that Perfetto opens: one track per worker, one for the consumer) to
            this file when the loader closes or the process exits. See :meth:`metrics`.
        verify (str, optional): Sets every stream's checked reads: ``"off"``, ``"fetched"``
            or ``"always"`` (see :class:`~loaderx.dataset.DenseDataset`). None (the default)
            keeps each stream's own setting.
        exclude (Mask | str | PathLike, optional): An exclusion mask (:mod:`loaderx.mask`), or
            its file: the records it excludes are never sampled. It must be made for one of the
            streams' stores (their identity: same schema and table), else BadArgumentError.
            The sampler runs over the kept records, so ``len(loader)``-style arithmetic (epochs
            of ``mode="cyclic"``) counts kept records; states and receipts record the mask.
    """

    def __init__(
        self,
        streams: Mapping[str, Stream],
        num_workers: int | None = None,
        batch_size: int = 256,
        prefetch_size: int = 4,
        mode: int | str = 1,
        seed: int = 42,
        transform: Callable[[Batch], _T] | None = None,
        *,
        shard_index: int | None = None,
        shard_count: int | None = None,
        workers: Literal["threads", "processes"] = "threads",
        shuffle: None = None,
        verify: str | None = None,
        _mix: MixSampler | None = None,
        _packed: tuple[int, str, int] | None = None,
        trace: str | os.PathLike[str] | None = None,
        exclude: Mask | str | os.PathLike[str] | None = None,
        _masks: list[Mask | None] | None = None,
    ) -> None:
        if shuffle is not None:
            raise TypeError(
                "DataLoader takes no shuffle=; choose how indices are drawn with mode=: 'cyclic' "
                "(a fresh permutation per pass: shuffle=True elsewhere), 'sequential' (in order: "
                "shuffle=False) or 'iid' (random with replacement, the default)"
            )
        self.streams = _streams(streams)
        if not self.streams:
            raise ValueError("need at least one stream")
        if verify is not None:
            # Checked reads of every stream (its own setting otherwise; the default "fetched").
            from .zrecord import _verify_mode

            _verify_mode(verify)
            for ds in self.streams.values():
                set_verify = getattr(ds, "_set_verify", None)
                if set_verify is None:
                    raise TypeError(f"verify= needs loaderx datasets as streams, got a {type(ds).__name__}")
                set_verify(verify)
        lengths = {name: len(ds) for name, ds in self.streams.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"all streams must have the same length, got {lengths}")
        mask = None
        if exclude is not None:
            if _mix is not None or _packed is not None:
                raise ValueError("exclude= here applies to aligned streams: give DataLoader.mix one mask per source (its exclude=), DataLoader.packed its own exclude=")
            mask = as_mask(exclude)
            _check_mask(mask, self.streams)
            self.streams = {name: Masked.one(ds, mask) for name, ds in self.streams.items()}
            lengths = {name: mask.kept for name in self.streams}
        if _packed is not None and _masks is not None and _mix is None:
            # A packed single source through its mask: it packs the kept documents.
            (mask,) = _masks
            lengths = {name: n if mask is None else mask.kept for name, n in lengths.items()}
        if num_workers is None:
            num_workers = default_workers()
        for name, value in (("num_workers", num_workers), ("prefetch_size", prefetch_size)):
            if int(value) < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        self._shard = Shard.of(shard_index, shard_count)
        self._shard.per(int(batch_size))  # the shard count must divide the global batch
        self.length = next(iter(lengths.values()))
        self.sampler: Sampler | MixSampler = _mix if _mix is not None else Sampler(self.length, batch_size, mode, seed)
        if self._shard.count > 1 and _mix is None and _packed is None and self.sampler.batch_len != int(batch_size):
            raise ValueError(f"a CYCLIC batch of {self.length} < batch_size records cannot be sharded")
        self.batch_size = int(batch_size)
        self.num_workers = int(num_workers)
        self.prefetch_size = int(prefetch_size)
        self.shard_index = self._shard.index
        self.shard_count = self._shard.count
        self.transform: Callable[[Batch], Any] = _identity if transform is None else transform
        if workers not in ("threads", "processes"):
            raise ValueError(f"workers must be 'threads' or 'processes', got {workers!r}")
        if workers == "processes" and os.name != "posix":
            raise NotImplementedError("workers='processes' needs a POSIX system; use workers='threads'")
        self.workers = workers
        self._source: _BatchSource | PackedSource
        if _packed is None:
            self._source = _BatchSource(self.streams, self.sampler, self._shard)
        else:
            (tokens,) = self.streams.values()
            # A mix's sources are the parts of its joined stream.
            parts = getattr(getattr(tokens, "_store", None), "parts", None) if _mix is not None else None
            seq_len, packing, bins = _packed
            self._source = PackedSource(
                [check_source(d) for d in (parts or [tokens])],
                seq_len,
                self.batch_size,
                packing,
                bins,
                int(self.sampler.mode),
                self.sampler.seed,
                self._shard,
                _mix,
                _masks,
            )
        if workers == "processes":
            self._process_spec()  # an unpicklable transform fails here, not in a worker
        # What a state must match to resume exactly. Not the shard: batches are global (see
        # the module doc, "Elastic").
        config = base_config(self.length, self.batch_size, int(self.sampler.mode), self.sampler.seed)
        config["streams"] = sorted(self.streams)
        if mask is not None:
            # A state resumes only under the same mask (of the same store).
            config["exclude"] = {"digest": mask.digest, "identity": mask.identity, "excluded": mask.excluded}
        if _masks is not None and _mix is not None:
            # A mix's masks, per source (None: that source unmasked).
            config["exclude"] = [None if m is None else {"digest": m.digest, "identity": m.identity, "excluded": m.excluded} for m in _masks]
        self.mask = mask
        if _mix is not None:
            # A state loads with new weights, never into another set of datasets.
            config["mix"] = _mix.lengths
        if isinstance(self._source, PackedSource):
            config["packed"] = self._source.config()
        from .mix import _listing

        listed = {name: _listing(ds) for name, ds in sorted(self.streams.items())}
        listed = {name: lst for name, lst in listed.items() if lst is not None}
        if listed:
            # Streams over manifests: the stores as listed, so a state from another set of
            # stores (even of the same total length) is refused.
            config["stores"] = listed
        self._config = config
        self._start = 0
        # What receipts and states say about the data: each stream's content digest (computed
        # once, when first asked for), and the segments of steps consumed before this one.
        self._digests: dict[str, str | None] | None = None
        self._history: list[dict[str, Any]] = []
        self._segment_start = 0
        # Guards _pipeline: its creation, seek and close. Replaced in a forked child (see
        # _guard), where a parent thread may have held it at the moment of the fork.
        self._lock = threading.RLock()
        self._lock_pid = _process.current()
        self._pipeline: _Pipeline | ProcessPipeline | None = None
        self._finalizer: weakref.finalize[[], DataLoader[Any]] | None = None
        self._closed = False
        # What next() waited for and where the workers' time went (metrics()); with `trace`, as
        # Chrome trace events too, written when the loader closes or the process exits.
        self._metrics = Metrics(trace)
        self._trace_writer = weakref.finalize(self, self._metrics.write_trace) if trace is not None else None

    # The batch for a step: a pure function of the step.
    def _produce(self, step: int) -> Any:
        out, marks, nbytes = produce_timed(self._source, self.transform, step)
        name = threading.current_thread().name
        track = int(name.rsplit("-", 1)[1]) + 1 if name.startswith("loaderx-worker-") else 1
        self._metrics.step(step, marks, nbytes, track)
        return out

    def metrics(self) -> dict[str, Any]:
        """This process's record of the loader, as a dict of plain numbers (seconds, bytes):

        * ``next``: how long each ``next()`` waited for its batch: ``count``, ``total``,
          ``p50``, ``p95``, ``p99`` and ``max`` (percentiles within 9 %);
        * ``ready``: the batches ready when ``next()`` was called: ``mean``, ``min``, ``max``,
          and ``none``, the calls that found none ready (each one a stall);
        * ``stages``: each stage's time per step on the workers, as ``next``: ``sample`` (the
          step's indices or rows), ``read`` (the engine planning and fetching the bytes),
          ``decode`` (the engine decoding and checking them), ``transform``;
        * ``bytes``: the bytes of the batches made;
        * ``io``: what the engine read for them: ``read_bytes`` (stored bytes),
          ``network_bytes`` (of those, the bytes of a remote store's answers), and ``cache``,
          a remote store's cache blocks found (``hits``) and fetched (``misses``), with
          ``hit_ratio`` (None when no cache was asked).

        Worker processes (``workers="processes"``) report their stages with their results.
        :meth:`reset_metrics` starts counting anew.
        """
        out = self._metrics.snapshot()
        out["workers"] = {"kind": self.workers, "count": self.num_workers, "prefetch": self.prefetch_size}
        return out

    def reset_metrics(self) -> None:
        """Start :meth:`metrics` anew (after a warm-up, say)."""
        self._metrics.reset()

    def _process_spec(self) -> bytes:
        """What a worker process starts from: ``multiprocessing``'s preparation data (sys.path,
        the main module) and the pickled ``(source, transform)``."""
        from multiprocessing import spawn

        from ._process_workers import payload_dumps

        prep = spawn.get_preparation_data("loaderx-worker")
        prep.pop("authkey", None)  # the worker needs no multiprocessing credentials
        dumps = payload_dumps(prep)  # by value what a worker could not import from __main__
        for what, obj in ((f"transform {self.transform!r}", self.transform), ("streams", self._source)):
            try:
                dumps(obj)
            except Exception as e:
                raise TypeError(
                    f"workers='processes' sends the transform and the streams to worker processes by "
                    f"pickling (cloudpickle), and the {what} cannot be pickled ({type(e).__name__}: {e}). "
                    "A transform must not hold what cannot cross processes (locks, open files, "
                    "sockets); streams must pickle too (DenseDataset does, by path). Or use "
                    "workers='threads'."
                ) from None
        payload = dumps((self._source, self.transform))
        return pickle.dumps((prep, payload), protocol=pickle.HIGHEST_PROTOCOL)

    def _guard(self) -> threading.RLock:
        """The lock over ``_pipeline``, a fresh one on first use in a forked child."""
        if _process.forked_since(self._lock_pid):
            self._lock, self._lock_pid = threading.RLock(), _process.current()
        return self._lock

    def _running(self) -> _Pipeline | ProcessPipeline:
        with self._guard():
            return self._running_locked()

    def _running_locked(self) -> _Pipeline | ProcessPipeline:
        if self._closed:
            raise ValueError("the DataLoader is closed")
        p = self._pipeline
        if p is not None and _process.forked_since(p.pid):
            # Forked: the parent's threads do not exist here. Restart from the same step.
            self._start, p = p.next_step, None
            self._pipeline = None
        if p is None:
            window = self.prefetch_size + self.num_workers
            if self.workers == "processes":
                from ._process_workers import ProcessPipeline

                p = ProcessPipeline(self._process_spec(), self._start, self.num_workers, window, self._metrics)
            else:
                p = _Pipeline(_weak_produce(self), self._start, self.num_workers, window)
            self._pipeline = p
            self._finalizer = weakref.finalize(self, p.stop)
        return p

    @property
    def step(self) -> int:
        """The step the next batch comes from (the number of batches taken, after a seek)."""
        p = self._pipeline
        return self._start if p is None else p.next_step

    def seek(self, step: int) -> None:
        """Make the next batch the one of ``step``; prefetched batches are dropped."""
        try:
            step = operator.index(step)
        except TypeError:
            raise TypeError(f"step must be an integer, got {step!r}") from None
        if step < 0:
            raise ValueError(f"step must be >= 0, got {step}")
        # The steps consumed so far end a segment; the next one starts at `step`.
        current = self._segment(self.step)
        if current is not None:
            self._history.append(current)
        self._segment_start = step
        with self._guard():
            p = self._pipeline
            if p is not None and not _process.forked_since(p.pid) and hasattr(p, "seek"):
                p.seek(step)  # worker processes are kept: starting them costs far more than a seek
                return
            self._stop_pipeline()
            self._start = step

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume exactly, as a dict of JSON types: the state format's
        ``version``, the next ``step``, the ``config`` it must match and its ``fingerprint``,
        ``shard_count`` (for information only: the state is the same on every rank) and, for a
        mix, the ``weights`` and each source's stream ``positions``. See
        :class:`loaderx._state.LoaderState` for every field."""
        return self._state_at(self.step).to_dict()

    def _state_at(self, step: int) -> LoaderState:
        """The state of this loader when ``step`` is the next batch to take."""
        digests, history = self._stream_digests(), self._segments(step)
        if "mix" not in self._config:
            return LoaderState(int(step), dict(self._config), self.shard_count, digests=digests, history=history)
        mix = cast("MixSampler", self.sampler)
        positions = tuple(mix.positions_at(int(step)))
        return LoaderState(
            int(step),
            dict(self._config),
            self.shard_count,
            tuple(mix.weights_at(int(step))),
            positions,
            digests=digests,
            history=history,
            schedule=mix.schedule,
        )

    def _stream_digests(self) -> dict[str, str | None]:
        """Each stream's content digest (None for a stream whose records checksums do not all
        cover), computed once: it reads each store's table and checksums."""
        if self._digests is None:
            self._digests = {name: getattr(ds, "digest", None) for name, ds in sorted(self.streams.items())}
        return dict(self._digests)

    def _segment(self, end: int) -> dict[str, Any] | None:
        """The steps consumed from the current segment's start up to ``end`` (None when none)."""
        start = self._segment_start
        if end <= start:
            return None
        out: dict[str, Any] = {"start": start, "end": int(end), "shard_count": self.shard_count}
        if "mix" in self._config:
            mix = cast("MixSampler", self.sampler)
            out["weights"] = mix.weights_at(start)
            out["positions"] = list(mix.positions_at(start))
            if mix.schedule is not None:
                out["schedule"] = mix.schedule
        return out

    def _segments(self, end: int) -> tuple[dict[str, Any], ...]:
        current = self._segment(end)
        return tuple(self._history) + ((current,) if current is not None else ())

    def receipt(self) -> dict[str, Any]:
        """Which data this run read, as a small JSON-ready dict: each stream's content digest,
        the configuration that decides every global batch, and the steps consumed (across
        resumes, when the loader was resumed from a state). With it alone, ``python -m loaderx
        receipt STEP receipt.json`` lists the record indices each rank read at any step (see
        :mod:`loaderx.receipt`)."""
        from .receipt import FORMAT, VERSION

        return {
            "format": FORMAT,
            "version": VERSION,
            "config": dict(self._config),
            "digests": self._stream_digests(),
            "segments": [dict(s) for s in self._segments(self.step)],
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`, saved by any rank with any ``shard_count``, by this
        loaderx or an earlier one (0.10.0 on). A state from a different config (seed, mode,
        length, streams or global ``batch_size``) is refused with the differences, and a damaged
        state or one from a newer loaderx says so; each is a
        :class:`~loaderx.errors.BadArgumentError` (a ValueError)."""
        self._load_state(state)

    def _load_state(self, state: object) -> LoaderState:
        loaded = LoaderState.load(state, self._config)
        if loaded.digests:
            from .zrecord import _shown

            shown = {name: _shown(os.fspath(getattr(ds, "path", "?"))) for name, ds in self.streams.items()}
            loaded.check_content(self._stream_digests(), shown)
        if loaded.positions is not None and "mix" in self._config:
            with self._guard():
                self._stop_pipeline()
                cast("MixSampler", self.sampler).rebase(loaded.step, loaded.positions)
        self.seek(loaded.step)
        # The run goes on from the state's: its steps consumed are this loader's history.
        self._history = [dict(h) for h in loaded.history or ()]
        self._segment_start = loaded.step
        return loaded

    def __reduce__(self) -> tuple[Any, ...]:
        """A loader pickles as its config and its position (the next step), never its workers:
        the copy starts its own workers on first use (torch's spawned workers rely on this)."""
        args = dict(
            streams=self.streams,
            num_workers=self.num_workers,
            batch_size=self.batch_size,
            prefetch_size=self.prefetch_size,
            mode=int(self.sampler.mode),
            seed=self.sampler.seed,
            transform=self.transform,
            shard_index=self.shard_index,
            shard_count=self.shard_count,
            workers=self.workers,
            _mix=self.sampler if "mix" in self._config else None,
        )
        if isinstance(self._source, PackedSource):
            src = self._source
            args["_packed"] = (src.seq_len, src.packing, src.bins)
            if any(m is not None for m in src.masks):
                args["_masks"] = src.masks
        elif "mix" in self._config and "exclude" in self._config:
            args["_masks"] = cast("Masked", next(iter(self.streams.values()))).masks
        elif self.mask is not None:
            # The streams unwrapped, and the mask given again (so the copy records it too).
            args["streams"] = {name: cast("Masked", ds).dataset for name, ds in self.streams.items()}
            args["exclude"] = self.mask
        return (_restore, (type(self), args, self.step))

    @classmethod
    def mix(
        cls,
        sources: Sequence[Mapping[str, Stream]],
        weights: Sequence[float] | Sequence[tuple[int, Sequence[float]]] | Mapping[str, Any],
        batch_size: int = 256,
        mode: int | str = 1,
        seed: int = 42,
        *,
        transform: Callable[[Batch], _R] | None = None,
        num_workers: int | None = None,
        prefetch_size: int = 4,
        shard_index: int | None = None,
        shard_count: int | None = None,
        workers: Literal["threads", "processes"] = "threads",
        interpolation: Literal["step", "linear"] = "step",
        exclude: Sequence[Mask | str | os.PathLike[str] | None] | None = None,
        **kwargs: Any,
    ) -> DataLoader[_R]:
        """A loader over several datasets in fixed or scheduled proportions (see :mod:`loaderx.mix`).

        ``sources`` is a list of stream dicts (the ``streams`` a DataLoader takes), all with the
        same names and record layouts; ``weights`` has one non-negative weight per source, or is
        a schedule: ``[(step, weights), ...]`` points, held between points or, with
        ``interpolation="linear"``, moved linearly from one to the next.
        Every batch holds exactly the largest-remainder share of ``batch_size`` from each
        source, deterministic in (seed, step) whatever the worker count. ``state_dict`` records
        where each source's stream stands, and a state loads with new weights. The other
        arguments are the DataLoader's; ``kwargs`` are a subclass's own (``sharding`` of
        :class:`loaderx.jax.DataLoader`). ``exclude`` has one exclusion mask (or mask file, or
        None) per source: a source's masked records are never sampled, and its share of each
        batch comes from its kept records (see :mod:`loaderx.mask`).
        """
        from .mix import MixSampler, _joined

        sources = [_streams(s) for s in sources]
        if not sources:
            raise ValueError("mix needs at least one source")
        names = sorted(sources[0])
        for k, src in enumerate(sources):
            if sorted(src) != names:
                raise ValueError(f"source {k} has streams {sorted(src)}, but source 0 has {names}")
            lengths = {len(ds) for ds in src.values()}
            if len(lengths) != 1:
                raise ValueError(f"source {k}: its streams must have the same length, got {sorted(lengths)}")
        # Each stream's sources as one dataset (loaderx datasets of one kind, or a TypeError).
        streams = {name: _joined([src[name] for src in sources]) for name in names}
        for name in names:
            # Every source's records of a stream go into one batch array: the layouts must match.
            layouts = [(getattr(src[name], "dtype", None), getattr(src[name], "item_shape", None)) for src in sources]
            for k, layout in enumerate(layouts):
                if layout != layouts[0]:
                    raise ValueError(
                        f"stream {name!r}: source {k} holds {_layout(layout)} records, but source 0 "
                        f"holds {_layout(layouts[0])}; mixed sources must have the same record layout"
                    )
        lengths = [len(next(iter(src.values()))) for src in sources]
        masks: list[Mask | None] | None = None
        if exclude is not None:
            if len(exclude) != len(sources):
                raise ValueError(f"exclude has {len(exclude)} entries for {len(sources)} sources: one mask (or None) per source")
            masks = [None if e is None else as_mask(e) for e in exclude]
            for src, mask in zip(sources, masks):
                if mask is not None:
                    _check_mask(mask, src)
            streams = {name: Masked(ds, lengths, masks) for name, ds in streams.items()}
            lengths = next(iter(streams.values())).kept
        sampler = MixSampler(lengths, weights, batch_size, int(_mode(mode)), seed, interpolation=interpolation)
        # cls is this class unparametrized: the transform sets what its loader yields.
        return cast("type[DataLoader[_R]]", cls)(
            streams,
            num_workers,
            batch_size,
            prefetch_size,
            mode,
            seed,
            transform,
            shard_index=shard_index,
            shard_count=shard_count,
            workers=workers,
            _mix=sampler,
            _masks=masks,
            **kwargs,
        )

    @classmethod
    def packed(
        cls,
        source: RaggedDataset | Sequence[RaggedDataset],
        seq_len: int,
        batch_size: int = 8,
        packing: Literal["concat", "best_fit"] = "concat",
        mode: int | str = "cyclic",
        seed: int = 42,
        *,
        bins: int = DEFAULT_BINS,
        weights: Sequence[float] | Sequence[tuple[int, Sequence[float]]] | Mapping[str, Any] | None = None,
        interpolation: Literal["step", "linear"] = "step",
        transform: Callable[[Batch], _R] | None = None,
        num_workers: int | None = None,
        prefetch_size: int = 4,
        shard_index: int | None = None,
        shard_count: int | None = None,
        workers: Literal["threads", "processes"] = "threads",
        verify: str | None = None,
        exclude: Mask | str | os.PathLike[str] | Sequence[Mask | str | os.PathLike[str] | None] | None = None,
        **kwargs: Any,
    ) -> DataLoader[_R]:
        """A loader of packed token batches: each batch a dict of ``(batch_size / shard_count,
        seq_len)`` arrays ``tokens``, ``segment_ids``, ``positions``, ``doc_index`` and
        ``doc_offset`` (see :mod:`loaderx.packing`).

        ``source`` is a :class:`~loaderx.dataset.RaggedDataset` of integer tokens (one document
        per record; a manifest's dataset too). ``packing`` is ``"concat"`` (one token stream
        cut into rows, no padding) or ``"best_fit"`` (whole documents, at most ``bins`` rows
        open). ``mode`` orders the documents as the sampler would (``"cyclic"``, the default:
        a fresh permutation each epoch; ``"sequential"``; ``"iid"``). ``batch_size`` counts
        rows of the global batch. Resume, seek, ``state_dict`` and sharding work as for dense
        streams; the state records the packing, and a state of another packing is refused.

        Several sources (a list of RaggedDatasets with one token dtype) with ``weights`` (one
        per source, or a schedule of ``(step, weights)`` points with ``interpolation``) mix
        packed streams: each batch's rows are split among the sources by weight, exactly per
        batch, as :meth:`mix` splits records.

        ``exclude`` is an exclusion mask (or its file) of the source, or, with several sources,
        one mask or None per source (see :mod:`loaderx.mask`): a source's stream packs its kept
        documents alone, and ``doc_index`` still names records of its store.
        """
        seq_len, packing, bins = check_packing(seq_len, packing, bins)
        mix = None
        if isinstance(source, (list, tuple)):
            from .mix import MixSampler, _joined

            if weights is None:
                raise TypeError("packed() over several sources needs weights= (one per source, or a schedule)")
            datasets = [check_source(d) for d in source]
            if not datasets:
                raise ValueError("packed() needs at least one source")
            for k, d in enumerate(datasets):
                if d.dtype != datasets[0].dtype:
                    raise ValueError(f"source {k} holds {d.dtype} tokens, but source 0 holds {datasets[0].dtype}")
            masks = _packed_masks(exclude, datasets)
            kept = [len(d) if m is None else m.kept for d, m in zip(datasets, masks or [None] * len(datasets))]
            mix = MixSampler(kept, weights, batch_size, int(_mode(mode)), seed, interpolation=interpolation)
            source = _joined(datasets)
        elif weights is not None:
            raise TypeError("weights= mixes several sources: pass a list of RaggedDatasets as the source")
        else:
            if exclude is not None and isinstance(exclude, (list, tuple)):
                raise TypeError("exclude= of one source is one mask (or its file), not a list")
            masks = _packed_masks(None if exclude is None else [exclude], [check_source(source)])
        tokens: Stream = check_source(source)
        return cast("type[DataLoader[_R]]", cls)(
            {"tokens": tokens},
            num_workers,
            batch_size,
            prefetch_size,
            mode,
            seed,
            transform,
            shard_index=shard_index,
            shard_count=shard_count,
            workers=workers,
            verify=verify,
            _packed=(seq_len, packing, bins),
            _mix=mix,
            _masks=masks,
            **kwargs,
        )

    def __len__(self) -> int:
        raise TypeError("an endless loader has no length")

    def __repr__(self) -> str:
        streams = ", ".join(f"{name!r}: {ds!r}" for name, ds in self.streams.items())
        mode = Sampler.Mode(int(self.sampler.mode)).name.lower()
        parts = [f"{{{streams}}}", f"batch_size={self.batch_size}", f"mode={mode!r}", f"seed={self.sampler.seed}"]
        if "mix" in self._config:
            mix = cast("MixSampler", self.sampler)
            parts.append(f"weights={mix.schedule if mix.schedule is not None else mix.weights}")
        if self.shard_count > 1:
            parts.append(f"shard={self.shard_index}/{self.shard_count}")
        if self.transform is not _identity:
            parts.append(f"transform={getattr(self.transform, '__qualname__', type(self.transform).__name__)}")
        parts.append(f"num_workers={self.num_workers} {self.workers}")
        parts.append("closed" if getattr(self, "_closed", False) else f"step={self.step}")
        return f"{type(self).__name__}({', '.join(parts)})"

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> _T:
        p = self._running()
        t0 = clock()
        ready, step = p.ready_count(), p.next_step
        value = p.get()
        self._metrics.waited(t0, clock(), ready, step)
        return cast("_T", value)

    def _stop_pipeline(self) -> None:
        p, self._pipeline = self._pipeline, None
        if p is not None:
            self._start = p.next_step
            if not _process.forked_since(p.pid):
                p.stop()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None

    def close(self) -> None:
        """Stop the workers and drop prefetched batches. Idempotent; never hangs."""
        if getattr(self, "_closed", True):
            return
        with self._guard():
            self._stop_pipeline()
            self._closed = True
        if getattr(self, "_trace_writer", None) is not None:
            self._trace_writer()  # type: ignore[misc]  # runs once

    def __del__(self) -> None:
        self.close()


def _layout(layout: tuple[Any, Any]) -> str:
    dtype, shape = layout
    return f"{dtype}{tuple(shape) if shape is not None else ''}"


def _restore(cls: type[DataLoader[Any]], args: dict[str, Any], step: int) -> DataLoader[Any]:
    loader = cls(**args)
    loader.seek(step)
    return loader


def _weak_produce(loader: DataLoader[Any]) -> Callable[[int], Any]:
    """``loader._produce`` through a weak reference, so worker threads keep the loader alive
    only while they are computing a batch."""
    ref = weakref.ref(loader)

    def produce(step: int) -> Any:
        target = ref()
        if target is None:
            raise ValueError("the DataLoader was garbage-collected")
        return target._produce(step)

    return produce
