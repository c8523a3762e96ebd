"""Crash points for the durability tests.

`checkpoint(name)` kills the current process with SIGKILL when the environment variable
`REGISTRY_CRASH_AT` names that point, so the tests can prove that an ingest interrupted at
any step leaves a registry that verifies and that a re-run completes. Unset, it costs one
dictionary lookup.
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


def checkpoint(name: str) -> None:
    """Die here, abruptly, if the test harness asked for it."""
    if os.environ.get("REGISTRY_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
