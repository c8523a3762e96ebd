"""Duplicate keys in a JSON object are an error in every JSON reader, at any depth.

The detector counts colons instead of re-parsing every record (see
`registry.importers.base.duplicate_key`); hypothesis checks it against a parse that keeps
every member, on documents with and without repeated keys, escaped colons included.
"""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.importers.base import duplicate_key
from tests.conftest import FIXTURES, tree_snapshot
from tests.fuzz.harness import Registry, run_ingest


def _reference(data: bytes) -> bool:
    """Whether some object of `data` holds a key twice, by a parse that keeps every pair."""
    found = False

    def pairs(members: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal found
        keys = [key for key, _ in members]
        found = found or len(keys) != len(set(keys))
        return dict(members)

    json.loads(data, object_pairs_hook=pairs)
    return found


RAW_KEYS = ["a\\u003ab", "\\u003a", "\\u0061"]  # written as is: JSON escapes
KEY = st.sampled_from(["a", "b", "a:b", ":", "", "k", *RAW_KEYS]) | st.text(max_size=4)
SCALAR = st.none() | st.booleans() | st.integers() | st.sampled_from(['"x:y"', '"\\u003a"', "1.5"])


@st.composite
def json_text(draw: st.DrawFn, depth: int = 0) -> str:
    """JSON text written member by member, so a key may repeat (escapes kept verbatim)."""
    kind = draw(st.sampled_from(["scalar", "object", "array"] if depth < 3 else ["scalar"]))
    if kind == "scalar":
        value = draw(SCALAR)
        return value if isinstance(value, str) else json.dumps(value)
    if kind == "array":
        items = draw(st.lists(json_text(depth + 1), max_size=3))
        return "[" + ", ".join(items) + "]"
    members = []
    for _ in range(draw(st.integers(0, 4))):
        key = draw(KEY)
        quoted = f'"{key}"' if key in RAW_KEYS else json.dumps(key)
        members.append(f"{quoted} : {draw(json_text(depth + 1))}")
    return "{" + ",".join(members) + "}"


@settings(max_examples=200, derandomize=True, database=None, deadline=None)
@given(json_text())
def test_detector_agrees_with_a_parse_that_keeps_every_member(text):
    data = text.encode()
    assert (duplicate_key(data) is not None) == _reference(data)


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (b'{"a": 1, "a": 2}', "a"),
        (b'{"a": {"b": 1, "c": {"d": 1, "d": 1}}}', "a.c.d"),
        (b'{"a": [{"x": 1}, {"y": 1, "y": 2}]}', "a.1.y"),
        (b'{"a\\u003ab": 1, "a:b": 2}', "a:b"),  # an escaped colon hides from a colon count
        (b'{"a": NaN, "a": 1}', "a"),  # orjson refuses NaN: the exact parse decides
        (b'{"a": 123456789012345678901234567890, "a": 1}', "a"),  # beyond 64 bits
        (b'{"a": "x:y", "b": "t:u"}', None),
        (b'{"a": 1', None),  # malformed: validation reports it
        (b"[" * 5000 + b"]" * 5000, None),  # too deep for a parse: validation reports it
    ],
)
def test_detector_names_the_first_repeated_key(data, path):
    assert duplicate_key(data) == path


def test_inputs_file_with_a_repeated_key_is_refused(tmp_path):
    reg = Registry()
    try:
        inputs = tmp_path / "inputs.json"
        inputs.write_text('{"case_digest": "a", "case_digest": "b"}')
        run = FIXTURES / "importers/terminal-bench/runs/2025-07-01__10-00-00"
        args = [str(run), "--format", "terminal-bench", "--inputs", str(inputs)]
        outcome = run_ingest(reg, args)
        assert outcome.problems == [] and not outcome.accepted
        assert outcome.error == (
            f"Error: {inputs}: duplicate key 'case_digest' in a JSON object; each key may appear"
            " once"
        )
    finally:
        reg.close()


def test_importer_file_with_a_repeated_key_is_refused(tmp_path):
    reg = Registry()
    try:
        job = tmp_path / "job"
        shutil.copytree(FIXTURES / "importers/harbor/tb2-terminus-gpt5", job)
        trial = sorted(p for p in job.iterdir() if p.is_dir())[0] / "result.json"
        trial.chmod(0o644)
        text = trial.read_text()
        trial.write_text(text.replace("{", '{"task_name": "other", ', 1))
        before = tree_snapshot(reg.root)
        outcome = run_ingest(reg, [str(job), "--format", "harbor"])
        assert outcome.problems == [] and not outcome.accepted
        assert outcome.error.endswith(
            "result.json: duplicate key 'task_name' in a JSON object; each key may appear once"
        )
        assert tree_snapshot(reg.root) == before
    finally:
        reg.close()
