"""`MapReduceEnsemble`: fan out over many items, then reduce their outputs in a tree so no
reducer is given more than it can read.

Two strategies, chosen by the fields set. Static (`chunk_size`, the default with 5): the
whole tree is built when the object is made, a reduce per `chunk_size` outputs, level after
level, and run as one PARALLEL graph. Adaptive (`target_token_budget`, or
`context_window_size` x `budget_ratio`): the map tasks run, then their outputs' token counts
decide the next level (first-fit-decreasing bins under the budget) until everything fits one
final reduce; a `direct_task` can skip the tree when the items are small enough to begin
with. Either way a run has one run id, one set of events and one trace.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from agentensemble._checks import as_tuple, require_int, require_text
from agentensemble._inputs import Inputs
from agentensemble._run import Composition, run_ensemble
from agentensemble._stream import DEFAULT_MAX_BUFFER, EventStream
from agentensemble._sync import run_sync
from agentensemble.agent import Agent
from agentensemble.ensemble import Ensemble, EnsembleSettings
from agentensemble.enums import ParallelErrorStrategy, Workflow
from agentensemble.errors import AgentEnsembleError, ValidationError, describe_error
from agentensemble.execution._planning import Node
from agentensemble.execution._templates import escape_template
from agentensemble.options import RunOptions
from agentensemble.task import Task
from agentensemble.workflows._map_reduce import (
    ADAPTIVE,
    DIRECT,
    FINAL_REDUCE,
    MAP,
    REDUCE,
    AdaptiveMapReduceExecutor,
    AdaptiveReduce,
    MapReduceExecutor,
)
from agentensemble.workflows._token_budget import TokenCounter

if TYPE_CHECKING:
    from agentensemble.outputs import EnsembleOutput
    from agentensemble.review import ReviewDecision
    from agentensemble.workflows._executor import Planner

__all__ = ["MapReduceEnsemble"]

T = TypeVar("T")

_DEFAULT_CHUNK_SIZE = 5
"""A static tree's chunk size when no strategy is set (`chunk_size` is None)."""
_DEFAULT_MAX_REDUCE_LEVELS = 10
"""An adaptive run's `max_reduce_levels` when it is None."""


@dataclass(frozen=True, kw_only=True, eq=False)
class MapReduceEnsemble(EnsembleSettings, Generic[T]):
    """Map every item with a task, then reduce the outputs in a tree of bounded reduces.

    The map and reduce sides are each task-first (``map_task=lambda item: Task(...)``;
    agents are synthesised from `llm`) or agent-first (``map_agent=lambda item: Agent(...)``
    with ``map_task=lambda item, agent: Task(..., agent=agent)``). A reduce factory is given
    the tasks of its chunk and must pass them as the reduce task's ``context``. Factories run
    on the event loop's thread: keep them quick.

    The run settings (`llm`, `parallel_error_strategy`, `listeners`, `inputs`, ...) are the
    `EnsembleSettings` an `Ensemble` has, passed to the inner PARALLEL ensemble of every run
    and checked as an `Ensemble` checks them. Under CONTINUE_ON_ERROR the outputs that
    completed are reduced without the failed ones; `listeners` hear every task of every
    level; a run has one trace, given to `trace_exporter`.

    Configuration errors raise `ValidationError` when the object is made (the checks of
    BEHAVIOUR 16.2, in that order); a static tree is built then too, so it can be inspected
    with `node_types`, `map_reduce_levels` and `to_ensemble()` before it runs.
    """

    items: Sequence[T]
    """The items to map (at least one)."""
    map_task: Callable[..., Task[Any]] | None = None
    """``(item) -> Task``, or ``(item, agent) -> Task`` when `map_agent` is set."""
    map_agent: Callable[[T], Agent] | None = None
    """``(item) -> Agent``: the agent of each map task (agent-first)."""
    reduce_task: Callable[..., Task[Any]] | None = None
    """``(chunk_tasks) -> Task``, or ``(agent, chunk_tasks) -> Task`` when `reduce_agent` is
    set. The task's ``context`` must include every chunk task. An adaptive run also calls it
    once before the map level, over every map task, to check what it returns."""
    reduce_agent: Callable[[], Agent] | None = None
    """``() -> Agent``: the agent of each reduce task, the final one included (agent-first)."""
    direct_task: Callable[..., Task[Any]] | None = None
    """Adaptive only: ``(items) -> Task``, or ``(agent, items) -> Task`` with `direct_agent`:
    the one task that runs instead of the tree when the items' estimated size fits the
    budget."""
    direct_agent: Callable[[], Agent] | None = None
    """``() -> Agent``: the agent of the direct task (agent-first)."""
    chunk_size: int | None = None
    """Static: most outputs one reduce is given (>= 2; 5 when no strategy is set)."""
    target_token_budget: int | None = None
    """Adaptive: most tokens of outputs one reduce is given."""
    context_window_size: int | None = None
    """Adaptive: with `budget_ratio`, sets ``target_token_budget = int(window * ratio)``."""
    budget_ratio: float | None = None
    """Adaptive: the share of `context_window_size` a reduce may fill, in (0, 1]."""
    max_reduce_levels: int | None = None
    """Adaptive: most intermediate reduce levels before the final reduce is forced (10)."""
    token_estimator: Callable[[str], float | None] | None = None
    """Adaptive: counts an output's tokens when the provider reported none (rounded up;
    None from it falls back to ``len(text) // 4``)."""
    input_estimator: Callable[[T], str] | None = None
    """Adaptive, with a direct task: an item as the text whose length estimates its tokens
    (``str(item)`` when None)."""
    _strategy: ParallelErrorStrategy = field(init=False, repr=False)
    _budget: int | None = field(init=False, default=None, repr=False)
    _factories: _Factories[T] = field(init=False, repr=False)
    _template: Ensemble = field(init=False, repr=False)
    _tree: _StaticTree | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "items", _check_items(self.items))
        if not isinstance(self.parallel_error_strategy, ParallelErrorStrategy):
            raise ValidationError(
                "MapReduceEnsemble parallel_error_strategy must be a ParallelErrorStrategy, "
                f"got: {self.parallel_error_strategy!r}"
            )
        set_(self, "_strategy", self.parallel_error_strategy)
        map_first = _check_factories("map", self.map_task, self.map_agent, ("item", "agent"))
        reduce_first = _check_factories(
            "reduce", self.reduce_task, self.reduce_agent, ("agent", "chunk_tasks")
        )
        budget = _resolve_budget(self)
        set_(self, "_budget", budget)
        if budget is not None:
            _check_max_reduce_levels(self.max_reduce_levels)
        _check_direct(self, adaptive=budget is not None)
        chunk_size = _DEFAULT_CHUNK_SIZE if self.chunk_size is None else self.chunk_size
        if budget is None and chunk_size < 2:
            raise ValidationError(f"MapReduceEnsemble chunk_size must be >= 2, got: {chunk_size}")
        _check_estimators(self, adaptive=budget is not None)
        set_(self, "_factories", _Factories(self, map_first, reduce_first))
        set_(self, "_template", _template(self))
        if budget is None:
            set_(self, "_tree", _StaticTree.build(self.items, self._factories, chunk_size))

    @classmethod
    def of(
        cls,
        llm: Any,
        items: Sequence[T],
        map_description: str,
        reduce_description: str,
        **settings: Any,
    ) -> MapReduceEnsemble[T]:
        """The zero-ceremony form: each item is mapped by a task
        ``"{map_description}: {item}"`` and the outputs reduced by tasks
        ``reduce_description``, all on `llm` (static, chunk size 5, unless `settings` say
        otherwise: any other field, by name)."""
        if llm is None:
            raise ValidationError("MapReduceEnsemble.of llm must not be None")
        if items is None:
            raise ValidationError("MapReduceEnsemble.of items must not be None")
        if not items:
            raise ValidationError("MapReduceEnsemble.of items must not be empty")
        for name, text in (
            ("map_description", map_description),
            ("reduce_description", reduce_description),
        ):
            require_text(text, f"MapReduceEnsemble.of {name} must not be blank, got: {text!r}")
        return cls(
            llm=llm,
            items=items,
            map_task=lambda item: Task(f"{map_description}: {escape_template(str(item))}"),
            reduce_task=lambda chunk: Task(reduce_description, context=chunk),
            **settings,
        )

    @property
    def is_adaptive_mode(self) -> bool:
        """True when a token budget is set (directly, or from the context window)."""
        return self._budget is not None

    @property
    def target_budget(self) -> int | None:
        """The token budget in force (adaptive mode), else None."""
        return self._budget

    @property
    def node_types(self) -> Mapping[Task[Any], str]:
        """Static mode: each task's node type (``map``, ``reduce``, ``final-reduce``),
        by task identity. Empty in adaptive mode, where the tree is planned while it runs."""
        if self._tree is None:
            return MappingProxyType({})
        return MappingProxyType({task: node.node_type for task, node in self._tree.nodes.items()})

    @property
    def map_reduce_levels(self) -> Mapping[Task[Any], int]:
        """Static mode: each task's level (0 for map tasks, then one per reduce level), by
        task identity. Empty in adaptive mode."""
        if self._tree is None:
            return MappingProxyType({})
        return MappingProxyType({task: node.level for task, node in self._tree.nodes.items()})

    def to_ensemble(self) -> Ensemble:
        """Static mode: the inner PARALLEL ensemble holding the whole tree, for inspection.
        Adaptive mode raises `ValidationError`: its levels do not exist before it runs."""
        if self._tree is None:
            raise ValidationError(
                "MapReduceEnsemble.to_ensemble() is not supported in adaptive mode: the "
                "reduce levels are planned while it runs, from the outputs' token counts. Use "
                "run() or arun(), or set chunk_size for a static tree you can inspect."
            )
        return dataclasses.replace(self._template, tasks=self._tree.tasks)

    def run(
        self,
        inputs: Inputs | None = None,
        options: RunOptions | None = None,
        *,
        resume: str | None = None,
        decision: ReviewDecision | None = None,
    ) -> EnsembleOutput:
        """Run the map-reduce and wait for the result (the final reduce's output is
        ``.raw``). Works inside a running event loop too."""
        return run_sync(self.arun(inputs, options, resume=resume, decision=decision))

    async def arun(
        self,
        inputs: Inputs | None = None,
        options: RunOptions | None = None,
        *,
        resume: str | None = None,
        decision: ReviewDecision | None = None,
    ) -> EnsembleOutput:
        """Run the map-reduce.

        Raises as an `Ensemble` run does: `ValidationError` or `PromptTemplateError` before
        any model call, `TaskExecutionError` (FAIL_FAST) or `ParallelExecutionError`
        (CONTINUE_ON_ERROR, when the final reduce could not run) carrying every completed
        output. The trace's workflow is ``MAP_REDUCE_STATIC`` or ``MAP_REDUCE_ADAPTIVE``.
        With a `checkpoint`, ``resume=run_id`` continues a run that stopped: the tasks it
        completed, on every level, are restored instead of run again (a paused run takes the
        `decision` on the review it waits for).
        """
        strategy = self._strategy
        if self._tree is not None:

            def static(_: Planner) -> MapReduceExecutor:
                return MapReduceExecutor(strategy)

            return await run_ensemble(
                self.to_ensemble(),
                inputs,
                options,
                compose=Composition(static, self._tree.nodes),
                resume=resume,
                decision=decision,
            )
        composition = self._adaptive_start()
        inner = dataclasses.replace(self._template, tasks=list(composition.nodes))
        return await run_ensemble(
            inner, inputs, options, compose=composition, resume=resume, decision=decision
        )

    def astream(
        self,
        inputs: Inputs | None = None,
        options: RunOptions | None = None,
        *,
        max_buffer: int = DEFAULT_MAX_BUFFER,
    ) -> EventStream:
        """Run the map-reduce, giving its events as they happen (see `Ensemble.astream`)."""
        return EventStream(
            lambda run_options: self.arun(inputs, run_options), options, max_buffer=max_buffer
        )

    def _adaptive_start(self) -> Composition:
        """An adaptive run's first tasks, in run order, with their nodes (the direct task
        when the items fit the budget, else the map tasks), and how to make its executor."""
        factories = self._factories
        budget = self._budget
        strategy = self._strategy
        if budget is None:
            raise AssertionError("not adaptive")
        if self.direct_task is not None and self._estimated_input_tokens() <= budget:
            return Composition(
                lambda _: MapReduceExecutor(strategy, workflow_label=ADAPTIVE),
                {factories.direct(self.items): Node(DIRECT, 0)},
            )
        levels = AdaptiveReduce(
            budget=budget,
            max_levels=_DEFAULT_MAX_REDUCE_LEVELS
            if self.max_reduce_levels is None
            else self.max_reduce_levels,
            counter=TokenCounter(self.token_estimator),
            reduce_task=factories.reduce,
        )
        return Composition(
            lambda planner: AdaptiveMapReduceExecutor(strategy, levels=levels, planner=planner),
            dict.fromkeys(factories.map_all(self.items), Node(MAP, 0)),
        )

    def _estimated_input_tokens(self) -> int:
        """The items' size in tokens: ``len(text) // 4`` of each item's text, summed."""
        estimate = self.input_estimator or str
        total = 0
        for index, item in enumerate(self.items):
            text = estimate(item)
            if not isinstance(text, str):
                raise ValidationError(
                    f"MapReduceEnsemble input_estimator must return a str, got: {text!r} "
                    f"for items[{index}]"
                )
            total += len(text) // 4
        return total


@dataclass(frozen=True, slots=True)
class _StaticTree:
    """Every task of a static run, in plan order, and where each sits."""

    tasks: tuple[Task[Any], ...]
    nodes: Mapping[Task[Any], Node]

    @classmethod
    def build(
        cls, items: Sequence[Any], factories: _Factories[Any], chunk_size: int
    ) -> _StaticTree:
        """BEHAVIOUR 16.3: a map per item; while a level has more than `chunk_size` tasks,
        a reduce per consecutive chunk of them; then the final reduce."""
        current = factories.map_all(items)
        nodes: dict[Task[Any], Node] = {}
        _add_new(nodes, current, Node(MAP, 0), "map_task")
        level = 1
        while len(current) > chunk_size:
            current = [
                factories.reduce(current[start : start + chunk_size])
                for start in range(0, len(current), chunk_size)
            ]
            _add_new(nodes, current, Node(REDUCE, level), "reduce_task")
            level += 1
        _add_new(nodes, [factories.reduce(current)], Node(FINAL_REDUCE, level), "reduce_task")
        return cls(tuple(nodes), nodes)


def _add_new(
    nodes: dict[Task[Any], Node], tasks: Sequence[Task[Any]], node: Node, factory: str
) -> None:
    for task in tasks:
        if task in nodes:
            raise ValidationError(
                f"MapReduceEnsemble {factory} must return a new Task each call; task "
                f"'{task.description}' was returned twice"
            )
        nodes[task] = node


class _Factories(Generic[T]):
    """The user's factories, called in the configured form, their results checked."""

    def __init__(self, owner: MapReduceEnsemble[T], map_first: bool, reduce_first: bool) -> None:
        self._owner = owner
        self._map_agent_first = map_first
        self._reduce_agent_first = reduce_first

    def map_all(self, items: Sequence[T]) -> list[Task[Any]]:
        """A map task per item, in item order (each a new task)."""
        tasks = [self.map(item) for item in items]
        if len(set(tasks)) < len(tasks):
            _add_new({}, tasks, Node(MAP, 0), "map_task")  # raises, naming the task
        return tasks

    def map(self, item: T) -> Task[Any]:
        """The map task of `item`."""
        make = self._owner.map_task
        if self._owner.map_agent is not None:
            agent = _agent(_made("map_agent", self._owner.map_agent, item), "map_agent")
            return _checked(_made("map_task", make, item, agent), "map_task", agent)
        return _checked(_made("map_task", make, item), "map_task")

    def reduce(self, chunk: Sequence[Task[Any]]) -> Task[Any]:
        """The reduce task over `chunk` (its context must include every chunk task)."""
        make = self._owner.reduce_task
        chunk = list(chunk)
        if self._owner.reduce_agent is not None:
            agent = _agent(_made("reduce_agent", self._owner.reduce_agent), "reduce_agent")
            task = _checked(_made("reduce_task", make, agent, chunk), "reduce_task", agent)
        else:
            task = _checked(_made("reduce_task", make, chunk), "reduce_task")
        context = set(task.context)
        missing = [member for member in chunk if member not in context]
        if missing:
            raise ValidationError(
                "MapReduceEnsemble reduce_task must pass its chunk as the task's context "
                f"(Task(..., context=chunk_tasks)); task '{task.description}' is missing "
                f"'{missing[0].description}'"
            )
        return task

    def direct(self, items: Sequence[T]) -> Task[Any]:
        """The direct task over every item."""
        make = self._owner.direct_task
        if self._owner.direct_agent is not None:
            agent = _agent(_made("direct_agent", self._owner.direct_agent), "direct_agent")
            return _checked(_made("direct_task", make, agent, list(items)), "direct_task", agent)
        return _checked(_made("direct_task", make, list(items)), "direct_task")


def _made(factory: str, make: Any, *args: Any) -> Any:
    """What a user's factory returns; a factory that raises is an error naming it."""
    try:
        return make(*args)
    except AgentEnsembleError:
        raise
    except Exception as error:
        raise ValidationError(
            f"MapReduceEnsemble {factory} raised {type(error).__name__}: {describe_error(error)}"
        ) from error


def _checked(task: object, factory: str, agent: Agent | None = None) -> Task[Any]:
    """`task` if it is a Task (run by `agent`, when one was given), else a ValidationError."""
    if not isinstance(task, Task):
        raise ValidationError(f"MapReduceEnsemble {factory} must return a Task, got: {task!r}")
    if agent is not None and task.agent is not agent:
        given = task.agent.role if task.agent is not None else None
        raise ValidationError(
            f"MapReduceEnsemble {factory} must return a Task run by the agent it is given "
            f"(Task(..., agent=agent)); task '{task.description}' has agent: {given!r}"
        )
    return task


def _agent(agent: object, factory: str) -> Agent:
    if not isinstance(agent, Agent):
        raise ValidationError(f"MapReduceEnsemble {factory} must return an Agent, got: {agent!r}")
    return agent


def _check_items(items: object) -> tuple[Any, ...]:
    checked = as_tuple(items, "MapReduceEnsemble items")
    if not checked:
        raise ValidationError(f"MapReduceEnsemble items must not be None or empty, got: {items!r}")
    return checked


def _takes(function: Callable[..., Any], count: int) -> bool:
    """Whether `function` can be called with `count` positional arguments (True when its
    signature cannot be read)."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*range(count))
    except TypeError:
        return False
    return True


def _check_factories(
    side: str,
    task_factory: object,
    agent_factory: object,
    agent_first_args: tuple[str, str],
) -> bool:
    """Check one side's factories (BEHAVIOUR 16.2 steps 2 and 3); True when agent-first."""
    task_field, agent_field = f"{side}_task", f"{side}_agent"
    first, second = agent_first_args
    agent_first_form = f"{task_field}=lambda {first}, {second}: Task(..., agent=agent)"
    if agent_factory is not None and not callable(agent_factory):
        raise ValidationError(
            f"MapReduceEnsemble {agent_field} must be callable, got: {agent_factory!r}"
        )
    if task_factory is None:
        if agent_factory is not None:
            raise ValidationError(
                f"MapReduceEnsemble {task_field} must be set when {agent_field} is set "
                f"(agent-first {side}): {agent_first_form}"
            )
        task_first_arg = first if side == "map" else second
        raise ValidationError(
            f"MapReduceEnsemble {task_field} must be set: {task_field}=lambda "
            f"{task_first_arg}: Task(...) (task-first), or {agent_field} with "
            f"{agent_first_form} (agent-first)"
        )
    if not callable(task_factory):
        raise ValidationError(
            f"MapReduceEnsemble {task_field} must be callable, got: {task_factory!r}"
        )
    if agent_factory is not None and not _takes(task_factory, 2):
        raise ValidationError(
            f"Ambiguous {side} configuration: {agent_field} is set (agent-first) but "
            f"{task_field} does not take ({first}, {second}). Use {agent_first_form}, or "
            f"remove {agent_field} for a task-first {task_field}"
        )
    if agent_factory is None and not _takes(task_factory, 1):
        raise ValidationError(
            f"MapReduceEnsemble {agent_field} must be set when {task_field} takes "
            f"({first}, {second}) (agent-first {side}), got no {agent_field}"
        )
    return agent_factory is not None


def _resolve_budget(owner: MapReduceEnsemble[Any]) -> int | None:
    """The token budget (adaptive mode), or None (static); BEHAVIOUR 16.2 step 4."""
    window, ratio = owner.context_window_size, owner.budget_ratio
    budget, chunk_size = owner.target_token_budget, owner.chunk_size
    if chunk_size is not None:
        require_int(chunk_size, "MapReduceEnsemble chunk_size")
    example = "Example: context_window_size=128_000, budget_ratio=0.5"
    if window is not None or ratio is not None:
        if ratio is None:
            raise ValidationError(
                f"MapReduceEnsemble budget_ratio must be set when context_window_size is "
                f"specified. {example}"
            )
        if window is None:
            raise ValidationError(
                f"MapReduceEnsemble context_window_size must be set when budget_ratio is "
                f"specified. {example}"
            )
        require_int(window, "MapReduceEnsemble context_window_size")
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or not 0 < ratio <= 1:
            raise ValidationError(
                f"MapReduceEnsemble budget_ratio must be in range (0.0, 1.0], got: {ratio!r}"
            )
        derived = int(window * ratio)
        if derived <= 0:
            raise ValidationError(
                "MapReduceEnsemble target_token_budget derived from context_window_size * "
                f"budget_ratio must be > 0, got: {derived}"
            )
        if chunk_size is not None:
            raise ValidationError(
                "MapReduceEnsemble chunk_size and target_token_budget (derived from "
                "context_window_size * budget_ratio) are mutually exclusive. Use chunk_size "
                "for static mode or context_window_size + budget_ratio for adaptive mode, "
                "not both."
            )
        if budget is not None:
            raise ValidationError(
                "MapReduceEnsemble target_token_budget and context_window_size * budget_ratio "
                f"both set the budget: set one, got: target_token_budget={budget!r}"
            )
        return derived
    if budget is None:
        return None
    require_int(budget, "MapReduceEnsemble target_token_budget")
    if budget <= 0:
        raise ValidationError(f"MapReduceEnsemble target_token_budget must be > 0, got: {budget}")
    if chunk_size is not None:
        raise ValidationError(
            "MapReduceEnsemble chunk_size and target_token_budget are mutually exclusive. Use "
            "chunk_size for static mode or target_token_budget for adaptive mode, not both."
        )
    return budget


def _check_max_reduce_levels(levels: object) -> None:
    if levels is None:
        return
    if require_int(levels, "MapReduceEnsemble max_reduce_levels") < 1:
        raise ValidationError(f"MapReduceEnsemble max_reduce_levels must be >= 1, got: {levels}")


def _check_direct(owner: MapReduceEnsemble[Any], *, adaptive: bool) -> None:
    """BEHAVIOUR 16.2 step 6."""
    task, agent = owner.direct_task, owner.direct_agent
    if agent is not None and not callable(agent):
        raise ValidationError(f"MapReduceEnsemble direct_agent must be callable, got: {agent!r}")
    if task is not None and not callable(task):
        raise ValidationError(f"MapReduceEnsemble direct_task must be callable, got: {task!r}")
    if agent is not None and task is None:
        raise ValidationError(
            "MapReduceEnsemble direct_agent requires direct_task(agent, items) to also be set: "
            "direct_task=lambda agent, items: Task(..., agent=agent)"
        )
    if task is not None and agent is not None and not _takes(task, 2):
        raise ValidationError(
            "Ambiguous direct task configuration: direct_agent is set (agent-first) but "
            "direct_task does not take (agent, items). Use direct_task=lambda agent, items: "
            "Task(..., agent=agent), or remove direct_agent for a task-first direct_task"
        )
    if task is not None and agent is None and not _takes(task, 1):
        raise ValidationError(
            "MapReduceEnsemble direct_task(agent, items) requires direct_agent to also be "
            "set, got no direct_agent"
        )
    if (task is not None or agent is not None) and not adaptive:
        raise ValidationError(
            "MapReduceEnsemble direct_agent/direct_task are not supported in static "
            "(chunk_size) mode. Short-circuit optimization requires target_token_budget (or "
            "context_window_size + budget_ratio) to be set. Remove the direct task "
            "configuration or switch to adaptive mode."
        )


def _check_estimators(owner: MapReduceEnsemble[Any], *, adaptive: bool) -> None:
    """The adaptive-only settings: callable, and not set in static mode (where they would
    do nothing)."""
    settings = {
        "max_reduce_levels": owner.max_reduce_levels,
        "token_estimator": owner.token_estimator,
        "input_estimator": owner.input_estimator,
    }
    for name, value in settings.items():
        if value is None:
            continue
        if not adaptive:
            raise ValidationError(
                f"MapReduceEnsemble {name} applies only in adaptive mode (target_token_budget, "
                f"or context_window_size + budget_ratio); remove it or set a budget, got: "
                f"{value!r}"
            )
        if name != "max_reduce_levels" and not callable(value):
            raise ValidationError(f"MapReduceEnsemble {name} must be callable, got: {value!r}")
    if adaptive and owner.input_estimator is not None and owner.direct_task is None:
        raise ValidationError(
            "MapReduceEnsemble input_estimator sizes the items for the direct task, and no "
            f"direct_task is set: set direct_task or remove it, got: {owner.input_estimator!r}"
        )


def _template(owner: MapReduceEnsemble[Any]) -> Ensemble:
    """The inner ensemble's settings (PARALLEL, the pass-through fields), without tasks;
    each run gets a copy holding its tasks."""
    settings = {
        setting.name: getattr(owner, setting.name)
        for setting in dataclasses.fields(EnsembleSettings)
    }
    try:
        return Ensemble(workflow=Workflow.PARALLEL, **settings)
    except ValidationError as error:
        message = str(error)
        if message.startswith("Ensemble "):
            raise ValidationError(f"MapReduce{message}") from None
        raise
