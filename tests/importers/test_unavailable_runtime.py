"""A runtime the source does not record is null (unavailable), never 0."""

from __future__ import annotations

import json
import math

import pydantic
import pytest

import registry
from registry.analysis import stats
from registry.storage.tables import ATTEMPT_SCHEMA
from registry_schemas import AttemptRecord, RuntimeStats
from tests.conftest import FIXTURES, make_record


def test_runtime_summary_counts_known_values_only():
    summary = stats.runtime_summary([10.0, None, 30.0, None, 20.0])
    assert (summary.mean, summary.median, summary.p95) == (20.0, 20.0, 30.0)
    assert (summary.known, summary.unavailable) == (3, 2)
    none_known = stats.runtime_summary([None, None])
    assert (none_known.mean, none_known.median, none_known.p95) == (None, None, None)
    assert (none_known.known, none_known.unavailable) == (0, 2)
    assert stats.runtime_summary([]) == stats.RuntimeSummary(None, None, None, 0, 0)
    with pytest.raises(ValueError, match="finite"):
        stats.runtime_summary([1.0, math.inf])


def test_report_model_requires_the_counts():
    RuntimeStats(mean=None, median=None, p95=None, known=0, unavailable=4)
    with pytest.raises(pydantic.ValidationError):
        RuntimeStats(mean=1.0, median=1.0, p95=1.0)  # type: ignore[call-arg]


def test_record_runtime_may_be_null_but_not_negative():
    unavailable = json.dumps(make_record(runtime_seconds=None))
    assert AttemptRecord.model_validate_json(unavailable).runtime_seconds is None
    with pytest.raises(pydantic.ValidationError):
        AttemptRecord.model_validate_json(json.dumps(make_record(runtime_seconds=-1.0)))
    assert ATTEMPT_SCHEMA.field("runtime_seconds").nullable


@pytest.mark.parametrize(
    ("fmt", "path", "unavailable"),
    [
        ("swebench", FIXTURES / "importers" / "swebench" / "run", 18),
        ("terminal-bench", FIXTURES / "importers" / "terminal-bench" / "runs", 1),
        ("harbor", FIXTURES / "importers" / "harbor", 0),
    ],
)
def test_imported_sources_store_null_when_they_record_no_timing(tmp_path, fmt, path, unavailable):
    registry.ingest(tmp_path, [str(path)], fmt)
    result = registry.run_query(
        registry.open_store(tmp_path),
        "SELECT count(*) FILTER (WHERE runtime_seconds IS NULL),"
        " count(*) FILTER (WHERE runtime_seconds = 0),"
        " count(*) FILTER (WHERE labels['runtime_seconds'] IS NOT NULL) FROM attempts",
    )
    assert result.rows == [(unavailable, 0, 0)]
