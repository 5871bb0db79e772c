"""What watching a run in the dashboard costs the run. Prints JSON.

    python bench/dashboard.py [--seconds 10] [--rate 10000] [--clients 5] [--repeats 3]

A synthetic run emits `--rate` events per second for `--seconds` seconds (90% tokens; the
rest task, model-call and tool-call events of tasks that each take 100 events) through the
dashboard's listener, exactly as the engine feeds it, watched by `--clients`
WebSocket clients in another process; the same run without a dashboard is the baseline.
Repetitions are interleaved (baseline, dashboard, baseline, ...). Reported, medians:

- wall and CPU (`time.process_time()`, every thread of this process: the dashboard's
  server thread included) of the run, and their slowdown against the baseline;
- whether every client received every durable (non-token) message, in `seq` order;
- p50/p99 latency from an event's timestamp to its arrival at a client;
- the size of a `hello` after the run (``--rate * --seconds`` events retained);
- the growth of this process's RSS with the dashboard (peak of the dashboard runs minus the
  peak before the first one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from typing import Any

from agentensemble.observability import (
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    LlmIterationCompletedEvent,
    TaskCompleteEvent,
    TaskStartEvent,
    TokenEvent,
    ToolCallEvent,
)
from agentensemble.web import WebDashboard

TICK = 0.01
"""Seconds between the run's bursts of events."""

CLIENTS = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from datetime import datetime
    from websockets.asyncio.client import connect

    async def watch(url, origin, ready):
        latencies, seqs = [], []
        async with connect(url, origin=origin, max_size=None) as ws:
            json.loads(await ws.recv())  # hello
            ready()
            async for frame in ws:
                arrived = time.time()
                parsed = json.loads(frame)
                for message in parsed if isinstance(parsed, list) else [parsed]:
                    if "seq" not in message:
                        continue
                    stamp = next(message[k] for k in ("timestamp", "startedAt",
                                                      "completedAt", "sentAt") if k in message)
                    sent = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
                    latencies.append(arrived - sent)
                    if message["type"] != "token":
                        seqs.append(message["seq"])
                    if message["type"] == "ensemble_completed":
                        return {"latencies": latencies, "seqs": seqs}

    async def main(port, count):
        url, origin = f"ws://127.0.0.1:{port}/ws", f"http://127.0.0.1:{port}"
        joined = 0
        def ready():
            nonlocal joined
            joined += 1
            if joined == count:
                print("ready", flush=True)
        results = await asyncio.gather(*(watch(url, origin, ready) for _ in range(count)))
        latencies = sorted(x for result in results for x in result["latencies"])
        print(json.dumps({
            "p50": latencies[len(latencies) // 2],
            "p99": latencies[int(len(latencies) * 0.99)],
            "durable": [len(result["seqs"]) for result in results],
            "in_order": all(r["seqs"] == sorted(set(r["seqs"])) for r in results),
        }), flush=True)

    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
    """
)


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


def task_events(run_id: str, task: int, first_seq: int, per_task: int) -> list[Any]:
    """One task's events: start, tokens and model calls and tool calls, completion."""
    same: dict[str, Any] = {
        "ensemble_id": run_id,
        "task_id": f"t{task}",
        "task_index": task,
        "task_description": f"Task {task}",
        "agent_role": "Worker",
    }
    events: list[Any] = [TaskStartEvent(**same, total_tasks=0)]
    while len(events) < per_task - 1:
        if len(events) % 10 == 9:
            if len(events) % 20 == 9:
                events.append(
                    ToolCallEvent(
                        **same,
                        tool_name="search",
                        tool_arguments='{"q": "bees"}',
                        tool_result="Bees dance to share where flowers are.",
                        duration=timedelta(milliseconds=3),
                        outcome="SUCCESS",
                    )
                )
            else:
                events.append(
                    LlmIterationCompletedEvent(
                        **same,
                        iteration_index=len(events) // 20,
                        response_type="TOOL_CALLS",
                        input_tokens=120,
                        output_tokens=30,
                        latency=timedelta(milliseconds=90),
                    )
                )
        else:
            events.append(TokenEvent(**same, token=" word"))
    events.append(
        TaskCompleteEvent(**same, total_tasks=0, duration=timedelta(seconds=1), raw="Done.")
    )
    return events


async def synthetic_run(
    listener: Any | None, seconds: float, rate: int
) -> tuple[float, float, int]:
    """Emit `rate` events a second for `seconds`; the run's wall and CPU seconds, and the
    number of durable (non-token) events."""
    import dataclasses
    from datetime import UTC, datetime

    run_id = f"bench-{time.perf_counter_ns()}"
    per_task = 100
    seq = 0
    burst = max(1, round(rate * TICK))
    total = int(rate * seconds)
    pending: list[Any] = []
    next_task = 1
    loop = asyncio.get_running_loop()
    wall, cpu = time.perf_counter(), time.process_time()
    started_at = loop.time()

    durable = 0

    async def emit(event: Any) -> None:
        nonlocal seq, durable
        seq += 1
        durable += type(event) is not TokenEvent
        event = dataclasses.replace(event, seq=seq, timestamp=datetime.now(UTC))
        if listener is not None:  # as the run's dispatcher feeds it, in seq order
            listener.handlers[type(event)](listener, event)

    await emit(EnsembleStartedEvent(ensemble_id=run_id, workflow="PARALLEL", total_tasks=0))
    tick = 0
    while seq < total:
        for _ in range(burst):
            if not pending:
                pending = task_events(run_id, next_task, seq, per_task)
                pending.reverse()
                next_task += 1
            await emit(pending.pop())
        tick += 1
        await asyncio.sleep(max(0.0, started_at + tick * TICK - loop.time()))
    await emit(
        EnsembleCompletedEvent(
            ensemble_id=run_id, duration=timedelta(seconds=seconds), exit_reason="COMPLETED"
        )
    )
    return time.perf_counter() - wall, time.process_time() - cpu, durable


async def with_dashboard(seconds: float, rate: int, clients: int) -> dict[str, Any]:
    with WebDashboard(port=0) as dashboard:
        watchers = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLIENTS,
            str(dashboard.port),
            str(clients),
            stdout=subprocess.PIPE,
        )
        assert watchers.stdout is not None
        await watchers.stdout.readline()  # every client has its hello
        wall, cpu, durable = await synthetic_run(dashboard.listener, seconds, rate)
        results = json.loads(await watchers.stdout.readline())
        await watchers.wait()
        hello = dashboard.hub()
        assert hello is not None
        hello.catch_up()
        hello_bytes = len(hello.hello().encode())
    return {
        "wall": wall,
        "cpu": cpu,
        "latency_p50_ms": 1000 * results["p50"],
        "latency_p99_ms": 1000 * results["p99"],
        "durable_messages_per_client": results["durable"],
        "every_client_in_order": results["in_order"] and set(results["durable"]) == {durable},
        "hello_bytes": hello_bytes,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    baseline: list[tuple[float, float, int]] = []
    watched: list[dict[str, Any]] = []
    rss_before = rss_mb()
    for _ in range(args.repeats):
        baseline.append(await synthetic_run(None, args.seconds, args.rate))
        watched.append(await with_dashboard(args.seconds, args.rate, args.clients))
    rss_after = rss_mb()
    base_wall = statistics.median(wall for wall, _, _ in baseline)
    base_cpu = statistics.median(cpu for _, cpu, _ in baseline)
    wall = statistics.median(run["wall"] for run in watched)
    cpu = statistics.median(run["cpu"] for run in watched)
    print(
        json.dumps(
            {
                "events": int(args.seconds * args.rate),
                "clients": args.clients,
                "baseline_wall_s": round(base_wall, 3),
                "dashboard_wall_s": round(wall, 3),
                "wall_slowdown_pct": round(100 * (wall / base_wall - 1), 2),
                "baseline_cpu_s": round(base_cpu, 3),
                "dashboard_cpu_s": round(cpu, 3),
                "cpu_added_pct_of_one_core": round(100 * (cpu - base_cpu) / base_wall, 1),
                "latency_p50_ms": round(statistics.median(r["latency_p50_ms"] for r in watched), 1),
                "latency_p99_ms": round(statistics.median(r["latency_p99_ms"] for r in watched), 1),
                "every_client_got_every_durable_message_in_order": all(
                    r["every_client_in_order"] for r in watched
                ),
                "durable_messages_per_client": watched[0]["durable_messages_per_client"],
                "hello_kb": round(max(r["hello_bytes"] for r in watched) / 1024, 1),
                "dashboard_rss_growth_mb": round(rss_after - rss_before, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
