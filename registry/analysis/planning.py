"""Planning figures from shared/STATISTICS.md §4: sample sizes, power and binomial facts.

These are planning numbers (how many attempts or discordant pairs are needed, what a design
of T tasks × K attempts can detect), not report fields; `registry plan size` prints them.
Miller's repeated-measures variance (stated in §2) lives here too, because it is only used
to plan how many repeats to run. Pure functions:
no I/O, no printing. Invalid arguments are programming errors and raise ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


def _sps() -> Any:
    """Return `scipy.stats`, imported on first use (it costs most of a command's start-up)."""
    from scipy import stats

    return stats


@dataclass(frozen=True)
class TwoProportionSampleSize:
    """Attempts per arm to detect p1 vs p2 (unrounded and rounded up)."""

    n_per_arm_raw: float
    n_per_arm: int


@dataclass(frozen=True)
class McNemarSampleSize:
    """Discordant pairs needed by three methods; exact figures are searched up to a limit."""

    crude_raw: float
    crude_ceil: int
    normal_alt_variance_raw: float
    normal_alt_variance_ceil: int
    exact_first_n: int | None
    exact_stable_n: int | None


# --- §2: Miller's variance with K repeats per task (planning use) -----------------------


def repeated_mean_variance(
    var_x: float, mean_sigma2: float, repeats: int, n_tasks: int = 1
) -> float:
    """Return Miller's Var(mean) = (Var(x) + E[σ²]/K) / n_tasks with K repeats per task."""
    if repeats < 1 or n_tasks < 1:
        raise ValueError(f"need repeats >= 1 and n_tasks >= 1, got {repeats}, {n_tasks}")
    return (var_x + mean_sigma2 / repeats) / n_tasks


# --- §4: planning figures ---------------------------------------------------------------


def binomial_cdf(k: int, n: int, p: float) -> float:
    """Return P(X ≤ k) for X ~ Bin(n, p)."""
    return float(_sps().binom.cdf(k, n, p))


def binomial_pmf(k: int, n: int, p: float) -> float:
    """Return P(X = k) for X ~ Bin(n, p)."""
    return float(_sps().binom.pmf(k, n, p))


def probability_any_failure(p: float, n: int) -> float:
    """Return 1 − p^n, the chance of at least one failure in n attempts."""
    return 1.0 - p**n


def sample_size_two_proportions(
    p1: float, p2: float, alpha: float = 0.05, power: float = 0.8
) -> TwoProportionSampleSize:
    """Return attempts per arm to tell p1 from p2 (two-sided test of two proportions)."""
    if p1 == p2:
        raise ValueError("p1 and p2 must differ")
    z_a, z_b = _z_pair(alpha, power)
    p_bar = (p1 + p2) / 2
    spread = z_a * math.sqrt(2 * p_bar * (1 - p_bar)) + z_b * math.sqrt(
        p1 * (1 - p1) + p2 * (1 - p2)
    )
    raw = spread**2 / (p2 - p1) ** 2
    return TwoProportionSampleSize(raw, math.ceil(raw))


def sign_test_power(n: int, psi: float, alpha: float = 0.05) -> float:
    """Return the power of the exact two-sided sign test with n pairs, P(favour) = psi."""
    cutoff = _rejection_cutoff(n, alpha)
    if cutoff < 0:
        return 0.0
    binom = _sps().binom
    return float(binom.cdf(cutoff, n, psi) + binom.sf(n - cutoff - 1, n, psi))


def sample_size_mcnemar_discordant(
    psi: float, alpha: float = 0.05, power: float = 0.8, search_limit: int | None = None
) -> McNemarSampleSize:
    """Return discordant pairs needed: crude, Connor normal-approximation and exact figures.

    The exact figures search n = 1..search_limit (default 4 × the crude count):
    ``exact_first_n`` is the first n with power ≥ target and ``exact_stable_n`` the first
    from which power stays ≥ target up to the limit.
    """
    if not 0.0 <= psi <= 1.0 or psi == 0.5:
        raise ValueError(f"psi must be in [0, 1] and differ from 0.5, got {psi}")
    z_a, z_b = _z_pair(alpha, power)
    effect = (psi - 0.5) ** 2
    crude = (z_a + z_b) ** 2 / (4 * effect)
    connor = (z_a / 2 + z_b * math.sqrt(psi * (1 - psi))) ** 2 / effect
    limit = search_limit if search_limit is not None else 4 * math.ceil(crude)
    reached = [sign_test_power(n, psi, alpha) >= power for n in range(1, limit + 1)]
    first, stable = _first_and_stable(reached)
    return McNemarSampleSize(crude, math.ceil(crude), connor, math.ceil(connor), first, stable)


@dataclass(frozen=True)
class BinomialFacts:
    """What K runs of an agent with per-attempt success rate p look like (§4)."""

    rate: float
    runs: int
    minority: float
    """P(fewer than half the runs succeed): how often the agent reads as a minority."""
    all_pass: float
    """P(every run succeeds) = p^K."""
    any_failure: float
    """P(at least one run fails) = 1 − p^K."""
    none_pass: float
    """P(no run succeeds) = (1 − p)^K."""


def binomial_facts(rate: float, runs: int) -> BinomialFacts:
    """Return the binomial facts of `runs` attempts at success rate `rate`."""
    if not 0.0 <= rate <= 1.0 or runs < 1:
        raise ValueError(f"need 0 <= rate <= 1 and runs >= 1, got {rate}, {runs}")
    return BinomialFacts(
        rate=rate,
        runs=runs,
        minority=binomial_cdf((runs - 1) // 2, runs, rate),
        all_pass=rate**runs,
        any_failure=probability_any_failure(rate, runs),
        none_pass=(1.0 - rate) ** runs,
    )


@dataclass(frozen=True)
class MddCell:
    """The MDD of a design with T tasks and K attempts per task per arm."""

    tasks: int
    attempts: int
    attempts_per_arm: int
    """T × K: what the design costs per arm."""
    mdd: float | None


def mdd_what_if(
    probabilities: Sequence[float],
    tasks: Sequence[int],
    attempts: Sequence[int],
    task_sd: float = 0.0,
) -> list[MddCell]:
    """Return the MDD for every T × K, from measured per-task rates.

    With `task_sd` = 0 the per-task differences of two arms vary only by chance, as in
    `registry noise`: MDD = 2.8 · sqrt(mean 2p(1−p) / K / T), which for T = the measured task
    count is exactly `mdd_for_attempts`. A `task_sd` > 0 adds the spread of true per-task
    effects (Miller's Var(x) term), which only more tasks reduce: then, for the same cost,
    more tasks with fewer attempts detect smaller differences.
    """
    from registry.analysis.noise import mdd_for_attempts
    from registry.analysis.stats import MDD_MULTIPLIER

    if task_sd < 0:
        raise ValueError(f"task_sd must be >= 0, got {task_sd}")
    n = len(probabilities)
    cells = []
    for t in tasks:
        for k in attempts:
            if t < 1 or k < 1:
                raise ValueError(f"need tasks >= 1 and attempts >= 1, got {t}, {k}")
            mdd: float | None
            if n == 0:
                mdd = None
            elif task_sd == 0:
                base = mdd_for_attempts(probabilities, k)
                mdd = None if base is None else base * math.sqrt(n / t)
            else:
                within = math.fsum(2 * p * (1 - p) for p in probabilities) / n
                variance = repeated_mean_variance(task_sd**2, within, k, t)
                mdd = MDD_MULTIPLIER * math.sqrt(variance)
            cells.append(MddCell(t, k, t * k, mdd))
    return cells


# --- private helpers ----------------------------------------------------------------------


def _z_pair(alpha: float, power: float) -> tuple[float, float]:
    norm = _sps().norm
    return float(norm.ppf(1 - alpha / 2)), float(norm.ppf(power))


def _rejection_cutoff(n: int, alpha: float) -> int:
    """Return the largest x ≤ n/2 whose two-sided sign-test p is ≤ alpha, or −1."""
    tail, term, cutoff = 0, 1, -1
    for x in range(n // 2 + 1):
        tail += term
        if min(1.0, 2 * tail / (1 << n)) > alpha:
            break
        cutoff = x
        term = term * (n - x) // (x + 1)
    return cutoff


def _first_and_stable(reached: Sequence[bool]) -> tuple[int | None, int | None]:
    first = next((i + 1 for i, ok in enumerate(reached) if ok), None)
    stable: int | None = None
    for i in range(len(reached) - 1, -1, -1):
        if not reached[i]:
            break
        stable = i + 1
    return first, stable
