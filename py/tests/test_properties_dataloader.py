"""DataLoader under any stream, batch size, workers, mode, seed, transform and state: the
documented batches, or a Python exception that leaves no worker thread behind, never a crash.

The shared properties, profile and strategies are in _strategies.py.
"""


import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from _lxhelpers import worker_threads
from _strategies import (
    API_ERRORS,
    SAFE_BATCH,
    attempt,
    budget,
    mode_arg,
    one_bad,
    tally,
    uint_arg,
    wait_no_worker_threads,
)
from loaderx.dataloader import DataLoader

# --- DataLoader -----------------------------------------------------------------------------

def _boom(batch):
    raise ZeroDivisionError("transform failed")


TRANSFORMS = {"identity": lambda b: b, "raises": _boom, "not_callable": 5, "none": lambda b: None}


DATALOADER_GOOD = {
    "streams": st.sampled_from(["dense", "dense", "dense+labels", "ragged"]),
    "num_workers": st.integers(1, 3),
    "batch_size": st.integers(1, 24),
    "prefetch_size": st.integers(1, 4),
    "mode": st.integers(0, 2),
    "seed": st.integers(0, 2**64 - 1),
    "shard": st.one_of(st.just((0, 1)), st.sampled_from([(1, 2), (0, 4), (3, 4)])),
    "transform": st.sampled_from(["identity", "identity", "identity", "raises", "not_callable", "none"]),
    "seek": st.one_of(st.none(), st.integers(0, 5), st.just(2**40)),
}
DATALOADER_BAD = {
    "streams": st.sampled_from(["dense+ragged", "empty", "list", "none", "not_a_dataset"]),
    "num_workers": st.one_of(st.integers(-2, 0), st.sampled_from([2**70, "2", "x", None, 1.5])),
    "batch_size": st.one_of(st.integers(-2, 0), st.sampled_from([2**61, 2**64, "4", None, 4.0])),
    "prefetch_size": st.one_of(st.integers(-2, 0), st.sampled_from([2**70, "x", None])),
    "mode": mode_arg,
    "seed": uint_arg,
    "shard": st.tuples(st.integers(-1, 3), st.integers(-1, 3)),
    "seek": st.sampled_from([-1, 2**64, "x", 1.5]),
}


@budget(120)
@given(args=one_bad(DATALOADER_GOOD, DATALOADER_BAD))
def test_dataloader_with_any_arguments(stores, args):
    streams, num_workers, batch_size, prefetch_size, mode, seed, shard, transform, seek = (args[k] for k in (
        "streams", "num_workers", "batch_size", "prefetch_size", "mode", "seed", "shard", "transform", "seek"))
    chosen = {
        "dense": {"x": stores.dense}, "dense+labels": {"x": stores.dense, "y": stores.labels},
        "dense+ragged": {"x": stores.dense, "r": stores.ragged}, "ragged": {"r": stores.ragged},
        "empty": {}, "list": [stores.dense], "none": None, "not_a_dataset": {"x": 5},
    }[streams]
    outcome, loader = attempt(lambda: DataLoader(
        chosen, num_workers=num_workers, batch_size=batch_size, prefetch_size=prefetch_size, mode=mode, seed=seed,
        transform=TRANSFORMS[transform], shard_index=shard[0], shard_count=shard[1]))
    tally("DataLoader()", outcome, loader)
    if outcome != "ok":
        assert not worker_threads()
        return
    try:
        if seek is not None:
            outcome, value = attempt(lambda: loader.seek(seek))
            if outcome == "ok":
                assert loader.step == int(seek)
        runnable = loader.num_workers <= 4 and loader.sampler.batch_len <= SAFE_BATCH  # see test_properties_sampler.py (huge batch)
        if runnable and loader.step >= 2**64:  # a step the sampler cannot take: next() says so
            outcome, value = attempt(lambda: next(loader))
            assert outcome == "error" and isinstance(value, ValueError)
        elif runnable:
            step = loader.step
            for k in range(2):
                outcome, batch = attempt(lambda: next(loader), allowed=API_ERRORS + (ZeroDivisionError,))
                if transform == "raises":
                    assert outcome == "error" and isinstance(batch, ZeroDivisionError)
                elif transform == "not_callable":
                    assert outcome == "error" and isinstance(batch, TypeError)
                elif transform == "none":
                    assert outcome == "ok" and batch is None
                else:
                    assert outcome == "ok", f"a valid loader raised {type(batch).__name__}: {batch}"
                    idxs = loader.sampler.batch_at(step + k)
                    if loader.shard_count > 1:
                        per = loader.batch_size // loader.shard_count
                        idxs = idxs[loader.shard_index * per : (loader.shard_index + 1) * per]
                    for name, ds in loader.streams.items():
                        want = ds[idxs]
                        if isinstance(want, list):
                            assert [w.tolist() for w in batch[name]] == [w.tolist() for w in want]
                        else:
                            assert np.array_equal(batch[name], want)
            state = loader.state_dict()
            for bad in ({}, {"fingerprint": "0" * 16, "step": 0}, dict(state, fingerprint="x")):
                outcome, value = attempt(lambda bad=bad: loader.load_state_dict(bad))
                assert outcome == "error" and isinstance(value, ValueError)
            loader.load_state_dict(state)
    finally:
        loader.close()
        loader.close()
    wait_no_worker_threads()
    outcome, value = attempt(lambda: next(loader))
    assert outcome == "error" and isinstance(value, ValueError), "next() on a closed loader"
