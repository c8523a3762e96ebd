"""blake3 digests of bytes, files and canonical JSON, in the `blake3:<64 hex>` form."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import blake3

from registry.storage.canonical import canonical_json

PREFIX = "blake3:"
_CHUNK = 1 << 20


def digest_bytes(data: bytes) -> str:
    """Return the `blake3:<hex>` digest of `data`."""
    return PREFIX + blake3.blake3(data).hexdigest()


def digest_file(path: Path) -> str:
    """Return the `blake3:<hex>` digest of a file's bytes, read in chunks."""
    hasher = blake3.blake3()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
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
