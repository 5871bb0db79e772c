"""The one way the engine asks a reviewer (BEHAVIOUR 10).

Every review (a gate before or after a task, a tool asking for approval, `human_input`)
goes through `ask`: the request gets its id, events fire, the task's deadlines are suspended
while a person decides, the request's timeout is enforced here (so handlers need no timer)
and its on-timeout action applied.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING

from agentensemble._calling import is_awaitable, start_daemon_call
from agentensemble._control import ControlFlowSignal
from agentensemble.errors import ValidationError
from agentensemble.execution._context import new_id
from agentensemble.review import ReviewDecision, ReviewHandler, ReviewPolicy, ReviewRequest
from agentensemble.review._handlers import timeout_decision
from agentensemble.review._model import Continue, Edit, ExitEarly, OnTimeoutAction, PendingReview
from agentensemble.review._signals import ExitEarlyRequested, RunPaused

if TYPE_CHECKING:
    from agentensemble.execution._context import TaskContext
    from agentensemble.execution._recorder import TaskRecorder
    from agentensemble.tools._context import Reviewer

__all__ = ["RunReview", "ask", "reviewer_for"]


@dataclass(frozen=True, slots=True)
class RunReview:
    """A run's reviewer: its handler, its policy, and the turn its reviews take one by one
    (one person, one question at a time; a review's timeout starts once it has the turn)."""

    handler: ReviewHandler
    policy: ReviewPolicy = ReviewPolicy.NEVER
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)


async def ask(
    task: TaskContext, recorder: TaskRecorder, request: ReviewRequest, *, exit_ends_run: str = ""
) -> ReviewDecision | None:
    """The run's handler's decision on `request`, or None when the run is ending (nobody is
    asked any more). A timeout applies the request's on-timeout action; FAIL raises
    `ReviewTimedOut`. With `exit_ends_run` (the exit's message), an ExitEarly decision ends
    the run: the stop is requested before the next review's turn.

    While the review waits for its turn and for the person, the task's deadlines are
    suspended; every review that starts ends with a decided or timed-out event.
    """
    review = task.run.review
    if review is None:  # callers check first
        raise AssertionError("review asked in a run without a review handler")
    request = _with_handler_defaults(
        dataclasses.replace(request, review_id=new_id(), task_id=task.task_id), review.handler
    )
    with task.deadlines.paused():
        async with review.turn:
            if task.run.stop.requested:
                return None
            try:
                decision = await _decide(task, review, recorder, request)
            except ControlFlowSignal as signal:  # a timeout with FAIL or PAUSE, a pause
                task.run.stop.request(signal)
                raise
            if exit_ends_run and isinstance(decision, ExitEarly):
                task.run.stop.request(
                    ExitEarlyRequested(exit_ends_run, timed_out=decision.timed_out)
                )
            return decision


def _with_handler_defaults(request: ReviewRequest, handler: ReviewHandler) -> ReviewRequest:
    """A request without a time limit takes its handler's `default_timeout` and
    `default_on_timeout`, when the handler has them (the web dashboard's)."""
    default = getattr(handler, "default_timeout", None)
    if request.timeout or not isinstance(default, timedelta) or not default:
        return request
    action = getattr(handler, "default_on_timeout", None)
    return dataclasses.replace(
        request,
        timeout=default,
        on_timeout=action if isinstance(action, OnTimeoutAction) else request.on_timeout,
    )


async def _decide(
    task: TaskContext, review: RunReview, recorder: TaskRecorder, request: ReviewRequest
) -> ReviewDecision:
    await recorder.review_requested(request)
    checkpoint = task.run.checkpoint
    resumed = checkpoint.take_decision(request) if checkpoint is not None else None
    if resumed is not None:  # a paused run, resumed with the decision on this review
        await recorder.review_decided(request, resumed, 0.0)
        return resumed
    if getattr(review.handler, "pauses", False):
        raise _paused(task, request)
    started = time.perf_counter()
    decision: ReviewDecision | None = None
    try:
        async with asyncio.timeout(request.timeout.total_seconds() or None) as limit:
            try:
                answer = await _call(review.handler, request)
            except RunPaused:  # a handler applying a PAUSE timeout of its own (the page's)
                raise _paused(task, request) from None
            decision = _checked(answer, review.handler)
    except TimeoutError:
        if not limit.expired():
            raise
        await recorder.review_timed_out(request, time.perf_counter() - started)
        if request.on_timeout is OnTimeoutAction.PAUSE:
            raise _paused(task, request) from None
        return timeout_decision(request)
    finally:
        if decision is None and not limit.expired():  # cancelled, or the handler failed
            await recorder.review_decided(request, None, time.perf_counter() - started)
    await recorder.review_decided(request, decision, time.perf_counter() - started)
    return decision


def _paused(task: TaskContext, request: ReviewRequest) -> RunPaused:
    """The signal that pauses the run at `request` (a run without a checkpoint could not
    be resumed, so it cannot pause: a clear error instead)."""
    if task.run.checkpoint is None:
        raise ValidationError(
            f"Review of task '{request.task_description[:80]}' would pause the run, and a "
            "paused run resumes from its checkpoint: set Ensemble(checkpoint=path or "
            "CheckpointStore)"
        )
    return RunPaused(PendingReview.of(request))


async def _call(handler: ReviewHandler, request: ReviewRequest) -> object:
    """The handler's answer; a sync handler runs in a daemon thread of its own, which a
    timeout abandons without holding a pool slot or the process's exit."""
    if inspect.iscoroutinefunction(handler.review):
        return await handler.review(request)
    answer = await asyncio.wrap_future(start_daemon_call(handler.review, request))
    return await answer if is_awaitable(answer) else answer


def _checked(decision: object, handler: object) -> ReviewDecision:
    """`decision` if it is one of the three decisions, else a clear error naming the
    handler and what it returned."""
    if isinstance(decision, (Continue, Edit, ExitEarly)):
        return decision
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
        decision = await ask(task, recorder, request)
        return decision if decision is not None else ExitEarly()  # ending: refuse, unasked

    return reviewer
