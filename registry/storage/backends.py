"""Where a registry's objects live: a local directory or an S3-compatible bucket.

A backend does three things, all on root-relative names (`ledger/000000000001.json`):
create an object only if the name is free, read one (whole or into a file), and list names
under a prefix. Nothing is ever overwritten or deleted, so the registry layout and
its bytes are the same on every backend: a directory copied into a bucket verifies there.

`LocalBackend` publishes a fully written temporary file with a hard link (which fails when
the name exists) and fsyncs the file and its directory. `ObjectBackend` uses a conditional
create (`If-None-Match: *`) through obstore and copes with what object stores really do:

- 412 Precondition Failed: another writer holds the name; the caller re-reads and retries.
- 409 Conflict: a concurrent write to the same name is in flight; retry after a pause.
- a lost acknowledgement: the write succeeded but the client saw an error, so the retry
  gets 412 for its own object. Each create carries a per-call writer id in the object's
  metadata (`x-amz-meta-writer`); after a 412 the stored writer id is read back and,
  if it is this call's, the create is reported as won (as Delta Lake's S3 commit protocol
  does with its own writer ids).
"""

from __future__ import annotations

import os
import random
import time
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from registry import _faults
from registry.errors import RegistryRootError, StorageError, storage_error

if TYPE_CHECKING:  # types of the stubs only
    from obstore.store import ClientConfig, RetryConfig

WRITER_KEY = "writer"
"""User-metadata key holding the id of the call that created an object."""
RETRIES = 8
"""How many times a create is retried after a 409 or a transient error."""


class Backend(Protocol):
    """The operations the registry needs from the place its objects live."""

    @property
    def location(self) -> str:
        """The root as a user names it: a directory or `s3://bucket/prefix`."""

    def create(self, relative: str, source: Path) -> bool:
        """Publish the bytes of `source` at `relative` if the name is free; True if created."""

    def read(self, relative: str) -> bytes:
        """Return the bytes of an object (ObjectNotFound-style `FileNotFoundError` if absent)."""

    def download(self, relative: str, target: Path) -> None:
        """Write the bytes of an object into the local file `target`."""

    def list(self, prefix: str) -> list[str]:
        """Root-relative names of every object under `prefix/`, at any depth, sorted."""


@dataclass(frozen=True)
class ObjectBackend:
    """A registry under a prefix of an S3-compatible bucket, through obstore.

    Credentials, region and endpoint come from the usual AWS environment variables
    (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT_URL`);
    `REGISTRY_S3_ENDPOINT` (or `--endpoint`) names an S3-compatible server and wins over
    `AWS_ENDPOINT_URL`. Plain `http://` endpoints are allowed, for servers on loopback.
    """

    url: str
    bucket: str
    prefix: str
    store: Any = field(repr=False, compare=False)

    @property
    def location(self) -> str:
        return self.url

    def create(self, relative: str, source: Path) -> bool:
        """Conditionally create `relative`; a 412 is won when the stored writer id is ours."""
        from obstore.exceptions import AlreadyExistsError

        writer = uuid.uuid4().hex
        data = source.read_bytes()
        for attempt in range(RETRIES + 1):
            try:
                self._put(relative, data, writer)
                if relative.startswith("ledger/") and _faults.inject_once("lost-ack"):
                    raise ConnectionResetError("injected: acknowledgement lost after the write")
                return True
            except AlreadyExistsError:
                try:
                    return self._writer_of(relative) == writer
                except FileNotFoundError:  # a 409 reported as taken, and nothing stored: retry
                    if attempt == RETRIES:
                        raise self._error(ConnectionError("conflict"), relative, "write") from None
                    time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))
            except Exception as exc:
                if not _transient(exc) or attempt == RETRIES:
                    raise self._error(exc, relative, "write") from None
                time.sleep(random.uniform(0.05, 0.2) * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    def _put(self, relative: str, data: bytes, writer: str) -> None:
        import obstore

        obstore.put(self.store, relative, data, mode="create", attributes={WRITER_KEY: writer})

    def _writer_of(self, relative: str) -> str | None:
        import obstore

        try:
            attributes = obstore.get(self.store, relative, options={"head": True}).attributes
        except FileNotFoundError:
            raise
        except Exception as exc:
            raise self._error(exc, relative, "read") from None
        value = attributes.get(WRITER_KEY)
        return value if isinstance(value, str) else None

    def read(self, relative: str) -> bytes:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            return bytes(obstore.get(self.store, relative).bytes())
        except (FileNotFoundError, NotFoundError):
            raise FileNotFoundError(f"{self.url}/{relative}") from None
        except Exception as exc:
            raise self._error(exc, relative, "read") from None

    def download(self, relative: str, target: Path) -> None:
        import obstore
        from obstore.exceptions import NotFoundError

        try:
            result = obstore.get(self.store, relative)
            with open(target, "wb") as handle:
                for chunk in result:
                    handle.write(chunk)
        except (FileNotFoundError, NotFoundError):
            raise FileNotFoundError(f"{self.url}/{relative}") from None
        except OSError as exc:
            raise storage_error(exc, target) from exc
        except Exception as exc:
            raise self._error(exc, relative, "read") from None

    def list(self, prefix: str) -> list[str]:
        import obstore

        try:
            return sorted(
                meta["path"]
                for batch in obstore.list(self.store, prefix=prefix.rstrip("/") + "/")
                for meta in batch
            )
        except Exception as exc:
            raise self._error(exc, prefix, "list") from None

    def _error(self, exc: Exception, relative: str, action: str) -> StorageError:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return StorageError(f"{self.url}/{relative}: could not {action} the object ({first})")


def _transient(exc: Exception) -> bool:
    """Whether a failed create may be retried: a 409 conflict or a network-level error."""
    from obstore.exceptions import GenericError, PreconditionError

    if isinstance(exc, ConnectionError | PreconditionError):
        return True
    return isinstance(exc, GenericError) and not any(
        code in str(exc) for code in ("400", "401", "403", "404")
    )


def object_backend(url: str) -> ObjectBackend:
    """Return the backend of an `s3://bucket/prefix` root.

    Raises:
        RegistryRootError: the URL has another scheme or names no bucket.
    """
    scheme, _, rest = url.partition("://")
    if scheme != "s3":
        raise RegistryRootError(
            f"--root {url}: unsupported scheme '{scheme}'; use a directory or s3://bucket/prefix"
        )
    bucket, _, prefix = rest.partition("/")
    prefix = prefix.strip("/")
    if not bucket:
        raise RegistryRootError(f"--root {url}: no bucket; use s3://bucket/prefix")
    from obstore.store import S3Store

    options: dict[str, Any] = {}
    # Bounded retries: an unreachable endpoint is an error within seconds, not minutes.
    retry: RetryConfig = {"max_retries": 3, "retry_timeout": timedelta(seconds=20)}
    client: ClientConfig = {"connect_timeout": "5s"}
    endpoint = os.environ.get("REGISTRY_S3_ENDPOINT") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        options["endpoint"] = endpoint
    if endpoint and endpoint.startswith("http://"):
        client["allow_http"] = True  # as AWS_ALLOW_HTTP=true would
    if not os.environ.get("AWS_REGION") and not os.environ.get("AWS_DEFAULT_REGION"):
        options["region"] = "us-east-1"
    store = S3Store(
        bucket, prefix=prefix or None, retry_config=retry, client_options=client, **options
    )
    canonical = f"s3://{bucket}/{prefix}" if prefix else f"s3://{bucket}"
    return ObjectBackend(canonical, bucket, prefix, store)
