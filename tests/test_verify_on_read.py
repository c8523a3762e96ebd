"""Verify on read: every segment, layer and commit a command reads is checked against the digest
its commit (or the chain) records before its content is used; a mismatch is one line naming the
object, exit 1, and `registry verify` still walks a damaged registry and names every problem."""

from __future__ import annotations

import json
import random
import stat
from pathlib import Path

import pytest

import registry
from registry.errors import IntegrityError
from registry.storage import ledger
from registry_schemas import Commit

TASK = "django__django-11099"
OTHER = "flask__flask-4045"


def _writable(path: Path) -> Path:
    path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return path


def _segment_of(store: registry.Store, task: str) -> str:
    entries = registry.read_ledger(store)
    return next(s.path for e in entries for s in e.commit.segments if s.task_ids == [task])


def _flip(path: Path, bit: int) -> None:
    data = bytearray(_writable(path).read_bytes())
    data[bit // 8] ^= 1 << (bit % 8)
    path.write_bytes(bytes(data))


def _damaged(relative: str) -> str:
    return f"segment {relative} is damaged (digest mismatch); run 'registry verify'"


def test_every_single_bit_flip_in_a_segment_is_refused(loaded_root):
    # No flipped bit, wherever it falls (Parquet header, data page, footer), yields an answer.
    store = registry.open_store(loaded_root)
    relative = _segment_of(store, TASK)
    path = store.resolve(relative)
    original = path.read_bytes()
    rng = random.Random(7)
    for bit in rng.sample(range(len(original) * 8), 200):
        _flip(path, bit)
        with pytest.raises(IntegrityError) as caught:
            registry.run_query(store, "SELECT count(*) FROM attempts")
        assert str(caught.value) == _damaged(relative)
        path.write_bytes(original)
    assert registry.run_query(store, "SELECT count(*) FROM attempts").rows == [(112,)]


@pytest.mark.parametrize(
    "args",
    [
        ("sql", "SELECT count(*) FROM attempts"),
        ("report", "--task", TASK),
        ("summary",),
        ("noise", "--system", "experiment=exp-baseline-1102", "--simulations", "100"),
        (
            "compare",
            "--baseline",
            "experiment=exp-baseline-1102",
            "--candidate",
            "experiment=exp-candidate-1109",
            "--resamples",
            "100",
        ),
    ],
    ids=lambda a: a[0],
)
def test_damaged_segment_is_one_line_naming_it(loaded_root, invoke, args):
    store = registry.open_store(loaded_root)
    relative = _segment_of(store, TASK)
    _flip(store.resolve(relative), 8 * 100 + 3)

    result = invoke(*args)

    assert result.exit_code == 1, result.output
    assert result.output == f"Error: {_damaged(relative)}\n"


def test_only_the_segments_a_command_reads_are_checked(loaded_root, invoke):
    # `report --task` reads that task's segments only: damage elsewhere is not its business
    # (verify finds it); the damaged task's own report is refused.
    store = registry.open_store(loaded_root)
    relative = _segment_of(store, TASK)
    _flip(store.resolve(relative), 8 * 100 + 3)

    other = invoke("report", "--task", OTHER)
    damaged = invoke("report", "--task", TASK)

    assert other.exit_code == 0, other.output
    assert damaged.exit_code == 1 and damaged.output == f"Error: {_damaged(relative)}\n"


def test_damaged_layer_is_one_line_in_reports_show_and_sql(loaded_root, invoke):
    store = registry.open_store(loaded_root)
    _, version, _ = registry.record_report(store, TASK)
    _flip(store.resolve(version.path), 8 * 40)
    expected = f"Error: layer {version.path} is damaged (digest mismatch); run 'registry verify'\n"

    shown = invoke("reports", "show", version.digest)
    queried = invoke("sql", "SELECT count(*) FROM reports")
    attempts_only = invoke("sql", "SELECT count(*) FROM attempts")

    assert (shown.exit_code, shown.output) == (1, expected)
    assert (queried.exit_code, queried.output) == (1, expected)
    assert attempts_only.exit_code == 0, attempts_only.output  # reads no layer


def _two_ingests(root: Path, tmp_path: Path) -> registry.Store:
    from tests.conftest import make_record, write_jsonl

    extra = [make_record(task_id="task-1", repeat_index=r) for r in range(2)]
    registry.ingest(root, [str(write_jsonl(tmp_path / "extra.jsonl", extra))])
    extra = [make_record(task_id="task-2", repeat_index=r) for r in range(2)]
    registry.ingest(root, [str(write_jsonl(tmp_path / "extra2.jsonl", extra))])
    return registry.open_store(root)


def _edit(store: registry.Store, seq: int, **fields: object) -> None:
    path = _writable(store.resolve(ledger.commit_name(seq)))
    document = json.loads(path.read_bytes())
    document.update(fields)
    path.write_bytes(ledger.encode_commit(Commit.model_validate(document)))


def test_read_ledger_refuses_a_gap(loaded_root, tmp_path):
    store = _two_ingests(loaded_root, tmp_path)
    store.resolve(ledger.commit_name(2)).unlink()

    with pytest.raises(IntegrityError, match=r"^commit ledger/000000000003\.json is damaged "):
        registry.read_ledger(store)


def test_read_ledger_refuses_a_broken_link(loaded_root, tmp_path):
    store = _two_ingests(loaded_root, tmp_path)
    _edit(store, 3, prev="blake3:" + "0" * 64)

    with pytest.raises(IntegrityError) as caught:
        registry.read_ledger(store)
    assert str(caught.value) == (
        "commit ledger/000000000003.json is damaged (prev does not match the digest of "
        "commit 2); run 'registry verify'"
    )


def test_read_ledger_refuses_a_first_commit_with_a_prev(loaded_root):
    store = registry.open_store(loaded_root)
    _edit(store, 1, prev="blake3:" + "0" * 64)

    with pytest.raises(IntegrityError, match="000000000001.json is damaged .prev does not"):
        registry.read_ledger(store)


def test_read_ledger_refuses_a_commit_that_does_not_parse(loaded_root):
    store = registry.open_store(loaded_root)
    path = _writable(store.resolve(ledger.commit_name(1)))
    path.write_bytes(path.read_bytes()[:-1])

    with pytest.raises(IntegrityError) as caught:
        registry.read_ledger(store)
    assert str(caught.value) == (
        "commit ledger/000000000001.json is damaged (it does not parse as "
        "registry.commit/1); run 'registry verify'"
    )


@pytest.mark.parametrize(
    "path",
    [
        "../outside.parquet",
        "/etc/passwd",
        "attempts/cohort=x/y.parquet",
        "attempts/../ledger/000000000001.json",
        "layers/report/{hex}.json",
    ],
)
def test_read_ledger_refuses_a_segment_path_that_is_not_well_formed(loaded_root, path):
    store = registry.open_store(loaded_root)
    entry = registry.read_ledger(store)[0].commit.segments[0].model_dump()
    forged = path.format(hex="a" * 64)
    ledger.append(
        store,
        {
            "kind": "ingest",
            "segments": [{**entry, "path": forged}],
            "attempts_read": entry["rows"],
            "attempts_new": entry["rows"],
        },
    )

    with pytest.raises(IntegrityError) as caught:
        registry.read_ledger(store)
    assert str(caught.value).startswith(
        f"commit ledger/000000000002.json is damaged (segment path {forged!r} is not "
        "attempts/cohort=<64 hex>/<64 hex>.parquet)"
    )


def test_read_ledger_refuses_a_path_naming_another_cohort(loaded_root):
    store = registry.open_store(loaded_root)
    segments = registry.read_ledger(store)[0].commit.segments
    first, second = segments[0].model_dump(), segments[1]
    moved = store.segment_path(second.cohort_key, first["digest"])  # another cohort's folder
    ledger.append(
        store,
        {
            "kind": "ingest",
            "segments": [{**first, "path": moved}],
            "attempts_read": first["rows"],
            "attempts_new": first["rows"],
        },
    )

    with pytest.raises(IntegrityError, match="does not match its cohort key and digest"):
        registry.read_ledger(store)


def test_read_ledger_refuses_a_commit_naming_one_segment_twice(loaded_root):
    store = registry.open_store(loaded_root)
    first = registry.read_ledger(store)[0].commit.segments[0].model_dump()
    digests = ["blake3:" + c * 64 for c in "01"]  # named by no earlier commit
    entry, other = (
        {**first, "digest": d, "path": store.segment_path(first["cohort_key"], d)} for d in digests
    )
    ledger.append(
        store,
        {
            "kind": "ingest",
            "segments": [entry, other, entry],
            "attempts_read": 3 * entry["rows"],
            "attempts_new": 3 * entry["rows"],
        },
    )

    with pytest.raises(IntegrityError) as caught:
        registry.read_ledger(store)
    assert str(caught.value).startswith(
        f"commit ledger/000000000002.json is damaged ({entry['path']} is already named"
    )


def test_verify_names_every_problem_of_a_damaged_registry(loaded_root, tmp_path, invoke):
    # verify walks the ledger itself: a gap does not stop it from checking every segment.
    store = _two_ingests(loaded_root, tmp_path)
    relative = _segment_of(store, TASK)
    _flip(store.resolve(relative), 8 * 100 + 3)
    store.resolve(ledger.commit_name(2)).unlink()

    result = invoke("verify")
    problems = [line for line in result.output.splitlines() if line.startswith("problem: ")]

    assert result.exit_code == 1, result.output
    assert any(line.startswith(f"problem: {relative}: altered") for line in problems)
    assert any("ledger/000000000003.json: sequence number 3 out of place" in p for p in problems)
    assert invoke("sql", "SELECT 1").output == (
        "Error: commit ledger/000000000003.json is damaged (commit 2 is missing); "
        "run 'registry verify'\n"
    )


def test_verify_checks_rows_against_recorded_task_ids_and_counts(loaded_root, invoke):
    store = registry.open_store(loaded_root)
    commit = registry.read_ledger(store)[0].commit
    document = commit.model_dump(mode="json", by_alias=True)
    document["segments"][0]["task_ids"] = ["someone-else"]
    path = _writable(store.resolve(ledger.commit_name(1)))
    path.write_bytes(ledger.encode_commit(Commit.model_validate(document)))

    result = invoke("verify", "--deep")  # only the rows show the recorded task ids are wrong

    assert result.exit_code == 1, result.output
    segment = commit.segments[0]
    expected = (
        f"problem: {segment.path}: rows hold tasks ['{segment.task_ids[0]}'], "
        "ledger says ['someone-else']"
    )
    assert expected in result.output.splitlines()
