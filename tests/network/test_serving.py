"""Serving shared tasks and tools over the in-process transport: requests, responses, bad
input, deadlines, drain and the consumers (`NetworkClient`, `NetworkTask`, `NetworkTool`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from typing import Any

import pytest

from agentensemble import Agent, Ensemble, Task, tool
from agentensemble.errors import ValidationError
from agentensemble.models import FunctionModel, ScriptedModel, tool_call
from agentensemble.models._messages import Message, UserMessage
from agentensemble.network import (
    CachePolicy,
    DeliveryMethod,
    DeliveryRegistry,
    DeliverySpec,
    EnsembleServer,
    NetworkClient,
    NetworkError,
    NetworkTask,
    NetworkTool,
    ResponseStatus,
    ServerState,
    Transport,
    WorkRequest,
    WorkResponse,
)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def echo_model() -> FunctionModel:
    """Answers with the last user message, so a test sees the prompt the task got."""

    def reply(messages: Sequence[Message], tools: Sequence[Any]) -> str:
        last = messages[-1]
        return last.text if isinstance(last, UserMessage) else "?"

    return FunctionModel(reply)


def kitchen(**changes: Any) -> Ensemble:
    settings: dict[str, Any] = {
        "name": "kitchen",
        "llm": echo_model(),
        "shared_tasks": {"prepare-meal": Task("Prepare the meal the request asks for")},
        "shared_tools": {"add": add},
    }
    settings.update(changes)
    return Ensemble(**settings)


@pytest.fixture
async def served() -> AsyncIterator[tuple[Transport, EnsembleServer]]:
    transport = Transport.websocket("kitchen")
    server = EnsembleServer(kitchen(), transport, concurrency=4)
    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        yield transport, server
        server.drain()
    assert server.state is ServerState.STOPPED


async def test_a_shared_task_gets_the_request_text_as_a_request_section(
    served: tuple[Transport, EnsembleServer],
) -> None:
    transport, _ = served
    client = NetworkClient(transport)

    response = await client.call("kitchen", "prepare-meal", "two {omelettes}", timeout=10)

    assert response.status is ResponseStatus.COMPLETED
    assert response.result is not None
    assert "## Task\nPrepare the meal the request asks for\n\n## Request\ntwo {omelettes}" in (
        response.result
    )
    assert response.duration_ms is not None


async def test_a_description_that_says_request_places_the_text_and_inputs_show_it() -> None:
    from agentensemble.observability import ExecutionTrace

    transport = Transport.websocket("kitchen")
    cook = Task("Cook {request} for table five")
    server = EnsembleServer(kitchen(shared_tasks={"cook": cook}), transport)
    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        client = NetworkClient(transport)
        request_id = await client.submit("kitchen", "cook", "one {soup}")
        events = [event async for event in client.events(request_id, timeout=10)]
        response = await client.result(request_id, 0.1)
        server.drain()

    assert response.result is not None
    assert "## Task\nCook one {soup} for table five" in response.result
    assert "## Request" not in response.result
    assert ExecutionTrace.from_events(events).inputs == {"request": "one {soup}"}


async def test_a_shared_tool_is_called_with_the_context_as_its_json_arguments(
    served: tuple[Transport, EnsembleServer],
) -> None:
    transport, _ = served

    response = await NetworkClient(transport).call("kitchen", "add", '{"a": 2, "b": 40}')

    assert (response.status, response.result) == (ResponseStatus.COMPLETED, "42")


@pytest.mark.parametrize(
    ("task", "context", "expected"),
    [
        ("bake", None, "Unknown shared task or tool 'bake' on ensemble 'kitchen'"),
        ("add", "{not json", "is not valid JSON for tool 'add'"),
        ("add", "[1, 2]", "must be a JSON object of arguments for tool 'add'"),
    ],
)
async def test_bad_requests_get_a_failed_response_and_the_server_keeps_serving(
    served: tuple[Transport, EnsembleServer], task: str, context: str | None, expected: str
) -> None:
    transport, _ = served
    client = NetworkClient(transport)

    failed = await client.call("kitchen", task, context, timeout=10)
    after = await client.call("kitchen", "add", '{"a": 1, "b": 1}', timeout=10)

    assert failed.status is ResponseStatus.FAILED
    assert failed.error is not None
    assert expected in failed.error
    assert after.result == "2"


async def test_the_request_id_is_the_run_id_and_a_duplicate_runs_once() -> None:
    run_ids: list[str] = []
    transport = Transport.websocket("kitchen")
    ensemble = kitchen(on_task_start=lambda event: run_ids.append(event.ensemble_id))
    server = EnsembleServer(ensemble, transport)
    client = NetworkClient(transport)
    first = await client.submit("kitchen", "prepare-meal", "soup", request_id="order-7")
    second = await client.submit("kitchen", "prepare-meal", "soup", request_id="order-7")
    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        responses = [await client.result(first, 10), await client.result(second, 10)]
        again = await client.submit("kitchen", "prepare-meal", "soup", request_id="order-7")
        assert await client.result(again, 10) == responses[0]
        server.drain()

    assert responses[0] == responses[1]
    assert run_ids == ["order-7"]


async def test_the_request_deadline_is_the_runs_timeout() -> None:
    release = asyncio.Event()

    async def stuck(messages: Sequence[Message], tools: Sequence[Any]) -> str:
        await release.wait()
        return "late"

    transport = Transport.websocket("kitchen")
    server = EnsembleServer(kitchen(llm=FunctionModel(stuck)), transport)
    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        client = NetworkClient(transport)
        request_id = await client.submit(
            "kitchen", "prepare-meal", "soup", deadline=timedelta(milliseconds=50)
        )
        response = await client.result(request_id, timeout=10)
        server.drain()

    assert response.status is ResponseStatus.FAILED
    assert response.error is not None
    assert "deadline" in response.error


async def test_drain_finishes_the_requests_in_flight_and_takes_no_new_ones() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: Sequence[Message], tools: Sequence[Any]) -> str:
        started.set()
        await release.wait()
        return "done"

    transport = Transport.websocket("kitchen")
    server = EnsembleServer(kitchen(llm=FunctionModel(slow)), transport)
    client = NetworkClient(transport)
    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        in_flight = await client.submit("kitchen", "prepare-meal", "soup")
        await started.wait()
        server.drain()
        await client.submit("kitchen", "prepare-meal", "after the drain", request_id="late")
        release.set()
        response = await client.result(in_flight, 10)

    assert response.result == "done"
    assert server.state is ServerState.STOPPED
    assert await transport.result("late", 0) is None


async def test_drain_timeout_hands_unfinished_requests_back_for_another_worker() -> None:
    started = asyncio.Event()

    async def stuck(messages: Sequence[Message], tools: Sequence[Any]) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    transport = Transport.websocket("kitchen")
    stuck_server = EnsembleServer(kitchen(llm=FunctionModel(stuck), drain_timeout=0.05), transport)
    async with asyncio.TaskGroup() as group:
        group.create_task(stuck_server.serve())
        request_id = await NetworkClient(transport).submit("kitchen", "add", '{"a": 1, "b": 2}')
        # a tool request answers at once; the stuck model holds a task request
        task_id = await NetworkClient(transport).submit("kitchen", "prepare-meal", "soup")
        await started.wait()
        stuck_server.drain()
    assert (await transport.result(request_id, 1)) is not None

    peer = EnsembleServer(kitchen(), transport)
    async with asyncio.TaskGroup() as group:
        group.create_task(peer.serve())
        response = await transport.result(task_id, 10)
        peer.drain()
    assert response is not None
    assert response.status is ResponseStatus.COMPLETED


def test_start_serves_on_its_own_thread_until_stopped() -> None:
    transport = Transport.websocket("kitchen")
    ensemble = kitchen()

    with ensemble.start(transport, concurrency=2) as server:
        state_while_serving = server.state
        client = NetworkClient(transport)
        response = asyncio.run(client.call("kitchen", "add", '{"a": 3, "b": 4}', timeout=10))

    assert response.result == "7"
    assert (state_while_serving, server.state) == (ServerState.READY, ServerState.STOPPED)


async def test_network_task_and_tool_work_as_any_agents_tools(
    served: tuple[Transport, EnsembleServer],
) -> None:
    transport, _ = served
    results: dict[str, str] = {}
    waiter = Agent(
        role="Waiter",
        goal="Serve guests",
        tools=[
            NetworkTask("kitchen", "prepare-meal", transport=transport),
            NetworkTool("kitchen", "add", transport=transport),
        ],
        llm=ScriptedModel(
            [
                tool_call("prepare_meal", input="one soup"),
                tool_call("add", input=json.dumps({"a": 20, "b": 22})),
                "Served",
            ]
        ),
    )
    ensemble = Ensemble(
        tasks=[Task("Take the order", agent=waiter)],
        on_tool_call=lambda event: results.__setitem__(event.tool_name, event.tool_result),
    )

    output = await ensemble.arun()

    assert output.raw == "Served"
    assert "## Request\none soup" in results["prepare_meal"]
    assert results["add"] == "42"


async def test_a_network_task_reports_an_unanswered_request_as_a_tool_failure() -> None:
    nobody_serves = Transport.websocket("kitchen")
    remote = NetworkTask("kitchen", "prepare-meal", transport=nobody_serves, timeout=0.05)

    result = await remote.execute("soup")

    assert not result.is_success
    assert result.error_message is not None
    assert "No response to request" in result.error_message
    assert "ensemble 'kitchen'" in result.error_message


async def test_a_client_that_waits_past_its_timeout_gets_a_network_error() -> None:
    client = NetworkClient(Transport.websocket("kitchen"))
    request_id = await client.submit("kitchen", "add", "{}")

    with pytest.raises(NetworkError, match=request_id):
        await client.result(request_id, timeout=0.01)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"shared_tasks": {" ": Task("x")}}, "Shared task name must not be blank"),
        ({"shared_tools": {"": add}}, "Shared tool name must not be blank"),
        ({"shared_tasks": {"a": "not a task"}}, "shared_tasks['a'] must be a Task"),
        ({"shared_tools": {"prepare-meal": add}}, "'prepare-meal' is a shared task's name too"),
        ({"shared_tools": {"x": object()}}, "shared_tools['x'] must be one tool"),
        ({"drain_timeout": -1}, "drain_timeout must be a positive number of seconds"),
    ],
)
def test_bad_sharing_settings_are_refused_when_the_ensemble_is_made(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        kitchen(**changes)


def test_serving_needs_something_shared_and_a_transport() -> None:
    with pytest.raises(ValidationError, match="shared_tasks or shared_tools"):
        EnsembleServer(Ensemble(llm=echo_model()), Transport.websocket())
    with pytest.raises(ValidationError, match="must be a Transport"):
        EnsembleServer(kitchen(), "redis://nowhere")  # type: ignore[arg-type]


def test_work_requests_read_and_write_the_reference_wire_format() -> None:
    wire = '{"requestId": "r1", "from": "desk", "task": "add", "deadline": "PT30S", "x": 1}'

    request = WorkRequest.model_validate_json(wire)

    assert (request.from_, request.deadline_seconds) == ("desk", 30.0)
    assert json.loads(request.to_json()) == {
        "requestId": "r1",
        "from": "desk",
        "task": "add",
        "priority": "NORMAL",
        "deadline": "PT30S",
        "delivery": {"method": "WEBSOCKET"},
    }


async def test_a_cached_result_answers_a_use_cached_request_with_the_same_key() -> None:
    calls: list[str] = []

    @tool
    def price(item: str) -> str:
        """Look a price up."""
        calls.append(item)
        return f"{item}: {len(calls)} EUR"

    transport = Transport.websocket("shop")
    server = EnsembleServer(Ensemble(name="shop", shared_tools={"price": price}), transport)

    def priced(request_id: str, policy: CachePolicy | None) -> WorkRequest:
        return WorkRequest(
            request_id=request_id,
            from_="test",
            task="price",
            context='{"item": "tea"}',
            cache_key="tea",
            cache_policy=policy,
            max_age=timedelta(minutes=1),
        )

    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        answers = []
        for request_id, policy in [
            ("first", None),
            ("cached", CachePolicy.USE_CACHED),
            ("fresh", CachePolicy.FORCE_FRESH),
        ]:
            await transport.send(priced(request_id, policy))
            answers.append(await transport.result(request_id, 10))
        server.drain()

    assert [answer.result if answer else None for answer in answers] == [
        "tea: 1 EUR",
        "tea: 1 EUR",
        "tea: 2 EUR",
    ]
    assert answers[1] is not None
    assert answers[1].request_id == "cached"
    assert calls == ["tea", "tea"]


async def test_a_delivery_the_transport_cannot_make_is_refused(
    served: tuple[Transport, EnsembleServer],
) -> None:
    transport, _ = served
    request = WorkRequest(
        request_id="hook",
        from_="test",
        task="add",
        context='{"a": 1, "b": 1}',
        delivery=DeliverySpec(method=DeliveryMethod.WEBHOOK, address="https://example.com"),
    )

    await transport.send(request)
    response = await transport.result("hook", 10)

    assert response is not None
    assert response.status is ResponseStatus.FAILED
    assert response.error is not None
    assert "No delivery handler registered for method: WEBHOOK" in response.error


async def test_a_served_dashboard_answers_readiness_from_the_servers_state() -> None:
    import httpx

    from agentensemble.web import WebDashboard

    started, release = asyncio.Event(), asyncio.Event()

    async def slow(messages: Sequence[Message], tools: Sequence[Any]) -> str:
        started.set()
        await release.wait()
        return "done"

    dashboard = WebDashboard(port=0)
    transport = Transport.websocket("kitchen")
    server = EnsembleServer(kitchen(llm=FunctionModel(slow), web_dashboard=dashboard), transport)
    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        request_id = await NetworkClient(transport).submit("kitchen", "prepare-meal", "soup")
        await started.wait()
        origin = f"http://127.0.0.1:{dashboard.port}"
        async with httpx.AsyncClient(base_url=origin) as http:
            ready = await http.get("/api/health/ready")
            runs = (await http.get("/api/runs")).json()
            server.drain()
            draining = await http.get("/api/health/ready")
        release.set()
        assert await transport.result(request_id, 10) is not None

    assert (ready.status_code, ready.json()) == (200, {"status": "READY"})
    assert (draining.status_code, draining.json()) == (503, {"status": "DRAINING"})
    assert request_id in json.dumps(runs)  # the request's run, under its id
    assert not dashboard.running  # the server started it, and stopped it


async def test_a_caller_follows_a_requests_events_and_folds_them_into_its_trace(
    served: tuple[Transport, EnsembleServer],
) -> None:
    from agentensemble.observability import ExecutionTrace

    transport, _ = served
    client = NetworkClient(transport)
    request_id = await client.submit("kitchen", "prepare-meal", "one soup")

    events = [event async for event in client.events(request_id, timeout=10)]
    response = await client.result(request_id, 0.1)

    types = [event.type for event in events]
    assert types[0] == "ensemble_started"
    trace = ExecutionTrace.from_events(events)
    assert trace.inputs == {"request": "one soup"}  # what the dashboard shows
    assert "task_completed" in types
    assert {event.ensemble_id for event in events} == {request_id}
    assert [task.final_output for task in trace.task_traces] == [response.result]


async def test_a_tool_request_has_no_events_and_following_it_ends_with_its_response(
    served: tuple[Transport, EnsembleServer],
) -> None:
    transport, _ = served
    client = NetworkClient(transport)
    request_id = await client.submit("kitchen", "add", '{"a": 1, "b": 2}')

    assert [event async for event in client.events(request_id, timeout=10)] == []
    assert (await client.result(request_id, 0.1)).result == "3"


async def test_following_a_request_nobody_answers_ends_with_a_network_error() -> None:
    client = NetworkClient(Transport.websocket("kitchen"))
    request_id = await client.submit("kitchen", "add", "{}")

    with pytest.raises(NetworkError, match=request_id):
        [event async for event in client.events(request_id, timeout=0.05)]


async def test_a_request_whose_deadline_passed_in_the_queue_is_not_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import time

    calls: list[str] = []

    def answer(messages: Sequence[Message], tools: Sequence[Any]) -> str:
        calls.append("called")
        return "late"

    model = FunctionModel(answer)
    transport = Transport.websocket("kitchen")
    client = NetworkClient(transport)
    an_hour_ago = time.time() - 3600
    monkeypatch.setattr("agentensemble.network._queues.time.time", lambda: an_hour_ago)
    request_id = await client.submit(
        "kitchen", "prepare-meal", "soup", deadline=timedelta(minutes=1)
    )
    monkeypatch.undo()
    server = EnsembleServer(kitchen(llm=model), transport)

    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        response = await client.result(request_id, 10)
        server.drain()

    assert response.status is ResponseStatus.FAILED
    assert response.error is not None
    assert "passed before it started" in response.error
    assert calls == []


async def test_a_registered_handler_delivers_by_its_method_and_the_store_keeps_the_result() -> None:
    sent: list[tuple[str | None, str | None]] = []

    async def webhook(spec: DeliverySpec, response: WorkResponse) -> None:
        sent.append((spec.address, response.result))

    deliveries = DeliveryRegistry().register(DeliveryMethod.WEBHOOK, webhook)
    transport = Transport.websocket("kitchen")
    server = EnsembleServer(kitchen(), transport, deliveries=deliveries)
    request = WorkRequest(
        request_id="hooked",
        from_="test",
        task="add",
        context='{"a": 2, "b": 3}',
        delivery=DeliverySpec(method=DeliveryMethod.WEBHOOK, address="https://example.com/h"),
    )
    async with asyncio.TaskGroup() as group:
        group.create_task(server.serve())
        await transport.send(request)
        response = await transport.result("hooked", 10)
        server.drain()

    assert sent == [("https://example.com/h", "5")]
    assert response is not None
    assert response.result == "5"


@pytest.mark.parametrize(
    ("method", "message"),
    [
        ("STORE", "needs no handler"),
        ("SMOKE", "Delivery method must be one of"),
    ],
)
def test_bad_delivery_registrations_are_refused(method: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        DeliveryRegistry().register(method, print)


def test_one_handler_per_delivery_method() -> None:
    registry = DeliveryRegistry().register("queue", print)

    with pytest.raises(
        ValidationError, match="Handler already registered for delivery method: QUEUE"
    ):
        registry.register(DeliveryMethod.QUEUE, print)
