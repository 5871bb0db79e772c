"""Sync user code runs on daemon threads: a call stuck in a sync tool never holds the exit."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from agentensemble._daemon_pool import DaemonPool


def test_at_most_max_workers_threads_run_at_once() -> None:
    pool = DaemonPool(2, "test")
    release, running, peak = threading.Event(), [0], [0]
    lock = threading.Lock()

    def work() -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        release.wait(10)
        with lock:
            running[0] -= 1
        return 1

    futures = [pool.submit(work) for _ in range(6)]
    release.set()
    assert sum(future.result(10) for future in futures) == 6
    assert peak[0] <= 2
    pool.shutdown()


def test_errors_reach_the_caller_and_shutdown_refuses_new_work() -> None:
    pool = DaemonPool(1, "test")

    def broken() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        pool.submit(broken).result(10)
    pool.shutdown(cancel_futures=True)
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(print)


def test_ctrl_c_during_a_slow_sync_tool_exits_at_once() -> None:
    program = textwrap.dedent(
        """
        import threading
        from agentensemble import Agent, Ensemble, ScriptedModel, Task, ToolCall, tool

        @tool
        def slow_lookup(query: str) -> str:
            \"\"\"Look something up, slowly.\"\"\"
            print("tool started", flush=True)
            threading.Event().wait()  # stuck for good, as a socket without a timeout is
            return "late"

        call = ToolCall(id="c1", name="slow_lookup", arguments='{"query": "x"}')
        agent = Agent("A", "g", tools=[slow_lookup], llm=ScriptedModel([call, "done"]))
        Ensemble(tasks=[Task("Look it up", agent=agent)]).run()
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", program],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    try:
        assert child.stdout.readline().strip() == "tool started"
        child.send_signal(signal.SIGINT)
        child.wait(timeout=30)  # the tool never returns: only a thread holding the exit waits
    finally:
        if child.poll() is None:
            child.kill()
    assert child.stderr is not None
    assert "KeyboardInterrupt" in child.stderr.read()


_CTRL_C_TAKEN_BY_THE_TOOLS_THREAD = """
import asyncio, signal, threading
from agentensemble import Agent, Ensemble, FunctionModel, Task, ToolCall, tool

loops = []

def model(messages, tools):
    loops.append(asyncio.get_running_loop())
    if len(loops) == 1:
        return ToolCall(id="c1", name="slow_lookup", arguments='{"query": "x"}')
    return "done"

@tool
def slow_lookup(query: str) -> str:
    \"\"\"Look something up, slowly.\"\"\"
    idle = threading.Event()
    loops[0].call_soon_threadsafe(idle.set)  # the loop has run: it goes back to waiting
    idle.wait(10)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # the kernel gave it here
    threading.Event().wait()  # stuck for good
    return "late"

agent = Agent("A", "g", tools=[slow_lookup], llm=FunctionModel(model))
Ensemble(tasks=[Task("Look it up", agent=agent)]).run()
"""


def test_ctrl_c_taken_by_a_tools_thread_wakes_the_waiting_loop() -> None:
    child = subprocess.run(
        [sys.executable, "-c", _CTRL_C_TAKEN_BY_THE_TOOLS_THREAD],
        capture_output=True,
        text=True,
        timeout=60,  # a regression waits in `select` for good: the timeout fails the test
        check=False,
    )
    assert "KeyboardInterrupt" in child.stderr


def _threads_named(prefix: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith(prefix)]


def test_idle_threads_end_after_the_idle_timeout() -> None:
    pool = DaemonPool(3, "idle-test", idle_timeout=0.05)
    futures = [pool.submit(lambda: 1) for _ in range(3)]
    assert [future.result(10) for future in futures] == [1, 1, 1]
    for thread in _threads_named("idle-test"):
        thread.join(10)  # each ends on its own once idle for 0.05 s
    assert pool.threads == 0
    assert pool.submit(lambda: 2).result(10) == 2  # and new work starts a thread again
    pool.shutdown()


def test_lowering_max_workers_retires_threads_as_they_become_idle() -> None:
    pool = DaemonPool(4, "retire-test")
    started, release = threading.Barrier(5, timeout=10), threading.Event()

    def hold() -> None:
        started.wait()
        release.wait(10)

    futures = [pool.submit(hold) for _ in range(4)]
    started.wait()  # four threads, all busy
    threads = _threads_named("retire-test")
    assert len(threads) == 4
    pool.max_workers = 1
    release.set()
    for future in futures:
        future.result(10)
    ended = 0
    for thread in threads:  # three end after their call; the last one stays, idle
        thread.join(0.5 if ended < 3 else 0)
        ended += not thread.is_alive()
    assert ended == 3
    assert pool.threads == 1
    pool.shutdown()
