"""The ensemble the worker tests serve with ``agentensemble worker`` (in other processes).

Its one shared tool, ``work``, records what happens in Redis so that a test can wait on it
(``BLPOP started``) and count executions (``runs:{job}``). Its ``mode``:

* ``quick``: answer at once;
* ``hold``: wait until the test pushes to ``release:{job}`` (a long request);
* ``hold-first``: hold on the first execution only (so a reclaimed run completes);
* ``die``: SIGKILL the worker process on every execution (a poison request).
"""

from __future__ import annotations

import os
import signal
from datetime import timedelta

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from agentensemble import Ensemble, tool

_HOLD_LIMIT = 600  # seconds: a held job is released by its test long before this


def _client() -> redis.Redis:
    """A client that rides out a Redis restart (the tests restart it under held jobs)."""
    return redis.Redis.from_url(
        os.environ["AGENTENSEMBLE_REDIS_URL"],
        decode_responses=True,
        retry=Retry(ExponentialBackoff(cap=0.5), retries=60),
        retry_on_error=[redis.ConnectionError, redis.BusyLoadingError],
    )


@tool
def work(job: str, mode: str = "quick") -> str:
    """Do a job for a test."""
    with _client() as client:
        runs = client.incr(f"runs:{job}")
        client.rpush("started", f"{os.getpid()}:{job}")
        if mode == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "hold" or (mode == "hold-first" and runs == 1):
            client.blpop([f"release:{job}"], timeout=_HOLD_LIMIT)
    return f"{job} done by {os.getpid()}"


def ensemble() -> Ensemble:
    """The served ensemble (``FLEET_DRAIN_TIMEOUT`` seconds of drain, default 30)."""
    drain = float(os.environ.get("FLEET_DRAIN_TIMEOUT", "30"))
    return Ensemble(
        name="fleet", shared_tools={"work": work}, drain_timeout=timedelta(seconds=drain)
    )


def shares_nothing() -> Ensemble:
    """An ensemble a worker refuses to serve (for the bad-input test)."""
    return Ensemble(name="idle")
