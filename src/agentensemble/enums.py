"""Public enumerations."""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ContextFormat",
    "ExitReason",
    "GuardrailType",
    "LoopMemoryMode",
    "LoopOutputMode",
    "MaxIterationsAction",
    "ParallelErrorStrategy",
    "Workflow",
]


class Workflow(StrEnum):
    """How an ensemble runs its tasks."""

    SEQUENTIAL = "SEQUENTIAL"
    """One after another, in list order."""
    PARALLEL = "PARALLEL"
    """As a dependency graph: each task starts when its context tasks are done."""
    HIERARCHICAL = "HIERARCHICAL"
    """A manager agent delegates the tasks to worker agents."""


class ParallelErrorStrategy(StrEnum):
    """What a parallel run does when a task fails."""

    FAIL_FAST = "FAIL_FAST"
    """Start nothing new; raise the first failure once running tasks finish."""
    CONTINUE_ON_ERROR = "CONTINUE_ON_ERROR"
    """Let independent work finish, skip dependents of failures, then raise them all."""


class ExitReason(StrEnum):
    """Why a run ended."""

    COMPLETED = "COMPLETED"
    USER_EXIT_EARLY = "USER_EXIT_EARLY"
    TIMEOUT = "TIMEOUT"
    ERROR = "ERROR"
    BUDGET = "BUDGET"
    """A token, cost or model-call budget was spent; the completed outputs are kept."""
    PAUSED = "PAUSED"
    """The run waits for a person (a review gate or a question); resume it from its
    checkpoint with ``run(resume=run_id, decision=...)``."""


class GuardrailType(StrEnum):
    """Which side of a task a guardrail checks."""

    INPUT = "INPUT"
    """Before any model call: the task's description, expected output and context."""
    OUTPUT = "OUTPUT"
    """After the answer (and its structured parsing): the raw and parsed output."""


class ContextFormat(StrEnum):
    """How structured data is written into prompts."""

    JSON = "JSON"
    """As the model or tool produced it."""
    TOON = "TOON"
    """Token-Oriented Object Notation: structured context outputs and JSON tool results are
    re-encoded, which takes far fewer tokens for uniform records (needs the ``toon`` extra)."""


class MaxIterationsAction(StrEnum):
    """What a `Loop` does after `max_iterations` (a `Graph` after `max_steps`) without its
    stop condition."""

    RETURN_LAST = "RETURN_LAST"
    """Return the last iteration's outputs as if the loop had converged."""
    THROW = "THROW"
    """Raise `MaxLoopIterationsExceededError` (`MaxGraphStepsExceededError`)."""
    RETURN_WITH_FLAG = "RETURN_WITH_FLAG"
    """Return the last outputs; `EnsembleOutput.loop_stopped_by_max_iterations(name)` (or
    `graph_termination_reason == "max_steps"`) says it did not converge."""


class LoopOutputMode(StrEnum):
    """Which outputs of a `Loop` the ensemble's output keeps."""

    LAST_ITERATION = "LAST_ITERATION"
    """Every body task's output from the last iteration."""
    FINAL_TASK_ONLY = "FINAL_TASK_ONLY"
    """Only the last body task's output from the last iteration."""
    ALL_ITERATIONS = "ALL_ITERATIONS"
    """Per body task, every iteration's text joined (``--- iteration k ---``)."""


class LoopMemoryMode(StrEnum):
    """What the memory scopes of a loop's body tasks keep between iterations."""

    ACCUMULATE = "ACCUMULATE"
    """Everything every iteration stored."""
    FRESH_PER_ITERATION = "FRESH_PER_ITERATION"
    """Nothing: the scopes are cleared before each iteration after the first."""
    WINDOW = "WINDOW"
    """The last `memory_window_size` entries of each scope."""
