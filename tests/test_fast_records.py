"""The fast record check accepts only what the model accepts, with the same JSON form.

Also: the keys and segment rows ingest derives from validated records
(`validated_keys`, `records_to_table`) equal the general ones (`derive_keys`, `rows_to_table`).

`registry.importers.fast.checked_record` stands in for `AttemptRecord.model_validate_json` +
`model_dump(mode="json")` on plainly valid records and hands everything else to the model.
These tests generate valid records of many shapes and then damage them field by field, and
check for each: if the fast path accepts, the model accepts and dumps the same value (numbers
compared by type too); and the common shapes are accepted (the fast path is not a no-op).
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from registry.evidence.keys import derive_keys, validated_keys
from registry.importers.fast import checked_record
from registry.storage.canonical import (
    canonical_identity,
    canonical_json_reference,
    canonical_record,
)
from registry.storage.tables import records_to_table, rows_to_table, to_row
from registry_schemas import AttemptRecord, attempt
from tests.conftest import make_record

MAX_SAFE = 2**53 - 1
SCHEMA_DIGEST = "c89a82c6c7d3bee9bdc60a1bb8223e14c5614503699609a1107bf7e4897f7be9"
"""sha256 of the model's JSON Schema (sorted keys). When the model changes, this test fails:
bring `registry/importers/fast.py` along (every rule it mirrors), then update the digest."""


def model_form(payload: bytes) -> dict[str, Any] | None:
    try:
        return AttemptRecord.model_validate_json(payload).model_dump(mode="json")
    except ValidationError:
        return None


def typed(value: Any) -> bytes:
    """An encoding that tells 1 from 1.0 and True from 1 (orjson keeps the Python types)."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def agree(record: Any) -> dict[str, Any] | None:
    """Assert the fast path agrees with the model on `record`; return the fast result."""
    try:
        payload = orjson.dumps(record)
    except (TypeError, orjson.JSONEncodeError):
        return None
    fast = checked_record(orjson.loads(payload))
    if fast is not None:
        reference = model_form(payload)
        assert reference is not None, f"fast path accepted what the model refuses: {record!r}"
        assert typed(fast) == typed(reference)
    return fast


def _rules(value: Any) -> Any:
    """A JSON Schema without its descriptions: what the model checks, not how it reads."""
    if isinstance(value, dict):
        return {k: _rules(v) for k, v in value.items() if k not in ("description", "title")}
    if isinstance(value, list):
        return [_rules(v) for v in value]
    return value


def model_rules() -> bytes:
    """The model's JSON Schema (descriptions left out) and the source of its validators."""
    schema = json.dumps(_rules(AttemptRecord.model_json_schema()), sort_keys=True)
    validators = [
        attempt._reject_control_characters,
        attempt._check_json_value,
        attempt._require_timestamp_text,
        attempt._to_utc,
        attempt.format_timestamp,
        AttemptRecord._finished_not_before_started,
    ]
    code = "".join(inspect.getsource(v) for v in validators)
    return (schema + attempt._RFC3339.pattern + attempt.CONTROL_CHARACTERS.pattern + code).encode()


def test_model_unchanged_since_the_fast_path_was_written():
    assert hashlib.sha256(model_rules()).hexdigest() == SCHEMA_DIGEST, (
        "registry_schemas.attempt changed: update registry/importers/fast.py to mirror every "
        "rule of the model, then SCHEMA_DIGEST here"
    )


# --- valid records of many shapes -------------------------------------------------------------

digits = st.integers(0, 9)
timestamps_text = st.builds(
    lambda dt, frac, offset: dt.strftime("%Y-%m-%dT%H:%M:%S") + frac + offset,
    st.datetimes(),
    st.sampled_from(["", ".5", ".123", ".000000", ".999999", ".1234567", ".", ",5"]),
    st.sampled_from(
        [
            "Z",
            "z",
            "+00:00",
            "-00:00",
            "+05:30",
            "-12:45",
            "+23:59",
            "+24:00",
            "+00:60",
            "",
            "+0530",
        ]
    ),
)
near_timestamps = st.text(alphabet="0123456789-:TZ+. ", max_size=30)
budgets = st.one_of(
    st.text(max_size=20),
    st.dictionaries(
        st.text(max_size=8),
        st.none()
        | st.booleans()
        | st.integers(-(2**60), 2**60)
        | st.floats()
        | st.text(max_size=5)
        | st.lists(st.integers(-5, 5), max_size=3),
        max_size=4,
    ),
)
numbers = st.one_of(
    st.none(),
    st.integers(-5, 2**54),
    st.floats(),
    st.sampled_from([0, 0.0, -0.0, MAX_SAFE, MAX_SAFE + 1, float(MAX_SAFE), 1e-7, 1e21]),
)
counts = st.one_of(st.none(), st.integers(-3, 2**54), st.booleans(), st.floats(0, 10))
texts = st.text(max_size=30) | st.sampled_from(["", "a" * 200, "a" * 201, "é" * 200, "\U0001f600"])
any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)
FIELDS = list(AttemptRecord.model_fields)
field_values = {
    "experiment_id": texts,
    "task_id": texts | st.sampled_from(["a\nb", "a\x7fb", "a\x85b", "x" * 500, "x" * 501]),
    "repeat_index": counts,
    "terminal_class": st.sampled_from(["resolved", "timeout", "cancelled", "Resolved", ""]),
    "terminal_identity": st.none()
    | st.sampled_from(["blake3:" + "a" * 64, "blake3:" + "A" * 64, "blake3:" + "a" * 64 + "\n"]),
    "runtime_seconds": numbers,
    "started_at": st.none() | timestamps_text | near_timestamps,
    "finished_at": st.none() | timestamps_text | near_timestamps,
    "cost_usd": numbers,
    "input_tokens": counts,
    "output_tokens": counts,
    "cached_input_tokens": counts,
    "plan_id": st.none() | texts,
    "derived_from": st.none() | st.sampled_from(["blake3:" + "0" * 64, "blake3:x", ""]),
    "labels": st.dictionaries(st.text(max_size=5), st.text(max_size=5) | any_json, max_size=3),
    "artifacts": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
}


@st.composite
def records(draw) -> dict[str, Any]:
    """A valid record, then zero or more fields replaced, removed or added."""
    record = make_record(with_identity=draw(st.booleans()))
    if draw(st.booleans()):
        record["inputs"]["budget"] = draw(budgets)
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["replace", "replace", "remove", "add", "nested"]))
        name = draw(st.sampled_from(FIELDS))
        if action == "replace":
            strategy = field_values.get(name, any_json)
            record[name] = draw(strategy | any_json) if draw(st.booleans()) else draw(strategy)
        elif action == "remove":
            record.pop(name, None)
        elif action == "add":
            record[draw(st.sampled_from(["extra", "labels_", "float", "str"]))] = draw(any_json)
        else:
            target = draw(st.sampled_from(["inputs", "envelope"]))
            if isinstance(record.get(target), dict) and record[target]:
                key = draw(st.sampled_from(sorted(record[target]) + ["unknown"]))
                if draw(st.booleans()):
                    record[target][key] = draw(any_json | st.text(max_size=3))
                else:
                    record[target].pop(key, None)
    return record


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_fast_path_accepts_only_what_the_model_accepts(record):
    agree(record)


@settings(max_examples=300)
@given(st.datetimes(), st.integers(-23 * 60 - 59, 23 * 60 + 59), st.integers(0, 999999))
def test_timestamps_in_every_offset_read_as_the_model_reads_them(moment, minutes, micros):
    sign = "-" if minutes < 0 else "+"
    offset = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    fraction = f".{micros:06d}".rstrip("0") if micros else ""
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + (fraction if fraction != "." else "") + offset
    record = make_record(started_at=text, finished_at=None)
    fast = agree(record)
    reference = model_form(orjson.dumps(record))
    assert (fast is None) == (reference is None), text  # valid stamps are all taken fast


EDGE_STAMPS = [
    "2026-11-02T09:00:00+00:60",
    "2026-11-02T09:00:00+24:00",
    "2026-11-02T09:00:00+00:75",
    "2026-11-02T24:00:00Z",
    "2026-11-02T23:59:60Z",
    "2026-02-29T09:00:00Z",
    "2024-02-29T09:00:00Z",
    "0000-01-01T00:00:00Z",
    "0001-01-01T00:00:00+00:01",
    "9999-12-31T23:59:59-00:01",
    "2026-11-02 09:00:00Z",
    "2026-11-02t09:00:00z",
    "2026-11-02T09:00:00.1234567Z",
    "2026-11-02T09:00:00,5Z",
    "2026-11-02T09:00Z",
    "2026-11-02T09:00:00",
    "2026-11-02T09:00:00+0200",
    "\u0662026-11-02T09:00:00Z",
]


@pytest.mark.parametrize("text", EDGE_STAMPS)
def test_edge_timestamps_agree_with_the_model(text):
    agree(make_record(started_at=text, finished_at=None))
    agree(make_record(started_at=None, finished_at=text))


@settings(max_examples=500)
@given(timestamps_text | near_timestamps)
def test_timestamp_texts_agree_with_the_model(text):
    agree(make_record(started_at=text, finished_at=None))


@settings(max_examples=300)
@given(timestamps_text, timestamps_text)
def test_start_and_finish_order_agrees_with_the_model(started, finished):
    agree(make_record(started_at=started, finished_at=finished))


def test_finish_before_start_is_left_to_the_model():
    record = make_record(started_at="2026-11-02T09:00:00Z", finished_at="2026-11-02T10:59:59+02:00")
    assert checked_record(record) is None
    record["finished_at"] = "2026-11-02T11:00:00+02:00"
    assert checked_record(record) is not None


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"terminal_identity": None},
        {"started_at": "2026-11-02T09:00:00+02:00", "finished_at": "2026-11-02T08:00:00.25Z"},
        {"runtime_seconds": None, "cost_usd": None, "labels": {}},
        {"runtime_seconds": 3, "cost_usd": 0},
        {"plan_id": "plan-1", "derived_from": "blake3:" + "1" * 64, "artifacts": {"p": "x"}},
    ],
)
def test_common_shapes_take_the_fast_path(overrides):
    record = make_record(**overrides)
    for budget in ("none", {"turns": 50, "cost_usd": 2.5}, {"nested": {"a": [1, 2.0]}}):
        record["inputs"]["budget"] = budget
        assert agree(copy.deepcopy(record)) is not None


def test_optional_fields_absent_take_the_fast_path():
    record = make_record()
    for name in ("started_at", "finished_at", "cost_usd", "labels", "terminal_identity"):
        record.pop(name)
    record["envelope"] = {"model": "m-1"}
    assert agree(record) is not None


# --- canonical encoding of records ------------------------------------------------------------


def full(record: dict[str, Any]) -> dict[str, Any]:
    """The record with every field of the JSON form present (absent ones null or empty)."""
    defaults: dict[str, Any] = dict.fromkeys(FIELDS)
    defaults.update(labels={}, artifacts={})
    return {**defaults, **record}


def same_bytes_or_both_refuse(record: Any) -> None:
    try:
        expected = canonical_json_reference(record)
    except Exception:
        with pytest.raises(Exception):  # noqa: B017 - whatever the reference raises
            canonical_record(record)
        return
    assert canonical_record(record) == expected


@settings(max_examples=800, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_canonical_record_is_byte_equal_to_rfc8785(record):
    same_bytes_or_both_refuse(record)
    same_bytes_or_both_refuse(full(record))
    model = model_form(orjson.dumps(record)) if _encodable(record) else None
    if model is not None:
        assert canonical_record(model) == canonical_json_reference(model)


@pytest.mark.parametrize(
    "key", ["a", "\ue000", "\uffff", "\U0001f600", "\ud7ff", "z\U0001f600", "\x7f", "é"]
)
def test_canonical_record_sorts_map_keys_by_utf16_code_units(key):
    record = full(make_record())
    record["labels"] = {key: "1", "\ue001": "2", "\U0001f601": "3", "b": "4"}
    record["artifacts"] = {"\U0001f602": "x", key: "y"}
    assert canonical_record(record) == canonical_json_reference(record)


@settings(max_examples=300)
@given(records(), st.text(max_size=64) | any_json)
def test_canonical_identity_is_byte_equal_to_rfc8785(record, cohort):
    value = {
        "cohort_key": cohort,
        "envelope": record.get("envelope"),
        "experiment_id": record.get("experiment_id"),
        "repeat_index": record.get("repeat_index"),
        "task_id": record.get("task_id"),
        "terminal_class": record.get("terminal_class"),
    }
    try:
        expected = canonical_json_reference(value)
    except Exception:
        return
    assert canonical_identity(value) == expected


def test_budget_memo_tells_values_orjson_writes_alike():
    record = full(make_record())
    record["inputs"]["budget"] = {"limit": None}
    assert canonical_record(record) == canonical_json_reference(record)
    record = copy.deepcopy(record)
    record["inputs"]["budget"] = {"limit": float("nan")}  # orjson writes NaN as null
    with pytest.raises(Exception):  # noqa: B017 - RFC 8785 has no NaN
        canonical_record(record)


def _encodable(record: Any) -> bool:
    try:
        orjson.dumps(record)
    except (TypeError, orjson.JSONEncodeError):
        return False
    return True


# --- keys and rows of validated records ---------------------------------------------------------


@settings(max_examples=500, suppress_health_check=[HealthCheck.too_slow])
@given(records())
def test_validated_keys_equal_derive_keys(record):
    model = model_form(orjson.dumps(record)) if _encodable(record) else None
    if model is None:
        return
    cohort, identity, attempt, budget = validated_keys(model)
    assert (cohort, identity, attempt) == derive_keys(model)
    assert budget == canonical_json_reference(model["inputs"]["budget"]).decode()


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records(), min_size=1, max_size=12))
def test_rows_built_by_column_equal_rows_built_by_record(batch):
    valid = [m for r in batch if _encodable(r) and (m := model_form(orjson.dumps(r)))]
    if not valid:
        return
    keys = [derive_keys(m) for m in valid]
    by_row = rows_to_table([to_row(m, k[2], k[0]) for m, k in zip(valid, keys, strict=True)])
    ids, cohorts = [k[2] for k in keys], [k[0] for k in keys]
    assert records_to_table(valid, ids, cohorts).equals(by_row, check_metadata=True)
    budgets = [validated_keys(m)[3] for m in valid]
    assert records_to_table(valid, ids, cohorts, budgets).equals(by_row, check_metadata=True)


@pytest.mark.parametrize("depth", [1, 31, 32, 33, 200, 900])
def test_deep_budgets_are_left_to_the_model(depth):
    record = make_record()
    record["inputs"]["budget"] = {"turns": "deep"}
    payload = orjson.dumps(record).replace(
        b'"deep"', b"[" * depth + b"1" + b"]" * depth
    )  # orjson writes fewer levels than it reads
    fast = checked_record(orjson.loads(payload))  # never a RecursionError
    if depth >= 32:  # the budget object and 32 lists: deeper than the fast path goes
        assert fast is None
    else:
        assert fast is not None and model_form(payload) is not None
