"""The one private base of control-flow exceptions: ways a run ends early that are not errors.

Exit early and review timeouts derive from `ControlFlowSignal`. It is a `BaseException`, so
no generic ``except Exception`` (in the engine or in user code) wraps or swallows it; the
run turns it into its `ExitReason` and returns the outputs completed so far.
"""

from __future__ import annotations

from typing import Any

from agentensemble.enums import ExitReason

__all__ = ["ControlFlowSignal", "find_signal"]


class ControlFlowSignal(BaseException):
    """Ends the run early with `exit_reason`, keeping every completed output."""

    exit_reason: ExitReason = ExitReason.USER_EXIT_EARLY

    def as_error(self, completed_outputs: tuple[Any, ...]) -> Exception | None:
        """The error the run raises instead of returning (None: it returns its completed
        outputs with `exit_reason`)."""
        return None


def find_signal(error: BaseException) -> ControlFlowSignal | None:
    """The signal `error` is, or carries inside (nested) exception groups; else None."""
    if isinstance(error, ControlFlowSignal):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            found = find_signal(inner)
            if found is not None:
                return found
    return None
