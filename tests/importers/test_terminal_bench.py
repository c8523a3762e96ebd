"""`--format terminal-bench`: run folders written by `tb run` (run-level list, trial folders)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from registry.importers import ImportContext
from registry.importers.terminal_bench import (
    CLASS_BY_FAILURE_MODE,
    FAILURE_MODES,
    IMPORTER,
    _repeat_index,
    classify,
)
from registry.storage.digest import digest_json
from registry_schemas import AttemptRecord
from tests.conftest import FIXTURES, tree_snapshot

HERE = FIXTURES / "importers" / "terminal-bench"
RUNS = HERE / "runs"
RUN_A = "2025-07-01__10-00-00"
RUN_B = "2025-07-02__09-30-00"
MODEL_A = "claude-sonnet-4-20250514"
MODEL_B = "gpt-4.1"
UNKNOWN_INPUTS = (
    "case_digest, environment_digest, grader_version, prompt_digest, source_digest,"
    " tool_policy_digest"
)

# (run, task, repeat index) -> (terminal class, failure_mode, is_resolved), as the fixture says.
EXPECTED = {
    (RUN_A, "hello-world", 0): ("resolved", "unset", "true"),
    (RUN_A, "hello-world", 1): ("resolved", "agent_timeout", "true"),
    (RUN_A, "fix-permissions", 0): ("timeout", "agent_timeout", "false"),
    (RUN_A, "fix-permissions", 1): ("model_failure", "unset", "false"),
    (RUN_A, "count-lines", 0): ("grader_failure", "parse_error", "null"),
    (RUN_A, "count-lines", 1): ("model_failure", "context_length_exceeded", "false"),
    (RUN_A, "sqlite-repair", 0): ("grader_failure", "test_timeout", "null"),
    (RUN_A, "sqlite-repair", 1): ("model_failure", "fatal_llm_parse_error", "false"),
    (RUN_A, "csv-report", 0): ("model_failure", "none", "false"),
    (RUN_A, "csv-report", 1): ("resolved", "unset", "true"),
    (RUN_B, "hello-world", 0): ("resolved", "unset", "true"),
    (RUN_B, "hello-world", 1): ("harness_failure", "unknown_agent_error", "null"),
    (RUN_B, "fix-permissions", 0): ("environment_failure", "agent_installation_failed", "false"),
    (RUN_B, "fix-permissions", 1): ("harness_failure", "unset", "null"),
    (RUN_B, "count-lines", 0): ("model_failure", "output_length_exceeded", "false"),
    (RUN_B, "count-lines", 1): ("harness_failure", "unknown", "null"),
    (RUN_B, "csv-report", 0): ("harness_failure", "unknown_agent_error", "false"),
    (RUN_B, "sqlite-repair", 0): ("resolved", "unset", "true"),  # from its trial folder only
}


def _ingest(invoke, *paths: Path | str, fmt: str | None = "terminal-bench", extra=()):
    args = ["ingest", *map(str, paths), *extra]
    return invoke(*args, *(["--format", fmt] if fmt else []))


def _rows(invoke) -> list[dict]:
    result = invoke("sql", "SELECT * FROM attempts ORDER BY attempt_id", "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _by_key(rows: list[dict]) -> dict[tuple, dict]:
    keyed = {(r["experiment_id"], r["task_id"], r["repeat_index"]): r for r in rows}
    assert len(keyed) == len(rows), "two records share experiment, task and repeat index"
    return keyed


def _copy(tmp_path: Path, *runs: str) -> Path:
    out = tmp_path / "runs"
    for run in runs:
        shutil.copytree(RUNS / run, out / run)
    return out


def _edit(path: Path, change) -> None:
    document = json.loads(path.read_text())
    change(document)
    path.write_text(json.dumps(document, indent=4))


# --- classes, repeats and identity -----------------------------------------------------------


def test_every_trial_is_imported_once_with_its_documented_class(invoke):
    result = _ingest(invoke, RUNS)
    assert result.exit_code == 0, result.output
    assert "read 18 attempts: 18 new, 0 already present" in result.stdout
    rows = _by_key(_rows(invoke))
    assert sorted(rows) == sorted(EXPECTED)
    for key, (terminal_class, mode, resolved) in EXPECTED.items():
        row = rows[key]
        assert row["terminal_class"] == terminal_class, key
        assert row["labels"]["terminal_bench.failure_mode"] == mode, key
        assert row["labels"]["terminal_bench.is_resolved"] == resolved, key
        k = key[2] + 1
        assert row["labels"]["terminal_bench.trial_name"] == f"{key[1]}.{k}-of-2.{key[0]}"


def test_envelope_and_cohort_inputs_come_from_what_the_run_recorded(invoke):
    assert _ingest(invoke, RUNS).exit_code == 0
    rows = _rows(invoke)
    envelopes = {r["experiment_id"]: r["envelope"] for r in rows}
    assert envelopes == {
        RUN_A: {
            "agent": "terminus",
            "agent_version": None,
            "provider": "anthropic",
            "model": MODEL_A,
            "harness_version": "terminal-bench==0.2.18",
        },
        RUN_B: {
            "agent": "terminus",
            "agent_version": None,
            "provider": "openai",
            "model": MODEL_B,
            "harness_version": "terminal-bench==0.2.18",
        },
    }
    inputs = {r["experiment_id"]: r["inputs"] for r in rows}
    assert len({json.dumps(i, sort_keys=True) for i in inputs.values()}) == 2
    expected_system = digest_json(
        {
            "scheme": "terminal-bench.agent/1",
            "agent_name": "terminus",
            "import_path": "terminal_bench.agents.terminus_1:Terminus",
            "model_name": f"anthropic/{MODEL_A}",
            "agent_kwargs": {"max_episodes": 50},
        }
    )
    budget = {
        "global_agent_timeout_sec": None,
        "global_test_timeout_sec": None,
        "global_timeout_multiplier": 1,
    }
    first = inputs[RUN_A]
    assert first["agent_system_digest"] == expected_system
    assert json.loads(first["budget"]) == budget
    assert first["harness_package"] == "terminal-bench-core==0.1.1"
    assert first["wiki_digest"] == "none"
    for key in UNKNOWN_INPUTS.split(", "):
        assert first[key] == "unknown"
    second = inputs[RUN_B]
    assert second["agent_system_digest"] != first["agent_system_digest"]
    assert {k: v for k, v in second.items() if k != "agent_system_digest"} == {
        k: v for k, v in first.items() if k != "agent_system_digest"
    }


def test_timing_tokens_and_labels_of_one_trial(invoke):
    assert _ingest(invoke, RUNS).exit_code == 0
    rows = _by_key(_rows(invoke))
    row = rows[(RUN_A, "hello-world", 0)]
    assert row["runtime_seconds"] == pytest.approx(80.517931)
    assert row["started_at"] == "2025-07-01T10:00:00+00:00"
    assert row["finished_at"] == "2025-07-01T10:01:20.517931+00:00"
    assert (row["input_tokens"], row["output_tokens"], row["cached_input_tokens"]) == (
        12000,
        800,
        None,
    )
    assert row["cost_usd"] is None
    assert row["labels"] == {
        "terminal_bench.run_uuid": "00000000-0000-4000-8000-00000000005b",
        "terminal_bench.trial_name": f"hello-world.1-of-2.{RUN_A}",
        "terminal_bench.trial_id": "00000000-0000-4000-8000-0000000003e8",
        "terminal_bench.failure_mode": "unset",
        "terminal_bench.is_resolved": "true",
        "terminal_bench.tests_passed": "2/2",
        "terminal_bench.commit_hash": "3f1c9a8e5b7d2c4a6e8f0b1d3c5e7a9b2d4f6a8c",
    }
    crashed = rows[(RUN_B, "hello-world", 1)]
    assert crashed["runtime_seconds"] is None
    assert "runtime_seconds" not in crashed["labels"]
    assert crashed["started_at"] is None and crashed["input_tokens"] is None
    assert "runtime_seconds" not in row["labels"]


def test_records_validate_and_carry_a_terminal_identity():
    records = list(IMPORTER.read(RUNS, ImportContext()))
    assert len(records) == 18
    for _, record in records:
        parsed = AttemptRecord.model_validate_json(json.dumps(record))
        assert parsed.terminal_identity is not None
        assert "/home/alice" not in json.dumps(record)  # no machine path of the source


@pytest.mark.parametrize(
    ("is_resolved", "mode", "expected"),
    [
        (True, "agent_timeout", "resolved"),
        (True, "unset", "resolved"),
        (True, "parse_error", "resolved"),
        (False, "agent_timeout", "timeout"),
        (None, "agent_timeout", "timeout"),
        (None, "parse_error", "grader_failure"),
        (None, "test_timeout", "grader_failure"),
        (False, "fatal_llm_parse_error", "model_failure"),
        (False, "context_length_exceeded", "model_failure"),
        (False, "output_length_exceeded", "model_failure"),
        (False, "agent_installation_failed", "environment_failure"),
        (False, "unknown_agent_error", "harness_failure"),
        (None, "unknown_agent_error", "harness_failure"),
        (None, "unknown", "harness_failure"),
        (False, "unset", "model_failure"),
        (False, "none", "model_failure"),
        (None, "unset", "harness_failure"),
        (None, "none", "harness_failure"),
    ],
)
def test_classification_rules(is_resolved, mode, expected):
    assert classify(is_resolved, mode) == expected


def test_every_failure_mode_of_the_enum_has_a_rule():
    enum = {
        "unset",
        "none",
        "unknown",
        "test_timeout",
        "agent_timeout",
        "unknown_agent_error",
        "parse_error",
        "fatal_llm_parse_error",
        "context_length_exceeded",
        "output_length_exceeded",
        "agent_installation_failed",
    }
    assert set(FAILURE_MODES) == enum
    docs = (Path(__file__).resolve().parents[2] / "docs/importers/terminal-bench.md").read_text()
    for mode in enum:
        assert f"`{mode}`" in docs, f"{mode} is not documented"
    for mode, terminal_class in CLASS_BY_FAILURE_MODE.items():
        assert f"| `{mode}` | `{terminal_class}` |" in docs, mode


@pytest.mark.parametrize(
    ("name", "task", "expected"),
    [
        ("hello.1-of-2.2025-07-01__10-00-00", "hello", 0),
        ("hello.3-of-5.run.with.dots", "hello", 2),
        ("a.b.2-of-2.r-1-of-9", "a.b", 1),
        ("hello.2-of-2", "hello", 1),  # terminal-bench 0.1: no run id in the name
        ("hello.base.2-of-3", "hello.base", 1),
        ("hello.2025-07-01__10-00-00", "hello", 0),  # one attempt per task per run
    ],
)
def test_repeat_index_is_k_minus_one(name, task, expected):
    assert _repeat_index(name, task, "here") == expected


# --- source of record, fallback, duplicates --------------------------------------------------


def test_resolved_over_attempts_reproduces_each_runs_published_accuracy(invoke):
    result = _ingest(invoke, RUNS)
    assert result.exit_code == 0
    assert "not reproduced" not in result.stderr
    rows = _rows(invoke)
    checked = 0
    for run in (RUN_A, RUN_B):
        published = json.loads((RUNS / run / "results.json").read_text())
        listed = {t["trial_name"] for t in published["results"]}
        imported = [r for r in rows if r["labels"]["terminal_bench.trial_name"] in listed]
        assert len(imported) == len(listed)
        resolved = sum(r["terminal_class"] == "resolved" for r in imported)
        assert resolved / len(imported) == pytest.approx(published["accuracy"], abs=1e-12)
        metadata = json.loads((RUNS / run / "run_metadata.json").read_text())
        if metadata["accuracy"] is not None:
            assert resolved / len(imported) == pytest.approx(metadata["accuracy"], abs=1e-12)
            checked += 1
    assert checked == 1  # the interrupted run has published no final accuracy


def test_accuracy_that_is_not_reproduced_is_warned(invoke, tmp_path):
    runs = _copy(tmp_path, RUN_A)
    _edit(runs / RUN_A / "results.json", lambda d: d.update(accuracy=0.5))
    result = _ingest(invoke, runs / RUN_A)
    assert result.exit_code == 0, result.output
    line = (
        f"warning: {runs / RUN_A / 'results.json'}: accuracy 0.5 is not reproduced by the "
        "imported trials (3 resolved of 10 = 0.3)"
    )
    assert line in result.stderr.splitlines()
    assert "run_metadata.json: accuracy" not in result.stderr


def test_trial_listed_twice_is_imported_once_and_breaks_the_accuracy(invoke, tmp_path):
    runs = _copy(tmp_path, RUN_A)

    def duplicate(document):
        document["results"].append(document["results"][0])
        document["accuracy"] = 4 / 11

    _edit(runs / RUN_A / "results.json", duplicate)
    result = _ingest(invoke, runs / RUN_A)
    assert result.exit_code == 0, result.output
    assert "read 10 attempts" in result.stdout
    assert f"trial hello-world.1-of-2.{RUN_A} listed twice; kept once" in result.stderr
    assert "results.json: accuracy 0.36363636363636365 is not reproduced" in result.stderr


def test_run_level_list_wins_over_trial_folders(invoke, tmp_path):
    runs = _copy(tmp_path, RUN_A)
    trial = runs / RUN_A / "hello-world" / f"hello-world.1-of-2.{RUN_A}" / "results.json"
    _edit(trial, lambda d: d.update(is_resolved=False))
    other = runs / RUN_A / "csv-report" / f"csv-report.1-of-2.{RUN_A}" / "results.json"
    other.write_text(other.read_text()[:40])  # a listed trial's file is never opened
    result = _ingest(invoke, runs)
    assert result.exit_code == 0, result.output
    row = _by_key(_rows(invoke))[(RUN_A, "hello-world", 0)]
    assert row["terminal_class"] == "resolved"


def test_interrupted_run_recovers_finished_trials_and_skips_unfinished_ones(invoke, tmp_path):
    runs = _copy(tmp_path, RUN_B)
    shutil.rmtree(runs / RUN_B / "backup")
    result = _ingest(invoke, runs / RUN_B)
    assert result.exit_code == 0, result.output
    assert "read 8 attempts: 8 new" in result.stdout
    unfinished = runs / RUN_B / "sqlite-repair" / f"sqlite-repair.2-of-2.{RUN_B}"
    assert f"warning: {unfinished}: trial folder has no results.json" in result.stderr
    assert f"warning: {runs / RUN_B}: 1 trial(s) missing from results.json" in result.stderr
    keys = set(_by_key(_rows(invoke)))
    assert keys == {k for k in EXPECTED if k[0] == RUN_B}


def test_run_without_results_file_is_read_from_its_trial_folders(invoke, tmp_path):
    runs = _copy(tmp_path, RUN_A)
    (runs / RUN_A / "results.json").unlink()
    result = _ingest(invoke, runs / RUN_A)
    assert result.exit_code == 0, result.output
    rows = _by_key(_rows(invoke))
    assert {k: r["terminal_class"] for k, r in rows.items()} == {
        k: v[0] for k, v in EXPECTED.items() if k[0] == RUN_A
    }


def test_nested_copy_of_a_run_is_imported_once(invoke):
    result = _ingest(invoke, RUNS)
    assert result.exit_code == 0
    copy = RUNS / RUN_B / "backup" / RUN_A
    assert f"warning: {copy}: same terminal-bench run as {RUNS / RUN_A}" in result.stderr
    rows = _rows(invoke)
    assert sum(r["experiment_id"] == RUN_A for r in rows) == 10


def test_records_do_not_depend_on_where_the_run_was_found(invoke, root):
    first = _ingest(invoke, RUNS / RUN_B)  # the interrupted run and, nested in it, a copy of A
    assert "read 18 attempts: 18 new" in first.stdout
    before = tree_snapshot(root)
    second = _ingest(invoke, RUNS / RUN_A)
    assert "read 10 attempts: 0 new, 10 already present" in second.stdout
    assert tree_snapshot(root) == before


def test_reimport_adds_nothing_and_changes_no_file(invoke, root):
    assert _ingest(invoke, RUNS).exit_code == 0
    before = tree_snapshot(root)
    again = _ingest(invoke, RUNS)
    assert again.exit_code == 0
    assert "read 18 attempts: 0 new, 18 already present" in again.stdout
    assert "commit: none" in again.stdout
    assert tree_snapshot(root) == before


def test_run_without_lock_or_attempt_numbers(invoke, tmp_path):
    """terminal-bench 0.1: no tb.lock, trial `uuid`, no timestamps, `<task>.<k>-of-<n>`."""
    run = tmp_path / "old-run"
    run.mkdir()
    metadata = {"run_id": "old-run", "uuid": "u-1", "agent_name": "naive", "commit_hash": "abc"}
    metadata |= {"model_name": "gpt-4o", "dataset_path": "/data/tasks", "accuracy": 1.0}
    (run / "run_metadata.json").write_text(json.dumps(metadata))
    trial = {"trial_name": "hello.1-of-1", "task_id": "hello", "task_description": "Say hi."}
    trial |= {"is_resolved": True, "failure_mode": "unset", "uuid": "t-1"}
    (run / "results.json").write_text(json.dumps({"results": [trial], "accuracy": 1.0}))
    result = _ingest(invoke, run, extra=["--input", "budget=1800s"])
    assert result.exit_code == 0, result.output
    (row,) = _rows(invoke)
    assert row["envelope"] == {
        "agent": "naive",
        "agent_version": None,
        "provider": None,
        "model": "gpt-4o",
        "harness_version": "git:abc",
    }
    assert (row["repeat_index"], row["terminal_class"]) == (0, "resolved")
    assert json.loads(row["inputs"]["budget"]) == "1800s"
    assert row["inputs"]["harness_package"] == "unknown"
    assert row["labels"]["terminal_bench.trial_id"] == "t-1"
    assert row["runtime_seconds"] is None
    assert "runtime_seconds" not in row["labels"]
    assert "runtime is unavailable (runtime_seconds null)" in result.stderr


# --- errors, detection, warnings -------------------------------------------------------------


def _truncate(path: Path) -> None:
    path.write_text(path.read_text()[:300])


@pytest.mark.parametrize(
    ("target", "damage", "message"),
    [
        ("results.json", _truncate, "not valid JSON"),
        ("run_metadata.json", _truncate, "not valid JSON"),
        ("tb.lock", _truncate, "not valid JSON"),
        (
            "results.json",
            lambda p: p.write_text(json.dumps({"trials": []})),
            "not a terminal-bench results file; expected an object with a 'results' list",
        ),
        (
            "run_metadata.json",
            lambda p: p.write_text(json.dumps({"run_id": "x"})),
            "not a terminal-bench run metadata file",
        ),
    ],
    ids=[
        "truncated-results",
        "truncated-metadata",
        "truncated-lock",
        "foreign-results",
        "foreign-metadata",
    ],
)
def test_unreadable_or_foreign_run_file_is_rejected(
    invoke, root, tmp_path, target, damage, message
):
    assert _ingest(invoke, RUNS / RUN_A).exit_code == 0
    before = tree_snapshot(root)
    runs = _copy(tmp_path, RUN_B)
    path = runs / RUN_B / target
    damage(path)
    result = _ingest(invoke, runs / RUN_B)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: {message}")
    assert len(result.stderr.splitlines()) == 1
    assert tree_snapshot(root) == before


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"failure_mode": "exploded"}, "trial 1: unknown failure_mode 'exploded'; valid: unset"),
        ({"task_id": None}, "trial 1: 'task_id' must be a non-empty string"),
        ({"is_resolved": "yes"}, "trial 1: 'is_resolved' must be true, false or null"),
        ({"total_input_tokens": -1}, "trial 1: 'total_input_tokens' must be a non-negative"),
    ],
)
def test_malformed_trial_is_rejected(invoke, root, tmp_path, change, message):
    runs = _copy(tmp_path, RUN_A)
    path = runs / RUN_A / "results.json"
    _edit(path, lambda d: d["results"][0].update(change))
    result = _ingest(invoke, runs)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: {message}")
    assert len(result.stderr.splitlines()) == 1
    assert tree_snapshot(root) == {}


def test_bad_timestamp_is_rejected(invoke, tmp_path):
    runs = _copy(tmp_path, RUN_A)
    _edit(runs / RUN_A / "results.json", lambda d: d["results"][0].update(trial_ended_at="soon"))
    result = _ingest(invoke, runs)
    assert result.exit_code == 1
    expected = (
        f"Error: {runs / RUN_A / 'results.json'}: trial hello-world.1-of-2.{RUN_A}: "
        "'trial_ended_at' must be an "
        "ISO 8601 timestamp with an offset (got 'soon')"
    )
    assert result.stderr.strip() == expected


def test_truncated_fallback_trial_file_is_rejected(invoke, tmp_path):
    runs = _copy(tmp_path, RUN_B)
    path = runs / RUN_B / "sqlite-repair" / f"sqlite-repair.1-of-2.{RUN_B}" / "results.json"
    _truncate(path)
    result = _ingest(invoke, runs / RUN_B)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: not valid JSON")
    assert len(result.stderr.splitlines()) == 1


def test_foreign_file_and_folder_are_rejected(invoke, root, tmp_path):
    foreign = tmp_path / "other.json"
    foreign.write_text(json.dumps({"results": [{"id": 1}]}))
    result = _ingest(invoke, foreign)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {foreign}: not a terminal-bench run; pass the run")
    assert len(result.stderr.splitlines()) == 1
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "results.json").write_text("{}")
    result = _ingest(invoke, folder)
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {folder}: no terminal-bench run found")
    assert tree_snapshot(root) == {}


def test_format_auto_detects_a_run_and_a_folder_of_runs(invoke):
    result = _ingest(invoke, RUNS, fmt=None)
    assert result.exit_code == 0, result.output
    assert "read 18 attempts: 18 new" in result.stdout
    again = _ingest(invoke, RUNS / RUN_A, fmt=None)
    assert "read 10 attempts: 0 new, 10 already present" in again.stdout


def test_detect_is_cheap_and_never_raises(tmp_path):
    trial = RUNS / RUN_A / "hello-world" / f"hello-world.1-of-2.{RUN_A}"
    assert IMPORTER.detect(RUNS) and IMPORTER.detect(RUNS / RUN_A)
    assert IMPORTER.detect(RUNS / RUN_A / "results.json")  # a run's trial list
    assert not IMPORTER.detect(RUNS / RUN_A / "run_metadata.json")
    assert not IMPORTER.detect(trial / "results.json")  # one trial: ingest its folder
    assert IMPORTER.detect(trial)
    assert not IMPORTER.detect(tmp_path)
    assert not IMPORTER.detect(tmp_path / "missing")
    (tmp_path / "run_metadata.json").write_text("{trunc")
    (tmp_path / "results.json").write_text("{}")
    assert not IMPORTER.detect(tmp_path)


def test_unknown_inputs_are_warned_and_input_silences_them(invoke):
    result = _ingest(invoke, RUNS)
    line = (
        f"warning: {RUNS}: cohort inputs not recorded by the source, set to 'unknown': "
        f"{UNKNOWN_INPUTS}; supply them with --input KEY=VALUE or --inputs FILE"
    )
    assert line in result.stderr.splitlines()
    supplied = _ingest(invoke, RUNS, extra=["--input", "case_digest=tb-core-0.1.1"])
    assert supplied.exit_code == 0
    assert "set to 'unknown': environment_digest, grader_version, prompt_digest" in supplied.stderr
    assert "case_digest" not in supplied.stderr
    assert "18 new" in supplied.stdout  # a new cohort input is a new attempt record


# --- end to end ------------------------------------------------------------------------------


def test_report_and_compare_on_the_imported_runs(invoke):
    assert _ingest(invoke, RUNS).exit_code == 0
    report = invoke("report", "--task", "hello-world", "--format", "json")
    assert report.exit_code == 0, report.output
    document = json.loads(report.stdout)
    systems = {s["system"]["model"]: s for cohort in document["cohorts"] for s in cohort["systems"]}
    assert set(systems) == {MODEL_A, MODEL_B}
    assert (systems[MODEL_A]["attempts"], systems[MODEL_A]["resolved"]) == (2, 2)
    assert systems[MODEL_B]["classes"]["harness_failure"] == 1
    table = invoke("report", "--task", "hello-world")
    assert table.exit_code == 0 and "anthropic/claude-sonnet-4-20250514" in table.stdout
    compared = invoke(
        "compare",
        "--baseline",
        f"model={MODEL_A}",
        "--candidate",
        f"model={MODEL_B}",
        "--format",
        "json",
        "--resamples",
        "200",
    )
    assert compared.exit_code == 0, compared.output
    comparison = json.loads(compared.stdout)["comparisons"][0]
    paired = {t["task_id"]: t["difference"] for t in comparison["tasks"]}
    assert paired == {"count-lines": 0.0, "hello-world": 0.0, "sqlite-repair": 1.0}
    dropped = {t["task_id"] for t in comparison["dropped"]}
    assert dropped == {"csv-report", "fix-permissions"}  # no valid attempt with gpt-4.1


def test_fixture_is_what_generate_py_writes(tmp_path):
    spec = importlib.util.spec_from_file_location("tb_fixture_generate", HERE / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(tmp_path / "runs")
    written = sorted(p.relative_to(tmp_path / "runs") for p in (tmp_path / "runs").rglob("*"))
    committed = sorted(p.relative_to(RUNS) for p in RUNS.rglob("*"))
    assert written == committed
    for rel in committed:
        if (RUNS / rel).is_file():
            assert (RUNS / rel).read_bytes() == (tmp_path / "runs" / rel).read_bytes(), rel
