"""What every fuzz test shares: the three properties, a registry to ingest into, the seeds.

Every input goes through the command line (`registry ingest`, in process, through click's
test runner and the real error boundary of `registry_cli.main.app`) and must satisfy:

1. no traceback: the command ends with an exit status, never with another exception;
2. a rejected input is exactly one `Error:` line on stderr (no control character in it) and
   nothing on stdout;
3. after a rejection the registry is byte-identical to what it was before.

`REGISTRY_FUZZ_SAVE=DIR` keeps every input that breaks a property in DIR and lets the run go
on (a search for crashes); without it the first failure fails the test (and hypothesis
shrinks it). `REGISTRY_FUZZ_STATS=FILE` appends one JSON line of counts per fuzz test.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import resource
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click.testing
import typer.main

from registry import ingest
from registry_cli.main import app
from tests.conftest import FIXTURES, QUICKSTART, make_record, tree_snapshot

CRASHES = Path(__file__).resolve().parent / "crashes"
COMMAND = typer.main.get_command(app)  # built once: typer rebuilds it on every invoke
_RUNNER = click.testing.CliRunner()
# Anything a terminal could act on, or that splits a line, except the final newline.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def seed_records() -> list[dict[str, Any]]:
    """Valid records to mutate: the quickstart lines and a few written by hand."""
    records = [json.loads(line) for line in QUICKSTART.read_text().splitlines()[:6]]
    records.append(make_record())
    records.append(make_record(with_identity=False, cost_usd=None, labels={}))
    records.append(
        make_record(
            artifacts={"log": "blake3:" + "f" * 64},
            derived_from=None,
            labels={"k\u00e9": "v\u2603", "": ""},
        )
    )
    return records


@dataclass
class Outcome:
    """What one input did."""

    accepted: bool
    problems: list[str]
    error: str = ""
    """The first line on stderr of a rejected input."""


@dataclass
class Stats:
    """Counts of a fuzz run, by outcome."""

    name: str
    counts: Counter[str] = field(default_factory=Counter)

    def write(self) -> None:
        target = os.environ.get("REGISTRY_FUZZ_STATS")
        if target:
            with open(target, "a") as handle:
                handle.write(json.dumps({"test": self.name, **self.counts}) + "\n")


class Registry:
    """A registry holding the quickstart evidence, restored after every accepted input."""

    def __init__(self) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="registry-fuzz-"))
        self.base = self.work / "base"
        ingest(self.base, [str(QUICKSTART)])
        self.root = self.work / "reg"
        shutil.copytree(self.base, self.root)
        self.snapshot = tree_snapshot(self.root)

    def restore(self) -> None:
        shutil.rmtree(self.root)
        shutil.copytree(self.base, self.root)

    def close(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)


def run_ingest(
    reg: Registry, args: Sequence[str], stdin: bytes | None = None, cwd: Path | None = None
) -> Outcome:
    """Run `registry ingest ARGS --root ROOT` and check the three properties."""
    previous = Path.cwd()
    if cwd is not None:
        os.chdir(cwd)
    peak = _peak_rss()
    try:
        result = _RUNNER.invoke(COMMAND, ["ingest", *args, "--root", str(reg.root)], input=stdin)
    finally:
        os.chdir(previous)
    problems = []
    if (grown := _peak_rss() - peak) > MEMORY_GROWTH:
        problems.append(f"memory: the peak resident size grew by {grown >> 20} MiB")
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        problems.append(f"traceback: {type(result.exception).__name__}: {result.exception}"[:500])
    if result.exit_code == 0 and not problems:
        reg.restore()
        return Outcome(True, [])
    lines = result.stderr.split("\n")
    if lines[-1] == "":
        lines.pop()
    if len(lines) != 1:
        problems.append(f"{len(lines)} lines on stderr: {result.stderr[:300]!r}")
    elif not lines[0].startswith("Error: "):
        problems.append(f"not an Error: line: {lines[0][:300]!r}")
    elif _CONTROL.search(lines[0]):
        problems.append(f"control character in the error: {lines[0][:300]!r}")
    if result.stdout:
        problems.append(f"output on stdout: {result.stdout[:200]!r}")
    if tree_snapshot(reg.root) != reg.snapshot:
        problems.append("registry changed by a rejected input")
        reg.restore()
    return Outcome(False, problems, lines[0] if lines else "")


MEMORY_GROWTH = 1 << 30
"""An input that makes one ingest grow the process by more than this is a failure too."""


def _peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def settle(outcome: Outcome, stats: Stats, save: dict[str, bytes] | Path, label: str) -> None:
    """Count an outcome; keep a failing input (search mode) or fail the test."""
    stats.counts["inputs"] += 1
    stats.counts["accepted" if outcome.accepted else "rejected"] += 1
    if not outcome.problems:
        return
    stats.counts["failures"] += 1
    target = os.environ.get("REGISTRY_FUZZ_SAVE")
    if not target:
        raise AssertionError(f"{label}: " + "; ".join(outcome.problems))
    keep_failure(Path(target), label, outcome.problems, save)


def keep_failure(
    target: Path, label: str, problems: list[str], save: dict[str, bytes] | Path
) -> None:
    """Write a failing input (file bytes by name, or a folder) under `target`."""
    if isinstance(save, Path):
        digest = hashlib.sha256(str(sorted(_tree_bytes(save).items())).encode()).hexdigest()
    else:
        digest = hashlib.sha256(str(sorted(save.items())).encode()).hexdigest()
    place = target / f"{label}--{digest[:12]}"
    if place.exists():
        return
    place.mkdir(parents=True)
    (place / "PROBLEM.txt").write_text("\n".join(problems) + "\n")
    if isinstance(save, Path):
        shutil.copytree(save, place / "input", symlinks=True)
    else:
        for name, data in save.items():
            (place / name).write_bytes(data)


def _tree_bytes(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {path.name: path.read_bytes()}
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def importer_fixture(name: str) -> Path:
    """Return a small committed harness output for an importer (inspect: one `.eval` log)."""
    return {
        "harbor": FIXTURES / "importers/harbor/tb2-terminus-gpt5",
        "terminal-bench": FIXTURES / "importers/terminal-bench/runs/2025-07-01__10-00-00",
        "swebench": FIXTURES / "importers/swebench/run",
        "inspect": INSPECT_LOG,
    }[name]


INSPECT_LOG = sorted((FIXTURES / "importers/inspect/arith").glob("*.eval"))[0]
