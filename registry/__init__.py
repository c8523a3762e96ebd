"""registry: a content-addressed evidence registry for coding-agent evaluation attempts.

This module is the public API; everything else in the package is private.

Names are resolved on first use (PEP 562), so `import registry` costs almost nothing and a
command loads only the modules it calls: duckdb, pyarrow, numpy, scipy and the schema models
stay unimported until something needs them. To add a public name, import it under
`TYPE_CHECKING` (for type checkers), list it in `_EXPORTS` under its module, and in `__all__`.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from registry.canonical import canonical_json
    from registry.compare import COMPARISON_LAYER, compare, record_comparison
    from registry.digest import digest_bytes, digest_file, digest_json, short
    from registry.errors import (
        InputFormatError,
        IntegrityError,
        InvalidRecordError,
        LedgerConflictError,
        ObjectNotFoundError,
        QueryError,
        ReadOnlyQueryError,
        RegistryError,
        RegistryRootError,
    )
    from registry.evidence import SAMPLE_KEYS, sample_key, system_label, unit_key
    from registry.export import ExportError, ExportResult, export_duckdb, export_parquet
    from registry.importers import parse_overrides
    from registry.ingest import IngestResult, ingest
    from registry.keys import attempt_id_of, cohort_key_of, terminal_identity_of
    from registry.layers import (
        LAYER_MODELS,
        LayerVersion,
        layer_document,
        list_layers,
        load_layer,
        read_layer,
    )
    from registry.ledger import AsOfError, LedgerEntry, entries_as_of, read_ledger
    from registry.noise import DEFAULT_ATTEMPTS, DEFAULT_SIMULATIONS, noise_floor, record_noise
    from registry.query import QueryResult, connect, run_query
    from registry.regressions import (
        find_regressions,
        render_regressions_markdown,
        render_regressions_table,
    )
    from registry.render import render_html, render_markdown, render_table
    from registry.render_suite import (
        render_comparison_html,
        render_comparison_markdown,
        render_comparison_table,
        render_noise_table,
        render_summary_table,
    )
    from registry.report import (
        REPORT_LAYER,
        build_report,
        load_report,
        record_report,
        report_document,
        store_report,
    )
    from registry.retract import (
        RetractionError,
        RetractionInfo,
        RetractionResult,
        read_attempt_ids_file,
        retract,
        retracted_ids,
        retraction_table,
    )
    from registry.selection import (
        Evidence,
        Scope,
        Selector,
        SelectorError,
        load_evidence,
        parse_selector,
        read_evidence,
        read_task_list,
    )
    from registry.store import Store, open_store
    from registry.summary import record_summary, summarize
    from registry.verify import VerifyReport, verify

_EXPORTS: dict[str, tuple[str, ...]] = {
    "registry.canonical": ("canonical_json",),
    "registry.compare": (
        "COMPARISON_LAYER",
        "compare",
        "record_comparison",
    ),
    "registry.digest": (
        "digest_bytes",
        "digest_file",
        "digest_json",
        "short",
    ),
    "registry.errors": (
        "InputFormatError",
        "IntegrityError",
        "InvalidRecordError",
        "LedgerConflictError",
        "ObjectNotFoundError",
        "QueryError",
        "ReadOnlyQueryError",
        "RegistryError",
        "RegistryRootError",
    ),
    "registry.evidence": (
        "SAMPLE_KEYS",
        "sample_key",
        "system_label",
        "unit_key",
    ),
    "registry.export": ("ExportError", "ExportResult", "export_duckdb", "export_parquet"),
    "registry.importers": ("parse_overrides",),
    "registry.ingest": (
        "IngestResult",
        "ingest",
    ),
    "registry.keys": (
        "attempt_id_of",
        "cohort_key_of",
        "terminal_identity_of",
    ),
    "registry.layers": (
        "LAYER_MODELS",
        "LayerVersion",
        "layer_document",
        "list_layers",
        "load_layer",
        "read_layer",
    ),
    "registry.ledger": (
        "AsOfError",
        "LedgerEntry",
        "entries_as_of",
        "read_ledger",
    ),
    "registry.noise": (
        "DEFAULT_ATTEMPTS",
        "DEFAULT_SIMULATIONS",
        "noise_floor",
        "record_noise",
    ),
    "registry.query": (
        "QueryResult",
        "connect",
        "run_query",
    ),
    "registry.regressions": (
        "find_regressions",
        "render_regressions_markdown",
        "render_regressions_table",
    ),
    "registry.render": (
        "render_html",
        "render_markdown",
        "render_table",
    ),
    "registry.render_suite": (
        "render_comparison_html",
        "render_comparison_markdown",
        "render_comparison_table",
        "render_noise_table",
        "render_summary_table",
    ),
    "registry.report": (
        "REPORT_LAYER",
        "build_report",
        "load_report",
        "record_report",
        "report_document",
        "store_report",
    ),
    "registry.retract": (
        "RetractionError",
        "RetractionInfo",
        "RetractionResult",
        "read_attempt_ids_file",
        "retract",
        "retracted_ids",
        "retraction_table",
    ),
    "registry.selection": (
        "Evidence",
        "Scope",
        "Selector",
        "SelectorError",
        "load_evidence",
        "parse_selector",
        "read_evidence",
        "read_task_list",
    ),
    "registry.store": (
        "Store",
        "open_store",
    ),
    "registry.summary": (
        "record_summary",
        "summarize",
    ),
    "registry.verify": (
        "VerifyReport",
        "verify",
    ),
}
"""Module -> the public names it defines."""

_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import the module defining a public name on first use, and keep the name."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _Package(types.ModuleType):
    """The package object: a submodule never hides the public name it shares.

    `registry.compare`, `registry.ingest`, `registry.retract` and `registry.verify` are
    functions; importing the submodule of the same name would otherwise rebind the package
    attribute to the module (as the import system does for every submodule).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _MODULE_OF and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "ExportError",
    "ExportResult",
    "export_duckdb",
    "export_parquet",
    "find_regressions",
    "render_regressions_markdown",
    "render_regressions_table",
    "SAMPLE_KEYS",
    "AsOfError",
    "Evidence",
    "RetractionError",
    "RetractionInfo",
    "RetractionResult",
    "entries_as_of",
    "load_evidence",
    "read_attempt_ids_file",
    "read_evidence",
    "retract",
    "retracted_ids",
    "retraction_table",
    "sample_key",
    "store_report",
    "system_label",
    "unit_key",
    "LAYER_MODELS",
    "load_layer",
    "parse_overrides",
    "COMPARISON_LAYER",
    "DEFAULT_ATTEMPTS",
    "DEFAULT_SIMULATIONS",
    "Scope",
    "Selector",
    "SelectorError",
    "compare",
    "noise_floor",
    "parse_selector",
    "read_task_list",
    "record_comparison",
    "record_noise",
    "record_summary",
    "render_comparison_html",
    "render_comparison_markdown",
    "render_comparison_table",
    "render_noise_table",
    "render_summary_table",
    "summarize",
    "REPORT_LAYER",
    "LayerVersion",
    "build_report",
    "layer_document",
    "list_layers",
    "load_report",
    "read_layer",
    "record_report",
    "render_html",
    "render_markdown",
    "render_table",
    "report_document",
    "IngestResult",
    "InputFormatError",
    "IntegrityError",
    "InvalidRecordError",
    "LedgerConflictError",
    "LedgerEntry",
    "ObjectNotFoundError",
    "QueryError",
    "QueryResult",
    "ReadOnlyQueryError",
    "RegistryError",
    "RegistryRootError",
    "Store",
    "VerifyReport",
    "attempt_id_of",
    "canonical_json",
    "cohort_key_of",
    "connect",
    "digest_bytes",
    "digest_file",
    "digest_json",
    "ingest",
    "open_store",
    "read_ledger",
    "run_query",
    "short",
    "terminal_identity_of",
    "verify",
]
