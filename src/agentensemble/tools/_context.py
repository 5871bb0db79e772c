"""`ToolContext`: which run, task and depth a tool call belongs to, and what the run offers
tools (delegation, approvals by a reviewer, the memory store)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeAlias

from agentensemble._frozen import direct_init
from agentensemble.errors import ToolConfigurationError
from agentensemble.review._model import (
    DEFAULT_REVIEW_TIMEOUT,
    Continue,
    OnTimeoutAction,
    ReviewDecision,
    ReviewRequest,
    ReviewTiming,
    check_on_timeout,
    check_timeout,
)

if TYPE_CHECKING:
    from agentensemble.delegation import DelegationResponse
    from agentensemble.memory import MemoryStore

__all__ = ["Delegator", "Reviewer", "ToolContext", "approval_required"]

Reviewer: TypeAlias = Callable[[ReviewRequest], Awaitable[ReviewDecision]]
"""Asks the run's review handler (the engine sets one when the ensemble has a handler)."""


def approval_required(tool_name: str | None) -> ToolConfigurationError:
    """The error of a tool that must be approved in a run without a review handler."""
    return ToolConfigurationError(
        f"Tool '{tool_name}' requires approval but no ReviewHandler is configured on the "
        "ensemble. Add review_handler=ReviewHandler.console() to the Ensemble."
    )


Delegator: TypeAlias = Callable[[str, str, "str | None"], Awaitable[Any]]
"""Runs one delegation for the calling task: (agent_role, task_description, tool_call_id) ->
`DelegationResponse` (typed loosely so that the dataclass needs no import of the delegation
layer at run time)."""


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """The run identity a tool receives when its first parameter is annotated `ToolContext`.

    The ids are those the run's events carry, so a tool's own logs and metrics can be joined
    with them. The parameter is never part of the tool's JSON Schema.
    """

    run_id: str
    """The run (``ensemble_id`` on every event)."""
    task_id: str
    """The task execution the call belongs to (``task_id`` on task events)."""
    parent_task_id: str | None = None
    """The delegating task's id, for a task run by delegation; else None."""
    agent_role: str
    """The role of the agent making the call."""
    task_description: str
    """The task description, templates resolved."""
    depth: int = 0
    """0 for a task of the ensemble, +1 per delegation."""
    tool_call_id: str | None = None
    """The model's id of this call (``tool_call_id`` on `ToolCallEvent`)."""
    delegator: Delegator | None = field(default=None, repr=False, compare=False)
    """Set by the engine when the calling agent may delegate; use `delegate`."""
    tool_name: str | None = None
    """The tool being called."""
    reviewer: Reviewer | None = field(default=None, repr=False, compare=False)
    """Set by the engine when the ensemble has a review handler; use `request_approval`."""
    memory_store: MemoryStore | None = field(default=None, repr=False, compare=False)
    """The ensemble's memory store, when it has one; its operations count in the task's
    metrics, events and trace."""

    @property
    def can_request_review(self) -> bool:
        """Whether the ensemble has a review handler to ask."""
        return self.reviewer is not None

    async def request_approval(
        self,
        description: str,
        *,
        timeout: timedelta | float = DEFAULT_REVIEW_TIMEOUT,  # noqa: ASYNC109 (the reviewer's)
        on_timeout: OnTimeoutAction | str = OnTimeoutAction.EXIT_EARLY,
        prompt: str | None = None,
        require_handler: bool = False,
    ) -> ReviewDecision:
        """Ask the ensemble's review handler to approve what the tool is about to do.

        `description` is what the reviewer sees; the answer is Continue, Edit (use its
        ``revised_output`` in place of the tool's input) or ExitEarly (refuse, and tell the
        model so). The time a person takes does not count against the task's timeout.
        Without a handler the answer is Continue, unless `require_handler`: then the run
        fails with `ToolConfigurationError`. A timeout with ``FAIL`` fails the run with
        `ReviewTimeoutError`.
        """
        if self.reviewer is None:
            if require_handler:
                raise approval_required(self.tool_name)
            return Continue()
        request = ReviewRequest(
            task_description=self.task_description,
            task_output=description,
            timing=ReviewTiming.DURING_EXECUTION,
            timeout=check_timeout(timeout, "request_approval"),
            on_timeout=check_on_timeout(on_timeout, "request_approval"),
            prompt=prompt,
            tool_name=self.tool_name,
        )
        try:
            return await self.reviewer(request)
        except ToolConfigurationError:
            raise
        except Exception as error:  # the handler's failure is the run's, not the model's
            raise ToolConfigurationError(f"Review handler failed: {error}") from error

    @property
    def can_delegate(self) -> bool:
        """Whether `delegate` is available: the agent has ``allow_delegation=True`` (or is the
        hierarchical manager)."""
        return self.delegator is not None

    async def delegate(self, agent_role: str, task_description: str) -> DelegationResponse:
        """Hand a subtask to another agent of the run and wait for its answer.

        The same guards, policies, events and trace entries apply as for the ``delegate``
        tool. A refused attempt or a failed worker does not raise: the response has
        ``status`` FAILURE and, in ``errors``, the text to show the model. Raises
        `ToolConfigurationError` when the calling agent may not delegate.
        """
        if self.delegator is None:
            raise ToolConfigurationError(
                f"Agent '{self.agent_role}' cannot delegate: give it allow_delegation=True to "
                "let it hand subtasks to other agents of the ensemble"
            )
        response: DelegationResponse = await self.delegator(
            agent_role, task_description, self.tool_call_id
        )
        return response
