"""When gates fire (BEHAVIOUR 10): decided once per task, when the run is planned."""

from __future__ import annotations

from agentensemble.review._model import Review, ReviewPolicy

__all__ = ["after_gate", "before_gate"]

_POLICY_REVIEW = Review()


def after_gate(review: Review | None, policy: ReviewPolicy, *, is_last: bool) -> Review | None:
    """The review after a task, or None when no gate fires: the task's own `review` wins
    (`Review.skip()` never fires); otherwise the ensemble's policy, with the default
    timeout and on-timeout action. `is_last`: the task is the run's last, run in order."""
    if review is not None:
        return review if review.enabled else None
    if policy is ReviewPolicy.AFTER_EVERY_TASK or (
        policy is ReviewPolicy.AFTER_LAST_TASK and is_last
    ):
        return _POLICY_REVIEW
    return None


def before_gate(review: Review | None) -> Review | None:
    """The review before a task starts, or None."""
    return review if review is not None and review.enabled else None
