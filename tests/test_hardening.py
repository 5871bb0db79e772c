"""Regression tests for the production-hardening issue (issue 8), one group per item:
deadlines (7), the run's own thread pool for sync code (8), a tool batch at the iteration
limit (9), rate limits that wait (10) and give reservations back (11), run validation
(12, 13, 18, 19, 23), failures that count and name every task (14, 22), token totals with
handler tasks (15), LangChain's malformed tool calls (16), traces that survive big or odd
text (20), errors without a chained event-loop error (21), models that return the wrong
thing or lack credentials (24) and listener failures logged once (25).

Nothing here sleeps: waits are on events and barriers, each bounded by a safety timeout.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from agentensemble import (
    Agent,
    AgentExecutionError,
    ContextFormat,
    Ensemble,
    EnsembleListener,
    FunctionModel,
    GuardrailResult,
    HandlerContext,
    HierarchicalConstraints,
    JsonTraceExporter,
    MaxIterationsExceededError,
    ModelSettings,
    OpenAIChatModel,
    ParallelErrorStrategy,
    ParallelExecutionError,
    Phase,
    PromptTemplateError,
    RateLimit,
    RateLimiter,
    RateLimitTimeoutError,
    ScriptedModel,
    Task,
    TaskCompleteEvent,
    TaskExecutionError,
    TaskStartEvent,
    ToolResultMessage,
    Usage,
    ValidationError,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.memory import EntityMemory
from agentensemble.models import ChatResponse, Message, ToolSpec
from agentensemble.observability import load_trace
from tests.fakes import FakeClock

SAFETY = 10
"""Seconds; a safety bound on every wait, only reached when something hangs."""


def cause_chain(error: BaseException) -> list[BaseException]:
    """`error` and every exception in its ``__cause__`` chain, outermost first."""
    chain = [error]
    while chain[-1].__cause__ is not None:
        chain.append(chain[-1].__cause__)
    return chain


def hanging_model(reached: asyncio.Event) -> FunctionModel:
    """A model whose every call signals `reached`, then waits forever (until cancelled)."""
    never = asyncio.Event()

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        reached.set()
        await never.wait()
        return "too late"

    return FunctionModel(reply, model_name="hanging")


def failing_model(message: str) -> FunctionModel:
    """A model whose every call raises ``RuntimeError(message)``."""

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        raise RuntimeError(message)

    return FunctionModel(reply)


# --- 7: deadlines ----------------------------------------------------------------------------


async def test_a_task_past_its_timeout_fails_naming_the_task_timeout() -> None:
    reached = asyncio.Event()
    agent = Agent("Waiter", "Wait", llm=hanging_model(reached))
    ensemble = Ensemble(tasks=[Task("Wait for the answer", agent=agent, timeout=0.05)])
    with pytest.raises(TaskExecutionError) as caught:
        async with asyncio.timeout(SAFETY):
            await ensemble.arun()
    assert reached.is_set()
    assert "timed out after 0.05s (its Task timeout)" in str(caught.value)
    assert isinstance(caught.value.__cause__, AgentExecutionError)


async def test_a_model_call_past_its_model_settings_timeout_fails_naming_it() -> None:
    reached = asyncio.Event()
    agent = Agent(
        "Waiter", "Wait", llm=hanging_model(reached), model_settings=ModelSettings(timeout=0.05)
    )
    with pytest.raises(TaskExecutionError) as caught:
        async with asyncio.timeout(SAFETY):
            await Ensemble(tasks=[Task("Wait for the answer", agent=agent)]).arun()
    assert reached.is_set()
    assert "timed out after 0.05s (ModelSettings timeout)" in str(caught.value)


def test_a_sync_tool_past_its_timeout_tells_the_model_and_its_thread_ends() -> None:
    entered, release, finished = threading.Event(), threading.Event(), threading.Event()

    @tool(timeout=0.05)
    def fetch_report(quarter: str) -> str:
        """Fetch a quarterly report (hangs until released)."""
        entered.set()
        try:
            release.wait(SAFETY)
            return "late report"
        finally:
            finished.set()

    model = ScriptedModel([tool_call("fetch_report", quarter="Q3"), "gave up on the report"])
    agent = Agent("Analyst", "Analyse", llm=model, tools=[fetch_report])
    try:
        output = Ensemble(tasks=[Task("Get the Q3 report", agent=agent)]).run()
    finally:
        release.set()
    assert finished.wait(SAFETY)  # the blocked thread ran to its end once released
    assert entered.is_set()
    assert output.raw == "gave up on the report"
    answer = model.requests[1].messages[-1]
    assert isinstance(answer, ToolResultMessage)
    assert answer.text == "Error: Tool 'fetch_report' timed out after 0.05s (its @tool timeout)"


# --- 8: a bounded pool of threads for sync user code, its size set per ensemble ---------------


def tool_results(model: ScriptedModel, request: int) -> list[str]:
    """The tool results the model received in request number `request` (0-based)."""
    return [m.text for m in model.requests[request].messages if isinstance(m, ToolResultMessage)]


def test_twenty_four_sync_tool_calls_run_at_once_with_twenty_four_threads() -> None:
    barrier = threading.Barrier(24, timeout=SAFETY)  # breaks unless all 24 wait at once

    @tool
    def meet(seat: int) -> str:
        """Wait at the barrier."""
        barrier.wait()
        return f"seat {seat} met"

    model = ScriptedModel([[tool_call("meet", seat=i) for i in range(24)], "all met"])
    agent = Agent("Host", "Gather everyone", llm=model, tools=[meet], max_iterations=24)
    output = Ensemble(tasks=[Task("Gather", agent=agent)], max_sync_threads=24).run()
    assert output.raw == "all met"
    assert tool_results(model, 1) == [f"seat {i} met" for i in range(24)]
    assert not barrier.broken


def test_two_sync_threads_never_run_more_than_two_sync_tool_calls_at_once() -> None:
    lock = threading.Lock()
    in_flight = 0
    peak = 0
    threads: set[str] = set()
    partner = threading.Barrier(2, timeout=SAFETY)  # each call waits until a second one runs

    @tool
    def gauge(n: int) -> str:
        """Count the calls in flight."""
        nonlocal in_flight, peak
        with lock:
            in_flight += 1
            peak = max(peak, in_flight)
            threads.add(threading.current_thread().name)
        try:
            partner.wait()
        finally:
            with lock:
                in_flight -= 1
        return f"call {n} done"

    model = ScriptedModel([[tool_call("gauge", n=i) for i in range(16)], "measured"])
    agent = Agent("Meter", "Measure", llm=model, tools=[gauge], max_iterations=16)
    output = Ensemble(tasks=[Task("Measure", agent=agent)], max_sync_threads=2).run()
    assert output.raw == "measured"
    assert tool_results(model, 1) == [f"call {i} done" for i in range(16)]
    assert peak == 2
    assert all(name.startswith("agentensemble-sync") for name in threads)


# --- 9: the third STOP turn (a turn with STOPs counts once) -----------------------------------


@pytest.mark.parametrize(
    ("max_iterations", "batches", "executed"),
    [
        pytest.param(2, [5, 1, 1], 2, id="one-batch-two-admitted-then-three-stop-turns"),
        pytest.param(2, [1, 4, 2, 2], 2, id="second-batch-one-admitted-then-three-stop-turns"),
        pytest.param(3, [2, 4, 1, 1], 3, id="limit-three"),
    ],
)
def test_the_third_stop_turn_runs_the_calls_admitted_before_it(
    max_iterations: int, batches: list[int], executed: int
) -> None:
    ran: list[int] = []

    @tool
    async def ping(n: int) -> str:
        """Record a call."""
        ran.append(n)
        return f"pong {n}"

    numbers = itertools.count()
    model = ScriptedModel(
        [[tool_call("ping", n=next(numbers)) for _ in range(size)] for size in batches]
    )
    agent = Agent("Pinger", "Ping", llm=model, tools=[ping], max_iterations=max_iterations)
    with pytest.raises(TaskExecutionError) as caught:
        Ensemble(tasks=[Task("Ping a lot", agent=agent)]).run()
    error = caught.value.__cause__
    assert isinstance(error, MaxIterationsExceededError)
    assert sorted(ran) == list(range(executed))  # the admitted calls really ran, once each
    assert error.tool_calls_made == executed
    assert len(model.requests) == len(batches)


# --- 10: rate limits wait ---------------------------------------------------------------------


def timed_model(clock: FakeClock) -> tuple[FunctionModel, list[float]]:
    """A model answering "ok", and the virtual time of each of its calls."""
    times: list[float] = []

    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        times.append(round(clock.now, 6))
        return "ok"

    return FunctionModel(reply), times


def test_one_request_per_minute_makes_the_second_sequential_task_wait_not_fail() -> None:
    clock = FakeClock()
    model, times = timed_model(clock)
    output = Ensemble(
        tasks=[Task("One"), Task("Two")],
        llm=model,
        rate_limit=RateLimit.per_minute(1, clock=clock),
    ).run()
    assert [o.raw for o in output.task_outputs] == ["ok", "ok"]
    assert times == [0.0, 60.0]
    assert clock.sleeps == [60.0]


def test_eight_parallel_tasks_under_ten_per_minute_all_complete() -> None:
    clock = FakeClock()
    model, times = timed_model(clock)
    output = Ensemble(
        tasks=[Task(f"Task {i}") for i in range(8)],
        llm=model,
        workflow=Workflow.PARALLEL,
        rate_limit=RateLimit.per_minute(10, clock=clock),
    ).run()
    assert len(output.task_outputs) == 8
    assert sorted(times) == [6.0 * i for i in range(8)]


def test_a_wait_longer_than_the_wait_timeout_fails_at_once_through_the_task_error() -> None:
    clock = FakeClock()
    model, times = timed_model(clock)
    ensemble = Ensemble(
        tasks=[Task("One"), Task("Two")],
        llm=model,
        rate_limit=RateLimit.per_minute(1, wait_timeout=5, clock=clock),
    )
    with pytest.raises(TaskExecutionError) as caught:
        ensemble.run()
    assert any(isinstance(error, RateLimitTimeoutError) for error in cause_chain(caught.value))
    assert clock.sleeps == []  # failed at once, without waiting
    assert times == [0.0]
    assert [o.raw for o in caught.value.completed_outputs] == ["ok"]


# --- 11: a cancelled or timed-out waiter gives its reservation back ---------------------------


class GatedClock:
    """A clock that never moves, whose sleeps wait until the test opens the gate."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []
        self.sleeping = asyncio.Event()
        self.gate = asyncio.Event()

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.sleeping.set()
        await self.gate.wait()


async def wait_of_second_caller() -> float:
    """What the second caller of a fresh one-per-second bucket waits: the baseline."""
    clock = GatedClock()
    clock.gate.set()
    limiter = RateLimiter(RateLimit.per_second(1, clock=clock))
    await limiter.acquire()
    await limiter.acquire()
    assert len(clock.sleeps) == 1
    return clock.sleeps[0]


async def test_a_waiter_cancelled_while_waiting_gives_its_token_back() -> None:
    clock = GatedClock()
    limiter = RateLimiter(RateLimit.per_second(1, clock=clock))
    await limiter.acquire()  # the bucket's one token: no wait
    assert clock.sleeps == []
    waiter = asyncio.create_task(limiter.acquire())
    async with asyncio.timeout(SAFETY):
        await clock.sleeping.wait()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    clock.gate.set()
    await limiter.acquire()
    baseline = await wait_of_second_caller()
    assert baseline == 1.0
    assert clock.sleeps == [1.0, baseline]  # not 2.0: the cancelled reservation came back


async def test_a_waiter_whose_deadline_expires_gives_its_token_back() -> None:
    clock = GatedClock()
    limiter = RateLimiter(RateLimit.per_second(1, clock=clock))
    await limiter.acquire()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0):  # expires as soon as the caller waits
            await limiter.acquire()
    assert clock.sleeps == [1.0]
    clock.gate.set()
    await limiter.acquire()
    assert clock.sleeps == [1.0, await wait_of_second_caller()]


# --- 12, 13: context and task lists are checked before any model call ------------------------


@pytest.mark.parametrize(
    "workflow",
    [Workflow.PARALLEL, Workflow.SEQUENTIAL, None],
    ids=["parallel", "sequential", "inferred-parallel"],
)
def test_context_from_a_task_outside_the_ensemble_is_rejected_before_any_model_call(
    workflow: Workflow | None,
) -> None:
    model = ScriptedModel(["never used"] * 3)
    outside = Task("Outside research")
    first = Task("First")
    second = Task("Second", context=[first])  # makes the inferred workflow PARALLEL
    stray = Task("Summarise", context=[outside])
    ensemble = Ensemble(tasks=[first, second, stray], llm=model, workflow=workflow)
    with pytest.raises(ValidationError) as caught:
        ensemble.run()
    message = str(caught.value)
    assert "'Summarise'" in message
    assert "'Outside research' which is not in the ensemble's task list" in message
    assert model.requests == []


@pytest.mark.parametrize("workflow", [Workflow.SEQUENTIAL, Workflow.PARALLEL])
def test_the_same_task_listed_twice_is_rejected_naming_it(workflow: Workflow) -> None:
    model = ScriptedModel(["never used"] * 3)
    task = Task("Write the summary")
    with pytest.raises(ValidationError) as caught:
        Ensemble(tasks=[task, Task("Other"), task], llm=model, workflow=workflow).run()
    assert "'Write the summary'" in str(caught.value)
    assert model.requests == []


# --- 14: a parallel failure report counts tasks, not descriptions -----------------------------


def test_two_failed_tasks_sharing_a_description_are_both_counted_and_named() -> None:
    first = Task(
        "Check the data", agent=Agent("Checker A", "Check", llm=failing_model("disk full"))
    )
    second = Task(
        "Check the data", agent=Agent("Checker B", "Check", llm=failing_model("quota exceeded"))
    )
    fine = Task("Report", agent=Agent("Reporter", "Report", llm=ScriptedModel(["all good"])))
    ensemble = Ensemble(
        tasks=[first, second, fine],
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )
    with pytest.raises(ParallelExecutionError) as caught:
        ensemble.run()
    error = caught.value
    assert error.failed_count == 2
    assert set(error.failed_tasks) == {first, second}
    roots = {task: cause_chain(cause)[-1] for task, cause in error.failed_tasks.items()}
    assert [(type(roots[t]), str(roots[t])) for t in (first, second)] == [
        (RuntimeError, "disk full"),
        (RuntimeError, "quota exceeded"),
    ]
    message = str(error)
    assert message.startswith("2 of 3 tasks failed")
    assert "disk full" in message
    assert "quota exceeded" in message
    assert [o.raw for o in error.completed_outputs] == ["all good"]


# --- 15: handler tasks count zero tokens ------------------------------------------------------


@pytest.mark.parametrize("workflow", [Workflow.SEQUENTIAL, Workflow.PARALLEL])
def test_a_handler_task_counts_zero_tokens_so_the_run_total_stays_known(
    workflow: Workflow,
) -> None:
    def prepare(context: HandlerContext) -> str:
        return "prepared notes"

    prep = Task("Prepare notes", handler=prepare)
    writer = Agent("Writer", "Write", llm=ScriptedModel(["final text"], usage=Usage(5, 2)))
    write = Task("Write it up", agent=writer)
    output = Ensemble(tasks=[prep, write], workflow=workflow).run()
    metrics = output.metrics
    assert (metrics.total_input_tokens, metrics.total_output_tokens) == (5, 2)
    assert metrics.total_tokens == 7
    handler_output = output.output_for(prep)
    assert handler_output is not None
    handler_metrics = handler_output.metrics
    assert (handler_metrics.input_tokens, handler_metrics.output_tokens) == (0, 0)
    assert handler_metrics.total_tokens == 0


# --- 16: LangChain's malformed tool calls go back to the model --------------------------------


class BrokenCallThenText(BaseChatModel):
    """A LangChain chat model whose first answer is a tool call LangChain could not parse
    and whose second is text; it records every request."""

    requests: list[list[BaseMessage]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "broken-call-then-text"

    def bind_tools(self, tools: Any, **kwargs: Any) -> BrokenCallThenText:
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.requests.append(list(messages))
        if len(self.requests) == 1:
            broken = {
                "name": "add",
                "args": "{not json",
                "id": "c1",
                "error": "bad",
                "type": "invalid_tool_call",
            }
            message = AIMessage(content="", invalid_tool_calls=[broken])
        else:
            message = AIMessage(content="I could not add them.")
        return ChatResult(generations=[ChatGeneration(message=message)])


@pytest.mark.integration
def test_a_malformed_langchain_tool_call_goes_back_to_the_model_as_an_error() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = BrokenCallThenText()
    agent = Agent("Calculator", "Add numbers", llm=model, tools=[add])
    output = Ensemble(tasks=[Task("Add 2 and 3", agent=agent)]).run()
    assert output.raw == "I could not add them."
    assert len(model.requests) == 2
    answers = [m for m in model.requests[1] if isinstance(m, ToolMessage)]
    assert len(answers) == 1
    assert answers[0].tool_call_id == "c1"
    assert isinstance(answers[0].content, str)
    assert answers[0].content.startswith("Error:")


# --- 18: template errors name the template and every missing variable ------------------------


def test_a_template_that_resolves_to_blank_text_names_the_template() -> None:
    model = ScriptedModel(["never used"])
    with pytest.raises(ValidationError) as caught:
        Ensemble(tasks=[Task("{topic}")], llm=model).run(inputs={"topic": "  "})
    message = str(caught.value)
    assert "Task description '{topic}'" in message
    assert "topic" in message
    assert "Agent goal" not in message
    assert model.requests == []


def test_missing_variables_of_every_task_are_listed() -> None:
    model = ScriptedModel(["never used"] * 2)
    tasks = [Task("Research {company}"), Task("Write for {audience}")]
    with pytest.raises(PromptTemplateError) as caught:
        Ensemble(tasks=tasks, llm=model).run(inputs={"year": "2024"})
    assert caught.value.missing_variables == ("company", "audience")
    assert "company" in str(caught.value)
    assert "audience" in str(caught.value)
    assert model.requests == []


# --- 19: a long phase chain listed last-first -------------------------------------------------


def test_a_thousand_chained_phases_listed_last_first_validate_and_run() -> None:
    async def step(context: HandlerContext) -> str:
        return f"{context.description} done"

    phases: list[Phase] = []
    for i in range(1000):
        phases.append(Phase(f"phase-{i}", [Task(f"Step {i}", handler=step)], after=phases[-1:]))
    output = Ensemble(phases=list(reversed(phases))).run()
    assert [o.raw for o in output.task_outputs] == [f"Step {i} done" for i in range(1000)]
    assert len(output.phase_outputs) == 1000


# --- 20: traces survive big and odd text ------------------------------------------------------


def test_a_huge_answer_is_stored_once_in_the_trace() -> None:
    answer = "x" * 1_000_000
    output = Ensemble(tasks=[Task("Write a lot")], llm=ScriptedModel([answer])).run()
    assert output.raw == answer
    assert output.trace is not None
    text = output.trace.to_json()
    assert len(text) < 1_500_000
    assert text.count(answer) == 1


SURROGATE_DESCRIPTION = "Summarise the file caf\udc80.txt"
"""A description holding a lone surrogate, as a badly decoded file name gives."""


def export_with_a_lone_surrogate(directory: Path) -> tuple[str, Path]:
    """Run a task whose description holds a lone surrogate, exporting its trace to
    `directory`; return the run id and the file the trace should be in."""
    output = Ensemble(
        tasks=[Task(SURROGATE_DESCRIPTION)],
        llm=ScriptedModel(["summary"]),
        trace_exporter=JsonTraceExporter(directory),
    ).run()
    assert output.raw == "summary"
    assert output.trace is not None
    exported = json.loads(output.trace.to_json())
    assert [t["task_description"] for t in exported["task_traces"]] == [SURROGATE_DESCRIPTION]
    return output.trace.ensemble_id, directory / f"{output.trace.ensemble_id}.json"


def test_a_lone_surrogate_in_a_description_still_writes_a_trace_file(tmp_path: Path) -> None:
    run_id, written = export_with_a_lone_surrogate(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == [f"{run_id}.json"]
    assert json.loads(written.read_text(encoding="utf-8"))["ensemble_id"] == run_id


def test_a_trace_with_a_lone_surrogate_reads_back_with_load_trace(tmp_path: Path) -> None:
    run_id, written = export_with_a_lone_surrogate(tmp_path)
    loaded = load_trace(written)
    assert loaded.ensemble_id == run_id
    assert [t.final_output for t in loaded.task_traces] == ["summary"]
    assert [t.task_description for t in loaded.task_traces] == [SURROGATE_DESCRIPTION]


# --- 21, 22: errors say why, with no chained event-loop noise ---------------------------------


def chained(error: BaseException) -> Iterator[BaseException]:
    """Every exception reachable from `error` through ``__context__`` and ``__cause__``."""
    seen: set[int] = set()
    pending = [error]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        pending.extend(e for e in (current.__context__, current.__cause__) if e is not None)


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        pytest.param(lambda: Ensemble(tasks=[Task("No model")]), ValidationError, id="validation"),
        pytest.param(
            lambda: Ensemble(tasks=[Task("Doomed")], llm=failing_model("boom")),
            TaskExecutionError,
            id="task-failure",
        ),
        pytest.param(
            lambda: Ensemble(tasks=[Task("About {missing}")], llm=ScriptedModel([])),
            PromptTemplateError,
            id="template",
        ),
    ],
)
def test_errors_from_run_have_no_chained_no_running_event_loop(
    make: Callable[[], Ensemble], expected: type[Exception]
) -> None:
    with pytest.raises(expected) as caught:
        make().run()
    for error in chained(caught.value):
        assert not (isinstance(error, RuntimeError) and "no running event loop" in str(error))


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: Ensemble(tasks=[Task("Ask the provider")], llm=failing_model("provider down")),
            id="sequential",
        ),
        pytest.param(
            lambda: Ensemble(
                tasks=[Task("Ask the provider"), Task("Something else")],
                llm=failing_model("provider down"),
                workflow=Workflow.PARALLEL,
            ),
            id="parallel",
        ),
        pytest.param(
            lambda: Ensemble(
                phases=[Phase("only", [Task("Ask the provider")])],
                llm=failing_model("provider down"),
            ),
            id="phases",
        ),
    ],
)
def test_a_task_error_message_includes_the_root_cause(make: Callable[[], Ensemble]) -> None:
    with pytest.raises(TaskExecutionError) as caught:
        make().run()
    assert "provider down" in str(caught.value)
    assert "Ask the provider" in str(caught.value)
    assert str(cause_chain(caught.value)[-1]) == "provider down"


# --- 23: construction rejects what would fail later -------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"), [("background", 42), ("backstory", 42), ("response_format", 3)]
)
def test_agent_text_settings_must_be_strings(field: str, value: object) -> None:
    settings: dict[str, Any] = {field: value}
    with pytest.raises(ValidationError, match=f"Agent {field} must be a string"):
        Agent("A", "G", llm=ScriptedModel([]), **settings)


def test_a_listener_that_handles_nothing_is_rejected() -> None:
    with pytest.raises(ValidationError, match=r"Ensemble listeners\[0\] must be a listener"):
        Ensemble(tasks=[Task("T")], llm=ScriptedModel([]), listeners=[42])


class SyncChatModel:
    """A model whose chat is not async."""

    def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        raise AssertionError("never called")


def test_a_model_with_a_sync_chat_is_rejected_at_agent_construction() -> None:
    with pytest.raises(ValidationError, match=r"SyncChatModel\.chat is not"):
        Agent("A", "G", llm=SyncChatModel())


def test_a_tool_name_providers_reject_is_rejected() -> None:
    def get_weather(city: str) -> str:
        return "sunny"

    with pytest.raises(ValidationError, match="'get weather'"):
        tool(name="get weather")(get_weather)


class MisspeltListener(EnsembleListener):
    def on_task_start(self, event: TaskStartEvent) -> None:
        pass

    def on_task_compelte(self, event: object) -> None:
        pass


def test_a_misspelt_listener_method_is_an_error_naming_it() -> None:
    with pytest.raises(ValidationError) as raised:
        Ensemble(tasks=[Task("T")], llm=ScriptedModel([]), listeners=[MisspeltListener()])
    message = str(raised.value)
    assert message.startswith("Ensemble listeners[0] defines on_task_compelte, which no event")
    assert "did you mean on_task_compelte -> on_task_complete?" in message


def test_a_method_named_after_the_event_type_is_called_too() -> None:
    seen: list[tuple[str, str]] = []

    class ByType:
        def on_task_started(self, event: TaskStartEvent) -> None:
            seen.append(("started", event.type))

        async def on_task_completed(self, event: TaskCompleteEvent) -> None:
            seen.append(("completed", event.raw))

        def on_tool_called(self, event: object) -> None:
            seen.append(("tool", "called"))

    Ensemble(tasks=[Task("T")], llm=ScriptedModel(["done"]), listeners=[ByType()]).run()
    assert seen == [("started", "task_started"), ("completed", "done")]


# --- 24: models that return the wrong thing, missing credentials, bad base URLs ---------------


class ReturnsWrongThing:
    """A model whose chat returns `value` instead of a ChatResponse."""

    def __init__(self, value: object) -> None:
        self.value = value

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> Any:
        return self.value


@pytest.mark.parametrize("value", [42, None, "plain text"], ids=["int", "none", "str"])
def test_a_model_returning_something_else_than_a_chat_response_fails_clearly(
    value: object,
) -> None:
    agent = Agent("A", "G", llm=ReturnsWrongThing(value))
    with pytest.raises(TaskExecutionError) as caught:
        Ensemble(tasks=[Task("Answer", agent=agent)]).run()
    cause = caught.value.__cause__
    assert isinstance(cause, AgentExecutionError)
    assert "a ChatModel must return a ChatResponse" in str(cause)
    assert "a ChatModel must return a ChatResponse" in str(caught.value)


async def test_openai_without_an_api_key_fails_naming_it_before_any_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    attempts: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        attempts.append(address)
        raise OSError("no connections in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    agent = Agent("A", "G", llm=OpenAIChatModel("gpt-4o-mini"))
    with pytest.raises(TaskExecutionError) as caught:
        await Ensemble(tasks=[Task("Answer", agent=agent)]).arun()
    assert "OPENAI_API_KEY" in str(caught.value)
    assert attempts == []


def test_a_base_url_without_a_scheme_is_rejected_at_construction() -> None:
    with pytest.raises(ValidationError, match="base_url must start with http:// or https://"):
        OpenAIChatModel("m", base_url="localhost:8000")
    with pytest.raises(ValidationError, match="must start with http:// or https://"):
        Agent("A", "G", llm="openai-compatible:m@localhost:8000/v1")
    with pytest.raises(ValidationError, match="must start with http:// or https://"):
        Ensemble(tasks=[Task("T")], llm="openai-compatible:m@localhost:8000/v1")


# --- 25: a failing listener is logged once, then counted --------------------------------------


class BrokenListener(EnsembleListener):
    def on_task_start(self, event: TaskStartEvent) -> None:
        raise RuntimeError("listener bug")


def test_a_listener_that_always_raises_is_logged_once_then_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="agentensemble")
    output = Ensemble(
        tasks=[Task("One"), Task("Two"), Task("Three")],
        llm=ScriptedModel(["1", "2", "3"]),
        listeners=[BrokenListener()],
    ).run()
    assert [o.raw for o in output.task_outputs] == ["1", "2", "3"]
    mine = [r for r in caplog.records if "BrokenListener" in r.getMessage()]
    with_traceback = [r for r in mine if r.exc_info]
    assert len(with_traceback) == 1
    error = with_traceback[0].exc_info
    assert error is not None
    assert isinstance(error[1], RuntimeError)
    summaries = [r for r in mine if "raised 3 times" in r.getMessage()]
    assert len(summaries) == 1
    assert mine.index(summaries[0]) > mine.index(with_traceback[0])
    assert len(mine) == 2


def test_a_catch_all_listener_that_raises_is_logged_once_whatever_the_event_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class FailsOnEverything(EnsembleListener):
        def on_event(self, event: object) -> None:
            raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING, logger="agentensemble"):
        first = Task("a")
        Ensemble(
            tasks=[first, Task("b", context=[first])],
            llm=ScriptedModel(["x", "y"]),
            listeners=[FailsOnEverything()],
            workflow=Workflow.SEQUENTIAL,
        ).run()
    mine = [r for r in caplog.records if "FailsOnEverything" in r.getMessage()]
    assert len([r for r in mine if r.exc_info]) == 1  # one traceback, not one per event type
    summaries = [r.getMessage() for r in mine if "times in on_event" in r.getMessage()]
    assert summaries == ["Listener FailsOnEverything raised 12 times in on_event during this run"]


def test_nothing_is_printed_when_the_application_configures_no_logging() -> None:
    import subprocess
    import sys

    code = (
        "from agentensemble import Agent, Ensemble, ScriptedModel, Task, tool, tool_call\n"
        "@tool\n"
        "def fails(x: str) -> str:\n"
        "    '''Fails.'''\n"
        "    raise ValueError('nope')\n"
        "llm = ScriptedModel([tool_call('fails', x='1'), 'done'])\n"
        "agent = Agent('A', 'g', llm=llm, tools=[fails])\n"
        "Ensemble(tasks=[Task('t', agent=agent)]).run()\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert (finished.stdout, finished.stderr) == ("", "")


def test_two_methods_for_one_kind_of_event_are_refused() -> None:
    class Both:
        def on_task_complete(self, event: object) -> None:
            pass

        def on_task_completed(self, event: object) -> None:
            pass

    with pytest.raises(ValidationError, match="defines on_task_complete and on_task_completed"):
        Ensemble(tasks=[Task("T")], llm=ScriptedModel([]), listeners=[Both()])


def test_a_listener_with_only_a_misspelt_method_is_told_the_closest_name() -> None:
    class OnlyTypo:
        def on_task_compelte(self, event: object) -> None:
            pass

    with pytest.raises(ValidationError, match="did you mean on_task_compelte -> on_task_complete"):
        Ensemble(tasks=[Task("T")], llm=ScriptedModel([]), listeners=[OnlyTypo()])


def _bad_guardrail_two(value: object, extra: object) -> None:
    pass


def _bad_guardrail_none() -> None:
    pass


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: Task("t", input_guardrails=[_bad_guardrail_two]),  # type: ignore[list-item]
            r"Task input_guardrails element at index 0 must be a callable taking a "
            r"GuardrailInput, got: .*_bad_guardrail_two.* \(parameters \(value: 'object', "
            r"extra: 'object'\)",
            id="guardrail-with-two-parameters",
        ),
        pytest.param(
            lambda: Task("t", output_guardrails=[_bad_guardrail_none]),  # type: ignore[list-item]
            r"must be a callable taking a GuardrailOutput, got: .*_bad_guardrail_none",
            id="guardrail-without-parameters",
        ),
        pytest.param(
            lambda: EntityMemory("notadict"),  # type: ignore[arg-type]
            r"EntityMemory facts must be a mapping of entity name to fact, got: 'notadict'",
            id="entity-memory-not-a-mapping",
        ),
        pytest.param(
            lambda: EntityMemory({"Acme": " "}),
            r"fact about 'Acme' must be a non-blank string, got: ' '",
            id="entity-memory-blank-fact",
        ),
        pytest.param(
            lambda: HierarchicalConstraints(required_stages=[[]]),
            r"HierarchicalConstraints\.required_stages\[0\] must name at least one role",
            id="empty-stage",
        ),
        pytest.param(
            lambda: Agent("R", "g", llm=ScriptedModel([]), verbose="no"),  # type: ignore[arg-type]
            r"Agent verbose must be True or False, got: 'no'",
            id="agent-verbose-not-a-bool",
        ),
        pytest.param(
            lambda: tool(name="")(_bad_guardrail_none),
            r"Tool name must be 1-64 letters, digits, '_' or '-' .*got: ''$",
            id="blank-tool-name",
        ),
    ],
)
def test_bad_settings_are_refused_at_construction(
    build: Callable[[], object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        build()


def test_a_context_format_may_be_given_by_name_like_the_workflow() -> None:
    ensemble = Ensemble(tasks=[Task("t")], llm=ScriptedModel([]), context_format="json")  # type: ignore[arg-type]
    assert ensemble.context_format is ContextFormat.JSON


def test_a_wrapped_guardrail_that_takes_one_argument_is_accepted() -> None:
    import functools

    def with_limit(value: object, limit: int) -> GuardrailResult:
        return GuardrailResult.success()

    @functools.wraps(with_limit)
    def guard(value: object) -> GuardrailResult:
        return with_limit(value, 3)

    assert Task("t", input_guardrails=[guard]).input_guardrails == (guard,)
