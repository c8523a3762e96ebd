"""Bounded SQL: `registry sql` stops a runaway query at its time limit and a query that needs
more memory than its limit, each with one line; DuckDB's temporary directory is a private area
under `<root>/tmp/`, removed afterwards; nothing under the working directory is readable."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest

import registry
from registry.errors import StorageError
from registry.storage.store import Store

STOPPED = "Error: query stopped after 2 s (--timeout); narrow it or raise the limit"

RUNAWAY = {
    "count-over-range-1e12": "SELECT count(*) FROM range(1e12::BIGINT)",
    "unbounded-recursive-cte": (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    ),
    "million-by-million-cross-join": (
        "SELECT count(*) FROM range(1000000) a CROSS JOIN range(1000000) b WHERE a.range <> b.range"
    ),
}


def _one_line(result) -> str:
    lines = result.output.splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


@pytest.mark.parametrize("query", RUNAWAY.values(), ids=RUNAWAY.keys())
def test_runaway_query_stops_at_the_time_limit_with_one_line(invoke, loaded_root, query):
    result = invoke("sql", query, "--timeout", "2")

    assert result.exit_code == 1, result.output
    assert _one_line(result) == STOPPED


def test_the_literal_range_1e12_is_one_line_too(invoke, loaded_root):
    # DuckDB binds range() to integers only: the spelling is a one-line query error.
    result = invoke("sql", "SELECT count(*) FROM range(1e12)", "--timeout", "2")

    assert result.exit_code == 1, result.output
    assert _one_line(result).startswith("Error: Binder Error: ")


def test_query_that_exceeds_the_memory_limit_stops_with_one_line(invoke, loaded_root):
    query = "SELECT string_agg(range::VARCHAR, ',') FROM range(200000000)"

    result = invoke("sql", query, "--memory-limit", "64MB")

    assert result.exit_code == 1, result.output
    assert _one_line(result) == (
        "Error: query stopped: it needs more memory than the limit of 64MB (--memory-limit); "
        "narrow it or raise the limit"
    )


def test_query_within_the_limits_answers(invoke, loaded_root):
    result = invoke("sql", "SELECT count(*) AS n FROM attempts", "--format", "json")

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": 112}]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--timeout", "0"), "Error: --timeout 0: give a number of seconds above 0"),
        (("--memory-limit", "lots"), "Error: --memory-limit 'lots': expected a size such as"),
    ],
)
def test_bad_limits_are_one_line(invoke, loaded_root, args, expected):
    result = invoke("sql", "SELECT 1", *args)

    assert result.exit_code == 1, result.output
    assert _one_line(result).startswith(expected)


def test_limits_are_in_force(invoke, loaded_root):
    query = (
        "SELECT current_setting('memory_limit') AS memory, "
        "current_setting('temp_directory') AS temp"
    )

    result = invoke("sql", query, "--format", "json", "--memory-limit", "512MB")

    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["memory"] in {"488.2 MiB", "512.0 MiB", "512MB"}  # DuckDB's own rendering
    temp = Path(row["temp"])
    assert temp.parent == loaded_root.absolute() / "tmp"
    assert not temp.exists()  # the private area is removed afterwards
    assert list((loaded_root / "tmp").iterdir()) == []


def test_working_directory_tmp_is_not_readable(invoke, loaded_root, tmp_path, monkeypatch):
    cwd = tmp_path / "work"
    (cwd / ".tmp").mkdir(parents=True)
    (cwd / ".tmp" / "secret").write_text("topsecret\n")
    monkeypatch.chdir(cwd)

    for target in (".tmp/*", ".tmp/secret", str(cwd / ".tmp" / "secret")):
        result = invoke("sql", f"SELECT content FROM read_text('{target}')")
        assert result.exit_code == 1, (target, result.output)
        assert "topsecret" not in result.output
        assert _one_line(result).startswith("Error: Permission Error: ")


def test_private_area_of_another_query_is_not_readable(invoke, loaded_root):
    other = loaded_root / "tmp" / "other"
    other.mkdir()
    (other / "spill").write_text("topsecret\n")

    result = invoke("sql", f"SELECT content FROM read_text('{other}/*')")

    assert result.exit_code == 1, result.output
    assert "topsecret" not in result.output


def test_unwritable_registry_answers_without_spilling(loaded_root, monkeypatch):
    def refused(self: Store):
        raise StorageError(f"cannot write {self.tmp_dir}: read-only file system", errno.EROFS)

    monkeypatch.setattr(Store, "temp_area", refused)

    result = registry.run_query(
        registry.open_store(loaded_root),
        "SELECT count(*), current_setting('temp_directory') FROM attempts",
    )

    assert result.rows == [(112, "")]
