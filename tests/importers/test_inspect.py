"""`--format inspect`: inspect_ai logs, from a real offline evaluation and from committed logs."""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from registry.errors import InputFormatError
from registry.importers import ImportContext
from registry.importers.inspect_log import (
    IMPORTER,
    budget_of,
    classify_error,
    classify_sample,
    classify_score,
    envelope_of,
    runtime_of,
    usage_of,
)
from registry_schemas import AttemptRecord
from tests.conftest import FIXTURES, tree_snapshot

pytestmark = pytest.mark.filterwarnings(
    "ignore:The 'initial' parameter is deprecated:DeprecationWarning"  # inspect_ai's own call
)
HAS_INSPECT = importlib.util.find_spec("inspect_ai") is not None
needs_inspect = pytest.mark.skipif(not HAS_INSPECT, reason="inspect-ai is not installed")
HERE = FIXTURES / "importers" / "inspect"
ARITH = HERE / "arith"
EVAL_SET = HERE / "eval-set"
UNKNOWN = "set to 'unknown': source_digest, wiki_digest;"

# (model, sample id, repeat index) -> class of the final attempt, as the fixture logs say.
ARITH_EXPECTED = {
    **{("model", sid, r): "resolved" for sid in ("ok", "flaky", "bad-target") for r in (0, 1)},
    **{("model", "wrong", r): "model_failure" for r in (0, 1)},
    **{("model-b", sid, r): "resolved" for sid in ("ok", "flaky", "wrong") for r in (0, 1)},
    ("model-b", "bad-target", 0): "invalid_case",  # invalidated by a reviewer
    ("model-b", "bad-target", 1): "model_failure",  # answered 9
    **{(m, "broken", r): "harness_failure" for m in ("model", "model-b") for r in (0, 1)},
    **{(m, "slow", r): "timeout" for m in ("model", "model-b") for r in (0, 1)},
    **{(m, "ungraded", r): "grader_failure" for m in ("model", "model-b") for r in (0, 1)},
}
# samples whose first attempt retry_on_error discarded (one per epoch and model)
ARITH_DISCARDED = {"flaky": "ValueError('transient failure, retried')"}
ARITH_DISCARDED["broken"] = "RuntimeError('solver crashed on sample broken')"


def _read(path: Path, context: ImportContext | None = None) -> list[tuple[str, dict]]:
    return list(IMPORTER.read(path, context or ImportContext()))


def _ingest(invoke, *paths: Path | str, fmt: str | None = "inspect", extra=()):
    return invoke("ingest", *map(str, paths), *(["--format", fmt] if fmt else []), *extra)


def _one_line_error(result, path: Path, problem: str) -> None:
    assert result.exit_code == 1, result.output
    assert result.stderr.startswith(f"Error: {path}: {problem}"), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr


def _log_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.eval"))


# --- a real evaluation, run offline with the mock model ----------------------------------------

_FLAKY_CALLS: dict[int, int] = {}


def _arith_offline():
    from inspect_ai import Task, task
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import match
    from inspect_ai.solver import generate, solver

    @solver
    def misbehave():
        async def solve(state, generate_fn):
            if state.sample_id == "broken":
                raise RuntimeError("solver crashed")
            if state.sample_id == "flaky":
                _FLAKY_CALLS[state.epoch] = _FLAKY_CALLS.get(state.epoch, 0) + 1
                if _FLAKY_CALLS[state.epoch] == 1:
                    raise ValueError("transient")
            if state.sample_id == "slow":
                import anyio
                from inspect_ai.util import time_limit

                # Only this sample has a tight limit, and it always exceeds it: the others
                # run under the task's generous limit, however busy the machine is.
                with time_limit(0.5):
                    await anyio.sleep(3600)
            return state

        return solve

    @task
    def arith_offline():
        samples = [("ok", "2+2", "4"), ("wrong", "3+3", "6"), ("flaky", "5+5", "10")]
        samples += [("broken", "1+1", "2"), ("slow", "2+2", "4")]
        return Task(
            dataset=[Sample(id=i, input=q, target=a) for i, q, a in samples],
            solver=[misbehave(), generate()],
            scorer=match(),
            epochs=3,
            time_limit=600,
        )

    return arith_offline()


def _mock_model():
    from inspect_ai.model import ModelOutput, ModelUsage, get_model

    answers = {"2+2": "4", "3+3": "7", "5+5": "10"}

    def reply(messages, tools, tool_choice, config):
        output = ModelOutput.from_content("mockllm/model", answers[messages[-1].text])
        output.usage = ModelUsage(input_tokens=7, output_tokens=2, total_tokens=9)
        return output

    # explicit outputs carry their own usage, so the mock never calls tiktoken (offline)
    return get_model("mockllm/model", custom_outputs=reply)


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    pytest.importorskip("inspect_ai")
    from inspect_ai import eval as inspect_eval

    log_dir = tmp_path_factory.mktemp("inspect-logs")
    _FLAKY_CALLS.clear()
    (log,) = inspect_eval(
        _arith_offline(),
        model=_mock_model(),
        log_dir=str(log_dir),
        retry_on_error=1,
        fail_on_error=False,
        display="none",
    )
    assert log.status == "success"
    return log_dir


REAL_EXPECTED = {
    "ok": "resolved",
    "wrong": "model_failure",
    "flaky": "resolved",
    "broken": "harness_failure",
    "slow": "timeout",
}


def test_real_eval_imports_what_the_log_says(real_run, invoke):
    from inspect_ai import __version__
    from inspect_ai.log import read_eval_log

    (path,) = _log_files(real_run)
    log = read_eval_log(str(path))
    assert len(log.samples) == 15  # 5 samples x 3 epochs
    records = [record for _, record in _read(path)]
    final = [r for r in records if "inspect_retry" not in r["labels"]]
    discarded = [r for r in records if "inspect_retry" in r["labels"]]
    by_uuid = {r["labels"]["inspect_sample_uuid"]: r for r in final}
    assert set(by_uuid) == {s.uuid for s in log.samples}
    for sample in log.samples:
        record = by_uuid[sample.uuid]
        AttemptRecord.model_validate_json(json.dumps(record))
        assert record["task_id"] == f"{log.eval.task}/{sample.id}"
        assert record["repeat_index"] == sample.epoch - 1
        assert record["experiment_id"] == log.eval.run_id
        assert record["terminal_class"] == REAL_EXPECTED[sample.id], sample.id
        assert record["runtime_seconds"] == sample.total_time
        assert record["started_at"] == sample.started_at
        assert record["envelope"] == {
            "agent": "misbehave+generate",
            "agent_version": None,
            "provider": "mockllm",
            "model": "model",
            "harness_version": __version__,
        }
        assert record["inputs"]["budget"] == {"time_limit": 600}
        assert record["inputs"]["harness_package"] == f"inspect_ai=={__version__}"
        called = sample.id in ("ok", "wrong", "flaky")
        expected_tokens = (7, 2) if called else (None, None)
        assert (record["input_tokens"], record["output_tokens"]) == expected_tokens
        assert record["cost_usd"] is None  # the mock reports no cost
    assert sorted(r["repeat_index"] for r in final) == [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2]
    # retry_on_error discarded the first attempt of `flaky` and of `broken`, in every epoch
    assert sorted((r["labels"]["inspect_sample_id"], r["repeat_index"]) for r in discarded) == [
        (sid, epoch) for sid in ("broken", "flaky") for epoch in (0, 1, 2)
    ]
    assert {r["terminal_class"] for r in discarded} == {"harness_failure"}
    result = _ingest(invoke, real_run, fmt=None)
    assert result.exit_code == 0, result.output
    assert "read 21 attempts: 21 new, 0 already present" in result.stdout


def test_real_eval_report(real_run, invoke):
    assert _ingest(invoke, real_run).exit_code == 0
    (path,) = _log_files(real_run)
    task = f"{_read(path)[0][1]['labels']['inspect_task']}/flaky"
    report = invoke("report", "--task", task, "--format", "json")
    assert report.exit_code == 0, report.output
    (cohort,) = json.loads(report.stdout)["cohorts"]
    (system,) = cohort["systems"]
    assert system["system"]["model"] == "model"
    assert (system["attempts"], system["resolved"]) == (6, 3)
    assert system["classes"]["harness_failure"] == 3


# --- the committed logs --------------------------------------------------------------------------


@needs_inspect
def test_fixture_classes_epochs_and_identities():
    records = _read(ARITH)
    assert len(records) == 36  # 2 models x 7 samples x 2 epochs, plus 8 discarded attempts
    finals, discarded = {}, []
    for location, record in records:
        AttemptRecord.model_validate_json(json.dumps(record))
        key = (record["envelope"]["model"], record["labels"]["inspect_sample_id"])
        key += (record["repeat_index"],)
        assert record["repeat_index"] == int(record["labels"]["inspect_epoch"]) - 1
        assert record["task_id"] == f"arith/{key[1]}"
        assert record["envelope"] == {
            "agent": "quirky+generate",
            "agent_version": None,
            "provider": "mockllm",
            "model": key[0],
            "harness_version": "0.3.285",
        }
        if "inspect_retry" in record["labels"]:
            discarded.append((key, record["labels"]["inspect_error"], record["terminal_class"]))
            assert location.endswith("(discarded attempt 1)")
        else:
            assert key not in finals
            finals[key] = record["terminal_class"]
    assert finals == ARITH_EXPECTED
    assert sorted(discarded) == sorted(
        ((m, sid, r), ARITH_DISCARDED[sid], "harness_failure")
        for m in ("model", "model-b")
        for sid in ARITH_DISCARDED
        for r in (0, 1)
    )
    assert len({r["experiment_id"] for _, r in records}) == 1  # one eval() run, two models


@needs_inspect
def test_fixture_records_are_deterministic_and_take_values_from_the_log():
    first, second = _read(ARITH), _read(ARITH)
    assert first == second
    by_location = dict(first)
    slow = next(r for loc, r in by_location.items() if "sample slow epoch 1" in loc)
    assert slow["labels"]["inspect_limit"] == "time"
    assert slow["labels"]["inspect_score.graded"] == "I"
    assert slow["runtime_seconds"] >= 1.0
    ungraded = next(r for loc, r in by_location.items() if "sample ungraded epoch 2" in loc)
    assert ungraded["labels"]["inspect_score.graded"] == "NaN"
    assert ungraded["labels"]["inspect_score_reason.graded"] == "grader_failed"
    assert (ungraded["input_tokens"], ungraded["output_tokens"]) == (12, 3)
    invalid = [r for r in by_location.values() if r["terminal_class"] == "invalid_case"]
    assert [r["labels"]["inspect_invalidation_reason"] for r in invalid] == ["target is wrong"]
    retry = next(r for loc, r in by_location.items() if "flaky epoch 2 (discarded" in loc)
    assert retry["runtime_seconds"] is None and "runtime_seconds" not in retry["labels"]
    assert retry["labels"]["inspect_error"] == ARITH_DISCARDED["flaky"]
    assert "inspect_score.graded" not in retry["labels"]  # the retry's outcome, not the sample's
    assert retry["input_tokens"] is None and retry["started_at"] is None
    inputs = {json.dumps(r["inputs"], sort_keys=True) for r in by_location.values()}
    cases = {r["inputs"]["case_digest"] for r in by_location.values()}
    assert len(inputs) == len(cases) == 7  # the two models share each sample's cohort


@needs_inspect
def test_reimport_adds_nothing(invoke, root):
    assert _ingest(invoke, ARITH).exit_code == 0
    before = tree_snapshot(root)
    again = _ingest(invoke, ARITH)
    assert again.exit_code == 0, again.output
    assert "read 36 attempts: 0 new, 36 already present" in again.stdout
    assert tree_snapshot(root) == before


@needs_inspect
def test_auto_detects_eval_files_and_log_directories(invoke):
    first = _log_files(ARITH)[0]
    one = _ingest(invoke, first, fmt=None)
    assert one.exit_code == 0, one.output
    assert "read 18 attempts: 18 new" in one.stdout
    both = _ingest(invoke, ARITH, fmt=None)
    assert "read 36 attempts: 18 new, 18 already present" in both.stdout
    # an eval-set folder also holds logs.json and eval-set.json, which are not logs
    listed = _ingest(invoke, EVAL_SET, fmt=None, extra=["--json"])
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout)["sources"][0]["path"] == str(EVAL_SET)


@needs_inspect
def test_json_log_imports_like_the_eval_log(invoke, tmp_path):
    from inspect_ai.log import read_eval_log, write_eval_log

    source = _log_files(ARITH)[0]
    converted = tmp_path / "converted.json"
    write_eval_log(read_eval_log(str(source)), str(converted))
    assert IMPORTER.detect(converted)
    assert [r for _, r in _read(converted)] == [r for _, r in _read(source)]
    assert _ingest(invoke, source).exit_code == 0
    again = _ingest(invoke, converted, fmt=None)
    assert again.exit_code == 0, again.output
    assert "read 18 attempts: 0 new, 18 already present" in again.stdout


@needs_inspect
def test_eval_set_retry_logs_import_each_attempt_once():
    older, newer = _log_files(EVAL_SET)
    whole = [r for _, r in _read(EVAL_SET)]
    # the retry re-wrote the log: copied samples keep their uuid, the errored `flaky` and the
    # cancelled `slow` attempts were re-run (the error is carried in `error_retries`)
    assert len(_read(older)) == 9 and len(_read(newer)) == 13
    assert whole == [r for _, r in _read(newer)]
    eval_set_id = json.loads((EVAL_SET / "eval-set.json").read_text())["eval_set_id"]
    assert {r["experiment_id"] for r in whole} == {eval_set_id}
    classes = sorted(r["terminal_class"] for r in whole)
    assert classes.count("cancelled") == 0 and classes.count("harness_failure") == 1


@needs_inspect
def test_same_uuid_in_two_logs_imports_once_keeping_the_most_complete(tmp_path):
    from inspect_ai.log import read_eval_log, write_eval_log

    source = _log_files(ARITH)[0]
    shutil.copy(source, tmp_path / "b-copy.eval")
    partial = read_eval_log(str(source))
    partial.status = "started"
    ok = next(s for s in partial.samples if s.id == "ok" and s.epoch == 1)
    ok.scores, ok.completed_at = None, None
    write_eval_log(partial, str(tmp_path / "a-partial.json"))
    records = _read(tmp_path)
    assert len(records) == 18
    ok_record = next(r for loc, r in records if "sample ok epoch 1" in loc)
    assert ok_record["terminal_class"] == "resolved"
    assert [r for _, r in records] == [r for _, r in _read(source)]


@needs_inspect
@pytest.mark.parametrize("suffix", [".eval", ".json"])
def test_truncated_log_is_rejected(invoke, root, tmp_path, suffix):
    from inspect_ai.log import read_eval_log, write_eval_log

    assert _ingest(invoke, HERE / "eval-set").exit_code == 0
    before = tree_snapshot(root)
    whole = tmp_path / f"whole{suffix}"
    write_eval_log(read_eval_log(str(_log_files(ARITH)[0])), str(whole))
    truncated = tmp_path / f"truncated{suffix}"
    data = whole.read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    for fmt in ("inspect", None):
        result = _ingest(invoke, truncated, fmt=fmt)
        _one_line_error(result, truncated, "not a readable inspect_ai log (")
    assert tree_snapshot(root) == before


def test_foreign_json_is_rejected(invoke, root, tmp_path):
    foreign = tmp_path / "results.json"
    foreign.write_text(json.dumps({"results": [{"eval": "x"}], "status": "done"}))
    result = _ingest(invoke, foreign)
    _one_line_error(
        result,
        foreign,
        "not an inspect_ai log; expected a .eval file or a .json log with top-level 'eval' "
        "and 'status' keys",
    )
    assert tree_snapshot(root) == {}
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.json").write_text("{}")
    _one_line_error(_ingest(invoke, empty), empty, "holds no inspect_ai log;")


def test_missing_inspect_ai_is_a_one_line_error(invoke, monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "inspect_ai", None)
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)
    path = _log_files(ARITH)[0]
    message = (
        "reading inspect_ai logs needs the inspect-ai package: "
        "pip install 'agent-evidence-registry[inspect]'"
    )
    with pytest.raises(InputFormatError, match=r"needs the inspect-ai package"):
        _read(path)
    _one_line_error(_ingest(invoke, path), path, message)


@needs_inspect
def test_unknown_inputs_warn_and_input_silences_them(invoke):
    file = _log_files(ARITH)[0]
    plain = _ingest(invoke, file)
    assert plain.exit_code == 0
    assert f"{file}: cohort inputs not recorded by the source, {UNKNOWN}" in plain.stderr
    supplied = _ingest(invoke, file, extra=["--input", "source_digest=git:abc1234"])
    assert "set to 'unknown': wiki_digest;" in supplied.stderr
    assert "source_digest" not in supplied.stderr
    assert "18 new" in supplied.stdout  # a new cohort input is a new attempt record
    full = _ingest(
        invoke, file, extra=["--input", "source_digest=x", "--input", "wiki_digest=none"]
    )
    assert "cohort inputs not recorded" not in full.stderr


@needs_inspect
def test_report_and_compare_on_the_imported_logs(invoke):
    assert _ingest(invoke, ARITH).exit_code == 0
    report = invoke("report", "--task", "arith/wrong", "--format", "json")
    assert report.exit_code == 0, report.output
    (cohort,) = json.loads(report.stdout)["cohorts"]
    systems = {s["system"]["model"]: s for s in cohort["systems"]}
    assert (systems["model"]["attempts"], systems["model"]["resolved"]) == (2, 0)
    assert (systems["model-b"]["attempts"], systems["model-b"]["resolved"]) == (2, 2)
    table = invoke("report", "--task", "arith/broken")
    assert table.exit_code == 0 and "mockllm/model-b" in table.stdout
    compared = invoke(
        "compare",
        *("--baseline", "model=model", "--candidate", "model=model-b"),
        *("--format", "json", "--resamples", "200"),
    )
    assert compared.exit_code == 0, compared.output
    comparison = json.loads(compared.stdout)["comparisons"][0]
    paired = {t["task_id"]: t["difference"] for t in comparison["tasks"]}
    # bad-target: model-b's first epoch was invalidated, its second answered wrong
    assert paired == {
        "arith/ok": 0.0,
        "arith/wrong": 1.0,
        "arith/flaky": 0.0,
        "arith/slow": 0.0,
        "arith/bad-target": -1.0,
    }
    dropped = {t["task_id"] for t in comparison["dropped"]}
    assert dropped == {"arith/broken", "arith/ungraded"}  # no valid attempt in either arm


# --- detection and classification rules ---------------------------------------------------------


def test_detect(tmp_path):
    log_json = tmp_path / "log.json"
    log_json.write_text('{\n  "version": 2,\n  "status": "success",\n  "eval": {"task": "t"')
    listing = tmp_path / "logs.json"
    listing.write_text('{"a.eval": {"version": 2, "status": "success", "eval": {}}}')
    attempts = tmp_path / "attempts.json"
    attempts.write_text('[{"experiment_id": "e", "status": "x", "eval": {}}]')
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "a.eval").write_bytes(b"PK")
    (mixed / "records.jsonl").write_text("{}\n")
    assert IMPORTER.detect(_log_files(ARITH)[0])
    assert IMPORTER.detect(log_json)
    assert IMPORTER.detect(EVAL_SET) and IMPORTER.detect(HERE)
    assert not IMPORTER.detect(listing)
    assert not IMPORTER.detect(attempts)
    assert not IMPORTER.detect(mixed)
    assert not IMPORTER.detect(tmp_path / "missing.json")
    assert not IMPORTER.detect(FIXTURES / "quickstart")


def _sample(**fields):
    base = dict(invalidation=None, error=None, limit=None, scores={})
    return SimpleNamespace(**{**base, **fields})


def _score(value, reason=None):
    return SimpleNamespace(value=value, reason=reason)


def _limit(kind):
    return SimpleNamespace(type=kind)


def _error(message, traceback=""):
    return SimpleNamespace(message=message, traceback=traceback)


@pytest.mark.parametrize(
    ("sample", "expected"),
    [
        (_sample(invalidation=object(), error=_error("x")), "invalid_case"),
        (_sample(error=_error("RuntimeError('boom')"), limit=_limit("time")), "harness_failure"),
        (_sample(limit=_limit("time"), scores={"s": _score("C")}), "timeout"),
        (_sample(limit=_limit("working")), "timeout"),
        (_sample(limit=_limit("token")), "model_failure"),
        (_sample(limit=_limit("message")), "model_failure"),
        (_sample(limit=_limit("turn")), "model_failure"),
        (_sample(limit=_limit("cost")), "model_failure"),
        (_sample(limit=_limit("context")), "model_failure"),
        (_sample(limit=_limit("custom")), "model_failure"),
        (_sample(limit=_limit("operator")), "cancelled"),
        (_sample(scores={"s": _score("C")}), "resolved"),
        (_sample(scores={"other": _score("I"), "s": _score("C")}), "resolved"),
        (_sample(scores={"s": _score("I"), "other": _score("C")}), "model_failure"),
        (_sample(scores={"x": _score(1.0)}), "resolved"),
        (_sample(scores={}), "grader_failure"),
    ],
)
def test_classify_sample(sample, expected):
    assert classify_sample(sample, "s") == expected


SANDBOX_TRACE = (
    'Traceback (most recent call last):\n  File "/x/inspect_ai/_eval/task/run.py", line 1\n'
    '  File "/x/inspect_ai/util/_sandbox/docker/compose.py", line 9\nRuntimeError: exit 1\n'
)


@pytest.mark.parametrize(
    ("message", "traceback", "expected"),
    [
        ("CancelledError('Cancelled via cancel scope 7f')", "", "cancelled"),
        ("Cancelled()", "", "cancelled"),
        ("KeyboardInterrupt()", "", "cancelled"),
        ("RuntimeError('Sample errored: interrupted by operator')", "", "cancelled"),
        ("RuntimeError('exit 1')", SANDBOX_TRACE, "environment_failure"),
        ("PrerequisiteError('Docker is not running')", "", "environment_failure"),
        ("RuntimeError('solver crashed')", 'File "/x/agent.py", line 3', "harness_failure"),
        ("RateLimitError('429')", "", "harness_failure"),
    ],
)
def test_classify_error(message, traceback, expected):
    assert classify_error(message, traceback) == expected


@pytest.mark.parametrize(
    ("value", "reason", "expected"),
    [
        ("C", None, "resolved"),
        (1.0, None, "resolved"),
        (1, None, "resolved"),
        (True, None, "resolved"),
        ({"a": "C", "b": 1}, None, "resolved"),
        (["C", "C"], None, "resolved"),
        ("I", None, "model_failure"),
        ("P", None, "model_failure"),
        ("N", "refusal", "model_failure"),
        (0.5, None, "model_failure"),
        (0, None, "model_failure"),
        (False, None, "model_failure"),
        ({"a": "C", "b": "I"}, None, "model_failure"),
        ([], None, "model_failure"),
        (math.nan, None, "grader_failure"),
        ("C", "grader_failed", "grader_failure"),
        ("I", "scoring_failed", "grader_failure"),
    ],
)
def test_classify_score(value, reason, expected):
    assert classify_score(value, reason) == expected


def _spec(**fields):
    base = dict(model="openai/azure/gpt-4o", solver=None, packages={"inspect_ai": "0.3.1"})
    return SimpleNamespace(**{**base, "revision": None, **fields})


def _plan(name="plan", steps=("system_message", "react")):
    return SimpleNamespace(name=name, steps=[SimpleNamespace(solver=s) for s in steps])


def test_envelope_of():
    assert envelope_of(_spec(), _plan()) == {
        "agent": "system_message+react",
        "agent_version": None,
        "provider": "openai",
        "model": "azure/gpt-4o",
        "harness_version": "0.3.1",
    }
    revision = SimpleNamespace(commit="8f2e7c1", dirty=True)
    assert envelope_of(_spec(revision=revision), _plan("mine"))["agent"] == "mine"
    assert envelope_of(_spec(revision=revision), _plan())["agent_version"] == "git:8f2e7c1+dirty"
    packaged = _spec(solver="inspect_swe/claude_code", packages={"inspect_swe": "0.2.5"})
    assert envelope_of(packaged, _plan())["agent"] == "inspect_swe/claude_code"
    assert envelope_of(packaged, _plan())["agent_version"] == "0.2.5"
    assert envelope_of(packaged, _plan())["harness_version"] is None


def _usage(**fields):
    return SimpleNamespace(**fields)


def test_runtime_usage_and_budget():
    timed = SimpleNamespace(total_time=None, working_time=None, started_at=None, completed_at=None)
    assert runtime_of(timed) is None
    timed.started_at, timed.completed_at = "2026-01-01T00:00:00+00:00", "2026-01-01T00:00:02.5Z"
    assert runtime_of(timed) == 2.5
    timed.working_time = 1.25
    assert runtime_of(timed) == 1.25
    assert usage_of({}) == {
        "input_tokens": None,
        "output_tokens": None,
        "cached_input_tokens": None,
        "cost_usd": None,
    }
    a = SimpleNamespace(input_tokens=10, output_tokens=2, input_tokens_cache_read=4, total_cost=0.5)
    b = SimpleNamespace(
        input_tokens=1, output_tokens=1, input_tokens_cache_read=None, total_cost=None
    )
    assert usage_of({"m": a, "grader": b}) == {
        "input_tokens": 11,
        "output_tokens": 3,
        "cached_input_tokens": 4,
        "cost_usd": None,  # one model's cost is unknown, so the total is
    }
    assert usage_of({"m": a})["cost_usd"] == 0.5
    config = SimpleNamespace(time_limit=600, message_limit=None, token_limit=10_000)
    assert budget_of(config) == {"time_limit": 600, "token_limit": 10_000}
