"""Who starts and stops the dashboard's server, and what a slow page cannot do to the others."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentensemble import Ensemble, ScriptedModel, Task
from agentensemble.errors import ValidationError
from agentensemble.observability import EnsembleStartedEvent, ToolCallEvent
from agentensemble.observability._trace import load_trace
from agentensemble.web import WebDashboard
from tests.web.helpers import DEADLINE, client, origin_of, receive, receive_until


def dashboard_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "agentensemble-dashboard"]


def refuses_connections(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def one_task(dashboard: WebDashboard) -> Ensemble:
    return Ensemble(
        tasks=[Task(description="Say hi", expected_output="A greeting")],
        llm=ScriptedModel(["Hi."]),
        web_dashboard=dashboard,
    )


async def test_a_run_that_started_the_server_stops_it() -> None:
    dashboard = WebDashboard(port=0)
    output = await one_task(dashboard).arun()
    assert output.raw == "Hi."
    assert not dashboard.running
    assert dashboard_threads() == []
    assert refuses_connections(dashboard.port)


async def test_a_server_started_by_hand_outlives_the_run() -> None:
    with WebDashboard(port=0) as dashboard:
        await one_task(dashboard).arun()
        assert dashboard.running
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            assert (await http.get("/api/health/live")).status_code == 200
    assert not dashboard.running
    assert dashboard_threads() == []


async def test_concurrent_runs_share_the_server_until_the_last_ends() -> None:
    dashboard = WebDashboard(port=0)
    outputs = await asyncio.gather(*(one_task(dashboard).arun() for _ in range(5)))
    assert [o.raw for o in outputs] == ["Hi."] * 5
    assert not dashboard.running
    assert dashboard_threads() == []


def test_sync_runs_with_a_dashboard_leave_nothing_behind() -> None:
    dashboard = WebDashboard(port=0)
    for _ in range(20):
        assert one_task(dashboard).run().raw == "Hi."
    assert dashboard_threads() == []


def test_stop_and_start_are_idempotent() -> None:
    dashboard = WebDashboard(port=0)
    dashboard.stop()
    assert dashboard.start() is dashboard.start()
    dashboard.stop()
    dashboard.stop()
    assert dashboard_threads() == []


def test_a_port_in_use_is_reported_by_start() -> None:
    with WebDashboard(port=0) as first:
        taken = WebDashboard(port=first.port)
        with pytest.raises(OSError, match="in use"):
            taken.start()
        assert not taken.running


def test_the_ensemble_checks_what_it_is_given() -> None:
    with pytest.raises(
        ValidationError, match=r"web_dashboard must be an agentensemble\.web\.WebDashboard"
    ):
        Ensemble(tasks=[Task(description="x", expected_output="y")], web_dashboard="yes")  # type: ignore[arg-type]


def test_the_dashboard_decides_reviews_unless_the_ensemble_has_a_handler() -> None:
    dashboard = WebDashboard(port=0)
    task = Task(description="x", expected_output="y")
    assert (
        Ensemble(tasks=[task], web_dashboard=dashboard).review_handler is dashboard.review_handler
    )
    mine = Ensemble(tasks=[task]).review_handler
    assert mine is None
    from agentensemble import ReviewHandler

    own = ReviewHandler.auto_approve()
    overridden = Ensemble(tasks=[task], web_dashboard=dashboard, review_handler=own)
    assert overridden.review_handler is own
    assert dashboard.listener in overridden.event_listeners


def test_a_program_exits_as_soon_as_its_run_ends() -> None:
    program = textwrap.dedent(
        """
        from agentensemble import Ensemble, ScriptedModel, Task
        from agentensemble.web import WebDashboard

        dashboard = WebDashboard(port=0)
        output = Ensemble(
            tasks=[Task(description="Say hi", expected_output="A greeting")],
            llm=ScriptedModel(["Hi."]),
            web_dashboard=dashboard,
        ).run()
        print(output.raw, dashboard.running)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=DEADLINE
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Hi.", "False"]


def test_a_program_that_never_stops_its_dashboard_still_exits() -> None:
    program = textwrap.dedent(
        """
        from agentensemble.web import WebDashboard

        WebDashboard(port=0).start()
        print("started")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=DEADLINE
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "started"


def tool_events(run_id: str, count: int, first_seq: int) -> list[ToolCallEvent]:
    payload = "x" * 2000
    return [
        ToolCallEvent(
            ensemble_id=run_id,
            seq=first_seq + n,
            task_id="t1",
            task_index=1,
            task_description="Work",
            agent_role="Worker",
            tool_name="echo",
            tool_arguments="{}",
            tool_result=payload,
            duration=timedelta(milliseconds=1),
            outcome="SUCCESS",
        )
        for n in range(count)
    ]


async def open_silent_socket(dashboard: WebDashboard) -> socket.socket:
    """A WebSocket client that completes the handshake and then reads nothing, with a small
    receive buffer (so the server's sends back up quickly)."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(DEADLINE)
    await asyncio.to_thread(sock.connect, ("127.0.0.1", dashboard.port))
    request = (
        f"GET /ws HTTP/1.1\r\nHost: 127.0.0.1:{dashboard.port}\r\n"
        "Upgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        f"Origin: {origin_of(dashboard)}\r\n\r\n"
    )
    await asyncio.to_thread(sock.sendall, request.encode())
    head = await asyncio.to_thread(sock.recv, 1024)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def read_until_closed(sock: socket.socket) -> int:
    """Read everything the server sent until it dropped the connection; the bytes read."""
    total = 0
    try:
        while chunk := sock.recv(65536):
            total += len(chunk)
    except ConnectionResetError:
        pass
    return total


def seq_is(seq: int) -> Callable[[dict[str, Any]], bool]:
    return lambda message: message["seq"] == seq


async def test_a_page_that_stops_reading_is_dropped_and_the_others_get_everything() -> None:
    chunk, chunks = 400, 20
    with WebDashboard(port=0, max_client_pending=1000) as dashboard:
        listener = dashboard.listener

        def emit(event: Any) -> None:  # as the run's dispatcher feeds it
            listener.handlers[type(event)](listener, event)

        silent = await open_silent_socket(dashboard)
        async with client(dashboard) as fast:
            await receive(fast)
            emit(EnsembleStartedEvent(ensemble_id="r", seq=1, workflow="PARALLEL", total_tasks=1))
            seen: list[int] = [(await receive(fast))["seq"]]
            for n in range(chunks):
                for event in tool_events("r", chunk, 2 + n * chunk):
                    emit(event)
                batch = await receive_until(fast, seq_is(1 + (n + 1) * chunk))
                seen.extend(m["seq"] for m in batch)
            read = await asyncio.to_thread(read_until_closed, silent)
            silent.close()
            async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
                status = (await http.get("/api/status")).json()
    assert seen == list(range(1, 2 + chunks * chunk))
    assert read < chunks * chunk * 2000  # it never got everything: it was dropped
    assert status["clientsDropped"] == 1
    assert status["clients"] == 1
    assert status["connections"] == 1


async def test_a_saved_trace_is_served_like_a_live_run(tmp_path: Path) -> None:
    from agentensemble import Agent, ToolCall, tool
    from agentensemble.observability import JsonTraceExporter

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    llm = ScriptedModel([ToolCall(id="c", name="add", arguments='{"a": 2, "b": 2}'), "Four."])
    task = Task(
        description="Add",
        expected_output="n",
        agent=Agent(role="Adder", goal="g", tools=[add], llm=llm),
    )
    directory = str(tmp_path)
    output = await Ensemble(tasks=[task], trace_exporter=JsonTraceExporter(directory)).arun()
    [saved] = await asyncio.to_thread(lambda: list(Path(directory).glob("*.json")))
    trace = load_trace(saved)
    with WebDashboard.for_trace(trace, port=0) as dashboard:
        async with client(dashboard) as ws:
            hello = await receive(ws)
        async with httpx.AsyncClient(base_url=origin_of(dashboard)) as http:
            served = (await http.get(f"/api/runs/{trace.ensemble_id}")).json()
    assert hello["mode"] == "trace"
    [run] = hello["runs"]
    kinds = [m["type"] for m in run["messages"]]
    assert kinds == [
        "ensemble_started",
        "task_started",
        "task_input",
        "llm_iteration_completed",
        "tool_called",
        "llm_iteration_completed",
        "task_completed",
        "ensemble_completed",
    ]
    completed = next(m for m in run["messages"] if m["type"] == "task_completed")
    assert completed["raw"] == output.raw == "Four."
    assert served["ensemble_id"] == trace.ensemble_id
    assert json.loads(trace.to_json()) == served


async def test_a_run_cancelled_while_starting_the_server_leaves_it_stopped() -> None:
    dashboard = WebDashboard(port=0)
    running = asyncio.create_task(one_task(dashboard).arun())
    await asyncio.sleep(0)  # one turn of the loop: the run is now starting the server
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert not dashboard.running
    assert dashboard_threads() == []
    assert (await one_task(dashboard).arun()).raw == "Hi."
    assert dashboard_threads() == []


def test_stop_from_two_threads_then_start_on_the_same_port() -> None:
    with WebDashboard(port=0) as probe:
        port = probe.port
    dashboard = WebDashboard(port=port).start()
    stoppers = [threading.Thread(target=dashboard.stop) for _ in range(2)]
    for stopper in stoppers:
        stopper.start()
    for stopper in stoppers:
        stopper.join()
    assert refuses_connections(port)
    dashboard.start()
    assert dashboard.port == port
    dashboard.stop()
