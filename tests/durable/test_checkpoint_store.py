"""`CheckpointStore`: both kinds list, delete and expire runs the same way."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from agentensemble import CheckpointStore, Ensemble, RunOptions, ScriptedModel, Task
from agentensemble.errors import ValidationError

Factory = Callable[..., CheckpointStore]


@pytest.fixture(params=["in_memory", "sqlite"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Factory]:
    made: list[CheckpointStore] = []

    def make(**options: object) -> CheckpointStore:
        store = (
            CheckpointStore.in_memory(**options)  # type: ignore[arg-type]
            if request.param == "in_memory"
            else CheckpointStore.sqlite(tmp_path / "runs.db", **options)  # type: ignore[arg-type]
        )
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def _run(store: CheckpointStore, run_id: str) -> None:
    Ensemble(
        tasks=[Task("Say hello", "A greeting")], llm=ScriptedModel(["Hello"]), checkpoint=store
    ).run(options=RunOptions(run_id=run_id))


def test_runs_are_listed_oldest_first_and_deleted(make_store: Factory) -> None:
    store = make_store()
    clock = iter(range(100, 200))
    store._clock = lambda: float(next(clock))
    _run(store, "a")
    _run(store, "b")
    assert [(r.run_id, r.status, r.completed_tasks) for r in store.runs()] == [
        ("a", "COMPLETED", 1),
        ("b", "COMPLETED", 1),
    ]
    assert store.delete("a")
    assert not store.delete("a")
    assert [r.run_id for r in store.runs()] == ["b"]


def test_runs_older_than_the_ttl_go_when_a_run_starts(make_store: Factory) -> None:
    store = make_store(ttl=timedelta(hours=1))
    now = [1_000_000.0]
    store._clock = lambda: now[0]
    _run(store, "old")
    now[0] += 1800
    _run(store, "recent")
    now[0] += 2400  # "old" is 70 minutes old, "recent" 40
    _run(store, "new")
    assert [r.run_id for r in store.runs()] == ["recent", "new"]


def test_a_new_run_with_a_used_id_starts_over(make_store: Factory) -> None:
    store = make_store()
    _run(store, "same")
    _run(store, "same")
    [run] = store.runs()
    assert run.completed_tasks == 1


@pytest.mark.parametrize("ttl", [0, -1, "soon", timedelta(0)])
def test_a_bad_ttl_is_refused(ttl: object) -> None:
    with pytest.raises(ValidationError, match="ttl"):
        CheckpointStore.in_memory(ttl=ttl)  # type: ignore[arg-type]


def test_delete_needs_a_run_id() -> None:
    with pytest.raises(ValidationError, match="run_id"):
        CheckpointStore.in_memory().delete("")
