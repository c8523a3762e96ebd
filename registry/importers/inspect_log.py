"""inspect_ai logs (`.eval`, `.json`) -> `registry.attempt/1` records.

Logs are read through inspect_ai's own `read_eval_log` (the surface its maintainers keep
stable), so inspect_ai is needed only when this format is read. One record per logged sample
(sample id x epoch), plus one `harness_failure` record per attempt that `retry_on_error`
discarded. A directory is read as a whole so that logs re-written by eval-set retries import
each attempt once. The mapping is documented, table by table, in docs/importers/inspect.md.
"""

from __future__ import annotations

import json
import math
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from registry.errors import InputFormatError
from registry.importers.base import ImportContext, hashable_values, with_identity
from registry.storage.digest import digest_json

_SNIFF_BYTES = 1 << 16
_LABEL_TEXT = 300
_HEAVY_FIELDS = {"messages", "events", "events_data", "store", "attachments", "output"}
_LIMIT_FIELDS = (
    "time_limit",
    "working_limit",
    "message_limit",
    "token_limit",
    "token_limit_type",
    "turn_limit",
    "cost_limit",
)
_LIMIT_CLASSES = {
    "time": "timeout",
    "working": "timeout",
    "token": "model_failure",
    "message": "model_failure",
    "turn": "model_failure",
    "cost": "model_failure",
    "context": "model_failure",
    "custom": "model_failure",
    "operator": "cancelled",
}
_GRADER_REASONS = {"grader_failed", "scoring_failed"}
_CANCELLED = re.compile(r"^(CancelledError|Cancelled|KeyboardInterrupt)\(|interrupted by operator")
_FRAME = re.compile(r'File "([^"]+)"')
_SANDBOX_PATH = re.compile(r"(^|[/\\])[^/\\]*sandbox[^/\\]*([/\\]|$)", re.IGNORECASE)
_ENVIRONMENT_TEXT = re.compile(r"sandbox|docker|kubernetes|\bk8s\b", re.IGNORECASE)
_FOREIGN_DATA = (".jsonl", ".ndjson", ".parquet")
_NO_USAGE = {
    "started_at": None,
    "finished_at": None,
    "input_tokens": None,
    "output_tokens": None,
    "cached_input_tokens": None,
    "cost_usd": None,
}


@dataclass
class _Log:
    """One log file as read: its path (and the part below the source), header and samples."""

    path: Path
    label: str
    log: Any

    @property
    def created(self) -> datetime:
        return datetime.fromisoformat(str(self.log.eval.created))


class InspectImporter:
    """Reader of inspect_ai evaluation logs."""

    name = "inspect"

    def detect(self, path: Path) -> bool:
        """Whether `path` is an inspect_ai log, or a directory of them (and nothing else)."""
        try:
            if path.is_file():
                return _is_log_file(path)
            files = [p for p in path.rglob("*") if _visible(p, path)]
            if any(p.suffix.lower() in _FOREIGN_DATA for p in files):
                return False
            return any(_is_log_file(p) for p in files)
        except OSError:
            return False

    def read(self, path: Path, context: ImportContext) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield one record per sample attempt found in the log(s) at `path`.

        Raises:
            InputFormatError: a file is not an inspect_ai log, cannot be read, or inspect_ai is
                not installed.
        """
        files = _log_files(path)
        api = _inspect_api(path)
        logs = [_read_log(api, file, _relative(file, path)) for file in files]
        source = str(path)
        for entry, sample in _select_samples(logs, context):
            yield from _sample_records(entry, sample, context, source)


def _visible(path: Path, top: Path) -> bool:
    return path.is_file() and not any(p.startswith(".") for p in path.relative_to(top).parts)


def _is_log_file(path: Path) -> bool:
    suffix = path.suffix.lower()
    if suffix == ".eval":
        return True
    return suffix == ".json" and _json_looks_like_log(path)


def _json_looks_like_log(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return False
    keys = _top_level_keys(head.decode("utf-8", errors="replace"))
    return "eval" in keys and bool(keys & {"status", "samples"})


def _top_level_keys(text: str) -> set[str]:
    """Return the keys of a JSON object's top level seen in `text` (a prefix of the file)."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return set()
    keys: set[str] = set()
    depth, start, in_string, escaped = 0, -1, False, False
    for index, char in enumerate(stripped):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                if depth == 1 and stripped[index + 1 :].lstrip().startswith(":"):
                    keys.add(stripped[start + 1 : index])
        elif char == '"':
            in_string, start = True, index
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                break
    return keys


def _log_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if _visible(p, path) and _is_log_file(p))
        if not files:
            raise InputFormatError(
                f"{path}: holds no inspect_ai log; expected .eval files or .json logs with "
                "top-level 'eval' and 'status' keys"
            )
        return files
    if not _is_log_file(path):
        raise InputFormatError(
            f"{path}: not an inspect_ai log; expected a .eval file or a .json log with "
            "top-level 'eval' and 'status' keys"
        )
    return [path]


def _relative(file: Path, top: Path) -> str:
    return file.relative_to(top).as_posix() if top.is_dir() else file.name


def _inspect_api(path: Path) -> Any:
    try:
        import inspect_ai.log as api
    except ImportError:
        raise InputFormatError(
            f"{path}: reading inspect_ai logs needs the inspect-ai package: "
            "pip install 'agent-evidence-registry[inspect]'"
        ) from None
    return api


def _read_log(api: Any, file: Path, label: str) -> _Log:
    # inspect_ai raises many types for a damaged file (zip, JSON, pydantic); all are bad input.
    _check_json(file)
    try:
        log = api.read_eval_log(str(file), exclude_fields=_HEAVY_FIELDS)
    except Exception as exc:
        detail = " ".join(str(exc).split())[:200] or type(exc).__name__
        raise InputFormatError(
            f"{file}: not a readable inspect_ai log ({detail}); expected a complete .eval or "
            ".json log written by inspect_ai"
        ) from None
    return _Log(file, label, log)


def _check_json(file: Path) -> None:
    """Refuse a log whose JSON (any member of an `.eval` archive) nests too deeply to read.

    inspect_ai streams logs with ijson, whose memory grows with the square of the nesting
    depth: a member nested 100,000 levels deep takes gigabytes before any error. The standard
    parser (which, like inspect_ai, accepts the NaN some scores hold) stops at Python's
    recursion limit, about 1,000 levels, so each member is parsed once here first. Any other
    damage is left for inspect_ai to report.
    """
    where = str(file)
    try:
        if file.suffix.lower() != ".eval":
            json.loads(file.read_bytes())
            return
        with zipfile.ZipFile(file) as archive:
            for member in archive.infolist():
                if member.filename.endswith(".json"):
                    where = f"{file} (member {member.filename})"
                    json.loads(archive.read(member))
    except RecursionError:
        raise InputFormatError(
            f"{where}: JSON nested too deeply to read; expected a log written by inspect_ai"
        ) from None
    except Exception:  # zip, zstd or JSON damage: inspect_ai names it below
        return


def _select_samples(logs: list[_Log], context: ImportContext) -> list[tuple[_Log, Any]]:
    """Return each attempt once: a uuid seen in several logs, or a sample re-run, counts once.

    An eval-set retry seeds the task's new log from its prior one: completed samples are copied
    (same uuid) and errored ones re-run, carrying the old error in `error_retries`. So for one
    inspect task id, the newest log holding a (sample id, epoch) has its whole history.
    """
    candidates: list[tuple[_Log, Any]] = []
    for entry in logs:
        if not entry.log.samples:
            context.warn(f"{entry.path}: the log holds no samples; nothing imported from it")
        candidates.extend((entry, sample) for sample in entry.log.samples or [])
    by_uuid: dict[Any, tuple[_Log, Any]] = {}
    for entry, sample in candidates:
        key = sample.uuid or (entry.label, sample.id, sample.epoch)
        if key not in by_uuid or _completeness(entry, sample) > _completeness(*by_uuid[key]):
            by_uuid[key] = (entry, sample)
    by_case: dict[Any, tuple[_Log, Any]] = {}
    for entry, sample in by_uuid.values():
        spec = entry.log.eval
        key = (spec.task_id or entry.label, spec.model, str(sample.id), sample.epoch)
        if key not in by_case or _generation(entry, sample) > _generation(*by_case[key]):
            by_case[key] = (entry, sample)
    return sorted(by_case.values(), key=lambda item: (item[0].label, _order(item[1])))


def _completeness(entry: _Log, sample: Any) -> tuple[Any, ...]:
    return (
        sample.error is None,
        bool(sample.scores),
        sample.completed_at is not None,
        entry.log.status == "success",
        entry.created,
        entry.label,
    )


def _generation(entry: _Log, sample: Any) -> tuple[Any, ...]:
    return (entry.created, *_completeness(entry, sample))


def _order(sample: Any) -> tuple[str, int]:
    return (str(sample.id), sample.epoch)


def _hashed_inputs(entry: _Log, sample: Any, where: str) -> dict[str, Any]:
    with hashable_values(where):
        return _found_inputs(entry.log, sample)


def _sample_records(
    entry: _Log, sample: Any, context: ImportContext, source: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    spec, where = entry.log.eval, f"{entry.label}: sample {sample.id} epoch {sample.epoch}"
    if not isinstance(sample.epoch, int) or sample.epoch < 1:
        raise InputFormatError(f"{where}: epoch {sample.epoch!r} is not a positive integer")
    base = {
        "experiment_id": spec.eval_set_id or spec.run_id or spec.eval_id,
        "task_id": f"{spec.task}/{sample.id}",
        "repeat_index": sample.epoch - 1,
        "inputs": context.inputs(source, _hashed_inputs(entry, sample, where)),
        "envelope": envelope_of(spec, entry.log.plan),
    }
    labels = _identity_labels(spec, sample)
    for number, retry in enumerate(sample.error_retries or [], start=1):
        context.warn(
            f"{source}: attempts discarded by retry_on_error record no timing; their runtime "
            "is unavailable (runtime_seconds null)"
        )
        retry_labels = {"inspect_retry": str(number), "inspect_error": _text(retry.message)}
        record = {
            **base,
            "terminal_class": "harness_failure",
            "runtime_seconds": None,
            **_NO_USAGE,
            "labels": {**labels, **retry_labels},
        }
        yield f"{where} (discarded attempt {number})", with_identity(record)
    labels.update(_outcome_labels(sample))
    yield where, with_identity({**base, **_outcome(entry, sample, context, source, labels)})


def _outcome(
    entry: _Log, sample: Any, context: ImportContext, source: str, labels: dict[str, str]
) -> dict[str, Any]:
    runtime = runtime_of(sample)
    if runtime is None:
        context.warn(
            f"{source}: some samples record no timing; their runtime is unavailable "
            "(runtime_seconds null)"
        )
    return {
        "terminal_class": classify_sample(sample, _primary_scorer(entry.log)),
        "runtime_seconds": runtime,
        "started_at": _timestamp(sample.started_at),
        "finished_at": _timestamp(sample.completed_at),
        **usage_of(sample.model_usage),
        "labels": labels,
    }


def classify_sample(sample: Any, primary_scorer: str | None) -> str:
    """Return the terminal class of a logged sample: invalidation, error, limit, then score."""
    if getattr(sample, "invalidation", None) is not None:
        return "invalid_case"
    if sample.error is not None:
        return classify_error(sample.error.message, sample.error.traceback)
    if sample.limit is not None:
        return _LIMIT_CLASSES.get(sample.limit.type, "model_failure")
    scores = sample.scores or {}
    name = primary_scorer if primary_scorer in scores else next(iter(scores), None)
    if name is None:
        return "grader_failure"  # nothing graded the attempt
    return classify_score(scores[name].value, getattr(scores[name], "reason", None))


def classify_error(message: str, traceback: str) -> str:
    """Return the class of a sample error: cancellation, sandbox/environment, else harness."""
    if _CANCELLED.search(message):
        return "cancelled"
    if any(_SANDBOX_PATH.search(frame) for frame in _FRAME.findall(traceback or "")):
        return "environment_failure"
    return "environment_failure" if _ENVIRONMENT_TEXT.search(message) else "harness_failure"


def classify_score(value: Any, reason: str | None) -> str:
    """Return `resolved` for a correct score, `grader_failure` for a failed grading."""
    if reason in _GRADER_REASONS:
        return "grader_failure"
    if _unscored(value):
        return "grader_failure"
    return "resolved" if _correct(value) else "model_failure"


def _unscored(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _correct(value: Any) -> bool:
    if isinstance(value, dict):
        return bool(value) and all(_correct(item) for item in value.values())
    if isinstance(value, list | tuple):
        return bool(value) and all(_correct(item) for item in value)
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value == 1
    return value == "C"


def _primary_scorer(log: Any) -> str | None:
    scorers = log.eval.scorers or []
    return scorers[0].name if scorers else None


def envelope_of(spec: Any, plan: Any) -> dict[str, str | None]:
    """Return the observed identity: model, inspect_ai version, solver and its version."""
    provider, _, model = str(spec.model).partition("/")
    agent = _agent_name(spec, plan)
    return {
        "agent": agent,
        "agent_version": _agent_version(spec, agent),
        "provider": provider if model else None,
        "model": model or provider,
        "harness_version": (spec.packages or {}).get("inspect_ai"),
    }


def _agent_name(spec: Any, plan: Any) -> str | None:
    if spec.solver:
        return str(spec.solver)
    if plan is None:
        return None
    if plan.name and plan.name != "plan":
        return str(plan.name)
    steps = [step.solver for step in plan.steps]
    return "+".join(steps) or None


def _agent_version(spec: Any, agent: str | None) -> str | None:
    package = agent.split("/", 1)[0] if agent and "/" in agent else None
    if package and package in (spec.packages or {}):
        return str(spec.packages[package])
    revision = spec.revision
    if revision is None or not revision.commit:
        return None
    return f"git:{revision.commit}" + ("+dirty" if revision.dirty else "")


def _found_inputs(log: Any, sample: Any) -> dict[str, Any]:
    spec = log.eval
    scorers = spec.scorers or []
    return {
        "case_digest": digest_json(_case(spec, sample)),
        "prompt_digest": digest_json(_prompt_configuration(spec, log.plan)),
        "tool_policy_digest": digest_json(
            {"approval": _dump(spec.config.approval), "plan": _dump(log.plan.steps)}
        ),
        "budget": budget_of(spec.config),
        "harness_package": ",".join(f"{k}=={v}" for k, v in sorted(spec.packages.items())),
        "grader_version": digest_json(_dump(scorers)) if scorers else None,
        "agent_system_digest": digest_json(_agent_system(spec, log.plan)),
        "environment_digest": _environment(spec.sandbox),
    }


def _case(spec: Any, sample: Any) -> dict[str, Any]:
    """The sample's own content: its input (the instruction), target, files, setup, sandbox."""
    case = {
        "task": spec.task,
        "task_version": spec.task_version,
        "task_args": _dump(spec.task_args),
        "dataset": {"name": spec.dataset.name, "location": spec.dataset.location},
        "sample_id": sample.id,
        "input": _prompt(sample.input),
        "target": sample.target,
        "choices": sample.choices,
        "files": sample.files,
        "setup": sample.setup,
    }
    if sample.sandbox is not None:
        case["sandbox"] = _dump(sample.sandbox)  # a per-sample environment is part of the case
    return case


def _prompt_configuration(spec: Any, plan: Any) -> dict[str, Any]:
    """The prompt the solver wraps every sample in: its steps' templates and system message.

    In inspect_ai, prompt templates and system prompts are solver parameters
    (`system_message(...)`, `prompt_template(...)`) or the `system_message` generate option,
    so this is the same for every sample of an eval; the sample's own input is in the case.
    """
    steps = [] if plan is None else plan.steps
    configs = [spec.model_generate_config, None if plan is None else plan.config]
    return {
        "scheme": "inspect.prompt/1",
        "solver": spec.solver,
        "solver_args": _dump(spec.solver_args),
        "steps": [{"solver": step.solver, "params": _dump(step.params)} for step in steps],
        "system_message": [getattr(config, "system_message", None) for config in configs],
    }


def _prompt(value: Any) -> Any:
    # Message ids are random per load of a dataset; the prompt is the messages without them.
    if isinstance(value, str):
        return value
    return [message.model_dump(mode="json", exclude_none=True, exclude={"id"}) for message in value]


def _agent_system(spec: Any, plan: Any) -> dict[str, Any]:
    return {
        "solver": spec.solver,
        "solver_args": _dump(spec.solver_args),
        "plan": _dump(plan),
        "model_generate_config": _dump(spec.model_generate_config),
        "model_roles": _dump(spec.model_roles),
    }


def _environment(sandbox: Any) -> str:
    return "none" if sandbox is None else digest_json(_dump(sandbox))


def budget_of(config: Any) -> dict[str, Any]:
    """Return the limits an eval ran under as an object (absent limits are left out)."""
    limits = {name: getattr(config, name, None) for name in _LIMIT_FIELDS}
    return {name: value for name, value in limits.items() if value is not None}


def _dump(value: Any) -> Any:
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list | tuple):
        return [_dump(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _dump(item) for key, item in value.items()}
    return value


def runtime_of(sample: Any) -> float | None:
    """Return the sample's runtime: total time, else working time, else completed - started."""
    for value in (sample.total_time, sample.working_time):
        if value is not None and math.isfinite(value) and value >= 0:
            return float(value)
    if sample.started_at and sample.completed_at:
        start = datetime.fromisoformat(str(sample.started_at))
        seconds = (datetime.fromisoformat(str(sample.completed_at)) - start).total_seconds()
        return seconds if seconds >= 0 else None
    return None


def usage_of(model_usage: dict[str, Any]) -> dict[str, Any]:
    """Return tokens and cost summed over every model the sample used (null when absent)."""
    usages = list((model_usage or {}).values())
    costs = [usage.total_cost for usage in usages]
    return {
        "input_tokens": _total([usage.input_tokens for usage in usages]),
        "output_tokens": _total([usage.output_tokens for usage in usages]),
        "cached_input_tokens": _total([usage.input_tokens_cache_read for usage in usages]),
        "cost_usd": math.fsum(costs) if costs and None not in costs else None,
    }


def _total(values: list[int | None]) -> int | None:
    known = [value for value in values if value is not None]
    return sum(known) if known else None


def _timestamp(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if isinstance(value, datetime) else str(value)


def _identity_labels(spec: Any, sample: Any) -> dict[str, str]:
    labels = {
        "inspect_task": str(spec.task),
        "inspect_sample_id": str(sample.id),
        "inspect_epoch": str(sample.epoch),
    }
    if sample.uuid:
        labels["inspect_sample_uuid"] = sample.uuid
    return labels


def _outcome_labels(sample: Any) -> dict[str, str]:
    labels = {}
    for name, score in (sample.scores or {}).items():
        labels[f"inspect_score.{name}"] = _value_text(score.value)
        if getattr(score, "reason", None):
            labels[f"inspect_score_reason.{name}"] = str(score.reason)
    if sample.limit is not None:
        labels["inspect_limit"] = str(sample.limit.type)
    if sample.error is not None:
        labels["inspect_error"] = _text(sample.error.message)
    invalidation = getattr(sample, "invalidation", None)
    if invalidation is not None:
        labels["inspect_invalidated_by"] = str(invalidation.author)
        labels["inspect_invalidation_reason"] = _text(invalidation.reason or "")
    return labels


def _value_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if _unscored(value):
        return "NaN"
    return json.dumps(_dump(value), sort_keys=True)


def _text(message: str) -> str:
    return " ".join(str(message).split())[:_LABEL_TEXT]


IMPORTER = InspectImporter()
