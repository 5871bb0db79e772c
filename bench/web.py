"""The library inside a web server, against the same endpoint calling the OpenAI SDK directly.
Prints JSON.

    python bench/web.py [--requests 2000] [--concurrency 50] [--latency 0.05]

Three processes: a local model server speaking the OpenAI chat-completions wire format
(Starlette on uvicorn; it answers each call after `--latency` seconds, with token usage), the
app under test (Starlette on uvicorn, one worker), and this driver (httpx, `--concurrency`
requests in flight). Each request to the app makes three model calls:

- ``/sdk/async``: three sequential calls with one shared ``openai.AsyncOpenAI`` client;
- ``/ensemble/async``: ``await ensemble.arun()`` of a three-task SEQUENTIAL ensemble on
  `OpenAIChatModel` (each task sees the one before it as context);
- ``/sdk/sync`` and ``/ensemble/sync``: the same from a sync endpoint (Starlette runs it in
  its thread pool) with ``openai.OpenAI`` and ``ensemble.run()``;
- ``/ensemble/memory``: the async ensemble with a shared SQLite `MemoryStore` (each task
  reads its scope before it runs and writes its output after).

Per endpoint: throughput (requests/s over the timed requests, after a warm-up), latency p50
and p99, and the app process's CPU per request (from /proc); the ratio of each ensemble
endpoint's throughput to its SDK counterpart's. Budgets: at least 0.95 of the SDK, async and
sync alike, and 0.90 with the SQLite memory store.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
PROMPTS = ("Research the topic", "Outline the findings", "Write the summary")
ANSWER = "A short, fixed answer from the local model server."


# ---- the model server ----------------------------------------------------------------------


def model_app(latency: float) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        await asyncio.sleep(latency)
        return JSONResponse(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "bench"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": ANSWER},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 40, "completion_tokens": 12, "total_tokens": 52},
            }
        )

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


# ---- the app under test --------------------------------------------------------------------


def app_under_test(model_url: str, memory_path: str) -> Any:
    import openai
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route

    from agentensemble import Agent, Ensemble, Task, Workflow
    from agentensemble.memory import MemoryStore
    from agentensemble.models import OpenAIChatModel

    def ensemble(memory: MemoryStore | None = None) -> Ensemble:
        model = OpenAIChatModel("bench", base_url=model_url, api_key="bench")
        agent = Agent("Analyst", "Answer briefly", llm=model)
        scope = ["web-bench"] if memory is not None else []
        tasks: list[Task[Any]] = []
        for prompt in PROMPTS:
            tasks.append(Task(prompt, agent=agent, context=tasks[-1:], memory=scope))
        return Ensemble(tasks=tasks, workflow=Workflow.SEQUENTIAL, memory_store=memory)

    plain = ensemble()
    remembering = ensemble(MemoryStore.sqlite(memory_path))
    async_sdk = openai.AsyncOpenAI(base_url=model_url, api_key="bench")
    sync_sdk = openai.OpenAI(base_url=model_url, api_key="bench")

    def messages(prompt: str, before: str | None) -> list[Any]:
        user = prompt if before is None else f"{prompt}\n\nContext:\n{before}"
        return [
            {"role": "system", "content": "You are Analyst. Answer briefly."},
            {"role": "user", "content": user},
        ]

    async def sdk_async(request: Request) -> PlainTextResponse:
        answer = None
        for prompt in PROMPTS:
            reply = await async_sdk.chat.completions.create(
                model="bench", messages=messages(prompt, answer)
            )
            answer = reply.choices[0].message.content
        return PlainTextResponse(answer or "")

    def sdk_sync(request: Request) -> PlainTextResponse:
        answer = None
        for prompt in PROMPTS:
            reply = sync_sdk.chat.completions.create(
                model="bench", messages=messages(prompt, answer)
            )
            answer = reply.choices[0].message.content
        return PlainTextResponse(answer or "")

    async def ensemble_async(request: Request) -> PlainTextResponse:
        return PlainTextResponse((await plain.arun()).raw)

    def ensemble_sync(request: Request) -> PlainTextResponse:
        return PlainTextResponse(plain.run().raw)

    async def ensemble_memory(request: Request) -> PlainTextResponse:
        return PlainTextResponse((await remembering.arun()).raw)

    return Starlette(
        routes=[
            Route("/sdk/async", sdk_async, methods=["POST"]),
            Route("/sdk/sync", sdk_sync, methods=["POST"]),
            Route("/ensemble/async", ensemble_async, methods=["POST"]),
            Route("/ensemble/sync", ensemble_sync, methods=["POST"]),
            Route("/ensemble/memory", ensemble_memory, methods=["POST"]),
        ]
    )


def serve(app: Any, port: int) -> None:
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# ---- the driver ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start(*arguments: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(HERE), *arguments, "--port", str(port)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, port
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"{arguments[0]} exited with {process.returncode}") from None
            time.sleep(0.05)  # polling a port that is not open yet: nothing to wait on
    process.kill()
    raise RuntimeError(f"{arguments[0]} did not open port {port} within 30 s")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(url: str, requests: int, concurrency: int) -> list[float]:
    import httpx

    latencies: list[float] = []
    queue = iter(range(requests))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            for _ in queue:
                started = time.perf_counter()
                response = await client.post(url)
                response.raise_for_status()
                latencies.append(time.perf_counter() - started)

        async with asyncio.TaskGroup() as group:
            for _ in range(concurrency):
                group.create_task(worker())
    return latencies


def measure(app_pid: int, url: str, requests: int, concurrency: int) -> dict[str, float]:
    asyncio.run(load(url, max(100, requests // 10), concurrency))  # warm-up
    cpu_before, started = cpu_seconds(app_pid), time.perf_counter()
    latencies = asyncio.run(load(url, requests, concurrency))
    wall, cpu = time.perf_counter() - started, cpu_seconds(app_pid) - cpu_before
    latencies.sort()
    return {
        "requests_per_s": round(requests / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p99_ms": round(latencies[int(len(latencies) * 0.99) - 1] * 1000, 1),
        "app_cpu_ms_per_request": round(cpu / requests * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--serve-model", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-app", metavar="MODEL_URL", help=argparse.SUPPRESS)
    parser.add_argument("--memory", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_model:
        serve(model_app(args.latency), args.port)
        return
    if args.serve_app:
        serve(app_under_test(args.serve_app, args.memory), args.port)
        return

    endpoints = ["sdk/async", "ensemble/async", "sdk/sync", "ensemble/sync", "ensemble/memory"]
    with tempfile.TemporaryDirectory() as directory:
        model, model_port = start("--serve-model", "--latency", str(args.latency))
        model_url = f"http://127.0.0.1:{model_port}/v1"
        memory = str(Path(directory) / "memory.db")
        app, app_port = start("--serve-app", model_url, "--memory", memory)
        try:
            figures = {
                endpoint: measure(
                    app.pid,
                    f"http://127.0.0.1:{app_port}/{endpoint}",
                    args.requests,
                    args.concurrency,
                )
                for endpoint in endpoints
            }
        finally:
            for process in (app, model):
                process.terminate()
                process.wait(30)

    def ratio(ours: str, theirs: str) -> float:
        return round(figures[ours]["requests_per_s"] / figures[theirs]["requests_per_s"], 3)

    print(
        json.dumps(
            {
                "endpoints": figures,
                "throughput_ratio_to_sdk": {
                    "async": ratio("ensemble/async", "sdk/async"),
                    "sync": ratio("ensemble/sync", "sdk/sync"),
                    "async_with_sqlite_memory": ratio("ensemble/memory", "sdk/async"),
                },
                "budgets": {"async": 0.95, "sync": 0.95, "async_with_sqlite_memory": 0.9},
                "requests": args.requests,
                "concurrency": args.concurrency,
                "model_latency_s": args.latency,
                "python": sys.version.split()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
