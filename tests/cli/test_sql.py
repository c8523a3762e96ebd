"""`registry sql` is read-only: every writing statement is refused and nothing changes."""

from __future__ import annotations

import json

import pytest

from tests.conftest import tree_snapshot

REFUSED = {
    "create": ("CREATE TABLE t AS SELECT 1", "CREATE statements are refused"),
    "create-view": ("CREATE VIEW v AS SELECT 1", "CREATE statements are refused"),
    "copy-to": ("COPY (SELECT * FROM attempts) TO 'out.csv'", "COPY statements are refused"),
    "attach": ("ATTACH 'other.db' AS o", "ATTACH statements are refused"),
    "drop": ("DROP VIEW attempts", "DROP statements are refused"),
    "insert": ("INSERT INTO attempts SELECT * FROM attempts", "INSERT statements are refused"),
    "update": ("UPDATE attempts SET task_id = 'x'", "UPDATE statements are refused"),
    "delete": ("DELETE FROM attempts", "DELETE statements are refused"),
    "set-access": ("SET enable_external_access = true", "SET statements are refused"),
    "set-dirs": ("SET allowed_directories = ['/']", "SET statements are refused"),
    "reset": ("RESET lock_configuration", "SET statements are refused"),
    "pragma": ("PRAGMA enable_profiling", "PRAGMA statements are refused"),
    "install": ("INSTALL httpfs", "LOAD statements are refused"),
    "export": ("EXPORT DATABASE 'dump'", "EXPORT statements are refused"),
    "two-statements": ("SELECT 1; DROP VIEW attempts", "expected exactly one SQL statement, got 2"),
}


@pytest.mark.parametrize("case", sorted(REFUSED), ids=sorted(REFUSED))
def test_writing_statements_refused(case, invoke, loaded_root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = tree_snapshot(loaded_root)
    outside = sorted(p.name for p in tmp_path.iterdir())
    query, message = REFUSED[case]
    result = invoke("sql", query)
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and message in result.stderr, result.stderr
    assert len(result.stderr.splitlines()) == 1
    assert tree_snapshot(loaded_root) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == outside


def test_select_reading_other_files_is_refused(invoke, loaded_root):
    result = invoke("sql", "SELECT * FROM read_csv('/etc/passwd')")
    assert result.exit_code == 1
    assert "Permission Error" in result.stderr


def test_syntax_error_is_one_line(invoke, loaded_root):
    result = invoke("sql", "SELEKT 1")
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: Parser Error: syntax error")
    assert len(result.stderr.splitlines()) == 1


def test_views_and_provenance(invoke, loaded_root):
    result = invoke(
        "sql",
        "SELECT commit_seq, commit_digest, source, count(*) AS n FROM attempts GROUP BY ALL",
        "--format",
        "json",
    )
    rows = json.loads(result.stdout)
    assert len(rows) == 1 and rows[0]["commit_seq"] == 1
    assert rows[0]["source"].endswith("fixtures/quickstart/attempts.jsonl")
    result = invoke(
        "sql", "SELECT seq, digest, kind, attempts_new FROM commits", "--format", "json"
    )
    assert json.loads(result.stdout) == [
        {
            "seq": 1,
            "digest": rows[0]["commit_digest"],
            "kind": "ingest",
            "attempts_new": rows[0]["n"],
        }
    ]
    result = invoke("sql", "SELECT count(*) AS n FROM cohorts", "--format", "csv")
    assert result.stdout.splitlines()[0] == "n" and int(result.stdout.splitlines()[1]) > 1
    result = invoke("sql", "SELECT DISTINCT provider FROM systems ORDER BY 1", "--format", "csv")
    assert "unobserved" in result.stdout.split()


def test_missing_registry_is_a_clear_error(invoke, root):
    result = invoke("sql", "SELECT 1")
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: no registry at {root}; ingest attempts first or pass --root / REGISTRY_ROOT\n"
    )


def test_wilson_macros_match_every_reference_case(loaded_root):
    from pathlib import Path

    import registry

    cases = json.loads(
        (Path(__file__).parents[1] / "data" / "statistics-reference.json").read_text()
    )["cases"]
    wilson = [
        c
        for c in cases
        if c["function"] == "wilson_interval" and abs(c["input"]["z"] - 1.959963984540054) < 1e-15
    ]
    assert len(wilson) >= 10
    store = registry.open_store(loaded_root)
    for case in wilson:
        x, n = case["input"]["successes"], case["input"]["n"]
        ((low, high),) = registry.run_query(
            store,
            "SELECT wilson_low(?::DOUBLE, ?::DOUBLE), wilson_high(?::DOUBLE, ?::DOUBLE)",
            [x, n, x, n],
        ).rows
        want = case["expected"]
        if want is None or want["low"] is None:
            assert low is None and high is None
        else:
            assert abs(low - want["low"]) <= case["abs_tol"], case["id"]
            assert abs(high - want["high"]) <= case["abs_tol"], case["id"]


def test_evidence_is_printed_verbatim_never_as_markup(invoke, root, tmp_path):
    from tests.conftest import make_record, write_jsonl

    ids = ["pkg[/]x", "[bold]task[/bold]-1"]
    path = write_jsonl(tmp_path / "m.jsonl", [make_record(task_id=t) for t in ids])
    assert invoke("ingest", str(path)).exit_code == 0
    result = invoke("sql", "SELECT task_id FROM attempts ORDER BY task_id")
    assert result.exit_code == 0, result.output
    for task in ids:
        assert task in result.stdout
