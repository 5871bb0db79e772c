"""Engine overhead: import time and CPU per task with an instant model. Prints JSON.

    python bench/overhead.py [--runs 300]

Capture modes are compared on the tool round trip (FULL with an exporter that discards the
trace, so disk speed is not measured). Import time is measured in fresh interpreters after
one warm-up import has written bytecode (this machine sets PYTHONDONTWRITEBYTECODE=1, which
would otherwise make every import compile from source). CPU time is `time.process_time()`
over many runs of a 2-task sequential ensemble on an instant `FunctionModel`, divided by the
number of tasks; the best of five rounds is reported, because this shared machine's speed
varies between moments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentensemble import Agent, CaptureMode, Ensemble, FunctionModel, Task, Workflow, tool
from agentensemble.models import Message, ToolResultMessage, ToolSpec, tool_call

IMPORT_PROBE = (
    "import time; t = time.perf_counter(); import agentensemble; print(time.perf_counter() - t)"
)


def import_seconds(samples: int = 9) -> float:
    """Fastest cold-interpreter import, with bytecode compiled by a warm-up import."""
    warm_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-c", "import agentensemble"], env=warm_env, check=True)
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", IMPORT_PROBE], capture_output=True, text=True, check=True
            ).stdout
        )
        for _ in range(samples)
    ]
    return min(times)


@tool
async def async_lookup(key: str) -> str:
    """Look a key up (async)."""
    return "value"


@tool
def sync_lookup(key: str) -> str:
    """Look a key up (sync, runs in a worker thread)."""
    return "value"


def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    return "done"


def call_tool_once(tool_name: str) -> Callable[[Sequence[Message], Sequence[ToolSpec]], Any]:
    def reply(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        if tools and not isinstance(messages[-1], ToolResultMessage):
            return tool_call(tool_name, key="k")
        return "done"

    return reply


class DiscardExporter:
    """Receives traces and drops them: FULL capture is measured without disk writes."""

    def export(self, trace: Any) -> None:
        pass


def two_task_ensemble(
    model: FunctionModel, tools: list[Any], capture: CaptureMode = CaptureMode.OFF
) -> Ensemble:
    agent = Agent("Worker", "Work", llm=model, tools=tools)
    first = Task("Research the topic", agent=agent)
    second = Task("Write it up", agent=agent, context=[first])
    exporter = DiscardExporter() if capture is CaptureMode.FULL else None
    return Ensemble(
        tasks=[first, second],
        workflow=Workflow.SEQUENTIAL,
        capture_mode=capture,
        trace_exporter=exporter,
    )


def cpu_us_per_task(ensemble: Ensemble, runs: int, rounds: int = 5) -> float:
    """Best of `rounds` rounds (this shared machine's speed varies between moments).

    The test-double model records every request; the record is cleared after each run so
    that a growing heap (and slower garbage collection) does not skew later rounds.
    """
    models = {id(task.agent.llm): task.agent.llm for task in ensemble.tasks if task.agent}

    async def one_run() -> None:
        await ensemble.arun()
        for model in models.values():
            model.requests.clear()

    async def best() -> float:
        for _ in range(runs // 10):  # warm-up
            await one_run()
        timings = []
        for _ in range(rounds):
            start = time.process_time()
            for _ in range(runs):
                await one_run()
            timings.append(time.process_time() - start)
        return min(timings)

    return asyncio.run(best()) / (runs * 2) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=300)
    runs = parser.parse_args().runs
    results = {
        "import_ms": round(import_seconds() * 1000, 1),
        "cpu_us_per_task_no_tools": round(
            cpu_us_per_task(two_task_ensemble(FunctionModel(answer), []), runs), 1
        ),
        "cpu_us_per_tool_round_trip_async_tool": round(
            cpu_us_per_task(
                two_task_ensemble(FunctionModel(call_tool_once("async_lookup")), [async_lookup]),
                runs,
            ),
            1,
        ),
        "cpu_us_per_tool_round_trip_sync_tool": round(
            cpu_us_per_task(
                two_task_ensemble(FunctionModel(call_tool_once("sync_lookup")), [sync_lookup]),
                runs,
            ),
            1,
        ),
        "cpu_us_per_task_with_one_tool_call_by_capture_mode": {
            mode.value: round(
                cpu_us_per_task(
                    two_task_ensemble(
                        FunctionModel(call_tool_once("async_lookup")), [async_lookup], mode
                    ),
                    runs,
                ),
                1,
            )
            for mode in CaptureMode
        },
        "budgets": {"import_ms": 150, "cpu_us_per_task_no_tools": 150, "tool_round_trip_us": 500},
        "runs": runs,
        "python": sys.version.split()[0],
    }
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
