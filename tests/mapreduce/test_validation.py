"""MapReduceEnsemble build validation: BEHAVIOUR 16.2's checks, in its order, naming the
field and the value, before any model call."""

from __future__ import annotations

from typing import Any

import pytest

from agentensemble import Agent, ScriptedModel, Task, ValidationError
from agentensemble.mapreduce import MapReduceEnsemble


def map_task(item: Any) -> Task[Any]:
    return Task(f"Map {item}")


def reduce_task(chunk: list[Task[Any]]) -> Task[Any]:
    return Task("Reduce", context=chunk)


def agent() -> Agent:
    return Agent(role="Worker", goal="work", llm=ScriptedModel(["ok"]))


VALID: dict[str, Any] = {"items": [1, 2], "map_task": map_task, "reduce_task": reduce_task}


def build(**changes: Any) -> MapReduceEnsemble[Any]:
    settings = {**VALID, **changes}
    return MapReduceEnsemble(**{key: value for key, value in settings.items() if value != "-"})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        # 1. items
        ({"items": None}, r"items must not be None or empty, got: None"),
        ({"items": []}, r"items must not be None or empty, got: \[\]"),
        ({"items": "abc"}, r"items must be a list, got: str"),
        # 2. map factories
        ({"map_task": "-"}, r"map_task must be set: map_task=lambda item: Task\(\.\.\.\)"),
        (
            {"map_task": "-", "map_agent": lambda item: agent()},
            r"map_task must be set when map_agent is set \(agent-first map\)",
        ),
        (
            {"map_agent": lambda item: agent()},
            r"Ambiguous map configuration: map_agent is set \(agent-first\) but map_task does "
            r"not take \(item, agent\)",
        ),
        (
            {"map_task": lambda item, agent: Task("x", agent=agent)},
            r"map_agent must be set when map_task takes \(item, agent\)",
        ),
        ({"map_task": "not callable"}, r"map_task must be callable, got: 'not callable'"),
        ({"map_agent": 3}, r"map_agent must be callable, got: 3"),
        # 3. reduce factories
        ({"reduce_task": "-"}, r"reduce_task must be set: reduce_task=lambda chunk_tasks"),
        (
            {"reduce_task": "-", "reduce_agent": agent},
            r"reduce_task must be set when reduce_agent is set \(agent-first reduce\)",
        ),
        ({"reduce_agent": agent}, r"Ambiguous reduce configuration: reduce_agent is set"),
        # 4. budget
        (
            {"context_window_size": 1000},
            r"budget_ratio must be set when context_window_size is specified\. Example: "
            r"context_window_size=128_000, budget_ratio=0\.5",
        ),
        (
            {"budget_ratio": 0.5},
            r"context_window_size must be set when budget_ratio is specified",
        ),
        (
            {"context_window_size": 1000, "budget_ratio": 1.5},
            r"budget_ratio must be in range \(0\.0, 1\.0\], got: 1\.5",
        ),
        (
            {"context_window_size": 1000, "budget_ratio": 0.0},
            r"budget_ratio must be in range \(0\.0, 1\.0\], got: 0\.0",
        ),
        (
            {"context_window_size": 1, "budget_ratio": 0.5},
            r"target_token_budget derived from context_window_size \* budget_ratio must be > 0, "
            r"got: 0",
        ),
        (
            {"context_window_size": 1000, "budget_ratio": 0.5, "chunk_size": 3},
            r"chunk_size and target_token_budget \(derived from context_window_size \* "
            r"budget_ratio\) are mutually exclusive",
        ),
        (
            {"context_window_size": 1000, "budget_ratio": 0.5, "target_token_budget": 9},
            r"both set the budget: set one, got: target_token_budget=9",
        ),
        ({"target_token_budget": 0}, r"target_token_budget must be > 0, got: 0"),
        (
            {"target_token_budget": 100, "chunk_size": 3},
            r"chunk_size and target_token_budget are mutually exclusive\. Use chunk_size for "
            r"static mode or target_token_budget for adaptive mode, not both\.",
        ),
        ({"chunk_size": "5"}, r"chunk_size must be an integer, got: '5'"),
        ({"target_token_budget": 1.5}, r"target_token_budget must be an integer, got: 1\.5"),
        # 5. adaptive levels
        (
            {"target_token_budget": 100, "max_reduce_levels": 0},
            r"max_reduce_levels must be >= 1, got: 0",
        ),
        # 6. direct task
        (
            {"target_token_budget": 100, "direct_agent": agent},
            r"direct_agent requires direct_task\(agent, items\) to also be set",
        ),
        (
            {"target_token_budget": 100, "direct_task": lambda agent, items: Task("d")},
            r"direct_task\(agent, items\) requires direct_agent to also be set",
        ),
        (
            {
                "target_token_budget": 100,
                "direct_agent": agent,
                "direct_task": lambda items: Task("d"),
            },
            r"Ambiguous direct task configuration",
        ),
        (
            {"direct_task": lambda items: Task("d")},
            r"direct_agent/direct_task are not supported in static \(chunk_size\) mode\. "
            r"Short-circuit optimization requires target_token_budget",
        ),
        # 7. static chunk size
        ({"chunk_size": 1}, r"chunk_size must be >= 2, got: 1"),
        # settings that would do nothing
        ({"max_reduce_levels": 3}, r"max_reduce_levels applies only in adaptive mode"),
        ({"token_estimator": len}, r"token_estimator applies only in adaptive mode"),
        (
            {"target_token_budget": 100, "input_estimator": str},
            r"input_estimator sizes the items for the direct task, and no direct_task is set",
        ),
        ({"target_token_budget": 100, "token_estimator": 7}, r"token_estimator must be callable"),
        # pass-through settings
        ({"max_concurrency": 0}, r"MapReduceEnsemble max_concurrency must be > 0"),
    ],
)
def test_bad_configuration_is_refused_with_a_clear_message(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        build(**changes)


@pytest.mark.parametrize(
    ("changes", "first"),
    [
        ({"items": [], "map_task": "-"}, "items must not be None or empty"),
        ({"map_task": "-", "reduce_task": "-"}, "map_task must be set"),
        ({"reduce_task": "-", "target_token_budget": 0}, "reduce_task must be set"),
        (
            {"target_token_budget": 0, "direct_task": lambda items: Task("d")},
            "target_token_budget must be > 0",
        ),
        (
            {"target_token_budget": 10, "max_reduce_levels": 0, "direct_agent": agent},
            "max_reduce_levels must be >= 1",
        ),
        ({"direct_task": lambda items: Task("d"), "chunk_size": 1}, "not supported in static"),
    ],
)
def test_the_checks_run_in_order(changes: dict[str, Any], first: str) -> None:
    with pytest.raises(ValidationError, match=first):
        build(**changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"map_task": lambda item: None}, r"map_task must return a Task, got: None"),
        (
            {"reduce_task": lambda chunk: Task("Reduce")},
            r"reduce_task must pass its chunk as the task's context \(Task\(\.\.\., "
            r"context=chunk_tasks\)\); task 'Reduce' is missing 'Map 1'",
        ),
        (
            {"map_agent": lambda item: agent(), "map_task": lambda item, agent: Task("x")},
            r"map_task must return a Task run by the agent it is given \(Task\(\.\.\., "
            r"agent=agent\)\); task 'x' has agent: None",
        ),
        (
            {"map_agent": lambda item: "not an agent", "map_task": lambda item, a: Task("x")},
            r"map_agent must return an Agent, got: 'not an agent'",
        ),
    ],
)
def test_a_static_tree_checks_what_the_factories_return(
    changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        build(**changes)


def test_a_factory_returning_the_same_task_twice_is_refused() -> None:
    shared = Task("Shared")
    with pytest.raises(ValidationError, match="map_task must return a new Task each call"):
        build(map_task=lambda item: shared)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((None, [1], "Map", "Reduce"), "MapReduceEnsemble.of llm must not be None"),
        ((ScriptedModel(["x"]), None, "Map", "Reduce"), "items must not be None"),
        ((ScriptedModel(["x"]), [], "Map", "Reduce"), "items must not be empty"),
        ((ScriptedModel(["x"]), [1], " ", "Reduce"), "map_description must not be blank, got: ' '"),
        ((ScriptedModel(["x"]), [1], "Map", ""), "reduce_description must not be blank, got: ''"),
    ],
)
def test_of_checks_its_arguments(arguments: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        MapReduceEnsemble.of(*arguments)


def test_a_valid_configuration_calls_no_model() -> None:
    model = ScriptedModel([])  # any call would fail: it has no answers
    ensemble = MapReduceEnsemble.of(model, [1, 2, 3], "Map", "Reduce", chunk_size=2)
    assert len(ensemble.to_ensemble().tasks) == 6
    assert model.requests == []


def test_the_parallel_error_strategy_is_checked_when_the_object_is_made() -> None:
    with pytest.raises(ValidationError, match=r"parallel_error_strategy must be a Parallel.* None"):
        build(parallel_error_strategy=None)


def test_an_adaptive_map_factory_returning_the_same_task_twice_is_refused() -> None:
    shared = Task("Shared", handler=lambda context: "x")
    ensemble = build(map_task=lambda item: shared, target_token_budget=100)
    with pytest.raises(ValidationError, match="map_task must return a new Task each call"):
        ensemble.run()


def test_of_wants_text_descriptions() -> None:
    with pytest.raises(ValidationError, match="map_description must be a string, got: 3"):
        MapReduceEnsemble.of(ScriptedModel(["x"]), [1], 3, "Reduce")  # type: ignore[arg-type]
