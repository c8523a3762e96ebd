"""Bad input: one line `Error: …` naming file, line and field; exit 1; registry unchanged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import QUICKSTART, make_record, tree_snapshot

GOOD = json.dumps(make_record())


def _typo() -> str:
    record = make_record()
    record["runtme_seconds"] = record.pop("runtime_seconds")
    return json.dumps(record)


def _forged() -> str:
    record = make_record()
    record["terminal_class"] = "model_failure"  # identity was computed for "resolved"
    return json.dumps(record)


CASES = {
    "malformed-json": (
        "bad.jsonl",
        (GOOD + "\n" + '{"experiment_id": \n').encode(),
        "bad.jsonl:line 2: malformed JSON (EOF while parsing a value at column 18)",
    ),
    "wrong-terminal-class": (
        "bad.jsonl",
        json.dumps(make_record(with_identity=False, terminal_class="resolvd")).encode(),
        "bad.jsonl:line 1: field 'terminal_class': Input should be 'resolved', 'model_failure',"
        " 'safety_failure', 'timeout', 'harness_failure', 'environment_failure',"
        " 'grader_failure', 'invalid_case' or 'cancelled' (got \"resolvd\")",
    ),
    "negative-runtime": (
        "bad.jsonl",
        json.dumps(make_record(runtime_seconds=-1)).encode(),
        "bad.jsonl:line 1: field 'runtime_seconds': Input should be greater than or equal to 0"
        " (got -1)",
    ),
    "nan-runtime": (
        "bad.jsonl",
        GOOD.replace('"runtime_seconds": 12.5', '"runtime_seconds": NaN').encode(),
        "bad.jsonl:line 1: field 'runtime_seconds': Input should be a finite number (got NaN)",
    ),
    "string-cost": (
        "bad.jsonl",
        json.dumps(make_record(cost_usd="0.25")).encode(),
        "bad.jsonl:line 1: field 'cost_usd': Input should be a valid number (got \"0.25\")",
    ),
    "typo-field": (
        "bad.jsonl",
        _typo().encode(),
        "bad.jsonl:line 1: field 'runtme_seconds': unknown field; did you mean"
        " 'runtime_seconds'? valid fields here: experiment_id, task_id, repeat_index, inputs,"
        " terminal_class, envelope, terminal_identity, runtime_seconds, started_at,"
        " finished_at, cost_usd, input_tokens, output_tokens, cached_input_tokens, plan_id,"
        " derived_from, labels, artifacts",
    ),
    "forged-identity": (
        "bad.jsonl",
        _forged().encode(),
        "bad.jsonl:line 1: field 'terminal_identity': does not match the record;",
    ),
    "empty-file": ("empty.jsonl", b"", "empty.jsonl: empty input, no attempt records found"),
    "blank-lines-only": ("blank.jsonl", b"\n\n  \n", "blank.jsonl: empty input, no attempt"),
    "invalid-utf8": (
        "bad.jsonl",
        GOOD.encode() + b"\n" + GOOD.replace("task-1", "task-\xff").encode("latin-1"),
        "bad.jsonl:line 2: invalid UTF-8 at byte",
    ),
    "array-bad-item": (
        "bad.json",
        (
            "[\n"
            + GOOD
            + ",\n"
            + GOOD.replace('"runtime_seconds": 12.5', '"runtime_seconds": -3')
            + "\n]"
        ).encode(),
        "bad.json:line 3 (item 2): field 'runtime_seconds': Input should be greater than or"
        " equal to 0 (got -3)",
    ),
    "array-unterminated": ("bad.json", ("[" + GOOD + ",").encode(), "bad.json:line 1:"),
    "unknown-nested-field": (
        "bad.jsonl",
        GOOD.replace('"grader_version"', '"grader_vesion"').encode(),
        "bad.jsonl:line 1: field 'inputs.grader_vesion': unknown field; did you mean"
        " 'grader_version'?",
    ),
    "not-json-at-all": ("notes.txt", b"hello world\n", "notes.txt: cannot tell the format"),
}


@pytest.mark.parametrize("case", sorted(CASES), ids=sorted(CASES))
def test_bad_input_is_one_line_and_changes_nothing(case, invoke, root, tmp_path, monkeypatch):
    assert invoke("ingest", str(QUICKSTART)).exit_code == 0
    before = tree_snapshot(root)
    name, data, expected = CASES[case]
    monkeypatch.chdir(tmp_path)
    Path(name).write_bytes(data)
    result = invoke("ingest", name)
    assert result.exit_code == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: " + expected), lines[0]
    assert "Traceback" not in result.output
    assert tree_snapshot(root) == before


def test_invalid_record_in_a_later_file_rejects_the_whole_invocation(invoke, root, tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(GOOD + "\n")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(make_record(cost_usd="x")) + "\n")
    result = invoke("ingest", str(good), str(bad))
    assert result.exit_code == 1
    assert not root.exists()  # a failed first ingest leaves no registry behind


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_parquet_non_finite_runtime_rejected(value, invoke, root, tmp_path):
    record = make_record()
    record["runtime_seconds"] = value
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist([make_record(), record]), path)
    result = invoke("ingest", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}:row 2: field 'runtime_seconds': Input should")


def test_truncated_parquet_rejected(invoke, root, tmp_path):
    path = tmp_path / "cut.parquet"
    pq.write_table(pa.Table.from_pylist([make_record()]), path)
    path.write_bytes(path.read_bytes()[:-20])
    result = invoke("ingest", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}: not a readable Parquet file")
    assert len(result.stderr.splitlines()) == 1


def test_missing_path(invoke, tmp_path):
    result = invoke("ingest", str(tmp_path / "nope.jsonl"))
    assert result.exit_code == 1
    assert result.stderr == f"Error: {tmp_path / 'nope.jsonl'}: no such file or directory\n"


def _parquet_with(tmp_path, column: str, array: pa.Array) -> Path:
    rows = [make_record(repeat_index=i) for i in range(2)]
    table = pa.Table.from_pylist(rows)
    index = table.schema.get_field_index(column)
    table = (
        table.set_column(index, column, array) if index >= 0 else table.append_column(column, array)
    )
    path = tmp_path / "in.parquet"
    pq.write_table(table, path)
    return path


def test_parquet_decimal_cost_is_a_clear_error(invoke, root, tmp_path):
    from decimal import Decimal

    path = _parquet_with(
        tmp_path, "cost_usd", pa.array([Decimal("0.25"), None], pa.decimal128(10, 4))
    )
    result = invoke("ingest", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}:row 1: field 'cost_usd': decimal values")
    assert not root.exists()


def test_parquet_binary_column_is_a_clear_error(invoke, root, tmp_path):
    path = _parquet_with(tmp_path, "blob", pa.array([b"\x00", b"\x01"]))
    result = invoke("ingest", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}:row 1: field 'blob': binary values")


def test_parquet_nan_inside_budget_is_rejected(invoke, root, tmp_path):
    rows = [make_record(with_identity=False)]
    rows[0]["inputs"]["budget"] = {"turns": 50.0, "cost_usd": math.nan}
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    result = invoke("ingest", str(path))
    assert result.exit_code == 1
    assert result.stderr.startswith(
        f"Error: {path}:row 1: field 'inputs.budget.cost_usd': Input should be a finite number"
    )


def test_failed_first_ingest_keeps_a_directory_the_user_made(invoke, root, tmp_path):
    root.mkdir()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(make_record(cost_usd="x")) + "\n")
    assert invoke("ingest", str(bad)).exit_code == 1
    assert root.is_dir() and list(root.iterdir()) == []


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("[{r},,]", "malformed JSON (Expecting value"),
        ("[{r} {r}]", "malformed JSON (expected ',' or ']' between items, found '{')"),
        ("[{r},]", "malformed JSON (Expecting value"),
        ("[{r}] x", "malformed JSON (data after the end of the JSON value, found 'x')"),
        ("x", "malformed JSON (expected a top-level array or object, found 'x')"),
        ("[{r}", "malformed JSON (unterminated array)"),
    ],
    ids=[
        "double-comma",
        "missing-comma",
        "trailing-comma",
        "trailing-data",
        "not-json",
        "unterminated",
    ],
)
def test_json_array_must_be_well_formed(text, problem, invoke, root, tmp_path):
    path = tmp_path / "a.json"
    path.write_text(text.replace("{r}", GOOD))
    result = invoke("ingest", str(path), "--format", "json")
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {path}:line 1: {problem}"), result.stderr
    assert not root.exists()


def test_pretty_printed_single_object_json_is_one_record(invoke, root, tmp_path):
    path = tmp_path / "one.json"
    path.write_text(json.dumps(make_record(), indent=2))
    result = invoke("ingest", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["new"] == 1
