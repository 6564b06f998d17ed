"""Which process this is: the Python half of loaderx's one process model (native's
``loaderx_native::process``, which keeps the id and answers for both halves).

A forked child (torch ``DataLoader`` workers, ``multiprocessing``) holds a copy of the parent's
objects but none of its other threads: a lock one of them held stays held, and worker threads,
worker processes and open store handles are the parent's. So every fork-aware object notes the
process that built such state (:func:`current`) and, where :func:`forked_since` says it is not
that process any more, builds its own on first use and leaves the parent's untouched.

What must happen at the fork itself, before the child runs anything else (closing descriptors
that would keep the parent's worker processes alive, replacing a module-level lock), registers
with :func:`in_child`. This module holds the package's only ``os.register_at_fork``.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from . import _loaderx

#: This process's id (native keeps it, so asking costs no system call).
current: Callable[[], int] = _loaderx.process_id

_hooks: list[Callable[[], None]] = []


def forked_since(pid: int) -> bool:
    """True when this is not process ``pid`` (noted with :func:`current`): a fork has happened
    since, and what ``pid`` built with threads, locks or handles is not this process's."""
    return pid != _loaderx.process_id()


def in_child(hook: Callable[[], None]) -> None:
    """Run ``hook`` in every child right after ``fork()``, after the hooks registered before it.
    A hook touches only this process's copies (closes descriptors, replaces a lock)."""
    _hooks.append(hook)


def _after_fork_in_child() -> None:
    for hook in list(_hooks):
        hook()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
