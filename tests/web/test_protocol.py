"""The dashboard's WebSocket protocol, driven by a real client (the `websockets` package)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from agentensemble import (
    Agent,
    Ensemble,
    EnsembleOutput,
    OnTimeoutAction,
    Review,
    ScriptedModel,
    Task,
    ToolCall,
    tool,
)
from agentensemble.enums import ExitReason, Workflow
from agentensemble.errors import ValidationError
from agentensemble.observability import ExecutionTrace, serialize_event
from agentensemble.web import WebDashboard
from tests.web.helpers import Gate, Wire, client, of_type, origin_of, receive, receive_until


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


class Recorder:
    """Everything the run emitted, as wire messages (what the dashboard must relay)."""

    def __init__(self) -> None:
        self.messages: list[Wire] = []

    async def on_event(self, event: Any) -> None:
        self.messages.append(serialize_event(event))

    async def on_token(self, event: Any) -> None:
        pass  # on_event gets the tokens too


def trace_of(output: EnsembleOutput) -> ExecutionTrace:
    assert output.trace is not None
    return output.trace


def run_id_of(output: EnsembleOutput) -> str:
    return trace_of(output).ensemble_id


def two_tasks(**options: Any) -> Ensemble:
    llm = ScriptedModel(
        [
            ToolCall(id="c1", name="add", arguments='{"a": 1, "b": 2}'),
            "Three is the answer.",
            "In short: three.",
        ]
    )
    researcher = Agent(role="Researcher", goal="Find facts", tools=[add], llm=llm)
    first = Task(description="Add one and two", expected_output="A number", agent=researcher)
    second = Task(
        description="Summarise", expected_output="One line", agent=researcher, context=[first]
    )
    return Ensemble(tasks=[first, second], workflow=Workflow.PARALLEL, **options)


@pytest.fixture
def dashboard() -> Iterator[WebDashboard]:
    with WebDashboard(port=0) as started:
        yield started


def seqs_covered(messages: list[Wire]) -> list[int]:
    """The run's seqs a client saw: each message's seq, and every seq a coalesced token
    message stands for."""
    covered: list[int] = []
    for message in messages:
        if "seq" in message:
            first: int = message["seq"]
            covered.extend(range(first, int(message.get("lastSeq", first)) + 1))
    return covered


async def test_every_event_reaches_a_client_in_order_with_contiguous_seq(
    dashboard: WebDashboard,
) -> None:
    recorder = Recorder()
    async with client(dashboard) as ws:
        hello = await receive(ws)
        assert hello["type"] == "hello"
        assert hello["runs"] == []
        assert hello["cursors"] == {}
        output = await two_tasks(web_dashboard=dashboard, listeners=[recorder]).arun()
        received = await receive_until(ws, of_type("ensemble_completed"))

    emitted = recorder.messages
    assert seqs_covered(received) == list(range(1, len(emitted) + 1))
    durable = [m for m in received if m["type"] != "token"]
    expected = [m for m in emitted if m["type"] != "token"]
    assert [m["type"] for m in durable] == [m["type"] for m in expected]
    assert {m["type"] for m in durable} >= {
        "ensemble_started",
        "task_started",
        "task_input",
        "llm_iteration_started",
        "llm_iteration_completed",
        "tool_called",
        "task_completed",
        "ensemble_completed",
    }
    streamed = "".join(m["token"] for m in received if m["type"] == "token")
    assert streamed == "Three is the answer.In short: three."
    assert all(m["ensembleId"] == run_id_of(output) for m in durable)
    tool_call = next(m for m in durable if m["type"] == "tool_called")
    assert tool_call["toolResult"] == "3"
    assert tool_call["toolCallIndex"] == 1
    started = durable[0]
    assert [node["dependsOn"] for node in started["plan"]] == [[], [1]]


async def test_a_page_opened_after_the_run_gets_a_compacted_snapshot(
    dashboard: WebDashboard,
) -> None:
    output = await two_tasks(web_dashboard=dashboard).arun()
    run_id = run_id_of(output)
    async with client(dashboard) as ws:
        hello = await receive(ws)
    [run] = hello["runs"]
    kinds = [m["type"] for m in run["messages"]]
    assert kinds[0] == "ensemble_started"
    assert kinds[-1] == "ensemble_completed"
    assert kinds.count("task_completed") == 2
    assert "token" not in kinds
    assert "llm_iteration_started" not in kinds  # only in-flight ones are kept
    seqs = [m["seq"] for m in run["messages"]]
    assert seqs == sorted(seqs)
    assert hello["cursors"] == {run_id: run["messages"][-1]["seq"]}


async def test_resume_sends_only_what_was_missed(dashboard: WebDashboard) -> None:
    gate = Gate(["First.", "Second."])
    first = Task(description="One", expected_output="x")
    second = Task(description="Two", expected_output="x")
    ensemble = Ensemble(tasks=[first, second], llm=gate.model(), web_dashboard=dashboard)
    async with client(dashboard) as ws:
        await receive(ws)
        running = asyncio.create_task(ensemble.arun())
        await gate.waiting.wait()
        seen = await receive_until(ws, lambda m: m.get("taskDescription") == "Two")
    cursor = seen[-1]["seq"]
    run_id = seen[-1]["ensembleId"]
    gate.opened.set()
    await running
    async with client(dashboard, query="?resume=1") as ws:
        await ws.send(json.dumps({"type": "resume", "cursors": {run_id: cursor}}))
        replay = await receive_until(ws, of_type("resumed"))
    missed = replay[:-1]
    assert missed, "the run went on after the client left"
    assert [m["seq"] for m in missed] == sorted(m["seq"] for m in missed)
    assert missed[0]["seq"] > cursor
    assert missed[-1]["type"] == "ensemble_completed"
    assert all(m["type"] != "token" for m in missed)
    assert replay[-1]["cursors"] == {run_id: missed[-1]["seq"]}


async def test_resume_from_an_unknown_run_gets_a_fresh_hello(dashboard: WebDashboard) -> None:
    async with client(dashboard, query="?resume=1") as ws:
        await ws.send(json.dumps({"type": "resume", "cursors": {"gone": 7}}))
        assert (await receive(ws))["type"] == "hello"


@pytest.mark.parametrize("origin", ["http://evil.example", "http://localhost.evil.example", None])
async def test_pages_from_other_origins_are_refused(
    dashboard: WebDashboard, origin: str | None
) -> None:
    async with client(dashboard, origin=origin) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            await receive(ws)
    assert closed.value.rcvd is not None
    assert closed.value.rcvd.code == 1008
    assert closed.value.rcvd.reason == "Origin not allowed"


async def test_localhost_origin_is_accepted(dashboard: WebDashboard) -> None:
    async with client(dashboard, origin=f"http://localhost:{dashboard.port}") as ws:
        assert (await receive(ws))["type"] == "hello"


async def test_ping_gets_a_pong(dashboard: WebDashboard) -> None:
    async with client(dashboard) as ws:
        await receive(ws)
        await ws.send('{"type": "ping"}')
        assert await receive(ws) == {"type": "pong"}


async def test_heartbeats_reach_every_client(
    dashboard: WebDashboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentensemble.web._dashboard.HEARTBEAT_SECONDS", 0.05)
    with WebDashboard(port=0) as fast:
        async with client(fast) as ws:
            await receive(ws)
            beat = await receive(ws)
    assert beat["type"] == "heartbeat"
    assert isinstance(beat["serverTimeMs"], int)


def test_a_public_binding_needs_a_token() -> None:
    with pytest.raises(ValidationError, match=r"host '0\.0\.0\.0' is not a loopback.*token"):
        WebDashboard(host="0.0.0.0")


@pytest.mark.parametrize(
    ("field", "value"),
    [("port", -1), ("port", "80"), ("max_retained_runs", 0), ("review_timeout", -1)],
)
def test_bad_settings_name_the_field(field: str, value: object) -> None:
    settings: dict[str, Any] = {field: value}
    with pytest.raises(ValidationError, match=field.split("_")[-1]):
        WebDashboard(**settings)


async def test_the_token_guards_the_socket_and_the_api() -> None:
    with WebDashboard(port=0, token="s3cret") as guarded:
        async with client(guarded) as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await receive(ws)
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1008
        async with client(guarded, query="?token=s3cret") as ws:
            assert (await receive(ws))["type"] == "hello"
        async with httpx.AsyncClient(base_url=origin_of(guarded)) as http:
            assert (await http.get("/api/status")).status_code == 401
            bearer = {"Authorization": "Bearer s3cret"}
            assert (await http.get("/api/status", headers=bearer)).status_code == 200
            assert (await http.get("/api/health/live")).status_code == 200
            assert (await http.get("/")).status_code == 200


def gated(review: Review, **options: Any) -> Ensemble:
    task = Task(
        description="Draft the announcement",
        expected_output="A paragraph",
        agent=Agent(role="Writer", goal="Write", llm=ScriptedModel(["First draft."])),
        review=review,
    )
    return Ensemble(tasks=[task], **options)


async def test_the_first_decision_wins_and_every_tab_sees_it(dashboard: WebDashboard) -> None:
    async with client(dashboard) as first, client(dashboard) as second:
        await receive(first)
        await receive(second)
        running = asyncio.create_task(gated(Review.required(), web_dashboard=dashboard).arun())
        [*_, asked] = await receive_until(first, of_type("review_requested"))
        await receive_until(second, of_type("review_requested"))
        assert asked["taskOutput"] == "First draft."
        assert asked["deadlineMs"] > 0
        decision = {"type": "review_decision", "reviewId": asked["reviewId"]}
        await first.send(json.dumps({**decision, "decision": "edit", "revisedOutput": "Edited."}))
        [*_, decided] = await receive_until(second, of_type("review_decided"))
        await second.send(json.dumps({**decision, "decision": "exit_early"}))
        output = await running
        await receive_until(first, of_type("ensemble_completed"))
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            late = await http.post(
                f"/api/reviews/{asked['reviewId']}", json={"decision": "approve"}
            )
    assert decided["decision"] == "EDIT"
    assert decided["revisedOutput"] == "Edited."
    assert output.raw == "Edited."
    assert output.exit_reason is ExitReason.COMPLETED
    assert late.status_code == 404


async def test_a_decision_over_http_is_applied(dashboard: WebDashboard) -> None:
    async with client(dashboard) as ws:
        await receive(ws)
        running = asyncio.create_task(gated(Review.required(), web_dashboard=dashboard).arun())
        [*_, asked] = await receive_until(ws, of_type("review_requested"))
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            pending = (await http.get("/api/reviews")).json()
            refused = await http.post(
                f"/api/reviews/{asked['reviewId']}",
                json={"decision": "approve"},
                headers={"Origin": "http://evil.example"},
            )
            bad = await http.post(f"/api/reviews/{asked['reviewId']}", json={"decision": "maybe"})
            applied = await http.post(
                f"/api/reviews/{asked['reviewId']}", json={"decision": "exit_early"}
            )
        output = await running
    assert [review["reviewId"] for review in pending] == [asked["reviewId"]]
    assert refused.status_code == 403
    assert bad.status_code == 400
    assert applied.json() == {"result": "applied"}
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY


async def test_a_review_without_a_limit_takes_the_dashboards_timeout() -> None:
    with WebDashboard(
        port=0, review_timeout=timedelta(milliseconds=100), on_timeout="EXIT_EARLY"
    ) as dashboard:
        async with client(dashboard) as ws:
            await receive(ws)
            output = await gated(Review(timeout=0), web_dashboard=dashboard).arun()
            received = await receive_until(ws, of_type("ensemble_completed"))
    asked = next(m for m in received if m["type"] == "review_requested")
    timed_out = next(m for m in received if m["type"] == "review_timed_out")
    assert asked["timeoutMs"] == 100
    assert asked["onTimeout"] == "EXIT_EARLY"
    assert timed_out["action"] == "EXIT_EARLY"
    assert output.exit_reason is ExitReason.TIMEOUT


async def test_a_gates_own_timeout_and_action_apply(dashboard: WebDashboard) -> None:
    review = Review(timeout=timedelta(milliseconds=50), on_timeout=OnTimeoutAction.CONTINUE)
    async with client(dashboard) as ws:
        await receive(ws)
        output = await gated(review, web_dashboard=dashboard).arun()
        received = await receive_until(ws, of_type("ensemble_completed"))
    assert [m["action"] for m in received if m["type"] == "review_timed_out"] == ["CONTINUE"]
    assert output.raw == "First draft."


async def test_the_last_page_leaving_ends_pending_reviews(
    dashboard: WebDashboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("agentensemble.web._hub.REVIEW_GRACE", 0.05)
    review = Review(timeout=timedelta(minutes=5), on_timeout=OnTimeoutAction.EXIT_EARLY)
    async with client(dashboard) as first, client(dashboard) as second:
        await receive(first)
        await receive(second)
        running = asyncio.create_task(gated(review, web_dashboard=dashboard).arun())
        [*_, asked] = await receive_until(first, of_type("review_requested"))
        await receive_until(second, of_type("review_requested"))
        await second.close()
        async with client(dashboard) as late:
            late_hello = await receive(late)
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            still_open = (await http.get("/api/reviews")).json()
    output = await running
    assert [r["reviewId"] for r in late_hello["reviews"]] == [asked["reviewId"]]
    assert [r["reviewId"] for r in still_open] == [asked["reviewId"]]
    assert output.exit_reason is ExitReason.TIMEOUT


async def test_cancel_from_the_api_keeps_what_completed(dashboard: WebDashboard) -> None:
    gate = Gate(["Done.", "Never."])
    first = Task(description="One", expected_output="x")
    second = Task(description="Two", expected_output="x")
    ensemble = Ensemble(tasks=[first, second], llm=gate.model(), web_dashboard=dashboard)
    async with client(dashboard) as ws:
        [hello] = [await receive(ws)]
        assert hello["type"] == "hello"
        running = asyncio.create_task(ensemble.arun())
        await gate.waiting.wait()
        [started, *_] = await receive_until(ws, lambda m: m.get("taskDescription") == "Two")
        run_id = started["ensembleId"]
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            cancelled = await http.post(f"/api/runs/{run_id}/cancel")
            with pytest.raises(asyncio.CancelledError):
                await running
            [*_, ended] = await receive_until(ws, of_type("ensemble_completed"))
            again = await http.post(f"/api/runs/{run_id}/cancel")
            unknown = await http.post("/api/runs/nope/cancel")
            trace = ExecutionTrace.from_json((await http.get(f"/api/runs/{run_id}")).text)
            runs = (await http.get("/api/runs")).json()
    assert cancelled.status_code == 202
    assert ended["errorType"] == "CancelledError"
    assert again.status_code == 409
    assert unknown.status_code == 404
    assert [task.final_output for task in trace.task_traces] == ["Done."]
    assert runs[0]["ensembleId"] == run_id
    assert runs[0]["status"] == "cancelled"


async def test_the_trace_endpoint_matches_the_runs_trace(dashboard: WebDashboard) -> None:
    output = await two_tasks(web_dashboard=dashboard).arun()
    run_id = run_id_of(output)
    async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
        served = ExecutionTrace.from_json((await http.get(f"/api/runs/{run_id}")).text)
        status = (await http.get("/api/status")).json()
        ready = await http.get("/api/health/ready")
    assert [t.final_output for t in served.task_traces] == [o.raw for o in output.task_outputs]
    assert served.metrics.total_tool_calls == trace_of(output).metrics.total_tool_calls
    assert status["runs"] == 1
    assert ready.json() == {"status": "READY"}


async def test_only_the_last_runs_are_retained() -> None:
    with WebDashboard(port=0, max_retained_runs=2) as dashboard:
        ids = [run_id_of(await two_tasks(web_dashboard=dashboard).arun()) for _ in "abc"]
        async with client(dashboard) as ws:
            hello = await receive(ws)
    assert [run["ensembleId"] for run in hello["runs"]] == ids[1:]


@tool
def long_report() -> str:
    """A report longer than the page shows."""
    return "data " * 3000


async def test_long_texts_are_cut_for_the_page_and_whole_in_the_trace(
    dashboard: WebDashboard,
) -> None:
    llm = ScriptedModel([ToolCall(id="c1", name="long_report", arguments="{}"), "Read it."])
    reader = Agent(role="Reader", goal="Read", tools=[long_report], llm=llm)
    task = Task(description="Read the report", expected_output="A summary", agent=reader)
    async with client(dashboard) as ws:
        await receive(ws)
        output = await Ensemble(tasks=[task], web_dashboard=dashboard).arun()
        received = await receive_until(ws, of_type("ensemble_completed"))
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            trace = ExecutionTrace.from_json(
                (await http.get(f"/api/runs/{run_id_of(output)}")).text
            )
    [shown] = [m["toolResult"] for m in received if m["type"] == "tool_called"]
    assert shown.startswith("data data")
    assert shown.endswith(f"… [{15000 - 4000} more characters]")
    [call] = trace.task_traces[0].llm_interactions[0].tool_calls
    assert call.result == "data " * 3000


class SlowListener:
    """An async listener before the dashboard's, slow enough to let parallel tasks'
    events overtake each other in its queue of awaits."""

    def __init__(self) -> None:
        self.calls = 0

    async def on_event(self, event: Any) -> None:
        self.calls += 1
        for _ in range(self.calls % 3):
            await asyncio.sleep(0)


async def test_a_runs_events_reach_the_page_in_seq_order_whatever_else_listens(
    dashboard: WebDashboard,
) -> None:
    tasks = [Task(description=f"Task {n}", expected_output="x") for n in range(6)]
    ensemble = Ensemble(
        tasks=tasks,
        llm=ScriptedModel([f"Answer {n}." for n in range(6)]),
        workflow=Workflow.PARALLEL,
        listeners=[SlowListener()],
        web_dashboard=dashboard,
    )
    async with client(dashboard) as ws:
        await receive(ws)
        await ensemble.arun()
        received = await receive_until(ws, of_type("ensemble_completed"))
    covered = seqs_covered(received)
    assert covered == list(range(1, len(covered) + 1))


async def test_reviews_decided_by_another_handler_are_shown_not_decided(
    dashboard: WebDashboard,
) -> None:
    from agentensemble import ReviewHandler

    slow_approval = ReviewHandler.auto_approve_with_delay(timedelta(seconds=5))
    ensemble = gated(Review.required(), web_dashboard=dashboard, review_handler=slow_approval)
    async with client(dashboard) as ws:
        await receive(ws)
        running = asyncio.create_task(ensemble.arun())
        [*_, asked] = await receive_until(ws, of_type("review_requested"))
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            refused = await http.post(
                f"/api/reviews/{asked['reviewId']}", json={"decision": "exit_early"}
            )
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
    assert refused.status_code == 409


async def test_a_dashboard_that_only_decides_shows_and_forgets_its_reviews(
    dashboard: WebDashboard,
) -> None:
    ensemble = gated(Review.required(), review_handler=dashboard.review_handler)
    async with client(dashboard) as ws, httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
        await receive(ws)
        running = asyncio.create_task(ensemble.arun())
        [*_, asked] = await receive_until(ws, of_type("review_requested"))
        [pending] = (await http.get("/api/reviews")).json()
        await http.post(f"/api/reviews/{asked['reviewId']}", json={"decision": "approve"})
        output = await running
        status = (await http.get("/api/status")).json()
    assert pending["reviewId"] == asked["reviewId"]
    assert output.raw == "First draft."
    assert status["pendingReviews"] == 0


async def test_a_review_with_no_dashboard_serving_ends_at_once() -> None:
    stopped = WebDashboard(port=0)
    review = Review(timeout=timedelta(minutes=5), on_timeout=OnTimeoutAction.CONTINUE)
    output = await gated(review, review_handler=stopped.review_handler).arun()
    assert output.raw == "First draft."


async def test_a_resume_too_large_to_queue_gets_a_fresh_hello() -> None:
    with WebDashboard(port=0, max_client_pending=5) as dashboard:
        output = await two_tasks(web_dashboard=dashboard).arun()
        async with client(dashboard, query="?resume=1") as ws:
            await ws.send(json.dumps({"type": "resume", "cursors": {run_id_of(output): 1}}))
            answer = await receive(ws)
    assert answer["type"] == "hello"


async def test_requests_naming_another_host_are_refused(dashboard: WebDashboard) -> None:
    async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
        rebound = await http.get("/api/runs", headers={"Host": "attacker.example"})
        ours = await http.get("/api/runs", headers={"Host": f"localhost:{dashboard.port}"})
    assert rebound.status_code == 421
    assert ours.status_code == 200


def test_an_ipv6_host_gives_a_usable_url() -> None:
    assert WebDashboard(port=7329, host="[::1]").url == "http://[::1]:7329/"
    assert WebDashboard(port=7329, host="::1").url == "http://[::1]:7329/"


async def test_a_page_that_comes_back_in_time_keeps_the_review_open(
    dashboard: WebDashboard,
) -> None:
    async with client(dashboard) as ws:
        await receive(ws)
        running = asyncio.create_task(gated(Review.required(), web_dashboard=dashboard).arun())
        [*_, asked] = await receive_until(ws, of_type("review_requested"))
    async with client(dashboard) as again:  # a reload: within the grace period
        hello = await receive(again)
        assert [r["reviewId"] for r in hello["reviews"]] == [asked["reviewId"]]
        decision = {"type": "review_decision", "reviewId": asked["reviewId"]}
        await again.send(json.dumps({**decision, "decision": "approve"}))
        output = await running
    assert output.exit_reason is ExitReason.COMPLETED


async def test_an_edit_needs_text(dashboard: WebDashboard) -> None:
    async with client(dashboard) as ws:
        await receive(ws)
        running = asyncio.create_task(gated(Review.required(), web_dashboard=dashboard).arun())
        [*_, asked] = await receive_until(ws, of_type("review_requested"))
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            empty = await http.post(f"/api/reviews/{asked['reviewId']}", json={"decision": "edit"})
            blank = await http.post(
                f"/api/reviews/{asked['reviewId']}",
                json={"decision": "edit", "revisedOutput": "  "},
            )
            await http.post(f"/api/reviews/{asked['reviewId']}", json={"decision": "approve"})
        output = await running
    assert empty.status_code == blank.status_code == 400
    assert "revisedOutput" in empty.json()["error"]
    assert output.raw == "First draft."


async def test_the_trace_of_a_running_run_holds_what_completed(dashboard: WebDashboard) -> None:
    gate = Gate(["Done.", "Later."])
    first = Task(description="One", expected_output="x")
    second = Task(description="Two", expected_output="x")
    ensemble = Ensemble(tasks=[first, second], llm=gate.model(), web_dashboard=dashboard)
    running = asyncio.create_task(ensemble.arun())
    await gate.waiting.wait()
    async with client(dashboard) as ws:
        hello = await receive(ws)
        run_id = hello["runs"][0]["ensembleId"]
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            so_far = ExecutionTrace.from_json((await http.get(f"/api/runs/{run_id}")).text)
    gate.opened.set()
    await running
    assert so_far.exit_reason == "RUNNING"
    assert [task.final_output for task in so_far.task_traces] == ["Done."]
