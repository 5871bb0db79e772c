"""Static MapReduceEnsemble (BEHAVIOUR 16.3): the whole tree as one PARALLEL graph."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    FunctionModel,
    ParallelErrorStrategy,
    ParallelExecutionError,
    ScriptedModel,
    Task,
    TaskExecutionError,
    Workflow,
)
from agentensemble.mapreduce import MapReduceEnsemble
from agentensemble.models import Message, ToolSpec
from agentensemble.observability import (
    EnsembleCompletedEvent,
    EnsembleStartedEvent,
    TaskStartEvent,
)
from agentensemble.task import DEFAULT_EXPECTED_OUTPUT
from tests.mapreduce.helpers import Recorder, broken, levels, nodes_of
from tests.review.helpers import Events


def static(items: list[Any], recorder: Recorder, **settings: Any) -> MapReduceEnsemble[Any]:
    return MapReduceEnsemble(
        items=items, map_task=recorder.map_task, reduce_task=recorder.reduce_task, **settings
    )


@pytest.mark.parametrize(
    ("count", "chunk_size", "total", "levels_per_type"),
    [
        (7, 3, 11, {"map": 7, "reduce": 3, "final-reduce": 1}),
        (10, 3, 17, {"map": 10, "reduce": 6, "final-reduce": 1}),
        (100, 5, 125, {"map": 100, "reduce": 24, "final-reduce": 1}),
        (2, 2, 3, {"map": 2, "final-reduce": 1}),
        (1, 5, 2, {"map": 1, "final-reduce": 1}),
        (5, 5, 6, {"map": 5, "final-reduce": 1}),
    ],
)
def test_tree_shapes(
    count: int, chunk_size: int, total: int, levels_per_type: dict[str, int]
) -> None:
    ensemble = static(list(range(count)), Recorder(), chunk_size=chunk_size)
    assert len(ensemble.to_ensemble().tasks) == total
    assert Counter(ensemble.node_types.values()) == levels_per_type


def test_ten_items_in_chunks_of_three_reduce_over_three_levels() -> None:
    ensemble = static(list(range(10)), Recorder(), chunk_size=3)
    by_level = Counter(ensemble.map_reduce_levels.values())
    assert by_level == {0: 10, 1: 4, 2: 2, 3: 1}
    final = ensemble.to_ensemble().tasks[-1]
    assert ensemble.node_types[final] == "final-reduce"
    assert ensemble.map_reduce_levels[final] == 3


def test_chunks_are_consecutive_and_the_last_may_hold_one() -> None:
    ensemble = static(list(range(7)), Recorder(), chunk_size=3)
    tasks = ensemble.to_ensemble().tasks
    maps, reduces, final = tasks[:7], tasks[7:10], tasks[10]
    assert [list(reduce.context) for reduce in reduces] == [
        list(maps[0:3]),
        list(maps[3:6]),
        list(maps[6:7]),
    ]
    assert list(final.context) == list(reduces)
    assert all(ensemble.node_types[task] == "map" for task in maps)


def test_the_default_chunk_size_is_five() -> None:
    ensemble = static(list(range(6)), Recorder())
    assert not ensemble.is_adaptive_mode
    assert Counter(ensemble.node_types.values()) == {"map": 6, "reduce": 2, "final-reduce": 1}


def test_to_ensemble_is_a_parallel_ensemble_of_the_whole_tree() -> None:
    ensemble = static(list(range(4)), Recorder(), chunk_size=2, max_concurrency=3)
    inner = ensemble.to_ensemble()
    assert isinstance(inner, Ensemble)
    assert inner.workflow is Workflow.PARALLEL
    assert inner.max_concurrency == 3
    assert set(inner.tasks) == set(ensemble.node_types)


def test_a_run_reduces_level_by_level_to_the_final_output() -> None:
    recorder = Recorder()
    output = static(list(range(7)), recorder, chunk_size=3).run()
    assert output.raw == "r(r(m0,m1,m2),r(m3,m4,m5),r(m6))"
    assert sorted(recorder.reduced[:3]) == [["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6"]]
    assert len(output.task_outputs) == 11
    assert output.trace is not None
    assert output.trace.workflow == "MAP_REDUCE_STATIC"
    assert levels(output.trace) == [
        (0, "map", 7, 0),
        (1, "reduce", 3, 0),
        (2, "final-reduce", 1, 0),
    ]
    nodes = nodes_of(output.trace)
    assert nodes["Map 0"] == ("map", 0)
    assert nodes["Reduce 1"] == ("reduce", 1)
    assert nodes["Reduce 4"] == ("final-reduce", 2)


def test_a_run_has_one_run_id_and_one_start_and_end() -> None:
    events = Events()
    output = static(list(range(7)), Recorder(), chunk_size=3, listeners=[events]).run()
    assert len(events.of(EnsembleStartedEvent)) == 1
    assert len(events.of(EnsembleCompletedEvent)) == 1
    assert events.of(EnsembleStartedEvent)[0].workflow == "MAP_REDUCE_STATIC"
    assert len(events.of(TaskStartEvent)) == 11
    assert output.trace is not None
    assert {event.ensemble_id for event in events.events} == {output.trace.ensemble_id}


def test_each_task_starts_with_its_node_and_keeps_one_trace() -> None:
    events = Events()
    output = static(list(range(7)), Recorder(), chunk_size=3, listeners=[events]).run()
    started = {
        event.task_description: (event.node_type, event.map_reduce_level)
        for event in events.of(TaskStartEvent)
    }
    assert started == nodes_of(output.trace)
    assert started["Map 6"] == ("map", 0)
    assert started["Reduce 4"] == ("final-reduce", 2)
    assert output.trace is not None
    # the output's trace is the run trace's own object: no second, labelled copy per task
    run_traces = {id(trace) for trace in output.trace.task_traces}
    assert {id(task.trace) for task in output.task_outputs} == run_traces


def test_a_static_tree_runs_again_with_the_same_tasks() -> None:
    recorder = Recorder()
    ensemble = static(list(range(4)), recorder, chunk_size=2)
    first, second = ensemble.run(), ensemble.run()
    assert first.raw == second.raw == "r(r(m0,m1),r(m2,m3))"
    assert len(recorder.mapped) == 4  # the tree was built once, when the object was made
    assert first.trace is not None
    assert second.trace is not None
    assert first.trace.ensemble_id != second.trace.ensemble_id


def reply_with_task(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
    user = messages[-1].text or ""
    return user.split("## Task\n", 1)[1].split("\n", 1)[0]


def test_of_maps_each_item_and_reduces_with_the_context() -> None:
    model = FunctionModel(reply_with_task)
    ensemble = MapReduceEnsemble.of(model, ["apples", "{pears}"], "Describe", "Combine")
    tasks = ensemble.to_ensemble().tasks
    assert [task.description for task in tasks] == [
        "Describe: apples",
        "Describe: {{pears}}",  # an item's braces are data, not a template variable
        "Combine",
    ]
    assert tasks[-1].expected_output == DEFAULT_EXPECTED_OUTPUT
    assert list(tasks[-1].context) == list(tasks[:2])
    output = ensemble.run()
    assert [o.raw for o in output.task_outputs[:2]] == ["Describe: apples", "Describe: {pears}"]
    assert output.raw == "Combine"


def test_of_takes_other_fields_by_name() -> None:
    ensemble = MapReduceEnsemble.of(ScriptedModel(["x"]), [1, 2, 3], "Map", "Reduce", chunk_size=2)
    assert Counter(ensemble.map_reduce_levels.values()) == {0: 3, 1: 2, 2: 1}


def test_agent_first_factories_make_one_agent_per_map_and_per_reduce() -> None:
    model = ScriptedModel(["done"] * 20)
    made: list[str] = []

    def map_agent(item: int) -> Agent:
        made.append(f"map {item}")
        return Agent(role=f"Mapper {item}", goal="map", llm=model)

    def reduce_agent() -> Agent:
        made.append("reduce")
        return Agent(role="Reducer", goal="reduce", llm=model)

    ensemble = MapReduceEnsemble(
        items=[1, 2, 3],
        map_agent=map_agent,
        map_task=lambda item, agent: Task(f"Map {item}", agent=agent),
        reduce_agent=reduce_agent,
        reduce_task=lambda agent, chunk: Task("Reduce", agent=agent, context=chunk),
        chunk_size=2,
    )
    assert made == ["map 1", "map 2", "map 3", "reduce", "reduce", "reduce"]
    output = ensemble.run()
    assert [o.agent_role for o in output.task_outputs].count("Reducer") == 3
    assert output.trace is not None
    assert {agent.role for agent in output.trace.agents} == {
        "Mapper 1",
        "Mapper 2",
        "Mapper 3",
        "Reducer",
    }


def test_fail_fast_a_failed_map_fails_the_run_and_keeps_what_completed() -> None:
    recorder = Recorder(failing=[1])
    ensemble = static([0, 1, 2, 3], recorder, chunk_size=2)
    with pytest.raises(TaskExecutionError) as raised:
        ensemble.run()
    assert raised.value.task_description == "Map 1"
    assert {o.raw for o in raised.value.completed_outputs} == {"m0", "m2", "m3"}
    assert recorder.reduced == []  # nothing new starts after a failure


def test_continue_on_error_reduces_the_survivors() -> None:
    recorder = Recorder(failing=[1])
    ensemble = static(
        [0, 1, 2, 3],
        recorder,
        chunk_size=2,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )
    output = ensemble.run()
    assert output.raw == "r(r(m0),r(m2,m3))"
    assert output.trace is not None
    assert levels(output.trace) == [
        (0, "map", 4, 1),
        (1, "reduce", 2, 0),
        (2, "final-reduce", 1, 0),
    ]
    [error] = output.trace.errors
    assert error.task_description == "Map 1"
    assert error.message.endswith("map 1 failed")
    [failed] = output.trace.failed_tasks
    assert (failed.node_type, failed.map_reduce_level) == ("map", 0)


def test_continue_on_error_a_chunk_that_all_failed_is_skipped_and_the_rest_reduced() -> None:
    recorder = Recorder(failing=[0, 1])
    output = static(
        [0, 1, 2, 3],
        recorder,
        chunk_size=2,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    ).run()
    assert output.raw == "r(r(m2,m3))"
    assert levels(output.trace) == [
        (0, "map", 4, 2),
        (1, "reduce", 2, 1),
        (2, "final-reduce", 1, 0),
    ]


def test_continue_on_error_when_every_map_fails_the_run_fails() -> None:
    recorder = Recorder(failing=[0, 1, 2])
    ensemble = static(
        [0, 1, 2],
        recorder,
        chunk_size=2,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )
    with pytest.raises(ParallelExecutionError) as raised:
        ensemble.run()
    assert {task.description for task in raised.value.failed_tasks} == {"Map 0", "Map 1", "Map 2"}
    assert raised.value.completed_outputs == ()
    assert recorder.reduced == []


def test_a_failed_final_reduce_fails_the_run_under_continue_on_error() -> None:
    recorder = Recorder()

    def reduce_task(chunk: list[Task[Any]]) -> Task[Any]:
        task = recorder.reduce_task(chunk)
        if len(chunk) == 2 and recorder.reduce_tasks_made == 3:  # the final reduce
            return Task("Final", handler=broken, context=chunk)
        return task

    ensemble = MapReduceEnsemble(
        items=[0, 1, 2, 3],
        map_task=recorder.map_task,
        reduce_task=reduce_task,
        chunk_size=2,
        parallel_error_strategy=ParallelErrorStrategy.CONTINUE_ON_ERROR,
    )
    with pytest.raises(ParallelExecutionError) as raised:
        ensemble.run()
    assert [task.description for task in raised.value.failed_tasks] == ["Final"]
    assert len(raised.value.completed_outputs) == 6
