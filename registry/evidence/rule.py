"""The evidence rule: which attempts count, and which attempts form one sample.

This module is the one place that decides it; every command (report, compare, summary, noise,
regressions), every SQL view and every export reads attempts through the views defined here.

* **Visible.** An attempt is visible when a commit of the ledger (up to `--as-of`) names its
  segment; duplicates keep their earliest commit. A retracted attempt is hidden unless
  `include_retracted` is set; its bytes stay and `verify` still checks them.
* **Counted.** One (experiment, task, repeat index, cohort, observed system) slot holds at
  most one *valid* outcome: ingest rejects a second one, and evidence stored before that
  rule (or by two writers racing) with two valid outcomes in one slot counts neither
  (`slot_conflict`) until one of them is retracted.
  Infrastructure-invalid attempts retried in the same slot stay, counted as invalid.
* **Sample.** Attempts pool into one sample only when they share the task, the cohort key
  (all eleven cohort inputs) and the observed system: agent, agent version, provider
  (`unobserved` for legacy evidence without a terminal identity), model and harness version.
  An attempt whose model is not recorded is `model unobserved`: its sample also carries its
  run (experiment id), so runs that may have used different models never pool.
* **Suite unit.** Across tasks, samples pool only under one suite configuration (every cohort
  input except the task's own: `task_id`, `case_digest`, `source_digest`) and one observed
  system, as above.
* **Generation.** `generation` is the ledger sequence of the commit that first made the
  attempt visible, and `lineage_depth` counts regrades (0 for an original, 1 for a regrade of
  it, ...). Ordering by `(generation, lineage_depth)` is monotone in time even for regrades,
  which keep their original's `started_at`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from registry.storage.digest import digest_json
from registry_schemas import INVALID_CLASSES, CostStats, TerminalClass
from registry_schemas import TASK_INPUTS as TASK_INPUTS

if TYPE_CHECKING:
    import duckdb

UNOBSERVED = "unobserved"
"""Provider shown for legacy evidence: without a terminal identity it cannot claim one."""
ENVELOPE_KEYS = ("agent", "agent_version", "provider", "model", "harness_version")
INVALID = frozenset(c.value for c in INVALID_CLASSES)
"""Infrastructure-invalid terminal classes: retained, held out of the denominator."""
CLASSES = tuple(c.value for c in TerminalClass)
"""The nine terminal classes, valid first, in the contract's order."""
SAMPLE_KEYS = ("task_id", "cohort_key", "system", "run")
"""Columns that identify a sample (one row of a report, of the `samples` view)."""

_EVIDENCE_VIEW = """
CREATE VIEW _evidence AS
SELECT a.*,
       {'agent': a.envelope.agent, 'agent_version': a.envelope.agent_version,
        'provider': CASE WHEN a.terminal_identity IS NULL THEN 'unobserved'
                         ELSE a.envelope.provider END,
        'model': a.envelope.model, 'harness_version': a.envelope.harness_version} AS system,
       CASE WHEN a.envelope.model IS NULL THEN a.experiment_id END AS run,
       m.configuration_digest,
       a.commit_seq AS generation,
       coalesce(l.depth, 0) AS lineage_depth,
       p.attempt_id IS NOT NULL AS regraded,
       r.attempt_id IS NOT NULL AS retracted
FROM _attempts_all a
JOIN _cohort_meta m ON m.cohort_key = a.cohort_key
LEFT JOIN _lineage l ON l.attempt_id = a.attempt_id
LEFT JOIN (SELECT DISTINCT derived_from AS attempt_id FROM _lineage) p
       ON p.attempt_id = a.attempt_id
LEFT JOIN _retracted r ON r.attempt_id = a.attempt_id
"""

SLOT_CONFLICT = (
    "count(*) FILTER (is_valid(terminal_class){also}) OVER ("
    "PARTITION BY experiment_id, task_id, repeat_index, cohort_key, system, run) > 1"
)
"""The slot rule: more than one valid outcome in one slot (`{also}` narrows the attempts)."""
_ATTEMPTS_VIEW = f"""
CREATE VIEW attempts AS
SELECT *, {SLOT_CONFLICT.format(also="")} AS slot_conflict
FROM _evidence WHERE {{where}}
"""
EVIDENCE_COLUMNS = (
    "system",
    "run",
    "configuration_digest",
    "generation",
    "lineage_depth",
    "regraded",
    "retracted",
)
"""Columns `_evidence` adds to `_attempts_all`, in order."""
STORED_SLOT_VISIBLE = "_slot_conflict_visible"
STORED_SLOT_ALL = "_slot_conflict_all"
_SLOT_CONFLICTS = f"""
CREATE TEMP TABLE _slot_conflicts AS
SELECT * FROM (
    SELECT attempt_id, {SLOT_CONFLICT.format(also=" AND NOT retracted")} AS visible,
           {SLOT_CONFLICT.format(also="")} AS among_all
    FROM (SELECT attempt_id, experiment_id, task_id, repeat_index, cohort_key, system, run,
                 terminal_class, retracted FROM _evidence))
WHERE visible OR among_all
"""
STORED_EVIDENCE = f"""
SELECT e.*, coalesce(c.visible, false) AS {STORED_SLOT_VISIBLE},
       coalesce(c.among_all, false) AS {STORED_SLOT_ALL}
FROM _evidence e LEFT JOIN _slot_conflicts c ON c.attempt_id = e.attempt_id
"""
"""What `registry.evidence.cache` stores: every row of `_evidence` (retracted ones too) with
the slot rule's verdict among the visible attempts and among all of them (`stored_evidence`
prepares the connection). The rule runs over the narrow slot columns only and its (usually
few) conflicts are joined back: ranking the wide rows costs seconds at a million attempts."""


def stored_evidence(con: duckdb.DuckDBPyConnection) -> str:
    """Prepare `con` (holding `_evidence`) and return the query of `STORED_EVIDENCE`."""
    con.execute(_SLOT_CONFLICTS)
    return STORED_EVIDENCE


_CLASS_COUNTS = ",\n       ".join(
    f"count(*) FILTER (terminal_class = '{name}') AS {name}" for name in CLASSES
)
_SAMPLES_VIEW = f"""
CREATE VIEW samples AS
SELECT task_id, cohort_key, system, run, configuration_digest,
       n_attempts AS attempts, n_valid AS valid, n_attempts - n_valid AS invalid,
       {", ".join(CLASSES)},
       CASE WHEN n_valid = 0 THEN NULL ELSE resolved / n_valid END AS resolved_rate,
       wilson_low(resolved, n_valid) AS resolved_low,
       wilson_high(resolved, n_valid) AS resolved_high,
       CASE WHEN n_valid = 0 THEN NULL
            ELSE greatest(resolved, n_valid - resolved) / n_valid END AS consistency,
       (n_attempts - n_valid) / n_attempts AS invalid_rate,
       runtime_known, n_attempts - runtime_known AS runtime_unavailable,
       runtime_mean, runtime_median, runtime_p95,
       cost_total, cost_mean, cost_known, n_attempts - cost_known AS cost_unavailable,
       generation, lineage_depth, first_commit_seq, last_commit_seq,
       first_started_at, last_finished_at, experiments, derived_from, inputs
FROM (
    SELECT task_id, cohort_key, system, run,
           any_value(configuration_digest) AS configuration_digest,
           count(*) AS n_attempts,
           count(*) FILTER (is_valid(terminal_class)) AS n_valid,
           {_CLASS_COUNTS},
           count(runtime_seconds) AS runtime_known,
           avg(runtime_seconds ORDER BY runtime_seconds) AS runtime_mean,
           median(runtime_seconds) AS runtime_median,
           list_sort(list(runtime_seconds) FILTER (runtime_seconds IS NOT NULL))[
               (95 * count(runtime_seconds) + 99) // 100] AS runtime_p95,
           sum(cost_usd ORDER BY cost_usd) AS cost_total,
           avg(cost_usd ORDER BY cost_usd) AS cost_mean,
           count(cost_usd) AS cost_known,
           min(generation) AS generation,
           max(lineage_depth) AS lineage_depth,
           min(commit_seq) AS first_commit_seq,
           max(commit_seq) AS last_commit_seq,
           min(started_at) AS first_started_at,
           max(coalesce(finished_at, started_at)) AS last_finished_at,
           list(DISTINCT experiment_id ORDER BY experiment_id) AS experiments,
           list(DISTINCT derived_from ORDER BY derived_from)
               FILTER (derived_from IS NOT NULL) AS derived_from,
           any_value(inputs) AS inputs
    FROM attempts WHERE NOT slot_conflict
    GROUP BY task_id, cohort_key, system, run
)
"""

_LINEAGE_VIEW = """
CREATE VIEW lineage AS
SELECT a.attempt_id, a.derived_from, a.task_id, a.experiment_id,
       a.cohort_key, o.cohort_key AS derived_from_cohort_key,
       a.inputs.grader_version AS grader_version,
       o.inputs.grader_version AS derived_from_grader_version,
       a.terminal_class, o.terminal_class AS derived_from_terminal_class,
       a.lineage_depth, a.generation, o.commit_seq AS derived_from_generation
FROM _evidence a LEFT JOIN _attempts_all o ON o.attempt_id = a.derived_from
WHERE a.derived_from IS NOT NULL
"""


def is_valid(row: dict[str, Any]) -> bool:
    """Whether an attempt counts in the reliability denominator."""
    return row["terminal_class"] not in INVALID


def is_resolved(row: dict[str, Any]) -> bool:
    """Whether an attempt resolved its task."""
    return bool(row["terminal_class"] == "resolved")


def observed_identity(row: dict[str, Any]) -> dict[str, str | None]:
    """Return the observed system of an attempt row (the `system` column of the views)."""
    if "system" in row:
        return dict(row["system"])
    envelope = {key: row["envelope"][key] for key in ENVELOPE_KEYS}
    if row["terminal_identity"] is None:
        envelope["provider"] = UNOBSERVED
    return envelope


def system_key(row: dict[str, Any]) -> tuple[str | None, ...]:
    """Return the observed system plus, for a model-unobserved attempt, its run."""
    return (*observed_identity(row).values(), row.get("run"))


def sample_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """Return what identifies an attempt's sample: task, cohort, observed system (and run)."""
    return (row["task_id"], row["cohort_key"], system_key(row))


def unit_key(row: dict[str, Any], exclude: Iterable[str] = ()) -> tuple[Any, ...]:
    """Return the suite unit of an attempt: its configuration (minus `exclude`) and system."""
    return (configuration(row, exclude), system_key(row))


def system_label(system: dict[str, Any], run: str | None = None) -> str:
    """Return a one-line label naming every field that tells two observed systems apart."""

    def shown(key: str) -> str:
        value = system.get(key)
        return "unknown" if value is None else str(value)

    label = (
        f"{shown('agent')} {shown('agent_version')} {shown('provider')}/{shown('model')} "
        f"harness {shown('harness_version')}"
    )
    return label if run is None else f"{label} run {run}"


def configuration(row: dict[str, Any], exclude: Iterable[str] = (), keep_task: bool = False) -> str:
    """Return the suite configuration of an attempt: its cohort inputs minus task inputs.

    Attempts pool across tasks only when their configurations are equal; `exclude` drops
    further inputs (a comparison lets its varied input differ), `keep_task` keeps the task's
    own inputs (then the result identifies a cohort up to the excluded inputs).
    """
    skip = set(exclude) | (set() if keep_task else set(TASK_INPUTS))
    inputs = {k: v for k, v in row["inputs"].items() if k not in skip}
    return orjson.dumps(inputs, option=orjson.OPT_SORT_KEYS).decode()


def configuration_digest(inputs: dict[str, Any]) -> str:
    """Return the digest of a suite configuration (the cohort inputs minus the task's own)."""
    return digest_json({k: v for k, v in inputs.items() if k not in TASK_INPUTS})


def register_evidence(
    con: duckdb.DuckDBPyConnection,
    retracted: Iterable[str] = (),
    include_retracted: bool = False,
    derived: bool = True,
    rows: str = "_attempts_all",
) -> None:
    """Create the evidence views (`attempts`, `samples`, `lineage`) over `_attempts_all`.

    `_attempts_all` must already hold every visible attempt with its provenance columns;
    `retracted` names the attempt ids retracted in the ledger read. Without `derived`, only
    `_evidence` and `attempts` are created (`samples` and `lineage` are built on them and
    change nothing in them). The cohorts and regrade edges are read from `rows`: a relation
    with the same attempts that may hold one attempt twice (two writers stored it) and is
    cheaper to scan than `_attempts_all` where that is a view deduplicating them.
    """
    cohorts = con.execute(
        f"SELECT cohort_key, any_value(inputs) FROM {rows} GROUP BY cohort_key"
    ).fetchall()
    register_rows(
        con,
        "_cohort_meta",
        [("cohort_key", "VARCHAR"), ("configuration_digest", "VARCHAR")],
        [(key, configuration_digest(_parsed(inputs))) for key, inputs in cohorts],
    )
    edges = con.execute(  # one attempt id names one record: DISTINCT drops stored twins
        f"SELECT DISTINCT attempt_id, derived_from FROM {rows} WHERE derived_from IS NOT NULL"
    ).fetchall()
    depths = lineage_depths(dict(edges))
    register_rows(
        con,
        "_lineage",
        [("attempt_id", "VARCHAR"), ("derived_from", "VARCHAR"), ("depth", "BIGINT")],
        [(a, p, depths[a]) for a, p in edges],
    )
    register_rows(
        con, "_retracted", [("attempt_id", "VARCHAR")], [(a,) for a in sorted(set(retracted))]
    )
    con.execute(_EVIDENCE_VIEW)
    con.execute(_ATTEMPTS_VIEW.format(where="true" if include_retracted else "NOT retracted"))
    if derived:
        con.execute(_SAMPLES_VIEW)
        con.execute(_LINEAGE_VIEW)


def register_stored_evidence(
    con: duckdb.DuckDBPyConnection,
    path: str,
    retracted: Iterable[str] = (),
    include_retracted: bool = False,
    derived: bool = True,
) -> None:
    """Create the evidence views over a Parquet file holding `STORED_EVIDENCE`'s rows.

    The views have the columns and rows `register_evidence` gives over the same ledger read:
    `_attempts_all` and `_evidence` are the file without the added columns, `attempts` takes
    the slot verdict of the reading mode (retracted attempts hidden or shown).
    """
    register_rows(
        con, "_retracted", [("attempt_id", "VARCHAR")], [(a,) for a in sorted(set(retracted))]
    )
    stored = f"read_parquet('{path}')"
    slots = f"{STORED_SLOT_VISIBLE}, {STORED_SLOT_ALL}"
    con.execute(
        f"CREATE VIEW _attempts_all AS SELECT * EXCLUDE ({', '.join(EVIDENCE_COLUMNS)}, {slots})"
        f" FROM {stored}"
    )
    con.execute(f"CREATE VIEW _evidence AS SELECT * EXCLUDE ({slots}) FROM {stored}")
    verdict, where = (
        (STORED_SLOT_ALL, "true") if include_retracted else (STORED_SLOT_VISIBLE, "NOT retracted")
    )
    con.execute(
        f"CREATE VIEW attempts AS SELECT * EXCLUDE ({slots}), {verdict} AS slot_conflict"
        f" FROM {stored} WHERE {where}"
    )
    if derived:
        con.execute(_SAMPLES_VIEW)
        con.execute(_LINEAGE_VIEW)


def register_rows(
    con: duckdb.DuckDBPyConnection,
    name: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[Any]],
) -> None:
    """Create a temporary table from Python rows, bound as one list per column.

    DuckDB takes Python lists natively, so small tables need no Arrow conversion (which
    would import pandas, when installed, on every command).
    """
    lists = [[row[i] for row in rows] for i in range(len(columns))]
    select = ", ".join(f"unnest(?::{kind}[]) AS {column}" for column, kind in columns)
    con.execute(f"CREATE TEMP TABLE {name} AS SELECT {select}", lists)


def lineage_depths(parents: dict[str, str]) -> dict[str, int]:
    """Return each regrade's depth: 1 + its original's depth (an original has depth 0)."""
    depths: dict[str, int] = {}

    def depth(attempt: str, seen: frozenset[str] = frozenset()) -> int:
        if attempt not in parents or attempt in seen:
            return 0
        if attempt not in depths:
            depths[attempt] = 1 + depth(parents[attempt], seen | {attempt})
        return depths[attempt]

    for attempt in parents:
        depth(attempt)
    return depths


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


def _parsed(inputs: dict[str, Any]) -> dict[str, Any]:
    return {**inputs, "budget": orjson.loads(inputs["budget"])}
