"""`Ensemble`: a team of agents running a list of tasks under a workflow."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agentensemble._checks import as_tuple, items_of, require_int, require_seconds, unique_names
from agentensemble._formats import require_toon
from agentensemble._hints import KeywordHints
from agentensemble._hook_checks import check_hooks
from agentensemble._inputs import Inputs, check_inputs
from agentensemble._stream import DEFAULT_MAX_BUFFER, EventStream
from agentensemble._sync import run_sync
from agentensemble._unset import UNSET, Unset, resolve_int
from agentensemble.agent import Agent
from agentensemble.delegation import (
    DelegationPolicy,
    HierarchicalConstraints,
    ManagerPromptStrategy,
)
from agentensemble.enums import ContextFormat, ParallelErrorStrategy, Workflow
from agentensemble.errors import ValidationError
from agentensemble.execution._synthesis import AgentSynthesizer
from agentensemble.graph import Graph
from agentensemble.loop import Loop
from agentensemble.memory import EntityMemory, MemoryStore
from agentensemble.models import ChatModel, RateLimit, resolve_model
from agentensemble.observability._capture import CaptureMode
from agentensemble.observability._cost import CostConfiguration
from agentensemble.observability._exporters import TraceExporter
from agentensemble.observability._listeners import (
    CALLBACK_NAMES,
    Callback,
    callback_listener,
    check_listeners,
)
from agentensemble.options import RunOptions, check_length
from agentensemble.phase import Phase
from agentensemble.review import ReviewDecision, ReviewHandler, ReviewPolicy
from agentensemble.review._handlers import check_handler
from agentensemble.task import Task

if TYPE_CHECKING:
    from agentensemble.checkpoints import CheckpointStore
    from agentensemble.network import DeliveryRegistry, EnsembleServer, Transport
    from agentensemble.observability._events import (
        DelegationCompletedEvent,
        DelegationFailedEvent,
        DelegationStartedEvent,
        TaskCompleteEvent,
        TaskFailedEvent,
        TaskStartEvent,
        TokenEvent,
        ToolCallEvent,
    )
    from agentensemble.outputs import EnsembleOutput
    from agentensemble.web import WebDashboard

__all__ = ["Ensemble", "EnsembleSettings"]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class EnsembleSettings(metaclass=KeywordHints):
    """The settings of a run that an `Ensemble` shares with the composites that run one
    (`MapReduceEnsemble`), declared once here; each class checks them when it is made."""

    llm: Any = None
    """Model for tasks without an agent or task-level model: a `ChatModel`, a
    ``"provider:model"`` string or a LangChain chat model."""
    parallel_error_strategy: ParallelErrorStrategy | None = ParallelErrorStrategy.FAIL_FAST
    """What a PARALLEL run does when a task fails."""
    review_handler: ReviewHandler | None = None
    """Who answers review gates, tool approvals and `human_input` questions
    (``ReviewHandler.console()``, ``.auto_approve()``, or your own)."""
    review_policy: ReviewPolicy | None = None
    """When after-task gates fire for tasks without their own `review` (None: NEVER)."""
    max_concurrency: int | None = None
    """Most tasks of a run in flight at once, across phases (None: no limit)."""
    max_sync_threads: int = 32
    """Most of the process's sync threads (see `limit_sync_threads`) a run uses at once for
    sync user code (tools, listeners, handlers)."""
    rate_limit: RateLimit | None = None
    """Limit on model calls of tasks using the ensemble `llm`: one bucket per run."""
    verbose: bool = False
    """Show live progress on the console and log prompts and answers."""
    agent_synthesizer: AgentSynthesizer | None = None
    """Makes agents for agentless tasks; `TemplateAgentSynthesizer` when None."""
    inputs: Inputs = field(default_factory=dict)
    """Template inputs; `run(inputs=...)` values win over these."""
    capture_mode: CaptureMode | None = None
    """How much traces record; see `CaptureMode` (``AGENTENSEMBLE_CAPTURE_MODE`` applies
    when this is None or OFF)."""
    context_format: ContextFormat = ContextFormat.JSON
    """How structured context outputs and JSON tool results are written into prompts
    (`ContextFormat.TOON` needs the ``toon`` extra)."""
    checkpoint: CheckpointStore | str | os.PathLike[str] | None = None
    """Where each run records its tasks as they complete (a SQLite file's path, or a
    `CheckpointStore`), so that ``run(resume=run_id)`` continues a run that crashed,
    failed, timed out or paused without calling the completed tasks' models again. A path
    becomes a ``CheckpointStore.sqlite(path)`` when the ensemble is made."""
    cost_configuration: CostConfiguration | None = None
    """Token prices, for cost estimates in metrics and traces."""
    trace_exporter: TraceExporter | None = None
    """Receives every run's trace (FULL capture exports to ``./traces/`` when None)."""
    listeners: Sequence[object] = ()
    """`EnsembleListener` objects (or any objects with some of its methods)."""
    loops: Sequence[Loop] = ()
    """`Loop`s: bodies of tasks repeated until a predicate holds or a cap is reached. They
    run after the flat tasks (SEQUENTIAL) or as DAG nodes waiting for their `context`
    (PARALLEL)."""
    graph: Graph | None = None
    """A `Graph` of tasks: the whole run walks it (no `tasks`, `loops` or `phases`)."""
    web_dashboard: WebDashboard | None = None
    """A live dashboard (`agentensemble.web.WebDashboard`): it shows every run, and decides
    the reviews when `review_handler` is None. A run starts it when it is not running, and
    then the last such run to end stops it."""
    name: str | None = None
    """Optional name, used in logs, traces and spans."""
    hooks: Sequence[object] = ()
    """Before-hooks of every run: objects with ``before_model_call`` and/or
    ``before_tool_call`` returning a `HookDecision`, run in order before each model and tool
    call (see `agentensemble.hooks`)."""


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Ensemble(EnsembleSettings):
    """Tasks, the model they share, and how to run them.

    Build it once and run it as often as you like, concurrently too: a run keeps all its
    state to itself. Configuration errors raise `ValidationError` before any model call.
    """

    tasks: Sequence[Task[Any]] = ()
    """The tasks, in order."""
    phases: Sequence[Phase] = ()
    """Named groups of tasks run as a DAG (instead of `tasks`)."""
    agents: Sequence[Agent] = ()
    """Agents the tasks' agents may delegate to (and HIERARCHICAL workers) besides the
    agents of the tasks themselves."""
    workflow: Workflow | None = None
    """How tasks run. When None: PARALLEL if a task's context names another task of the
    ensemble, else SEQUENTIAL (phases: SEQUENTIAL)."""
    manager_llm: Any = None
    """Model of the HIERARCHICAL manager (else the ensemble `llm`, else the first worker's)."""
    manager_max_iterations: int | Unset = UNSET
    """How many tool calls (delegations) the HIERARCHICAL manager may make (20 when not
    given, and read as 20 then)."""
    manager_prompt_strategy: ManagerPromptStrategy | None = None
    """Writes the HIERARCHICAL manager's prompts (`DefaultManagerPromptStrategy` when None)."""
    hierarchical_constraints: HierarchicalConstraints | None = None
    """Rules for the HIERARCHICAL manager's delegations (required, allowed, caps, stages)."""
    max_delegation_depth: int | Unset = UNSET
    """How deep delegations may nest: with 1, A may delegate to B but B not to C (3 when
    not given, and read as 3 then)."""
    delegation_policies: Sequence[DelegationPolicy] = ()
    """Checks run before every delegation, in order, after the built-in guards: each returns
    `DelegationPolicyResult.allow()`, ``.reject(reason)`` or ``.modify(request)``."""
    memory_store: MemoryStore | None = None
    """Where tasks' memory scopes live (`MemoryStore.sqlite(path)` persists across runs and
    processes; `MemoryStore.in_memory()` lasts as long as the object)."""
    short_term_memory: bool = False
    """Show each task every output completed earlier in the run (in place of its context)."""
    entity_memory: EntityMemory | None = None
    """Facts about named entities, shown to every task (``## Entity Knowledge``)."""
    max_tool_output_length: int = -1
    """Characters of each tool result the model sees (-1: no limit)."""
    tool_log_truncate_length: int = 200
    """Characters of tool input/output in logs (-1: all, 0: none)."""
    on_task_start: Callback[TaskStartEvent] | None = None
    """Called when a task starts."""
    on_task_complete: Callback[TaskCompleteEvent] | None = None
    """Called when a task completes."""
    on_task_failed: Callback[TaskFailedEvent] | None = None
    """Called when a task fails."""
    on_tool_call: Callback[ToolCallEvent] | None = None
    """Called when a tool call finishes."""
    on_token: Callback[TokenEvent] | None = None
    """Called for each streamed piece of an answer."""
    on_delegation_started: Callback[DelegationStartedEvent] | None = None
    """Called when a delegation starts."""
    on_delegation_completed: Callback[DelegationCompletedEvent] | None = None
    """Called when a delegation completes."""
    on_delegation_failed: Callback[DelegationFailedEvent] | None = None
    """Called when a delegation fails."""
    shared_tasks: Mapping[str, Task[Any]] = field(default_factory=dict)
    """Tasks other ensembles may ask for by name while this one serves (`serve`, `start`);
    a request's text is the run input ``request``: where the description says
    ``{request}``, else in a ``## Request`` section after it."""
    shared_tools: Mapping[str, object] = field(default_factory=dict)
    """Tools other ensembles may call by name while this one serves; a request's text is
    the tool's JSON arguments."""
    drain_timeout: timedelta | float = timedelta(minutes=5)
    """How long a serving ensemble that is told to stop (`EnsembleServer.stop`, SIGTERM)
    lets its requests in flight finish before handing them back to the transport."""
    _model: ChatModel | None = field(init=False, default=None, repr=False)
    _manager_model: ChatModel | None = field(init=False, default=None, repr=False)
    _validated: Any = field(init=False, default=None, repr=False)
    """What the run-time checks made of this configuration, kept by the first run that
    passed them: the configuration is immutable, so every later run reuses it."""
    _planned: Any = field(init=False, default=None, repr=False)
    """The planned tasks of a run that has nothing of its own to plan with, kept by the
    first such run: every later one plans the same (see `_run._plans_alike`)."""
    event_listeners: tuple[object, ...] = field(init=False, default=(), repr=False)
    """What every run of this ensemble notifies: `listeners`, then one for the keyword
    callbacks (derived; per-run listeners come from `RunOptions`)."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "manager_max_iterations", resolve_int(self.manager_max_iterations, 20))
        set_(self, "max_delegation_depth", resolve_int(self.max_delegation_depth, 3))
        if isinstance(self.tasks, Task):
            raise ValidationError("Ensemble tasks must be a list of tasks, got a single Task")
        set_(self, "tasks", as_tuple(self.tasks, "Ensemble tasks"))
        set_(self, "phases", as_tuple(self.phases, "Ensemble phases"))
        set_(self, "loops", _check_loops(self.loops))
        if self.graph is not None and not isinstance(self.graph, Graph):
            raise ValidationError(f"Ensemble graph must be a Graph, got: {self.graph!r}")
        set_(self, "listeners", as_tuple(self.listeners, "Ensemble listeners"))
        set_(self, "hooks", check_hooks(self.hooks, "Ensemble hooks"))
        set_(self, "agents", _check_agents(self.agents))
        set_(
            self,
            "delegation_policies",
            as_tuple(self.delegation_policies, "Ensemble delegation_policies"),
        )
        set_(self, "inputs", check_inputs(self.inputs, "Ensemble inputs"))
        set_(self, "workflow", _check_choice(self.workflow, Workflow, "workflow"))
        set_(
            self,
            "context_format",
            _check_choice(self.context_format, ContextFormat, "context_format"),
        )
        set_(self, "review_handler", check_handler(self.review_handler, "Ensemble review_handler"))
        dashboard_listeners = _dashboard_wiring(self)
        set_(
            self, "review_policy", _check_choice(self.review_policy, ReviewPolicy, "review_policy")
        )
        check_length(self.max_tool_output_length, "Ensemble max_tool_output_length")
        check_length(self.tool_log_truncate_length, "Ensemble tool_log_truncate_length")
        _check_settings(self)
        if self.llm is not None:
            set_(self, "_model", resolve_model(self.llm, field="Ensemble llm"))
        if self.manager_llm is not None:
            set_(
                self,
                "_manager_model",
                resolve_model(self.manager_llm, field="Ensemble manager_llm"),
            )
        if self.checkpoint is not None:  # the module loads only for ensembles that use it
            from agentensemble.checkpoints import resolve_checkpoint

            set_(self, "checkpoint", resolve_checkpoint(self.checkpoint))
        _check_serving(self)
        callbacks = callback_listener(**{name: getattr(self, name) for name in CALLBACK_NAMES})
        set_(
            self,
            "event_listeners",
            (*self.listeners, *dashboard_listeners, *([callbacks] if callbacks else [])),
        )

    @property
    def model(self) -> ChatModel | None:
        """`llm` resolved to a `ChatModel` (None when the ensemble has no model)."""
        return self._model

    @property
    def checkpoint_store(self) -> CheckpointStore | None:
        """`checkpoint` as a store (a path became a SQLite one), or None."""
        return cast("CheckpointStore | None", self.checkpoint)

    @property
    def manager_model(self) -> ChatModel | None:
        """`manager_llm` resolved to a `ChatModel` (None when not set)."""
        return self._manager_model

    def run(
        self,
        inputs: Inputs | None = None,
        options: RunOptions | None = None,
        *,
        resume: str | None = None,
        decision: ReviewDecision | None = None,
    ) -> EnsembleOutput:
        """Run the ensemble and wait for the result. Works inside a running event loop too.
        See `arun`."""
        return run_sync(self.arun(inputs, options, resume=resume, decision=decision))

    async def arun(
        self,
        inputs: Inputs | None = None,
        options: RunOptions | None = None,
        *,
        resume: str | None = None,
        decision: ReviewDecision | None = None,
    ) -> EnsembleOutput:
        """Run the ensemble.

        Raises `ValidationError` or `PromptTemplateError` before any model call, and
        `TaskExecutionError` or `ParallelExecutionError` (carrying every completed output)
        when tasks fail. A run whose `RunOptions.timeout` expires returns the completed
        outputs with ``exit_reason == ExitReason.TIMEOUT``.

        `resume` (the id of a run this ensemble's `checkpoint` recorded) continues that run:
        its completed tasks are restored, not run again, and the rest run as before (with
        the recorded inputs when `inputs` is None). A run that paused at a review
        (exit reason ``PAUSED``) is resumed with the `decision` on that review.
        """
        if "agentensemble._run" not in sys.modules:  # the engine loads on the first run
            from agentensemble._calling import import_off_loop

            await import_off_loop("agentensemble._run")
        # waits, as any import does, while a first run's thread is still importing it; not
        # `from ... import run_ensemble`: 0.5 µs a call, 0.16 µs so (a from-import looks for
        # the module's `__path__`, which formats an AttributeError)
        import agentensemble._run as engine

        dashboard = self.web_dashboard
        if dashboard is None:
            return await engine.run_ensemble(
                self, inputs, options, resume=resume, decision=decision
            )
        await dashboard.acquire_for_run()
        try:
            return await engine.run_ensemble(
                self, inputs, options, resume=resume, decision=decision
            )
        finally:
            await dashboard.release_for_run()

    @classmethod
    def from_yaml(
        cls,
        path: str | os.PathLike[str],
        *,
        tools: Mapping[str, object] | None = None,
        llm: Any = None,
    ) -> Ensemble:
        """The ensemble a YAML file declares (or a directory holding ``agents.yaml`` and
        ``tasks.yaml``, and optionally ``ensemble.yaml``), checked as a run would check it.

        `tools` maps names the file's ``tools:`` lists may use to tool objects; `llm`
        replaces every model the file names (a `ScriptedModel` in tests, or ``--model``).
        Raises `EnsembleFileError` listing every problem with its file, line and column.
        """
        from agentensemble.declarative import load_ensemble

        return load_ensemble(path, cls._checked_from, tools=tools, llm=llm)

    @classmethod
    def open_yaml(
        cls,
        path: str | os.PathLike[str],
        *,
        tools: Mapping[str, object] | None = None,
        llm: Any = None,
    ) -> AbstractAsyncContextManager[Ensemble]:
        """`from_yaml` for a file whose tools include MCP servers: ``async with
        Ensemble.open_yaml(path) as ensemble:`` connects them, and closes them (stopping
        their processes) when the block ends."""
        from agentensemble.declarative import open_ensemble

        return open_ensemble(path, cls._checked_from, tools=tools, llm=llm)

    @classmethod
    def _checked_from(cls, **fields: Any) -> Ensemble:
        """An ensemble of `fields`, checked as its first run will check it (one that only
        serves shared tasks and tools is checked when it starts serving)."""
        from agentensemble._run import checked_ensemble

        ensemble = cls(**fields)
        serves_only = not (ensemble.tasks or ensemble.phases or ensemble.loops or ensemble.graph)
        if serves_only and (ensemble.shared_tasks or ensemble.shared_tools):
            return ensemble
        return checked_ensemble(ensemble)

    def run_many(
        self,
        inputs_list: Iterable[Inputs],
        options: RunOptions | None = None,
        *,
        max_concurrency: int | None = None,
    ) -> list[EnsembleOutput | Exception]:
        """Run once per inputs mapping and wait for all: the outputs in order, a failed
        run's error in its place (one failure does not stop the others). At most
        `max_concurrency` runs at once (None: all). See `arun_many`."""
        return run_sync(self.arun_many(inputs_list, options, max_concurrency=max_concurrency))

    async def arun_many(
        self,
        inputs_list: Iterable[Inputs],
        options: RunOptions | None = None,
        *,
        max_concurrency: int | None = None,
    ) -> list[EnsembleOutput | Exception]:
        """Run once per inputs mapping, concurrently: the outputs in order, a failed run's
        error (an `Exception`) in its place. Every inputs mapping is checked before any run
        starts; cancelling cancels the runs still going."""
        from agentensemble._batch import run_batch

        return await run_batch(self.arun, inputs_list, options, max_concurrency=max_concurrency)

    def astream(
        self,
        inputs: Inputs | None = None,
        options: RunOptions | None = None,
        *,
        max_buffer: int = DEFAULT_MAX_BUFFER,
    ) -> EventStream:
        """Run the ensemble, giving its events as they happen: ``async for event in
        stream``, then ``stream.output``. See `EventStream` (prefer ``async with``); at most
        `max_buffer` events wait for a slow reader before the run waits for it."""
        return EventStream(
            lambda run_options: self.arun(inputs, run_options), options, max_buffer=max_buffer
        )

    async def serve(
        self,
        transport: Transport,
        *,
        concurrency: int = 8,
        deliveries: DeliveryRegistry | None = None,
    ) -> None:
        """Answer requests for `shared_tasks` and `shared_tools` from `transport`, at most
        `concurrency` at a time, until drained (SIGTERM on the main thread) or cancelled.
        Each request runs with its id as the run id and what is left of its deadline as
        the run's timeout; `deliveries` sends responses on by the methods requests name
        (QUEUE, WEBHOOK...). See `agentensemble.network`."""
        from agentensemble.network import EnsembleServer

        server = EnsembleServer(self, transport, concurrency=concurrency, deliveries=deliveries)
        await server.serve()

    def start(
        self,
        transport: Transport,
        *,
        concurrency: int = 8,
        deliveries: DeliveryRegistry | None = None,
    ) -> EnsembleServer:
        """`serve` on a thread of its own: returns the running `EnsembleServer` (its
        `state` is READY), which ``stop()`` drains and stops."""
        from agentensemble.network import EnsembleServer

        server = EnsembleServer(self, transport, concurrency=concurrency, deliveries=deliveries)
        return server.start()


E = TypeVar("E", bound=StrEnum)


def _check_choice(value: object, choices: type[E], field_name: str) -> E | None:
    """`value` as one of `choices` (its name accepted too, in any case); None stays None."""
    if value is None or isinstance(value, choices):
        return value
    if isinstance(value, str) and value.upper() in choices.__members__:
        return choices[value.upper()]
    names = ", ".join(choices.__members__)
    raise ValidationError(f"Ensemble {field_name} must be one of [{names}], got: {value!r}")


def _check_settings(ensemble: Ensemble) -> None:
    if isinstance(ensemble.phases, Phase):
        raise ValidationError("Ensemble phases must be a list of phases, got a single Phase")
    if ensemble.max_concurrency is not None:
        require_int(ensemble.max_concurrency, "Ensemble max_concurrency")
        if ensemble.max_concurrency <= 0:
            raise ValidationError(
                f"Ensemble max_concurrency must be > 0 when set, got: {ensemble.max_concurrency}"
            )
    require_int(ensemble.max_sync_threads, "Ensemble max_sync_threads")
    if ensemble.max_sync_threads <= 0:
        raise ValidationError(
            f"Ensemble max_sync_threads must be > 0, got: {ensemble.max_sync_threads}"
        )
    _check_type(ensemble.parallel_error_strategy, ParallelErrorStrategy, "parallel_error_strategy")
    _check_type(ensemble.rate_limit, RateLimit, "rate_limit")
    _check_type(ensemble.capture_mode, CaptureMode, "capture_mode")
    _check_type(ensemble.cost_configuration, CostConfiguration, "cost_configuration")
    _check_memory_settings(ensemble)
    _check_context_format(ensemble.context_format)
    _check_delegation_settings(ensemble)
    synthesizer = ensemble.agent_synthesizer
    if synthesizer is not None and not isinstance(synthesizer, AgentSynthesizer):
        raise ValidationError(
            "Ensemble agent_synthesizer must have an async synthesize(description, llm) "
            f"method, got: {synthesizer!r}"
        )
    check_listeners(ensemble.listeners, field="Ensemble listeners")
    for callback in CALLBACK_NAMES:
        value = getattr(ensemble, callback)
        if value is not None and not callable(value):
            raise ValidationError(f"Ensemble {callback} must be callable, got: {value!r}")
    exporter = ensemble.trace_exporter
    if exporter is not None and not isinstance(exporter, TraceExporter):
        raise ValidationError(
            f"Ensemble trace_exporter must have an export(trace) method, got: {exporter!r}"
        )


def _check_memory_settings(ensemble: Ensemble) -> None:
    store = ensemble.memory_store
    if store is not None and not isinstance(store, MemoryStore):
        raise ValidationError(
            "Ensemble memory_store must be a MemoryStore (async store, retrieve, evict and "
            f"clear methods), got: {store!r}"
        )
    _check_type(ensemble.entity_memory, EntityMemory, "entity_memory")
    if not isinstance(ensemble.short_term_memory, bool):
        raise ValidationError(
            f"Ensemble short_term_memory must be True or False, got: {ensemble.short_term_memory!r}"
        )


def _check_agents(agents: object) -> tuple[Agent, ...]:
    if isinstance(agents, Agent):
        raise ValidationError("Ensemble agents must be a list of agents, got a single Agent")
    return items_of(agents, Agent, "Ensemble agents")


def _check_delegation_settings(ensemble: Ensemble) -> None:
    require_int(ensemble.manager_max_iterations, "Ensemble manager_max_iterations")
    depth = require_int(ensemble.max_delegation_depth, "Ensemble max_delegation_depth")
    if depth <= 0:
        raise ValidationError(f"Ensemble max_delegation_depth must be > 0, got: {depth}")
    _check_type(
        ensemble.hierarchical_constraints, HierarchicalConstraints, "hierarchical_constraints"
    )
    strategy = ensemble.manager_prompt_strategy
    if strategy is not None and not isinstance(strategy, ManagerPromptStrategy):
        raise ValidationError(
            "Ensemble manager_prompt_strategy must have build_system_prompt(context) and "
            f"build_user_prompt(context) methods, got: {strategy!r}"
        )
    for index, policy in enumerate(ensemble.delegation_policies):
        if not callable(policy):
            raise ValidationError(
                f"Ensemble delegation_policies[{index}] must be callable (request, context) -> "
                f"DelegationPolicyResult, got: {policy!r}"
            )


def _check_type(value: object, expected: type, field_name: str) -> None:
    if value is not None and not isinstance(value, expected):
        raise ValidationError(
            f"Ensemble {field_name} must be a {expected.__name__}, got: {value!r}"
        )


def _check_context_format(context_format: object) -> None:
    if not isinstance(context_format, ContextFormat):
        raise ValidationError(
            f"Ensemble context_format must be a ContextFormat, got: {context_format!r}"
        )
    if context_format is ContextFormat.TOON:
        try:
            require_toon()
        except ImportError:
            raise ValidationError(
                "Ensemble context_format TOON requires the toon-format package: "
                'pip install "agentensemble[toon]"'
            ) from None


_DASHBOARD_PARTS = ("listener", "review_handler", "acquire_for_run", "release_for_run")


def _dashboard_wiring(ensemble: Ensemble) -> tuple[object, ...]:
    """The listeners `web_dashboard` adds; its review handler decides the reviews when the
    ensemble has no handler of its own."""
    dashboard = ensemble.web_dashboard
    if dashboard is None:
        return ()
    if not all(hasattr(dashboard, part) for part in _DASHBOARD_PARTS):
        raise ValidationError(
            f"Ensemble web_dashboard must be an agentensemble.web.WebDashboard, got: {dashboard!r}"
        )
    if ensemble.review_handler is None:
        object.__setattr__(ensemble, "review_handler", dashboard.review_handler)
    return (dashboard.listener,)


def _check_serving(ensemble: Ensemble) -> None:
    """Shared tasks and tools checked (their module loads only when there are some)."""
    set_ = object.__setattr__
    seconds = require_seconds(ensemble.drain_timeout, "Ensemble drain_timeout")
    set_(ensemble, "drain_timeout", timedelta(seconds=seconds))
    if not ensemble.shared_tasks and not ensemble.shared_tools:
        set_(ensemble, "shared_tasks", {})
        set_(ensemble, "shared_tools", {})
        return
    from agentensemble.network._shared import check_shared_tasks, check_shared_tools

    tasks = check_shared_tasks(ensemble.shared_tasks)
    set_(ensemble, "shared_tasks", tasks)
    set_(ensemble, "shared_tools", check_shared_tools(ensemble.shared_tools, tasks))


def _check_loops(loops: object) -> tuple[Loop, ...]:
    checked = items_of(loops, Loop, "Ensemble loops")
    unique_names(checked, "loop")
    return checked
