"""The one way the engine asks a reviewer (BEHAVIOUR 10).

Every review (a gate before or after a task, a tool asking for approval, `human_input`)
goes through `ask`: the request gets its id, events fire, the task's deadlines are suspended
while a person decides, the request's timeout is enforced here (so handlers need no timer)
and its on-timeout action applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentensemble._calling import call_user_code
from agentensemble.errors import ValidationError
from agentensemble.execution._context import new_id
from agentensemble.review import ReviewDecision, ReviewHandler, ReviewPolicy, ReviewRequest
from agentensemble.review._handlers import timeout_decision
from agentensemble.review._model import Continue, Edit, ExitEarly

if TYPE_CHECKING:
    from agentensemble.execution._context import TaskContext
    from agentensemble.execution._recorder import TaskRecorder
    from agentensemble.tools._context import Reviewer

__all__ = ["RunReview", "ask", "reviewer_for"]


@dataclass(frozen=True, slots=True)
class RunReview:
    """A run's reviewer: its handler, its policy, and the turn its gates take one by one."""

    handler: ReviewHandler
    policy: ReviewPolicy = ReviewPolicy.NEVER
    gate_turn: asyncio.Lock = field(default_factory=asyncio.Lock)


async def ask(task: TaskContext, recorder: TaskRecorder, request: ReviewRequest) -> ReviewDecision:
    """The run's handler's decision on `request` (Continue when nobody answered in time and
    the request says so). Raises `ReviewTimedOut` for an on-timeout FAIL."""
    review = task.run.review
    if review is None:  # callers check first
        raise AssertionError("review asked in a run without a review handler")
    request = dataclasses.replace(request, review_id=new_id(), task_id=task.task_id)
    with task.deadlines.paused():
        await recorder.review_requested(request)
        started = time.perf_counter()
        seconds = request.timeout.total_seconds()
        try:
            async with asyncio.timeout(seconds or None) as limit:
                decision = await call_user_code(review.handler.review, request)
        except TimeoutError:
            if not limit.expired():
                raise
            await recorder.review_timed_out(request, time.perf_counter() - started)
            return timeout_decision(request)
    _check_decision(decision, review.handler)
    await recorder.review_decided(request, decision, time.perf_counter() - started)
    return decision  # type: ignore[no-any-return]


def _check_decision(decision: object, handler: object) -> None:
    if not isinstance(decision, (Continue, Edit, ExitEarly)):
        raise ValidationError(
            f"Review handler {handler!r} returned {decision!r}: a review must return "
            "ReviewDecision.Continue(), ReviewDecision.Edit(text) or ReviewDecision.ExitEarly()"
        )


def reviewer_for(task: TaskContext, recorder: TaskRecorder) -> Reviewer | None:
    """What `ToolContext.request_approval` calls for the task's tools (None without a
    review handler)."""
    if task.run.review is None:
        return None

    async def reviewer(request: ReviewRequest) -> ReviewDecision:
        return await ask(task, recorder, request)

    return reviewer
