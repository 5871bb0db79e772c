"""Deterministic map and reduce tasks for the map-reduce tests: handlers, no model."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agentensemble import HandlerContext, Task
from agentensemble.observability import ExecutionTrace

__all__ = ["Recorder", "broken", "levels", "nodes_of"]


class Recorder:
    """Map and reduce factories whose tasks are handlers; records what each reduce saw.

    A map task answers `map_text(item)` (``"m{item}"`` by default) or raises for an item in
    `failing`; a reduce answers `reduce_text(inputs)` (``"r(...)"`` by default).
    """

    def __init__(
        self,
        *,
        map_text: Callable[[Any], str] = lambda item: f"m{item}",
        reduce_text: Callable[[list[str]], str] = lambda inputs: f"r({','.join(inputs)})",
        failing: Sequence[object] = (),
    ) -> None:
        self.map_text = map_text
        self.reduce_text = reduce_text
        self.failing = set(failing)
        self.mapped: list[Any] = []
        """Items whose map task was made, in order."""
        self.reduced: list[list[str]] = []
        """The inputs (context outputs) each reduce task ran on, in completion order."""
        self.reduce_tasks_made = 0

    def map_task(self, item: Any) -> Task[Any]:
        self.mapped.append(item)

        def answer(context: HandlerContext) -> str:
            if item in self.failing:
                raise RuntimeError(f"map {item} failed")
            return self.map_text(item)

        return Task(f"Map {item}", handler=answer)

    def reduce_task(self, chunk: list[Task[Any]]) -> Task[Any]:
        self.reduce_tasks_made += 1

        def answer(context: HandlerContext) -> str:
            inputs = [output.raw for output in context.context_outputs]
            self.reduced.append(inputs)
            return self.reduce_text(inputs)

        return Task(f"Reduce {self.reduce_tasks_made}", handler=answer, context=chunk)


def levels(trace: ExecutionTrace | None) -> list[tuple[int, str, int, int]]:
    """(level, node type, task count, failed count) of each level of the trace."""
    assert trace is not None
    return [
        (level.level, level.node_type, level.task_count, level.failed_count)
        for level in trace.map_reduce_levels
    ]


def nodes_of(trace: ExecutionTrace | None) -> dict[str, tuple[str | None, int | None]]:
    """Each task's (node type, level), by description."""
    assert trace is not None
    return {
        task.task_description: (task.node_type, task.map_reduce_level) for task in trace.task_traces
    }


def broken(context: HandlerContext) -> str:
    """A handler that always fails."""
    raise ZeroDivisionError(f"{context.description} is broken")
