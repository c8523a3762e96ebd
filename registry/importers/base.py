"""What every harness importer shares: the reader protocol, cohort-input filling, warnings.

An importer turns what a harness already writes into `registry.attempt/1` records in their
JSON form; the records then go through exactly the validation, digests and all-or-nothing
commit of any other ingest. Fields a source does not record become the explicit value
`unknown` (never a guess), and the importer records which cohort inputs were unknown so the
user is warned and can supply them with `--input KEY=VALUE` or `--inputs FILE`. Observed
identity a source lacks stays null; the user may supply it with `--envelope KEY=VALUE`, which
fills only what is null and never overrides what the source recorded. docs/importers/README.md
says what each cohort input identifies, so where each harness field goes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import orjson
import rfc8785

from registry.errors import InputFormatError
from registry.evidence.keys import cohort_key_of, terminal_identity_of
from registry.render.text import inert
from registry_schemas import CohortInputs, Envelope

UNKNOWN = "unknown"
INPUT_KEYS = tuple(CohortInputs.model_fields)
ENVELOPE_KEYS = tuple(Envelope.model_fields)
_RUNS_SHOWN = 10


class EnvelopeConflictError(InputFormatError):
    """`--envelope` gives a value that differs from the one the source records."""


class Importer(Protocol):
    """A reader of one harness's output."""

    name: str
    """The `--format` name."""

    def detect(self, path: Path) -> bool:
        """Whether `path` (a file or directory) looks like this harness's output."""
        ...

    def read(self, path: Path, context: ImportContext) -> Iterator[tuple[str, dict[str, Any]]]:
        """Yield `(location, record JSON form)` for every attempt found under `path`."""
        ...


@dataclass
class ImportContext:
    """Per-ingest state shared by importers: user-supplied inputs and what was unknown."""

    overrides: dict[str, Any] = field(default_factory=dict)
    envelope: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, set[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    unobserved_model: dict[str, int] = field(default_factory=dict)
    """Attempts whose envelope records no model, by experiment id (run)."""

    def inputs(self, source: str, found: dict[str, Any]) -> dict[str, Any]:
        """Return the ten cohort inputs: user overrides, then values found, else `unknown`."""
        out = {}
        for key in INPUT_KEYS:
            if key in self.overrides:
                out[key] = self.overrides[key]
            elif found.get(key) not in (None, ""):
                out[key] = found[key]
            else:
                out[key] = UNKNOWN
                self.unknown.setdefault(source, set()).add(key)
        return out

    def complete_envelope(self, record: dict[str, Any], where: str) -> dict[str, Any]:
        """Return the record with `--envelope` values filled into its null envelope fields.

        Counts the record under `unobserved_model` when its model stays null.

        Raises:
            EnvelopeConflictError: the record already holds a different value for a key.
        """
        envelope = dict(record["envelope"])
        for key, value in self.envelope.items():
            have = envelope.get(key)
            if have is None:
                envelope[key] = value
            elif have != value:
                raise EnvelopeConflictError(
                    f"{where}: field 'envelope.{key}': the source records {have!r}, not "
                    f"{value!r}; --envelope only supplies what a source leaves empty"
                )
        if envelope.get("model") is None:
            run = str(record["experiment_id"])
            self.unobserved_model[run] = self.unobserved_model.get(run, 0) + 1
        return {**record, "envelope": envelope}

    def warn(self, message: str) -> None:
        """Record a warning for the user (printed on stderr by the CLI)."""
        if message not in self.warnings:
            self.warnings.append(message)

    def summary(self) -> list[str]:
        """Return the warnings, including one line per source with unknown cohort inputs."""
        lines = list(self.warnings)
        for source, keys in sorted(self.unknown.items()):
            lines.append(
                f"{source}: cohort inputs not recorded by the source, set to 'unknown': "
                f"{', '.join(sorted(keys))}; supply them with --input KEY=VALUE or --inputs FILE"
            )
        if self.unobserved_model:
            lines.append(self._unobserved_model_warning())
        return lines

    def _unobserved_model_warning(self) -> str:
        runs = sorted(self.unobserved_model)
        attempts = sum(self.unobserved_model.values())
        shown = ", ".join(runs[:_RUNS_SHOWN])
        if len(runs) > _RUNS_SHOWN:
            shown += f" and {len(runs) - _RUNS_SHOWN} more"
        return (
            f"{attempts} attempt{'s' if attempts != 1 else ''} in {len(runs)} "
            f"run{'s' if len(runs) != 1 else ''} record no model (model unobserved): {shown}; "
            "they are never pooled across runs; supply it with --envelope model=NAME"
        )


def parse_overrides(pairs: list[str], inputs_file: Path | None) -> dict[str, Any]:
    """Parse `--input KEY=VALUE` pairs and an `--inputs` JSON file into cohort-input overrides.

    Raises:
        InputFormatError: an unknown key, a pair without `=`, or an unreadable file.
    """
    overrides: dict[str, Any] = {}
    if inputs_file is not None:
        try:
            data = inputs_file.read_bytes()
            loaded = orjson.loads(data)
        except (OSError, orjson.JSONDecodeError) as exc:
            raise InputFormatError(f"{inputs_file}: not a readable JSON object ({exc})") from None
        if (key := duplicate_key(data, loaded)) is not None:
            raise InputFormatError(f"{inputs_file}: {duplicate_key_problem(key)}")
        if not isinstance(loaded, dict):
            raise InputFormatError(f"{inputs_file}: must hold a JSON object of cohort inputs")
        overrides.update(loaded)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise InputFormatError(f"--input '{pair}' is not KEY=VALUE")
        overrides[key.strip()] = value
    for key in overrides:
        if key not in INPUT_KEYS:
            raise InputFormatError(
                f"unknown cohort input '{key}'; valid keys: {', '.join(INPUT_KEYS)}"
            )
    return overrides


def parse_envelope(pairs: list[str]) -> dict[str, str]:
    """Parse `--envelope KEY=VALUE` pairs into observed-identity values a source lacks.

    Raises:
        InputFormatError: an unknown key, a pair without `=`, an empty value, or a key given
            twice with different values.
    """
    envelope: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep:
            raise InputFormatError(f"--envelope '{pair}' is not KEY=VALUE")
        if key not in ENVELOPE_KEYS:
            raise InputFormatError(
                f"--envelope: unknown key '{key}'; valid keys: {', '.join(ENVELOPE_KEYS)}"
            )
        if not value:
            raise InputFormatError(f"--envelope {key}: empty value; give the {key} that ran")
        if envelope.get(key, value) != value:
            raise InputFormatError(
                f"--envelope {key}: given twice ({envelope[key]!r} and {value!r}); "
                "ingest runs of different identity separately"
            )
        envelope[key] = value
    return envelope


def read_json(path: Path) -> Any:
    """Parse a JSON file, with a one-line error naming it.

    Raises:
        InputFormatError: the file is missing, truncated or not JSON, or an object in it
            holds a key twice.
    """
    try:
        data = path.read_bytes()
        loaded = orjson.loads(data)
    except OSError as exc:
        raise InputFormatError(f"{path}: cannot be read ({exc.strerror})") from None
    except orjson.JSONDecodeError as exc:
        raise InputFormatError(f"{path}: not valid JSON ({exc})") from None
    if (key := duplicate_key(data, loaded)) is not None:
        raise InputFormatError(f"{path}: {duplicate_key_problem(key)}")
    if nested_too_deeply(loaded):
        raise InputFormatError(
            f"{path}: JSON nested more than {MAX_DEPTH} levels deep; a harness's output "
            "nests only a few"
        )
    return loaded


MAX_DEPTH = 100
"""Deepest nesting an importer reads; deeper JSON would exhaust the recursion of readers."""


def nested_too_deeply(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether lists and objects inside `value` nest more than `limit` levels (no recursion)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False


_NO_VALUE = object()
_SHOWN_KEY = 80


class _Pairs(list[tuple[str, Any]]):
    """The members of one JSON object, in order, duplicates kept."""


def duplicate_key(data: bytes, parsed: Any = _NO_VALUE) -> str | None:
    """Return the dotted path of the first key a JSON object of `data` holds twice, or None.

    Parsers keep the last of two equal keys without a word. Counting finds them cheaply:
    outside strings, a colon only ever separates a key from its value, and orjson writes
    every colon inside a string literally, so `data` holds exactly as many colons as its
    re-serialisation unless some object lost a repeated key. Only `\u003a` (an escaped
    colon) breaks that count, so such input, input orjson refuses, and input whose count
    differs take the exact path: a parse that keeps every member. Malformed JSON yields None
    (the record's validation reports it).
    """
    if b"\\u003" not in data:
        try:
            if parsed is _NO_VALUE:
                parsed = orjson.loads(data)
            if data.count(b":") == orjson.dumps(parsed).count(b":"):
                return None
        except (orjson.JSONDecodeError, orjson.JSONEncodeError):
            pass
    try:
        members = json.loads(data, object_pairs_hook=_Pairs)
        return _first_duplicate(members)
    except (ValueError, RecursionError):
        return None


def duplicate_key_problem(path: str) -> str:
    """Return the one-line account of a repeated key."""
    shown = printable(path, _SHOWN_KEY)
    return f"duplicate key '{shown}' in a JSON object; each key may appear once"


def printable(text: str, limit: int | None = None) -> str:
    r"""Return `text` with control characters escaped (a line break becomes `\n`), cut short.

    For names echoed in error messages, so that a key holding a line break, an escape
    sequence or a megabyte of text still makes a one-line message.
    """
    return inert(text, limit)


def _first_duplicate(value: Any, path: str = "") -> str | None:
    """Return the dotted path of the first repeated key, this level before nested ones."""
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, _ in value:
            if key in seen:
                return f"{path}{key}"
            seen.add(key)
        children = [(f"{path}{key}.", item) for key, item in value]
    elif isinstance(value, list):
        children = [(f"{path}{index}.", item) for index, item in enumerate(value)]
    else:
        return None
    for prefix, item in children:
        if (found := _first_duplicate(item, prefix)) is not None:
            return found
    return None


@contextmanager
def hashable_values(where: object) -> Iterator[None]:
    """Turn a value that cannot be hashed as canonical JSON into a one-line error at `where`.

    Importers hash what a harness recorded (configurations, metadata) into cohort inputs;
    RFC 8785 refuses integers beyond 2^53 and non-finite numbers.

    Raises:
        InputFormatError: a value in `where` is outside what canonical JSON can encode.
    """
    try:
        yield
    except rfc8785.CanonicalizationError as exc:
        raise InputFormatError(
            f"{where}: {printable(str(exc), 200)}; values hashed into cohort inputs must be "
            "finite numbers, integers within ±2^53"
        ) from None


def with_identity(record: dict[str, Any]) -> dict[str, Any]:
    """Return the record with its `terminal_identity` computed.

    Importers read the envelope from the harness's own output (what actually ran), so the
    imported evidence is observed, not legacy: it carries a terminal identity.
    """
    try:
        cohort = cohort_key_of(record["task_id"], record["inputs"])
        return {**record, "terminal_identity": terminal_identity_of(record, cohort)}
    except rfc8785.CanonicalizationError:
        # A value canonical JSON cannot hold (an epoch beyond 2^53, say) is not a valid
        # record either: validation names the field, in one line.
        return {**record, "terminal_identity": None}
