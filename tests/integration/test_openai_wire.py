"""OpenAIChatModel through the real openai SDK against a local wire-format server."""

import json
import subprocess
import sys

import pytest
from pydantic import BaseModel

from agentensemble import (
    Agent,
    Ensemble,
    OpenAIChatModel,
    Task,
    TaskExecutionError,
    Workflow,
    tool,
)
from agentensemble._sync import run_sync
from agentensemble.models import (
    ChatResponse,
    ModelSettings,
    SystemMessage,
    ToolSpec,
    Usage,
    UserMessage,
)

from .openai_server import Error, Hang, NoChoices, OpenAIServer, OpenAIStub, Raw, ToolCalls

pytestmark = pytest.mark.integration


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_tool_call_round_trip_with_usage() -> None:
    stub = OpenAIStub([ToolCalls([("call_1", "add", '{"a": 2, "b": 3}')]), "The sum is 5."])
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("stub-model", base_url=server.base_url, api_key="test")
        agent = Agent("Calculator", "Add numbers", llm=model, tools=[add])
        output = Ensemble(tasks=[Task("Add 2 and 3", agent=agent)]).run()

    assert output.raw == "The sum is 5."
    assert output.task_outputs[0].tool_call_count == 1
    assert output.metrics.total_input_tokens == 22
    assert output.metrics.total_output_tokens == 14
    assert stub.paths == ["/v1/chat/completions", "/v1/chat/completions"]

    first, second = stub.requests
    assert first["model"] == "stub-model"
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "add",
                "description": "Add two integers.",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                    "required": ["a", "b"],
                },
            },
        }
    ]
    assert second["messages"][2] == {
        "role": "assistant",
        "content": "",  # not null: llama.cpp's server answers 500 to null
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
            }
        ],
    }
    assert second["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "5"}


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_sdk_retries_transient_errors(status: int) -> None:
    stub = OpenAIStub([Error(status), "recovered"])
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t", max_retries=2)
        response = await model.chat([UserMessage("hi")])
    assert response.message.text == "recovered"
    assert len(stub.requests) == 2


def test_a_provider_error_fails_the_task_with_the_cause() -> None:
    stub = OpenAIStub([Error(401)])
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="bad", max_retries=0)
        with pytest.raises(TaskExecutionError) as caught:
            Ensemble(tasks=[Task("Say hi")], llm=model).run()
        run_sync(model.aclose())  # the kept exception holds the model: close its client now
    cause = caught.value.__cause__
    assert cause is not None
    assert type(cause).__name__ == "AgentExecutionError"
    assert "Agent 'Agent' failed:" in str(cause)
    assert type(cause.__cause__).__name__ == "AuthenticationError"


async def test_streaming_text_through_the_sdk() -> None:
    text = "Streaming works, chunk by chunk."
    stub = OpenAIStub([text])
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t")
        items = [item async for item in model.stream([SystemMessage("s"), UserMessage("u")])]
    deltas, final = items[:-1], items[-1]
    assert "".join(str(d) for d in deltas) == text
    assert len(deltas) == len(range(0, len(text), 4))
    assert isinstance(final, ChatResponse)
    assert final.message.text == text
    assert final.usage is not None
    assert (final.usage.input_tokens, final.usage.output_tokens) == (11, 7)
    assert stub.requests[0]["stream"] is True


async def test_streaming_tool_calls_are_assembled() -> None:
    stub = OpenAIStub([ToolCalls([("c1", "add", '{"a": 1, "b": 2}'), ("c2", "add", "{}")])])
    spec = ToolSpec("add", "Add.", {"type": "object", "properties": {}})
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t")
        items = [item async for item in model.stream([UserMessage("u")], tools=[spec])]
    final = items[-1]
    assert isinstance(final, ChatResponse)
    calls = final.message.tool_calls
    assert [(c.id, c.name) for c in calls] == [("c1", "add"), ("c2", "add")]
    assert json.loads(calls[0].arguments) == {"a": 1, "b": 2}
    assert final.message.text is None


def test_a_request_that_exceeds_the_timeout_fails_the_task() -> None:
    hang = Hang()
    stub = OpenAIStub([hang])
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel(
            "m", base_url=server.base_url, api_key="t", timeout=0.2, max_retries=0
        )
        try:
            with pytest.raises(TaskExecutionError) as caught:
                Ensemble(tasks=[Task("Answer slowly")], llm=model).run()
        finally:
            hang.release.set()
        run_sync(model.aclose())  # the kept exception holds the model: close its client now
    agent_error = caught.value.__cause__
    assert agent_error is not None
    provider_error = agent_error.__cause__
    assert type(provider_error).__name__ == "APITimeoutError"


def test_one_model_serves_many_runs_over_keep_alive_connections() -> None:
    stub = OpenAIStub(["one", "two", "three"])
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t", max_retries=0)
        ensemble = Ensemble(tasks=[Task("Say a number")], llm=model)
        answers = [ensemble.run().raw for _ in range(3)]  # each run has its own event loop
    assert answers == ["one", "two", "three"]


def test_a_reply_without_choices_fails_the_task_saying_so() -> None:
    stub = OpenAIStub([NoChoices()])
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t", max_retries=0)
        with pytest.raises(TaskExecutionError) as caught:
            Ensemble(tasks=[Task("Say hi")], llm=model).run()
        run_sync(model.aclose())
    assert str(caught.value) == (
        "Task 'Say hi' failed: Agent 'Agent' failed: the server's chat completion for model "
        "'m' has no choices"
    )


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (Raw(b"<html>busy</html>", "text/html"), "is not a JSON object: '<html>busy</html>'"),
        (b"<html>busy</html>", "is not JSON: Expecting value: line 1 column 1 (char 0)"),
        (b'["a list"]', "is not a JSON object"),
        (b'{"choices": [{"index": 0}]}', "is malformed (KeyError: 'message')"),
        (
            b'{"error": {"message": "model overloaded", "code": 503}}',
            "has no choices (the server said: model overloaded)",
        ),
        (b'{"error": "busy"}', "has no choices (the server said: busy)"),
        (
            b'{"choices": [{"message": {"content": null, "tool_calls": [{"id": "c1"}]}}]}',
            "is malformed (KeyError: 'function')",
        ),
    ],
)
async def test_a_reply_that_is_not_a_chat_completion_is_an_error_that_shows_it(
    body: bytes | Raw, says: str
) -> None:
    stub = OpenAIStub([body if isinstance(body, Raw) else Raw(body)])
    with OpenAIServer(stub) as server:
        async with OpenAIChatModel("m", base_url=server.base_url, api_key="t") as model:
            with pytest.raises(RuntimeError) as caught:
                await model.chat([UserMessage("hi")])
    assert str(caught.value).startswith("the server's chat completion for model 'm' ")
    assert says in str(caught.value)


async def test_a_streamed_chunk_that_is_malformed_is_an_error_that_shows_it() -> None:
    chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [{"function": "lookup"}]}}]}
    stub = OpenAIStub([Raw(f"data: {json.dumps(chunk)}\n\n".encode(), "text/event-stream")])
    with OpenAIServer(stub) as server:
        async with OpenAIChatModel("m", base_url=server.base_url, api_key="t") as model:
            with pytest.raises(RuntimeError) as caught:
                [piece async for piece in model.stream([UserMessage("hi")])]
    assert str(caught.value).startswith(
        "a chunk of the server's streamed chat completion for model 'm' is malformed "
        "(AttributeError: 'str' object has no attribute 'get')"
    )
    assert stub.requests[0]["stream"] is True
    assert stub.requests[0]["stream_options"] == {"include_usage": True}


def _sse(*chunks: dict[str, object]) -> Raw:
    events = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks)
    return Raw(f"{events}data: [DONE]\n\n".encode(), "text/event-stream")


async def test_streamed_tool_calls_without_an_index_are_assembled_by_their_ids() -> None:
    def part(call_id: str | None, function: dict[str, str]) -> dict[str, object]:
        return {"choices": [{"delta": {"tool_calls": [{"id": call_id, "function": function}]}}]}

    stub = OpenAIStub(
        [
            _sse(
                part("c1", {"name": "add", "arguments": '{"a": 1,'}),
                part(None, {"arguments": ' "b": 2}'}),
                part("c2", {"name": "add", "arguments": '{"a": 3, "b": 4}'}),
                {"choices": [{"delta": {}, "finish_reason": "tool_calls"}]},
            )
        ]
    )
    with OpenAIServer(stub) as server:
        async with OpenAIChatModel("m", base_url=server.base_url, api_key="t") as model:
            *_, response = [item async for item in model.stream([UserMessage("hi")])]
    assert isinstance(response, ChatResponse)
    assert [(call.id, call.name, call.arguments) for call in response.message.tool_calls] == [
        ("c1", "add", '{"a": 1, "b": 2}'),
        ("c2", "add", '{"a": 3, "b": 4}'),
    ]


def test_the_chat_model_needs_no_httpx_module() -> None:
    """openai 3 speaks HTTP through httpx2 and no longer installs httpx."""
    stub = OpenAIStub(["fine"])
    with OpenAIServer(stub) as server:
        url = server.base_url
        script = (
            "import sys; sys.modules['httpx'] = None\n"
            "import asyncio\n"
            "from agentensemble.models import OpenAIChatModel, UserMessage\n"
            "async def main():\n"
            f"    async with OpenAIChatModel('m', base_url={url!r}, api_key='k') as m:\n"
            "        print((await m.chat([UserMessage('hi')])).message.text)\n"
            "asyncio.run(main())\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "fine"


async def test_settings_headers_and_extra_body_reach_the_server() -> None:
    stub = OpenAIStub(["ok"])
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel(
            "m", base_url=server.base_url, api_key="k", temperature=0.2, extra_body={"seed": 7}
        )
        async with model:
            settings = ModelSettings(max_tokens=5, timeout=30, extra={"top_k": 3})
            reply = await model.chat([UserMessage("hi")], settings=settings)
    assert reply.message.text == "ok"
    assert reply.usage == Usage(input_tokens=11, output_tokens=7)
    assert stub.requests == [
        {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "temperature": 0.2,
            "max_tokens": 5,
            "seed": 7,
            "top_k": 3,
        }
    ]
    assert stub.paths == ["/v1/chat/completions"]
    assert stub.authorizations == ["Bearer k"]


def test_the_cli_prints_the_cause_and_exits_non_zero(capsys: pytest.CaptureFixture[str]) -> None:
    from agentensemble.cli import main

    stub = OpenAIStub([Error(401)] * 3)
    with OpenAIServer(stub) as server:
        code = main(["demo", "--model", f"openai-compatible:m@{server.base_url}"])
    assert code == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("error: Task 'Research honeybees using the search_notes tool' failed:")
    assert "scripted failure" in error  # the provider's own message reaches the user


class Verdict(BaseModel):
    label: str
    confidence: float = 0.5


def test_native_structured_output_sends_a_strict_json_schema() -> None:
    stub = OpenAIStub(['{"label": "spam", "confidence": 0.9}', '{"label": "ham"}'])
    with OpenAIServer(stub) as server:
        native = OpenAIChatModel(
            "stub-model", base_url=server.base_url, api_key="test", supports_output_schema=True
        )
        prompt_only = OpenAIChatModel("stub-model", base_url=server.base_url, api_key="test")
        first = Task("Classify", agent=Agent("Judge", "Judge", llm=native), output_type=Verdict)
        second = Task("Again", agent=Agent("Judge", "Judge", llm=prompt_only), output_type=Verdict)
        output = Ensemble(tasks=[first, second]).run()

    assert output.output_for(first) is not None
    assert output.output_for(first).parsed_output == Verdict(label="spam", confidence=0.9)  # type: ignore[union-attr]
    assert output.output_for(second).parsed_output == Verdict(label="ham")  # type: ignore[union-attr]
    assert stub.requests[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Verdict",
            "strict": True,
            "schema": {
                "type": "object",
                "title": "Verdict",
                "properties": {
                    "label": {"type": "string", "title": "Label"},
                    "confidence": {"type": "number", "title": "Confidence"},
                },
                "required": ["label", "confidence"],
                "additionalProperties": False,
            },
        },
    }
    assert "response_format" not in stub.requests[1]
    # the prompt-based instructions go to both
    for request in stub.requests:
        assert request["messages"][1]["content"].endswith(
            '{\n  "label": "string",\n  "confidence": "number"\n}'
        )


def test_a_hierarchical_team_over_the_wire() -> None:
    """One OpenAI-compatible model serves the manager and its workers; token usage of every
    call adds up in the run's metrics."""
    stub = OpenAIStub(
        [
            ToolCalls(
                [
                    (
                        "call_1",
                        "delegate_task",
                        '{"agent_role": "researcher", "task_description": "Find two facts"}',
                    )
                ]
            ),
            "Fact one. Fact two.",
            "Summary: two facts.",
        ]
    )
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("stub-model", base_url=server.base_url, api_key="test")
        researcher = Agent("Researcher", "Find facts", llm=model)
        output = Ensemble(
            tasks=[Task("Research the topic", agent=researcher)],
            workflow=Workflow.HIERARCHICAL,
            llm=model,
        ).run()

    assert output.raw == "Summary: two facts."
    assert [o.agent_role for o in output.task_outputs] == ["Researcher", "Manager"]
    assert output.metrics.total_input_tokens == 3 * 11
    manager_first, worker, manager_second = stub.requests
    assert [tool["function"]["name"] for tool in manager_first["tools"]] == ["delegate_task"]
    assert "tools" not in worker
    assert worker["messages"][1]["content"].startswith("## Task\nFind two facts\n")
    assert manager_second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Fact one. Fact two.",
    }


async def test_a_server_that_cannot_be_reached_is_named() -> None:
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    model = OpenAIChatModel("m", base_url=url, api_key="t", max_retries=0)
    with pytest.raises(ConnectionError, match=f"Could not reach {url} for model 'm'"):
        await model.chat([UserMessage("hi")])
    with pytest.raises(ConnectionError, match=f"Could not reach {url}"):
        async for _ in model.stream([UserMessage("hi")]):
            pass


async def test_a_server_without_a_key_is_sent_no_authorization(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    stub = OpenAIStub(["anonymous", "keyed"])
    with OpenAIServer(stub) as server:
        await OpenAIChatModel("m", base_url=server.base_url).chat([UserMessage("hi")])
        keyed = OpenAIChatModel("m", base_url=server.base_url, api_key="s3cret")
        await keyed.chat([UserMessage("hi")])
    assert stub.authorizations == [None, "Bearer s3cret"]
