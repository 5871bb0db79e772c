"""The two delegation tools a model sees: ``delegate_task`` (the hierarchical manager's) and
``delegate`` (a peer's, for agents with ``allow_delegation=True``), as BEHAVIOUR 3.6 names
and describes them.

Both hand their arguments to `ToolContext.delegate`, which runs the guards, the policies and
the worker for the task the call belongs to; the tools only read the arguments and turn the
`DelegationResponse` into the text the model sees.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from agentensemble.models import ToolSpec
from agentensemble.tools import ToolContext, ToolResult

__all__ = ["DELEGATE", "DELEGATE_TASK", "DelegationTool"]


class DelegationTool:
    """A tool with two required string parameters, ``agent_role`` and
    ``task_description``, that delegates through the calling task's `ToolContext`."""

    def __init__(
        self,
        name: str,
        description: str,
        role_help: str,
        task_help: str,
        roles: Sequence[str] = (),
    ) -> None:
        role: dict[str, Any] = {"type": "string", "description": role_help}
        if roles:  # a server that constrains arguments to the schema then names a real one
            role["enum"] = list(roles)
        schema = {
            "type": "object",
            "properties": {
                "agent_role": role,
                "task_description": {"type": "string", "description": task_help},
            },
            "required": ["agent_role", "task_description"],
        }
        self._args = (name, description, role_help, task_help)
        self._spec = ToolSpec(name, description, schema)

    def for_roles(self, roles: Sequence[str]) -> DelegationTool:
        """This tool with `agent_role` limited to `roles` (in its JSON Schema's ``enum``)."""
        return DelegationTool(*self._args, roles=roles)

    @property
    def spec(self) -> ToolSpec:
        """Name, description and the two-string schema."""
        return self._spec

    async def invoke(self, arguments: str, context: ToolContext | None = None) -> ToolResult:
        """Delegate; the worker's answer on success, else the refusal or failure text (a
        failed tool result).

        Arguments that are not a JSON object are answered with how to call the tool;
        missing ones count as blank, so the model is told which one to fill in (and the
        attempt is reported like every other); a non-string value is used as its JSON
        text."""
        if context is None:
            raise TypeError(f"Tool '{self._spec.name}' needs the ToolContext of a running task")
        values = _arguments(arguments)
        if values is None:
            text = (
                f"Error: the arguments of {self._spec.name} are not a JSON object: call it with "
                '{"agent_role": "<role>", "task_description": "<what to do>"}'
            )
            return ToolResult(output=text, is_success=False, error_message=text)
        response = await context.delegate(
            _text(values.get("agent_role")), _text(values.get("task_description"))
        )
        if response.errors:  # a failure, in the exact words the model should see
            text = response.errors[0]
            return ToolResult(output=text, is_success=False, error_message=text)
        return ToolResult.success(response.raw_output or "")


def _arguments(arguments: str) -> dict[str, Any] | None:
    """The arguments as an object; None when they are not one."""
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


DELEGATE_TASK = DelegationTool(
    "delegate_task",
    "Delegate a task to a worker agent. Provide the agent's role and a clear task description. "
    "Use this tool for each task that needs to be completed by a team member.",
    "The exact role of the worker agent to delegate to. Must match one of the available agent "
    "roles.",
    "A clear description of the task for the agent to complete.",
)
"""The hierarchical manager's tool."""

DELEGATE = DelegationTool(
    "delegate",
    "Delegate a subtask to another agent in the ensemble. Use this when you need specialised "
    "help from a team member. Provide the target agent's role and a clear description of the "
    "subtask.",
    "The role of the agent to delegate to. Must match one of the available agent roles.",
    "A clear description of the subtask for the target agent to complete.",
)
"""The peer tool, first in the tool list of agents with ``allow_delegation=True``."""
