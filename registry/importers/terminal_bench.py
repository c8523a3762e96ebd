"""terminal-bench importer: the run folders `tb run` writes under its output path.

A run folder holds `run_metadata.json` (who ran what), `results.json` (the run-level
`BenchmarkResults`: every trial plus the run's `accuracy`), usually `tb.lock` (the harness
version and run configuration) and one folder per trial, `<task>/<trial name>/results.json`.
The run-level list is the source of record; trial folders only supply trials missing from it
(an interrupted run). The same run found twice (a copy nested in another folder) is imported
once. Records depend only on the run's content, never on where the folder was found, so a
copy ingested later adds nothing. docs/importers/terminal-bench.md has the full mapping.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from registry.errors import InputFormatError
from registry.importers.base import ImportContext, hashable_values, read_json, with_identity
from registry.storage.digest import digest_json

RUN_METADATA = "run_metadata.json"
RESULTS = "results.json"
LOCK = "tb.lock"
CLASS_BY_FAILURE_MODE = {
    "agent_timeout": "timeout",
    "context_length_exceeded": "model_failure",
    "output_length_exceeded": "model_failure",
    "fatal_llm_parse_error": "model_failure",
    "parse_error": "grader_failure",
    "test_timeout": "grader_failure",
    "agent_installation_failed": "environment_failure",
    "unknown_agent_error": "harness_failure",
    "unknown": "harness_failure",
}
"""Terminal class of a trial that did not pass, by `failure_mode` (terminal_bench FailureMode)."""
NO_FAILURE_MODES = ("unset", "none")
FAILURE_MODES = (*NO_FAILURE_MODES, *CLASS_BY_FAILURE_MODE)
BARE_SUFFIX = "_results.json"
_ATTEMPT = re.compile(r"(\d+)-of-(\d+)(?:\.|$)")
_RUN_SUFFIX = re.compile(r"\d+-of-\d+\.(.+)$")
_LIST_START = re.compile(rb'"results"\s*:\s*\[')
_SNIFF_BYTES = 1 << 16
_FOREIGN_DATA = (".jsonl", ".ndjson", ".parquet", ".eval")
_ANY_ATTEMPT = re.compile(r"\.(\d+)-of-(\d+)(?:\.|$)")
_COUNTS = ("total_input_tokens", "total_output_tokens")
_TIMES = ("trial_started_at", "trial_ended_at")


def classify(is_resolved: bool | None, failure_mode: str) -> str:
    """Return the terminal class of a trial from `is_resolved` and `failure_mode`.

    Passing tests win over any failure mode (an agent timeout whose tests passed is
    resolved); otherwise the failure mode decides; a trial with none is a model failure when
    the tests ran and failed, and a harness failure when no verdict was recorded.
    """
    if is_resolved is True:
        return "resolved"
    if failure_mode in CLASS_BY_FAILURE_MODE:
        return CLASS_BY_FAILURE_MODE[failure_mode]
    return "model_failure" if is_resolved is False else "harness_failure"


@dataclass
class _Run:
    """One run as found on disk: a run folder (with or without metadata) or a bare list file."""

    path: Path
    depth: int
    metadata: dict[str, Any]
    """`run_metadata.json`; empty when the run keeps none (then agent and model are unknown)."""
    lock: dict[str, Any]
    trials: list[dict[str, Any]]
    accuracy: Any
    results: Path | None
    """The file holding the run-level trial list; None when the run keeps only trial folders."""
    run_id: str = ""
    folders: bool = True
    """Whether the run's trial folders may supply trials (False for a bare list file)."""
    found: list[dict[str, Any]] = field(default_factory=list)
    """Trials read from the trial folders of a run that keeps no list (to identify it)."""

    @property
    def key(self) -> str:
        """The run's identity: its uuid, else its run id."""
        return str(self.metadata.get("uuid") or self.run_id)

    @property
    def where(self) -> Path:
        """How the run is named to the user: its folder, or the bare list file."""
        return self.path if self.folders or self.results is None else self.results

    @property
    def listing(self) -> Path:
        """The file of the run-level trial list (the run folder when it keeps none)."""
        return self.results or self.path


class TerminalBenchImporter:
    """Reads terminal-bench output: run folders, folders of them, leaderboard trees."""

    name = "terminal-bench"

    def detect(self, path: Path) -> bool:
        """Whether `path` is terminal-bench output or a tree holding only that; never raises.

        A file is recognised when it is a run-level trial list (`BenchmarkResults`, as in
        `results.json` or a bare `*_results.json`); a directory when it holds a run folder
        (`run_metadata.json`) or such a list or a trial's `results.json` anywhere, and no
        attempt-record data (`.jsonl`, `.ndjson`, `.parquet`) or inspect log.
        """
        try:
            if path.is_file():
                return _sniff(path) == "list"
            if not path.is_dir():
                return False
            if _is_run(path, need_results=True):
                return True
            found = False
            for file in path.rglob("*"):
                if file.suffix.lower() in _FOREIGN_DATA:
                    return False
                if not found and _candidate(file):
                    found = (
                        _is_run(file.parent, need_results=False)
                        if file.name == RUN_METADATA
                        else _sniff(file) is not None
                    )
            return found
        except OSError:
            return False

    def read(self, path: Path, context: ImportContext) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield one record per trial of every distinct run under `path`.

        Raises:
            InputFormatError: no run under `path`, or a run file is unreadable or foreign.
        """
        top = _run_root(path)
        runs = _scan(top, context)
        if not runs:
            raise InputFormatError(
                f"{path}: no terminal-bench run found; expected a folder holding "
                f"{RUN_METADATA} and {RESULTS} (the output of `tb run`), a run's trial list, "
                "trial folders, or a folder of such runs"
            )
        for primary, copies in _distinct_runs(runs, context):
            yield from _run_records(primary, copies, str(path), context)


def _is_run(path: Path, need_results: bool) -> bool:
    if need_results and not (path / RESULTS).is_file():
        return False
    try:
        metadata = read_json(path / RUN_METADATA)
    except InputFormatError:
        return False
    return isinstance(metadata, dict) and "run_id" in metadata and "agent_name" in metadata


def _candidate(path: Path) -> bool:
    """A file terminal-bench writes: run metadata, a run's or a trial's results."""
    name = path.name
    return name in (RUN_METADATA, RESULTS) or name.endswith(BARE_SUFFIX)


def _sniff(path: Path) -> str | None:
    """`list` (BenchmarkResults), `trial` (TrialResults) or None, from the file's head."""
    if path.suffix.lower() != ".json" or not path.is_file():
        return None
    with open(path, "rb") as handle:
        head = handle.read(_SNIFF_BYTES).lstrip()
    if not head.startswith(b"{") or b'"trial_name"' not in head or b'"task_id"' not in head:
        return None
    return "list" if _LIST_START.search(head) else "trial"


def _run_root(path: Path) -> Path:
    if path.is_dir():
        return path
    if path.name in (RUN_METADATA, RESULTS) and (path.parent / RUN_METADATA).is_file():
        return path.parent
    if _sniff(path) == "list":
        return path
    raise InputFormatError(
        f"{path}: not a terminal-bench run; pass the run folder holding {RUN_METADATA} and "
        f"{RESULTS} (or the folder of runs `tb run` writes to)"
    )


def _scan(top: Path, context: ImportContext) -> list[_Run]:
    """Every run under `top`: run folders, folders without metadata, bare list files."""
    if top.is_file():
        return [_list_run(top, top.parent, 0, folders=False)]
    files = sorted(p for p in top.rglob("*") if _candidate(p) and _visible(p, top))
    metadata_dirs = {p.parent for p in files if p.name == RUN_METADATA}
    runs = [_load_run(p, _depth(p, top)) for p in sorted(metadata_dirs, key=_order(top))]
    list_dirs: dict[Path, Path] = {}
    trial_dirs: dict[Path, list[Path]] = {}
    for file in files:
        if file.name == RUN_METADATA or file.parent in metadata_dirs or _inside_trial(file):
            continue  # read through its run (or an agent's own file inside a trial folder)
        kind = _sniff(file)
        run_dir = _trial_run_dir(file) if kind == "trial" else None
        if kind == "list" and file.name == RESULTS:
            list_dirs[file.parent] = file
        elif kind == "list":
            runs.append(_list_run(file, file.parent, _depth(file, top), folders=False))
        elif run_dir is not None and run_dir not in metadata_dirs:
            trial_dirs.setdefault(run_dir, []).append(file)
        elif run_dir is None:
            what = (
                "a trial result outside a run's <task>/<trial> folders"
                if kind
                else ("neither a run's trial list (BenchmarkResults) nor a trial result")
            )
            context.warn(f"{file}: {what}; skipped")
    for folder, file in sorted(list_dirs.items()):
        runs.append(_list_run(file, folder, _depth(folder, top), folders=True))
    for folder, trial_files in sorted(trial_dirs.items()):
        if folder not in list_dirs:
            runs.append(_folder_run(folder, trial_files, _depth(folder, top)))
    return [run for run in runs if _has_identity(run, context)]


def _visible(path: Path, top: Path) -> bool:
    return path.is_file() and not any(p.startswith(".") for p in path.relative_to(top).parts)


def _order(top: Path) -> Any:
    return lambda p: (_depth(p, top), p.as_posix())


def _depth(path: Path, top: Path) -> int:
    return len(path.relative_to(top).parts) if path.is_relative_to(top) else 0


def _inside_trial(file: Path) -> bool:
    """Whether a file lies below a trial folder's own level (e.g. in its agent logs)."""
    return any(_is_trial_folder(folder) for folder in file.parents[1:])


def _is_trial_folder(folder: Path) -> bool:
    rest = folder.name.removeprefix(folder.parent.name + ".")
    return rest != folder.name and _ATTEMPT.match(rest) is not None


def _trial_run_dir(file: Path) -> Path | None:
    """The run folder of `<run>/<task>/<task>.<k>-of-<n>[.<run id>]/results.json`."""
    return file.parent.parent.parent if _is_trial_folder(file.parent) else None


def _load_run(path: Path, depth: int) -> _Run:
    metadata = _metadata(path / RUN_METADATA)
    lock = read_json(path / LOCK) if (path / LOCK).is_file() else {}
    if not isinstance(lock, dict):
        raise InputFormatError(f"{path / LOCK}: not a terminal-bench run lock (a JSON object)")
    run_id = metadata["run_id"]
    if not (path / RESULTS).is_file():
        return _Run(path, depth, metadata, lock, [], None, None, run_id)
    trials, accuracy, _ = _read_list(path / RESULTS)
    return _Run(path, depth, metadata, lock, trials, accuracy, path / RESULTS, run_id)


def _read_list(file: Path) -> tuple[list[dict[str, Any]], Any, Any]:
    """Return the trials, accuracy and id of a run-level `BenchmarkResults` file."""
    document = read_json(file)
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise InputFormatError(
            f"{file}: not a terminal-bench results file; expected an object with a "
            "'results' list of trials (BenchmarkResults)"
        )
    trials = document["results"]
    for index, trial in enumerate(trials, 1):
        _check_trial(trial, f"{file}: trial {index}")
    return trials, document.get("accuracy"), document.get("id")


def _list_run(file: Path, folder: Path, depth: int, folders: bool) -> _Run:
    """A run that kept its trial list but no `run_metadata.json` (or a bare list file)."""
    trials, accuracy, list_id = _read_list(file)
    run_id = _run_id_of(trials) or (str(list_id) if list_id else "")
    return _Run(folder, depth, {}, {}, trials, accuracy, file, run_id, folders)


def _folder_run(folder: Path, files: list[Path], depth: int) -> _Run:
    """A run that kept only its trial folders: no run-level list, no metadata."""
    trials = []
    for file in files:
        trial = read_json(file)
        _check_trial(trial, str(file))
        trials.append(trial)
    return _Run(folder, depth, {}, {}, [], None, None, _run_id_of(trials) or "", found=trials)


def _run_id_of(trials: list[dict[str, Any]]) -> str | None:
    """The run id every trial name ends with (`<task>.<k>-of-<n>.<run id>`), if they agree."""
    ids = set()
    for trial in trials:
        rest = trial["trial_name"].removeprefix(trial["task_id"] + ".")
        match = _RUN_SUFFIX.match(rest)
        ids.add(match.group(1) if match else None)
    return ids.pop() if len(ids) == 1 else None


def _has_identity(run: _Run, context: ImportContext) -> bool:
    if run.run_id:
        return True
    context.warn(
        f"{run.where}: cannot tell which run the trials belong to (no run_metadata.json, no "
        "list id, and trial names do not end with one run id); skipped"
    )
    return False


def _metadata(path: Path) -> dict[str, Any]:
    metadata = read_json(path)
    valid = isinstance(metadata, dict) and all(
        isinstance(metadata.get(key), str) and metadata[key] for key in ("run_id", "agent_name")
    )
    if not valid:
        raise InputFormatError(
            f"{path}: not a terminal-bench run metadata file; expected an object with string "
            "'run_id' and 'agent_name' (RunMetadata)"
        )
    return metadata


def _check_trial(trial: Any, where: str) -> None:
    if not isinstance(trial, dict):
        raise InputFormatError(f"{where}: not an object; expected a TrialResults object")
    for key in ("trial_name", "task_id"):
        if not isinstance(trial.get(key), str) or not trial[key]:
            raise InputFormatError(f"{where}: '{key}' must be a non-empty string")
    if trial.get("is_resolved") not in (True, False, None):
        raise InputFormatError(f"{where}: 'is_resolved' must be true, false or null")
    mode = trial.get("failure_mode", "unset")
    if mode not in FAILURE_MODES:
        raise InputFormatError(
            f"{where}: unknown failure_mode {mode!r}; valid: {', '.join(FAILURE_MODES)}"
        )
    for key in _COUNTS:
        value = trial.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise InputFormatError(f"{where}: '{key}' must be a non-negative integer or null")


def _distinct_runs(runs: list[_Run], context: ImportContext) -> Iterator[tuple[_Run, list[_Run]]]:
    """Group copies of one run; the copy listing most trials (then the shallowest) is primary.

    A run without `run_metadata.json` is a copy of a run with the same run id that shares a
    trial (same trial id) with it; the primary then takes the metadata (and lock) of a copy
    that has it. Runs that merely share a run id (a timestamp) stay apart.
    """
    groups: dict[str, list[_Run]] = {}
    for run in sorted(runs, key=lambda r: not r.metadata):
        key = run.key if run.metadata else _copy_of(run, groups) or f"{run.run_id}#{len(groups)}"
        groups.setdefault(key, []).append(run)
    for copies in groups.values():
        copies.sort(key=lambda r: (-len(r.trials), r.depth, r.path.as_posix()))
        primary = copies[0]
        for copy in copies[1:]:
            context.warn(
                f"{copy.where}: same terminal-bench run as {primary.where} "
                f"(run {primary.key}); imported once"
            )
        with_metadata = next((copy for copy in copies if copy.metadata), None)
        if with_metadata is None:
            context.warn(
                f"{primary.where}: no {RUN_METADATA}; agent, model and dataset of run "
                f"{primary.run_id} are not recorded (envelope null, inputs unknown); supply "
                "them with --envelope KEY=VALUE and --input KEY=VALUE"
            )
        elif with_metadata is not primary:
            primary = replace(primary, metadata=with_metadata.metadata, lock=with_metadata.lock)
        yield primary, copies


def _copy_of(run: _Run, groups: dict[str, list[_Run]]) -> str | None:
    """The group of runs with the same run id that shares a trial with `run`, if any."""
    keys = _trial_keys(run)
    for key, copies in groups.items():
        if copies[0].run_id == run.run_id and any(keys & _trial_keys(c) for c in copies):
            return key
    return None


def _trial_keys(run: _Run) -> set[Any]:
    """Trial identities: terminal-bench's trial id, else trial name and start time."""
    return {
        trial.get("id") or trial.get("uuid") or (trial["trial_name"], trial.get("trial_started_at"))
        for trial in (*run.trials, *run.found)
    }


def _run_records(
    run: _Run, copies: list[_Run], source: str, context: ImportContext
) -> Iterator[tuple[str, dict[str, Any]]]:
    seen: set[str] = set()
    listed: list[dict[str, Any]] = []
    for index, trial in enumerate(run.trials, 1):
        if trial["trial_name"] in seen:
            context.warn(f"{run.listing}: trial {trial['trial_name']} listed twice; kept once")
            continue
        seen.add(trial["trial_name"])
        record = _record(run, trial, run.listing, source, context)
        listed.append(record)
        yield f"{run.listing} (trial {index})", record
    _check_accuracy(run, listed, context)
    recovered = 0
    for location, trial in _folder_trials(copies, seen, context):
        recovered += 1
        with hashable_values(location):
            record = _record(run, trial, Path(location), source, context)
        yield location, record
    if recovered and run.results is None:
        context.warn(
            f"{run.path}: no run-level {RESULTS}; {recovered} trial(s) read from their trial "
            "folders"
        )
    elif recovered:
        context.warn(
            f"{run.path}: {recovered} trial(s) missing from {RESULTS} were read from their "
            "trial folders (an interrupted run?)"
        )


def _folder_trials(
    copies: list[_Run], seen: set[str], context: ImportContext
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield trials of per-trial folders that the run-level list lacks, each once."""
    for copy in (copy for copy in copies if copy.folders):
        for folder in _trial_folders(copy.path):
            if folder.name in seen:
                continue
            file = folder / RESULTS
            if not file.is_file():
                context.warn(f"{folder}: trial folder has no {RESULTS} (unfinished); skipped")
                continue
            trial = read_json(file)
            _check_trial(trial, str(file))
            if trial["trial_name"] in seen:
                continue
            seen.add(trial["trial_name"])
            yield str(file), trial


def _trial_folders(run_path: Path) -> list[Path]:
    """Folders `<task>/<task>.<k>-of-<n>[.<run>]` of a run (never a nested run's files)."""
    folders = []
    for task in sorted(p for p in run_path.iterdir() if p.is_dir()):
        if (task / RUN_METADATA).exists():
            continue
        for trial in sorted(p for p in task.iterdir() if p.is_dir()):
            rest = trial.name.removeprefix(task.name + ".")
            if rest != trial.name and _ATTEMPT.match(rest) and not (trial / RUN_METADATA).exists():
                folders.append(trial)
    return folders


def _check_accuracy(run: _Run, records: list[dict[str, Any]], context: ImportContext) -> None:
    """Warn unless resolved / attempts over the run-level list reproduces the run's accuracy."""
    if not records:
        return
    resolved = sum(r["terminal_class"] == "resolved" for r in records)
    computed = resolved / len(records)
    published = {run.listing: run.accuracy, run.path / RUN_METADATA: run.metadata.get("accuracy")}
    for file, value in published.items():
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if number and not math.isclose(computed, value, rel_tol=1e-9, abs_tol=1e-12):
            context.warn(
                f"{file}: accuracy {value} is not reproduced by the imported trials "
                f"({resolved} resolved of {len(records)} = {computed})"
            )


def _record(
    run: _Run, trial: dict[str, Any], file: Path, source: str, context: ImportContext
) -> dict[str, Any]:
    where = f"{file}: trial {trial['trial_name']}"
    runtime, started, finished = _timing(trial, where)
    labels = _labels(run, trial)
    if runtime is None:
        context.warn(
            f"{source}: some trials record no start or end time; their runtime is unavailable "
            "(runtime_seconds null)"
        )
    mode = trial.get("failure_mode", "unset")
    record = {
        "experiment_id": run.run_id,
        "task_id": trial["task_id"],
        "repeat_index": _repeat_index(trial["trial_name"], trial["task_id"], where),
        "inputs": context.inputs(source, _found_inputs(run)),
        "terminal_class": classify(trial.get("is_resolved"), mode),
        "envelope": _envelope(run),
        "runtime_seconds": runtime,
        "started_at": started,
        "finished_at": finished,
        "cost_usd": None,
        "input_tokens": trial.get("total_input_tokens"),
        "output_tokens": trial.get("total_output_tokens"),
        "cached_input_tokens": None,
        "labels": labels,
    }
    return with_identity(record)


def _repeat_index(trial_name: str, task_id: str, where: str) -> int:
    """Return k - 1 for `<task>.<k>-of-<n>[.<run>]`; 0 for a name without an attempt number."""
    rest = trial_name.removeprefix(task_id + ".")
    match = _ATTEMPT.match(rest) if rest != trial_name else _ANY_ATTEMPT.search(trial_name)
    if match is None:
        return 0
    attempt = int(match.group(1))
    if attempt < 1:
        raise InputFormatError(f"{where}: attempt number must start at 1 (trial '{trial_name}')")
    return attempt - 1


def _timing(trial: dict[str, Any], where: str) -> tuple[float | None, str | None, str | None]:
    started, finished = (_timestamp(trial.get(key), key, where) for key in _TIMES)
    if started is None or finished is None:
        return None, _text(started), _text(finished)
    runtime = (finished - started).total_seconds()
    if runtime < 0:
        raise InputFormatError(f"{where}: trial_ended_at is earlier than trial_started_at")
    return runtime, _text(started), _text(finished)


def _timestamp(value: Any, key: str, where: str) -> datetime | None:
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InputFormatError(
            f"{where}: '{key}' must be an ISO 8601 timestamp with an offset (got {value!r})"
        )
    return parsed


def _text(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _envelope(run: _Run) -> dict[str, Any]:
    provider, model = _split_model(run.metadata.get("model_name"))
    return {
        "agent": run.metadata.get("agent_name"),
        "agent_version": None,
        "provider": provider,
        "model": model,
        "harness_version": _harness_version(run),
    }


def _split_model(name: Any) -> tuple[str | None, str | None]:
    """Split a litellm model name `provider/model` at its first slash."""
    if not isinstance(name, str) or not name:
        return None, None
    provider, slash, model = name.partition("/")
    return (provider, model) if slash and provider and model else (None, name)


def _commit(run: _Run) -> str | None:
    commit = run.metadata.get("commit_hash")
    return commit if isinstance(commit, str) and commit not in ("", "unknown") else None


def _harness_version(run: _Run) -> str | None:
    """`<package>==<version>` from tb.lock (+git.<commit> for an editable install), else git:."""
    harness = run.lock.get("harness")
    commit = _commit(run)
    if isinstance(harness, dict) and harness.get("version"):
        version = f"{harness.get('package') or 'terminal-bench'}=={harness['version']}"
        editable = harness.get("is_editable_installation") is True
        return f"{version}+git.{commit}" if editable and commit else version
    return f"git:{commit}" if commit else None


def _found_inputs(run: _Run) -> dict[str, Any]:
    name, version = run.metadata.get("dataset_name"), run.metadata.get("dataset_version")
    config = run.lock.get("run_config")
    budget = None
    if isinstance(config, dict):
        keys = ("global_timeout_multiplier", "global_agent_timeout_sec", "global_test_timeout_sec")
        budget = {key: config.get(key) for key in keys}
    return {
        "wiki_digest": "none",
        "budget": budget,
        "harness_package": f"{name}=={version}" if name and version else None,
        "agent_system_digest": digest_json(_agent_system(run)) if run.metadata else None,
    }


def _agent_system(run: _Run) -> dict[str, Any]:
    """The declared agent configuration; what the run did not record stays null."""
    agent = run.lock.get("agent")
    agent = agent if isinstance(agent, dict) else {}
    kwargs = agent.get("extra_kwargs", run.metadata.get("agent_kwargs"))
    return {
        "scheme": "terminal-bench.agent/1",
        "agent_name": run.metadata["agent_name"],
        "import_path": agent.get("import_path"),
        "model_name": run.metadata.get("model_name"),
        "agent_kwargs": kwargs,
    }


def _labels(run: _Run, trial: dict[str, Any]) -> dict[str, str]:
    resolved = trial.get("is_resolved")
    labels = {
        "terminal_bench.run_uuid": str(run.metadata.get("uuid") or ""),
        "terminal_bench.trial_name": trial["trial_name"],
        "terminal_bench.failure_mode": trial.get("failure_mode", "unset"),
        "terminal_bench.is_resolved": "null" if resolved is None else str(resolved).lower(),
    }
    trial_id = trial.get("id") or trial.get("uuid")
    if trial_id:
        labels["terminal_bench.trial_id"] = str(trial_id)
    tests = trial.get("parser_results")
    if isinstance(tests, dict) and tests:
        passed = sum(status == "passed" for status in tests.values())
        labels["terminal_bench.tests_passed"] = f"{passed}/{len(tests)}"
    if commit := _commit(run):
        labels["terminal_bench.commit_hash"] = commit
    return {key: value for key, value in labels.items() if value}


IMPORTER = TerminalBenchImporter()
