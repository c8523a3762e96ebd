"""The registry's public contract: pydantic models of every record shape it reads or writes."""

from .attempt import (
    ATTEMPT_SCHEMA,
    COHORT_SCHEME,
    INVALID_CLASSES,
    VALID_CLASSES,
    AttemptRecord,
    CohortInputs,
    Envelope,
    TerminalClass,
    format_timestamp,
)
from .ledger import COMMIT_SCHEMA, Commit, LayerEntry, SegmentEntry, SourceEntry

__all__ = [
    "ATTEMPT_SCHEMA",
    "COHORT_SCHEME",
    "COMMIT_SCHEMA",
    "INVALID_CLASSES",
    "VALID_CLASSES",
    "AttemptRecord",
    "CohortInputs",
    "Commit",
    "Envelope",
    "LayerEntry",
    "SegmentEntry",
    "SourceEntry",
    "TerminalClass",
    "format_timestamp",
]
