"""Attempt records <-> Arrow tables <-> Parquet segments; the only writer of Parquet files.

Columns mirror `registry.attempt/1` (nested structs for `inputs` and `envelope`, maps for
`labels` and `artifacts`) plus the two derived keys `attempt_id` and `cohort_key`.
`inputs.budget` holds the canonical JSON text of the budget (a string budget is therefore a
quoted JSON string), so a string and an object can never be confused. Timestamps are UTC
microseconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from registry.storage.canonical import canonical_value
from registry_schemas import AttemptRecord, CohortInputs, Envelope, format_timestamp

_STRING_MAP = pa.map_(pa.string(), pa.string())
_TIMESTAMP = pa.timestamp("us", tz="UTC")
INPUT_FIELDS = tuple(CohortInputs.model_fields)
ENVELOPE_FIELDS = tuple(Envelope.model_fields)
RECORD_FIELDS = tuple(AttemptRecord.model_fields)
TIMESTAMP_FIELDS = ("started_at", "finished_at")
MAP_FIELDS = ("labels", "artifacts")

_TYPES: dict[str, pa.DataType] = {
    "experiment_id": pa.string(),
    "task_id": pa.string(),
    "repeat_index": pa.int64(),
    "inputs": pa.struct([(name, pa.string()) for name in INPUT_FIELDS]),
    "terminal_class": pa.string(),
    "envelope": pa.struct([(name, pa.string()) for name in ENVELOPE_FIELDS]),
    "terminal_identity": pa.string(),
    "runtime_seconds": pa.float64(),
    "started_at": _TIMESTAMP,
    "finished_at": _TIMESTAMP,
    "cost_usd": pa.float64(),
    "input_tokens": pa.int64(),
    "output_tokens": pa.int64(),
    "cached_input_tokens": pa.int64(),
    "plan_id": pa.string(),
    "derived_from": pa.string(),
    "labels": _STRING_MAP,
    "artifacts": _STRING_MAP,
}
_NOT_NULL = {"experiment_id", "task_id", "repeat_index", "inputs", "terminal_class"}
_NOT_NULL |= {"envelope", "labels", "artifacts"}

ATTEMPT_SCHEMA = pa.schema(
    [pa.field("attempt_id", pa.string(), False), pa.field("cohort_key", pa.string(), False)]
    + [pa.field(name, _TYPES[name], name not in _NOT_NULL) for name in RECORD_FIELDS]
)
"""Arrow schema of a segment."""

WRITE_OPTIONS: dict[str, Any] = {"compression": "zstd", "write_statistics": True}
"""How a segment of `ZSTD_MIN_ROWS` rows or more is written."""
ZSTD_MIN_ROWS = 1000
"""Below this many rows a segment is written with Snappy instead of zstd.

zstd sets up a compression context for every page, about 1.3 ms per file of this schema on
the development machine, three times the cost of writing a small segment otherwise, while a
small file is mostly its footer: 17 rows take 15.0 kB with zstd, 15.7 kB with Snappy; 1,024
rows take 126 kB with zstd and 214 kB with Snappy. An ingest of a suite writes one segment per
task, mostly small; `registry pack` writes large ones."""
_SMALL_OPTIONS: dict[str, Any] = {**WRITE_OPTIONS, "compression": "snappy"}
PART_OPTIONS: dict[str, Any] = {"compression": "lz4", "write_statistics": False}
"""How ingest's temporary part files are written: read back once, by the same process."""


def to_row(record: dict[str, Any], attempt_id: str, cohort_key: str) -> dict[str, Any]:
    """Return the segment row of a record in JSON form (timestamps stay text until cast)."""
    inputs = dict(record["inputs"])
    inputs["budget"] = canonical_text(inputs["budget"])
    return {**record, "inputs": inputs, "attempt_id": attempt_id, "cohort_key": cohort_key}


_TEXT_SCHEMA = pa.schema(
    [f.with_type(pa.string()) if f.name in TIMESTAMP_FIELDS else f for f in ATTEMPT_SCHEMA]
)


def rows_to_table(rows: Sequence[dict[str, Any]]) -> pa.Table:
    """Return the Arrow table of segment rows made by `to_row`.

    Built column by column (what `Table.from_pylist` does, without its per-row work); a
    missing key is null, as there.
    """
    arrays = [pa.array([row.get(f.name) for row in rows], type=f.type) for f in _TEXT_SCHEMA]
    table = pa.Table.from_arrays(arrays, schema=_TEXT_SCHEMA)
    for name in TIMESTAMP_FIELDS:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, ATTEMPT_SCHEMA.field(name), table[name].cast(_TIMESTAMP))
    return table


def records_to_table(
    records: Sequence[dict[str, Any]],
    attempt_ids: Sequence[str],
    cohort_keys: Sequence[str],
    budgets: Sequence[str] | None = None,
) -> pa.Table:
    """Return the segment table of validated records in JSON form, with their two keys.

    Equal to `rows_to_table([to_row(r, a, c) ...])` (`tests/test_fast_records.py`), built column by
    column from the records' fields: one Python list per leaf column, struct and map
    columns assembled from their children. `budgets`, if given, holds each record's budget
    as canonical text (`canonical_budget`); otherwise it is encoded here.
    """
    columns: dict[str, pa.Array] = {
        "attempt_id": pa.array(attempt_ids, pa.string()),
        "cohort_key": pa.array(cohort_keys, pa.string()),
    }
    for name in RECORD_FIELDS:
        kind = _TYPES[name]
        if name == "inputs":
            inputs = [r["inputs"] for r in records]
            children = [
                pa.array(
                    (budgets or [canonical_text(i["budget"]) for i in inputs])
                    if key == "budget"
                    else [i[key] for i in inputs],
                    pa.string(),
                )
                for key in INPUT_FIELDS
            ]
            columns[name] = pa.StructArray.from_arrays(children, fields=list(kind))
        elif name == "envelope":
            envelopes = [r["envelope"] for r in records]
            children = [
                pa.array([e[key] for e in envelopes], pa.string()) for key in ENVELOPE_FIELDS
            ]
            columns[name] = pa.StructArray.from_arrays(children, fields=list(kind))
        elif name in MAP_FIELDS:
            columns[name] = _map_column([r[name] for r in records])
        elif name in TIMESTAMP_FIELDS:
            columns[name] = pa.array([r[name] for r in records], pa.string()).cast(_TIMESTAMP)
        else:
            columns[name] = pa.array([r[name] for r in records], kind)
    return pa.Table.from_arrays(list(columns.values()), schema=ATTEMPT_SCHEMA)


def _map_column(values: list[dict[str, str]]) -> pa.Array:
    """A map<string, string> column of text maps (what `pa.array` makes of them)."""
    offsets = [0]
    keys: list[str] = []
    items: list[str] = []
    for value in values:
        keys.extend(value)
        items.extend(value.values())
        offsets.append(len(keys))
    return pa.MapArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(keys, pa.string()), pa.array(items, pa.string())
    )


def canonical_text(budget: Any) -> str:
    """The canonical JSON text a budget is stored as (`inputs.budget`), memoised."""
    if type(budget) is str:
        return orjson.dumps(budget).decode()  # RFC 8785 writes strings as orjson does
    return canonical_value(budget).decode()


def table_to_records(table: pa.Table) -> Iterable[tuple[str, str, dict[str, Any]]]:
    """Yield `(attempt_id, cohort_key, record JSON form)` for each row of a segment table."""
    for row in table.to_pylist():
        yield row.pop("attempt_id"), row.pop("cohort_key"), row_to_record(row)


def row_to_record(row: dict[str, Any]) -> dict[str, Any]:
    """Return the record JSON form of a segment row (inverse of `to_row`)."""
    record = {name: row[name] for name in RECORD_FIELDS}
    inputs = dict(record["inputs"])
    inputs["budget"] = orjson.loads(inputs["budget"])
    record["inputs"] = inputs
    for name in TIMESTAMP_FIELDS:
        if record[name] is not None:
            record[name] = format_timestamp(record[name])
    for name in MAP_FIELDS:
        value = record[name]
        record[name] = dict(value) if isinstance(value, list) else value
    return record


def write_segment(table: pa.Table, path: Path) -> None:
    """Write a segment table as one Parquet file (zstd, or Snappy when small)."""
    pq.write_table(
        table, path, **(WRITE_OPTIONS if len(table) >= ZSTD_MIN_ROWS else _SMALL_OPTIONS)
    )


def read_segment(path: Path, columns: Sequence[str] | None = None) -> pa.Table:
    """Read a segment (or some of its columns).

    Through `ParquetFile`, not `read_table`: one file needs no dataset discovery, which costs
    about half of reading a small segment (the tables are equal, schema metadata included).
    """
    with pq.ParquetFile(path) as handle:
        names = handle.schema_arrow.names
        missing = [column for column in columns or () if column not in names]
        if missing:  # `ParquetFile.read` would leave it out silently; not a segment
            raise pa.ArrowInvalid(f"{path}: no column {missing[0]}")
        return handle.read(columns=list(columns) if columns else None)


def read_parquet_batches(path: Path, batch_rows: int) -> Iterable[pa.RecordBatch]:
    """Yield record batches of any Parquet file (an ingest input)."""
    with pq.ParquetFile(path) as handle:
        yield from handle.iter_batches(batch_size=batch_rows)
