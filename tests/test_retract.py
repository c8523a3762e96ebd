"""`registry retract`: a retraction commit withdraws attempts by id or by ingest commit, keeps
every byte, is idempotent, refuses what it cannot name in one line without touching the
registry, and `verify` checks what each retraction names."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import registry
from registry.evidence.keys import derive_keys, record_json
from registry.evidence.retract import (
    RetractionError,
    read_attempt_ids_file,
    retract,
    retracted_ids,
    retraction_table,
)
from registry.storage import ledger
from registry.storage.tables import read_segment
from registry_schemas import AttemptRecord
from tests.conftest import make_record, tree_snapshot, write_jsonl

UNKNOWN_ID = "blake3:" + "0" * 64


def _commit_ids(store: registry.Store, seq: int) -> list[str]:
    """The attempt ids the segments of commit `seq` hold, sorted (read from the bytes)."""
    ids: list[str] = []
    for segment in ledger.entry_at(store, seq).commit.segments:
        ids += read_segment(store.resolve(segment.path), ["attempt_id"])["attempt_id"].to_pylist()
    return sorted(ids)


@pytest.fixture
def two_batches(root: Path, tmp_path: Path) -> registry.Store:
    """Commit 1: six attempts of exp-a; commit 2: four attempts of exp-b."""
    first = [
        make_record(experiment_id="exp-a", task_id=f"t-{i % 3}", repeat_index=i) for i in range(6)
    ]
    second = [
        make_record(experiment_id="exp-b", task_id=f"t-{i}", repeat_index=0) for i in range(4)
    ]
    registry.ingest(root, [str(write_jsonl(tmp_path / "a.jsonl", first))])
    registry.ingest(root, [str(write_jsonl(tmp_path / "b.jsonl", second))])
    store = registry.open_store(root)
    assert [e.commit.kind for e in registry.read_ledger(store)] == ["ingest", "ingest"]
    return store


def _last(store: registry.Store) -> ledger.LedgerEntry:
    return registry.read_ledger(store)[-1]


def test_retract_by_file_records_one_commit(two_batches, invoke, tmp_path):
    wanted = _commit_ids(two_batches, 1)[:3]
    ids_file = tmp_path / "ids.txt"
    ids_file.write_text(
        f"# withdrawn: wrong grader\n{wanted[2]}\n\n{wanted[0]}  # first\n"
        f"{wanted[1]}\n{wanted[0]}\n"
    )

    result = invoke("retract", "--attempts", str(ids_file), "--reason", "wrong grader")

    assert result.exit_code == 0, result.output
    entry = _last(two_batches)
    assert result.output.splitlines() == [
        "retracted 3 attempts, 0 already retracted",
        f"commit 3: {entry.digest}",
    ]
    assert entry.seq == 3 and entry.commit.kind == "retraction"
    assert entry.commit.retraction is not None
    assert entry.commit.retraction.attempt_ids == sorted(wanted)
    assert entry.commit.retraction.reason == "wrong grader"
    assert entry.commit.retraction.commit_seq is None
    assert not entry.commit.segments and not entry.commit.sources
    assert set(retracted_ids(registry.read_ledger(two_batches))) == set(wanted)


def test_retract_by_commit_withdraws_exactly_that_ingest(two_batches, invoke):
    result = invoke("retract", "--commit", "2", "--reason", "duplicate run", "--format", "json")

    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    entry = _last(two_batches)
    assert summary == {
        "retracted": 4,
        "already_retracted": 0,
        "attempt_ids": _commit_ids(two_batches, 2),
        "already_retracted_ids": [],
        "reason": "duplicate run",
        "retracted_commit_seq": 2,
        "commit": entry.digest,
        "commit_seq": 3,
    }
    assert entry.commit.retraction is not None
    assert entry.commit.retraction.commit_seq == 2
    assert sorted(retracted_ids(registry.read_ledger(two_batches))) == _commit_ids(two_batches, 2)


def test_retracting_again_adds_nothing(two_batches, root):
    ids = _commit_ids(two_batches, 1)
    first = retract(two_batches, ids[:2], "bad")
    assert first.commit is not None and first.retracted == ids[:2]
    before = tree_snapshot(root)

    again = retract(two_batches, list(reversed(ids[:2])), "bad")
    by_commit_partly = retract(two_batches, [], "whole batch", commit_seq=1)
    by_commit_again = retract(two_batches, [], "whole batch", commit_seq=1)

    assert again.commit is None and again.retracted == [] and again.already_retracted == ids[:2]
    assert by_commit_partly.commit is not None
    assert by_commit_partly.retracted == ids[2:]  # only what was not retracted before
    assert by_commit_partly.already_retracted == ids[:2]
    assert by_commit_again.commit is None
    assert by_commit_again.already_retracted == ids
    entries = registry.read_ledger(two_batches)
    assert [e.commit.kind for e in entries] == ["ingest", "ingest", "retraction", "retraction"]
    assert set(tree_snapshot(root)) - set(before) == {"ledger/000000000004.json"}


def test_retract_cli_reports_already_retracted(two_batches, invoke):
    assert invoke("retract", "--commit", "1", "--reason", "bad").exit_code == 0
    head = _last(two_batches)

    result = invoke("retract", "--commit", "1", "--reason", "bad")

    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "retracted 0 attempts, 6 already retracted",
        "commit: none (nothing new to retract)",
    ]
    assert _last(two_batches) == head


def test_a_writer_that_lost_the_race_records_nothing(two_batches, monkeypatch):
    # Another writer retracts the same attempts between this writer's read and its append.
    ids = _commit_ids(two_batches, 2)
    stale = registry.read_ledger(two_batches)
    retract(two_batches, ids, "found by the other writer")
    real = ledger.read_ledger
    calls = iter([stale])
    monkeypatch.setattr(ledger, "read_ledger", lambda store: next(calls, None) or real(store))

    result = retract(two_batches, ids, "found by this writer")

    assert result.commit is None and result.already_retracted == ids
    assert len(real(two_batches)) == 3


def _one_line_error(result) -> str:
    lines = result.output.splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--attempts", "{ids}", "--reason", "bad"],
            f"attempt {UNKNOWN_ID} is not in the registry",
        ),
        (["--attempts", "{ids}", "--reason", "   "], "the retraction reason is empty"),
        (["--commit", "3", "--reason", "bad"], "commit 3 does not exist"),
        (
            ["--attempts", "{garbage}", "--reason", "bad"],
            "line 2: 'attempt 7' is not an attempt id",
        ),
    ],
    ids=["unknown-id", "empty-reason", "no-such-commit", "not-an-id"],
)
def test_refusals_are_one_line_and_change_nothing(
    two_batches, invoke, root, tmp_path, args, message
):
    known = _commit_ids(two_batches, 1)[0]
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{known}\n{UNKNOWN_ID}\n")
    garbage = tmp_path / "garbage.txt"
    garbage.write_text(f"{known}\nattempt 7\n")
    before = tree_snapshot(root)

    result = invoke("retract", *[a.format(ids=ids, garbage=garbage) for a in args])

    assert result.exit_code == 1, result.output
    assert message in _one_line_error(result)
    assert tree_snapshot(root) == before


def test_a_commit_that_is_not_an_ingest_is_refused(two_batches, root):
    retract(two_batches, [], "bad", commit_seq=2)
    before = tree_snapshot(root)

    with pytest.raises(RetractionError, match="commit 3 is a retraction commit; only an ingest"):
        retract(two_batches, [], "again", commit_seq=3)
    with pytest.raises(RetractionError, match="either attempt ids or a commit"):
        retract(two_batches, _commit_ids(two_batches, 1)[:1], "bad", commit_seq=1)
    with pytest.raises(RetractionError, match="no attempt ids to retract"):
        retract(two_batches, [], "bad")

    assert tree_snapshot(root) == before


@pytest.mark.parametrize("args", [[], ["--attempts", "ids.txt", "--commit", "1"]])
def test_exactly_one_of_attempts_or_commit(two_batches, invoke, root, args):
    before = tree_snapshot(root)

    result = invoke("retract", *args, "--reason", "bad")

    assert result.exit_code == 2, result.output
    assert "exactly one of --attempts FILE or --commit SEQ" in result.output
    assert tree_snapshot(root) == before


def test_verify_is_clean_after_retraction_and_still_checks_retracted_bytes(two_batches, invoke):
    retract(two_batches, [], "bad", commit_seq=1)
    retract(two_batches, _commit_ids(two_batches, 2)[:1], "bad too")

    report = registry.verify(two_batches)

    assert report.ok, report.problems
    assert (report.commits, report.retractions, report.retracted) == (4, 2, 7)
    assert report.attempts == 10  # retracted attempts are still re-derived
    assert invoke("verify").exit_code == 0
    # Withdrawn is not deleted: damage to a retracted attempt's segment is still found.
    segment = ledger.entry_at(two_batches, 1).commit.segments[0].path
    path = two_batches.resolve(segment)
    path.chmod(0o644)
    path.write_bytes(path.read_bytes()[:-1] + b"\0")
    result = invoke("verify")
    assert result.exit_code == 1
    assert f"problem: {segment}: altered" in result.output


def _forge(store: registry.Store, retraction: dict) -> str:
    entry, written = ledger.append(store, {"kind": "retraction", "retraction": retraction})
    assert written
    return ledger.commit_name(entry.seq)


def test_verify_names_a_forged_retraction_of_an_unknown_attempt(two_batches, invoke):
    name = _forge(two_batches, {"attempt_ids": [UNKNOWN_ID], "reason": "forged"})

    result = invoke("verify")

    assert result.exit_code == 1, result.output
    problems = [line for line in result.output.splitlines() if line.startswith("problem: ")]
    assert problems == [
        f"problem: {name}: retracts attempt {UNKNOWN_ID}, which no earlier commit added"
    ]


def test_verify_names_a_retraction_claiming_the_wrong_commit(two_batches):
    in_first = _commit_ids(two_batches, 1)[0]
    name = _forge(two_batches, {"attempt_ids": [in_first], "reason": "x", "commit_seq": 2})
    later = _forge(two_batches, {"attempt_ids": [in_first], "reason": "x", "commit_seq": 3})

    problems = registry.verify(two_batches).problems

    assert problems == [
        f"{name}: retracts attempt {in_first} as part of commit 2, which does not hold it",
        f"{later}: retracts commit 3, which is not an earlier ingest commit",
    ]


def test_verify_names_a_retraction_of_an_attempt_added_only_later(two_batches, tmp_path):
    # The retraction precedes the commit that adds the attempt: it named nothing then.
    late = make_record(experiment_id="exp-late")
    late_id = derive_keys(record_json(AttemptRecord.model_validate_json(json.dumps(late))))[2]
    name = _forge(two_batches, {"attempt_ids": [late_id], "reason": "premature"})
    registry.ingest(two_batches.root, [str(write_jsonl(tmp_path / "late.jsonl", [late]))])
    assert late_id in _commit_ids(two_batches, 4)

    problems = registry.verify(two_batches).problems

    assert problems == [f"{name}: retracts attempt {late_id}, which no earlier commit added"]


def test_retracted_ids_follow_the_ledger_they_are_given(two_batches):
    first, second = _commit_ids(two_batches, 1), _commit_ids(two_batches, 2)
    retract(two_batches, first[:2], "early")
    retract(two_batches, [], "late", commit_seq=2)
    entries = registry.read_ledger(two_batches)

    assert retracted_ids(entries[:2]) == {}
    as_of_3 = retracted_ids(entries[:3])
    assert sorted(as_of_3) == first[:2]
    assert {(i.commit_seq, i.reason) for i in as_of_3.values()} == {(3, "early")}
    full = retracted_ids(entries)
    assert sorted(full) == sorted(first[:2] + second)
    assert full[second[0]].commit_seq == 4 and full[second[0]].reason == "late"
    assert full[second[0]].retracted_commit == 2
    assert full[second[0]].commit_digest == entries[3].digest


def test_retraction_table_is_the_retractions_view(two_batches):
    ids = _commit_ids(two_batches, 1)
    retract(two_batches, ids[3:], "b")
    retract(two_batches, ids[:3], "a")
    entries = registry.read_ledger(two_batches)

    table = retraction_table(entries)

    assert table.column_names == [
        "attempt_id",
        "commit_seq",
        "commit_digest",
        "reason",
        "created_at",
    ]
    assert table.schema.field("created_at").type == pa.timestamp("us", tz="UTC")
    assert table["attempt_id"].to_pylist() == ids[3:] + ids[:3]
    assert table["commit_seq"].to_pylist() == [3] * 3 + [4] * 3
    assert table["commit_digest"].to_pylist() == [entries[2].digest] * 3 + [entries[3].digest] * 3
    assert table["reason"].to_pylist() == ["b"] * 3 + ["a"] * 3
    assert retraction_table(entries[:2]).num_rows == 0
    assert retraction_table(entries[:2]).schema == table.schema


def test_attempt_id_files_in_every_accepted_form(two_batches, invoke, tmp_path):
    ids = _commit_ids(two_batches, 2)
    quoted = ", ".join(f"'{i}'" for i in ids)
    sql = invoke(
        "sql", f"SELECT * FROM attempts WHERE attempt_id IN ({quoted})", "--format", "json"
    )
    csv = invoke(
        "sql", f"SELECT attempt_id FROM attempts WHERE attempt_id IN ({quoted})", "--format", "csv"
    )
    assert sql.exit_code == 0 and csv.exit_code == 0, sql.output + csv.output
    forms = {
        "sql.json": sql.stdout,
        "sql.csv": csv.stdout,
        "strings.json": json.dumps(ids),
        "rows.jsonl": "".join(json.dumps({"attempt_id": i, "n": 1}) + "\n" for i in ids),
        "lines.txt": "\ufeff" + "\n".join(ids) + "\n",
    }
    for name, text in forms.items():
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        assert sorted(read_attempt_ids_file(path)) == ids, name


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "lists no attempt id"),
        ("# nothing here\n\n", "lists no attempt id"),
        ('[{"id": "x"}]', "element 1: no attempt_id string"),
        ("[1, 2", "not a valid JSON array"),
        ('{"attempt_id": "blake3:00"}\n', "line 1: 'blake3:00' is not an attempt id"),
        ('{"attempt_id": 1}\n', "line 1: no attempt_id string"),
        ("attempt_id,task_id\n", "line 1: 'attempt_id,task_id' is not an attempt id"),
    ],
    ids=[
        "empty",
        "comments-only",
        "json-no-id",
        "json-broken",
        "jsonl-bad-id",
        "jsonl-no-id",
        "csv",
    ],
)
def test_attempt_id_file_errors_are_one_line(tmp_path, text, message):
    path = tmp_path / "ids"
    path.write_text(text)

    with pytest.raises(RetractionError) as caught:
        read_attempt_ids_file(path)

    assert message in str(caught.value)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(str(path))


def test_missing_attempt_id_file_is_one_line(tmp_path):
    with pytest.raises(RetractionError, match=r"missing.txt: cannot read attempt ids"):
        read_attempt_ids_file(tmp_path / "missing.txt")
