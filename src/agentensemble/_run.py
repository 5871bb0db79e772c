"""One run from plan to `EnsembleOutput`: events, workflows, the trace and its export."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agentensemble._logging import get_logger
from agentensemble.agent import Agent
from agentensemble.enums import ExitReason, Workflow
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._planning import PlannedTask
from agentensemble.execution._run_trace import (
    RunRecord,
    build_trace,
    completed_outputs_of,
    errors_of,
    export_trace,
)
from agentensemble.observability._events import EnsembleCompletedEvent, EnsembleStartedEvent
from agentensemble.observability._exporters import TraceExporter
from agentensemble.outputs import EnsembleOutput, TaskOutput
from agentensemble.task import Task
from agentensemble.workflows._dispatch import ParallelSettings, run_workflow
from agentensemble.workflows._phases import PlannedPhase, run_phases

__all__ = ["RunPlan", "execute_run"]

logger = get_logger("agentensemble.ensemble")


@dataclass(frozen=True, slots=True, kw_only=True)
class RunPlan:
    """A validated, fully planned run."""

    name: str | None
    workflow: Workflow | None
    """The workflow of a flat run; None for a run with phases."""
    tasks: tuple[PlannedTask, ...]
    """Every planned task (of every phase)."""
    phases: tuple[PlannedPhase, ...] = ()
    inputs: Mapping[str, str]
    settings: ParallelSettings

    @property
    def workflow_label(self) -> str:
        """``SEQUENTIAL``, ``PARALLEL`` or ``PHASES``."""
        return self.workflow.value if self.workflow else "PHASES"

    def agents(self) -> list[Agent]:
        """The distinct agents, in order of first appearance."""
        seen: dict[int, Agent] = {}
        for planned in self.tasks:
            if planned.agent is not None:
                seen.setdefault(id(planned.agent), planned.agent)
        return list(seen.values())


async def execute_run(
    plan: RunPlan, ctx: ExecutionContext, exporter: TraceExporter | None
) -> EnsembleOutput:
    """Run the plan; the trace is built and exported whether the run succeeds, fails or is
    cancelled (exit reason ERROR for the last two)."""
    record = RunRecord(
        ensemble_id=ctx.ensemble_id,
        workflow=plan.workflow_label,
        capture_mode=ctx.capture_mode,
        started_at=datetime.now(UTC),
        inputs=plan.inputs,
        agents=plan.agents(),
    )
    started = time.perf_counter()
    logger.info(
        "Ensemble run %s starting | %d tasks | %s",
        ctx.ensemble_id,
        len(plan.tasks),
        plan.workflow_label,
    )
    if ctx.events.wants("on_ensemble_started"):
        await ctx.events.emit(
            EnsembleStartedEvent(
                ensemble_id=ctx.ensemble_id,
                workflow=plan.workflow_label,
                total_tasks=len(plan.tasks),
                name=plan.name,
            )
        )
    try:
        completed, by_phase = await _run_workflows(plan, ctx)
    except (Exception, asyncio.CancelledError) as error:  # not KeyboardInterrupt/SystemExit
        duration = timedelta(seconds=time.perf_counter() - started)
        trace = build_trace(
            record,
            completed_outputs_of(error),
            duration=duration,
            exit_reason=ExitReason.ERROR.value,
            errors=errors_of(error),
        )
        await _finish(ctx, duration, ExitReason.ERROR, error)
        await export_trace(exporter, trace)
        raise
    duration = timedelta(seconds=time.perf_counter() - started)
    outputs = tuple(completed.values())
    trace = build_trace(record, outputs, duration=duration, exit_reason=ExitReason.COMPLETED)
    result = EnsembleOutput(
        task_outputs=outputs,
        total_duration=duration,
        metrics=trace.metrics,
        phase_outputs=by_phase,
        trace=trace,
        _by_task=completed,
    )
    await _finish(ctx, duration, ExitReason.COMPLETED, None)
    await export_trace(exporter, trace)
    return result


async def _run_workflows(
    plan: RunPlan, ctx: ExecutionContext
) -> tuple[dict[Task, TaskOutput], dict[str, tuple[TaskOutput, ...]]]:
    if plan.phases:
        results = await run_phases(plan.phases, ctx, plan.settings)
        return results.outputs, results.by_phase
    if plan.workflow is None:  # a flat plan always has a workflow
        raise AssertionError("flat run plan without a workflow")
    return await run_workflow(plan.tasks, plan.workflow, ctx, plan.settings), {}


async def _finish(
    ctx: ExecutionContext, duration: timedelta, reason: ExitReason, error: BaseException | None
) -> None:
    if ctx.events.wants("on_ensemble_completed"):
        await ctx.events.emit(
            EnsembleCompletedEvent(
                ensemble_id=ctx.ensemble_id,
                duration=duration,
                exit_reason=reason.value,
                error=error,
            )
        )
