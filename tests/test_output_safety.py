"""Hostile evidence comes out inert in every format: terminal tables, Markdown, CSV, JSON, HTML.

Values with ESC and OSC sequences, bare carriage returns, HTML and `javascript:` links are put
in experiment ids, task ids, envelope fields, cohort inputs and labels, then read back through
`sql`, `report`, `compare`, `summary` and `reports show`.
"""

from __future__ import annotations

import csv
import html.parser
import io
import json
import re

import pytest
from markdown_it import MarkdownIt

from tests.conftest import INPUTS, make_record, write_jsonl

ESC = "\x1b[31mred\x1b[0m"
OSC = "\x1b]8;;http://x\x07link\x1b]8;;\x07"
CR = "over\rwritten"
SCRIPT = "<script>alert(1)</script>"
LINK = "[x](javascript:alert(1))"
IMG = "<img src=x onerror=alert(1)>"
CONTROL = (ESC, OSC, CR)
MARKUP = (SCRIPT, LINK, IMG)
TASK = f"task {SCRIPT} {LINK} {IMG} | cell"  # task ids refuse control characters
EXPERIMENTS = {"base": f"base {ESC} {OSC} {CR} {SCRIPT}", "cand": f"cand {LINK} {IMG} {CR}"}
TASKS = [TASK, "plain-task", f"t2 {LINK}"]


def _envelope(arm: str) -> dict[str, str]:
    return {
        "agent": f"agent {ESC} {SCRIPT}",
        "agent_version": f"1.0 {OSC} {CR}",
        "provider": f"prov {LINK}",
        "model": f"m-{arm}",
        "harness_version": f"h {IMG} {CR}",
    }


def _records() -> list[dict]:
    records = []
    for arm, system in (("base", "a"), ("cand", "b")):
        inputs = {
            **INPUTS,
            "agent_system_digest": "blake3:" + system * 64,
            "grader_version": f"grader {CR} {SCRIPT}",
            "harness_package": f"pkg {ESC} {LINK}",
        }
        for t, task in enumerate(TASKS):
            for k in range(3):
                records.append(
                    make_record(
                        experiment_id=EXPERIMENTS[arm],
                        task_id=task,
                        repeat_index=k,
                        inputs=inputs,
                        terminal_class="resolved" if (k + t) % 2 else "model_failure",
                        envelope=_envelope(arm),
                        labels={f"note {CR}": f"{ESC} {OSC} {SCRIPT} {LINK} {IMG}"},
                    )
                )
    return records


@pytest.fixture
def hostile(invoke, tmp_path):
    path = write_jsonl(tmp_path / "hostile.jsonl", _records())
    result = invoke("ingest", str(path))
    assert result.exit_code == 0, result.output
    return invoke


def _ok(result):
    assert result.exit_code == 0, result.output
    return result.stdout


def assert_terminal_inert(text: str) -> None:
    """No raw control character but the line feeds the renderer itself writes."""
    raw = re.findall("[\x00-\x09\x0b-\x1f\x7f-\x9f]", text)
    assert raw == [], f"raw control characters {raw!r} reach the terminal"


def assert_markdown_inert(text: str) -> None:
    """No HTML, no link, and every row of every table has as many cells as its header."""
    assert_terminal_inert(text)
    rendered = MarkdownIt("commonmark").enable("table").render(text)
    assert "<script" not in rendered and "<img" not in rendered, rendered
    assert "javascript:" not in " ".join(re.findall(r'href="[^"]*"', rendered))
    assert "<a " not in rendered  # no value became a link
    header_cells = None
    for line in text.splitlines():
        if not line.startswith("|"):
            header_cells = None
            continue
        cells = len(re.split(r"(?<!\\)\|", line)) - 2
        header_cells = header_cells or cells
        assert cells == header_cells, line
    separators = [line for line in text.splitlines() if line.startswith("|---")]
    assert rendered.count("<table>") == len(separators)


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs


def assert_html_inert(text: str) -> None:
    parser = _Tags()
    parser.feed(text)
    assert "script" not in parser.tags and "img" not in parser.tags
    assert not [a for a in parser.attrs if a[0].startswith("on")]
    assert not [v for _, v in parser.attrs if v and "javascript:" in v]
    assert "\x1b" not in text and "\r" not in text


SQL = "SELECT experiment_id, task_id, envelope, labels, inputs FROM attempts ORDER BY attempt_id"


def test_sql_table_is_inert(hostile):
    text = _ok(hostile("sql", SQL))
    assert_terminal_inert(text)
    assert "\\x1b[31m" in text and "\\r" in text  # shown, escaped, not dropped
    assert len([line for line in text.splitlines() if "base " in line or "cand " in line]) == 18


def test_sql_csv_quotes_every_line_break_and_parses_back(hostile):
    text = _ok(hostile("sql", SQL, "--format", "csv"))
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == 1 + 18
    assert all(len(row) == 5 for row in rows)
    assert {row[0] for row in rows[1:]} == set(EXPERIMENTS.values())  # CR, ESC kept as data
    assert {row[1] for row in rows[1:]} == set(TASKS)


def test_sql_json_round_trips(hostile):
    text = _ok(hostile("sql", SQL, "--format", "json"))
    assert_terminal_inert(text)
    rows = json.loads(text)
    assert len(rows) == 18
    assert {r["experiment_id"] for r in rows} == set(EXPERIMENTS.values())
    assert {r["task_id"] for r in rows} == set(TASKS)


def test_report_table_is_inert(hostile):
    text = _ok(hostile("report", "--task", TASK))
    assert_terminal_inert(text)
    assert "\\x1b[31m" in text and "\\x1b]8;;http://x\\x07" in text


def test_report_markdown_is_inert(hostile):
    text = _ok(hostile("report", "--task", TASK, "--format", "markdown"))
    assert_markdown_inert(text)
    assert "&lt;script&gt;" in text and "\\[x\\](javascript:alert(1))" in text


def test_report_json_round_trips(hostile):
    text = _ok(hostile("report", "--task", TASK, "--format", "json"))
    assert_terminal_inert(text)
    report = json.loads(text)
    assert report["task_id"] == TASK
    agents = {s["system"]["agent"] for c in report["cohorts"] for s in c["systems"]}
    assert agents == {_envelope("base")["agent"]}


def test_report_html_is_escaped(hostile):
    text = _ok(hostile("report", "--task", TASK, "--format", "html"))
    assert_html_inert(text)
    assert "&lt;script&gt;" in text


COMPARE = ("compare", "--baseline", "model=m-base", "--candidate", "model=m-cand")


def test_compare_table_is_inert(hostile):
    text = _ok(hostile(*COMPARE))
    assert_terminal_inert(text)
    assert "\\r" in text


def test_compare_markdown_is_inert(hostile):
    result = hostile(*COMPARE, "--format", "markdown")
    text = _ok(result)
    assert_markdown_inert(text)
    assert "layer blake3:" in result.stderr and "layer blake3:" not in text


def test_compare_json_and_html(hostile):
    data = json.loads(_ok(hostile(*COMPARE, "--format", "json")))
    experiments = data["comparisons"][0]["baseline"]["experiments"]
    assert experiments == [EXPERIMENTS["base"]]
    assert_html_inert(_ok(hostile(*COMPARE, "--format", "html")))


def test_summary_table_is_inert_and_readable(hostile):
    text = _ok(hostile("summary"))
    assert_terminal_inert(text)
    header = text.splitlines()[0]
    assert "{" not in header and "'tasks'" not in header, header
    assert header.startswith("Suite summary of all tasks")


def test_stored_layer_shown_again_is_inert(hostile):
    stored = hostile("report", "--task", TASK)
    digest = re.search(r"layer (blake3:[0-9a-f]{64})", stored.stderr).group(1)
    for fmt, check in (("table", assert_terminal_inert), ("markdown", assert_markdown_inert)):
        check(_ok(hostile("reports", "show", digest, "--format", fmt)))
    assert_html_inert(_ok(hostile("reports", "show", digest, "--format", "html")))
    assert_terminal_inert(_ok(hostile("reports")))


def test_error_echoing_a_hostile_value_is_one_line(hostile):
    result = hostile("report", "--task", f"missing {ESC} {CR}\nsecond line")
    assert result.exit_code == 1
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert_terminal_inert(result.stderr)


def test_csv_quotes_a_bare_carriage_return():
    from registry_cli.output import to_csv

    rows = [["x\ry", "plain"], ["a\nb", "c,d"], ["", '"q"']]
    text = to_csv(["one", "two"], rows)
    assert '"x\ry","plain"' in text  # the csv module alone leaves a bare CR unquoted
    assert list(csv.reader(io.StringIO(text, newline=""))) == [["one", "two"], *rows]
    shown = to_csv(["one", "two"], rows, for_terminal=True)
    assert "\r" not in shown and shown.count("\n") == 4
    assert_terminal_inert(shown)
