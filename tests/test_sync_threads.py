"""One cap on sync threads for the whole process: many runs at once never start more
than `limit_sync_threads` threads for their sync tools (issue 27, item 23)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    ScriptedModel,
    Task,
    ValidationError,
    limit_sync_threads,
    tool,
    tool_call,
)
from agentensemble._calling import DEFAULT_SYNC_THREAD_LIMIT, sync_threads

SAFETY = 30.0


@pytest.fixture
def cap_of_three() -> Iterator[None]:
    limit_sync_threads(3)
    try:
        yield
    finally:
        limit_sync_threads(DEFAULT_SYNC_THREAD_LIMIT)


async def test_concurrent_runs_share_the_process_cap(cap_of_three: None) -> None:
    lock = threading.Lock()
    in_flight, peak = [0], [0]
    full, release = threading.Event(), threading.Event()

    @tool
    def hold(n: int) -> str:
        """Hold a sync thread until released."""
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
            if in_flight[0] == 3:
                full.set()
        release.wait(SAFETY)
        with lock:
            in_flight[0] -= 1
        return f"held {n}"

    def ensemble(n: int) -> Ensemble:
        model = ScriptedModel([tool_call("hold", n=n), f"run {n} done"])
        agent = Agent("Holder", "Hold", llm=model, tools=[hold])
        return Ensemble(tasks=[Task("Hold a thread", agent=agent)], max_sync_threads=8)

    async with asyncio.timeout(SAFETY), asyncio.TaskGroup() as group:
        runs = [group.create_task(ensemble(n).arun()) for n in range(8)]
        await asyncio.to_thread(full.wait, SAFETY)
        assert sync_threads() <= 3  # eight runs want a thread; three exist
        release.set()
    assert sorted(run.result().raw for run in runs) == [f"run {n} done" for n in range(8)]
    assert peak[0] == 3


def test_the_cap_must_be_a_positive_whole_number() -> None:
    with pytest.raises(ValidationError, match="limit_sync_threads limit must be > 0, got: 0"):
        limit_sync_threads(0)
    with pytest.raises(ValidationError, match="limit_sync_threads limit must be an integer"):
        limit_sync_threads("8")  # type: ignore[arg-type]
