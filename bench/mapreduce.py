"""MapReduceEnsemble at scale: 10,000 items, static and adaptive. Prints JSON.

    python bench/mapreduce.py [--case NAME]

Four cases, each run in a fresh subprocess (``--case NAME``, which prints one JSON line) so
that each peak RSS (``VmHWM``, the process's high-water mark) is the case's own:
static (``chunk_size=10``) and adaptive (``target_token_budget=200``), each on an instant
model (a sync function) and on a model that sleeps 50 ms (asynchronously) per call. Every
call answers the same 40 characters, which the adaptive mode counts as 10 tokens
(``len(text) // 4``: FunctionModel reports no usage), so a reduce takes 20 outputs.

The instant cases run again with one sync listener that counts every event
(``*_instant_listened``): most users' callbacks are sync, and the dashboard listens to
everything.

Per case: wall time of construction plus run (a static tree is built, factories and all,
when the object is made), the reduce levels after the map level (with each level's task
count and duration), total tasks, peak RSS; for the instant model, engine CPU per task
(process CPU time over construction plus run, divided by total tasks), and the events the
listener heard. Budgets: the instant cases, listened to or not, within 2 s and 80 MB peak
RSS; the 50 ms cases within 3 s and 1 GB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from _rss import peak_rss_kb

from agentensemble import FunctionModel, Task
from agentensemble.mapreduce import MapReduceEnsemble
from agentensemble.models import Message, ToolSpec

ITEMS = 10_000
ANSWER = "A forty-character summary of this input."  # 40 characters: 10 estimated tokens
CHUNK_SIZE = 10
TOKEN_BUDGET = 200
BUDGET_WALL_S = 3.0
BUDGET_RSS_MB = 1024.0
BUDGET_INSTANT_WALL_S = 2.0
BUDGET_INSTANT_RSS_MB = 80.0
CASES = (
    "static_instant",
    "static_instant_listened",
    "static_50ms",
    "adaptive_instant",
    "adaptive_instant_listened",
    "adaptive_50ms",
)


class CountingListener:
    """A sync listener on every event, doing what a user's counter does."""

    def __init__(self) -> None:
        self.events = 0

    def on_event(self, event: Any) -> None:
        self.events += 1


def instant(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    return ANSWER


async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    await asyncio.sleep(0.05)
    return ANSWER


def map_task(item: int) -> Task[Any]:
    return Task(f"Summarise item {item}")


def reduce_task(chunk: Sequence[Task[Any]]) -> Task[Any]:
    return Task("Combine these summaries", context=chunk)


def ensemble(
    adaptive: bool, model: Callable[..., Any], listeners: Sequence[object] = ()
) -> MapReduceEnsemble[int]:
    return MapReduceEnsemble(
        items=list(range(ITEMS)),
        llm=FunctionModel(model),
        map_task=map_task,
        reduce_task=reduce_task,
        chunk_size=None if adaptive else CHUNK_SIZE,
        target_token_budget=TOKEN_BUDGET if adaptive else None,
        listeners=list(listeners),
    )


def run_case(name: str) -> dict[str, Any]:
    """One case in this process: construction plus run, then the trace's levels."""
    mode, latency, *listened = name.split("_")
    model = instant if latency == "instant" else slow
    listener = CountingListener() if listened else None
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    output = ensemble(mode == "adaptive", model, [listener] if listener else []).run()
    wall, cpu = time.perf_counter() - wall_start, time.process_time() - cpu_start
    peak_mb = peak_rss_kb() / 1024
    trace = output.trace
    if trace is None:
        raise RuntimeError("the run recorded no trace")
    levels = trace.map_reduce_levels
    tasks = sum(level.task_count for level in levels)
    result: dict[str, Any] = {
        "workflow": trace.workflow,
        "wall_s": round(wall, 3),
        "reduce_levels": sum(1 for level in levels if level.level > 0),
        "tasks_per_level": [level.task_count for level in levels],
        "level_durations_s": [round(level.duration.total_seconds(), 3) for level in levels],
        "total_tasks": tasks,
        "failed_tasks": sum(level.failed_count for level in levels),
        "peak_rss_mb": round(peak_mb, 1),
        "final_raw_matches": output.raw == ANSWER,
    }
    if latency == "instant":
        result["cpu_us_per_task"] = round(cpu / tasks * 1e6, 1)
        result["within_budget"] = wall < BUDGET_INSTANT_WALL_S and peak_mb < BUDGET_INSTANT_RSS_MB
        if listener is not None:
            result["events_heard"] = listener.events
    else:
        result["within_budget"] = wall < BUDGET_WALL_S and peak_mb < BUDGET_RSS_MB
    return result


def in_subprocess(name: str) -> dict[str, Any]:
    """Run one case in a fresh interpreter, so its peak RSS is its own."""
    completed = subprocess.run(
        [sys.executable, __file__, "--case", name], check=True, capture_output=True, text=True
    )
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    logging.disable(logging.WARNING)
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", choices=CASES)
    args = parser.parse_args()
    if args.case:
        print(json.dumps(run_case(args.case)))
        return
    results: dict[str, Any] = {name: in_subprocess(name) for name in CASES}
    results["items"] = ITEMS
    results["budgets"] = {
        "instant_wall_s": BUDGET_INSTANT_WALL_S,
        "instant_peak_rss_mb": BUDGET_INSTANT_RSS_MB,
        "latency_50ms_wall_s": BUDGET_WALL_S,
        "peak_rss_mb": BUDGET_RSS_MB,
    }
    results["python"] = sys.version.split()[0]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
