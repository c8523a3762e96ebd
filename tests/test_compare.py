"""`registry compare`: the decision table on fixtures with known answers (STATISTICS.md §3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import registry
from registry.analysis import stats
from tests.conftest import INPUTS, make_record, write_jsonl

BASE_SYSTEM = "blake3:" + "a" * 64
CAND_SYSTEM = "blake3:" + "b" * 64


def arm_records(experiment, system, outcomes_by_task, agent_version, **input_overrides):
    """Records for one arm: outcomes_by_task maps task id -> list of terminal classes."""
    records = []
    for task, outcomes in outcomes_by_task.items():
        inputs = {**INPUTS, "agent_system_digest": system, **input_overrides}
        for k, outcome in enumerate(outcomes):
            records.append(
                make_record(
                    experiment_id=experiment,
                    task_id=task,
                    repeat_index=k,
                    terminal_class=outcome,
                    inputs=inputs,
                    envelope={
                        "agent": "coder",
                        "agent_version": agent_version,
                        "provider": "p",
                        "model": "m",
                        "harness_version": "h",
                    },
                )
            )
    return records


def load(root: Path, tmp_path: Path, *arms: list[dict]) -> registry.Store:
    records = [r for arm in arms for r in arm]
    registry.ingest(root, [str(write_jsonl(tmp_path / "arms.jsonl", records))])
    return registry.open_store(root)


def run(invoke, *args):
    result = invoke("compare", "--baseline", "experiment=base", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_two_task_flip_on_single_runs_is_no_detectable_difference(invoke, root, tmp_path):
    tasks = [f"task-{i:02d}" for i in range(38)]
    base = {t: ["resolved" if i < 23 else "model_failure"] for i, t in enumerate(tasks)}
    cand = {t: ["resolved" if i < 25 else "model_failure"] for i, t in enumerate(tasks)}
    load(
        root,
        tmp_path,
        arm_records("base", BASE_SYSTEM, base, "1"),
        arm_records("cand", CAND_SYSTEM, cand, "2"),
    )
    (c,) = run(invoke, "--candidate", "experiment=cand")["comparisons"]
    assert c["verdict"]["code"] == "no_detectable_difference"
    assert c["verdict"]["text"].startswith("no detectable difference at 38 tasks, 1 attempts")
    assert (c["mcnemar"]["positive"], c["mcnemar"]["negative"], c["mcnemar"]["p"]) == (2, 0, 0.5)
    assert c["baseline"]["counts"]["resolved"] == 23 and c["candidate"]["counts"]["resolved"] == 25
    assert abs(c["mean_difference"] - 2 / 38) < 1e-12 and c["mdd"] > c["mean_difference"]


def test_broad_real_effect_at_ten_attempts_is_ahead(invoke, root, tmp_path):
    tasks = [f"task-{i:02d}" for i in range(30)]
    base, cand = {}, {}
    for i, t in enumerate(tasks):
        b = 2 + i % 4  # 2..5 of 10
        c = min(10, b + 3 + (i % 2))  # +3 or +4 on every task
        base[t] = ["resolved"] * b + ["model_failure"] * (10 - b)
        cand[t] = ["resolved"] * c + ["timeout"] * (10 - c)
    load(
        root,
        tmp_path,
        arm_records("base", BASE_SYSTEM, base, "1"),
        arm_records("cand", CAND_SYSTEM, cand, "2"),
    )
    (c,) = run(invoke, "--candidate", "experiment=cand", "--seed", "7")["comparisons"]
    assert c["verdict"]["code"] == "ahead"
    assert c["verdict"]["text"].startswith(
        "candidate ahead by 35.0 points, same direction on 30 of 30"
    )
    assert c["bootstrap"]["low"] > 0 and c["bootstrap"]["seed"] == 7
    assert c["attempts_per_task"] == 10 and c["sign_test"]["p"] < 1e-6


def test_infrastructure_failures_clustered_on_losing_tasks_warn(invoke, root, tmp_path):
    tasks = [f"task-{i:02d}" for i in range(20)]
    base, cand = {}, {}
    for i, t in enumerate(tasks):
        base[t] = ["resolved"] * 3 + ["model_failure"] * 2
        # The candidate would lose the last 6 tasks; its harness crashes exactly there.
        cand[t] = ["resolved"] * 4 + ["model_failure"] if i < 14 else ["harness_failure"] * 5
    load(
        root,
        tmp_path,
        arm_records("base", BASE_SYSTEM, base, "1"),
        arm_records("cand", CAND_SYSTEM, cand, "2"),
    )
    (c,) = run(invoke, "--candidate", "experiment=cand")["comparisons"]
    assert c["invalid_independence_p"] < 0.05
    assert any(
        w.startswith("invalid attempts are not independent of the arm") for w in c["warnings"]
    )
    assert any("dropped for lack of valid attempts" in w for w in c["warnings"])
    assert len(c["dropped"]) == 6 and all(
        "no valid attempts in the candidate arm" in d["reason"] for d in c["dropped"]
    )
    table = invoke("compare", "--baseline", "experiment=base", "--candidate", "experiment=cand")
    assert "warning    invalid attempts are not independent of the arm" in table.stdout


def test_pairing_refused_names_the_differing_inputs(invoke, root, tmp_path):
    base = {"t1": ["resolved"], "t2": ["model_failure"]}
    load(
        root,
        tmp_path,
        arm_records("base", BASE_SYSTEM, base, "1"),
        arm_records("cand", CAND_SYSTEM, base, "2", grader_version="grader-2"),
    )
    (c,) = run(invoke, "--candidate", "experiment=cand")["comparisons"]
    assert c["tasks"] == []
    assert [d["differing_inputs"] for d in c["dropped"]] == [["grader_version"], ["grader_version"]]
    assert c["verdict"]["code"] == "too_few_tasks"
    varied = run(invoke, "--candidate", "experiment=cand", "--vary", "grader_version")
    assert varied["comparisons"][0]["dropped"][0]["differing_inputs"] == ["agent_system_digest"]


def test_several_candidates_are_holm_adjusted(invoke, root, tmp_path):
    tasks = [f"t{i}" for i in range(12)]
    base = {t: ["model_failure"] * 2 for t in tasks}
    good = {t: ["resolved"] * 2 if i < 10 else ["model_failure"] * 2 for i, t in enumerate(tasks)}
    meh = {t: ["resolved"] * 2 if i < 3 else ["model_failure"] * 2 for i, t in enumerate(tasks)}
    load(
        root,
        tmp_path,
        arm_records("base", BASE_SYSTEM, base, "1"),
        arm_records("good", CAND_SYSTEM, good, "2"),
        arm_records("meh", "blake3:" + "c" * 64, meh, "3"),
    )
    out = run(invoke, "--candidate", "experiment=good", "--candidate", "experiment=meh")
    raw = [c["sign_test"]["p"] for c in out["comparisons"]]
    adjusted, _ = stats.holm(raw)
    assert [c["sign_test"]["p_holm"] for c in out["comparisons"]] == adjusted
    assert raw == [stats.binomial_two_sided_p(10, 0), stats.binomial_two_sided_p(3, 0)]
    assert adjusted[0] == 2 * raw[0] and adjusted[1] == raw[1]


def test_comparison_is_a_deterministic_layer(invoke, root, tmp_path):
    tasks = {f"t{i}": ["resolved", "model_failure"] for i in range(6)}
    load(
        root,
        tmp_path,
        arm_records("base", BASE_SYSTEM, tasks, "1"),
        arm_records("cand", CAND_SYSTEM, {t: ["resolved"] * 2 for t in tasks}, "2"),
    )
    args = ("compare", "--baseline", "experiment=base", "--candidate", "experiment=cand")
    first = invoke(*args, "--format", "json")
    second = invoke(*args, "--format", "json")
    assert first.stdout == second.stdout and "unchanged evidence" in second.stderr
    layers = registry.list_layers(registry.open_store(root), registry.COMPARISON_LAYER)
    assert len(layers) == 1
    other_seed = invoke(*args, "--format", "json", "--seed", "3")
    assert json.loads(other_seed.stdout)["comparisons"][0]["bootstrap"]["seed"] == 3
    assert len(registry.list_layers(registry.open_store(root), registry.COMPARISON_LAYER)) == 2


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_other_formats_render(fmt, invoke, root, tmp_path):
    tasks = {f"t{i}": ["resolved", "model_failure"] for i in range(4)}
    load(
        root,
        tmp_path,
        arm_records("base", BASE_SYSTEM, tasks, "1"),
        arm_records("cand", CAND_SYSTEM, {t: ["resolved"] * 2 for t in tasks}, "2"),
    )
    result = invoke(
        "compare",
        "--baseline",
        "experiment=base",
        "--candidate",
        "experiment=cand",
        "--format",
        fmt,
    )
    assert result.exit_code == 0, result.output
    assert "t3" in result.stdout
    if fmt == "html":
        assert '<svg class="diff-plot"' in result.stdout


def test_selector_errors_are_one_line(invoke, root, tmp_path):
    load(root, tmp_path, arm_records("base", BASE_SYSTEM, {"t": ["resolved"]}, "1"))
    result = invoke("compare", "--baseline", "experiment=base", "--candidate", "experiment=nope")
    assert result.exit_code == 1
    assert (
        result.stderr
        == "Error: candidate selector 'experiment=nope' selects no attempts in scope\n"
    )
    result = invoke("compare", "--baseline", "exp=base", "--candidate", "experiment=base")
    assert result.stderr.startswith("Error: selector 'exp=base': unknown key 'exp'; keys:")
    result = invoke("compare", "--baseline", "experiment=base", "--candidate", "agent=coder")
    assert "both select 1 attempts; make the arms disjoint" in result.stderr


def test_a_task_is_never_counted_twice(invoke, root, tmp_path):
    base = {f"t{i}": ["model_failure"] * 2 for i in range(3)}
    cand = {f"t{i}": ["resolved"] * 2 for i in range(3)}
    arms = []
    for grader in ("g1", "g2"):  # both arms ran every task under two graders
        arms.append(arm_records("base", BASE_SYSTEM, base, "1", grader_version=grader))
        arms.append(arm_records("cand", CAND_SYSTEM, cand, "2", grader_version=grader))
    load(root, tmp_path, *arms)
    (c,) = run(invoke, "--candidate", "experiment=cand")["comparisons"]
    assert c["tasks"] == [] and c["verdict"]["code"] == "too_few_tasks"
    assert [d["reason"].split(":")[0] for d in c["dropped"]] == ["ambiguous"] * 3
    assert [d["differing_inputs"] for d in c["dropped"]] == [["grader_version"]] * 3


BASELINE_SONNET = "agent_version=2.3.0,model=claude-sonnet-4,provider=anthropic"


def test_arm_counts_cover_only_the_compared_cohorts(invoke, loaded_root):
    result = invoke(
        "compare",
        "--baseline",
        BASELINE_SONNET,
        "--candidate",
        "agent_version=2.4.0-context-policy",
        "--format",
        "json",
    )
    (c,) = json.loads(result.stdout)["comparisons"]
    paired_attempts = sum(t["baseline"]["attempts"] for t in c["tasks"])
    dropped_valid = [d for d in c["dropped"] if d["reason"].startswith("no valid")]
    assert not dropped_valid and c["baseline"]["counts"]["attempts"] == paired_attempts
    assert c["excluded_attempts"]["baseline"] == 10  # the regraded generation is not pooled
    assert "exp-baseline-1102-regrade" not in c["baseline"]["experiments"]


def test_every_layer_kind_is_listed_and_shown(invoke, loaded_root):
    args = (
        "--baseline",
        BASELINE_SONNET,
        "--candidate",
        "agent_version=2.4.0-context-policy",
    )
    assert invoke("compare", *args).exit_code == 0
    assert invoke("summary").exit_code == 0
    assert (
        invoke(
            "noise",
            "--system",
            BASELINE_SONNET + ",grader_version=grader-1.0",
            "--simulations",
            "2000",
        ).exit_code
        == 0
    )
    assert invoke("report", "--task", "django__django-11099").exit_code == 0
    listing = json.loads(invoke("reports", "--format", "json").stdout)
    assert [r["kind"] for r in listing] == ["report", "noise", "summary", "comparison"]
    only = json.loads(invoke("reports", "--kind", "comparison", "--format", "json").stdout)
    assert [r["kind"] for r in only] == ["comparison"]
    shown = invoke("reports", "show", only[0]["digest"], "--format", "table")
    assert shown.exit_code == 0 and shown.stdout.startswith("Comparison against " + BASELINE_SONNET)
    summary = next(r for r in listing if r["kind"] == "summary")
    shown = invoke("reports", "show", summary["digest"], "--format", "html")
    assert shown.exit_code == 0 and shown.stdout.startswith("<!DOCTYPE html>")


def _paired(differences, k=5):
    from registry_schemas import ArmCounts, PairedTask

    tasks = []
    for i, d in enumerate(differences):
        base = 0.5 if 0 <= 0.5 + d <= 1 else 0.0
        counts = ArmCounts(attempts=k, valid=k, invalid=0, resolved=0)
        tasks.append(
            PairedTask(
                task_id=f"t{i}",
                baseline=counts,
                candidate=counts,
                rate_baseline=base,
                rate_candidate=base + d,
                difference=d,
            )
        )
    return tasks


def _sign(diffs, p_holm):
    from registry_schemas import ExactTest

    pos, neg = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    return ExactTest(
        positive=pos, negative=neg, ties=len(diffs) - pos - neg, p=p_holm, p_holm=p_holm
    )


def test_bootstrap_clearing_zero_under_no_difference_is_explained():
    from registry.analysis.compare import decide

    diffs = [0.2, 0.2, 0.0, 0.2, -0.2, 0.2, 0.0, 0.2]
    verdict = decide(_paired(diffs), 0.1, 0.2, _sign(diffs, 0.2), 5, (0.02, 0.18))
    assert verdict.code == "no_detectable_difference"
    assert any("bootstrap interval [+2.0, +18.0] excludes zero" in n for n in verdict.notes)


def test_no_difference_at_all_is_never_a_heavy_task_verdict():
    from registry.analysis.compare import decide

    diffs = [0.0] * 6
    verdict = decide(_paired(diffs), 0.0, 0.0, _sign(diffs, 1.0), 5, (0.0, 0.0))
    assert verdict.code == "no_detectable_difference"
    assert any("SE = 0" in n for n in verdict.notes)
