"""Large native inputs are validated by worker processes: same segments, same errors, same order.

The parallel path is forced on small inputs here (no size threshold, chunks of three records),
and every outcome is compared with the sequential path on the same input.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

import pytest

from registry import ingest
from registry.errors import RegistryError
from tests.conftest import make_record
from tests.test_ingest_pinned import PINS, _pinned, _run

ingest_module = importlib.import_module("registry.ingest")  # `registry.ingest` is the function


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the sources that took the parallel path."""
    seen: list[str] = []
    original = ingest_module._feed

    def feed(batch: Any, pool: Any, source: Any, tick: Any) -> None:
        if pool is not None:
            seen.append(source.label)
        original(batch, pool, source, tick)

    monkeypatch.setattr(ingest_module, "_feed", feed)
    return seen


def _force(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ingest_module, "_spare_core", lambda: True)
    # threads an earlier test left idle in this worker process would turn the pool off
    monkeypatch.setattr(ingest_module, "_single_threaded", lambda: True)
    monkeypatch.setattr(ingest_module, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(ingest_module, "_CHUNK_RECORDS", 3)


@pytest.mark.parametrize("scenario", sorted(PINS))
def test_parallel_ingest_writes_the_pinned_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[str], scenario: str
) -> None:
    _force(monkeypatch)
    assert _run(tmp_path, monkeypatch, scenario) == PINS[scenario]
    assert calls


def _good(n: int, **fields: Any) -> str:
    return json.dumps(make_record(task_id=f"t{n % 3}", repeat_index=n, **fields))


def _lines(count: int, bad: dict[int, str]) -> str:
    return "".join(bad.get(i, _good(i)) + "\n" for i in range(1, count + 1))


INVALID = json.dumps(make_record(cost_usd="x"))
MALFORMED = '{"experiment_id": '
FORGED = json.dumps({**make_record(), "terminal_class": "model_failure"})
CONFLICT = _good(2, terminal_class="model_failure")  # same slot as line 2, another outcome
DUPLICATE_KEY = _good(11)[:-1] + ', "task_id": "t0"}'
REGRADE = json.dumps(make_record(derived_from="blake3:" + "0" * 64, repeat_index=99))

CASES: dict[str, dict[str, str]] = {
    "all-good": {"a.jsonl": _lines(14, {})},
    "invalid-in-third-chunk": {"a.jsonl": _lines(12, {8: INVALID})},
    "invalid-before-malformed": {"a.jsonl": _lines(12, {4: INVALID, 9: MALFORMED})},
    "malformed-before-invalid": {"a.jsonl": _lines(12, {4: MALFORMED, 9: INVALID})},
    "malformed-in-first-chunk": {"a.jsonl": _lines(12, {1: MALFORMED})},
    "conflict-before-invalid": {"a.jsonl": _lines(12, {5: CONFLICT, 7: INVALID})},
    "invalid-before-conflict": {"a.jsonl": _lines(12, {5: INVALID, 7: CONFLICT})},
    "forged-identity": {"a.jsonl": _lines(12, {6: FORGED})},
    "duplicate-key": {"a.jsonl": _lines(12, {10: DUPLICATE_KEY})},
    "invalid-before-duplicate-key": {"a.jsonl": _lines(12, {4: INVALID, 10: DUPLICATE_KEY})},
    "duplicate-key-before-invalid": {"a.jsonl": _lines(12, {4: DUPLICATE_KEY, 10: INVALID})},
    "invalid-utf8": {"a.jsonl": _lines(9, {}) + '{"task_id": "\udcff"}\n'},
    "regrade-of-nothing": {"a.jsonl": _lines(10, {7: REGRADE})},
    "later-file-invalid": {"a.jsonl": _lines(7, {}), "b.jsonl": _lines(7, {7: INVALID})},
    "later-file-empty": {"a.jsonl": _lines(7, {}), "b.jsonl": "\n"},
    "json-array-bad-item": {
        "a.json": "[\n" + ",\n".join(_good(i) for i in range(1, 9)) + ",\n" + INVALID + "\n]"
    },
    "json-array-unterminated": {"a.json": "[" + ",".join(_good(i) for i in range(1, 9))},
}


def _outcome(root: Path, names: list[str], envelope: list[str] | None = None) -> tuple[Any, ...]:
    try:
        result = ingest(root, names, envelope=envelope)
    except RegistryError as exc:
        return type(exc).__name__, str(exc)
    pinned = _pinned(result.commit) if result.commit is not None else None
    return result.read, result.new, result.present, pinned


@pytest.mark.parametrize("case", sorted(CASES))
def test_parallel_ingest_gives_the_same_outcome_and_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[str], case: str
) -> None:
    monkeypatch.chdir(tmp_path)
    names = []
    for name, text in CASES[case].items():
        Path(name).write_bytes(text.encode("utf-8", "surrogateescape"))
        names.append(name)
    sequential = [_outcome(tmp_path / "one", names) for _ in range(2)]  # then all present
    assert not calls
    _force(monkeypatch)
    parallel = [_outcome(tmp_path / "two", names) for _ in range(2)]
    assert calls
    assert parallel == sequential


def test_reingest_through_workers_finds_everything_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.jsonl").write_text(_lines(14, {}))
    # the same records in another order: other bytes, so they are read and checked again
    Path("b.jsonl").write_text("".join(reversed(_lines(14, {}).splitlines(keepends=True))))
    _force(monkeypatch)
    first = ingest(tmp_path / "reg", ["a.jsonl"])
    second = ingest(tmp_path / "reg", ["b.jsonl"])
    assert (first.new, first.present) == (14, 0)
    assert (second.read, second.new, second.present, second.commit) == (14, 0, 14, None)
    assert len(calls) == 2


LEGACY = {
    "agent": "coder",
    "agent_version": None,
    "provider": None,
    "model": None,
    "harness_version": None,
}


def _legacy(n: int, **envelope: Any) -> str:
    """A record without terminal identity, its model and provider left for `--envelope`."""
    return json.dumps(
        make_record(
            with_identity=False,
            task_id=f"t{n % 3}",
            repeat_index=n,
            envelope={**LEGACY, **envelope},
        )
    )


def _legacy_lines(count: int, bad: dict[int, str]) -> str:
    return "".join(bad.get(i, _legacy(i)) + "\n" for i in range(1, count + 1))


ENVELOPE_CASES: dict[str, str] = {
    "fills-every-record": _legacy_lines(12, {}),
    "conflicting-model-in-third-chunk": _legacy_lines(12, {8: _legacy(8, model="m-0")}),
    "bound-identity-in-second-chunk": _legacy_lines(12, {5: _good(5, envelope=LEGACY)}),
}


@pytest.mark.parametrize("case", sorted(ENVELOPE_CASES))
def test_parallel_ingest_with_envelope_gives_the_same_outcome(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: list[str], case: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("a.jsonl").write_text(ENVELOPE_CASES[case])
    envelope = ["model=m-9", "provider=acme"]
    sequential = _outcome(tmp_path / "one", ["a.jsonl"], envelope)
    assert not calls
    _force(monkeypatch)
    parallel = _outcome(tmp_path / "two", ["a.jsonl"], envelope)
    assert calls
    assert parallel == sequential
    expected = {
        "fills-every-record": 12,
        "conflicting-model-in-third-chunk": "a.jsonl:line 8: field 'envelope.model'",
        "bound-identity-in-second-chunk": "a.jsonl:line 5: field 'terminal_identity'",
    }[case]
    assert (
        parallel[1] == expected if isinstance(expected, int) else parallel[1].startswith(expected)
    )
