"""`HumanInputTool` (``human_input``): an agent asks a person a question mid-task
(BEHAVIOUR 7.6)."""

from __future__ import annotations

from datetime import timedelta

from agentensemble.review._model import (
    DEFAULT_REVIEW_TIMEOUT,
    Edit,
    ExitEarly,
    OnTimeoutAction,
    check_on_timeout,
    check_timeout,
)
from agentensemble.review._signals import ExitEarlyRequested
from agentensemble.tools._context import ToolContext
from agentensemble.tools._function import tool

__all__ = ["HumanInputTool"]

NO_REVIEWER = "No reviewer is available. Please proceed with your best judgment."
ACKNOWLEDGED = "Understood. Please continue."
_PROMPT = "The agent asks you a question. Answer it with [e], or let it go on with [c]."


class HumanInputTool:
    """Give it to an agent (``tools=[HumanInputTool()]``) so that it can ask the ensemble's
    review handler a question and use the answer.

    The person answers with an Edit (its text is the answer), continues without answering
    ("Understood. Please continue."), or exits early, which ends the whole run keeping
    what completed. Without a review handler the agent is told to use its best judgment.
    Nobody answering within `timeout` applies `on_timeout` (default: continue).
    """

    def __init__(
        self,
        *,
        timeout: timedelta | float = DEFAULT_REVIEW_TIMEOUT,
        on_timeout: OnTimeoutAction | str = OnTimeoutAction.CONTINUE,
    ) -> None:
        self.timeout = check_timeout(timeout, "HumanInputTool")
        self.on_timeout = check_on_timeout(on_timeout, "HumanInputTool")

    @tool(name="human_input")
    async def human_input(self, context: ToolContext, question: str) -> str:
        """Ask a human a question and wait for the answer. Use it for a decision, a
        clarification or information only a person can give."""
        if not context.can_request_review:
            return NO_REVIEWER
        decision = await context.request_approval(
            question, timeout=self.timeout, on_timeout=self.on_timeout, prompt=_PROMPT
        )
        if isinstance(decision, Edit):
            return decision.revised_output
        if isinstance(decision, ExitEarly):
            raise ExitEarlyRequested(
                "Human reviewer requested early exit via HumanInputTool",
                timed_out=decision.timed_out,
            )
        return ACKNOWLEDGED

    def __repr__(self) -> str:
        return f"HumanInputTool(timeout={self.timeout}, on_timeout={self.on_timeout.value})"
