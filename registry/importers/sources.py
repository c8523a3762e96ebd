"""Ingest inputs: JSON Lines, JSON arrays, Parquet and standard input, read as a stream.

Every reader yields `(location, payload)` pairs: a human location ("line 12", "row 3") and the
record's JSON bytes. `checked_payload` validates every payload the same way whatever the
format (strict rules: no type coercion, no unknown fields, finite numbers): plainly valid
records through `registry.importers.fast`, everything else through pydantic's JSON mode, which
words every error. Each source is hashed while it is read.
"""

from __future__ import annotations

import codecs
import difflib
import json
import math
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, BinaryIO, NoReturn

import blake3
import orjson
import pyarrow as pa
from pydantic import BaseModel, ValidationError

from registry.errors import InputFormatError, InvalidRecordError
from registry.evidence.keys import record_json
from registry.importers import (
    MODULES,
    ImportContext,
    detect_importer,
    get_importer,
    with_identity,
)
from registry.importers.base import duplicate_key, duplicate_key_problem, printable
from registry.importers.fast import checked_record
from registry.storage.digest import PREFIX, digest_file, digest_json
from registry.storage.tables import MAP_FIELDS, read_parquet_batches
from registry_schemas import AttemptRecord, CohortInputs, Envelope

NATIVE_FORMATS = ("jsonl", "json", "parquet")
FORMATS = ("auto", *NATIVE_FORMATS, *MODULES)
_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".parquet": "parquet",
    ".eval": "inspect",
}
_CHUNK = 1 << 20
_PARQUET_BATCH = 8192
ProgressFn = Callable[[int], None]


@dataclass
class Source:
    """One input of an ingest: a file path or standard input (`-`)."""

    label: str
    path: Path | None
    format: str
    records: int = 0
    context: ImportContext = field(default_factory=ImportContext, repr=False)
    read_before: int | None = None
    """The ingest commit that read the same bytes the same way, when this one did not read
    them again (see `registry.ingest`)."""
    _hasher: Any = field(default_factory=blake3.blake3, repr=False)
    _digest: str | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        """Size in bytes of the file or of every file of a harness's output folder.

        0 for standard input, whose size is unknown.
        """
        if self.path is None:
            return 0
        if self.path.is_dir():
            return sum(p.stat().st_size for p in self.path.rglob("*") if p.is_file())
        return self.path.stat().st_size

    @property
    def digest(self) -> str:
        """blake3 of the bytes read (valid once the source has been read to the end)."""
        return self._digest or PREFIX + self._hasher.hexdigest()

    @property
    def reading(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """How records are made of the bytes: the format and the `--envelope` values."""
        return self.format, tuple(sorted(self.context.envelope.items()))


def resolve_sources(paths: list[str], fmt: str = "auto") -> list[Source]:
    """Expand directories and detect formats.

    A directory that a harness importer recognises (a Harbor job, a terminal-bench run) is one
    source; any other directory contributes every ingestible file inside it.

    Raises:
        InputFormatError: a path does not exist, or the format is unknown or undetectable.
    """
    if fmt not in FORMATS:
        raise InputFormatError(f"unknown format '{fmt}'; valid formats: {', '.join(FORMATS)}")
    sources: list[Source] = []
    for text in paths:
        if text == "-":
            sources.append(Source("-", None, "jsonl" if fmt == "auto" else fmt))
            continue
        path = Path(text)
        if not path.exists():
            raise InputFormatError(f"{text}: no such file or directory")
        if fmt in MODULES:
            sources.append(Source(text, path, fmt))
        elif path.is_dir():
            sources.extend(_directory_sources(text, path, fmt))
        else:
            sources.append(Source(text, path, _detect(path) if fmt == "auto" else fmt))
    return sources


def _directory_sources(text: str, path: Path, fmt: str) -> list[Source]:
    if fmt == "auto" and (name := detect_importer(path)):
        return [Source(text, path, name)]
    found = sorted(p for p in path.rglob("*") if _ingestible(p, path))
    if not found:
        raise InputFormatError(
            f"{text}: directory holds no .jsonl, .json, .parquet or .eval file and is not a "
            "recognised harness output; pass --format"
        )
    return [Source(str(p), p, _detect(p) if fmt == "auto" else fmt) for p in found]


def iter_payloads(
    source: Source, progress: ProgressFn | None = None
) -> Iterator[tuple[str, bytes]]:
    """Yield `(location, JSON bytes)` for every record of a source.

    Raises:
        InvalidRecordError: the input is malformed (bad JSON, invalid UTF-8, ...).
        InputFormatError: the input holds no record at all.
    """
    readers = {"jsonl": _iter_jsonl, "json": _iter_json_array, "parquet": _iter_parquet}
    reader = readers.get(source.format, _iter_imported)
    count = 0
    for item in reader(source, progress):
        count += 1
        yield item
    source.records = count
    if count == 0:
        raise InputFormatError(f"{source.label}: empty input, no attempt records found")


TEXT_FORMATS = ("jsonl", "json")
"""Formats a person or a script writes as text: a key repeated in an object is refused."""
_UNPARSED = object()


def checked_payload(source: Source, location: str, payload: bytes) -> dict[str, Any]:
    """Return the JSON form of a valid record (every field, defaults applied).

    The payload is parsed once. In text formats a key an object holds twice is refused first
    (a parser keeps only the last). A record of the common, plainly valid shape is checked by
    `registry.importers.fast`; anything else by the model (`validate_payload`), which accepts
    it or names what is wrong, so the messages are the model's.

    Raises:
        InvalidRecordError: the payload is not a valid `registry.attempt/1` record, or holds
            a key twice.
    """
    try:
        parsed = orjson.loads(payload)
    except orjson.JSONDecodeError:
        parsed = _UNPARSED
    if source.format in TEXT_FORMATS:
        if parsed is _UNPARSED:
            _refuse_duplicate_keys(source, location, payload)
        elif (key := duplicate_key(payload, parsed)) is not None:
            raise InvalidRecordError(source.label, location, None, duplicate_key_problem(key))
    if parsed is not _UNPARSED and (record := checked_record(parsed)) is not None:
        return record
    return record_json(validate_payload(source, location, payload))


def validate_payload(source: Source, location: str, payload: bytes) -> AttemptRecord:
    """Return the validated record, or raise a one-line error naming file, location and field.

    Raises:
        InvalidRecordError: the payload is not a valid `registry.attempt/1` record.
    """
    try:
        return AttemptRecord.model_validate_json(payload)
    except ValidationError as exc:
        field_name, problem = describe_error(_most_telling(exc.errors()))
        raise InvalidRecordError(source.label, location, field_name, problem) from None


def complete_envelope(source: Source, location: str, record: dict[str, Any]) -> dict[str, Any]:
    """Return a validated record with `--envelope` values in its null envelope fields.

    An imported record's terminal identity is recomputed (the importer derived it from what it
    read). A native record that carries a terminal identity cannot be completed: its writer
    bound that identity to the envelope as written.

    Raises:
        EnvelopeConflictError: the record holds a different value for a supplied key.
        InvalidRecordError: a native record with a terminal identity would need completing.
    """
    completed = source.context.complete_envelope(record, f"{source.label}:{location}")
    if completed["envelope"] == record["envelope"]:
        return completed
    if source.format in MODULES:
        return with_identity(completed)
    if record.get("terminal_identity") is not None:
        missing = [k for k, v in record["envelope"].items() if v != completed["envelope"][k]]
        raise InvalidRecordError(
            source.label,
            location,
            "terminal_identity",
            f"the record binds its envelope with a terminal identity, so --envelope cannot fill "
            f"{', '.join('envelope.' + k for k in missing)}; write the value into the record",
        )
    return completed


_ERROR_PRIORITY = {"json_invalid": 0, "extra_forbidden": 1}


def _most_telling(errors: list[Any]) -> Any:
    """Return the error to show: malformed JSON, then an unknown field, then the first other.

    A typo'd field also produces a "missing" error for the field it meant; the unknown field
    (with its did-you-mean hint) explains both. Pydantic's own order varies between versions.
    """
    ranked = sorted(enumerate(errors), key=lambda e: (_ERROR_PRIORITY.get(e[1]["type"], 2), e[0]))
    return ranked[0][1]


def describe_error(error: Any) -> tuple[str | None, str]:
    """Return `(dotted field, problem)` for one pydantic error, saying what would be valid.

    The field is shown with control characters escaped and cut to a readable length, so a
    key holding a line break (or a megabyte of text) still makes a one-line message.
    """
    kind = error["type"]
    if kind == "json_invalid":
        detail = str(error["ctx"]["error"]).replace(" at line 1 column ", " at column ")
        return None, f"malformed JSON ({printable(detail)})"
    loc = _field_path(error["loc"], keep_last=kind == "extra_forbidden")
    dotted = printable(".".join(loc), _SHOWN_FIELD) or None
    if kind == "extra_forbidden" and loc:
        valid = list(_model_at(loc[:-1]).model_fields)
        # difflib is quadratic: a long unknown name is no typo of a field name anyway
        close = difflib.get_close_matches(loc[-1], valid, n=1) if len(loc[-1]) < 100 else []
        hint = f"did you mean '{close[0]}'? " if close else ""
        return dotted, f"unknown field; {hint}valid fields here: {', '.join(valid)}"
    if kind == "missing":
        return dotted, "required field is missing"
    shown = error.get("input")
    got = "" if isinstance(shown, dict | list) else f" (got {json.dumps(shown)[:80]})"
    return dotted, f"{error['msg']}{got}"


_SHOWN_FIELD = 120


def _field_path(loc: tuple[Any, ...], keep_last: bool) -> list[str]:
    """Return the input's own keys in a pydantic location, without union-member tags.

    Pydantic names the member of a union it tried (`str`, `function-after[...]`) inside the
    location; an input key may be spelled the same (an unknown field called `float`, a label
    called `int`), so the key after a dict field and the unknown field itself are kept.
    """
    parts: list[str] = []
    for index, part in enumerate(loc):
        key_of_dict = len(parts) == 1 and parts[0] in MAP_FIELDS and index == 1
        last = keep_last and index == len(loc) - 1
        if key_of_dict or last or not _is_union_tag(part):
            parts.append(str(part))
    return parts


def _model_at(loc: list[str]) -> type[BaseModel]:
    nested: dict[str, type[BaseModel]] = {"inputs": CohortInputs, "envelope": Envelope}
    return nested.get(loc[-1], AttemptRecord) if loc else AttemptRecord


def _is_union_tag(part: Any) -> bool:
    return isinstance(part, str) and ("[" in part or part in {"str", "dict", "float", "int"})


def _ingestible(path: Path, top: Path) -> bool:
    hidden = any(part.startswith(".") for part in path.relative_to(top).parts)
    return path.is_file() and not hidden and path.suffix.lower() in _SUFFIXES


def _detect(path: Path) -> str:
    if path.suffix.lower() in (".json", ".eval") and (name := detect_importer(path)):
        return name
    by_suffix = _SUFFIXES.get(path.suffix.lower())
    with open(path, "rb") as handle:
        head = handle.read(4096)
    if head.startswith(b"PAR1"):
        return "parquet"
    if by_suffix == "json" and head.lstrip()[:1] != b"[" and _first_line_is_object(path):
        return "jsonl"  # a .json file holding one object per line
    if by_suffix:
        return by_suffix
    first = head.lstrip()[:1]
    if first == b"[":
        return "json"
    if first == b"{" or not head:
        return "jsonl"
    raise InputFormatError(
        f"{path}: cannot tell the format; name it .jsonl, .json or .parquet or pass --format"
    )


def _first_line_is_object(path: Path) -> bool:
    """Whether a file's first non-blank line is a whole JSON object (JSON Lines, not pretty)."""
    with open(path, "rb") as handle:
        for line in handle:
            if line.strip():
                try:
                    return isinstance(orjson.loads(line), dict)
                except orjson.JSONDecodeError:
                    return False
    return True


def _open_binary(source: Source) -> BinaryIO:
    return open(source.path, "rb") if source.path else sys.stdin.buffer


def _read_chunks(source: Source, progress: ProgressFn | None) -> Iterator[bytes]:
    handle = _open_binary(source)
    try:
        while chunk := handle.read(_CHUNK):
            source._hasher.update(chunk)
            if progress:
                progress(len(chunk))
            yield chunk
    finally:
        if source.path:
            handle.close()


def _iter_jsonl(source: Source, progress: ProgressFn | None) -> Iterator[tuple[str, bytes]]:
    pending = b""
    number = 0
    for chunk in _read_chunks(source, progress):
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        for line in lines:
            number += 1
            if item := _jsonl_item(source, number, line):
                yield item
    if pending and (item := _jsonl_item(source, number + 1, pending)):
        yield item


def _jsonl_item(source: Source, number: int, line: bytes) -> tuple[str, bytes] | None:
    if not line.strip():
        return None
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        problem = f"invalid UTF-8 at byte {exc.start} of the line; inputs must be UTF-8"
        raise InvalidRecordError(source.label, f"line {number}", None, problem) from None
    return f"line {number}", line  # duplicate keys: `checked_payload`


def _refuse_duplicate_keys(source: Source, location: str, payload: bytes) -> None:
    """Refuse a record in which an object holds a key twice (a parser keeps only the last)."""
    if (key := duplicate_key(payload)) is not None:
        raise InvalidRecordError(source.label, location, None, duplicate_key_problem(key))


def _iter_json_array(source: Source, progress: ProgressFn | None) -> Iterator[tuple[str, bytes]]:
    """Stream a top-level JSON array (or one object) without loading the whole file.

    A small state machine over decoded text: `open` expects `[` (or `{` for a single record),
    `first` a value or `]`, `value` a value, `sep` a `,` or `]`, `end` only whitespace.
    """
    decoder = json.JSONDecoder()
    utf8 = codecs.getincrementaldecoder("utf-8")()
    chunks = _read_chunks(source, progress)
    text, state, line, index, eof = "", "open", 1, 0, False
    while not eof:
        try:
            text += utf8.decode(next(chunks))
        except StopIteration:
            eof = True
        except UnicodeDecodeError:
            _malformed(source, line, "invalid UTF-8; inputs must be UTF-8")
        if eof:
            try:
                text += utf8.decode(b"", final=True)
            except UnicodeDecodeError:
                _malformed(source, line, "invalid UTF-8; inputs must be UTF-8")
        pos = 0
        while True:
            pos, line = _skip_space(text, pos, line)
            if pos >= len(text):
                break
            char = text[pos]
            if state == "open" and char == "[":
                state, pos = "first", pos + 1
            elif state in ("first", "sep") and char == "]":
                state, pos = "end", pos + 1
            elif state == "sep" and char == ",":
                state, pos = "value", pos + 1
            elif state in ("first", "value") or (state == "open" and char == "{"):
                try:
                    _, end = decoder.raw_decode(text, pos)
                except json.JSONDecodeError as exc:
                    if not eof:
                        break  # the element may continue in the next chunk
                    _malformed(source, line, exc.msg)
                except RecursionError:
                    raise InvalidRecordError(
                        source.label, f"line {line}", None, _TOO_DEEP
                    ) from None
                index += 1
                yield f"line {line} (item {index})", text[pos:end].encode()
                line += text.count("\n", pos, end)
                pos, state = end, "end" if state == "open" else "sep"
            else:
                _malformed(source, line, _JSON_EXPECTED[state] + f", found {char!r}")
        text = text[pos:]
    if state not in ("end", "open"):
        _malformed(source, line, "unterminated array")


_TOO_DEEP = "JSON nested too deeply to read; an attempt record nests only a few levels"
_JSON_EXPECTED = {
    "open": "expected a top-level array or object",
    "sep": "expected ',' or ']' between items",
    "end": "data after the end of the JSON value",
}


def _malformed(source: Source, line: int, problem: str) -> NoReturn:
    raise InvalidRecordError(source.label, f"line {line}", None, f"malformed JSON ({problem})")


def _skip_space(text: str, pos: int, line: int) -> tuple[int, int]:
    while pos < len(text) and text[pos] in " \t\r\n":
        line += text[pos] == "\n"
        pos += 1
    return pos, line


def _iter_parquet(source: Source, progress: ProgressFn | None) -> Iterator[tuple[str, bytes]]:
    assert source.path is not None
    for chunk in _read_chunks(source, progress):
        del chunk  # hashing pass; the rows are read through pyarrow below
    number = 0
    batches = iter(read_parquet_batches(source.path, _PARQUET_BATCH))
    while True:
        try:
            batch = next(batches, None)
        except _PARQUET_ERRORS as exc:
            raise _unreadable_parquet(source, exc) from None
        if batch is None:
            return
        _refuse_duplicate_columns(source, batch.schema)
        for row in _batch_rows(source, batch, number):
            number += 1
            yield f"row {number}", _row_json(source, f"row {number}", row)


# What pyarrow raises for a damaged file: its own errors, and Python's while converting values.
_VALUE_ERRORS = (UnicodeDecodeError, ValueError, OverflowError, TypeError, KeyError, IndexError)
_PARQUET_ERRORS = (pa.ArrowException, OSError, *_VALUE_ERRORS)


def _unreadable_parquet(source: Source, exc: BaseException) -> InputFormatError:
    text = str(exc).strip()
    first = printable(text.splitlines()[0], 200) if text else type(exc).__name__
    return InputFormatError(f"{source.label}: not a readable Parquet file ({first})")


def _refuse_duplicate_columns(source: Source, schema: pa.Schema) -> None:
    """Refuse two columns (or two struct fields) of one name: a row would keep only one."""
    pending: list[tuple[str, list[pa.Field]]] = [("", list(schema))]
    while pending:
        prefix, fields = pending.pop()
        seen: set[str] = set()
        for item in fields:
            if item.name in seen:
                shown = printable(prefix + item.name, _SHOWN_FIELD)
                raise InvalidRecordError(
                    source.label, None, None, f"duplicate column '{shown}'; each may appear once"
                )
            seen.add(item.name)
            if pa.types.is_struct(item.type):
                pending.append((f"{prefix}{item.name}.", list(item.type)))


def _batch_rows(source: Source, batch: pa.RecordBatch, before: int) -> list[dict[str, Any]]:
    """Return a batch's rows as Python values; a value pyarrow cannot convert names its cell."""
    try:
        rows: list[dict[str, Any]] = batch.to_pylist()
        return rows
    except pa.ArrowException as exc:
        raise _unreadable_parquet(source, exc) from None
    except _VALUE_ERRORS as exc:
        failure: BaseException = exc
    for index, name in enumerate(batch.schema.names):
        column = batch.column(index)
        for row in range(len(column)):
            try:
                column[row].as_py()
            except _PARQUET_ERRORS as exc:
                raise InvalidRecordError(
                    source.label,
                    f"row {before + row + 1}",
                    printable(name, _SHOWN_FIELD),
                    _conversion_problem(exc),
                ) from None
    raise _unreadable_parquet(source, failure)


def _conversion_problem(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "invalid UTF-8 in a string value; inputs must be UTF-8"
    if isinstance(exc, OverflowError) or "out of range" in str(exc):
        return "value out of range (timestamps must fall in the years 1-9999)"
    text = str(exc).strip()
    detail = printable(text.splitlines()[0], 200) if text else type(exc).__name__
    return f"cannot be read ({detail})"


def _row_json(source: Source, location: str, row: dict[str, Any]) -> bytes:
    """Return a Parquet row as JSON; values JSON cannot hold exactly are errors, not nulls."""
    for name in MAP_FIELDS:
        value = row.get(name)
        if isinstance(value, list):
            # pyarrow gives a map as (key, value) tuples; any other list is not a map
            if not all(isinstance(pair, tuple) and len(pair) == 2 for pair in value):
                raise InvalidRecordError(
                    source.label,
                    location,
                    name,
                    "must be a map of string to string (a Parquet map or struct), not a list",
                )
            row[name] = dict(value)
            if len(row[name]) != len(value):
                key = next(k for i, (k, _) in enumerate(value) if k in dict(value[:i]))
                shown = printable(f"{name}.{key}", _SHOWN_FIELD)
                problem = f"duplicate key '{shown}' in a map; each key may appear once"
                raise InvalidRecordError(source.label, location, None, problem)
    for name, value in row.items():
        _check_value(source, location, name, value)
    try:
        return orjson.dumps(row, default=_timestamp_text)
    except TypeError as exc:
        raise InvalidRecordError(source.label, location, None, str(exc)) from None


_JSON_TYPES = (str, int, float, bool, type(None), datetime, date, time)


def _check_value(source: Source, location: str, path: str, value: Any) -> None:
    # orjson writes NaN as null, which would silently turn a broken cost into "unavailable".
    if isinstance(value, float) and not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else str(value)
        raise InvalidRecordError(
            source.label,
            location,
            printable(path, _SHOWN_FIELD),
            f"Input should be a finite number (got {shown})",
        )
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidRecordError(
                    source.label,
                    location,
                    printable(path, _SHOWN_FIELD),
                    f"map keys must be strings (got {type(key).__name__} keys)",
                )
            _check_value(source, location, f"{path}.{key}", item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_value(source, location, path, item)
    elif isinstance(value, Decimal | bytes) or not isinstance(value, _JSON_TYPES):
        kind = {Decimal: "decimal", bytes: "binary", timedelta: "duration"}.get(
            type(value), type(value).__name__
        )
        raise InvalidRecordError(
            source.label,
            location,
            printable(path, _SHOWN_FIELD),
            f"{kind} values are not part of registry.attempt/1; write strings, 64-bit numbers, "
            "booleans, structs, lists or timestamps",
        )


def _timestamp_text(value: Any) -> str:
    # pandas writes timestamp[ns]; pyarrow hands those back as pandas Timestamps.
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"values of type {type(value).__name__} are not part of registry.attempt/1")


def _iter_imported(source: Source, progress: ProgressFn | None) -> Iterator[tuple[str, bytes]]:
    """Read a harness's output through its importer; the source digest covers every file."""
    assert source.path is not None
    source._digest = _tree_digest(source.path, progress)
    importer = get_importer(source.format)
    for location, record in importer.read(source.path, source.context):
        try:
            payload = orjson.dumps(record)
        except orjson.JSONEncodeError as exc:  # an integer beyond 64 bits, say
            problem = f"holds a value JSON cannot carry ({exc}); integers must be within ±2^53"
            raise InvalidRecordError(source.label, location, None, problem) from None
        yield location, payload


def _tree_digest(path: Path, progress: ProgressFn | None = None) -> str:
    """Digest of a file, or of every file of a folder by relative path; reports bytes hashed."""
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    digests = []
    for file in files:
        digests.append([file.relative_to(path).as_posix(), digest_file(file)])
        if progress is not None:
            progress(file.stat().st_size)
    return digests[0][1] if path.is_file() else digest_json(digests)
