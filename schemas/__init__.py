"""The registry's public contract: pydantic models of every record shape it reads or writes.

Names are resolved on first use (PEP 562): `import registry_schemas` loads no model, and
`from registry_schemas import TaskReport` loads the module that defines it (and the modules it
uses), not every layer's models. To add a public name, import it under `TYPE_CHECKING` (for
type checkers), list it in `_EXPORTS` under its module, and in `__all__`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .attempt import (
        ATTEMPT_SCHEMA,
        COHORT_SCHEME,
        CONFIGURATION_INPUTS,
        INVALID_CLASSES,
        TASK_INPUTS,
        VALID_CLASSES,
        AttemptRecord,
        CohortInputs,
        Envelope,
        TerminalClass,
        format_timestamp,
    )
    from .comparison import (
        COMPARISON_SCHEMA,
        ArmCounts,
        ArmSummary,
        CandidateComparison,
        Comparison,
        ComparisonSnapshot,
        DroppedTask,
        ExactTest,
        PairedTask,
        Verdict,
    )
    from .ledger import (
        CHECKPOINT_SCHEMA,
        COMMIT_SCHEMA,
        Checkpoint,
        Commit,
        LayerEntry,
        PackedSegment,
        PackEntry,
        RetractionEntry,
        SegmentEntry,
        SourceEntry,
    )
    from .plan import (
        PLAN_SCHEMA,
        VERDICT_TABLE,
        Budget,
        DecisionRule,
        Plan,
        PlanArms,
        PlanEntry,
        PrimaryMetric,
        StopRule,
        Threshold,
        TimeoutPolicy,
    )
    from .regressions import (
        REGRESSIONS_SCHEMA,
        Change,
        NotExamined,
        RegressionCounts,
        RegressionReport,
        SampleCounts,
        TaskRegression,
    )
    from .report import (
        REPORT_SCHEMA,
        CohortReport,
        CommitRef,
        CostStats,
        ExperimentProvenance,
        Generator,
        Rate,
        RuntimeStats,
        Snapshot,
        SystemIdentity,
        SystemReport,
        TaskReport,
        TokenStats,
    )
    from .suite import NOISE_SCHEMA, SUMMARY_SCHEMA, NoiseFloor, PassK, Summary, SystemSummary

_EXPORTS: dict[str, tuple[str, ...]] = {
    "attempt": (
        "ATTEMPT_SCHEMA",
        "COHORT_SCHEME",
        "CONFIGURATION_INPUTS",
        "INVALID_CLASSES",
        "TASK_INPUTS",
        "VALID_CLASSES",
        "AttemptRecord",
        "CohortInputs",
        "Envelope",
        "TerminalClass",
        "format_timestamp",
    ),
    "comparison": (
        "COMPARISON_SCHEMA",
        "ArmCounts",
        "ArmSummary",
        "CandidateComparison",
        "Comparison",
        "ComparisonSnapshot",
        "DroppedTask",
        "ExactTest",
        "PairedTask",
        "Verdict",
    ),
    "ledger": (
        "CHECKPOINT_SCHEMA",
        "COMMIT_SCHEMA",
        "Checkpoint",
        "Commit",
        "LayerEntry",
        "PackedSegment",
        "PackEntry",
        "RetractionEntry",
        "SegmentEntry",
        "SourceEntry",
    ),
    "plan": (
        "PLAN_SCHEMA",
        "VERDICT_TABLE",
        "Budget",
        "DecisionRule",
        "Plan",
        "PlanArms",
        "PlanEntry",
        "PrimaryMetric",
        "StopRule",
        "Threshold",
        "TimeoutPolicy",
    ),
    "regressions": (
        "REGRESSIONS_SCHEMA",
        "Change",
        "NotExamined",
        "RegressionCounts",
        "RegressionReport",
        "SampleCounts",
        "TaskRegression",
    ),
    "report": (
        "REPORT_SCHEMA",
        "CohortReport",
        "CommitRef",
        "CostStats",
        "ExperimentProvenance",
        "Generator",
        "Rate",
        "RuntimeStats",
        "Snapshot",
        "SystemIdentity",
        "SystemReport",
        "TaskReport",
        "TokenStats",
    ),
    "suite": (
        "NOISE_SCHEMA",
        "SUMMARY_SCHEMA",
        "NoiseFloor",
        "PassK",
        "Summary",
        "SystemSummary",
    ),
}
"""Module (relative to this package) -> the public names it defines."""

__all__ = [
    "ATTEMPT_SCHEMA",
    "ArmCounts",
    "ArmSummary",
    "AttemptRecord",
    "Budget",
    "CHECKPOINT_SCHEMA",
    "COHORT_SCHEME",
    "COMMIT_SCHEMA",
    "COMPARISON_SCHEMA",
    "CONFIGURATION_INPUTS",
    "CandidateComparison",
    "Change",
    "Checkpoint",
    "CohortInputs",
    "CohortReport",
    "Commit",
    "CommitRef",
    "Comparison",
    "ComparisonSnapshot",
    "CostStats",
    "DecisionRule",
    "DroppedTask",
    "Envelope",
    "ExactTest",
    "ExperimentProvenance",
    "Generator",
    "INVALID_CLASSES",
    "LayerEntry",
    "NOISE_SCHEMA",
    "NoiseFloor",
    "NotExamined",
    "PLAN_SCHEMA",
    "PackEntry",
    "PackedSegment",
    "PairedTask",
    "PassK",
    "Plan",
    "PlanArms",
    "PlanEntry",
    "PrimaryMetric",
    "REGRESSIONS_SCHEMA",
    "REPORT_SCHEMA",
    "Rate",
    "RegressionCounts",
    "RegressionReport",
    "RetractionEntry",
    "RuntimeStats",
    "SUMMARY_SCHEMA",
    "SampleCounts",
    "SegmentEntry",
    "Snapshot",
    "SourceEntry",
    "StopRule",
    "Summary",
    "SystemIdentity",
    "SystemReport",
    "SystemSummary",
    "TASK_INPUTS",
    "TaskRegression",
    "TaskReport",
    "TerminalClass",
    "Threshold",
    "TimeoutPolicy",
    "TokenStats",
    "VALID_CLASSES",
    "VERDICT_TABLE",
    "Verdict",
    "format_timestamp",
]

_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    """Import the module defining a public name on first use, and keep the name."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
