"""`ReplayModel`: a run reproduced from its FULL-capture trace, with no real model call.

Every model call is answered with the answer recorded for it. A model sees only the
messages it is sent, so a call is matched by what identifies it there: the agent's system
prompt, the task's prompt (the first user message: a delegated worker's own, or a
structured-output correction's) and the iteration (the assistant turns before it in the
conversation). Recorded calls that share all three (the same task run twice, parallel tasks
with the same prompts) are taken in the order they were recorded: the first whose whole
conversation is the one sent. A call that the recording does not hold, or holds with another
conversation, raises `ReplayError` with a unified diff of the recorded and the sent prompt;
the agent loop reports it as the cause of the task's `AgentExecutionError`, which names the
task and the agent.

Tools run again by default. With ``replay_tools=True`` the tools are not run: before running
a tool, the agent loop asks the agent's model for the call's result
(`ReplayModel.recorded_tool_result`), and the model answers with the recorded one.
Delegations always run, so that the workers' own recorded calls are replayed too.

Not replayed: model calls that a trace does not keep with their conversation (agent
synthesis by `LLMAgentSynthesizer`; the earlier iterations of a `Loop` and the earlier visits
of a `Graph` state, whose calls the trace drops).
"""

from __future__ import annotations

import difflib
import os
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeAlias

from agentensemble.errors import AgentEnsembleError, ValidationError
from agentensemble.models import (
    AssistantMessage,
    ChatResponse,
    Message,
    ModelSettings,
    ToolCall,
    ToolSpec,
    Usage,
)
from agentensemble.observability import (
    CaptureMode,
    ExecutionTrace,
    LlmInteraction,
    TaskTrace,
    ToolCallTrace,
    load_trace,
)
from agentensemble.observability._recording import capture_messages
from agentensemble.observability._trace import CapturedMessage
from agentensemble.tools import ToolResult

__all__ = ["ReplayError", "ReplayModel"]

_Key: TypeAlias = tuple[str, str, int]
"""What identifies a model call: system prompt, task prompt, iteration."""


class ReplayError(AgentEnsembleError):
    """A model call that the recording does not hold: its prompt differs from the recorded
    one, it was never recorded, or it came more often than recorded. The message has a
    unified diff of the recorded prompt (``-``) and the sent one (``+``)."""

    def __init__(
        self,
        message: str,
        *,
        iteration: int,
        diff: str,
        task_description: str | None,
        agent_role: str | None,
    ) -> None:
        super().__init__(message)
        self.iteration = iteration
        """The call's iteration: the assistant turns before it in its conversation."""
        self.diff = diff
        """The unified diff of the recorded and the sent prompt ("" when they are equal)."""
        self.task_description = task_description
        """The task of the recorded call the sent one was compared with (None when the
        recording has no call to compare with)."""
        self.agent_role = agent_role
        """The agent of that recorded call."""


@dataclass(frozen=True, slots=True)
class _Call:
    """One recorded model call: the conversation sent, the answer, where it was made."""

    messages: tuple[CapturedMessage, ...]
    response: ChatResponse
    tool_calls: tuple[ToolCallTrace, ...]
    """The tool calls it asked for, with their recorded results."""
    task_description: str
    agent_role: str
    started_at: datetime

    @property
    def key(self) -> _Key:
        return _key(self.messages)


class ReplayModel:
    """A model that answers each call with the answer recorded in a FULL-capture trace.

    Build it with `ReplayModel.from_trace`; use it as the ensemble's (or every agent's)
    ``llm``. It is safe to share between parallel tasks and threads.
    """

    def __init__(self, trace: ExecutionTrace, *, replay_tools: bool = False) -> None:
        _check_replayable(trace)
        self.replay_tools = replay_tools
        """Answer tool calls with their recorded results instead of running the tools."""
        self.model_name = "ReplayModel"
        """The name events, traces and spans show."""
        self._lock = threading.Lock()
        self._recorded = tuple(_recorded_calls(trace))
        self._pending: dict[_Key, list[_Call]] = {}
        """Calls not replayed yet, by key, in recorded order."""
        self._replayed: dict[_Key, list[_Call]] = {}
        self._results: dict[ToolCall, deque[ToolCallTrace]] = {}
        """Recorded results of the tool calls answered so far (``replay_tools``)."""
        for call in self._recorded:
            self._pending.setdefault(call.key, []).append(call)

    @classmethod
    def from_trace(
        cls, trace: ExecutionTrace | str | os.PathLike[str], *, replay_tools: bool = False
    ) -> ReplayModel:
        """A model replaying `trace`: an `ExecutionTrace`, or the path of a trace file
        written by `JsonTraceExporter` (or ``trace.to_json()``). The trace must have been
        recorded with ``capture_mode=CaptureMode.FULL``. With `replay_tools`, tool calls
        are answered with their recorded results and the tools are not run."""
        loaded = trace if isinstance(trace, ExecutionTrace) else load_trace(Path(trace))
        return cls(loaded, replay_tools=replay_tools)

    @property
    def remaining(self) -> int:
        """How many recorded model calls have not been replayed yet."""
        with self._lock:
            return sum(len(calls) for calls in self._pending.values())

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        """The answer recorded for this conversation; raises `ReplayError` when the
        recording has none (`tools` and `settings` are not compared: a trace keeps neither)."""
        sent = capture_messages(messages)
        with self._lock:
            call = self._take(sent)
            if self.replay_tools:
                self._expect_results(call)
        return call.response

    def recorded_tool_result(self, call: ToolCall) -> ToolResult | None:
        """The recorded result of a tool call this model answered with, when it replays
        tools; None otherwise (the tool then runs). The agent loop asks before running any
        tool but a delegation."""
        if not self.replay_tools:
            return None
        with self._lock:
            queue = self._results.get(call)
            if not queue:
                return None
            recorded = queue.popleft()
            if not queue:
                del self._results[call]
        return _tool_result(recorded)

    def _take(self, sent: tuple[CapturedMessage, ...]) -> _Call:
        """The first recorded call not replayed yet with this conversation (under the lock)."""
        key = _key(sent)
        pending = self._pending.get(key, [])
        for index, call in enumerate(pending):
            if call.messages == sent:
                del pending[index]
                self._replayed.setdefault(key, []).append(call)
                return call
        raise self._miss(key, sent, pending)

    def _miss(
        self, key: _Key, sent: tuple[CapturedMessage, ...], pending: list[_Call]
    ) -> ReplayError:
        iteration = key[2]
        if pending:
            return _mismatch(pending[0], sent, iteration)
        replayed = self._replayed.get(key)
        if replayed:
            return _exhausted(replayed[-1], len(replayed), iteration)
        return _not_recorded(_closest(self._recorded, sent), sent, iteration)

    def _expect_results(self, call: _Call) -> None:
        """Keep the recorded results of the tool calls in `call`'s answer (under the lock)."""
        by_id = {traced.tool_call_id: traced for traced in call.tool_calls}
        for requested in call.response.message.tool_calls:
            traced = by_id.get(requested.id)
            if traced is not None:
                self._results.setdefault(requested, deque()).append(traced)


# ---- reading the recording -----------------------------------------------------------------


def _check_replayable(trace: ExecutionTrace) -> None:
    """Only a FULL trace keeps every answer: the text of final answers since schema 1.5."""
    if trace.capture_mode != CaptureMode.FULL:
        raise ValidationError(
            "ReplayModel needs a trace recorded with capture_mode=CaptureMode.FULL (it keeps "
            "every model call's conversation and answer); this trace was recorded with "
            f"capture mode {trace.capture_mode}"
        )
    version = tuple(int(part) for part in trace.schema_version.split(".") if part.isdigit())
    if version < (1, 5):
        raise ValidationError(
            f"ReplayModel needs a trace of schema 1.5 or later; this one is "
            f"{trace.schema_version}, whose FULL capture did not keep the text of final "
            "answers: record the run again"
        )


def _recorded_calls(trace: ExecutionTrace) -> list[_Call]:
    """Every recorded model call of the run (delegated workers' too), in recorded order."""
    calls = [call for task in _executions(trace) for call in _task_calls(task)]
    calls.sort(key=lambda call: call.started_at)
    return calls


def _executions(trace: ExecutionTrace) -> Iterator[TaskTrace]:
    """Every task execution of the run once: its tasks, failed ones and delegated workers
    (a hierarchical run's workers are both its outputs and its manager's delegations)."""
    seen: set[tuple[datetime, str, str]] = set()
    pending = [*trace.task_traces, *trace.failed_tasks]
    while pending:
        task = pending.pop()
        identity = (task.started_at, task.agent_role, task.task_description)
        if identity not in seen:
            seen.add(identity)
            yield task
        pending.extend(d.worker_trace for d in task.delegations if d.worker_trace is not None)


def _task_calls(task: TaskTrace) -> Iterator[_Call]:
    interactions = task.llm_interactions
    for index, interaction in enumerate(interactions):
        later = interactions[index + 1] if index + 1 < len(interactions) else None
        yield _Call(
            messages=interaction.messages,
            response=ChatResponse(_answer(interaction, later), _usage(interaction)),
            tool_calls=interaction.tool_calls,
            task_description=task.task_description,
            agent_role=task.agent_role,
            started_at=interaction.started_at,
        )


def _answer(call: LlmInteraction, later: LlmInteraction | None) -> AssistantMessage:
    """The model's answer: as the next call of the same conversation shows it (exactly as
    the model gave it), else as the call recorded it (its text and requested tool calls)."""
    shown = _continued(call.messages, later)
    if shown is not None:
        return shown
    requested = tuple(
        ToolCall(traced.tool_call_id, traced.tool_name, traced.arguments)
        for traced in call.tool_calls
    )
    return AssistantMessage(text=call.response_text, tool_calls=requested)


def _continued(
    messages: tuple[CapturedMessage, ...], later: LlmInteraction | None
) -> AssistantMessage | None:
    size = len(messages)
    if later is None or len(later.messages) <= size or later.messages[:size] != messages:
        return None
    answer = later.messages[size]
    if answer.role != "assistant":
        return None
    calls = tuple(ToolCall(call.id, call.name, call.arguments) for call in answer.tool_calls)
    return AssistantMessage(text=answer.content, tool_calls=calls)


def _usage(call: LlmInteraction) -> Usage:
    """The recorded token counts (-1, unknown, becomes None)."""
    return Usage(
        input_tokens=call.input_tokens if call.input_tokens >= 0 else None,
        output_tokens=call.output_tokens if call.output_tokens >= 0 else None,
    )


def _tool_result(recorded: ToolCallTrace) -> ToolResult:
    """The result the tool gave, as the model saw it."""
    if recorded.outcome == "SUCCESS":
        return ToolResult.success(recorded.result, recorded.structured_output)
    return ToolResult(
        output=recorded.result,
        is_success=False,
        error_message=recorded.result,
        structured_output=recorded.structured_output,
    )


def _key(messages: Sequence[CapturedMessage]) -> _Key:
    system = next((m.content or "" for m in messages if m.role == "system"), "")
    task = next((m.content or "" for m in messages if m.role == "user"), "")
    return system, task, sum(message.role == "assistant" for message in messages)


# ---- errors --------------------------------------------------------------------------------


def _mismatch(recorded: _Call, sent: tuple[CapturedMessage, ...], iteration: int) -> ReplayError:
    diff = _diff(recorded.messages, sent)
    return ReplayError(
        f"Replay: the prompt of task '{recorded.task_description}' (agent "
        f"'{recorded.agent_role}') at iteration {iteration} differs from the recorded one "
        f"(- recorded, + sent):\n{diff}",
        iteration=iteration,
        diff=diff,
        task_description=recorded.task_description,
        agent_role=recorded.agent_role,
    )


def _exhausted(recorded: _Call, count: int, iteration: int) -> ReplayError:
    return ReplayError(
        f"Replay: task '{recorded.task_description}' (agent '{recorded.agent_role}') called "
        f"the model at iteration {iteration} more often than the recorded run did: the "
        f"{count} recorded call(s) with this prompt were all replayed already",
        iteration=iteration,
        diff="",
        task_description=recorded.task_description,
        agent_role=recorded.agent_role,
    )


def _not_recorded(
    closest: _Call | None, sent: tuple[CapturedMessage, ...], iteration: int
) -> ReplayError:
    problem = (
        f"Replay: no model call with this agent and task prompt was recorded at iteration "
        f"{iteration}"
    )
    if closest is None:
        return ReplayError(
            f"{problem}; the recording has no model calls",
            iteration=iteration,
            diff="",
            task_description=None,
            agent_role=None,
        )
    diff = _diff(closest.messages, sent)
    return ReplayError(
        f"{problem}. The closest recorded call (task '{closest.task_description}', agent "
        f"'{closest.agent_role}') differs (- recorded, + sent):\n{diff}",
        iteration=iteration,
        diff=diff,
        task_description=closest.task_description,
        agent_role=closest.agent_role,
    )


def _closest(recorded: Sequence[_Call], sent: tuple[CapturedMessage, ...]) -> _Call | None:
    """The recorded call most like the sent one: the same agent and iteration first, then
    the most similar prompt."""
    system, _, iteration = _key(sent)
    lines = _prompt_lines(sent)

    def likeness(call: _Call) -> tuple[bool, bool, float]:
        key = call.key
        similar = difflib.SequenceMatcher(None, _prompt_lines(call.messages), lines).ratio()
        return key[0] == system, key[2] == iteration, similar

    return max(recorded, key=likeness, default=None)


def _diff(recorded: Sequence[CapturedMessage], sent: Sequence[CapturedMessage]) -> str:
    lines = difflib.unified_diff(
        _prompt_lines(recorded), _prompt_lines(sent), "recorded", "sent", lineterm=""
    )
    return "\n".join(lines)


def _prompt_lines(messages: Sequence[CapturedMessage]) -> list[str]:
    """The conversation as text: a ``[role]`` line, then the message's lines and calls."""
    lines = []
    for message in messages:
        lines.append(f"[{message.role}{f' {message.tool_name}' if message.tool_name else ''}]")
        lines.extend((message.content or "").splitlines())
        lines.extend(
            f"tool call {call.id}: {call.name}({call.arguments})" for call in message.tool_calls
        )
    return lines
