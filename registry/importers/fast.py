"""The common shape of a `registry.attempt/1` record, checked without pydantic.

Validating a record with the pydantic model and dumping its JSON form costs about 40 µs, most
of an ingest's time per record. `checked_record` takes the parsed record and returns the
same JSON form the model gives (`record_json(AttemptRecord.model_validate_json(payload))`:
every field, defaults applied, timestamps in UTC with a `Z`) when the record is plainly
valid, in a few µs. It never decides that a record is invalid: it returns None for anything
outside the shape it knows (a wrong type, a value out of range, a timestamp in a form it does
not parse, an unknown field, a number pydantic would read differently), and the caller then
validates with the model, which accepts the record or explains in one line what is wrong. So
the messages are the model's, and the fast path can only be more cautious than the model,
never less.

The rules mirror the model field by field (`registry_schemas.attempt`).
`tests/test_fast_records.py` checks, with hypothesis over valid and damaged records, that
whatever this module accepts the model accepts with the same JSON form, and pins the model's
JSON Schema: changing the model fails that test until this module is brought along.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from registry_schemas.attempt import (
    CONTROL_CHARACTERS,
    DIGEST_PATTERN,
    MAX_SAFE_INTEGER,
    AttemptRecord,
    CohortInputs,
    Envelope,
    TerminalClass,
)

# Field names come from the model itself; the rules below mirror its types and validators.
_CLASSES = frozenset(c.value for c in TerminalClass)
_INPUT_KEYS = frozenset(CohortInputs.model_fields)
_TEXT_INPUTS = tuple(key for key in CohortInputs.model_fields if key != "budget")
_ENVELOPE = tuple(Envelope.model_fields)
_ENVELOPE_KEYS = frozenset(_ENVELOPE)
_FIELDS = frozenset(AttemptRecord.model_fields)
_REQUIRED = frozenset(name for name, f in AttemptRecord.model_fields.items() if f.is_required())
_DIGEST = re.compile(DIGEST_PATTERN)  # used with fullmatch: no trailing line break passes
# RFC 3339 as the model reads it, narrowed to the forms whose parse is certain to agree with
# pydantic's: ASCII digits, an upper-case T and Z, 1-6 fraction digits, an offset of at most
# 23:59.
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)",
    re.ASCII,
)
_PLAIN_UTC_LENGTH = len("2026-11-02T09:00:00Z")


class _NotPlain(Exception):
    """The record is outside the shape this module checks: the model decides."""


def checked_record(value: Any) -> dict[str, Any] | None:
    """Return the JSON form of a plainly valid record, or None to let the model decide.

    `value` is the record as parsed JSON (orjson). The result equals what validating the
    record's JSON bytes with `AttemptRecord` and dumping it in JSON mode gives (as a value:
    the keys of `inputs`, `labels` and `artifacts` keep the input's order).
    """
    if type(value) is not dict:
        return None
    keys = value.keys()
    if not (keys >= _REQUIRED and keys <= _FIELDS):
        return None
    try:
        return _checked(value)
    except _NotPlain:
        return None


def _checked(value: dict[str, Any]) -> dict[str, Any]:
    get = value.get
    experiment = value["experiment_id"]
    if type(experiment) is not str or not 0 < len(experiment) <= 200:
        raise _NotPlain
    task = value["task_id"]
    if type(task) is not str or not 0 < len(task) <= 500 or CONTROL_CHARACTERS.search(task):
        raise _NotPlain
    terminal_class = value["terminal_class"]
    if type(terminal_class) is not str or terminal_class not in _CLASSES:
        raise _NotPlain
    identity = get("terminal_identity")
    if identity is not None and (type(identity) is not str or not _DIGEST.fullmatch(identity)):
        raise _NotPlain
    started, started_at = _timestamp(get("started_at"))
    finished, finished_at = _timestamp(get("finished_at"))
    if started_at is not None and finished_at is not None and finished_at < started_at:
        raise _NotPlain
    plan = get("plan_id")
    if plan is not None and (type(plan) is not str or not plan):
        raise _NotPlain
    derived = get("derived_from")
    if derived is not None and (type(derived) is not str or not _DIGEST.fullmatch(derived)):
        raise _NotPlain
    return {
        "experiment_id": experiment,
        "task_id": task,
        "repeat_index": _count(value["repeat_index"]),
        "inputs": _inputs(value["inputs"]),
        "terminal_class": terminal_class,
        "envelope": _envelope(value["envelope"]),
        "terminal_identity": identity,
        "runtime_seconds": _amount(value["runtime_seconds"]),
        "started_at": started,
        "finished_at": finished,
        "cost_usd": _amount(get("cost_usd")),
        "input_tokens": _optional_count(get("input_tokens")),
        "output_tokens": _optional_count(get("output_tokens")),
        "cached_input_tokens": _optional_count(get("cached_input_tokens")),
        "plan_id": plan,
        "derived_from": derived,
        "labels": _text_map(get("labels", _EMPTY)),
        "artifacts": _text_map(get("artifacts", _EMPTY)),
    }


_EMPTY: dict[str, str] = {}


def _count(value: Any) -> int:
    if type(value) is not int or not 0 <= value <= MAX_SAFE_INTEGER:
        raise _NotPlain
    return value


def _optional_count(value: Any) -> int | None:
    return None if value is None else _count(value)


def _amount(value: Any) -> float | None:
    """A non-negative finite number of at most 2**53 - 1, as the float pydantic makes it."""
    if value is None:
        return None
    kind = type(value)
    if kind is float:
        if not 0 <= value <= MAX_SAFE_INTEGER:  # NaN fails both comparisons
            raise _NotPlain
        return value
    if kind is int and 0 <= value <= MAX_SAFE_INTEGER:
        return float(value)
    raise _NotPlain


def _inputs(value: Any) -> dict[str, Any]:
    if type(value) is not dict or value.keys() != _INPUT_KEYS:
        raise _NotPlain
    for key in _TEXT_INPUTS:
        item = value[key]
        if type(item) is not str or not item:
            raise _NotPlain
    budget = value["budget"]
    if type(budget) is dict:
        _check_json(budget)
    elif type(budget) is not str:
        raise _NotPlain
    return dict(value)


_MAX_DEPTH = 32
"""Budget objects nested deeper than this go to the model. orjson reads 1,024 levels, the
model's JSON reader far fewer (it names the rest malformed JSON), and this check recurses."""


def _check_json(value: Any, depth: int = 0) -> None:
    """A budget object: finite numbers and integers within ±(2**53 - 1), at any depth."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return
    if kind is int or kind is float:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:  # NaN and infinities fail
            raise _NotPlain
        return
    if depth >= _MAX_DEPTH:
        raise _NotPlain
    if kind is dict:
        for item in value.values():
            _check_json(item, depth + 1)
        return
    if kind is list:
        for item in value:
            _check_json(item, depth + 1)
        return
    raise _NotPlain


def _envelope(value: Any) -> dict[str, str | None]:
    if type(value) is not dict or not value.keys() <= _ENVELOPE_KEYS:
        raise _NotPlain
    out = {}
    for key in _ENVELOPE:
        item = value.get(key)
        if item is not None and type(item) is not str:
            raise _NotPlain
        out[key] = item
    return out


def _text_map(value: Any) -> dict[str, str]:
    if type(value) is not dict:
        raise _NotPlain
    for item in value.values():
        if type(item) is not str:
            raise _NotPlain
    return dict(value)


def _timestamp(value: Any) -> tuple[str | None, datetime | None]:
    """The canonical text (UTC, `Z`) of an RFC 3339 timestamp and its instant."""
    if value is None:
        return None, None
    if type(value) is not str or not _TIMESTAMP.fullmatch(value):
        raise _NotPlain
    try:
        instant = datetime.fromisoformat(value).astimezone(UTC)
    except (ValueError, OverflowError):
        raise _NotPlain from None
    if len(value) == _PLAIN_UTC_LENGTH and value[-1] == "Z":
        return value, instant  # already canonical: whole seconds in UTC
    return instant.isoformat().replace("+00:00", "Z"), instant
