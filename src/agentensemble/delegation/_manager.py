"""The prompts of the hierarchical manager: a pluggable `ManagerPromptStrategy` and the
default one (BEHAVIOUR 3.5)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentensemble.agent import Agent
    from agentensemble.outputs import TaskOutput
    from agentensemble.task import Task

__all__ = [
    "DEFAULT_MANAGER_USER_PROMPT",
    "DefaultManagerPromptStrategy",
    "ManagerPromptContext",
    "ManagerPromptStrategy",
]

DEFAULT_MANAGER_USER_PROMPT = (
    "Coordinate your team to complete all assigned tasks and synthesize a comprehensive final "
    "response."
)
"""The manager's task when a strategy's user prompt is blank."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagerPromptContext:
    """What a `ManagerPromptStrategy` writes the manager's prompts from."""

    agents: tuple[Agent, ...]
    """The workers, in order of first appearance in the tasks."""
    tasks: tuple[Task[Any], ...]
    """The ensemble's tasks, templates resolved."""
    previous_outputs: tuple[TaskOutput[Any], ...] = ()
    workflow_description: str | None = None


@runtime_checkable
class ManagerPromptStrategy(Protocol):
    """Builds the manager's system prompt (its background) and user prompt (its task).

    Implement it to give the manager domain context without forking the workflow; pass it as
    ``Ensemble(manager_prompt_strategy=...)``. Both methods are called once per run, before
    the manager's first model call.
    """

    def build_system_prompt(self, context: ManagerPromptContext) -> str:
        """The manager's background: who the workers are and how to use them."""
        ...

    def build_user_prompt(self, context: ManagerPromptContext) -> str:
        """The manager's task: what the team must get done."""
        ...


class DefaultManagerPromptStrategy:
    """Lists the workers (role, goal, background) and the tasks (description, expected
    output), and tells the manager to delegate each task with ``delegate_task``."""

    def build_system_prompt(self, context: ManagerPromptContext) -> str:
        """``You have access to the following worker agents:`` and one entry per worker."""
        entries = []
        for number, agent in enumerate(context.agents, start=1):
            entry = f"{number}. {agent.role}\n   Goal: {agent.goal}\n"
            if agent.background and agent.background.strip():
                entry += f"   Background: {agent.background}\n"
            entries.append(entry)
        return (
            "You have access to the following worker agents:\n\n"
            + "\n".join(entries)
            + "\nUse the delegate_task tool to assign work to your team members. Review their "
            "outputs and synthesize a comprehensive final result."
        )

    def build_user_prompt(self, context: ManagerPromptContext) -> str:
        """``You must coordinate your team to complete the following tasks:`` and each task."""
        tasks = "".join(
            f"Task {number}: {task.description}\nExpected output: {task.expected_output}\n\n"
            for number, task in enumerate(context.tasks, start=1)
        )
        return (
            "You must coordinate your team to complete the following tasks:\n\n"
            + tasks
            + "Delegate each task to the most appropriate team member using the delegate_task "
            "tool. Once all tasks are complete, synthesize the results into a comprehensive "
            "final response."
        )
