"""The same two jobs as `bench/_network_app.py`, for taskiq-redis (run in its venv)."""

import asyncio
import os
import time

from taskiq_redis import RedisAsyncResultBackend, RedisStreamBroker

URL = os.environ["BENCH_REDIS_URL"]
broker = RedisStreamBroker(URL).with_result_backend(RedisAsyncResultBackend(URL))


@broker.task
async def instant() -> float:
    return time.time()


@broker.task
async def slow() -> float:
    started = time.time()
    await asyncio.sleep(0.05)
    return started


async def client_call(task: str, url: str) -> tuple[object, object]:
    await broker.startup()
    function = {"instant": instant, "slow": slow}[task]

    async def call() -> float:
        sent = await function.kiq()
        result = await sent.wait_result(check_interval=0.05, timeout=120)
        return float(result.return_value)

    return call, broker.shutdown
