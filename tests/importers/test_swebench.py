"""`--format swebench`: run reports and per-instance logs of swebench.harness.run_evaluation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from registry.importers import ImportContext
from registry.importers.swebench import IMPORTER
from registry.storage.digest import digest_file, digest_json
from registry_schemas import AttemptRecord
from tests.conftest import FIXTURES, tree_snapshot

RUN = FIXTURES / "importers" / "swebench" / "run"
MODEL_A = "openai__gpt-4o-2024-08-06"
MODEL_B = "claude-3.5-sonnet-20241022"
REPORT_A = RUN / f"{MODEL_A}.nightly-0301.json"
REPORT_B = RUN / f"{MODEL_B}.nightly-0302.json"
UNKNOWN_INPUTS = (
    "budget, case_digest, environment_digest, grader_version, prompt_digest, source_digest,"
    " tool_policy_digest, wiki_digest"
)

# (experiment, task) -> (terminal class, labels that say why), as the fixture's logs say.
EXPECTED = {
    ("nightly-0301", "astropy__astropy-12907"): ("resolved", {"swebench.outcome": "resolved"}),
    ("nightly-0301", "astropy__astropy-14182"): (
        "model_failure",
        {"swebench.outcome": "unresolved", "swebench.patch_applied": "true"},
    ),
    ("nightly-0301", "django__django-11099"): (
        "model_failure",
        {"swebench.outcome": "empty_patch", "empty_patch": "true"},
    ),
    ("nightly-0301", "matplotlib__matplotlib-23314"): (
        "harness_failure",
        {"swebench.outcome": "error", "swebench.error": "evaluation_failed"},
    ),
    ("nightly-0301", "psf__requests-2317"): (
        "model_failure",
        {"swebench.outcome": "error", "swebench.error": "patch_apply_failed"},
    ),
    ("nightly-0301", "pytest-dev__pytest-5227"): (
        "environment_failure",
        {
            "swebench.outcome": "unresolved",
            "swebench.failure_tier": "environment",
            "swebench.failure_reason": "container_unavailable",
            "swebench.patch_applied": "false",
        },
    ),
    ("nightly-0301", "scikit-learn__scikit-learn-13142"): (
        "grader_failure",
        {"swebench.outcome": "error", "swebench.error": "report_missing"},
    ),
    ("nightly-0301", "sphinx-doc__sphinx-8273"): (
        "timeout",
        {
            "swebench.outcome": "error",
            "swebench.error": "tests_timed_out",
            "swebench.failure_tier": "ambiguous",
            "swebench.failure_reason": "tests_timed_out",
        },
    ),
    ("nightly-0301", "sympy__sympy-20590"): (
        "grader_failure",
        {"swebench.outcome": "error", "swebench.error": "report_unreadable"},
    ),
    ("nightly-0302", "astropy__astropy-12907"): ("resolved", {"swebench.outcome": "resolved"}),
    ("nightly-0302", "astropy__astropy-14182"): ("resolved", {"swebench.outcome": "resolved"}),
    ("nightly-0302", "django__django-11099"): (
        "model_failure",
        {"swebench.outcome": "unresolved"},
    ),
    ("nightly-0302", "matplotlib__matplotlib-23314"): ("resolved", {}),
    ("nightly-0302", "psf__requests-2317"): ("resolved", {}),
    ("nightly-0302", "pylint-dev__pylint-7080"): (
        "model_failure",
        {"swebench.outcome": "empty_patch", "empty_patch": "true"},
    ),
    ("nightly-0302", "pytest-dev__pytest-5227"): ("resolved", {}),
    ("nightly-0302", "sphinx-doc__sphinx-8273"): ("resolved", {}),
    ("nightly-0302", "sympy__sympy-20590"): ("model_failure", {"swebench.outcome": "unresolved"}),
}


def _read(path: Path, context: ImportContext | None = None) -> list[dict]:
    return [record for _, record in IMPORTER.read(path, context or ImportContext())]


def _classes(records: list[dict]) -> dict[tuple[str, str], str]:
    return {(r["experiment_id"], r["task_id"]): r["terminal_class"] for r in records}


def _one_line_error(result, text: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: {text}")
    assert result.stderr.count("\n") == 1, result.stderr


def test_every_class_rule_from_report_and_logs():
    records = _read(RUN)
    assert _classes(records) == {key: cls for key, (cls, _) in EXPECTED.items()}
    for record in records:
        _, labels = EXPECTED[(record["experiment_id"], record["task_id"])]
        assert labels.items() <= record["labels"].items(), record["task_id"]
        AttemptRecord.model_validate_json(json.dumps(record))


def test_record_identity_inputs_and_runtime():
    records = {(r["experiment_id"], r["task_id"]): r for r in _read(RUN)}
    record = records[("nightly-0301", "astropy__astropy-12907")]
    assert record["repeat_index"] == 0
    assert record["envelope"] == {
        "agent": None,
        "agent_version": None,
        "provider": None,
        "model": MODEL_A,
        "harness_version": None,
    }
    assert record["inputs"]["harness_package"] == "SWE-bench/SWE-bench_Lite:test"
    assert record["inputs"]["agent_system_digest"] == digest_json(
        {"swebench.model_name_or_path": MODEL_A}
    )
    unknown = [k for k, v in record["inputs"].items() if v == "unknown"]
    assert ", ".join(sorted(unknown)) == UNKNOWN_INPUTS
    assert record["runtime_seconds"] is None and "runtime_seconds" not in record["labels"]
    assert record["started_at"] is None and record["cost_usd"] is None
    assert record["input_tokens"] is None and record["output_tokens"] is None
    log_dir = RUN / "logs" / "run_evaluation" / "nightly-0301" / MODEL_A / record["task_id"]
    assert record["artifacts"] == {
        "patch": digest_file(log_dir / "patch.diff"),
        "report": digest_file(log_dir / "report.json"),
        "run_instance_log": digest_file(log_dir / "run_instance.log"),
        "test_output": digest_file(log_dir / "test_output.txt"),
    }
    assert records[("nightly-0302", "pylint-dev__pylint-7080")]["artifacts"] == {}


def test_two_models_differ_only_in_agent_system():
    records = _read(RUN)
    by_model: dict[str, set[str]] = {}
    for record in records:
        others = {k: v for k, v in record["inputs"].items() if k != "agent_system_digest"}
        by_model.setdefault(record["envelope"]["model"], set()).add(json.dumps(others))
        assert (
            record["experiment_id"]
            == {MODEL_A: "nightly-0301", MODEL_B: "nightly-0302"}[record["envelope"]["model"]]
        )
    assert by_model[MODEL_A] == by_model[MODEL_B] and len(by_model[MODEL_A]) == 1
    systems = {r["envelope"]["model"]: r["inputs"]["agent_system_digest"] for r in records}
    assert len(set(systems.values())) == 2


def test_ingest_warns_once_and_reimport_adds_nothing(invoke, root):
    first = invoke("ingest", str(RUN))
    assert first.exit_code == 0, first.output
    assert "read 18 attempts: 18 new, 0 already present" in first.stdout
    warnings = first.stderr.splitlines()
    assert (
        warnings.count(
            "warning: swebench: the harness records no agent runtime; runtime is unavailable "
            "(runtime_seconds null)"
        )
        == 1
    )
    for report in (REPORT_A, REPORT_B):
        assert (
            f"warning: {report}: 1 incomplete instance(s) (in the dataset, no prediction) are not"
            " attempts and were not imported"
        ) in warnings
        assert (
            f"warning: {report}: cohort inputs not recorded by the source, set to 'unknown': "
            f"{UNKNOWN_INPUTS}; supply them with --input KEY=VALUE or --inputs FILE"
        ) in warnings
    before = tree_snapshot(root)
    again = invoke("ingest", str(RUN))
    assert again.exit_code == 0, again.output
    assert "read 18 attempts: 0 new, 18 already present" in again.stdout
    assert tree_snapshot(root) == before


def test_input_override_silences_that_key(invoke):
    result = invoke("ingest", str(REPORT_A), "--input", "case_digest=swe-lite-2024")
    assert result.exit_code == 0, result.output
    line = next(x for x in result.stderr.splitlines() if "cohort inputs not recorded" in x)
    assert "case_digest" not in line and "wiki_digest" in line
    rows = json.loads(
        invoke(
            "sql", "SELECT DISTINCT inputs.case_digest AS c FROM attempts", "--format", "json"
        ).stdout
    )
    assert rows == [{"c": "swe-lite-2024"}]


def test_auto_detects_directory_and_file(invoke):
    assert IMPORTER.detect(RUN) and IMPORTER.detect(REPORT_A)
    instance = RUN / "logs" / "run_evaluation" / "nightly-0301" / MODEL_A
    assert not IMPORTER.detect(instance / "astropy__astropy-12907" / "report.json")
    assert not IMPORTER.detect(RUN / "logs" / "run_evaluation" / "nightly-0301" / "run.json")
    assert not IMPORTER.detect(RUN / "missing.json") and not IMPORTER.detect(RUN / "logs")
    result = invoke("ingest", str(REPORT_B))  # --format auto is the default
    assert result.exit_code == 0, result.output
    assert "read 9 attempts: 9 new" in result.stdout


def test_report_alone_classifies_from_id_lists(tmp_path):
    shutil.copy(REPORT_A, tmp_path / REPORT_A.name)
    context = ImportContext()
    classes = _classes(_read(tmp_path, context))
    assert classes == {
        ("nightly-0301", "astropy__astropy-12907"): "resolved",
        ("nightly-0301", "astropy__astropy-14182"): "model_failure",
        ("nightly-0301", "django__django-11099"): "model_failure",
        ("nightly-0301", "matplotlib__matplotlib-23314"): "harness_failure",
        ("nightly-0301", "psf__requests-2317"): "harness_failure",
        ("nightly-0301", "pytest-dev__pytest-5227"): "environment_failure",
        ("nightly-0301", "scikit-learn__scikit-learn-13142"): "harness_failure",
        ("nightly-0301", "sphinx-doc__sphinx-8273"): "timeout",  # failure_reasons says so
        ("nightly-0301", "sympy__sympy-20590"): "grader_failure",  # completed, yet an error
    }
    assert (
        f"{tmp_path / REPORT_A.name}: no per-instance logs at "
        f"logs/run_evaluation/nightly-0301/{MODEL_A}; classes come from the run report's id "
        "lists alone"
    ) in context.warnings


def test_older_report_without_infra_lists(tmp_path):
    data = json.loads(REPORT_A.read_text())
    for key in ("infra_failure_ids", "ambiguous_failure_ids", "failure_reasons"):
        del data[key]
    (tmp_path / REPORT_A.name).write_text(json.dumps(data))
    classes = _classes(_read(tmp_path))
    assert classes[("nightly-0301", "pytest-dev__pytest-5227")] == "model_failure"
    assert classes[("nightly-0301", "sphinx-doc__sphinx-8273")] == "harness_failure"


def test_instance_report_enriches_class(tmp_path):
    shutil.copytree(RUN, tmp_path / "run")
    task = "django__django-11099"
    path = tmp_path / "run/logs/run_evaluation/nightly-0302" / MODEL_B / task / "report.json"
    report = json.loads(path.read_text())
    report[task].update(patch_is_None=True, patch_exists=False)
    path.write_text(json.dumps(report))
    record = next(
        r for r in _read(tmp_path / "run") if r["task_id"] == task and "0302" in r["experiment_id"]
    )
    assert record["terminal_class"] == "model_failure"
    assert record["labels"]["empty_patch"] == "true"
    report[task].update(infra_failure=True, infra_failure_reason="out_of_memory")
    path.write_text(json.dumps(report))
    record = next(
        r for r in _read(tmp_path / "run") if r["task_id"] == task and "0302" in r["experiment_id"]
    )
    assert record["terminal_class"] == "environment_failure"
    assert record["labels"]["swebench.failure_reason"] == "out_of_memory"


def test_model_and_run_with_dots_are_split_by_the_logs(tmp_path):
    context = ImportContext()
    assert {r["envelope"]["model"] for r in _read(REPORT_B, context)} == {MODEL_B}
    assert not [w for w in context.warnings if "ambiguous" in w]
    shutil.copy(REPORT_B, tmp_path / REPORT_B.name)
    context = ImportContext()
    records = _read(tmp_path / REPORT_B.name, context)
    assert {(r["envelope"]["model"], r["experiment_id"]) for r in records} == {
        (MODEL_B, "nightly-0302")
    }
    assert (
        f"{tmp_path / REPORT_B.name}: model and run id are ambiguous in the file name and no logs"
        " tell them apart; read run id 'nightly-0302' (the part after the last dot)"
    ) in context.warnings


def _truncated(tmp_path: Path) -> Path:
    path = tmp_path / REPORT_A.name
    path.write_bytes(REPORT_A.read_bytes()[:1200])
    return path


def _foreign(tmp_path: Path) -> Path:
    path = tmp_path / "model.run.json"
    path.write_text(json.dumps({"resolved_ids": ["a"], "results": [], "accuracy": 1.0}))
    return path


def _unnamed(tmp_path: Path) -> Path:
    path = tmp_path / "report.json"
    path.write_text(REPORT_A.read_text())
    return path


def _bad_list(tmp_path: Path) -> Path:
    path = tmp_path / REPORT_A.name
    path.write_text(json.dumps({**json.loads(REPORT_A.read_text()), "error_ids": "x"}))
    return path


def _broken_instance_report(tmp_path: Path) -> Path:
    shutil.copytree(RUN, tmp_path / "run")
    log = tmp_path / "run/logs/run_evaluation/nightly-0301" / MODEL_A
    report = log / "astropy__astropy-12907" / "report.json"
    report.write_bytes(report.read_bytes()[:40])
    return tmp_path / "run"


def _no_report(tmp_path: Path) -> Path:
    (tmp_path / "empty").mkdir()
    return tmp_path / "empty"


ERRORS = {
    "truncated": (_truncated, lambda p: f"{p}: not valid JSON ("),
    "foreign": (
        _foreign,
        lambda p: (
            f"{p}: not a SWE-bench run report (no resolved_ids and submitted_ids); expected"
            " the JSON object swebench.harness.run_evaluation writes\n"
        ),
    ),
    "no-model-in-name": (
        _unnamed,
        lambda p: (
            f"{p}: cannot tell the model and run id from the file name; expected"
            " <model>.<run_id>.json as swebench.harness.run_evaluation names it\n"
        ),
    ),
    "bad-id-list": (_bad_list, lambda p: f"{p}: error_ids must be a list of instance ids\n"),
    "broken-instance-report": (
        _broken_instance_report,
        lambda p: (
            f"{p}/logs/run_evaluation/nightly-0301/{MODEL_A}/astropy__astropy-12907/"
            f"report.json: unreadable, yet {REPORT_A.name} lists astropy__astropy-12907 in "
            "resolved_ids; the logs do not belong to this run report\n"
        ),
    ),
    "no-report-in-directory": (
        _no_report,
        lambda p: (
            f"{p}: holds no SWE-bench run report; expected <model>.<run_id>.json with"
            " resolved_ids and submitted_ids, as swebench.harness.run_evaluation writes it\n"
        ),
    ),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_bad_input_is_one_line_error_and_changes_nothing(case, tmp_path, invoke, root):
    assert invoke("ingest", str(REPORT_B)).exit_code == 0
    before = tree_snapshot(root)
    make, message = ERRORS[case]
    path = make(tmp_path)
    result = invoke("ingest", str(path), "--format", "swebench")
    _one_line_error(result, message(path))
    assert tree_snapshot(root) == before


def test_truncated_report_is_detected_and_rejected(tmp_path, invoke, root):
    path = _truncated(tmp_path)
    assert IMPORTER.detect(path)
    _one_line_error(invoke("ingest", str(path)), f"{path}: not valid JSON (")
    assert tree_snapshot(root) == {}


def test_report_and_compare_on_imported_runs(invoke):
    assert invoke("ingest", str(RUN)).exit_code == 0
    report = invoke("report", "--task", "astropy__astropy-14182", "--format", "json")
    assert report.exit_code == 0, report.output
    systems = [s for c in json.loads(report.stdout)["cohorts"] for s in c["systems"]]
    assert sorted((s["system"]["model"], s["resolved"]) for s in systems) == [
        (MODEL_B, 1),
        (MODEL_A, 0),
    ]
    compare = invoke("compare", "--baseline", f"model={MODEL_A}", "--candidate", f"model={MODEL_B}")
    assert compare.exit_code == 0, compare.output
    assert "paired     5 tasks" in compare.stdout
    assert "sign test  3 up / 0 down / 2 ties" in compare.stdout


def test_submitted_but_ungraded_ids_are_not_attempts(tmp_path):
    data = json.loads(REPORT_B.read_text())
    data["submitted_ids"] += ["zzz__outside-1", "zzz__outside-2"]
    path = tmp_path / REPORT_B.name
    path.write_text(json.dumps(data))
    context = ImportContext()
    assert len(_read(path, context)) == 9
    assert (
        f"{path}: 2 submitted instance(s) are in no outcome list (not in the run's dataset) and"
        " were not imported"
    ) in context.warnings
