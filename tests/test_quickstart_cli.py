from __future__ import annotations

import json

from tests.conftest import QUICKSTART, tree_snapshot


def test_ingest_then_sql_counts_every_record(invoke, root):
    lines = [line for line in QUICKSTART.read_text().splitlines() if line.strip()]
    result = invoke("ingest", str(QUICKSTART))
    assert result.exit_code == 0, result.output
    assert f"read {len(lines)} attempts: {len(lines)} new, 0 already present" in result.stdout
    result = invoke("sql", "SELECT count(*) AS n FROM attempts", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == [{"n": len(lines)}]


def test_second_ingest_adds_nothing_and_changes_no_file(invoke, root):
    assert invoke("ingest", str(QUICKSTART)).exit_code == 0
    before = tree_snapshot(root)
    result = invoke("ingest", str(QUICKSTART), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["new"] == 0 and summary["already_present"] == summary["read"] > 0
    assert summary["commit"] is None
    assert tree_snapshot(root) == before
