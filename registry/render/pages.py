"""The pages of `registry site`: pure functions from `SiteData` to bytes, no I/O.

Every value is escaped (`html_text`), every link is site-relative, and nothing depends on the
clock: the only times shown are those of the evidence (the ledger head's commit time).
"""

from __future__ import annotations

import html
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, timedelta
from typing import Any

from registry.analysis import stats
from registry.evidence.rule import INVALID, snapshot_of
from registry.render.report import CSS, html_page, html_text, percent, report_body, scroll
from registry.render.site import SiteData, SystemEntry, Unit, report_layer
from registry.render.suite import comparison_body, noise_rows, summary_rows
from registry.storage.digest import hex_of, short
from registry.storage.layers import LayerVersion
from registry_schemas import Comparison

STYLESHEET = "style.css"
_SERIES = ("#1f5fbf", "#c26a00", "#2e7d32", "#8e24aa", "#c62828", "#00838f")


def render_site(data: SiteData) -> dict[str, bytes]:
    """Return every file of the site: site-relative path -> bytes."""
    data.files[STYLESHEET] = CSS.lstrip().encode()
    for task, report in data.reports.items():
        data.files[f"tasks/{data.task_names[task]}"] = _page(
            data, f"Task {task}", _task_body(data, task, report), depth=1
        )
    for system in data.systems:
        data.files[f"systems/{system.name}"] = _page(
            data, system.label, _system_body(data, system), depth=1
        )
        data.files[f"trends/{system.name}"] = _page(
            data, f"Trend of {system.label}", _trend_body(data, system), depth=1
        )
    for version, comparison in data.comparisons:
        data.files[f"comparisons/{hex_of(version.digest)}.html"] = _page(
            data,
            f"Comparison against {comparison.baseline}",
            _comparison_page(data, version, comparison),
            depth=1,
        )
    data.files["index.html"] = _page(data, "Registry", _index_body(data), depth=0)
    return data.files


# --- shared pieces ----------------------------------------------------------------------------


def _page(data: SiteData, title: str, body: list[str], depth: int) -> bytes:
    up = "../" * depth
    at = f" · as of {data.as_of}" if data.as_of is not None else ""
    nav = (
        f'<nav><a href="{up}index.html">registry</a> · ledger head commit {data.head_seq}'
        f"{html_text(at)}</nav>"
    )
    return html_page(title, [nav, *body], stylesheet=f"{up}{STYLESHEET}").encode()


def _link(href: str, text: str) -> str:
    return f'<a href="{html.escape(href)}">{html_text(text)}</a>'


def _evidence_line(snapshot: dict[str, Any] | None) -> str:
    if not snapshot:
        return '<p class="meta">evidence: none</p>'
    return (
        f'<p class="meta">evidence {html_text(snapshot["evidence_digest"])} '
        f"({snapshot['attempts']} attempts, newest commit {snapshot['last_commit_seq']})</p>"
    )


def _layer_line(data: SiteData, digest: str, path: str, command: str, up: str = "../") -> str:
    stored = data.stored.get(digest)
    where = (
        f"stored at commit {stored.commit_seq}"
        if stored
        else f"not stored in the registry; {command} stores it"
    )
    return (
        f'<p class="meta">layer {_link(up + path, digest)} ({html_text(where)}; '
        f"registry reports show {html_text(short(digest))})</p>"
    )


def _table(head: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> str:
    """Return a table; cells are already-escaped HTML; `numeric` columns align right."""

    def cell(tag: str, i: int, value: str) -> str:
        return f'<{tag} class="num">{value}</{tag}>' if i in numeric else f"<{tag}>{value}</{tag}>"

    header = "<tr>" + "".join(cell("th", i, html_text(h)) for i, h in enumerate(head)) + "</tr>"
    body = "".join(
        "<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows
    )
    return scroll(f"<table>{header}{body}</table>")


def _counts(resolved: int, valid: int) -> str:
    return f"{resolved}/{valid}"


def _clustered(s: Any) -> str:
    c = s.clustered_interval
    return f"{percent(s.pooled_resolved_rate.estimate)} [{percent(c.low)}, {percent(c.high)}]"


def _configuration(unit: Unit) -> str:
    s = unit.summary
    return f"{short(s.configuration_digest)} ({s.configuration.get('grader_version')})"


def _wilson(resolved: int, valid: int) -> str:
    interval = stats.wilson_interval(resolved, valid) if valid else None
    if interval is None:
        return "n/a (0 valid attempts)"
    return f"{percent(interval.estimate)} [{100 * interval.low:.1f}, {100 * interval.high:.1f}]"


# --- index ------------------------------------------------------------------------------------


def _index_body(data: SiteData) -> list[str]:
    rows = data.evidence.rows
    head = f"{data.head_seq}:{data.head_digest or 'none'}"
    facts = [
        ("ledger head", head + (f" ({data.head_time})" if data.head_time else "")),
        ("attempts counted", str(len(rows))),
        (
            "held out",
            f"{len(data.evidence.retracted)} retracted, {len(data.evidence.conflicting)} in a "
            "slot conflict",
        ),
        ("tasks", str(len(data.reports))),
        ("observed systems", str(len(data.systems))),
        ("suite units (system × configuration)", str(sum(len(s.units) for s in data.systems))),
        ("cohorts", str(len({r["cohort_key"] for r in rows}))),
        ("experiments", str(len({r["experiment_id"] for r in rows}))),
        ("plans", str(len(data.plans))),
        ("stored layers", str(len(data.layers))),
    ]
    body = [
        "<h1>Registry</h1>",
        _evidence_line(data.snapshot),
        _table(["", ""], [(html_text(k), html_text(v)) for k, v in facts]),
        "<h2>Systems</h2>",
        '<p class="meta">One row per observed system and suite configuration (attempts pool '
        "only within one); the interval is the clustered 95% interval of the pooled rate.</p>",
    ]
    unit_rows = []
    for system in data.systems:
        for unit in system.units:
            s = unit.summary
            unit_rows.append(
                (
                    _link(f"systems/{system.name}", system.label),
                    html_text(
                        f"{short(s.configuration_digest)} ({s.configuration.get('grader_version')})"
                    ),
                    str(s.tasks),
                    _counts(s.resolved, s.valid),
                    html_text(_clustered(s)),
                    _link(f"trends/{system.name}", "trend"),
                )
            )
    body.append(
        _table(
            [
                "system",
                "configuration (grader)",
                "tasks",
                "resolved/valid",
                "rate, clustered 95%",
                "",
            ],
            unit_rows,
            numeric=(2, 3),
        )
    )
    body += ["<h2>Comparisons</h2>", _comparison_list(data)]
    body += ["<h2>Regressions</h2>", *_regressions(data)]
    body += ["<h2>Tasks</h2>", _task_list(data)]
    body += ["<h2>Newest layers</h2>", _newest_layers(data)]
    if data.plans:
        body += ["<h2>Plans</h2>", _plans(data)]
    return body


def _comparison_list(data: SiteData) -> str:
    if not data.comparisons:
        return '<p class="meta">No stored comparison (registry compare stores one).</p>'
    rows = []
    for version, comparison in reversed(data.comparisons):
        for c in comparison.comparisons:
            rows.append(
                (
                    _link(f"comparisons/{hex_of(version.digest)}.html", short(version.digest)),
                    str(version.commit_seq),
                    html_text(comparison.baseline),
                    html_text(c.candidate.selector),
                    html_text(c.verdict.text),
                )
            )
    return _table(["comparison", "commit", "baseline", "candidate", "verdict"], rows, (1,))


def _regressions(data: SiteData) -> list[str]:
    report = data.regressions
    if report is None:
        return ['<p class="meta">No evidence.</p>']
    n = report.counts
    out = [
        f'<p class="meta">{html_text(report.adjustment)}: {n.down} down, {n.up} up, '
        f"{n.steady} steady, {n.not_examined} not examined (registry regressions).</p>"
    ]
    moved = [e for e in report.examined if e.direction != "steady"]
    moved.sort(key=lambda e: (e.direction != "down", e.p_holm, e.task_id, e.track))
    if not moved:
        return out
    rows = [
        (
            html_text(e.direction),
            _link(f"tasks/{data.task_names[e.task_id]}", e.task_id)
            if e.task_id in data.task_names
            else html_text(e.task_id),
            _counts(e.before.resolved, e.before.valid)
            + " → "
            + _counts(e.after.resolved, e.after.valid),
            html_text(f"{e.p_holm:.3g}"),
            html_text(e.track),
        )
        for e in moved[:20]
    ]
    return [*out, _table(["direction", "task", "resolved", "Holm p", "track"], rows)]


def _task_list(data: SiteData) -> str:
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in data.evidence.rows:
        by_task[row["task_id"]].append(row)
    rows = []
    for task, report in data.reports.items():
        members = by_task[task]
        valid = sum(r["terminal_class"] not in INVALID for r in members)
        samples = sum(len(c.systems) for c in report.cohorts)
        rows.append(
            (
                _link(f"tasks/{data.task_names[task]}", task),
                str(len(members)),
                str(valid),
                str(len(report.cohorts)),
                str(samples),
                str(report.snapshot.last_commit_seq),
            )
        )
    head = ["task", "attempts", "valid", "cohorts", "samples", "newest commit"]
    return _table(head, rows, numeric=(1, 2, 3, 4, 5))


def _layer_href(version: LayerVersion) -> str:
    return f"layers/{version.kind}/{hex_of(version.digest)}.json"


def _newest_layers(data: SiteData) -> str:
    if not data.layers:
        return '<p class="meta">No stored layer.</p>'
    rows = [
        (
            _link(_layer_href(v), short(v.digest)),
            html_text(v.kind),
            html_text(v.subject),
            str(v.commit_seq),
            html_text(v.created_at),
        )
        for v in sorted(data.layers, key=lambda v: -v.commit_seq)[:10]
    ]
    return _table(["layer", "kind", "subject", "commit", "created"], rows, (3,))


def _plans(data: SiteData) -> str:
    rows = [
        (
            html_text(short(p.plan_id)),
            html_text(getattr(p.plan, "name", None) or ""),
            str(len(p.plan.tasks)),
            str(p.commit_seq),
        )
        for p in data.plans
    ]
    return _table(["plan", "name", "tasks", "commit"], rows, (2, 3))


# --- task -------------------------------------------------------------------------------------


def _task_body(data: SiteData, task: str, report: Any) -> list[str]:
    digest, path = report_layer(data, report)
    body = report_body(report)
    body.insert(2, _layer_line(data, digest, path, f"registry report --task {task!r}"))
    links = [
        _link(f"../systems/{system.name}", system.label)
        for system in data.systems
        if task in system.tasks
    ]
    if links:
        body.insert(3, '<p class="meta">systems: ' + " · ".join(links) + "</p>")
    history = [v for v in data.layers if v.kind == "report" and v.subject == task]
    body.append("<h2>Report history</h2>")
    if not history:
        body.append('<p class="meta">No stored report of this task.</p>')
        return body
    rows = []
    for v in reversed(history):
        rows.append(
            (
                _link(f"../{_layer_href(v)}", v.digest),
                str(v.commit_seq),
                html_text(v.created_at),
                "this page" if v.digest == digest else "",
            )
        )
    body.append(_table(["stored version", "commit", "created", ""], rows, (1,)))
    return body


# --- system -----------------------------------------------------------------------------------


def _instability(unit: Unit) -> list[tuple[str, int, int]]:
    counts: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in unit.rows:
        if row["terminal_class"] not in INVALID:
            counts[row["task_id"]][1] += 1
            counts[row["task_id"]][0] += row["terminal_class"] == "resolved"
        else:
            counts[row["task_id"]]
    out = [(task, c, n) for task, (c, n) in counts.items()]

    def key(item: tuple[str, int, int]) -> tuple[float, str]:
        _, c, n = item
        return (-(2 * (c / n) * (1 - c / n)) if n else 1.0, item[0])

    return sorted(out, key=key)


def _system_body(data: SiteData, system: SystemEntry) -> list[str]:
    body = [
        f"<h1>{html_text(system.label)}</h1>",
        f'<p class="meta">{_link(f"../trends/{system.name}", "trend per generation and week")}</p>',
    ]
    if data.summary is not None:
        digest, path = data.layer_file(
            "summary", data.summary.model_dump(mode="json", by_alias=True)
        )
        body.append(_evidence_line(data.summary.snapshot))
        body.append(_layer_line(data, digest, path, "registry summary", up="../"))
    for unit in system.units:
        s = unit.summary
        body.append(
            f"<h2>Configuration {html_text(short(s.configuration_digest))} "
            f"(grader {html_text(s.configuration.get('grader_version'))})</h2>"
        )
        body.append(f'<p class="meta">selector: {html_text(unit.selector)}</p>')
        body.append(
            _table(["figure", "value"], [(html_text(k), html_text(v)) for k, v in summary_rows(s)])
        )
        body.append("<h3>Noise floor</h3>")
        if unit.noise is None:
            body.append(f'<p class="warn">n/a: {html_text(unit.noise_reason)}</p>')
        else:
            document = unit.noise.model_dump(mode="json", by_alias=True)
            digest, path = data.layer_file("noise", document)
            body.append(_evidence_line(unit.noise.snapshot))
            body.append(
                _layer_line(data, digest, path, f"registry noise --system {unit.selector!r}")
            )
            body.append(
                _table(
                    ["figure", "value"],
                    [(html_text(k), html_text(v)) for k, v in noise_rows(unit.noise)],
                )
            )
        body.append("<h3>Tasks by instability</h3>")
        body.append(
            '<p class="meta">Mixed tasks first (largest 2p(1−p), p = resolved / valid): they '
            "flip between repeats and decide comparisons; tasks at 0/K or K/K sit at the end.</p>"
        )
        rows = [
            (
                _link(f"../tasks/{data.task_names[task]}", task)
                if task in data.task_names
                else html_text(task),
                _counts(c, n),
                html_text(_wilson(c, n)),
                html_text(f"{2 * (c / n) * (1 - c / n):.3f}" if n else "n/a (0 valid attempts)"),
            )
            for task, c, n in _instability(unit)
        ]
        body.append(_table(["task", "resolved/valid", "rate, Wilson 95%", "2p(1−p)"], rows, (1,)))
    return body


# --- trend ------------------------------------------------------------------------------------


def _points(rows: list[dict[str, Any]], bucket: Any) -> list[tuple[str, int, int, int]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[bucket(row)].append(row)
    out = []
    for label in sorted(groups, key=lambda b: (len(b), b)):
        members = groups[label]
        valid = [r for r in members if r["terminal_class"] not in INVALID]
        resolved = sum(r["terminal_class"] == "resolved" for r in valid)
        out.append((label, resolved, len(valid), len({r["task_id"] for r in members})))
    return out


def _week(row: dict[str, Any]) -> str:
    day = row["started_at"].astimezone(UTC).date()
    return (day - timedelta(days=day.weekday())).isoformat()


def _trend_body(data: SiteData, system: SystemEntry) -> list[str]:
    body = [
        f"<h1>Trend of {html_text(system.label)}</h1>",
        f'<p class="meta">{_link(f"../systems/{system.name}", "system page")} · resolved / valid '
        "per configuration, with the Wilson 95% interval of the pooled attempts (it ignores "
        "that attempts cluster by task: quote the clustered interval of the system page). "
        "Generation = the ledger commit that first made an attempt visible.</p>",
        _evidence_line(snapshot_of([r for u in system.units for r in u.rows])),
    ]
    if data.summary is not None:
        digest, path = data.layer_file(
            "summary", data.summary.model_dump(mode="json", by_alias=True)
        )
        body.append(_layer_line(data, digest, path, "registry summary"))
    for title, bucket in (
        ("generation", lambda r: str(r["generation"])),
        ("week (Monday, UTC)", _week),
    ):
        series = [(u, _points(u.rows, bucket)) for u in system.units]
        body.append(f"<h2>Per {title}</h2>")
        body.append(_trend_svg(title, series))
        rows = []
        for i, (unit, points) in enumerate(series):
            name = _configuration(unit)
            for label, resolved, valid, tasks in points:
                rows.append(
                    (
                        f'<span style="color:{_SERIES[i % len(_SERIES)]}">■</span> '
                        + html_text(name),
                        html_text(label),
                        str(tasks),
                        _counts(resolved, valid),
                        html_text(_wilson(resolved, valid)),
                    )
                )
        body.append(
            _table(
                ["configuration", title, "tasks", "resolved/valid", "rate, Wilson 95%"],
                rows,
                (2, 3),
            )
        )
    return body


def _trend_svg(title: str, series: list[tuple[Unit, list[tuple[str, int, int, int]]]]) -> str:
    labels = sorted({p[0] for _, points in series for p in points}, key=lambda b: (len(b), b))
    left, top, plot_h, step = 50, 20, 200, 90
    width = left + max(1, len(labels)) * step + 20
    height = top + plot_h + 40
    x_of = {label: left + step / 2 + i * step for i, label in enumerate(labels)}

    def y(rate: float) -> float:
        return top + (1 - rate) * plot_h

    parts = []
    for tick in (0, 25, 50, 75, 100):
        parts.append(
            f'<line x1="{left}" y1="{y(tick / 100):.1f}" x2="{width - 10}" '
            f'y2="{y(tick / 100):.1f}" '
            f'class="grid"/><text x="{left - 6}" y="{y(tick / 100) + 4:.1f}" class="tick" '
            f'text-anchor="end">{tick}%</text>'
        )
    for label in labels:
        parts.append(
            f'<text x="{x_of[label]:.1f}" y="{top + plot_h + 18}" class="tick">'
            f"{html_text(label)}</text>"
        )
    offset = 8
    for i, (_, points) in enumerate(series):
        color = _SERIES[i % len(_SERIES)]
        shift = (i - (len(series) - 1) / 2) * offset
        previous = None
        for label, resolved, valid, _tasks in points:
            interval = stats.wilson_interval(resolved, valid) if valid else None
            if interval is None:
                continue
            cx = x_of[label] + shift
            parts.append(
                f'<line x1="{cx:.1f}" y1="{y(interval.low):.1f}" x2="{cx:.1f}" '
                f'y2="{y(interval.high):.1f}" stroke="{color}" stroke-width="3"/>'
                f'<circle cx="{cx:.1f}" cy="{y(interval.estimate):.1f}" r="5" fill="{color}">'
                f"<title>{html_text(f'{label}: {resolved}/{valid}')}</title></circle>"
            )
            if previous is not None:
                parts.append(
                    f'<line x1="{previous[0]:.1f}" y1="{previous[1]:.1f}" x2="{cx:.1f}" '
                    f'y2="{y(interval.estimate):.1f}" stroke="{color}" stroke-dasharray="3 3"/>'
                )
            previous = (cx, y(interval.estimate))
    return (
        f'<svg class="trend" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="Resolved rate with Wilson 95% interval per {html.escape(title)}">'
        + "".join(parts)
        + "</svg>"
    )


# --- comparison -------------------------------------------------------------------------------


def _comparison_page(data: SiteData, version: LayerVersion, comparison: Comparison) -> list[str]:
    body = comparison_body(comparison)
    line = (
        f'<p class="meta">layer {_link("../" + _layer_href(version), version.digest)} (stored at '
        f"commit {version.commit_seq}, {html_text(version.created_at)}; registry reports show "
        f"{html_text(short(version.digest))})</p>"
    )
    body.insert(2, line)
    return body
