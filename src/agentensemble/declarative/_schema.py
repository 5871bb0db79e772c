"""The ensemble file's format as pydantic models: they check each value's type and refuse
unknown keys, and `ensemble_file_schema()` publishes them as JSON Schema for editors.

Keys are the Python field names. References between entries (a task's `agent` and
`context`, a phase's `tasks` and `after`) and import paths are checked later, by the
builder, which knows every name; this module checks only what one value shows alone.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

__all__ = [
    "ENTRY_MODELS",
    "AgentSpec",
    "EnsembleSpec",
    "ModelSpec",
    "PhaseSpec",
    "RateLimitSpec",
    "ReviewSpec",
    "TaskSpec",
    "ensemble_file_schema",
]


def _lower(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


ImportPath = Annotated[
    str,
    Field(
        pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$",
        description="An import path, package.module:Name",
    ),
]
Seconds = Annotated[float, Field(gt=0, description="Seconds")]
InputValue = str | int | float | bool


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class ModelSettingsSpec(_Spec):
    """Per-call model settings (`ModelSettings`)."""

    temperature: float | None = Field(default=None, ge=0)
    """Sampling temperature."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Most tokens in an answer."""
    timeout: Seconds | None = None
    """Seconds one model call may take."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific request fields, passed through."""


class ModelSpec(_Spec):
    """A model with connection settings; a plain ``provider:model`` string says the same
    with the defaults."""

    model: str = Field(description="provider:model, e.g. openai:gpt-4o-mini")
    base_url: str | None = None
    """The server's URL (OpenAI-compatible servers)."""
    api_key: str | None = Field(default=None, description="Write ${VARIABLE}, not the key")
    timeout: Seconds | None = None
    """Seconds one request may take."""
    max_retries: int | None = Field(default=None, ge=0)
    """Retries of 408/409/429/5xx answers."""
    temperature: float | None = Field(default=None, ge=0)
    """Sampling temperature."""


Model = str | ModelSpec


class RateLimitSpec(_Spec):
    """At most `requests` model calls per `period` seconds (`RateLimit`)."""

    requests: int = Field(gt=0)
    """Calls allowed per period."""
    period: Seconds = 60.0
    """The period, in seconds."""
    wait_timeout: Seconds | None = None
    """Fail a call that would wait longer than this (seconds)."""


class ReviewSpec(_Spec):
    """A review gate (`Review`)."""

    timeout: Seconds | None = None
    """Seconds to wait for a decision."""
    on_timeout: Annotated[Literal["continue", "exit_early", "fail"], BeforeValidator(_lower)] = (
        "exit_early"
    )
    """What nobody deciding in time does."""
    prompt: str | None = None
    """What the reviewer is asked."""
    required_role: str | None = None
    """Who may decide."""


Review = Annotated[Literal["required", "skip"], BeforeValidator(_lower)] | ReviewSpec

Tool = str | dict[str, Any]
"""A built-in tool by name (``calculator``), one with settings (``{file_read: {base_dir:
./data}}``), a tool given to `from_yaml(tools=...)` by name, an import path
(``package.module:tool``), or an MCP server (``{mcp: {command: ..., args: [...]}}`` or
``{mcp: {url: ...}}``)."""


class AgentSpec(_Spec):
    """An agent (`Agent`); `llm` defaults to the file's."""

    role: str
    """Who the agent is (may use {inputs})."""
    goal: str
    """What the agent works towards (may use {inputs})."""
    background: str | None = None
    """The agent's background (CrewAI's backstory)."""
    tools: list[Tool] = Field(default_factory=list)
    """Built-in tools by name, others by import path, MCP servers."""
    llm: Model | None = None
    """The agent's model; the file's by default."""
    allow_delegation: bool = False
    """May hand work to the other agents."""
    verbose: bool = False
    """Log this agent's prompts and answers."""
    max_iterations: int = Field(default=25, gt=0)
    """Most model calls for one task."""
    response_format: str | None = None
    """Extra instructions on the answer's form."""
    rate_limit: RateLimitSpec | None = None
    """A rate limit for this agent's model."""
    model_settings: ModelSettingsSpec | None = None
    """Settings of this agent's model calls."""


class TaskSpec(_Spec):
    """A task (`Task`); its name is its key in `tasks`, `agent` and `context` name others."""

    description: str
    """What to do (may use {inputs})."""
    expected_output: str | None = None
    """What the answer looks like."""
    agent: str | None = None
    """The name of an entry of agents (none: one is synthesised)."""
    llm: Model | None = None
    """The task's model, for a task without an agent."""
    tools: list[Tool] = Field(default_factory=list)
    """Tools for this task only."""
    max_iterations: int | None = Field(default=None, gt=0)
    """Most model calls for this task."""
    context: list[str] = Field(default_factory=list)
    """Names of the tasks whose outputs this one reads."""
    handler: ImportPath | None = None
    """A function that does the task without a model."""
    rate_limit: RateLimitSpec | None = None
    """A rate limit for this task's model calls."""
    model_settings: ModelSettingsSpec | None = None
    """Settings of this task's model calls."""
    timeout: Seconds | None = None
    """Seconds the task may take."""
    output_type: ImportPath | None = None
    """The type the answer is parsed into (a pydantic model...)."""
    max_output_retries: int = Field(default=3, ge=0)
    """Corrections asked for when the answer does not parse."""
    input_guardrails: list[ImportPath] = Field(default_factory=list)
    """Checks of the task before it runs."""
    output_guardrails: list[ImportPath] = Field(default_factory=list)
    """Checks of the answer."""
    review: Review | None = None
    """A review gate after the task: required, skip, or settings."""
    before_review: Review | None = None
    """A review gate before the task."""
    memory: list[str] = Field(default_factory=list)
    """Memory scopes the task reads and writes."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Most tokens the task's model calls may use; then the task fails."""
    max_model_calls: int | None = Field(default=None, gt=0)
    """Most model calls the task may make; then the task fails."""


class PhaseSpec(_Spec):
    """A phase (`Phase`): task names, its own workflow, and the phases it runs after."""

    tasks: list[str] = Field(min_length=1)
    """Names of the phase's tasks."""
    workflow: (
        Annotated[Literal["sequential", "parallel", "hierarchical"], BeforeValidator(_lower)] | None
    ) = None
    """How the phase runs its tasks."""
    after: list[str] = Field(default_factory=list)
    """Names of the phases this one waits for."""


class MemorySpec(_Spec):
    """The memory store: ``sqlite`` (a file, relative to the ensemble file) or
    ``in_memory``."""

    store: Annotated[Literal["sqlite", "in_memory"], BeforeValidator(_lower)] = "sqlite"
    """Where memories are kept."""
    path: str | None = None
    """The SQLite file, relative to the ensemble file (memory.db)."""


class EnsembleSpec(_Spec):
    """An ensemble file (`Ensemble.from_yaml`)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        use_attribute_docstrings=True,
        title="agentensemble ensemble file",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    name: str | None = None
    """The ensemble's name, in traces and the dashboard."""
    llm: Model | None = None
    """provider:model, an import path, or a mapping with settings."""
    workflow: (
        Annotated[Literal["sequential", "parallel", "hierarchical"], BeforeValidator(_lower)] | None
    ) = None
    """How tasks run; inferred when left out."""
    inputs: dict[str, InputValue | None] = Field(default_factory=dict)
    """Template inputs: text, numbers or booleans."""
    agents: dict[str, AgentSpec] = Field(default_factory=dict)
    """Agents by name."""
    tasks: dict[str, TaskSpec] = Field(default_factory=dict)
    """Tasks by name, in run order."""
    phases: dict[str, PhaseSpec] = Field(default_factory=dict)
    """Phases by name (every task in one)."""
    manager_llm: Model | None = None
    """The manager's model (hierarchical)."""
    manager_max_iterations: int | None = Field(default=None, gt=0)
    """Most model calls of the manager."""
    max_delegation_depth: int | None = Field(default=None, gt=0)
    """How deep delegations may nest."""
    max_concurrency: int | None = Field(default=None, gt=0)
    """Most tasks running at once."""
    max_sync_threads: int | None = Field(default=None, gt=0)
    """Threads for sync tools and callbacks."""
    parallel_error_strategy: (
        Annotated[Literal["fail_fast", "continue_on_error"], BeforeValidator(_lower)] | None
    ) = None
    """What a failed task does to a parallel run."""
    context_format: Annotated[Literal["json", "toon"], BeforeValidator(_lower)] | None = None
    """How structured context is written into prompts."""
    capture_mode: Annotated[Literal["off", "standard", "full"], BeforeValidator(_lower)] | None = (
        None
    )
    """How much the trace records."""
    review_policy: (
        Annotated[
            Literal["never", "after_every_task", "after_last_task"],
            BeforeValidator(_lower),
        ]
        | None
    ) = None
    """Which tasks are reviewed when they do not say."""
    review_handler: str | None = Field(
        default=None, description="console, auto_approve, or an import path"
    )
    rate_limit: RateLimitSpec | None = None
    """A rate limit for every model call."""
    memory: (
        MemorySpec | Annotated[Literal["sqlite", "in_memory"], BeforeValidator(_lower)] | None
    ) = None
    """The memory store."""
    short_term_memory: bool | None = None
    """Pass every earlier output to each task."""
    checkpoint: str | None = None
    """A SQLite file, relative to the ensemble file, where each run records its tasks as
    they complete (``agentensemble run --resume RUN_ID`` continues a run that stopped)."""
    max_tool_output_length: int | None = Field(default=None, ge=-1)
    """Characters of a tool's result the model sees (-1: all)."""
    tool_log_truncate_length: int | None = Field(default=None, ge=-1)
    """Characters of tool input and output in logs."""
    verbose: bool | None = None
    """Log every prompt and answer."""
    listeners: list[ImportPath] = Field(default_factory=list)
    """Listeners (a class is instantiated)."""
    hooks: list[ImportPath] = Field(default_factory=list)
    """Before-hooks of model and tool calls."""
    delegation_policies: list[ImportPath] = Field(default_factory=list)
    """Policies checked before each delegation."""
    shared_tasks: list[str] = Field(default_factory=list)
    """Names of entries of ``tasks`` that other ensembles ask for by name while this one
    serves (``agentensemble worker``); a shared task is not part of the run."""
    shared_tools: dict[str, Tool] = Field(default_factory=dict)
    """Tools other ensembles call by name while this one serves: a built-in tool's name, an
    import path, or a mapping, as in an agent's ``tools``."""
    drain_timeout: float | None = Field(default=None, gt=0)
    """Seconds a serving ensemble told to stop lets its requests in flight finish."""


ENTRY_MODELS: dict[str, type[BaseModel]] = {
    "agents": AgentSpec,
    "tasks": TaskSpec,
    "phases": PhaseSpec,
}
"""The file's named entries, each checked on its own."""


def ensemble_file_schema() -> dict[str, Any]:
    """The JSON Schema of an ensemble file, for editors (YAML language servers read it
    from a ``# yaml-language-server: $schema=...`` comment)."""
    return EnsembleSpec.model_json_schema()
