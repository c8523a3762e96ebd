"""`registry export`: every view, materialised, opens in plain DuckDB (or pyarrow) with the rows
`registry sql` returns; targets are never overwritten and a failed export leaves nothing."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

import registry
from registry.evidence.export import EXPORT_VIEWS, ExportError, export_duckdb, export_parquet
from registry_cli.output import rows_as_dicts, to_json
from tests.conftest import make_record, write_jsonl

TASK = "astropy__astropy-12907"


@pytest.fixture
def layered_root(loaded_root: Path, invoke) -> Path:
    """The quickstart sample plus one stored layer of every kind (so no layer view is empty)."""
    for args in (
        ("report", "--task", TASK),
        ("summary",),
        ("noise", "--system", "agent_system=bbbb"),
        (
            "compare",
            "--baseline",
            "experiment=exp-baseline-1102",
            "--candidate",
            "agent_system=bbbb",
        ),
    ):
        result = invoke(*args)
        assert result.exit_code in (0, 1), result.output  # compare may gate; layers are stored
    return loaded_root


def _normal(value: object) -> object:
    """JSON value with floats to 12 significant digits.

    The `samples` view averages in DuckDB's parallel order, so the last bit of a mean may
    differ between two reads of the same evidence (registry sql itself included).
    """
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items()}
    return value


def _sql_json(invoke, query: str) -> list[dict[str, object]]:
    result = invoke("sql", query, "--format", "json")
    assert result.exit_code == 0, result.output
    return _normal(json.loads(result.stdout))


def _plain_json(path: Path, query: str) -> list[dict[str, object]]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        cursor = con.execute(query)
        columns = [d[0] for d in cursor.description or []]
        return _normal(
            json.loads(to_json(rows_as_dicts(columns, cursor.fetchall()), sort_keys=False))
        )
    finally:
        con.close()


def test_duckdb_export_has_the_rows_of_registry_sql(layered_root, invoke, tmp_path):
    target = tmp_path / "out.duckdb"
    result = invoke("export", "--duckdb", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == f"wrote {target} (duckdb, {len(EXPORT_VIEWS)} views)"
    for view in EXPORT_VIEWS:
        query = f"SELECT * FROM {view} ORDER BY ALL"
        expected = _sql_json(invoke, query)
        assert _plain_json(target, query) == expected, view
        assert f"{view}  " in result.stdout
        if view not in ("retractions",):
            assert expected, f"{view} is empty: the comparison would prove nothing"
    assert not list(tmp_path.glob(".out.duckdb*")), "temporary files left behind"


def test_duckdb_export_keeps_macros_and_json(layered_root, tmp_path):
    target = tmp_path / "out.duckdb"
    export_duckdb(registry.open_store(layered_root), target)
    con = duckdb.connect(str(target), read_only=True)
    try:
        row = con.execute(
            "SELECT round(wilson_low(3, 10), 4), round(wilson_high(3, 10), 4), "
            "interval_below(0, 5, 5, 5), interval_above(0, 5, 5, 5), is_valid('timeout'), "
            "(SELECT document->>'$.task_id' FROM reports)"
        ).fetchall()[0]
    finally:
        con.close()
    assert row == (0.1078, 0.6032, True, False, True, TASK)


def test_parquet_export_reads_back_with_pyarrow(layered_root, invoke, tmp_path):
    target = tmp_path / "views"
    result = invoke("export", "--parquet", str(target))
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in target.iterdir()) == sorted(f"{v}.parquet" for v in EXPORT_VIEWS)
    for view in EXPORT_VIEWS:
        table = pq.read_table(target / f"{view}.parquet")
        expected = invoke("sql", f"SELECT * FROM {view}", "--format", "json")
        rows = json.loads(expected.stdout)
        assert table.num_rows == len(rows), view
        described = _sql_json(invoke, f"SELECT column_name FROM (DESCRIBE {view})")
        assert table.column_names == [r["column_name"] for r in described], view


@pytest.mark.parametrize("flag", ["--duckdb", "--parquet"])
def test_existing_target_is_refused(loaded_root, invoke, tmp_path, flag):
    target = tmp_path / "taken"
    target.write_text("keep me")
    result = invoke("export", flag, str(target))
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {target}: already exists; export never overwrites, name a new target\n"
    )
    assert target.read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reg", "taken"]


def test_missing_directory_and_usage_errors(loaded_root, invoke, tmp_path):
    result = invoke("export", "--duckdb", str(tmp_path / "no" / "out.duckdb"))
    assert result.exit_code == 1 and result.stderr.startswith("Error: ")
    assert "does not exist" in result.stderr and len(result.stderr.splitlines()) == 1
    result = invoke("export")
    assert result.exit_code == 2
    assert "give exactly one of --duckdb FILE or --parquet DIR" in result.stderr
    result = invoke("export", "--duckdb", "a.duckdb", "--parquet", "b")
    assert result.exit_code == 2


def test_as_of_exports_only_that_commit(loaded_root, invoke, tmp_path):
    extra = write_jsonl(tmp_path / "more.jsonl", [make_record(task_id="later-task")])
    assert invoke("ingest", str(extra)).exit_code == 0
    first = _sql_json(invoke, "SELECT count(*) AS n FROM attempts WHERE commit_seq = 1")[0]["n"]
    target = tmp_path / "then.duckdb"
    result = invoke("export", "--duckdb", str(target), "--as-of", "1")
    assert result.exit_code == 0, result.output
    assert _plain_json(target, "SELECT count(*) AS n, max(commit_seq) AS last FROM attempts") == [
        {"n": first, "last": 1}
    ]
    assert _plain_json(target, "SELECT seq FROM commits") == [{"seq": 1}]
    now = tmp_path / "now.duckdb"
    assert invoke("export", "--duckdb", str(now)).exit_code == 0
    assert _plain_json(now, "SELECT count(*) AS n FROM attempts") == [{"n": first + 1}]
    result = invoke("export", "--duckdb", str(tmp_path / "x.duckdb"), "--as-of", "9")
    assert result.exit_code == 1 and "--as-of 9" in result.stderr
    assert not (tmp_path / "x.duckdb").exists()


def test_include_retracted(loaded_root, invoke, tmp_path):
    store = registry.open_store(loaded_root)
    ids = [r[0] for r in registry.run_query(store, "SELECT attempt_id FROM attempts").rows]
    registry.retract(store, ids[:3], "bad import")
    hidden, shown = tmp_path / "hidden", tmp_path / "shown"
    export_parquet(store, hidden)
    export_parquet(store, shown, include_retracted=True)
    assert pq.read_table(hidden / "attempts.parquet").num_rows == len(ids) - 3
    assert pq.read_table(shown / "attempts.parquet").num_rows == len(ids)
    assert pq.read_table(hidden / "retractions.parquet").num_rows == 3


def test_failed_export_leaves_nothing(loaded_root, tmp_path, monkeypatch):
    import registry.evidence.export as export_module

    def broken(tmp: Path, target: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export_module, "_link_file", broken)
    monkeypatch.setattr(export_module, "_move_dir", broken)
    store = registry.open_store(loaded_root)
    with pytest.raises(registry.RegistryError, match="no space left on device"):
        export_duckdb(store, tmp_path / "out.duckdb")
    with pytest.raises(registry.RegistryError, match="no space left on device"):
        export_parquet(store, tmp_path / "views")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reg"]


def test_export_error_is_a_registry_error():
    assert issubclass(ExportError, registry.RegistryError)


def test_failed_duckdb_statement_is_one_line_and_leaves_nothing(loaded_root, tmp_path, monkeypatch):
    import registry.evidence.export as export_module

    monkeypatch.setattr(export_module, "JSON_COLUMNS", {"samples": "no_such_column"})
    target = tmp_path / "out.duckdb"
    with pytest.raises(ExportError) as caught:
        export_duckdb(registry.open_store(loaded_root), target)
    message = str(caught.value)
    assert message.startswith(f"{target}: cannot export: ") and "\n" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reg"]
