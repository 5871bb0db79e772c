"""`Ensemble`: a team of agents running a list of tasks under a workflow."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentensemble._checks import as_tuple, require_int
from agentensemble._inputs import check_inputs
from agentensemble._logging import get_logger
from agentensemble._sync import run_sync
from agentensemble.enums import ParallelErrorStrategy, Workflow
from agentensemble.errors import ValidationError
from agentensemble.execution._synthesis import AgentSynthesizer
from agentensemble.models import ChatModel, RateLimit, resolve_model
from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._cost import CostConfiguration
from agentensemble.observability._exporters import TraceExporter
from agentensemble.observability._listeners import Callback
from agentensemble.options import RunOptions, check_length
from agentensemble.phase import Phase
from agentensemble.task import Task

if TYPE_CHECKING:
    from agentensemble._run import RunPlan
    from agentensemble._validation import EnsembleShape
    from agentensemble.execution._context import ExecutionContext
    from agentensemble.execution._planning import PlannedTask
    from agentensemble.outputs import EnsembleOutput
    from agentensemble.workflows._dispatch import ParallelSettings

__all__ = ["Ensemble"]

logger = get_logger("agentensemble.ensemble")

_AUTO_EXPORT_DIRECTORY = "traces"


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
    """Show live progress on the console and log prompts and answers."""
    max_tool_output_length: int = -1
    """Characters of each tool result the model sees (-1: no limit)."""
    tool_log_truncate_length: int = 200
    """Characters of tool input/output in logs (-1: all, 0: none)."""
    agent_synthesizer: AgentSynthesizer | None = None
    """Makes agents for agentless tasks; `TemplateAgentSynthesizer` when None."""
    inputs: Mapping[str, str] = field(default_factory=dict)
    """Template inputs; `run(inputs=...)` values win over these."""
    capture_mode: CaptureMode | None = None
    """How much traces record; see `CaptureMode` (``AGENTENSEMBLE_CAPTURE_MODE`` applies
    when this is None or OFF)."""
    cost_configuration: CostConfiguration | None = None
    """Token prices, for cost estimates in metrics and traces."""
    trace_exporter: TraceExporter | None = None
    """Receives every run's trace (FULL capture exports to ``./traces/`` when None)."""
    listeners: Sequence[object] = ()
    """`EnsembleListener` objects (or any objects with some of its methods)."""
    on_task_start: Callback[Any] | None = None
    on_task_complete: Callback[Any] | None = None
    on_task_failed: Callback[Any] | None = None
    on_tool_call: Callback[Any] | None = None
    on_token: Callback[Any] | None = None
    on_delegation_started: Callback[Any] | None = None
    on_delegation_completed: Callback[Any] | None = None
    on_delegation_failed: Callback[Any] | None = None
    name: str | None = None
    """Optional name, used in logs, traces and spans."""
    _model: ChatModel | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if isinstance(self.tasks, Task):
            raise ValidationError("Ensemble tasks must be a list of tasks, got a single Task")
        set_(self, "tasks", as_tuple(self.tasks, "Ensemble tasks"))
        set_(self, "phases", as_tuple(self.phases, "Ensemble phases"))
        set_(self, "listeners", as_tuple(self.listeners, "Ensemble listeners"))
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
        `TaskExecutionError` or `ParallelExecutionError` (carrying every completed output)
        when tasks fail.
        """
        from agentensemble._run import execute_run  # the engine loads on first run

        run_inputs = {**self.inputs, **check_inputs(inputs, "run inputs")}
        plan = await self._prepare(run_inputs)
        ctx = self._context(options or RunOptions())
        return await execute_run(plan, ctx, self._exporter(ctx.capture_mode))

    async def _prepare(self, inputs: Mapping[str, str]) -> RunPlan:
        """Validate, resolve templates and plan every task: all before any model call."""
        from agentensemble._run import RunPlan
        from agentensemble._validation import validate_flat

        if self.tasks and self.phases:
            raise ValidationError(
                "Cannot mix tasks and phases on the same Ensemble. Use flat tasks for simple "
                "pipelines, or phases for named workstreams with parallel execution -- but not "
                "both on the same ensemble."
            )
        if self.phases:
            return await self._prepare_phases(inputs)
        tasks, workflow = validate_flat(self.tasks, self.workflow, self._shape())
        if self.workflow is None:
            logger.info("Workflow inferred: %s", workflow.value)
        return RunPlan(
            name=self.name,
            workflow=workflow,
            tasks=await self._plan(tasks, inputs),
            inputs=inputs,
            settings=self._parallel_settings(),
        )

    async def _prepare_phases(self, inputs: Mapping[str, str]) -> RunPlan:
        from agentensemble._run import RunPlan
        from agentensemble._validation import validate_phases
        from agentensemble.workflows._phases import PlannedPhase

        shapes = validate_phases(self.phases, self.workflow, self._shape())
        total = sum(len(shape.phase.tasks) for shape in shapes)
        phases: list[PlannedPhase] = []
        for shape in shapes:
            first = 1 + sum(len(item.plan) for item in phases)
            planned = await self._plan(shape.phase.tasks, inputs, first_index=first, total=total)
            phases.append(PlannedPhase(shape.phase, planned, shape.workflow))
        return RunPlan(
            name=self.name,
            workflow=None,
            tasks=tuple(task for phase in phases for task in phase.plan),
            phases=tuple(phases),
            inputs=inputs,
            settings=self._parallel_settings(),
        )

    async def _plan(
        self, tasks: Sequence[Task], inputs: Mapping[str, str], **numbering: int
    ) -> tuple[PlannedTask, ...]:
        from agentensemble.execution._planning import plan_tasks
        from agentensemble.execution._synthesis import TemplateAgentSynthesizer
        from agentensemble.models import RateLimitedChatModel

        run_model = self._model
        if self.rate_limit is not None and run_model is not None:
            run_model = RateLimitedChatModel(run_model, self.rate_limit)  # one bucket per run
        return await plan_tasks(
            tasks,
            inputs,
            llm=run_model,
            raw_llm=self._model,
            synthesizer=self.agent_synthesizer or TemplateAgentSynthesizer(),
            **numbering,
        )

    def _shape(self) -> EnsembleShape:
        from agentensemble._validation import EnsembleShape

        return EnsembleShape(
            llm=self._model,
            rate_limit=self.rate_limit,
            parallel_error_strategy=self.parallel_error_strategy,
        )

    def _parallel_settings(self) -> ParallelSettings:
        from agentensemble.workflows._dispatch import ParallelSettings

        return ParallelSettings(
            strategy=self.parallel_error_strategy or ParallelErrorStrategy.FAIL_FAST,
            max_concurrency=self.max_concurrency,
        )

    def _exporter(self, capture_mode: CaptureMode) -> TraceExporter | None:
        if self.trace_exporter is None and capture_mode is CaptureMode.FULL:
            from agentensemble.observability._exporters import JsonTraceExporter

            return JsonTraceExporter(_AUTO_EXPORT_DIRECTORY)
        return self.trace_exporter

    def _context(self, options: RunOptions) -> ExecutionContext:
        import uuid

        from agentensemble.execution._context import ExecutionContext
        from agentensemble.observability._capture import resolve_capture_mode
        from agentensemble.observability._listeners import EventDispatcher

        return ExecutionContext(
            ensemble_id=str(uuid.uuid4()),
            events=EventDispatcher(self._listeners()),
            verbose=self.verbose,
            max_tool_output_length=_pick(
                options.max_tool_output_length, self.max_tool_output_length
            ),
            tool_log_truncate_length=_pick(
                options.tool_log_truncate_length, self.tool_log_truncate_length
            ),
            capture_mode=resolve_capture_mode(self.capture_mode),
            cost_configuration=self.cost_configuration,
        )

    def _listeners(self) -> list[object]:
        from agentensemble.observability._listeners import callback_listener

        callbacks = callback_listener(**{name: getattr(self, name) for name in _CALLBACKS})
        listeners: list[object] = [*self.listeners, *([callbacks] if callbacks else [])]
        if self.verbose:
            from agentensemble.observability._console import ConsoleProgress

            listeners.append(ConsoleProgress())
        return listeners


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
    _check_type(ensemble.parallel_error_strategy, ParallelErrorStrategy, "parallel_error_strategy")
    _check_type(ensemble.rate_limit, RateLimit, "rate_limit")
    _check_type(ensemble.capture_mode, CaptureMode, "capture_mode")
    _check_type(ensemble.cost_configuration, CostConfiguration, "cost_configuration")
    synthesizer = ensemble.agent_synthesizer
    if synthesizer is not None and not isinstance(synthesizer, AgentSynthesizer):
        raise ValidationError(
            "Ensemble agent_synthesizer must have an async synthesize(description, llm) "
            f"method, got: {synthesizer!r}"
        )
    for callback in _CALLBACKS:
        value = getattr(ensemble, callback)
        if value is not None and not callable(value):
            raise ValidationError(f"Ensemble {callback} must be callable, got: {value!r}")
    exporter = ensemble.trace_exporter
    if exporter is not None and not isinstance(exporter, TraceExporter):
        raise ValidationError(
            f"Ensemble trace_exporter must have an export(trace) method, got: {exporter!r}"
        )


_CALLBACKS = (
    "on_task_start",
    "on_task_complete",
    "on_task_failed",
    "on_tool_call",
    "on_token",
    "on_delegation_started",
    "on_delegation_completed",
    "on_delegation_failed",
)


def _check_type(value: object, expected: type, field_name: str) -> None:
    if value is not None and not isinstance(value, expected):
        raise ValidationError(
            f"Ensemble {field_name} must be a {expected.__name__}, got: {value!r}"
        )
