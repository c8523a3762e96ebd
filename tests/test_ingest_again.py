"""Ingesting an input again: the same bytes read the same way are not read a second time.

Each commit records how every source was read (its digest, format and `--envelope` values).
An input an earlier ingest read the same way holds only attempts already present, so ingest
counts them without parsing; anything else (other bytes, another format, other envelope
values, a registry with retractions, an earlier commit that did not record how it read) is
read and checked record by record as before.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from registry import ingest, read_ledger, retract
from registry.storage.store import open_store
from tests.conftest import make_record, write_jsonl

ingest_module = importlib.import_module("registry.ingest")  # `registry.ingest` is the function


def records(
    count: int, model: str | None = "m-1", legacy: bool = False, **fields: Any
) -> list[dict[str, Any]]:
    """Valid records; `legacy` ones carry no terminal identity (so `--envelope` may fill)."""
    envelope = {
        "agent": "coder",
        "agent_version": None,
        "provider": None,
        "model": model,
        "harness_version": None,
    }
    return [
        make_record(
            with_identity=not legacy,
            task_id=f"t{i % 3}",
            repeat_index=i,
            envelope=envelope,
            **fields,
        )
        for i in range(count)
    ]


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records checked one by one (a source counted without reading adds none)."""
    seen: list[int] = []
    original = ingest_module._check_chunk

    def check(label: str, fmt: str, envelope: dict[str, str], items: list[Any]) -> Any:
        seen.append(len(items))
        return original(label, fmt, envelope, items)

    monkeypatch.setattr(ingest_module, "_check_chunk", check)
    return seen


def test_the_same_file_again_is_counted_without_reading(tmp_path, checked):
    path = write_jsonl(tmp_path / "a.jsonl", records(7))
    first = ingest(tmp_path / "reg", [str(path)])
    assert (first.new, sum(checked)) == (7, 7)

    again = ingest(tmp_path / "reg", [str(path)])
    assert (again.read, again.new, again.present, again.commit) == (7, 0, 7, None)
    assert sum(checked) == 7  # nothing read the second time
    [source] = again.sources
    assert (source.read_before, source.records, source.digest) == (
        first.commit.seq,
        7,
        first.sources[0].digest,
    )


def test_commits_record_the_format_and_envelope_of_each_source(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", records(2, model=None, legacy=True))
    ingest(tmp_path / "reg", [str(path)], envelope=["model=m-9"])
    [entry] = read_ledger(open_store(tmp_path / "reg"))
    [source] = entry.commit.sources
    assert (source.format, source.envelope) == ("jsonl", {"model": "m-9"})


def test_other_bytes_format_or_envelope_are_read_again(tmp_path, checked):
    root = tmp_path / "reg"
    path = write_jsonl(tmp_path / "a.jsonl", records(4, model=None, legacy=True))
    ingest(root, [str(path)])
    again = ingest(root, [str(path)], envelope=["model=m-2"])  # other values: other records
    assert (sum(checked), again.new) == (8, 4)
    as_array = tmp_path / "a.json"
    as_array.write_text(json.dumps(records(4, model=None, legacy=True)))
    again = ingest(root, [str(as_array)])
    assert (sum(checked), again.new, again.present) == (12, 0, 4)
    path.write_text(path.read_text() + "\n")  # one more byte, same records
    again = ingest(root, [str(path)])
    assert (sum(checked), again.new, again.present) == (16, 0, 4)
    assert again.sources[0].read_before is None


def test_a_registry_with_retractions_reads_the_file_again(tmp_path, checked):
    root = tmp_path / "reg"
    path = write_jsonl(tmp_path / "a.jsonl", records(5))
    first = ingest(root, [str(path)])
    retract(open_store(root), [], "bad grader", commit_seq=first.commit.seq)
    again = ingest(root, [str(path)])
    assert (again.new, again.present, again.retracted) == (0, 5, 5)
    assert sum(checked) == 10
    assert any("retracted earlier" in w for w in again.warnings)


def test_a_source_read_before_beside_a_new_one(tmp_path, checked):
    root = tmp_path / "reg"
    old = write_jsonl(tmp_path / "a.jsonl", records(3))
    ingest(root, [str(old)])
    new = write_jsonl(tmp_path / "b.jsonl", records(3, experiment_id="exp-2"))
    both = ingest(root, [str(old), str(new)])
    assert (both.read, both.new, both.present) == (6, 3, 3)
    assert sum(checked) == 6
    assert [s.records for s in both.commit.commit.sources] == [3, 3]


def test_commits_that_did_not_record_how_they_read_are_not_trusted(tmp_path, checked):
    root = tmp_path / "reg"
    path = write_jsonl(tmp_path / "a.jsonl", records(3))
    ingest(root, [str(path)])
    batch = ingest_module._Batch(open_store(root), tmp_path, 10)
    entries = read_ledger(open_store(root))
    legacy = [
        e.__class__(
            e.commit.model_copy(
                update={
                    "sources": [
                        s.model_copy(update={"format": None, "envelope": None})
                        for s in e.commit.sources
                    ]
                }
            ),
            e.digest,
            e.path,
        )
        for e in entries
    ]
    ingest_module._index_ledger(batch, legacy)
    source = ingest_module.resolve_sources([str(path)])[0]
    assert not ingest_module._read_before(batch, source, None)
    ingest_module._index_ledger(batch, entries)
    assert ingest_module._read_before(batch, source, None)


def test_standard_input_is_always_read(tmp_path, checked, monkeypatch):
    import io
    import sys

    root = tmp_path / "reg"
    path = write_jsonl(tmp_path / "a.jsonl", records(3))
    ingest(root, [str(path)])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(Path(path).read_bytes())))
    again = ingest(root, ["-"])
    assert (again.present, sum(checked)) == (3, 6)


def test_cli_says_which_sources_it_did_not_read(tmp_path):
    from typer.testing import CliRunner

    from registry_cli.main import app

    path = write_jsonl(tmp_path / "a.jsonl", records(2))
    root = str(tmp_path / "reg")
    runner = CliRunner()
    assert runner.invoke(app, ["ingest", str(path), "--root", root]).exit_code == 0
    result = runner.invoke(app, ["ingest", str(path), "--root", root])
    assert result.exit_code == 0
    assert "read the same way by commit 1; its 2 attempts are all present" in result.stdout
    result = runner.invoke(app, ["ingest", str(path), "--root", root, "--json"])
    assert json.loads(result.stdout)["sources"][0]["read_before"] == 1


@pytest.mark.parametrize("spill", [5, 1000])
def test_present_rows_among_new_ones_leave_the_same_segments(tmp_path, monkeypatch, spill):
    """Already-present rows held among new ones are dropped (`_compact`), spills or not."""
    import pyarrow.parquet as pq

    monkeypatch.setattr(ingest_module, "_DEAD_ROWS", 3)
    monkeypatch.setattr(ingest_module, "_CHUNK_RECORDS", 4)
    everything = records(40)
    old = write_jsonl(tmp_path / "old.jsonl", everything[::2])
    mixed = write_jsonl(tmp_path / "mixed.jsonl", everything)
    ingest(tmp_path / "reg", [str(old)], spill_rows=spill)
    result = ingest(tmp_path / "reg", [str(mixed)], spill_rows=spill)
    assert (result.new, result.present) == (20, 20)
    alone = write_jsonl(tmp_path / "new.jsonl", everything[1::2])
    ingest(tmp_path / "fresh", [str(alone)], spill_rows=spill)

    def rows(root: Path, seq: int) -> list[list[dict[str, Any]]]:
        [entry] = [e for e in read_ledger(open_store(root)) if e.seq == seq]
        return [pq.read_table(root / s.path).to_pylist() for s in entry.commit.segments]

    assert rows(tmp_path / "reg", 2) == rows(tmp_path / "fresh", 1)
