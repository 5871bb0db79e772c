"""The agent loop: tool calls, the stop-message rule and the error matrix (BEHAVIOUR §6)."""

import asyncio
import logging
import re
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from agentensemble import (
    Agent,
    AgentExecutionError,
    Ensemble,
    FunctionModel,
    MaxIterationsExceededError,
    RunOptions,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolCallEvent,
    tool,
    tool_call,
)
from agentensemble.execution import _tool_calls as tool_calls
from agentensemble.models import (
    AssistantMessage,
    ChatModel,
    Message,
    ModelRequest,
    ToolCall,
    ToolResultMessage,
    ToolSpec,
)
from agentensemble.outputs import EnsembleOutput

STOP = (
    "STOP: Maximum tool iterations (2) reached. You must provide your best final answer "
    "now based on information gathered so far."
)

executed: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    executed.append(key)
    return f"value of {key}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    executed.clear()


def tool_results(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, ToolResultMessage)]


def run_one(
    llm: ChatModel,
    *,
    tools: Sequence[object] = (lookup,),
    max_iterations: int = 25,
    **ensemble_kwargs: Any,
) -> EnsembleOutput:
    agent = Agent("Worker", "Work", llm=llm, tools=list(tools), max_iterations=max_iterations)
    return Ensemble(tasks=[Task("Do the work", agent=agent)], **ensemble_kwargs).run()


def test_the_third_stop_message_raises_after_exactly_five_model_calls() -> None:
    llm = FunctionModel(lambda messages, tools: tool_call("lookup", key="k"))
    with pytest.raises(TaskExecutionError) as caught:
        run_one(llm, max_iterations=2)

    error = caught.value.__cause__
    assert isinstance(error, MaxIterationsExceededError)
    assert (error.max_iterations, error.tool_calls_made) == (2, 2)
    assert str(error) == (
        "Agent 'Worker' exceeded maximum iterations (2). Tool calls made: 2. "
        "Task: 'Do the work'. Consider increasing max_iterations or simplifying the task."
    )
    assert len(llm.requests) == 5
    assert executed == ["k", "k"]
    assert tool_results(llm.requests[4]) == ["value of k", "value of k", STOP, STOP]
    assert caught.value.completed_outputs == ()


@pytest.mark.parametrize("stops_before_answer", [1, 2])
def test_answering_after_a_stop_message_succeeds(stops_before_answer: int) -> None:
    replies = [tool_call("lookup", key=str(i)) for i in range(2 + stops_before_answer)]
    llm = ScriptedModel([*replies, "final"])
    output = run_one(llm, max_iterations=2)
    assert output.raw == "final"
    assert output.task_outputs[0].tool_call_count == 2
    assert len(llm.requests) == 3 + stops_before_answer
    assert tool_results(llm.requests[-1])[-1] == STOP


def test_each_over_limit_call_gets_a_stop_and_the_turn_counts_once() -> None:
    batch = [tool_call("lookup", key=key) for key in "abcdef"]
    llm = ScriptedModel([batch, tool_call("lookup", key="g"), "final"])
    output = run_one(llm, max_iterations=3)
    assert output.raw == "final"  # two STOP turns: the model is asked again each time
    assert executed == ["a", "b", "c"]
    assert len(llm.requests) == 3
    stop_3 = STOP.replace("(2)", "(3)")
    assert tool_results(llm.requests[1]) == [
        "value of a",
        "value of b",
        "value of c",
        *[stop_3] * 3,
    ]


def test_the_third_stop_turn_fails_the_task() -> None:
    batch = [tool_call("lookup", key=key) for key in "abc"]
    llm = ScriptedModel([batch, batch, batch])
    with pytest.raises(TaskExecutionError) as caught:
        run_one(llm, max_iterations=1)
    error = caught.value.__cause__
    assert isinstance(error, MaxIterationsExceededError)
    assert (error.tool_calls_made, len(llm.requests), executed) == (1, 3, ["a"])


async def test_tool_calls_of_one_turn_run_concurrently_and_answer_in_request_order() -> None:
    first_started, second_done = asyncio.Event(), asyncio.Event()

    @tool
    async def slow(x: str) -> str:
        """Finishes only after `fast` has finished."""
        first_started.set()
        await asyncio.wait_for(second_done.wait(), timeout=5)
        return "slow done"

    @tool
    async def fast(x: str) -> str:
        """Waits until `slow` is running, then finishes."""
        await asyncio.wait_for(first_started.wait(), timeout=5)
        second_done.set()
        return "fast done"

    llm = ScriptedModel([[tool_call("slow", x="1"), tool_call("fast", x="2")], "ok"])
    agent = Agent("Worker", "Work", llm=llm, tools=[slow, fast])
    output = await Ensemble(tasks=[Task("Both", agent=agent)]).arun()

    assert output.raw == "ok"
    results = [m for m in llm.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [(m.tool_name, m.text) for m in results] == [
        ("slow", "slow done"),
        ("fast", "fast done"),
    ]
    assistant = llm.requests[1].messages[2]
    assert isinstance(assistant, AssistantMessage)
    calls = assistant.tool_calls
    assert [m.tool_call_id for m in results] == [c.id for c in calls]


def test_sync_tools_run_off_the_event_loop_thread() -> None:
    threads: list[int] = []

    @tool
    def where() -> str:
        """Report the thread."""
        threads.append(threading.get_ident())
        return "here"

    run_one(ScriptedModel([tool_call("where"), "done"]), tools=[where])
    assert threads
    assert threads[0] != threading.get_ident()


@pytest.mark.parametrize(
    ("call", "seen_by_model"),
    [
        (ToolCall("c1", "nope", "{}"), "Error: Unknown tool 'nope'"),
        (
            ToolCall("c1", "lookup", "{not json"),
            "Error: Invalid arguments for tool 'lookup': Invalid JSON",
        ),
        (
            ToolCall("c1", "lookup", '{"key": 5}'),
            "Error: Invalid arguments for tool 'lookup': key: Input should be a valid string",
        ),
        (
            ToolCall("c1", "lookup", "{}"),
            "Error: Invalid arguments for tool 'lookup': key: Field required",
        ),
        (ToolCall("c1", "boom", "{}"), "Error: the tool broke"),
    ],
)
def test_tool_problems_go_back_to_the_model_as_text(call: ToolCall, seen_by_model: str) -> None:
    @tool
    def boom() -> str:
        """Always fails."""
        raise RuntimeError("the tool broke")

    llm = ScriptedModel([call, "recovered"])
    output = run_one(llm, tools=[lookup, boom])
    assert output.raw == "recovered"
    assert tool_results(llm.requests[1])[0].startswith(seen_by_model)
    assert output.task_outputs[0].tool_call_count == 1


def test_an_empty_answer_becomes_empty_text_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    output = run_one(ScriptedModel(["   "]), tools=())
    assert output.raw == ""
    assert "Agent 'Worker' returned empty response for task 'Do the work'" in caplog.text


def test_a_model_error_fails_the_task_and_keeps_earlier_outputs() -> None:
    class Broken(Exception):
        pass

    calls = 0

    def flaky(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise Broken("provider down")
        return "first answer"

    llm = FunctionModel(flaky)
    first, second = Task("First"), Task("Second")
    with pytest.raises(TaskExecutionError) as caught:
        Ensemble(tasks=[first, second], llm=llm).run()

    assert str(caught.value) == "Task 'Second' failed: Agent 'Agent' failed: provider down"
    assert [o.raw for o in caught.value.completed_outputs] == ["first answer"]
    agent_error = caught.value.__cause__
    assert isinstance(agent_error, AgentExecutionError)
    assert str(agent_error) == "Agent 'Agent' failed: provider down"
    assert isinstance(agent_error.__cause__, Broken)


class TestToolOutputLimits:
    @staticmethod
    def run_with(
        limit_kwargs: dict[str, Any], options: RunOptions | None = None
    ) -> tuple[str, ToolCallEvent]:
        @tool
        def long() -> str:
            """Twelve characters."""
            return "abcdefghijkl"

        events: list[ToolCallEvent] = []
        llm = ScriptedModel([tool_call("long"), "done"])
        agent = Agent("Worker", "Work", llm=llm, tools=[long])
        Ensemble(tasks=[Task("t", agent=agent)], on_tool_call=events.append, **limit_kwargs).run(
            options=options
        )
        return tool_results(llm.requests[1])[0], events[0]

    def test_truncated_for_the_model_but_full_for_listeners(self) -> None:
        seen, event = self.run_with({"max_tool_output_length": 5})
        assert seen == "abcde... [truncated, full length: 12 chars]"
        assert event.tool_result == "abcdefghijkl"

    def test_zero_leaves_only_the_note_and_minus_one_everything(self) -> None:
        assert self.run_with({"max_tool_output_length": 0})[0] == (
            "... [truncated, full length: 12 chars]"
        )
        assert self.run_with({})[0] == "abcdefghijkl"

    def test_run_options_override_the_ensemble(self) -> None:
        seen, _ = self.run_with(
            {"max_tool_output_length": 5}, RunOptions(max_tool_output_length=-1)
        )
        assert seen == "abcdefghijkl"


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (3, 'Tool call: lookup({"k...) -> val...'),
        (0, "Tool call: lookup() -> "),
        (-1, 'Tool call: lookup({"key": "abc"}) -> value of abc'),
    ],
)
def test_tool_log_truncation(caplog: pytest.LogCaptureFixture, limit: int, expected: str) -> None:
    caplog.set_level(logging.INFO, logger="agentensemble")
    run_one(ScriptedModel([tool_call("lookup", key="abc"), "ok"]), tool_log_truncate_length=limit)
    line = next(r for r in caplog.records if "Tool call:" in r.getMessage())
    assert f"[Worker] {expected} [" in line.getMessage()


def test_failed_tool_calls_log_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    run_one(ScriptedModel([ToolCall("c", "nope", "{}"), "ok"]))
    warning = next(r for r in caplog.records if "Tool error:" in r.getMessage())
    assert warning.levelno == logging.WARNING
    assert "[Worker] Tool error: nope({}) -> Error: Unknown tool 'nope'" in warning.getMessage()


async def test_a_batch_of_tool_calls_that_never_finishes_times_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tool_calls, "TOOL_BATCH_TIMEOUT", 0.05)
    release = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never returns on its own."""
        await release.wait()
        return "late"

    llm = ScriptedModel([[tool_call("hang"), tool_call("hang")]])
    agent = Agent("Waiter", "Wait", llm=llm, tools=[hang])
    with pytest.raises(TaskExecutionError) as caught:
        await Ensemble(tasks=[Task("wait", "x", agent=agent)]).arun()
    error = caught.value.__cause__
    assert isinstance(error, AgentExecutionError)
    assert re.fullmatch(
        r"Parallel tool execution for agent 'Waiter' timed out after 0\.000833333 minutes",
        str(error),
    )


def test_metrics_count_calls_and_tokens() -> None:
    from agentensemble import Usage

    llm = ScriptedModel([tool_call("lookup", key="a"), "done"], usage=Usage(10, 4))
    output = run_one(llm)
    metrics = output.task_outputs[0].metrics
    assert (metrics.llm_call_count, metrics.tool_call_count) == (2, 1)
    assert (metrics.input_tokens, metrics.output_tokens, metrics.total_tokens) == (20, 8, 28)
    assert output.metrics.total_tokens == 28


def test_one_call_without_usage_makes_the_token_counts_unknown() -> None:
    from agentensemble import ChatResponse, Usage
    from agentensemble.models import AssistantMessage

    with_usage = ChatResponse(
        AssistantMessage(tool_calls=(tool_call("lookup", key="a"),)), Usage(10, 4)
    )
    output = run_one(ScriptedModel([with_usage, "no usage reported"]))
    metrics = output.task_outputs[0].metrics
    assert (metrics.input_tokens, metrics.output_tokens, metrics.total_tokens) == (-1, -1, -1)
    assert output.metrics.total_input_tokens == -1


def test_a_tool_call_from_an_agent_without_tools_is_answered_and_the_model_asked_again() -> None:
    llm = ScriptedModel([tool_call("lookup", key="k"), "answered in text"])
    output = Ensemble(tasks=[Task("Find it")], llm=llm).run()
    assert output.raw == "answered in text"
    assert tool_results(llm.requests[1]) == ["Error: No tools are available to you: answer in text"]
    assert output.task_outputs[0].tool_call_count == 1


def test_text_beside_tool_calls_is_the_answer_of_an_agent_without_tools() -> None:
    from agentensemble.models import AssistantMessage

    llm = ScriptedModel([AssistantMessage("the answer", (tool_call("lookup", key="k"),))])
    assert Ensemble(tasks=[Task("Find it")], llm=llm).run().raw == "the answer"
