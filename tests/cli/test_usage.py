"""The command line behaves like the tools its users know: one-line usage errors with a hint,
`--version`, shell completion, plain help, column order kept, layer lines on stderr."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib import metadata

import pytest

from registry_cli.main import app

USAGE_ERRORS = {
    "flag-typo": (["sql", "SELECT 1", "--jsn"], "No such option: --jsn", "registry sql"),
    "bad-format": (
        ["sql", "SELECT 1", "--format", "xml"],
        "Invalid value for '--format': 'xml' is not one of 'table', 'json', 'csv'.",
        "registry sql",
    ),
    "missing-task": (["report"], "Missing option '--task'.", "registry report"),
    "missing-argument": (["sql"], "Missing argument", "registry sql"),
    "sub-group": (["reports", "show"], "Missing argument", "registry reports show"),
    "sub-group-option": (
        ["reports", "--kind", "zz"],
        "Invalid value for '--kind'",
        "registry reports",
    ),
    "unknown-command": (["nosuch"], "No such command 'nosuch'.", "registry"),
    "top-level-typo": (["--bogus"], "No such option: --bogus", "registry"),
    "bad-int": (
        ["compare", "--baseline", "a=b", "--candidate", "c=d", "--seed", "x"],
        "Invalid value for '--seed'",
        "registry compare",
    ),
}


@pytest.mark.parametrize("case", sorted(USAGE_ERRORS), ids=sorted(USAGE_ERRORS))
def test_usage_error_is_one_line_and_a_hint(case, runner):
    args, message, command = USAGE_ERRORS[case]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("Error: ") and message in lines[0], lines
    assert lines[1] == f"Try '{command} --help' for help."
    assert result.stdout == ""
    assert not set("╭╮╰╯│─") & set(result.stderr)


def test_usage_error_echoing_control_characters_stays_one_line(runner):
    result = runner.invoke(app, ["sql", "SELECT 1", "--format", "x\x1b[31m\r\nred"])
    assert result.exit_code == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 2, result.stderr
    assert "\x1b" not in result.stderr and "\r" not in result.stderr
    assert "\\x1b[31m" in lines[0]


def test_usage_errors_of_the_installed_command(tmp_path):
    """The console script goes through the same boundary (no rich boxes on a real stderr)."""
    command = [sys.executable, "-c", "from registry_cli.main import main; main()", "report"]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: Missing option '--task'.",
        "Try 'registry report --help' for help.",
    ]


def test_registry_error_is_one_line(runner, tmp_path):
    result = runner.invoke(app, ["sql", "SELECT 1", "--root", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith("Error: no registry at ")


def test_version_comes_from_the_installed_distribution(runner):
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    names = metadata.packages_distributions().get("registry_cli", ["registry"])
    assert result.stdout == f"registry {metadata.version(names[0])}\n"
    assert re.fullmatch(r"registry \d+\.\d+\S*\n", result.stdout)


def test_shell_completion_is_offered(runner):
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "--install-completion" in result.stdout
    assert "--show-completion" in result.stdout
    assert "--version" in result.stdout


@pytest.mark.parametrize("command", [["ingest"], ["sql"], ["report"], ["reports", "show"]])
def test_help_is_plain_and_flags_take_no_value(runner, command):
    result = runner.invoke(app, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.stdout
    assert not set("╭╮╰╯│") & set(result.stdout)
    assert re.search(r"^\s+--help\s+Show this message and exit\.", result.stdout, re.M)
    if command == ["ingest"]:
        assert re.search(r"^\s+--json\s+Print the summary as JSON", result.stdout, re.M)


def test_sql_json_keeps_the_select_column_order(invoke, loaded_root):
    query = (
        "SELECT task_id AS zeta, experiment_id AS alpha, repeat_index AS mid, 1 AS a, 2 AS a "
        "FROM attempts ORDER BY attempt_id LIMIT 3"
    )
    result = invoke("sql", query, "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == 3
    assert all(list(row) == ["zeta", "alpha", "mid", "a", "a_2"] for row in rows)
    assert [row["a_2"] for row in rows] == [2, 2, 2]


TASK = "astropy__astropy-12907"


@pytest.mark.parametrize("fmt", ["table", "json", "markdown", "html"])
def test_report_layer_line_goes_to_stderr_for_every_format(invoke, loaded_root, fmt):
    first = invoke("report", "--task", TASK, "--format", fmt)
    again = invoke("report", "--task", TASK, "--format", fmt)
    for result in (first, again):
        assert result.exit_code == 0, result.output
        assert "layer blake3:" not in result.stdout
        assert re.fullmatch(r"layer blake3:[0-9a-f]{64} \(.*, commit \d+\)\n", result.stderr)
    assert first.stdout == again.stdout
    if fmt == "json":
        json.loads(first.stdout)


def test_summary_layer_line_goes_to_stderr(invoke, loaded_root):
    for fmt in ("table", "json"):
        summary = invoke("summary", "--format", fmt)
        assert summary.exit_code == 0, summary.output
        assert "layer blake3:" not in summary.stdout and "layer blake3:" in summary.stderr
