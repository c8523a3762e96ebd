"""Derived layers: reports (and later comparisons) stored by the digest of their bytes.

A layer is canonical JSON written once under `layers/<kind>/<hex>.json` and recorded by a
`layer` commit in the ledger. Writing the same document again finds the same name and the
same commit, so nothing is added; a new document is a new version and earlier versions stay
readable. Layers never modify attempt evidence.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from registry.errors import IntegrityError, ObjectNotFoundError
from registry.storage import ledger
from registry.storage.canonical import canonical_json
from registry.storage.digest import digest_bytes, hex_of
from registry.storage.store import Store

if TYPE_CHECKING:
    from pydantic import BaseModel


@dataclass(frozen=True)
class LayerVersion:
    """A layer as the ledger records it."""

    kind: str
    subject: str
    digest: str
    path: str
    commit_seq: int
    created_at: str


def layer_path(kind: str, digest: str) -> str:
    """Return the root-relative path of a layer."""
    return f"layers/{kind}/{hex_of(digest)}.json"


def store_layer(
    store: Store,
    kind: str,
    subject: str,
    document: Any,
    *,
    snapshot: ledger.LedgerSnapshot | None = None,
) -> tuple[LayerVersion, bool]:
    """Store a layer if new and record it in the ledger; return it and whether it was new.

    Concurrent writers of the same document race like ingests: the one that loses sees the
    winner's commit on its next attempt and records nothing more. With a `snapshot` (the
    ledger as the calling command already read it), only the commits written since are read.
    """
    data = canonical_json(document)
    digest = digest_bytes(data)
    path = layer_path(kind, digest)
    with store.temp_area() as area:
        store.put_bytes(data, path, area)

    def recorded() -> ledger.LedgerEntry | None:
        entries = None if snapshot is None else snapshot.refresh()  # only the new commits
        versions = list_layers(store, kind, entries=entries)
        seqs = [v.commit_seq for v in versions if v.digest == digest]
        if not seqs:
            return None
        return ledger.entry_at(store, seqs[0]) if entries is None else entries[seqs[0] - 1]

    layer = {"kind": kind, "subject": subject, "path": path, "digest": digest}
    entry, created = ledger.append(store, {"kind": "layer", "layer": layer}, already=recorded)
    return _version(entry), created


def list_layers(
    store: Store,
    kind: str | None = None,
    subject: str | None = None,
    *,
    entries: list[ledger.LedgerEntry] | None = None,
) -> list[LayerVersion]:
    """Return recorded layers, oldest first, optionally of one kind and subject.

    `entries`: the ledger as already read (read here otherwise).
    """
    versions = []
    seen = set()
    for entry in ledger.read_ledger(store) if entries is None else entries:
        layer = entry.commit.layer
        if layer is None or (kind and layer.kind != kind) or layer.digest in seen:
            continue
        if subject is not None and layer.subject != subject:
            continue
        seen.add(layer.digest)
        versions.append(_version(entry))
    return versions


def read_layer(store: Store, digest: str, kind: str | None = None) -> tuple[LayerVersion, Any]:
    """Return a layer (by full digest or a unique hex prefix) and its parsed document.

    Raises:
        ObjectNotFoundError: no layer matches, or the prefix is ambiguous.
        IntegrityError: the stored bytes no longer match the digest.
    """
    wanted = hex_of(digest.strip())
    matches = [v for v in list_layers(store, kind) if hex_of(v.digest).startswith(wanted)]
    if len(matches) != 1 or not wanted:
        problem = "no layer" if not matches else f"{len(matches)} layers"
        raise ObjectNotFoundError(f"{problem} match '{digest}'; list them with: registry reports")
    return matches[0], layer_document(store, matches[0])


def layer_document(store: Store, version: LayerVersion) -> Any:
    """Return the parsed document of a recorded layer, checked against its digest.

    Raises:
        IntegrityError: the layer file is missing or its bytes no longer match the digest.
    """
    return read_checked(store, version.path, version.digest)


def read_checked(store: Store, path: str, digest: str) -> Any:
    """Return the parsed document of the layer file at `path`, checked against `digest`.

    The ledger has checked the path's form already (`layers/<kind>/<hex>.json`, inside
    the root); the bytes are hashed before they are parsed.

    Raises:
        IntegrityError: the file is missing, unreadable or not the bytes `digest` names.
    """
    try:
        data = store.resolve(path).read_bytes()
    except FileNotFoundError:
        raise IntegrityError(f"layer {path} is missing; run 'registry verify'") from None
    except OSError as exc:
        raise IntegrityError(
            f"layer {path} cannot be read ({exc.strerror or exc}); run 'registry verify'"
        ) from None
    if digest_bytes(data) != digest:
        raise IntegrityError(f"layer {path} is damaged (digest mismatch); run 'registry verify'")
    return orjson.loads(data)


_LAYER_MODEL_NAMES = {
    "report": "TaskReport",
    "comparison": "Comparison",
    "summary": "Summary",
    "noise": "NoiseFloor",
}


class _LayerModels(Mapping[str, "type[BaseModel]"]):
    """Layer kind -> the model of its document, imported on first use.

    A command that reads one kind of layer does not load every layer's models.
    """

    def __getitem__(self, kind: str) -> type[BaseModel]:
        import registry_schemas

        model: type[BaseModel] = getattr(registry_schemas, _LAYER_MODEL_NAMES[kind])
        return model

    def __iter__(self) -> Iterator[str]:
        return iter(_LAYER_MODEL_NAMES)

    def __len__(self) -> int:
        return len(_LAYER_MODEL_NAMES)


LAYER_MODELS: Mapping[str, type[BaseModel]] = _LayerModels()
"""Layer kind -> the model of its document."""


def load_layer(store: Store, digest: str) -> tuple[LayerVersion, BaseModel]:
    """Return a stored layer of any kind, by digest or unique prefix, as its model.

    Raises:
        ObjectNotFoundError: no layer matches, or the prefix is ambiguous.
        IntegrityError: the stored bytes no longer match the digest.
    """
    version, document = read_layer(store, digest)
    model = LAYER_MODELS.get(version.kind)
    if model is None:
        raise IntegrityError(f"{version.path}: unknown layer kind '{version.kind}'")
    return version, model.model_validate(document)


def _version(entry: ledger.LedgerEntry) -> LayerVersion:
    layer = entry.commit.layer
    assert layer is not None
    return LayerVersion(
        layer.kind, layer.subject, layer.digest, layer.path, entry.seq, entry.commit.created_at
    )
