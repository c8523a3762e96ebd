"""The registry root: layout, create-if-absent writes, reads, the temp area and the cache.

A root is a local directory (the default) or an `s3://bucket/prefix` in an S3-compatible
bucket (`registry.storage.backends`); both hold the same objects under the same names.

Layout under the root::

    REGISTRY                           format marker
    attempts/cohort=<hex>/<hex>.parquet immutable segments, named by blake3 of their bytes
    ledger/<seq:012d>.json             commits, created if absent, hash-chained
    layers/<kind>/<hex>.json           derived layers (reports), named by blake3 of their bytes
    plans/<hex>.json                   frozen plans, named by blake3 of their bytes
    checkpoints/<seq>-<hex>.json       derived ledger checkpoints, named likewise
    tmp/<random>/                      a writer's private temporary area (local roots only)

Nothing outside `tmp/` is ever modified or deleted once written (an object root's local
cache and temporary areas live in `REGISTRY_CACHE`, by default
~/.cache/agent-evidence-registry). A crash can leave a fully written object that no commit
references; queries ignore it and `registry verify` reports it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import stat
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from registry import _faults
from registry.errors import IntegrityError, RegistryRootError, StorageError, storage_error
from registry.storage.backends import Backend
from registry.storage.digest import PREFIX, digest_bytes, digest_file, hex_of

FORMAT = "registry/1"
MARKER = "REGISTRY"
_SUBDIRS = ("tmp", "attempts", "ledger", "layers")
_LAYOUT = {*_SUBDIRS, MARKER}
READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
# `s3://bucket/prefix`, and the same once a path type has collapsed it to `s3:/bucket/prefix`.
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_URL = re.compile(r"^([a-z][a-z0-9+.-]+):/+")
_NAMED = re.compile(r"(?:^|/|-)([0-9a-f]{64})\.(?:parquet|json)$")
_OBJECT_DIRS = {"plans", "checkpoints"}


@dataclass(frozen=True)
class LocalBackend:
    """A registry root directory on a local file system (see `registry.storage.backends`)."""

    root: Path

    @property
    def location(self) -> str:
        return str(self.root)

    def create(self, relative: str, source: Path) -> bool:
        """Publish a fully written temp file at `relative`, only if absent; True if created.

        The file is fsynced and made read-only, then hard-linked into place: `link` fails
        when the name exists, so no object is ever overwritten, and a reader never sees a
        partial file. The directory is fsynced so the new name survives a crash.
        """
        target = self.root / relative
        try:
            make_durable_dirs(target.parent)
            _fsync_file(source)
            os.chmod(source, READ_ONLY)
            try:
                os.link(source, target)
                if relative.startswith("ledger/") and _faults.inject_once("lost-ack"):
                    os.link(source, target)  # the retry of a write whose success went unseen
            except FileExistsError:
                # Ours if the name holds this very file: a retry after a lost acknowledgement.
                return os.path.samefile(source, target)
            _fsync_dir(target.parent)
        except StorageError:
            raise
        except OSError as exc:
            raise storage_error(exc, target) from exc
        return True

    def read(self, relative: str) -> bytes:
        return (self.root / relative).read_bytes()

    def download(self, relative: str, target: Path) -> None:
        shutil.copyfile(self.root / relative, target)

    def list(self, prefix: str) -> list[str]:
        """Every file under `prefix`, root-relative, sorted.

        One `scandir` per directory and no `stat` per file: on a registry of many small
        segments, listing through `pathlib` costs as much as hashing every byte.
        """
        top = os.path.join(self.root, prefix) if prefix else str(self.root)
        start = f"{prefix.rstrip('/')}/" if prefix else ""
        names: list[str] = []
        pending = [(start, top)]
        while pending:
            relative, directory = pending.pop()
            try:
                entries = os.scandir(directory)
            except (FileNotFoundError, NotADirectoryError):
                continue
            with entries:
                for entry in entries:
                    if entry.is_dir():
                        pending.append((f"{relative}{entry.name}/", entry.path))
                    elif entry.is_file():
                        names.append(relative + entry.name)
        return sorted(names)


def segment_path_of(cohort_key: str, digest: str) -> str:
    """The root-relative path of the segment with this cohort key and file digest."""
    return f"attempts/cohort={hex_of(cohort_key)}/{hex_of(digest)}.parquet"


@dataclass(frozen=True)
class Store:
    """A registry root: a local directory, or a bucket prefix read through a local cache.

    `root` is a local directory laid out like the registry: the registry itself on a local
    root; on an object root, the cache of the immutable objects fetched so far (segments,
    layers, plans, checkpoints; named by the blake3 digest of their bytes, so an entry is
    valid forever and is checked against its name when it is fetched). Ledger commits are
    read from the backend every time. Writers' temporary areas live under `root/tmp`.
    """

    root: Path
    backend: Backend = field(default=None, repr=False)  # type: ignore[assignment]
    check_fetched: bool = True
    """Whether an object fetched into the cache must match the digest in its name."""

    def __post_init__(self) -> None:
        if self.backend is None:
            object.__setattr__(self, "backend", LocalBackend(self.root))

    @property
    def location(self) -> str:
        """The root as a user names it: a directory, or `s3://bucket/prefix`."""
        return self.backend.location

    @property
    def is_local(self) -> bool:
        """Whether the objects are files under `root` (no cache in between)."""
        return isinstance(self.backend, LocalBackend)

    @property
    def attempts_dir(self) -> Path:
        """Local directory holding the attempt segments (or their cached copies)."""
        return self.root / "attempts"

    @property
    def ledger_dir(self) -> Path:
        """Directory of the ledger commits on a local root (object roots: read `names`)."""
        return self.root / "ledger"

    @property
    def tmp_dir(self) -> Path:
        """Parent of every writer's temporary area."""
        return self.root / "tmp"

    def segment_path(self, cohort_key: str, digest: str) -> str:
        """Return the root-relative path of a segment (task ids never appear in paths)."""
        return segment_path_of(cohort_key, digest)

    def resolve(self, relative: str) -> Path:
        """Return a local file holding the object at `relative` (fetched once on object roots).

        Raises:
            IntegrityError: a fetched object's bytes do not match the digest in its name.
            StorageError: the object store or the cache's file system refused.
        """
        local = self.root / relative
        if self.is_local or local.is_file():
            return local
        with self.temp_area() as area:
            temp = area / "object"
            try:
                self.backend.download(relative, temp)
            except FileNotFoundError:
                return local  # absent: the caller's read fails as it would on a directory
            expected = named_digest(relative)
            if self.check_fetched and expected and digest_file(temp) != expected:
                raise IntegrityError(
                    f"{self.location}/{relative}: the object's bytes do not match the digest "
                    "in its name; run registry verify"
                )
            try:
                local.parent.mkdir(parents=True, exist_ok=True)
                os.chmod(temp, READ_ONLY)
                os.replace(temp, local)
            except OSError as exc:
                raise storage_error(exc, local) from exc
        return local

    def checked_segment(self, relative: str, digest: str) -> Path:
        """Return a local file of the segment at `relative` after checking it is `digest`.

        Every reader of a segment goes through here, so none answers from damaged bytes.

        Raises:
            IntegrityError: the segment is missing, unreadable or not the bytes its commit
                names (the one line says to run `registry verify`).
        """
        try:
            path = self.resolve(relative)
            actual = digest_file(path)
        except FileNotFoundError:
            raise IntegrityError(f"segment {relative} is missing; run 'registry verify'") from None
        except OSError as exc:
            raise IntegrityError(
                f"segment {relative} cannot be read ({exc.strerror or exc}); run 'registry verify'"
            ) from None
        if actual != digest:
            raise IntegrityError(
                f"segment {relative} is damaged (digest mismatch); run 'registry verify'"
            )
        return path

    def read_bytes(self, relative: str) -> bytes:
        """Return the bytes of an object (ledger commits always from the backend itself).

        Raises:
            FileNotFoundError: no object has this name.
        """
        if self.is_local or not named_digest(relative):
            return self.backend.read(relative)
        return self.resolve(relative).read_bytes()

    def names(self, prefix: str) -> list[str]:
        """Root-relative names of the objects under `prefix/`, at any depth, sorted."""
        return self.backend.list(prefix)

    @contextlib.contextmanager
    def temp_area(self) -> Iterator[Path]:
        """Yield a private temporary directory that is removed afterwards, whatever happens.

        A write into the area that the file system refuses for lack of space (such as a
        segment written by a library that names no file) becomes a `StorageError` naming the
        registry; other errors pass through unchanged.
        """
        area = self.tmp_dir / uuid.uuid4().hex
        try:
            _create_dir(area, exist_ok=False)
        except OSError as exc:
            raise storage_error(exc, area) from exc
        try:
            yield area
        except StorageError:
            raise
        except OSError as exc:
            named = exc.filename is None or str(exc.filename).startswith(str(area))
            if exc.errno in _NO_SPACE and named:
                raise storage_error(exc, self.root) from exc
            raise
        finally:
            shutil.rmtree(area, ignore_errors=True)

    def put_file(self, temp_file: Path, relative: str) -> bool:
        """Publish a fully written temp file at `relative`, only if absent; True if created.

        An object named by its digest that is already there is checked against that digest
        on an object root (a local root's objects are checked by `registry verify`).

        Raises:
            StorageError: the file system or object store refused (disk full, read-only,
                permission denied).
            IntegrityError: an object already at a digest-named path holds other bytes.
        """
        created = self.backend.create(relative, temp_file)
        expected = named_digest(relative)
        if self.is_local or not expected:
            return created
        if not created:
            with self.temp_area() as area:
                self.backend.download(relative, area / "existing")
                if digest_file(area / "existing") != expected:
                    raise IntegrityError(
                        f"{self.location}/{relative}: an object with other bytes holds this "
                        "digest's name; run registry verify"
                    )
        self._keep(temp_file, relative)
        return created

    def _keep(self, written: Path, relative: str) -> None:
        """Put the bytes just written to an object root into the cache: no need to fetch them.

        Writers name an object by the digest of the very bytes they wrote, so they are not
        hashed again here.
        """
        local = self.root / relative
        if local.is_file() or not self.check_fetched:
            return
        try:
            local.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.link(written, local)
        except OSError:
            return  # only a cache: the object is fetched when it is read

    def put_bytes(self, data: bytes, relative: str, scratch: Path) -> bool:
        """Write `data` at `relative` if absent, via a temp file in `scratch`; True if created."""
        temp = scratch / uuid.uuid4().hex
        try:
            temp.write_bytes(data)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            raise storage_error(exc, temp) from exc
        try:
            return self.put_file(temp, relative)
        finally:
            temp.unlink(missing_ok=True)

    @contextlib.contextmanager
    def fresh_reads(self) -> Iterator[Store]:
        """Yield this store reading every object anew from the backend, with no shared cache.

        On an object root the objects are fetched into a private cache removed afterwards
        and not checked on the way in, so `registry verify` sees the bucket's own bytes and
        reports every problem; a local root is returned as it is.
        """
        if self.is_local:
            yield self
            return
        with self.temp_area() as area:
            yield Store(area, self.backend, check_fetched=False)


def named_digest(relative: str) -> str | None:
    """The digest an object's name states (segments, layers, plans, checkpoints), if any."""
    match = _NAMED.search(relative)
    return f"{PREFIX}{match.group(1)}" if match else None


def open_store(root: Path | str, *, create: bool = False) -> Store:
    """Return the store at `root`, creating an empty registry there if `create` is set.

    `root` is a directory or an `s3://bucket/prefix` URL (see `registry.storage.backends`
    for credentials and endpoint).

    Raises:
        RegistryRootError: `root` is not a registry (and `create` is not set), or is a file,
            or holds something that is not a registry, or is a URL of another scheme.
        StorageError: the file system or object store refused to create the registry.
    """
    url = _url_of(root)
    if url is not None:
        return _open_object_store(url, create)
    root = Path(root).absolute()
    marker = root / MARKER
    if marker.is_file():
        try:
            text = marker.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise storage_error(exc, marker, "read") from exc
        if text.strip() != FORMAT:
            raise RegistryRootError(f"{root} holds an unsupported registry format")
        return Store(root)
    if not create:
        raise RegistryRootError(
            f"no registry at {root}; ingest attempts first or pass --root / REGISTRY_ROOT"
        )
    if root.exists() and not root.is_dir():
        raise RegistryRootError(f"{root} exists and is not a directory")
    # Another writer may be creating the same registry right now: its sub-directories
    # without the marker yet are expected; anything else means a foreign directory.
    try:
        if root.is_dir() and any(p.name not in _LAYOUT for p in root.iterdir()):
            raise RegistryRootError(f"{root} is a non-empty directory that is not a registry")
        for sub in _SUBDIRS:
            _create_dir(root / sub, exist_ok=True)
    except OSError as exc:
        raise storage_error(exc, root, "create a registry at") from exc
    store = Store(root)
    with store.temp_area() as area:
        store.put_bytes(f"{FORMAT}\n".encode(), MARKER, area)  # create-if-absent: races are fine
    return store


def _open_object_store(url: str, create: bool) -> Store:
    from registry.storage.backends import object_backend

    backend = object_backend(url)
    cache = cache_dir(backend.location)
    store = Store(cache, backend)
    try:
        text = backend.read(MARKER).decode("utf-8", errors="replace")
    except FileNotFoundError:
        text = None
    if text is not None and text.strip() != FORMAT:
        raise RegistryRootError(f"{backend.location} holds an unsupported registry format")
    if text is None:
        if not create:
            raise RegistryRootError(
                f"no registry at {backend.location}; ingest attempts first or pass --root / "
                "REGISTRY_ROOT"
            )
        # As on a directory: another writer's objects without the marker yet are expected;
        # anything else means the prefix holds something that is not a registry.
        foreign = [n for n in backend.list("") if n.split("/")[0] not in _LAYOUT | _OBJECT_DIRS]
        if foreign:
            raise RegistryRootError(
                f"{backend.location} holds objects that are not a registry ({foreign[0]}); "
                "choose an empty prefix"
            )
        with store.temp_area() as area:
            store.put_bytes(f"{FORMAT}\n".encode(), MARKER, area)
    return store


def cache_dir(location: str) -> Path:
    """The local cache of an object root: `REGISTRY_CACHE` or ~/.cache, one folder per root."""
    base = os.environ.get("REGISTRY_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "agent-evidence-registry"
    )
    return Path(base).absolute() / hex_of(digest_bytes(location.encode()))[:16]


def is_url(root: Path | str) -> bool:
    """Whether `root` names an object root (`s3://…`) rather than a directory."""
    return _url_of(root) is not None


def _url_of(root: Path | str) -> str | None:
    """`root` as a URL when it is one (a path type collapses `scheme://` to `scheme:/`)."""
    text = os.fspath(root)
    match = _URL.match(text)
    if match is None:
        return None
    return f"{match.group(1)}://{text[match.end() :]}"


def _create_dir(path: Path, exist_ok: bool) -> None:
    """Create a directory and its parents (the one place the store makes directories)."""
    path.mkdir(parents=True, exist_ok=exist_ok)


def make_durable_dirs(path: Path) -> None:
    """Create missing directories, fsyncing each parent so the new entries survive a crash."""
    if path.is_dir():
        return
    make_durable_dirs(path.parent)
    with contextlib.suppress(FileExistsError):  # another writer may have just made it
        path.mkdir()
    _fsync_dir(path.parent)


def remove_empty_store(store: Store, remove_root: bool) -> None:
    """Undo the creation of a registry that holds nothing but its empty layout.

    Only empty directories are removed (`rmdir` refuses anything else), so a writer that
    started on the same new root meanwhile never loses a file; the root itself is removed
    only when `remove_root` says this process created it.
    """
    try:
        for sub in _SUBDIRS:
            os.rmdir(store.root / sub)
        (store.root / MARKER).unlink()
        if remove_root:
            os.rmdir(store.root)
    except OSError:
        return


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
