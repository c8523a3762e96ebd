"""The evidence snapshot computed in SQL equals the one computed from rows, at any size."""

from __future__ import annotations

import random

import duckdb
import pyarrow as pa
import pytest

from registry.evidence.rule import snapshot_of
from registry.evidence.selection import _SNAPSHOT_BATCH, snapshot_where
from registry.storage.digest import digest_json


@pytest.mark.parametrize(
    "count", [0, 1, _SNAPSHOT_BATCH, _SNAPSHOT_BATCH + 1, 2 * _SNAPSHOT_BATCH + 7]
)
def test_streamed_snapshot_equals_the_digest_of_the_sorted_ids(count):
    rng = random.Random(count)
    rows = [
        {"attempt_id": "blake3:" + rng.randbytes(32).hex(), "commit_seq": rng.randint(1, 9)}
        for _ in range(count)
    ]
    table = pa.table(
        {
            "attempt_id": [r["attempt_id"] for r in rows] + ["blake3:" + "f" * 64],
            "commit_seq": pa.array([r["commit_seq"] for r in rows] + [99], pa.int64()),
            "keep": [True] * count + [False],
        }
    )
    con = duckdb.connect()
    con.register("attempts", table)
    streamed = snapshot_where(con, " WHERE keep", [])
    if count:
        assert streamed == snapshot_of(rows)
    else:
        assert streamed == {
            "evidence_digest": digest_json([]),
            "attempts": 0,
            "last_commit_seq": None,
        }
