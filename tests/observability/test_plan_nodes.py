"""The run's plan on `ensemble_started`: a node per task and what it waits for."""

from __future__ import annotations

from typing import Any

from agentensemble import Ensemble, EnsembleStartedEvent, FunctionModel, Task, Workflow


class Started:
    def __init__(self) -> None:
        self.events: list[EnsembleStartedEvent] = []

    def on_ensemble_started(self, event: EnsembleStartedEvent) -> None:
        self.events.append(event)


def _answer(messages: Any, tools: Any) -> str:
    return "done"


def test_a_listener_hears_each_task_and_what_it_waits_for() -> None:
    research = Task("Research the topic")
    outline = Task("Outline it", context=[research])
    check = Task("Check the facts", context=[research])
    write = Task("Write it up", context=[outline, check])
    heard = Started()
    Ensemble(
        tasks=[research, outline, check, write],
        llm=FunctionModel(_answer),
        workflow=Workflow.PARALLEL,
        listeners=[heard],
    ).run()
    (started,) = heard.events
    assert [(n.task_index, n.description, n.depends_on) for n in started.plan] == [
        (1, "Research the topic", ()),
        (2, "Outline it", (1,)),
        (3, "Check the facts", (1,)),
        (4, "Write it up", (2, 3)),
    ]


def test_in_a_sequential_run_each_task_waits_for_the_one_before() -> None:
    heard = Started()
    Ensemble(
        tasks=[Task("First"), Task("Second"), Task("Third")],
        llm=FunctionModel(_answer),
        workflow=Workflow.SEQUENTIAL,
        listeners=[heard],
    ).run()
    assert [node.depends_on for node in heard.events[0].plan] == [(), (1,), (2,)]
