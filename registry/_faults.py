"""Crash points for the durability tests.

`checkpoint(name)` kills the current process with SIGKILL when the environment variable
`REGISTRY_CRASH_AT` names that point, so the tests can prove that an ingest or a retraction
interrupted at any step leaves a registry that verifies and that a re-run completes. Unset, it
costs one dictionary lookup. (The tests reach the steps of `report` and every durable write
by wrapping `ledger.append` and `Store.put_file` in the child process instead.)
"""

from __future__ import annotations

import os
import signal

POINTS = (
    "after-spill",
    "after-temp-segments",
    "after-first-segment-published",
    "after-segments-published",
    "after-commit",
)
"""The points of `ingest`, in order."""

RETRACT_POINTS = ("retract-before-commit", "retract-after-commit")
"""The points of `retract`: the ids are checked, then the retraction commit is appended."""


_INJECTED: set[str] = set()


def inject_once(name: str) -> bool:
    """True the first time fault `name` is reached in a process that `REGISTRY_INJECT` names.

    Injected faults are the ones a process survives, unlike crash points: `lost-ack` makes
    an object store's successful commit look failed to the writer, as a dropped response does.
    """
    if name in _INJECTED or name not in os.environ.get("REGISTRY_INJECT", "").split(","):
        return False
    _INJECTED.add(name)
    return True


def checkpoint(name: str) -> None:
    """Die here, abruptly, if the test harness asked for it."""
    if os.environ.get("REGISTRY_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
