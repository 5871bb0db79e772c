"""Run-time validation of an ensemble, in the reference implementation's order."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

from agentensemble._checks import items_of, unique_names
from agentensemble.agent import Agent
from agentensemble.delegation import HierarchicalConstraints
from agentensemble.delegation._constraints import canonical_role
from agentensemble.enums import ParallelErrorStrategy, Workflow
from agentensemble.errors import ValidationError
from agentensemble.models import ChatModel, RateLimit
from agentensemble.phase import Phase, hierarchical_phase_message
from agentensemble.review import ReviewPolicy
from agentensemble.task import Task

if TYPE_CHECKING:
    from agentensemble.memory._tool import MemoryTool

__all__ = [
    "EnsembleShape",
    "PhaseShape",
    "check_listed_once",
    "check_peer_roles",
    "check_worker_roles",
    "infer_workflow",
    "validate_added",
    "validate_flat",
    "validate_members",
    "validate_phases",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class EnsembleShape:
    """The settings validation looks at, gathered from the ensemble."""

    llm: ChatModel | None
    rate_limit: RateLimit | None
    parallel_error_strategy: ParallelErrorStrategy | None
    manager_max_iterations: int
    constraints: HierarchicalConstraints | None = None
    agents: tuple[Agent, ...] = ()
    """The ensemble's extra agents (delegation targets)."""
    workflow_settings: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """For each workflow with settings only it reads, the names of those the ensemble sets
    (in the workflow's order)."""
    delegation_settings: tuple[str, ...] = ()
    """The names of the delegation settings the ensemble sets (policies, depth)."""
    has_review_handler: bool = False
    review_policy: ReviewPolicy | None = None
    has_memory_store: bool = False
    memory_settings: tuple[str, ...] = ()
    """The names of the run-wide memory settings the ensemble sets (short-term, entities)."""


@dataclass(frozen=True, slots=True)
class PhaseShape:
    """A validated phase and the workflow it runs with."""

    phase: Phase
    workflow: Workflow


def infer_workflow(tasks: Sequence[Task[Any]]) -> Workflow:
    """PARALLEL when a task's context names another task of the list, else SEQUENTIAL."""
    members = set(tasks)
    if any(dependency in members for task in tasks for dependency in task.context):
        return Workflow.PARALLEL
    return Workflow.SEQUENTIAL


def validate_flat(
    tasks: Sequence[object], workflow: Workflow | None, shape: EnsembleShape
) -> tuple[tuple[Task[Any], ...], Workflow]:
    """Check a flat task list; return it typed, with the workflow to run it with."""
    checked = _check_elements(tasks)
    if not checked:
        raise ValidationError("Ensemble must have at least one task or phase with tasks")
    _check_listed_once(checked)
    _check_rate_limit(shape)
    for task in checked:
        _check_has_model(task, shape, where="")
    effective = workflow or infer_workflow(checked)
    _check_workflow_settings(effective, shape)
    if effective is Workflow.HIERARCHICAL:
        _check_hierarchical(checked, shape)
    else:
        _check_someone_delegates(checked, shape)
    _check_reviews(checked, shape, effective, last_workflow=effective)
    check_memory(checked, shape)
    check_context_cycles(checked)
    _check_context_order(checked, outside=frozenset(), ordered=effective is Workflow.SEQUENTIAL)
    return checked, effective


def validate_members(tasks: Sequence[Task[Any]], shape: EnsembleShape) -> None:
    """Check the tasks loops run or a graph's states as `validate_flat` checks a task list
    (their models are checked by the caller, with the messages of BEHAVIOUR 2): reviews
    with a handler, memory with a store, delegation with someone to delegate to."""
    _check_rate_limit(shape)
    _check_someone_delegates(tasks, shape)
    _check_reviews(tasks, shape, Workflow.PARALLEL, last_workflow=Workflow.SEQUENTIAL)
    check_memory(tasks, shape)


def check_listed_once(tasks: Sequence[Task[Any]], *, where: str) -> None:
    """No task in two places of one ensemble (a task's output is kept by the task)."""
    seen: set[Task[Any]] = set()
    for task in tasks:
        if task in seen:
            raise ValidationError(
                f"Task '{task.description}' is in {where} twice: a task belongs to one place "
                "in an ensemble. Use task.copy() for a second task with the same settings."
            )
        seen.add(task)


def validate_added(
    tasks: Sequence[object], known: Set[Task[Any]], shape: EnsembleShape
) -> tuple[Task[Any], ...]:
    """Check tasks added to a running PARALLEL run (adaptive map-reduce levels) as
    `validate_flat` checks a task list, against the `known` tasks the run already has."""
    checked = _check_elements(tasks)
    seen: set[Task[Any]] = set()
    for task in checked:
        if task in known or task in seen:
            raise ValidationError(
                f"Task '{task.description}' is already in the run: a task runs once per run, "
                "so return a new Task each time"
            )
        seen.add(task)
    for task in checked:
        agent = task.agent
        if agent is not None and agent.allow_delegation:
            raise ValidationError(
                f"Task '{task.description}' is added while the run runs, so its agent "
                f"'{agent.role}' cannot delegate: set allow_delegation=False"
            )
        _check_has_model(task, shape, where="")
    _check_reviews(checked, shape, Workflow.PARALLEL, last_workflow=Workflow.PARALLEL)
    check_memory(checked, shape)
    check_context_cycles(checked)
    _check_context_order(checked, outside=known, ordered=False)
    return checked


def validate_phases(
    phases: Sequence[object], workflow: Workflow | None, shape: EnsembleShape
) -> tuple[PhaseShape, ...]:
    """Check phases and their tasks; return each phase with the workflow it runs with."""
    checked = _check_phase_elements(phases)
    _check_someone_delegates([task for phase in checked for task in phase.tasks], shape)
    if shape.workflow_settings:  # a phase runs SEQUENTIAL or PARALLEL: neither has any
        name, settings = next(iter(shape.workflow_settings.items()))
        raise ValidationError(
            f"Ensemble {settings[0]} applies only to Workflow.{name}, which phases do not use"
        )
    _check_phase_graph(checked)
    _check_rate_limit(shape)
    owner = _task_owners(checked)
    for phase in checked:
        for task in phase.tasks:
            _check_has_model(task, shape, where=f" in phase '{phase.name}'")
    shapes = tuple(PhaseShape(phase, _phase_workflow(phase, workflow)) for phase in checked)
    for item in shapes:
        _check_workflow_settings(item.workflow, shape)
    for item in shapes:
        _check_reviews(item.phase.tasks, shape, item.workflow, last_workflow=shapes[-1].workflow)
        check_memory(item.phase.tasks, shape)
    check_context_cycles([task for phase in checked for task in phase.tasks])
    for item in shapes:
        visible = frozenset(task for before in _ancestors(item.phase) for task in before.tasks)
        _check_cross_phase_context(item.phase, owner, visible)
        if item.workflow is Workflow.SEQUENTIAL:
            _check_context_order(item.phase.tasks, outside=visible, ordered=True)
    return shapes


def _check_elements(tasks: Sequence[object]) -> tuple[Task[Any], ...]:
    return items_of(tasks, Task, "Ensemble tasks")


def _check_rate_limit(shape: EnsembleShape) -> None:
    if shape.rate_limit is not None and shape.llm is None:
        raise ValidationError(
            "Ensemble rate_limit is configured but llm is null. An ensemble-level llm is "
            "required when rate_limit is set."
        )


def _check_has_model(task: Task[Any], shape: EnsembleShape, *, where: str) -> None:
    if task.handler is None and task.agent is None and task.llm is None and shape.llm is None:
        raise ValidationError(
            f"Task '{task.description}'{where} has no LLM available. Provide an explicit agent, "
            "a task-level llm, an ensemble-level llm, or configure a deterministic handler."
        )


def _check_workflow_settings(workflow: Workflow, shape: EnsembleShape) -> None:
    if workflow is Workflow.PARALLEL and shape.parallel_error_strategy is None:
        raise ValidationError(
            "Ensemble parallel_error_strategy must not be null for PARALLEL workflow"
        )
    if workflow is Workflow.HIERARCHICAL and shape.memory_settings:
        raise ValidationError(
            f"Ensemble {shape.memory_settings[0]} does not apply to Workflow.HIERARCHICAL: the "
            "manager hands free-form subtasks to the workers. Use SEQUENTIAL or PARALLEL "
            "workflow, or give the workers a MemoryTool."
        )
    for name, settings in shape.workflow_settings.items():
        if name != workflow.value:
            raise ValidationError(
                f"Ensemble {settings[0]} applies only to Workflow.{name}, but the workflow is "
                f"{workflow.value}"
            )


def _check_reviews(
    tasks: Sequence[Task[Any]], shape: EnsembleShape, workflow: Workflow, *, last_workflow: Workflow
) -> None:
    """Review settings that would do nothing are errors: gates without a handler to ask, and
    gates the workflow cannot fire."""
    policy = shape.review_policy or ReviewPolicy.NEVER
    if workflow is Workflow.HIERARCHICAL and policy is not ReviewPolicy.NEVER:
        raise ValidationError(
            f"Ensemble review_policy {policy.value} does not apply to Workflow.HIERARCHICAL: "
            "the manager's delegations are not tasks of the run. Use tool approvals or "
            "human_input in the workers' tools instead."
        )
    if policy is not ReviewPolicy.NEVER and not shape.has_review_handler:
        raise ValidationError(
            f"Ensemble review_policy {policy.value} needs a review_handler to ask: set "
            "review_handler=ReviewHandler.console() (or ReviewHandler.auto_approve() in tests)"
        )
    if policy is ReviewPolicy.AFTER_LAST_TASK and last_workflow is Workflow.PARALLEL:
        raise ValidationError(
            "Ensemble review_policy AFTER_LAST_TASK never fires when the last tasks run in "
            "PARALLEL (there is no last task): set review=Review.required() on the tasks to "
            "review, or use AFTER_EVERY_TASK"
        )
    for task in tasks:
        for name in ("review", "before_review"):
            review = getattr(task, name)
            if review is None or not review.enabled:
                continue
            if not shape.has_review_handler:
                raise ValidationError(
                    f"Task '{task.description}' sets {name}, but the ensemble has no "
                    "review_handler to ask: set review_handler=ReviewHandler.console() (or "
                    "ReviewHandler.auto_approve() in tests)"
                )


def check_memory(tasks: Sequence[Task[Any]], shape: EnsembleShape) -> None:
    """Memory scopes and memory tools need a store to use: the ensemble's, or the tool's."""
    if shape.has_memory_store:
        return
    for task in tasks:
        if task.memory:
            names = [scope.name for scope in task.memory]
            raise ValidationError(
                f"Task '{task.description}' declares memory scopes {names}, but the ensemble "
                "has no memory_store: set memory_store=MemoryStore.sqlite(path) (or "
                "MemoryStore.in_memory())"
            )
    owners: list[Agent | Task[Any]] = [*tasks, *shape.agents]
    owners += [task.agent for task in tasks if task.agent is not None]
    tools = [tool for owner in owners for tool in owner.tools]
    for tool in tools:
        if _is_memory_tool(tool) and tool.memory_store is None:
            raise ValidationError(
                f"MemoryTool for scope '{tool.scope}' has no store: pass one "
                "(MemoryTool(scope, store)) or set the ensemble's memory_store"
            )


def _is_memory_tool(tool: object) -> TypeGuard[MemoryTool]:
    """Whether `tool` is a `MemoryTool`, without loading that module (and pydantic) for the
    runs that have none: an instance exists only once its class does. The class is looked
    up, not assumed: another thread may be importing the module (it is in `sys.modules`
    before its body has run)."""
    cls = getattr(sys.modules.get("agentensemble.memory._tool"), "MemoryTool", None)
    return cls is not None and isinstance(tool, cls)


def _check_someone_delegates(tasks: Sequence[Task[Any]], shape: EnsembleShape) -> None:
    """Delegation settings of a run in which no agent may delegate would do nothing (a
    synthesised agent never delegates)."""
    if shape.delegation_settings and not any(
        task.agent is not None and task.agent.allow_delegation for task in tasks
    ):
        raise ValidationError(
            f"Ensemble {shape.delegation_settings[0]} applies to delegations, but no agent of "
            "the run may delegate: give an agent allow_delegation=True, or use "
            "Workflow.HIERARCHICAL"
        )


def _check_hierarchical(tasks: Sequence[Task[Any]], shape: EnsembleShape) -> None:
    """The HIERARCHICAL rules of BEHAVIOUR 2 (4b.5, 4b.7, 4b.9) and the task settings a
    manager's free-form delegations cannot honour. A manager model always exists once these
    pass: every task has an agent or a model (BEHAVIOUR 3.5's last resort never fires)."""
    if shape.manager_max_iterations <= 0:
        raise ValidationError(
            "Ensemble manager_max_iterations must be > 0 for HIERARCHICAL workflow, got: "
            f"{shape.manager_max_iterations}"
        )
    explicit = [task.agent for task in tasks if task.agent is not None]
    check_worker_roles([*explicit, *shape.agents])
    if shape.constraints is not None and len(explicit) == len(tasks):
        # with synthesised workers, the roles are checked once agents are planned
        shape.constraints.check_roles([agent.role for agent in (*explicit, *shape.agents)])
    for task in tasks:
        if task.handler is not None:
            raise ValidationError(
                "Deterministic handler tasks are not supported in HIERARCHICAL workflow. Task "
                f"'{task.description}' has a handler configured. Use SEQUENTIAL or PARALLEL "
                "workflow when mixing AI-backed and deterministic tasks."
            )
        if task.output_type is not None and task is not tasks[-1]:
            raise ValidationError(
                f"Task '{task.description}' sets output_type, which HIERARCHICAL workflow "
                "applies only to the last task: the manager's final answer is parsed against "
                "the last task's output_type"
            )
        for name in (
            "input_guardrails",
            "output_guardrails",
            "timeout",
            "review",
            "before_review",
            "memory",
        ):
            if getattr(task, name):
                raise ValidationError(
                    f"Task '{task.description}' sets {name}, which HIERARCHICAL workflow does "
                    "not apply: the manager hands free-form subtasks to the workers. Use "
                    f"SEQUENTIAL or PARALLEL workflow for tasks with {name}."
                )
        _check_no_task_budget(task)


def _check_no_task_budget(task: Task[Any]) -> None:
    """A task's budget counts the task's own model calls, and a manager runs no task."""
    for name in ("max_tokens", "max_cost", "max_model_calls"):
        if getattr(task, name) is not None:
            raise ValidationError(
                f"Task '{task.description}' sets {name}, which HIERARCHICAL workflow does "
                "not apply: the manager hands free-form subtasks to the workers. Budget the "
                f"whole run with RunOptions({name}=...), or use SEQUENTIAL or PARALLEL "
                "workflow for tasks with their own budget."
            )


def check_worker_roles(agents: Sequence[Agent]) -> None:
    """No worker of a HIERARCHICAL run may take the manager's role or share a role."""
    seen: dict[str, object] = {}
    for agent in agents:
        canonical = canonical_role(agent.role)
        if canonical == "manager":
            raise ValidationError(
                "Agent role 'Manager' is reserved for the virtual manager in HIERARCHICAL "
                f"workflow. Choose a different role for agent '{agent.role}'."
            )
        if seen.get(canonical, agent) is not agent:
            raise ValidationError(
                f"Duplicate agent role '{agent.role}' detected in HIERARCHICAL workflow. All "
                "agent roles must be unique (case-insensitive) to avoid ambiguous delegation."
            )
        seen[canonical] = agent


def check_peer_roles(agents: Sequence[Agent]) -> None:
    """No two agents a peer may delegate to share a role: roles are compared trimmed and
    case-insensitively, so the second would be unreachable."""
    seen: dict[str, Agent] = {}
    for agent in agents:
        first = seen.setdefault(canonical_role(agent.role), agent)
        if first is not agent:
            raise ValidationError(
                f"Agents {first.role!r} and {agent.role!r} share a role (roles are compared "
                "trimmed and case-insensitively), so delegations could never reach the second: "
                "give each agent a role of its own"
            )


def check_context_cycles(tasks: Sequence[Task[Any]]) -> None:
    """No task may depend on itself through its context, however indirectly."""
    looped = find_cycle(tasks, lambda task: task.context)
    if looped is not None:
        raise ValidationError(
            f"Circular context dependency detected involving task: '{looped.description}'"
        )


N = TypeVar("N")


def find_cycle(nodes: Iterable[N], edges: Callable[[N], Iterable[N]]) -> N | None:
    """A node on a cycle of the graph, or None; an iterative depth-first search, so chains
    of thousands of nodes do not recurse."""
    done: set[N] = set()
    for root in nodes:
        if root in done:
            continue
        on_path = {root}
        stack = [(root, iter(edges(root)))]
        while stack:
            node, pending = stack[-1]
            following = next(pending, None)
            if following is None:
                stack.pop()
                on_path.discard(node)
                done.add(node)
            elif following in on_path:
                return following
            elif following not in done:
                on_path.add(following)
                stack.append((following, iter(edges(following))))
    return None


def _check_listed_once(tasks: Sequence[Task[Any]]) -> None:
    seen: set[Task[Any]] = set()
    for index, task in enumerate(tasks):
        if task in seen:
            raise ValidationError(
                f"Ensemble tasks[{index}] is task '{task.description}' again: a task may be "
                "listed once. Use task.copy() for a second task with the same settings."
            )
        seen.add(task)


def _check_context_order(
    tasks: Sequence[Task[Any]], *, outside: Set[Task[Any]], ordered: bool
) -> None:
    """Context tasks belong to the run (or come from `outside`: earlier phases) under every
    workflow; `ordered` (SEQUENTIAL) also wants them earlier in the list."""
    position = {task: index for index, task in enumerate(tasks)}
    for index, task in enumerate(tasks):
        for dependency in task.context:
            where = position.get(dependency)
            if where is None and dependency not in outside:
                raise ValidationError(
                    f"Task '{task.description}' references context task "
                    f"'{dependency.description}' which is not in the ensemble's task list. "
                    "All context tasks must be included in the ensemble before they can be "
                    "referenced."
                )
            if ordered and where is not None and where > index:
                raise ValidationError(
                    f"Task '{task.description}' references context task "
                    f"'{dependency.description}' which appears later in the task list. "
                    "Context tasks must be executed before the tasks that reference them."
                )


def _check_phase_elements(phases: Sequence[object]) -> tuple[Phase, ...]:
    checked = items_of(phases, Phase, "Ensemble phases")
    unique_names(checked, "phase")
    return checked


def _check_phase_graph(phases: Sequence[Phase]) -> None:
    members = set(phases)
    for phase in phases:
        for before in phase.after:
            if before not in members:
                raise ValidationError(
                    f"Phase '{phase.name}' runs after phase '{before.name}', which is not in "
                    "the ensemble's phases"
                )
    _check_phase_cycles(phases)


def _check_phase_cycles(phases: Sequence[Phase]) -> None:
    looped = find_cycle(phases, lambda phase: phase.after)
    if looped is not None:
        raise ValidationError(
            f"Circular phase dependency detected involving phase '{looped.name}'. Phase "
            "dependencies must form a directed acyclic graph (DAG)."
        )


def _task_owners(phases: Sequence[Phase]) -> dict[Task[Any], Phase]:
    owner: dict[Task[Any], Phase] = {}
    for phase in phases:
        for task in phase.tasks:
            if task in owner:
                raise ValidationError(
                    f"Task '{task.description}' appears in phase '{owner[task].name}' and in "
                    f"phase '{phase.name}'. A task belongs to exactly one phase."
                )
            owner[task] = phase
    return owner


def _phase_workflow(phase: Phase, ensemble_workflow: Workflow | None) -> Workflow:
    workflow = phase.workflow or ensemble_workflow or Workflow.SEQUENTIAL
    if workflow is Workflow.HIERARCHICAL:
        raise ValidationError(hierarchical_phase_message(phase.name))
    return workflow


def _ancestors(phase: Phase) -> Iterable[Phase]:
    seen: dict[Phase, None] = {}
    stack = list(phase.after)
    while stack:
        before = stack.pop()
        if before not in seen:
            seen[before] = None
            stack.extend(before.after)
    return seen


def _check_cross_phase_context(
    phase: Phase, owner: Mapping[Task[Any], Phase], visible: frozenset[Task[Any]]
) -> None:
    for task in phase.tasks:
        for dependency in task.context:
            if owner.get(dependency) is phase or dependency in visible:
                continue
            raise ValidationError(
                f"Task '{task.description}' in phase '{phase.name}' references context task "
                f"'{dependency.description}', which is neither in phase '{phase.name}' nor in "
                "a phase it runs after."
            )
