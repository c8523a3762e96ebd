"""Harbor jobs: one `registry.attempt/1` record per trial folder of a job directory.

A Harbor job directory holds `config.json` (the `JobConfig`), `result.json` (the `JobResult`),
`lock.json` (the `JobLock`, absent before Harbor recorded locks) and one folder per trial with
its own `result.json` (the `TrialResult`) and, in recent versions, `lock.json` (`TrialLock`).
A folder of job directories (Harbor's `jobs_dir`) is read job by job.
The mapping, the exception table and the reward threshold are documented, rule by rule, in
docs/importers/harbor.md; this module and that table change together.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from registry.errors import InputFormatError
from registry.importers.base import ImportContext, hashable_values, read_json, with_identity
from registry.storage.canonical import canonical_json
from registry.storage.digest import digest_json
from registry_schemas import INVALID_CLASSES, format_timestamp

_GROUPS = {
    "timeout": "AgentTimeoutError",
    "model_failure": (
        "ContextLengthExceededError ContextWindowExceededError OutputLengthExceededError "
        "OutputTokenExceededError NonZeroAgentExitCodeError BudgetExceededError"
    ),
    "safety_failure": "AgentSafetyRefusalError ContentPolicyViolationError",
    "environment_failure": (
        "SandboxBuildFailedError EnvironmentStartTimeoutError EnvironmentBuildTimeoutError "
        "AgentSetupTimeoutError HealthcheckError SandboxLikelyOutOfMemoryError "
        "MemoryLimitExceededError SSHAccessError GKEExecStreamClosedError GKEPodNotFoundError "
        "RuntimeRequestError ServiceOperationsUnsupportedError VercelScopeError"
    ),
    "harness_failure": (
        "ApiError ApiRateLimitError ApiUsageLimitError ApiInternalServerError "
        "ApiOverloadedError ApiConnectionClosedError ApiResponseStalledError UnknownApiError "
        "NetworkConnectionError ApiConnectionError RateLimitError InternalServerError "
        "ServiceUnavailableError APIConnectionError APIError Timeout BadRequestError "
        "UnprocessableEntityError UnsupportedParamsError UnsupportedModelParametersError "
        "APIResponseValidationError AgentAuthenticationError AuthenticationError "
        "PermissionDeniedError ModelNotFoundError NotFoundError "
        "ApiProviderResourceNotFoundError MissingExtraError DspyImportError RegradeError"
    ),
    "grader_failure": (
        "VerifierTimeoutError RewardFileNotFoundError RewardFileEmptyError "
        "VerifierOutputParseError AddTestsDirError DownloadVerifierDirError"
    ),
    "cancelled": "CancelledError",
}
EXCEPTION_CLASSES = {name: cls for cls, names in _GROUPS.items() for name in names.split()}
"""Harbor `exception_info.exception_type` -> terminal class (docs/importers/harbor.md)."""
UNLISTED_EXCEPTION_CLASS = "harness_failure"
RESOLVED_REWARD = 1.0
"""A trial is resolved when its reward reaches this value (see `_passed`)."""
MOVING_VERSIONS = ("head", "latest")
_INVALID = {str(c) for c in INVALID_CLASSES}
_BUDGET_DEFAULTS = {"cpu_enforcement_policy": "auto", "memory_enforcement_policy": "auto"}
_AGENT_ELSEWHERE = {
    "override_timeout_sec",  # budget
    "override_setup_timeout_sec",  # budget
    "max_timeout_sec",  # budget
    "skills",  # wiki_digest
    "mcp_servers",  # tool_policy_digest
    "extra_allowed_hosts",  # tool_policy_digest
    "n_concurrent",  # scheduling only
    "concurrency_group",  # scheduling only
    "include_logs",  # log download only
    "exclude_logs",  # log download only
}
_SECRET_KEYS = {"env", "headers"}
_AGENT_TIMEOUTS = ("override_timeout_sec", "override_setup_timeout_sec", "max_timeout_sec")


@dataclass
class _Job:
    """What the job-level files say."""

    path: Path
    name: str
    job_id: str | None
    config: dict[str, Any]
    harbor_version: str | None
    n_total_trials: int | None


@dataclass
class _Trial:
    """One trial folder: its result, its lock (if any) and where it was read."""

    location: str
    file: Path
    result: dict[str, Any]
    lock: dict[str, Any]
    agent_system: str = ""
    order: tuple[Any, ...] = field(default_factory=tuple)


class HarborImporter:
    """Reads a Harbor job directory, or a folder of them (Harbor's `jobs/`)."""

    name = "harbor"

    def detect(self, path: Path) -> bool:
        """Whether `path` is a Harbor job directory or holds one directly inside."""
        try:
            return path.is_dir() and (_is_job(path) or any(_is_job(c) for c in _subdirs(path)))
        except (OSError, ValueError):
            return False

    def read(self, path: Path, context: ImportContext) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield one record per trial folder, job by job, in folder-name order.

        Raises:
            InputFormatError: `path` is not a Harbor job, or a file in it is missing,
                truncated or of another shape.
        """
        for job_path in _job_dirs(path, context):
            yield from _read_job_records(path, job_path, context)


IMPORTER = HarborImporter()


def _is_job(path: Path) -> bool:
    """Job config with `job_name`, job result with `n_total_trials`, a finished trial."""
    try:
        config = orjson.loads((path / "config.json").read_bytes())
        result = orjson.loads((path / "result.json").read_bytes())
    except (OSError, ValueError):
        return False
    return (
        isinstance(config, dict)
        and "job_name" in config
        and isinstance(result, dict)
        and "n_total_trials" in result
        and any((child / "result.json").is_file() for child in _subdirs(path))
    )


def _subdirs(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))


def _job_dirs(path: Path, context: ImportContext) -> list[Path]:
    if not path.is_dir():
        raise InputFormatError(
            f"{path}: not a Harbor job directory; pass the job folder holding config.json, "
            "result.json and one folder per trial (or a folder of job folders)"
        )
    if (path / "config.json").exists():
        return [path]
    jobs = [child for child in _subdirs(path) if (child / "config.json").is_file()]
    if not jobs:
        raise InputFormatError(
            f"{path}: neither a Harbor job directory (no config.json) nor a folder of them"
        )
    if skipped := [child.name for child in _subdirs(path) if child not in jobs]:
        context.warn(f"{path}: skipped folders that are not Harbor jobs: {', '.join(skipped)}")
    return jobs


def _read_job_records(
    top: Path, path: Path, context: ImportContext
) -> Iterator[tuple[str, dict[str, Any]]]:
    job = _read_job(path)
    trials = [_read_trial(top, folder) for folder in _subdirs(path)]
    if not trials:
        raise InputFormatError(
            f"{path}: Harbor job has no trial folders; expected one folder per trial"
        )
    if job.n_total_trials is not None and len(trials) < job.n_total_trials:
        context.warn(
            f"{path}: Harbor job planned {job.n_total_trials} trials but holds "
            f"{len(trials)}; importing those"
        )
    repeats = _repeat_indices(trials)
    for trial in trials:
        with hashable_values(trial.file):
            record = _record(job, trial, repeats[trial.location], context)
        yield trial.location, record


def _read_job(path: Path) -> _Job:
    config = read_json(path / "config.json")
    if not isinstance(config, dict) or not isinstance(config.get("job_name"), str):
        raise InputFormatError(
            f"{path / 'config.json'}: not a Harbor job config (no 'job_name'); expected the "
            "JobConfig Harbor writes in a job directory"
        )
    result = read_json(path / "result.json")
    if not isinstance(result, dict) or not isinstance(result.get("n_total_trials"), int):
        raise InputFormatError(
            f"{path / 'result.json'}: not a Harbor job result (no 'n_total_trials'); expected "
            "the JobResult Harbor writes in a job directory"
        )
    lock = _read_optional(path / "lock.json")
    harbor = _section(lock, "harbor")
    return _Job(
        path=path,
        name=config["job_name"] or path.name,
        job_id=_text(result.get("id")),
        config=config,
        harbor_version=_harbor_version(harbor),
        n_total_trials=result["n_total_trials"],
    )


def _harbor_version(harbor: dict[str, Any]) -> str | None:
    """`harbor==<version>`, plus `+git.<commit>` for an editable install (its checkout ran)."""
    version = _text(harbor.get("version"))
    if version is None:
        return None
    commit = _text(harbor.get("git_commit_hash"))
    return f"harbor=={version}" + (f"+git.{commit}" if harbor.get("is_editable") and commit else "")


def _read_optional(file: Path) -> dict[str, Any]:
    """Return a lock file's object, `{}` when the file is absent (older Harbor)."""
    if not file.exists():
        return {}
    value = read_json(file)
    if not isinstance(value, dict):
        raise InputFormatError(f"{file}: not a Harbor lock (expected a JSON object)")
    return value


def _read_trial(top: Path, folder: Path) -> _Trial:
    file = folder / "result.json"
    if not file.exists():
        raise InputFormatError(
            f"{file}: missing; the trial did not finish (Harbor writes it when a trial ends); "
            "resume the job with Harbor or remove the trial folder"
        )
    result = read_json(file)
    _check_trial(result, file)
    location = file.relative_to(top).as_posix()
    trial = _Trial(location, file, result, _read_optional(folder / "lock.json"))
    with hashable_values(file):
        trial.agent_system = _agent_system_digest(result["config"])
    started = _timestamp(result.get("started_at"), file, "started_at")
    trial.order = (
        result["task_name"],
        _text(result.get("source")) or "",
        trial.agent_system,
        started is None,
        _sortable(started),
        result["trial_name"],
    )
    return trial


def _check_trial(result: Any, file: Path) -> None:
    if not isinstance(result, dict):
        raise InputFormatError(f"{file}: not a Harbor trial result (expected a JSON object)")
    for key, kind in (
        ("trial_name", str),
        ("task_name", str),
        ("config", dict),
        ("agent_info", dict),
    ):
        if not isinstance(result.get(key), kind):
            raise InputFormatError(
                f"{file}: not a Harbor trial result ('{key}' missing or not a "
                f"{'string' if kind is str else 'object'}); expected the TrialResult Harbor "
                "writes in each trial folder"
            )
    if not result["task_name"] or not isinstance(result["agent_info"].get("name"), str):
        raise InputFormatError(f"{file}: Harbor trial result has no task_name or agent name")


def _repeat_indices(trials: list[_Trial]) -> dict[str, int]:
    """Number the trials of one task and agent system 0, 1, ... in the order they started."""
    counts: dict[tuple[Any, ...], int] = {}
    indices = {}
    for trial in sorted(trials, key=lambda t: t.order):
        group = trial.order[:3]
        indices[trial.location] = counts.get(group, 0)
        counts[group] = indices[trial.location] + 1
    return indices


def _record(job: _Job, trial: _Trial, repeat: int, context: ImportContext) -> dict[str, Any]:
    result = trial.result
    record = {
        "experiment_id": job.name,
        "task_id": result["task_name"],
        "repeat_index": repeat,
        "inputs": context.inputs(str(job.path), _found_inputs(job, trial)),
        "terminal_class": _classify(result, trial.file, context),
        "envelope": _envelope(result["agent_info"], job.harbor_version),
        **_timing(result, trial.file, context),
        **_usage(result, trial.file),
        "labels": _labels(job, result, trial.file),
    }
    return with_identity(record)


def _classify(result: dict[str, Any], file: Path, context: ImportContext) -> str:
    """Exceptions decide first (cancelled, then infrastructure, then the first); then reward.

    One exception to the order: an agent that timed out but whose tests pass (reward 1.0) is
    resolved, as terminal-bench and Harbor's own pass@k count it; the timeout stays in the
    `harbor.exception` label.
    """
    classes = [_exception_class(name, context) for name in _exception_types(result, file)]
    if "cancelled" in classes:
        return "cancelled"
    invalid = [c for c in classes if c in _INVALID]
    if invalid:
        return invalid[0]
    rewards = _rewards(result, file)
    if classes and not (set(classes) == {"timeout"} and rewards and _passed(rewards)):
        return classes[0]
    if not rewards:
        return "grader_failure"
    return "resolved" if _passed(rewards) else "model_failure"


def _exception_types(result: dict[str, Any], file: Path) -> list[str]:
    infos = [result.get("exception_info")]
    steps = result.get("step_results") or []
    if not isinstance(steps, list):
        raise InputFormatError(f"{file}: 'step_results' is not a list")
    infos += [step.get("exception_info") for step in steps if isinstance(step, dict)]
    names = []
    for info in infos:
        if info is None:
            continue
        if not isinstance(info, dict) or not isinstance(info.get("exception_type"), str):
            raise InputFormatError(f"{file}: 'exception_info' has no exception_type string")
        names.append(info["exception_type"])
    return names


def _exception_class(name: str, context: ImportContext) -> str:
    if name not in EXCEPTION_CLASSES:
        context.warn(
            f"harbor: exception type '{name}' has no classification rule; imported as "
            f"{UNLISTED_EXCEPTION_CLASS} (infrastructure-invalid)"
        )
    return EXCEPTION_CLASSES.get(name, UNLISTED_EXCEPTION_CLASS)


def _rewards(result: dict[str, Any], file: Path) -> dict[str, float]:
    verifier = result.get("verifier_result") or {}
    rewards = verifier.get("rewards") if isinstance(verifier, dict) else None
    if rewards is None:
        return {}
    if not isinstance(rewards, dict) or not all(_is_number(v) for v in rewards.values()):
        raise InputFormatError(f"{file}: 'verifier_result.rewards' is not an object of numbers")
    return rewards


def _passed(rewards: dict[str, float]) -> bool:
    """The `reward` key when present (Harbor's reward.txt), else every reward, reaches 1.0."""
    if "reward" in rewards:
        return rewards["reward"] >= RESOLVED_REWARD
    return all(value >= RESOLVED_REWARD for value in rewards.values())


def _envelope(agent_info: dict[str, Any], harbor_version: str | None) -> dict[str, Any]:
    model = _section(agent_info, "model_info")
    version = _text(agent_info.get("version"))
    return {
        "agent": agent_info["name"],
        "agent_version": None if version == "unknown" else version,
        "provider": _text(model.get("provider")),
        "model": _text(model.get("name")),
        "harness_version": harbor_version,
    }


def _found_inputs(job: _Job, trial: _Trial) -> dict[str, Any]:
    result, lock = trial.result, trial.lock
    config = result["config"]
    case = _case_digest(result, lock)
    return {
        "case_digest": case,
        "prompt_digest": _prompt_digest(config, lock, trial.file),
        "source_digest": _source_digest(result, lock),
        "wiki_digest": _wiki_digest(_section(config, "agent"), lock),
        "tool_policy_digest": _tool_policy_digest(config),
        "budget": _budget(config),
        "harness_package": _harness_package(job.config, result.get("source")),
        "grader_version": _grader_version(result, lock),
        "agent_system_digest": trial.agent_system,
        "environment_digest": _environment_digest(config, lock),
    }


def _case_digest(result: dict[str, Any], lock: dict[str, Any]) -> str | None:
    if isinstance(result.get("task_checksum"), str) and result["task_checksum"]:
        return f"dirhash-sha256:{result['task_checksum']}"
    return _text(_section(lock, "task").get("digest"))


def _prompt_digest(config: dict[str, Any], lock: dict[str, Any], file: Path) -> str | None:
    """The job's extra instructions, in order: what the job adds to every task's instruction.

    The task's own instruction is part of the task folder, so of `case_digest`; the agent's
    own prompt template is part of its configuration (`agent_system_digest`).
    """
    if isinstance(lock.get("extra_instructions"), list):
        extras = [_digest_of(item) for item in lock["extra_instructions"]]
    elif config.get("extra_instruction_paths"):
        return None  # file contents recorded only in lock.json
    else:
        texts = config.get("extra_instructions") or []
        if not isinstance(texts, list):
            raise InputFormatError(
                f"{file}: config.extra_instructions is not a list; expected the instruction "
                "texts Harbor records"
            )
        extras = ["sha256:" + hashlib.sha256(str(t).encode()).hexdigest() for t in texts]
    return digest_json({"scheme": "harbor.prompt/1", "extra_instructions": extras})


def _source_digest(result: dict[str, Any], lock: dict[str, Any]) -> str | None:
    task_lock = _section(lock, "task")
    task_id = _section(result, "task_id")
    commit = task_lock.get("git_commit_id") or task_id.get("git_commit_id")
    if commit:
        return f"git:{commit}"
    ref = task_id.get("ref")
    if task_id.get("org") and isinstance(ref, str) and ref.startswith("sha256:"):
        return f"package:{task_id['org']}/{task_id.get('name')}@{ref}"
    if task_lock.get("type") == "package" and task_lock.get("digest"):
        return f"package:{task_lock.get('name')}@{task_lock['digest']}"
    return None


def _wiki_digest(agent: dict[str, Any], lock: dict[str, Any]) -> str | None:
    if not agent.get("skills"):
        return "none"
    skills = lock.get("skills")
    if not isinstance(skills, list) or not skills:
        return None  # skill contents are recorded only in lock.json
    return digest_json(sorted([s.get("name"), s.get("digest")] for s in skills))


def _tool_policy_digest(config: dict[str, Any]) -> str:
    agent = _section(config, "agent")
    return digest_json(
        _declared(
            {
                "mcp_servers": agent.get("mcp_servers"),
                "agent_extra_allowed_hosts": agent.get("extra_allowed_hosts"),
                "environment_extra_allowed_hosts": _section(config, "environment").get(
                    "extra_allowed_hosts"
                ),
            }
        )
    )


def _budget(config: dict[str, Any]) -> dict[str, Any]:
    agent, verifier = _section(config, "agent"), _section(config, "verifier")
    environment = _section(config, "environment")
    multipliers = [k for k in config if k == "timeout_multiplier" or k.endswith("_multiplier")]
    resources = [k for k in environment if k.startswith("override_") or "enforcement" in k]
    budget = {
        **{key: config[key] for key in sorted(multipliers)},
        "agent": {k: agent.get(k) for k in _AGENT_TIMEOUTS},
        "verifier": {k: verifier.get(k) for k in ("override_timeout_sec", "max_timeout_sec")},
        "environment": {
            k: environment[k] for k in resources if environment[k] != _BUDGET_DEFAULTS.get(k)
        },
    }
    declared: dict[str, Any] = _declared(budget)
    return declared


def _harness_package(job_config: dict[str, Any], source: Any) -> str | None:
    for dataset in job_config.get("datasets") or []:
        if not isinstance(dataset, dict) or source is None:
            continue
        name = dataset.get("name") or Path(str(dataset.get("path") or "")).name
        version = dataset.get("version") or dataset.get("ref")
        if name == source and version and version not in MOVING_VERSIONS:
            return f"{name}@{version}"
    return None


def _grader_version(result: dict[str, Any], lock: dict[str, Any]) -> str:
    verifier = _section(result["config"], "verifier")
    mode = result.get("verifier_environment_mode") or _section(lock, "verifier").get(
        "environment_mode"
    )
    declared = {k: verifier.get(k) for k in ("import_path", "kwargs", "env", "disable")}
    return digest_json(_declared({**declared, "environment_mode": mode}))


def _agent_system_digest(config: dict[str, Any]) -> str:
    agent = {k: v for k, v in _section(config, "agent").items() if k not in _AGENT_ELSEWHERE}
    return digest_json(_declared({"agent": agent, "user_agent": config.get("user_agent")}))


def _environment_digest(config: dict[str, Any], lock: dict[str, Any]) -> str | None:
    environment = _section(config, "environment")
    compose: Any = environment.get("extra_docker_compose")
    if compose:
        locked = lock.get("extra_docker_compose")
        if not isinstance(locked, list):
            return None  # overlay contents are recorded only in lock.json
        compose = [_digest_of(item) for item in locked]
    keys = ("type", "import_path", "kwargs", "mounts", "env")
    return digest_json(
        _declared({**{k: environment.get(k) for k in keys}, "extra_docker_compose": compose})
    )


def _timing(result: dict[str, Any], file: Path, context: ImportContext) -> dict[str, Any]:
    started = _timestamp(result.get("started_at"), file, "started_at")
    finished = _timestamp(result.get("finished_at"), file, "finished_at")
    if started is None or finished is None:
        context.warn(
            "harbor: a trial has no started_at or finished_at; its runtime is unavailable "
            "(runtime_seconds null)"
        )
        return {
            "runtime_seconds": None,
            "started_at": _aware(started),
            "finished_at": _aware(finished),
        }
    if (started.tzinfo is None) != (finished.tzinfo is None):
        raise InputFormatError(f"{file}: started_at and finished_at mix offsets and naive times")
    runtime = (finished - started).total_seconds()
    if runtime < 0:
        raise InputFormatError(f"{file}: finished_at is earlier than started_at")
    if started.tzinfo is None:
        context.warn(
            "harbor: trial timestamps carry no UTC offset (older Harbor); started_at and "
            "finished_at left null, runtime_seconds taken from their difference"
        )
    return {
        "runtime_seconds": runtime,
        "started_at": _aware(started),
        "finished_at": _aware(finished),
    }


def _timestamp(value: Any, file: Path, name: str) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(str(value))
    except ValueError:
        raise InputFormatError(f"{file}: '{name}' is not an ISO 8601 timestamp") from None


def _aware(value: datetime | None) -> str | None:
    return format_timestamp(value) if value is not None and value.tzinfo else None


def _sortable(value: datetime | None) -> float:
    if value is None:
        return 0.0
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def _usage(result: dict[str, Any], file: Path) -> dict[str, Any]:
    """Token and cost totals, summed as Harbor does (trial context, else per-step contexts)."""
    contexts = [result.get("agent_result")]
    if contexts[0] is None:
        steps = result.get("step_results") or []
        contexts = [s.get("agent_result") for s in steps if isinstance(s, dict)]
    totals: dict[str, Any] = dict.fromkeys(
        ("input_tokens", "output_tokens", "cached_input_tokens", "cost_usd")
    )
    fields = {
        "n_input_tokens": "input_tokens",
        "n_output_tokens": "output_tokens",
        "n_cache_tokens": "cached_input_tokens",
        "cost_usd": "cost_usd",
    }
    for context in (c for c in contexts if c is not None):
        if not isinstance(context, dict):
            raise InputFormatError(f"{file}: 'agent_result' is not an object")
        for source, target in fields.items():
            value = context.get(source)
            if value is None:
                continue
            if not _is_number(value) or (target != "cost_usd" and not isinstance(value, int)):
                raise InputFormatError(f"{file}: 'agent_result.{source}' is not a number")
            totals[target] = (totals[target] or 0) + value
    return totals


def _labels(job: _Job, result: dict[str, Any], file: Path) -> dict[str, str]:
    labels = {
        "harbor.trial_name": result["trial_name"],
        "harbor.trial_id": _text(result.get("id")),
        "harbor.job_id": job.job_id,
        "harbor.dataset": _text(result.get("source")),
    }
    exceptions = _exception_types(result, file)
    if exceptions:
        labels["harbor.exception"] = ",".join(exceptions)
    verifier = result.get("verifier_result")
    if isinstance(verifier, dict) and verifier.get("rewards") is not None:
        labels["harbor.rewards"] = canonical_json(verifier["rewards"]).decode()
    source_trial = _section(result["config"], "source_trial")
    if source_trial:
        labels["harbor.regrade_of"] = _text(
            source_trial.get("trial_id") or source_trial.get("path")
        )
    return {k: v for k, v in labels.items() if v is not None}


def _declared(value: Any) -> Any:
    """Return a declared setting without its unset parts (null, false, empty) or credentials.

    A default written out by a newer Harbor and the same default left out by an older one
    then digest the same.
    """
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            item = _masked(item) if key in _SECRET_KEYS else _declared(item)
            if not _unset(item):
                out[key] = item
        return out
    if isinstance(value, list):
        return [_declared(item) for item in value]
    return value


def _unset(value: Any) -> bool:
    # Not `value in (None, False, ...)`: 0 == False, and a setting of 0 is a declared value.
    return value is None or value is False or (isinstance(value, str | list | dict) and not value)


def _masked(value: Any) -> Any:
    """Credentials are not configuration: templated (`${KEY}`) or redacted values are masked."""
    if not isinstance(value, dict):
        return _declared(value)
    return {
        k: "<credential>" if isinstance(v, str) and ("${" in v or "****" in v) else v
        for k, v in value.items()
    }


def _section(document: dict[str, Any], key: str) -> dict[str, Any]:
    value = document.get(key)
    return value if isinstance(value, dict) else {}


def _digest_of(locked: Any) -> Any:
    return locked.get("digest") if isinstance(locked, dict) else locked


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
