"""A soak: 1,000 runs in one process with every capability on (sync and async tools, peer
delegation, structured output, memory in a SQLite file, a review gate auto-approved) keep
open files, threads and memory flat (issue 27, bounds). The figures are printed; the
bounds asserted are loose enough for a shared machine and tight enough to catch a leak
(a leak of one object, file or thread per run shows as 1,000 of them)."""

from __future__ import annotations

import gc
import os
import resource
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from agentensemble import (
    Agent,
    Ensemble,
    FunctionModel,
    Review,
    ReviewHandler,
    Task,
    tool,
    tool_call,
)
from agentensemble.memory import MemoryStore
from agentensemble.models import Message, ToolCall, ToolResultMessage, ToolSpec

Reply = ToolCall | list[ToolCall]

RUNS = 1000
WARM_UP = 20


class Summary(BaseModel):
    city: str
    temperature: int


@tool
def weather(city: str) -> int:
    """Today's temperature in a city (a sync tool: it runs on the sync threads)."""
    return len(city) * 3


@tool
async def country(city: str) -> str:
    """The country of a city."""
    return "Norway" if city == "Oslo" else "elsewhere"


def lead_model() -> FunctionModel:
    """Calls both tools, delegates once, then answers with a Summary."""

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str | Reply:
        results = [m for m in messages if isinstance(m, ToolResultMessage)]
        if not results:
            return [tool_call("weather", city="Oslo"), tool_call("country", city="Oslo")]
        if len(results) == 2:
            return tool_call("delegate", agent_role="Checker", task_description="Check 15")
        return '{"city": "Oslo", "temperature": 12}'

    return FunctionModel(answer)


class Tally:
    """Counts the events of every run, to show each capability did its work each time."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def on_event(self, event: object) -> None:
        self.counts[getattr(event, "type", "?")] += 1


def soak_ensemble(directory: Path, tally: Tally) -> Ensemble:
    checker = Agent("Checker", "Check figures", llm=FunctionModel(lambda m, t: "15 is right"))
    lead = Agent(
        "Lead",
        "Report the weather",
        llm=lead_model(),
        tools=[weather, country],
        allow_delegation=True,
    )
    report = Task(
        "Report the weather in Oslo",
        agent=lead,
        output_type=Summary,
        memory=["weather"],
        review=Review.required(),
    )
    return Ensemble(
        tasks=[report],
        agents=[checker],
        memory_store=MemoryStore.sqlite(directory / "memory.db"),
        review_handler=ReviewHandler.auto_approve(),
        listeners=[tally],
    )


def resources() -> tuple[int, int, int]:
    """Open files, threads, and peak RSS in KB."""
    gc.collect()
    files = len(os.listdir("/proc/self/fd"))
    return files, threading.active_count(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_a_thousand_runs_with_every_capability_keep_resources_flat(tmp_path: Path) -> None:
    tally = Tally()
    ensemble = soak_ensemble(tmp_path, tally)
    for _ in range(WARM_UP):
        ensemble.run()
    files, threads, rss = resources()
    for _ in range(RUNS):
        output = ensemble.run()
        assert output.task_outputs[0].parsed_output == Summary(city="Oslo", temperature=12)
    files_after, threads_after, rss_after = resources()
    print(
        f"\nsoak of {RUNS} runs: open files {files} -> {files_after}, threads {threads} -> "
        f"{threads_after}, peak RSS {rss // 1024} MB -> {rss_after // 1024} MB"
    )
    runs = RUNS + WARM_UP
    assert tally.counts["tool_called"] == 3 * runs  # two tools and the delegation
    assert tally.counts["delegation_completed"] == runs
    assert tally.counts["review_decided"] == runs
    assert tally.counts["memory_operation"] == 2 * runs  # a retrieve and a store
    assert files_after - files <= 2
    assert threads_after - threads <= 2  # sync threads come and go; none accumulate
    assert rss_after - rss < 60 * 1024  # KB: a leak of 60 KB per run would show
