"""`registry summary`: a suite per system — pooled and task-mean rates, clustered SE, pass@k.

Attempts pool across tasks only in one suite unit of `registry.evidence` (a suite
configuration and an observed system), so a regraded generation, a different prompt or a
mid-experiment model swap is its own row, never averaged in.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

import orjson

from registry import stats
from registry.digest import digest_json
from registry.evidence import (
    cost_stats,
    is_resolved,
    is_valid,
    observed_identity,
    snapshot_of,
    unit_key,
)
from registry.layers import LayerVersion, store_layer
from registry.report import rate_of
from registry.selection import Scope, Selector, SelectorError, load_evidence
from registry.store import Store
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
Rows = list[dict[str, Any]]


def summarize(
    store: Store,
    scope: Scope | None = None,
    system: Selector | None = None,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> Summary:
    """Return the suite summary of every system in scope (optionally one selected system).

    Raises:
        SelectorError: nothing in scope matches.
    """
    scope = scope or Scope()
    evidence = load_evidence(store, scope, as_of=as_of, include_retracted=include_retracted)
    rows = [r for r in evidence if system is None or system.matches(r)]
    if not rows:
        raise SelectorError("no attempts in scope" + (f" for '{system.text}'" if system else ""))
    groups: dict[tuple[Any, ...], Rows] = defaultdict(list)
    for row in rows:
        groups[unit_key(row)].append(row)
    systems = [_system(config, members) for (config, _), members in groups.items()]
    systems.sort(key=lambda s: (-s.attempts, s.configuration_digest, repr(s.system), s.run or ""))
    return Summary(
        scope=scope.describe(),
        system_filter=system.text if system else None,
        snapshot=snapshot_of(rows),
        generator=GENERATOR,
        systems=systems,
    )


def record_summary(store: Store, summary: Summary) -> tuple[LayerVersion, bool]:
    """Store a summary as a derived layer."""
    document = summary.model_dump(mode="json", by_alias=True)
    subject = orjson.dumps(summary.scope, option=orjson.OPT_SORT_KEYS).decode()
    return store_layer(store, SUMMARY_LAYER, subject, document)


def _system(config: str, rows: Rows) -> SystemSummary:
    by_task: dict[str, Rows] = defaultdict(list)
    for row in rows:
        by_task[row["task_id"]].append(row)
    tasks = sorted(by_task)
    resolved = [sum(map(is_resolved, by_task[t])) for t in tasks]
    valid = [sum(map(is_valid, by_task[t])) for t in tasks]
    ks = list(range(1, min(max(valid, default=0), MAX_K) + 1)) or [1]
    agg = stats.system_aggregate(resolved, valid, k_values=ks)
    invalid = len(rows) - sum(valid)
    runtime = stats.runtime_summary(r["runtime_seconds"] for r in rows)
    configuration_inputs = orjson.loads(config)
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
        system=observed_identity(rows[0]),
        run=rows[0]["run"],
        configuration=configuration_inputs,
        configuration_digest=digest_json(configuration_inputs),
        tasks=len(tasks),
        tasks_with_valid=agg.tasks_with_valid,
        attempts=len(rows),
        valid=sum(valid),
        invalid=invalid,
        resolved=sum(resolved),
        pooled_resolved_rate=rate_of(pooled),
        task_mean_resolved_rate=agg.task_mean_rate,
        clustered_se=agg.clustered_se_cr1,
        clustered_interval=rate_of(agg.clustered_interval),
        pass_at_k=_pass_k(agg.pass_at_k, agg.tasks_excluded, len(tasks)),
        pass_hat_k=_pass_k(agg.pass_hat_k, agg.tasks_excluded, len(tasks)),
        invalid_rate=rate_of(stats.wilson_interval(invalid, len(rows))),
        runtime_seconds=RuntimeStats(
            mean=runtime.mean,
            median=runtime.median,
            p95=runtime.p95,
            known=runtime.known,
            unavailable=runtime.unavailable,
        ),
        cost_usd=cost_stats(r["cost_usd"] for r in rows),
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
