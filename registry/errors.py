"""One error hierarchy: every expected failure is a `RegistryError` with a one-line message.

The CLI prints `Error: <message>` and exits with `exit_code`; anything that is not a
`RegistryError` is a bug and keeps its traceback.
"""

from __future__ import annotations

import errno


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


class StorageError(RegistryError, OSError):
    """The file system refused a read or write (disk full, read-only, permission denied).

    It is also an `OSError`, so a caller that handles file-system failures in general
    handles this one; `errno` is the refused operation's error number.
    """

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.errno = code


_REASONS = {
    "ENOSPC": "no space left on device (disk full)",
    "EDQUOT": "disk quota exceeded",
    "EROFS": "read-only file system",
    "EACCES": "permission denied",
    "EPERM": "operation not permitted",
    "ENOTDIR": "a parent is not a directory",
    "EISDIR": "is a directory",
    "ENOENT": "no such file or directory",
    "EIO": "input/output error",
}


def os_reason(exc: OSError) -> str:
    """Return a short, lower-case account of what an `OSError` means for the user."""
    name = errno.errorcode.get(exc.errno or -1, "")
    return _REASONS.get(name) or (exc.strerror or str(exc) or type(exc).__name__).lower()


def storage_error(exc: OSError, path: object, action: str = "write") -> StorageError:
    """Return the one-line `StorageError` for a failed read or write of `path`."""
    where = exc.filename if exc.filename is not None else path
    return StorageError(f"cannot {action} {where}: {os_reason(exc)}", exc.errno)
