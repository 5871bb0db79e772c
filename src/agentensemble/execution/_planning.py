"""Turn the user's tasks into an immutable run plan: resolved text and a resolved agent each.

The user's `Task` objects are never changed or copied into the plan's identity: every
`PlannedTask` keeps its `source`, and outputs are keyed by that source, so context lookups
and `EnsembleOutput.output_for(task)` work with the caller's own objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentensemble.agent import Agent
from agentensemble.execution._handler import DETERMINISTIC_ROLE
from agentensemble.execution._synthesis import AgentSynthesizer
from agentensemble.execution._templates import resolve_template
from agentensemble.models import ChatModel, RateLimitedChatModel
from agentensemble.task import Task

__all__ = ["PlannedTask", "plan_tasks", "resolve_texts"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PlannedTask:
    """One task as a run executes it."""

    source: Task
    """The caller's task object (the identity outputs are keyed by)."""
    index: int
    """1-based position in the run (numbered across phases)."""
    total: int
    """How many tasks the run has."""
    description: str
    """Description after template resolution."""
    expected_output: str
    """Expected output after template resolution."""
    agent: Agent | None
    """The agent that runs the task; None for a handler task."""

    @property
    def role(self) -> str:
        return self.agent.role if self.agent else DETERMINISTIC_ROLE


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
    raw_llm: ChatModel | None = None,
    synthesizer: AgentSynthesizer,
    first_index: int = 1,
    total: int | None = None,
) -> tuple[PlannedTask, ...]:
    """Resolve templates for every task first (so a missing variable fails before any model
    call), then give each task its agent, synthesising one where the task has none.

    `llm` is the ensemble model for this run (rate-limited when the ensemble has a limit);
    `raw_llm` the same model unwrapped, which a task with its own `rate_limit` wraps anew."""
    texts = resolve_texts(tasks, inputs)
    planned = []
    for index, (task, (description, expected)) in enumerate(
        zip(tasks, texts, strict=True), start=first_index
    ):
        agent = None
        if task.handler is None:
            agent = task.agent or await _synthesize(
                task, description, _task_model(task, llm, raw_llm or llm), synthesizer
            )
        planned.append(
            PlannedTask(
                source=task,
                index=index,
                total=total if total is not None else len(tasks),
                description=description,
                expected_output=expected,
                agent=agent,
            )
        )
    return tuple(planned)


def _task_model(
    task: Task, ensemble_llm: ChatModel | None, raw_llm: ChatModel | None
) -> ChatModel | None:
    """Task model, else the raw ensemble model in the task's own bucket, else the ensemble's."""
    if task.llm is not None:
        return task.llm
    if task.rate_limit is not None and raw_llm is not None:
        return RateLimitedChatModel(raw_llm, task.rate_limit)
    return ensemble_llm


async def _synthesize(
    task: Task, description: str, llm: ChatModel | None, synthesizer: AgentSynthesizer
) -> Agent:
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
