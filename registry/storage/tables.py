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

from registry.storage.canonical import canonical_json
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


def to_row(record: dict[str, Any], attempt_id: str, cohort_key: str) -> dict[str, Any]:
    """Return the segment row of a record in JSON form (timestamps stay text until cast)."""
    inputs = dict(record["inputs"])
    inputs["budget"] = canonical_json(inputs["budget"]).decode()
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
    """Write a segment table as one Parquet file."""
    pq.write_table(table, path, **WRITE_OPTIONS)


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
