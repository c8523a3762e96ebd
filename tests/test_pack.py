"""`registry pack`: many one-attempt ingests merged per cohort; every query answers the same."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from registry.analysis.report import build_report, report_document
from registry.analysis.summary import summarize
from registry.evidence.keys import derive_keys, record_json
from registry.evidence.query import connect, run_query
from registry.evidence.retract import retract
from registry.storage import checkpoints, ledger
from registry.storage.digest import digest_file
from registry.storage.pack import live_segments, pack
from registry.storage.store import Store, open_store
from registry.storage.tables import read_segment, rows_to_table, to_row, write_segment
from registry.storage.verify import verify
from registry_schemas import AttemptRecord
from registry_schemas.ledger import PackedSegment
from tests.conftest import make_record

CLASSES = ("resolved", "model_failure", "resolved", "timeout", "harness_failure")


def one_attempt_ingests(root: Path, count: int, tasks: int = 20, start: int = 0) -> Store:
    """Write `count` ingest commits of one attempt each through the library (no CLI)."""
    store = open_store(root, create=True)
    with store.temp_area() as area:
        for i in range(start, start + count):
            record = make_record(
                experiment_id=f"exp-{i // tasks}",
                task_id=f"task-{i % tasks:04d}",
                terminal_class=CLASSES[i % len(CLASSES)],
                cost_usd=0.01 * (i % 7),
                started_at=f"2026-11-{1 + i % 28:02d}T09:00:00Z",
                finished_at=f"2026-11-{1 + i % 28:02d}T09:00:12Z",
            )
            record = record_json(AttemptRecord.model_validate_json(orjson.dumps(record)))
            cohort, _, attempt_id = derive_keys(record)
            temp = area / "segment.parquet"
            write_segment(rows_to_table([to_row(record, attempt_id, cohort)]), temp)
            digest = digest_file(temp)
            path = store.segment_path(cohort, digest)
            store.put_file(temp, path)
            temp.unlink()
            segment = {
                "path": path,
                "digest": digest,
                "rows": 1,
                "cohort_key": cohort,
                "task_ids": [record["task_id"]],
            }
            source = {"path": f"ci-{i}.jsonl", "digest": digest, "records": 1}
            fields = {"kind": "ingest", "sources": [source], "segments": [segment]}
            fields |= {"attempts_read": 1, "attempts_new": 1, "attempts_present": 0}
            ledger.append(store, fields)
    return store


QUERIES = {
    "attempts": "SELECT * FROM attempts ORDER BY attempt_id",
    "samples": "SELECT * FROM samples ORDER BY ALL",
    "cohorts": "SELECT * FROM cohorts ORDER BY cohort_key",
    "systems": "SELECT * FROM systems ORDER BY ALL",
    "lineage": "SELECT * FROM lineage ORDER BY ALL",
    "weekly": (
        "SELECT task_id, date_trunc('week', started_at) AS week, count(*) AS n, "
        "sum((terminal_class = 'resolved')::INT) AS x, wilson_low(sum((terminal_class = "
        "'resolved')::INT), count(*)) AS low, min(commit_seq), max(commit_digest), "
        "max(source), max(ingested_at) FROM attempts GROUP BY ALL ORDER BY ALL"
    ),
    "retracted": "SELECT attempt_id, retracted FROM attempts ORDER BY attempt_id",
}


def _answers(store: Store, as_of: int | None = None) -> dict[str, Any]:
    answers: dict[str, Any] = {
        name: run_query(store, sql, as_of=as_of).rows for name, sql in QUERIES.items()
    }
    con = connect(store, ["task-0003"], as_of=as_of)
    try:
        answers["one task"] = con.execute(QUERIES["attempts"]).fetchall()
    finally:
        con.close()
    for task in ("task-0000", "task-0003"):
        document = report_document(build_report(store, task, as_of=as_of))
        answers[f"report {task}"] = document
    answers["summary"] = summarize(store, as_of=as_of).model_dump(mode="json")
    return answers


def _build(tmp_path: Path, count: int, tasks: int = 20) -> Store:
    store = one_attempt_ingests(tmp_path / "reg", count, tasks)
    retract(store, [_some_attempt(store)], reason="flaky grader")
    return store


def _some_attempt(store: Store) -> str:
    return str(run_query(store, "SELECT min(attempt_id) FROM attempts").rows[0][0])


def _same_before_and_after_pack(store: Store) -> None:
    head = len(ledger.read_ledger(store))
    before = _answers(store)
    result = pack(store)
    assert result.commit is not None and result.commit.commit.kind == "pack"
    assert result.segments_after == result.cohorts < result.segments_before
    after = _answers(store)
    for name in before:
        assert after[name] == before[name], name
    # the ledger as it stood before the pack reads the original segments, and agrees too
    assert _answers(store, as_of=head) == before
    report = verify(store)
    assert report.ok, report.problems
    assert report.packs == 1 and not report.unreferenced


def test_pack_keeps_every_answer_and_verifies(tmp_path):
    store = _build(tmp_path, 60, tasks=10)
    _same_before_and_after_pack(store)
    live = live_segments(ledger.read_ledger(store))
    assert len(live) == 10 and all(item.packed for item in live)
    table = read_segment(store.resolve(live[0].segment.path))
    assert table.column_names[-1] == "commit_seq"
    seqs = table.column("commit_seq").to_pylist()
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs) == 6


def test_pack_is_idempotent(tmp_path):
    store = _build(tmp_path, 60, tasks=6)
    first = pack(store)
    head = len(ledger.read_ledger(store))
    again = pack(store)
    assert first.commit is not None and again.commit is None
    assert len(ledger.read_ledger(store)) == head


def test_pack_after_more_ingests_merges_the_packed_segment_again(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 40, tasks=4)
    pack(store)
    one_attempt_ingests(tmp_path / "reg", 20, tasks=4, start=40)
    before = _answers(store)
    result = pack(store)
    assert result.cohorts == 4 and result.segments_before == 24 and result.segments_after == 4
    assert _answers(store) == before
    assert verify(store).ok


def test_a_pack_that_drops_a_row_is_named_by_verify(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 12, tasks=2)
    result = pack(store)
    assert result.commit is not None
    entry = result.commit
    assert entry.commit.pack is not None
    packed = entry.commit.pack.segments[0]
    table = read_segment(store.resolve(packed.path)).slice(1)
    forged = _forge_pack(store, entry, packed.cohort_key, table, packed.supersedes)
    report = verify(store)
    assert any(forged in p and "does not hold exactly the rows" in p for p in report.problems), (
        report.problems
    )


def test_a_pack_that_changes_a_row_commit_is_named_by_verify(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 12, tasks=2)
    result = pack(store)
    assert result.commit is not None and result.commit.commit.pack is not None
    packed = result.commit.commit.pack.segments[0]
    table = read_segment(store.resolve(packed.path))
    seqs = table.column("commit_seq").to_pylist()
    index = table.column_names.index("commit_seq")
    field = table.schema.field(index)
    table = table.set_column(index, field, pa.array([seqs[1], *seqs[1:]], pa.int64()))
    forged = _forge_pack(store, result.commit, packed.cohort_key, table, packed.supersedes)
    assert any(forged in p for p in verify(store).problems)


def test_one_forged_segment_of_a_pack_is_named_alone(tmp_path):
    """Two packed segments in one pack commit: a value changed in one names that one only."""
    store = one_attempt_ingests(tmp_path / "reg", 12, tasks=2)
    result = pack(store)
    assert result.commit is not None and result.commit.commit.pack is not None
    first, second = result.commit.commit.pack.segments
    table = read_segment(store.resolve(first.path))
    index = table.column_names.index("terminal_class")
    classes = table.column("terminal_class").to_pylist()
    classes[0] = "timeout" if classes[0] != "timeout" else "resolved"
    table = table.set_column(index, table.schema.field(index), pa.array(classes, pa.string()))
    forged = _forge_pack(
        store, result.commit, first.cohort_key, table, first.supersedes, keep=[second]
    )
    problems = verify(store).problems
    assert [p for p in problems if "does not hold exactly the rows" in p] == [
        f"{forged}: does not hold exactly the rows (attempt ids, content and commits) of the "
        "segments it supersedes"
    ], problems
    assert not any(second.path in p for p in problems)


def _forge_pack(
    store: Store,
    entry: ledger.LedgerEntry,
    cohort: str,
    table: pa.Table,
    supersedes: list[str],
    keep: Sequence[PackedSegment] = (),
) -> str:
    """Write another pack commit of `table` in place of the real one (a forged history).

    `keep`: packed segments of the real commit that the forged one names too.
    """
    with store.temp_area() as area:
        temp = area / "forged.parquet"
        write_segment(table, temp)
        digest = digest_file(temp)
        path = store.segment_path(cohort, digest)
        store.put_file(temp, path)
    segment = {
        "path": path,
        "digest": digest,
        "rows": len(table),
        "cohort_key": cohort,
        "task_ids": sorted(set(table.column("task_id").to_pylist())),
        "supersedes": supersedes,
    }
    name = store.resolve(ledger.commit_name(entry.seq))
    os.chmod(name, 0o644)
    name.unlink()
    kept = [s.model_dump(mode="json") for s in keep]
    assert ledger.try_append(
        store,
        entry.seq,
        entry.commit.prev,
        {"kind": "pack", "pack": {"segments": [segment, *kept]}},
    )
    return path


def test_readers_use_the_packed_segment_and_check_it(tmp_path):
    store = one_attempt_ingests(tmp_path / "reg", 12, tasks=2)
    result = pack(store)
    assert result.commit is not None and result.commit.commit.pack is not None
    packed = result.commit.commit.pack.segments[0]
    path = store.resolve(packed.path)
    os.chmod(path, 0o644)
    path.write_bytes(path.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(Exception, match="damaged"):
        run_query(store, "SELECT count(*) FROM attempts")


@pytest.mark.slow
@pytest.mark.timeout(3600)  # writes 10,000 commits, then reads, packs and verifies
def test_ten_thousand_one_attempt_ingests_then_pack(tmp_path):
    store = _build(tmp_path, 10_000, tasks=200)
    assert checkpoints.list_checkpoints(store)[0][0] == 10_000
    chain = checkpoints.load_checkpointed(
        store, sorted(n for n in os.listdir(store.ledger_dir) if ledger.is_commit_name(n))
    )
    assert len(chain) == 10_000  # the ledger of 10,000 commits is read through checkpoints
    _same_before_and_after_pack(store)
