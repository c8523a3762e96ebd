"""`registry summary`: a suite per system — pooled and task-mean rates, clustered SE, pass@k.

Attempts pool across tasks only in one suite unit of `registry.evidence.rule` (a suite
configuration and an observed system), so a regraded generation, a different prompt or a
mid-experiment model swap is its own row, never averaged in.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

import orjson

from registry.analysis import stats
from registry.analysis.report import rate_of
from registry.evidence.query import fetch
from registry.evidence.rule import TASK_INPUTS, cost_stats
from registry.evidence.selection import (
    Scope,
    Selector,
    SelectorError,
    cohort_inputs,
    counted_attempts,
    snapshot_where,
)
from registry.storage.digest import digest_json
from registry.storage.layers import LayerVersion, store_layer
from registry.storage.store import Store
from registry_schemas import (
    Generator,
    PassK,
    RuntimeStats,
    Summary,
    SystemSummary,
)

GENERATOR = Generator(name="registry.summary", version="2")
SUMMARY_LAYER = "summary"
MAX_K = 10
MIN_NOISE_ATTEMPTS = 3
"""Below this median of valid attempts per task, noise figures are null (not measurable)."""


def summarize(
    store: Store,
    scope: Scope | None = None,
    system: Selector | None = None,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> Summary:
    """Return the suite summary of every system in scope (optionally one selected system).

    Grouping and counting happen in DuckDB (only per-task counts and the runtimes and costs
    of each unit reach Python), so the cost follows the number of tasks, not of attempts.

    Raises:
        SelectorError: nothing in scope matches.
    """
    scope = scope or Scope()
    with counted_attempts(
        store, scope, [system], as_of=as_of, include_retracted=include_retracted
    ) as (con, [(where, params)]):
        cells = fetch(con, _CELLS.format(where=where), params).rows
        units = fetch(con, _UNITS.format(where=where), params).rows
        snapshot = snapshot_where(con, where, params) if cells else None
        inputs = cohort_inputs(con, [unit[3] for unit in units])
    if snapshot is None:
        raise SelectorError("no attempts in scope" + (f" for '{system.text}'" if system else ""))
    counts: dict[tuple[Any, ...], list[tuple[str, int, int, int]]] = defaultdict(list)
    for digest, identity, run, task, attempts, valid, resolved in cells:
        counts[(digest, _frozen(identity), run)].append((task, attempts, valid, resolved))
    systems = [
        _system(identity, run, inputs[cohort], counts[(digest, _frozen(identity), run)], extras)
        for digest, identity, run, cohort, *extras in units
    ]
    systems.sort(key=lambda s: (-s.attempts, s.configuration_digest, repr(s.system), s.run or ""))
    return Summary(
        scope=scope.describe(),
        system_filter=system.text if system else None,
        snapshot=snapshot,
        generator=GENERATOR,
        systems=systems,
    )


_CELLS = """
SELECT configuration_digest, system, run, task_id, count(*),
       count(*) FILTER (is_valid(terminal_class)), count(*) FILTER (terminal_class = 'resolved')
FROM attempts{where} GROUP BY ALL ORDER BY ALL
"""
_UNITS = """
SELECT configuration_digest, system, run, min(cohort_key),
       list(runtime_seconds ORDER BY runtime_seconds) FILTER (runtime_seconds IS NOT NULL),
       count(*) - count(runtime_seconds),
       list(cost_usd ORDER BY cost_usd) FILTER (cost_usd IS NOT NULL),
       count(*) - count(cost_usd)
FROM attempts{where} GROUP BY ALL
"""


def _frozen(identity: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(identity.values())


def record_summary(store: Store, summary: Summary) -> tuple[LayerVersion, bool]:
    """Store a summary as a derived layer."""
    document = summary.model_dump(mode="json", by_alias=True)
    subject = orjson.dumps(summary.scope, option=orjson.OPT_SORT_KEYS).decode()
    return store_layer(store, SUMMARY_LAYER, subject, document)


def _system(
    identity: dict[str, Any],
    run: str | None,
    inputs: dict[str, Any],
    cells: list[tuple[str, int, int, int]],
    extras: list[Any],
) -> SystemSummary:
    runtimes, runtime_unknown, costs, cost_unknown = extras
    cells = sorted(cells)
    resolved = [r for _, _, _, r in cells]
    valid = [v for _, _, v, _ in cells]
    attempts = sum(n for _, n, _, _ in cells)
    ks = list(range(1, min(max(valid, default=0), MAX_K) + 1)) or [1]
    agg = stats.system_aggregate(resolved, valid, k_values=ks)
    invalid = attempts - sum(valid)
    runtime = stats.runtime_summary([*(runtimes or []), *[None] * runtime_unknown])
    configuration_inputs = {
        k: orjson.loads(v) if k == "budget" else v
        for k, v in inputs.items()
        if k not in TASK_INPUTS
    }
    pooled = agg.naive_pooled_interval
    with_valid = [v for v in valid if v > 0]
    per_task = statistics.median(with_valid) if with_valid else None
    undefined = {}
    flips = agg.expected_flips
    if per_task is None or per_task < MIN_NOISE_ATTEMPTS:
        flips = None
        undefined["expected_flips"] = (
            f"median valid attempts per task is {_count(per_task)}; fewer than "
            f"{MIN_NOISE_ATTEMPTS} cannot measure how often a task flips"
        )
    return SystemSummary(
        system=identity,
        run=run,
        configuration=configuration_inputs,
        configuration_digest=digest_json(configuration_inputs),
        tasks=len(cells),
        tasks_with_valid=agg.tasks_with_valid,
        attempts=attempts,
        valid=sum(valid),
        invalid=invalid,
        resolved=sum(resolved),
        pooled_resolved_rate=rate_of(pooled),
        task_mean_resolved_rate=agg.task_mean_rate,
        clustered_se=agg.clustered_se_cr1,
        clustered_interval=rate_of(agg.clustered_interval),
        pass_at_k=_pass_k(agg.pass_at_k, agg.tasks_excluded, len(cells)),
        pass_hat_k=_pass_k(agg.pass_hat_k, agg.tasks_excluded, len(cells)),
        invalid_rate=rate_of(stats.wilson_interval(invalid, attempts)),
        runtime_seconds=RuntimeStats(
            mean=runtime.mean,
            median=runtime.median,
            p95=runtime.p95,
            known=runtime.known,
            unavailable=runtime.unavailable,
        ),
        cost_usd=cost_stats([*(costs or []), *[None] * cost_unknown]),
        attempts_per_task=per_task,
        expected_flips=flips,
        undefined=undefined,
    )


def _count(value: float | None) -> str:
    return "0" if value is None else f"{value:g}"


def _pass_k(
    means: dict[int, float | None], excluded: dict[int, int], tasks: int
) -> dict[str, PassK]:
    return {
        str(k): PassK(mean=mean, tasks=tasks - excluded[k], excluded=excluded[k])
        for k, mean in means.items()
    }
