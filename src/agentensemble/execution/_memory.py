"""Memory steps (BEHAVIOUR 3.2, 11): recall before the prompt is built, remember after the
review gate.

Before a task: up to 5 entries of each scope it declares (queried with its description),
the run's earlier outputs when short-term memory is on, and the entity facts, each as a
prompt section. After it: its output, as a review left it, is stored in each declared scope,
then the scope's eviction policy runs. Every operation is recorded (events, trace, metrics).
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agentensemble.errors import describe_error
from agentensemble.execution._prompts import PromptSection, PromptSlot
from agentensemble.memory import EvictionPolicy, MemoryEntry, MemoryStore
from agentensemble.memory._entities import EntityMemory

if TYPE_CHECKING:
    from agentensemble.execution._recorder import TaskRecorder
    from agentensemble.execution._steps import TaskState, TaskStep
    from agentensemble.task import Task

__all__ = ["MEMORY_RESULTS", "RecordedStore", "RunMemory", "memory_steps"]

MEMORY_RESULTS = 5
"""Entries of each declared scope a task's prompt shows."""


@dataclass(frozen=True, slots=True)
class RunMemory:
    """The memory one run uses (the ensemble's settings)."""

    store: MemoryStore | None = None
    entities: EntityMemory | None = None
    short_term: bool = False

    def recall_steps(self, task: Task[object]) -> tuple[TaskStep, ...]:
        """What a task on the agent path reads before its prompt is built."""
        steps: list[TaskStep] = []
        if task.memory and self.store is not None:
            steps.append(recall_scopes)
        if self.short_term:
            steps.append(recall_short_term)
        if self.entities is not None:
            steps.append(recall_entities)
        return tuple(steps)

    def remember_steps(self, task: Task[object]) -> tuple[TaskStep, ...]:
        """What a task writes once its output is final."""
        return (remember_output,) if task.memory and self.store is not None else ()


def memory_steps(memory: RunMemory | None, task: Task[object]) -> tuple[tuple[TaskStep, ...], ...]:
    """(recall steps, remember steps) of `task` in a run with `memory`."""
    if memory is None:
        return (), ()
    return memory.recall_steps(task), memory.remember_steps(task)


def _store_of(state: TaskState) -> RecordedStore:
    memory = state.task.run.memory
    if memory is None or memory.store is None:  # planning adds the steps only with a store
        raise AssertionError("memory step in a run without a memory store")
    return RecordedStore(memory.store, state.recorder)


async def recall_scopes(state: TaskState) -> None:
    """A ``## Memory: {scope}`` section per declared scope that has entries."""
    store, planned = _store_of(state), state.task.planned
    for scope in planned.source.memory:
        entries = await store.retrieve(scope.name, planned.description, MEMORY_RESULTS)
        if entries:
            state.add_prompt_section(
                PromptSection(PromptSlot.MEMORY, _scope_section(scope.name, entries))
            )


def _scope_section(scope: str, entries: Sequence[MemoryEntry]) -> str:
    parts = [
        f"## Memory: {scope}\n",
        f'The following information from scope "{scope}" may be relevant:\n',
    ]
    parts.extend(f"\n---\n{entry.content}\n---" for entry in entries)
    parts.append("\n\n")
    return "".join(parts)


async def recall_short_term(state: TaskState) -> None:
    """The run's earlier outputs, in place of the context section (they include it)."""
    started = time.perf_counter()
    earlier = state.task.run.outputs.completed()
    await state.recorder.memory_operation("short_term", None, len(earlier), started)
    if not earlier:
        return
    parts = [
        "## Short-Term Memory (Current Run)\n",
        "The following outputs from earlier tasks in this run may be relevant:\n",
    ]
    parts.extend(
        f"\n---\n### {output.agent_role or 'Agent'}: {output.task_description or ''}\n"
        f"{output.raw}\n---"
        for output in earlier
    )
    parts.append("\n\n")
    state.add_prompt_section(PromptSection(PromptSlot.CONTEXT, "".join(parts)))


async def recall_entities(state: TaskState) -> None:
    """The ``## Entity Knowledge`` section, when any fact is known."""
    memory = state.task.run.memory
    if memory is None or memory.entities is None:  # planning adds the step only with entities
        raise AssertionError("entity step in a run without entity memory")
    started = time.perf_counter()
    facts = _named(memory.entities.facts(), _task_text(state))
    await state.recorder.memory_operation("entity_lookup", None, len(facts), started)
    if not facts:
        return
    lines = ["## Entity Knowledge\n", "The following known facts may be relevant:\n\n"]
    lines.extend(f"- **{name}**: {fact}\n" for name, fact in facts.items())
    lines.append("\n")
    state.add_prompt_section(PromptSection(PromptSlot.ENTITY_KNOWLEDGE, "".join(lines)))


def _task_text(state: TaskState) -> str:
    """What the task is about: its description, expected output and context outputs."""
    planned = state.task.planned
    context = (output.raw for output in state.task.context_outputs)
    return "\n".join((planned.description, planned.expected_output, *context))


def _named(facts: dict[str, str], text: str) -> dict[str, str]:
    """The facts about entities `text` names (whole words, any case)."""
    folded = text.casefold()
    return {
        name: fact
        for name, fact in facts.items()
        if re.search(rf"(?<!\w){re.escape(name.casefold())}(?!\w)", folded)
    }


async def remember_output(state: TaskState) -> None:
    """Store the task's output in each declared scope, then apply the scope's eviction.

    The output is final here, so storing it does not count against the task's timeout: a
    deadline expiring mid-write would fail a task whose output a store had already kept."""
    store, planned = _store_of(state), state.task.planned
    entry = MemoryEntry(
        state.raw,
        structured_content=state.parsed,
        metadata={
            MemoryEntry.AGENT_ROLE: planned.role,
            MemoryEntry.TASK_DESCRIPTION: planned.description,
        },
    )
    with state.task.deadlines.paused():
        for scope in planned.source.memory:
            try:
                await store.store(scope.name, entry)
                if scope.eviction is not None:
                    await store.evict(scope.name, scope.eviction)
            except Exception as error:  # the output is paid for: keep it, then fail
                failure = RuntimeError(
                    f"memory store failed while storing scope '{scope.name}': "
                    f"{describe_error(error)}"
                )
                failure.__cause__ = error
                state.late_failure = failure
                return


class RecordedStore(MemoryStore):
    """A store whose every operation is reported by one task's recorder (the steps above,
    and `ToolContext.memory_store` for tools such as `MemoryTool`)."""

    __slots__ = ("_recorder", "_store")

    def __init__(self, store: MemoryStore, recorder: TaskRecorder) -> None:
        self._store = store
        self._recorder = recorder

    async def store(self, scope: str, entry: MemoryEntry) -> None:
        started = time.perf_counter()
        await self._store.store(scope, entry)
        await self._recorder.memory_operation("store", scope, 1, started)

    async def retrieve(self, scope: str, query: str, max_results: int) -> list[MemoryEntry]:
        started = time.perf_counter()
        entries = await self._store.retrieve(scope, query, max_results)
        await self._recorder.memory_operation("retrieve", scope, len(entries), started)
        return entries

    async def evict(self, scope: str, policy: EvictionPolicy) -> int:
        started = time.perf_counter()
        removed = await self._store.evict(scope, policy)
        removed = removed if isinstance(removed, int) else 0  # a store that returns nothing
        await self._recorder.memory_operation("evict", scope, removed, started)
        return removed

    async def clear(self, scope: str) -> None:
        started = time.perf_counter()
        await self._store.clear(scope)
        await self._recorder.memory_operation("clear", scope, 0, started)
