"""blake3 digests of bytes, files and canonical JSON, in the `blake3:<64 hex>` form."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import blake3

from registry.storage.canonical import canonical_json

PREFIX = "blake3:"
_CHUNK = 1 << 20


def digest_bytes(data: bytes) -> str:
    """Return the `blake3:<hex>` digest of `data`."""
    return PREFIX + blake3.blake3(data).hexdigest()


MMAP_FROM = 1 << 20
"""Files from this size on are memory-mapped and hashed on every core; smaller ones are read
whole in one call (a thread pool and a mapping cost more than they save on small files)."""


def digest_file(path: Path | str) -> str:
    """Return the `blake3:<hex>` digest of a file's bytes.

    Raises:
        OSError: the file cannot be opened or read (FileNotFoundError when it is absent).
    """
    handle = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        size = os.fstat(handle).st_size
        if size < MMAP_FROM:  # one read of the whole file, then one that finds its end
            hasher = blake3.blake3(os.read(handle, size + 1))
            while chunk := os.read(handle, _CHUNK):
                hasher.update(chunk)
            return PREFIX + hasher.hexdigest()
    finally:
        os.close(handle)
    hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
    try:
        hasher.update_mmap(path)
    except ValueError as exc:  # blake3 refuses what it cannot map (a special file)
        raise OSError(str(exc)) from None
    return PREFIX + hasher.hexdigest()


def digest_json(value: Any) -> str:
    """Return the digest of the RFC 8785 canonical encoding of `value`."""
    return digest_bytes(canonical_json(value))


def hex_of(digest: str) -> str:
    """Return the 64 hex characters of a `blake3:` digest (the form used in file names)."""
    return digest.removeprefix(PREFIX)


def short(digest: str) -> str:
    """Return the 12-character abbreviation of a digest used in human output."""
    return hex_of(digest)[:12]
