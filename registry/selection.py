"""Choosing evidence for suite-level questions: arm selectors, scopes and configurations.

A selector is `key=value[,key=value…]` over these keys: `experiment`, `plan`, `agent_system`
(a digest or a unique prefix of its hex), and the observed identity fields `agent`,
`agent_version`, `provider` (`unobserved` selects legacy evidence), `model`,
`harness_version`. A scope restricts every arm to some tasks, a plan or an experiment.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from registry.errors import RegistryError
from registry.evidence import ENVELOPE_KEYS, observed_identity
from registry.query import connect, fetch
from registry.store import Store

SELECTOR_KEYS = ("experiment", "plan", "agent_system", *ENVELOPE_KEYS)
TASK_INPUTS = ("task_id", "case_digest", "source_digest")
"""Cohort inputs that name the task itself; every other input is suite configuration."""
_COLUMNS = (
    "attempt_id, task_id, cohort_key, experiment_id, plan_id, inputs, terminal_class, envelope,"
    " terminal_identity, runtime_seconds, cost_usd, input_tokens, output_tokens,"
    " cached_input_tokens, derived_from, commit_seq, commit_digest"
)


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


def load_evidence(store: Store, scope: Scope) -> list[dict[str, Any]]:
    """Return every visible attempt in scope (bound parameters only), ordered by attempt id."""
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
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    con = connect(store, task_ids=scope.tasks or None)
    try:
        result = fetch(con, f"SELECT {_COLUMNS} FROM attempts{clause} ORDER BY attempt_id", params)
    finally:
        con.close()
    rows = [dict(zip(result.columns, row, strict=True)) for row in result.rows]
    for row in rows:
        row["inputs"] = {**row["inputs"], "budget": orjson.loads(row["inputs"]["budget"])}
    return rows


def observed_system(row: dict[str, Any]) -> tuple[str | None, ...]:
    """Return the observed identity as a tuple (provider `unobserved` for legacy evidence)."""
    return tuple(observed_identity(row).values())


def configuration(row: dict[str, Any], exclude: Iterable[str] = (), keep_task: bool = False) -> str:
    """Return the suite configuration of an attempt: its cohort inputs minus task inputs.

    Attempts pool across tasks only when their configurations are equal; `exclude` drops
    further inputs (a comparison lets its varied input differ), `keep_task` keeps the task's
    own inputs (then the result identifies a cohort up to the excluded inputs).
    """
    skip = set(exclude) | (set() if keep_task else set(TASK_INPUTS))
    inputs = {k: v for k, v in row["inputs"].items() if k not in skip}
    return orjson.dumps(inputs, option=orjson.OPT_SORT_KEYS).decode()


def read_task_list(lines: Sequence[str]) -> tuple[str, ...]:
    """Return task ids from the lines of a task-list file (blank lines and `#` comments skipped)."""
    return tuple(s for s in (line.strip() for line in lines) if s and not s.startswith("#"))


def _term_matches(key: str, value: str, row: dict[str, Any]) -> bool:
    if key == "experiment":
        return bool(row["experiment_id"] == value)
    if key == "plan":
        return bool(row["plan_id"] == value)
    if key == "agent_system":
        digest = row["inputs"]["agent_system_digest"]
        return bool(digest == value or digest.removeprefix("blake3:").startswith(value))
    return observed_system(row)[ENVELOPE_KEYS.index(key)] == value
