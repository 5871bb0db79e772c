"""`Ensemble`: a team of agents running a list of tasks under a workflow."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from agentensemble._checks import require_int
from agentensemble._sync import run_sync
from agentensemble._validation import (
    EnsembleShape,
    check_inputs,
    validate_flat,
    validate_phases,
)
from agentensemble.enums import ParallelErrorStrategy, Workflow
from agentensemble.errors import ValidationError
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._logging import get_logger
from agentensemble.execution._planning import PlannedTask, plan_tasks
from agentensemble.execution._synthesis import AgentSynthesizer, TemplateAgentSynthesizer
from agentensemble.models import ChatModel, RateLimit, RateLimitedChatModel, resolve_model
from agentensemble.observability._listeners import Callback, EventDispatcher, callback_listener
from agentensemble.observability._metrics import ExecutionMetrics
from agentensemble.options import RunOptions, check_length
from agentensemble.outputs import EnsembleOutput, TaskOutput
from agentensemble.phase import Phase
from agentensemble.task import Task
from agentensemble.workflows._dispatch import ParallelSettings, run_workflow
from agentensemble.workflows._phases import PlannedPhase, run_phases

__all__ = ["Ensemble"]

logger = get_logger("agentensemble.ensemble")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Ensemble:
    """Tasks, the model they share, and how to run them.

    Build it once and run it as often as you like, concurrently too: a run keeps all its
    state to itself. Configuration errors raise `ValidationError` before any model call.
    """

    tasks: Sequence[Task] = ()
    """The tasks, in order."""
    phases: Sequence[Phase] = ()
    """Named groups of tasks run as a DAG (instead of `tasks`)."""
    llm: Any = None
    """Model for tasks without an agent or task-level model: a `ChatModel`, a
    ``"provider:model"`` string or a LangChain chat model."""
    workflow: Workflow | None = None
    """How tasks run. When None: PARALLEL if a task's context names another task of the
    ensemble, else SEQUENTIAL (phases: SEQUENTIAL)."""
    parallel_error_strategy: ParallelErrorStrategy | None = ParallelErrorStrategy.FAIL_FAST
    """What a PARALLEL run does when a task fails."""
    max_concurrency: int | None = None
    """Most tasks in flight at once in a PARALLEL run (None: no limit)."""
    rate_limit: RateLimit | None = None
    """Limit on model calls of tasks using the ensemble `llm`: one bucket per run."""
    verbose: bool = False
    """Log prompts and answers at INFO level."""
    max_tool_output_length: int = -1
    """Characters of each tool result the model sees (-1: no limit)."""
    tool_log_truncate_length: int = 200
    """Characters of tool input/output in logs (-1: all, 0: none)."""
    agent_synthesizer: AgentSynthesizer | None = None
    """Makes agents for agentless tasks; `TemplateAgentSynthesizer` when None."""
    inputs: Mapping[str, str] = field(default_factory=dict)
    """Template inputs; `run(inputs=...)` values win over these."""
    listeners: Sequence[object] = ()
    """`EnsembleListener` objects (or any objects with some of its methods)."""
    on_task_start: Callback[Any] | None = None
    on_task_complete: Callback[Any] | None = None
    on_task_failed: Callback[Any] | None = None
    on_tool_call: Callback[Any] | None = None
    name: str | None = None
    """Optional name, used in logs."""
    _model: ChatModel | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if isinstance(self.tasks, Task):
            raise ValidationError("Ensemble tasks must be a list of tasks, got a single Task")
        set_(self, "tasks", tuple(self.tasks))
        set_(self, "phases", tuple(self.phases))
        set_(self, "listeners", tuple(self.listeners))
        set_(self, "inputs", check_inputs(self.inputs, "Ensemble inputs"))
        set_(self, "workflow", _check_workflow(self.workflow))
        check_length(self.max_tool_output_length, "Ensemble max_tool_output_length")
        check_length(self.tool_log_truncate_length, "Ensemble tool_log_truncate_length")
        _check_settings(self)
        if self.llm is not None:
            set_(self, "_model", resolve_model(self.llm, field="Ensemble llm"))

    def run(
        self, inputs: Mapping[str, str] | None = None, options: RunOptions | None = None
    ) -> EnsembleOutput:
        """Run the ensemble and wait for the result. Works inside a running event loop too."""
        return run_sync(self.arun(inputs, options))

    async def arun(
        self, inputs: Mapping[str, str] | None = None, options: RunOptions | None = None
    ) -> EnsembleOutput:
        """Run the ensemble.

        Raises `ValidationError` or `PromptTemplateError` before any model call, and
        `TaskExecutionError` (carrying every completed output) when a task fails.
        """
        started = time.perf_counter()
        run_inputs = {**self.inputs, **check_inputs(inputs, "run inputs")}
        if self.tasks and self.phases:
            raise ValidationError(
                "Cannot mix tasks and phases on the same Ensemble. Use flat tasks for simple "
                "pipelines, or phases for named workstreams with parallel execution -- but not "
                "both on the same ensemble."
            )
        if self.phases:
            return await self._run_phases(run_inputs, options, started)
        tasks, workflow = validate_flat(self.tasks, self.workflow, self._shape())
        if self.workflow is None:
            logger.info("Workflow inferred: %s", workflow.value)
        plan = await self._plan(tasks, run_inputs)
        ctx = self._context(options or RunOptions())
        logger.info(
            "Ensemble run %s starting | %d tasks | %s", ctx.ensemble_id, len(plan), workflow.value
        )
        completed = await run_workflow(plan, workflow, ctx, self._parallel_settings())
        return _ensemble_output(completed, started)

    async def _run_phases(
        self, inputs: Mapping[str, str], options: RunOptions | None, started: float
    ) -> EnsembleOutput:
        shapes = validate_phases(self.phases, self.workflow, self._shape())
        planned = [
            PlannedPhase(shape.phase, await self._plan(shape.phase.tasks, inputs), shape.workflow)
            for shape in shapes
        ]
        ctx = self._context(options or RunOptions())
        logger.info("Ensemble run %s starting | %d phases", ctx.ensemble_id, len(planned))
        results = await run_phases(planned, ctx, self._parallel_settings())
        return _ensemble_output(results.outputs, started, phase_outputs=results.by_phase)

    async def _plan(
        self, tasks: Sequence[Task], inputs: Mapping[str, str]
    ) -> tuple[PlannedTask, ...]:
        run_model = self._model
        if self.rate_limit is not None and run_model is not None:
            run_model = RateLimitedChatModel(run_model, self.rate_limit)  # one bucket per run
        return await plan_tasks(
            tasks,
            inputs,
            llm=run_model,
            raw_llm=self._model,
            synthesizer=self.agent_synthesizer or TemplateAgentSynthesizer(),
        )

    def _shape(self) -> EnsembleShape:
        return EnsembleShape(
            llm=self._model,
            rate_limit=self.rate_limit,
            parallel_error_strategy=self.parallel_error_strategy,
        )

    def _parallel_settings(self) -> ParallelSettings:
        return ParallelSettings(
            strategy=self.parallel_error_strategy or ParallelErrorStrategy.FAIL_FAST,
            max_concurrency=self.max_concurrency,
        )

    def _context(self, options: RunOptions) -> ExecutionContext:
        import uuid

        callbacks = callback_listener(
            on_task_start=self.on_task_start,
            on_task_complete=self.on_task_complete,
            on_task_failed=self.on_task_failed,
            on_tool_call=self.on_tool_call,
        )
        listeners = [*self.listeners, *([callbacks] if callbacks else [])]
        return ExecutionContext(
            ensemble_id=str(uuid.uuid4()),
            events=EventDispatcher(listeners),
            verbose=self.verbose,
            max_tool_output_length=_pick(
                options.max_tool_output_length, self.max_tool_output_length
            ),
            tool_log_truncate_length=_pick(
                options.tool_log_truncate_length, self.tool_log_truncate_length
            ),
        )


def _pick(override: int | None, default: int) -> int:
    return default if override is None else override


def _check_workflow(workflow: object) -> Workflow | None:
    if workflow is None or isinstance(workflow, Workflow):
        return workflow
    if isinstance(workflow, str) and workflow.upper() in Workflow.__members__:
        return Workflow[workflow.upper()]
    names = ", ".join(Workflow.__members__)
    raise ValidationError(f"Ensemble workflow must be one of [{names}], got: {workflow!r}")


def _check_settings(ensemble: Ensemble) -> None:
    if isinstance(ensemble.phases, Phase):
        raise ValidationError("Ensemble phases must be a list of phases, got a single Phase")
    if ensemble.max_concurrency is not None:
        require_int(ensemble.max_concurrency, "Ensemble max_concurrency")
        if ensemble.max_concurrency <= 0:
            raise ValidationError(
                f"Ensemble max_concurrency must be > 0 when set, got: {ensemble.max_concurrency}"
            )
    strategy = ensemble.parallel_error_strategy
    if strategy is not None and not isinstance(strategy, ParallelErrorStrategy):
        raise ValidationError(
            f"Ensemble parallel_error_strategy must be a ParallelErrorStrategy, got: {strategy!r}"
        )
    limit = ensemble.rate_limit
    if limit is not None and not isinstance(limit, RateLimit):
        raise ValidationError(f"Ensemble rate_limit must be a RateLimit, got: {limit!r}")


def _ensemble_output(
    completed: Mapping[Task, TaskOutput],
    started: float,
    *,
    phase_outputs: Mapping[str, tuple[TaskOutput, ...]] | None = None,
) -> EnsembleOutput:
    outputs = tuple(completed.values())
    return EnsembleOutput(
        task_outputs=outputs,
        total_duration=timedelta(seconds=time.perf_counter() - started),
        metrics=ExecutionMetrics.of(output.metrics for output in outputs),
        phase_outputs=dict(phase_outputs or {}),
        _by_task=dict(completed),
    )
