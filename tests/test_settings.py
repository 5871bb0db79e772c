"""Configuration is declared once (STYLE 19): "not given" is `UNSET`, never a comparison with
a copied default; `MapReduceEnsemble` composes the ensemble settings; `Task`'s overloads
share one declaration of their options."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from pathlib import Path

import pytest
from mypy import api

from agentensemble import (
    Agent,
    Ensemble,
    HandlerContext,
    ParallelErrorStrategy,
    ScriptedModel,
    Task,
    ValidationError,
    Workflow,
)
from agentensemble._unset import UNSET, is_given, resolve_int, resolved
from agentensemble.ensemble import EnsembleSettings
from agentensemble.mapreduce import MapReduceEnsemble

ROOT = Path(__file__).parent.parent


def echo(context: HandlerContext) -> str:
    return context.description


def test_unset_resolves_to_a_default_that_reads_as_the_value_and_is_not_given() -> None:
    assert repr(UNSET) == "UNSET"
    default = resolve_int(UNSET, 20)
    assert default == 20
    assert repr(default) == "20"
    assert default + 1 == 21
    assert not is_given(default)
    assert not is_given(UNSET)
    assert not is_given(pickle.loads(pickle.dumps(default)))
    assert is_given(20)
    assert is_given(0)
    assert resolve_int(7, 20) == 7
    assert resolved(5) == 5
    with pytest.raises(AssertionError):
        resolved(UNSET)


def test_ensemble_settings_not_given_read_as_their_documented_defaults() -> None:
    ensemble = Ensemble()
    assert ensemble.manager_max_iterations == 20
    assert ensemble.max_delegation_depth == 3
    assert "manager_max_iterations=20, " in repr(ensemble)
    assert "max_delegation_depth=3, " in repr(ensemble)
    assert not is_given(ensemble.manager_max_iterations)
    assert not is_given(ensemble.max_delegation_depth)


def test_a_copy_keeps_a_setting_not_given() -> None:
    ensemble = Ensemble(tasks=[Task("a", handler=echo)])
    copy = dataclasses.replace(ensemble, name="copy")
    assert not is_given(copy.manager_max_iterations)
    assert copy.run().raw == "a"  # a SEQUENTIAL run: the HIERARCHICAL setting was not given
    changed = dataclasses.replace(ensemble, manager_max_iterations=5)
    assert changed.manager_max_iterations == 5
    assert is_given(changed.manager_max_iterations)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            {"manager_max_iterations": 20},
            "Ensemble manager_max_iterations applies only to Workflow.HIERARCHICAL, but the "
            "workflow is SEQUENTIAL",
        ),
        ({"max_delegation_depth": 3}, "Ensemble max_delegation_depth applies to delegations"),
    ],
)
def test_a_setting_given_its_default_value_is_still_given(
    setting: dict[str, int], message: str
) -> None:
    ensemble = Ensemble(tasks=[Task("a", handler=echo)], **setting)  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as raised:
        ensemble.run()
    assert str(raised.value).startswith(message)


def test_a_hierarchical_manager_runs_with_the_default_iterations() -> None:
    writer = Agent("Writer", "Write", llm=ScriptedModel(["draft"]))
    manager = ScriptedModel(["done"])
    ensemble = Ensemble(
        tasks=[Task("Write", agent=writer)],
        workflow=Workflow.HIERARCHICAL,
        manager_llm=manager,
    )
    assert ensemble.run().raw == "done"


def test_map_reduce_composes_the_ensemble_settings_instead_of_restating_them() -> None:
    shared = {setting.name for setting in dataclasses.fields(EnsembleSettings)}
    own = set(inspect.get_annotations(MapReduceEnsemble))
    assert not shared & own
    assert shared <= {setting.name for setting in dataclasses.fields(MapReduceEnsemble)}
    assert shared <= {setting.name for setting in dataclasses.fields(Ensemble)}


def test_map_reduce_passes_every_ensemble_setting_to_its_inner_ensemble() -> None:
    given = {
        "llm": ScriptedModel([]),
        "parallel_error_strategy": ParallelErrorStrategy.CONTINUE_ON_ERROR,
        "max_concurrency": 2,
        "max_sync_threads": 4,
        "verbose": True,
        "inputs": {"topic": "x"},
        "name": "reviews",
    }
    ensemble = MapReduceEnsemble(
        items=[1, 2, 3],
        map_task=lambda item: Task(f"Map {item}", handler=echo),
        reduce_task=lambda chunk: Task("Reduce", handler=echo, context=chunk),
        chunk_size=2,
        **given,  # type: ignore[arg-type]
    )
    inner = ensemble.to_ensemble()
    for name, value in given.items():
        assert getattr(ensemble, name) == value, name
        assert getattr(inner, name) == value, name
    assert inner.workflow is Workflow.PARALLEL
    assert inner.model is given["llm"]


def test_task_keeps_its_explicit_runtime_signature() -> None:
    parameters = inspect.signature(Task).parameters
    assert list(parameters)[:2] == ["description", "expected_output"]
    assert parameters["max_output_retries"].default == 3
    assert parameters["output_type"].kind is inspect.Parameter.KEYWORD_ONLY
    with pytest.raises(TypeError, match="Task has no field 'nme': did you mean 'name'"):
        Task("a", nme="x")  # type: ignore[call-overload]


@pytest.mark.integration
def test_every_task_overload_checks_the_shared_options(tmp_path: Path) -> None:
    checked = tmp_path / "options.py"
    checked.write_text(
        "from agentensemble import Task\n"
        "Task('a', max_output_retries='3')\n"
        "Task('a', output_type=int, memory=3)\n"
        "Task('a', nme='x')\n"
        "reveal_type(Task('a', max_output_retries=3, memory=['notes']))\n"
        "reveal_type(Task('a', output_type=int, name='n'))\n"
    )
    stdout, _, _ = api.run(["--config-file", str(ROOT / "pyproject.toml"), str(checked)])
    lines = stdout.splitlines()
    assert sorted({line.split(":")[1] for line in lines if ": error: " in line}) == ["2", "3", "4"]
    assert 'Unexpected keyword argument "nme"' in stdout
    assert 'Revealed type is "agentensemble.task.Task[None]"' in stdout
    assert 'Revealed type is "agentensemble.task.Task[int]"' in stdout
