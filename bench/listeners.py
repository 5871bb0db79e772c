"""What a listener costs per event. Prints JSON.

    python bench/listeners.py [--tasks 2000] [--rounds 9]

A PARALLEL run of `--tasks` independent agent tasks on an instant `FunctionModel` (five
events per task), with no listener, with one sync `on_event` listener that does nothing,
and with one async `on_event` listener that does nothing. CPU time is
`time.process_time()` (both threads, so the sync listener's lane thread counts). The three
runs alternate for `--rounds` rounds (9), so that the machine's drift hits them alike; the
cost per event is the difference between the best (least CPU) run with the listener and
the best run without, over the number of events the listener received. (The median of
each round's difference, also printed, moves with every slow round of either run: in four
runs of one commit it gave the async listener 0.8-2.4 µs, and twice went below zero in
earlier sessions; the best runs gave 0.9-1.2 µs.)
"""

from __future__ import annotations

import argparse
import json
import statistics
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


class Case:
    """One ensemble of the comparison: its run's CPU time and the events its listener got."""

    def __init__(self, tasks: int, listener: Any | None) -> None:
        self.llm = FunctionModel(lambda messages, tools: "done")
        self.listener = listener
        self.ensemble = Ensemble(
            tasks=[Task(f"Task {index}") for index in range(tasks)],
            llm=self.llm,
            workflow=Workflow.PARALLEL,
            listeners=[listener] if listener is not None else [],
        )
        self.ensemble.run()  # warm-up
        self.events = 0

    def cpu_seconds(self) -> float:
        before = self.listener.events if self.listener is not None else 0
        started = time.process_time()
        self.ensemble.run()
        spent = time.process_time() - started
        self.events = (self.listener.events if self.listener is not None else 0) - before
        self.llm.requests.clear()
        return spent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    bare, sync, asynchronous = (
        Case(args.tasks, None),
        Case(args.tasks, SyncListener()),
        Case(args.tasks, AsyncListener()),
    )
    rounds: list[tuple[float, float, float]] = []
    for _ in range(args.rounds):  # interleaved, so a drift of the machine hits all three
        rounds.append((bare.cpu_seconds(), sync.cpu_seconds(), asynchronous.cpu_seconds()))
    bare_cpu, sync_cpu, async_cpu = (min(cpu[column] for cpu in rounds) for column in range(3))

    def per_event(listened: float, case: Case) -> float:
        return round((listened - bare_cpu) / case.events * 1e6, 2)

    def median_per_event(column: int, case: Case) -> float:
        added = [(cpu[column] - cpu[0]) / case.events for cpu in rounds]
        return round(statistics.median(added) * 1e6, 2)

    results = {
        "tasks": args.tasks,
        "events_per_run": sync.events,
        "cpu_us_per_task_no_listener": round(bare_cpu / args.tasks * 1e6, 1),
        "cpu_us_per_event_sync_listener": per_event(sync_cpu, sync),
        "cpu_us_per_event_async_listener": per_event(async_cpu, asynchronous),
        "median_of_round_differences_us_per_event": {
            "sync": median_per_event(1, sync),
            "async": median_per_event(2, asynchronous),
        },
        "budgets": {"cpu_us_per_event_sync_listener": 5, "cpu_us_per_event_async_listener": 5},
        "python": sys.version.split()[0],
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
