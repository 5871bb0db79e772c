"""The agent loop: ask the model, run the tools it calls, repeat until it answers.

Read-only wiring for one task lives in `AgentRun`; everything that changes while the loop
runs lives in `_LoopState`. Each step is a small function. A model call always goes
through one path: a stream of text deltas ending in the whole response. Models that cannot
stream (or runs nobody listens to tokens of) give a one-item stream.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from agentensemble._logging import get_logger
from agentensemble.agent import Agent
from agentensemble.errors import AgentExecutionError, MaxIterationsExceededError
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._prompts import build_system_prompt, build_user_prompt
from agentensemble.execution._recording import (
    capture_messages,
    skipped_trace,
    tool_trace,
)
from agentensemble.models import (
    AssistantMessage,
    ChatResponse,
    Message,
    StreamingChatModel,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
    model_name_of,
)
from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._events import (
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    TaskInputEvent,
    TokenEvent,
    ToolCallEvent,
)
from agentensemble.observability._metrics import UNKNOWN, TaskMetrics, add_known
from agentensemble.observability._trace import (
    LlmInteraction,
    PromptTrace,
    TaskTrace,
    ToolCallTrace,
)
from agentensemble.outputs import TaskOutput
from agentensemble.tools._resolve import ToolSet
from agentensemble.tools._result import ToolResult, error_text

__all__ = ["STOP_MESSAGE", "AgentRun", "execute_agent"]

logger = get_logger("agentensemble.agent")

STOP_MESSAGE = (
    "STOP: Maximum tool iterations ({max}) reached. You must provide your best final answer "
    "now based on information gathered so far."
)
_STOPS_BEFORE_FAILURE = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentRun:
    """Read-only wiring for one agent running one task."""

    agent: Agent
    description: str
    expected_output: str
    context: tuple[TaskOutput, ...] = ()
    task_index: int = 1
    tools: ToolSet
    ctx: ExecutionContext
    tool_batch_timeout: float = 300.0
    """Seconds a batch of concurrent tool calls may take."""

    @property
    def role(self) -> str:
        return self.agent.role


@dataclass(slots=True)
class _LoopState:
    """What changes while the loop runs."""

    messages: list[Message]
    tool_calls_made: int = 0
    stop_count: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    llm_seconds: float = 0.0
    tool_seconds: float = 0.0
    interactions: list[LlmInteraction] = field(default_factory=list)

    def record_model_call(self, usage: Usage | None, seconds: float) -> None:
        self.llm_calls += 1
        self.llm_seconds += seconds
        self.input_tokens = add_known(self.input_tokens, usage.input_tokens if usage else None)
        self.output_tokens = add_known(self.output_tokens, usage.output_tokens if usage else None)


@dataclass(frozen=True, slots=True)
class _Turn:
    """One model call: what was sent, what came back, and when."""

    index: int
    sent: tuple[Message, ...]
    response: ChatResponse
    started_at: datetime
    seconds: float

    @property
    def message(self) -> AssistantMessage:
        return self.response.message


async def execute_agent(run: AgentRun) -> TaskOutput:
    """Run `run.agent` on the task until it gives a final answer; return the `TaskOutput`.

    Raises `AgentExecutionError` when the model (or the tool machinery) fails and
    `MaxIterationsExceededError` after the third STOP message. Tool errors never raise:
    the model is told about them and carries on.
    """
    started_at, started = datetime.now(UTC), time.perf_counter()
    prompts = PromptTrace(
        system=build_system_prompt(run.agent),
        user=build_user_prompt(run.description, run.expected_output, run.context),
    )
    prompt_seconds = time.perf_counter() - started
    _log_prompts(run, prompts)
    if run.ctx.events.wants("on_task_input"):
        await run.ctx.events.emit(_input_event(run, prompts))
    state = _LoopState([SystemMessage(prompts.system), UserMessage(prompts.user)])
    try:
        text = await _loop(run, state)
    except (AgentExecutionError, MaxIterationsExceededError):
        raise
    except Exception as error:
        raise AgentExecutionError(
            f"Agent '{run.role}' failed: {error_text(error)}",
            agent_role=run.role,
            task_description=run.description,
        ) from error
    timing = _Timing(started_at, started, prompt_seconds)
    return _task_output(run, state, _final_text(run, text), prompts, timing)


async def _loop(run: AgentRun, state: _LoopState) -> str | None:
    while True:
        turn = await _ask_model(run, state)
        if not turn.message.tool_calls or not run.tools:
            state.interactions.append(_interaction(run, turn, ()))
            return turn.message.text
        traces = await _answer_tool_calls(run, state, turn.message.tool_calls)
        state.interactions.append(_interaction(run, turn, traces))


async def _ask_model(run: AgentRun, state: _LoopState) -> _Turn:
    index, sent = state.llm_calls, tuple(state.messages)
    events = run.ctx.events
    if events.wants("on_llm_iteration_started"):
        await events.emit(
            LlmIterationStartedEvent(
                agent_role=run.role,
                task_description=run.description,
                task_index=run.task_index,
                iteration_index=index,
                messages=sent,
                model_name=model_name_of(run.agent.llm),
                ensemble_id=run.ctx.ensemble_id,
            )
        )
    started_at, started = datetime.now(UTC), time.perf_counter()
    response = await _drain(run, sent)
    turn = _Turn(index, sent, response, started_at, time.perf_counter() - started)
    state.record_model_call(response.usage, turn.seconds)
    state.messages.append(response.message)
    if events.wants("on_llm_iteration_completed"):
        await events.emit(_completed_event(run, turn))
    return turn


async def _drain(run: AgentRun, sent: tuple[Message, ...]) -> ChatResponse:
    """Consume the model's stream: forward text deltas as tokens, return the response."""
    response: ChatResponse | None = None
    async for item in _model_stream(run, sent):
        if isinstance(item, ChatResponse):
            response = item
        elif item:
            await run.ctx.events.emit(
                TokenEvent(
                    token=item,
                    agent_role=run.role,
                    task_description=run.description,
                    task_index=run.task_index,
                    ensemble_id=run.ctx.ensemble_id,
                )
            )
    if response is None:
        raise AgentExecutionError(
            f"Agent '{run.role}' failed: the model's stream ended without a response",
            agent_role=run.role,
            task_description=run.description,
        )
    return response


async def _model_stream(
    run: AgentRun, sent: tuple[Message, ...]
) -> AsyncIterator[str | ChatResponse]:
    model = run.agent.llm
    if run.ctx.events.wants("on_token") and isinstance(model, StreamingChatModel):
        async for item in model.stream(sent, tools=run.tools.specs):
            yield item
    else:
        yield await model.chat(sent, tools=run.tools.specs)


async def _answer_tool_calls(
    run: AgentRun, state: _LoopState, calls: Sequence[ToolCall]
) -> tuple[ToolCallTrace, ...]:
    """Run the admitted calls concurrently; answer each call, in request order."""
    admitted = [_admit(run, state, call) for call in calls]
    to_run = [call for call, ok in zip(calls, admitted, strict=True) if ok]
    executed = iter(await _execute_all(run, to_run))
    stop_text = STOP_MESSAGE.format(max=run.agent.max_iterations)
    full = run.ctx.capture_mode is CaptureMode.FULL
    traces = []
    for call, ok in zip(calls, admitted, strict=True):
        if ok:
            outcome = next(executed)
            state.tool_seconds += outcome.seconds
            traces.append(
                tool_trace(call, outcome.result, outcome.started_at, outcome.seconds, full=full)
            )
            text = truncate_for_model(outcome.result.text_for_model, run.ctx.max_tool_output_length)
        else:
            traces.append(skipped_trace(call, stop_text, datetime.now(UTC), full=full))
            text = stop_text
        state.messages.append(ToolResultMessage(call.id, call.name, text))
    return tuple(traces)


def _admit(run: AgentRun, state: _LoopState, call: ToolCall) -> bool:
    """Count the call against the limit; False (and a STOP) when over it."""
    if state.tool_calls_made < run.agent.max_iterations:
        state.tool_calls_made += 1
        return True
    state.stop_count += 1
    if state.stop_count >= _STOPS_BEFORE_FAILURE:
        raise MaxIterationsExceededError(
            agent_role=run.role,
            task_description=run.description,
            max_iterations=run.agent.max_iterations,
            tool_calls_made=state.tool_calls_made,
        )
    logger.warning(
        "Agent '%s' exceeded max iterations (%d). Stop message sent (%d/%d).",
        run.role,
        run.agent.max_iterations,
        state.stop_count,
        _STOPS_BEFORE_FAILURE,
    )
    return False


@dataclass(frozen=True, slots=True)
class _Executed:
    result: ToolResult
    started_at: datetime
    seconds: float


async def _execute_all(run: AgentRun, calls: Sequence[ToolCall]) -> list[_Executed]:
    if len(calls) <= 1:
        return [await _execute(run, call) for call in calls]
    import asyncio

    batch = asyncio.gather(*(_execute(run, call) for call in calls))
    try:
        return list(await asyncio.wait_for(batch, timeout=run.tool_batch_timeout))
    except TimeoutError:
        minutes = run.tool_batch_timeout / 60
        raise AgentExecutionError(
            f"Parallel tool execution for agent '{run.role}' timed out after {minutes:g} minutes",
            agent_role=run.role,
            task_description=run.description,
        ) from None


async def _execute(run: AgentRun, call: ToolCall) -> _Executed:
    started_at, started = datetime.now(UTC), time.perf_counter()
    tool = run.tools.by_name.get(call.name)
    if tool is None:
        result = ToolResult.failure(f"Unknown tool '{call.name}'")
    else:
        result = await tool.invoke(call.arguments)
    seconds = time.perf_counter() - started
    _log_tool_call(run, call, result, seconds)
    if run.ctx.events.wants("on_tool_call"):
        await run.ctx.events.emit(_tool_event(run, call, result, seconds))
    return _Executed(result, started_at, seconds)


def _tool_event(run: AgentRun, call: ToolCall, result: ToolResult, seconds: float) -> ToolCallEvent:
    return ToolCallEvent(
        tool_name=call.name,
        tool_arguments=call.arguments,
        tool_result=result.text_for_model,
        structured_result=result.structured_output,
        agent_role=run.role,
        duration=timedelta(seconds=seconds),
        task_index=run.task_index,
        outcome="SUCCESS" if result.is_success else "FAILURE",
        tool_call_id=call.id,
        ensemble_id=run.ctx.ensemble_id,
    )


def _input_event(run: AgentRun, prompts: PromptTrace) -> TaskInputEvent:
    return TaskInputEvent(
        task_index=run.task_index,
        task_description=run.description,
        expected_output=run.expected_output,
        agent_role=run.role,
        agent_goal=run.agent.goal,
        agent_background=run.agent.background,
        tool_names=tuple(spec.name for spec in run.tools.specs),
        system_prompt=prompts.system,
        user_prompt=prompts.user,
        ensemble_id=run.ctx.ensemble_id,
    )


def _completed_event(run: AgentRun, turn: _Turn) -> LlmIterationCompletedEvent:
    usage = turn.response.usage
    return LlmIterationCompletedEvent(
        agent_role=run.role,
        task_description=run.description,
        task_index=run.task_index,
        iteration_index=turn.index,
        response_type="TOOL_CALLS" if turn.message.tool_calls else "FINAL_ANSWER",
        response_text=turn.message.text,
        tool_requests=turn.message.tool_calls,
        input_tokens=_known(usage.input_tokens if usage else None),
        output_tokens=_known(usage.output_tokens if usage else None),
        latency=timedelta(seconds=turn.seconds),
        model_name=model_name_of(run.agent.llm),
        ensemble_id=run.ctx.ensemble_id,
    )


def _interaction(run: AgentRun, turn: _Turn, traces: tuple[ToolCallTrace, ...]) -> LlmInteraction:
    usage = turn.response.usage
    captured = capture_messages(turn.sent) if run.ctx.capture_mode is not CaptureMode.OFF else ()
    return LlmInteraction(
        iteration_index=turn.index,
        started_at=turn.started_at,
        completed_at=turn.started_at + timedelta(seconds=turn.seconds),
        latency=timedelta(seconds=turn.seconds),
        input_tokens=_known(usage.input_tokens if usage else None),
        output_tokens=_known(usage.output_tokens if usage else None),
        response_type="TOOL_CALLS" if traces else "FINAL_ANSWER",
        response_text=turn.message.text,
        tool_calls=traces,
        messages=captured,
    )


def _known(tokens: int | None) -> int:
    return UNKNOWN if tokens is None else tokens


def truncate_for_model(text: str, limit: int) -> str:
    """Cut tool output the model sees to `limit` characters (-1: no limit), with a note."""
    if limit < 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}... [truncated, full length: {len(text)} chars]"


def truncate_for_log(text: str, limit: int) -> str:
    """Cut text for a log line: -1 keeps it all, 0 shows nothing."""
    if limit < 0 or len(text) <= limit:
        return text
    return "" if limit == 0 else f"{text[:limit]}..."


def _log_tool_call(run: AgentRun, call: ToolCall, result: ToolResult, seconds: float) -> None:
    limit = run.ctx.tool_log_truncate_length
    arguments = truncate_for_log(call.arguments, limit)
    shown = truncate_for_log(result.text_for_model, limit)
    milliseconds = round(seconds * 1000)
    if result.is_success:
        logger.info(
            "[%s] Tool call: %s(%s) -> %s [%dms]",
            run.role,
            call.name,
            arguments,
            shown,
            milliseconds,
        )
    else:
        logger.warning(
            "[%s] Tool error: %s(%s) -> %s [%dms]",
            run.role,
            call.name,
            arguments,
            shown,
            milliseconds,
        )


def _log_prompts(run: AgentRun, prompts: PromptTrace) -> None:
    if run.ctx.verbose or run.agent.verbose:
        logger.info("System prompt:\n%s", prompts.system)
        logger.info("User prompt:\n%s", prompts.user)
    else:
        logger.debug("System prompt (%d chars):\n%s", len(prompts.system), prompts.system)
        logger.debug("User prompt (%d chars):\n%s", len(prompts.user), prompts.user)


def _final_text(run: AgentRun, text: str | None) -> str:
    if text is None or not text.strip():
        logger.warning(
            "Agent '%s' returned empty response for task '%s'", run.role, run.description[:80]
        )
        return ""
    if run.ctx.verbose or run.agent.verbose:
        logger.info("Agent response:\n%s", text)
    return text


@dataclass(frozen=True, slots=True)
class _Timing:
    started_at: datetime
    started: float
    prompt_seconds: float


def _task_output(
    run: AgentRun, state: _LoopState, text: str, prompts: PromptTrace, timing: _Timing
) -> TaskOutput:
    cost = run.ctx.cost_configuration
    metrics = TaskMetrics(
        input_tokens=state.input_tokens,
        output_tokens=state.output_tokens,
        total_tokens=add_known(state.input_tokens, state.output_tokens),
        llm_latency=timedelta(seconds=state.llm_seconds),
        tool_execution_time=timedelta(seconds=state.tool_seconds),
        prompt_build_time=timedelta(seconds=timing.prompt_seconds),
        llm_call_count=state.llm_calls,
        tool_call_count=state.tool_calls_made,
        cost_estimate=cost.estimate(state.input_tokens, state.output_tokens) if cost else None,
    )
    duration = timedelta(seconds=time.perf_counter() - timing.started)
    trace = TaskTrace(
        task_index=run.task_index,
        agent_role=run.role,
        task_description=run.description,
        expected_output=run.expected_output,
        started_at=timing.started_at,
        completed_at=timing.started_at + duration,
        duration=duration,
        prompts=prompts,
        llm_interactions=tuple(state.interactions),
        final_output=text,
        metrics=metrics,
    )
    return TaskOutput(
        raw=text,
        task_description=run.description,
        agent_role=run.role,
        completed_at=trace.completed_at,
        duration=duration,
        tool_call_count=state.tool_calls_made,
        metrics=metrics,
        trace=trace,
    )
