"""`registry site`: every page exists, shows the CLI's numbers, escapes values, rewrites nothing."""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from typer.testing import CliRunner

import registry
from registry.render.site import build_site, page_name
from registry.render.suite import render_comparison_html, render_comparison_markdown
from registry_cli.main import app
from tests.conftest import QUICKSTART, make_record, write_jsonl

BASELINE = "experiment=exp-baseline-1102,grader_version=grader-1.0"
CANDIDATE = "agent_version=2.4.0-context-policy"
CLASSES = (
    "resolved",
    "model_failure",
    "safety_failure",
    "timeout",
    "harness_failure",
    "environment_failure",
    "grader_failure",
    "invalid_case",
    "cancelled",
)


class _Tables(HTMLParser):
    """Collect every table of a page as rows of cell texts (headers included)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.links: list[str] = []
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs
        if tag == "table":
            self.tables.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "a":
            self.links += [v for k, v in attrs if k == "href" and v]

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self.tables:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def parse(path: Path) -> _Tables:
    parser = _Tables()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def cli(root: Path, *args: str) -> str:
    result = CliRunner().invoke(app, [*args, "--root", str(root)])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, registry.Store]:
    """The quickstart sample with one stored comparison, and its site."""
    base = tmp_path_factory.mktemp("site")
    root = base / "reg"
    registry.ingest(root, [str(QUICKSTART)])
    store = registry.open_store(root)
    comparison = registry.compare(
        store, registry.parse_selector(BASELINE), [registry.parse_selector(CANDIDATE)]
    )
    registry.record_comparison(store, comparison)
    registry.record_report(store, "astropy__astropy-12907")
    out = base / "site"
    build_site(store, out)
    return root, out, store


def task_page(out: Path, task: str) -> Path:
    return out / "tasks" / page_name(task, ["task", task])


def test_pages_exist_for_every_task_system_and_comparison(sample):
    root, out, store = sample
    tasks = {r[0] for r in registry.run_query(store, "SELECT DISTINCT task_id FROM attempts").rows}
    assert {p.name for p in (out / "tasks").iterdir()} == {page_name(t, ["task", t]) for t in tasks}
    summary = json.loads(cli(root, "summary", "--format", "json"))
    systems = {(tuple(s["system"].values()), s["run"]) for s in summary["systems"]}
    assert len(list((out / "systems").iterdir())) == len(systems) == 4
    assert len(list((out / "trends").iterdir())) == len(systems)
    (comparison,) = registry.list_layers(store, "comparison")
    page = out / "comparisons" / f"{comparison.digest.removeprefix('blake3:')}.html"
    assert page.is_file()
    index = parse(out / "index.html")
    for link in index.links:
        assert (out / link).is_file(), link
    for path in out.rglob("*.html"):
        for link in parse(path).links:
            assert (path.parent / link).resolve().is_file(), f"{path}: broken link {link}"
        text = path.read_text()
        assert "evidence blake3:" in text, f"{path} names no evidence"
        assert "<script" not in text and "http://" not in text.replace(
            'xmlns="http://www.w3.org/2000/svg"', ""
        )


def _system_rows(page: _Tables) -> list[tuple[str, str]]:
    rows = []
    for table in page.tables:
        if table and table[0][:2] == ["system", "resolved (valid)"]:
            rows += [(row[0], row[1].split()[0]) for row in table[1:]]
    return rows


def test_task_page_counts_equal_the_report_json(sample):
    root, out, _ = sample
    for task in ("astropy__astropy-12907", "flask__flask-4045"):
        report = json.loads(cli(root, "report", "--task", task, "--format", "json"))
        expected = [
            (
                registry.system_label(s["system"], s["run"]),
                f"{s['resolved']}/{s['valid']}",
            )
            for c in report["cohorts"]
            for s in c["systems"]
        ]
        page = task_page(out, task)
        assert _system_rows(parse(page)) == expected
        assert report["snapshot"]["evidence_digest"] in page.read_text()


def test_task_page_shows_every_class_even_at_zero_and_pass_k(sample):
    root, out, _ = sample
    task = "astropy__astropy-12907"
    report = json.loads(cli(root, "report", "--task", task, "--format", "json"))
    page = parse(task_page(out, task))
    classes = [t for t in page.tables if t[0][0] == "outcome classes"]
    assert len(classes) == len(report["cohorts"])
    for table, cohort in zip(classes, report["cohorts"], strict=True):
        assert table[0][1:] == list(CLASSES)
        for row, system in zip(table[1:], cohort["systems"], strict=True):
            assert row[1:] == [str(system["classes"][c]) for c in CLASSES]
    # A class nobody hit is still a column, with a 0 for every system.
    assert any(
        all(s["classes"][c] == 0 for co in report["cohorts"] for s in co["systems"])
        for c in CLASSES
    )
    passk = [t for t in page.tables if t[0][0].startswith("pass@k / pass^k")]
    assert len(passk) == len(report["cohorts"])
    for table, cohort in zip(passk, report["cohorts"], strict=True):
        rows = iter(table[1:])
        for system in cohort["systems"]:
            for field in ("pass_at_k", "pass_hat_k"):
                row = next(rows)
                for k in range(1, 11):
                    value = system[field].get(str(k))
                    shown = "n/a" if value is None else f"{100 * value:.1f}%"
                    assert row[k] == shown, (field, k, row)


def test_system_page_equals_summary_and_noise_json(sample):
    root, out, _ = sample
    summary = json.loads(cli(root, "summary", "--format", "json"))
    for path in (out / "systems").iterdir():
        text = path.read_text()
        selectors = re.findall(r'<p class="meta">selector: ([^<]*)</p>', text)
        assert selectors
        for selector in map(html.unescape, selectors):
            floor = CliRunner().invoke(
                app, ["noise", "--root", str(root), "--system", selector, "--format", "json"]
            )
            if floor.exit_code == 0:
                noise = json.loads(floor.stdout)
                if noise["expected_flips"] is None:
                    reason = noise["undefined"]["expected_flips"]
                    assert html.escape(reason) in text
                else:
                    assert f"{noise['expected_flips']:.3f} tasks" in text
        facts = [t for t in parse(path).tables if t and t[0] == ["figure", "value"]]
        shown = {
            dict((r[0], r[1]) for r in t[1:])["configuration"].split()[0]: dict(
                (r[0], r[1]) for r in t[1:]
            )
            for t in facts
            if "resolved (pooled, attempt-weighted)" in dict((r[0], r[1]) for r in t[1:])
        }
        assert shown
        for digest, figures in shown.items():
            (unit,) = [
                s
                for s in summary["systems"]
                if s["configuration_digest"] == digest
                and registry.system_label(s["system"], s["run"]) in text
                and figures["resolved (pooled, attempt-weighted)"].startswith(
                    f"{s['resolved']}/{s['valid']} "
                )
            ]
            assert figures["tasks"].startswith(f"{unit['tasks']} ")


def test_noise_floor_is_null_with_the_reason_below_three_attempts(sample):
    _, out, _ = sample
    label = "coder 2.3.0 unobserved/claude-sonnet-4 harness harness-0.9.4"
    (path,) = [p for p in (out / "systems").iterdir() if f"<h1>{label}</h1>" in p.read_text()]
    text = path.read_text()
    assert "fewer than 3 cannot measure the noise floor" in text
    assert "0.000 tasks" not in text


def test_comparison_page_counts_zero_rows_and_dropped(sample):
    root, out, store = sample
    (version,) = registry.list_layers(store, "comparison")
    stored = json.loads(cli(root, "reports", "show", version.digest, "--format", "json"))
    page_path = out / "comparisons" / f"{version.digest.removeprefix('blake3:')}.html"
    page = parse(page_path)
    (paired,) = [t for t in page.tables if t[0][0] == "task"]
    (c,) = stored["comparisons"]
    expected = [
        [
            t["task_id"],
            f"{t['baseline']['resolved']}/{t['baseline']['valid']} "
            f"({100 * t['rate_baseline']:.1f}%)",
            f"{t['candidate']['resolved']}/{t['candidate']['valid']} "
            f"({100 * t['rate_candidate']:.1f}%)",
            f"{100 * t['difference']:+.1f}",
        ]
        for t in c["tasks"]
    ]
    assert paired[1:] == expected
    # 0/5 vs 0/5 and 5/5 vs 5/5 both moved by zero, and read differently.
    rows = {r[0]: r for r in paired[1:]}
    assert rows["pytest__pytest-5227"][1:] == ["0/5 (0.0%)", "0/5 (0.0%)", "+0.0"]
    assert rows["astropy__astropy-12907"][1:] == ["5/5 (100.0%)", "5/5 (100.0%)", "+0.0"]
    text = page_path.read_text()
    assert text.count('class="zero-mark"') == sum(t["difference"] == 0 for t in c["tasks"])
    assert "0/5 (0.0%) → 0/5 (0.0%)" in text and "5/5 (100.0%) → 5/5 (100.0%)" in text
    assert "Dropped tasks (0)" in text
    assert f"look {c['look']}" in text


def test_comparison_shows_dropped_tasks_with_reasons(tmp_path):
    records = []
    for task, base, cand in (
        ("t-zero", ["model_failure"] * 3, ["model_failure"] * 3),
        ("t-full", ["resolved"] * 3, ["resolved"] * 3),
        ("t-mixed", ["resolved", "model_failure", "resolved"], ["resolved"] * 3),
        ("t-broken", ["resolved"] * 3, ["harness_failure"] * 3),
    ):
        for arm, outcomes in (("base", base), ("cand", cand)):
            for k, outcome in enumerate(outcomes):
                inputs = dict(make_record()["inputs"])
                inputs["agent_system_digest"] = "blake3:" + ("a" if arm == "base" else "b") * 64
                records.append(
                    make_record(
                        experiment_id=arm,
                        task_id=task,
                        repeat_index=k,
                        terminal_class=outcome,
                        inputs=inputs,
                    )
                )
    root = tmp_path / "reg"
    registry.ingest(root, [str(write_jsonl(tmp_path / "a.jsonl", records))])
    store = registry.open_store(root)
    comparison = registry.compare(
        store,
        registry.parse_selector("experiment=base"),
        [registry.parse_selector("experiment=cand")],
    )
    registry.record_comparison(store, comparison)
    (c,) = comparison.comparisons
    assert [d.task_id for d in c.dropped] == ["t-broken"]
    out = tmp_path / "site"
    build_site(store, out, simulations=1000)
    (page,) = (out / "comparisons").iterdir()
    tables = parse(page).tables
    (dropped,) = [t for t in tables if t[0] == ["task", "reason", "differing inputs"]]
    assert dropped[1][:2] == ["t-broken", c.dropped[0].reason]
    assert "no valid attempts" in c.dropped[0].reason
    for text in (render_comparison_html(comparison), render_comparison_markdown(comparison)):
        assert "t-broken" in text and html.escape(c.dropped[0].reason) in html.escape(text)
        assert "0/3 (0.0%)" in text and "3/3 (100.0%)" in text


def test_regenerating_on_unchanged_evidence_rewrites_nothing(sample, tmp_path):
    _, _, store = sample
    out = tmp_path / "site"
    first = build_site(store, out, simulations=1000)
    assert first.written == first.files > 0
    before = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in out.rglob("*") if p.is_file()}
    again = build_site(store, out, simulations=1000)
    assert (again.written, again.unchanged, again.removed) == (0, first.files, 0)
    after = {p: (p.stat().st_mtime_ns, p.stat().st_ino) for p in out.rglob("*") if p.is_file()}
    assert after == before
    # A stale page of an earlier site is removed; a file of the user's is left alone.
    (out / "tasks" / "gone-0000000000000000.html").write_text("old")
    (out / "notes.txt").write_text("mine")
    third = build_site(store, out, simulations=1000)
    assert (third.written, third.removed) == (0, 1)
    assert (out / "notes.txt").read_text() == "mine"


def test_as_of_shows_the_registry_at_that_commit(sample, tmp_path):
    root, _, store = sample
    out = tmp_path / "site"
    result = CliRunner().invoke(
        app, ["site", "--root", str(root), "--output", str(out), "--as-of", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "at ledger commit 1" in result.stdout
    assert not (out / "comparisons").exists() or not list((out / "comparisons").iterdir())
    assert "ledger head commit 1" in (out / "index.html").read_text()


def test_output_inside_the_registry_or_a_file_is_refused(sample, tmp_path):
    root, _, _ = sample
    for target in (root / "site", root / "REGISTRY"):
        result = CliRunner().invoke(app, ["site", "--root", str(root), "--output", str(target)])
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1


def test_hostile_values_are_escaped_and_file_names_safe(tmp_path):
    hostile = [
        '<script>alert(1)</script>"',
        "../../etc/passwd",
        "a/b\\c'd%2e%2e",
        "ÄÖ <img src=x onerror=alert(1)>",
    ]
    records = []
    for i, task in enumerate(hostile):
        for k in range(3):
            records.append(
                make_record(
                    task_id=task,
                    repeat_index=k,
                    experiment_id=f"exp<b>{i}</b>",
                    terminal_class="resolved" if k else "model_failure",
                    envelope={
                        "agent": "<script>x</script>\x1b[31m",
                        "agent_version": '1"><svg onload=alert(1)>',
                        "provider": "p",
                        "model": "m",
                        "harness_version": "h\u202e",
                    },
                )
            )
    root = tmp_path / "reg"
    registry.ingest(root, [str(write_jsonl(tmp_path / "h.jsonl", records))])
    out = tmp_path / "site"
    build_site(registry.open_store(root), out, simulations=1000)
    names = [p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()]
    assert len([n for n in names if n.startswith("tasks/")]) == len(hostile)
    for name in names:
        assert re.fullmatch(r"[A-Za-z0-9._/-]+", name) and ".." not in name.split("/"), name
        assert not name.split("/")[-1].startswith(".")
    for path in out.rglob("*.html"):
        text = path.read_text()
        page = parse(path)
        assert {"script", "img"}.isdisjoint(page.tags), path
        assert not [a for a, _ in page.attrs if a.startswith("on")], path
        assert "\x1b" not in text and "\u202e" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;&quot;" in (out / "index.html").read_text()
