"""Gates and time travel from the command line: --fail-on, --as-of, retractions everywhere."""

from __future__ import annotations

import json
import random

from tests.conftest import INPUTS, make_record, tree_snapshot, write_jsonl

SYSTEM_A = "blake3:" + "a" * 64
SYSTEM_B = "blake3:" + "b" * 64


def _arm(experiment: str, system: str, rates: list[float], seed: int, k: int = 5) -> list[dict]:
    rng = random.Random(seed)
    records = []
    for t, rate in enumerate(rates):
        for i in range(k):
            resolved = rng.random() < rate
            records.append(
                make_record(
                    experiment_id=experiment,
                    task_id=f"task-{t:02d}",
                    repeat_index=i,
                    inputs={**INPUTS, "agent_system_digest": system},
                    terminal_class="resolved" if resolved else "model_failure",
                )
            )
    return records


def test_fail_on_behind_gates_a_planted_regression(invoke, tmp_path):
    base = _arm("base", SYSTEM_A, [0.8] * 30, seed=1)
    cand = _arm("cand", SYSTEM_B, [0.5] * 30, seed=2)
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", base + cand)))
    args = ("compare", "--baseline", "experiment=base", "--candidate", "experiment=cand")
    assert invoke(*args).exit_code == 0  # without a gate the verdict is only printed
    gated = invoke(*args, "--fail-on", "behind", "--format", "json")
    assert gated.exit_code == 1
    (c,) = json.loads(gated.stdout)["comparisons"]
    assert c["verdict"]["code"] == "behind"
    assert "failing (--fail-on behind): experiment=cand: candidate behind" in gated.stderr
    assert invoke(*args, "--fail-on", "different").exit_code == 1


def test_fail_on_passes_an_a_a_comparison(invoke, tmp_path):
    first = _arm("run-1", SYSTEM_A, [0.6] * 30, seed=3)
    second = _arm("run-2", SYSTEM_A, [0.6] * 30, seed=4)
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", first + second)))
    result = invoke(
        "compare",
        "--baseline",
        "experiment=run-1",
        "--candidate",
        "experiment=run-2",
        "--fail-on",
        "different",
        "--format",
        "json",
    )
    assert result.exit_code == 0, result.output
    (c,) = json.loads(result.stdout)["comparisons"]
    assert c["verdict"]["code"] not in ("ahead", "behind")


def test_saturation_never_overrides_a_detected_difference(invoke, tmp_path):
    rates_a = [0.0] * 20 + [1.0] * 20 + [0.2] * 40
    rates_b = [0.0] * 20 + [1.0] * 20 + [0.8] * 40
    base = _arm("base", SYSTEM_A, rates_a, seed=5)
    cand = _arm("cand", SYSTEM_B, rates_b, seed=6)
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", base + cand)))
    result = invoke(
        "compare", "--baseline", "experiment=base", "--candidate", "experiment=cand",
        "--format", "json",
    )  # fmt: skip
    (c,) = json.loads(result.stdout)["comparisons"]
    assert c["verdict"]["code"] == "ahead"
    assert "saturated" not in c["verdict"]["flags"] or c["verdict"]["text"].startswith(
        "candidate ahead"
    )


def test_single_run_comparison_is_flagged_and_equal_moves_explained(invoke, tmp_path):
    base = _arm("base", SYSTEM_A, [0.0] * 6, seed=7, k=1)
    cand = _arm("cand", SYSTEM_B, [1.0] * 6, seed=8, k=1)
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", base + cand)))
    result = invoke(
        "compare", "--baseline", "experiment=base", "--candidate", "experiment=cand",
        "--format", "json",
    )  # fmt: skip
    (c,) = json.loads(result.stdout)["comparisons"]
    verdict = c["verdict"]
    assert c["attempts_per_task"] == 1 and "single_run" in verdict["flags"]
    assert "single-run comparison: cannot separate noise from effect" in verdict["notes"]
    assert any("SE = 0, so MDD = 0" in note for note in verdict["notes"])
    table = invoke("compare", "--baseline", "experiment=base", "--candidate", "experiment=cand")
    assert "single-run comparison: cannot separate noise from effect" in table.stdout


def test_attempts_per_task_is_null_when_nothing_pairs(invoke, tmp_path):
    base = [make_record(experiment_id="base", task_id="only-a")]
    cand = [
        make_record(
            experiment_id="cand",
            task_id="only-b",
            inputs={**INPUTS, "agent_system_digest": SYSTEM_B},
        )
    ]
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", base + cand)))
    result = invoke(
        "compare", "--baseline", "experiment=base", "--candidate", "experiment=cand",
        "--format", "json",
    )  # fmt: skip
    (c,) = json.loads(result.stdout)["comparisons"]
    assert c["attempts_per_task"] is None and c["verdict"]["code"] == "too_few_tasks"


def test_as_of_reproduces_the_stored_layer_from_the_cli(invoke, root, tmp_path):
    invoke("ingest", str(write_jsonl(tmp_path / "a.jsonl", [make_record()])))
    first = invoke("report", "--task", "task-1", "--format", "json")
    layer = first.stderr.split()[1]
    invoke("ingest", str(write_jsonl(tmp_path / "b.jsonl", [make_record(repeat_index=1)])))
    assert invoke("report", "--task", "task-1", "--format", "json").stdout != first.stdout
    before = tree_snapshot(root)
    old = invoke("report", "--task", "task-1", "--format", "json", "--as-of", "1")
    assert old.exit_code == 0 and old.stdout == first.stdout
    assert old.stderr == f"report {layer} (as of 1; not recorded as a layer)\n"
    assert tree_snapshot(root) == before  # time travel writes nothing
    count = invoke("sql", "SELECT count(*) AS n FROM attempts", "--as-of", "1", "--format", "json")
    assert json.loads(count.stdout) == [{"n": 1}]
    bad = invoke("report", "--task", "task-1", "--as-of", "yesterday")
    assert bad.exit_code == 1 and bad.stderr.startswith("Error: --as-of 'yesterday': expected")


def test_a_retracted_import_leaves_every_view_and_command(invoke, root, tmp_path):
    keep = [make_record(experiment_id="good", repeat_index=i) for i in range(3)]
    bad = [
        make_record(experiment_id="bad", repeat_index=i, terminal_class="model_failure")
        for i in range(3)
    ]
    invoke("ingest", str(write_jsonl(tmp_path / "good.jsonl", keep)))
    invoke("ingest", str(write_jsonl(tmp_path / "bad.jsonl", bad)))
    retracted = invoke("retract", "--commit", "2", "--reason", "wrong model configured")
    assert retracted.exit_code == 0, retracted.output
    report = json.loads(invoke("report", "--task", "task-1", "--format", "json").stdout)
    (system,) = report["cohorts"][0]["systems"]
    assert (system["attempts"], system["resolved"]) == (3, 3)
    assert report["held_out"]["retracted"] == 3
    provenance = {p["experiment_id"]: p for p in system["provenance"]}
    assert provenance["bad"]["attempts"] == 0 and provenance["bad"]["retracted"] == 3
    sql = invoke("sql", "SELECT count(*) AS n FROM attempts", "--format", "json")
    assert json.loads(sql.stdout) == [{"n": 3}]
    views = invoke("sql", "SELECT count(*) AS n FROM retractions", "--format", "json")
    assert json.loads(views.stdout) == [{"n": 3}]
    summary = json.loads(invoke("summary", "--format", "json").stdout)
    assert [s["attempts"] for s in summary["systems"]] == [3]
    everything = invoke("sql", "SELECT count(*) AS n FROM attempts", "--include-retracted",
                        "--format", "json")  # fmt: skip
    assert json.loads(everything.stdout) == [{"n": 6}]
    assert invoke("verify").exit_code == 0
    again = invoke("ingest", str(tmp_path / "bad.jsonl"), "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["new"] == 0
    assert "they stay retracted" in again.stderr
    sql = invoke("sql", "SELECT count(*) AS n FROM attempts", "--format", "json")
    assert json.loads(sql.stdout) == [{"n": 3}]
