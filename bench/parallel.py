"""Parallel workflow throughput. Prints JSON.

    python bench/parallel.py

(a) 10,000 independent tasks on a model that sleeps 100 ms (asynchronously) per call, all in
    flight at once: wall time, its ratio to the ideal 0.1 s, CPU per task, and the growth of
    peak RSS over the run divided by the tasks in flight. A 100-task run first loads the
    engine (a process's first run imports it), so the figure is the engine's, not the
    import's. Budgets: 0.5 s and 5 KB per in-flight task. The model is a `ChatModel` that
    keeps nothing once it answers, as a provider's client does. The same run on a
    `FunctionModel` is reported beside it (in a fresh interpreter): that test double keeps
    every request, and the messages in it, for a test's assertions, so each task leaves
    four objects more behind for the garbage collector to walk.
(a') the floor under (a), in a fresh interpreter: the same 10,000 asyncio tasks in one
    `TaskGroup`, each building a prompt, awaiting the same sleep and returning a frozen
    result, with no engine: what asyncio alone costs on this machine at this moment.
(b) a 10,000-task layered DAG (100 layers of 100; each task depends on two tasks of the
    layer above) on an instant model: wall time, engine CPU per task, peak RSS (in a fresh
    interpreter, after a 20-task run that loads the engine).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from _rss import peak_rss_kb

from agentensemble import Ensemble, FunctionModel, Task, Workflow
from agentensemble.models import (
    AssistantMessage,
    ChatResponse,
    Message,
    ModelSettings,
    ToolSpec,
)


class SleepyModel:
    """A model that answers after 100 ms and keeps nothing, like a provider's client."""

    model_name = "sleepy"

    async def chat(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        settings: ModelSettings | None = None,
    ) -> ChatResponse:
        await asyncio.sleep(0.1)
        return ChatResponse(AssistantMessage("done"))


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


def sleepy_fan_out(count: int, model: Callable[[], Any] = SleepyModel) -> dict[str, float]:
    """`count` independent tasks on a model that sleeps 100 ms, each `model()`'s own."""
    Ensemble(tasks=independent(100), llm=model(), workflow=Workflow.PARALLEL).run()
    ensemble = Ensemble(tasks=independent(count), llm=model(), workflow=Workflow.PARALLEL)
    figures = fan_out_figures(lambda: len(ensemble.run().task_outputs), count)
    return {**figures, "ratio_to_ideal": round(figures["wall_s"] / 0.1, 2)}


def fan_out_figures(run: Callable[[], int], count: int) -> dict[str, float]:
    """Wall time, CPU per task and peak RSS growth per task of `run` (which returns how
    many tasks completed: all `count` of them)."""
    rss_before = peak_rss_kb()
    started, cpu_started = time.perf_counter(), time.process_time()
    completed = run()
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    rss_kb = peak_rss_kb() - rss_before
    assert completed == count
    return {
        "tasks": count,
        "wall_s": round(wall, 3),
        "cpu_us_per_task": round(cpu / count * 1e6, 1),
        "peak_rss_kb_per_task_in_flight": round(rss_kb / count, 2),
    }


@dataclass(frozen=True, slots=True)
class _FloorOutput:
    description: str
    raw: str


async def _floor_task(index: int) -> _FloorOutput:
    prompt = f"## Task\nTask {index}\n\n## Expected Output\nA result"
    raw = await sleepy((prompt,), ())
    return _FloorOutput(f"Task {index}", raw)


async def _floor_run(count: int) -> list[_FloorOutput]:
    async with asyncio.TaskGroup() as group:
        started = [group.create_task(_floor_task(index)) for index in range(count)]
    return [task.result() for task in started]


def asyncio_floor(count: int) -> dict[str, float]:
    """`sleepy_fan_out`'s shape on asyncio alone (run in a fresh interpreter)."""
    asyncio.run(_floor_run(100))
    return fan_out_figures(lambda: len(asyncio.run(_floor_run(count))), count)


def big_dag(layers: int, width: int) -> dict[str, float]:
    tasks = layered(layers, width)
    ensemble = Ensemble(tasks=tasks, llm=FunctionModel(instant), workflow=Workflow.PARALLEL)
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    output = ensemble.run()
    wall, cpu = time.perf_counter() - wall_start, time.process_time() - cpu_start
    assert len(output.task_outputs) == len(tasks)
    peak_mb = peak_rss_kb() / 1024
    return {
        "tasks": len(tasks),
        "wall_s": round(wall, 3),
        "cpu_us_per_task": round(cpu / len(tasks) * 1e6, 1),
        "peak_rss_mb": round(peak_mb, 1),
    }


def alone(flag: str) -> dict[str, float]:
    """A figure measured in a fresh interpreter (``--dag-only``, ``--floor-only``,
    ``--function-model-only``): its peak RSS is its own, not the fan-out's."""
    child = subprocess.run(
        [sys.executable, __file__, flag], check=True, capture_output=True, text=True
    )
    result: dict[str, float] = json.loads(child.stdout)
    return result


def main() -> None:
    if sys.argv[1:] == ["--dag-only"]:
        big_dag(2, 10)  # loads the engine, as the fan-out's warm-up run does
        print(json.dumps(big_dag(100, 100)))
        return
    if sys.argv[1:] == ["--floor-only"]:
        print(json.dumps(asyncio_floor(10_000)))
        return
    if sys.argv[1:] == ["--function-model-only"]:
        print(json.dumps(sleepy_fan_out(10_000, lambda: FunctionModel(sleepy))))
        return
    results = {
        "sleepy_10000": sleepy_fan_out(10_000),
        "sleepy_10000_function_model": alone("--function-model-only"),
        "sleepy_10000_asyncio_floor": alone("--floor-only"),
        "layered_dag_10000": alone("--dag-only"),
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
