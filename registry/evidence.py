"""Shared rules for reading attempt rows: validity, observed identity, snapshots, costs.

Every derived layer (report, comparison, summary, noise floor) reads attempt rows from the
`attempts` view; the rules that decide what a row counts as live here once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from registry.digest import digest_json
from registry_schemas import INVALID_CLASSES, CostStats

UNOBSERVED = "unobserved"
"""Provider shown for legacy evidence: without a terminal identity it cannot claim one."""
ENVELOPE_KEYS = ("agent", "agent_version", "provider", "model", "harness_version")
INVALID = frozenset(c.value for c in INVALID_CLASSES)
"""Infrastructure-invalid terminal classes: retained, held out of the denominator."""


def is_valid(row: dict[str, Any]) -> bool:
    """Whether an attempt counts in the reliability denominator."""
    return row["terminal_class"] not in INVALID


def is_resolved(row: dict[str, Any]) -> bool:
    """Whether an attempt resolved its task."""
    return bool(row["terminal_class"] == "resolved")


def observed_identity(row: dict[str, Any]) -> dict[str, str | None]:
    """Return the observed envelope; legacy evidence (no terminal identity) is `unobserved`."""
    envelope = {key: row["envelope"][key] for key in ENVELOPE_KEYS}
    if row["terminal_identity"] is None:
        envelope["provider"] = UNOBSERVED
    return envelope


def snapshot_of(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return the evidence snapshot: digest of the sorted attempt ids and the newest commit."""
    ids = sorted(r["attempt_id"] for r in rows)
    return {
        "evidence_digest": digest_json(ids),
        "attempts": len(ids),
        "last_commit_seq": max(r["commit_seq"] for r in rows),
    }


def cost_stats(values: Iterable[float | None]) -> CostStats:
    """Return total and mean over known costs, exactly summed; unavailable is never zero."""
    given = list(values)
    known = sorted(v for v in given if v is not None)
    total = math.fsum(known) if known else None
    return CostStats(
        total=total,
        mean=None if total is None else total / len(known),
        known=len(known),
        unavailable=len(given) - len(known),
    )
