"""registry.analysis.stats and .planning: every statistics-reference.json case, and invariants."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.analysis import planning, stats

REFERENCE_PATH = Path(__file__).parent / "data" / "statistics-reference.json"
REFERENCE: dict[str, Any] = json.loads(REFERENCE_PATH.read_text(encoding="utf-8"))
CASES: list[dict[str, Any]] = REFERENCE["cases"]
EXAMPLE_DIFFS = [0.0, 0.2, 0.2, 0.2, 0.0, -0.2, 0.4, 0.0, 0.2, 0.4]


# --- adapters: reference input -> the shape of the reference "expected" ---------------------


def _pct(value: float | None) -> float | None:
    return None if value is None else round(100 * value, 1)


def _wilson(inp: dict[str, Any]) -> Any:
    interval = stats.wilson_interval(inp["successes"], inp["n"], inp["z"])
    if interval is None:
        return None
    return {
        "low": interval.low,
        "high": interval.high,
        "point": interval.estimate,
        "low_pct_1dp": _pct(interval.low),
        "high_pct_1dp": _pct(interval.high),
    }


def _runtime(inp: dict[str, Any]) -> Any:
    summary = stats.runtime_summary(inp["runtimes"])
    if summary.count == 0:
        assert (summary.mean, summary.median, summary.p95) == (None, None, None)
        return None
    return {
        "mean": summary.mean,
        "median": summary.median,
        "p95": summary.p95,
        "p95_rank": stats.nearest_rank(summary.count),
    }


def _pass_k(inp: dict[str, Any]) -> Any:
    n, c, k = inp["n"], inp["c"], inp["k"]
    return {"pass_at_k": stats.pass_at_k(n, c, k), "pass_hat_k": stats.pass_hat_k(n, c, k)}


def _pass_closed(inp: dict[str, Any]) -> Any:
    p, k = inp["p"], inp["k"]
    return {"pass_at_k": stats.pass_at_k_closed(p, k), "pass_hat_k": stats.pass_hat_k_closed(p, k)}


def _paired_summary(inp: dict[str, Any]) -> Any:
    diffs = inp["diffs_B_minus_A"]
    summary = stats.paired_difference_summary(diffs)
    exact = stats.paired_difference_summary(diffs, multiplier=stats.Z_975 + stats.Z_80)
    return {
        "n_tasks": summary.n_tasks,
        "mean": summary.mean,
        "sd_ddof1": summary.sd,
        "se": summary.se,
        "mdd_2p8": summary.mdd,
        "mdd_exact_z": exact.mdd,
    }


def _sign_test(inp: dict[str, Any]) -> Any:
    return dataclasses.asdict(stats.sign_test(inp["diffs_B_minus_A"]))


def _bootstrap(inp: dict[str, Any]) -> Any:
    ci = stats.paired_bootstrap_ci(
        inp["diffs_B_minus_A"], n_resamples=inp["n_resamples"], confidence=inp["confidence"]
    )
    return None if ci is None else {"low": ci[0], "high": ci[1]}


def _clustered(inp: dict[str, Any]) -> Any:
    variants = stats.clustered_se_variants(inp["clusters"])
    canonical = stats.clustered_se(inp["clusters"])
    if variants is None:
        assert canonical is None
        return None
    assert canonical == variants.se_cr1
    return dataclasses.asdict(variants)


def _holm(inp: dict[str, Any]) -> Any:
    adjusted, reject = stats.holm(inp["pvals"], inp["alpha"])
    return {"adjusted": adjusted, "reject": reject}


def _sample_size_two(inp: dict[str, Any]) -> Any:
    size = planning.sample_size_two_proportions(inp["p1"], inp["p2"], inp["alpha"], inp["power"])
    return dataclasses.asdict(size)


def _sample_size_mcnemar(inp: dict[str, Any]) -> Any:
    power = inp["power"]
    size = planning.sample_size_mcnemar_discordant(inp["psi"], inp["alpha"], power)
    return {
        "crude_raw": size.crude_raw,
        "crude_ceil": size.crude_ceil,
        "normal_alt_variance_raw": size.normal_alt_variance_raw,
        "normal_alt_variance_ceil": size.normal_alt_variance_ceil,
        f"exact_binomial_first_n_with_power_ge_{power}": size.exact_first_n,
        f"exact_binomial_n_with_power_ge_{power}_for_all_larger_n": size.exact_stable_n,
    }


def _interval_parts(interval: stats.Interval | None) -> tuple[Any, Any, Any]:
    if interval is None:
        return None, None, None
    return interval.estimate, interval.low, interval.high


def _by_k(values: dict[int, float | None]) -> dict[str, float | None]:
    return {str(k): v for k, v in values.items()}


def _task_report(inp: dict[str, Any]) -> Any:
    attempts = inp["attempts"]
    summary = stats.summarize_outcomes(
        [a["outcome"] for a in attempts],
        [a["runtime_s"] for a in attempts],
        inp["k_values"],
        inp["z"],
    )
    rate, low, high = _interval_parts(summary.resolved_rate)
    return {
        "attempts_total": summary.attempts_total,
        "valid": summary.valid,
        "resolved": summary.resolved,
        "unresolved": summary.unresolved,
        "invalid": summary.invalid,
        "resolved_rate": rate,
        "wilson_low": low,
        "wilson_high": high,
        "invalid_rate": _interval_parts(summary.invalid_rate)[0],
        "repeat_consistency": summary.repeat_consistency,
        "runtime_mean": summary.runtime.mean,
        "runtime_median": summary.runtime.median,
        "runtime_p95": summary.runtime.p95,
        "pass_at_k": _by_k(summary.pass_at_k),
        "pass_hat_k": _by_k(summary.pass_hat_k),
    }


def _system_aggregate(inp: dict[str, Any]) -> Any:
    agg = stats.system_aggregate(inp["per_task_resolved"], inp["per_task_valid"], inp["z"])
    _, low, high = _interval_parts(agg.naive_pooled_interval)
    return {
        "pooled_resolved_rate": agg.pooled_resolved_rate,
        "wilson_low_pooled": low,
        "wilson_high_pooled": high,
        "task_mean_rate": agg.task_mean_rate,
        "clustered_se_cr1": agg.clustered_se_cr1,
        "expected_flips": agg.expected_flips,
        "pass_at_k_mean_over_tasks": _by_k(agg.pass_at_k),
        "pass_hat_k_mean_over_tasks": _by_k(agg.pass_hat_k),
    }


def _miller(inp: dict[str, Any]) -> Any:
    var_k = planning.repeated_mean_variance(inp["var_x"], inp["mean_sigma2"], inp["K"])
    var_1 = planning.repeated_mean_variance(inp["var_x"], inp["mean_sigma2"], 1)
    return {"n_times_var": var_k, "reduction_vs_K1": 1 - var_k / var_1}


ADAPTERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "wilson_interval": _wilson,
    "repeat_consistency": lambda i: stats.repeat_consistency(i["resolved"], i["unresolved"]),
    "resolved_rate": lambda i: stats.resolved_rate(i["resolved"], i["valid"]),
    "invalid_rate": lambda i: stats.invalid_rate(i["invalid"], i["total"]),
    "binom_cdf": lambda i: planning.binomial_cdf(i["k"], i["n"], i["p"]),
    "binom_pmf": lambda i: planning.binomial_pmf(i["k"], i["n"], i["p"]),
    "one_minus_p_pow_n": lambda i: planning.probability_any_failure(i["p"], i["n"]),
    "pass_closed_form": _pass_closed,
    "pass_at_k_and_pass_hat_k": _pass_k,
    "runtime_summary": _runtime,
    "mcnemar_exact": lambda i: stats.mcnemar_exact(i["gained"], i["lost"]),
    "paired_difference_summary": _paired_summary,
    "sign_test": _sign_test,
    "expected_flips": lambda i: stats.expected_flips(i["rates"]),
    "paired_bootstrap_ci": _bootstrap,
    "clustered_se": _clustered,
    "holm": _holm,
    "sample_size_two_proportions": _sample_size_two,
    "sample_size_mcnemar_discordant": _sample_size_mcnemar,
    "task_system_report": _task_report,
    "system_aggregate": _system_aggregate,
    "miller_mean_variance_times_n": _miller,
}


# --- comparison -------------------------------------------------------------------------


def assert_matches(actual: Any, expected: Any, tol: float, path: str = "result") -> None:
    """Compare field by field; None must be exactly None, numbers within abs tol."""
    if expected is None:
        assert actual is None, f"{path}: expected None, got {actual!r}"
    elif isinstance(expected, bool):
        assert actual is expected, f"{path}: expected {expected}, got {actual!r}"
    elif isinstance(expected, int):
        is_int = isinstance(actual, int) and not isinstance(actual, bool)
        assert is_int, f"{path}: expected an int, got {actual!r}"
        assert actual == expected, f"{path}: expected {expected}, got {actual}"
    elif isinstance(expected, float):
        is_number = isinstance(actual, int | float) and not isinstance(actual, bool)
        assert is_number, f"{path}: expected a number, got {actual!r}"
        assert math.isclose(actual, expected, rel_tol=0.0, abs_tol=tol), (
            f"{path}: expected {expected!r}, got {actual!r} (abs_tol {tol})"
        )
    elif isinstance(expected, dict):
        assert isinstance(actual, dict), f"{path}: expected a dict, got {actual!r}"
        missing = sorted(set(expected) - set(actual))
        assert not missing, f"{path}: no computed value for {missing}"
        for key, value in expected.items():
            assert_matches(actual[key], value, tol, f"{path}.{key}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{path}: {actual!r}"
        for index, (got, want) in enumerate(zip(actual, expected, strict=True)):
            assert_matches(got, want, tol, f"{path}[{index}]")
    else:
        assert actual == expected, f"{path}: expected {expected!r}, got {actual!r}"


def check_bootstrap_ranges(inp: dict[str, Any], expected: dict[str, Any], tol: float) -> None:
    """Check a B = 10 000 interval against the seed-independent ranges of §3/§6."""
    diffs = inp["diffs_B_minus_A"]
    ci = stats.paired_bootstrap_ci(diffs, inp["n_resamples"], confidence=inp["confidence"])
    assert ci is not None
    (low_min, low_max), (high_min, high_max) = expected["low_range"], expected["high_range"]
    assert low_min - tol <= ci[0] <= low_max + tol
    assert high_min - tol <= ci[1] <= high_max + tol
    mean = stats.paired_difference_summary(diffs).mean
    assert mean is not None
    assert (ci[0] <= mean <= ci[1]) is expected["contains_mean"]
    ideal = stats.paired_bootstrap_ci(diffs, 200_000, confidence=inp["confidence"])
    assert ideal is not None
    assert_matches(list(ideal), [expected["ideal_low"], expected["ideal_high"]], tol)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_reference_case(case: dict[str, Any]) -> None:
    adapter = ADAPTERS.get(case["function"])
    if adapter is None:
        pytest.fail(f"no adapter for reference function {case['function']!r}")
    expected, tol = case["expected"], case["abs_tol"]
    if isinstance(expected, dict) and "low_range" in expected:
        check_bootstrap_ranges(case["input"], expected, tol)
    else:
        assert_matches(adapter(case["input"]), expected, tol)


def test_reference_file_shape() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) >= 105
    assert len(set(ids)) == len(ids)


def test_constants_match_reference() -> None:
    constants = REFERENCE["constants"]
    assert constants["z_0.975"] == stats.Z_975
    assert constants["z_0.80"] == stats.Z_80
    assert constants["z_sum"] == stats.Z_975 + stats.Z_80
    assert constants["mdd_multiplier"] == stats.MDD_MULTIPLIER


# --- edge cases and invariants ----------------------------------------------------------


@pytest.mark.parametrize(
    "function",
    [stats.pass_at_k, stats.pass_hat_k],
    ids=["pass_at_k", "pass_hat_k"],
)
@pytest.mark.parametrize("k", [0, -1])
def test_k_below_one_raises(function: Callable[[int, int, int], Any], k: int) -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        function(5, 3, k)
    with pytest.raises(ValueError, match="k must be >= 1"):
        function(0, 0, k)


@pytest.mark.parametrize("function", [stats.pass_at_k_closed, stats.pass_hat_k_closed])
def test_closed_form_k_below_one_raises(function: Callable[[float, int], float]) -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        function(0.5, 0)


def test_inconsistent_counts_raise() -> None:
    with pytest.raises(ValueError):
        stats.wilson_interval(6, 5)
    with pytest.raises(ValueError):
        stats.pass_at_k(5, 6, 1)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.floats(min_value=0, max_value=1e7, allow_nan=False, allow_infinity=False),
        min_size=0,
        max_size=40,
    ),
    data=st.data(),
)
def test_runtime_summary_ignores_input_order(values: list[float], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(values))
    assert stats.runtime_summary(shuffled) == stats.runtime_summary(values)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=60))
def test_p95_equals_numpy_inverted_cdf(values: list[float]) -> None:
    expected = float(np.percentile(values, 95, method="inverted_cdf"))
    assert stats.runtime_summary(values).p95 == expected


@st.composite
def counts_and_k(draw: st.DrawFn) -> tuple[int, int, int]:
    n = draw(st.integers(min_value=1, max_value=80))
    return n, draw(st.integers(min_value=0, max_value=n)), draw(st.integers(1, n))


@settings(max_examples=300, deadline=None)
@given(counts_and_k())
def test_pass_k_equal_combinatorial_forms(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    at_k = float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))
    hat_k = float(Fraction(math.comb(c, k), math.comb(n, k)))
    assert math.isclose(stats.pass_at_k(n, c, k) or 0.0, at_k, rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(stats.pass_hat_k(n, c, k) or 0.0, hat_k, rel_tol=1e-12, abs_tol=1e-300)
    assert stats.pass_at_k(n, c, n + 1) is None
    assert stats.pass_hat_k(n, c, n + 1) is None


def test_bootstrap_same_seed_same_interval() -> None:
    first = stats.paired_bootstrap_ci(EXAMPLE_DIFFS, seed=1234)
    assert first == stats.paired_bootstrap_ci(EXAMPLE_DIFFS, seed=1234)
    assert stats.paired_bootstrap_ci(EXAMPLE_DIFFS) == stats.paired_bootstrap_ci(
        EXAMPLE_DIFFS, seed=stats.DEFAULT_BOOTSTRAP_SEED
    )


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=60), st.data())
def test_wilson_matches_statsmodels(n: int, data: st.DataObject) -> None:
    from statsmodels.stats.proportion import proportion_confint

    x = data.draw(st.integers(min_value=0, max_value=n))
    interval = stats.wilson_interval(x, n)
    if n == 0:
        assert interval is None
        return
    assert interval is not None
    low, high = proportion_confint(x, n, alpha=0.05, method="wilson")
    assert 0.0 <= interval.low <= interval.estimate <= interval.high <= 1.0
    assert math.isclose(interval.low, low, abs_tol=1e-12)
    assert math.isclose(interval.high, high, abs_tol=1e-12)
    if x == 0:
        assert interval.low == 0.0
    if x == n:
        assert interval.high == 1.0


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=40))
def test_mcnemar_matches_scipy_binomtest(gained: int, lost: int) -> None:
    from scipy.stats import binomtest

    expected = 1.0 if gained + lost == 0 else binomtest(gained, gained + lost, 0.5).pvalue
    assert math.isclose(stats.mcnemar_exact(gained, lost), expected, abs_tol=1e-12)


@settings(max_examples=12, deadline=None)  # multipletests costs ~50 ms a call
@given(
    st.lists(st.sampled_from([0.001, 0.01, 0.02, 0.03, 0.2, 0.5, 1.0]), min_size=1, max_size=8),
    st.data(),
)
def test_holm_matches_statsmodels_and_ignores_order(
    pvals: list[float], data: st.DataObject
) -> None:
    from statsmodels.stats.multitest import multipletests

    adjusted, reject = stats.holm(pvals)
    sm_reject, sm_adjusted, _, _ = multipletests(pvals, alpha=0.05, method="holm")
    assert np.allclose(adjusted, sm_adjusted, rtol=0, atol=1e-12)
    assert reject == [bool(r) for r in sm_reject]
    shuffled = data.draw(st.permutations(list(enumerate(pvals))))
    adjusted_shuffled, _ = stats.holm([p for _, p in shuffled])
    for (index, _), value in zip(shuffled, adjusted_shuffled, strict=True):
        assert value == adjusted[index]


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(min_value=0, max_value=1), min_size=1, max_size=6),
        min_size=2,
        max_size=8,
    )
)
def test_clustered_se_matches_statsmodels_cluster_ols(clusters: list[list[int]]) -> None:
    import statsmodels.api as sm

    y = np.array([s for c in clusters for s in c], dtype=float)
    groups = np.array([i for i, c in enumerate(clusters) for _ in c])
    fit = sm.OLS(y, np.ones_like(y)).fit(cov_type="cluster", cov_kwds={"groups": groups})
    se = stats.clustered_se(clusters)
    assert se is not None
    assert math.isclose(se, float(fit.bse[0]), rel_tol=1e-9, abs_tol=1e-12)


def test_summarize_outcomes_maps_terminal_classes_and_counts_missing_runtimes() -> None:
    summary = stats.summarize_outcomes(
        ["resolved", "timeout", "model_failure", "harness_failure", "cancelled"],
        [10.0, None, 30.0, 40.0, None],
        k_values=[1, 3, 4],
    )
    assert (summary.valid, summary.resolved, summary.invalid) == (3, 1, 2)
    assert summary.runtime.count == 3
    assert summary.runtime_missing == 2
    assert summary.pass_at_k[4] is None
    assert summary.pass_hat_k[3] == 0.0


def test_classify_outcome_rejects_unknown_class() -> None:
    with pytest.raises(ValueError, match="unknown outcome 'crashed'"):
        stats.classify_outcome("crashed")


def test_system_aggregate_reports_excluded_tasks() -> None:
    agg = stats.system_aggregate([1, 2, 0], [1, 3, 0])
    assert agg.tasks_with_valid == 2
    assert agg.tasks_excluded == {1: 1, 2: 2, 3: 2}
    assert agg.pass_at_k[3] == 1.0
    assert agg.task_mean_rate == pytest.approx((1.0 + 2 / 3) / 2)


def test_paired_differences_drop_unpaired_tasks() -> None:
    result = stats.paired_differences({"a": 0.5, "b": None, "c": 1.0}, {"a": 1.0, "c": 0.5})
    assert result.task_ids == ("a", "c")
    assert result.diffs == (0.5, -0.5)
    assert result.dropped == 1


def test_clustered_se_from_counts_equals_the_expanded_scores():
    import random

    rng = random.Random(7)
    for _ in range(50):
        counts = []
        for _ in range(rng.randint(2, 12)):
            n = rng.randint(0, 9)
            counts.append((rng.randint(0, n), n))
        clusters = [[1] * r + [0] * (n - r) for r, n in counts]
        assert stats.clustered_se_from_counts(counts) == stats.clustered_se(clusters)
