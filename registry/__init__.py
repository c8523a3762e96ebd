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
    from registry.analysis.compare import COMPARISON_LAYER, compare, record_comparison
    from registry.analysis.noise import (
        DEFAULT_ATTEMPTS,
        DEFAULT_SIMULATIONS,
        noise_floor,
        record_noise,
    )
    from registry.analysis.plans import (
        FrozenPlan,
        PlanError,
        find_plan,
        freeze_plan,
        list_plans,
        load_plan,
        plan_document,
        plan_status,
        read_plan_file,
        size_figures,
        system_rates,
    )
    from registry.analysis.regressions import (
        find_regressions,
        render_regressions_markdown,
        render_regressions_table,
    )
    from registry.analysis.report import (
        REPORT_LAYER,
        build_report,
        load_report,
        record_report,
        report_document,
        store_report,
    )
    from registry.analysis.summary import record_summary, summarize
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
        StorageError,
    )
    from registry.evidence.export import ExportError, ExportResult, export_duckdb, export_parquet
    from registry.evidence.keys import attempt_id_of, cohort_key_of, terminal_identity_of
    from registry.evidence.query import QueryResult, connect, run_query
    from registry.evidence.retract import (
        RetractionError,
        RetractionInfo,
        RetractionResult,
        read_attempt_ids_file,
        retract,
        retracted_ids,
        retraction_table,
    )
    from registry.evidence.rule import SAMPLE_KEYS, sample_key, system_label, unit_key
    from registry.evidence.selection import (
        Evidence,
        Scope,
        Selector,
        SelectorError,
        load_evidence,
        parse_selector,
        read_evidence,
        read_task_list,
    )
    from registry.importers import EnvelopeConflictError, parse_envelope, parse_overrides
    from registry.ingest import IngestResult, ingest
    from registry.render.report import html_page, render_html, render_markdown, render_table
    from registry.render.site import SiteError, SiteResult, build_site, page_name
    from registry.render.suite import (
        render_comparison_html,
        render_comparison_markdown,
        render_comparison_table,
        render_noise_html,
        render_noise_markdown,
        render_noise_table,
        render_summary_html,
        render_summary_markdown,
        render_summary_table,
    )
    from registry.render.text import inert
    from registry.storage.canonical import canonical_json
    from registry.storage.checkpoints import write_checkpoint
    from registry.storage.digest import digest_bytes, digest_file, digest_json, short
    from registry.storage.iceberg import (
        PublishError,
        PublishResult,
        iceberg_sql,
        publish_iceberg,
        registry_sql,
    )
    from registry.storage.layers import (
        LAYER_MODELS,
        LayerVersion,
        layer_document,
        list_layers,
        load_layer,
        read_layer,
    )
    from registry.storage.ledger import (
        AsOfError,
        HeadFormatError,
        LedgerEntry,
        entries_as_of,
        head,
        parse_head,
        read_ledger,
    )
    from registry.storage.merkle import (
        ConsistencyProof,
        InclusionProof,
        ProofError,
        prove_consistency,
        prove_inclusion,
        verify_consistency,
        verify_inclusion,
    )
    from registry.storage.pack import PackResult, pack_segments
    from registry.storage.store import Store, open_store
    from registry.storage.sync import SyncError, SyncResult, sync
    from registry.storage.verify import VerifyReport, verify

_EXPORTS: dict[str, tuple[str, ...]] = {
    "registry.storage.canonical": ("canonical_json",),
    "registry.analysis.compare": (
        "COMPARISON_LAYER",
        "compare",
        "record_comparison",
    ),
    "registry.storage.digest": (
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
        "StorageError",
    ),
    "registry.evidence.rule": (
        "SAMPLE_KEYS",
        "sample_key",
        "system_label",
        "unit_key",
    ),
    "registry.evidence.export": ("ExportError", "ExportResult", "export_duckdb", "export_parquet"),
    "registry.importers": (
        "EnvelopeConflictError",
        "parse_envelope",
        "parse_overrides",
    ),
    "registry.ingest": (
        "IngestResult",
        "ingest",
    ),
    "registry.evidence.keys": (
        "attempt_id_of",
        "cohort_key_of",
        "terminal_identity_of",
    ),
    "registry.storage.layers": (
        "LAYER_MODELS",
        "LayerVersion",
        "layer_document",
        "list_layers",
        "load_layer",
        "read_layer",
    ),
    "registry.storage.ledger": (
        "AsOfError",
        "HeadFormatError",
        "LedgerEntry",
        "entries_as_of",
        "head",
        "parse_head",
        "read_ledger",
    ),
    "registry.analysis.noise": (
        "DEFAULT_ATTEMPTS",
        "DEFAULT_SIMULATIONS",
        "noise_floor",
        "record_noise",
    ),
    "registry.evidence.query": (
        "QueryResult",
        "connect",
        "run_query",
    ),
    "registry.analysis.regressions": (
        "find_regressions",
        "render_regressions_markdown",
        "render_regressions_table",
    ),
    "registry.render.report": (
        "html_page",
        "render_html",
        "render_markdown",
        "render_table",
    ),
    "registry.render.suite": (
        "render_comparison_html",
        "render_comparison_markdown",
        "render_comparison_table",
        "render_noise_html",
        "render_noise_markdown",
        "render_noise_table",
        "render_summary_html",
        "render_summary_markdown",
        "render_summary_table",
    ),
    "registry.analysis.report": (
        "REPORT_LAYER",
        "build_report",
        "load_report",
        "record_report",
        "report_document",
        "store_report",
    ),
    "registry.evidence.retract": (
        "RetractionError",
        "RetractionInfo",
        "RetractionResult",
        "read_attempt_ids_file",
        "retract",
        "retracted_ids",
        "retraction_table",
    ),
    "registry.evidence.selection": (
        "Evidence",
        "Scope",
        "Selector",
        "SelectorError",
        "load_evidence",
        "parse_selector",
        "read_evidence",
        "read_task_list",
    ),
    "registry.storage.store": (
        "Store",
        "open_store",
    ),
    "registry.analysis.summary": (
        "record_summary",
        "summarize",
    ),
    "registry.storage.verify": (
        "VerifyReport",
        "verify",
    ),
    "registry.analysis.plans": (
        "FrozenPlan",
        "PlanError",
        "find_plan",
        "freeze_plan",
        "list_plans",
        "load_plan",
        "plan_document",
        "plan_status",
        "read_plan_file",
        "size_figures",
        "system_rates",
    ),
    "registry.render.site": (
        "SiteError",
        "SiteResult",
        "build_site",
        "page_name",
    ),
    "registry.storage.pack": (
        "PackResult",
        "pack_segments",
    ),
    "registry.storage.checkpoints": ("write_checkpoint",),
    "registry.storage.merkle": (
        "ConsistencyProof",
        "InclusionProof",
        "ProofError",
        "prove_consistency",
        "prove_inclusion",
        "verify_consistency",
        "verify_inclusion",
    ),
    "registry.render.text": ("inert",),
    "registry.storage.sync": ("SyncError", "SyncResult", "sync"),
    "registry.storage.iceberg": (
        "PublishError",
        "PublishResult",
        "iceberg_sql",
        "publish_iceberg",
        "registry_sql",
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

    `registry.ingest` is a function; importing the submodule of the same name would
    otherwise rebind the package attribute to the module (as the import system does for
    every submodule).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _MODULE_OF and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = [
    "AsOfError",
    "COMPARISON_LAYER",
    "ConsistencyProof",
    "DEFAULT_ATTEMPTS",
    "DEFAULT_SIMULATIONS",
    "EnvelopeConflictError",
    "Evidence",
    "ExportError",
    "ExportResult",
    "FrozenPlan",
    "HeadFormatError",
    "InclusionProof",
    "IngestResult",
    "InputFormatError",
    "IntegrityError",
    "InvalidRecordError",
    "LAYER_MODELS",
    "LayerVersion",
    "LedgerConflictError",
    "LedgerEntry",
    "ObjectNotFoundError",
    "PackResult",
    "PlanError",
    "ProofError",
    "PublishError",
    "PublishResult",
    "QueryError",
    "QueryResult",
    "REPORT_LAYER",
    "ReadOnlyQueryError",
    "RegistryError",
    "RegistryRootError",
    "RetractionError",
    "RetractionInfo",
    "RetractionResult",
    "SAMPLE_KEYS",
    "Scope",
    "Selector",
    "SelectorError",
    "SiteError",
    "SiteResult",
    "StorageError",
    "Store",
    "SyncError",
    "SyncResult",
    "VerifyReport",
    "attempt_id_of",
    "build_report",
    "build_site",
    "canonical_json",
    "cohort_key_of",
    "compare",
    "connect",
    "digest_bytes",
    "digest_file",
    "digest_json",
    "entries_as_of",
    "export_duckdb",
    "export_parquet",
    "find_plan",
    "find_regressions",
    "freeze_plan",
    "head",
    "html_page",
    "iceberg_sql",
    "inert",
    "ingest",
    "layer_document",
    "list_layers",
    "list_plans",
    "load_evidence",
    "load_layer",
    "load_plan",
    "load_report",
    "noise_floor",
    "open_store",
    "pack_segments",
    "page_name",
    "parse_envelope",
    "parse_head",
    "parse_overrides",
    "parse_selector",
    "plan_document",
    "plan_status",
    "prove_consistency",
    "prove_inclusion",
    "publish_iceberg",
    "read_attempt_ids_file",
    "read_evidence",
    "read_layer",
    "read_ledger",
    "read_plan_file",
    "read_task_list",
    "record_comparison",
    "record_noise",
    "record_report",
    "record_summary",
    "registry_sql",
    "render_comparison_html",
    "render_comparison_markdown",
    "render_comparison_table",
    "render_html",
    "render_markdown",
    "render_noise_html",
    "render_noise_markdown",
    "render_noise_table",
    "render_regressions_markdown",
    "render_regressions_table",
    "render_summary_html",
    "render_summary_markdown",
    "render_summary_table",
    "render_table",
    "report_document",
    "retract",
    "retracted_ids",
    "retraction_table",
    "run_query",
    "sample_key",
    "short",
    "size_figures",
    "store_report",
    "summarize",
    "sync",
    "system_label",
    "system_rates",
    "terminal_identity_of",
    "unit_key",
    "verify",
    "verify_consistency",
    "verify_inclusion",
    "write_checkpoint",
]
