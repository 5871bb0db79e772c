"""Adaptive MapReduceEnsemble (BEHAVIOUR 16.4-16.6): levels planned from token counts while
the run runs, the short-circuit, failures, and one run across levels."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

import pytest

from agentensemble import (
    Agent,
    FunctionModel,
    HandlerContext,
    ParallelErrorStrategy,
    ParallelExecutionError,
    PromptTemplateError,
    Task,
    TaskExecutionError,
    Usage,
    ValidationError,
)
from agentensemble.mapreduce import MapReduceEnsemble
from agentensemble.models import Message, ToolSpec
from agentensemble.observability import (
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    ExecutionTrace,
    TaskStartEvent,
)
from tests.mapreduce.helpers import Recorder, broken, levels, nodes_of
from tests.review.helpers import Events

CONTINUE = ParallelErrorStrategy.CONTINUE_ON_ERROR


def adaptive(items: list[Any], recorder: Recorder, **settings: Any) -> MapReduceEnsemble[Any]:
    settings.setdefault("target_token_budget", 250)
    return MapReduceEnsemble(
        items=items, map_task=recorder.map_task, reduce_task=recorder.reduce_task, **settings
    )


def tokens(count: int) -> str:
    """A text the built-in heuristic counts as `count` tokens."""
    return "x" * (4 * count)


class Exported:
    """A trace exporter keeping what it is given."""

    def __init__(self) -> None:
        self.traces: list[ExecutionTrace] = []

    def export(self, trace: ExecutionTrace) -> None:
        self.traces.append(trace)


def test_outputs_that_fit_the_budget_get_one_final_reduce() -> None:
    recorder = Recorder()
    output = adaptive([1, 2, 3], recorder).run()
    assert output.raw == "r(m1,m2,m3)"
    assert output.trace is not None
    assert output.trace.workflow == "MAP_REDUCE_ADAPTIVE"
    assert levels(output.trace) == [(0, "map", 3, 0), (1, "final-reduce", 1, 0)]


def test_outputs_over_the_budget_are_packed_into_reduce_levels() -> None:
    recorder = Recorder(map_text=lambda item: tokens(100), reduce_text=lambda inputs: "short")
    output = adaptive(list(range(8)), recorder, target_token_budget=250).run()
    assert levels(output.trace) == [
        (0, "map", 8, 0),
        (1, "reduce", 4, 0),  # two 100-token outputs per 250-token bin
        (2, "final-reduce", 1, 0),
    ]
    assert sorted(len(inputs) for inputs in recorder.reduced[:4]) == [2, 2, 2, 2]
    assert recorder.reduced[-1] == ["short"] * 4
    nodes = nodes_of(output.trace)
    assert nodes["Map 0"] == ("map", 0)
    assert "Reduce 1" not in nodes  # made before the map level, to check the factory
    assert nodes["Reduce 2"] == ("reduce", 1)
    assert nodes["Reduce 6"] == ("final-reduce", 2)


def test_bins_are_packed_first_fit_decreasing() -> None:
    """BEHAVIOUR 16.5: budget 100, tokens [30, 60, 40, 50] -> bins [[60, 40], [50, 30]]."""
    recorder = Recorder(map_text=lambda item: f"t{item}", reduce_text=lambda inputs: "done")
    ensemble = adaptive(
        [30, 60, 40, 50],
        recorder,
        target_token_budget=100,
        token_estimator=lambda text: int(text[1:]) if text.startswith("t") else None,
    )
    ensemble.run()
    # the bins [60, 40] and [50, 30], each read in item order
    assert sorted(recorder.reduced[:2]) == [["t30", "t50"], ["t60", "t40"]]


def shrink_by_ten_tokens(inputs: list[str]) -> str:
    return "".join(inputs)[40:]


def test_max_reduce_levels_forces_the_final_reduce(caplog: pytest.LogCaptureFixture) -> None:
    recorder = Recorder(map_text=lambda item: tokens(100), reduce_text=shrink_by_ten_tokens)
    ensemble = adaptive(list(range(8)), recorder, target_token_budget=250, max_reduce_levels=2)
    with caplog.at_level(logging.WARNING, logger="agentensemble.mapreduce"):
        output = ensemble.run()
    assert levels(output.trace) == [
        (0, "map", 8, 0),
        (1, "reduce", 4, 0),  # 800 tokens in pairs: 4 outputs of 190
        (2, "reduce", 4, 0),  # 190-token outputs: one per bin; 4 outputs of 180
        (3, "final-reduce", 1, 0),
    ]
    assert "max_reduce_levels (2) reached" in caplog.text


def test_a_level_that_does_not_shrink_its_input_ends_the_reducing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    recorder = Recorder(map_text=lambda item: tokens(100), reduce_text="".join)
    ensemble = adaptive(list(range(8)), recorder, target_token_budget=250)
    with caplog.at_level(logging.WARNING, logger="agentensemble.mapreduce"):
        output = ensemble.run()
    assert levels(output.trace) == [
        (0, "map", 8, 0),
        (1, "reduce", 4, 0),
        (2, "final-reduce", 1, 0),
    ]
    assert "reduce level 1 did not shrink its input (800 -> 800 tokens" in caplog.text


def test_an_oversized_output_is_reduced_on_its_own(caplog: pytest.LogCaptureFixture) -> None:
    sizes = {0: 400, 1: 10, 2: 10, 3: 10}
    recorder = Recorder(map_text=lambda item: tokens(sizes[item]), reduce_text=lambda x: "r")
    with caplog.at_level(logging.WARNING, logger="agentensemble.mapreduce"):
        output = adaptive(list(sizes), recorder, target_token_budget=100).run()
    assert sorted(len(inputs) for inputs in recorder.reduced[:2]) == [1, 3]
    assert levels(output.trace) == [
        (0, "map", 4, 0),
        (1, "reduce", 2, 0),
        (2, "final-reduce", 1, 0),
    ]
    assert "exceeds target_token_budget (400 > 100)" in caplog.text


def echo_model(**usage: int | None) -> FunctionModel:
    return FunctionModel(lambda messages, tools: "an answer", usage=Usage(**usage))


def llm_tasks(ensemble_settings: dict[str, Any], items: list[int]) -> MapReduceEnsemble[int]:
    return MapReduceEnsemble(
        items=items,
        map_task=lambda item: Task(f"Map {item}"),
        reduce_task=lambda chunk: Task("Reduce", context=chunk),
        **ensemble_settings,
    )


def test_provider_token_counts_come_before_the_estimator() -> None:
    asked: list[str] = []

    def estimate(text: str) -> int:
        asked.append(text)
        return 1000

    settings = {
        "llm": echo_model(input_tokens=1, output_tokens=5),
        "target_token_budget": 20,
        "token_estimator": estimate,
    }
    output = llm_tasks(settings, [1, 2, 3]).run()
    assert levels(output.trace) == [(0, "map", 3, 0), (1, "final-reduce", 1, 0)]  # 15 <= 20
    assert asked == []


def test_the_estimator_counts_when_the_provider_reports_no_tokens() -> None:
    asked: list[str] = []

    def estimate(text: str) -> int:
        asked.append(text)
        return 8

    settings = {
        "llm": echo_model(output_tokens=None),
        "target_token_budget": 20,
        "token_estimator": estimate,
    }
    output = llm_tasks(settings, [1, 2, 3]).run()
    assert asked[:3] == ["an answer"] * 3
    assert levels(output.trace)[1] == (1, "reduce", 2, 0)  # 24 > 20: packed [8, 8], [8]


def test_an_estimator_returning_none_falls_back_to_characters_over_four() -> None:
    recorder = Recorder(map_text=lambda item: tokens(100), reduce_text=lambda x: "r")
    ensemble = adaptive(
        [1, 2, 3], recorder, target_token_budget=250, token_estimator=lambda t: None
    )
    output = ensemble.run()
    assert levels(output.trace)[1] == (1, "reduce", 2, 0)  # 300 > 250


def test_a_bad_estimate_fails_the_run_naming_the_estimator_and_keeping_the_maps() -> None:
    recorder = Recorder()
    ensemble = adaptive([1, 2], recorder, token_estimator=lambda text: -3)
    with pytest.raises(
        TaskExecutionError, match=r"token_estimator must return .* got: -3"
    ) as raised:
        ensemble.run()
    assert isinstance(raised.value.__cause__, ValidationError)
    assert raised.value.task_description == "map-reduce level 1"
    assert sorted(output.raw for output in raised.value.completed_outputs) == ["m1", "m2"]


def test_an_estimate_may_be_a_fraction() -> None:
    recorder = Recorder(map_text=lambda item: "abc", reduce_text=lambda inputs: "r")
    ensemble = adaptive([1, 2, 3], recorder, target_token_budget=5, token_estimator=lambda t: 1.5)
    output = ensemble.run()  # 2 tokens each: 6 > 5, so bins of two
    assert levels(output.trace)[1] == (1, "reduce", 2, 0)


def direct(recorder: Recorder, **settings: Any) -> MapReduceEnsemble[Any]:
    made: list[list[Any]] = []

    def direct_task(items: list[Any]) -> Task[Any]:
        made.append(items)
        return Task("All at once", handler=lambda context: f"direct({len(items)})")

    settings.setdefault("items", ["a" * 40] * 3)  # 10 tokens each
    ensemble = MapReduceEnsemble(
        map_task=recorder.map_task,
        reduce_task=recorder.reduce_task,
        direct_task=direct_task,
        **settings,
    )
    object.__setattr__(ensemble, "made", made)  # for the assertions
    return ensemble


def test_the_direct_task_runs_alone_when_the_items_fit() -> None:
    recorder = Recorder()
    ensemble = direct(recorder, target_token_budget=30)
    output = ensemble.run()
    assert output.raw == "direct(3)"
    assert recorder.mapped == []  # the map phase never ran
    assert levels(output.trace) == [(0, "direct", 1, 0)]
    assert output.trace is not None
    assert output.trace.workflow == "MAP_REDUCE_ADAPTIVE"


def test_items_over_the_budget_go_through_map_and_reduce() -> None:
    recorder = Recorder()
    ensemble = direct(recorder, target_token_budget=29)
    output = ensemble.run()
    assert output.raw.startswith("r(")
    assert len(recorder.mapped) == 3
    assert ensemble.made == []  # type: ignore[attr-defined]


def test_the_input_estimator_sizes_the_items() -> None:
    recorder = Recorder()
    items = [{"id": index, "text": "long " * 100} for index in range(3)]
    ensemble = direct(
        recorder,
        items=items,
        target_token_budget=10,
        input_estimator=lambda item: f"#{item['id']}",
    )
    assert ensemble.run().raw == "direct(3)"


def test_an_agent_first_direct_task_gets_its_agent_and_every_item() -> None:
    agent = Agent(role="Direct", goal="do it all", llm=FunctionModel(lambda m, t: "all"))
    seen: list[Any] = []

    def direct_task(given: Agent, items: list[int]) -> Task[Any]:
        seen.append((given, items))
        return Task("Everything", agent=given)

    ensemble = MapReduceEnsemble(
        items=[1, 2],
        map_task=lambda item: Task(f"Map {item}"),
        reduce_task=lambda chunk: Task("Reduce", context=chunk),
        direct_agent=lambda: agent,
        direct_task=direct_task,
        context_window_size=1000,
        budget_ratio=0.5,
    )
    output = ensemble.run()
    assert ensemble.target_budget == 500
    assert seen == [(agent, [1, 2])]
    assert output.raw == "all"
    assert output.task_outputs[0].agent_role == "Direct"


def test_continue_on_error_reduces_the_surviving_map_outputs() -> None:
    recorder = Recorder(failing=[1])
    output = adaptive([0, 1, 2, 3], recorder, parallel_error_strategy=CONTINUE).run()
    assert output.raw == "r(m0,m2,m3)"
    assert levels(output.trace) == [(0, "map", 4, 1), (1, "final-reduce", 1, 0)]
    assert output.trace is not None
    assert [error.task_description for error in output.trace.errors] == ["Map 1"]


def test_continue_on_error_survivors_of_a_reduce_level_proceed() -> None:
    recorder = Recorder(map_text=lambda item: tokens(100), reduce_text=lambda x: "r")

    def reduce_task(chunk: list[Task[Any]]) -> Task[Any]:
        task = recorder.reduce_task(chunk)
        if recorder.reduce_tasks_made == 2:
            return Task("Broken reduce", handler=broken, context=chunk)
        return task

    ensemble = MapReduceEnsemble(
        items=list(range(8)),
        map_task=recorder.map_task,
        reduce_task=reduce_task,
        target_token_budget=250,
        parallel_error_strategy=CONTINUE,
    )
    output = ensemble.run()
    assert levels(output.trace) == [
        (0, "map", 8, 0),
        (1, "reduce", 4, 1),
        (2, "final-reduce", 1, 0),
    ]
    assert recorder.reduced[-1] == ["r", "r", "r"]


def test_continue_on_error_when_every_map_fails_the_run_fails() -> None:
    recorder = Recorder(failing=[0, 1])
    ensemble = adaptive([0, 1], recorder, parallel_error_strategy=CONTINUE)
    with pytest.raises(ParallelExecutionError) as raised:
        ensemble.run()
    assert len(raised.value.failed_tasks) == 2
    assert recorder.reduced == []


def test_fail_fast_a_failed_map_fails_the_run_before_any_reduce() -> None:
    recorder = Recorder(failing=[1])
    with pytest.raises(TaskExecutionError) as raised:
        adaptive([0, 1, 2], recorder).run()
    assert raised.value.task_description == "Map 1"
    assert {o.raw for o in raised.value.completed_outputs} == {"m0", "m2"}
    assert recorder.reduce_tasks_made == 1  # the check before the map level; none ran
    assert recorder.reduced == []


def test_all_levels_are_one_run() -> None:
    events = Events()
    recorder = Recorder(map_text=lambda item: tokens(100), reduce_text=lambda x: "r")
    output = adaptive(list(range(8)), recorder, listeners=[events]).run()
    assert len(events.of(EnsembleStartedEvent)) == len(events.of(EnsembleCompletedEvent)) == 1
    assert output.trace is not None
    assert {event.ensemble_id for event in events.events} == {output.trace.ensemble_id}
    starts = events.of(TaskStartEvent)
    assert sorted(event.task_index for event in starts) == list(range(1, 14))  # 8 + 4 + 1
    # each level's tasks start with their node, as planned when the level before settled
    assert {
        event.task_description: (event.node_type, event.map_reduce_level) for event in starts
    } == nodes_of(output.trace)
    assert sorted({(event.node_type, event.map_reduce_level) for event in starts}) == [
        ("final-reduce", 2),
        ("map", 0),
        ("reduce", 1),
    ]
    assert len(output.task_outputs) == 13
    assert len(output.trace.task_traces) == 13
    assert output.metrics.total_llm_call_count == 0  # handlers: no model calls to sum


def test_metrics_are_summed_across_levels() -> None:
    settings = {"llm": echo_model(input_tokens=3, output_tokens=30), "target_token_budget": 50}
    output = llm_tasks(settings, [1, 2, 3, 4]).run()
    # 4 maps of 30 tokens (120 > 50): 4 reduces, 4 outputs of 30 again, ... then the final.
    counts = [level.task_count for level in output.trace.map_reduce_levels]  # type: ignore[union-attr]
    assert output.metrics.total_llm_call_count == sum(counts)
    assert output.metrics.total_output_tokens == 30 * sum(counts)


def test_each_run_maps_afresh() -> None:
    recorder = Recorder()
    ensemble = adaptive([1, 2], recorder)
    assert ensemble.run().raw == ensemble.run().raw == "r(m1,m2)"
    assert recorder.mapped == [1, 2, 1, 2]


@pytest.mark.parametrize(
    ("reduce_task", "error", "message"),
    [
        (lambda chunk: Task("Forgets its context"), ValidationError, "must pass its chunk"),
        (lambda chunk: Task("No model", context=chunk), ValidationError, "has no LLM available"),
        (
            lambda chunk: Task("For {whom}", context=chunk, handler=broken),
            PromptTemplateError,
            "whom",
        ),
    ],
)
def test_a_broken_reduce_factory_fails_before_any_map_runs(
    reduce_task: Any, error: type[Exception], message: str
) -> None:
    model = FunctionModel(lambda messages, tools: "mapped")
    ensemble = MapReduceEnsemble(
        items=[1, 2],
        map_task=lambda item: Task(f"Map {item}", llm=model),
        reduce_task=reduce_task,
        target_token_budget=100,
    )
    with pytest.raises(error, match=message):
        ensemble.run()
    assert model.requests == []


def test_a_level_that_fails_to_plan_keeps_the_failures_before_it_in_the_trace() -> None:
    exported = Exported()
    ensemble = adaptive(
        [1, 2, 3],
        Recorder(failing=[2]),
        token_estimator=lambda text: 1 / 0,
        parallel_error_strategy=CONTINUE,
        trace_exporter=exported,
    )
    with pytest.raises(TaskExecutionError, match="division by zero"):
        ensemble.run()
    [trace] = exported.traces
    assert sorted(task.final_output for task in trace.task_traces) == ["m1", "m3"]
    assert {error.task_description for error in trace.errors} == {"map-reduce level 1", "Map 2"}


async def test_a_cancelled_run_keeps_the_levels_that_completed() -> None:
    exported = Exported()
    reducing = asyncio.Event()

    async def stuck(context: HandlerContext) -> str:
        reducing.set()
        await asyncio.Event().wait()
        raise AssertionError("never released")

    ensemble = MapReduceEnsemble(
        items=[1, 2, 3],
        map_task=Recorder().map_task,
        reduce_task=lambda chunk: Task("Stuck", handler=stuck, context=chunk),
        target_token_budget=100,
        trace_exporter=exported,
    )
    run = asyncio.create_task(ensemble.arun())
    await reducing.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    [trace] = exported.traces
    assert sorted(task.final_output for task in trace.task_traces) == ["m1", "m2", "m3"]
    assert levels(trace) == [(0, "map", 3, 0), (1, "final-reduce", 1, 1)]


def test_adaptive_mode_has_no_tree_to_inspect() -> None:
    ensemble = adaptive([1, 2], Recorder())
    assert ensemble.is_adaptive_mode
    assert dict(ensemble.node_types) == {}
    assert dict(ensemble.map_reduce_levels) == {}
    with pytest.raises(ValidationError, match=r"to_ensemble\(\) is not supported in adaptive"):
        ensemble.to_ensemble()


def test_a_reduce_task_returned_twice_is_refused() -> None:
    recorder = Recorder(map_text=lambda item: tokens(100))
    maps: list[Task[Any]] = []
    cached: list[Task[Any]] = []

    def map_task(item: int) -> Task[Any]:
        maps.append(recorder.map_task(item))
        return maps[-1]

    def reduce_task(chunk: list[Task[Any]]) -> Task[Any]:
        if not cached:
            cached.append(Task("Reduce everything", context=maps, handler=broken))
        return cached[0]

    ensemble = MapReduceEnsemble(
        items=[1, 2, 3, 4], map_task=map_task, reduce_task=reduce_task, target_token_budget=250
    )
    with pytest.raises(TaskExecutionError, match="Task 'Reduce everything' is already in the run"):
        ensemble.run()


def test_a_reduce_agent_added_while_running_may_not_delegate() -> None:
    model = FunctionModel(lambda messages, tools: "done")
    ensemble = MapReduceEnsemble(
        items=[1, 2],
        llm=model,
        map_task=lambda item: Task(f"Map {item}"),
        reduce_agent=lambda: Agent("Boss", "delegate", llm=model, allow_delegation=True),
        reduce_task=lambda agent, chunk: Task("Reduce", agent=agent, context=chunk),
        target_token_budget=100,
    )
    with pytest.raises(ValidationError, match="its agent 'Boss' cannot delegate"):
        ensemble.run()


def test_tasks_of_later_levels_resolve_the_run_inputs() -> None:
    def reduce_task(chunk: list[Task[Any]]) -> Task[Any]:
        return Task(
            "Combine for {audience}",
            handler=lambda context: context.description,
            context=chunk,
        )

    ensemble = MapReduceEnsemble(
        items=[1, 2],
        map_task=Recorder().map_task,
        reduce_task=reduce_task,
        target_token_budget=100,
        inputs={"audience": "everyone"},
    )
    assert ensemble.run(inputs={"audience": "the board"}).raw == "Combine for the board"
    assert ensemble.run().raw == "Combine for everyone"


def test_agents_of_later_levels_resolve_the_run_inputs_too() -> None:
    prompts: list[str] = []

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        prompts.append(messages[0].text or "")
        return "done"

    model = FunctionModel(answer)
    reducer = Agent("Reducer", "Summarise the {region} findings", llm=model)
    ensemble = MapReduceEnsemble(
        items=[1, 2],
        map_task=lambda item: Task(f"Map {item}"),
        reduce_agent=lambda: reducer,
        reduce_task=lambda agent, chunk: Task("Reduce", agent=agent, context=chunk),
        target_token_budget=1000,
        llm=model,
        inputs={"region": "EMEA"},
    )
    ensemble.run()
    ensemble.run(inputs={"region": "APAC"})

    goals = [line for text in prompts for line in text.splitlines() if "Summarise the" in line]
    assert goals == [
        "Your personal goal is: Summarise the EMEA findings",
        "Your personal goal is: Summarise the APAC findings",
    ]


def test_the_trace_lists_agents_added_with_later_levels_beside_a_delegation_team() -> None:
    model = FunctionModel(lambda messages, tools: "done")
    ensemble = MapReduceEnsemble(
        items=[1, 2],
        map_agent=lambda item: Agent(f"Mapper {item}", "map", llm=model, allow_delegation=True),
        map_task=lambda item, agent: Task(f"Map {item}", agent=agent),
        reduce_agent=lambda: Agent("Reducer", "reduce", llm=model),
        reduce_task=lambda agent, chunk: Task("Reduce", agent=agent, context=chunk),
        target_token_budget=100,
    )
    output = ensemble.run()
    assert output.trace is not None
    assert [agent.role for agent in output.trace.agents][-1] == "Reducer"


def test_a_factory_that_raises_is_named() -> None:
    from agentensemble import MapReduceEnsemble, ScriptedModel, Task, ValidationError

    def broken(chunk: list[Task[None]]) -> Task[None]:
        raise KeyError("missing")

    llm = ScriptedModel(["x"] * 5)
    with pytest.raises(ValidationError, match="MapReduceEnsemble reduce_task raised KeyError"):
        MapReduceEnsemble(
            items=["a", "b"],
            map_task=lambda item: Task(f"Summarise {item}"),
            reduce_task=broken,
            llm=llm,
            chunk_size=2,
        ).run()
    assert llm.requests == []  # found when the tree is planned, before any model call
