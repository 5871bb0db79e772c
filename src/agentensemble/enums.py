"""Public enumerations."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ExitReason", "Workflow"]


class Workflow(StrEnum):
    """How an ensemble runs its tasks."""

    SEQUENTIAL = "SEQUENTIAL"
    """One after another, in list order."""
    PARALLEL = "PARALLEL"
    """As a dependency graph: each task starts when its context tasks are done."""
    HIERARCHICAL = "HIERARCHICAL"
    """A manager agent delegates the tasks to worker agents."""


class ExitReason(StrEnum):
    """Why a run ended."""

    COMPLETED = "COMPLETED"
    USER_EXIT_EARLY = "USER_EXIT_EARLY"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"
