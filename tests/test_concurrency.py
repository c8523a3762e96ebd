"""Concurrent writers: several `registry ingest` processes at once lose nothing, never write
an attempt twice, and leave one unbroken hash chain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import registry
from registry_schemas import AttemptRecord
from tests.conftest import make_record, write_jsonl

WRITERS = 4
# Every writer imports the CLI, says it is ready, then waits for the gate file, so that the
# ingests themselves (not the interpreter start-ups) overlap.
GATED_CLI = """
import os, sys, time
from registry_cli.main import main
gate, ready = sys.argv.pop(1), sys.argv.pop(1)
open(ready, "w").close()
while not os.path.exists(gate):
    time.sleep(0.001)
main()
"""


def _records(experiment: str) -> list[dict]:
    # 8 tasks x 25 repeats: every writer touches the same 8 cohorts.
    return [
        make_record(experiment_id=experiment, task_id=f"task-{t}", repeat_index=r)
        for t in range(8)
        for r in range(25)
    ]


def _attempt_ids(records: list[dict]) -> set[str]:
    return {
        registry.attempt_id_of(AttemptRecord.model_validate_json(json.dumps(r)).model_dump())
        for r in records
    }


def _release_when_ready(procs: list[subprocess.Popen], ready: list[Path], gate: Path) -> None:
    """Open the gate once every writer says it is ready, however long a busy machine takes.

    No clock is involved: a writer that exits before saying so (it crashed) stops the wait
    too, and its exit status fails the test. The global pytest timeout bounds a real hang.
    """
    while not all(
        flag.exists() or proc.poll() is not None for flag, proc in zip(ready, procs, strict=True)
    ):
        time.sleep(0.005)
    gate.touch()


def _ingest_at_once(root: Path, files: list[Path], scratch: Path) -> list[dict]:
    """Run one gated `registry ingest --json` per file, release them together, and wait."""
    env = {k: v for k, v in os.environ.items() if k != "REGISTRY_CRASH_AT"}
    gate, ready = scratch / "gate", [scratch / f"ready-{i}" for i in range(len(files))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GATED_CLI, str(gate), str(flag), "ingest", str(f)]
            + ["--root", str(root), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for f, flag in zip(files, ready, strict=True)
    ]
    _release_when_ready(procs, ready, gate)
    summaries = []
    for proc in procs:
        out, err = proc.communicate()
        assert proc.returncode == 0, err
        summaries.append(json.loads(out))
    return summaries


def _visible_ids(store: registry.Store) -> list[str]:
    return [row[0] for row in registry.run_query(store, "SELECT attempt_id FROM attempts").rows]


def _raw_segment_ids(store: registry.Store) -> list[str]:
    """Every attempt id stored in every segment the ledger names, duplicates included."""
    ids: list[str] = []
    for entry in registry.read_ledger(store):
        for segment in entry.commit.segments:
            table = pq.read_table(store.resolve(segment.path), columns=["attempt_id"])
            ids.extend(table.column("attempt_id").to_pylist())
    return ids


@pytest.mark.parametrize("existing", [True, False], ids=["existing-root", "new-root"])
def test_concurrent_ingests_of_different_files_lose_nothing(root, tmp_path, existing):
    # With a new root, the four writers also race to create the registry itself.
    if existing:
        registry.open_store(root, create=True)
    batches = [_records(f"exp-{i}") for i in range(WRITERS)]
    files = [write_jsonl(tmp_path / f"in-{i}.jsonl", b) for i, b in enumerate(batches)]

    summaries = _ingest_at_once(root, files, tmp_path)

    assert [s["new"] for s in summaries] == [len(b) for b in batches]
    assert sorted(s["commit_seq"] for s in summaries) == [1, 2, 3, 4]
    expected = set().union(*(_attempt_ids(b) for b in batches))
    assert len(expected) == WRITERS * 200
    store = registry.open_store(root)
    visible = _visible_ids(store)
    assert len(visible) == len(expected) and set(visible) == expected
    raw = _raw_segment_ids(store)
    assert len(raw) == len(set(raw)) == len(expected)
    entries = registry.read_ledger(store)
    assert [e.seq for e in entries] == [1, 2, 3, 4]
    assert entries[0].commit.prev is None
    for previous, entry in zip(entries, entries[1:], strict=False):
        assert entry.commit.prev == previous.digest
    assert {e.digest for e in entries} == {s["commit"] for s in summaries}
    report = registry.verify(store)
    assert report.problems == []
    assert report.unreferenced == []
    assert (report.commits, report.attempts) == (4, len(expected))


def test_concurrent_ingests_of_the_same_file_write_each_attempt_once(root, tmp_path):
    store = registry.open_store(root, create=True)
    records = _records("exp-same")
    path = write_jsonl(tmp_path / "same.jsonl", records)

    summaries = _ingest_at_once(root, [path] * WRITERS, tmp_path)

    expected = _attempt_ids(records)
    assert sum(s["new"] for s in summaries) == len(expected)
    assert sum(s["already_present"] for s in summaries) == (WRITERS - 1) * len(expected)
    visible = _visible_ids(store)
    assert len(visible) == len(expected) and set(visible) == expected
    raw = _raw_segment_ids(store)
    assert len(raw) == len(set(raw)) == len(expected)
    assert [e.seq for e in registry.read_ledger(store)] == [1]
    report = registry.verify(store)
    assert report.problems == []
    assert report.attempts == len(expected)


def test_concurrent_first_ingest_into_a_root_being_created(root, tmp_path):
    # The exact state another first writer leaves between its mkdirs and its marker.
    for sub in ("attempts", "ledger", "layers", "tmp"):
        (root / sub).mkdir(parents=True)
    path = write_jsonl(tmp_path / "in.jsonl", _records("exp-first")[:5])

    result = registry.ingest(root, [str(path)])

    assert result.new == 5


def test_concurrent_reports_on_unchanged_evidence_record_one_layer(root, tmp_path):
    from tests.conftest import QUICKSTART

    registry.ingest(root, [str(QUICKSTART)])
    gate, ready = tmp_path / "gate", [tmp_path / f"ready-{i}" for i in range(WRITERS)]
    args = ["report", "--task", "astropy__astropy-12907", "--root", str(root), "--format", "json"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", GATED_CLI, str(gate), str(flag), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for flag in ready
    ]
    _release_when_ready(procs, ready, gate)
    outputs = [proc.communicate() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), outputs
    assert len({out for out, _ in outputs}) == 1  # byte-identical reports
    store = registry.open_store(root)
    assert len(registry.list_layers(store, "report")) == 1
    layer_commits = [e for e in registry.read_ledger(store) if e.commit.layer is not None]
    assert len(layer_commits) == 1
    assert sum("(new," in err for _, err in outputs) == 1


def _small_batch(experiment: str) -> list[dict]:
    # 3 tasks x 4 repeats: small, so that many writers stay cheap on a busy machine.
    return [
        make_record(experiment_id=experiment, task_id=f"task-{t}", repeat_index=r)
        for t in range(3)
        for r in range(4)
    ]


def _check_race(root: Path, batches: list[list[dict]], summaries: list[dict]) -> None:
    """Every attempt once, one commit per sequence number in one chain, verify clean."""
    expected = set().union(*(_attempt_ids(b) for b in batches))
    for batch, summary in zip(batches, summaries, strict=True):
        assert summary["read"] == len(batch)
        assert summary["new"] + summary["already_present"] == summary["read"]
    assert sum(s["new"] for s in summaries) == len(expected)  # nothing lost, nothing twice
    store = registry.open_store(root)
    visible = _visible_ids(store)
    assert len(visible) == len(set(visible)) and set(visible) == expected
    raw = _raw_segment_ids(store)
    assert len(raw) == len(set(raw)) == len(expected)
    entries = registry.read_ledger(store)
    committed = sorted(s["commit_seq"] for s in summaries if s["commit_seq"] is not None)
    assert [e.seq for e in entries] == committed == list(range(1, len(committed) + 1))
    assert sorted(p.name for p in (root / "ledger").iterdir() if p.suffix == ".json") == [
        f"{seq:012d}.json" for seq in committed
    ]
    for previous, entry in zip(entries, entries[1:], strict=False):
        assert entry.commit.prev == previous.digest
    claimed = [s.path for e in entries for s in e.commit.segments]
    assert len(claimed) == len(set(claimed))
    report = registry.verify(store)
    assert report.problems == []
    assert [p for p in report.unreferenced if not p.startswith("attempts/")] == []
    assert report.attempts == len(expected)


def _race(root: Path, tmp_path: Path, writers: int, overlapping: bool) -> None:
    registry.open_store(root, create=True)
    pool = [_small_batch(f"exp-{i}") for i in range(writers)]
    # overlapping: writer i also carries writer i+1's attempts, so every attempt is offered
    # by two writers and half the commits race for the same rows
    batches = [pool[i] + pool[(i + 1) % writers] for i in range(writers)] if overlapping else pool
    files = [write_jsonl(tmp_path / f"in-{i}.jsonl", b) for i, b in enumerate(batches)]
    summaries = _ingest_at_once(root, files, tmp_path)
    _check_race(root, batches, summaries)


@pytest.mark.parametrize("overlapping", [False, True], ids=["disjoint", "overlapping"])
def test_racing_writers(root, tmp_path, overlapping):
    _race(root, tmp_path, WRITERS, overlapping)


@pytest.mark.slow
@pytest.mark.parametrize("overlapping", [False, True], ids=["disjoint", "overlapping"])
def test_sixteen_racing_writers(root, tmp_path, overlapping):
    _race(root, tmp_path, 16, overlapping)
