"""Statistics over repeated agent-evaluation attempts, as defined in shared/STATISTICS.md.

Pure functions: no I/O, no printing. An undefined value is ``None``, never NaN or 0.0.
Invalid arguments (negative counts, ``k < 1``, ...) are programming errors and raise
``ValueError``; they are not ``RegistryError``s.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Final, Literal

# The quantiles as scipy.stats.norm.ppf gives them (a test checks they agree). They are
# written out so that importing the statistics does not import scipy, which costs most of
# a command's start-up; scipy (and numpy) are imported only where a p-value or a bootstrap
# is computed.
Z_975: Final[float] = 1.959963984540054
"""Φ⁻¹(0.975) = 1.959963984540054, the canonical two-sided 95% multiplier."""
Z_80: Final[float] = 0.8416212335729143
"""Φ⁻¹(0.80) = 0.8416212335729143, the multiplier for power 0.80."""
MDD_MULTIPLIER: Final[float] = 2.8
"""Rounded z_0.975 + z_0.80: α = 0.05 two-sided with power 0.80."""
DEFAULT_RESAMPLES: Final[int] = 10_000
DEFAULT_BOOTSTRAP_SEED: Final[int] = 0
_BOOTSTRAP_BATCH: Final[int] = 1_000  # bounds memory at 1000 x T floats per step

Outcome = Literal["resolved", "unresolved", "invalid"]

_OUTCOME_OF_CLASS: Final[Mapping[str, Outcome]] = {
    "resolved": "resolved",
    "unresolved": "unresolved",
    "invalid": "invalid",
    "model_failure": "unresolved",
    "safety_failure": "unresolved",
    "timeout": "unresolved",
    "harness_failure": "invalid",
    "environment_failure": "invalid",
    "grader_failure": "invalid",
    "invalid_case": "invalid",
    "cancelled": "invalid",
}


@dataclass(frozen=True)
class Interval:
    """A point estimate with the bounds of its interval, all in [0, 1] for rates."""

    estimate: float
    low: float
    high: float


@dataclass(frozen=True)
class RuntimeSummary:
    """Mean, median and nearest-rank p95 of known runtimes; all ``None`` when ``known == 0``.

    ``known`` counts the runtimes the figures are computed from, ``unavailable`` the ones
    left out because they were not recorded (``None``), never treated as zero.
    """

    mean: float | None
    median: float | None
    p95: float | None
    known: int
    unavailable: int

    @property
    def count(self) -> int:
        """The number of known runtimes (alias of ``known``)."""
        return self.known


@dataclass(frozen=True)
class SignTest:
    """Counts of positive, negative and tied differences with the exact two-sided p-value."""

    positive: int
    negative: int
    ties: int
    p: float


@dataclass(frozen=True)
class PairedSummary:
    """Mean paired difference B − A with its SD, SE and minimum detectable difference."""

    n_tasks: int
    mean: float | None
    sd: float | None
    se: float | None
    mdd: float | None


@dataclass(frozen=True)
class PairedDifferences:
    """Per-task differences B − A over tasks where both systems have a rate."""

    task_ids: tuple[str, ...]
    diffs: tuple[float, ...]
    dropped: int


@dataclass(frozen=True)
class ClusteredSe:
    """Task-clustered standard errors of the pooled mean; ``se_cr1`` is canonical."""

    mean: float
    n_attempts: int
    n_clusters: int
    se_cr1: float
    se_sandwich_uncorrected: float
    se_miller_eq: float | None
    se_naive_clt: float
    se_naive_bernoulli: float
    se_of_cluster_means: float


@dataclass(frozen=True)
class TaskSystemSummary:
    """Per task × system figures of §1: counts, rates, consistency, runtime, pass@k."""

    attempts_total: int
    valid: int
    resolved: int
    unresolved: int
    invalid: int
    resolved_rate: Interval | None
    invalid_rate: Interval | None
    repeat_consistency: float | None
    runtime: RuntimeSummary
    runtime_missing: int
    pass_at_k: dict[int, float | None]
    pass_hat_k: dict[int, float | None]


@dataclass(frozen=True)
class SystemAggregate:
    """Per-system aggregates of §2 over tasks; pass@k means skip tasks with valid < k."""

    n_tasks: int
    tasks_with_valid: int
    pooled_resolved_rate: float | None
    naive_pooled_interval: Interval | None
    task_mean_rate: float | None
    clustered_se_cr1: float | None
    clustered_interval: Interval | None
    expected_flips: float | None
    pass_at_k: dict[int, float | None]
    pass_hat_k: dict[int, float | None]
    tasks_excluded: dict[int, int]


# --- §0 / §1: per task × system ---------------------------------------------------------


def classify_outcome(terminal_class: str) -> Outcome:
    """Return resolved/unresolved/invalid for a terminal class (or an already mapped name)."""
    try:
        return _OUTCOME_OF_CLASS[terminal_class]
    except KeyError:
        valid = ", ".join(sorted(_OUTCOME_OF_CLASS))
        raise ValueError(f"unknown outcome {terminal_class!r}; expected one of {valid}") from None


def proportion(x: int, n: int) -> float | None:
    """Return x / n, or ``None`` when n == 0."""
    _check_counts(x, n)
    return None if n == 0 else x / n


def resolved_rate(resolved: int, valid: int) -> float | None:
    """Return resolved / valid, or ``None`` with no valid attempts."""
    return proportion(resolved, valid)


def invalid_rate(invalid: int, total: int) -> float | None:
    """Return invalid / total retained attempts, or ``None`` with no attempts."""
    return proportion(invalid, total)


def repeat_consistency(resolved: int, unresolved: int) -> float | None:
    """Return max(resolved, unresolved) / valid, or ``None`` with no valid attempts."""
    _check_counts(resolved, resolved + unresolved)
    _check_counts(unresolved, resolved + unresolved)
    valid = resolved + unresolved
    return None if valid == 0 else max(resolved, unresolved) / valid


def wilson_interval(successes: int, n: int, z: float = Z_975) -> Interval | None:
    """Return the Wilson score interval for successes / n, or ``None`` when n == 0."""
    _check_counts(successes, n)
    if n == 0:
        return None
    p = successes / n
    z2n = z * z / n
    center = (p + z2n / 2) / (1 + z2n)
    half = z / (1 + z2n) * math.sqrt(p * (1 - p) / n + z2n / (4 * n))
    low = 0.0 if successes == 0 else _clamp(center - half)
    high = 1.0 if successes == n else _clamp(center + half)
    return Interval(p, low, high)


def normal_interval(estimate: float, se: float, z: float = Z_975) -> Interval:
    """Return estimate ± z·se clipped to [0, 1]."""
    return Interval(estimate, _clamp(estimate - z * se), _clamp(estimate + z * se))


def nearest_rank(n: int, percent: int = 95) -> int:
    """Return the 1-based nearest rank ceil(percent·n/100), computed with integers."""
    if n < 1 or not 0 < percent <= 100:
        raise ValueError(f"need n >= 1 and 0 < percent <= 100, got n={n}, percent={percent}")
    return (percent * n + 99) // 100


def runtime_summary(values: Iterable[float | None]) -> RuntimeSummary:
    """Return mean, median and nearest-rank p95 of the known runtimes, independent of order.

    ``None`` marks an unavailable runtime: it is left out of the figures and counted in
    ``unavailable``.
    """
    items = list(values)
    ordered = sorted(float(v) for v in items if v is not None)
    if not all(math.isfinite(v) for v in ordered):
        raise ValueError("runtimes must be finite numbers or None (unavailable)")
    n, unavailable = len(ordered), len(items) - len(ordered)
    if n == 0:
        return RuntimeSummary(None, None, None, 0, unavailable)
    mean = math.fsum(ordered) / n
    p95 = ordered[nearest_rank(n) - 1]
    return RuntimeSummary(mean, _median_of_sorted(ordered), p95, n, unavailable)


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Return unbiased pass@k = 1 − C(n−c, k)/C(n, k), or ``None`` when k > n.

    Raises:
        ValueError: if k < 1 or the counts are inconsistent.
    """
    if not _pass_k_defined(n, c, k):
        return None
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / j for j in range(n - c + 1, n + 1))


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """Return pass^k = C(c, k)/C(n, k), or ``None`` when k > n.

    Raises:
        ValueError: if k < 1 or the counts are inconsistent.
    """
    if not _pass_k_defined(n, c, k):
        return None
    if c < k:
        return 0.0
    return math.prod((c - i) / (n - i) for i in range(k))


def pass_at_k_closed(p: float, k: int) -> float:
    """Return 1 − (1 − p)^k for a known per-attempt success probability p."""
    _check_k(k)
    return 1.0 - (1.0 - p) ** k


def pass_hat_k_closed(p: float, k: int) -> float:
    """Return p^k for a known per-attempt success probability p."""
    _check_k(k)
    return p**k


def summarize_outcomes(
    outcomes: Sequence[str],
    runtimes: Sequence[float | None],
    k_values: Iterable[int] = (1,),
    z: float = Z_975,
) -> TaskSystemSummary:
    """Return the §1 figures for one task × system from its retained attempts.

    ``runtimes[i]`` belongs to ``outcomes[i]``; ``None`` marks a missing runtime, which is
    left out of the runtime statistics and counted in ``runtime_missing``.
    """
    if len(outcomes) != len(runtimes):
        raise ValueError(f"{len(outcomes)} outcomes but {len(runtimes)} runtimes")
    kinds = [classify_outcome(o) for o in outcomes]
    resolved, invalid = kinds.count("resolved"), kinds.count("invalid")
    valid = len(kinds) - invalid
    runtime = runtime_summary(runtimes)
    ks = list(k_values)
    return TaskSystemSummary(
        attempts_total=len(kinds),
        valid=valid,
        resolved=resolved,
        unresolved=valid - resolved,
        invalid=invalid,
        resolved_rate=wilson_interval(resolved, valid, z),
        invalid_rate=wilson_interval(invalid, len(kinds), z),
        repeat_consistency=repeat_consistency(resolved, valid - resolved),
        runtime=runtime,
        runtime_missing=runtime.unavailable,
        pass_at_k={k: pass_at_k(valid, resolved, k) for k in ks},
        pass_hat_k={k: pass_hat_k(valid, resolved, k) for k in ks},
    )


# --- §2: per-system aggregates ------------------------------------------------------------


def clustered_se_variants(clusters: Sequence[Sequence[float]]) -> ClusteredSe | None:
    """Return CR1 and the documented variant SEs of the pooled mean, or ``None`` if C < 2.

    Each cluster holds one task's attempt scores; empty clusters are ignored.
    """
    groups = [[Fraction(s) for s in c] for c in clusters if len(c) > 0]
    n_clusters = len(groups)
    if n_clusters < 2:
        return None
    n = sum(len(g) for g in groups)
    mean = sum((sum(g, Fraction(0)) for g in groups), Fraction(0)) / n
    between = sum(((sum(g, Fraction(0)) - len(g) * mean) ** 2 for g in groups), Fraction(0))
    within = sum(((s - mean) ** 2 for g in groups for s in g), Fraction(0))
    naive_clt_var = within / (n * (n - 1))
    miller_var = naive_clt_var + (between - within) / (n * n)
    cluster_means = [sum(g, Fraction(0)) / len(g) for g in groups]
    return ClusteredSe(
        mean=float(mean),
        n_attempts=n,
        n_clusters=n_clusters,
        se_cr1=_sqrt(Fraction(n_clusters, n_clusters - 1) * between / (n * n)),
        se_sandwich_uncorrected=_sqrt(between / (n * n)),
        se_miller_eq=_sqrt(miller_var) if miller_var >= 0 else None,
        se_naive_clt=_sqrt(naive_clt_var),
        se_naive_bernoulli=_sqrt(mean * (1 - mean) / n),
        se_of_cluster_means=_sqrt(statistics.variance(cluster_means) / n_clusters),
    )


def clustered_se(clusters: Sequence[Sequence[float]]) -> float | None:
    """Return the CR1 task-clustered SE of the pooled mean, or ``None`` if C < 2."""
    variants = clustered_se_variants(clusters)
    return None if variants is None else variants.se_cr1


def clustered_se_from_counts(counts: Sequence[tuple[int, int]]) -> float | None:
    """Return the CR1 task-clustered SE from per-task (resolved, valid) counts.

    With binary scores a task's summed residual is r − n·s̄, so the estimator needs the
    counts only; it equals `clustered_se` over the expanded scores exactly (Fractions).
    ``None`` when fewer than two tasks have a valid attempt.
    """
    scored = [(r, n) for r, n in counts if n > 0]
    if len(scored) < 2:
        return None
    total = sum(n for _, n in scored)
    mean = Fraction(sum(r for r, _ in scored), total)
    between = sum(((r - n * mean) ** 2 for r, n in scored), Fraction(0))
    return _sqrt(Fraction(len(scored), len(scored) - 1) * between / (total * total))


def expected_flips(rates: Iterable[float]) -> float:
    """Return Σ 2p(1 − p): expected tasks whose outcome differs between two identical runs."""
    return math.fsum(2.0 * p * (1.0 - p) for p in rates)


def system_aggregate(
    per_task_resolved: Sequence[int],
    per_task_valid: Sequence[int],
    z: float = Z_975,
    k_values: Iterable[int] | None = None,
) -> SystemAggregate:
    """Return pooled, task-mean and clustered figures for one system over its tasks.

    ``k_values`` defaults to 1..max(valid); tasks with valid < k are excluded from that k.
    """
    counts = list(zip(per_task_resolved, per_task_valid, strict=True))
    scored = [(r, v) for r, v in counts if v > 0]
    pooled = wilson_interval(sum(r for r, _ in counts), sum(v for _, v in counts), z)
    se = clustered_se_from_counts(scored)
    rates = [r / v for r, v in scored]
    ks = list(range(1, max(per_task_valid, default=0) + 1) if k_values is None else k_values)
    at_k = {k: _mean_over_tasks(pass_at_k, counts, k) for k in ks}
    return SystemAggregate(
        n_tasks=len(counts),
        tasks_with_valid=len(scored),
        pooled_resolved_rate=None if pooled is None else pooled.estimate,
        naive_pooled_interval=pooled,
        task_mean_rate=statistics.fmean(rates) if rates else None,
        clustered_se_cr1=se,
        clustered_interval=_clustered_interval(pooled, se, z),
        expected_flips=expected_flips(rates) if rates else None,
        pass_at_k={k: mean for k, (mean, _) in at_k.items()},
        pass_hat_k={k: _mean_over_tasks(pass_hat_k, counts, k)[0] for k in ks},
        tasks_excluded={k: excluded for k, (_, excluded) in at_k.items()},
    )


# --- §3: comparing systems A and B --------------------------------------------------------


def paired_differences(
    rates_a: Mapping[str, float | None], rates_b: Mapping[str, float | None]
) -> PairedDifferences:
    """Return d_t = rate_B − rate_A over tasks both systems rated, sorted by task id."""
    tasks = sorted(set(rates_a) | set(rates_b))
    rows = [(t, rates_a.get(t), rates_b.get(t)) for t in tasks]
    kept = [(t, b - a) for t, a, b in rows if a is not None and b is not None]
    ids = tuple(t for t, _ in kept)
    return PairedDifferences(ids, tuple(d for _, d in kept), len(tasks) - len(kept))


def count_discordant(
    rates_a: Sequence[float], rates_b: Sequence[float], threshold: float = 0.5
) -> tuple[int, int]:
    """Return (gained, lost) tasks, a task counting as resolved iff its rate > threshold."""
    pairs = list(zip(rates_a, rates_b, strict=True))
    gained = sum(1 for a, b in pairs if a <= threshold < b)
    lost = sum(1 for a, b in pairs if b <= threshold < a)
    return gained, lost


def binomial_two_sided_p(a: int, b: int) -> float:
    """Return min(1, 2·P(X ≤ min(a, b))) with X ~ Bin(a + b, ½); 1.0 when a + b == 0."""
    if a < 0 or b < 0:
        raise ValueError(f"counts must be non-negative, got {a}, {b}")
    m = a + b
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(a, b) + 1))
    return min(1.0, 2 * tail / (1 << m))  # exact integers, one correctly rounded division


def mcnemar_exact(gained: int, lost: int) -> float:
    """Return the exact McNemar p-value from the discordant counts."""
    return binomial_two_sided_p(gained, lost)


def sign_test(diffs: Iterable[float]) -> SignTest:
    """Return the exact sign test of paired differences, ties dropped."""
    values = list(diffs)
    positive = sum(1 for d in values if d > 0)
    negative = sum(1 for d in values if d < 0)
    ties = len(values) - positive - negative
    return SignTest(positive, negative, ties, binomial_two_sided_p(positive, negative))


def holm(pvals: Sequence[float], alpha: float = 0.05) -> tuple[list[float], list[bool]]:
    """Return Holm–Bonferroni adjusted p-values (input order) and which are rejected."""
    m = len(pvals)
    order = sorted(range(m), key=lambda i: (pvals[i], i))
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvals[i]))
        adjusted[i] = running
    return adjusted, [p <= alpha for p in adjusted]


def paired_difference_summary(
    diffs: Sequence[float], multiplier: float = MDD_MULTIPLIER
) -> PairedSummary:
    """Return mean, SD (ddof=1), SE and MDD = multiplier·SE of paired differences."""
    t = len(diffs)
    if t == 0:
        return PairedSummary(0, None, None, None, None)
    mean = statistics.fmean(diffs)
    if t < 2:
        return PairedSummary(t, mean, None, None, None)
    sd = statistics.stdev(diffs)
    se = sd / math.sqrt(t)
    return PairedSummary(t, mean, sd, se, multiplier * se)


def paired_bootstrap_ci(
    diffs: Sequence[float],
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
    confidence: float = 0.95,
) -> tuple[float, float] | None:
    """Return the percentile bootstrap CI of the mean difference, or ``None`` if T < 2."""
    import numpy as np

    values = np.asarray(diffs, dtype=float)
    if not np.all(np.isfinite(values)):
        raise ValueError("paired differences must be finite numbers")
    if values.size < 2:
        return None
    if np.all(values == values[0]):
        return float(values[0]), float(values[0])  # scipy yields NaN on degenerate data
    from scipy import stats as sps

    result = sps.bootstrap(
        (values,),
        np.mean,
        n_resamples=n_resamples,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        batch=_BOOTSTRAP_BATCH,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def fisher_exact_p(table: Sequence[Sequence[int]]) -> float:
    """Return the two-sided Fisher exact p-value of a 2×2 table of counts."""
    from scipy import stats as sps

    return float(sps.fisher_exact([list(row) for row in table]).pvalue)


# --- private helpers ----------------------------------------------------------------------


def _check_counts(x: int, n: int) -> None:
    if n < 0 or not 0 <= x <= n:
        raise ValueError(f"need 0 <= x <= n, got x={x}, n={n}")


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def _pass_k_defined(n: int, c: int, k: int) -> bool:
    # k > n is undefined and must be checked before the n − c < k shortcut (n=3, c=0, k=4).
    _check_k(k)
    _check_counts(c, n)
    return k <= n


def _clamp(value: float) -> float:
    return min(1.0, max(0.0, value))


def _sqrt(value: Fraction) -> float:
    return math.sqrt(float(value))


def _median_of_sorted(ordered: Sequence[float]) -> float:
    middle = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[middle]
    return (ordered[middle - 1] + ordered[middle]) / 2


def _mean_over_tasks(
    estimator: Callable[[int, int, int], float | None],
    counts: Sequence[tuple[int, int]],
    k: int,
) -> tuple[float | None, int]:
    values = [estimator(v, r, k) for r, v in counts if v >= k]
    defined = [x for x in values if x is not None]
    mean = statistics.fmean(defined) if defined else None
    return mean, len(counts) - len(defined)


def _clustered_interval(pooled: Interval | None, se: float | None, z: float) -> Interval | None:
    if pooled is None or se is None:
        return None
    return normal_interval(pooled.estimate, se, z)
