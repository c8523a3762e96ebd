"""Every recipe of docs/recipes.md runs through `registry sql` on its fixture and returns the
rows the document shows; the README's old weekly example pools what the recipe keeps apart."""

from __future__ import annotations

import json
import runpy
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from registry_cli.main import app
from tests.conftest import QUICKSTART

REPO = Path(__file__).resolve().parent.parent
RECIPES = REPO / "docs" / "recipes.md"
FIXTURE = REPO / "fixtures" / "recipes"
OLD_WEEKLY = """
SELECT envelope.model AS model, date_trunc('week', started_at) AS week,
       count(*) FILTER (terminal_class = 'resolved') AS resolved,
       count(*) FILTER (is_valid(terminal_class)) AS valid,
       wilson_low(resolved, valid) AS low, wilson_high(resolved, valid) AS high
FROM attempts GROUP BY ALL ORDER BY week, model
"""


def _blocks(text: str) -> list[tuple[str, str, list[str]]]:
    """Return (language, body, the Markdown table lines that follow it) for each fence."""
    lines = text.splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if not lines[i].startswith("```") or lines[i] == "```":
            i += 1
            continue
        language, body, i = lines[i][3:].strip(), [], i + 1
        while lines[i] != "```":
            body.append(lines[i])
            i += 1
        i += 1
        while i < len(lines) and not lines[i].strip():
            i += 1
        table = []
        while i < len(lines) and lines[i].startswith("|"):
            table.append(lines[i])
            i += 1
        blocks.append((language, "\n".join(body), table))
    return blocks


BLOCKS = _blocks(RECIPES.read_text())
SETUP = next(body for language, body, _ in BLOCKS if language == "bash")
RECIPE_BLOCKS = [(body, table) for language, body, table in BLOCKS if language == "sql"]


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _table(lines: list[str]) -> tuple[list[str], list[list[str]]]:
    assert len(lines) >= 2 and set(lines[1]) <= {"|", "-", " ", ":"}, "no result table"
    return _cells(lines[0]), [_cells(line) for line in lines[2:]]


def _cell(value: object) -> str:
    """Render a JSON value as the document writes it in a table."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _run(runner: CliRunner, root: Path, args: list[str]) -> str:
    result = runner.invoke(app, [*args, "--root", str(root)])
    assert result.exit_code == 0, f"{shlex.join(args)}: {result.output}"
    return result.stdout


def _sql(runner: CliRunner, root: Path, query: str) -> list[dict[str, object]]:
    return json.loads(_run(runner, root, ["sql", query, "--format", "json"]))


@pytest.fixture(scope="module")
def recipe_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The registry the document's setup commands build."""
    root = tmp_path_factory.mktemp("recipes") / "reg"
    runner = CliRunner()
    for line in SETUP.splitlines():
        words = shlex.split(line, comments=True)
        if not words:
            continue
        assert words[0] == "registry", line
        args = [str(REPO / w) if w.startswith("fixtures/") else w for w in words[1:]]
        _run(runner, root, args)
    return root


@pytest.fixture(scope="module")
def quickstart_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("quickstart") / "reg"
    _run(CliRunner(), root, ["ingest", str(QUICKSTART)])
    return root


def test_document_has_the_recipes():
    assert len(RECIPE_BLOCKS) >= 6
    text = RECIPES.read_text()
    for phrase in ("interval_below", "consistency", "environment_digest", "FROM reports"):
        assert phrase in text
    assert "ORDER BY generation, lineage_depth" in text


@pytest.mark.parametrize("index", range(len(RECIPE_BLOCKS)))
def test_recipe_returns_the_documented_rows(index, recipe_root):
    query, table = RECIPE_BLOCKS[index]
    columns, expected = _table(table)
    rows = _sql(CliRunner(), recipe_root, query)
    assert rows, "a recipe that returns nothing proves nothing"
    assert list(rows[0]) == columns
    assert [[_cell(row[c]) for c in columns] for row in rows] == expected


def test_fixture_files_are_what_the_generator_writes():
    generate = runpy.run_path(str(FIXTURE / "generate_recipes.py"))["generate"]
    for name, records in generate().items():
        lines = [json.dumps(r, sort_keys=True) for r in records]
        assert (FIXTURE / name).read_text() == "\n".join(lines) + "\n", name


def _weekly_recipe() -> str:
    return next(q for q, _ in RECIPE_BLOCKS if "date_trunc('week'" in q)


def test_old_weekly_example_pools_a_regrade_and_a_candidate(quickstart_root):
    runner = CliRunner()
    old = {
        (r["week"][:10], r["model"]): r["valid"] for r in _sql(runner, quickstart_root, OLD_WEEKLY)
    }
    assert old[("2026-11-02", "claude-sonnet-4")] == 38  # 28 originals + their 10 regrades
    assert old[("2026-11-09", "claude-sonnet-4")] == 43  # baseline 16 + candidate 27
    rows = _sql(runner, quickstart_root, _weekly_recipe())
    week = {
        (r["agent_version"], r["grader"], r["model"]): r["valid"]
        for r in rows
        if r["week"] == "2026-11-02"
    }
    assert week == {
        ("2.3.0", "grader-1.0", "claude-sonnet-4"): 28,
        ("2.3.0", "grader-1.1", "claude-sonnet-4"): 10,
    }
    later = sorted(r["valid"] for r in rows if r["week"] == "2026-11-09")
    assert later == [11, 16, 27]
    assert all(r["valid"] not in (38, 43) for r in rows)


def test_weekly_recipe_rows_are_single_configuration_and_system(quickstart_root):
    query = _weekly_recipe().replace(
        "count(DISTINCT task_id) AS tasks,",
        "count(DISTINCT task_id) AS tasks, count(DISTINCT configuration_digest) AS configs, "
        "count(DISTINCT system) AS systems, count(DISTINCT cohort_key) AS cohorts,",
    )
    rows = _sql(CliRunner(), quickstart_root, query)
    assert rows and all(r["configs"] == 1 and r["systems"] == 1 for r in rows)
    assert any(r["cohorts"] > 1 for r in rows), "a weekly row pools tasks, not only cohorts"


def test_old_weekly_example_on_the_recipe_fixture_matches_the_prose(recipe_root):
    rows = _sql(CliRunner(), recipe_root, OLD_WEEKLY)
    first = next(r for r in rows if r["week"].startswith("2026-11-02"))
    assert f"one row of {first['resolved']}/{first['valid']}" in RECIPES.read_text()


def test_readme_weekly_example_keeps_the_regrade_apart(quickstart_root):
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("### `registry sql") : readme.index("### `registry export")]
    query = section.split("```sql\n", 1)[1].split("```", 1)[0]
    rows = _sql(CliRunner(), quickstart_root, query)
    week = sorted(r["valid"] for r in rows if r["week"] == "2026-11-02")
    assert week == [10, 28]
    assert "docs/recipes.md" in section and "STATISTICS.md" not in readme
