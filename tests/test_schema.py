"""`registry.attempt/1` validation: unknown fields and wrong types never get through."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from registry_schemas import AttemptRecord, CohortInputs, Envelope
from tests.conftest import make_record

TOP_FIELDS = set(AttemptRecord.model_fields)


def _validate(record):
    return AttemptRecord.model_validate_json(json.dumps(record))


def test_valid_record_passes():
    assert _validate(make_record()).task_id == "task-1"


@settings(max_examples=200)
@given(st.text(min_size=1, max_size=30).filter(lambda k: k not in TOP_FIELDS), st.integers())
def test_unknown_top_level_field_rejected(name, value):
    record = make_record()
    record[name] = value
    with pytest.raises(ValidationError) as info:
        _validate(record)
    assert info.value.errors()[0]["type"] == "extra_forbidden"


@settings(max_examples=100)
@given(st.sampled_from(["inputs", "envelope"]), st.text(min_size=1, max_size=30))
def test_unknown_nested_field_rejected(where, name):
    model = CohortInputs if where == "inputs" else Envelope
    if name in model.model_fields:
        return
    record = make_record()
    record[where] = {**record[where], name: "x"}
    with pytest.raises(ValidationError) as info:
        _validate(record)
    assert info.value.errors()[0]["type"] == "extra_forbidden"


WRONG_TYPES = {
    "experiment_id": [1, None, [], "", "x" * 201],
    "task_id": [7, None, "", "a\nb", "tab\there", "x" * 501],
    "repeat_index": ["3", 1.5, True, -1, None, 2**53],
    "inputs": ["x", [], None],
    "terminal_class": ["resolvd", "RESOLVED", 1, None, "unresolved"],
    "envelope": ["coder", None, []],
    "terminal_identity": ["blake3:abc", "sha256:" + "0" * 64, 5],
    "runtime_seconds": ["12", -0.5, True, [1], 1e300],
    "started_at": [
        1700000000,
        "1700000000",
        "2026-11-02",
        "2026-11-02T09:00:00",
        "yesterday",
        True,
        "0001-01-01T00:30:00+01:00",
    ],
    "finished_at": [1700000000, "2026-11-02T09:00:00"],
    "cost_usd": ["0.25", -1, True, [0.1]],
    "input_tokens": ["10", 1.5, -3, True],
    "output_tokens": ["10", 2.5],
    "cached_input_tokens": [-1, "0"],
    "plan_id": [3, ""],
    "derived_from": ["attempt-1", 7],
    "labels": [["a"], {"k": 1}, "x", None],
    "artifacts": [{"patch": None}, "x"],
}
CASES = [(f, v) for f, values in WRONG_TYPES.items() for v in values]


@pytest.mark.parametrize(("field", "value"), CASES, ids=[f"{f}={v!r}"[:60] for f, v in CASES])
def test_wrong_type_rejected(field, value):
    with pytest.raises(ValidationError):
        _validate(make_record(with_identity=False, **{field: value}))


@pytest.mark.parametrize("key", sorted(CohortInputs.model_fields))
def test_wrong_type_in_cohort_inputs_rejected(key):
    record = make_record(with_identity=False)
    record["inputs"][key] = 42 if key != "budget" else 42
    with pytest.raises(ValidationError):
        _validate(record)


@pytest.mark.parametrize("key", sorted(CohortInputs.model_fields))
def test_missing_cohort_input_rejected(key):
    record = make_record(with_identity=False)
    del record["inputs"][key]
    with pytest.raises(ValidationError):
        _validate(record)


@pytest.mark.parametrize("key", sorted(Envelope.model_fields))
def test_wrong_type_in_envelope_rejected(key):
    record = make_record(with_identity=False)
    record["envelope"][key] = 3
    with pytest.raises(ValidationError):
        _validate(record)


def test_budget_object_must_hold_finite_json():
    record = make_record(with_identity=False)
    for bad in (2**60, 1e300):
        record["inputs"]["budget"] = {"turns": bad}
        with pytest.raises(ValidationError):
            _validate(record)


def test_finished_before_started_rejected():
    with pytest.raises(ValidationError):
        _validate(
            make_record(started_at="2026-01-02T00:00:00Z", finished_at="2026-01-01T00:00:00Z")
        )


def test_timestamps_normalised_to_utc():
    record = _validate(make_record(started_at="2026-01-01T01:00:00+01:00", finished_at=None))
    assert record.model_dump(mode="json")["started_at"] == "2026-01-01T00:00:00Z"


def test_unavailable_runtime_is_null_not_zero():
    import json

    from registry_schemas import AttemptRecord
    from tests.conftest import make_record

    record = AttemptRecord.model_validate_json(json.dumps(make_record(runtime_seconds=None)))
    assert record.runtime_seconds is None
