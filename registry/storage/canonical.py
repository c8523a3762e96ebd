r"""RFC 8785 canonical JSON, with a fast path proven byte-equal on the values it accepts.

The reference implementation is the `rfc8785` package (pure Python, roughly 100 µs for an
attempt record). Ingest canonicalises every record, so values that `orjson` provably encodes
exactly as RFC 8785 does go through `orjson` with sorted keys instead (a few µs):

* strings: both escape only `"`, `\\`, the short escapes and other control characters
  (lowercase `\\u00xx`) and emit everything else as UTF-8;
* object keys: `orjson` sorts by code point, RFC 8785 by UTF-16 code unit; the two orders agree
  unless a key holds a character at or above U+E000, which sends the value to the slow path;
* integers: identical inside the safe range (|i| < 2**53), the only range RFC 8785 allows;
* floats: an integral float is written as the integer it equals (what RFC 8785 does); other
  floats agree when 1e-5 <= |f| < 1e15, where both print the shortest round-trip digits in
  plain notation. Anything else takes the slow path.

`canonical_record` encodes an attempt record in its JSON form with the same rules, without
visiting every value: it checks the type of each field it knows, normalises the two numbers
that may be floats, and inserts the budget object as its canonical bytes, encoded once per
distinct budget (`orjson.Fragment`). Any other shape goes through `canonical_json`.

`tests/test_canonical.py` checks the equivalence with hypothesis over arbitrary JSON values
and over attempt records.
"""

from __future__ import annotations

from typing import Any

import orjson
import rfc8785

_SAFE_INT = 2**53
_FAST_FLOAT_MIN = 1e-5
_FAST_FLOAT_MAX = 1e15
_UTF16_ORDER_BREAK = "\ue000"
_KEY_CACHE_SIZE = 4096
_CHECKED_KEYS: set[str] = set()


class _SlowPath(Exception):
    """Raised internally when a value is outside the proven fast-path domain."""


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 encoding of a JSON-compatible value."""
    try:
        prepared = _prepare(value)
        return orjson.dumps(prepared, option=orjson.OPT_SORT_KEYS)
    except (_SlowPath, orjson.JSONEncodeError):
        return rfc8785.dumps(value)


_RECORD_TEXT = (
    "experiment_id",
    "task_id",
    "terminal_class",
    "terminal_identity",
    "started_at",
    "finished_at",
    "plan_id",
    "derived_from",
)
_RECORD_INTEGERS = ("repeat_index", "input_tokens", "output_tokens", "cached_input_tokens")
_RECORD_NUMBERS = ("runtime_seconds", "cost_usd")
_RECORD_MAPS = ("envelope", "labels", "artifacts")
_RECORD_KEYS = frozenset(
    (*_RECORD_TEXT, *_RECORD_INTEGERS, *_RECORD_NUMBERS, *_RECORD_MAPS, "inputs")
)
_FRAGMENT_CACHE_SIZE = 1024
_FRAGMENTS: dict[bytes, tuple[Any, bytes, orjson.Fragment]] = {}


def canonical_record(record: dict[str, Any]) -> bytes:
    """Return `canonical_json(record)` of an attempt record in its JSON form, faster.

    The fields of `registry.attempt/1` are checked by type (text or null, integers in the
    safe range, numbers, maps of text); a record of any other shape, or holding a value the
    fast path does not encode (see the module documentation), is encoded by
    `canonical_json`, so the bytes are the same whatever the record holds.
    """
    if record.keys() != _RECORD_KEYS:
        return canonical_json(record)
    try:
        prepared = _prepare_record(record)
    except _SlowPath:
        return canonical_json(record)
    return orjson.dumps(prepared, option=orjson.OPT_SORT_KEYS)


def canonical_validated(record: dict[str, Any], budget: orjson.Fragment | None) -> bytes:
    """Return `canonical_json(record)` of a record validated as `registry.attempt/1`.

    The record is in the JSON form validation gives (`checked_payload`): every field present,
    text where the model says text, counts in the safe range, numbers finite. Only what
    validation leaves open is handled here: the two numbers (an integral float is written as
    an integer, other floats outside the fast range take the reference path), the label and
    artifact keys (ordered by UTF-16 code unit), and the budget, given as the `Fragment` of
    its canonical bytes when it is an object (`canonical_budget`).
    """
    prepared = dict(record)
    try:
        for name in _RECORD_NUMBERS:
            value = record[name]
            if type(value) is float:
                prepared[name] = _prepare_float(value)
        checked = _CHECKED_KEYS
        for name in ("labels", "artifacts"):
            for key in record[name]:
                if key not in checked:
                    _check_key(key)
    except _SlowPath:
        return canonical_json(record)
    if budget is not None:
        prepared["inputs"] = {**record["inputs"], "budget": budget}
    return orjson.dumps(prepared, option=orjson.OPT_SORT_KEYS)


def canonical_budget(budget: Any) -> tuple[str, orjson.Fragment | None]:
    """The canonical JSON text of a budget, and for an object budget the same as a `Fragment`.

    A string budget is its JSON string (RFC 8785 and orjson write strings alike); an object
    is encoded once per distinct value. Raises what `canonical_json` raises.
    """
    if type(budget) is str:
        return orjson.dumps(budget).decode(), None
    try:
        _, data, fragment = _memoised(budget)
    except _SlowPath:
        return canonical_json(budget).decode(), orjson.Fragment(canonical_json(budget))
    return data.decode(), fragment


def canonical_identity(value: dict[str, Any]) -> bytes:
    """Return `canonical_json` of the object a terminal identity is the digest of, faster.

    Its fields are text, one safe integer and the envelope (a map of text or null); any other
    value is encoded by `canonical_json`.
    """
    try:
        for name in ("cohort_key", "experiment_id", "task_id", "terminal_class"):
            if type(value[name]) is not str:
                raise _SlowPath
        index = value["repeat_index"]
        if type(index) is not int or not -_SAFE_INT < index < _SAFE_INT:
            raise _SlowPath
        _check_text_map(value["envelope"], nulls=True)
    except (_SlowPath, KeyError):
        return canonical_json(value)
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def _prepare_record(record: dict[str, Any]) -> dict[str, Any]:
    for name in _RECORD_TEXT:
        value = record[name]
        if type(value) is not str and value is not None:
            raise _SlowPath
    for name in _RECORD_INTEGERS:
        value = record[name]
        if value is not None and (type(value) is not int or not -_SAFE_INT < value < _SAFE_INT):
            raise _SlowPath
    prepared = dict(record)
    for name in _RECORD_NUMBERS:
        value = record[name]
        if value is not None:
            prepared[name] = _number(value)
    for name in _RECORD_MAPS:
        _check_text_map(record[name], nulls=name == "envelope")
    inputs = record["inputs"]
    if type(inputs) is not dict:
        raise _SlowPath
    out = {}
    for key, item in inputs.items():
        if key not in _CHECKED_KEYS:
            _check_key(key)
        if type(item) is not str:
            item = _fragment(item)
        out[key] = item
    prepared["inputs"] = out
    return prepared


def _number(value: Any) -> float | int:
    kind = type(value)
    if kind is float:
        return _prepare_float(value)
    if kind is int and -_SAFE_INT < value < _SAFE_INT:
        return value
    raise _SlowPath


def _check_text_map(value: Any, nulls: bool) -> None:
    """A map of text to text (or to null, for the envelope), keys in UTF-16 order."""
    if type(value) is not dict:
        raise _SlowPath
    checked = _CHECKED_KEYS
    for key, item in value.items():
        if key not in checked:
            _check_key(key)
        if type(item) is not str and not (nulls and item is None):
            raise _SlowPath


def canonical_value(value: Any) -> bytes:
    """Return `canonical_json(value)`, memoised for values that repeat (such as budgets)."""
    try:
        return _memoised(value)[1]
    except _SlowPath:
        return canonical_json(value)


def _fragment(value: Any) -> orjson.Fragment:
    """The canonical bytes of a JSON value, inserted as they are by orjson (memoised)."""
    return _memoised(value)[2]


def _memoised(value: Any) -> tuple[Any, bytes, orjson.Fragment]:
    """`(value, canonical bytes, the same as an orjson.Fragment)` of a JSON value.

    The memo is keyed by orjson's own encoding, which is not canonical and not injective for
    every Python value (NaN and infinities become null, an enum its value), so a hit counts
    only if the stored value also equals this one. Raises `_SlowPath` where `canonical_json`
    would raise.
    """
    try:
        memo = orjson.dumps(value)
    except orjson.JSONEncodeError:
        raise _SlowPath from None
    held = _FRAGMENTS.get(memo)
    if held is not None and type(held[0]) is type(value) and held[0] == value:
        return held
    try:
        data = canonical_json(value)
    except Exception:  # whatever the reference raises, it raises for the whole record
        raise _SlowPath from None
    if len(_FRAGMENTS) >= _FRAGMENT_CACHE_SIZE:
        _FRAGMENTS.clear()
    held = _FRAGMENTS[memo] = (value, data, orjson.Fragment(data))
    return held


def canonical_json_reference(value: Any) -> bytes:
    """Return the RFC 8785 encoding computed by the reference implementation only."""
    return rfc8785.dumps(value)


def _prepare(value: Any) -> Any:
    """Return `value` with floats normalised for orjson, or raise `_SlowPath`."""
    kind = type(value)
    if kind is dict:
        return _prepare_dict(value)
    if kind is str or value is None or kind is bool:
        return value
    if kind is float:
        return _prepare_float(value)
    if kind is int:
        if -_SAFE_INT < value < _SAFE_INT:
            return value
        raise _SlowPath
    if kind is list or kind is tuple:
        return [_prepare(item) for item in value]
    raise _SlowPath  # subclasses (enums, bool-likes) and foreign types: let rfc8785 decide


def _prepare_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    """`_prepare` of a dict, with the common leaves (text, null, numbers) handled inline."""
    out = {}
    checked = _CHECKED_KEYS
    for key, item in value.items():
        if key not in checked:
            _check_key(key)
        kind = type(item)
        if kind is str or item is None or kind is bool:
            out[key] = item
        elif kind is float:
            if item.is_integer() and -_SAFE_INT < item < _SAFE_INT:
                out[key] = int(item)
            elif _FAST_FLOAT_MIN <= abs(item) < _FAST_FLOAT_MAX:
                out[key] = item
            else:
                raise _SlowPath
        elif kind is int:
            if not -_SAFE_INT < item < _SAFE_INT:
                raise _SlowPath
            out[key] = item
        elif kind is dict:
            out[key] = _prepare_dict(item)
        else:
            out[key] = _prepare(item)
    return out


def _check_key(key: Any) -> None:
    if type(key) is not str or max(key, default="") >= _UTF16_ORDER_BREAK:
        raise _SlowPath
    if len(_CHECKED_KEYS) < _KEY_CACHE_SIZE:  # record keys repeat: check each once
        _CHECKED_KEYS.add(key)


def _prepare_float(value: float) -> float | int:
    if value.is_integer() and -_SAFE_INT < value < _SAFE_INT:
        return int(value)
    magnitude = abs(value)
    if _FAST_FLOAT_MIN <= magnitude < _FAST_FLOAT_MAX:
        return value
    raise _SlowPath
