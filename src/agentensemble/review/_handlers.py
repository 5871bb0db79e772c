"""`ReviewHandler`: who answers review requests, and the built-in automatic ones."""

from __future__ import annotations

import abc
from collections.abc import Awaitable
from datetime import timedelta
from typing import IO, TYPE_CHECKING, Any

from agentensemble.errors import ValidationError
from agentensemble.review._model import Continue, ReviewDecision, ReviewRequest

if TYPE_CHECKING:
    from agentensemble.review._console import ConsoleReviewHandler

__all__ = [
    "AutoApproveHandler",
    "PauseHandler",
    "ReviewHandler",
    "check_handler",
    "timeout_decision",
]


class ReviewHandler(abc.ABC):
    """Answers review requests: implement ``review(request) -> ReviewDecision``.

    `review` may be async, or sync (it then runs in a worker thread, so it may block on
    input). Any object with such a `review` method is accepted; subclassing is optional.
    The engine enforces the request's timeout: when it expires the request's `on_timeout`
    applies and a late answer is ignored, so a handler never needs a timer of its own.
    A handler may set `default_timeout` (a timedelta) and `default_on_timeout`: requests
    without a time limit (timeout 0) then take them, as the web dashboard's handler does.
    """

    @abc.abstractmethod
    def review(self, request: ReviewRequest) -> ReviewDecision | Awaitable[ReviewDecision]:
        """Decide on `request`: Continue, Edit(revised_output) or ExitEarly()."""

    @classmethod
    def __subclasshook__(cls, candidate: type) -> Any:
        if cls is ReviewHandler:
            return callable(getattr(candidate, "review", None))
        return NotImplemented

    @staticmethod
    def console(
        *, input: IO[str] | None = None, output: IO[str] | None = None
    ) -> ConsoleReviewHandler:
        """Ask a person at the terminal: ``c`` or Enter continues, ``e`` then text edits,
        ``x`` exits early. `input`/`output` default to stdin/stdout."""
        from agentensemble.review._console import ConsoleReviewHandler

        return ConsoleReviewHandler(input=input, output=output)

    @staticmethod
    def auto_approve() -> AutoApproveHandler:
        """Continue at once, every time (tests, CI, unattended runs)."""
        return AutoApproveHandler()

    @staticmethod
    def pause() -> PauseHandler:
        """Pause the run at every review, at once: the run ends with exit reason
        ``PAUSED`` and is continued with ``run(resume=run_id, decision=...)`` once someone
        decided (in this process or another; needs ``Ensemble(checkpoint=...)``)."""
        return PauseHandler()

    @staticmethod
    def auto_approve_with_delay(delay: timedelta | float) -> AutoApproveHandler:
        """Continue after `delay` (a timedelta or seconds), as a slow reviewer would."""
        return AutoApproveHandler(delay)


class AutoApproveHandler(ReviewHandler):
    """Approves every request, optionally after a delay."""

    def __init__(self, delay: timedelta | float = 0) -> None:
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, (int, float))
            or not 0 <= seconds < float("inf")
        ):
            raise ValidationError(
                f"auto_approve_with_delay delay must be a timedelta or a non-negative number "
                f"of seconds, got: {delay!r}"
            )
        self.delay = float(seconds)

    async def review(self, request: ReviewRequest) -> ReviewDecision:
        if self.delay:
            import asyncio

            await asyncio.sleep(self.delay)
        return Continue()

    def __repr__(self) -> str:
        return f"AutoApproveHandler(delay={self.delay:g})" if self.delay else "AutoApproveHandler()"


class PauseHandler(ReviewHandler):
    """Pauses the run at every review (see `ReviewHandler.pause`); the engine never calls
    its `review`."""

    pauses = True

    def review(self, request: ReviewRequest) -> ReviewDecision:
        raise AssertionError("the engine pauses the run instead of asking a PauseHandler")

    def __repr__(self) -> str:
        return "PauseHandler()"


def check_handler(handler: Any, field: str) -> ReviewHandler | None:
    """`handler` if it can answer reviews (None stays None), else a ValidationError."""
    if handler is None or isinstance(handler, ReviewHandler):
        return handler
    raise ValidationError(
        f"{field} must be a ReviewHandler (an object with a review(request) method), "
        f"got: {handler!r}"
    )


def timeout_decision(request: ReviewRequest) -> ReviewDecision:
    """What `request.on_timeout` decides when nobody answered: Continue, or
    ExitEarly(timed_out=True); ``FAIL`` raises `ReviewTimedOut`, ``PAUSE`` `RunPaused`."""
    from agentensemble.review._model import ExitEarly, OnTimeoutAction
    from agentensemble.review._signals import ReviewTimedOut

    if request.on_timeout is OnTimeoutAction.CONTINUE:
        return Continue()
    if request.on_timeout is OnTimeoutAction.EXIT_EARLY:
        return ExitEarly(timed_out=True)
    if request.on_timeout is OnTimeoutAction.PAUSE:
        from agentensemble.review._model import PendingReview
        from agentensemble.review._signals import RunPaused

        raise RunPaused(PendingReview.of(request))
    raise ReviewTimedOut(task_description=request.task_description, timeout=request.timeout)
