"""registry: a content-addressed evidence registry for coding-agent evaluation attempts.

This module is the public API; everything else in the package is private.
"""

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

__all__ = [
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
