"""Graphs (BEHAVIOUR 9.9): build rules, routing in edge order, revisits with feedback, the
step cap, routing on structured output and on handler states, events."""

from __future__ import annotations

import asyncio
import tracemalloc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentensemble import (
    Edge,
    Ensemble,
    FunctionModel,
    Graph,
    GraphNoEdgeMatchedError,
    MaxGraphStepsExceededError,
    Phase,
    ScriptedModel,
    Task,
    ValidationError,
    Workflow,
)
from agentensemble.models import Message, ToolSpec
from agentensemble.observability import GraphStateCompletedEvent, JsonTraceExporter, load_trace

END = Graph.END


def task(description: str, *answers: str, **options: Any) -> Task[Any]:
    return Task(
        description=description, expected_output="x", llm=ScriptedModel(list(answers)), **options
    )


def ticket_graph(category: str) -> Graph:
    return Graph(
        "support",
        states={
            "classify": task("Classify the ticket", category),
            "billing": task("Answer billing", "Refund issued."),
            "technical": task("Answer technical", "Reboot it."),
        },
        start="classify",
        edges=[
            Edge("classify", "billing", when=lambda output: "BILLING" in output.raw),
            Edge("classify", "technical", when=lambda output: "TECH" in output.raw),
            Edge("classify", "technical"),
            Edge("billing", END),
            Edge("technical", END),
        ],
    )


# ---- build rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: Graph("", {"a": task("A")}, "a", [Edge("a", END)]), "Graph name must be"),
        (lambda: Graph("g", {}, "a", []), "Graph 'g' must have at least one state"),
        (
            lambda: Graph("g", {END: task("A")}, END, []),
            "Graph 'g' cannot have a state named '__END__'",
        ),
        (
            lambda: Graph("g", {"a": task("A")}, "a", [Edge("a", END)], max_steps=0),
            "Graph 'g' max_steps must be >= 1, got: 0",
        ),
        (
            lambda: Graph("g", {"a": task("A")}, "b", [Edge("a", END)]),
            "Graph 'g' start 'b' is not one of its states",
        ),
        (
            lambda: Graph("g", {"a": task("A")}, END, [Edge("a", END)]),
            "Graph 'g' cannot start at Graph.END",
        ),
        (
            lambda: Graph("g", {"a": task("A")}, "a", [Edge("a", "b")]),
            "names unknown state 'b'",
        ),
        (
            lambda: Graph("g", {"a": task("A")}, "a", [Edge("a", END), Edge(END, "a")]),
            "leaves Graph.END: END is terminal",
        ),
        (
            lambda: Graph("g", {"a": task("A"), "b": task("B")}, "a", [Edge("a", "b")]),
            r"Graph 'g' has state\(s\) with no outgoing edges: \['b'\]. Every non-END state",
        ),
        (
            lambda: Graph("g", {"a": task("A")}, "a", [Edge("a", END)], no_feedback_states=["z"]),
            "no_feedback_states names unknown state",
        ),
        (
            lambda: Graph("g", {"a": "A"}, "a", [Edge("a", END)]),  # type: ignore[dict-item]
            "Graph 'g' state 'a' must be a Task, got: str",
        ),
        (lambda: Edge("a", "b", when="yes"), "when must be callable"),  # type: ignore[arg-type]
    ],
)
def test_build_rules(build: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        build()


def test_one_task_cannot_be_two_states() -> None:
    shared = task("A")
    with pytest.raises(ValidationError, match="states 'a' and 'b' are the same Task"):
        Graph("g", {"a": shared, "b": shared}, "a", [Edge("a", END), Edge("b", END)])


def test_a_graph_is_an_exclusive_orchestration_style() -> None:
    graph = ticket_graph("BILLING")
    with pytest.raises(ValidationError, match="Cannot mix graph with tasks / loops / phases"):
        Ensemble(graph=graph, tasks=[task("Other")]).run()
    with pytest.raises(ValidationError, match="Cannot mix graph"):
        Ensemble(graph=graph, phases=[Phase("p", [task("Other")])]).run()
    with pytest.raises(ValidationError, match="does not support a Graph"):
        Ensemble(graph=graph, workflow=Workflow.HIERARCHICAL).run()
    lonely = Task(description="No model", expected_output="x")
    no_model = Graph("g", {"a": lonely}, "a", [Edge("a", END)])
    with pytest.raises(ValidationError, match="Graph 'g' state 'a' Task has no LLM source"):
        Ensemble(graph=no_model).run()


# ---- walking -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("category", "route"),
    [("BILLING", "billing"), ("TECH", "technical"), ("something else", "technical")],
)
def test_edges_are_tried_in_order_and_the_first_match_wins(category: str, route: str) -> None:
    output = Ensemble(graph=ticket_graph(category)).run()
    assert [(step.state, step.next_state) for step in output.graph_history] == [
        ("classify", route),
        (route, END),
    ]
    assert output.graph_termination_reason == "terminal"
    assert output.raw == output.graph_history[-1].output.raw


def test_no_matching_edge_names_the_state_and_quotes_the_output() -> None:
    graph = Graph(
        "g",
        {"a": task("A", "x" * 300)},
        "a",
        [Edge("a", END, when=lambda output: output.raw == "done")],
    )
    with pytest.raises(GraphNoEdgeMatchedError) as raised:
        Ensemble(graph=graph).run()
    message = str(raised.value)
    assert message.startswith(
        "Graph 'g' state 'a' has no matching outgoing edge for the produced output."
    )
    assert message.endswith("Output preview: " + "x" * 200 + "…")
    assert [o.raw for o in raised.value.completed_outputs] == ["x" * 300]


class Prompts:
    def __init__(self, answers: Sequence[str]) -> None:
        self.answers, self.prompts = list(answers), []  # type: ignore[var-annotated]

    def model(self) -> FunctionModel:
        def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
            self.prompts.append(str(getattr(messages[-1], "text", "")))
            return self.answers[len(self.prompts) - 1]

        return FunctionModel(answer)


def revise_graph(draft: Prompts, *, quiet: Sequence[str] = (), steps: int = 50) -> Graph:
    verdicts = iter(["REVISE", "REVISE", "OK"])
    return Graph(
        "essay",
        {
            "draft": Task(description="Draft it", expected_output="x", llm=draft.model()),
            "check": Task(
                description="Check it",
                expected_output="OK or REVISE",
                llm=FunctionModel(lambda messages, tools: next(verdicts)),
            ),
        },
        "draft",
        [
            Edge("draft", "check"),
            Edge("check", "draft", when=lambda output: output.raw == "REVISE"),
            Edge("check", END),
        ],
        no_feedback_states=quiet,
        max_steps=steps,
    )


def test_revisits_get_feedback_with_the_previous_output() -> None:
    draft = Prompts(["v1", "v2", "v3"])
    output = Ensemble(graph=revise_graph(draft)).run()
    assert [step.state for step in output.graph_history] == ["draft", "check"] * 3
    assert "Revision Instructions" not in draft.prompts[0]
    assert "## Revision Instructions (Attempt 2)" in draft.prompts[1]
    assert (
        "Graph state 'draft' visit #2. Prior visit's output is provided above; refine your "
        "response based on it."
    ) in draft.prompts[1]
    assert "### Previous Output\nv1" in draft.prompts[1]
    assert "### Previous Output\nv2" in draft.prompts[2]
    assert [o.raw for o in output.task_outputs] == ["v3", "OK"]


def test_no_feedback_states_are_revisited_as_they_are() -> None:
    draft = Prompts(["v1", "v2", "v3"])
    Ensemble(graph=revise_graph(draft, quiet=["draft"])).run()
    assert draft.prompts[0] == draft.prompts[1] == draft.prompts[2]


@pytest.mark.parametrize("action", ["RETURN_LAST", "RETURN_WITH_FLAG"])
def test_max_steps_returns_the_last_output(action: str) -> None:
    loop_forever = Graph(
        "g",
        {"a": Task(description="A", expected_output="x", llm=FunctionModel(lambda m, t: "a"))},
        "a",
        [Edge("a", "a")],
        max_steps=4,
        on_max_steps=action,
    )
    output = Ensemble(graph=loop_forever).run()
    assert len(output.graph_history) == 4
    assert output.graph_termination_reason == "max_steps"
    assert output.graph_stopped_by_max_steps is (action == "RETURN_WITH_FLAG")


def test_max_steps_can_throw() -> None:
    graph = Graph(
        "g",
        {"a": Task(description="A", expected_output="x", llm=FunctionModel(lambda m, t: "a"))},
        "a",
        [Edge("a", "a")],
        max_steps=2,
        on_max_steps="THROW",
    )
    with pytest.raises(MaxGraphStepsExceededError) as raised:
        Ensemble(graph=graph).run()
    assert str(raised.value) == (
        "Graph 'g' did not reach a terminal state after 2 step(s). Last state: 'a'."
    )


@dataclass
class Verdict:
    category: str
    urgent: bool


def test_routing_on_a_structured_output_and_a_handler_state() -> None:
    classify = Task(
        description="Classify",
        expected_output="A verdict",
        output_type=Verdict,
        llm=ScriptedModel(['{"category": "billing", "urgent": true}']),
    )
    escalate = Task(
        description="Escalate",
        expected_output="A ticket id",
        handler=lambda context: f"ESC-1 for {context.description}",
    )
    graph = Graph(
        "g",
        {"classify": classify, "escalate": escalate},
        "classify",
        [
            Edge("classify", "escalate", when=lambda output: output.parsed_output.urgent),
            Edge("classify", END),
            Edge("escalate", END),
        ],
    )
    output = Ensemble(graph=graph).run()
    assert [step.state for step in output.graph_history] == ["classify", "escalate"]
    assert output.raw == "ESC-1 for Escalate"


def test_every_step_is_an_event() -> None:
    events: list[GraphStateCompletedEvent] = []

    class Listener:
        async def on_graph_state_completed(self, event: GraphStateCompletedEvent) -> None:
            events.append(event)

    Ensemble(graph=ticket_graph("BILLING"), listeners=[Listener()]).run()
    assert [(e.step, e.state, e.next_state, e.output) for e in events] == [
        (1, "classify", "billing", "BILLING"),
        (2, "billing", END, "Refund issued."),
    ]
    assert all(event.task_id for event in events)


class Counting:
    """A model that answers 1, 2, 3 ... and keeps nothing (unlike the test doubles, which
    record every request)."""

    model_name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def chat(self, messages: Sequence[Message], **options: Any) -> Any:
        from agentensemble import ChatResponse
        from agentensemble.models import AssistantMessage

        self.calls += 1
        return ChatResponse(message=AssistantMessage(text=str(self.calls)))


def test_a_thousand_steps_keep_outputs_not_prompts() -> None:
    long_prompt_task = Task("Count " + "padding " * 500, llm=Counting())  # 4 KB prompts
    graph = Graph("g", {"a": long_prompt_task}, "a", [Edge("a", "a")], max_steps=1000)
    ensemble = Ensemble(graph=graph)
    ensemble.run()  # first use: imports and caches
    tracemalloc.start()
    try:
        output = ensemble.run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(output.graph_history) == 1000
    assert output.graph_history[-1].output.raw == "2000"
    assert peak < 4_000_000  # 1,000 system and user prompts of 4 KB kept would be 8 MB


async def test_cancelling_mid_walk_keeps_the_steps_taken(tmp_path: Path) -> None:
    gate = asyncio.Event()
    calls = 0

    async def slow(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal calls
        calls += 1
        if calls == 3:
            gate.set()
            await asyncio.Event().wait()
        return f"step {calls}"

    graph = Graph(
        "g",
        {"a": Task(description="A", expected_output="x", llm=FunctionModel(slow))},
        "a",
        [Edge("a", "a")],
    )
    exporter = JsonTraceExporter(str(tmp_path))
    running = asyncio.create_task(Ensemble(graph=graph, trace_exporter=exporter).arun())
    await gate.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    [saved] = await asyncio.to_thread(lambda: list(tmp_path.glob("*.json")))
    trace = await asyncio.to_thread(load_trace, saved)
    assert [t.final_output for t in trace.task_traces] == ["step 2"]


def test_the_trace_and_the_console_show_the_walk() -> None:
    import io

    from agentensemble.observability import ConsoleProgress

    stream = io.StringIO()
    output = Ensemble(
        graph=ticket_graph("BILLING"), listeners=[ConsoleProgress(stream, rich=False)]
    ).run()
    assert output.trace is not None
    assert [(s.step, s.state, s.next_state) for s in output.trace.graph_steps] == [
        (1, "classify", "billing"),
        (2, "billing", END),
    ]
    assert "→ graph 'support': classify → billing" in stream.getvalue()
    assert "→ graph 'support': billing → END" in stream.getvalue()


# ---- what a review of the first version found ---------------------------------------------


def test_states_are_checked_like_the_ensembles_tasks() -> None:
    from agentensemble import Review

    gated = Graph("g", {"a": task("A", "x", review=Review.required())}, "a", [Edge("a", END)])
    with pytest.raises(ValidationError, match="sets review, but the ensemble has no review"):
        Ensemble(graph=gated).run()


def test_max_steps_names_the_last_state_that_ran() -> None:
    graph = Graph(
        "g",
        {"a": task("A", "x"), "b": task("B", "y")},
        "a",
        [Edge("a", "b"), Edge("b", END)],
        max_steps=1,
        on_max_steps="THROW",
    )
    with pytest.raises(MaxGraphStepsExceededError, match="Last state: 'a'"):
        Ensemble(graph=graph).run()


def test_an_exit_early_in_a_state_keeps_its_step() -> None:
    from agentensemble import ExitReason, Review, ReviewHandler
    from agentensemble.review import ReviewDecision

    class ExitOnB(ReviewHandler):
        async def review(self, request: Any) -> Any:
            if request.task_output == "b1":
                return ReviewDecision.ExitEarly()
            return ReviewDecision.Continue()

    graph = Graph(
        "g",
        {"a": task("A", "a1"), "b": task("B", "b1", review=Review.required())},
        "a",
        [Edge("a", "b"), Edge("b", END)],
    )
    output = Ensemble(graph=graph, review_handler=ExitOnB()).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert [step.state for step in output.graph_history] == ["a", "b"]
    assert output.raw == "b1"


def test_a_structured_output_that_cannot_be_parsed_is_raised_as_it_is() -> None:
    from agentensemble import OutputParsingError

    classify = Task(
        "Classify",
        output_type=Verdict,
        llm=ScriptedModel(["not json", "still not json", "no", "never"]),
    )
    graph = Graph("g", {"classify": classify}, "classify", [Edge("classify", END)])
    with pytest.raises(OutputParsingError):
        Ensemble(graph=graph).run()


def test_a_revisit_hears_what_the_step_before_said() -> None:
    draft = Prompts(["v1", "v2", "v3"])
    Ensemble(graph=revise_graph(draft)).run()
    assert "What the last step ('check') said:\nREVISE" in draft.prompts[1]


def test_an_edges_description_is_in_the_no_match_error() -> None:
    graph = Graph(
        "g",
        {"a": task("A", "maybe")},
        "a",
        [Edge("a", END, when=lambda o: o.raw == "yes", description="confirmed")],
    )
    with pytest.raises(GraphNoEdgeMatchedError, match=r"'__END__' \(confirmed\)"):
        Ensemble(graph=graph).run()


def test_the_history_keeps_outputs_without_their_traces() -> None:
    output = Ensemble(graph=ticket_graph("BILLING")).run()
    assert all(step.output.trace is None for step in output.graph_history)
