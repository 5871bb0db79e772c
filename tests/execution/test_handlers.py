"""Deterministic (handler) tasks (BEHAVIOUR §9.6)."""

import asyncio
from collections.abc import Callable
from typing import Any, cast

import pytest

from agentensemble import (
    AgentExecutionError,
    Ensemble,
    HandlerContext,
    ParallelErrorStrategy,
    ParallelExecutionError,
    RateLimit,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolResult,
    ValidationError,
    Workflow,
)
from agentensemble.models import UserMessage
from agentensemble.observability import TaskTrace


def test_an_ensemble_of_handlers_needs_no_model() -> None:
    seen: list[HandlerContext] = []

    def fetch(ctx: HandlerContext) -> str:
        seen.append(ctx)
        return "raw data"

    async def transform(ctx: HandlerContext) -> ToolResult:
        seen.append(ctx)
        await asyncio.sleep(0)
        return ToolResult.success(ctx.context_outputs[0].raw.upper(), structured={"n": 1})

    fetch_task = Task("Fetch {source}", handler=fetch)
    transform_task = Task("Transform", "Upper case", handler=transform, context=[fetch_task])
    output = Ensemble(tasks=[fetch_task, transform_task], inputs={"source": "db"}).run()

    assert output.raw == "RAW DATA"
    assert [o.agent_role for o in output.task_outputs] == ["(deterministic)"] * 2
    assert seen[0] == HandlerContext("Fetch db", Task.of("x").expected_output, ())
    assert seen[1].expected_output == "Upper case"
    assert seen[1].context_outputs == (output.output_for(fetch_task),)
    metrics = output.task_outputs[0].metrics
    assert (metrics.input_tokens, metrics.total_tokens, metrics.llm_call_count) == (0, 0, 0)
    assert output.task_outputs[0].tool_call_count == 0
    assert [cast(TaskTrace, o.trace).task_index for o in output.task_outputs] == [1, 2]


def test_handlers_and_agents_mix() -> None:
    llm = ScriptedModel(["summary"])
    numbers = Task("Compute", handler=lambda ctx: "42")
    summary = Task("Summarise the number", context=[numbers])
    output = Ensemble(tasks=[numbers, summary], llm=llm).run()
    assert output.raw == "summary"
    prompt = llm.requests[0].messages[1]
    assert isinstance(prompt, UserMessage)
    assert "### (deterministic): Compute\n42" in prompt.text


class Shout:
    name = "shout"
    description = "Upper-case the input."

    def __init__(self) -> None:
        self.inputs: list[str] = []

    def execute(self, input: str) -> str:
        self.inputs.append(input)
        return input.upper()


def test_an_agent_tool_as_handler_gets_the_last_context_output_or_the_description() -> None:
    first_tool, second_tool = Shout(), Shout()
    first = Task("hello there", handler=first_tool)
    second = Task("ignored", handler=second_tool, context=[first])
    output = Ensemble(tasks=[first, second], workflow=Workflow.SEQUENTIAL).run()
    assert first_tool.inputs == ["hello there"]
    assert second_tool.inputs == ["HELLO THERE"]
    assert output.raw == "HELLO THERE"


@pytest.mark.parametrize(
    ("handler", "message"),
    [
        (lambda ctx: 1 / 0, "Deterministic task handler threw an exception: division by zero"),
        (lambda ctx: None, "Deterministic task handler returned null for task: Load"),
        (
            lambda ctx: ToolResult.failure("source offline"),
            "Deterministic task failed: source offline",
        ),
    ],
)
def test_handler_failures(handler: Callable[[HandlerContext], object], message: str) -> None:
    with pytest.raises(TaskExecutionError) as caught:
        Ensemble(
            tasks=[
                Task("Ok", handler=lambda ctx: "fine"),
                Task("Load", handler=handler),  # type: ignore[arg-type]  # None or a float, on purpose
            ],
            workflow=Workflow.SEQUENTIAL,
        ).run()
    cause = caught.value.__cause__
    assert isinstance(cause, AgentExecutionError)
    assert str(cause) == message
    assert cause.agent_role == "(deterministic)"
    assert [o.raw for o in caught.value.completed_outputs] == ["fine"]


def test_a_failing_handler_in_parallel_loses_no_other_output() -> None:
    ensemble = Ensemble(
        tasks=[
            Task("A", handler=lambda ctx: "a"),
            Task("B", handler=lambda ctx: None),  # type: ignore[arg-type, return-value]  # returns null
            Task("C", handler=lambda ctx: "c"),
        ],
        workflow=Workflow.PARALLEL,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )
    with pytest.raises(ParallelExecutionError) as caught:
        ensemble.run()
    assert sorted(o.raw for o in caught.value.completed_outputs) == ["a", "c"]
    assert list(caught.value.failed_task_causes) == ["B"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"agent": "agent"},
            "Task cannot have both a handler and an explicit agent. A handler runs "
            "deterministically without an LLM; remove the agent.",
        ),
        (
            {"llm": ScriptedModel([])},
            "Task cannot have both a handler and an llm. A handler runs deterministically without "
            "an LLM; remove the llm.",
        ),
        (
            {"tools": [Shout()]},
            "Task cannot have both a handler and tools. A handler runs deterministically; "
            "configure tools inside the handler instead.",
        ),
        (
            {"max_iterations": 3},
            "Task cannot have both a handler and max_iterations. A handler runs deterministically "
            "without an iteration loop; remove the max_iterations.",
        ),
        (
            {"rate_limit": RateLimit.per_second(1)},
            "Task cannot have both a handler and a rate_limit. A handler runs deterministically "
            "without an LLM; remove the rate_limit.",
        ),
    ],
)
def test_handler_exclusivity(kwargs: dict[str, Any], message: str) -> None:
    if kwargs.get("agent") == "agent":
        from agentensemble import Agent

        kwargs["agent"] = Agent("A", "G", llm=ScriptedModel([]))
    with pytest.raises(ValidationError) as caught:
        Task("x", handler=lambda ctx: "y", **kwargs)
    assert str(caught.value) == message


def test_a_handler_must_be_callable() -> None:
    with pytest.raises(
        ValidationError, match="Task handler must be a callable or an AgentTool, got: int"
    ):
        Task("x", handler=5)  # type: ignore[call-overload]
