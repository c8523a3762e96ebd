"""One error hierarchy: every expected failure is a `RegistryError` with a one-line message.

The CLI prints `Error: <message>` and exits with `exit_code`; anything that is not a
`RegistryError` is a bug and keeps its traceback.
"""

from __future__ import annotations


class RegistryError(Exception):
    """Base class of every error the registry reports to a user."""

    exit_code = 1


class InvalidRecordError(RegistryError, ValueError):
    """An input record (or the file holding it) is not a valid `registry.attempt/1`."""

    def __init__(self, source: str, location: str | None, field: str | None, problem: str):
        self.source = source
        self.location = location
        self.field = field
        self.problem = problem
        where = source if location is None else f"{source}:{location}"
        what = f"field '{field}': {problem}" if field else problem
        super().__init__(f"{where}: {what}")


class InputFormatError(RegistryError, ValueError):
    """An input file cannot be read in the requested or detected format."""


class IntegrityError(RegistryError):
    """Stored evidence or the ledger is not what its digests say it is."""


class LedgerConflictError(RegistryError):
    """A commit could not be appended after repeated races for the next sequence number."""


class ObjectNotFoundError(RegistryError, LookupError):
    """A requested object, layer or task is not in the registry."""


class ReadOnlyQueryError(RegistryError, ValueError):
    """A SQL statement would write, or is not a single read-only query."""


class QueryError(RegistryError, ValueError):
    """A read-only SQL query failed (syntax, unknown column, ...)."""


class RegistryRootError(RegistryError):
    """The registry root cannot be used (not a directory, not writable, foreign layout)."""
