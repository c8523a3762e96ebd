"""`registry report --task ID`: per task, per cohort, per observed system, with provenance.

The report is a pure function of the task's evidence and `GENERATOR_VERSION`: rows are read
in `attempt_id` order, floats are summed exactly, and nothing depends on the wall clock, the
ledger head or the order DuckDB returns rows in. Only the segments that hold the task are
read (the ledger records each segment's task ids).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import orjson

from registry import stats
from registry.errors import ObjectNotFoundError
from registry.evidence import (
    INVALID,
    UNOBSERVED,
    cost_stats,
    is_resolved,
    is_valid,
    observed_identity,
    snapshot_of,
)
from registry.layers import LayerVersion, read_layer, store_layer
from registry.selection import Scope, load_evidence
from registry.store import Store
from registry_schemas import (
    CohortReport,
    CommitRef,
    ExperimentProvenance,
    Generator,
    Rate,
    RuntimeStats,
    Snapshot,
    SystemIdentity,
    SystemReport,
    TaskReport,
    TerminalClass,
    TokenStats,
)

GENERATOR_NAME = "registry.report"
GENERATOR_VERSION = "1"
MAX_K = 10
SMALL_SAMPLE = 5
"""Fewer valid attempts than this flag a system as a small sample."""
REPORT_LAYER = "report"
_TOKEN_FIELDS = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cached_input": "cached_input_tokens",
}


def build_report(store: Store, task_id: str) -> TaskReport:
    """Return the evidence report of one task.

    Raises:
        ObjectNotFoundError: no attempt of that task is in the registry.
    """
    rows = read_task_rows(store, task_id)
    if not rows:
        raise ObjectNotFoundError(
            f"no attempts for task {orjson.dumps(task_id).decode()} in the registry; "
            'list tasks with: registry sql "SELECT DISTINCT task_id FROM attempts"'
        )
    return report_from_rows(task_id, rows)


def read_task_rows(store: Store, task_id: str) -> list[dict[str, Any]]:
    """Return every visible attempt of a task as dicts, ordered by attempt id.

    Only the segments holding the task are read (the ledger records each segment's tasks).
    """
    return load_evidence(store, Scope(tasks=(task_id,)))


def report_from_rows(task_id: str, rows: Sequence[dict[str, Any]]) -> TaskReport:
    """Return the report of a task's attempt rows (each with provenance columns)."""
    rows = sorted(rows, key=lambda r: r["attempt_id"])
    cohort_of = {r["attempt_id"]: r["cohort_key"] for r in rows}
    by_cohort: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_cohort[row["cohort_key"]].append(row)
    cohorts = [_cohort(key, members, cohort_of) for key, members in by_cohort.items()]
    cohorts.sort(key=lambda c: (-sum(s.attempts for s in c.systems), c.cohort_key))
    return TaskReport(
        task_id=task_id,
        snapshot=Snapshot(**snapshot_of(rows)),
        generator=Generator(name=GENERATOR_NAME, version=GENERATOR_VERSION),
        cohorts=cohorts,
    )


def system_of(row: dict[str, Any]) -> SystemIdentity:
    """Return the observed system of an attempt row (legacy evidence: provider unobserved)."""
    return SystemIdentity(**observed_identity(row))


def _cohort(key: str, rows: list[dict[str, Any]], cohort_of: dict[str, str]) -> CohortReport:
    groups: dict[SystemIdentity, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[system_of(row)].append(row)
    systems = [_system(identity, members) for identity, members in groups.items()]
    systems.sort(key=lambda s: (-s.attempts, s.system.model_dump_json()))
    first = rows[0]
    inputs = first["inputs"]
    regraded = {r["derived_from"] for r in rows if r["derived_from"]}
    return CohortReport(
        cohort_key=key,
        inputs={"task_id": first["task_id"], **inputs},
        regrades=sorted({cohort_of[a] for a in regraded if a in cohort_of}),
        systems=systems,
    )


def _system(identity: SystemIdentity, rows: list[dict[str, Any]]) -> SystemReport:
    classes = [r["terminal_class"] for r in rows]
    valid = sum(c not in INVALID for c in classes)
    ks = range(1, max(1, min(valid, MAX_K)) + 1)
    summary = stats.summarize_outcomes(classes, [r["runtime_seconds"] for r in rows], ks)
    return SystemReport(
        system=identity,
        attempts=summary.attempts_total,
        valid=summary.valid,
        invalid=summary.invalid,
        resolved=summary.resolved,
        classes={c.value: classes.count(c.value) for c in TerminalClass},
        resolved_rate=rate_of(summary.resolved_rate),
        invalid_rate=rate_of(summary.invalid_rate),
        consistency=summary.repeat_consistency,
        runtime_seconds=RuntimeStats(
            mean=summary.runtime.mean, median=summary.runtime.median, p95=summary.runtime.p95
        ),
        cost_usd=cost_stats(r["cost_usd"] for r in rows),
        tokens={name: _tokens(rows, column) for name, column in _TOKEN_FIELDS.items()},
        pass_at_k={str(k): v for k, v in summary.pass_at_k.items()},
        pass_hat_k={str(k): v for k, v in summary.pass_hat_k.items()},
        undefined=_undefined(summary.valid, rows),
        flags=_flags(identity, summary.valid, summary.invalid, len(rows)),
        derived_from=sorted({r["derived_from"] for r in rows if r["derived_from"]}),
        provenance=_provenance(rows),
    )


def rate_of(interval: stats.Interval | None) -> Rate:
    """Return a `Rate` (all null when the interval is undefined)."""
    if interval is None:
        return Rate(estimate=None, low=None, high=None)
    return Rate(estimate=interval.estimate, low=interval.low, high=interval.high)


def _tokens(rows: list[dict[str, Any]], column: str) -> TokenStats:
    known = [r[column] for r in rows if r[column] is not None]
    return TokenStats(
        total=sum(known) if known else None,
        mean=sum(known) / len(known) if known else None,
        known=len(known),
        unavailable=len(rows) - len(known),
    )


def _undefined(valid: int, rows: list[dict[str, Any]]) -> dict[str, str]:
    reasons = {}
    if valid == 0:
        for name in ("resolved_rate", "consistency", "pass_at_k", "pass_hat_k"):
            reasons[name] = "0 valid attempts (every attempt is infrastructure-invalid)"
    if all(r["cost_usd"] is None for r in rows):
        reasons["cost_usd"] = "no attempt recorded a cost"
    for name, column in _TOKEN_FIELDS.items():
        if all(r[column] is None for r in rows):
            reasons[f"tokens.{name}"] = "no attempt recorded it"
    return reasons


def _flags(identity: SystemIdentity, valid: int, invalid: int, attempts: int) -> list[str]:
    flags = []
    if 0 < valid < SMALL_SAMPLE:
        flags.append("small_sample")
    if invalid == attempts:
        flags.append("all_invalid")
    if identity.provider == UNOBSERVED:
        flags.append("unobserved_provider")
    return flags


def _provenance(rows: list[dict[str, Any]]) -> list[ExperimentProvenance]:
    by_experiment: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_experiment[row["experiment_id"]].append(row)
    out = []
    for experiment in sorted(by_experiment):
        members = by_experiment[experiment]
        commits = {(r["commit_seq"], r["commit_digest"]) for r in members}
        out.append(
            ExperimentProvenance(
                experiment_id=experiment,
                attempts=len(members),
                valid=sum(map(is_valid, members)),
                resolved=sum(map(is_resolved, members)),
                commits=[CommitRef(seq=s, digest=d) for s, d in sorted(commits)],
            )
        )
    return out


def report_document(report: TaskReport) -> dict[str, Any]:
    """Return the JSON form of a report (what is stored and printed)."""
    return report.model_dump(mode="json", by_alias=True)


def record_report(store: Store, task_id: str) -> tuple[TaskReport, LayerVersion, bool]:
    """Build a task's report and store it as a layer; return it, the layer and if it is new.

    Raises:
        ObjectNotFoundError: no attempt of that task is in the registry.
    """
    report = build_report(store, task_id)
    version, created = store_layer(store, REPORT_LAYER, task_id, report_document(report))
    return report, version, created


def load_report(store: Store, digest: str) -> tuple[LayerVersion, TaskReport]:
    """Return a stored report layer by digest (or unique prefix).

    Raises:
        ObjectNotFoundError: no report layer matches.
        IntegrityError: the stored bytes no longer match the digest.
    """
    version, document = read_layer(store, digest, REPORT_LAYER)
    return version, TaskReport.model_validate(document)
