"""The installed `registry` command works from outside the checkout."""

from __future__ import annotations

import shutil
import subprocess

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
