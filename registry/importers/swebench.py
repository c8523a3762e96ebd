"""SWE-bench evaluation runs: the harness's run report plus its per-instance logs.

`swebench.harness.run_evaluation` writes `<model>.<run_id>.json` (the run report, from
`make_run_report`) in the directory it ran in, next to
`logs/run_evaluation/<run_id>/<model>/<instance_id>/` holding `report.json`,
`run_instance.log`, `test_output.txt` and `patch.diff`. One instance of one run is one
attempt. The run report's id lists decide the class; the per-instance files, when present,
only say *why* an instance failed. Incomplete ids (no prediction) are not attempts.
docs/importers/swebench.md has the full mapping.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from registry.errors import InputFormatError
from registry.importers.base import ImportContext, read_json, with_identity
from registry.storage.digest import digest_file, digest_json
from registry_schemas import TerminalClass

RUN_LOGS = Path("logs", "run_evaluation")
OUTCOME_LISTS = ("resolved_ids", "empty_patch_ids", "unresolved_ids", "error_ids")
"""The lists that hold attempts, in precedence order."""
OTHER_LISTS = (
    "submitted_ids",
    "completed_ids",
    "incomplete_ids",
    "infra_failure_ids",
    "ambiguous_failure_ids",
)
APPLY_PATCH_FAIL = ">>>>> Patch Apply Failed"
TESTS_TIMED_OUT = re.compile(
    r"Timeout error: \d+ seconds exceeded|Test timed out after \d+ seconds"
)
ARTIFACTS = {
    "patch": "patch.diff",
    "report": "report.json",
    "run_instance_log": "run_instance.log",
    "test_output": "test_output.txt",
}
_SNIFF_LIMIT = 16 << 20
_NO_RUNTIME = (
    "swebench: the harness records no agent runtime; runtime is unavailable (runtime_seconds null)"
)


@dataclass
class _Run:
    """One run report and what sits next to it."""

    report: Path
    data: dict[str, Any]
    model: str
    run_id: str
    metadata: dict[str, Any] | None
    ids: dict[str, set[str]] = field(default_factory=dict)

    @property
    def log_dir(self) -> Path:
        """Directory holding this run's per-instance logs (may not exist)."""
        return self.report.parent / RUN_LOGS / self.run_id / self.model


@dataclass
class _Evidence:
    """What the per-instance log directory says about one instance."""

    report: dict[str, Any] | None = None
    report_unreadable: bool = False
    log: str = ""
    test_output: str | None = None
    found: bool = False
    artifacts: dict[str, str] = field(default_factory=dict)


class SwebenchImporter:
    """Reads a SWE-bench run report (file) or the directory `run_evaluation` ran in."""

    name = "swebench"

    def detect(self, path: Path) -> bool:
        """Whether `path` is a run report, or a directory holding one at its top level."""
        try:
            if path.is_dir():
                return any(_sniff(p) for p in sorted(path.glob("*.json")))
            return _sniff(path)
        except OSError:
            return False

    def read(self, path: Path, context: ImportContext) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield one record per evaluated instance of every run report under `path`.

        Raises:
            InputFormatError: no run report, or a report or log file is unreadable or foreign.
        """
        for report in _run_reports(path):
            run = _load_run(report, context)
            _warn_skipped(run, context)
            context.warn(_NO_RUNTIME)
            for task in sorted(set().union(*(run.ids[k] for k in OUTCOME_LISTS))):
                yield f"{report.name} instance {task}", _record(run, task, context)


def _sniff(path: Path) -> bool:
    if path.suffix.lower() != ".json" or not path.is_file():
        return False
    with open(path, "rb") as handle:
        head = handle.read(_SNIFF_LIMIT)
    has_ids = b'"submitted_ids"' in head or b'"completed_ids"' in head
    return head.lstrip()[:1] == b"{" and b'"resolved_ids"' in head and has_ids


def _run_reports(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    reports = [p for p in sorted(path.glob("*.json")) if _sniff(p)]
    if not reports:
        raise InputFormatError(
            f"{path}: holds no SWE-bench run report; expected <model>.<run_id>.json with "
            "resolved_ids and submitted_ids, as swebench.harness.run_evaluation writes it"
        )
    return reports


def _load_run(report: Path, context: ImportContext) -> _Run:
    data = read_json(report)
    ids = _id_lists(report, data)
    model, run_id = _name_parts(report, context)
    metadata_path = report.parent / RUN_LOGS / run_id / "run.json"
    metadata = read_json(metadata_path) if metadata_path.is_file() else None
    if metadata is not None and not isinstance(metadata, dict):
        raise InputFormatError(f"{metadata_path}: not a SWE-bench run.json; expected an object")
    run = _Run(report, data, model, run_id, metadata, ids)
    if not run.log_dir.is_dir():
        context.warn(
            f"{report}: no per-instance logs at {RUN_LOGS / run_id / model}; classes come from "
            "the run report's id lists alone"
        )
    return run


def _id_lists(report: Path, data: Any) -> dict[str, set[str]]:
    keys = data.keys() if isinstance(data, dict) else ()
    if "resolved_ids" not in keys or not {"submitted_ids", "completed_ids"} & set(keys):
        raise InputFormatError(
            f"{report}: not a SWE-bench run report (no resolved_ids and submitted_ids); "
            "expected the JSON object swebench.harness.run_evaluation writes"
        )
    ids = {}
    for key in (*OUTCOME_LISTS, *OTHER_LISTS):
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(i, str) and i for i in value):
            raise InputFormatError(f"{report}: {key} must be a list of instance ids")
        ids[key] = set(value)
    reasons = data.get("failure_reasons", {})
    if not isinstance(reasons, dict) or not all(isinstance(v, str) for v in reasons.values()):
        raise InputFormatError(f"{report}: failure_reasons must map instance ids to reasons")
    return ids


def _name_parts(report: Path, context: ImportContext) -> tuple[str, str]:
    """Split `<model>.<run_id>.json`; both parts may hold dots, so ask the logs first."""
    stem = report.name[: -len(report.suffix)]
    dots = [i for i, char in enumerate(stem) if char == "." and 0 < i < len(stem) - 1]
    splits = [(stem[:i], stem[i + 1 :]) for i in dots]
    if not splits:
        raise InputFormatError(
            f"{report}: cannot tell the model and run id from the file name; expected "
            "<model>.<run_id>.json as swebench.harness.run_evaluation names it"
        )
    runs = report.parent / RUN_LOGS
    with_model_logs = [(model, run) for model, run in splits if (runs / run / model).is_dir()]
    with_run_logs = [(model, run) for model, run in splits if (runs / run).is_dir()]
    for found in (with_model_logs, with_run_logs):
        if len(found) == 1:
            return found[0]
    if len(splits) > 1:
        context.warn(
            f"{report}: model and run id are ambiguous in the file name and no logs tell them "
            f"apart; read run id '{splits[-1][1]}' (the part after the last dot)"
        )
    return splits[-1]


def _warn_skipped(run: _Run, context: ImportContext) -> None:
    incomplete = run.ids["incomplete_ids"]
    if incomplete:
        context.warn(
            f"{run.report}: {len(incomplete)} incomplete instance(s) (in the dataset, no "
            "prediction) are not attempts and were not imported"
        )
    evaluated = set().union(*(run.ids[k] for k in OUTCOME_LISTS))
    unevaluated = run.ids["submitted_ids"] - evaluated
    if unevaluated:
        context.warn(
            f"{run.report}: {len(unevaluated)} submitted instance(s) are in no outcome list "
            "(not in the run's dataset) and were not imported"
        )


def _record(run: _Run, task: str, context: ImportContext) -> dict[str, Any]:
    evidence = _read_evidence(run, task)
    terminal_class, labels = _classify(run, task, evidence)
    record = {
        "experiment_id": run.run_id,
        "task_id": task,
        "repeat_index": 0,
        "inputs": context.inputs(str(run.report), _found_inputs(run)),
        "terminal_class": terminal_class.value,
        "envelope": {
            "agent": None,
            "agent_version": None,
            "provider": None,
            "model": run.model,
            "harness_version": None,
        },
        "runtime_seconds": None,
        "started_at": None,
        "finished_at": None,
        "cost_usd": None,
        "input_tokens": None,
        "output_tokens": None,
        "cached_input_tokens": None,
        "labels": {**labels, **_run_labels(run)},
        "artifacts": evidence.artifacts,
    }
    return with_identity(record)


def _found_inputs(run: _Run) -> dict[str, Any]:
    found: dict[str, Any] = {
        "agent_system_digest": digest_json({"swebench.model_name_or_path": run.model}),
    }
    meta = run.metadata or {}
    if isinstance(meta.get("dataset"), str) and isinstance(meta.get("split"), str):
        found["harness_package"] = f"{meta['dataset']}:{meta['split']}"
    return found


def _run_labels(run: _Run) -> dict[str, str]:
    labels = {}
    if "schema_version" in run.data:
        labels["swebench.schema_version"] = str(run.data["schema_version"])
    task_repo = (run.metadata or {}).get("task_repo")
    if isinstance(task_repo, str) and task_repo:
        labels["swebench.task_repo"] = task_repo
    return labels


def _read_evidence(run: _Run, task: str) -> _Evidence:
    directory = run.log_dir / task
    evidence = _Evidence(found=directory.is_dir())
    if not evidence.found:
        return evidence
    for name, filename in ARTIFACTS.items():
        if (directory / filename).is_file():
            evidence.artifacts[name] = digest_file(directory / filename)
    evidence.log = _text(directory / "run_instance.log") or ""
    evidence.test_output = _text(directory / "test_output.txt")
    _read_instance_report(directory / "report.json", task, evidence)
    return evidence


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot be read ({exc.strerror})") from None


def _read_instance_report(path: Path, task: str, evidence: _Evidence) -> None:
    """Parse `report.json` as `make_run_report` does: empty, invalid or keyless is unreadable."""
    text = _text(path)
    if text is None:
        return
    try:
        parsed = read_json(path) if text.strip() else None
    except InputFormatError:
        parsed = None
    entry = parsed.get(task) if isinstance(parsed, dict) else None
    if isinstance(entry, dict):
        evidence.report = entry
    else:
        evidence.report_unreadable = True


def _classify(run: _Run, task: str, evidence: _Evidence) -> tuple[TerminalClass, dict[str, str]]:
    outcome = next(k for k in OUTCOME_LISTS if task in run.ids[k])
    labels = {"swebench.outcome": outcome.removesuffix("_ids"), **_failure_labels(run, task)}
    report = evidence.report or {}
    if isinstance(report.get("infra_failure_reason"), str):
        labels.setdefault("swebench.failure_reason", report["infra_failure_reason"])
    if "patch_successfully_applied" in report:
        labels["swebench.patch_applied"] = str(bool(report["patch_successfully_applied"])).lower()
    if outcome in ("resolved_ids", "unresolved_ids") and evidence.report_unreadable:
        raise InputFormatError(
            f"{run.log_dir / task / 'report.json'}: unreadable, yet {run.report.name} lists "
            f"{task} in {outcome}; the logs do not belong to this run report"
        )
    if task in run.ids["infra_failure_ids"] or report.get("infra_failure") is True:
        return TerminalClass.ENVIRONMENT_FAILURE, labels
    if outcome == "resolved_ids":
        return TerminalClass.RESOLVED, labels
    if outcome == "empty_patch_ids" or report.get("patch_is_None") is True:
        return TerminalClass.MODEL_FAILURE, {**labels, "empty_patch": "true"}
    if outcome == "unresolved_ids":
        return TerminalClass.MODEL_FAILURE, labels
    timed_out = labels.get("swebench.failure_reason") == "tests_timed_out"
    terminal_class, cause = _error_cause(task in run.ids["completed_ids"], timed_out, evidence)
    return terminal_class, {**labels, "swebench.error": cause}


def _failure_labels(run: _Run, task: str) -> dict[str, str]:
    labels = {}
    reason = run.data.get("failure_reasons", {}).get(task)
    if task in run.ids["infra_failure_ids"]:
        labels["swebench.failure_tier"] = "environment"
    elif task in run.ids["ambiguous_failure_ids"]:
        labels["swebench.failure_tier"] = "ambiguous"
    if reason:
        labels["swebench.failure_reason"] = reason
    return labels


def _error_cause(
    completed: bool, timed_out: bool, evidence: _Evidence
) -> tuple[TerminalClass, str]:
    """Why an instance in `error_ids` has no verdict (docs/importers/swebench.md, rules E1-E6)."""
    if completed or evidence.report_unreadable:
        return TerminalClass.GRADER_FAILURE, "report_unreadable"
    if APPLY_PATCH_FAIL in evidence.log:
        return TerminalClass.MODEL_FAILURE, "patch_apply_failed"
    if timed_out or TESTS_TIMED_OUT.search(evidence.log + (evidence.test_output or "")):
        return TerminalClass.TIMEOUT, "tests_timed_out"
    if evidence.test_output is not None:
        return TerminalClass.GRADER_FAILURE, "report_missing"
    if evidence.found:
        return TerminalClass.HARNESS_FAILURE, "evaluation_failed"
    return TerminalClass.HARNESS_FAILURE, "no_logs"


IMPORTER = SwebenchImporter()
