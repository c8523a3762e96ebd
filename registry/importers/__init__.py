"""Importers for the harnesses teams already run, by `--format` name.

Each importer module defines `IMPORTER`; modules are imported on first use, so an optional
dependency (inspect_ai) is only needed when its format is actually read.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from registry.importers.base import (
    ENVELOPE_KEYS,
    INPUT_KEYS,
    UNKNOWN,
    EnvelopeConflictError,
    ImportContext,
    Importer,
    parse_envelope,
    parse_overrides,
    read_json,
    with_identity,
)

MODULES = {
    "inspect": "registry.importers.inspect_log",
    "harbor": "registry.importers.harbor",
    "terminal-bench": "registry.importers.terminal_bench",
    "swebench": "registry.importers.swebench",
}
"""`--format` name -> module defining `IMPORTER`."""


def get_importer(name: str) -> Importer:
    """Return the importer registered under a `--format` name."""
    module = importlib.import_module(MODULES[name])
    importer: Importer = module.IMPORTER
    return importer


def detect_importer(path: Path) -> str | None:
    """Return the name of the importer that recognises `path`, if any."""
    for name in MODULES:
        if get_importer(name).detect(path):
            return name
    return None


__all__ = [
    "ENVELOPE_KEYS",
    "EnvelopeConflictError",
    "parse_envelope",
    "INPUT_KEYS",
    "MODULES",
    "UNKNOWN",
    "ImportContext",
    "Importer",
    "detect_importer",
    "get_importer",
    "parse_overrides",
    "read_json",
    "with_identity",
]
