"""Ingest: formats, round trip through SQL, idempotence, segments and the commit."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from registry import canonical_json, ingest, open_store, read_ledger, run_query
from registry.evidence.keys import record_json
from registry_schemas import AttemptRecord, TerminalClass, format_timestamp
from tests.conftest import INPUTS, QUICKSTART, make_record, write_jsonl

text = st.text(min_size=1, max_size=20).filter(
    lambda s: all(ord(c) >= 0xA0 or 0x20 <= ord(c) < 0x7F for c in s)
)
maybe_text = st.none() | st.text(max_size=12)
count = st.none() | st.integers(min_value=0, max_value=2**53 - 1)
money = st.none() | st.floats(min_value=0, max_value=1e6, allow_nan=False)
stamp = st.none() | st.datetimes(
    min_value=datetime(2000, 1, 1),
    max_value=datetime(2100, 1, 1),
    timezones=st.just(UTC),
).map(format_timestamp)
budget = st.text(min_size=1, max_size=10) | st.dictionaries(
    st.text(max_size=5),
    st.integers(-1000, 1000) | st.floats(-1e15, 1e15, allow_nan=False) | st.text(max_size=5),
    max_size=3,
)


def _record(
    exp, task, k, cls, env, rt, started, cost, tin, tout, tcache, plan, labels, arts, b, identity
):
    return make_record(
        with_identity=identity,
        experiment_id=exp,
        task_id=task,
        repeat_index=k,
        terminal_class=cls,
        envelope=env,
        runtime_seconds=rt,
        started_at=started,
        finished_at=None,
        cost_usd=cost,
        input_tokens=tin,
        output_tokens=tout,
        cached_input_tokens=tcache,
        plan_id=plan,
        labels=labels,
        artifacts=arts,
        inputs={**INPUTS, "budget": b},
    )


records = st.builds(
    _record,
    text,
    text,
    st.integers(0, 2**53 - 1),
    st.sampled_from([c.value for c in TerminalClass]),
    st.fixed_dictionaries(
        {k: maybe_text for k in ("agent", "agent_version", "provider", "model", "harness_version")}
    ),
    st.floats(min_value=0, max_value=1e9, allow_nan=False),
    stamp,
    money,
    count,
    count,
    count,
    st.none() | text,
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3),
    st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=2),
    budget,
    st.booleans(),
)


def _from_sql(row: dict) -> dict:
    """Independent normalisation of a SQL row back to the record's JSON form."""
    out = {name: row[name] for name in AttemptRecord.model_fields}
    out["inputs"] = {**row["inputs"], "budget": json.loads(row["inputs"]["budget"])}
    for name in ("started_at", "finished_at"):
        if out[name] is not None:
            out[name] = format_timestamp(out[name])
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(records, min_size=1, max_size=6))
def test_every_field_survives_ingest_to_sql(batch):
    with tempfile.TemporaryDirectory() as tmp:
        source = write_jsonl(Path(tmp) / "in.jsonl", batch)
        result = ingest(Path(tmp) / "reg", [str(source)])
        expected = {}
        for record in batch:
            canonical = record_json(AttemptRecord.model_validate_json(json.dumps(record)))
            expected[canonical_json(canonical)] = canonical
        assert result.new == len(expected)
        query = run_query(open_store(Path(tmp) / "reg"), "SELECT * FROM attempts")
        got = [_from_sql(dict(zip(query.columns, row, strict=True))) for row in query.rows]
        assert sorted(canonical_json(g) for g in got) == sorted(expected)


def test_formats_jsonl_json_parquet_stdin_and_directory(tmp_path, invoke, root):
    rows = [make_record(task_id=f"t{i}", repeat_index=i) for i in range(6)]
    folder = tmp_path / "in"
    folder.mkdir()
    write_jsonl(folder / "a.jsonl", rows[:2])
    (folder / "b.json").write_text(json.dumps(rows[2:4], indent=2))
    (folder / ".hidden.jsonl").write_text("not even json")
    stdin_text = "".join(json.dumps(r) + "\n" for r in rows[4:5])
    rows[5]["artifacts"] = {"patch": "blake3:" + "f" * 64}
    parquet_rows = [AttemptRecord.model_validate_json(json.dumps(rows[5])).model_dump()]
    parquet_rows[0]["terminal_class"] = str(parquet_rows[0]["terminal_class"])
    pq.write_table(pa.Table.from_pylist(parquet_rows), tmp_path / "c.parquet")
    assert invoke("ingest", str(folder)).exit_code == 0
    assert invoke("ingest", "-", input=stdin_text).exit_code == 0
    result = invoke("ingest", str(tmp_path / "c.parquet"), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["new"] == 1
    result = invoke("sql", "SELECT task_id FROM attempts ORDER BY task_id", "--format", "csv")
    assert result.stdout.split() == ["task_id", "t0", "t1", "t2", "t3", "t4", "t5"]
    commits = read_ledger(open_store(root))
    assert [c.commit.sources[0].path for c in commits][1] == "-"


def test_duplicates_within_one_input_are_written_once(tmp_path, root):
    record = make_record()
    source = write_jsonl(tmp_path / "dup.jsonl", [record, record, make_record(repeat_index=1)])
    result = ingest(root, [str(source)])
    assert (result.read, result.new, result.present) == (3, 2, 1)


def test_one_segment_per_cohort_named_by_content(tmp_path, root):
    batch = [make_record(task_id=t, repeat_index=k) for t in ("a", "b", "c") for k in range(4)]
    result = ingest(root, [str(write_jsonl(tmp_path / "x.jsonl", batch))])
    segments = result.commit.commit.segments
    assert len(segments) == 3
    store = open_store(root)
    for segment in segments:
        path = store.resolve(segment.path)
        assert path.parent.name == "cohort=" + segment.cohort_key.removeprefix("blake3:")
        assert path.name == segment.digest.removeprefix("blake3:") + ".parquet"
        assert segment.rows == 4 and len(segment.task_ids) == 1
        assert not path.stat().st_mode & 0o222  # read-only once written
    assert sorted(p.name for p in store.tmp_dir.iterdir()) == []


def test_spilling_gives_the_same_attempts(tmp_path):
    batch = [make_record(task_id=f"t{i % 4}", repeat_index=i) for i in range(40)]
    source = write_jsonl(tmp_path / "x.jsonl", batch)
    spilled = ingest(tmp_path / "a", [str(source)], spill_rows=7)
    whole = ingest(tmp_path / "b", [str(source)])
    assert spilled.new == whole.new == 40
    ids = "SELECT attempt_id FROM attempts ORDER BY 1"
    assert (
        run_query(open_store(tmp_path / "a"), ids).rows
        == run_query(open_store(tmp_path / "b"), ids).rows
    )


def test_commit_records_sources_and_chain(tmp_path, root):
    first = ingest(root, [str(QUICKSTART)]).commit
    second = ingest(root, [str(write_jsonl(tmp_path / "x.jsonl", [make_record()]))]).commit
    assert first.seq == 1 and first.commit.prev is None
    assert second.seq == 2 and second.commit.prev == first.digest
    assert second.commit.sources[0].records == 1
    assert second.commit.attempts_new == 1


HOSTILE = ["../../x", "x' OR '1'='1", "a/b\\c", "..", "/etc/passwd", "tâche ✓ 😀", 'x"; DROP TABLE']


def test_hostile_task_ids_stored_and_queried_inside_the_root(tmp_path, root):
    batch = [make_record(task_id=t) for t in HOSTILE]
    source = write_jsonl(tmp_path / "h.jsonl", batch)
    outside_before = sorted(p.name for p in tmp_path.iterdir())
    ingest(root, [str(source)])
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before + ["reg"]
    for path in root.rglob("*"):
        assert all(t not in path.relative_to(root).as_posix() for t in HOSTILE[:3])
    store = open_store(root)
    for task in HOSTILE:
        from registry.evidence.query import connect, fetch

        con = connect(store)
        got = fetch(con, "SELECT task_id FROM attempts WHERE task_id = ?", [task]).rows
        assert got == [(task,)]
    rows = run_query(store, "SELECT count(*) FROM attempts").rows
    assert rows == [(len(HOSTILE),)]


def test_parquet_nanosecond_timestamps_as_pandas_writes_them(tmp_path, root):
    rows = [make_record(repeat_index=i) for i in range(2)]
    table = pa.Table.from_pylist(rows)
    for name in ("started_at", "finished_at"):
        stamps = pa.array(table[name].to_pylist()).cast(pa.timestamp("ns", tz="UTC"))
        table = table.set_column(table.schema.get_field_index(name), name, stamps)
    path = tmp_path / "ns.parquet"
    pq.write_table(table, path)
    assert ingest(root, [str(path)]).new == 2
    rows_back = run_query(open_store(root), "SELECT started_at FROM attempts").rows
    assert {r[0].isoformat() for r in rows_back} == {"2026-11-02T09:00:00+00:00"}
