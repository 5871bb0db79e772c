"""`Ensemble`: a team of agents running a list of tasks under a workflow."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from agentensemble._sync import run_sync
from agentensemble._validation import check_inputs, validate_tasks
from agentensemble.enums import Workflow
from agentensemble.errors import ValidationError
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._logging import get_logger
from agentensemble.execution._planning import plan_tasks
from agentensemble.execution._synthesis import AgentSynthesizer, TemplateAgentSynthesizer
from agentensemble.models import ChatModel, resolve_model
from agentensemble.observability._listeners import Callback, EventDispatcher, callback_listener
from agentensemble.observability._metrics import ExecutionMetrics
from agentensemble.options import RunOptions, check_length
from agentensemble.outputs import EnsembleOutput, TaskOutput
from agentensemble.task import Task
from agentensemble.workflows._sequential import run_sequential

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
    llm: Any = None
    """Model for tasks without an agent or task-level model: a `ChatModel`, a
    ``"provider:model"`` string or a LangChain chat model."""
    workflow: Workflow | None = None
    """How tasks run; SEQUENTIAL when None."""
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
        set_(self, "listeners", tuple(self.listeners))
        set_(self, "inputs", check_inputs(self.inputs, "Ensemble inputs"))
        set_(self, "workflow", _check_workflow(self.workflow))
        check_length(self.max_tool_output_length, "Ensemble max_tool_output_length")
        check_length(self.tool_log_truncate_length, "Ensemble tool_log_truncate_length")
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
        workflow = self.workflow or Workflow.SEQUENTIAL
        tasks = validate_tasks(self.tasks, workflow=workflow, llm=self._model)
        plan = await plan_tasks(
            tasks,
            run_inputs,
            llm=self._model,
            synthesizer=self.agent_synthesizer or TemplateAgentSynthesizer(),
        )
        ctx = self._context(options or RunOptions())
        logger.info(
            "Ensemble run %s starting | %d tasks | %s", ctx.ensemble_id, len(plan), workflow.value
        )
        completed = await run_sequential(plan, ctx)
        return _ensemble_output(completed, started)

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


def _ensemble_output(completed: Mapping[Task, TaskOutput], started: float) -> EnsembleOutput:
    outputs = tuple(completed.values())
    return EnsembleOutput(
        task_outputs=outputs,
        total_duration=timedelta(seconds=time.perf_counter() - started),
        metrics=ExecutionMetrics.of(output.metrics for output in outputs),
        _by_task=dict(completed),
    )
