"""One run, from an ensemble's settings to its `EnsembleOutput`.

The order (BEHAVIOUR 1): validate, resolve every template, build the one `RunContext`, plan
every task of every phase (agent synthesis included), then execute. Everything before
execution raises before any task's model call. The outcome is COMPLETED, TIMEOUT (the run's
deadline expired), USER_EXIT_EARLY (a control-flow signal) or an error; whichever it is,
the trace is built from the outputs completed so far, `on_ensemble_completed` fires and the
trace is exported.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, cast

from agentensemble._calling import finish_even_if_cancelled, sync_pool
from agentensemble._control import find_signal
from agentensemble._frozen import direct_init, direct_new
from agentensemble._inputs import Inputs, check_inputs
from agentensemble._logging import get_logger
from agentensemble._unset import is_given, resolved
from agentensemble._validation import (
    EnsembleShape,
    check_listed_once,
    check_peer_roles,
    check_worker_roles,
    validate_added,
    validate_flat,
    validate_members,
    validate_phases,
)
from agentensemble.agent import Agent
from agentensemble.checkpoints import CheckpointStore
from agentensemble.enums import ExitReason, Workflow
from agentensemble.errors import AgentEnsembleError, ValidationError
from agentensemble.execution._budget import RunBudget, has_budget
from agentensemble.execution._checkpointing import RunCheckpoint, plan_of, resume_hint
from agentensemble.execution._context import RunContext, RunLimiters, new_run_id
from agentensemble.execution._delegation import Team
from agentensemble.execution._hooks import RunHooks
from agentensemble.execution._loops import LoopRecord, LoopRunner
from agentensemble.execution._memory import RunMemory
from agentensemble.execution._planning import (
    Node,
    PlannedTask,
    ReviewRules,
    SynthesisLog,
    fixed_texts,
    has_template,
    plan_tasks,
    resolve_agents,
    resolve_texts,
)
from agentensemble.execution._recorder import failure_reason
from agentensemble.execution._review import RunReview
from agentensemble.execution._run_trace import agent_summary, errors_of, export_trace
from agentensemble.execution._synthesis import TemplateAgentSynthesizer
from agentensemble.graph import Graph
from agentensemble.loop import Loop, body_key
from agentensemble.observability._capture import CaptureMode, resolve_capture_mode
from agentensemble.observability._events import (
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    PlanNode,
)
from agentensemble.observability._exporters import JsonTraceExporter, TraceExporter
from agentensemble.observability._listeners import EventDispatcher
from agentensemble.observability._log_fold import LogFold
from agentensemble.options import RunOptions
from agentensemble.outputs import EnsembleOutput, TaskOutput
from agentensemble.review import OnTimeoutAction, ReviewDecision, ReviewPolicy
from agentensemble.review._signals import RunPaused
from agentensemble.task import Task
from agentensemble.workflows._executor import (
    ComposedExecutor,
    ExecutorRequest,
    PlannedGroup,
    Planner,
    WorkflowExecutor,
    WorkflowSettings,
    WorkflowSpec,
)
from agentensemble.workflows._parallel import PARALLEL
from agentensemble.workflows._registry import GRAPH, PHASES, WORKFLOWS, workflow_spec

if TYPE_CHECKING:
    from agentensemble.ensemble import Ensemble
    from agentensemble.observability._trace import ExecutionTrace
    from agentensemble.phase import Phase

__all__ = ["Composition", "RunPlan", "execute_run", "run_ensemble"]

logger = get_logger("agentensemble.ensemble")

_AUTO_EXPORT_DIRECTORY = "traces"
_ADDED_TASKS_WORKFLOW = Workflow.PARALLEL
"""Tasks added while a run runs join its running graph: checked and gated as PARALLEL."""


@dataclass(frozen=True, slots=True)
class Composition:
    """How a composite (`MapReduceEnsemble`) shapes a run: the executor it makes from the
    run's planner, and where the run's tasks sit in its map-reduce tree."""

    executor: Callable[[Planner], ComposedExecutor]
    nodes: Mapping[Task[Any], Node]


def _delegation_settings(ensemble: Ensemble) -> tuple[str, ...]:
    """The delegation settings the ensemble changes (they need an agent that delegates)."""
    values = {
        "delegation_policies": bool(ensemble.delegation_policies),
        "max_delegation_depth": is_given(ensemble.max_delegation_depth),
    }
    return tuple(name for name, is_set in values.items() if is_set)


@dataclass(frozen=True, slots=True)
class _Group:
    """Tasks planned together, and the registered workflow that runs them."""

    tasks: tuple[Task[Any], ...]
    workflow: str
    phase: Phase | None = None


@dataclass(frozen=True, slots=True)
class _Shape:
    """A validated ensemble: every task in plan order, and how to run them."""

    tasks: tuple[Task[Any], ...]
    workflow: str
    """The registered workflow of the run."""
    groups: tuple[_Group, ...]
    """The task groups in plan order: one per phase, or the whole task list."""
    verbose_roles: frozenset[str] = frozenset()
    """Roles of the agents whose prompts and answers are logged at INFO."""
    loops: tuple[tuple[Loop, Task[Any]], ...] = ()
    """Each loop and the task that stands for it among the run's tasks."""
    warnings: tuple[str, ...] = ()
    """What every run of the ensemble warns about (logged once, when checked)."""
    budgeted: tuple[Task[Any], ...] = ()
    """The tasks (loop bodies included) that set a budget of their own."""
    texts: Mapping[Task[Any], tuple[str, str]] | None = None
    """Every task's texts when none holds a brace: the same in every run whatever its inputs
    (None: each run resolves them with its inputs)."""
    templated_agents: tuple[Agent, ...] = ()
    """The agents whose texts may hold a template: each run fills them in (set, like
    `texts`, when the ensemble is checked)."""
    plans_alike: bool = False
    """Whether every run plans the same frozen tasks (see `_plans_alike`): the first run
    keeps its plan on the ensemble and the later ones take it."""

    @property
    def all_tasks(self) -> tuple[Task[Any], ...]:
        """The run's tasks and its loops' bodies (every task whose texts are resolved)."""
        return (*self.tasks, *(task for loop, _ in self.loops for task in loop.tasks))


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """A validated, fully planned run."""

    name: str | None
    workflow_label: str
    """``SEQUENTIAL``, ``PARALLEL``, ``HIERARCHICAL`` or ``PHASES``."""
    tasks: tuple[PlannedTask, ...]
    """Every planned task (of every phase)."""
    executor: WorkflowExecutor
    inputs: Mapping[str, str]
    synthesis: SynthesisLog
    team: Team | None = None
    """Who tasks may delegate to (when an agent may delegate, or the run is hierarchical)."""
    added: list[PlannedTask] = field(default_factory=list)
    """Tasks planned while the run runs (adaptive map-reduce levels), in order."""
    composed: ComposedExecutor | None = None
    """The executor, when a composite (`MapReduceEnsemble`) shapes the run."""
    warnings: tuple[str, ...] = ()
    """What the run warns about as it starts (`RunWarningEvent`s)."""

    def all_tasks(self) -> tuple[PlannedTask, ...]:
        """Every task planned so far, in plan order."""
        return (*self.tasks, *self.added)

    def agents(self) -> list[Agent]:
        """The distinct agents: the team's when there is one (the ensemble's extra `agents`
        too), then those of the tasks in plan order (tasks added while running too)."""
        seen: dict[int, Agent] = {}
        if self.team is not None:
            seen = {id(worker.agent): worker.agent for worker in self.team.workers}
        for planned in self.all_tasks():
            if planned.agent is not None:
                seen.setdefault(id(planned.agent), planned.agent)
        return list(seen.values())


async def run_ensemble(
    ensemble: Ensemble,
    inputs: Inputs | None,
    options: RunOptions | None,
    *,
    compose: Composition | None = None,
    resume: str | None = None,
    decision: ReviewDecision | None = None,
) -> EnsembleOutput:
    """Validate, plan and execute one run of `ensemble` (a flat PARALLEL one, when a
    composite shapes it); with `resume`, continue that checkpointed run (a paused one with
    the `decision` on the review it waits for)."""
    options = _check_options(options)
    resume = _resume_of(resume, options)
    checkpoint = None
    if resume is not None:
        options = dataclasses.replace(options, run_id=_resumed_id(ensemble, resume))
        checkpoint = await RunCheckpoint.open(
            _store(ensemble), resume, resume=True, decision=decision
        )
        inputs = checkpoint.inputs if inputs is None else inputs
    elif decision is not None:
        raise ValidationError(
            f"decision={decision!r} answers the review a paused run waits for: pass the "
            "run's id as resume= too"
        )
    # the ensemble's inputs were made text when it was built
    run_inputs = {
        **cast("Mapping[str, str]", ensemble.inputs),
        **check_inputs(inputs, "run inputs"),
    }
    shape = _validate(ensemble)
    texts = shape.texts
    if texts is None:
        every = shape.all_tasks
        texts = dict(zip(every, resolve_texts(every, run_inputs), strict=True))
    templated = shape.templated_agents
    agents = resolve_agents(templated, run_inputs) if templated else {}
    await _check_memory_store(ensemble)
    run = _run_context(ensemble, options, shape, agents)
    if checkpoint is not None or ensemble.checkpoint is not None:
        run = _with_checkpoint(run, ensemble, checkpoint)
    exporter = _exporter(ensemble, run.capture_mode)
    with sync_pool(ensemble.max_sync_threads):
        planning = _plan(ensemble, shape, texts, run, run_inputs, compose)
        del texts  # the plan holds what it needs: this frame lives as long as the run
        if run.deadline is None:
            plan = await planning
            return await execute_run(plan, _with_team(run, plan), exporter)
        try:
            async with asyncio.timeout_at(run.deadline) as deadline:
                plan = await planning
        except TimeoutError:
            if not deadline.expired():
                raise
            return await _timed_out_while_planning(run, run_inputs, exporter)
        return await execute_run(plan, _with_team(run, plan), exporter)


def _store(ensemble: Ensemble) -> CheckpointStore:
    store = ensemble.checkpoint_store
    if store is None:
        raise ValidationError(
            "resume needs the ensemble's checkpoint: Ensemble(checkpoint=path or "
            "CheckpointStore) records the runs it can resume"
        )
    return store


def _resume_of(resume: str | None, options: RunOptions) -> str | None:
    """The run to resume: `resume`, or `RunOptions.resume` (they must agree)."""
    if resume is None or options.resume is None or resume == options.resume:
        return resume if resume is not None else options.resume
    raise ValidationError(
        f"resume={resume!r} and RunOptions resume={options.resume!r} name different runs"
    )


def _resumed_id(ensemble: Ensemble, resume: object) -> str:
    """The id of the run to resume (checked: text, and the ensemble checkpoints runs)."""
    _store(ensemble)  # the missing checkpoint is the first thing to say
    if not isinstance(resume, str) or not resume.strip():
        raise ValidationError(f"resume must be the id of a checkpointed run, got: {resume!r}")
    return resume


def _with_checkpoint(
    run: RunContext, ensemble: Ensemble, resumed: RunCheckpoint | None
) -> RunContext:
    """The run context with its checkpoint: the resumed run's, or a new one when the
    ensemble checkpoints its runs."""
    store = ensemble.checkpoint_store
    if resumed is not None:  # its events go on after the recorded run's
        run.events.continue_after(resumed.last_seq)
    checkpoint = resumed or RunCheckpoint(cast("CheckpointStore", store), run.run_id)
    return dataclasses.replace(run, checkpoint=checkpoint)


async def _check_memory_store(ensemble: Ensemble) -> None:
    """A store that can check itself (a SQLite file) does so before any model call."""
    check = getattr(ensemble.memory_store, "check", None)
    if callable(check):
        await check()


def _with_team(run: RunContext, plan: RunPlan) -> RunContext:
    """The run context with the planned team (known once every agent is)."""
    return run if plan.team is None else dataclasses.replace(run, team=plan.team)


_NO_OPTIONS = RunOptions()
"""The options of a run given none (immutable, so one object serves every run)."""


def _check_options(options: object) -> RunOptions:
    if options is None:
        return _NO_OPTIONS
    if not isinstance(options, RunOptions):
        raise ValidationError(f"run options must be a RunOptions, got: {options!r}")
    return options


def checked_ensemble(ensemble: Ensemble) -> Ensemble:
    """`ensemble`, checked as its first run will check it (raises `ValidationError`)."""
    _validate(ensemble)
    return ensemble


def _validate(ensemble: Ensemble) -> _Shape:
    """The ensemble checked (BEHAVIOUR 2), once per ensemble: its configuration is
    immutable, so later runs reuse the first run's result."""
    shape: _Shape | None = ensemble._validated
    if shape is None:
        shape = _check(ensemble)
        _check_pausing(ensemble, shape.all_tasks)
        warnings = _unfed_tasks_warning(ensemble, shape)
        for message in warnings:
            logger.warning("%s", message)
        every = shape.all_tasks
        shape = dataclasses.replace(
            shape,
            verbose_roles=_verbose_roles(ensemble),
            warnings=warnings,
            budgeted=tuple(task for task in every if has_budget(task)),
            texts=fixed_texts(every),
            templated_agents=tuple(filter(has_template, _agents_of(ensemble, every))),
        )
        shape = dataclasses.replace(shape, plans_alike=_plans_alike(ensemble, shape))
        object.__setattr__(ensemble, "_validated", shape)
    return shape


def _agents_of(ensemble: Ensemble, tasks: Sequence[Task[Any]]) -> list[Agent]:
    """The agents of `tasks`, then the ensemble's own (those whose texts a run fills in)."""
    return [*(task.agent for task in tasks if task.agent is not None), *ensemble.agents]


def _check_pausing(ensemble: Ensemble, tasks: Sequence[Task[Any]]) -> None:
    """A review that pauses the run needs a checkpoint to resume from."""
    if ensemble.checkpoint_store is not None:
        return
    for what in _pausing(ensemble, tasks):
        raise ValidationError(
            f"{what} pauses the run, and a paused run resumes from its checkpoint: set "
            "Ensemble(checkpoint=path or CheckpointStore)"
        )


def _pausing(ensemble: Ensemble, tasks: Sequence[Task[Any]]) -> Iterator[str]:
    """What would pause a run: the review handler, a task's gate, a `human_input` tool."""
    handler = ensemble.review_handler
    if getattr(handler, "pauses", False):
        yield "Ensemble review_handler ReviewHandler.pause()"
    if getattr(handler, "default_on_timeout", None) is OnTimeoutAction.PAUSE:
        yield f"Ensemble review_handler {handler!r} (its on_timeout=PAUSE)"
    for task in tasks:
        for name in ("before_review", "review"):
            review = getattr(task, name)
            if review is not None and review.on_timeout is OnTimeoutAction.PAUSE:
                yield f"Task '{task.label}' {name} on_timeout=PAUSE"
    for agent in _agents_of(ensemble, tasks):
        for tool in agent.tools:
            if getattr(tool, "on_timeout", None) is OnTimeoutAction.PAUSE:
                yield f"Agent '{agent.role}' tool {type(tool).__name__}(on_timeout=PAUSE)"


def _check(ensemble: Ensemble) -> _Shape:
    if ensemble.graph is not None:
        return _check_graph(ensemble, ensemble.graph)
    if ensemble.loops and ensemble.phases:
        raise ValidationError(
            "Cannot mix loops and phases on the same Ensemble. Use loops within a flat task "
            "list, or compose phases instead."
        )
    if ensemble.tasks and ensemble.phases:
        raise ValidationError(
            "Cannot mix tasks and phases on the same Ensemble. Use flat tasks for simple "
            "pipelines, or phases for named workstreams with parallel execution -- but not "
            "both on the same ensemble."
        )
    settings = _settings(ensemble)
    if ensemble.phases:
        phases = validate_phases(ensemble.phases, ensemble.workflow, settings)
        groups = tuple(_Group(item.phase.tasks, item.workflow.value, item.phase) for item in phases)
        tasks = tuple(task for group in groups for task in group.tasks)
        return _Shape(tasks, PHASES.name, groups)
    loops = _check_loops(ensemble) if ensemble.loops else ()
    flat = (*ensemble.tasks, *(shadow for _, shadow in loops))
    tasks, workflow = validate_flat(flat, ensemble.workflow, settings)
    if ensemble.workflow is None:
        logger.info("Workflow inferred: %s", workflow.value)
    return _Shape(tasks, workflow.value, (_Group(tasks, workflow.value),), loops=loops)


def _check_loops(ensemble: Ensemble) -> tuple[tuple[Loop, Task[Any]], ...]:
    """The loops checked against the ensemble (BEHAVIOUR 2), each with its stand-in task."""
    if ensemble.workflow is Workflow.HIERARCHICAL:
        raise ValidationError(
            "Workflow.HIERARCHICAL does not support loops. Use Workflow.SEQUENTIAL or "
            "Workflow.PARALLEL when declaring loops."
        )
    flat = set(ensemble.tasks)
    owner = {task: loop for loop in ensemble.loops for task in loop.tasks}
    for loop in ensemble.loops:
        for task in loop.tasks:
            if not _has_model(task, ensemble):
                raise ValidationError(
                    f"Loop '{loop.name}' body task '{body_key(task)}' has no LLM source. Set "
                    "llm on the task or the ensemble, or give it an agent or a handler."
                )
        for needed in loop.context:
            if needed not in flat:
                raise ValidationError(
                    f"Loop '{loop.name}' context task '{body_key(needed)}' is not one of the "
                    "ensemble's tasks"
                )
    bodies = [task for loop in ensemble.loops for task in loop.tasks]
    check_listed_once([*ensemble.tasks, *bodies], where="the ensemble's tasks and loops")
    validate_members(bodies, _settings(ensemble))
    for task in ensemble.tasks:
        for needed in task.context:
            if needed in owner:
                raise ValidationError(
                    f"Task '{body_key(task)}' has context '{body_key(needed)}', a body task of "
                    f"loop '{owner[needed].name}': a task outside a loop cannot wait for its "
                    "body; read EnsembleOutput.loop_history() after the run, or move the task "
                    "into the loop"
                )
    return tuple((loop, _stand_in(loop)) for loop in ensemble.loops)


def _stand_in(loop: Loop) -> Task[Any]:
    """The task a loop is among the run's tasks: it waits for the loop's context and runs
    its iterations (its own output is not one of the run's outputs)."""
    return Task(
        description=f"$loop:{loop.name}",
        expected_output=f"The output of loop '{loop.name}'",
        handler=_runs_as_loop,
        context=loop.context,
    )


def _runs_as_loop(context: Any) -> str:  # planning replaces the handler step
    raise AssertionError("a loop's task ran as a handler")


def _check_graph(ensemble: Ensemble, graph: Graph) -> _Shape:
    if ensemble.tasks or ensemble.loops or ensemble.phases:
        raise ValidationError(
            "Cannot mix graph with tasks / loops / phases on the same Ensemble. Graph is an "
            "exclusive orchestration style; pick one per ensemble."
        )
    if ensemble.workflow is Workflow.HIERARCHICAL:
        raise ValidationError(
            "Workflow.HIERARCHICAL does not support a Graph. Leave workflow unset when "
            "declaring a graph."
        )
    for state, task in graph.states.items():
        if not _has_model(task, ensemble):
            raise ValidationError(
                f"Graph '{graph.name}' state '{state}' Task has no LLM source. Set llm on the "
                "task or the ensemble, or give it an agent or a handler."
            )
    tasks = tuple(graph.states.values())
    validate_members(tasks, _settings(ensemble))
    return _Shape(tasks, GRAPH.name, (_Group(tasks, GRAPH.name),))


def _has_model(task: Task[Any], ensemble: Ensemble) -> bool:
    return any(source is not None for source in (task.agent, task.llm, task.handler, ensemble.llm))


def _settings(ensemble: Ensemble) -> EnsembleShape:
    """The ensemble's settings that validation looks at."""
    return EnsembleShape(
        llm=ensemble.model,
        rate_limit=ensemble.rate_limit,
        parallel_error_strategy=ensemble.parallel_error_strategy,
        manager_max_iterations=resolved(ensemble.manager_max_iterations),
        workflow_settings=_own_settings_given(ensemble),
        delegation_settings=_delegation_settings(ensemble),
        constraints=ensemble.hierarchical_constraints,
        agents=tuple(ensemble.agents),
        has_review_handler=ensemble.review_handler is not None,
        review_policy=ensemble.review_policy,
        has_memory_store=ensemble.memory_store is not None,
        memory_settings=_memory_settings(ensemble),
    )


def _memory_settings(ensemble: Ensemble) -> tuple[str, ...]:
    values = {
        "short_term_memory": ensemble.short_term_memory,
        "entity_memory": ensemble.entity_memory is not None,
    }
    return tuple(name for name, value in values.items() if value)


def _own_settings_given(ensemble: Ensemble) -> dict[str, tuple[str, ...]]:
    """For each registered workflow with settings of its own, those the ensemble sets."""
    given = {
        spec.name: tuple(name for name in spec.own_settings if _is_set(getattr(ensemble, name)))
        for spec in WORKFLOWS.values()
    }
    return {name: settings for name, settings in given.items() if settings}


def _is_set(value: object) -> bool:
    """Whether a setting was given (None and `UNSET` both mean it was not)."""
    return value is not None and is_given(value)


def _run_context(
    ensemble: Ensemble, options: RunOptions, shape: _Shape, agents: Mapping[Agent, Agent]
) -> RunContext:
    def pick(override: int | None, default: int) -> int:
        return default if override is None else override

    logs = LogFold(
        verbose=ensemble.verbose,
        verbose_roles=shape.verbose_roles,
        tool_log_truncate_length=pick(
            options.tool_log_truncate_length, ensemble.tool_log_truncate_length
        ),
    )
    return direct_new(RunContext)(
        run_id=options.run_id or new_run_id(),
        events=EventDispatcher(_listeners(ensemble, options), folds=(logs,)),
        max_tool_output_length=pick(
            options.max_tool_output_length, ensemble.max_tool_output_length
        ),
        capture_mode=resolve_capture_mode(ensemble.capture_mode),
        context_format=ensemble.context_format,
        cost_configuration=ensemble.cost_configuration,
        limiters=RunLimiters.of(shape.tasks, ensemble.rate_limit),
        max_concurrency=ensemble.max_concurrency,
        deadline=_deadline(options.timeout_seconds),
        review=RunReview(ensemble.review_handler, ensemble.review_policy or ReviewPolicy.NEVER)
        if ensemble.review_handler is not None
        else None,
        memory=_memory(ensemble),
        hooks=RunHooks.of((*ensemble.hooks, *options.hooks)),
        agents=agents,
        budget=RunBudget.of(options, shape.budgeted, ensemble.cost_configuration),
    )


def _verbose_roles(ensemble: Ensemble) -> frozenset[str]:
    """Roles of the agents whose prompts and answers are logged at INFO."""
    tasks = (*ensemble.tasks, *(task for phase in ensemble.phases for task in phase.tasks))
    agents = (*ensemble.agents, *(task.agent for task in tasks if task.agent is not None))
    return frozenset(agent.role for agent in agents if agent.verbose)


def _memory(ensemble: Ensemble) -> RunMemory | None:
    if (
        ensemble.memory_store is None
        and ensemble.entity_memory is None
        and not ensemble.short_term_memory
    ):
        return None
    return RunMemory(ensemble.memory_store, ensemble.entity_memory, ensemble.short_term_memory)


def _deadline(seconds: float | None) -> float | None:
    """The run's deadline in event-loop time, fixed when the run starts."""
    return None if seconds is None else asyncio.get_running_loop().time() + seconds


def _listeners(ensemble: Ensemble, options: RunOptions) -> list[object]:
    listeners: list[object] = [*ensemble.event_listeners, *options.listeners]
    if ensemble.verbose:
        from agentensemble.observability._console import ConsoleProgress

        listeners.append(ConsoleProgress())
    return listeners


def _exporter(ensemble: Ensemble, capture_mode: CaptureMode) -> TraceExporter | None:
    if ensemble.trace_exporter is None and capture_mode is CaptureMode.FULL:
        return JsonTraceExporter(_AUTO_EXPORT_DIRECTORY)
    return ensemble.trace_exporter


async def _plan(
    ensemble: Ensemble,
    shape: _Shape,
    texts: Mapping[Task[Any], tuple[str, str]],
    run: RunContext,
    inputs: Mapping[str, str],
    compose: Composition | None = None,
) -> RunPlan:
    """Plan every task of every phase before any task runs; the executor comes from the
    run's registered workflow, or from `compose` when a composite shapes the run."""
    synthesis = SynthesisLog()
    spec = workflow_spec(shape.workflow)
    nodes = compose.nodes if compose is not None else None
    groups = await _plan_groups(ensemble, shape, texts, run, synthesis, nodes)
    planned = tuple(task for group in groups for task in group.tasks)
    team = _team(ensemble, spec, planned, run)
    added: list[PlannedTask] = []
    composed = None
    executor: WorkflowExecutor
    if compose is not None:
        composed = executor = compose.executor(
            _RunPlanner(ensemble, run, inputs, synthesis, planned=planned, added=added)
        )
    else:
        request = direct_new(ExecutorRequest)(
            groups=groups,
            settings=_workflow_settings(ensemble, run),
            team=team,
            workflows=WORKFLOWS,
        )
        executor = await spec.build(request)
    return direct_new(RunPlan)(
        name=ensemble.name,
        workflow_label=composed.workflow_label if composed else spec.name,
        tasks=planned,
        executor=executor,
        inputs=inputs,
        synthesis=synthesis,
        team=team,
        added=added,
        composed=composed,
        warnings=shape.warnings,
    )


def _unfed_tasks_warning(ensemble: Ensemble, shape: _Shape) -> tuple[str, ...]:
    """In a SEQUENTIAL group, tasks after the first that see no earlier output (no context,
    no memory): CrewAI users expect every earlier output to reach them."""
    if ensemble.short_term_memory or ensemble.graph is not None:
        return ()
    unfed = [
        f"'{task.name or task.description}'"
        for group in shape.groups
        if group.workflow == Workflow.SEQUENTIAL.value
        for task in group.tasks[1:]
        if not task.context and not task.memory
    ]
    if not unfed:
        return ()
    return (
        f"In this SEQUENTIAL run, {', '.join(unfed)} see{'s' if len(unfed) == 1 else ''} no "
        "earlier task's output: list the tasks it needs in context=[...] (and keep "
        "workflow=SEQUENTIAL), or set short_term_memory=True to pass every earlier output",
    )


async def _plan_groups(
    ensemble: Ensemble,
    shape: _Shape,
    texts: Mapping[Task[Any], tuple[str, str]],
    run: RunContext,
    synthesis: SynthesisLog,
    nodes: Mapping[Task[Any], Node] | None,
) -> tuple[PlannedGroup, ...]:
    """Each group's tasks planned (agents synthesised, gates set, placed in the map-reduce
    tree of `nodes`), numbered in plan order; a run that plans as every other run of the
    ensemble does takes the plan the first such run made."""
    alike = nodes is None and shape.plans_alike
    if alike and ensemble._planned is not None:
        kept: tuple[PlannedGroup, ...] = ensemble._planned
        return kept
    synthesizer = ensemble.agent_synthesizer or TemplateAgentSynthesizer()
    planned_groups: list[PlannedGroup] = []
    first = 1
    for group in shape.groups:
        planned = await plan_tasks(
            group.tasks,
            [texts[task] for task in group.tasks],
            llm=ensemble.model,
            synthesizer=synthesizer,
            run=run,
            synthesis=synthesis,
            first_index=first,
            total=len(shape.tasks),
            review=_review_rules(ensemble, workflow_spec(group.workflow)),
            nodes=nodes,
        )
        planned_groups.append(
            PlannedGroup(tasks=planned, workflow=group.workflow, phase=group.phase)
        )
        first += len(group.tasks)
    if shape.loops:
        planned_groups = [
            await _with_loops(group, ensemble, shape, texts, run, synthesis, first)
            for group in planned_groups
        ]
    planned_all = tuple(planned_groups)
    if alike:
        object.__setattr__(ensemble, "_planned", planned_all)
    return planned_all


def _plans_alike(ensemble: Ensemble, shape: _Shape) -> bool:
    """Whether every run plans the same tasks: nothing in a plan is the run's own (no
    inputs in its texts or agents, no rate-limit buckets, memory or review gates, no loops),
    no model is asked to synthesise an agent, and no task without an agent brings tools
    (each run resolves those: an MCP server's tools are read when the run starts). Planned
    tasks are frozen, so runs, even at once, can share them."""
    synthesizer = ensemble.agent_synthesizer
    return (
        shape.texts is not None
        and not shape.templated_agents
        and not shape.loops
        and _memory(ensemble) is None
        and not RunLimiters.of(shape.tasks, ensemble.rate_limit).owned
        and ensemble.review_handler is None
        and (synthesizer is None or type(synthesizer) is TemplateAgentSynthesizer)
        and not any(task.tools and task.agent is None for task in shape.tasks)
    )


async def _with_loops(
    group: PlannedGroup,
    ensemble: Ensemble,
    shape: _Shape,
    texts: Mapping[Task[Any], tuple[str, str]],
    run: RunContext,
    synthesis: SynthesisLog,
    first: int,
) -> PlannedGroup:
    """The group with each loop's task running the loop: its body planned (each body task
    numbered as the loop's task, as a delegated worker is as its caller) and its
    iterations as the task's one step."""
    runners: dict[Task[Any], LoopRunner] = {}
    index_of = {planned.source: planned.index for planned in group.tasks}
    for loop, stand_in in shape.loops:
        if stand_in not in index_of:
            continue
        body = await plan_tasks(
            loop.tasks,
            [texts[task] for task in loop.tasks],
            llm=ensemble.model,
            synthesizer=ensemble.agent_synthesizer or TemplateAgentSynthesizer(),
            run=run,
            synthesis=synthesis,
            first_index=first,
            total=len(shape.all_tasks),
            review=_review_rules(ensemble, PARALLEL),  # no body task is the run's last
        )
        first += len(body)
        numbered = tuple(
            dataclasses.replace(planned, index=index_of[stand_in], total=len(shape.tasks))
            for planned in body
        )
        runners[stand_in] = LoopRunner(loop, numbered)
        run.outputs.hide(stand_in)
        run.outputs.loops[loop.name] = LoopRecord()
    tasks = tuple(
        dataclasses.replace(planned, steps=(runners[planned.source],), before_start=())
        if planned.source in runners
        else planned
        for planned in group.tasks
    )
    return dataclasses.replace(group, tasks=tasks)


def _workflow_settings(ensemble: Ensemble, run: RunContext) -> WorkflowSettings:
    """The ensemble's settings as a workflow reads them."""
    return direct_new(WorkflowSettings)(
        parallel_error_strategy=ensemble.parallel_error_strategy,
        llm=ensemble.model,
        limiter=run.limiters.ensemble,
        manager_llm=ensemble.manager_model,
        manager_max_iterations=resolved(ensemble.manager_max_iterations),
        manager_prompt_strategy=ensemble.manager_prompt_strategy,
        graph=ensemble.graph,
    )


class _RunPlanner:
    """Plans the tasks a composed executor adds while the run runs (adaptive map-reduce
    levels): checked like the ensemble's own tasks (as one PARALLEL list with every task
    planned so far), templates resolved with the run's inputs, numbered after them."""

    def __init__(
        self,
        ensemble: Ensemble,
        run: RunContext,
        inputs: Mapping[str, str],
        synthesis: SynthesisLog,
        *,
        planned: Sequence[PlannedTask],
        added: list[PlannedTask],
    ) -> None:
        self._ensemble = ensemble
        self._settings = _settings(ensemble)
        self._run = run
        self._inputs = inputs
        self._synthesis = synthesis
        self._known = {task.source for task in planned}
        self._added = added

    async def check(self, tasks: Sequence[Task[Any]]) -> None:
        validate_added(tasks, self._known, self._settings)
        resolve_texts(tasks, self._inputs)
        self._filled_in_agents(tasks)

    async def __call__(
        self, tasks: Sequence[Task[Any]], *, nodes: Mapping[Task[Any], Node]
    ) -> tuple[PlannedTask, ...]:
        ensemble = self._ensemble
        validate_added(tasks, self._known, self._settings)
        texts = resolve_texts(tasks, self._inputs)
        agents = self._filled_in_agents(tasks)
        self._run.limiters.include(tasks)
        first = len(self._known) + 1
        planned = await plan_tasks(
            tasks,
            texts,
            llm=ensemble.model,
            synthesizer=ensemble.agent_synthesizer or TemplateAgentSynthesizer(),
            run=self._run,
            synthesis=self._synthesis,
            first_index=first,
            total=first + len(tasks) - 1,
            review=_review_rules(ensemble, workflow_spec(_ADDED_TASKS_WORKFLOW)),
            agents=agents,
            nodes=nodes,
        )
        self._known.update(tasks)
        self._added.extend(planned)
        return planned

    def _filled_in_agents(self, tasks: Sequence[Task[Any]]) -> Mapping[Agent, Agent]:
        """The run's agents with templates filled in, and those of the added tasks (a reduce
        level's agent may say "{region}" as the map level's do)."""
        added = resolve_agents(
            [task.agent for task in tasks if task.agent is not None], self._inputs
        )
        return {**self._run.agents, **added} if added else self._run.agents


def _review_rules(ensemble: Ensemble, spec: WorkflowSpec) -> ReviewRules | None:
    """The gates of tasks run under `spec` (None when nobody is there to review)."""
    if ensemble.review_handler is None:
        return None
    policy = ensemble.review_policy or ReviewPolicy.NEVER
    return ReviewRules(policy, in_order=spec.ordered)


def _team(
    ensemble: Ensemble, spec: WorkflowSpec, planned: tuple[PlannedTask, ...], run: RunContext
) -> Team | None:
    """The run's delegation team, checked against the hierarchical constraints when a
    manager delegates; None when nobody may delegate."""
    managed = spec.has_manager
    if not managed and not any(task.delegates for task in planned):
        return None
    constraints = ensemble.hierarchical_constraints if managed else None
    team = Team.of(
        planned,
        [run.agents.get(agent, agent) for agent in ensemble.agents],
        policies=ensemble.delegation_policies,
        max_depth=resolved(ensemble.max_delegation_depth),
        constraints=constraints,
    )
    workers = [worker.agent for worker in team.workers]
    if managed:
        check_worker_roles(workers)
    else:
        check_peer_roles(workers)
    if constraints is not None:
        constraints.check_roles(team.roles)
    return team


async def _timed_out_while_planning(
    run: RunContext, inputs: Mapping[str, str], exporter: TraceExporter | None
) -> EnsembleOutput:
    """The run's deadline expired before any task started (agent synthesis was slow)."""
    logger.warning("Run %s reached its deadline while planning; no task ran", run.run_id)
    events = run.events
    async with events.open():
        await events.emit(
            EnsembleStartedEvent(
                ensemble_id=run.run_id,
                seq=events.next_seq(),
                workflow="",
                total_tasks=0,
                capture_mode=run.capture_mode.value,
                inputs=dict(inputs),
            )
        )
        ended = EnsembleCompletedEvent(
            ensemble_id=run.run_id,
            seq=events.next_seq(),
            duration=timedelta(0),
            exit_reason=ExitReason.TIMEOUT.value,
        )
        interrupted = await _deliver_ending(run, ended)
    interrupted = await _exported(run, exporter, interrupted)
    if interrupted is not None:
        raise interrupted
    trace = run.trace.result()
    return EnsembleOutput(
        task_outputs=(),
        total_duration=timedelta(0),
        exit_reason=ExitReason.TIMEOUT,
        metrics=trace.metrics,
        trace=trace,
        run_id=run.run_id,
    )


async def execute_run(
    plan: RunPlan, run: RunContext, exporter: TraceExporter | None
) -> EnsembleOutput:
    """Execute the plan. The trace is folded from the run's events and exported whether the
    run completes, times out, exits early, fails or is cancelled."""
    started = time.perf_counter()
    if logger.isEnabledFor(logging.INFO):  # two calls when it is not, four through info()
        logger.info(
            "Ensemble run %s starting | %d tasks | %s",
            run.run_id,
            len(plan.tasks),
            plan.workflow_label,
        )
    failure: BaseException | None = None
    reason = ExitReason.ERROR
    if run.checkpoint is not None:
        await run.checkpoint.begin(plan_of(plan.tasks), plan.inputs)
    async with run.events.open():
        try:
            await _announce_start(plan, run)
            reason = await _execute(plan, run)
        except (Exception, asyncio.CancelledError) as error:  # not KeyboardInterrupt/SystemExit
            failure = error
        ended = _ending(
            plan, run, timedelta(seconds=time.perf_counter() - started), reason, failure
        )
        cancelled = isinstance(failure, asyncio.CancelledError)
        paused = _paused(run)
        checkpointed = None
        if run.checkpoint is not None:  # before listeners hear the end: they may resume it
            checkpointed = await _checkpoint_ended(run.checkpoint, ended, failure, paused)
        interrupted = await _deliver_ending(run, ended, cancelled=cancelled) or checkpointed
    interrupted = await _exported(run, exporter, interrupted)
    if failure is not None:
        raise failure
    if interrupted is not None:
        raise interrupted
    trace = run.trace.result_to_make()  # made when first read, unless an exporter read it
    return direct_new(EnsembleOutput)(
        task_outputs=run.outputs.completed(),
        total_duration=ended.duration,
        exit_reason=reason,
        metrics=trace.metrics,
        phase_outputs=dict(run.outputs.by_phase),
        trace=cast("ExecutionTrace", trace),
        _by_task=run.outputs.by_task(),
        _final=_final_output(plan, run),
        _loops=dict(run.outputs.loops),
        _graph=run.outputs.graph,
        run_id=run.run_id,
        pending_review=paused.pending if paused is not None else None,
    )


def _paused(run: RunContext) -> RunPaused | None:
    """The signal that paused the run, if a review paused it."""
    signal = run.stop.signal
    return signal if isinstance(signal, RunPaused) else None


async def _checkpoint_ended(
    checkpoint: RunCheckpoint,
    ended: EnsembleCompletedEvent,
    failure: BaseException | None,
    paused: RunPaused | None,
) -> asyncio.CancelledError | None:
    """Record how the run ended (even if cancelled meanwhile); a run that did not complete
    says, in its error, how to resume it. A store that fails here is logged: the run's
    outputs matter more than its end mark."""
    if failure is not None:
        failure.add_note(resume_hint(checkpoint.run_id))
    if isinstance(failure, AgentEnsembleError):
        failure.run_id = checkpoint.run_id  # type: ignore[attr-defined]  # kept by pickling
    cancelled = isinstance(failure, asyncio.CancelledError)
    status = "CANCELLED" if cancelled else ended.exit_reason
    try:
        return await finish_even_if_cancelled(checkpoint.end(status, ended.seq, paused))
    except Exception as error:  # the run's result is still returned or raised
        logger.warning(
            "Run %s: its checkpoint's end was not recorded: %s", checkpoint.run_id, error
        )
        return None


async def _announce_start(plan: RunPlan, run: RunContext) -> None:
    await run.events.emit(
        direct_new(EnsembleStartedEvent)(
            ensemble_id=run.run_id,
            seq=run.events.next_seq(),
            workflow=plan.workflow_label,
            total_tasks=len(plan.tasks),
            name=plan.name,
            capture_mode=run.capture_mode.value,
            inputs=dict(plan.inputs),
            cost_configuration=run.cost_configuration,
            plan=_plan_nodes(plan) if run.events.wants(EnsembleStartedEvent) else (),
        )
    )
    for message in plan.warnings:  # logged once, when the ensemble was checked
        await run.warn("sequential_task_without_context", message)


def _plan_nodes(plan: RunPlan) -> tuple[PlanNode, ...]:
    """The planned tasks and what each waits for: its context, and in a SEQUENTIAL run the
    task before it. A HIERARCHICAL run has none: its manager runs the tasks it is given."""
    if plan.team is not None and plan.workflow_label == "HIERARCHICAL":
        return ()
    index_of = {planned.source: planned.index for planned in plan.tasks}
    chained = plan.workflow_label == "SEQUENTIAL"
    nodes = []
    for position, planned in enumerate(plan.tasks):
        waits = [index_of[task] for task in planned.source.context if task in index_of]
        if chained and position:
            waits.append(plan.tasks[position - 1].index)
        nodes.append(
            PlanNode(
                task_index=planned.index,
                description=planned.description,
                agent_role=planned.role,
                name=planned.source.name,
                depends_on=tuple(sorted(set(waits))),
            )
        )
    return tuple(nodes)


def _ending(
    plan: RunPlan,
    run: RunContext,
    duration: timedelta,
    reason: ExitReason,
    failure: BaseException | None,
) -> EnsembleCompletedEvent:
    """The run's last event: how it ended, its outputs and failures, and (for a composed
    run) what its executor adds to the trace."""
    synthesis = tuple(plan.synthesis.interactions)
    metrics = run.trace.metrics(synthesis)
    ended = direct_new(EnsembleCompletedEvent)(
        ensemble_id=run.run_id,
        seq=run.events.next_seq(),
        duration=duration,
        exit_reason=reason.value,
        error_type=None if failure is None else type(failure).__name__,
        reason=None if failure is None else failure_reason(failure),
        total_tokens=metrics.total_tokens,
        total_tool_calls=metrics.total_tool_calls,
        output_task_ids=run.outputs.task_ids(),
        agents=tuple(agent_summary(agent) for agent in plan.agents()),
        errors=errors_of(failure) if failure is not None else (),
        agent_synthesis=synthesis,
    )
    if plan.composed is None:
        return ended
    finished = plan.composed.finish_trace(run.trace.trace_for(ended))
    return dataclasses.replace(
        ended, errors=finished.errors, map_reduce_levels=finished.map_reduce_levels
    )


async def _deliver_ending(
    run: RunContext, ended: EnsembleCompletedEvent, *, cancelled: bool = False
) -> asyncio.CancelledError | None:
    """Fold the run's last event and deliver it, even if the run is cancelled meanwhile;
    then wait for the sync listeners to catch up (a cancelled run gives them `_DRAIN_GRACE`
    seconds at most)."""
    run.events.record(ended)
    interrupted = None
    if run.events.wants(EnsembleCompletedEvent):
        interrupted = await finish_even_if_cancelled(run.events.deliver(ended))
    if run.events.draining:
        interrupted = await _drained(run, cancelled=cancelled) or interrupted
    return interrupted


_DRAIN_GRACE = 5.0
"""Seconds past the run's deadline that its sync listeners may take to finish."""


async def _drained(run: RunContext, *, cancelled: bool) -> asyncio.CancelledError | None:
    """Wait until the sync listeners have handled every event: without limit in a run with no
    deadline, else until shortly after it (or after the cancel, for a cancelled run). A
    (further) cancel stops the wait and is returned; either way they go on in their own
    thread."""
    now = asyncio.get_running_loop().time()
    if cancelled:
        limit: float | None = now + _DRAIN_GRACE
    elif run.deadline is not None:
        limit = max(run.deadline, now) + _DRAIN_GRACE
    else:
        limit = None
    try:
        async with asyncio.timeout_at(limit):
            await run.events.drain()
    except TimeoutError:
        run.events.abandon()
        logger.warning(
            "Run %s: its sync listeners had not caught up %gs after its end; they go on "
            "without the run",
            run.run_id,
            _DRAIN_GRACE,
        )
    except asyncio.CancelledError as error:
        run.events.abandon()
        return error
    return None


async def _exported(
    run: RunContext, exporter: TraceExporter | None, interrupted: asyncio.CancelledError | None
) -> asyncio.CancelledError | None:
    """Hand the run's trace to the exporter, if any, even if the run is cancelled meanwhile;
    return the cancellation to raise afterwards, if any."""
    if exporter is not None:
        trace = run.trace.result()
        interrupted = await finish_even_if_cancelled(export_trace(exporter, trace)) or interrupted
    return interrupted


def _final_output(plan: RunPlan, run: RunContext) -> TaskOutput[Any] | None:
    """The output `raw` comes from: a graph's last step, else the last declared task's."""
    graph = run.outputs.graph
    if graph is not None and graph.steps:
        return graph.steps[-1].output
    return _last_declared(plan, run)


def _loop_output(planned: PlannedTask, run: RunContext) -> TaskOutput[Any] | None:
    """The body output a loop's task stands for (the last that completed), if it is one."""
    runner = planned.steps[0] if planned.steps else None
    if not isinstance(runner, LoopRunner):
        return None
    return run.outputs.loops[runner.loop.name].last_output


def _last_declared(plan: RunPlan, run: RunContext) -> TaskOutput[Any] | None:
    """The output of the last task, in declared order, that completed."""
    for planned in reversed(plan.all_tasks()):
        output = _loop_output(planned, run) or run.outputs.get(planned.source)
        if output is not None:
            return output
    return None


async def _execute(plan: RunPlan, run: RunContext) -> ExitReason:
    """COMPLETED, TIMEOUT when the run's deadline expired, or the reason of the control-flow
    signal that ended it early (or the error that signal stands for); errors propagate."""
    try:
        if run.deadline is None:
            await plan.executor.execute(plan.tasks, run)
        else:
            async with asyncio.timeout_at(run.deadline) as expiry:
                await plan.executor.execute(plan.tasks, run)
    except TimeoutError:
        if run.deadline is None or not expiry.expired():
            raise
        logger.warning("Run %s reached its deadline; running tasks were cancelled", run.run_id)
        return ExitReason.TIMEOUT
    except BaseException as error:
        signal = find_signal(error)
        if signal is None:
            raise
        run.stop.request(signal)
    return _outcome(run)


def _outcome(run: RunContext) -> ExitReason:
    """COMPLETED, or why the run stopped early; raises the error a signal stands for."""
    signal = run.stop.signal
    if signal is None:
        return ExitReason.COMPLETED
    error = signal.as_error(run.outputs.completed())
    if error is not None:
        raise error from None
    logger.info("Run %s ended early: %s (%s)", run.run_id, signal, signal.exit_reason.value)
    return signal.exit_reason
