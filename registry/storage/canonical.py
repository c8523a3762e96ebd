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

`tests/test_canonical.py` checks the equivalence with hypothesis over arbitrary JSON values.
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
