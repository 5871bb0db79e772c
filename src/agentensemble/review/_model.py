"""What a review gate is: its configuration (`Review`), what it asks (`ReviewRequest`) and
what a person answers (`ReviewDecision`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any, ClassVar

from agentensemble.errors import ValidationError

__all__ = [
    "DEFAULT_REVIEW_TIMEOUT",
    "OnTimeoutAction",
    "PendingReview",
    "Review",
    "ReviewDecision",
    "ReviewPolicy",
    "ReviewRequest",
    "ReviewTiming",
    "check_on_timeout",
    "check_timeout",
]

DEFAULT_REVIEW_TIMEOUT = timedelta(minutes=5)
"""How long a gate waits for a decision unless its `Review` says otherwise."""


class ReviewPolicy(StrEnum):
    """When after-execution gates fire for tasks that do not set `review` themselves."""

    NEVER = "NEVER"
    """Only tasks with ``review=Review.required()`` are reviewed (the default)."""
    AFTER_EVERY_TASK = "AFTER_EVERY_TASK"
    """Every task is reviewed, except those with ``review=Review.skip()``."""
    AFTER_LAST_TASK = "AFTER_LAST_TASK"
    """Only the run's last task is reviewed (sequential workflows)."""


class ReviewTiming(StrEnum):
    """When a review happens relative to the work it reviews."""

    BEFORE_EXECUTION = "BEFORE_EXECUTION"
    """Before a task starts (`Task.before_review`): there is no output yet."""
    DURING_EXECUTION = "DURING_EXECUTION"
    """While a task runs: a tool asks for approval or a person's input."""
    AFTER_EXECUTION = "AFTER_EXECUTION"
    """After a task produced its output (`Task.review`, `ReviewPolicy`)."""


class OnTimeoutAction(StrEnum):
    """What a gate does when nobody decides in time."""

    CONTINUE = "CONTINUE"
    """Go on as if approved."""
    EXIT_EARLY = "EXIT_EARLY"
    """End the run, keeping what completed (exit reason ``TIMEOUT``)."""
    FAIL = "FAIL"
    """Fail the run with `ReviewTimeoutError`, which carries what completed."""
    PAUSE = "PAUSE"
    """End the run with exit reason ``PAUSED``, the review waiting in the output
    (`EnsembleOutput.pending_review`) and in the ensemble's checkpoint; continue it, in any
    process, with ``run(resume=run_id, decision=...)``. Needs ``Ensemble(checkpoint=...)``."""


def check_on_timeout(value: object, owner: str) -> OnTimeoutAction:
    """`value` as an `OnTimeoutAction` (its name is accepted too), else a ValidationError."""
    if isinstance(value, OnTimeoutAction):
        return value
    if isinstance(value, str) and value.strip().upper() in OnTimeoutAction.__members__:
        return OnTimeoutAction[value.strip().upper()]
    if value is None:
        raise ValidationError(f"{owner} on_timeout must not be None")
    raise ValidationError(
        f"{owner} on_timeout must be an OnTimeoutAction (CONTINUE, EXIT_EARLY, FAIL or PAUSE), "
        f"got: {value!r}"
    )


def check_timeout(value: object, owner: str) -> timedelta:
    """`value` (a timedelta or seconds) as a non-negative timedelta, else a ValidationError."""
    if value is None:
        raise ValidationError(f"{owner} timeout must not be None (0 waits forever)")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValidationError(f"{owner} timeout must be a finite number, got: {value!r}")
        duration = timedelta(seconds=value)
    elif isinstance(value, timedelta):
        duration = value
    else:
        raise ValidationError(
            f"{owner} timeout must be a timedelta or a number of seconds, got: {value!r}"
        )
    if duration < timedelta(0):
        raise ValidationError(f"{owner} timeout must not be negative, got: {value!r}")
    return duration


@dataclass(frozen=True, slots=True, init=False)
class Review:
    """How a review gate behaves: `Review.required()`, `Review.skip()` or ``Review(...)``.

    ``Review(timeout=..., on_timeout=..., prompt=..., required_role=...)`` is a gate that
    fires; `timeout` is a timedelta or seconds (0 waits forever), `on_timeout` what happens
    when nobody decides in time, `prompt` what the reviewer is asked, and `required_role`
    who may decide (the dashboard shows the review read-only to others). ``enabled=False``
    is `Review.skip()`.
    """

    enabled: bool
    """False for `Review.skip()`: no gate, even when the ensemble's policy would fire one."""
    timeout: timedelta
    """How long to wait for a decision; ``timedelta(0)`` waits forever."""
    on_timeout: OnTimeoutAction
    prompt: str | None
    """What the reviewer is asked (None: the handler's default wording)."""
    required_role: str | None

    def __init__(
        self,
        *,
        timeout: timedelta | float = DEFAULT_REVIEW_TIMEOUT,
        on_timeout: OnTimeoutAction | str = OnTimeoutAction.EXIT_EARLY,
        prompt: str | None = None,
        required_role: str | None = None,
        enabled: bool = True,
    ) -> None:
        if not isinstance(enabled, bool):
            raise ValidationError(f"Review enabled must be a bool, got: {enabled!r}")
        if prompt is not None and not isinstance(prompt, str):
            raise ValidationError(f"Review prompt must be a string, got: {prompt!r}")
        if required_role is not None and (
            not isinstance(required_role, str) or not required_role.strip()
        ):
            raise ValidationError(
                f"Review required_role must not be blank when set, got: {required_role!r}"
            )
        set_ = object.__setattr__
        set_(self, "enabled", enabled)
        set_(self, "timeout", check_timeout(timeout, "Review"))
        set_(self, "on_timeout", check_on_timeout(on_timeout, "Review"))
        set_(self, "prompt", prompt)
        set_(self, "required_role", required_role)

    @classmethod
    def required(cls, prompt: str | None = None) -> Review:
        """A gate that always fires: 5-minute timeout, then exit early."""
        return cls(prompt=prompt)

    @classmethod
    def skip(cls) -> Review:
        """No gate for this task, whatever the ensemble's `ReviewPolicy` says."""
        return cls(enabled=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewRequest:
    """What a `ReviewHandler` is asked to decide."""

    task_description: str
    task_output: str | None
    """The output under review (None before execution); for a tool approval, what the tool
    is about to do; for `human_input`, the agent's question."""
    timing: ReviewTiming
    timeout: timedelta
    """How long the run waits for the decision (``timedelta(0)``: forever). The engine
    enforces it; a handler may show a countdown."""
    on_timeout: OnTimeoutAction
    prompt: str | None = None
    required_role: str | None = None
    review_id: str = ""
    """Unique per review in the run; events about this review carry it."""
    task_id: str = ""
    """The task execution under review (``task_id`` on its task events)."""
    tool_name: str | None = None
    """The tool asking, for reviews during execution."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingReview:
    """A review a paused run waits for (`EnsembleOutput.pending_review`): answer it with
    ``run(resume=run_id, decision=ReviewDecision...)``."""

    review_id: str
    task_description: str
    task_output: str | None
    """The output under review (None before execution); for `human_input`, the question."""
    timing: ReviewTiming
    prompt: str | None = None
    tool_name: str | None = None
    """The tool that asked, for a review during execution (``human_input``...)."""

    @classmethod
    def of(cls, request: ReviewRequest) -> PendingReview:
        """The pending review of `request`."""
        return cls(
            review_id=request.review_id,
            task_description=request.task_description,
            task_output=request.task_output,
            timing=request.timing,
            prompt=request.prompt,
            tool_name=request.tool_name,
        )

    def to_data(self) -> dict[str, Any]:
        """As JSON data (what a checkpoint keeps)."""
        return {
            "review_id": self.review_id,
            "task_description": self.task_description,
            "task_output": self.task_output,
            "timing": self.timing.value,
            "prompt": self.prompt,
            "tool_name": self.tool_name,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> PendingReview:
        """Read back what `to_data` wrote."""
        return cls(
            review_id=data["review_id"],
            task_description=data["task_description"],
            task_output=data.get("task_output"),
            timing=ReviewTiming(data["timing"]),
            prompt=data.get("prompt"),
            tool_name=data.get("tool_name"),
        )

    def answers(self, request: ReviewRequest) -> bool:
        """Whether `request` asks again what this review asked (same task, timing, tool)."""
        return (request.task_description, request.timing, request.tool_name) == (
            self.task_description,
            self.timing,
            self.tool_name,
        )


@dataclass(frozen=True, slots=True)
class ReviewDecision:
    """A reviewer's answer: ``ReviewDecision.Continue()``, ``ReviewDecision.Edit(text)`` or
    ``ReviewDecision.ExitEarly()``. Match on them with ``case ReviewDecision.Edit(text):``."""

    Continue: ClassVar[type[Continue]]
    Edit: ClassVar[type[Edit]]
    ExitEarly: ClassVar[type[ExitEarly]]
    kind: ClassVar[str] = ""
    """``CONTINUE``, ``EDIT`` or ``EXIT_EARLY``."""


@dataclass(frozen=True, slots=True)
class Continue(ReviewDecision):
    """Approve: the work goes on unchanged."""

    kind: ClassVar[str] = "CONTINUE"


@dataclass(frozen=True, slots=True)
class Edit(ReviewDecision):
    """Replace the output under review (or a tool's input) with `revised_output`. Before a
    task runs there is nothing to edit, and an Edit counts as Continue."""

    revised_output: str
    kind: ClassVar[str] = "EDIT"

    def __post_init__(self) -> None:
        if self.revised_output is None:
            raise ValidationError("ReviewDecision.Edit revised_output must not be None")
        if not isinstance(self.revised_output, str):
            raise ValidationError(
                f"ReviewDecision.Edit revised_output must be a string, got: {self.revised_output!r}"
            )


@dataclass(frozen=True, slots=True)
class ExitEarly(ReviewDecision):
    """Stop the run, keeping every output completed so far. `timed_out` marks a decision
    made because nobody answered (the run's exit reason is then ``TIMEOUT``)."""

    timed_out: bool = False
    kind: ClassVar[str] = "EXIT_EARLY"


ReviewDecision.Continue = Continue
ReviewDecision.Edit = Edit
ReviewDecision.ExitEarly = ExitEarly
