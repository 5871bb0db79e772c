"""From a checked ensemble file to the keyword arguments of `Ensemble`.

Every problem is collected (with the file, line, column and field) rather than raised at
the first, so `agentensemble validate` reports them all at once.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from agentensemble.agent import Agent
from agentensemble.declarative._imports import ImportFailed, import_object
from agentensemble.declarative._problems import did_you_mean, dotted, problem
from agentensemble.declarative._schema import (
    AgentSpec,
    EnsembleSpec,
    ModelSettingsSpec,
    ModelSpec,
    RateLimitSpec,
    ReviewSpec,
    TaskSpec,
)
from agentensemble.declarative._source import Path_, Source
from agentensemble.declarative._tools import McpServers, ToolProblem, make_tool, refuse_mcp
from agentensemble.enums import ContextFormat, ParallelErrorStrategy, Workflow
from agentensemble.errors import AgentEnsembleError, FileProblem, ValidationError
from agentensemble.observability import CaptureMode
from agentensemble.phase import Phase
from agentensemble.review import ReviewPolicy
from agentensemble.task import Task

if TYPE_CHECKING:
    from agentensemble.models import ModelSettings, RateLimit

__all__ = ["Builder", "model_from_text"]

T = TypeVar("T")

_PROVIDERS = ("openai", "ollama", "openai-compatible")
_ENUM_FIELDS: Mapping[str, type[Enum]] = {
    "workflow": Workflow,
    "parallel_error_strategy": ParallelErrorStrategy,
    "context_format": ContextFormat,
    "capture_mode": CaptureMode,
    "review_policy": ReviewPolicy,
}
"""Settings the file writes as a member's name, in any case."""
_PLAIN_FIELDS = (
    "name",
    "manager_max_iterations",
    "max_delegation_depth",
    "max_concurrency",
    "max_sync_threads",
    "short_term_memory",
    "max_tool_output_length",
    "tool_log_truncate_length",
    "verbose",
)


@dataclass
class Builder:
    """Builds the agents, tasks and phases a file declares, collecting problems."""

    source: Source
    spec: EnsembleSpec
    tools: Mapping[str, object]
    llm: object | None
    problems: list[FileProblem] = field(default_factory=list)
    mcp: McpServers = refuse_mcp
    """What the file's MCP servers become (connected ones, when opened)."""
    declared: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Every name the file declares under agents, tasks and phases, including entries that
    failed their own checks (already reported): a reference to one is not a problem."""
    base_dir: Path = field(init=False)
    _tasks: dict[str, Task[Any]] = field(default_factory=dict)
    _agents: dict[str, Agent] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.base_dir = Path(self.source.file).resolve().parent
        spec = self.spec
        self.declared = {
            "agents": list(spec.agents),
            "tasks": list(spec.tasks),
            "phases": list(spec.phases),
            **self.declared,
        }

    def _names(self, kind: str) -> Sequence[str]:
        return self.declared[kind]

    def fail(self, path: Path_, message: str, *, key: bool = False) -> None:
        self.problems.append(problem(self.source.at(path, key=key), dotted(path), message))

    def ensemble_arguments(self) -> dict[str, Any]:
        """`Ensemble(**arguments)` for the file (check `problems` first)."""
        spec = self.spec
        default_model = self.model(spec.llm, ("llm",))
        arguments: dict[str, Any] = {"llm": default_model}
        for name, agent in spec.agents.items():
            built = self.agent(agent, ("agents", name), default_model)
            if built is not None:
                self._agents[name] = built
        for name in spec.tasks:
            self.task(name, ())
        shared = self.shared_tasks()
        if spec.phases:
            arguments["phases"] = self.phases()
        else:
            arguments["tasks"] = [
                self._tasks[name] for name in self._run_tasks() if name in self._tasks
            ]
        if shared:
            arguments["shared_tasks"] = shared
        if spec.shared_tools:
            arguments["shared_tools"] = self.shared_tools()
        arguments["agents"] = [
            agent for agent in self._agents.values() if not self._is_assigned(agent)
        ]
        arguments["inputs"] = dict(spec.inputs)  # numbers as text, None as "": check_inputs
        arguments.update(self.settings())
        return {key: value for key, value in arguments.items() if value is not None}

    def _run_tasks(self) -> list[str]:
        """The names of the tasks the run runs: every task but the shared ones."""
        shared = set(self.spec.shared_tasks)
        return [name for name in self._names("tasks") if name not in shared]

    def shared_tasks(self) -> dict[str, Task[Any]]:
        shared: dict[str, Task[Any]] = {}
        for index, name in enumerate(self.spec.shared_tasks):
            if name not in self._names("tasks"):
                hint = did_you_mean(name, self._names("tasks"))
                self.fail(("shared_tasks", index), f"no task named '{name}'{hint}")
            elif name in self._tasks:
                shared[name] = self._tasks[name]
        return shared

    def shared_tools(self) -> dict[str, object]:
        shared: dict[str, object] = {}
        for name, entry in self.spec.shared_tools.items():
            made = self.tool(entry, ("shared_tools", name))
            if made is not None:
                shared[name] = made
        return shared

    def _is_assigned(self, agent: Agent) -> bool:
        return any(task.agent is agent for task in self._tasks.values())

    # models

    def model(self, value: str | ModelSpec | None, path: Path_) -> object | None:
        """The model a ``llm`` value names; `from_yaml(llm=...)` replaces every one."""
        if self.llm is not None:
            return self.llm
        if value is None:
            return None
        try:
            return _model(value)
        except (AgentEnsembleError, ImportFailed, ImportError) as error:
            self.fail(path, _message(error))
            return None

    # agents and tasks

    def agent(self, spec: AgentSpec, path: Path_, default_model: object | None) -> Agent | None:
        model = self.model(spec.llm, (*path, "llm")) if spec.llm is not None else default_model
        tools = self.tool_list(spec.tools, (*path, "tools"))
        if model is None:
            if spec.llm is None:
                self.fail(path, "no model: set llm here or at the top of the file, or pass --model")
            return None
        return self.construct(
            path,
            lambda: Agent(
                spec.role,
                spec.goal,
                background=spec.background,
                tools=tools,
                llm=model,
                allow_delegation=spec.allow_delegation,
                verbose=spec.verbose,
                max_iterations=spec.max_iterations,
                response_format=spec.response_format,
                rate_limit=_rate_limit(spec.rate_limit),
                model_settings=_model_settings(spec.model_settings),
            ),
        )

    def task(self, name: str, chain: tuple[str, ...]) -> Task[Any] | None:
        """The task `name`, building its context first (a cycle is a problem)."""
        if name in self._tasks:
            return self._tasks[name]
        spec = self.spec.tasks.get(name)
        if spec is None:  # declared, but failed its own checks
            return None
        path: Path_ = ("tasks", name)
        context = self._context(name, spec, (*chain, name))
        known, agent = self._task_agent(spec, path)
        arguments = self._task_arguments(spec, path)
        if context is None or not known or arguments is None:
            return None
        built = self.construct(
            path,
            lambda: Task(spec.description, name=name, agent=agent, context=context, **arguments),
        )
        if built is not None:
            self._tasks[name] = built
        return built

    def _context(self, name: str, spec: TaskSpec, chain: tuple[str, ...]) -> list[Task[Any]] | None:
        context: list[Task[Any]] = []
        complete = True
        for index, other in enumerate(spec.context):
            where: Path_ = ("tasks", name, "context", index)
            if other not in self._names("tasks"):
                choices = [task for task in self._names("tasks") if task != name]
                self.fail(where, f"no task named '{other}'{did_you_mean(other, choices)}")
                complete = False
            elif other in chain:
                cycle = " -> ".join([*chain[chain.index(other) :], other])
                self.fail(where, f"context makes a cycle: {cycle}")
                complete = False
            else:
                built = self.task(other, chain)
                complete = complete and built is not None
                if built is not None:
                    context.append(built)
        return context if complete else None

    def _task_agent(self, spec: TaskSpec, path: Path_) -> tuple[bool, Agent | None]:
        """Whether the task's agent (None when it names none) was built, and the agent."""
        if spec.agent is None:
            return True, None
        if spec.agent not in self._names("agents"):
            hint = did_you_mean(spec.agent, self._names("agents"))
            self.fail((*path, "agent"), f"no agent named '{spec.agent}'{hint}")
            return False, None
        agent = self._agents.get(spec.agent)
        return agent is not None, agent

    def _task_arguments(self, spec: TaskSpec, path: Path_) -> dict[str, Any] | None:
        before = len(self.problems)
        arguments: dict[str, Any] = {
            "tools": self.tool_list(spec.tools, (*path, "tools")),
            "max_iterations": spec.max_iterations,
            "rate_limit": _rate_limit(spec.rate_limit),
            "model_settings": _model_settings(spec.model_settings),
            "timeout": spec.timeout,
            "max_output_retries": spec.max_output_retries,
            "review": _review(spec.review),
            "before_review": _review(spec.before_review),
            "memory": spec.memory,
            "max_tokens": spec.max_tokens,
            "max_model_calls": spec.max_model_calls,
            "input_guardrails": self.imported_list(
                spec.input_guardrails, (*path, "input_guardrails")
            ),
            "output_guardrails": self.imported_list(
                spec.output_guardrails, (*path, "output_guardrails")
            ),
        }
        if spec.expected_output is not None:
            arguments["expected_output"] = spec.expected_output
        if spec.llm is not None or (self.llm is not None and spec.agent is None):
            arguments["llm"] = self.model(spec.llm, (*path, "llm"))
        if spec.handler is not None:
            arguments["handler"] = self.imported(spec.handler, (*path, "handler"))
        if spec.output_type is not None:
            arguments["output_type"] = self._output_type(spec.output_type, (*path, "output_type"))
        return arguments if len(self.problems) == before else None

    def _output_type(self, import_path: str, path: Path_) -> object:
        target = self.imported(import_path, path)
        if target is not None and not isinstance(target, type):
            kind = "a function" if callable(target) else f"a {type(target).__name__}"
            self.fail(
                path,
                f"'{import_path}' is not a type (a pydantic model, dataclass or other class), "
                f"it is {kind}",
            )
        return target

    def phases(self) -> list[Phase]:
        built: dict[str, Phase] = {}
        placed: dict[str, str] = {}
        for name, spec in self.spec.phases.items():
            for index, task in enumerate(spec.tasks):
                where: Path_ = ("phases", name, "tasks", index)
                if task not in self._names("tasks"):
                    hint = did_you_mean(task, self._names("tasks"))
                    self.fail(where, f"no task named '{task}'{hint}")
                elif task in placed:
                    self.fail(where, f"task '{task}' is already in phase '{placed[task]}'")
                else:
                    placed[task] = name
        for task in self._run_tasks():
            if task not in placed:
                self.fail(
                    ("tasks", task), "in no phase: with phases, every task belongs to one", key=True
                )
        for name in self.spec.phases:
            self._phase(name, (), built)
        return [built[name] for name in self.spec.phases if name in built]

    def _phase(self, name: str, chain: tuple[str, ...], built: dict[str, Phase]) -> Phase | None:
        if name in built:
            return built[name]
        spec = self.spec.phases.get(name)
        if spec is None:
            return None
        after: list[Phase] = []
        for index, other in enumerate(spec.after):
            where: Path_ = ("phases", name, "after", index)
            if other not in self._names("phases"):
                hint = did_you_mean(
                    other, [phase for phase in self._names("phases") if phase != name]
                )
                self.fail(where, f"no phase named '{other}'{hint}")
                return None
            if other in (*chain, name):
                cycle = " -> ".join([*(*chain, name)[(*chain, name).index(other) :], other])
                self.fail(where, f"after makes a cycle: {cycle}")
                return None
            previous = self._phase(other, (*chain, name), built)
            if previous is None:
                return None
            after.append(previous)
        tasks = [self._tasks[task] for task in spec.tasks if task in self._tasks]
        if len(tasks) != len(spec.tasks):
            return None
        workflow = Workflow[spec.workflow.upper()] if spec.workflow else None
        phase = self.construct(
            ("phases", name), lambda: Phase(name, tasks, workflow=workflow, after=after)
        )
        if phase is not None:
            built[name] = phase
        return phase

    # settings of the ensemble itself

    def settings(self) -> dict[str, Any]:
        spec = self.spec
        settings: dict[str, Any] = {name: getattr(spec, name) for name in _PLAIN_FIELDS}
        for name, kind in _ENUM_FIELDS.items():
            value = getattr(spec, name)
            settings[name] = kind[value.upper()] if value is not None else None
        settings["manager_llm"] = (
            self.model(spec.manager_llm, ("manager_llm",)) if spec.manager_llm else None
        )
        settings["rate_limit"] = _rate_limit(spec.rate_limit)
        settings["memory_store"] = self._memory_store()
        if spec.checkpoint is not None:
            settings["checkpoint"] = self.base_dir / spec.checkpoint
        settings["review_handler"] = self._review_handler()
        if spec.drain_timeout is not None:
            settings["drain_timeout"] = spec.drain_timeout
        for name in ("listeners", "hooks", "delegation_policies"):
            settings[name] = self.imported_list(getattr(spec, name), (name,), instantiate=True)
        return settings

    def _memory_store(self) -> object | None:
        from agentensemble.memory import MemoryStore

        memory = self.spec.memory
        if memory is None:
            return None
        store = memory if isinstance(memory, str) else memory.store
        if store == "in_memory":
            return MemoryStore.in_memory()
        path = None if isinstance(memory, str) else memory.path
        return self.construct(
            ("memory",), lambda: MemoryStore.sqlite(self.base_dir / (path or "memory.db"))
        )

    def _review_handler(self) -> object | None:
        from agentensemble.review import ReviewHandler

        handler = self.spec.review_handler
        if handler is None:
            return None
        if handler == "console":
            return ReviewHandler.console()
        if handler == "auto_approve":
            return ReviewHandler.auto_approve()
        if ":" not in handler:
            self.fail(
                ("review_handler",),
                f"unknown review handler '{handler}'"
                f"{did_you_mean(handler, ['console', 'auto_approve'])} (console, auto_approve, "
                "or an import path package.module:Name)",
            )
            return None
        handler_object: object = self.imported(handler, ("review_handler",), instantiate=True)
        return handler_object

    # tools and imports

    def tool_list(self, entries: list[Any], path: Path_) -> list[object]:
        made = (self.tool(entry, (*path, index)) for index, entry in enumerate(entries))
        return [tool for tool in made if tool is not None]

    def tool(self, entry: Any, where: Path_) -> object | None:
        """The tool an entry declares (None after reporting why it cannot be made)."""
        try:
            return make_tool(entry, self.tools, self.base_dir, path=where, mcp=self.mcp)
        except (ToolProblem, AgentEnsembleError, ImportFailed, ImportError) as error:
            self.fail(where, _message(error))
            return None

    def imported(self, import_path: str, path: Path_, *, instantiate: bool = False) -> Any:
        try:
            target = import_object(import_path)
        except ImportFailed as error:
            self.fail(path, str(error))
            return None
        if not (instantiate and isinstance(target, type)):
            return target
        try:
            return target()
        except Exception as error:  # the class's own __init__: say so, do not crash
            self.fail(path, f"cannot create {import_path}(): {type(error).__name__}: {error}")
            return None

    def imported_list(
        self, paths: list[str], path: Path_, *, instantiate: bool = False
    ) -> list[Any]:
        objects = [
            self.imported(item, (*path, index), instantiate=instantiate)
            for index, item in enumerate(paths)
        ]
        return [item for item in objects if item is not None]

    def construct(self, path: Path_, make: Callable[[], T]) -> T | None:
        """`make()`, its `ValidationError` recorded as a problem at `path` (or the field
        its message names)."""
        try:
            return make()
        except AgentEnsembleError as error:
            message = _message(error)
            self.fail(_field_named(self.source, path, message), message)
            return None


def _field_named(source: Source, path: Path_, message: str) -> Path_:
    for candidate in [
        key for key in source.keys if key[: len(path)] == path and len(key) == len(path) + 1
    ]:
        if re.search(rf"(^|\s){re.escape(str(candidate[-1]))}(\[|\s|$)", message):
            return candidate
    return path


def model_from_text(text: str, *, field: str) -> object:
    """The model ``provider:model`` names, or the model that an import path
    ``package.module:name`` names (a class or a factory function is called)."""
    from agentensemble.models import resolve_model

    provider = text.partition(":")[0]
    if provider in _PROVIDERS or ":" not in text:
        return resolve_model(text, field=field)
    try:
        target = import_object(text)
    except ImportFailed as error:
        known = ", ".join(_PROVIDERS)
        raise ValidationError(
            f"'{text}' names no known provider ({known}) and no importable model: {error}"
        ) from None
    factory = isinstance(target, type) or (callable(target) and not hasattr(target, "chat"))
    return resolve_model(target() if factory else target, field=field)


def _model(value: str | ModelSpec) -> object:
    from agentensemble.models import resolve_model

    if isinstance(value, str):
        return model_from_text(value, field="llm")
    provider, _, name = value.model.partition(":")
    if provider not in _PROVIDERS:
        return resolve_model(value.model, field="llm.model")  # names the known providers
    from agentensemble.models import OpenAIChatModel

    options = {
        key: getattr(value, key)
        for key in ("base_url", "api_key", "timeout", "max_retries", "temperature")
        if getattr(value, key) is not None
    }
    if provider != "openai" and "base_url" not in options:
        resolved = resolve_model(value.model, field="llm.model")  # the provider's default URL
        options["base_url"] = getattr(resolved, "base_url", None)
    return OpenAIChatModel(name, **options)


def _rate_limit(spec: RateLimitSpec | None) -> RateLimit | None:
    if spec is None:
        return None
    from agentensemble.models import RateLimit

    return RateLimit(spec.requests, spec.period, wait_timeout=spec.wait_timeout)


def _model_settings(spec: ModelSettingsSpec | None) -> ModelSettings | None:
    if spec is None:
        return None
    from agentensemble.models import ModelSettings

    return ModelSettings(
        temperature=spec.temperature,
        max_tokens=spec.max_tokens,
        timeout=spec.timeout,
        extra=spec.extra,
    )


def _review(spec: str | ReviewSpec | None) -> object | None:
    from agentensemble.review import Review

    if spec is None:
        return None
    if spec == "required":
        return Review.required()
    if spec == "skip":
        return Review.skip()
    assert isinstance(spec, ReviewSpec)
    extra: dict[str, Any] = (
        {} if spec.timeout is None else {"timeout": timedelta(seconds=spec.timeout)}
    )
    return Review(
        on_timeout=spec.on_timeout.upper(),
        prompt=spec.prompt,
        required_role=spec.required_role,
        **extra,
    )


def _message(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, ImportError) and "pip install" not in text:
        return f"needs a package that is not installed: {text}"
    return text
