"""Every input that ever broke `registry ingest` (a traceback, a multi-line error, a silent
last-key-wins), replayed: each is now one `Error:` line and leaves the registry unchanged.

A case is a folder under tests/fuzz/crashes/ holding the input and `case.json`:
`input` (the file, or folder, to ingest), `found` (what it did before the fix), `expect` (text
the one error line holds after `Error: `, or null for an input that is now accepted), and
optionally `format` (`--format`) or `stdin`. The harness also fails a case that grows the
process by more than 1 GiB.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.fuzz.harness import CRASHES, Registry, run_ingest

CASES = sorted(p.name for p in CRASHES.iterdir() if (p / "case.json").is_file())


@pytest.fixture(scope="module")
def reg():
    registry = Registry()
    yield registry
    registry.close()


def test_every_crash_fixture_is_described():
    assert len(CASES) >= 25
    for name in CASES:
        case = json.loads((CRASHES / name / "case.json").read_text())
        assert {"input", "found", "expect"} <= set(case), name
        assert (CRASHES / name / case["input"]).exists(), name


@pytest.mark.parametrize("name", CASES)
def test_crash_fixture_is_one_error_line_and_changes_nothing(name, reg, tmp_path):
    case = json.loads((CRASHES / name / "case.json").read_text())
    source = CRASHES / name / case["input"]
    # the error names the file as given, so run from a copy under its plain name
    if source.is_dir():
        shutil.copytree(source, tmp_path / case["input"])
    else:
        shutil.copy(source, tmp_path / case["input"])
    args = ["-"] if case.get("stdin") else [case["input"]]
    if "format" in case:
        args += ["--format", case["format"]]
    stdin = source.read_bytes() if case.get("stdin") else None

    outcome = run_ingest(reg, args, stdin=stdin, cwd=tmp_path)

    assert outcome.problems == []
    if case["expect"] is None:  # a wrongly typed value the importer now reads as text
        assert outcome.accepted, outcome.error
    else:
        assert not outcome.accepted, f"{name} was accepted"
        assert outcome.error.startswith("Error: " + case["expect"]), outcome.error
