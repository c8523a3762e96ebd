"""Tamper suite: every way of altering a registry behind its back is named by `verify` (or by
`verify --expect-head` against a head kept outside), and every reading command that would read
the altered object refuses it with one `Error:` line naming the object, exit 1.

The registry: commit 1 ingests the quickstart batch, commit 2 records a report layer, commit 3
ingests a second batch (the newest ingest and the last commit). Tampering acts on:

- the ledger (a commit's bytes, its place, its chain, the paths it names): every reader goes
  through the ledger, so all six reading commands refuse;
- a segment of the quickstart batch: every reader of attempts refuses (`reports show` reads
  no attempt and still answers);
- the report layer: `sql` over `reports` and `reports show` refuse (the others read no layer).

What no check inside the registry can see is a change to the newest commits (deleted, or
rewritten without breaking a link): there, `--expect-head` with the head printed before is the
anchor, and readers answer from what the ledger now says. A forged commit whose rows lie about
their attempt ids, or a newest commit rewritten to lie about its segment's task ids, is named
by `verify --deep` (which reads every row; the default proves bytes, not what the writer
derived from them); readers count each attempt once, from its earliest commit, so a forged
copy of existing attempts does not change an answer.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import registry
from registry.storage import ledger
from registry.storage.tables import read_segment, write_segment
from registry_cli.main import app
from registry_schemas import Commit
from tests.conftest import QUICKSTART, make_record, tree_snapshot, write_jsonl

TASK = "django__django-11099"
COMPARE = (
    "--baseline",
    "experiment=exp-baseline-1102",
    "--candidate",
    "experiment=exp-candidate-1109",
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three-commit registry, built once; each test works on a copy."""
    base = tmp_path_factory.mktemp("tamper")
    root = base / "reg"
    registry.ingest(root, [str(QUICKSTART)])
    registry.record_report(registry.open_store(root), TASK)
    extra = [make_record(task_id=f"task-{t}", repeat_index=r) for t in range(3) for r in range(2)]
    registry.ingest(root, [str(write_jsonl(base / "extra.jsonl", extra))])
    kinds = [e.commit.kind for e in registry.read_ledger(registry.open_store(root))]
    assert kinds == ["ingest", "layer", "ingest"]
    return root


@dataclass
class Registry:
    """A tampered copy: its store, the head printed before tampering, the objects named."""

    store: registry.Store
    head: str
    segment: str
    """The first quickstart segment holding TASK."""
    layer: str
    layer_digest: str


@pytest.fixture
def reg(pristine: Path, root: Path) -> Registry:
    shutil.copytree(pristine, root)
    store = registry.open_store(root)
    entries = registry.read_ledger(store)
    segment = next(s for s in entries[0].commit.segments if s.task_ids == [TASK])
    layer = entries[1].commit.layer
    assert layer is not None
    head = CliRunner().invoke(app, ["head", "--root", str(root)])
    assert head.exit_code == 0, head.output
    return Registry(store, head.stdout.strip(), segment.path, layer.path, layer.digest)


def _writable(path: Path) -> Path:
    path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return path


def _commit(reg: Registry, seq: int) -> Path:
    return _writable(reg.store.resolve(ledger.commit_name(seq)))


def _next_digit(data: bytes, at: int) -> bytes:
    """Change the digit at `at` to another digit (one byte, still valid JSON)."""
    digit = data[at : at + 1]
    assert digit.isdigit()
    return data[:at] + str((int(digit) + 1) % 10).encode() + data[at + 1 :]


def _change_created_at(reg: Registry, seq: int) -> None:
    path = _commit(reg, seq)
    data = path.read_bytes()
    at = data.index(b'Z"', data.index(b'"created_at"')) - 1
    path.write_bytes(_next_digit(data, at))


def _rewrite_commit(reg: Registry, seq: int, edit: Callable[[dict], None]) -> None:
    """Edit a commit's fields in place, keeping it canonical and valid (a careful forger)."""
    path = _commit(reg, seq)
    document = orjson.loads(path.read_bytes())
    edit(document)
    path.write_bytes(ledger.encode_commit(Commit.model_validate(document)))


def _forge(reg: Registry, segments: list[dict]) -> None:
    """Append a commit with a correct chain and correct counts naming `segments`."""
    rows = sum(s["rows"] for s in segments)
    fields = {"kind": "ingest", "segments": segments, "attempts_read": rows, "attempts_new": rows}
    ledger.append(reg.store, {**fields, "attempts_present": 0})


def _entry(reg: Registry, relative: str) -> dict:
    for e in registry.read_ledger(reg.store):
        for s in e.commit.segments:
            if s.path == relative:
                return s.model_dump(mode="json")
    raise AssertionError(relative)


def _place(reg: Registry, table: pa.Table, scratch: Path, cohort_key: str) -> dict:
    """Write `table` as a segment at its well-formed path; return its ledger entry."""
    temp = scratch / "forged.parquet"
    write_segment(table, temp)
    digest = registry.digest_file(temp)
    relative = reg.store.segment_path(cohort_key, digest)
    assert reg.store.put_file(temp, relative)
    tasks = sorted(set(table.column("task_id").to_pylist()))
    return {
        "path": relative,
        "digest": digest,
        "rows": len(table),
        "cohort_key": cohort_key,
        "task_ids": tasks,
    }


def _all_resolved(table: pa.Table) -> pa.Table:
    index = table.schema.get_field_index("terminal_class")
    resolved = pa.array(["resolved"] * len(table), table.schema.field(index).type)
    return table.set_column(index, table.schema.field(index), resolved)


# ---------------------------------------------------------------------------------------------
# The tampering. Each returns (the text `verify` must print in a problem line, the object name
# a refusing reader must print). `verify` is run with --expect-head in the anchor cases.


def flip_segment_byte(reg: Registry, scratch: Path) -> tuple[str, str]:
    path = _writable(reg.store.resolve(reg.segment))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    return f"{reg.segment}: altered", f"segment {reg.segment} is damaged (digest mismatch)"


def flip_layer_byte(reg: Registry, scratch: Path) -> tuple[str, str]:
    path = _writable(reg.store.resolve(reg.layer))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    return f"{reg.layer}: altered", f"layer {reg.layer} is damaged (digest mismatch)"


def flip_middle_commit_byte(reg: Registry, scratch: Path) -> tuple[str, str]:
    _change_created_at(reg, 2)
    return (
        "ledger/000000000003.json: chain broken, prev does not match the digest of commit 2",
        "commit ledger/000000000003.json is damaged (prev does not match the digest of commit 2)",
    )


def flip_last_commit_byte(reg: Registry, scratch: Path) -> tuple[str, str]:
    # A byte of a digest the commit records: the path no longer names that object.
    path = _commit(reg, 3)
    data = path.read_bytes()
    at = data.index(b'"digest":"blake3:', data.index(b'"segments"')) + len(b'"digest":"blake3:')
    path.write_bytes(data[:at] + (b"b" if data[at : at + 1] == b"a" else b"a") + data[at + 1 :])
    return (
        "ledger/000000000003.json: segment path attempts/cohort=",
        "commit ledger/000000000003.json is damaged (segment path attempts/cohort=",
    )


def flip_last_commit_time(reg: Registry, scratch: Path) -> tuple[str, str]:
    # Still a valid, well-formed commit with nothing after it: only the anchor sees it.
    _change_created_at(reg, 3)
    return "ledger/000000000003.json: expected head 3:blake3:", ""


def edit_task_ids_in_newest_ingest(reg: Registry, scratch: Path) -> tuple[str, str]:
    # Hides task-1's evidence from `report --task task-1`: the segment is not selected any more.
    def edit(document: dict) -> None:
        segment = next(s for s in document["segments"] if s["task_ids"] == ["task-1"])
        segment["task_ids"] = ["task-0"]

    _rewrite_commit(reg, 3, edit)
    return "rows hold tasks ['task-1'], ledger says ['task-0']", ""


def delete_newest_commits(reg: Registry, scratch: Path) -> tuple[str, str]:
    for seq in (3, 2):
        reg.store.resolve(ledger.commit_name(seq)).unlink()
    return "ledger/000000000003.json: expected head 3:blake3:", ""


def forge_relisting_segment(reg: Registry, scratch: Path) -> tuple[str, str]:
    _forge(reg, [_entry(reg, reg.segment)])
    return (
        f"ledger/000000000004.json: names segment {reg.segment}, already named by commit 1",
        f"commit ledger/000000000004.json is damaged ({reg.segment} is already named",
    )


def forge_fabricated_segment(reg: Registry, scratch: Path) -> tuple[str, str]:
    # Rows of the quickstart segment with every outcome rewritten to resolved, written as a new
    # segment at its proper path, named by a commit with a correct chain and correct counts.
    original = _entry(reg, reg.segment)
    table = _all_resolved(read_segment(reg.store.resolve(reg.segment)))
    _forge(reg, [_place(reg, table, scratch, original["cohort_key"])])
    return "content does not yield its attempt id", ""


def forge_path_outside_root(reg: Registry, scratch: Path) -> tuple[str, str]:
    entry = _entry(reg, reg.segment)
    outside = reg.store.root.parent / "outside.parquet"
    shutil.copyfile(reg.store.resolve(reg.segment), outside)
    _forge(reg, [{**entry, "path": "../outside.parquet"}])
    return (
        "ledger/000000000004.json: segment path '../outside.parquet' is not",
        "commit ledger/000000000004.json is damaged (segment path '../outside.parquet' is not",
    )


def delete_segment(reg: Registry, scratch: Path) -> tuple[str, str]:
    reg.store.resolve(reg.segment).unlink()
    return f"{reg.segment}: missing", f"segment {reg.segment} is missing"


def rename_segment(reg: Registry, scratch: Path) -> tuple[str, str]:
    path = reg.store.resolve(reg.segment)
    os.rename(path, path.with_name("renamed.parquet"))
    return f"{reg.segment}: missing", f"segment {reg.segment} is missing"


def replace_segment_same_rows(reg: Registry, scratch: Path) -> tuple[str, str]:
    path = reg.store.resolve(reg.segment)
    table = read_segment(path)
    temp = scratch / "replacement.parquet"
    pq.write_table(table, temp, compression="none")
    assert pq.read_table(temp).equals(table)
    os.replace(temp, path)
    return f"{reg.segment}: altered", f"segment {reg.segment} is damaged (digest mismatch)"


def truncate_last_commit(reg: Registry, scratch: Path) -> tuple[str, str]:
    path = _commit(reg, 3)
    path.write_bytes(path.read_bytes()[:-7])
    return (
        "ledger/000000000003.json: commit does not parse",
        "commit ledger/000000000003.json is damaged (it does not parse",
    )


def rewrite_outcomes_resolved(reg: Registry, scratch: Path) -> tuple[str, str]:
    path = _writable(reg.store.resolve(reg.segment))
    write_segment(_all_resolved(read_segment(path)), path)
    return f"{reg.segment}: altered", f"segment {reg.segment} is damaged (digest mismatch)"


def delete_layer(reg: Registry, scratch: Path) -> tuple[str, str]:
    reg.store.resolve(reg.layer).unlink()
    return f"{reg.layer}: missing", f"layer {reg.layer} is missing"


def replace_layer_document(reg: Registry, scratch: Path) -> tuple[str, str]:
    # Another valid report document (another task's) under this layer's name.
    other = registry.report_document(registry.build_report(reg.store, "task-0"))
    path = _writable(reg.store.resolve(reg.layer))
    path.write_bytes(registry.canonical_json(other))
    return f"{reg.layer}: altered", f"layer {reg.layer} is damaged (digest mismatch)"


def remove_middle_commit(reg: Registry, scratch: Path) -> tuple[str, str]:
    reg.store.resolve(ledger.commit_name(2)).unlink()
    return (
        "ledger/000000000003.json: sequence number 3 out of place",
        "commit ledger/000000000003.json is damaged (commit 2 is missing)",
    )


def wrong_prev(reg: Registry, scratch: Path) -> tuple[str, str]:
    first = registry.read_ledger(reg.store)[0].digest
    _rewrite_commit(reg, 3, lambda document: document.update(prev=first))
    return (
        "ledger/000000000003.json: chain broken, prev does not match the digest of commit 2",
        "commit ledger/000000000003.json is damaged (prev does not match the digest of commit 2)",
    )


LEDGER = "ledger"
SEGMENT = "segment"
LAYER = "layer"
ANCHOR = "anchor"
"""Only an anchor kept outside the registry (or verify's row checks) can see the change."""

CASES: dict[str, tuple[Callable[[Registry, Path], tuple[str, str]], str]] = {
    "segment-byte-flipped": (flip_segment_byte, SEGMENT),
    "layer-byte-flipped": (flip_layer_byte, LAYER),
    "middle-commit-byte-flipped": (flip_middle_commit_byte, LEDGER),
    "last-commit-byte-flipped": (flip_last_commit_byte, LEDGER),
    "last-commit-time-changed": (flip_last_commit_time, ANCHOR),
    "task-ids-edited-in-newest-ingest": (edit_task_ids_in_newest_ingest, ANCHOR),
    "newest-commits-deleted": (delete_newest_commits, ANCHOR),
    "forged-commit-relists-segment": (forge_relisting_segment, LEDGER),
    "forged-commit-fabricated-segment": (forge_fabricated_segment, ANCHOR),
    "forged-commit-path-outside-root": (forge_path_outside_root, LEDGER),
    "segment-deleted": (delete_segment, SEGMENT),
    "segment-renamed": (rename_segment, SEGMENT),
    "segment-replaced-same-rows": (replace_segment_same_rows, SEGMENT),
    "last-commit-truncated": (truncate_last_commit, LEDGER),
    "segment-outcomes-rewritten-resolved": (rewrite_outcomes_resolved, SEGMENT),
    "layer-deleted": (delete_layer, LAYER),
    "layer-replaced-by-valid-document": (replace_layer_document, LAYER),
    "middle-commit-removed": (remove_middle_commit, LEDGER),
    "commit-prev-wrong": (wrong_prev, LEDGER),
}

DEEP: dict[Callable[[Registry, Path], tuple[str, str]], str | None] = {
    edit_task_ids_in_newest_ingest: "expected head 3:blake3:",
    forge_fabricated_segment: None,
}
"""Named only by `verify --deep` (it reads the rows): a commit whose every digest is right but
whose segment's rows do not yield what it records. Value: what the default depth names with
--expect-head (a rewritten newest commit no longer has the anchored digest), None when the
change only appends (a forged commit extends the head: the default passes it)."""

READERS: dict[str, tuple[str, ...]] = {
    "sql": (
        "sql",
        "SELECT (SELECT count(*) FROM attempts) AS a, (SELECT count(*) FROM reports) AS r",
    ),
    "reports show": ("reports", "show", "{layer}"),
    "report": ("report", "--task", TASK),
    "summary": ("summary",),
    "compare": ("compare", *COMPARE, "--resamples", "200"),
    "noise": ("noise", "--system", "experiment=exp-baseline-1102", "--simulations", "200"),
}
READS = {
    LEDGER: set(READERS),
    SEGMENT: set(READERS) - {"reports show"},
    LAYER: {"sql", "reports show"},
    ANCHOR: set(),
}


def _problems(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("problem: ")]


def test_untouched_registry_verifies_and_every_reader_answers(reg, invoke):
    result = invoke("verify", "--expect-head", reg.head)
    assert result.exit_code == 0, result.output
    for name, args in READERS.items():
        answer = invoke(*(a.format(layer=reg.layer_digest) for a in args))
        assert answer.exit_code == 0, (name, answer.output)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_tampering_is_named_by_verify_and_refused_by_readers(reg, invoke, tmp_path, case):
    tamper, scope = case
    named, refused = tamper(reg, tmp_path)
    depth = ("--deep",) if tamper in DEEP else ()

    plain = invoke("verify", *depth)
    anchored = invoke("verify", "--expect-head", reg.head, *depth)
    if tamper in DEEP:
        default = invoke("verify", "--expect-head", reg.head)
        anchor = DEEP[tamper]
        assert default.exit_code == (0 if anchor is None else 1), default.output
        assert not any(named in line for line in _problems(default.output)), default.output
        if anchor is not None:
            assert any(anchor in line for line in _problems(default.output)), default.output

    assert anchored.exit_code == 1, anchored.output
    assert any(named in line for line in _problems(anchored.output)), anchored.output
    if scope != ANCHOR or "expected head" not in named:
        assert plain.exit_code == 1, plain.output
        assert any(named in line for line in _problems(plain.output)), plain.output
    before = tree_snapshot(reg.store.root)
    for name, args in READERS.items():
        result = invoke(*(a.format(layer=reg.layer_digest) for a in args))
        if name not in READS[scope]:
            continue  # this command reads nothing that was altered
        assert result.exit_code == 1, (name, result.output)
        lines = result.output.splitlines()
        assert lines == [f"Error: {lines[0].removeprefix('Error: ')}"], (name, result.output)
        assert refused in lines[0] and lines[0].endswith("run 'registry verify'"), (name, lines)
    if READS[scope] == set(READERS):
        assert tree_snapshot(reg.store.root) == before  # refused before anything was recorded


def test_stray_unreferenced_file_is_listed_not_an_error(reg, invoke):
    stray = reg.store.resolve("attempts/cohort=x/stray.parquet")
    stray.parent.mkdir()
    shutil.copyfile(reg.store.resolve(reg.segment), stray)

    result = invoke("verify", "--expect-head", reg.head)

    assert result.exit_code == 0, result.output
    assert _problems(result.output) == []
    assert "unreferenced: attempts/cohort=x/stray.parquet (not in the ledger" in result.output
    for name, args in READERS.items():
        answer = invoke(*(a.format(layer=reg.layer_digest) for a in args))
        assert answer.exit_code == 0, (name, answer.output)


def test_forged_copies_of_existing_attempts_do_not_change_an_answer(reg, invoke, tmp_path):
    query = ("sql", "SELECT terminal_class, count(*) AS n FROM attempts GROUP BY 1 ORDER BY 1")
    before = invoke(*query, "--format", "json")
    forge_fabricated_segment(reg, tmp_path)

    after = invoke(*query, "--format", "json")

    assert after.exit_code == 0, after.output
    assert orjson.loads(after.stdout) == orjson.loads(before.stdout)


def test_reader_never_opens_a_path_outside_the_root(reg, invoke, tmp_path):
    forge_path_outside_root(reg, tmp_path)
    outside = reg.store.root.parent / "outside.parquet"
    outside.chmod(0)  # any attempt to hash or read it would fail differently
    try:
        result = invoke("sql", "SELECT count(*) FROM attempts")
        report = invoke("verify")
    finally:
        outside.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert result.exit_code == 1
    assert "segment path '../outside.parquet' is not" in result.output
    assert "unreadable" not in report.output and "missing" not in report.output


@pytest.mark.parametrize(
    "text", ["3", "x:blake3:" + "a" * 64, "3:blake3:abc", "0:blake3:" + "a" * 64]
)
def test_expect_head_that_is_not_seq_digest_is_a_usage_error(reg, invoke, text):
    result = invoke("verify", "--expect-head", text)
    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[0].startswith("Error: --expect-head ")


def test_head_prints_seq_and_digest_in_one_line(reg, invoke):
    text = invoke("head")
    as_json = invoke("head", "--format", "json")
    entries = registry.read_ledger(reg.store)

    assert text.exit_code == 0 and as_json.exit_code == 0
    assert text.stdout == f"3:{entries[-1].digest}\n"
    assert orjson.loads(as_json.stdout) == {"seq": 3, "digest": entries[-1].digest}
    assert re.fullmatch(r"3:blake3:[0-9a-f]{64}", reg.head)


def test_expect_head_accepts_a_ledger_that_extends_the_head(reg, invoke, tmp_path):
    extra = [make_record(task_id="task-9")]
    registry.ingest(reg.store.root, [str(write_jsonl(tmp_path / "more.jsonl", extra))])

    result = invoke("verify", "--expect-head", reg.head)

    assert result.exit_code == 0, result.output
    assert invoke("head").stdout.startswith("4:blake3:")


def test_head_of_an_empty_registry(invoke, root):
    registry.open_store(root, create=True)
    assert invoke("head").stdout == "0:none\n"
