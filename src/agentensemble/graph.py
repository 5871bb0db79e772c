"""`Graph`: a state machine of tasks with conditional edges (BEHAVIOUR 9.9)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, cast

from agentensemble._checks import as_tuple
from agentensemble.enums import MaxIterationsAction
from agentensemble.errors import ValidationError
from agentensemble.task import Task

if TYPE_CHECKING:
    from agentensemble.outputs import TaskOutput

__all__ = ["Edge", "Graph", "GraphStep"]

END = "__END__"


@dataclass(frozen=True, slots=True)
class Edge:
    """A transition from `source` to `target` (a state name or `Graph.END`), taken when
    `when(output)` is true for the output `source` just produced (always, without `when`)."""

    source: str
    target: str
    when: Callable[[TaskOutput[Any]], bool] | None = None
    description: str | None = None

    def __post_init__(self) -> None:
        for field in ("source", "target"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value.strip():
                raise ValidationError(f"Edge {field} must be a state name, got: {value!r}")
        if self.when is not None and not callable(self.when):
            raise ValidationError(
                f"Edge {self.source!r} -> {self.target!r} when must be callable, got: {self.when!r}"
            )


@dataclass(frozen=True, slots=True)
class GraphStep:
    """One step of a graph's walk: the state that ran and what it produced."""

    state: str
    output: TaskOutput[Any]
    next_state: str
    """Where the walk went next (`Graph.END` when it ended there)."""


class Graph:
    """One walker goes from `start` through `states`: it runs the state's task, then takes
    the first of the state's edges (in declaration order) whose `when` holds, until it
    reaches `Graph.END` or `max_steps` steps ran. A state visited again is told to refine
    its previous output (`inject_feedback_on_revisit`, except `no_feedback_states`)."""

    END: ClassVar[str] = END
    """The terminal state: an edge to it ends the walk."""

    name: str
    states: Mapping[str, Task[Any]]
    start: str
    edges: tuple[Edge, ...]
    max_steps: int
    on_max_steps: MaxIterationsAction
    inject_feedback_on_revisit: bool
    no_feedback_states: frozenset[str]

    def __init__(
        self,
        name: str,
        states: Mapping[str, Task[Any]],
        start: str,
        edges: Iterable[Edge],
        *,
        max_steps: int = 50,
        on_max_steps: MaxIterationsAction | str = MaxIterationsAction.RETURN_LAST,
        inject_feedback_on_revisit: bool = True,
        no_feedback_states: Iterable[str] = (),
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValidationError(f"Graph name must be non-blank, got: {name!r}")
        checked = _states(name, states)
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValidationError(f"Graph '{name}' max_steps must be >= 1, got: {max_steps!r}")
        _check_start(name, start, checked)
        links = _edges(name, edges, checked)
        quiet = cast(
            "frozenset[str]",
            frozenset(as_tuple(no_feedback_states, f"Graph '{name}' no_feedback_states")),
        )
        unknown = sorted(repr(state) for state in quiet if state not in checked)
        if unknown:
            raise ValidationError(
                f"Graph '{name}' no_feedback_states names unknown state(s): {unknown}"
            )
        if not isinstance(inject_feedback_on_revisit, bool):
            raise ValidationError(
                f"Graph '{name}' inject_feedback_on_revisit must be a bool, "
                f"got: {inject_feedback_on_revisit!r}"
            )
        try:
            action = MaxIterationsAction(on_max_steps)
        except ValueError:
            choices = ", ".join(member.value for member in MaxIterationsAction)
            raise ValidationError(
                f"Graph '{name}' on_max_steps must be one of {choices}, got: {on_max_steps!r}"
            ) from None
        set_ = object.__setattr__
        set_(self, "name", name)
        set_(self, "states", checked)
        set_(self, "start", start)
        set_(self, "edges", links)
        set_(self, "max_steps", max_steps)
        set_(self, "on_max_steps", action)
        set_(self, "inject_feedback_on_revisit", inject_feedback_on_revisit)
        set_(self, "no_feedback_states", quiet)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Graph is immutable: cannot set {name!r}")

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.states)} states, start={self.start!r})"

    def edges_from(self, state: str) -> tuple[Edge, ...]:
        """The edges leaving `state`, in declaration order."""
        return tuple(edge for edge in self.edges if edge.source == state)


def _states(name: str, states: object) -> dict[str, Task[Any]]:
    if not isinstance(states, Mapping):
        raise ValidationError(
            f"Graph '{name}' states must be a mapping of state name to Task, got: {states!r}"
        )
    if not states:
        raise ValidationError(f"Graph '{name}' must have at least one state")
    checked: dict[str, Task[Any]] = {}
    owners: dict[Task[Any], str] = {}
    for state, task in states.items():
        if not isinstance(state, str) or not state.strip():
            raise ValidationError(f"Graph '{name}' state names must be non-blank, got: {state!r}")
        if state == END:
            raise ValidationError(
                f"Graph '{name}' cannot have a state named '{END}': it is reserved for Graph.END"
            )
        if not isinstance(task, Task):
            raise ValidationError(
                f"Graph '{name}' state '{state}' must be a Task, got: {type(task).__name__}"
            )
        if task in owners:
            raise ValidationError(
                f"Graph '{name}' states '{owners[task]}' and '{state}' are the same Task: "
                "give each state a Task of its own"
            )
        owners[task] = state
        checked[state] = task
    return checked


def _check_start(name: str, start: object, states: Mapping[str, Task[Any]]) -> None:
    if start == END:
        raise ValidationError(f"Graph '{name}' cannot start at Graph.END")
    if not isinstance(start, str) or start not in states:
        raise ValidationError(
            f"Graph '{name}' start {start!r} is not one of its states: {sorted(states)}"
        )


def _edges(name: str, edges: Iterable[Edge], states: Mapping[str, Task[Any]]) -> tuple[Edge, ...]:
    given = as_tuple(edges, f"Graph '{name}' edges")
    for index, edge in enumerate(given):
        if not isinstance(edge, Edge):
            raise ValidationError(
                f"Graph '{name}' edges[{index}] must be an Edge, got: {type(edge).__name__}"
            )
        if edge.source == END:
            raise ValidationError(
                f"Graph '{name}' edges[{index}] leaves Graph.END: END is terminal"
            )
        for end in (edge.source, edge.target):
            if end != END and end not in states:
                raise ValidationError(
                    f"Graph '{name}' edges[{index}] ({edge.source!r} -> {edge.target!r}) names "
                    f"unknown state {end!r}; states: {sorted(states)}"
                )
    links = cast("tuple[Edge, ...]", given)
    stuck = [state for state in states if not any(edge.source == state for edge in links)]
    if stuck:
        raise ValidationError(
            f"Graph '{name}' has state(s) with no outgoing edges: {stuck}. Every non-END "
            "state must have at least one edge (use Graph.END as the target for terminal "
            "transitions)."
        )
    return links
