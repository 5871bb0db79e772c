"""Memory in runs (BEHAVIOUR 3.2 and 11): what tasks read before they run, what they store
after, and how it shows in events, traces and metrics."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agentensemble import (
    Agent,
    Ensemble,
    FunctionModel,
    ScriptedModel,
    Task,
    ToolContext,
    Workflow,
    tool,
)
from agentensemble.errors import ValidationError
from agentensemble.memory import (
    Embedder,
    EntityMemory,
    InMemoryStore,
    MemoryEntry,
    MemoryScope,
    MemoryStore,
    MemoryTool,
)
from agentensemble.models import Message, tool_call
from agentensemble.observability import EnsembleListener, MemoryOperationEvent, TaskTrace
from agentensemble.outputs import TaskOutput
from agentensemble.review import ReviewDecision, ReviewHandler, ReviewRequest


def user_prompt(messages: Sequence[Message]) -> str:
    return messages[1].text or ""


def echo() -> FunctionModel:
    """Answers ``done: {first line of the task}``."""

    def answer(messages: Sequence[Message], tools: object) -> str:
        lines = user_prompt(messages).splitlines()
        return f"done: {lines[lines.index('## Task') + 1]}"

    return FunctionModel(answer)


def trace_of(output: TaskOutput[Any]) -> TaskTrace:
    assert output.trace is not None
    return output.trace


def prompts(model: FunctionModel | ScriptedModel) -> list[str]:
    return [user_prompt(request.messages) for request in model.requests]


async def test_a_task_sees_its_scopes_entries_in_the_reference_layout() -> None:
    store = MemoryStore.in_memory()
    await store.store("research", MemoryEntry("AI adoption grew 40%"))
    await store.store("research", MemoryEntry("Costs fell"))
    model = echo()
    writer = Agent("Writer", "Write", llm=model)
    first = Task("Gather facts", agent=writer)
    await Ensemble(
        tasks=[first, Task("Write the report", memory=["research"], context=[first], agent=writer)],
        memory_store=store,
    ).arun()
    assert prompts(model)[1] == (
        "## Memory: research\n"
        'The following information from scope "research" may be relevant:\n'
        "\n---\nAI adoption grew 40%\n---"
        "\n---\nCosts fell\n---"
        "\n\n"
        "## Context from Previous Tasks\n"
        "The following results from previous tasks may be relevant:\n"
        "\n---\n### Writer: Gather facts\ndone: Gather facts\n---\n"
        "\n"
        "## Task\nWrite the report\n\n## Expected Output\n"
        "Produce a complete and accurate response to the task."
    )


async def test_outputs_are_stored_in_every_declared_scope_and_read_by_later_runs() -> None:
    store = MemoryStore.in_memory()
    ensemble = Ensemble(
        tasks=[Task("Research {topic}", memory=["research", "archive"])],
        llm=echo(),
        memory_store=store,
    )
    await ensemble.arun(inputs={"topic": "batteries"})
    second = echo()
    await Ensemble(
        tasks=[Task("Summarise", memory=["research"])], llm=second, memory_store=store
    ).arun()
    assert "---\ndone: Research batteries\n---" in prompts(second)[0]
    (stored,) = await store.retrieve("archive", "q", 5)
    assert stored.content == "done: Research batteries"
    assert stored.get_meta(MemoryEntry.AGENT_ROLE) == "Researcher"
    assert stored.get_meta(MemoryEntry.TASK_DESCRIPTION) == "Research batteries"


async def test_a_task_reads_only_the_scopes_it_declares() -> None:
    store = MemoryStore.in_memory()
    await store.store("secret", MemoryEntry("the launch code"))
    await store.store("public", MemoryEntry("the weather"))
    model = echo()
    await Ensemble(tasks=[Task("Talk", memory=["public"])], llm=model, memory_store=store).arun()
    assert "the weather" in prompts(model)[0]
    assert "launch code" not in prompts(model)[0]
    assert "## Memory: secret" not in prompts(model)[0]


async def test_an_empty_scope_adds_no_section() -> None:
    model = echo()
    await Ensemble(
        tasks=[Task("Start", memory=["empty"])], llm=model, memory_store=MemoryStore.in_memory()
    ).arun()
    assert prompts(model)[0].startswith("## Task\nStart")


async def test_at_most_five_entries_per_scope_are_shown() -> None:
    store = MemoryStore.in_memory()
    for number in range(8):
        await store.store("log", MemoryEntry(f"entry {number}"))
    model = echo()
    await Ensemble(tasks=[Task("Go", memory=["log"])], llm=model, memory_store=store).arun()
    shown = [line for line in prompts(model)[0].splitlines() if line.startswith("entry ")]
    assert shown == [f"entry {number}" for number in range(3, 8)]


async def test_handler_outputs_are_stored_with_the_deterministic_role() -> None:
    store = MemoryStore.in_memory()
    await Ensemble(
        tasks=[Task("Fetch prices", handler=lambda context: "42 EUR", memory=["prices"])],
        memory_store=store,
    ).arun()
    (stored,) = await store.retrieve("prices", "q", 5)
    assert (stored.content, stored.get_meta("agent_role")) == ("42 EUR", "(deterministic)")


class Price(BaseModel):
    amount: int


async def test_structured_outputs_are_stored_with_their_parsed_value() -> None:
    store = MemoryStore.in_memory()
    await Ensemble(
        tasks=[Task("Price it", output_type=Price, memory=["prices"])],
        llm=ScriptedModel(['{"amount": 7}']),
        memory_store=store,
    ).arun()
    (stored,) = await store.retrieve("prices", "q", 5)
    assert stored.structured_content == Price(amount=7)


async def test_a_reviewers_edit_is_what_is_stored() -> None:
    class Editor(ReviewHandler):
        async def review(self, request: ReviewRequest) -> ReviewDecision:
            return ReviewDecision.Edit("edited by a person")

    from agentensemble.review import Review

    store = MemoryStore.in_memory()
    await Ensemble(
        tasks=[Task("Draft", memory=["drafts"], review=Review.required())],
        llm=echo(),
        memory_store=store,
        review_handler=Editor(),
    ).arun()
    (stored,) = await store.retrieve("drafts", "q", 5)
    assert stored.content == "edited by a person"


async def test_a_scopes_eviction_runs_after_each_store() -> None:
    store = MemoryStore.in_memory()
    scope = MemoryScope.of("recent").keep_last_entries(2)
    tasks = [Task(f"Step {number}", memory=[scope]) for number in range(4)]
    await Ensemble(tasks=tasks, llm=echo(), memory_store=store).arun()
    remaining = await store.retrieve("recent", "q", 10)
    assert [entry.content for entry in remaining] == ["done: Step 2", "done: Step 3"]


async def test_parallel_tasks_writing_one_scope_lose_nothing() -> None:
    store = MemoryStore.in_memory()
    tasks = [Task(f"Item {number}", memory=["shared"]) for number in range(25)]
    await Ensemble(tasks=tasks, llm=echo(), memory_store=store, workflow=Workflow.PARALLEL).arun()
    stored = await store.retrieve("shared", "q", 100)
    assert sorted(entry.content for entry in stored) == sorted(
        f"done: Item {number}" for number in range(25)
    )


async def test_short_term_memory_shows_every_earlier_output_instead_of_the_context() -> None:
    model = echo()
    writer = Agent("Writer", "Write", llm=model)
    first, second = Task("One", agent=writer), Task("Two", agent=writer)
    await Ensemble(
        tasks=[first, second, Task("Three", context=[second], agent=writer)],
        short_term_memory=True,
    ).arun()
    assert prompts(model)[0].startswith("## Task\nOne")
    assert prompts(model)[2] == (
        "## Short-Term Memory (Current Run)\n"
        "The following outputs from earlier tasks in this run may be relevant:\n"
        "\n---\n### Writer: One\ndone: One\n---"
        "\n---\n### Writer: Two\ndone: Two\n---"
        "\n\n"
        "## Task\nThree\n\n## Expected Output\n"
        "Produce a complete and accurate response to the task."
    )


async def test_each_task_sees_the_facts_about_the_entities_it_names() -> None:
    entities = EntityMemory()
    entities.put("Acme Corp", "a rocket maker founded in 1999")
    entities.put("Jo", "Acme's CEO")
    model = echo()
    tasks = [
        Task("Profile ACME CORP and its CEO Jo"),
        Task("Summarise the market"),
        Task("Write to jo", expected_output="A letter"),
    ]
    await Ensemble(tasks=tasks, llm=model, entity_memory=entities).arun()
    header = "## Entity Knowledge\nThe following known facts may be relevant:\n\n"
    both = header + "- **Acme Corp**: a rocket maker founded in 1999\n- **Jo**: Acme's CEO\n\n"
    first, second, third = prompts(model)
    assert first.startswith(both + "## Task\n")
    assert "Entity Knowledge" not in second
    assert third.startswith(header + "- **Jo**: Acme's CEO\n\n")


def test_put_says_which_fact_it_replaced() -> None:
    entities = EntityMemory()
    assert entities.put("Jo", "Acme's CEO") is None
    assert entities.put(" Jo ", "Acme's former CEO") == "Acme's CEO"
    assert entities.get("Jo") == "Acme's former CEO"


class Recorder(EnsembleListener):
    def __init__(self) -> None:
        self.events: list[MemoryOperationEvent] = []

    def on_memory_operation(self, event: MemoryOperationEvent) -> None:
        self.events.append(event)


async def test_memory_operations_show_in_events_traces_and_metrics() -> None:
    store = MemoryStore.in_memory()
    await store.store("notes", MemoryEntry("old note"))
    recorder = Recorder()
    output = await Ensemble(
        tasks=[Task("Use notes on X", memory=[MemoryScope.of("notes").keep_last_entries(1)])],
        llm=echo(),
        memory_store=store,
        entity_memory=EntityMemory({"X": "y"}),
        listeners=[recorder],
    ).arun()
    seen = [(event.operation, event.scope, event.entry_count) for event in recorder.events]
    assert seen == [
        ("retrieve", "notes", 1),
        ("entity_lookup", None, 1),
        ("store", "notes", 1),
        ("evict", "notes", 1),
    ]
    assert output.trace is not None
    assert {event.ensemble_id for event in recorder.events} == {output.trace.ensemble_id}
    (task_output,) = output.task_outputs
    assert task_output.metrics.memory_operations == 4
    reads = [
        op.duration
        for op in trace_of(task_output).memory_operations
        if op.operation in ("retrieve", "entity_lookup")
    ]  # the retrieval time is the reads' time (to rounding), not the writes'
    difference = task_output.metrics.memory_retrieval_time - sum(reads, timedelta(0))
    assert abs(difference) <= timedelta(microseconds=len(reads))
    assert [op.operation for op in trace_of(task_output).memory_operations] == [
        "retrieve",
        "entity_lookup",
        "store",
        "evict",
    ]
    assert output.metrics.total_memory_operations == 4
    assert output.metrics.total_memory_retrieval_time == task_output.metrics.memory_retrieval_time


async def test_runs_without_memory_count_no_operations() -> None:
    output = await Ensemble(tasks=[Task("Plain")], llm=echo()).arun()
    assert output.metrics.total_memory_operations == 0
    assert trace_of(output.task_outputs[0]).memory_operations == ()


async def test_memory_tool_stores_and_retrieves_through_the_ensemble_store() -> None:
    store = MemoryStore.in_memory()
    model = ScriptedModel(
        [
            tool_call("store_memory", key="capital", value="Paris"),
            tool_call("store_memory", key=" ", value="x"),
            tool_call("retrieve_memory", query="capital"),
            tool_call("retrieve_memory", query=""),
            "Paris it is",
        ]
    )
    agent = Agent("Clerk", "Remember things", llm=model, tools=[MemoryTool("facts")])
    output = await Ensemble(tasks=[Task("Note it", agent=agent)], memory_store=store).arun()
    results = [
        interaction.tool_calls[0].result
        for interaction in trace_of(output.task_outputs[0]).llm_interactions
        if interaction.tool_calls
    ]
    assert results == [
        "Stored: capital",
        "Error: key must not be blank",
        "Retrieved memories:\n- capital: Paris",
        "No query provided",
    ]
    (stored,) = await store.retrieve("facts", "q", 5)
    assert dict(stored.metadata) == {"key": "capital", "source": "MemoryTool"}
    operations = [op.operation for op in trace_of(output.task_outputs[0]).memory_operations]
    assert operations == ["store", "retrieve"]


async def test_memory_tool_with_its_own_store_needs_no_ensemble_store() -> None:
    own = MemoryStore.in_memory()
    model = ScriptedModel([tool_call("retrieve_memory", query="anything"), "nothing known"])
    agent = Agent("Clerk", "Look up", llm=model, tools=[MemoryTool.of("facts", own)])
    output = await Ensemble(tasks=[Task("Look", agent=agent)]).arun()
    (interaction, _) = trace_of(output.task_outputs[0]).llm_interactions
    assert interaction.tool_calls[0].result == "No relevant memories found for: anything"


async def test_tools_reach_the_ensemble_store_through_the_tool_context() -> None:
    seen: list[Any] = []

    @tool
    async def remember(context: ToolContext, fact: str) -> str:
        """Remember a fact."""
        assert context.memory_store is not None
        await context.memory_store.store("facts", MemoryEntry(fact))
        seen.append(await context.memory_store.retrieve("facts", fact, 5))
        return "ok"

    store = MemoryStore.in_memory()
    model = ScriptedModel([tool_call("remember", fact="water is wet"), "done"])
    agent = Agent("Clerk", "Remember", llm=model, tools=[remember])
    output = await Ensemble(tasks=[Task("Go", agent=agent)], memory_store=store).arun()
    assert [entry.content for entry in seen[0]] == ["water is wet"]
    assert output.task_outputs[0].metrics.memory_operations == 2


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: Ensemble(tasks=[Task("T", memory=["notes"])], llm=echo()),
            r"Task 'T' declares memory scopes \['notes'\], but the ensemble has no memory_store",
        ),
        (
            lambda: Ensemble(
                tasks=[Task("T", agent=Agent("A", "g", llm=echo(), tools=[MemoryTool("n")]))]
            ),
            "MemoryTool for scope 'n' has no store",
        ),
        (
            lambda: Ensemble(
                tasks=[Task("T", memory=["n"])],
                llm=echo(),
                memory_store=MemoryStore.in_memory(),
                workflow=Workflow.HIERARCHICAL,
            ),
            "Task 'T' sets memory, which HIERARCHICAL workflow does not apply",
        ),
        (
            lambda: Ensemble(
                tasks=[Task("T")],
                llm=echo(),
                short_term_memory=True,
                workflow=Workflow.HIERARCHICAL,
            ),
            "Ensemble short_term_memory does not apply to Workflow.HIERARCHICAL",
        ),
    ],
)
def test_memory_settings_that_cannot_work_fail_before_any_model_call(
    build: Any, message: str
) -> None:
    ensemble = build()
    with pytest.raises(ValidationError, match=message):
        ensemble.run()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"memory_store": "memory.db"}, "Ensemble memory_store must be a MemoryStore"),
        ({"entity_memory": {"a": "b"}}, "Ensemble entity_memory must be a EntityMemory"),
        ({"short_term_memory": "yes"}, "Ensemble short_term_memory must be True or False"),
    ],
)
def test_bad_memory_settings_are_rejected_when_the_ensemble_is_built(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        Ensemble(tasks=[Task("T")], llm=echo(), **changes)


def test_memory_tool_rejects_a_blank_scope_and_a_non_store() -> None:
    with pytest.raises(ValidationError, match="MemoryTool scope must not be blank, got: ' '"):
        MemoryTool(" ")
    with pytest.raises(ValidationError, match="MemoryTool store must be a MemoryStore"):
        MemoryTool("s", "not a store")  # type: ignore[arg-type]


async def test_a_failing_store_fails_the_task_with_the_cause() -> None:
    class Broken(MemoryStore):
        async def store(self, scope: str, entry: MemoryEntry) -> None:
            raise OSError("disk full")

        async def retrieve(self, scope: str, query: str, max_results: int) -> list[MemoryEntry]:
            return []

        async def evict(self, scope: str, policy: Any) -> int:
            return 0

        async def clear(self, scope: str) -> None:
            return None

    first = Task("First")
    with pytest.raises(Exception, match="disk full") as caught:
        await Ensemble(
            tasks=[first, Task("Second", memory=["s"])], llm=echo(), memory_store=Broken()
        ).arun()
    completed = caught.value.completed_outputs  # type: ignore[attr-defined]
    assert [output.raw for output in completed] == ["done: First", "done: Second"]  # kept


async def test_concurrent_runs_share_one_store() -> None:
    store = MemoryStore.in_memory()
    ensemble = Ensemble(tasks=[Task("Run {n}", memory=["runs"])], llm=echo(), memory_store=store)
    async with asyncio.TaskGroup() as group:
        for number in range(10):
            group.create_task(ensemble.arun(inputs={"n": str(number)}))
    stored = await store.retrieve("runs", "q", 20)
    assert len(stored) == 10


async def test_storing_the_output_does_not_count_against_the_task_timeout() -> None:
    class SlowDisk(InMemoryStore):
        async def store(self, scope: str, entry: MemoryEntry) -> None:
            await asyncio.sleep(0.3)  # the scenario: a write slower than the task's timeout
            await super().store(scope, entry)

    store = SlowDisk()
    output = await Ensemble(
        tasks=[Task("Quick", memory=["s"], timeout=0.1)], llm=echo(), memory_store=store
    ).arun()
    assert output.raw == "done: Quick"
    assert [entry.content for entry in await store.retrieve("s", "q", 5)] == ["done: Quick"]


@pytest.mark.parametrize("kind", ["sqlite", "embeddings"])
async def test_typed_outputs_are_kept_by_the_persistent_stores(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "memory.db"
    store = (
        MemoryStore.sqlite(path)
        if kind == "sqlite"
        else MemoryStore.embeddings(Embedder.hashing(), path)
    )
    async with store:
        await Ensemble(
            tasks=[Task("Price it", output_type=Price, memory=["prices"])],
            llm=ScriptedModel(['{"amount": 7}']),
            memory_store=store,
        ).arun()
        (stored,) = await store.retrieve("prices", "price", 5)
    assert stored.structured_content == {"amount": 7}


async def test_a_run_validates_while_another_thread_is_still_importing_memory_tool(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A module is in sys.modules before its body has run: a run that checks its tools for a
    # MemoryTool must not read the class from a module that has not defined it yet.
    half_imported = types.ModuleType("agentensemble.memory._tool")
    monkeypatch.setitem(sys.modules, "agentensemble.memory._tool", half_imported)

    @tool
    def count_words(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    agent = Agent("Writer", "Write", llm=echo(), tools=[count_words])
    output = await Ensemble(tasks=[Task("Write it", agent=agent)]).arun()
    assert len(output.task_outputs) == 1
