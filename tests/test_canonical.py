"""The canonical-JSON fast path must be byte-equal to the RFC 8785 reference everywhere."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.storage.canonical import canonical_json, canonical_json_reference
from registry.storage.digest import digest_json

safe_ints = st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
json_scalars = st.none() | st.booleans() | safe_ints | finite_floats | st.text()
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)


@settings(max_examples=600)
@given(json_values)
def test_fast_path_is_byte_equal_to_rfc8785(value):
    assert canonical_json(value) == canonical_json_reference(value)


@pytest.mark.slow
@settings(max_examples=10_000)
@given(json_values)
def test_fast_path_is_byte_equal_to_rfc8785_many(value):
    assert canonical_json(value) == canonical_json_reference(value)


@settings(max_examples=500)
@given(finite_floats)
def test_every_float_matches_reference(value):
    assert canonical_json([value]) == canonical_json_reference([value])


@given(
    st.text(
        alphabet=st.characters(
            min_codepoint=0xD7F0, max_codepoint=0x1F64F, exclude_categories=("Cs",)
        ),
        min_size=1,
    )
)
def test_keys_sorted_by_utf16_code_units(key):
    value = {key: 1, "\ue000": 2, "\U0001f600": 3, "a": 4}
    assert canonical_json(value) == canonical_json_reference(value)


@settings(max_examples=300)
@given(json_values, st.randoms(use_true_random=False))
def test_digest_stable_under_key_order_and_whitespace(value, rnd: random.Random):
    shuffled = _shuffle_keys(value, rnd)
    text = json.dumps(shuffled, indent=rnd.choice([None, 1, 4]), separators=None)
    assert digest_json(json.loads(text)) == digest_json(value)


def _shuffle_keys(value, rnd):
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffle_keys(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [_shuffle_keys(v, rnd) for v in value]
    return value
