"""A run's record is its event stream (DESIGN 4b): for real runs of every workflow and
capability, every event survives its wire form (`serialize_event` -> JSON -> `parse_event`),
the events (live or read back) fold into the run's own trace (`ExecutionTrace.from_events`),
and `seq` numbers every event of the run 1, 2, 3 ... from `ensemble_started` to
`ensemble_completed`."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import timedelta
from typing import Any, Protocol

import pytest
from pydantic import BaseModel

from agentensemble import (
    Agent,
    CaptureMode,
    CostConfiguration,
    DelegationPolicyResult,
    DelegationRequest,
    Ensemble,
    EnsembleListener,
    EnsembleOutput,
    ExitReason,
    FunctionModel,
    HandlerContext,
    HookDecision,
    HumanInputTool,
    LLMAgentSynthesizer,
    ParallelErrorStrategy,
    ParallelExecutionError,
    PendingToolCall,
    Phase,
    Review,
    ReviewDecision,
    ReviewHandler,
    ReviewRequest,
    RunOptions,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolCall,
    ToolContext,
    ToolResult,
    ToolSpec,
    Usage,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.mapreduce import MapReduceEnsemble
from agentensemble.memory import EntityMemory, MemoryScope, MemoryStore, MemoryTool
from agentensemble.models import Message, SystemMessage
from agentensemble.observability import (
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    Event,
    ExecutionTrace,
    LlmIterationCompletedEvent,
    LlmIterationStartedEvent,
    TaskCompleteEvent,
    TokenEvent,
    ToolCallEvent,
    parse_event,
    serialize_event,
)
from agentensemble.review import OnTimeoutAction
from tests.mapreduce.helpers import Recorder as MapReduceRecorder
from tests.review.helpers import Scripted, Silent

# ---- the recorder and the exporter -------------------------------------------------------


class Collect(EnsembleListener):
    """Every event of the run, in the order delivered."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    async def on_event(self, event: Event) -> None:
        self.events.append(event)

    def on_token(self, event: TokenEvent) -> None:
        """Defined, so that models stream (their tokens reach `on_event` too)."""


class KeepTrace:
    """A trace exporter keeping the traces it is given (and writing no file)."""

    def __init__(self) -> None:
        self.traces: list[ExecutionTrace] = []

    def export(self, trace: ExecutionTrace) -> None:
        self.traces.append(trace)


class Runnable(Protocol):
    async def arun(
        self, inputs: Mapping[str, str] | None = None, options: RunOptions | None = None
    ) -> EnsembleOutput: ...


# ---- models, tools and handlers ----------------------------------------------------------


def task_line(messages: Sequence[Message]) -> str:
    """The task description line of a user prompt (the line after ``## Task``)."""
    lines = (messages[-1].text or "").splitlines()
    return lines[lines.index("## Task") + 1] if "## Task" in lines else lines[0]


def echo(*, usage: Usage | None = None) -> FunctionModel:
    """Answers every task with ``done: {task}``."""
    return FunctionModel(
        lambda messages, tools: f"done: {task_line(messages)}", usage=usage or Usage(5, 2)
    )


def worker_model() -> FunctionModel:
    """Answers ``{role} did: {task}`` (the delegation tests' worker)."""

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        role = (messages[0].text or "").splitlines()[0].removeprefix("You are ").rstrip(".")
        return f"{role} did: {task_line(messages)}"

    return FunctionModel(answer, usage=Usage(11, 4))


@tool
def lookup(key: str) -> ToolResult:
    """Look a key up (sync, with a structured result)."""
    return ToolResult.success(f"value of {key}", structured={"key": key, "size": len(key)})


@tool
async def fetch(url: str) -> str:
    """Fetch a page (async)."""
    await asyncio.sleep(0)
    return f"page at {url}: ünïcödé \u2603 and a lone backslash \\"


@tool
def explode(reason: str) -> str:
    """A tool that fails."""
    raise ValueError(reason)


@tool
async def save_note(context: ToolContext, name: str, text: str) -> str:
    """Save a note (asks a reviewer first)."""
    decision = await context.request_approval(f"Save note '{name}': {text}", require_handler=True)
    if isinstance(decision, ReviewDecision.Edit):
        text = decision.revised_output
    return f"saved {name}: {text}"


class Report(BaseModel):
    title: str
    score: int
    tags: list[str]


REPORT_JSON = '{"title": "Q3", "score": 8, "tags": ["a", "b"]}'
COST = CostConfiguration("0.000001", "0.000002")


# ---- the runs ------------------------------------------------------------------------------


def sequential_with_tools(mode: CaptureMode) -> Callable[[KeepTrace], Runnable]:
    def build(exporter: KeepTrace) -> Runnable:
        llm = ScriptedModel(
            [
                [
                    tool_call("lookup", key="a"),
                    tool_call("fetch", url="https://example.invalid/x"),
                    ToolCall("bad", "lookup", "{oops"),
                ],
                tool_call("explode", reason="kaboom"),
                "The answer is 42.\nWith a second line.",
            ],
            usage=Usage(7, 3),
        )
        worker = Agent("Worker", "Work", llm=llm, tools=[lookup, fetch, explode], background="Hm.")
        hasty = Agent(
            "Hasty",
            "Hurry",
            llm=ScriptedModel(
                [[tool_call("lookup", key="b"), tool_call("lookup", key="c")], "hurried"]
            ),
            tools=[lookup],
            max_iterations=1,
        )
        first = Task("Find the {thing}", agent=worker, expected_output="A fact")
        second = Task("Hurry up", agent=hasty)
        third = Task(
            "Shout it", context=[first], handler=lambda ctx: ctx.context_outputs[0].raw.upper()
        )
        return Ensemble(
            tasks=[first, second, third],
            workflow=Workflow.SEQUENTIAL,
            inputs={"thing": "value"},
            capture_mode=mode,
            cost_configuration=COST,
            trace_exporter=exporter,
            name="sequential",
        )

    return build


def parallel_dag(exporter: KeepTrace) -> Runnable:
    a, b = Task("Research A"), Task("Research B")
    c = Task("Combine", context=[a, b])
    d = Task("Polish", context=[c], handler=lambda ctx: f"polished {ctx.context_outputs[0].raw}")
    return Ensemble(
        tasks=[a, b, c, d],
        llm=echo(),
        workflow=Workflow.PARALLEL,
        cost_configuration=COST,
        trace_exporter=exporter,
    )


def parallel_continue_on_error(exporter: KeepTrace) -> Runnable:
    def broken(context: HandlerContext) -> str:
        raise RuntimeError("disk full")

    a = Task("Fine")
    b = Task("Break", handler=broken)
    c = Task("After fine", context=[a])
    d = Task("After broken", context=[b])  # skipped: its context failed
    return Ensemble(
        tasks=[a, b, c, d],
        llm=echo(),
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
        trace_exporter=exporter,
    )


def failing_sequential(exporter: KeepTrace) -> Runnable:
    # the model asks for a tool, then has no reply left: the task fails mid-conversation
    llm = ScriptedModel([tool_call("lookup", key="a")])
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup])
    return Ensemble(
        tasks=[Task("Fine", handler=lambda ctx: "ok"), Task("Fail", agent=agent), Task("Never")],
        llm=echo(),
        capture_mode=CaptureMode.STANDARD,
        trace_exporter=exporter,
    )


def phases_with_synthesis(exporter: KeepTrace) -> Runnable:
    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        system = messages[0].text if isinstance(messages[0], SystemMessage) else ""
        if system.startswith("You design the persona"):
            return '{"role": "Specialist", "goal": "Do it well", "background": "Careful."}'
        return f"done: {task_line(messages)}"

    one, two = Task("One"), Task("Two")
    first = Phase("first", [one, two], workflow=Workflow.PARALLEL)
    second = Phase("second", [Task("Three", context=[one])], after=[first])
    third = Phase("third", [Task("Four", handler=lambda ctx: "four")], after=[first])
    return Ensemble(
        phases=[first, second, third],
        llm=FunctionModel(reply, usage=Usage(3, 1)),
        agent_synthesizer=LLMAgentSynthesizer(),
        cost_configuration=COST,
        trace_exporter=exporter,
    )


def delegate_task(role: str, description: str) -> ToolCall:
    return tool_call("delegate_task", agent_role=role, task_description=description)


def hierarchical(exporter: KeepTrace) -> Runnable:
    workers = worker_model()
    agents = [Agent(role, f"{role} goal", llm=workers) for role in ("Researcher", "Writer")]
    manager = ScriptedModel(
        [
            delegate_task("Researcher", "Find three facts"),
            delegate_task("Nobody", "Refused: no such worker"),
            [delegate_task("Writer", "Write it up"), delegate_task("Researcher", "Check it")],
            "Final: facts and article",
        ],
        usage=Usage(20, 5),
    )
    return Ensemble(
        tasks=[
            Task("Research the topic", agent=agents[0]),
            Task("Write the article", agent=agents[1]),
        ],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
        capture_mode=CaptureMode.STANDARD,
        trace_exporter=exporter,
    )


def delegate(role: str, description: str) -> ToolCall:
    return tool_call("delegate", agent_role=role, task_description=description)


def peer_delegation(exporter: KeepTrace) -> Runnable:
    models = {
        "A": ScriptedModel(
            [
                delegate("B", "Part for B"),
                delegate("Z", "Nobody has this role"),  # refused
                delegate("A", "Myself"),  # refused
                "A's answer",
            ]
        ),
        # at depth 1, B's delegation to C is refused and B does it itself
        "B": ScriptedModel([delegate("C", "Part for C"), "B's answer"]),
        "C": ScriptedModel(["C's answer"]),
    }
    agents = {
        role: Agent(role, f"{role} goal", llm=model, allow_delegation=role != "C")
        for role, model in models.items()
    }
    return Ensemble(
        tasks=[Task("Main job", agent=agents["A"])],
        agents=[agents["B"], agents["C"]],
        max_delegation_depth=1,
        capture_mode=CaptureMode.FULL,
        trace_exporter=exporter,
    )


def peer_delegation_chain(exporter: KeepTrace) -> Runnable:
    models = {
        "A": ScriptedModel([delegate("B", "Part for B"), "A's answer"], usage=Usage(1, 1)),
        "B": ScriptedModel([delegate("C", "Part for C"), "B's answer"], usage=Usage(2, 2)),
        "C": ScriptedModel(["C's answer"], usage=Usage(3, 3)),
    }
    agents = {
        role: Agent(role, f"{role} goal", llm=model, allow_delegation=role != "C")
        for role, model in models.items()
    }
    return Ensemble(
        tasks=[Task("Main job", agent=agents["A"]), Task("Then", llm=echo())],
        agents=[agents["B"], agents["C"]],
        max_delegation_depth=2,
        cost_configuration=COST,
        trace_exporter=exporter,
    )


def review_gates(exporter: KeepTrace) -> Runnable:
    def decide(request: ReviewRequest) -> ReviewDecision:
        if request.task_description == "b":
            return ReviewDecision.Edit("edited b")
        return ReviewDecision.Continue()

    clerk = Agent(
        "Clerk",
        "Keep notes",
        llm=ScriptedModel([tool_call("save_note", name="todo", text="buy milk"), "Saved."]),
        tools=[save_note],
    )
    a = Task("a", before_review=Review.required())
    b = Task("b", context=[a], review=Review.required(prompt="Check b"))
    c = Task("Note it", agent=clerk, review=Review(timeout=60))
    return Ensemble(
        tasks=[a, b, c],
        llm=echo(),
        workflow=Workflow.SEQUENTIAL,
        review_handler=Scripted(decide),
        trace_exporter=exporter,
    )


def review_auto_approve(exporter: KeepTrace) -> Runnable:
    return Ensemble(
        tasks=[Task("a", before_review=Review.required()), Task("b", review=Review.required())],
        llm=echo(),
        review_handler=ReviewHandler.auto_approve(),
        trace_exporter=exporter,
    )


def review_timed_out(exporter: KeepTrace) -> Runnable:
    quick = timedelta(milliseconds=20)
    return Ensemble(
        tasks=[Task("a", review=Review(timeout=quick, on_timeout=OnTimeoutAction.CONTINUE))],
        llm=echo(),
        review_handler=Silent(),
        trace_exporter=exporter,
    )


def memory(exporter: KeepTrace) -> Runnable:
    store = MemoryStore.in_memory()
    clerk = Agent(
        "Clerk",
        "Remember things",
        llm=ScriptedModel(
            [
                tool_call("store_memory", key="capital", value="Paris"),
                tool_call("retrieve_memory", query="capital"),
                "Paris it is",
            ]
        ),
        tools=[MemoryTool("facts")],
    )
    return Ensemble(
        tasks=[
            Task("Take notes", memory=[MemoryScope.of("notes").keep_last_entries(1)]),
            Task("Use notes", memory=["notes"]),
            Task("Note the capital", agent=clerk),
        ],
        llm=echo(),
        memory_store=store,
        entity_memory=EntityMemory({"Acme": "a rocket maker"}),
        trace_exporter=exporter,
    )


def short_term_memory(exporter: KeepTrace) -> Runnable:
    model = echo()
    writer = Agent("Writer", "Write", llm=model)
    first, second = Task("One", agent=writer), Task("Two", agent=writer)
    return Ensemble(
        tasks=[first, second, Task("Three", context=[second], agent=writer)],
        workflow=Workflow.SEQUENTIAL,
        short_term_memory=True,
        capture_mode=CaptureMode.STANDARD,
        trace_exporter=exporter,
    )


def structured_output(exporter: KeepTrace) -> Runnable:
    model = ScriptedModel(["Here you go: not json at all", f"```json\n{REPORT_JSON}\n```"])
    writer = Agent("Writer", "Write reports", llm=model)
    report = Task("Write the Q3 report", agent=writer, output_type=Report)
    return Ensemble(
        tasks=[
            report,
            Task("Rate it", context=[report], output_type=int, llm=ScriptedModel(["9"])),
        ],
        capture_mode=CaptureMode.FULL,
        trace_exporter=exporter,
    )


def handler_tasks(exporter: KeepTrace) -> Runnable:
    first = Task("Compute", handler=lambda ctx: "42")
    typed = Task(
        "Report",
        context=[first],
        output_type=Report,
        handler=lambda ctx: ToolResult.success(
            "report", structured={"title": ctx.context_outputs[0].raw, "score": 1, "tags": []}
        ),
    )
    return Ensemble(tasks=[first, typed], trace_exporter=exporter)


def map_reduce_static(exporter: KeepTrace) -> Runnable:
    recorder = MapReduceRecorder()
    return MapReduceEnsemble(
        items=list(range(7)),
        map_task=recorder.map_task,
        reduce_task=recorder.reduce_task,
        chunk_size=3,
        trace_exporter=exporter,
    )


def map_reduce_static_with_a_model(exporter: KeepTrace) -> Runnable:
    return MapReduceEnsemble.of(
        echo(),
        ["apples", "pears", "plums"],
        "Describe",
        "Combine",
        chunk_size=2,
        capture_mode=CaptureMode.STANDARD,
        trace_exporter=exporter,
    )


def map_reduce_adaptive(exporter: KeepTrace) -> Runnable:
    recorder = MapReduceRecorder(map_text=lambda item: "x" * 400, reduce_text=lambda _: "short")
    return MapReduceEnsemble(
        items=list(range(8)),
        map_task=recorder.map_task,
        reduce_task=recorder.reduce_task,
        target_token_budget=250,
        trace_exporter=exporter,
    )


class Guard:
    """A before-hook vetoing one tool call and changing another's arguments."""

    def before_tool_call(self, call: PendingToolCall) -> HookDecision | None:
        if "veto" in call.arguments:
            return HookDecision.veto("not this one")
        if "change" in call.arguments:
            return HookDecision.change(arguments={"key": "changed"})
        return None


def hooks(exporter: KeepTrace) -> Runnable:
    llm = ScriptedModel(
        [[tool_call("lookup", key="veto"), tool_call("lookup", key="change")], "done"]
    )
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup])
    return Ensemble(
        tasks=[Task("Look", agent=agent)],
        hooks=[Guard()],
        capture_mode=CaptureMode.FULL,
        trace_exporter=exporter,
    )


def delegation_policy(exporter: KeepTrace) -> Runnable:
    def narrow(request: DelegationRequest, context: object) -> DelegationPolicyResult:
        return DelegationPolicyResult.modify(
            request.with_changes(
                scope={"region": "EU", "years": (2024, 2025)},
                expected_output_schema='{"total": number}',
            )
        )

    model = ScriptedModel([delegate("B", "Sum the sales"), "ok"])
    a = Agent("A", "goal", llm=model, allow_delegation=True)
    b = Agent("B", "goal", llm=ScriptedModel(['{"total": 3}']))
    return Ensemble(
        tasks=[Task("Job", agent=a)],
        agents=[b],
        delegation_policies=[narrow],
        trace_exporter=exporter,
    )


def human_input(exporter: KeepTrace) -> Runnable:
    llm = ScriptedModel(
        [tool_call("human_input", question="Which colour?"), "Blue it is."],
        usage=Usage(None, 3),  # input tokens unknown
    )
    agent = Agent("Painter", "Paint", llm=llm, tools=[HumanInputTool()])
    return Ensemble(
        tasks=[Task("Pick a colour", agent=agent)],
        review_handler=Scripted(lambda request: ReviewDecision.Edit("blue")),
        trace_exporter=exporter,
    )


STREAMED = "Streaming  keeps every space,\nnewline and  word exactly."


def streaming(exporter: KeepTrace) -> Runnable:
    return Ensemble(
        tasks=[Task("Explain"), Task("Again")],
        llm=ScriptedModel([STREAMED, "two  words"], usage=Usage(4, 9)),
        capture_mode=CaptureMode.FULL,
        trace_exporter=exporter,
    )


def timed_out(exporter: KeepTrace) -> Runnable:
    calls = 0

    async def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal calls
        calls += 1
        if calls > 1:
            await asyncio.Event().wait()  # never set: only the run's deadline ends this
        return f"answer {calls}"

    return Ensemble(
        tasks=[Task("One"), Task("Two"), Task("Three")],
        llm=FunctionModel(reply, usage=Usage(2, 2)),
        cost_configuration=COST,
        trace_exporter=exporter,
    )


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[KeepTrace], Runnable]
    expect: frozenset[str] = frozenset()
    """Event types the run must have emitted (that the case does what it says)."""
    raises: type[BaseException] | None = None
    exit_reason: ExitReason | None = ExitReason.COMPLETED
    timeout: float | None = None
    concurrent: bool = False
    """Whether tasks run at once (then a listener's sync `on_token`, run in a worker thread,
    lets another task's events overtake a token's `on_event`: delivery is in `seq` order
    per task only)."""
    marks: tuple[pytest.MarkDecorator, ...] = field(default=())


def types(*names: str) -> frozenset[str]:
    return frozenset(names)


AGENT_TASK = types("task_started", "task_input", "llm_iteration_started", "llm_iteration_completed")

CASES = [
    *(
        Case(
            f"sequential-tools-{mode.value.lower()}",
            sequential_with_tools(mode),
            AGENT_TASK | types("tool_called", "token", "task_completed"),
        )
        for mode in (CaptureMode.OFF, CaptureMode.STANDARD, CaptureMode.FULL)
    ),
    Case("parallel-dag", parallel_dag, AGENT_TASK | types("token"), concurrent=True),
    Case(
        "parallel-continue-on-error",
        parallel_continue_on_error,
        AGENT_TASK | types("task_failed"),
        raises=ParallelExecutionError,
        exit_reason=None,
        concurrent=True,
    ),
    Case(
        "sequential-failure",
        failing_sequential,
        AGENT_TASK | types("task_failed", "tool_called"),
        raises=TaskExecutionError,
        exit_reason=None,
    ),
    Case("phases-with-agent-synthesis", phases_with_synthesis, AGENT_TASK, concurrent=True),
    Case(
        "hierarchical",
        hierarchical,
        AGENT_TASK | types("delegation_started", "delegation_completed", "delegation_failed"),
        concurrent=True,  # two delegations in one turn
    ),
    Case(
        "peer-delegation-refused",
        peer_delegation,
        AGENT_TASK | types("delegation_started", "delegation_completed", "delegation_failed"),
    ),
    Case(
        "peer-delegation-chain",
        peer_delegation_chain,
        AGENT_TASK | types("delegation_started", "delegation_completed"),
    ),
    Case(
        "review-gates-and-tool-approval",
        review_gates,
        AGENT_TASK | types("review_requested", "review_decided", "tool_called"),
    ),
    Case(
        "review-auto-approve",
        review_auto_approve,
        AGENT_TASK | types("review_requested", "review_decided"),
    ),
    Case("review-timed-out", review_timed_out, types("review_requested", "review_timed_out")),
    Case("hooks", hooks, AGENT_TASK | types("tool_called")),
    Case(
        "delegation-policy-scope",
        delegation_policy,
        AGENT_TASK | types("delegation_started", "delegation_completed"),
    ),
    Case("human-input", human_input, AGENT_TASK | types("review_requested", "review_decided")),
    Case("memory", memory, AGENT_TASK | types("memory_operation", "tool_called")),
    Case("short-term-memory", short_term_memory, AGENT_TASK | types("memory_operation")),
    Case("structured-output-retry", structured_output, AGENT_TASK | types("task_completed")),
    Case("handler-tasks", handler_tasks, types("task_started", "task_completed")),
    Case(
        "map-reduce-static",
        map_reduce_static,
        types("task_started", "task_completed"),
        concurrent=True,
    ),
    Case("map-reduce-static-model", map_reduce_static_with_a_model, AGENT_TASK, concurrent=True),
    Case(
        "map-reduce-adaptive",
        map_reduce_adaptive,
        types("task_started", "task_completed"),
        concurrent=True,
    ),
    Case("token-streaming", streaming, AGENT_TASK | types("token")),
    Case(
        "timed-out",
        timed_out,
        AGENT_TASK | types("task_failed"),
        exit_reason=ExitReason.TIMEOUT,
        timeout=0.05,
    ),
]


@pytest.fixture(autouse=True)
def _no_capture_mode_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTENSEMBLE_CAPTURE_MODE", raising=False)


async def run_case(case: Case) -> tuple[list[Event], ExecutionTrace]:
    """Run the case; its events as delivered and its live trace (the output's, or the
    exported one when the run raised)."""
    collect, exporter = Collect(), KeepTrace()
    runnable = case.build(exporter)
    options = RunOptions(listeners=[collect], timeout=case.timeout)
    if case.raises is not None:
        with pytest.raises(case.raises):
            await runnable.arun(options=options)
        (live,) = exporter.traces
        assert live.exit_reason == "ERROR"
        return collect.events, live
    output = await runnable.arun(options=options)
    assert output.exit_reason is case.exit_reason
    assert output.trace is not None
    assert exporter.traces == [output.trace]  # what was exported is the run's trace
    return collect.events, output.trace


def first_difference(left: Any, right: Any, path: str = "") -> str | None:
    """Where two values first differ (a dotted path and both values), else None."""
    if is_dataclass(left) and type(left) is type(right):
        for item in fields(left):
            found = first_difference(
                getattr(left, item.name), getattr(right, item.name), f"{path}.{item.name}"
            )
            if found:
                return found
        return None
    if isinstance(left, tuple | list) and isinstance(right, tuple | list):
        for index, (a, b) in enumerate(zip(left, right, strict=False)):
            found = first_difference(a, b, f"{path}[{index}]")
            if found:
                return found
        if len(left) != len(right):
            return f"{path}: length {len(left)} != {len(right)}"
        return None
    if left != right:
        return f"{path}: {left!r} != {right!r}"
    return None


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name, marks=c.marks) for c in CASES])
async def test_the_event_record_round_trips_and_folds_into_the_live_trace(case: Case) -> None:
    events, live = await run_case(case)

    # the case exercised what it claims to
    emitted = {event.type for event in events}
    assert case.expect <= emitted, f"missing: {sorted(case.expect - emitted)}"

    # 3. one run: seq 1, 2, 3 ... over every event, one ensemble id, started ... completed
    seqs = [event.seq for event in events]
    assert sorted(seqs) == list(range(1, len(events) + 1))
    if not case.concurrent:
        assert seqs == sorted(seqs)
    by_task: dict[str, list[int]] = {}
    for event in events:
        by_task.setdefault(getattr(event, "task_id", ""), []).append(event.seq)
    assert all(numbers == sorted(numbers) for numbers in by_task.values())
    assert {event.ensemble_id for event in events} == {live.ensemble_id}
    assert isinstance(events[0], EnsembleStartedEvent)
    assert isinstance(events[-1], EnsembleCompletedEvent)
    assert sum(isinstance(e, EnsembleStartedEvent | EnsembleCompletedEvent) for e in events) == 2

    # 1. every event is JSON-safe and reads back equal
    parsed: list[Event] = []
    for event in events:
        message = serialize_event(event)
        text = json.dumps(message, allow_nan=False)
        assert json.loads(text) == message, f"not JSON-native: {message}"
        back = parse_event(json.loads(text))
        assert back == event, first_difference(back, event, event.type)
        parsed.append(back)

    # 2. the events, live or read back, fold into the live trace
    from_live = ExecutionTrace.from_events(events)
    from_parsed = ExecutionTrace.from_events(parsed)
    from_log = ExecutionTrace.from_events(sorted(parsed, key=lambda event: event.seq))
    assert from_live == live, first_difference(from_live, live, "trace")
    assert from_parsed == live, first_difference(from_parsed, live, "trace")
    assert from_log == live, first_difference(from_log, live, "trace")
    assert from_parsed.to_json() == live.to_json()
    assert (
        ExecutionTrace.from_json(from_parsed.to_json()).to_json()
        == ExecutionTrace.from_json(live.to_json()).to_json()
    )
    assert ExecutionTrace.from_json(from_parsed.to_json()) == ExecutionTrace.from_json(
        live.to_json()
    )


def test_case_names_are_unique() -> None:
    assert len({case.name for case in CASES}) == len(CASES)


async def test_streamed_tokens_reassemble_each_answer() -> None:
    events, live = await run_case(CASES[[c.name for c in CASES].index("token-streaming")])
    tokens = [event for event in events if isinstance(event, TokenEvent)]
    by_task: dict[str, str] = {}
    for token in tokens:
        by_task[token.task_id] = by_task.get(token.task_id, "") + token.token
    assert sorted(by_task.values()) == sorted([STREAMED, "two  words"])
    assert [task.final_output for task in live.task_traces] == [STREAMED, "two  words"]


async def test_costs_and_planning_calls_are_in_the_folded_trace() -> None:
    events, live = await run_case(
        CASES[[c.name for c in CASES].index("phases-with-agent-synthesis")]
    )
    folded = ExecutionTrace.from_events(parse_event(serialize_event(e)) for e in events)
    assert folded.total_cost_estimate is not None
    assert folded.total_cost_estimate == live.total_cost_estimate
    assert len(folded.agent_synthesis) == 3  # the handler task needs no agent


async def test_a_listener_that_changes_an_events_data_leaves_the_trace_as_it_was() -> None:
    class Vandal(EnsembleListener):
        async def on_task_complete(self, event: TaskCompleteEvent) -> None:
            assert isinstance(event.parsed_output, dict)
            event.parsed_output["title"] = "changed"
            event.parsed_output["tags"].append("added")

        async def on_tool_call(self, event: ToolCallEvent) -> None:
            assert isinstance(event.structured_result, dict)
            event.structured_result["rows"].clear()

    @tool
    async def lookup(key: str) -> ToolResult:
        """Look a key up."""
        return ToolResult.success("found", structured={"rows": [key, key]})

    model = ScriptedModel([tool_call("lookup", key="q3"), REPORT_JSON])
    agent = Agent("Writer", "Write", llm=model, tools=[lookup])
    report = Task("Write the Q3 report", agent=agent, output_type=Report)
    output = await Ensemble(tasks=[report], listeners=[Vandal()]).arun()

    assert output.trace is not None
    trace = output.trace.task_traces[0]
    assert trace.parsed_output == {"title": "Q3", "score": 8, "tags": ["a", "b"]}
    assert trace.llm_interactions[0].tool_calls[0].structured_output == {"rows": ["q3", "q3"]}


async def test_a_model_call_without_its_start_event_folds_from_its_answer() -> None:
    # a log that lost its llm_iteration_started events: each call starts when it answered,
    # and a tool call still belongs to the model call that asked for it
    collect = Collect()
    model = ScriptedModel([tool_call("lookup", key="a"), "found"])
    agent = Agent("Clerk", "Look up", llm=model, tools=[lookup])
    await Ensemble(tasks=[Task("Find a", agent=agent)], listeners=[collect]).arun()
    answers = [e for e in collect.events if isinstance(e, LlmIterationCompletedEvent)]

    trace = ExecutionTrace.from_events(
        [e for e in collect.events if not isinstance(e, LlmIterationStartedEvent)]
    )

    (task,) = trace.task_traces
    assert [call.started_at for call in task.llm_interactions] == [
        answer.timestamp for answer in answers
    ]
    assert [len(call.tool_calls) for call in task.llm_interactions] == [1, 0]
    assert task.llm_interactions[0].tool_calls[0].tool_name == "lookup"
