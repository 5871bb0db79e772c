"""`Task`: a unit of work with an expected output, optionally bound to an agent."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from agentensemble._checks import require_int, require_text
from agentensemble.agent import Agent
from agentensemble.errors import ValidationError
from agentensemble.models import ChatModel, resolve_model
from agentensemble.tools._resolve import check_tools

__all__ = ["DEFAULT_EXPECTED_OUTPUT", "Task"]

DEFAULT_EXPECTED_OUTPUT = "Produce a complete and accurate response to the task."


@dataclass(frozen=True, slots=True, init=False, eq=False)
class Task:
    """What to do and what the result should look like.

    Without an `agent`, one is synthesised at run time from the description, using the
    task's `llm` (or the ensemble's), `tools` and `max_iterations`. Tasks compare by identity:
    two tasks with the same text are different tasks. `description` and `expected_output`
    may contain ``{variables}`` resolved from the run's inputs.
    """

    description: str
    """What the agent should do."""
    expected_output: str
    """What the result should look like; part of the prompt."""
    agent: Agent | None
    """The agent that runs the task; synthesised when None."""
    llm: ChatModel | None
    """Model for a synthesised agent (overrides the ensemble's)."""
    tools: tuple[object, ...]
    """Tools for a synthesised agent (ignored when `agent` is set)."""
    max_iterations: int | None
    """Tool-call limit for a synthesised agent (default 25; ignored when `agent` is set)."""
    context: tuple[Task, ...]
    """Tasks whose outputs are given to this task, in this order."""
    name: str | None
    """Optional short name, used in logs and traces."""

    def __init__(
        self,
        description: str,
        expected_output: str = DEFAULT_EXPECTED_OUTPUT,
        *,
        agent: Agent | None = None,
        llm: Any = None,
        tools: Sequence[object] = (),
        max_iterations: int | None = None,
        context: Iterable[Task] = (),
        name: str | None = None,
    ) -> None:
        if name is not None:
            require_text(name, "Task name must not be blank when set")
        require_text(description, "Task description must not be blank")
        require_text(expected_output, "Task expected_output must not be blank")
        if agent is not None and not isinstance(agent, Agent):
            raise ValidationError(f"Task agent must be an Agent, got: {type(agent).__name__}")
        checked_tools = check_tools(tools if tools is not None else (), owner="Task tool")
        if max_iterations is not None:
            require_int(max_iterations, "Task max_iterations")
            if max_iterations <= 0:
                raise ValidationError(
                    f"Task max_iterations must be > 0 when set, got: {max_iterations}"
                )
        context_tasks = _check_context(context, description, expected_output, agent)
        model = resolve_model(llm, field="Task llm") if llm is not None else None
        set_ = object.__setattr__
        set_(self, "description", description)
        set_(self, "expected_output", expected_output)
        set_(self, "agent", agent)
        set_(self, "llm", model)
        set_(self, "tools", checked_tools)
        set_(self, "max_iterations", max_iterations)
        set_(self, "context", context_tasks)
        set_(self, "name", name)

    @classmethod
    def of(cls, description: str, expected_output: str | None = None) -> Task:
        """A task with only a description (and the default expected output)."""
        return cls(description, expected_output or DEFAULT_EXPECTED_OUTPUT)

    def __repr__(self) -> str:
        text = self.description if len(self.description) <= 60 else self.description[:57] + "..."
        return f"Task({text!r})"

    @property
    def label(self) -> str:
        """The name if set, else the description: how logs and errors refer to the task."""
        return self.name or self.description

    def copy(self, **changes: Any) -> Task:
        """A new, validated task with `changes` applied. The original is unchanged."""
        return dataclasses.replace(self, **changes)


def _check_context(
    context: Iterable[Task], description: str, expected_output: str, agent: Agent | None
) -> tuple[Task, ...]:
    if isinstance(context, Task):
        raise ValidationError("Task context must be a list of tasks, got a single Task")
    tasks = tuple(context if context is not None else ())
    for index, item in enumerate(tasks):
        if item is None:
            raise ValidationError(f"Task context element at index {index} must not be null")
        if not isinstance(item, Task):
            raise ValidationError(
                f"Task context element at index {index} must be a Task, got: {type(item).__name__}"
            )
        if (
            agent is not None
            and item.agent is agent
            and item.description == description
            and item.expected_output == expected_output
        ):
            raise ValidationError("Task cannot reference itself in context")
    return tasks
