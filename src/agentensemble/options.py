"""`RunOptions`: settings for one run, and per-run overrides of ensemble settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from agentensemble._checks import (
    as_tuple,
    check_budget,
    require_int,
    require_seconds,
    require_text,
)
from agentensemble._hook_checks import check_hooks
from agentensemble.errors import ValidationError
from agentensemble.observability._listeners import check_listeners

__all__ = ["RunOptions", "limit_sync_threads"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """Options for one run; a limit left None keeps the ensemble's value."""

    max_tool_output_length: int | None = None
    """Characters of each tool result the model sees; -1 for no limit."""
    tool_log_truncate_length: int | None = None
    """Characters of tool input/output written to logs; -1 for all, 0 for none."""
    run_id: str | None = None
    """The run's id (``ensemble_id`` on every event and in the trace); a new UUID when None.
    Choose one to join the run with your own records, a queue message id say."""
    resume: str | None = None
    """The id of a run the ensemble's checkpoint recorded: continue it instead of starting
    a new run (the same as ``run(resume=...)``)."""
    timeout: timedelta | float | None = None
    """A deadline for the whole run (a timedelta, or seconds). When it expires, running
    tasks are cancelled and the run returns the completed outputs with
    ``exit_reason == ExitReason.TIMEOUT``."""
    listeners: Sequence[object] = ()
    """Listeners for this run only, after the ensemble's own."""
    hooks: Sequence[object] = ()
    """Before-hooks for this run only (objects with ``before_model_call`` and/or
    ``before_tool_call``), run after the ensemble's own; see `agentensemble.hooks`."""
    max_tokens: int | None = None
    """Most tokens (input and output, as the models report them) the run's model calls may
    use. Checked before every model call: once spent, the run stops with the completed
    outputs and ``exit_reason == ExitReason.BUDGET``. Calls already running finish, so
    tasks running at once can go over by what their calls in flight use."""
    max_cost: Decimal | float | None = None
    """Most the run's model calls may cost, in the currency of the ensemble's
    `cost_configuration` (which it needs); spent like `max_tokens`. Kept as the Decimal
    written."""
    max_model_calls: int | None = None
    """Most model calls the run may make (delegated workers' and structured-output
    corrections included); never more, even with tasks running at once. Once they are
    made, the run stops like `max_tokens`."""

    def __post_init__(self) -> None:
        check_length(self.max_tool_output_length, "RunOptions max_tool_output_length")
        check_length(self.tool_log_truncate_length, "RunOptions tool_log_truncate_length")
        if self.run_id is not None:
            require_text(self.run_id, "RunOptions run_id must not be blank when set")
        if self.resume is not None:
            require_text(self.resume, "RunOptions resume must not be blank when set")
        if self.timeout is not None:
            require_seconds(self.timeout, "RunOptions timeout")
        listeners = as_tuple(self.listeners, "RunOptions listeners")
        check_listeners(listeners, field="RunOptions listeners")
        object.__setattr__(self, "listeners", listeners)
        object.__setattr__(self, "hooks", check_hooks(self.hooks, "RunOptions hooks"))
        _, cost, _ = check_budget(
            "RunOptions", self.max_tokens, self.max_cost, self.max_model_calls
        )
        object.__setattr__(self, "max_cost", cost)

    @property
    def timeout_seconds(self) -> float | None:
        """`timeout` in seconds (None when unset)."""
        return None if self.timeout is None else require_seconds(self.timeout, "RunOptions timeout")


def check_length(value: int | None, field: str) -> None:
    """A length setting is None (unset), -1 (unlimited) or >= 0."""
    if value is None:
        return
    require_int(value, field)
    if value < -1:
        raise ValidationError(f"{field} must be -1 (unlimited) or >= 0, got: {value}")


def limit_sync_threads(limit: int) -> None:
    """Cap the threads that run sync tools, callbacks, guardrails and handlers, across
    every run in this process (64 by default). Each run also holds at most its ensemble's
    `max_sync_threads` of them. Above the cap, sync calls wait for a thread (within their
    task's deadline); lowering the cap retires threads as they become idle."""
    from agentensemble._calling import set_sync_thread_limit

    if require_int(limit, "limit_sync_threads limit") <= 0:
        raise ValidationError(f"limit_sync_threads limit must be > 0, got: {limit}")
    set_sync_thread_limit(limit)
