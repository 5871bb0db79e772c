"""Tasks planned by hand, for tests that drive a workflow executor directly."""

from __future__ import annotations

from typing import Any

from agentensemble import HandlerContext, Task
from agentensemble.execution._planning import PlannedTask, task_steps


def echo(context: HandlerContext) -> str:
    """The task's description and its context outputs: ``b(a())``."""
    inputs = "+".join(output.raw for output in context.context_outputs)
    return f"{context.description}({inputs})"


def planned(task: Task[Any], index: int) -> PlannedTask:
    """`task` planned as the `index`-th of three, without an agent."""
    return PlannedTask(
        source=task,
        index=index,
        total=3,
        description=task.description,
        expected_output=task.expected_output,
        agent=None,
        steps=task_steps(task, None),
    )
