"""`TaskRecorder`: everything one task execution reports, built in one place.

The task steps and the agent loop tell the recorder what happened (a model call started, a
tool call finished...); the recorder emits the events, writes the logs, keeps the trace
entries and the metrics, and finally builds the `TaskOutput`. Control flow never builds an
event or a trace record itself.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from agentensemble._logging import get_logger
from agentensemble.execution._recording import capture_messages, parse_input
from agentensemble.models import AssistantMessage, ChatResponse, Message, ToolCall, model_name_of
from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._events import (
    DelegationCompletedEvent,
    DelegationFailedEvent,
    DelegationStartedEvent,
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    MemoryOperationEvent,
    ReviewDecidedEvent,
    ReviewRequestedEvent,
    ReviewTimedOutEvent,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskInputEvent,
    TaskStartEvent,
    TokenEvent,
    ToolCallEvent,
)
from agentensemble.observability._metrics import UNKNOWN, TaskMetrics, add_known
from agentensemble.observability._trace import (
    DelegationTrace,
    LlmInteraction,
    MemoryOperationTrace,
    PromptTrace,
    TaskTrace,
    ToolCallTrace,
)
from agentensemble.outputs import TaskOutput
from agentensemble.tools import ToolResult

if TYPE_CHECKING:
    from agentensemble.delegation import DelegationRequest, DelegationResponse
    from agentensemble.execution._context import TaskContext
    from agentensemble.review import ReviewDecision, ReviewRequest

__all__ = ["TaskRecorder", "Turn", "truncate_for_log"]

logger = get_logger("agentensemble.agent")
task_logger = get_logger("agentensemble.task")

ResponseType = Literal["TOOL_CALLS", "FINAL_ANSWER"]

_WRITES = frozenset({"store", "evict", "clear"})
"""Memory operations that are not retrievals (not in `memory_retrieval_time`)."""


@dataclass(frozen=True, slots=True)
class Turn:
    """One model call: what was sent, what came back, and when."""

    index: int
    sent: tuple[Message, ...]
    response: ChatResponse
    started_at: datetime
    seconds: float

    @property
    def message(self) -> AssistantMessage:
        """The model's answer."""
        return self.response.message


class TaskRecorder:
    """Events, logs, trace entries and metrics of one task execution."""

    __slots__ = (
        "_started",
        "delegations",
        "events",
        "input_tokens",
        "interactions",
        "llm_calls",
        "llm_seconds",
        "memory_operations",
        "memory_seconds",
        "model_name",
        "output_tokens",
        "prompt_seconds",
        "prompts",
        "role",
        "started_at",
        "task",
        "tool_calls",
        "tool_seconds",
    )

    def __init__(self, task: TaskContext) -> None:
        self.task = task
        self.events = task.run.events
        planned = task.planned
        self.role = planned.role
        self.started_at = datetime.now(UTC)
        self._started = time.perf_counter()
        self.model_name = model_name_of(planned.agent.llm) if planned.agent else ""
        self.prompts: PromptTrace | None = None
        self.prompt_seconds = 0.0
        self.llm_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.llm_seconds = 0.0
        self.tool_calls = 0
        self.tool_seconds = 0.0
        self.interactions: list[LlmInteraction] = []
        self.delegations: list[DelegationTrace] = []
        self.memory_operations: list[MemoryOperationTrace] = []
        self.memory_seconds = 0.0

    # ---- lifecycle -------------------------------------------------------------------------

    async def task_started(self) -> None:
        planned = self.task.planned
        task_logger.info(
            "Task %d/%d starting | Description: %s | Agent: %s",
            planned.index,
            planned.total,
            planned.description[:80],
            self.role,
        )
        if self.events.wants("on_task_start"):
            await self.events.emit(TaskStartEvent(total_tasks=planned.total, **self._task_ids()))

    async def task_completed(self, output: TaskOutput[Any]) -> None:
        planned = self.task.planned
        task_logger.info(
            "Task %d/%d completed | Duration: %s | Tool calls: %d",
            planned.index,
            planned.total,
            output.duration,
            output.tool_call_count,
        )
        if self.events.wants("on_task_complete"):
            await self.events.emit(
                TaskCompleteEvent(
                    task_output=output,
                    duration=output.duration,
                    total_tasks=planned.total,
                    **self._task_ids(),
                )
            )

    async def task_failed(self, error: BaseException) -> None:
        if self.events.wants("on_task_failed"):
            await self.events.emit(
                TaskFailedEvent(
                    cause=error,
                    duration=self._elapsed(),
                    total_tasks=self.task.planned.total,
                    **self._task_ids(),
                )
            )

    def _task_ids(self) -> dict[str, Any]:
        task = self.task
        return {
            "task_description": task.planned.description,
            "agent_role": self.role,
            "task_index": task.planned.index,
            "ensemble_id": task.run.run_id,
            "task_id": task.task_id,
            "parent_task_id": task.parent_task_id,
        }

    def _elapsed(self) -> timedelta:
        return timedelta(seconds=time.perf_counter() - self._started)

    # ---- the agent loop --------------------------------------------------------------------

    async def prompts_ready(
        self, prompts: PromptTrace, seconds: float, tools: tuple[str, ...]
    ) -> None:
        self.prompts, self.prompt_seconds = prompts, seconds
        if self.task.run.verbose or self._agent_verbose():
            logger.info("System prompt:\n%s", prompts.system)
            logger.info("User prompt:\n%s", prompts.user)
        else:
            logger.debug("System prompt (%d chars):\n%s", len(prompts.system), prompts.system)
            logger.debug("User prompt (%d chars):\n%s", len(prompts.user), prompts.user)
        if self.events.wants("on_task_input"):
            agent = self.task.planned.agent
            await self.events.emit(
                TaskInputEvent(
                    expected_output=self.task.planned.expected_output,
                    agent_goal=agent.goal if agent else "",
                    agent_background=agent.background if agent else None,
                    tool_names=tools,
                    system_prompt=prompts.system,
                    user_prompt=prompts.user,
                    **self._task_ids(),
                )
            )

    def _agent_verbose(self) -> bool:
        agent = self.task.planned.agent
        return agent is not None and agent.verbose

    async def model_call_started(self, index: int, sent: tuple[Message, ...]) -> None:
        if self.events.wants("on_llm_iteration_started"):
            await self.events.emit(
                LlmIterationStartedEvent(
                    iteration_index=index,
                    messages=sent,
                    model_name=self.model_name,
                    **self._task_ids(),
                )
            )

    async def token(self, text: str) -> None:
        await self.events.emit(TokenEvent(token=text, **self._task_ids()))

    async def model_call_completed(self, turn: Turn, response_type: ResponseType) -> None:
        usage = turn.response.usage
        self.llm_calls += 1
        self.llm_seconds += turn.seconds
        self.input_tokens = add_known(self.input_tokens, usage.input_tokens if usage else None)
        self.output_tokens = add_known(self.output_tokens, usage.output_tokens if usage else None)
        if self.events.wants("on_llm_iteration_completed"):
            await self.events.emit(
                LlmIterationCompletedEvent(
                    iteration_index=turn.index,
                    response_type=response_type,
                    response_text=turn.message.text,
                    tool_requests=turn.message.tool_calls,
                    input_tokens=_known(usage.input_tokens if usage else None),
                    output_tokens=_known(usage.output_tokens if usage else None),
                    latency=timedelta(seconds=turn.seconds),
                    model_name=self.model_name,
                    **self._task_ids(),
                )
            )

    async def tool_call_completed(
        self, call: ToolCall, result: ToolResult, started_at: datetime, seconds: float
    ) -> ToolCallTrace:
        self.tool_calls += 1
        self.tool_seconds += seconds
        self._log_tool_call(call, result, seconds)
        if self.events.wants("on_tool_call"):
            await self.events.emit(
                ToolCallEvent(
                    tool_name=call.name,
                    tool_arguments=call.arguments,
                    tool_result=result.text_for_model,
                    structured_result=result.structured_output,
                    agent_role=self.role,
                    duration=timedelta(seconds=seconds),
                    task_index=self.task.planned.index,
                    outcome="SUCCESS" if result.is_success else "FAILURE",
                    tool_call_id=call.id,
                    ensemble_id=self.task.run.run_id,
                    task_id=self.task.task_id,
                    parent_task_id=self.task.parent_task_id,
                )
            )
        return ToolCallTrace(
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            parsed_input=self._parsed_input(call),
            result=result.text_for_model,
            structured_output=result.structured_output,
            started_at=started_at,
            completed_at=started_at + timedelta(seconds=seconds),
            duration=timedelta(seconds=seconds),
            outcome="SUCCESS" if result.is_success else "FAILURE",
        )

    def tool_call_skipped(self, call: ToolCall, stop_text: str) -> ToolCallTrace:
        """A call refused because the iteration limit was reached."""
        at = datetime.now(UTC)
        return ToolCallTrace(
            tool_call_id=call.id,
            tool_name=call.name,
            arguments=call.arguments,
            parsed_input=self._parsed_input(call),
            result=stop_text,
            started_at=at,
            completed_at=at,
            duration=timedelta(0),
            outcome="SKIPPED_MAX_ITERATIONS",
        )

    def _parsed_input(self, call: ToolCall) -> dict[str, Any] | None:
        return (
            parse_input(call.arguments) if self.task.run.capture_mode is CaptureMode.FULL else None
        )

    def _log_tool_call(self, call: ToolCall, result: ToolResult, seconds: float) -> None:
        limit = self.task.run.tool_log_truncate_length
        arguments = truncate_for_log(call.arguments, limit)
        shown = truncate_for_log(result.text_for_model, limit)
        milliseconds = round(seconds * 1000)
        if result.is_success:
            logger.info(
                "[%s] Tool call: %s(%s) -> %s [%dms]",
                self.role,
                call.name,
                arguments,
                shown,
                milliseconds,
            )
        else:
            logger.warning(
                "[%s] Tool error: %s(%s) -> %s [%dms]",
                self.role,
                call.name,
                arguments,
                shown,
                milliseconds,
            )

    def interaction(
        self, turn: Turn, response_type: ResponseType, tool_calls: tuple[ToolCallTrace, ...]
    ) -> None:
        """The trace entry of one model call and the tool calls it led to."""
        usage = turn.response.usage
        captured = (
            capture_messages(turn.sent) if self.task.run.capture_mode is not CaptureMode.OFF else ()
        )
        self.interactions.append(
            LlmInteraction(
                iteration_index=turn.index,
                started_at=turn.started_at,
                completed_at=turn.started_at + timedelta(seconds=turn.seconds),
                latency=timedelta(seconds=turn.seconds),
                input_tokens=_known(usage.input_tokens if usage else None),
                output_tokens=_known(usage.output_tokens if usage else None),
                response_type=response_type,
                # a final answer's text is the task's final_output: one copy, not two
                response_text=None if response_type == "FINAL_ANSWER" else turn.message.text,
                tool_calls=tool_calls,
                messages=captured,
            )
        )

    # ---- delegation ----------------------------------------------------------------------------

    async def delegation_started(
        self,
        delegation_id: str,
        request: DelegationRequest,
        worker_role: str,
        depth: int,
        tool_call_id: str | None,
    ) -> None:
        logger.info(
            "[%s] Delegating to '%s' (depth %d): %s",
            self.role,
            worker_role,
            depth,
            request.task_description[:80],
        )
        if self.events.wants("on_delegation_started"):
            await self.events.emit(
                DelegationStartedEvent(
                    worker_role=worker_role,
                    task_description=request.task_description,
                    delegation_depth=depth,
                    request=request,
                    tool_call_id=tool_call_id,
                    **self._delegation_ids(delegation_id),
                )
            )

    async def delegation_completed(
        self,
        delegation_id: str,
        request: DelegationRequest,
        response: DelegationResponse,
        output: TaskOutput[Any],
    ) -> None:
        self._trace_delegation(delegation_id, request, response, output.trace)
        if self.events.wants("on_delegation_completed"):
            await self.events.emit(
                DelegationCompletedEvent(
                    worker_role=response.worker_role,
                    response=response,
                    duration=response.duration,
                    **self._delegation_ids(delegation_id),
                )
            )

    async def delegation_failed(
        self,
        delegation_id: str,
        request: DelegationRequest,
        response: DelegationResponse,
        cause: BaseException | None,
    ) -> None:
        """A refused attempt (`cause` None) or a worker that failed."""
        reason = response.errors[0] if response.errors else ""
        if cause is None:
            logger.info(
                "[%s] Delegation to '%s' refused: %s", self.role, response.worker_role, reason
            )
        else:
            logger.warning("[%s] %s", self.role, reason)
        self._trace_delegation(delegation_id, request, response, None)
        if self.events.wants("on_delegation_failed"):
            await self.events.emit(
                DelegationFailedEvent(
                    worker_role=response.worker_role,
                    failure_reason=reason,
                    cause=cause,
                    response=response,
                    duration=response.duration,
                    **self._delegation_ids(delegation_id),
                )
            )

    def _delegation_ids(self, delegation_id: str) -> dict[str, Any]:
        return {
            "delegation_id": delegation_id,
            "delegating_agent_role": self.role,
            "ensemble_id": self.task.run.run_id,
            "task_id": self.task.task_id,
        }

    def _trace_delegation(
        self,
        delegation_id: str,
        request: DelegationRequest,
        response: DelegationResponse,
        worker_trace: TaskTrace | None,
    ) -> None:
        self.delegations.append(
            DelegationTrace(
                delegation_id=delegation_id,
                worker_role=response.worker_role,
                task_description=request.task_description,
                status=response.status.value,
                raw_output=response.raw_output,
                duration=response.duration,
                worker_trace=worker_trace,
                error=response.errors[0] if response.errors else None,
            )
        )

    # ---- memory ----------------------------------------------------------------------------

    async def memory_operation(
        self, operation: str, scope: str | None, entry_count: int, started: float
    ) -> None:
        """A memory read or write that began at `started` (``time.perf_counter()``)."""
        seconds = time.perf_counter() - started
        if operation not in _WRITES:
            self.memory_seconds += seconds
        duration = timedelta(seconds=seconds)
        completed_at = datetime.now(UTC)
        self.memory_operations.append(
            MemoryOperationTrace(
                operation=operation,
                scope=scope,
                entry_count=entry_count,
                started_at=completed_at - duration,
                duration=duration,
            )
        )
        logger.debug(
            "[%s] Memory %s%s: %d entries",
            self.role,
            operation,
            f" {scope}" if scope else "",
            entry_count,
        )
        if self.events.wants("on_memory_operation"):
            await self.events.emit(
                MemoryOperationEvent(
                    operation=operation,
                    scope=scope,
                    entry_count=entry_count,
                    duration=duration,
                    agent_role=self.role,
                    task_index=self.task.planned.index,
                    ensemble_id=self.task.run.run_id,
                    task_id=self.task.task_id,
                    parent_task_id=self.task.parent_task_id,
                    timestamp=completed_at,
                )
            )

    # ---- reviews ---------------------------------------------------------------------------

    async def review_requested(self, request: ReviewRequest) -> None:
        task_logger.info(
            "Review %s requested (%s%s)",
            request.review_id[:8],
            request.timing.value,
            f", tool '{request.tool_name}'" if request.tool_name else "",
        )
        if self.events.wants("on_review_requested"):
            await self.events.emit(
                ReviewRequestedEvent(
                    review_id=request.review_id,
                    task_description=request.task_description,
                    task_output=request.task_output,
                    timing=request.timing.value,
                    timeout=request.timeout,
                    on_timeout=request.on_timeout.value,
                    prompt=request.prompt,
                    required_role=request.required_role,
                    tool_name=request.tool_name,
                    **self._review_ids(request),
                )
            )

    async def review_decided(
        self, request: ReviewRequest, decision: ReviewDecision, seconds: float
    ) -> None:
        task_logger.info("Review %s decided: %s", request.review_id[:8], decision.kind)
        if self.events.wants("on_review_decided"):
            await self.events.emit(
                ReviewDecidedEvent(
                    review_id=request.review_id,
                    decision=decision.kind,
                    revised_output=getattr(decision, "revised_output", None),
                    duration=timedelta(seconds=seconds),
                    **self._review_ids(request),
                )
            )

    async def review_abandoned(self, request: ReviewRequest, seconds: float) -> None:
        """The review ended without a decision (cancelled, or its handler failed)."""
        task_logger.info("Review %s ended without a decision", request.review_id[:8])
        if self.events.wants("on_review_decided"):
            await self.events.emit(
                ReviewDecidedEvent(
                    review_id=request.review_id,
                    decision="NONE",
                    revised_output=None,
                    duration=timedelta(seconds=seconds),
                    **self._review_ids(request),
                )
            )

    def _review_ids(self, request: ReviewRequest) -> dict[str, Any]:
        return {
            "ensemble_id": self.task.run.run_id,
            "task_id": request.task_id,
            "parent_task_id": self.task.parent_task_id,
        }

    async def review_timed_out(self, request: ReviewRequest, seconds: float) -> None:
        task_logger.warning(
            "Review %s got no decision in time: %s",
            request.review_id[:8],
            request.on_timeout.value,
        )
        if self.events.wants("on_review_timed_out"):
            await self.events.emit(
                ReviewTimedOutEvent(
                    review_id=request.review_id,
                    action=request.on_timeout.value,
                    duration=timedelta(seconds=seconds),
                    **self._review_ids(request),
                )
            )

    # ---- the result ------------------------------------------------------------------------

    def final_text(self, text: str | None) -> str:
        """The agent's answer; a blank one is logged and becomes ``""``."""
        planned = self.task.planned
        if text is None or not text.strip():
            logger.warning(
                "Agent '%s' returned empty response for task '%s'",
                self.role,
                planned.description[:80],
            )
            return ""
        if self.task.run.verbose or self._agent_verbose():
            logger.info("Agent response:\n%s", text)
        return text

    def output(self, raw: str, parsed: Any = None) -> TaskOutput[Any]:
        """The task's `TaskOutput`, with its metrics and trace."""
        planned = self.task.planned
        metrics = self._metrics()
        duration = self._elapsed()
        trace = TaskTrace(
            task_index=planned.index,
            agent_role=self.role,
            task_description=planned.description,
            expected_output=planned.expected_output,
            started_at=self.started_at,
            completed_at=self.started_at + duration,
            duration=duration,
            prompts=self.prompts,
            llm_interactions=tuple(self.interactions),
            delegations=tuple(self.delegations),
            memory_operations=tuple(self.memory_operations),
            final_output=raw,
            parsed_output=parsed,
            metrics=metrics,
        )
        return TaskOutput(
            raw=raw,
            task_description=planned.description,
            agent_role=self.role,
            completed_at=trace.completed_at,
            duration=duration,
            tool_call_count=self.tool_calls,
            parsed_output=parsed,
            output_type=planned.source.output_type,
            metrics=metrics,
            trace=trace,
        )

    def _metrics(self) -> TaskMetrics:
        cost = self.task.run.cost_configuration
        return TaskMetrics(
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=add_known(self.input_tokens, self.output_tokens),
            llm_latency=timedelta(seconds=self.llm_seconds),
            tool_execution_time=timedelta(seconds=self.tool_seconds),
            prompt_build_time=timedelta(seconds=self.prompt_seconds),
            memory_retrieval_time=timedelta(seconds=self.memory_seconds),
            llm_call_count=self.llm_calls,
            tool_call_count=self.tool_calls,
            memory_operations=len(self.memory_operations),
            cost_estimate=cost.estimate(self.input_tokens, self.output_tokens) if cost else None,
        )


def _known(tokens: int | None) -> int:
    return UNKNOWN if tokens is None else tokens


def truncate_for_log(text: str, limit: int) -> str:
    """Cut text for a log line: -1 keeps it all, 0 shows nothing."""
    if limit < 0 or len(text) <= limit:
        return text
    return "" if limit == 0 else f"{text[:limit]}..."
