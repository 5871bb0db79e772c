"""`agentensemble.run(llm, *tasks)`: a sequential run with no ceremony."""

from __future__ import annotations

from typing import Any

from agentensemble._inputs import Inputs
from agentensemble._sync import run_sync
from agentensemble.ensemble import Ensemble
from agentensemble.errors import ValidationError
from agentensemble.outputs import EnsembleOutput
from agentensemble.task import Task

__all__ = ["arun", "run"]


def run(llm: Any, *tasks: Task[Any] | str, inputs: Inputs | None = None) -> EnsembleOutput:
    """Run `tasks` one after another on `llm`. A string is a task description.

    ``agentensemble.run("openai:gpt-4o-mini", "Research X", "Summarise it")``
    """
    return run_sync(arun(llm, *tasks, inputs=inputs))


async def arun(llm: Any, *tasks: Task[Any] | str, inputs: Inputs | None = None) -> EnsembleOutput:
    """Async form of `run`."""
    if llm is None:
        raise ValidationError("model must not be null")
    if not tasks:
        raise ValidationError("tasks must not be null or empty")
    converted = [Task.of(task) if isinstance(task, str) else task for task in tasks]
    return await Ensemble(tasks=converted, llm=llm).arun(inputs)
