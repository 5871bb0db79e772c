"""`Loop`: a body of tasks run again and again, with revision feedback, until a predicate
holds or a cap is reached (BEHAVIOUR 9.8)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentensemble._checks import items_of
from agentensemble.enums import LoopMemoryMode, LoopOutputMode, MaxIterationsAction
from agentensemble.errors import ValidationError
from agentensemble.task import Task

if TYPE_CHECKING:
    from agentensemble.outputs import TaskOutput

__all__ = ["Loop", "LoopContext", "body_key"]


@dataclass(frozen=True, slots=True)
class LoopContext:
    """What a loop's `until` predicate sees after each iteration."""

    iteration: int
    """The iteration that just completed (1-based)."""
    last_outputs: Mapping[str, TaskOutput[Any]]
    """This iteration's outputs by body task name (its description when it has none)."""
    history: Sequence[Mapping[str, TaskOutput[Any]]]
    """Every iteration's outputs so far, this one last."""

    @property
    def last_output(self) -> TaskOutput[Any]:
        """This iteration's last body task's output."""
        return list(self.last_outputs.values())[-1]


Predicate = Callable[[LoopContext], bool | Awaitable[bool]]


def body_key(task: Task[Any]) -> str:
    """How a body task is named in a loop's outputs: its name, else its description."""
    return task.name or task.description


class Loop:
    """Run `tasks` (the body, one after another) again and again until `until(ctx)` is
    true or `max_iterations` iterations ran.

    From the second iteration the first body task is told to revise the previous
    iteration's last output (`inject_feedback`). In ``Ensemble(loops=[...])`` a loop runs
    after the flat tasks (SEQUENTIAL, in declaration order) or as one node of the DAG that
    waits for its `context` tasks (PARALLEL); the body's first task sees their outputs.
    """

    name: str
    tasks: tuple[Task[Any], ...]
    until: Predicate | None
    max_iterations: int | None
    on_max_iterations: MaxIterationsAction
    output_mode: LoopOutputMode
    memory_mode: LoopMemoryMode
    memory_window_size: int | None
    inject_feedback: bool
    context: tuple[Task[Any], ...]

    def __init__(
        self,
        name: str,
        tasks: Iterable[Task[Any]],
        *,
        until: Predicate | None = None,
        max_iterations: int | None = 5,
        on_max_iterations: MaxIterationsAction | str = MaxIterationsAction.RETURN_LAST,
        output_mode: LoopOutputMode | str = LoopOutputMode.LAST_ITERATION,
        memory_mode: LoopMemoryMode | str = LoopMemoryMode.ACCUMULATE,
        memory_window_size: int | None = None,
        inject_feedback: bool = True,
        context: Iterable[Task[Any]] = (),
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"Loop name must be non-blank, got: {name!r}")
        if "{" in name or "}" in name:
            raise ValidationError(f"Loop name must not contain braces, got: {name!r}")
        body = _body(name, tasks)
        _check_max_iterations(name, max_iterations)
        if until is None and max_iterations is None:
            raise ValidationError(
                f"Loop '{name}' must declare either an 'until' predicate or a positive "
                "max_iterations (or both)"
            )
        if until is not None and not callable(until):
            raise ValidationError(f"Loop '{name}' until must be callable, got: {until!r}")
        if not isinstance(inject_feedback, bool):
            raise ValidationError(
                f"Loop '{name}' inject_feedback must be a bool, got: {inject_feedback!r}"
            )
        memory = _choice(memory_mode, LoopMemoryMode, name, "memory_mode")
        _check_window(name, memory, memory_window_size)
        outer = items_of(context, Task, f"Loop '{name}' context")
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "tasks", body)
        set_(self, "until", until)
        set_(self, "max_iterations", max_iterations)
        set_(
            self,
            "on_max_iterations",
            _choice(on_max_iterations, MaxIterationsAction, name, "on_max_iterations"),
        )
        set_(self, "output_mode", _choice(output_mode, LoopOutputMode, name, "output_mode"))
        set_(self, "memory_mode", memory)
        set_(self, "memory_window_size", memory_window_size)
        set_(self, "inject_feedback", inject_feedback)
        set_(self, "context", outer)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Loop is immutable: cannot set {name!r}")

    def __repr__(self) -> str:
        return f"Loop({self.name!r}, {len(self.tasks)} tasks, max_iterations={self.max_iterations})"


def _body(name: str, tasks: Iterable[Task[Any]]) -> tuple[Task[Any], ...]:
    body: tuple[Task[Any], ...] = items_of(tasks, Task, f"Loop '{name}' tasks")
    if not body:
        raise ValidationError(f"Loop '{name}' body must contain at least one task")
    seen: set[str] = set()
    for task in body:
        key = body_key(task)
        if key in seen:
            raise ValidationError(
                f"Loop '{name}' has two body tasks named '{key}': give each body task a "
                "unique name (or description)"
            )
        seen.add(key)
    members = set(body)
    for task in body:
        for needed in task.context:
            if needed not in members:
                raise ValidationError(
                    f"Loop '{name}' body task '{body_key(task)}' has context "
                    f"'{body_key(needed)}', which is outside the loop body. Outer-DAG "
                    "dependencies must be declared on the Loop itself via "
                    "Loop(context=[...])."
                )
    return body


def _check_max_iterations(name: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"Loop '{name}' max_iterations must be >= 1, got: {value!r}")


def _check_window(name: str, mode: LoopMemoryMode, size: object) -> None:
    if mode is LoopMemoryMode.WINDOW:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValidationError(
                f"Loop '{name}' memory_mode WINDOW needs memory_window_size >= 1, got: {size!r}"
            )
    elif size is not None:
        raise ValidationError(
            f"Loop '{name}' memory_window_size is only used with memory_mode WINDOW "
            f"(memory_mode is {mode.value}), got: {size!r}"
        )


def _choice(value: object, kind: type[Any], name: str, field: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise ValidationError(
            f"Loop '{name}' {field} must be one of {choices}, got: {value!r}"
        ) from None
