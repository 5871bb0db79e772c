"""The agent loop: ask the model, run the tools it calls, repeat until it answers.

Read-only wiring for one task lives in `AgentRun`; everything that changes while the loop
runs lives in `_LoopState`. Each step is a small function.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from agentensemble.agent import Agent
from agentensemble.errors import AgentExecutionError, MaxIterationsExceededError
from agentensemble.execution._context import ExecutionContext
from agentensemble.execution._logging import get_logger
from agentensemble.execution._prompts import build_system_prompt, build_user_prompt
from agentensemble.models import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from agentensemble.observability._events import ToolCallEvent
from agentensemble.observability._metrics import TaskMetrics, add_known
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

    def record_model_call(self, usage: Usage | None, seconds: float) -> None:
        self.llm_calls += 1
        self.llm_seconds += seconds
        self.input_tokens = add_known(self.input_tokens, usage.input_tokens if usage else None)
        self.output_tokens = add_known(self.output_tokens, usage.output_tokens if usage else None)


@dataclass(frozen=True, slots=True)
class _Executed:
    result: ToolResult
    seconds: float = field(default=0.0)


async def execute_agent(run: AgentRun) -> TaskOutput:
    """Run `run.agent` on the task until it gives a final answer; return the `TaskOutput`.

    Raises `AgentExecutionError` when the model (or the tool machinery) fails and
    `MaxIterationsExceededError` after the third STOP message. Tool errors never raise:
    the model is told about them and carries on.
    """
    started = time.perf_counter()
    system = build_system_prompt(run.agent)
    user = build_user_prompt(run.description, run.expected_output, run.context)
    prompt_seconds = time.perf_counter() - started
    _log_prompts(run, system, user)
    state = _LoopState([SystemMessage(system), UserMessage(user)])
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
    return _task_output(run, state, _final_text(run, text), started, prompt_seconds)


async def _loop(run: AgentRun, state: _LoopState) -> str | None:
    while True:
        message = await _ask_model(run, state)
        if not message.tool_calls or not run.tools:
            return message.text
        await _answer_tool_calls(run, state, message.tool_calls)


async def _ask_model(run: AgentRun, state: _LoopState) -> AssistantMessage:
    started = time.perf_counter()
    response = await run.agent.llm.chat(tuple(state.messages), tools=run.tools.specs)
    state.record_model_call(response.usage, time.perf_counter() - started)
    state.messages.append(response.message)
    return response.message


async def _answer_tool_calls(run: AgentRun, state: _LoopState, calls: Sequence[ToolCall]) -> None:
    """Run the admitted calls concurrently; answer each call, in request order."""
    admitted = [_admit(run, state, call) for call in calls]
    executed = iter(
        await _execute_all(run, [c for c, ok in zip(calls, admitted, strict=True) if ok])
    )
    stop_text = STOP_MESSAGE.format(max=run.agent.max_iterations)
    for call, ok in zip(calls, admitted, strict=True):
        if ok:
            outcome = next(executed)
            state.tool_seconds += outcome.seconds
            text = truncate_for_model(outcome.result.text_for_model, run.ctx.max_tool_output_length)
        else:
            text = stop_text
        state.messages.append(ToolResultMessage(call.id, call.name, text))


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
    started = time.perf_counter()
    tool = run.tools.by_name.get(call.name)
    if tool is None:
        result = ToolResult.failure(f"Unknown tool '{call.name}'")
    else:
        result = await tool.invoke(call.arguments)
    seconds = time.perf_counter() - started
    _log_tool_call(run, call, result, seconds)
    if run.ctx.events.wants("on_tool_call"):
        await run.ctx.events.emit("on_tool_call", _tool_event(run, call, result, seconds))
    return _Executed(result, seconds)


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
    )


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


def _log_prompts(run: AgentRun, system: str, user: str) -> None:
    if run.ctx.verbose or run.agent.verbose:
        logger.info("System prompt:\n%s", system)
        logger.info("User prompt:\n%s", user)
    else:
        logger.debug("System prompt (%d chars):\n%s", len(system), system)
        logger.debug("User prompt (%d chars):\n%s", len(user), user)


def _final_text(run: AgentRun, text: str | None) -> str:
    if text is None or not text.strip():
        logger.warning(
            "Agent '%s' returned empty response for task '%s'", run.role, run.description[:80]
        )
        return ""
    if run.ctx.verbose or run.agent.verbose:
        logger.info("Agent response:\n%s", text)
    return text


def _task_output(
    run: AgentRun, state: _LoopState, text: str, started: float, prompt_seconds: float
) -> TaskOutput:
    metrics = TaskMetrics(
        input_tokens=state.input_tokens,
        output_tokens=state.output_tokens,
        total_tokens=add_known(state.input_tokens, state.output_tokens),
        llm_latency=timedelta(seconds=state.llm_seconds),
        tool_execution_time=timedelta(seconds=state.tool_seconds),
        prompt_build_time=timedelta(seconds=prompt_seconds),
        llm_call_count=state.llm_calls,
        tool_call_count=state.tool_calls_made,
    )
    return TaskOutput(
        raw=text,
        task_description=run.description,
        agent_role=run.role,
        completed_at=datetime.now(UTC),
        duration=timedelta(seconds=time.perf_counter() - started),
        tool_call_count=state.tool_calls_made,
        metrics=metrics,
    )
