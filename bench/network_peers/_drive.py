"""The load driver `bench/network.py` uses for every queue (stdlib only, so the peers' own
virtualenvs can run it): `requests` calls, at most `in_flight` at once, each returning the
wall-clock time its work started."""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def drive(
    call: Callable[[], Awaitable[float]], requests: int, in_flight: int
) -> dict[str, Any]:
    """Throughput (requests/s), end-to-end and pickup (enqueue to start) latency in ms."""
    slots = asyncio.Semaphore(in_flight)
    ends: list[float] = []
    pickups: list[float] = []

    async def one() -> None:
        async with slots:
            sent = time.time()
            started = await call()
            ends.append((time.time() - sent) * 1000)
            pickups.append((started - sent) * 1000)

    began = time.perf_counter()
    async with asyncio.TaskGroup() as group:
        for _ in range(requests):
            group.create_task(one())
    elapsed = time.perf_counter() - began
    return {
        "requests": requests,
        "in_flight": in_flight,
        "throughput_per_s": round(requests / elapsed, 1),
        "end_to_end_ms": {
            "p50": round(statistics.median(ends), 1),
            "p99": round(percentile(ends, 0.99), 1),
        },
        "pickup_ms": {
            "p50": round(statistics.median(pickups), 1),
            "p99": round(percentile(pickups, 0.99), 1),
        },
    }
