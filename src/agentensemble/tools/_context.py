"""`ToolContext`: which run, task and depth a tool call belongs to, and what the run offers
tools (delegation)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

from agentensemble.errors import ToolConfigurationError

if TYPE_CHECKING:
    from agentensemble.delegation import DelegationResponse

__all__ = ["Delegator", "ToolContext"]

Delegator: TypeAlias = Callable[[str, str, "str | None"], Awaitable[Any]]
"""Runs one delegation for the calling task: (agent_role, task_description, tool_call_id) ->
`DelegationResponse` (typed loosely so that the dataclass needs no import of the delegation
layer at run time)."""


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
