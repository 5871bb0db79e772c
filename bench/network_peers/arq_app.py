"""The same two jobs as `bench/_network_app.py`, for arq (run in the bench's arq venv)."""

import asyncio
import os
import time

from arq.connections import RedisSettings


async def instant(ctx: dict) -> float:
    return time.time()


async def slow(ctx: dict) -> float:
    started = time.time()
    await asyncio.sleep(0.05)
    return started


class WorkerSettings:
    functions = (instant, slow)
    redis_settings = RedisSettings.from_dsn(os.environ["BENCH_REDIS_URL"])
    max_jobs = int(os.environ.get("BENCH_CONCURRENCY", "16"))


async def client_call(task: str, url: str) -> tuple[object, object]:
    from arq import create_pool

    pool = await create_pool(RedisSettings.from_dsn(url))

    async def call() -> float:
        job = await pool.enqueue_job(task)
        assert job is not None
        return float(await job.result(timeout=120, poll_delay=0.05))

    return call, pool.aclose
