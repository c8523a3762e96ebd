"""`registry site`: a static, self-contained site of the registry, written into a directory.

Pages are plain HTML with inline SVG and one small stylesheet (`style.css`): no script, no
network, so the directory can be published as a CI artifact or on any static host.

* `index.html` — the registry at a glance: counts, the ledger head, suite units, stored
  comparisons, the newest layers, the newest regressions, plans;
* `tasks/<name>.html` — one per task: its report (every cohort and observed system, Wilson
  intervals plotted, outcome classes, pass@k / pass^k, runtime, cost) and its report history;
* `systems/<name>.html` — one per observed system: its suite summary per configuration with
  the clustered interval, its noise floor, its tasks sorted by instability;
* `trends/<name>.html` — one per observed system: resolved rate with intervals per generation
  and per week, per configuration;
* `comparisons/<hex>.html` — one per stored comparison;
* `layers/<kind>/<hex>.json` — the layer each page renders, byte for byte the canonical JSON
  the registry stores (or would store) under that digest.

Every number is computed by the function the matching command calls (`build_report` through
the same evidence rule, `summarize`, `noise_floor`, `find_regressions`, stored comparisons as
stored), so a page and the CLI's JSON agree. Every page names the evidence it covers. File
names derived from task ids or systems are a readable slug plus a digest of the id, never the
raw id. Pages depend only on the evidence (no clock), and a file whose bytes are unchanged is
not rewritten: regenerating on unchanged evidence writes nothing.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from registry.analysis.noise import DEFAULT_SIMULATIONS, noise_floor
from registry.analysis.plans import list_plans
from registry.analysis.regressions import find_regressions
from registry.analysis.report import report_document, report_from_evidence
from registry.analysis.summary import summarize
from registry.errors import IntegrityError, RegistryError
from registry.evidence.rule import ENVELOPE_KEYS, system_key, system_label
from registry.evidence.selection import CONFIG_INPUTS, Evidence, Scope, Selector, read_evidence
from registry.storage.canonical import canonical_json
from registry.storage.digest import digest_bytes, digest_json, hex_of
from registry.storage.layers import LayerVersion, list_layers
from registry.storage.ledger import entries_as_of, read_ledger
from registry.storage.store import Store
from registry_schemas import (
    Comparison,
    NoiseFloor,
    RegressionReport,
    Summary,
    SystemSummary,
    TaskReport,
)

SITE_DIRS = ("tasks", "systems", "trends", "comparisons", "layers")
"""Directories the site owns inside its output directory (stale pages there are removed)."""
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


class SiteError(RegistryError):
    """The site cannot be written where it was asked to be."""


@dataclass(frozen=True)
class SiteResult:
    """What writing a site did."""

    output: Path
    files: int
    """Files the site consists of."""
    written: int
    """Files created or whose bytes changed."""
    unchanged: int
    """Files already holding exactly these bytes (not rewritten)."""
    removed: int
    """Stale pages of an earlier site (a task or system no longer present) removed."""
    head_seq: int
    """The ledger commit the site shows the registry at."""


@dataclass
class Unit:
    """One suite unit of an observed system: its summary row, noise floor, rows."""

    summary: SystemSummary
    selector: str
    noise: NoiseFloor | None
    noise_reason: str | None
    rows: list[dict[str, Any]]


@dataclass
class SystemEntry:
    """One observed system (and run, when its model is unobserved)."""

    key: tuple[Any, ...]
    identity: dict[str, Any]
    run: str | None
    name: str
    units: list[Unit] = field(default_factory=list)
    tasks: set[str] = field(default_factory=set)
    """Tasks the system has counted attempts on."""

    @property
    def label(self) -> str:
        """The system's one-line label."""
        return system_label(self.identity, self.run)


@dataclass
class SiteData:
    """Everything the pages render, computed once."""

    as_of: str | None
    head_seq: int
    head_digest: str | None
    head_time: str | None
    evidence: Evidence
    snapshot: dict[str, Any] | None
    reports: dict[str, TaskReport]
    task_names: dict[str, str]
    summary: Summary | None
    systems: list[SystemEntry]
    comparisons: list[tuple[LayerVersion, Comparison]]
    layers: list[LayerVersion]
    stored: dict[str, LayerVersion]
    regressions: RegressionReport | None
    plans: list[Any]
    files: dict[str, bytes] = field(default_factory=dict)

    def layer_file(self, kind: str, document: Any) -> tuple[str, str]:
        """Add a layer document to the site; return its digest and site-relative path."""
        data = canonical_json(document)
        digest = digest_json(document)
        path = f"layers/{kind}/{hex_of(digest)}.json"
        self.files[path] = data
        return digest, path


def page_name(text: str, key: Any) -> str:
    """Return a safe file name for a page: a readable slug of `text` plus a digest of `key`.

    Task ids may hold any printable character (`/`, `..`, quotes, non-ASCII): the slug keeps
    only `[A-Za-z0-9._-]` and never starts with a dot, and the digest keeps names of ids that
    share a slug (or differ only in case) apart.
    """
    slug = _SLUG.sub("-", text)[:40].strip("-.") or "x"
    return f"{slug}-{hex_of(digest_json(key))[:16]}.html"


def unit_selector(s: SystemSummary) -> Selector:
    """Return a selector naming one suite unit: its observed system and configuration inputs."""
    terms: list[tuple[str, str]] = []
    for key in ENVELOPE_KEYS:
        value = s.system.get(key)
        terms.append((key, "unknown" if value is None and key == "model" else str(value)))
    for key in CONFIG_INPUTS:
        if key in s.configuration:
            terms.append((key, str(s.configuration[key])))
    if s.run is not None:
        terms.append(("experiment", s.run))
    return Selector(",".join(f"{k}={v}" for k, v in terms), tuple(terms))


def collect(
    store: Store, *, as_of: str | int | None = None, simulations: int = DEFAULT_SIMULATIONS
) -> SiteData:
    """Compute every figure the site shows, as the registry stood at `as_of`.

    Raises:
        AsOfError: `as_of` names no commit of the ledger.
        IntegrityError: the ledger, a segment or a layer is damaged.
    """
    from registry.evidence.selection import SelectorError

    entries = entries_as_of(read_ledger(store), as_of)
    head = entries[-1] if entries else None
    head_seq = head.seq if head else 0
    evidence = read_evidence(store, Scope(), as_of=as_of)
    rows = evidence.rows
    by_task: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_task[row["task_id"]].append(row)
    conflicting = _by_task(evidence.conflicting)
    retracted = _by_task(evidence.retracted)
    reports = {
        task: report_from_evidence(
            task, Evidence(by_task[task], conflicting.get(task, []), retracted.get(task, []))
        )
        for task in sorted(by_task)
    }
    layers = [v for v in list_layers(store) if v.commit_seq <= head_seq]
    stored_files = {v.path: _layer_bytes(store, v) for v in layers}
    comparisons = [
        (v, Comparison.model_validate(orjson.loads(stored_files[v.path])))
        for v in layers
        if v.kind == "comparison"
    ]
    summary = summarize(store, Scope(), as_of=as_of) if rows else None
    systems = _systems(store, summary, rows, as_of, simulations, SelectorError)
    regressions = find_regressions(store, as_of=as_of) if rows else None
    return SiteData(
        as_of=None if as_of is None else str(as_of),
        head_seq=head_seq,
        head_digest=head.digest if head else None,
        head_time=head.commit.created_at if head else None,
        evidence=evidence,
        snapshot=summary.snapshot if summary else None,
        reports=reports,
        task_names={task: page_name(task, ["task", task]) for task in reports},
        summary=summary,
        systems=systems,
        comparisons=comparisons,
        layers=layers,
        stored={v.digest: v for v in layers},
        regressions=regressions,
        plans=list_plans(store, as_of=as_of),
        files=dict(stored_files),
    )


def _layer_bytes(store: Store, version: LayerVersion) -> bytes:
    """Return a stored layer's bytes, checked against its digest (copied into the site)."""
    try:
        data = store.resolve(version.path).read_bytes()
    except OSError as exc:
        raise IntegrityError(
            f"layer {version.path} cannot be read ({exc.strerror or exc}); run 'registry verify'"
        ) from None
    if digest_bytes(data) != version.digest:
        raise IntegrityError(
            f"layer {version.path} is damaged (digest mismatch); run 'registry verify'"
        )
    return data


def _by_task(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        out[row["task_id"]].append(row)
    return out


def _systems(
    store: Store,
    summary: Summary | None,
    rows: list[dict[str, Any]],
    as_of: str | int | None,
    simulations: int,
    selector_error: type[Exception],
) -> list[SystemEntry]:
    if summary is None:
        return []
    unit_rows: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        unit_rows[(row["configuration_digest"], system_key(row))].append(row)
    systems: dict[tuple[Any, ...], SystemEntry] = {}
    for s in summary.systems:
        key = (*(s.system.get(k) for k in ENVELOPE_KEYS), s.run)
        entry = systems.get(key)
        if entry is None:
            name = page_name(system_label(s.system, s.run), ["system", *key])
            entry = systems[key] = SystemEntry(key, dict(s.system), s.run, name)
        selector = unit_selector(s)
        floor, reason = None, None
        try:
            floor = noise_floor(store, selector, simulations=simulations, as_of=as_of)
        except selector_error as exc:
            reason = str(exc)
        members = unit_rows[(s.configuration_digest, key)]
        entry.units.append(Unit(s, selector.text, floor, reason, members))
        entry.tasks.update(r["task_id"] for r in members)
    return sorted(systems.values(), key=lambda e: (e.label, repr(e.key)))


def build_site(
    store: Store,
    output: Path,
    *,
    as_of: str | int | None = None,
    simulations: int = DEFAULT_SIMULATIONS,
) -> SiteResult:
    """Write the site of the registry into `output`; return what was written.

    Files whose bytes are already right are left alone (not rewritten), so regenerating on
    unchanged evidence writes nothing. Stale pages in the site's own directories are removed.

    Raises:
        SiteError: `output` is a file, lies inside the registry, or cannot be written.
        AsOfError: `as_of` names no commit of the ledger.
    """
    from registry.render.pages import render_site

    _check_output(store, output)
    data = collect(store, as_of=as_of, simulations=simulations)
    files = render_site(data)
    return write_site(output, files, data.head_seq)


def _check_output(store: Store, output: Path) -> None:
    target = output.resolve()
    root = store.root.resolve()
    if target == root or root in target.parents:
        raise SiteError(
            f"{output}: inside the registry {store.root}; choose a directory outside it"
        )
    if target.exists() and not target.is_dir():
        raise SiteError(f"{output}: exists and is not a directory; give a directory for the site")


def write_site(output: Path, files: dict[str, bytes], head_seq: int = 0) -> SiteResult:
    """Write `files` (site-relative path -> bytes) under `output`, skipping identical files.

    Each changed file is written to a temporary file beside it and renamed into place, so a
    reader never sees half a page. Files under the site's own directories that the new site
    does not hold are removed; nothing else in `output` is touched.

    Raises:
        SiteError: a file cannot be written.
    """
    written = unchanged = removed = 0
    try:
        for relative in sorted(files):
            data = files[relative]
            path = output / relative
            try:
                if path.read_bytes() == data:
                    unchanged += 1
                    continue
            except FileNotFoundError:
                pass
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=".site-", dir=path.parent)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                os.chmod(temporary, 0o644)
                os.replace(temporary, path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            written += 1
        for directory in SITE_DIRS:
            for path in sorted((output / directory).rglob("*")):
                relative = path.relative_to(output).as_posix()
                if path.is_file() and path.suffix in {".html", ".json"} and relative not in files:
                    path.unlink()
                    removed += 1
    except OSError as exc:
        where = exc.filename or output
        raise SiteError(f"{where}: cannot write the site ({exc.strerror or exc})") from None
    return SiteResult(output, len(files), written, unchanged, removed, head_seq)


def report_layer(data: SiteData, report: TaskReport) -> tuple[str, str]:
    """Add a task report's layer document to the site; return its digest and path."""
    return data.layer_file("report", report_document(report))
