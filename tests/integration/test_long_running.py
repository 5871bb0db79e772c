"""Thousands of runs per process: no error, flat file descriptors and threads, over the real
OpenAI SDK and LangChain's ChatOpenAI against the local wire-format server."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable

import pytest

from agentensemble import Ensemble, OpenAIChatModel, Task

from .openai_server import OpenAIServer, OpenAIStub

pytestmark = pytest.mark.integration

RUNS = 500


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def lasting_new_threads(before: set[threading.Thread]) -> list[str]:
    """The names of the threads started since `before` that are still running after a
    moment to end. A thread on its way out is not growth: the stub server's thread for a
    connection the client just closed, or one that an earlier test's clean-up started
    (counting those made the growth race them); a thread that stays is."""
    new = set(threading.enumerate()) - before
    for thread in new:
        thread.join(timeout=5)
    lasting = sorted(thread.name for thread in new if thread.is_alive())
    pooled = [name for name in lasting if name.startswith("asyncio_")]
    # a loop's default executor (LangChain hands it work) starts a second worker when a
    # job comes while the first has not yet gone idle: reused, bounded by the pool's size
    assert len(pooled) <= min(32, (os.cpu_count() or 1) + 4), pooled
    return [name for name in lasting if name not in pooled]


def run_many(run_once: Callable[[], str], runs: int) -> tuple[int, list[str]]:
    """Warm up, then `runs` runs; return the growth in open files, and the threads started
    meanwhile that stay."""
    for _ in range(5):
        assert run_once() == "ok"
    fds, threads = open_fds(), set(threading.enumerate())
    for _ in range(runs):
        assert run_once() == "ok"
    return open_fds() - fds, lasting_new_threads(threads)


def test_500_sync_runs_on_the_openai_sdk_keep_files_and_threads_flat() -> None:
    stub = OpenAIStub(["ok"] * (RUNS + 5))
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t", max_retries=0)
        ensemble = Ensemble(tasks=[Task("Say ok")], llm=model)
        fd_growth, new_threads = run_many(lambda: ensemble.run().raw, RUNS)
    assert len(stub.requests) == RUNS + 5
    assert fd_growth <= 2  # a pooled connection may be replaced, never accumulated
    assert new_threads == []


def test_500_sync_runs_on_langchain_chat_openai_keep_working() -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    stub = OpenAIStub(["ok"] * (RUNS + 5))
    with OpenAIServer(stub) as server:
        model = ChatOpenAI(
            model="m", base_url=server.base_url, api_key=SecretStr("t"), max_retries=0
        )
        ensemble = Ensemble(tasks=[Task("Say ok")], llm=model)
        fd_growth, new_threads = run_many(lambda: ensemble.run().raw, RUNS)
    assert len(stub.requests) == RUNS + 5
    assert fd_growth <= 2
    assert new_threads == []


def test_a_client_is_closed_when_its_event_loop_shuts_down() -> None:
    """Runs on loops the caller owns (asyncio.run each time): each loop's client is closed
    when that loop ends, so nothing accumulates either."""
    runs = 100
    stub = OpenAIStub(["ok"] * (runs + 5))
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t", max_retries=0)
        ensemble = Ensemble(tasks=[Task("Say ok")], llm=model)
        fd_growth, new_threads = run_many(lambda: asyncio.run(ensemble.arun()).raw, runs)
        assert len(model._clients) == 0  # every loop's client was closed with its loop
    assert fd_growth <= 2
    assert new_threads == []
