"""`--format harbor`: Harbor job directories (config.json, lock.json, result.json, trials)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from registry.importers import ImportContext, detect_importer
from registry.importers.harbor import EXCEPTION_CLASSES, IMPORTER, _classify
from registry.storage.digest import digest_json
from registry_schemas import AttemptRecord
from tests.conftest import FIXTURES, tree_snapshot

HERE = FIXTURES / "importers" / "harbor"
SONNET = HERE / "tb2-terminus-sonnet"
GPT5 = HERE / "tb2-terminus-gpt5"
EXCEPTION = "harbor.exception"

# trial folder -> (task, repeat index, terminal class, exception Harbor recorded)
EXPECTED_SONNET = {
    "hello-world__bC8PkoW": ("hello-world", 0, "resolved", None),
    "hello-world__DokyCPt": ("hello-world", 1, "model_failure", None),
    "fix-git__2JTRC7L": ("fix-git", 0, "resolved", None),
    "fix-git__3fiMhWX": ("fix-git", 1, "resolved", None),
    "regex-log__acnEKX7": ("regex-log", 0, "timeout", "AgentTimeoutError"),
    "regex-log__okSJBvH": ("regex-log", 1, "resolved", "AgentTimeoutError"),  # reward 1.0
    "cobol-modernization__AweXs34": (
        "cobol-modernization",
        0,
        "model_failure",
        "ContextLengthExceededError",
    ),
    "cobol-modernization__UxeEgTC": (
        "cobol-modernization",
        1,
        "model_failure",
        "NonZeroAgentExitCodeError",
    ),
    "password-recovery__iNy5TAz": (
        "password-recovery",
        0,
        "safety_failure",
        "AgentSafetyRefusalError",
    ),
    "password-recovery__NCXgzk7": (
        "password-recovery",
        1,
        "safety_failure",
        "ContentPolicyViolationError",
    ),
    "build-pmars__H8iGwaB": ("build-pmars", 0, "environment_failure", "SandboxBuildFailedError"),
    "build-pmars__Tg6MyzJ": ("build-pmars", 1, "environment_failure", "AgentSetupTimeoutError"),
    "qemu-startup__VUUFHV9": (
        "qemu-startup",
        0,
        "environment_failure",
        "SandboxLikelyOutOfMemoryError",
    ),
    "qemu-startup__yx3zR43": ("qemu-startup", 1, "harness_failure", "ApiRateLimitError"),
    "sqlite-with-gcov__Y93hwcD": ("sqlite-with-gcov", 0, "harness_failure", "APIConnectionError"),
    "sqlite-with-gcov__g6bZsKH": ("sqlite-with-gcov", 1, "grader_failure", "VerifierTimeoutError"),
    "log-summary__u7yKTDU": ("log-summary", 0, "grader_failure", "RewardFileNotFoundError"),
    "log-summary__GTpnZUU": ("log-summary", 1, "grader_failure", "VerifierOutputParseError"),
    "crack-7z-hash__ekLSkvj": ("crack-7z-hash", 0, "cancelled", "CancelledError"),
    "crack-7z-hash__HxxUkyg": ("crack-7z-hash", 1, "model_failure", "OutputTokenExceededError"),
}
EXPECTED_GPT5 = {
    "hello-world__i3o7rx9": ("hello-world", 0, "resolved", None),
    "hello-world__PKUqzUx": ("hello-world", 1, "resolved", None),
    "fix-git__638eBRc": ("fix-git", 0, "resolved", None),
    "fix-git__s9vcadG": ("fix-git", 1, "model_failure", None),
    "regex-log__wwX6QSL": ("regex-log", 0, "resolved", None),
    "regex-log__ifKiC5V": ("regex-log", 1, "timeout", "AgentTimeoutError"),
    "cobol-modernization__xPVu77G": ("cobol-modernization", 0, "model_failure", None),
    "cobol-modernization__6EuAjdV": ("cobol-modernization", 1, "model_failure", None),
    "qemu-startup__JxcvDgk": ("qemu-startup", 0, "resolved", None),
    "qemu-startup__p6i5K2e": ("qemu-startup", 1, "resolved", None),
    "crack-7z-hash__xMibAQQ": ("crack-7z-hash", 0, "harness_failure", "RuntimeError"),
    "crack-7z-hash__V98TB5E": ("crack-7z-hash", 1, "model_failure", None),
}


def _read(path: Path, context: ImportContext | None = None) -> dict[str, dict]:
    """Return trial folder -> record, validated against the attempt model."""
    context = context or ImportContext()
    records = {}
    for location, record in IMPORTER.read(path, context):
        AttemptRecord.model_validate_json(json.dumps(record))
        records[location.removesuffix("/result.json")] = record
    return records


def _copy(tmp_path: Path, job: Path = SONNET) -> Path:
    return Path(shutil.copytree(job, tmp_path / job.name))


def _error_line(result) -> str:
    assert result.exit_code == 1, result.output
    assert len(result.stderr.splitlines()) == 1, result.stderr
    return result.stderr.strip()


@pytest.mark.parametrize(
    ("job", "expected"), [(SONNET, EXPECTED_SONNET), (GPT5, EXPECTED_GPT5)], ids=["sonnet", "gpt5"]
)
def test_classes_repeats_and_exceptions(job, expected):
    records = _read(job)
    got = {
        name: (
            r["task_id"],
            r["repeat_index"],
            r["terminal_class"],
            r["labels"].get("harbor.exception"),
        )
        for name, r in records.items()
    }
    assert got == expected


def test_fixture_covers_every_rule_of_the_brief():
    classes = {cls for _, _, cls, _ in EXPECTED_SONNET.values()}
    assert classes == {
        "resolved",
        "model_failure",
        "safety_failure",
        "timeout",
        "environment_failure",
        "harness_failure",
        "grader_failure",
        "cancelled",
    }


def test_envelope_inputs_and_usage_of_one_trial():
    record = _read(SONNET)["regex-log__acnEKX7"]
    assert record["experiment_id"] == "tb2-terminus-sonnet"
    assert record["envelope"] == {
        "agent": "terminus-2",
        "agent_version": "2.0.0",
        "provider": "anthropic",
        "model": "claude-sonnet-4-5",
        "harness_version": "harbor==0.26.0",
    }
    inputs = record["inputs"]
    assert inputs["case_digest"] == (
        "dirhash-sha256:eaaf623ca5535538dc7d9f24419aeb5a5ad5649c5efee25c49f2dd713559f97c"
    )
    assert inputs["source_digest"] == "git:69671fbaac6d67a7ef0dfec016cc38a64ef7a77c"
    assert inputs["harness_package"] == "terminal-bench@2.0"
    assert inputs["budget"] == {"timeout_multiplier": 1.0}
    assert inputs["wiki_digest"] == "none"
    assert inputs["prompt_digest"] == digest_json(
        {"scheme": "harbor.prompt/1", "extra_instructions": []}
    )
    assert inputs["agent_system_digest"] == digest_json(
        {
            "agent": {
                "name": "terminus-2",
                "model_name": "anthropic/claude-sonnet-4-5",
                "kwargs": {"max_turns": 100},
            }
        }
    )
    assert inputs["environment_digest"] == digest_json({"type": "docker"})
    assert inputs["grader_version"] == digest_json({"environment_mode": "shared"})
    assert record["runtime_seconds"] == 84.0
    assert record["started_at"] == "2026-09-14T10:00:14Z"
    assert record["finished_at"] == "2026-09-14T10:01:38Z"
    assert (record["input_tokens"], record["output_tokens"]) == (22368, 2236)
    assert record["cached_input_tokens"] == 11184
    assert record["cost_usd"] == pytest.approx(0.067104)
    assert record["labels"]["harbor.rewards"] == '{"reward":0}'
    assert record["labels"]["harbor.job_id"] == "5b72f2ee-765c-0603-3c3c-d72b8df5a68c"


def test_cost_stays_null_when_harbor_has_none():
    records = _read(GPT5)
    assert records["qemu-startup__p6i5K2e"]["cost_usd"] is None
    assert records["qemu-startup__p6i5K2e"]["input_tokens"] == 38648
    assert records["qemu-startup__JxcvDgk"]["cost_usd"] == pytest.approx(0.125046)
    sonnet = _read(SONNET)["build-pmars__H8iGwaB"]  # the sandbox never started: no agent_result
    assert (sonnet["cost_usd"], sonnet["input_tokens"], sonnet["output_tokens"]) == (None,) * 3


def test_systems_differ_only_in_agent_system():
    sonnet, gpt5 = _read(SONNET)["fix-git__2JTRC7L"], _read(GPT5)["fix-git__638eBRc"]
    differing = {k for k in sonnet["inputs"] if sonnet["inputs"][k] != gpt5["inputs"][k]}
    assert differing == {"agent_system_digest"}


def test_ingest_twice_adds_nothing(invoke, root):
    first = invoke("ingest", str(SONNET), str(GPT5))
    assert first.exit_code == 0, first.output
    assert "read 32 attempts: 32 new, 0 already present" in first.stdout
    before = tree_snapshot(root)
    again = invoke("ingest", str(SONNET), str(GPT5))
    assert again.exit_code == 0, again.output
    assert "read 32 attempts: 0 new, 32 already present" in again.stdout
    assert tree_snapshot(root) == before


def test_format_auto_detects_a_job(invoke, tmp_path):
    assert detect_importer(SONNET) == "harbor"
    assert IMPORTER.detect(SONNET)
    assert not IMPORTER.detect(SONNET / "fix-git__2JTRC7L")  # a trial folder, not a job
    assert not IMPORTER.detect(SONNET / "config.json")
    assert not IMPORTER.detect(tmp_path / "missing")
    broken = _copy(tmp_path)
    (broken / "config.json").write_text("{")
    assert not IMPORTER.detect(broken)
    result = invoke("ingest", str(SONNET))
    assert result.exit_code == 0, result.output
    assert "read 20 attempts: 20 new" in result.stdout


def test_folder_of_jobs_is_read_job_by_job(invoke, tmp_path):
    jobs = tmp_path / "jobs"
    for job in (SONNET, GPT5):
        shutil.copytree(job, jobs / job.name)
    (jobs / "scratch").mkdir()
    assert detect_importer(jobs) == "harbor"
    context = ImportContext()
    locations = [location for location, _ in IMPORTER.read(jobs, context)]
    assert len(locations) == 32
    assert locations[0] == "tb2-terminus-gpt5/cobol-modernization__6EuAjdV/result.json"
    assert f"{jobs}: skipped folders that are not Harbor jobs: scratch" in context.warnings
    result = invoke("ingest", str(jobs))
    assert result.exit_code == 0, result.output
    assert "read 32 attempts: 32 new, 0 already present" in result.stdout
    assert "skipped folders that are not Harbor jobs: scratch" in result.stderr


def test_folder_without_jobs_is_rejected(invoke, tmp_path):
    (tmp_path / "empty" / "nothing").mkdir(parents=True)
    line = _error_line(invoke("ingest", "--format", "harbor", str(tmp_path / "empty")))
    assert line == (
        f"Error: {tmp_path / 'empty'}: neither a Harbor job directory (no config.json) nor a "
        "folder of them"
    )


def test_truncated_trial_result_is_rejected(invoke, root, tmp_path):
    job = _copy(tmp_path)
    file = job / "fix-git__3fiMhWX" / "result.json"
    file.write_bytes(file.read_bytes()[:500])
    line = _error_line(invoke("ingest", str(job)))
    assert line.startswith(f"Error: {file}: not valid JSON")
    assert not root.exists()


def test_truncated_trial_result_rejects_the_whole_ingest(invoke, root, tmp_path):
    assert invoke("ingest", str(GPT5)).exit_code == 0
    before = tree_snapshot(root)
    job = _copy(tmp_path)
    (job / "hello-world__DokyCPt" / "result.json").write_text('{"trial_name": "hello-wor')
    line = _error_line(invoke("ingest", "--format", "harbor", str(job)))
    assert "hello-world__DokyCPt/result.json: not valid JSON" in line
    assert tree_snapshot(root) == before


@pytest.mark.parametrize(
    ("relative", "content", "message"),
    [
        (
            "fix-git__3fiMhWX/result.json",
            {"results": [], "accuracy": 0.5},
            "not a Harbor trial result ('trial_name' missing or not a string)",
        ),
        (
            "config.json",
            {"run_id": "x", "agent_name": "oracle"},
            "not a Harbor job config (no 'job_name')",
        ),
        ("result.json", [1, 2], "not a Harbor job result (no 'n_total_trials')"),
        (
            "fix-git__3fiMhWX/result.json",
            "verifier_result",
            "'verifier_result.rewards' is not an object of numbers",
        ),
    ],
    ids=["trial-result", "job-config", "job-result", "rewards"],
)
def test_foreign_files_are_rejected(invoke, root, tmp_path, relative, content, message):
    job = _copy(tmp_path)
    file = job / relative
    if content == "verifier_result":
        data = json.loads(file.read_text())
        data["verifier_result"] = {"rewards": {"reward": "passed"}}
        content = data
    file.write_text(json.dumps(content))
    line = _error_line(invoke("ingest", "--format", "harbor", str(job)))
    assert line.startswith(f"Error: {file}: {message}"), line
    assert not root.exists()


def test_trial_without_result_is_rejected(invoke, root, tmp_path):
    job = _copy(tmp_path)
    (job / "log-summary__GTpnZUU" / "result.json").unlink()
    line = _error_line(invoke("ingest", "--format", "harbor", str(job)))
    assert line == (
        f"Error: {job / 'log-summary__GTpnZUU' / 'result.json'}: missing; the trial did not "
        "finish (Harbor writes it when a trial ends); resume the job with Harbor or remove the "
        "trial folder"
    )
    assert not root.exists()


def test_file_given_as_job_is_rejected(invoke):
    file = SONNET / "config.json"
    line = _error_line(invoke("ingest", "--format", "harbor", str(file)))
    assert line.startswith(f"Error: {file}: not a Harbor job directory")


def test_unknown_input_warns_and_input_flag_silences(invoke, tmp_path):
    job = _copy(tmp_path)
    config = json.loads((job / "config.json").read_text())
    config["datasets"][0]["version"] = None  # the registry's moving head: no version recorded
    (job / "config.json").write_text(json.dumps(config))
    warned = invoke("ingest", str(job))
    assert warned.exit_code == 0, warned.output
    assert (
        f"{job}: cohort inputs not recorded by the source, set to 'unknown': harness_package;"
        in warned.stderr
    )
    silenced = invoke("ingest", str(job), "--input", "harness_package=terminal-bench@2.0")
    assert silenced.exit_code == 0, silenced.output
    assert "cohort inputs not recorded" not in silenced.stderr
    assert "read 20 attempts: 20 new" in silenced.stdout  # a new cohort: other attempt ids


def test_older_job_without_locks_or_offsets(tmp_path):
    """Harbor before lock.json: no harbor version; naive timestamps (datetime.now())."""
    job = _copy(tmp_path)
    for lock in job.rglob("lock.json"):
        lock.unlink()
    for file in job.glob("*/result.json"):
        data = json.loads(file.read_text())
        for key in ("started_at", "finished_at"):
            data[key] = data[key].removesuffix("Z")
        for key in ("schema_version", "verifier_environment_mode", "step_results", "reward_valid"):
            data.pop(key)
        file.write_text(json.dumps(data))
    context = ImportContext()
    records = _read(job, context)
    old = records["regex-log__acnEKX7"]
    assert old["envelope"]["harness_version"] is None
    assert (old["started_at"], old["finished_at"], old["runtime_seconds"]) == (None, None, 84.0)
    assert old["repeat_index"] == 0 and records["regex-log__okSJBvH"]["repeat_index"] == 1
    assert old["inputs"]["grader_version"] == digest_json({})
    assert [r["terminal_class"] for r in records.values()].count("timeout") == 1
    assert any("carry no UTC offset" in w for w in context.warnings)
    assert context.unknown == {}


def test_missing_timestamps_give_an_unavailable_runtime(tmp_path):
    job = _copy(tmp_path)
    file = job / "fix-git__2JTRC7L" / "result.json"
    data = json.loads(file.read_text())
    data["finished_at"] = None
    file.write_text(json.dumps(data))
    context = ImportContext()
    record = _read(job, context)["fix-git__2JTRC7L"]
    assert record["runtime_seconds"] is None
    assert "runtime_seconds" not in record["labels"]
    assert record["finished_at"] is None
    assert len([w for w in context.warnings if "runtime is unavailable" in w]) == 1


def _trial(exceptions=(), rewards=None, steps=()):
    infos = [{"exception_type": name} for name in exceptions]
    return {
        "exception_info": infos[0] if infos else None,
        "step_results": [{"exception_info": {"exception_type": s}} for s in steps] or None,
        "verifier_result": None if rewards is None else {"rewards": rewards},
    }


@pytest.mark.parametrize(
    ("trial", "expected"),
    [
        (_trial(rewards={"reward": 1.0}), "resolved"),
        (_trial(rewards={"reward": 1}), "resolved"),
        (_trial(rewards={"reward": 0.99}), "model_failure"),
        (_trial(rewards={"reward": 0.0, "style": 1.0}), "model_failure"),
        (_trial(rewards={"tests": 1.0, "lint": 1.0}), "resolved"),
        (_trial(rewards={"tests": 1.0, "lint": 0.5}), "model_failure"),
        (_trial(rewards={}), "grader_failure"),
        (_trial(), "grader_failure"),
        (_trial(["AgentTimeoutError"], {"reward": 1.0}), "resolved"),
        (_trial(["AgentTimeoutError"], {"reward": 0.0}), "timeout"),
        (_trial(["AgentTimeoutError"]), "timeout"),
        (_trial(["ApiRateLimitError"], {"reward": 1.0}), "harness_failure"),
        (_trial(["AgentTimeoutError"], steps=["VerifierTimeoutError"]), "grader_failure"),
        (_trial(["ContextLengthExceededError"], steps=["CancelledError"]), "cancelled"),
        (_trial(steps=["OutputLengthExceededError", "AgentTimeoutError"]), "model_failure"),
    ],
    ids=[
        "reward-1",
        "reward-int-1",
        "reward-0.99",
        "reward-key-decides",
        "all-rewards-1",
        "one-reward-short",
        "empty-rewards",
        "no-verifier-result",
        "tests-passed-despite-agent-timeout",
        "timeout-with-failing-tests",
        "timeout-without-reward",
        "infra-beats-reward",
        "infra-beats-valid",
        "cancelled-beats-all",
        "first-valid",
    ],
)
def test_classification_rules(trial, expected):
    assert _classify(trial, Path("result.json"), ImportContext()) == expected


def test_unlisted_exception_is_harness_failure_with_a_warning():
    context = ImportContext()
    assert _classify(_trial(["KeyError"]), Path("r.json"), context) == "harness_failure"
    assert context.warnings == [
        "harbor: exception type 'KeyError' has no classification rule; imported as "
        "harness_failure (infrastructure-invalid)"
    ]


def test_every_harbor_error_policy_name_has_a_rule():
    # The names in harbor.models.trial.error_policy (0.26.0) plus older ones (0.1.x).
    text = (
        "EnvironmentStartTimeoutError SandboxBuildFailedError AgentSetupTimeoutError "
        "HealthcheckError SandboxLikelyOutOfMemoryError MemoryLimitExceededError SSHAccessError "
        "GKEExecStreamClosedError GKEPodNotFoundError RuntimeRequestError AddTestsDirError "
        "DownloadVerifierDirError ApiError ApiRateLimitError ApiInternalServerError "
        "ApiOverloadedError ApiConnectionClosedError ApiResponseStalledError UnknownApiError "
        "NetworkConnectionError ApiConnectionError ApiUsageLimitError RateLimitError "
        "InternalServerError ServiceUnavailableError APIConnectionError APIError Timeout "
        "UnsupportedModelParametersError BadRequestError UnprocessableEntityError "
        "UnsupportedParamsError APIResponseValidationError BudgetExceededError "
        "VerifierTimeoutError RewardFileNotFoundError RewardFileEmptyError "
        "VerifierOutputParseError AgentAuthenticationError ModelNotFoundError "
        "ApiProviderResourceNotFoundError AuthenticationError PermissionDeniedError NotFoundError "
        "ServiceOperationsUnsupportedError VercelScopeError DspyImportError MissingExtraError "
        "RegradeError CancelledError NonZeroAgentExitCodeError AgentTimeoutError "
        "ContextWindowExceededError OutputTokenExceededError ContextLengthExceededError "
        "OutputLengthExceededError AgentSafetyRefusalError ContentPolicyViolationError "
        "EnvironmentBuildTimeoutError"
    )
    assert sorted(n for n in text.split() if n not in EXCEPTION_CLASSES) == []


def test_report_and_compare_end_to_end(invoke):
    assert invoke("ingest", str(SONNET), str(GPT5)).exit_code == 0
    report = invoke("report", "--task", "hello-world")
    assert report.exit_code == 0, report.output
    assert "terminus-2 2.0.0 anthropic/claude-sonnet-4-5 harness harbor==0.26.0" in report.stdout
    assert "terminus-2 2.0.0 openai/gpt-5 harness harbor==0.26.0" in report.stdout
    compare = invoke(
        "compare", "--baseline", "model=claude-sonnet-4-5", "--candidate", "model=gpt-5"
    )
    assert compare.exit_code == 0, compare.output
    assert "baseline   model=claude-sonnet-4-5: 4/9 resolved of valid" in compare.stdout
    assert "candidate  model=gpt-5: 6/11 resolved of valid" in compare.stdout
    assert "paired     5 tasks" in compare.stdout
    by_experiment = invoke(
        "compare",
        "--baseline",
        "experiment=tb2-terminus-sonnet",
        "--candidate",
        "experiment=tb2-terminus-gpt5",
        "--format",
        "json",
    )
    assert by_experiment.exit_code == 0, by_experiment.output
