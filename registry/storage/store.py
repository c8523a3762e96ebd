"""The registry root on a local directory: layout, atomic create-if-absent writes, temp area.

Layout under the root::

    REGISTRY                           format marker
    attempts/cohort=<hex>/<hex>.parquet immutable segments, named by blake3 of their bytes
    ledger/<seq:012d>.json             commits, created if absent, hash-chained
    layers/<kind>/<hex>.json           derived layers (reports), named by blake3 of their bytes
    tmp/<random>/                      a writer's private temporary area

Nothing outside `tmp/` is ever modified or deleted once written. A crash can leave a fully
written object that no commit references; queries ignore it and `registry verify` reports it.
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
from dataclasses import dataclass
from pathlib import Path

from registry.errors import RegistryRootError, StorageError, storage_error
from registry.storage.digest import hex_of

FORMAT = "registry/1"
MARKER = "REGISTRY"
_SUBDIRS = ("tmp", "attempts", "ledger", "layers")
_LAYOUT = {*_SUBDIRS, MARKER}
READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH
# `s3://bucket/prefix`, and the same once a path type has collapsed it to `s3:/bucket/prefix`.
_NO_SPACE = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_URL = re.compile(r"^([a-z][a-z0-9+.-]+):/+")


@dataclass(frozen=True)
class Store:
    """A registry root directory."""

    root: Path

    @property
    def attempts_dir(self) -> Path:
        """Directory holding the attempt segments."""
        return self.root / "attempts"

    @property
    def ledger_dir(self) -> Path:
        """Directory holding the ledger commits."""
        return self.root / "ledger"

    @property
    def tmp_dir(self) -> Path:
        """Parent of every writer's temporary area."""
        return self.root / "tmp"

    def segment_path(self, cohort_key: str, digest: str) -> str:
        """Return the root-relative path of a segment (task ids never appear in paths)."""
        return f"attempts/cohort={hex_of(cohort_key)}/{hex_of(digest)}.parquet"

    def resolve(self, relative: str) -> Path:
        """Return the absolute path of a root-relative path."""
        return self.root / relative

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

        The file is fsynced and made read-only, then hard-linked into place: `link` fails
        when the name exists, so no object is ever overwritten, and a reader never sees a
        partial file. The directory is fsynced so the new name survives a crash.

        Raises:
            StorageError: the file system refused (disk full, read-only, permission denied).
        """
        target = self.resolve(relative)
        try:
            make_durable_dirs(target.parent)
            _fsync_file(temp_file)
            os.chmod(temp_file, READ_ONLY)
            try:
                os.link(temp_file, target)
            except FileExistsError:
                return False
            _fsync_dir(target.parent)
        except StorageError:
            raise
        except OSError as exc:
            raise storage_error(exc, target) from exc
        return True

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


def open_store(root: Path | str, *, create: bool = False) -> Store:
    """Return the store at `root`, creating an empty registry there if `create` is set.

    Raises:
        RegistryRootError: `root` is not a registry (and `create` is not set), or is a file,
            or holds something that is not a registry, or is a URL (object storage is not
            supported: it would otherwise become a local folder named after the scheme).
        StorageError: the file system refused to create the registry.
    """
    _refuse_url(root)
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


def _refuse_url(root: Path | str) -> None:
    text = os.fspath(root)
    match = _URL.match(text)
    if match is None:
        return
    if not isinstance(root, str):  # a path type collapsed `scheme://` to `scheme:/`
        text = f"{match.group(1)}://{text[match.end() :]}"
    raise RegistryRootError(
        f"--root {text}: object storage is not supported by this build; use a local directory"
    )


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
