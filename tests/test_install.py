"""The installed `registry` command works from outside the checkout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def test_console_script_runs_outside_the_checkout(tmp_path):
    command = shutil.which("registry")
    if command is None:
        pytest.skip("the project is not installed (pip install -e .)")
    result = subprocess.run(
        [command, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    for name in ("ingest", "sql", "verify", "report", "reports", "compare", "summary", "noise"):
        assert name in result.stdout


def test_install_hints_name_the_distribution():
    """`registry` on the package index is an unrelated project: hints name ours."""
    import re
    import tomllib

    root = Path(__file__).resolve().parent.parent
    name = tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"]
    assert name == "agent-evidence-registry"
    texts = [p.read_text() for p in (root / "registry").rglob("*.py")]
    texts += [p.read_text() for p in (root / "docs").rglob("*.md")]
    texts.append((root / "README.md").read_text())
    hints = [h for t in texts for h in re.findall(r"pip install '?([a-z][\w.-]*)\[", t)]
    assert hints and set(hints) == {name}
