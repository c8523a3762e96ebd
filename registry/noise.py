"""`registry noise`: the noise floor of one system, from its repeated attempts (§2).

Before believing a delta, a team needs to know how far two evaluations of the *same*
configuration move apart by chance. From each task's plug-in rate p_t = resolved / valid:

* expected flips between two single-run evaluations: Σ 2 p_t (1 − p_t), exactly;
* the distribution of the net change in resolved count between two such runs, simulated
  with a recorded seed: each run draws one Bernoulli(p_t) per task;
* the minimum detectable difference with K attempts per task: two identical configurations
  give per-task differences with variance 2 p_t (1 − p_t) / K, so
  SE(d̄) = sqrt(Σ_t 2 p_t (1 − p_t) / K) / T and MDD = 2.8 · SE.

A task unit is a task under one suite configuration, as in the summary.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from registry import stats
from registry.evidence import INVALID, snapshot_of
from registry.layers import LayerVersion, store_layer
from registry.selection import Scope, Selector, SelectorError, configuration, load_evidence
from registry.store import Store
from registry_schemas import Generator, NoiseFloor

GENERATOR = Generator(name="registry.noise", version="1")
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
) -> NoiseFloor:
    """Return the noise floor of the selected system.

    Raises:
        SelectorError: the selector matches no task with a valid attempt.
    """
    scope = scope or Scope()
    rows = [r for r in load_evidence(store, scope) if system.matches(r)]
    counts = _task_counts(rows)
    if not counts:
        raise SelectorError(f"'{system.text}' has no task with a valid attempt in scope")
    rates = {unit: c / n for unit, (c, n) in counts.items()}
    probabilities = [rates[unit] for unit in sorted(rates)]
    changes = simulate_net_change(probabilities, simulations, seed)
    return NoiseFloor(
        system=system.text,
        scope=scope.describe(),
        snapshot=snapshot_of(rows),
        generator=GENERATOR,
        tasks=len(rates),
        rates=rates,
        expected_flips=stats.expected_flips(probabilities),
        expected_flips_unbiased=_unbiased_flips(counts.values()),
        simulations=simulations,
        seed=seed,
        net_change=_distribution(changes),
        p_move_at_least={str(m): float(np.mean(np.abs(changes) >= m)) for m in MOVES},
        mdd_by_attempts={str(k): mdd_for_attempts(probabilities, k) for k in attempts},
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


def _task_counts(rows: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    units: dict[tuple[str, str], list[str]] = defaultdict(list)
    for row in rows:
        units[(row["task_id"], configuration(row))].append(row["terminal_class"])
    configs = {config for _, config in units}
    counts = {}
    for (task, config), classes in units.items():
        valid = [c for c in classes if c not in INVALID]
        if valid:
            label = task if len(configs) == 1 else f"{task} @{sorted(configs).index(config)}"
            counts[label] = (valid.count("resolved"), len(valid))
    return counts


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
