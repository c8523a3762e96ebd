"""What a one-task report reads: the ledger once, no pyarrow, the same evidence.

The report's bytes are covered by tests/test_report.py; here, the reads that make it fast
keep their meaning: an evidence-only connection returns the rows a full one does, a ledger
snapshot extends with exactly the commits written since (checked like a fresh read), and the
command loads no pyarrow or numpy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import registry
from registry.analysis import report as report_module
from registry.errors import IntegrityError
from registry.evidence import query
from registry.evidence.selection import _COLUMNS
from registry.storage import ledger
from registry.storage.tables import ATTEMPT_SCHEMA

TASK = "django__django-11099"
ROOT = Path(__file__).resolve().parent.parent


def test_segment_columns_are_the_segment_schema():
    assert tuple(ATTEMPT_SCHEMA.names) == query.SEGMENT_COLUMNS


def test_report_command_loads_no_pyarrow(loaded_root):
    code = (
        "import atexit, json, sys\n"
        "atexit.register(lambda: sys.__stderr__.write('\\nLOADED ' + json.dumps(sorted("
        "{m.split('.')[0] for m in sys.modules} & {'pyarrow', 'numpy', 'pandas'}))))\n"
        "sys.argv[0] = 'registry'\n"
        "from registry_cli.main import main\n"
        "main()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "report", "--task", TASK, "--root", str(loaded_root)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "resolved" in result.stdout
    assert json.loads(result.stderr.rpartition("\nLOADED ")[2]) == []


def _rows(con, sql):
    return con.execute(sql).fetchall()


@pytest.mark.parametrize("include_retracted", [False, True])
def test_evidence_only_connection_holds_the_same_evidence(loaded_root, include_retracted):
    store = registry.open_store(loaded_root)
    first = registry.run_query(store, "SELECT attempt_id FROM attempts ORDER BY attempt_id")
    registry.retract(store, [first.rows[0][0]], "test")
    tasks = [TASK]
    full = query.connect(store, tasks, include_retracted=include_retracted)
    lean = query.connect(store, tasks, include_retracted=include_retracted, evidence_only=True)
    try:
        for view in ("attempts", "_evidence"):
            sql = f"SELECT {_COLUMNS.replace(', slot_conflict', '')} FROM {view} ORDER BY ALL"
            assert _rows(lean, sql) == _rows(full, sql)
            assert _rows(lean, sql), view
        assert _rows(lean, "SELECT * FROM _retracted") == _rows(full, "SELECT * FROM _retracted")
    finally:
        full.close()
        lean.close()


def _count_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    original = ledger.read_entry

    def counting(store, relative: str) -> ledger.LedgerEntry:
        reads.append(relative)
        return original(store, relative)

    monkeypatch.setattr(ledger, "read_entry", counting)
    return reads


def test_a_recorded_report_reads_the_ledger_once(loaded_root, monkeypatch):
    store = registry.open_store(loaded_root)
    reads = _count_reads(monkeypatch)
    built, version, created = report_module.record_report(store, TASK)
    assert created and version.commit_seq == 2
    # the ledger is read once (evidence and layer lookup); appending reads the head it chains
    # to (its digest, its Merkle tree) and the commit it wrote
    assert reads == [ledger.commit_name(s) for s in (1, 1, 1, 2)]

    reads.clear()
    again, same, created = report_module.record_report(store, TASK)
    assert (same, created) == (version, False)
    assert reads == [ledger.commit_name(1), ledger.commit_name(2)]
    assert report_module.report_document(again) == report_module.report_document(built)
    assert same.digest == registry.digest_json(report_module.report_document(built))


def test_a_snapshot_extends_with_new_commits_and_checks_them(loaded_root, tmp_path):
    store = registry.open_store(loaded_root)
    snapshot = ledger.LedgerSnapshot(store)
    assert [e.seq for e in snapshot.entries] == [1]
    registry.record_report(store, TASK)  # another writer's commit 2
    reads_before = list(snapshot.entries)
    assert [e.seq for e in snapshot.refresh()] == [1, 2]
    assert snapshot.entries[0] is reads_before[0]  # commit 1 is not read again
    assert [(e.seq, e.digest) for e in snapshot.entries] == [
        (e.seq, e.digest) for e in ledger.read_ledger(store)
    ]

    # a commit 3 that does not chain to commit 2 is refused, as a fresh read refuses it
    commit = snapshot.entries[1].commit
    forged = commit.model_copy(update={"seq": 3, "prev": snapshot.entries[0].digest})
    path = store.resolve(ledger.commit_name(3))
    path.write_bytes(ledger.encode_commit(forged))
    with pytest.raises(IntegrityError, match="prev does not match"):
        snapshot.refresh()
    with pytest.raises(IntegrityError, match="prev does not match"):
        ledger.read_ledger(store)


def test_a_snapshot_reads_again_a_ledger_that_lost_a_known_commit(loaded_root):
    store = registry.open_store(loaded_root)
    registry.record_report(store, TASK)
    snapshot = ledger.LedgerSnapshot(store)
    store.resolve(ledger.commit_name(2)).unlink()
    assert [e.seq for e in snapshot.refresh()] == [1]
