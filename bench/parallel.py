"""Parallel workflow throughput. Prints JSON.

    python bench/parallel.py

(a) 10,000 independent tasks on a model that sleeps 100 ms (asynchronously) per call, all in
    flight at once: wall time, its ratio to the ideal 0.1 s, CPU per task, and the growth of
    peak RSS over the run divided by the tasks in flight. A 100-task run first loads the
    engine (a process's first run imports it), so the figure is the engine's, not the
    import's. Budgets: 0.5 s and 5 KB per in-flight task.
(b) a 10,000-task layered DAG (100 layers of 100; each task depends on two tasks of the
    layer above) on an instant model: wall time, engine CPU per task, peak RSS (in a fresh
    interpreter, after a 20-task run that loads the engine).
"""

from __future__ import annotations

import asyncio
import json
import resource
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

from agentensemble import Ensemble, FunctionModel, Task, Workflow
from agentensemble.models import Message, ToolSpec


async def sleepy(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    await asyncio.sleep(0.1)
    return "done"


def instant(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    return "done"


def independent(count: int) -> list[Task]:
    return [Task(f"Task {i}") for i in range(count)]


def layered(layers: int, width: int) -> list[Task]:
    tasks: list[Task] = []
    above: list[Task] = []
    for layer in range(layers):
        row = [
            Task(
                f"Layer {layer} task {i}",
                context=[above[i], above[(i + 1) % width]] if above else [],
            )
            for i in range(width)
        ]
        tasks.extend(row)
        above = row
    return tasks


def sleepy_fan_out(count: int) -> dict[str, float]:
    Ensemble(tasks=independent(100), llm=FunctionModel(sleepy), workflow=Workflow.PARALLEL).run()
    ensemble = Ensemble(
        tasks=independent(count), llm=FunctionModel(sleepy), workflow=Workflow.PARALLEL
    )
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started, cpu_started = time.perf_counter(), time.process_time()
    output = ensemble.run()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    assert len(output.task_outputs) == count
    return {
        "tasks": count,
        "wall_s": round(wall, 3),
        "ratio_to_ideal": round(wall / 0.1, 2),
        "cpu_us_per_task": round(cpu / count * 1e6, 1),
        "peak_rss_kb_per_task_in_flight": round(rss_kb / count, 2),
    }


def big_dag(layers: int, width: int) -> dict[str, float]:
    tasks = layered(layers, width)
    ensemble = Ensemble(tasks=tasks, llm=FunctionModel(instant), workflow=Workflow.PARALLEL)
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    output = ensemble.run()
    wall, cpu = time.perf_counter() - wall_start, time.process_time() - cpu_start
    assert len(output.task_outputs) == len(tasks)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "tasks": len(tasks),
        "wall_s": round(wall, 3),
        "cpu_us_per_task": round(cpu / len(tasks) * 1e6, 1),
        "peak_rss_mb": round(peak_mb, 1),
    }


def big_dag_alone() -> dict[str, float]:
    """`big_dag` in a fresh interpreter: its peak RSS is its own, not the fan-out's."""
    child = subprocess.run(
        [sys.executable, __file__, "--dag-only"], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(child.stdout)
    return result


def main() -> None:
    if sys.argv[1:] == ["--dag-only"]:
        big_dag(2, 10)  # loads the engine, as the fan-out's warm-up run does
        print(json.dumps(big_dag(100, 100)))
        return
    results = {
        "sleepy_10000": sleepy_fan_out(10_000),
        "layered_dag_10000": big_dag_alone(),
        "budgets": {
            "sleepy_wall_s": 0.5,
            "sleepy_peak_rss_kb_per_task_in_flight": 5,
            "dag_cpu_us_per_task": 300,
            "dag_peak_rss_mb": 500,
        },
        "python": sys.version.split()[0],
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
