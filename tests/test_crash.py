"""Crash safety: an ingest killed at any checkpoint leaves a registry that verifies, shows
either the old rows or the old and new rows (never part of a batch), and a re-run completes
without writing any attempt twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import registry
from registry._faults import POINTS
from registry_schemas import AttemptRecord
from tests.conftest import make_record, write_jsonl

CLI = "from registry_cli.main import main; main()"
SPILLING_INGEST = (
    "import sys; from registry.ingest import ingest; "
    "ingest(sys.argv[1], [sys.argv[2]], spill_rows=5)"
)
COMMITTED = {"after-commit"}
# Segments of the crashed batch that are published but not yet named by a commit.
ORPHAN_SEGMENTS = {"after-first-segment-published": 1, "after-segments-published": 4}


def _records(experiment: str, tasks: int, repeats: int) -> list[dict]:
    return [
        make_record(experiment_id=experiment, task_id=f"task-{t}", repeat_index=r)
        for t in range(tasks)
        for r in range(repeats)
    ]


def _attempt_ids(records: list[dict]) -> set[str]:
    return {
        registry.attempt_id_of(AttemptRecord.model_validate_json(json.dumps(r)).model_dump())
        for r in records
    }


def _ingest_command(point: str, root: Path, path: Path) -> list[str]:
    # The CLI has no spill option, so the spill checkpoint is reached through the library.
    if point == "after-spill":
        return [sys.executable, "-c", SPILLING_INGEST, str(root), str(path)]
    return [sys.executable, "-c", CLI, "ingest", str(path), "--root", str(root)]


def _run(command: list[str], crash_at: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "REGISTRY_CRASH_AT"}
    if crash_at is not None:
        env["REGISTRY_CRASH_AT"] = crash_at
    return subprocess.run(command, env=env, capture_output=True, text=True)


def _visible_ids(root: Path) -> list[str]:
    store = registry.open_store(root)
    return [row[0] for row in registry.run_query(store, "SELECT attempt_id FROM attempts").rows]


def _raw_segment_ids(root: Path) -> list[str]:
    """Every attempt id stored in every segment the ledger names, duplicates included."""
    store = registry.open_store(root)
    ids: list[str] = []
    for entry in registry.read_ledger(store):
        for segment in entry.commit.segments:
            table = pq.read_table(store.resolve(segment.path), columns=["attempt_id"])
            ids.extend(table.column("attempt_id").to_pylist())
    return ids


@pytest.mark.parametrize("point", POINTS, ids=POINTS)
def test_ingest_killed_at_checkpoint_leaves_a_consistent_registry(point, root, tmp_path):
    old_records = _records("exp-old", tasks=3, repeats=4)
    new_records = _records("exp-new", tasks=4, repeats=6)  # 4 cohorts, 3 already known
    old_ids, new_ids = _attempt_ids(old_records), _attempt_ids(new_records)
    registry.ingest(root, [str(write_jsonl(tmp_path / "old.jsonl", old_records))])
    assert set(_visible_ids(root)) == old_ids
    new_file = write_jsonl(tmp_path / "new.jsonl", new_records)
    command = _ingest_command(point, root, new_file)

    crashed = _run(command, crash_at=point)

    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    report = registry.verify(registry.open_store(root))
    assert report.problems == []
    assert any(path.startswith("tmp/") for path in report.unreferenced), report.unreferenced
    orphans = [p for p in report.unreferenced if p.startswith("attempts/")]
    assert len(orphans) == ORPHAN_SEGMENTS.get(point, 0), orphans
    visible = _visible_ids(root)
    assert len(visible) == len(set(visible))
    assert set(visible) == (old_ids | new_ids if point in COMMITTED else old_ids)
    commits = registry.read_ledger(registry.open_store(root))
    assert [e.seq for e in commits] == ([1, 2] if point in COMMITTED else [1])

    rerun = _run(command, crash_at=None)

    assert rerun.returncode == 0, rerun.stderr
    report = registry.verify(registry.open_store(root))
    assert report.problems == []
    assert report.attempts == len(old_ids) + len(new_ids)
    assert [e.seq for e in registry.read_ledger(registry.open_store(root))] == [1, 2]
    count = registry.run_query(registry.open_store(root), "SELECT count(*) FROM attempts")
    assert count.rows == [(len(old_ids) + len(new_ids),)]
    assert set(_visible_ids(root)) == old_ids | new_ids
    raw = _raw_segment_ids(root)
    assert len(raw) == len(set(raw)) == len(old_ids) + len(new_ids)
