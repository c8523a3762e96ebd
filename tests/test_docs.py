"""Every command has help text and is documented in the README."""

from __future__ import annotations

from pathlib import Path

import pytest

from registry_cli.main import app

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()
COMMANDS = sorted(c.name or c.callback.__name__ for c in app.registered_commands)
GROUPS = sorted(g.name for g in app.registered_groups)


@pytest.mark.parametrize("name", COMMANDS)
def test_command_has_help_and_is_in_readme(name, runner):
    result = runner.invoke(app, [name, "--help"])
    assert result.exit_code == 0
    command = next(c for c in app.registered_commands if (c.name or c.callback.__name__) == name)
    assert (command.callback.__doc__ or "").strip(), f"{name} has no help text"
    assert f"`registry {name}" in README, f"registry {name} is not documented in README.md"


def test_readme_commands_and_ci_agree():
    ci = (Path(__file__).resolve().parent.parent / ".ci" / "run").read_text()
    assert "pip install -q -e '.[test]' && python -m pytest" in ci
    assert "pip install -e '.[test]' && python -m pytest" in README


@pytest.mark.parametrize("name", GROUPS)
def test_group_has_help_and_is_in_readme(name, runner):
    result = runner.invoke(app, [name, "--help"])
    assert result.exit_code == 0 and result.stdout.strip()
    assert f"`registry {name}" in README


def test_quickstart_command_reports_on_a_sample_task():
    from tests.conftest import QUICKSTART

    first = README.split("# 1.", 1)[1].splitlines()[1]
    task = first.split("--task ", 1)[1].split()[0]
    assert task in QUICKSTART.read_text()
