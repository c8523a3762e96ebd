"""`registry summary` and `registry noise` on fixtures with known answers (STATISTICS.md §2)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import registry
from tests.conftest import QUICKSTART, make_record, write_jsonl
from tests.test_compare import BASE_SYSTEM, arm_records

REFERENCE = {
    c["id"]: c
    for c in json.loads(
        (
            __import__("pathlib").Path(__file__).parent / "data" / "statistics-reference.json"
        ).read_text()
    )["cases"]
}


def test_summary_reproduces_the_system_aggregate_reference(invoke, root, tmp_path):
    case = REFERENCE["system-aggregate-A"]
    resolved, valid = case["input"]["per_task_resolved"], case["input"]["per_task_valid"]
    outcomes = {
        f"t{i}": ["resolved"] * r + ["model_failure"] * (v - r)
        for i, (r, v) in enumerate(zip(resolved, valid, strict=True))
    }
    outcomes["t0"] = outcomes["t0"] + ["harness_failure"]  # invalid: counted, not in rates
    records = arm_records("exp", BASE_SYSTEM, outcomes, "1")
    registry.ingest(root, [str(write_jsonl(tmp_path / "x.jsonl", records))])
    result = invoke("summary", "--experiment", "exp", "--format", "json")
    assert result.exit_code == 0, result.output
    (s,) = json.loads(result.stdout)["systems"]
    want, tol = case["expected"], case["abs_tol"]
    assert abs(s["pooled_resolved_rate"]["estimate"] - want["pooled_resolved_rate"]) <= tol
    assert abs(s["pooled_resolved_rate"]["low"] - want["wilson_low_pooled"]) <= tol
    assert abs(s["pooled_resolved_rate"]["high"] - want["wilson_high_pooled"]) <= tol
    assert abs(s["task_mean_resolved_rate"] - want["task_mean_rate"]) <= tol
    assert abs(s["clustered_se"] - want["clustered_se_cr1"]) <= tol
    assert abs(s["expected_flips"] - want["expected_flips"]) <= tol
    for k, value in want["pass_at_k_mean_over_tasks"].items():
        assert abs(s["pass_at_k"][k]["mean"] - value) <= tol
    for k, value in want["pass_hat_k_mean_over_tasks"].items():
        assert abs(s["pass_hat_k"][k]["mean"] - value) <= tol
    assert (s["tasks"], s["attempts"], s["valid"], s["invalid"]) == (10, 51, 50, 1)
    assert s["pass_at_k"]["5"] == {"mean": s["pass_at_k"]["5"]["mean"], "tasks": 10, "excluded": 0}
    low, high = s["clustered_interval"]["low"], s["clustered_interval"]["high"]
    assert abs((high - low) / 2 - 1.959963984540054 * want["clustered_se_cr1"]) <= 1e-9
    table = invoke("summary", "--experiment", "exp").stdout
    assert "pooled resolved rate (attempt-weighted) 29/50 58.0%" in table
    assert "task-mean resolved rate (unweighted over tasks) 58.0%" in table


def test_summary_keeps_configurations_and_systems_apart(loaded_root):
    summary = registry.summarize(registry.open_store(loaded_root))
    keys = {
        (s.configuration["grader_version"], s.system["model"], s.system["provider"])
        for s in summary.systems
    }
    assert ("grader-1.1", "claude-sonnet-4", "anthropic") in keys  # the regrade stands apart
    assert ("grader-1.0", "claude-sonnet-4", "unobserved") in keys  # legacy evidence
    assert ("grader-1.0", "claude-sonnet-4-1", "anthropic") in keys  # the swapped model
    assert sum(s.attempts for s in summary.systems) == summary.snapshot["attempts"] == 112


def test_summary_unbalanced_tasks_pooled_differs_from_task_mean(root, tmp_path):
    outcomes = {
        "a": ["resolved"] * 9 + ["model_failure"],
        "b": ["model_failure", "resolved"],
        "c": ["model_failure"] * 2,
    }
    registry.ingest(
        root, [str(write_jsonl(tmp_path / "x.jsonl", arm_records("e", BASE_SYSTEM, outcomes, "1")))]
    )
    (s,) = registry.summarize(registry.open_store(root)).systems
    assert s.pooled_resolved_rate.estimate == 10 / 14
    assert abs(s.task_mean_resolved_rate - (0.9 + 0.5 + 0.0) / 3) < 1e-12


# --- noise -----------------------------------------------------------------------------------

COUNTS = [10, 9, 9, 8, 7, 7, 6, 5, 5, 5, 4, 3, 3, 2, 1, 0, 10, 8, 6, 4]  # resolved of 10


@pytest.fixture
def noise_root(root, tmp_path):
    outcomes = {
        f"t{i:02d}": ["resolved"] * c + ["model_failure"] * (10 - c) for i, c in enumerate(COUNTS)
    }
    records = arm_records("exp", BASE_SYSTEM, outcomes, "1")
    records.append(
        make_record(
            task_id="t00",
            repeat_index=99,
            terminal_class="cancelled",
            experiment_id="exp",
            inputs=records[0]["inputs"],
            envelope=records[0]["envelope"],
        )
    )
    registry.ingest(root, [str(write_jsonl(tmp_path / "x.jsonl", records))])
    return root


def _exact_tail(p: list[float], moves: int) -> float:
    """P(|Σ (x1_t − x2_t)| >= moves) by exact convolution (an independent method)."""
    dist = np.array([1.0])
    for q in (pt * (1 - pt) for pt in p):
        dist = np.convolve(dist, [q, 1 - 2 * q, q])
    offset = (dist.size - 1) // 2
    values = np.arange(dist.size) - offset
    return float(dist[np.abs(values) >= moves].sum())


def test_noise_reproduces_expected_flips_and_simulated_tails(invoke, noise_root):
    result = invoke("noise", "--system", "experiment=exp", "--format", "json", "--seed", "11")
    assert result.exit_code == 0, result.output
    floor = json.loads(result.stdout)
    p = [c / 10 for c in COUNTS]
    assert floor["expected_flips"] == math.fsum(2 * x * (1 - x) for x in p)
    assert floor["tasks"] == 20 and floor["seed"] == 11
    rng = np.random.default_rng(2024)  # an independent simulation, other seed and method
    runs = rng.binomial(1, np.tile(p, (200_000, 1))).sum(axis=1) - rng.binomial(
        1, np.tile(p, (200_000, 1))
    ).sum(axis=1)
    for moves in (2, 5):
        independent = float(np.mean(np.abs(runs) >= moves))
        got = floor["p_move_at_least"][str(moves)]
        assert abs(got - independent) <= 0.01
        assert abs(got - _exact_tail(p, moves)) <= 0.01
    mdd5 = 2.8 * math.sqrt(sum(2 * x * (1 - x) / 5 for x in p)) / 20
    assert abs(floor["mdd_by_attempts"]["5"] - mdd5) < 1e-12
    table = invoke("noise", "--system", "experiment=exp", "--seed", "11").stdout
    assert f"{floor['expected_flips']:.3f} tasks" in table


def test_noise_is_deterministic_for_a_seed(noise_root):
    store = registry.open_store(noise_root)
    selector = registry.parse_selector("experiment=exp")
    a = registry.noise_floor(store, selector, seed=5, simulations=20_000)
    b = registry.noise_floor(store, selector, seed=5, simulations=20_000)
    assert a == b
    layer, created = registry.record_noise(store, a)
    again, created_again = registry.record_noise(store, b)
    assert created and not created_again and layer.digest == again.digest


def test_noise_unknown_system(invoke, noise_root):
    result = invoke("noise", "--system", "model=nope")
    assert result.exit_code == 1
    assert result.stderr == "Error: 'model=nope' has no task with a valid attempt in scope\n"


def test_summary_on_the_quickstart(invoke, loaded_root):
    result = invoke("summary", "--system", "agent_version=2.4.0-context-policy")
    assert result.exit_code == 0, result.output
    assert "coder 2.4.0-context-policy" in result.stdout and QUICKSTART.exists()


def test_summary_is_a_deterministic_layer(invoke, loaded_root):
    first = invoke("summary", "--format", "json")
    second = invoke("summary", "--format", "json")
    assert first.exit_code == 0 and first.stdout == second.stdout
    assert "(new," in first.stderr and "unchanged evidence" in second.stderr
    store = registry.open_store(loaded_root)
    assert len(registry.list_layers(store, "summary")) == 1
