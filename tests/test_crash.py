"""Crash safety: an ingest, report or retraction killed (SIGKILL) at any step leaves a registry
that verifies, shows either the old state or the new one (never part of a batch), and a re-run
completes without writing anything twice."""

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
from registry._faults import POINTS, RETRACT_POINTS
from registry_schemas import AttemptRecord
from tests.conftest import QUICKSTART, make_record, write_jsonl

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


# --- report, retract and every durable write ----------------------------------------------
#
# `report` stores its layer through registry/storage/layers.py, which has no checkpoint of its own:
# the child process wraps `ledger.append` (kill just before or just after the layer commit)
# and `Store.put_file` (kill before or after the Nth durable write of any command). Every
# kill is a real SIGKILL of a real CLI process; nothing waits on a clock.

FAULTY_CLI = """
import os, signal, sys, threading
from registry.storage import ledger, store

spec = os.environ.get("REGISTRY_TEST_KILL", "")
count_file = os.environ.get("REGISTRY_TEST_COUNT")

def die():
    os.kill(os.getpid(), signal.SIGKILL)

if spec.startswith("append:"):
    _, kind, when = spec.split(":")
    original_append = ledger.append

    def append(target, fields, already=None):
        if fields.get("kind") == kind and when == "before":
            die()
        result = original_append(target, fields, already)
        if fields.get("kind") == kind and when == "after":
            die()
        return result

    ledger.append = append

original_put = store.Store.put_file
writes = []
lock = threading.Lock()  # segments are published by several threads at once

def put_file(self, temp_file, relative):
    with lock:
        writes.append(relative)
        number = len(writes)  # this write's own number, whatever the other threads do
        if count_file:
            with open(count_file, "a") as handle:
                handle.write(relative + "\\n")
    if spec == f"put:{number}:before":
        die()
    created = original_put(self, temp_file, relative)
    if spec == f"put:{number}:after":
        die()
    return created

store.Store.put_file = put_file
from registry_cli.main import main
main()
"""
TASK = "astropy__astropy-12907"


def _cli(args: list[str], kill: str | None = None, count: Path | None = None):
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("REGISTRY_CRASH_AT", "REGISTRY_TEST_KILL", "REGISTRY_TEST_COUNT")
    }
    if kill is not None:
        env["REGISTRY_TEST_KILL"] = kill
    if count is not None:
        env["REGISTRY_TEST_COUNT"] = str(count)
    return subprocess.run(
        [sys.executable, "-c", FAULTY_CLI, *args], env=env, capture_output=True, text=True
    )


def _commits(root: Path, kind: str) -> list[registry.LedgerEntry]:
    return [e for e in registry.read_ledger(registry.open_store(root)) if e.commit.kind == kind]


def _verified(root: Path) -> registry.VerifyReport:
    report = registry.verify(registry.open_store(root))
    assert report.problems == [], report.problems
    return report


def _report_args(root: Path) -> list[str]:
    return ["report", "--task", TASK, "--root", str(root), "--format", "json"]


def _retract_args(root: Path) -> list[str]:
    return ["retract", "--commit", "1", "--reason", "bad grader", "--root", str(root)]


def _check_report_recovers(root: Path) -> None:
    rerun = _cli(_report_args(root))
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["task_id"] == TASK
    again = _cli(_report_args(root))
    assert again.returncode == 0, again.stderr
    assert again.stdout == rerun.stdout  # the same report, byte for byte
    assert "(new," not in again.stderr
    assert len(_commits(root, "layer")) == 1
    assert len(registry.list_layers(registry.open_store(root), "report")) == 1
    _verified(root)


def _check_retract_recovers(root: Path, wanted: set[str]) -> None:
    rerun = _cli(_retract_args(root))
    assert rerun.returncode == 0, rerun.stderr
    again = _cli(_retract_args(root))
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith(f"retracted 0 attempts, {len(wanted)} already retracted")
    commits = _commits(root, "retraction")
    assert len(commits) == 1
    assert commits[0].commit.retraction is not None
    assert set(commits[0].commit.retraction.attempt_ids) == wanted
    store = registry.open_store(root)
    assert set(registry.retracted_ids(registry.read_ledger(store))) == wanted
    _verified(root)


@pytest.mark.parametrize("when", ["before", "after"])
def test_report_killed_around_its_layer_commit(when, root):
    registry.ingest(root, [str(QUICKSTART)])

    crashed = _cli(_report_args(root), kill=f"append:layer:{when}")

    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    report = _verified(root)
    layers = _commits(root, "layer")
    if when == "before":  # the layer file is written, its commit is not: ignored by readers
        assert layers == []
        assert [p for p in report.unreferenced if p.startswith("layers/")] != []
    else:
        assert len(layers) == 1
    _check_report_recovers(root)


@pytest.mark.parametrize("point", RETRACT_POINTS)
def test_retract_killed_at_checkpoint(point, root):
    registry.ingest(root, [str(QUICKSTART)])
    wanted = set(_visible_ids(root))
    env_point = {"REGISTRY_CRASH_AT": point}

    crashed = subprocess.run(
        [sys.executable, "-c", CLI, *_retract_args(root)],
        env={**os.environ, **env_point},
        capture_output=True,
        text=True,
    )

    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    _verified(root)
    retracted = set(registry.retracted_ids(registry.read_ledger(registry.open_store(root))))
    assert retracted == (wanted if point == "retract-after-commit" else set())
    assert set(_visible_ids(root)) == (set() if retracted else wanted)
    _check_retract_recovers(root, wanted)


def _durable_writes(args: list[str], tmp_path: Path) -> list[str]:
    """The root-relative paths a clean run of a command writes durably, in order."""
    count = tmp_path / f"writes-{args[0]}.txt"
    result = _cli(args, count=count)
    assert result.returncode == 0, result.stderr
    return count.read_text().splitlines()


@pytest.mark.slow
def test_every_durable_write_of_ingest_report_and_retract_killed(tmp_path):
    """Kill before and after each durable write (segment, layer, commit) of three commands."""
    old_records = _records("exp-old", tasks=3, repeats=4)
    new_records = _records("exp-new", tasks=4, repeats=6)
    old_ids, new_ids = _attempt_ids(old_records), _attempt_ids(new_records)
    old_file = write_jsonl(tmp_path / "old.jsonl", old_records)
    new_file = write_jsonl(tmp_path / "new.jsonl", new_records)

    def fresh(name: str, with_new: bool = False) -> Path:
        target = tmp_path / name
        registry.ingest(target, [str(QUICKSTART if with_new else old_file)])
        return target

    probe = fresh("probe-ingest")
    ingest_writes = _durable_writes(["ingest", str(new_file), "--root", str(probe)], tmp_path)
    probe = fresh("probe-report", with_new=True)
    report_writes = _durable_writes(_report_args(probe), tmp_path)
    probe = fresh("probe-retract", with_new=True)
    retract_writes = _durable_writes(_retract_args(probe), tmp_path)
    assert len(ingest_writes) == 5 and len(report_writes) == 2 and len(retract_writes) == 1
    trials = 0
    for number in range(1, len(ingest_writes) + 1):
        for when in ("before", "after"):
            root = fresh(f"ingest-{number}-{when}")
            args = ["ingest", str(new_file), "--root", str(root)]
            assert _cli(args, kill=f"put:{number}:{when}").returncode == -signal.SIGKILL
            _verified(root)
            committed = number == len(ingest_writes) and when == "after"
            assert set(_visible_ids(root)) == (old_ids | new_ids if committed else old_ids)
            assert _cli(args).returncode == 0
            assert registry.verify(registry.open_store(root)).attempts == len(old_ids | new_ids)
            raw = _raw_segment_ids(root)
            assert len(raw) == len(set(raw)) == len(old_ids | new_ids)
            again = _cli(args).stdout.splitlines()  # the input was read before: a note first
            assert f"read {len(new_ids)} attempts: 0 new, {len(new_ids)} already present" in again
            trials += 1
    for number in range(1, len(report_writes) + 1):
        for when in ("before", "after"):
            root = fresh(f"report-{number}-{when}", with_new=True)
            assert _cli(_report_args(root), kill=f"put:{number}:{when}").returncode == -9
            _verified(root)
            _check_report_recovers(root)
            trials += 1
    for when in ("before", "after"):
        root = fresh(f"retract-{when}", with_new=True)
        wanted = set(_visible_ids(root))
        assert _cli(_retract_args(root), kill=f"put:1:{when}").returncode == -signal.SIGKILL
        _verified(root)
        _check_retract_recovers(root, wanted)
        trials += 1
    assert trials == 16
