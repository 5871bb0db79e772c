"""The agent loop: ask the model, run the tools it calls, repeat until it answers.

One plain loop (`_drive`): ask the model; if it called tools (and the agent has tools),
answer the calls and ask again; else its text is the answer. The model is awaited in the
loop's own frame: thousands of tasks may wait on their model at once, and each coroutine
layer they wait in is memory and garbage-collector work. The mutable loop state sits in
`AgentLoop`; what is reported (events, trace, metrics, logs) goes through the task's
recorder. A streamed, rate-limited or timed call goes through `_call_model` (it is streamed
only when the model streams and a listener asks for tokens: its text deltas become token
events); any other is awaited directly.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentensemble._frozen import direct_new
from agentensemble.errors import AgentExecutionError, MaxIterationsExceededError, describe_error
from agentensemble.execution._hooks import before_model_call
from agentensemble.execution._memory import RecordedStore
from agentensemble.execution._recorder import ResponseType, Turn
from agentensemble.execution._review import reviewer_for
from agentensemble.execution._tool_calls import answer_calls
from agentensemble.models import (
    AssistantMessage,
    ChatModel,
    ChatResponse,
    Message,
    ModelSettings,
    RateLimiter,
    StreamingChatModel,
    SystemMessage,
    UserMessage,
)
from agentensemble.tools._context import Delegator, Reviewer
from agentensemble.tools._resolve import NO_TOOLS, ToolSet

if TYPE_CHECKING:
    from agentensemble.agent import Agent
    from agentensemble.execution._budget import ModelCall
    from agentensemble.execution._context import TaskContext
    from agentensemble.execution._recorder import TaskRecorder
    from agentensemble.execution._steps import TaskState
    from agentensemble.memory import MemoryStore

__all__ = ["AgentLoop", "ask_once", "run_agent_loop"]


@dataclass(slots=True, kw_only=True)
class AgentLoop:
    """Everything that changes while one agent works on one task (plus its wiring)."""

    task: TaskContext
    recorder: TaskRecorder
    tools: ToolSet
    messages: tuple[Message, ...]
    """The conversation so far (a tuple, sent as it is: no copy per call)."""
    tool_calls_made: int = 0
    """Tool calls admitted (counted against `max_iterations`)."""
    stop_count: int = 0
    turn: Turn | None = None
    """The latest model call."""
    response_type: ResponseType = "FINAL_ANSWER"
    """How the latest answer is taken: tool calls count only when the agent has tools."""
    answer: str | None = None
    streaming: StreamingChatModel | None = None
    """The model, when it streams and someone listens to tokens."""
    delegator: Delegator | None = None
    """What `ToolContext.delegate` calls, when the agent may delegate."""
    reviewer: Reviewer | None = None
    """What `ToolContext.request_approval` calls, when the ensemble has a review handler."""
    memory_store: MemoryStore | None = None
    """`ToolContext.memory_store`, when the ensemble has a memory store."""

    def add_message(self, message: Message) -> None:
        """Add a message to the conversation."""
        self.messages = (*self.messages, message)

    # The planned task's own wiring, read through it rather than copied: thousands of
    # loops may wait on their model at once, and each field is kept alive with them.

    @property
    def agent(self) -> Agent:
        agent = self.task.planned.agent
        if agent is None:  # `_start` refuses a task without an agent
            raise AssertionError("agent loop without an agent")
        return agent

    @property
    def model(self) -> ChatModel:
        return self.agent.llm

    @property
    def max_iterations(self) -> int:
        return self.agent.max_iterations

    @property
    def settings(self) -> ModelSettings | None:
        return self.task.planned.settings

    @property
    def limiter(self) -> RateLimiter | None:
        return self.task.planned.limiter

    @property
    def role(self) -> str:
        return self.recorder.role

    @property
    def current(self) -> Turn:
        if self.turn is None:  # the loop asks the model first
            raise AssertionError("no model call yet")
        return self.turn


def run_agent_loop(state: TaskState) -> Awaitable[None]:
    """The agent task step: loop until the model gives a final answer (in ``state.raw``).

    Raises `AgentExecutionError` when the model (or the tool machinery) fails and
    `MaxIterationsExceededError` after the third STOP message. Tool errors never raise:
    the model is told about them and carries on. (A plain function returning the loop's
    coroutine: thousands of tasks may wait in it at once, each coroutine frame kept alive.)
    """
    if state.user_prompt is None:  # the prompt step ran first
        raise AssertionError("agent loop without prompts")
    messages = (SystemMessage(state.system_prompt), UserMessage(state.user_prompt))
    return _drive(_start(state, messages, with_tools=True), answering=state)


async def ask_once(state: TaskState, messages: tuple[Message, ...]) -> str:
    """One more model call for the task, without tools (a structured-output correction,
    say): rate-limited, timed, streamed and recorded like every call of the loop."""
    loop = _start(state, messages, with_tools=False)
    await _drive(loop)
    return loop.answer or ""


async def _drive(loop: AgentLoop, answering: TaskState | None = None) -> None:
    """Ask the model and answer the tools it calls until it answers; its final answer
    becomes the task's raw output when `answering` is the task's state."""
    try:
        while True:
            index = loop.recorder.llm_calls
            sent, settings, admitted = await _before_call(loop, index)
            try:
                started = time.perf_counter()
                if loop.streaming is None and loop.limiter is None and _no_timeout(settings):
                    # awaited in this frame: no coroutine more per task waiting on its model
                    response = await loop.model.chat(
                        sent, tools=loop.tools.specs, settings=settings
                    )
                else:
                    response = await _call_model(loop, sent, settings)
                seconds = time.perf_counter() - started
                await _answered(loop, index, sent, response, seconds)
            finally:
                if admitted is not None:
                    admitted.settle()
            if loop.response_type != "TOOL_CALLS":
                break
            await answer_calls(loop, loop.current.message.tool_calls)
    except (AgentExecutionError, MaxIterationsExceededError):
        raise
    except Exception as error:
        raise _agent_failed(loop, describe_error(error)) from error
    loop.answer = loop.current.message.text
    if answering is not None:
        answering.raw = answering.recorder.final_text(loop.answer)


async def _before_call(
    loop: AgentLoop, index: int
) -> tuple[tuple[Message, ...], ModelSettings | None, ModelCall | None]:
    """Prepare the task's `index`-th model call: the run's hooks may change its messages
    and settings (for this call only), the run's and the task's budgets must admit it, and
    its start is announced. Returns the messages, the settings and the admission to settle
    once the call is over (None when the run has no budget)."""
    sent, settings = loop.messages, loop.settings
    run = loop.task.run
    if run.hooks is not None and run.hooks.model:
        sent, settings = await before_model_call(loop, index, sent)
    admitted = None if run.budget is None else run.budget.model_call(loop.task)
    if admitted is not None:
        await admitted.admit()
    try:
        await loop.recorder.model_call_started(index, sent)
    except BaseException:
        if admitted is not None:
            admitted.settle()
        raise
    return sent, settings, admitted


def _answered(
    loop: AgentLoop, index: int, sent: tuple[Message, ...], response: object, seconds: float
) -> Awaitable[None]:
    """Take the model's answer (once `_checked`) as the loop's latest turn, and record it.
    (Given in parts, the turn made here: the waiting loop's frame needs less stack.)"""
    turn = Turn(index, sent, _checked(loop, response), seconds)
    loop.turn = turn
    loop.add_message(turn.message)
    loop.response_type = _response_type(loop, turn.message)
    return loop.recorder.model_call_completed(turn, loop.response_type)


def _start(state: TaskState, messages: tuple[Message, ...], *, with_tools: bool) -> AgentLoop:
    task, planned = state.task, state.task.planned
    if planned.agent is None:  # planning gives every agent-path task an agent
        raise AssertionError("agent loop without an agent")
    model = planned.agent.llm
    tools = planned.tools if with_tools and planned.tools is not None else NO_TOOLS
    team, mode = task.run.team, planned.delegates
    return direct_new(AgentLoop)(
        task=task,
        recorder=state.recorder,
        tools=tools,
        delegator=team.delegator(state, mode) if team and mode and tools else None,
        reviewer=reviewer_for(task, state.recorder) if tools else None,
        memory_store=_memory_store(task, state.recorder) if tools else None,
        messages=messages,
        streaming=model
        if task.run.events.streams_tokens and isinstance(model, StreamingChatModel)
        else None,
    )


def _response_type(loop: AgentLoop, message: AssistantMessage) -> ResponseType:
    """Tool calls are answered when the agent has tools, or when they are all the model said
    (an agent without tools is then told so, and asked again); otherwise the text is the
    final answer."""
    if not message.tool_calls:
        return "FINAL_ANSWER"
    if loop.tools or not (message.text or "").strip():
        return "TOOL_CALLS"
    return "FINAL_ANSWER"


async def _call_model(
    loop: AgentLoop, sent: tuple[Message, ...], settings: ModelSettings | None
) -> ChatResponse:
    """Take a rate-limit token if the run owns one, then drain the model's stream within
    the `ModelSettings.timeout` deadline, forwarding text deltas as tokens."""
    if loop.limiter is not None:
        await loop.limiter.acquire()
    timeout = settings.timeout_seconds if settings is not None else None
    if timeout is None:
        return await _drain(loop, sent, settings)
    import asyncio

    try:
        async with asyncio.timeout(timeout) as deadline:
            return await _drain(loop, sent, settings)
    except TimeoutError:
        if not deadline.expired():
            raise  # the model adapter's own TimeoutError
        raise AgentExecutionError(
            f"Agent '{loop.role}' failed: the model call timed out after {timeout:g}s "
            "(ModelSettings timeout)",
            agent_role=loop.role,
            task_description=loop.task.planned.description,
        ) from None


async def _drain(
    loop: AgentLoop, sent: tuple[Message, ...], settings: ModelSettings | None
) -> ChatResponse:
    """A model call that is streamed, rate-limited or timed: a streamed answer's text deltas
    become token events; a model that is not streamed answers with the whole response at
    once. `settings`: the loop's, or what a hook changed them to for this call."""
    response: object = None
    if loop.streaming is None:
        response = await loop.model.chat(sent, tools=loop.tools.specs, settings=settings)
    else:
        stream = loop.streaming.stream(sent, tools=loop.tools.specs, settings=settings)
        async for item in stream:
            if isinstance(item, str):
                if item:
                    await loop.recorder.token(item)
            else:
                response = item
    return _checked(loop, response)


def _no_timeout(settings: ModelSettings | None) -> bool:
    return settings is None or settings.timeout_seconds is None


def _checked(loop: AgentLoop, response: object) -> ChatResponse:
    """The model's response, if it is a `ChatResponse`; else the agent fails, saying what
    came instead."""
    if isinstance(response, ChatResponse):
        return response
    if loop.streaming is not None and response is None:
        problem = "the model's stream ended without a response"
    else:
        problem = (
            f"the model returned {_describe(response)}; a ChatModel must return a ChatResponse"
        )
    raise _agent_failed(loop, problem)


def _agent_failed(loop: AgentLoop, problem: str) -> AgentExecutionError:
    return AgentExecutionError(
        f"Agent '{loop.role}' failed: {problem}",
        agent_role=loop.role,
        task_description=loop.task.planned.description,
    )


def _describe(value: object) -> str:
    if value is None:
        return "nothing"
    text = repr(value)
    return f"{type(value).__name__} {text[:60]}{'...' if len(text) > 60 else ''}"


def _memory_store(task: TaskContext, recorder: TaskRecorder) -> MemoryStore | None:
    memory = task.run.memory
    if memory is None or memory.store is None:
        return None
    return RecordedStore(memory.store, recorder)
