"""Review configuration and decisions: defaults, validation messages (BEHAVIOUR 10), and the
ensemble settings that would do nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    Phase,
    Review,
    ReviewDecision,
    ReviewHandler,
    ReviewPolicy,
    ScriptedModel,
    Task,
    ValidationError,
    Workflow,
)
from agentensemble.review import AutoApproveHandler, OnTimeoutAction
from tests.review.helpers import echo_model


def test_required_and_skip() -> None:
    required = Review.required("Look closely")
    assert required.enabled
    assert required.timeout == timedelta(minutes=5)
    assert required.on_timeout is OnTimeoutAction.EXIT_EARLY
    assert required.prompt == "Look closely"
    assert Review.required().prompt is None
    assert not Review.skip().enabled


def test_a_custom_review_takes_seconds_or_a_timedelta_and_action_names() -> None:
    review = Review(timeout=90, on_timeout="continue", required_role="editor")
    assert review.timeout == timedelta(seconds=90)
    assert review.on_timeout is OnTimeoutAction.CONTINUE
    assert review.required_role == "editor"
    assert Review(timeout=0).timeout == timedelta(0)  # waits forever


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"timeout": -1}, "Review timeout must not be negative, got: -1"),
        ({"timeout": timedelta(seconds=-1)}, "Review timeout must not be negative"),
        ({"timeout": None}, "Review timeout must not be None (0 waits forever)"),
        ({"timeout": "5m"}, "Review timeout must be a timedelta or a number of seconds"),
        ({"timeout": float("nan")}, "Review timeout must be a finite number, got: nan"),
        ({"timeout": float("inf")}, "Review timeout must be a finite number, got: inf"),
        ({"on_timeout": None}, "Review on_timeout must not be None"),
        ({"on_timeout": "later"}, "Review on_timeout must be an OnTimeoutAction"),
        ({"prompt": 3}, "Review prompt must be a string, got: 3"),
        ({"required_role": " "}, "Review required_role must not be blank when set"),
    ],
)
def test_bad_review_settings_name_the_field_and_value(
    settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError) as raised:
        Review(**settings)
    assert message in str(raised.value)


def test_a_review_copies_with_dataclasses_replace() -> None:
    import dataclasses

    changed = dataclasses.replace(Review.required("Look"), timeout=timedelta(seconds=1))
    assert changed.timeout == timedelta(seconds=1)
    assert changed.prompt == "Look"
    assert dataclasses.replace(Review.skip(), prompt="x").enabled is False


def test_decisions() -> None:
    assert ReviewDecision.Continue().kind == "CONTINUE"
    assert ReviewDecision.Edit("x").revised_output == "x"
    assert ReviewDecision.ExitEarly().timed_out is False
    assert ReviewDecision.ExitEarly(timed_out=True).kind == "EXIT_EARLY"
    with pytest.raises(ValidationError, match="revised_output must not be None"):
        ReviewDecision.Edit(None)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="revised_output must be a string, got: 3"):
        ReviewDecision.Edit(3)  # type: ignore[arg-type]
    match ReviewDecision.Edit("new"):
        case ReviewDecision.Edit(text):
            assert text == "new"
        case _:
            pytest.fail("Edit did not match")


def test_auto_approve_handlers() -> None:
    assert isinstance(ReviewHandler.auto_approve(), AutoApproveHandler)
    assert ReviewHandler.auto_approve_with_delay(timedelta(milliseconds=5)).delay == 0.005
    for bad in (-1, float("nan"), float("inf")):
        with pytest.raises(ValidationError, match="non-negative number of seconds"):
            ReviewHandler.auto_approve_with_delay(bad)
    output = Ensemble(
        tasks=[Task("a", review=Review.required())],
        llm=echo_model(),
        review_handler=ReviewHandler.auto_approve_with_delay(0.001),
    ).run()
    assert output.raw == "done: a"


def test_task_and_ensemble_settings_are_checked_when_built() -> None:
    with pytest.raises(ValidationError, match="Task review must be a Review"):
        Task("a", review="yes")  # type: ignore[call-overload]
    with pytest.raises(ValidationError, match="Task before_review must be a Review"):
        Task("a", before_review=True)  # type: ignore[call-overload]
    with pytest.raises(ValidationError, match="Ensemble review_handler must be a ReviewHandler"):
        Ensemble(tasks=[Task("a")], review_handler=object())  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match=r"review_policy must be one of \[NEVER"):
        Ensemble(tasks=[Task("a")], review_policy="sometimes")  # type: ignore[arg-type]
    assert Ensemble(review_policy="after_every_task").review_policy is (  # type: ignore[arg-type]
        ReviewPolicy.AFTER_EVERY_TASK
    )


def rejected(ensemble: Ensemble) -> str:
    model = ScriptedModel([])
    with pytest.raises(ValidationError) as raised:
        ensemble.run()
    assert not model.requests
    return str(raised.value)


def test_gates_without_a_handler_are_rejected_before_any_model_call() -> None:
    message = rejected(Ensemble(tasks=[Task("a", review=Review.required())], llm=echo_model()))
    assert message.startswith("Task 'a' sets review, but the ensemble has no review_handler")
    message = rejected(
        Ensemble(tasks=[Task("a", before_review=Review.required())], llm=echo_model())
    )
    assert "Task 'a' sets before_review" in message
    message = rejected(
        Ensemble(tasks=[Task("a")], llm=echo_model(), review_policy=ReviewPolicy.AFTER_LAST_TASK)
    )
    assert "review_policy AFTER_LAST_TASK needs a review_handler" in message
    in_phase = Phase.of("p", Task("a", review=Review.required()))
    assert "no review_handler" in rejected(Ensemble(phases=[in_phase], llm=echo_model()))


def test_skipping_needs_no_handler() -> None:
    output = Ensemble(tasks=[Task("a", review=Review.skip())], llm=echo_model()).run()
    assert output.raw == "done: a"


def test_hierarchical_runs_reject_review_gates() -> None:
    worker = Agent("Writer", "Write", llm=echo_model())
    base: dict[str, Any] = {
        "workflow": Workflow.HIERARCHICAL,
        "llm": echo_model(),
        "review_handler": ReviewHandler.auto_approve(),
    }
    message = rejected(Ensemble(tasks=[Task("a", agent=worker, review=Review.required())], **base))
    assert "sets review, which HIERARCHICAL workflow does not apply" in message
    message = rejected(
        Ensemble(
            tasks=[Task("a", agent=worker)], review_policy=ReviewPolicy.AFTER_EVERY_TASK, **base
        )
    )
    assert "review_policy AFTER_EVERY_TASK does not apply to Workflow.HIERARCHICAL" in message


def test_after_last_task_with_a_parallel_last_phase_is_rejected() -> None:
    first = Phase.of("first", Task("a"))
    last = Phase("last", [Task("b"), Task("c")], workflow=Workflow.PARALLEL, after=[first])
    message = rejected(
        Ensemble(
            phases=[first, last],
            llm=echo_model(),
            review_handler=ReviewHandler.auto_approve(),
            review_policy=ReviewPolicy.AFTER_LAST_TASK,
        )
    )
    assert "AFTER_LAST_TASK never fires when the last tasks run in PARALLEL" in message
