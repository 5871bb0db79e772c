"""Answering one batch of tool calls: admission against the iteration limit, concurrent
execution, and one result message per call in request order (BEHAVIOUR 6.2)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from agentensemble._formats import format_json_text
from agentensemble._logging import get_logger
from agentensemble.delegation._tools import DelegationTool
from agentensemble.errors import AgentExecutionError, MaxIterationsExceededError
from agentensemble.execution._hooks import before_tool_call
from agentensemble.models import ToolCall, ToolResultMessage
from agentensemble.tools import ToolResult

if TYPE_CHECKING:
    from agentensemble.execution._agent_loop import AgentLoop

__all__ = ["STOP_MESSAGE", "answer_calls", "truncate_for_model"]

logger = get_logger("agentensemble.agent")

STOP_MESSAGE = (
    "STOP: Maximum tool iterations ({max}) reached. You must provide your best final answer "
    "now based on information gathered so far."
)
_STOPS_BEFORE_FAILURE = 3
NO_TOOLS_MESSAGE = "No tools are available to you: answer in text"
"""What a model that calls a tool is told when its agent has none."""
TOOL_BATCH_TIMEOUT = 300.0
"""Seconds a batch of concurrent tool calls may take."""


async def answer_calls(loop: AgentLoop, calls: Sequence[ToolCall]) -> None:
    """Run the admitted calls concurrently and answer every call, in request order.

    Raises `MaxIterationsExceededError` at the third STOP, after running the calls admitted
    before it (the error counts executed calls).
    """
    admitted, failure = _admit_all(loop, calls)
    running = [call for call, ok in zip(calls, admitted, strict=True) if ok]
    results = (  # the common turn, one call, inline: a coroutine less
        [await _execute(loop, running[0])]
        if len(running) == 1
        else await _execute_all(loop, running)
    )
    executed = iter(results)
    if failure is not None:
        raise failure
    run = loop.task.run
    for call, ok in zip(calls, admitted, strict=True):
        if ok:
            text = truncate_for_model(
                format_json_text(next(executed).text_for_model, run.context_format),
                run.max_tool_output_length,
            )
        else:
            text = STOP_MESSAGE.format(max=loop.max_iterations)
            await loop.recorder.tool_call_skipped(call, text)
        loop.add_message(ToolResultMessage(call.id, call.name, text))


def _admit_all(
    loop: AgentLoop, calls: Sequence[ToolCall]
) -> tuple[list[bool], MaxIterationsExceededError | None]:
    """Count each call against the limit; a call over it gets a STOP instead. A turn with
    a STOP counts once (a model that asks for six calls at once is asked again after its
    first STOP turn, not failed); the third such turn ends with the error to raise."""
    admitted = []
    for _ in calls:
        fits = loop.tool_calls_made < loop.max_iterations
        loop.tool_calls_made += fits
        admitted.append(fits)
    if all(admitted):
        return admitted, None
    loop.stop_count += 1
    if loop.stop_count >= _STOPS_BEFORE_FAILURE:
        return admitted, MaxIterationsExceededError(
            agent_role=loop.role,
            task_description=loop.task.planned.description,
            max_iterations=loop.max_iterations,
            tool_calls_made=loop.tool_calls_made,
        )
    logger.warning(
        "Agent '%s' exceeded max iterations (%d). Stop message sent (%d/%d).",
        loop.role,
        loop.max_iterations,
        loop.stop_count,
        _STOPS_BEFORE_FAILURE,
    )
    return admitted, None


async def _execute_all(loop: AgentLoop, calls: Sequence[ToolCall]) -> list[ToolResult]:
    """The calls, run concurrently within `TOOL_BATCH_TIMEOUT`."""
    if not calls:
        return []
    import asyncio

    # A delegation runs a whole task: only the run's and the task's deadlines bound it.
    delegates = any(isinstance(loop.tools.by_name.get(c.name), DelegationTool) for c in calls)
    try:
        async with asyncio.timeout(None if delegates else TOOL_BATCH_TIMEOUT) as deadline:
            with loop.task.deadlines.registered(deadline):
                async with asyncio.TaskGroup() as group:
                    running = [group.create_task(_execute(loop, call)) for call in calls]
    except BaseExceptionGroup as group_error:  # a call failed outside the tool's own code
        raise group_error.exceptions[0] from None
    except TimeoutError:
        if not deadline.expired():
            raise
        minutes = TOOL_BATCH_TIMEOUT / 60
        raise AgentExecutionError(
            f"Parallel tool execution for agent '{loop.role}' timed out after {minutes:g} minutes",
            agent_role=loop.role,
            task_description=loop.task.planned.description,
        ) from None
    return [task.result() for task in running]


async def _execute(loop: AgentLoop, call: ToolCall) -> ToolResult:
    started_at, started = datetime.now(UTC), time.perf_counter()
    tool = loop.tools.by_name.get(call.name)
    if tool is None:
        result = ToolResult.failure(
            f"Unknown tool '{call.name}'" if loop.tools else NO_TOOLS_MESSAGE
        )
    else:
        context = loop.task.tool_context(
            call.id,
            loop.delegator,
            tool_name=call.name,
            reviewer=loop.reviewer,
            memory_store=loop.memory_store,
        )
        recorded = _recorded_result(loop, call, tool)
        hooks, vetoed = loop.task.run.hooks, None
        if hooks is not None and hooks.tool:  # the call as the hooks changed it, or a veto
            call, vetoed = await before_tool_call(loop, call, context)
        answered = vetoed if vetoed is not None else recorded
        result = answered if answered is not None else await tool.invoke(call.arguments, context)
    seconds = time.perf_counter() - started
    await loop.recorder.tool_call_completed(call, result, started_at, seconds)
    return result


def _recorded_results_of(model: object) -> Callable[[ToolCall], object] | None:
    """The model's ``recorded_tool_result``, looking through wrappers that hold the model
    they call as ``.model`` (a rate limit's)."""
    for _ in range(8):  # wrappers nest a few deep at most
        answer = getattr(model, "recorded_tool_result", None)
        if answer is not None:
            return cast("Callable[[ToolCall], object]", answer)
        model = getattr(model, "model", None)
        if model is None:
            return None
    return None


def _recorded_result(loop: AgentLoop, call: ToolCall, tool: object) -> ToolResult | None:
    """The result the agent's model has for the call instead of running the tool: a
    `ReplayModel` with ``replay_tools=True`` answers with the recorded one (a model's
    optional ``recorded_tool_result(call)``). Delegations always run: their workers' model
    calls are replayed in turn."""
    answer = _recorded_results_of(loop.model)
    if answer is None or isinstance(tool, DelegationTool):
        return None
    result = answer(call)
    if result is not None and not isinstance(result, ToolResult):
        raise TypeError(
            f"{type(loop.model).__name__}.recorded_tool_result returned "
            f"{type(result).__name__}; it must return a ToolResult or None"
        )
    return result


def truncate_for_model(text: str, limit: int) -> str:
    """Cut tool output the model sees to `limit` characters (-1: no limit), with a note."""
    if limit < 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}... [truncated, full length: {len(text)} chars]"
