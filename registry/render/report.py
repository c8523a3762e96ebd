"""Report renderers: plain-text table, Markdown and a self-contained HTML page with a plot.

Pure functions from a `TaskReport` to text; no querying, no I/O. Every rate is shown with
its counts and interval (`23/38 60.5% [44.7, 74.4]`); an undefined value is `n/a` with its
reason.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from registry.evidence.rule import CLASSES, INVALID, system_label
from registry.render.text import inert
from registry.storage.digest import short

if TYPE_CHECKING:
    from registry_schemas import CohortReport, Rate, SystemReport, TaskReport

FLAG_TEXT = {
    "small_sample": "small sample",
    "all_invalid": "all attempts infrastructure-invalid",
    "unobserved_provider": "provider unobserved (legacy evidence without terminal identity)",
}
INPUT_LABELS = (
    ("grader_version", "grader"),
    ("agent_system_digest", "agent system"),
    ("harness_package", "harness package"),
    ("environment_digest", "environment"),
)


def percent(value: float | None) -> str:
    """Return a rate as a percentage with one decimal, or `n/a`."""
    return "n/a" if value is None else f"{100 * value:.1f}%"


def rate_text(count: int, total: int, rate: Rate, reason: str | None = None) -> str:
    """Return `x/n p% [low, high]`, or `x/n n/a (reason)` when undefined."""
    if rate.estimate is None or rate.low is None or rate.high is None:
        return f"{count}/{total} n/a" + (f" ({reason})" if reason else "")
    return f"{count}/{total} {percent(rate.estimate)} [{100 * rate.low:.1f}, {100 * rate.high:.1f}]"


# Markdown syntax a value could use to become markup: HTML, links and images, code spans,
# table cells. Escaped with a backslash, or as an entity where Markdown has no escape.
_MARKDOWN = {
    "\\": "\\\\",
    "`": "\\`",
    "[": "\\[",
    "]": "\\]",
    "|": "\\|",
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
}


def inert_lines(lines: Sequence[str]) -> str:
    """Join rendered lines, each made inert, so no value can add a line or a control code."""
    return "\n".join(inert(line) for line in lines) + "\n"


def html_text(text: object) -> str:
    """Return text escaped for HTML, control characters written as escapes."""
    return html.escape(inert(text))


def cohort_label(cohort: CohortReport, inputs: int = len(INPUT_LABELS)) -> str:
    """Return a one-line description of a cohort and its first `inputs` distinguishing inputs."""
    parts = [f"cohort {short(cohort.cohort_key)}"]
    for key, label in INPUT_LABELS[:inputs]:
        value = cohort.inputs.get(key)
        text = short(value) if isinstance(value, str) and value.startswith("blake3:") else value
        parts.append(f"{label} {text}")
    return " · ".join(str(p) for p in parts)


def _runtime(system: SystemReport) -> str:
    r = system.runtime_seconds
    known, unavailable = getattr(r, "known", 0), getattr(r, "unavailable", 0)
    counts = f" ({known}/{known + unavailable} known)" if unavailable else ""
    if r.mean is None or r.median is None or r.p95 is None:
        return "n/a" + counts
    return f"{r.mean:.1f} / {r.median:.1f} / {r.p95:.1f}{counts}"


def _cost(system: SystemReport) -> str:
    c = system.cost_usd
    n = c.known + c.unavailable
    if c.total is None or c.mean is None:
        return f"n/a (0/{n} known)"
    return f"${c.total:.4f} total, ${c.mean:.4f} mean ({c.known}/{n} known)"


def _pass_k(values: dict[str, float | None]) -> str:
    shown = [f"{k}:{percent(v)}" for k, v in values.items() if k in {"1", "2", "3", "5", "10"}]
    return " ".join(shown)


def _notes(system: SystemReport) -> list[str]:
    notes = [FLAG_TEXT.get(f, f) for f in system.flags]
    if system.derived_from:
        notes.append(f"re-grades {len(system.derived_from)} attempts")
    return notes


def _provenance(system: SystemReport) -> str:
    parts = []
    for p in system.provenance:
        commits = ",".join(str(c.seq) for c in p.commits)
        retracted = getattr(p, "retracted", 0)
        parts.append(
            f"{p.experiment_id}: {p.attempts} attempts, {p.valid} valid, {p.resolved} resolved"
            + (f", {retracted} retracted" if retracted else "")
            + f" (commit {commits})"
        )
    return "; ".join(parts)


VALID = tuple(c for c in CLASSES if c not in INVALID)


def _classes(system: SystemReport) -> str:
    return ", ".join(f"{name} {n}" for name, n in system.classes.items() if n)


def _header(report: TaskReport) -> list[str]:
    snap = report.snapshot
    held = {k: n for k, n in (getattr(report, "held_out", None) or {}).items() if n}
    held_text = "; not counted: " + ", ".join(f"{k} {n}" for k, n in held.items()) if held else ""
    return [
        f"Task {report.task_id}",
        f"evidence {snap.evidence_digest} ({snap.attempts} attempts, newest commit "
        f"{snap.last_commit_seq}) · generator {report.generator.name} {report.generator.version}"
        + held_text,
    ]


def _system_label(s: SystemReport) -> str:
    """The one label of a system (`registry.system_label`): every identifying field shown."""
    return system_label(s.system.model_dump(), getattr(s, "run", None))


def render_table(report: TaskReport) -> str:
    """Return the report as plain text for a terminal."""
    lines = _header(report)
    for cohort in report.cohorts:
        lines += ["", cohort_label(cohort)]
        if cohort.regrades:
            lines.append("  re-grades cohort " + ", ".join(short(k) for k in cohort.regrades))
        for s in cohort.systems:
            reason = s.undefined.get("resolved_rate")
            lines += [
                f"  {_system_label(s)}",
                f"    resolved     {rate_text(s.resolved, s.valid, s.resolved_rate, reason)}",
                f"    invalid      {rate_text(s.invalid, s.attempts, s.invalid_rate)}",
                f"    classes      {_classes(s)}",
                f"    consistency  {percent(s.consistency)}"
                + (f" ({s.undefined['consistency']})" if "consistency" in s.undefined else ""),
                f"    pass@k       {_pass_k(s.pass_at_k)}",
                f"    pass^k       {_pass_k(s.pass_hat_k)}",
                f"    runtime s    mean / median / p95 {_runtime(s)}",
                f"    cost         {_cost(s)}",
                f"    provenance   {_provenance(s)}",
            ]
            if notes := _notes(s):
                lines.append(f"    ! {'; '.join(notes)}")
    return inert_lines(lines)


def md_escape(text: object) -> str:
    """Return text as inert Markdown: no HTML, link, code span or cell break survives.

    HTML and autolinks lose their angle brackets (`&lt;`), link and image syntax its square
    brackets (backslash-escaped); control characters (line breaks included) become escapes.
    """
    return inert("".join(_MARKDOWN.get(c, c) for c in str(text)))


def render_markdown(report: TaskReport) -> str:
    """Return the report as GitHub-flavoured Markdown."""
    head = _header(report)
    lines = [f"# {md_escape(head[0])}", "", md_escape(head[1])]
    columns = (
        "| system | resolved (valid) | invalid (all) | consistency | pass@1 "
        "| runtime s mean/median/p95 | cost | notes |"
    )
    for cohort in report.cohorts:
        lines += ["", f"## {md_escape(cohort_label(cohort))}", "", columns, "|" + "---|" * 8]
        for s in cohort.systems:
            reason = s.undefined.get("resolved_rate")
            cells = [
                _system_label(s),
                rate_text(s.resolved, s.valid, s.resolved_rate, reason),
                rate_text(s.invalid, s.attempts, s.invalid_rate),
                percent(s.consistency),
                percent(s.pass_at_k.get("1")),
                _runtime(s),
                _cost(s),
                "; ".join(_notes(s)),
            ]
            lines.append("| " + " | ".join(md_escape(c) for c in cells) + " |")
        lines += ["", "Outcome classes (valid | infrastructure-invalid):", ""]
        lines += ["| system | " + " | ".join(CLASSES) + " |", "|" + "---|" * (len(CLASSES) + 1)]
        for s in cohort.systems:
            counts = [str(s.classes.get(name, 0)) for name in CLASSES]
            lines.append(f"| {md_escape(_system_label(s))} | " + " | ".join(counts) + " |")
        lines += ["", "Provenance:", ""]
        lines += [
            f"- {md_escape(_system_label(s))}: {md_escape(_provenance(s))}" for s in cohort.systems
        ]
    return inert_lines(lines)


# --- HTML -----------------------------------------------------------------------------------

_ROW = 34
_LABEL_W = 420
_PLOT_W = 480
_TEXT_W = 300
_TOP = 30
_COLOR = "#1f5fbf"
_MUTED = "#8a8a8a"


def _svg_rows(report: TaskReport) -> tuple[list[str], int]:
    parts: list[str] = []
    y = _TOP
    for cohort in report.cohorts:
        title = cohort_label(cohort, inputs=2)
        if cohort.regrades:
            title += " · re-grades " + ", ".join(short(k) for k in cohort.regrades)
        parts.append(f'<text x="4" y="{y + 20}" class="cohort">{html_text(title)}</text>')
        y += _ROW
        for s in cohort.systems:
            parts += _svg_system(s, y)
            y += _ROW
    return parts, y + 10


def _svg_system(s: SystemReport, y: int) -> list[str]:
    mid = y + _ROW // 2
    color = _MUTED if "unobserved_provider" in s.flags else _COLOR
    full = _system_label(s)
    label = html_text(full)
    # Long labels are condensed to the label column; the full text is the hover title.
    fit = f' textLength="{_LABEL_W - 24}" lengthAdjust="spacingAndGlyphs"' if len(full) > 56 else ""
    reason = s.undefined.get("resolved_rate")
    text = html_text(rate_text(s.resolved, s.valid, s.resolved_rate, reason))
    out = [
        f'<text x="14" y="{mid + 5}" class="label"{fit}><title>{label}</title>{label}</text>',
        f'<text x="{_LABEL_W + _PLOT_W + 12}" y="{mid + 5}" class="value">{text}</text>',
    ]
    rate = s.resolved_rate
    if rate.estimate is None or rate.low is None or rate.high is None:
        return out
    x0, x1 = _x(rate.low), _x(rate.high)
    dash = ' stroke-dasharray="5 3"' if s.flags else ""
    out += [
        f'<line x1="{x0:.1f}" y1="{mid}" x2="{x1:.1f}" y2="{mid}" stroke="{color}" '
        f'stroke-width="4"{dash}/>',
        f'<line x1="{x0:.1f}" y1="{mid - 7}" x2="{x0:.1f}" y2="{mid + 7}" stroke="{color}" '
        'stroke-width="2"/>',
        f'<line x1="{x1:.1f}" y1="{mid - 7}" x2="{x1:.1f}" y2="{mid + 7}" stroke="{color}" '
        'stroke-width="2"/>',
        f'<circle cx="{_x(rate.estimate):.1f}" cy="{mid}" r="6" fill="{color}"/>',
    ]
    return out


def _x(rate: float) -> float:
    return _LABEL_W + rate * _PLOT_W


def _axis(height: int) -> Iterable[str]:
    for tick in (0, 25, 50, 75, 100):
        x = _x(tick / 100)
        yield (
            f'<line x1="{x:.1f}" y1="{_TOP - 6}" x2="{x:.1f}" y2="{height - 6}" class="grid"/>'
            f'<text x="{x:.1f}" y="{_TOP - 10}" class="tick">{tick}%</text>'
        )


def render_plot(report: TaskReport) -> str:
    """Return an SVG plot: each system's resolved rate and Wilson 95% interval by cohort."""
    rows, height = _svg_rows(report)
    width = _LABEL_W + _PLOT_W + _TEXT_W
    return (
        f'<svg id="interval-plot" xmlns="http://www.w3.org/2000/svg" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Resolved rate with Wilson 95% interval per system">'
        + "".join(_axis(height))
        + "".join(rows)
        + "</svg>"
    )


CSS = """
body { font-family: system-ui, sans-serif; margin: 24px; color: #1d1d1f; background: #fff;
  line-height: 1.4; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 24px 0 4px; }
h3 { font-size: 14px; margin: 16px 0 4px; }
h1, h2, h3, p, li, dd { overflow-wrap: anywhere; }
p.meta, .meta { color: #555; margin: 0 0 12px; font-size: 13px; }
nav { font-size: 13px; margin: 0 0 12px; }
a { color: #1f5fbf; }
svg { max-width: 100%; height: auto; display: block; margin: 8px 0; }
svg text { font-size: 13px; fill: #1d1d1f; } svg .cohort { font-weight: 600; }
svg .tick { font-size: 11px; text-anchor: middle; fill: #555; }
svg .grid { stroke: #e3e3e3; stroke-width: 1; }
.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0 24px; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 4px 10px; text-align: left; }
td { vertical-align: top; overflow-wrap: break-word; }
th { background: #f6f6f6; } td.notes { color: #a0522d; }
th.invalid { color: #a0522d; }
td.num, th.num { text-align: right; white-space: nowrap; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: 12px; background: #f6f6f6;
  padding: 8px; }
.verdict { font-weight: 600; } .warn { color: #a0522d; } .zero { color: #555; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px;
  font-size: 13px; }
dl.facts dt { color: #555; } dl.facts dd { margin: 0; }
@media (max-width: 640px) { body { margin: 10px; } table { font-size: 12px; }
  th, td { padding: 3px 6px; } }
@media print { body { margin: 0; } nav { display: none; } a { color: inherit; }
  .scroll { overflow: visible; } table, svg { break-inside: avoid; } }
"""
"""The one stylesheet of every page (inline in a standalone page, `style.css` in a site)."""
_CSS = CSS


def html_page(title: str, body: Sequence[str], stylesheet: str | None = None) -> str:
    """Return a self-contained HTML document (no scripts, no network).

    `title` is plain text (escaped here); `body` is already-escaped HTML. With `stylesheet`
    (a relative URL) the page links to it; without, the stylesheet is inline.
    """
    style = (
        f'<link rel="stylesheet" href="{html.escape(stylesheet)}">'
        if stylesheet is not None
        else f"<style>{CSS}</style>"
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html_text(title)}</title>{style}</head><body>"
        + "\n".join(body)
        + "</body></html>\n"
    )


def scroll(table: str) -> str:
    """Wrap a wide table so it scrolls inside the page instead of widening it."""
    return f'<div class="scroll">{table}</div>'


def report_body(report: TaskReport) -> list[str]:
    """Return the HTML body parts of a report: header, plot, then per cohort its tables."""
    head = _header(report)
    body = [
        f"<h1>{html_text(head[0])}</h1>",
        f'<p class="meta">{html_text(head[1])}</p>',
        '<p class="meta">Each point is a system\'s resolved rate over valid attempts; the bar '
        "is its Wilson 95% interval. Dashed bars are flagged (small sample, unobserved "
        "provider); infrastructure-invalid attempts are excluded from the rate and counted "
        "in the tables.</p>",
        render_plot(report),
    ]
    for cohort in report.cohorts:
        body.append(f"<h2>{html_text(cohort_label(cohort))}</h2>")
        body.append(scroll(_html_table(cohort)))
        body.append(scroll(_html_classes(cohort)))
        body.append(scroll(_html_pass_k(cohort)))
    return body


def render_html(report: TaskReport) -> str:
    """Return a self-contained HTML page (no scripts, no network) with plot and tables."""
    return html_page(f"Evidence report: {report.task_id}", report_body(report))


def _html_pass_k(cohort: CohortReport) -> str:
    """Return pass@k and pass^k for k = 1..10 of a cohort's systems (`n/a` where undefined)."""
    ks = range(1, 11)
    head = (
        "<tr><th>pass@k / pass^k (unbiased; n/a where k &gt; valid attempts)</th>"
        + "".join(f'<th class="num">k={k}</th>' for k in ks)
        + "</tr>"
    )
    rows = []
    for s in cohort.systems:
        for name, values, field in (
            ("pass@k", s.pass_at_k, "pass_at_k"),
            ("pass^k", s.pass_hat_k, "pass_hat_k"),
        ):
            reason = s.undefined.get(field)
            label = f"{_system_label(s)} · {name} (valid {s.valid})" + (
                f": n/a, {reason}" if reason else ""
            )
            cells = "".join(
                f'<td class="num">{html_text(percent(values.get(str(k))))}</td>' for k in ks
            )
            rows.append(f"<tr><td>{html_text(label)}</td>{cells}</tr>")
    return f'<table class="pass-k">{head}{"".join(rows)}</table>'


def _html_classes(cohort: CohortReport) -> str:
    """Return the typed outcome breakdown (all nine classes) of a cohort's systems."""
    head = "<tr><th>outcome classes</th>" + "".join(
        f'<th class="{"valid" if n in VALID else "invalid"}">{html_text(n)}</th>' for n in CLASSES
    )
    rows = [
        f"<tr><td>{html_text(_system_label(s))}</td>"
        + "".join(f"<td>{s.classes.get(n, 0)}</td>" for n in CLASSES)
        + "</tr>"
        for s in cohort.systems
    ]
    return f'<table class="classes">{head}</tr>{"".join(rows)}</table>'


def _html_table(cohort: CohortReport) -> str:
    head = (
        "<tr><th>system</th><th>resolved (valid)</th><th>invalid (all)</th><th>consistency</th>"
        "<th>runtime s mean / median / p95</th><th>cost</th><th>provenance</th>"
        "<th>notes</th></tr>"
    )
    rows = []
    for s in cohort.systems:
        cells = [
            _system_label(s),
            rate_text(s.resolved, s.valid, s.resolved_rate, s.undefined.get("resolved_rate")),
            rate_text(s.invalid, s.attempts, s.invalid_rate),
            percent(s.consistency),
            _runtime(s),
            _cost(s),
            _provenance(s),
        ]
        tds = "".join(f"<td>{html_text(c)}</td>" for c in cells)
        notes = html_text("; ".join(_notes(s)))
        rows.append(f'<tr>{tds}<td class="notes">{notes}</td></tr>')
    return f"<table>{head}{''.join(rows)}</table>"
