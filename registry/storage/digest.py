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


LARGE_FROM = 1 << 20
"""Files from this size on are read in `_LARGE_CHUNK` pieces into one reused buffer and hashed
on every core; smaller ones are read whole in one call (a thread pool costs more than it saves
on small files). Reading beats memory-mapping here: as fast from the page cache, and the
file's pages never count in the process's resident size."""
_LARGE_CHUNK = 4 << 20


def digest_file(path: Path | str) -> str:
    """Return the `blake3:<hex>` digest of a file's bytes.

    Raises:
        OSError: the file cannot be opened or read (FileNotFoundError when it is absent).
    """
    with open(path, "rb", buffering=0) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < LARGE_FROM:  # one read of the whole file, then one that finds its end
            hasher = blake3.blake3(handle.read(size + 1))
            while chunk := handle.read(_CHUNK):
                hasher.update(chunk)
            return PREFIX + hasher.hexdigest()
        hasher = blake3.blake3(max_threads=blake3.blake3.AUTO)
        buffer = bytearray(_LARGE_CHUNK)
        view = memoryview(buffer)
        while count := handle.readinto(buffer):
            hasher.update(view[:count])
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
