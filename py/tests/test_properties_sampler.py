"""Sampler under any length, batch, mode, seed and step: the documented batches for valid
arguments, a Python exception otherwise, never a crash (a batch too large to allocate included).

The shared properties, profile and strategies are in _strategies.py.
"""


import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from _lxhelpers import OUR_PYTHON, run_python
from _strategies import (
    SAFE_BATCH,
    as_index,
    attempt,
    budget,
    mode_arg,
    mode_value,
    one_bad,
    sampler_args_valid,
    tally,
    uint_arg,
)
from loaderx.sampler import Sampler

# --- Sampler --------------------------------------------------------------------------------

SAMPLER_GOOD = {
    "length": st.one_of(st.integers(1, 70), st.sampled_from([2**32, 2**63, 2**64 - 1]),
                        st.builds(np.int64, st.integers(1, 9))),
    "batch": st.one_of(st.integers(1, 70), st.just(SAFE_BATCH), st.builds(np.uint8, st.integers(1, 9))),
    "mode": st.one_of(st.integers(0, 2), st.sampled_from(list(Sampler.Mode))),
    "seed": st.one_of(st.integers(0, 2**64 - 1), st.just(42)),
    "step": st.one_of(st.integers(0, 50), st.sampled_from([2**40, 2**64 - 1])),
}
SAMPLER_BAD = {"length": uint_arg, "batch": uint_arg, "mode": mode_arg, "seed": uint_arg,
               "step": st.sampled_from([2**64, -1, 1.5, "3", None])}


@budget(300)
@given(args=one_bad(SAMPLER_GOOD, SAMPLER_BAD))
@example(args=dict(length=0, batch=4, mode=0, seed=42, step=0))
@example(args=dict(length=10, batch=0, mode=2, seed=42, step=0))
@example(args=dict(length=10, batch=4, mode=3, seed=42, step=0))
@example(args=dict(length=2**64 - 1, batch=4, mode=2, seed=1, step=2**64 - 1))
def test_sampler_with_any_arguments(args):
    length, batch, mode, seed, step = (args[k] for k in ("length", "batch", "mode", "seed", "step"))
    valid = sampler_args_valid(length, batch, mode, seed)
    outcome, s = attempt(lambda: Sampler(length, batch, mode, seed), allowed=(ValueError, TypeError))
    tally("Sampler()", outcome, s)
    assert (outcome == "ok") == valid, f"Sampler({length!r}, {batch!r}, {mode!r}, {seed!r}): {outcome} {s!r}"
    if outcome != "ok":
        return
    L, B, M = as_index(length), as_index(batch), mode_value(mode)
    batch_len = min(L, B) if M == 2 else B
    assert s.batch_len == batch_len
    if batch_len > SAFE_BATCH:
        return  # asking for such a batch crashes: see test_sampler_with_a_huge_batch_...
    first = s.next()
    assert first.dtype == np.uint64 and len(first) == batch_len and all(int(v) < L for v in first)
    if M == 0:
        assert first.tolist() == [j % L for j in range(B)]
    if M == 2:
        assert len(set(first.tolist())) == batch_len, "a CYCLIC batch repeats an index"
    k = as_index(step)
    outcome, got = attempt(lambda: s.batch_at(step), allowed=(ValueError, TypeError))
    assert (outcome == "ok") == (k is not None and 0 <= k < 2**64), f"batch_at({step!r}): {outcome}"
    if outcome == "ok":
        s.seek(step)
        assert s.step == k
        assert s.next().tolist() == got.tolist(), "seek(k) then next() differs from batch_at(k)"


# --- regressions: defects the properties above found (all fixed now); each docstring says what
# --- the defect was, and the test checks the fixed behaviour with its reproducer.

@pytest.mark.parametrize("batch, mode", [(2**61, 0), (2**64 - 1, 1)])
def test_sampler_with_an_impossible_batch_raises_an_exception(batch, mode):
    """A batch whose size in bytes overflows is an ordinary exception (MemoryError), never
    pyo3's PanicException (a BaseException that ``except Exception`` would not catch)."""
    s = Sampler(10, batch, mode)
    try:
        s.next()
    except Exception:
        return
    except BaseException as e:  # noqa: B036
        pytest.fail(f"{type(e).__module__}.{type(e).__qualname__} (not an Exception subclass): {e}")
    pytest.fail("a batch of 2**61+ indices was returned")


_HUGE_BATCH = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))  # never let an attempt really allocate
from loaderx.sampler import Sampler
try:
    Sampler(10, 2**40, int(sys.argv[1])).next()
except Exception as e:
    print("raised", type(e).__name__)
"""


@pytest.mark.parametrize("mode", [0, 1])
def test_sampler_with_a_huge_batch_is_an_error_not_a_crash(tmp_path, mode):
    script = tmp_path / "huge_batch.py"
    script.write_text(_HUGE_BATCH)
    proc = run_python(OUR_PYTHON, [script, mode], check=False, timeout=60)
    assert proc.returncode == 0, f"the interpreter died with exit {proc.returncode}: {proc.stderr[-600:]}"
