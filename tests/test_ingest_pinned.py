"""Ingest output is pinned: the same input gives byte-identical segments and commit fields.

Segment bytes carry every attempt id, cohort key and terminal identity; the commit carries the
segment digests, counts and the Merkle tree. A change to canonicalisation, digests, the
segment layout, spilling or the commit fails here. Only `created_at` (and `prev`, which
digests it) may differ between runs.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from registry import canonical_json, ingest
from registry.storage.digest import digest_bytes
from tests.conftest import INPUTS, make_record, write_jsonl

CLASSES = ["resolved", "resolved", "model_failure", "timeout", "harness_failure", "cancelled"]


def _records(count: int, seed: int, first: int = 0) -> list[dict[str, Any]]:
    """Varied valid records: budgets, floats, offsets, nulls, legacy evidence, unicode."""
    rng = random.Random(seed)
    budgets: list[Any] = [
        {"turns": 50, "time_seconds": 1800},
        {"turns": 50.0, "cost_usd": 2.5, "z\u00e9": 1e-3},
        "default",
        {"nested": {"b": [1, 2.0, "x"], "a": None}, "flag": True},
    ]
    records = []
    for i in range(first, first + count):
        task = f"task-{i % 7}\u00e9" if i % 5 else f"repo__proj-{i % 3}"
        inputs = {**INPUTS, "budget": budgets[i % len(budgets)]}
        if i % 11 == 0:
            inputs["grader_version"] = "grader-2.0"
        klass = CLASSES[i % len(CLASSES)]
        envelope: dict[str, Any] = dict.fromkeys(
            ["agent", "agent_version", "provider", "model", "harness_version"]
        )
        envelope.update(agent="coder", model="m-1" if i % 3 else None)
        if i % 4 == 0:
            envelope.update(agent_version="2.3.0", provider="anthropic", harness_version="h")
        record = make_record(
            with_identity=i % 9 != 0,
            experiment_id=f"exp-{i % 3}",
            task_id=task,
            repeat_index=i,
            inputs=inputs,
            terminal_class=klass,
            envelope=envelope,
            runtime_seconds=[12.5, 30.0, 7, None, 1234.125][i % 5],
            started_at=["2026-11-02T09:00:00Z", "2026-11-02T10:00:00.25+01:00", None][i % 3],
            finished_at=["2026-11-02T09:30:00Z", "2026-11-02T09:30:00.5Z", None][i % 3],
            cost_usd=None if i % 6 == 0 else round(rng.uniform(0.0001, 3), 5),
            input_tokens=rng.randint(0, 400000),
            output_tokens=None if i % 8 == 0 else rng.randint(0, 3000),
            cached_input_tokens=0 if i % 2 else None,
            labels={"temperature": "0.7", "\u00fcml": str(i)} if i % 2 else {},
            artifacts={"patch": "blake3:" + f"{i:064x}"} if i % 3 == 0 else {},
            plan_id="plan-1" if i % 10 == 0 else None,
        )
        records.append(record)
    return records


def _pinned(entry: Any) -> str:
    fields = entry.commit.model_dump(mode="json", by_alias=True)
    fields.pop("created_at")
    fields.pop("prev")
    return digest_bytes(canonical_json(fields))


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str) -> list[str]:
    monkeypatch.chdir(tmp_path)
    records = _records(60, seed=3)
    write_jsonl(tmp_path / "a.jsonl", records)
    root = tmp_path / "reg"
    if scenario == "json-array":
        (tmp_path / "a.json").write_text(json.dumps(records, indent=1))
        return [_pinned(ingest(root, ["a.json"]).commit)]
    spill = {"plain": 100_000, "spill-7": 7, "spill-at-end": 60}[scenario]
    first = ingest(root, ["a.jsonl"], spill_rows=spill).commit
    write_jsonl(tmp_path / "b.jsonl", records[30:] + _records(25, seed=4, first=1000))
    second = ingest(root, ["b.jsonl"], spill_rows=spill).commit
    return [_pinned(first), _pinned(second)]


PINS = {
    "json-array": ["blake3:96f7a11841da686cdee001c54deadd2163ee591468869323feb9d29dc343ce38"],
    "plain": [
        "blake3:cc4e0af702acf7f06b9deb994332f8f845c075acc7ddd57aee81e532ea9cc9fc",
        "blake3:31c103cb705fab07467d089f41c7fde3d73a28b71c1f5de929d3a99806eb9ce2",
    ],
    "spill-7": [
        "blake3:421b157593654d23d4b64c3cb5d7c6af75e83a1d393563892e90a9ef019007fd",
        "blake3:40865b0a914f5c7738f1f684549597840f51c501501df873a830ae38ae55a20e",
    ],
    "spill-at-end": [
        "blake3:421b157593654d23d4b64c3cb5d7c6af75e83a1d393563892e90a9ef019007fd",
        "blake3:31c103cb705fab07467d089f41c7fde3d73a28b71c1f5de929d3a99806eb9ce2",
    ],
}
"""Digests of the commit fields (segments, counts, Merkle tree) per scenario, per commit.

Segments of fewer than `tables.ZSTD_MIN_ROWS` rows are Snappy-compressed, and each source
names its format and `--envelope` values (the pins were taken anew for each; the rows and
their ids did not change).

A segment holding rows that were spilled to a part file names its map entries after the
column (what a Parquet round trip gives), so spilled and unspilled batches differ in bytes."""


@pytest.mark.parametrize("scenario", sorted(PINS))
def test_ingest_output_is_pinned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    assert _run(tmp_path, monkeypatch, scenario) == PINS[scenario]
