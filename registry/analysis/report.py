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

from registry.analysis import stats
from registry.errors import ObjectNotFoundError
from registry.evidence.rule import (
    INVALID,
    UNOBSERVED,
    cost_stats,
    is_resolved,
    is_valid,
    observed_identity,
    snapshot_of,
    system_key,
)
from registry.evidence.selection import Evidence, Scope, read_evidence
from registry.storage.layers import LayerVersion, read_layer, store_layer
from registry.storage.ledger import LedgerSnapshot
from registry.storage.store import Store
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
GENERATOR_VERSION = "2"
MAX_K = 10
SMALL_SAMPLE = 5
"""Fewer valid attempts than this flag a system as a small sample."""
REPORT_LAYER = "report"
_TOKEN_FIELDS = {
    "input": "input_tokens",
    "output": "output_tokens",
    "cached_input": "cached_input_tokens",
}


def build_report(
    store: Store,
    task_id: str,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
    snapshot: LedgerSnapshot | None = None,
) -> TaskReport:
    """Return the evidence report of one task (as the ledger stood at `as_of`, if given).

    `snapshot`: the ledger as the calling command already read it (read here otherwise).

    Raises:
        ObjectNotFoundError: no attempt of that task is in the registry.
    """
    evidence = read_task_evidence(
        store, task_id, as_of=as_of, include_retracted=include_retracted, snapshot=snapshot
    )
    if not evidence.rows:
        raise ObjectNotFoundError(
            f"no attempts for task {orjson.dumps(task_id).decode()} in the registry; "
            'list tasks with: registry sql "SELECT DISTINCT task_id FROM attempts"'
        )
    return report_from_evidence(task_id, evidence)


def read_task_evidence(
    store: Store,
    task_id: str,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
    snapshot: LedgerSnapshot | None = None,
) -> Evidence:
    """Return a task's attempts under the evidence rule, ordered by attempt id.

    Only the segments holding the task are read (the ledger records each segment's tasks).
    """
    return read_evidence(
        store,
        Scope(tasks=(task_id,)),
        as_of=as_of,
        include_retracted=include_retracted,
        snapshot=snapshot,
    )


def read_task_rows(store: Store, task_id: str) -> list[dict[str, Any]]:
    """Return a task's counted attempt rows, ordered by attempt id."""
    return read_task_evidence(store, task_id).rows


def report_from_rows(task_id: str, rows: Sequence[dict[str, Any]]) -> TaskReport:
    """Return the report of a task's counted attempt rows (each with provenance columns)."""
    return report_from_evidence(task_id, Evidence(list(rows), [], []))


def report_from_evidence(task_id: str, evidence: Evidence) -> TaskReport:
    """Return the report of a task's evidence: counted rows, held-out rows."""
    rows = sorted(evidence.rows, key=lambda r: r["attempt_id"])
    cohort_of = {r["attempt_id"]: r["cohort_key"] for r in rows}
    by_cohort: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_cohort[row["cohort_key"]].append(row)
    retracted: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in evidence.retracted:
        retracted[(row["cohort_key"], system_key(row))].append(row)
    cohorts = [_cohort(key, members, cohort_of, retracted) for key, members in by_cohort.items()]
    cohorts.sort(key=lambda c: (-sum(s.attempts for s in c.systems), c.cohort_key))
    return TaskReport(
        task_id=task_id,
        snapshot=Snapshot(**snapshot_of(rows)),
        generator=Generator(name=GENERATOR_NAME, version=GENERATOR_VERSION),
        held_out={
            "retracted": len(evidence.retracted),
            "slot_conflict": len(evidence.conflicting),
        },
        cohorts=cohorts,
    )


def system_of(row: dict[str, Any]) -> SystemIdentity:
    """Return the observed system of an attempt row (legacy evidence: provider unobserved)."""
    return SystemIdentity(**observed_identity(row))


def _cohort(
    key: str,
    rows: list[dict[str, Any]],
    cohort_of: dict[str, str],
    retracted: dict[tuple[Any, ...], list[dict[str, Any]]],
) -> CohortReport:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[system_key(row)].append(row)
    systems = [
        _system(members, retracted.get((key, sample), [])) for sample, members in groups.items()
    ]
    systems.sort(key=lambda s: (-s.attempts, s.system.model_dump_json(), s.run or ""))
    first = rows[0]
    inputs = first["inputs"]
    regraded = {r["derived_from"] for r in rows if r["derived_from"]}
    return CohortReport(
        cohort_key=key,
        inputs={"task_id": first["task_id"], **inputs},
        regrades=sorted({cohort_of[a] for a in regraded if a in cohort_of}),
        systems=systems,
    )


def _system(rows: list[dict[str, Any]], retracted: list[dict[str, Any]]) -> SystemReport:
    identity = system_of(rows[0])
    classes = [r["terminal_class"] for r in rows]
    valid = sum(c not in INVALID for c in classes)
    ks = range(1, max(1, min(valid, MAX_K)) + 1)
    summary = stats.summarize_outcomes(classes, [r["runtime_seconds"] for r in rows], ks)
    return SystemReport(
        system=identity,
        run=rows[0]["run"],
        attempts=summary.attempts_total,
        valid=summary.valid,
        invalid=summary.invalid,
        resolved=summary.resolved,
        classes={c.value: classes.count(c.value) for c in TerminalClass},
        resolved_rate=rate_of(summary.resolved_rate),
        invalid_rate=rate_of(summary.invalid_rate),
        consistency=summary.repeat_consistency,
        runtime_seconds=RuntimeStats(
            mean=summary.runtime.mean,
            median=summary.runtime.median,
            p95=summary.runtime.p95,
            known=summary.runtime.known,
            unavailable=summary.runtime.unavailable,
        ),
        cost_usd=cost_stats(r["cost_usd"] for r in rows),
        tokens={name: _tokens(rows, column) for name, column in _TOKEN_FIELDS.items()},
        pass_at_k={str(k): v for k, v in summary.pass_at_k.items()},
        pass_hat_k={str(k): v for k, v in summary.pass_hat_k.items()},
        undefined=_undefined(summary.valid, rows),
        flags=_flags(identity, summary.valid, summary.invalid, len(rows)),
        derived_from=sorted({r["derived_from"] for r in rows if r["derived_from"]}),
        provenance=_provenance(rows, retracted),
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
    if all(r["runtime_seconds"] is None for r in rows):
        reasons["runtime_seconds"] = "no attempt recorded a runtime"
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
    if identity.model is None:
        flags.append("model_unobserved")
    return flags


def _provenance(
    rows: list[dict[str, Any]], retracted: list[dict[str, Any]]
) -> list[ExperimentProvenance]:
    by_experiment: dict[str, list[dict[str, Any]]] = defaultdict(list)
    withdrawn: dict[str, int] = defaultdict(int)
    for row in rows:
        by_experiment[row["experiment_id"]].append(row)
    for row in retracted:
        withdrawn[row["experiment_id"]] += 1
    out = []
    for experiment in sorted(set(by_experiment) | set(withdrawn)):
        members = by_experiment.get(experiment, [])
        commits = {(r["commit_seq"], r["commit_digest"]) for r in members}
        out.append(
            ExperimentProvenance(
                experiment_id=experiment,
                attempts=len(members),
                valid=sum(map(is_valid, members)),
                resolved=sum(map(is_resolved, members)),
                retracted=withdrawn[experiment],
                commits=[CommitRef(seq=s, digest=d) for s, d in sorted(commits)],
            )
        )
    return out


def report_document(report: TaskReport) -> dict[str, Any]:
    """Return the JSON form of a report (what is stored and printed)."""
    return report.model_dump(mode="json", by_alias=True)


def record_report(
    store: Store, task_id: str, *, include_retracted: bool = False
) -> tuple[TaskReport, LayerVersion, bool]:
    """Build a task's report and store it as a layer; return it, the layer and if it is new.

    The ledger is read once: the evidence and the layer's record share one snapshot of it.

    Raises:
        ObjectNotFoundError: no attempt of that task is in the registry.
    """
    snapshot = LedgerSnapshot(store)
    report = build_report(store, task_id, include_retracted=include_retracted, snapshot=snapshot)
    version, created = store_report(store, report, snapshot=snapshot)
    return report, version, created


def store_report(
    store: Store, report: TaskReport, *, snapshot: LedgerSnapshot | None = None
) -> tuple[LayerVersion, bool]:
    """Store a built report as a derived layer; return the layer and whether it is new."""
    return store_layer(
        store, REPORT_LAYER, report.task_id, report_document(report), snapshot=snapshot
    )


def load_report(store: Store, digest: str) -> tuple[LayerVersion, TaskReport]:
    """Return a stored report layer by digest (or unique prefix).

    Raises:
        ObjectNotFoundError: no report layer matches.
        IntegrityError: the stored bytes no longer match the digest.
    """
    version, document = read_layer(store, digest, REPORT_LAYER)
    return version, TaskReport.model_validate(document)
