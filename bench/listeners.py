"""What a listener costs per event. Prints JSON.

    python bench/listeners.py [--tasks 2000]

A PARALLEL run of `--tasks` independent agent tasks on an instant `FunctionModel` (five
events per task), with no listener, with one sync `on_event` listener that does nothing,
and with one async `on_event` listener that does nothing. CPU time is
`time.process_time()` (both threads, so the sync listener's lane thread counts), best of
five rounds; the cost per event is the difference from the run without a listener, over
the number of events the listener received.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from agentensemble import Ensemble, FunctionModel, Task, Workflow


class SyncListener:
    def __init__(self) -> None:
        self.events = 0

    def on_event(self, event: Any) -> None:
        self.events += 1


class AsyncListener:
    def __init__(self) -> None:
        self.events = 0

    async def on_event(self, event: Any) -> None:
        self.events += 1


def cpu_seconds(tasks: int, listener: Any | None, rounds: int = 5) -> tuple[float, int]:
    """Best CPU time of one run, and the events the listener received in it."""
    llm = FunctionModel(lambda messages, tools: "done")
    ensemble = Ensemble(
        tasks=[Task(f"Task {index}") for index in range(tasks)],
        llm=llm,
        workflow=Workflow.PARALLEL,
        listeners=[listener] if listener is not None else [],
    )
    ensemble.run()  # warm-up
    best, events = float("inf"), 0
    for _ in range(rounds):
        before = listener.events if listener is not None else 0
        started = time.process_time()
        ensemble.run()
        best = min(best, time.process_time() - started)
        events = (listener.events if listener is not None else 0) - before
        llm.requests.clear()
    return best, events


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=2000)
    tasks = parser.parse_args().tasks
    bare, _ = cpu_seconds(tasks, None)
    sync, sync_events = cpu_seconds(tasks, SyncListener())
    asynchronous, async_events = cpu_seconds(tasks, AsyncListener())
    results = {
        "tasks": tasks,
        "events_per_run": sync_events,
        "cpu_us_per_task_no_listener": round(bare / tasks * 1e6, 1),
        "cpu_us_per_event_sync_listener": round((sync - bare) / sync_events * 1e6, 2),
        "cpu_us_per_event_async_listener": round((asynchronous - bare) / async_events * 1e6, 2),
        "budgets": {"cpu_us_per_event_sync_listener": 5, "cpu_us_per_event_async_listener": 5},
        "python": sys.version.split()[0],
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
