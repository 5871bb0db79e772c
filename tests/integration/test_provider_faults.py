"""Faults from a provider, through the real OpenAI SDK and through LangChain's ChatOpenAI,
against a local wire-format server: each ends in a recovered run or a clear error within
the deadline the user set, never a hang, and the outputs that completed are kept (issue 27,
faults)."""

from __future__ import annotations

from typing import Any

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    ExitReason,
    OpenAIChatModel,
    RunOptions,
    Task,
    TaskExecutionError,
    Workflow,
    tool,
)

from .openai_server import CutStream, Error, Hang, OpenAIServer, OpenAIStub, ToolCalls

pytestmark = pytest.mark.integration


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def two_tasks(model: Any, **settings: Any) -> Ensemble:
    first = Task("First", agent=Agent("A", "Answer", llm=model, tools=[add]))
    second = Task("Second", agent=Agent("B", "Answer", llm=model), context=[first])
    return Ensemble(tasks=[first, second], workflow=Workflow.SEQUENTIAL, **settings)


@pytest.fixture(params=["openai", "langchain"])
def client(request: pytest.FixtureRequest) -> str:
    """Which client talks to the server: our OpenAIChatModel, or LangChain's ChatOpenAI."""
    return str(request.param)


def model_at(server: OpenAIServer, client: str, *, max_retries: int) -> Any:
    if client == "langchain":
        from langchain_openai import ChatOpenAI
        from pydantic import SecretStr

        return ChatOpenAI(
            model="m", base_url=server.base_url, api_key=SecretStr("t"), max_retries=max_retries
        )
    return OpenAIChatModel("m", base_url=server.base_url, api_key="t", max_retries=max_retries)


@pytest.mark.parametrize("status", [429, 500, 502, 503])
def test_transient_statuses_are_retried_and_the_run_recovers(status: int, client: str) -> None:
    stub = OpenAIStub(["one", Error(status, retry_after_ms=5), "two"])
    with OpenAIServer(stub) as server:
        output = two_tasks(model_at(server, client, max_retries=2)).run()
    assert [task.raw for task in output.task_outputs] == ["one", "two"]
    assert len(stub.requests) == 3


@pytest.mark.parametrize("reset", [True, False], ids=["connection reset", "truncated stream"])
def test_a_stream_cut_mid_answer_fails_the_task_and_keeps_what_completed(
    reset: bool, client: str
) -> None:
    stub = OpenAIStub(["one", CutStream("this answer never ends", chunks=2, reset=reset)])
    tokens: list[str] = []
    with OpenAIServer(stub) as server:
        ensemble = two_tasks(
            model_at(server, client, max_retries=0), on_token=lambda e: tokens.append(e.token)
        )
        with pytest.raises(TaskExecutionError) as caught:
            ensemble.run(options=RunOptions(timeout=30))
    assert [task.raw for task in caught.value.completed_outputs] == ["one"]
    assert "stopped before it was finished (no finish_reason, 8 characters received)" in str(
        caught.value.__cause__
    )
    assert tokens[-2:] == ["this", " ans"]  # what arrived was streamed, then the task failed
    assert stub.requests[-1]["stream"] is True


def test_a_malformed_tool_call_is_told_to_the_model_and_the_run_goes_on(client: str) -> None:
    stub = OpenAIStub([ToolCalls([("c1", "add", '{"a": 1,')]), "one", "two"])
    with OpenAIServer(stub) as server:
        output = two_tasks(model_at(server, client, max_retries=0)).run()
    assert [task.raw for task in output.task_outputs] == ["one", "two"]
    told = stub.requests[1]["messages"][-1]
    assert told["role"] == "tool"
    assert "Invalid arguments for tool 'add'" in told["content"]


def test_a_ten_megabyte_answer_is_taken_whole(client: str) -> None:
    huge = "x" * 10_000_000
    stub = OpenAIStub([huge, "two"])
    with OpenAIServer(stub) as server:
        output = two_tasks(model_at(server, client, max_retries=0)).run()
    assert len(output.task_outputs[0].raw) == 10_000_000
    assert output.raw == "two"


def test_a_server_that_never_answers_ends_at_the_run_deadline_with_what_completed(
    client: str,
) -> None:
    silent = Hang()
    stub = OpenAIStub(["one", silent])
    try:
        with OpenAIServer(stub) as server:
            output = two_tasks(model_at(server, client, max_retries=0)).run(
                options=RunOptions(timeout=1)
            )
    finally:
        silent.release.set()
    assert output.exit_reason is ExitReason.TIMEOUT
    assert [task.raw for task in output.task_outputs] == ["one"]
