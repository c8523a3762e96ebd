"""The stored evidence file (`registry.evidence.cache`) answers exactly as the views do.

One registry holding every case the evidence rule decides (regrades, legacy evidence, a model
swap, infrastructure failures, two valid outcomes in one slot, an attempt stored twice, a
retraction, a report layer) is read with the file and without it: every view, every column
type and every suite command must agree. The file is derived: a damaged or missing one is
rebuilt, an unwritable cache falls back to the views, and only evidence commits change it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import registry
import registry.ingest
from registry.evidence import cache
from registry.evidence.admission import Admission
from tests.conftest import QUICKSTART, make_record, write_jsonl

QUERIES = [
    "SELECT * FROM attempts ORDER BY attempt_id",
    "SELECT * FROM samples ORDER BY ALL",
    "SELECT * FROM lineage ORDER BY ALL",
    "SELECT * FROM cohorts ORDER BY ALL",
    "SELECT * FROM systems ORDER BY ALL",
    "SELECT * FROM _evidence ORDER BY attempt_id",
    "SELECT * FROM _attempts_all ORDER BY attempt_id",
    "SELECT count(*), count(*) FILTER (slot_conflict), count(*) FILTER (retracted) FROM attempts",
    "DESCRIBE SELECT * FROM attempts",
    "DESCRIBE SELECT * FROM samples",
]


@pytest.fixture
def rich_root(loaded_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The quickstart plus a slot conflict, an attempt stored twice and a retraction."""
    with monkeypatch.context() as patch:  # evidence stored before the slot rule existed
        patch.setattr(Admission, "admit", lambda *args, **kwargs: None)
        records = [
            make_record(task_id="conflict", terminal_class="model_failure"),
            make_record(task_id="conflict", terminal_class="resolved", runtime_seconds=30.0),
        ]
        registry.ingest(loaded_root, [str(write_jsonl(tmp_path / "c.jsonl", records))])
    with monkeypatch.context() as patch:  # two writers that both stored the same attempts
        patch.setattr(sys.modules["registry.ingest"], "_known_ids", lambda batch, cohort_key: set())
        lines = QUICKSTART.read_text().splitlines()[:5]
        (tmp_path / "twins.jsonl").write_text("\n".join(lines) + "\n")
        assert registry.ingest(loaded_root, [str(tmp_path / "twins.jsonl")]).new == 5
    store = registry.open_store(loaded_root)
    first = registry.run_query(store, "SELECT attempt_id FROM attempts ORDER BY attempt_id")
    registry.retract(store, [first.rows[3][0]], "wrong grader")
    registry.record_report(store, "astropy__astropy-12907")
    return loaded_root


def _answers(store, include_retracted: bool, as_of=None) -> list:
    return [
        registry.run_query(store, sql, include_retracted=include_retracted, as_of=as_of)
        for sql in QUERIES
    ]


def _stored_files() -> list[Path]:
    base = Path(os.environ["REGISTRY_CACHE"])
    return sorted(base.glob("*/evidence/*.parquet"))


@pytest.fixture
def always(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Use the stored file whatever the registry's size, in a cache of this test's own."""
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(cache, "MIN_ATTEMPTS", 0)


@pytest.mark.parametrize("include_retracted", [False, True])
def test_every_view_answers_the_same_from_the_stored_file(rich_root, include_retracted, request):
    store = registry.open_store(rich_root)
    direct = _answers(store, include_retracted)
    conflicts = direct[7].rows[0]
    assert conflicts[1] == 2 and (conflicts[2] == 1) == include_retracted  # the cases exist
    request.getfixturevalue("always")
    stored = _answers(store, include_retracted)
    assert len(_stored_files()) == 1
    for sql, want, got in zip(QUERIES, direct, stored, strict=True):
        assert got.columns == want.columns, sql
        assert got.rows == want.rows, sql
    assert _answers(store, include_retracted) == stored  # read back from the file


def test_suite_commands_answer_the_same_from_the_stored_file(rich_root, request):
    store = registry.open_store(rich_root)
    system = registry.parse_selector("agent_version=2.4.0-context-policy")
    baseline = registry.parse_selector("experiment=exp-baseline-1102,grader_version=grader-1.0")

    def answers():
        summary = registry.summarize(store).model_dump()
        floor = registry.noise_floor(store, system).model_dump()
        comparison = registry.compare(store, baseline, [system]).model_dump()
        evidence = registry.read_evidence(store, registry.Scope()).rows
        found = registry.find_regressions(store).model_dump()
        return summary, floor, comparison, evidence, found

    direct = answers()
    request.getfixturevalue("always")
    assert answers() == direct
    assert len(_stored_files()) == 1


def test_a_past_ledger_read_has_its_own_file_and_answers(rich_root, request):
    store = registry.open_store(rich_root)
    direct = _answers(store, False, as_of=1)
    request.getfixturevalue("always")
    assert _answers(store, False, as_of=1) == direct
    _answers(store, False)
    assert len(_stored_files()) == 2


def test_only_evidence_commits_change_the_file(rich_root, tmp_path, always):
    store = registry.open_store(rich_root)
    registry.run_query(store, "SELECT count(*) FROM attempts")
    (before,) = _stored_files()
    registry.record_report(store, "django__django-11099")  # a layer commit: same evidence
    registry.run_query(store, "SELECT count(*) FROM attempts")
    assert _stored_files() == [before]
    more = write_jsonl(tmp_path / "more.jsonl", [make_record(task_id="later")])
    registry.ingest(rich_root, [str(more)])
    rows = registry.run_query(store, "SELECT count(*) FROM attempts WHERE task_id = 'later'").rows
    assert rows == [(1,)] and len(_stored_files()) == 2


def test_a_damaged_file_is_rebuilt_not_read(rich_root, always):
    store = registry.open_store(rich_root)
    want = registry.run_query(store, QUERIES[0])
    (path,) = _stored_files()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    assert registry.run_query(store, QUERIES[0]) == want
    (again,) = _stored_files()  # the damaged file is gone, a good one replaces it
    assert cache.cached_file(store, _key(store)) == again
    again.unlink()
    assert registry.run_query(store, QUERIES[0]) == want


def test_a_cache_that_cannot_be_written_falls_back_to_the_views(rich_root, always, monkeypatch):
    store = registry.open_store(rich_root)
    monkeypatch.setattr(cache, "folder", lambda store: Path("/proc/no-such-cache"))
    rows = registry.run_query(store, "SELECT count(*) FROM attempts").rows
    assert rows[0][0] > 0 and not _stored_files()


def test_small_registries_read_the_segments(rich_root, monkeypatch, tmp_path):
    monkeypatch.setenv("REGISTRY_CACHE", str(tmp_path / "cache"))
    registry.run_query(registry.open_store(rich_root), "SELECT count(*) FROM attempts")
    assert not _stored_files()


def _key(store) -> str:
    key = cache.evidence_key(registry.read_ledger(store))
    assert key is not None
    return key
