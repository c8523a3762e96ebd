"""Stored layers as SQL views: one row per recorded layer version, with the figures users filter on.

`reports`, `comparisons`, `summaries` and `noise_floors` are read through the ledger (never a
listing of `layers/`), each file checked against the digest its commit records before its
content is used, so report history is queryable inside the same read-only sandbox as the
attempts. Every view also carries the whole layer as `document` (JSON).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import orjson

from registry.storage.layers import read_checked
from registry.storage.ledger import LedgerEntry
from registry.storage.store import Store

if TYPE_CHECKING:
    import pyarrow as pa

LAYER_VIEWS = {
    "reports": "report",
    "comparisons": "comparison",
    "summaries": "summary",
    "noise_floors": "noise",
}
"""View name -> layer kind."""

_SYSTEM_KEYS = ("agent", "agent_version", "provider", "model", "harness_version")
"""The observed-system columns of the views that list systems."""


def _schema(kind: str) -> pa.Schema:
    """Return the Arrow schema of a layer kind's view (pyarrow loads only when one is built)."""
    import pyarrow as pa

    common = [
        ("digest", pa.string()),
        ("subject", pa.string()),
        ("commit_seq", pa.int64()),
        ("created_at", pa.string()),
        ("evidence_digest", pa.string()),
        ("evidence_attempts", pa.int64()),
        ("evidence_last_commit_seq", pa.int64()),
        ("generator_version", pa.string()),
    ]
    system = [(name, pa.string()) for name in _SYSTEM_KEYS]
    rate = [("estimate", pa.float64()), ("low", pa.float64()), ("high", pa.float64())]
    extra: dict[str, list[tuple[str, pa.DataType]]] = {
        "report": [
            ("task_id", pa.string()),
            (
                "systems",
                pa.list_(
                    pa.struct(
                        [("cohort_key", pa.string()), *system]
                        + [(n, pa.int64()) for n in ("attempts", "valid", "invalid", "resolved")]
                        + rate
                    )
                ),
            ),
        ],
        "comparison": [
            ("baseline", pa.string()),
            ("plan_id", pa.string()),
            (
                "candidates",
                pa.list_(
                    pa.struct(
                        [
                            ("candidate", pa.string()),
                            ("verdict", pa.string()),
                            ("verdict_text", pa.string()),
                            ("paired_tasks", pa.int64()),
                            ("attempts_per_task", pa.int64()),
                            ("mean_difference", pa.float64()),
                            ("mdd", pa.float64()),
                            ("sign_p_holm", pa.float64()),
                            ("look", pa.int64()),
                            ("decision", pa.string()),
                        ]
                    )
                ),
            ),
        ],
        "summary": [
            (
                "systems",
                pa.list_(
                    pa.struct(
                        [("configuration_digest", pa.string()), *system]
                        + [(n, pa.int64()) for n in ("tasks", "attempts", "valid", "resolved")]
                        + [
                            ("pooled_rate", pa.float64()),
                            ("task_mean_rate", pa.float64()),
                            ("clustered_low", pa.float64()),
                            ("clustered_high", pa.float64()),
                        ]
                    )
                ),
            )
        ],
        "noise": [
            ("system", pa.string()),
            ("tasks", pa.int64()),
            ("expected_flips", pa.float64()),
        ],
    }
    return pa.schema([*common, *extra[kind], ("document", pa.string())])


def layer_tables(
    store: Store, entries: list[LedgerEntry], views: Iterable[str]
) -> dict[str, pa.Table]:
    """Return an Arrow table per requested layer view, one row per recorded layer version.

    Raises:
        IntegrityError: a layer file is missing or no longer matches its digest.
    """
    wanted = {LAYER_VIEWS[v]: v for v in views if v in LAYER_VIEWS}
    rows: dict[str, list[dict[str, Any]]] = {kind: [] for kind in wanted}
    seen: set[str] = set()
    for entry in entries:
        layer = entry.commit.layer
        if layer is None or layer.kind not in wanted or layer.digest in seen:
            continue
        seen.add(layer.digest)
        document = read_checked(store, layer.path, layer.digest)
        snapshot = document.get("snapshot", {})
        row = {
            "digest": layer.digest,
            "subject": layer.subject,
            "commit_seq": entry.seq,
            "created_at": entry.commit.created_at,
            "evidence_digest": snapshot.get("evidence_digest"),
            "evidence_attempts": snapshot.get("attempts"),
            "evidence_last_commit_seq": snapshot.get("last_commit_seq"),
            "generator_version": document.get("generator", {}).get("version"),
            "document": orjson.dumps(document).decode(),
            **_FIGURES[layer.kind](document),
        }
        rows[layer.kind].append(row)
    return {view: _table(kind, rows[kind]) for kind, view in wanted.items()}


def _table(kind: str, rows: list[dict[str, Any]]) -> pa.Table:
    import pyarrow as pa

    schema = _schema(kind)
    table = pa.Table.from_pylist(rows, schema=schema)
    index = schema.get_field_index("created_at")
    utc = pa.timestamp("us", tz="UTC")
    return table.set_column(index, pa.field("created_at", utc), table["created_at"].cast(utc))


def _rate(rate: dict[str, Any] | None) -> dict[str, Any]:
    rate = rate or {}
    return {"estimate": rate.get("estimate"), "low": rate.get("low"), "high": rate.get("high")}


def _report(document: dict[str, Any]) -> dict[str, Any]:
    systems = []
    for cohort in document.get("cohorts", []):
        for system in cohort.get("systems", []):
            systems.append(
                {
                    "cohort_key": cohort["cohort_key"],
                    **{k: system["system"].get(k) for k in _SYSTEM_KEYS},
                    **{k: system[k] for k in ("attempts", "valid", "invalid", "resolved")},
                    **_rate(system.get("resolved_rate")),
                }
            )
    return {"task_id": document.get("task_id"), "systems": systems}


def _comparison(document: dict[str, Any]) -> dict[str, Any]:
    candidates = []
    for item in document.get("comparisons", []):
        candidates.append(
            {
                "candidate": item["candidate"]["selector"],
                "verdict": item["verdict"]["code"],
                "verdict_text": item["verdict"]["text"],
                "paired_tasks": len(item.get("tasks", [])),
                "attempts_per_task": item.get("attempts_per_task"),
                "mean_difference": item.get("mean_difference"),
                "mdd": item.get("mdd"),
                "sign_p_holm": item.get("sign_test", {}).get("p_holm"),
                "look": item.get("look"),
                "decision": item.get("decision"),
            }
        )
    return {
        "baseline": document.get("baseline"),
        "plan_id": document.get("plan_id"),
        "candidates": candidates,
    }


def _summary(document: dict[str, Any]) -> dict[str, Any]:
    systems = []
    for item in document.get("systems", []):
        interval = item.get("clustered_interval") or {}
        systems.append(
            {
                "configuration_digest": item.get("configuration_digest"),
                **{k: item["system"].get(k) for k in _SYSTEM_KEYS},
                **{k: item.get(k) for k in ("tasks", "attempts", "valid", "resolved")},
                "pooled_rate": (item.get("pooled_resolved_rate") or {}).get("estimate"),
                "task_mean_rate": item.get("task_mean_resolved_rate"),
                "clustered_low": interval.get("low"),
                "clustered_high": interval.get("high"),
            }
        )
    return {"systems": systems}


def _noise(document: dict[str, Any]) -> dict[str, Any]:
    return {
        "system": document.get("system"),
        "tasks": document.get("tasks"),
        "expected_flips": document.get("expected_flips"),
    }


_FIGURES = {"report": _report, "comparison": _comparison, "summary": _summary, "noise": _noise}
