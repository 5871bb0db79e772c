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


def client_side_threads() -> int:
    """The process's threads but the stub server's own, one per open connection, which
    end on their own shortly after the client closes it (counting them made the growth
    race the server's clean-up)."""
    return sum("process_request_thread" not in thread.name for thread in threading.enumerate())


def run_many(run_once: Callable[[], str], runs: int) -> tuple[int, int]:
    """Warm up, then `runs` runs; return the growth in open files and in threads."""
    for _ in range(5):
        assert run_once() == "ok"
    fds, threads = open_fds(), client_side_threads()
    for _ in range(runs):
        assert run_once() == "ok"
    return open_fds() - fds, client_side_threads() - threads


def test_500_sync_runs_on_the_openai_sdk_keep_files_and_threads_flat() -> None:
    stub = OpenAIStub(["ok"] * (RUNS + 5))
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t", max_retries=0)
        ensemble = Ensemble(tasks=[Task("Say ok")], llm=model)
        fd_growth, thread_growth = run_many(lambda: ensemble.run().raw, RUNS)
    assert len(stub.requests) == RUNS + 5
    assert fd_growth <= 2  # a pooled connection may be replaced, never accumulated
    assert thread_growth == 0


def test_500_sync_runs_on_langchain_chat_openai_keep_working() -> None:
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    stub = OpenAIStub(["ok"] * (RUNS + 5))
    with OpenAIServer(stub) as server:
        model = ChatOpenAI(
            model="m", base_url=server.base_url, api_key=SecretStr("t"), max_retries=0
        )
        ensemble = Ensemble(tasks=[Task("Say ok")], llm=model)
        fd_growth, thread_growth = run_many(lambda: ensemble.run().raw, RUNS)
    assert len(stub.requests) == RUNS + 5
    assert fd_growth <= 2
    assert thread_growth == 0


def test_a_client_is_closed_when_its_event_loop_shuts_down() -> None:
    """Runs on loops the caller owns (asyncio.run each time): each loop's client is closed
    when that loop ends, so nothing accumulates either."""
    runs = 100
    stub = OpenAIStub(["ok"] * (runs + 5))
    with OpenAIServer(stub) as server:
        model = OpenAIChatModel("m", base_url=server.base_url, api_key="t", max_retries=0)
        ensemble = Ensemble(tasks=[Task("Say ok")], llm=model)
        fd_growth, thread_growth = run_many(lambda: asyncio.run(ensemble.arun()).raw, runs)
        assert len(model._clients) == 0  # every loop's client was closed with its loop
    assert fd_growth <= 2
    assert thread_growth == 0
