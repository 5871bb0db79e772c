"""Cancel runs at random points, many times; exit non-zero on anything unexpected.

Run as a script (the test runs it under ``PYTHONASYNCIODEBUG=1 -W error``):
``python -m tests.stress.cancel_at_random ROUNDS SEED``. Each round starts a run (sequential
or parallel, with batches of concurrent async and sync tool calls), lets the event loop turn
a random number of times, cancels the run, and checks that the run raised CancelledError (or
finished first), and that the exported trace holds exactly the tasks that completed.
"""

from __future__ import annotations

import asyncio
import random
import sys
from collections.abc import Sequence
from typing import Any

from agentensemble import (
    Agent,
    Ensemble,
    EnsembleListener,
    FunctionModel,
    Task,
    TaskCompleteEvent,
    Workflow,
    tool,
    tool_call,
)
from agentensemble.models import Message, ToolResultMessage, ToolSpec
from agentensemble.observability import ExecutionTrace


@tool
async def fetch(key: str) -> str:
    """Fetch a value (async; yields to the loop a few times)."""
    for _ in range(3):
        await asyncio.sleep(0)
    return f"value {key}"


@tool
def compute(key: str) -> str:
    """Compute a value (sync; runs in a worker thread)."""
    return key.upper()


async def model(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
    await asyncio.sleep(0)
    if tools and not any(isinstance(m, ToolResultMessage) for m in messages):
        return [
            tool_call("fetch", key="a"),
            tool_call("compute", key="b"),
            tool_call("fetch", key="c"),
        ]
    return "done"


class Completed(EnsembleListener):
    def __init__(self) -> None:
        self.descriptions: list[str] = []

    async def on_task_complete(self, event: TaskCompleteEvent) -> None:
        self.descriptions.append(event.task_description)


class Keep:
    def __init__(self) -> None:
        self.traces: list[ExecutionTrace] = []

    def export(self, trace: ExecutionTrace) -> None:
        self.traces.append(trace)


async def one_round(rng: random.Random) -> str:
    agent = Agent("Worker", "Work", llm=FunctionModel(model), tools=[fetch, compute])
    first = Task("T1", agent=agent)
    tasks = [
        first,
        Task("T2", agent=agent, context=[first]),
        Task("T3", agent=agent),
        Task("T4", agent=agent),
    ]
    completed, exporter = Completed(), Keep()
    ensemble = Ensemble(
        tasks=tasks,
        workflow=rng.choice([Workflow.SEQUENTIAL, Workflow.PARALLEL]),
        listeners=[completed],
        trace_exporter=exporter,
    )
    run = asyncio.create_task(ensemble.arun())
    for _ in range(rng.randrange(0, 60)):
        await asyncio.sleep(0)
    requested = run.cancel()  # True: the run had not finished, so it must end cancelled
    try:
        output = await run
    except asyncio.CancelledError:
        outcome = "cancelled"
    else:
        outcome = "finished"
        assert not requested, "a cancelled run finished: the cancellation was swallowed"
        assert len(output.task_outputs) == 4, output
    if not exporter.traces:  # cancelled while planning, before the run started
        assert outcome == "cancelled"
        assert completed.descriptions == [], (completed.descriptions, outcome)
        return "cancelled before start"
    traced = sorted(t.task_description for t in exporter.traces[0].task_traces)
    assert traced == sorted(completed.descriptions), (traced, completed.descriptions)
    return outcome


async def main(rounds: int, seed: int) -> None:
    rng = random.Random(seed)
    outcomes = [await one_round(rng) for _ in range(rounds)]
    counts = {name: outcomes.count(name) for name in sorted(set(outcomes))}
    print(", ".join(f"{count} {name}" for name, count in counts.items()))
    assert outcomes.count("cancelled") > 0


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
