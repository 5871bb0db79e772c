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
