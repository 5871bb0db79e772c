"""HIERARCHICAL: a virtual manager agent delegates the ensemble's tasks to the workers (the
agents of the tasks) with ``delegate_task``, then writes the final answer (BEHAVIOUR 3.5,
9.3, 9.4).

The manager is planned once per run from the planned tasks: its prompts come from the
`ManagerPromptStrategy`. The run's outputs are the workers' outputs in completion order,
then the manager's; `raw` is the manager's answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentensemble._calling import call_user_code
from agentensemble._logging import get_logger
from agentensemble.agent import Agent
from agentensemble.delegation import (
    DefaultManagerPromptStrategy,
    ManagerPromptContext,
    ManagerPromptStrategy,
)
from agentensemble.delegation._manager import DEFAULT_MANAGER_USER_PROMPT
from agentensemble.delegation._tools import DELEGATE_TASK
from agentensemble.enums import Workflow
from agentensemble.errors import (
    ConstraintViolationError,
    TaskExecutionError,
    ValidationError,
    describe_error,
)
from agentensemble.execution._context import RunContext, TaskContext
from agentensemble.execution._delegation import Team
from agentensemble.execution._planning import PlannedTask, task_steps
from agentensemble.execution._task_runner import run_task
from agentensemble.models import ChatModel, RateLimiter
from agentensemble.outputs import TaskOutput
from agentensemble.task import Task
from agentensemble.tools._resolve import ToolSet
from agentensemble.workflows._executor import ExecutorRequest, WorkflowSettings, WorkflowSpec

__all__ = [
    "HIERARCHICAL",
    "MANAGER_ROLE",
    "HierarchicalExecutor",
    "ManagerSettings",
    "plan_manager",
]

logger = get_logger("agentensemble.workflows")

MANAGER_ROLE = "Manager"
_GOAL = "Coordinate worker agents to complete all tasks and synthesize a comprehensive final result"
_EXPECTED_OUTPUT = "A comprehensive final response synthesizing the outputs of all delegated tasks"


def _manager_tools(team: Team) -> ToolSet:
    """The manager's one tool, its ``agent_role`` limited to the workers' roles."""
    tool = DELEGATE_TASK.for_roles([worker.agent.role for worker in team.workers])
    return ToolSet((tool.spec,), {tool.spec.name: tool})


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagerSettings:
    """How the ensemble configures its manager."""

    llm: ChatModel
    limiter: RateLimiter | None
    """The run's bucket, when the manager uses the ensemble's model."""
    max_iterations: int
    strategy: ManagerPromptStrategy

    @classmethod
    def of(cls, settings: WorkflowSettings, plan: Sequence[PlannedTask]) -> ManagerSettings:
        """Manager model: `manager_llm`, else the ensemble's (with the run's bucket), else
        the first worker's (BEHAVIOUR 3.5)."""
        llm, limiter = settings.manager_llm, None
        if llm is None and settings.llm is not None:
            llm, limiter = settings.llm, settings.limiter
        if llm is None:
            llm = next(task.agent.llm for task in plan if task.agent is not None)
        return cls(
            llm=llm,
            limiter=limiter,
            max_iterations=settings.manager_max_iterations,
            strategy=settings.manager_prompt_strategy or DefaultManagerPromptStrategy(),
        )


async def plan_manager(
    plan: Sequence[PlannedTask], team: Team, settings: ManagerSettings
) -> PlannedTask:
    """The manager's one task: its prompts written by the strategy from the workers and the
    tasks (templates resolved); its final answer is parsed against the last task's
    `output_type`, as CrewAI parses it against the task's ``output_pydantic``."""
    context = ManagerPromptContext(
        agents=tuple(worker.agent for worker in team.workers),
        tasks=tuple(
            planned.source.copy(
                description=planned.description, expected_output=planned.expected_output
            )
            for planned in plan
        ),
    )
    strategy = settings.strategy
    system = await call_user_code(strategy.build_system_prompt, context)
    user = await call_user_code(strategy.build_user_prompt, context)
    for name, text in (("build_system_prompt", system), ("build_user_prompt", user)):
        if not isinstance(text, str):
            raise ValidationError(
                f"Ensemble manager_prompt_strategy.{name} must return a string, got: {text!r}"
            )
    if not user.strip():
        user = DEFAULT_MANAGER_USER_PROMPT
    agent = Agent(
        MANAGER_ROLE,
        _GOAL,
        background=system,
        llm=settings.llm,
        max_iterations=settings.max_iterations,
    )
    last = plan[-1].source if plan else None
    task = Task(
        user,
        _EXPECTED_OUTPUT,
        agent=agent,
        output_type=last.output_type if last is not None else None,
        max_output_retries=last.max_output_retries if last is not None else 3,
    )
    return PlannedTask(
        source=task,
        index=1,
        total=1,
        description=user,
        expected_output=_EXPECTED_OUTPUT,
        agent=agent,
        steps=task_steps(task, agent),
        tools=_manager_tools(team),
        limiter=settings.limiter,
        delegates="manager",
    )


class HierarchicalExecutor:
    """Runs the manager; its delegations run the workers. A failing manager raises
    `TaskExecutionError` carrying the workers' outputs; a required worker that never
    completed raises `ConstraintViolationError` once the manager is done."""

    def __init__(self, manager: PlannedTask) -> None:
        self.manager = manager

    async def execute(
        self, plan: Sequence[PlannedTask], run: RunContext
    ) -> tuple[TaskOutput[Any], ...]:
        """Run the manager; return the workers' outputs, then the manager's."""
        manager = self.manager
        try:
            output = await run_task(TaskContext(run=run, planned=manager))
        except Exception as error:
            raise TaskExecutionError(
                f"Hierarchical workflow manager failed: {describe_error(error)}",
                task_description=manager.description,
                agent_role=MANAGER_ROLE,
                completed_outputs=run.outputs.completed(),
            ) from error
        if len(run.outputs.completed()) == 1:  # the manager's own output only
            await _warn_nothing_delegated(run)
        enforcer = run.team.enforcer if run.team is not None else None
        violations = enforcer.violations() if enforcer is not None else []
        if violations:
            workers = [done for done in run.outputs.completed() if done is not output]
            raise ConstraintViolationError(violations, completed_outputs=workers)
        return run.outputs.completed()


async def _warn_nothing_delegated(run: RunContext) -> None:
    message = (
        "The manager delegated nothing: the run's output is the manager's own answer, not "
        "the workers' (check the manager's model can call tools, and its prompt)"
    )
    logger.warning("Run %s: %s", run.run_id, message)
    await run.warn("manager_delegated_nothing", message)


async def _build(request: ExecutorRequest) -> HierarchicalExecutor:
    if request.team is None:  # the run gives a workflow with a manager its team
        raise AssertionError("a hierarchical run without a team")
    plan = request.tasks
    manager = await plan_manager(plan, request.team, ManagerSettings.of(request.settings, plan))
    return HierarchicalExecutor(manager)


HIERARCHICAL = WorkflowSpec(
    name=Workflow.HIERARCHICAL.value,
    build=_build,
    has_manager=True,
    own_settings=(
        "manager_max_iterations",
        "manager_llm",
        "manager_prompt_strategy",
        "hierarchical_constraints",
    ),
)
"""A manager delegates the tasks to the workers."""
