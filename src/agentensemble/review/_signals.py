"""The ways a review ends a run early: exit early, and a gate that timed out with FAIL.

Both are `ControlFlowSignal`s, so no ``except Exception`` in a tool, a listener or the
engine swallows them on their way to the run, which turns them into its outcome.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agentensemble._control import ControlFlowSignal
from agentensemble.enums import ExitReason
from agentensemble.errors import ReviewTimeoutError
from agentensemble.review._model import PendingReview

__all__ = [
    "ExitEarlyRequested",
    "ReviewNotAsked",
    "ReviewTimedOut",
    "RunPaused",
    "describe_timeout",
]


class ExitEarlyRequested(ControlFlowSignal):
    """Ends the run now, keeping every completed output: the run returns with exit reason
    ``USER_EXIT_EARLY`` (``TIMEOUT`` when `timed_out`). Raised by the engine when a
    reviewer exits early; a tool may raise it too."""

    def __init__(
        self, message: str = "Reviewer requested early exit", *, timed_out: bool = False
    ) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        self.exit_reason = ExitReason.TIMEOUT if timed_out else ExitReason.USER_EXIT_EARLY


class ReviewTimedOut(ControlFlowSignal):
    """A gate with ``on_timeout=FAIL`` got no decision: the run raises `ReviewTimeoutError`."""

    exit_reason = ExitReason.ERROR

    def __init__(self, *, task_description: str, timeout: timedelta) -> None:
        preview = task_description if len(task_description) <= 120 else task_description[:120]
        super().__init__(
            f"Review gate timed out after {describe_timeout(timeout)} waiting for a decision "
            f"on task: {preview}"
        )
        self.task_description = task_description
        self.timeout = timeout

    def as_error(self, completed_outputs: tuple[Any, ...]) -> Exception:
        return ReviewTimeoutError(
            str(self),
            task_description=self.task_description,
            timeout=self.timeout,
            completed_outputs=completed_outputs,
        )


class RunPaused(ControlFlowSignal):
    """A review waits for a person who may answer tomorrow: the run ends with exit reason
    ``PAUSED`` and the review pending in its output and its checkpoint."""

    exit_reason = ExitReason.PAUSED

    def __init__(self, pending: PendingReview) -> None:
        super().__init__(f"Run paused for review of task: {pending.task_description[:120]}")
        self.pending = pending
        self.task_key = ""
        """The paused task's place in the checkpoint (set as the signal leaves the task)."""


class ReviewNotAsked(ControlFlowSignal):
    """A task's output waits at its review gate while the run pauses for another review:
    nobody is asked, so the task does not complete (a resumed run runs it again)."""

    exit_reason = ExitReason.PAUSED


def describe_timeout(timeout: timedelta) -> str:
    """``5m``, ``90s``, ``1h 30m``, ``250ms``: a review timeout as people read it."""
    total = timeout.total_seconds()
    if total < 1:
        return f"{round(total * 1000)}ms"
    seconds = round(total)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    parts.append(f"{seconds}s" if seconds else "")
    return " ".join(part for part in parts if part)
