from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from registry import cohort_key_of, terminal_identity_of
from registry_cli.main import app

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
QUICKSTART = FIXTURES / "quickstart" / "attempts.jsonl"

INPUTS = {
    "case_digest": "blake3:" + "c" * 64,
    "prompt_digest": "blake3:" + "1" * 64,
    "source_digest": "git:8f2e7c1",
    "wiki_digest": "none",
    "tool_policy_digest": "blake3:" + "2" * 64,
    "budget": {"turns": 50, "time_seconds": 1800},
    "harness_package": "swebench==4.0.3",
    "grader_version": "grader-1.0",
    "agent_system_digest": "blake3:" + "a" * 64,
    "environment_digest": "blake3:" + "e" * 64,
}


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep every cache the tests write (object roots, stored evidence) out of the home folder."""
    if "REGISTRY_CACHE" not in os.environ:
        os.environ["REGISTRY_CACHE"] = str(tmp_path_factory.mktemp("registry-cache"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden", action="store_true", help="rewrite fixtures/expected golden files"
    )


def make_record(with_identity: bool = True, **overrides: Any) -> dict[str, Any]:
    """Return a valid attempt record (JSON form); keyword arguments replace fields."""
    record: dict[str, Any] = {
        "experiment_id": "exp-1",
        "task_id": "task-1",
        "repeat_index": 0,
        "inputs": copy.deepcopy(INPUTS),
        "terminal_class": "resolved",
        "envelope": {
            "agent": "coder",
            "agent_version": "2.3.0",
            "provider": "anthropic",
            "model": "m-1",
            "harness_version": "h-0.9",
        },
        "runtime_seconds": 12.5,
        "started_at": "2026-11-02T09:00:00Z",
        "finished_at": "2026-11-02T09:00:12.5Z",
        "cost_usd": 0.25,
        "input_tokens": 1000,
        "output_tokens": 200,
        "cached_input_tokens": None,
        "labels": {"temperature": "0.7"},
    }
    record.update(overrides)
    if with_identity and "terminal_identity" not in overrides:
        cohort = cohort_key_of(record["task_id"], record["inputs"])
        record["terminal_identity"] = terminal_identity_of(record, cohort)
    return record


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def tree_snapshot(root: Path) -> dict[str, str]:
    """Return relative path -> sha256 of every file under root (directories as 'dir')."""
    if not root.exists():
        return {}
    snapshot = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        snapshot[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return snapshot


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "reg"


@pytest.fixture
def invoke(runner: CliRunner, root: Path):
    """Run the CLI against the test registry root."""

    def run(*args: str, input: str | bytes | None = None):
        return runner.invoke(app, [*args, "--root", str(root)], input=input)

    return run


@pytest.fixture
def loaded_root(root: Path) -> Path:
    from registry import ingest

    ingest(root, [str(QUICKSTART)])
    return root


CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
"""Headless Chromium on a machine without network: no background connections, no sandbox."""


def chromium() -> str:
    """Return the Chromium executable, or skip the test (`.ci/run` installs Debian's)."""
    import shutil

    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("no Chromium on this machine (.ci/run installs Debian's chromium)")
