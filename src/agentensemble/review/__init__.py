"""Human in the loop: review gates before and after tasks, review policies, tool approvals.

A `ReviewHandler` (``ReviewHandler.console()``, ``.auto_approve()``, or your own) answers
each `ReviewRequest` with a `ReviewDecision`: Continue, Edit(revised_output) or ExitEarly.
Gates are configured per task (``Task(review=Review.required(), before_review=...)``) and
per ensemble (``Ensemble(review_handler=..., review_policy=ReviewPolicy.AFTER_EVERY_TASK)``).
"""

from typing import TYPE_CHECKING, Any

from agentensemble.errors import ReviewTimeoutError
from agentensemble.review._handlers import AutoApproveHandler, PauseHandler, ReviewHandler
from agentensemble.review._model import (
    DEFAULT_REVIEW_TIMEOUT,
    OnTimeoutAction,
    PendingReview,
    Review,
    ReviewDecision,
    ReviewPolicy,
    ReviewRequest,
    ReviewTiming,
)
from agentensemble.review._signals import ExitEarlyRequested

__all__ = [
    "DEFAULT_REVIEW_TIMEOUT",
    "AutoApproveHandler",
    "ConsoleReviewHandler",
    "ExitEarlyRequested",
    "OnTimeoutAction",
    "PauseHandler",
    "PendingReview",
    "Review",
    "ReviewDecision",
    "ReviewHandler",
    "ReviewPolicy",
    "ReviewRequest",
    "ReviewTimeoutError",
    "ReviewTiming",
]

if TYPE_CHECKING:
    from agentensemble.review._console import ConsoleReviewHandler


def __getattr__(name: str) -> Any:
    if name == "ConsoleReviewHandler":  # loads on first use (it needs asyncio)
        from agentensemble.review._console import ConsoleReviewHandler

        return ConsoleReviewHandler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
