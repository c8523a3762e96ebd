"""`registry noise`: the noise floor of one system, from its repeated attempts (§2).

Before believing a delta, a team needs to know how far two evaluations of the *same*
configuration move apart by chance. From each task's plug-in rate p_t = resolved / valid:

* expected flips between two single-run evaluations: Σ 2 p_t (1 − p_t), exactly;
* the distribution of the net change in resolved count between two such runs, simulated
  with a recorded seed: each run draws one Bernoulli(p_t) per task;
* the minimum detectable difference with K attempts per task: two identical configurations
  give per-task differences with variance 2 p_t (1 − p_t) / K, so
  SE(d̄) = sqrt(Σ_t 2 p_t (1 − p_t) / K) / T and MDD = 2.8 · SE.

The selector must match one suite unit of `registry.evidence.rule` (one configuration, one
observed system); a selection that spans several (a regraded generation beside its original,
a model swap) is refused with the units named, never pooled. Fewer than three valid attempts
per task (median) cannot measure a noise floor: every figure is then null with the reason.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import numpy as np

from registry.analysis import stats
from registry.evidence.query import fetch
from registry.evidence.selection import (
    Scope,
    Selector,
    SelectorError,
    cohort_inputs,
    counted_attempts,
    describe_groups,
    snapshot_where,
)
from registry.storage.layers import LayerVersion, store_layer
from registry.storage.store import Store
from registry_schemas import Generator, NoiseFloor

GENERATOR = Generator(name="registry.noise", version="2")
MIN_ATTEMPTS = 3
"""Median valid attempts per task below which the noise floor is not measurable."""
NOISE_LAYER = "noise"
DEFAULT_SIMULATIONS = 100_000
DEFAULT_ATTEMPTS = (1, 2, 3, 5, 10)
MOVES = (1, 2, 3, 5, 10)
_CHUNK = 10_000


def noise_floor(
    store: Store,
    system: Selector,
    scope: Scope | None = None,
    simulations: int = DEFAULT_SIMULATIONS,
    seed: int = 0,
    attempts: Sequence[int] = DEFAULT_ATTEMPTS,
    *,
    as_of: str | int | None = None,
    include_retracted: bool = False,
) -> NoiseFloor:
    """Return the noise floor of the selected system.

    Raises:
        SelectorError: the selector matches no task with a valid attempt, or more than one
            suite unit (configuration and observed system).
    """
    scope = scope or Scope()
    with counted_attempts(
        store, scope, [system], as_of=as_of, include_retracted=include_retracted
    ) as (con, [(where, params)]):
        cells = fetch(con, _CELLS.format(where=where), params).rows
        units: dict[tuple[Any, ...], list[Any]] = {}
        for digest, identity, run, cohort, task, valid, resolved, total in cells:
            units.setdefault((digest, tuple(identity.values()), run), []).append(
                (identity, run, cohort, task, valid, resolved, total)
            )
        if len(units) > 1:
            inputs = cohort_inputs(con, [c[2] for members in units.values() for c in members])
            groups = [
                (m[0][0], m[0][1], inputs[m[0][2]], sum(c[6] for c in m), m[0][2])
                for m in units.values()
            ]
            raise SelectorError(
                f"'{system.text}' matches {len(units)} systems or configurations, which never "
                f"pool: {describe_groups(groups)}; narrow the selector"
            )
        snapshot = snapshot_where(con, where, params) if cells else None
    counts = {task: (resolved, valid) for *_, task, valid, resolved, _ in cells if valid}
    if not counts or snapshot is None:
        raise SelectorError(f"'{system.text}' has no task with a valid attempt in scope")
    digest, identity, run = cells[0][0], cells[0][1], cells[0][2]
    rates = {task: c / n for task, (c, n) in counts.items()}
    probabilities = [rates[task] for task in sorted(rates)]
    per_task = float(statistics.median(n for _, n in counts.values()))
    figures: dict[str, Any] = {
        "expected_flips": None,
        "expected_flips_unbiased": None,
        "net_change": None,
        "p_move_at_least": None,
        "mdd_by_attempts": None,
    }
    undefined = {}
    if per_task < MIN_ATTEMPTS:
        reason = (
            f"median valid attempts per task is {per_task:g}; fewer than {MIN_ATTEMPTS} cannot "
            "measure the noise floor (a task seen once looks perfectly stable)"
        )
        undefined = {name: reason for name in figures}
    else:
        changes = simulate_net_change(probabilities, simulations, seed)
        figures = {
            "expected_flips": stats.expected_flips(probabilities),
            "expected_flips_unbiased": _unbiased_flips(counts.values()),
            "net_change": _distribution(changes),
            "p_move_at_least": {str(m): float(np.mean(np.abs(changes) >= m)) for m in MOVES},
            "mdd_by_attempts": {str(k): mdd_for_attempts(probabilities, k) for k in attempts},
        }
    return NoiseFloor(
        system=system.text,
        identity=identity,
        run=run,
        configuration_digest=digest,
        scope=scope.describe(),
        snapshot=snapshot,
        generator=GENERATOR,
        tasks=len(rates),
        attempts_per_task=per_task,
        rates=rates,
        counts={task: [c, n] for task, (c, n) in sorted(counts.items())},
        simulations=simulations,
        seed=seed,
        undefined=undefined,
        **figures,
    )


def record_noise(store: Store, floor: NoiseFloor) -> tuple[LayerVersion, bool]:
    """Store a noise floor as a derived layer."""
    return store_layer(
        store, NOISE_LAYER, floor.system, floor.model_dump(mode="json", by_alias=True)
    )


def simulate_net_change(probabilities: Sequence[float], simulations: int, seed: int) -> np.ndarray:
    """Return simulated (resolved count of run 1 − run 2) for two single-run evaluations."""
    rng = np.random.default_rng(seed)
    p = np.asarray(probabilities, dtype=float)
    out = np.empty(simulations, dtype=np.int64)
    for start in range(0, simulations, _CHUNK):
        size = min(_CHUNK, simulations - start)
        first = (rng.random((size, p.size)) < p).sum(axis=1)
        second = (rng.random((size, p.size)) < p).sum(axis=1)
        out[start : start + size] = first - second
    return out


def mdd_for_attempts(probabilities: Sequence[float], attempts: int) -> float | None:
    """Return 2.8 · SE of d̄ between two identical configurations with K attempts per task."""
    t = len(probabilities)
    if t == 0 or attempts < 1:
        return None
    variance = math.fsum(2 * p * (1 - p) / attempts for p in probabilities)
    return stats.MDD_MULTIPLIER * math.sqrt(variance) / t


_CELLS = """
SELECT configuration_digest, system, run, min(cohort_key), task_id,
       count(*) FILTER (is_valid(terminal_class)), count(*) FILTER (terminal_class = 'resolved'),
       count(*)
FROM attempts{where} GROUP BY configuration_digest, system, run, task_id ORDER BY ALL
"""


def _unbiased_flips(counts: Any) -> float | None:
    terms = [2 * c * (n - c) / (n * (n - 1)) for c, n in counts if n >= 2]
    return math.fsum(terms) if terms else None


def _distribution(changes: np.ndarray) -> dict[str, Any]:
    values, frequency = np.unique(changes, return_counts=True)
    return {
        "mean": float(np.mean(changes)),
        "sd": float(np.std(changes, ddof=1)) if changes.size > 1 else None,
        "quantiles": {
            q: float(np.quantile(changes, float(q) / 100, method="inverted_cdf"))
            for q in ("2.5", "25", "50", "75", "97.5")
        },
        "histogram": {str(int(v)): int(n) for v, n in zip(values, frequency, strict=True)},
    }
