"""Turn the user's tasks into an immutable run plan: resolved text and a resolved agent each.

The user's `Task` objects are never changed or copied into the plan's identity: every
`PlannedTask` keeps its `source`, and outputs are keyed by that source, so context lookups
and `EnsembleOutput.output_for(task)` work with the caller's own objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentensemble.agent import Agent
from agentensemble.execution._synthesis import AgentSynthesizer
from agentensemble.execution._templates import resolve_template
from agentensemble.models import ChatModel
from agentensemble.task import Task

__all__ = ["PlannedTask", "plan_tasks", "resolve_texts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedTask:
    """One task as a run executes it."""

    source: Task
    """The caller's task object (the identity outputs are keyed by)."""
    index: int
    """1-based position in the run."""
    description: str
    """Description after template resolution."""
    expected_output: str
    """Expected output after template resolution."""
    agent: Agent

    @property
    def role(self) -> str:
        return self.agent.role


def resolve_texts(tasks: Sequence[Task], inputs: Mapping[str, str]) -> list[tuple[str, str]]:
    """(description, expected_output) of each task with templates resolved."""
    return [
        (resolve_template(task.description, inputs), resolve_template(task.expected_output, inputs))
        for task in tasks
    ]


async def plan_tasks(
    tasks: Sequence[Task],
    inputs: Mapping[str, str],
    *,
    llm: ChatModel | None,
    synthesizer: AgentSynthesizer,
) -> tuple[PlannedTask, ...]:
    """Resolve templates for every task first (so a missing variable fails before any model
    call), then give each task its agent, synthesising one where the task has none."""
    texts = resolve_texts(tasks, inputs)
    planned = []
    for index, (task, (description, expected)) in enumerate(
        zip(tasks, texts, strict=True), start=1
    ):
        agent = task.agent or await _synthesize(task, description, llm, synthesizer)
        planned.append(
            PlannedTask(
                source=task,
                index=index,
                description=description,
                expected_output=expected,
                agent=agent,
            )
        )
    return tuple(planned)


async def _synthesize(
    task: Task, description: str, ensemble_llm: ChatModel | None, synthesizer: AgentSynthesizer
) -> Agent:
    llm = task.llm or ensemble_llm
    if llm is None:  # validation guarantees a model; kept for type narrowing
        raise AssertionError("validated task has no model")
    persona = await synthesizer.synthesize(description, llm)
    return Agent(
        persona.role,
        persona.goal,
        background=persona.background,
        llm=llm,
        tools=task.tools,
        max_iterations=task.max_iterations or 25,
    )
