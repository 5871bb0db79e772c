"""`TaskRecorder`: the facts of one task execution, each emitted once as an event.

The task steps and the agent loop tell the recorder what happened (a model call started, a
tool call finished...); the recorder turns each fact into one event and emits it. The trace,
the metrics and the logs are folds over those events (`agentensemble.observability`); the
task's `TaskOutput` takes its trace and metrics from the run's trace fold.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, cast

from agentensemble._frozen import direct_init, direct_new
from agentensemble._logging import enter_task_log, get_logger, leave_task_log
from agentensemble.execution._facts import CapabilityFacts, failure_reason
from agentensemble.models import AssistantMessage, ChatResponse, Message, ToolCall, model_name_of
from agentensemble.observability._events import (
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    TaskCompleteEvent,
    TaskFailedEvent,
    TaskInputEvent,
    TaskStartEvent,
    TokenEvent,
    ToolCallEvent,
    task_event_maker,
    task_id_fields,
)
from agentensemble.observability._json import json_data
from agentensemble.observability._metrics import UNKNOWN, add_known
from agentensemble.outputs import TaskOutput

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from agentensemble.execution._context import TaskContext
    from agentensemble.observability._trace import TaskTrace
    from agentensemble.tools import ToolResult

__all__ = ["ResponseType", "TaskRecorder", "Turn", "failure_reason"]

logger = get_logger("agentensemble.agent")

ResponseType = Literal["TOOL_CALLS", "FINAL_ANSWER"]


@direct_init
@dataclass(frozen=True, slots=True)
class Turn:
    """One model call: what was sent, what came back, and how long it took."""

    index: int
    sent: tuple[Message, ...]
    response: ChatResponse
    seconds: float

    @property
    def message(self) -> AssistantMessage:
        """The model's answer."""
        return self.response.message


class TaskRecorder(CapabilityFacts):
    """Emits the events of one task execution."""

    __slots__ = ("_log_previous", "_started", "llm_calls", "model_name")

    def __init__(self, task: TaskContext) -> None:
        super().__init__(task)
        planned = task.planned
        self._started = time.perf_counter()
        self.model_name = model_name_of(planned.agent.llm) if planned.agent else ""
        self.llm_calls = 0

    def log_in(self) -> None:
        """Records logged until `log_out` carry the task's log context."""
        self._log_previous = enter_task_log(self.task.planned)

    def log_out(self) -> None:
        """Give the log context back to what it was before `log_in`."""
        leave_task_log(self._log_previous)

    # ---- lifecycle -------------------------------------------------------------------------

    def task_started(self) -> Awaitable[None]:
        planned, events = self.task.planned, self.events
        node = planned.node
        return events.emit(
            task_event_maker(TaskStartEvent)(
                self._ids,
                events.next_seq(),
                datetime.now(UTC),
                total_tasks=planned.total,
                expected_output=planned.expected_output,
                name=planned.source.name,
                node_type=None if node is None else node.node_type,
                map_reduce_level=None if node is None else node.level,
            )
        )

    def completed(self, raw: str, parsed: Any) -> tuple[TaskCompleteEvent, TaskOutput[Any]]:
        """Record the task's completion in the run's folds (listeners are told afterwards,
        with `events.deliver`) and return the event and the task's output."""
        task = self.task
        usage = task.run.trace.usage(task.task_id)
        duration = self._elapsed()
        event = task_event_maker(TaskCompleteEvent)(
            self._ids,
            self.events.next_seq(),
            datetime.now(UTC),
            total_tasks=task.planned.total,
            duration=duration,
            raw=raw,
            parsed_output=None if parsed is None else json_data(parsed),
            tool_call_count=usage.tool_calls,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            token_count=add_known(usage.input_tokens, usage.output_tokens),
        )
        return event, self._folded(event, parsed)

    def restored(
        self, recorded: TaskCompleteEvent, parsed: Any
    ) -> tuple[TaskCompleteEvent, TaskOutput[Any]]:
        """The completion a resumed run restores from its checkpoint (`recorded`, with the
        trace of the run that made it): this execution's event, folded like `completed`."""
        task = self.task
        event = dataclasses.replace(
            recorded,
            seq=self.events.next_seq(),
            total_tasks=task.planned.total,
            **task_id_fields(self._ids),
        )
        return event, self._folded(event, parsed)

    def _folded(self, event: TaskCompleteEvent, parsed: Any) -> TaskOutput[Any]:
        """Fold the completion in (listeners are told afterwards) and make the task's
        output from what the trace fold made of it."""
        self.events.record(event)
        task = self.task
        trace, metrics = task.run.trace.task_result(task.task_id)
        return direct_new(TaskOutput)(
            raw=event.raw,
            task_description=task.planned.description,
            agent_role=self.role,
            completed_at=trace.completed_at,
            duration=trace.duration,
            tool_call_count=metrics.tool_call_count,
            parsed_output=parsed,
            output_type=task.planned.source.output_type,
            metrics=metrics,
            trace=cast("TaskTrace", trace),  # or the trace to make: made when first read
            name=task.planned.source.name,
        )

    async def task_failed(self, error: BaseException) -> None:
        await self._emit(
            TaskFailedEvent,
            total_tasks=self.task.planned.total,
            duration=self._elapsed(),
            error_type=type(error).__name__,
            reason=failure_reason(error),
        )

    def _elapsed(self) -> timedelta:
        return timedelta(seconds=time.perf_counter() - self._started)

    # ---- the agent loop --------------------------------------------------------------------

    def prompts_ready(
        self, system: str, user: str, seconds: float, tools: tuple[str, ...]
    ) -> Awaitable[None]:
        agent, events = self.task.planned.agent, self.events
        return events.emit(
            task_event_maker(TaskInputEvent)(
                self._ids,
                events.next_seq(),
                datetime.now(UTC),
                expected_output=self.task.planned.expected_output,
                agent_goal=agent.goal if agent else "",
                agent_background=agent.background if agent else None,
                tool_names=tools,
                system_prompt=system,
                user_prompt=user,
                prompt_build_time=timedelta(seconds=seconds),
            )
        )

    def model_call_started(self, index: int, sent: tuple[Message, ...]) -> Awaitable[None]:
        """Announce a model call (`index`: `llm_calls` so far, 0-based within the task)."""
        events = self.events
        return events.emit(
            task_event_maker(LlmIterationStartedEvent)(
                self._ids,
                events.next_seq(),
                datetime.now(UTC),
                iteration_index=index,
                messages=sent,
                model_name=self.model_name,
            )
        )

    def token(self, text: str) -> Awaitable[None]:
        events = self.events
        return events.emit(
            task_event_maker(TokenEvent)(
                self._ids, events.next_seq(), datetime.now(UTC), token=text
            )
        )

    def model_call_completed(self, turn: Turn, response_type: ResponseType) -> Awaitable[None]:
        usage = turn.response.usage
        self.llm_calls += 1
        events = self.events
        return events.emit(
            task_event_maker(LlmIterationCompletedEvent)(
                self._ids,
                events.next_seq(),
                datetime.now(UTC),
                iteration_index=turn.index,
                response_type=response_type,
                response_text=turn.message.text,
                tool_requests=turn.message.tool_calls,
                input_tokens=_known(usage.input_tokens if usage else None),
                output_tokens=_known(usage.output_tokens if usage else None),
                latency=timedelta(seconds=turn.seconds),
                model_name=self.model_name,
            )
        )

    def tool_call_completed(
        self, call: ToolCall, result: ToolResult, started_at: datetime, seconds: float
    ) -> Awaitable[None]:
        duration = timedelta(seconds=seconds)
        structured = result.structured_output
        events = self.events
        return events.emit(
            task_event_maker(ToolCallEvent)(
                self._ids,
                events.next_seq(),
                started_at + duration,
                tool_name=call.name,
                tool_arguments=call.arguments,
                tool_result=result.text_for_model,
                structured_result=None if structured is None else json_data(structured),
                duration=duration,
                outcome="SUCCESS" if result.is_success else "FAILURE",
                tool_call_id=call.id,
            )
        )

    async def tool_call_skipped(self, call: ToolCall, stop_text: str) -> None:
        """A call answered with a STOP because the iteration limit was reached."""
        await self._emit(
            ToolCallEvent,
            tool_name=call.name,
            tool_arguments=call.arguments,
            tool_result=stop_text,
            duration=timedelta(0),
            outcome="SKIPPED_MAX_ITERATIONS",
            tool_call_id=call.id,
        )

    # ---- the answer ------------------------------------------------------------------------

    def final_text(self, text: str | None) -> str:
        """The agent's answer; a blank one is logged and becomes ``""``."""
        if text is None or not text.strip():
            logger.warning(
                "Agent '%s' returned empty response for task '%s'",
                self.role,
                self.task.planned.description[:80],
            )
            return ""
        return text


def _known(tokens: int | None) -> int:
    return UNKNOWN if tokens is None else tokens
