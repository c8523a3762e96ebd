"""Property-based fuzzing of every input `registry ingest` reads (see tests/fuzz/harness.py).

Inputs: JSON Lines, a JSON array, a single JSON object, standard input, Parquet, and the
output of every harness importer (inspect logs, Harbor jobs, terminal-bench runs, SWE-bench
reports), each built from valid seeds and then damaged: mutated bytes, wrong types, deep
nesting, huge values, invalid UTF-8, byte-order marks, NUL bytes, duplicate keys, truncation,
damaged Parquet, wrongly typed or missing Parquet columns, nested nulls.

Profiles: the default run tries a few dozen inputs per format (derandomised, so it never
flakes); `REGISTRY_FUZZ_PROFILE=long` with `-m slow` runs `test_long_profile`, at least
101,000 inputs over all formats (`REGISTRY_FUZZ_EXAMPLES` scales it).
"""

from __future__ import annotations

import copy
import io
import json
import os
import re
import shutil
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzz.harness import (
    Registry,
    Stats,
    importer_fixture,
    run_ingest,
    seed_records,
    settle,
)

LONG = os.environ.get("REGISTRY_FUZZ_PROFILE") == "long"
SEEDS = seed_records()

# Share of the long profile's inputs by format; the short profile runs SHORT of each.
WEIGHTS = {
    "jsonl": 0.307,
    "json-array": 0.17,
    "json-object": 0.15,
    "stdin": 0.14,
    "parquet": 0.15,
    "harbor": 0.025,
    "terminal-bench": 0.025,
    "swebench": 0.025,
    "inspect": 0.008,
}
SHORT = {"inspect": 8, "parquet": 30}
SHORT_DEFAULT = 30
LONG_TOTAL = int(os.environ.get("REGISTRY_FUZZ_EXAMPLES", "101000"))


COMMON: dict[str, Any] = {
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
    "print_blob": True,
}
ROUND = 20_000  # the long profile runs hypothesis in rounds of at most this many inputs


def _drive(kind: str, stats: Stats, body: Callable[..., None], **strategies: Any) -> None:
    """Run `body` under hypothesis: SHORT inputs, or (long profile) rounds up to its share.

    Hypothesis stops a run early once new inputs mostly repeat earlier ones, so the long
    profile starts fresh rounds (new random seeds) until the share of inputs is reached.
    """
    if not LONG:
        short = settings(max_examples=SHORT.get(kind, SHORT_DEFAULT), derandomize=True, **COMMON)
        short(given(**strategies)(body))()
        return
    target = max(1, round(LONG_TOTAL * WEIGHTS[kind]))
    while (done := stats.counts["inputs"]) < target:
        rounds = settings(max_examples=min(target - done, ROUND), **COMMON)
        rounds(given(**strategies)(body))()
        if stats.counts["inputs"] == done:
            break


# --- values and mutations ---------------------------------------------------------------

SPECIAL = [
    b"\x00",
    b"\xff",
    b"\xfe\xff",
    b"\xef\xbb\xbf",
    b"\r",
    b"\n",
    b"\r\n",
    b'"',
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\\",
    b"\\u0000",
    b"\\ud800",
    b"\xc3",
    b"\xed\xa0\x80",
    b"NaN",
    b"-Infinity",
    b"1e999",
    b"123456789012345678901234567890",
    b"\x1b]0;title\x07",
    b"\xe2\x80\xa8",
    b'"task_id": "dup", ',
    b"null",
    b"[]",
    b"{}",
]
STRINGS = [
    "",
    "\n",
    "a\r\nb",
    "\x1b[31mred\x1b[0m",
    "\x00",
    "resolved",
    "blake3:" + "0" * 64,
    "2026-11-02T09:00:00Z",
    "9999-12-31T23:59:59Z",
    "x" * 70_000,
    "\ud800",
    "\u202e",
]
KEY_NAMES = [
    "task_id",
    "inputs",
    "envelope",
    "labels",
    "budget",
    "str",
    "int",
    "dict",
    "float",
    "x[0]",
    "a\nb",
    "a\rb",
    "\x1b[2J",
    "0",
    "",
]
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(STRINGS)
)
KEYS = st.text(max_size=8) | st.sampled_from(KEY_NAMES)
VALUES = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=6,
)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, (*prefix, index))


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def _deep_marker(depth: int, as_list: bool) -> str:
    """A placeholder string that `_dumps` replaces with `depth` nested arrays or objects."""
    return f"@deep:{depth}:{'list' if as_list else 'dict'}@"


def _expand_deep(text: str) -> str:
    while (start := text.find('"@deep:')) >= 0:
        end = text.index('@"', start) + 2
        _, depth, kind = text[start + 1 : end - 2].split(":")
        opening, closing = ("[", "]") if kind == "list" else ('{"a":', "}")
        text = text[:start] + opening * int(depth) + "1" + closing * int(depth) + text[end:]
    return text


@st.composite
def mutated_json(draw: st.DrawFn, doc: Any, max_ops: int = 3) -> Any:
    """Apply 0..max_ops structural mutations to a deep copy of a JSON document."""
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(0, max_ops))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        op = draw(st.sampled_from(["set", "set", "delete", "add", "deep", "huge", "null"]))
        if op == "delete":
            del parent[path[-1]]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(KEYS)] = draw(VALUES)
        elif op == "deep":
            depth = draw(st.sampled_from([20, 200, 1000, 3000, 100_000]))
            parent[path[-1]] = _deep_marker(depth, draw(st.booleans()))
        elif op == "huge":
            parent[path[-1]] = draw(
                st.sampled_from(["y" * 100_000, 2**64, -(2**63) - 1, 1.7e308, 10**400, 5e-324])
            )
        elif op == "null":
            parent[path[-1]] = None
        else:
            parent[path[-1]] = draw(VALUES)
    return doc


def _dumps(draw: st.DrawFn, doc: Any, indent: int | None = None) -> bytes:
    try:
        text = json.dumps(doc, allow_nan=True, ensure_ascii=draw(st.booleans()), indent=indent)
    except (ValueError, RecursionError):
        text = "[" * 2000 + "]" * 2000
    return _expand_deep(text).encode("utf-8", "surrogatepass")


def _duplicate_key(draw: st.DrawFn, data: bytes) -> bytes:
    """Insert a repeated member after the opening brace of some object of the text."""
    braces = [m.start() for m in re.finditer(b"{", data[:20_000])]
    if not braces:
        return data
    at = draw(st.sampled_from(braces)) + 1
    key = draw(st.sampled_from(["task_id", "inputs", "budget", "agent", "temperature", "a"]))
    value = draw(st.sampled_from([b'"x"', b"1", b"null", b"{}"]))
    member = b'"' + key.encode() + b'": ' + value + b", "
    if draw(st.booleans()):  # the same key twice in the inserted text too
        member = member * 2
    return data[:at] + member + data[at:]


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes, max_ops: int = 3) -> bytes:
    """Apply 0..max_ops byte-level mutations."""
    for _ in range(draw(st.integers(0, max_ops))):
        op = draw(st.sampled_from(["flip", "insert", "insert", "delete", "truncate", "dupkey"]))
        at = draw(st.integers(0, len(data)))
        if op == "flip" and data:
            at = min(at, len(data) - 1)
            bit = 1 << draw(st.integers(0, 7))
            data = data[:at] + bytes([data[at] ^ bit]) + data[at + 1 :]
        elif op == "insert":
            data = data[:at] + draw(st.sampled_from(SPECIAL)) + data[at:]
        elif op == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 16)) :]
        elif op == "truncate":
            data = data[:at]
        elif op == "dupkey":
            data = _duplicate_key(draw, data)
    return data


@st.composite
def record_texts(draw: st.DrawFn, indent: int | None = None) -> list[bytes]:
    """1-3 records, each valid or mutated, as JSON texts."""
    texts = []
    for _ in range(draw(st.integers(1, 3))):
        doc = draw(mutated_json(draw(st.sampled_from(SEEDS))))
        text = _dumps(draw, doc, indent)
        if draw(st.integers(0, 3)) == 0:
            text = _duplicate_key(draw, text)
        texts.append(text)
    return texts


@st.composite
def jsonl_inputs(draw: st.DrawFn) -> bytes:
    separator = draw(st.sampled_from([b"\n", b"\r\n", b"\n\n"]))
    data = separator.join(draw(record_texts())) + draw(st.sampled_from([b"", b"\n"]))
    return draw(mutated_bytes(data))


@st.composite
def json_array_inputs(draw: st.DrawFn) -> bytes:
    indent = draw(st.sampled_from([None, 2]))
    data = b"[\n" + b",\n".join(draw(record_texts(indent))) + b"\n]"
    return draw(mutated_bytes(data))


@st.composite
def json_object_inputs(draw: st.DrawFn) -> bytes:
    doc = draw(mutated_json(draw(st.sampled_from(SEEDS))))
    data = _dumps(draw, doc, indent=2)  # pretty: read as one object, not JSON Lines
    if draw(st.integers(0, 3)) == 0:
        data = _duplicate_key(draw, data)
    return draw(mutated_bytes(data))


# --- Parquet -------------------------------------------------------------------------------


def _column_makers() -> dict[str, Callable[[int], pa.Array]]:
    return {
        "int64": lambda n: pa.array([7] * n, pa.int64()),
        "uint64-huge": lambda n: pa.array([2**64 - 1] * n, pa.uint64()),
        "int8": lambda n: pa.array([-1] * n, pa.int8()),
        "float": lambda n: pa.array([1.5] * n, pa.float64()),
        "nan": lambda n: pa.array([float("nan")] * n, pa.float64()),
        "inf": lambda n: pa.array([float("-inf")] * n, pa.float32()),
        "string": lambda n: pa.array(["x"] * n, pa.string()),
        "control-string": lambda n: pa.array(["a\nb\x1b[2J"] * n, pa.string()),
        "large-string": lambda n: pa.array(["resolved"] * n, pa.large_string()),
        "dictionary": lambda n: pa.array(["resolved"] * n).dictionary_encode(),
        "binary": lambda n: pa.array([b"\xff\xfe"] * n, pa.binary()),
        "fixed-binary": lambda n: pa.array([b"ab"] * n, pa.binary(2)),
        "bool": lambda n: pa.array([True] * n, pa.bool_()),
        "null": lambda n: pa.nulls(n),
        "nulls-of-string": lambda n: pa.nulls(n, pa.string()),
        "decimal": lambda n: pa.array([Decimal("1.25")] * n, pa.decimal128(5, 2)),
        "date": lambda n: pa.array([0] * n, pa.date32()),
        "time": lambda n: pa.array([1] * n, pa.time64("us")),
        "timestamp": lambda n: pa.array([1] * n, pa.timestamp("ns")),
        "timestamp-tz": lambda n: pa.array([1] * n, pa.timestamp("s", tz="UTC")),
        "timestamp-max": lambda n: pa.array([2**62] * n, pa.timestamp("us")),
        "duration": lambda n: pa.array([5] * n, pa.duration("s")),
        "list-string": lambda n: pa.array([["a", "b"]] * n, pa.list_(pa.string())),
        "list-int": lambda n: pa.array([[1, 2]] * n, pa.list_(pa.int64())),
        "list-pairs": lambda n: pa.array([[["a", "b"]]] * n, pa.list_(pa.list_(pa.string()))),
        "list-null-items": lambda n: pa.array([[None]] * n, pa.list_(pa.string())),
        "struct": lambda n: pa.array([{"a": 1}] * n, pa.struct([("a", pa.int64())])),
        "struct-nulls": lambda n: pa.array(
            [{"agent": None, "model": None}] * n,
            pa.struct([("agent", pa.string()), ("model", pa.string())]),
        ),
        "map-string": lambda n: pa.array([[("k", "v")]] * n, pa.map_(pa.string(), pa.string())),
        "map-int": lambda n: pa.array([[("k", 1)]] * n, pa.map_(pa.string(), pa.int64())),
        "map-null-values": lambda n: pa.array(
            [[("k", None)]] * n, pa.map_(pa.string(), pa.string())
        ),
        "map-int-keys": lambda n: pa.array([[(1, "v")]] * n, pa.map_(pa.int64(), pa.string())),
        "union": lambda n: pa.UnionArray.from_sparse(
            pa.array([0] * n, pa.int8()), [pa.array(["x"] * n), pa.array([1] * n)]
        ),
    }


MAKERS = _column_makers()


def _nested_null(table: pa.Table, index: int) -> pa.Table:
    """Null out one child of a struct column (e.g. envelope.agent, inputs.budget)."""
    name = table.schema.field(index).name
    column = table.column(index).combine_chunks()
    if not pa.types.is_struct(column.type) or column.type.num_fields == 0:
        return table
    children = [column.field(i) for i in range(column.type.num_fields)]
    children[0] = pa.nulls(len(column), children[0].type)
    rebuilt = pa.StructArray.from_arrays(children, fields=list(column.type))
    return table.set_column(index, name, rebuilt)


@st.composite
def parquet_inputs(draw: st.DrawFn) -> bytes:
    records = [draw(st.sampled_from(SEEDS)) for _ in range(draw(st.integers(1, 3)))]
    try:
        table = pa.Table.from_pylist(records)
    except (pa.ArrowException, ValueError, TypeError):
        table = pa.Table.from_pylist([SEEDS[0]])
    for _ in range(draw(st.integers(0, 3))):
        width = table.num_columns
        op = draw(st.sampled_from(["retype", "retype", "drop", "add", "nested-null", "dup"]))
        index = draw(st.integers(0, width - 1)) if width else 0
        name = table.schema.field(index).name if width else "task_id"
        if op == "drop" and width:
            table = table.remove_column(index)
        elif op == "retype" and width:
            column = MAKERS[draw(st.sampled_from(sorted(MAKERS)))](len(table))
            table = table.set_column(index, name, column)
        elif op == "add":
            column = MAKERS[draw(st.sampled_from(sorted(MAKERS)))](len(table))
            table = table.append_column(draw(KEYS) or "extra", column)
        elif op == "dup" and width:
            table = table.append_column(name, table.column(index))
        elif op == "nested-null" and width:
            table = _nested_null(table, index)
    buffer = io.BytesIO()
    try:
        pq.write_table(table, buffer)
    except (pa.ArrowException, ValueError, TypeError):
        pq.write_table(pa.Table.from_pylist([SEEDS[0]]), buffer)
    data = buffer.getvalue()
    if draw(st.integers(0, 2)) == 0:
        data = draw(mutated_bytes(data, max_ops=2))
    return data


# --- importers -----------------------------------------------------------------------------


@contextmanager
def _working_copy(name: str) -> Iterator[Path]:
    """A private copy of an importer's fixture, writable so files can be swapped in place."""
    reg = Registry()
    copy_of = reg.work / "input"
    fixture = importer_fixture(name)
    if fixture.is_file():
        copy_of.mkdir()
        shutil.copy(fixture, copy_of / fixture.name)
    else:
        shutil.copytree(fixture, copy_of, symlinks=True)
    try:
        yield copy_of
    finally:
        reg.close()


def _importer_files(top: Path) -> list[Path]:
    files = sorted(p for p in top.rglob("*") if p.is_file())
    json_files = [p for p in files if p.suffix in (".json", ".eval")]
    return json_files or files


@st.composite
def file_damage(draw: st.DrawFn, original: bytes, suffix: str) -> bytes:
    """A damaged version of one file of a harness's output."""
    if suffix == ".eval":
        return draw(eval_damage(original))
    if suffix == ".json" and draw(st.integers(0, 2)) > 0:
        try:
            doc = json.loads(original)
        except ValueError:
            doc = None
        if doc is not None:
            return _dumps(draw, draw(mutated_json(doc, max_ops=4)))
    return draw(mutated_bytes(original))


@st.composite
def eval_damage(draw: st.DrawFn, original: bytes) -> bytes:
    """Damage an inspect `.eval` log: its zip bytes, or one JSON member rewritten."""
    if draw(st.integers(0, 2)) == 0:
        return draw(mutated_bytes(original, max_ops=2))
    with zipfile.ZipFile(io.BytesIO(original)) as archive:
        members = {info.filename: archive.read(info) for info in archive.infolist()}
    json_members = sorted(n for n in members if n.endswith(".json"))
    if not json_members:
        return original
    name = draw(st.sampled_from(json_members))
    try:
        doc = json.loads(members[name])
        members[name] = _dumps(draw, draw(mutated_json(doc, max_ops=4)))
    except ValueError:
        members[name] = draw(mutated_bytes(members[name]))
    if draw(st.integers(0, 3)) == 0:
        members[name] = draw(mutated_bytes(members[name], max_ops=2))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return out.getvalue()


# --- the tests -----------------------------------------------------------------------------


def _file_test(kind: str, strategy: st.SearchStrategy[bytes], suffix: str) -> Stats:
    stats, reg = Stats(kind), Registry()
    path = reg.work / f"input{suffix}"

    def check(data: bytes) -> None:
        path.write_bytes(data)
        settle(run_ingest(reg, [str(path)]), stats, {path.name: data}, kind)

    try:
        _drive(kind, stats, check, data=strategy)
    finally:
        reg.close()
        stats.write()
    return stats


def _stdin_test() -> Stats:
    stats, reg = Stats("stdin"), Registry()

    def check(data: bytes) -> None:
        settle(run_ingest(reg, ["-"], stdin=data), stats, {"stdin.jsonl": data}, "stdin")

    try:
        _drive("stdin", stats, check, data=jsonl_inputs())
    finally:
        reg.close()
        stats.write()
    return stats


def _importer_test(name: str) -> Stats:
    stats, reg = Stats(name), Registry()
    with _working_copy(name) as top:
        files = _importer_files(top)

        def check(data: st.DataObject) -> None:
            target = data.draw(st.sampled_from(files))
            original = target.read_bytes()
            damaged = data.draw(file_damage(original, target.suffix))
            target.write_bytes(damaged)
            try:
                outcome = run_ingest(reg, [str(top), "--format", name])
                settle(outcome, stats, top, name)
            finally:
                target.write_bytes(original)

        try:
            _drive(name, stats, check, data=st.data())
        finally:
            reg.close()
            stats.write()
    return stats


FILE_KINDS = {
    "jsonl": (jsonl_inputs(), ".jsonl"),
    "json-array": (json_array_inputs(), ".json"),
    "json-object": (json_object_inputs(), ".json"),
    "parquet": (parquet_inputs(), ".parquet"),
}
IMPORTERS = ["harbor", "terminal-bench", "swebench", "inspect"]


def _run_kind(kind: str) -> Stats:
    if kind in FILE_KINDS:
        strategy, suffix = FILE_KINDS[kind]
        return _file_test(kind, strategy, suffix)
    if kind == "stdin":
        return _stdin_test()
    if kind == "inspect":
        pytest.importorskip("inspect_ai")
    return _importer_test(kind)


@pytest.mark.skipif(LONG, reason="the long profile runs in test_long_profile")
@pytest.mark.parametrize("kind", sorted(WEIGHTS))
def test_fuzz_short_profile(kind: str) -> None:
    stats = _run_kind(kind)
    assert stats.counts["failures"] == 0
    assert stats.counts["inputs"] >= SHORT.get(kind, SHORT_DEFAULT) // 2


@pytest.mark.slow
@pytest.mark.timeout(
    0
)  # tens of thousands of inputs: the suite-wide per-test limit is not for this
@pytest.mark.skipif(not LONG, reason="set REGISTRY_FUZZ_PROFILE=long")
@pytest.mark.parametrize("kind", sorted(WEIGHTS))
def test_long_profile(kind: str) -> None:
    stats = _run_kind(kind)
    assert stats.counts["failures"] == 0
