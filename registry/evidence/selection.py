"""Choosing evidence for suite-level questions: arm selectors, scopes and configurations.

A selector is `key=value[,key=value…]` over these keys: `experiment`, `plan`, `agent_system`
(a digest or a unique prefix of its hex), the observed identity fields `agent`,
`agent_version`, `provider` (`unobserved` selects legacy evidence), `model` (`unknown` selects
attempts that record none), `harness_version`, and the suite-configuration cohort inputs by
name (`grader_version=grader-1.1`, `harness_package=…`, `environment_digest=…`; digests also
match by a prefix of their hex). A scope restricts every arm to some tasks, a plan or an
experiment. Which attempts count and how they form samples is decided in
`registry.evidence.rule`; this module only chooses among them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import blake3
import orjson

from registry.errors import RegistryError
from registry.evidence.query import QueryResult, connect, fetch, fetch_batches
from registry.evidence.rule import (
    ENVELOPE_KEYS,
    TASK_INPUTS,
    configuration,
    observed_identity,
    system_key,
    system_label,
)
from registry.storage.digest import PREFIX
from registry.storage.store import Store
from registry_schemas import CONFIGURATION_INPUTS

if TYPE_CHECKING:
    import duckdb

    from registry.storage.ledger import LedgerSnapshot

CONFIG_INPUTS = tuple(name for name in CONFIGURATION_INPUTS if name != "budget")
"""Cohort inputs a selector may name directly (the budget is matched by `experiment`/`plan`)."""
SELECTOR_KEYS = ("experiment", "plan", "agent_system", *ENVELOPE_KEYS, *CONFIG_INPUTS)
_COLUMNS = (
    "attempt_id, task_id, cohort_key, experiment_id, repeat_index, plan_id, inputs,"
    " terminal_class, envelope, terminal_identity, runtime_seconds, cost_usd, input_tokens,"
    " output_tokens, cached_input_tokens, derived_from, started_at, finished_at, commit_seq,"
    " commit_digest, system, run, configuration_digest, generation, lineage_depth, regraded,"
    " retracted, slot_conflict"
)
__all__ = ["TASK_INPUTS", "configuration", "observed_system", "system_key"]


class SelectorError(RegistryError, ValueError):
    """A selector or scope is malformed or selects nothing usable."""


@dataclass(frozen=True)
class Selector:
    """Which attempts form one arm of a comparison (or one system of a summary)."""

    text: str
    terms: tuple[tuple[str, str], ...]

    def matches(self, row: dict[str, Any]) -> bool:
        """Whether an attempt row belongs to this arm."""
        return all(_term_matches(key, value, row) for key, value in self.terms)


@dataclass(frozen=True)
class Scope:
    """Restrictions applied to every arm."""

    tasks: tuple[str, ...] = ()
    plan: str | None = None
    experiment: str | None = None

    def describe(self) -> dict[str, Any]:
        """Return the scope as JSON."""
        return {"tasks": list(self.tasks), "plan": self.plan, "experiment": self.experiment}


def parse_selector(text: str) -> Selector:
    """Parse `key=value[,key=value…]`.

    Raises:
        SelectorError: empty, unknown key, or a term without `=`.
    """
    terms = []
    for part in (p.strip() for p in text.split(",")):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or not key or not value:
            raise SelectorError(
                f"selector '{text}': '{part}' is not key=value; keys: {', '.join(SELECTOR_KEYS)}"
            )
        if key not in SELECTOR_KEYS:
            raise SelectorError(
                f"selector '{text}': unknown key '{key}'; keys: {', '.join(SELECTOR_KEYS)}"
            )
        terms.append((key, value.strip()))
    return Selector(text, tuple(terms))


@dataclass(frozen=True)
class Evidence:
    """The counted attempts in scope, and what the evidence rule held out of them."""

    rows: list[dict[str, Any]]
    conflicting: list[dict[str, Any]]
    """Attempts in a slot holding two valid outcomes: counted by neither side."""
    retracted: list[dict[str, Any]]
    """Retracted attempts in scope (hidden unless `include_retracted`)."""


def load_evidence(
    store: Store,
    scope: Scope,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> list[dict[str, Any]]:
    """Return every counted attempt in scope (bound parameters only), ordered by attempt id."""
    return read_evidence(store, scope, as_of=as_of, include_retracted=include_retracted).rows


def scope_clause(scope: Scope) -> tuple[list[str], list[Any]]:
    """Return the SQL conditions (bound parameters only) that restrict attempts to a scope."""
    where: list[str] = []
    params: list[Any] = []
    if scope.tasks:
        where.append("list_contains(?, task_id)")
        params.append(list(scope.tasks))
    if scope.plan is not None:
        where.append("plan_id = ?")
        params.append(scope.plan)
    if scope.experiment is not None:
        where.append("experiment_id = ?")
        params.append(scope.experiment)
    return where, params


def selector_clause(selector: Selector | None) -> tuple[list[str], list[Any]]:
    """Return the SQL conditions equivalent to `Selector.matches` on the `attempts` view."""
    where: list[str] = []
    params: list[Any] = []
    for key, value in selector.terms if selector else ():
        if key == "experiment":
            where.append("experiment_id = ?")
        elif key == "plan":
            where.append("plan_id = ?")
        elif key in ("agent_system", *CONFIG_INPUTS):
            column = "agent_system_digest" if key == "agent_system" else key
            where.append(
                f"(inputs.{column} = ? OR (starts_with(inputs.{column}, 'blake3:')"
                f" AND starts_with(substr(inputs.{column}, 8), ?)))"
            )
            params.append(value)
        elif key == "model" and value == "unknown":
            where.append("system.model IS NULL")
            continue
        else:
            where.append(f"system.{key} = ?")
        params.append(value)
    return where, params


@contextlib.contextmanager
def counted_attempts(
    store: Store,
    scope: Scope,
    selectors: Sequence[Selector | None] = (None,),
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> Iterator[tuple[duckdb.DuckDBPyConnection, list[tuple[str, list[Any]]]]]:
    """Yield a connection and, per selector, a WHERE clause over the counted attempts in scope.

    Suite questions group and count inside DuckDB with these clauses, so only per-task counts
    reach Python; the clauses apply the evidence rule (no conflicting slot) and the scope.
    """
    base, base_params = scope_clause(scope)
    con = connect(
        store, task_ids=scope.tasks or None, as_of=as_of, include_retracted=include_retracted
    )
    try:
        clauses = []
        for selector in selectors:
            terms, params = selector_clause(selector)
            where = ["NOT slot_conflict", *base, *terms]
            clauses.append((" WHERE " + " AND ".join(where), [*base_params, *params]))
        yield con, clauses
    finally:
        con.close()


def cohort_inputs(
    con: duckdb.DuckDBPyConnection, cohort_keys: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Return the ten cohort inputs (budget as canonical JSON text) of each cohort key."""
    result = fetch(
        con,
        "SELECT cohort_key, any_value(inputs) FROM _attempts_all"
        " WHERE list_contains(?, cohort_key) GROUP BY cohort_key",
        [sorted(set(cohort_keys))],
    )
    return {key: inputs for key, inputs in result.rows}


def snapshot_where(
    con: duckdb.DuckDBPyConnection, where: str, params: Sequence[Any]
) -> dict[str, Any]:
    """Return the evidence snapshot (digest of the sorted attempt ids, newest commit) in SQL.

    Attempt ids are `blake3:<hex>`, so their canonical JSON array is built by concatenation;
    DuckDB sorts them and they stream through the hash `_SNAPSHOT_BATCH` at a time, so a
    million ids never sit in memory as one text.
    """
    count, last = fetch(
        con, f"SELECT count(*), max(commit_seq) FROM attempts{where}", list(params)
    ).rows[0]
    hasher = blake3.blake3(b"[")
    separator = b""
    ordered = f"SELECT attempt_id FROM attempts{where} ORDER BY attempt_id"
    for rows in fetch_batches(con, ordered, list(params), _SNAPSHOT_BATCH):
        hasher.update(separator + ('"' + '","'.join(r[0] for r in rows) + '"').encode())
        separator = b","
    hasher.update(b"]")
    return {
        "evidence_digest": PREFIX + hasher.hexdigest(),
        "attempts": int(count),
        "last_commit_seq": last,
    }


_SNAPSHOT_BATCH = 65536


def read_evidence(
    store: Store,
    scope: Scope,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
    snapshot: LedgerSnapshot | None = None,
) -> Evidence:
    """Return the attempts in scope under the evidence rule (`registry.evidence.rule`).

    `snapshot`: the ledger as the calling command already read it (read here otherwise).
    """
    where, params = scope_clause(scope)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    con = connect(
        store,
        task_ids=scope.tasks or None,
        as_of=as_of,
        include_retracted=include_retracted,
        evidence_only=True,
        snapshot=snapshot,
    )
    try:
        result = fetch(con, f"SELECT {_COLUMNS} FROM attempts{clause} ORDER BY attempt_id", params)
        hidden = QueryResult(result.columns, [])
        # Hidden rows exist only when the ledger retracts something (one cheap look first).
        if not include_retracted and fetch(con, "SELECT count(*) FROM _retracted").rows[0][0]:
            hidden = fetch(
                con,
                f"SELECT {_COLUMNS.replace('slot_conflict', 'false AS slot_conflict')}"
                f" FROM _evidence{clause}{' AND' if where else ' WHERE'} retracted",
                params,
            )
    finally:
        con.close()
    rows = _as_dicts(result)
    counted = [r for r in rows if not r["slot_conflict"]]
    conflicting = [r for r in rows if r["slot_conflict"]]
    return Evidence(counted, conflicting, _as_dicts(hidden))


def _as_dicts(result: Any) -> list[dict[str, Any]]:
    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    for row in rows:
        row["inputs"] = {**row["inputs"], "budget": orjson.loads(row["inputs"]["budget"])}
    return rows


def observed_system(row: dict[str, Any]) -> tuple[str | None, ...]:
    """Return the observed identity as a tuple (provider `unobserved` for legacy evidence)."""
    return tuple(observed_identity(row).values())


def describe_groups(
    groups: Sequence[tuple[dict[str, Any], str | None, dict[str, Any], int, str]],
    exclude: Sequence[str] = (),
) -> str:
    """Name units given as (system, run, inputs, attempts, tie-break key) and what differs."""
    skip = {*TASK_INPUTS, *exclude}
    inputs = sorted(
        k for k in groups[0][2] if k not in skip and len({repr(g[2][k]) for g in groups}) > 1
    )
    fields = [k for k in ENVELOPE_KEYS if len({g[0][k] for g in groups}) > 1] + (
        ["run"] if len({g[1] for g in groups}) > 1 else []
    )
    parts = []
    for identity, run, values, attempts, _ in sorted(groups, key=lambda g: (-g[3], g[4])):
        shown = "".join(f", {k} {values[k]}" for k in inputs)
        parts.append(f"{system_label(identity, run)}{shown} ({attempts} attempts)")
    return "; ".join(parts) + f" — they differ in {', '.join(fields + inputs) or 'nothing'}"


def read_task_list(lines: Sequence[str]) -> tuple[str, ...]:
    """Return task ids from the lines of a task-list file (blank lines and `#` comments skipped)."""
    return tuple(s for s in (line.strip() for line in lines) if s and not s.startswith("#"))


def _term_matches(key: str, value: str, row: dict[str, Any]) -> bool:
    if key == "experiment":
        return bool(row["experiment_id"] == value)
    if key == "plan":
        return bool(row["plan_id"] == value)
    if key == "agent_system":
        key = "agent_system_digest"
    if key in CONFIG_INPUTS:
        given = str(row["inputs"][key])
        return given == value or (
            given.startswith("blake3:") and given.removeprefix("blake3:").startswith(value)
        )
    observed = observed_system(row)[ENVELOPE_KEYS.index(key)]
    if key == "model" and value == "unknown":
        return observed is None
    return observed == value
