"""`registry regressions` on a harness upgrade with a planted regression and improvement."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import registry
from registry.analysis.regressions import find_regressions
from tests.conftest import FIXTURES, make_record, write_jsonl

HERE = FIXTURES / "regressions"
TASKS = ["t-drop", "t-gain", "t-steady-high", "t-steady-low", "t-steady-mid", "t-steady-zero"]


def _ingest(root: Path, *names: str) -> None:
    for name in names:
        registry.ingest(root, [str(HERE / name)])


def _directions(payload: dict) -> dict[str, str]:
    return {e["task_id"]: e["direction"] for e in payload["examined"]}


def test_committed_fixture_is_what_the_generator_writes():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "generate_regressions", FIXTURES / "generate_regressions.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, records in module.generate().items():
        lines = [json.dumps(r, sort_keys=True) for r in records]
        assert (HERE / name).read_text() == "\n".join(lines) + "\n", name


@pytest.mark.parametrize("since", [None, "1"])
def test_planted_regression_is_named_and_fails(invoke, root, since):
    _ingest(root, "before.jsonl", "after.jsonl")
    extra = ["--since", since] if since else []
    result = invoke("regressions", *extra, "--format", "json")
    assert result.exit_code == 1, result.output
    payload = json.loads(result.stdout)
    directions = _directions(payload)
    assert sorted(directions) == TASKS
    assert [t for t, d in directions.items() if d == "down"] == ["t-drop"]
    assert [t for t, d in directions.items() if d == "up"] == ["t-gain"]
    assert payload["counts"] == {"down": 1, "up": 1, "steady": 4, "not_examined": 0}
    assert payload["mode"] == ("since" if since else "generations")


def test_without_the_planted_drop_it_passes(invoke, root):
    _ingest(root, "before.jsonl", "after-no-drop.jsonl")
    for extra in ([], ["--since", "1"]):
        result = invoke("regressions", *extra, "--format", "json")
        assert result.exit_code == 0, result.output
        directions = _directions(json.loads(result.stdout))
        assert directions["t-gain"] == "up"
        assert directions["t-drop"] == "steady"
        assert "down" not in directions.values()


def test_json_has_fisher_and_holm_p_values_and_the_change(invoke, root):
    _ingest(root, "before.jsonl", "after.jsonl")
    payload = json.loads(invoke("regressions", "--format", "json").stdout)
    assert payload["schema"] == "registry.regressions/1"
    assert payload["adjustment"] == "Holm-adjusted across 6 tasks"
    assert payload["comparisons"] == 6
    drop = next(e for e in payload["examined"] if e["task_id"] == "t-drop")
    # Fisher exact, two-sided, for [[10, 0], [1, 9]]: 2 * C(11,1)C(9,9)/C(20,10)
    assert drop["p"] == pytest.approx(0.00011907, rel=1e-4)
    assert drop["p_holm"] == pytest.approx(6 * drop["p"])  # the smallest of six ties
    steady = next(e for e in payload["examined"] if e["task_id"] == "t-steady-mid")
    assert steady["p"] == pytest.approx(1.0) and steady["p_holm"] == pytest.approx(1.0)
    before, after = drop["before"], drop["after"]
    assert (before["resolved"], before["valid"], after["resolved"], after["valid"]) == (
        10,
        10,
        1,
        10,
    )
    assert after["resolved_rate"]["high"] < before["resolved_rate"]["low"]
    assert (before["generation"], after["generation"]) == (1, 2)
    assert after["system_label"] == "coder 3.1.0 anthropic/claude-sonnet-4 harness 1.5.0"
    changed = {(c["kind"], c["field"]): (c["before"], c["after"]) for c in drop["changes"]}
    assert changed == {
        ("input", "harness_package"): ("tbench-harness==1.4.0", "tbench-harness==1.5.0"),
        ("system", "harness_version"): ("1.4.0", "1.5.0"),
    }


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_human_formats_show_counts_intervals_and_holm_note(invoke, root, fmt):
    _ingest(root, "before.jsonl", "after.jsonl")
    result = invoke("regressions", "--format", fmt)
    assert result.exit_code == 1
    text = result.stdout
    assert "10/10 → 1/10" in text and "1/10 → 10/10" in text
    assert "Holm-adjusted across 6 tasks" in text
    assert "[72.2, 100.0]" in text and "[1.8, 40.4]" in text
    assert "harness_package tbench-harness==1.4.0 → tbench-harness==1.5.0" in text


def test_a_task_with_one_sample_is_not_examined(invoke, root, tmp_path):
    _ingest(root, "before.jsonl", "after.jsonl")
    once = [
        make_record(task_id="t-once", repeat_index=k, experiment_id="exp-once") for k in range(3)
    ]
    registry.ingest(root, [str(write_jsonl(tmp_path / "once.jsonl", once))])
    payload = json.loads(invoke("regressions", "--format", "json").stdout)
    (skipped,) = payload["not_examined"]
    assert skipped["task_id"] == "t-once" and skipped["samples"] == 1
    assert "1 sample" in skipped["reason"]
    assert payload["comparisons"] == 6  # the adjustment spans only the tasks compared
    table = invoke("regressions").stdout
    assert "not examined:" in table and "t-once" in table


def test_a_sample_without_valid_attempts_is_not_examined(root, tmp_path):
    _ingest(root, "before.jsonl")
    lines = (HERE / "after.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:
        if record["task_id"] == "t-steady-mid":
            record["terminal_class"] = "environment_failure"
            record.pop("terminal_identity")
    registry.ingest(root, [str(write_jsonl(tmp_path / "after.jsonl", records))])
    report = find_regressions(registry.open_store(root))
    (skipped,) = report.not_examined
    assert skipped.task_id == "t-steady-mid" and "no valid attempt" in skipped.reason
    assert report.comparisons == 5 and report.adjustment == "Holm-adjusted across 5 tasks"


def test_since_a_date_before_any_commit_examines_nothing(invoke, root):
    _ingest(root, "before.jsonl", "after.jsonl")
    result = invoke("regressions", "--since", "2000-01-01", "--format", "json")
    assert result.exit_code == 0
    payload = json.loads(result.stdout)
    assert payload["since_commit_seq"] == 0 and payload["examined"] == []
    assert {n["reason"] for n in payload["not_examined"]} == {
        "no sample committed at or before commit 0"
    }


def test_as_of_the_first_commit_has_nothing_to_compare(invoke, root):
    _ingest(root, "before.jsonl", "after.jsonl")
    result = invoke("regressions", "--as-of", "1", "--format", "json")
    assert result.exit_code == 0
    assert json.loads(result.stdout)["counts"]["not_examined"] == 6


def test_task_and_track_restrict_the_comparison(invoke, root):
    _ingest(root, "before.jsonl", "after.jsonl")
    result = invoke("regressions", "--task", "t-gain", "--format", "json")
    assert result.exit_code == 0  # the improvement alone is no regression
    payload = json.loads(result.stdout)
    assert _directions(payload) == {"t-gain": "up"}
    assert payload["adjustment"] == "Holm-adjusted across 1 task"
    tracked = invoke("regressions", "--track", "agent=coder", "--format", "json")
    assert tracked.exit_code == 1
    assert json.loads(tracked.stdout)["tracks"] == ["agent=coder"]
    one_side = json.loads(
        invoke("regressions", "--track", "harness_version=1.5.0", "--format", "json").stdout
    )
    assert one_side["comparisons"] == 0 and one_side["counts"]["not_examined"] == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "9"], "Error: --since 9: the ledger holds commits 1..2"),
        (["--since", "soon"], "Error: --since 'soon': expected a commit sequence number"),
        (["--track", "model=nope"], "Error: --track 'model=nope' matches no attempt"),
        (["--alpha", "1.5"], "Error: --alpha 1.5: expected a number between 0 and 1"),
    ],
)
def test_bad_arguments_are_one_line_errors(invoke, root, args, message):
    _ingest(root, "before.jsonl", "after.jsonl")
    result = invoke("regressions", *args)
    assert result.exit_code == 1
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1


def test_counts_agree_with_the_samples_view(root):
    _ingest(root, "before.jsonl", "after.jsonl")
    store = registry.open_store(root)
    report = find_regressions(store)
    con = registry.connect(store)
    try:
        rows = registry.evidence.query.fetch(
            con, "SELECT cohort_key, resolved, valid, generation FROM samples"
        ).rows
    finally:
        con.close()
    view = {key: (resolved, valid, gen) for key, resolved, valid, gen in rows}
    for e in report.examined:
        for s in (e.before, e.after):
            assert view[s.cohort_key] == (s.resolved, s.valid, s.generation)


def test_control_characters_in_values_stay_inert(invoke, root, tmp_path):
    records = []
    for k in range(4):
        for version, outcome in (("h\x1b[31m", "resolved"), ("h-2\u202e", "model_failure")):
            envelope = {**make_record()["envelope"], "harness_version": version}
            records.append(
                make_record(
                    task_id="t-ctl",
                    repeat_index=k,
                    envelope=envelope,
                    terminal_class=outcome,
                    experiment_id=f"exp-{version[-1] == 'm'}",
                )
            )
    registry.ingest(root, [str(write_jsonl(tmp_path / "ctl.jsonl", records[::2]))])
    registry.ingest(root, [str(write_jsonl(tmp_path / "ctl2.jsonl", records[1::2]))])
    for fmt in ("table", "markdown"):
        text = invoke("regressions", "--format", fmt).stdout
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert "\\x1b" in text


def test_a_regrade_is_compared_with_what_it_regraded(root, tmp_path):
    from registry import attempt_id_of, cohort_key_of, terminal_identity_of
    from registry_schemas import AttemptRecord

    _ingest(root, "before.jsonl")
    originals = [
        json.loads(line)
        for line in (HERE / "before.jsonl").read_text().splitlines()
        if json.loads(line)["task_id"] == "t-drop"
    ]
    regrades = []
    for original in originals:  # a stricter grader fails every attempt it had passed
        again = json.loads(json.dumps(original))
        again["inputs"]["grader_version"] = "grader-2.1"
        again["terminal_class"] = "model_failure"
        again["experiment_id"] = "exp-regrade"
        again["derived_from"] = attempt_id_of(
            AttemptRecord.model_validate_json(json.dumps(original)).model_dump(mode="json")
        )
        again["terminal_identity"] = terminal_identity_of(
            again, cohort_key_of(again["task_id"], again["inputs"])
        )
        regrades.append(again)
    registry.ingest(root, [str(write_jsonl(tmp_path / "regrade.jsonl", regrades))])
    report = find_regressions(registry.open_store(root))
    (drop,) = report.examined
    assert (drop.task_id, drop.direction) == ("t-drop", "down")
    assert (drop.before.lineage_depth, drop.after.lineage_depth) == (0, 1)
    assert [(c.kind, c.field) for c in drop.changes] == [("input", "grader_version")]
    assert report.counts.not_examined == 5  # the other tasks have one sample each
