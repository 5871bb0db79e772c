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
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=False)


class ModelSettingsSpec(_Spec):
    """Per-call model settings (`ModelSettings`)."""

    temperature: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, gt=0)
    timeout: Seconds | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class ModelSpec(_Spec):
    """A model with connection settings; a plain ``provider:model`` string says the same
    with the defaults."""

    model: str = Field(description="provider:model, e.g. openai:gpt-4o-mini")
    base_url: str | None = None
    api_key: str | None = Field(default=None, description="Write ${VARIABLE}, not the key")
    timeout: Seconds | None = None
    max_retries: int | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0)


Model = str | ModelSpec


class RateLimitSpec(_Spec):
    """At most `requests` model calls per `period` seconds (`RateLimit`)."""

    requests: int = Field(gt=0)
    period: Seconds = 60.0
    wait_timeout: Seconds | None = None


class ReviewSpec(_Spec):
    """A review gate (`Review`)."""

    timeout: Seconds | None = None
    on_timeout: Annotated[Literal["continue", "exit_early", "fail"], BeforeValidator(_lower)] = (
        "exit_early"
    )
    prompt: str | None = None
    required_role: str | None = None


Review = Annotated[Literal["required", "skip"], BeforeValidator(_lower)] | ReviewSpec

Tool = str | dict[str, Any]
"""A built-in tool by name (``calculator``), one with settings (``{file_read: {base_dir:
./data}}``), a tool given to `from_yaml(tools=...)` by name, an import path
(``package.module:tool``), or an MCP server (``{mcp: {command: ..., args: [...]}}`` or
``{mcp: {url: ...}}``)."""


class AgentSpec(_Spec):
    """An agent (`Agent`); `llm` defaults to the file's."""

    role: str
    goal: str
    background: str | None = None
    tools: list[Tool] = Field(default_factory=list)
    llm: Model | None = None
    allow_delegation: bool = False
    verbose: bool = False
    max_iterations: int = Field(default=25, gt=0)
    response_format: str | None = None
    rate_limit: RateLimitSpec | None = None
    model_settings: ModelSettingsSpec | None = None


class TaskSpec(_Spec):
    """A task (`Task`); its name is its key in `tasks`, `agent` and `context` name others."""

    description: str
    expected_output: str | None = None
    agent: str | None = None
    llm: Model | None = None
    tools: list[Tool] = Field(default_factory=list)
    max_iterations: int | None = Field(default=None, gt=0)
    context: list[str] = Field(default_factory=list)
    handler: ImportPath | None = None
    rate_limit: RateLimitSpec | None = None
    model_settings: ModelSettingsSpec | None = None
    timeout: Seconds | None = None
    output_type: ImportPath | None = None
    max_output_retries: int = Field(default=3, ge=0)
    input_guardrails: list[ImportPath] = Field(default_factory=list)
    output_guardrails: list[ImportPath] = Field(default_factory=list)
    review: Review | None = None
    before_review: Review | None = None
    memory: list[str] = Field(default_factory=list)


class PhaseSpec(_Spec):
    """A phase (`Phase`): task names, its own workflow, and the phases it runs after."""

    tasks: list[str] = Field(min_length=1)
    workflow: (
        Annotated[Literal["sequential", "parallel", "hierarchical"], BeforeValidator(_lower)] | None
    ) = None
    after: list[str] = Field(default_factory=list)


class MemorySpec(_Spec):
    """The memory store: ``sqlite`` (a file, relative to the ensemble file) or
    ``in_memory``."""

    store: Annotated[Literal["sqlite", "in_memory"], BeforeValidator(_lower)] = "sqlite"
    path: str | None = None


class EnsembleSpec(_Spec):
    """An ensemble file (`Ensemble.from_yaml`)."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title="agentensemble ensemble file",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    name: str | None = None
    llm: Model | None = None
    workflow: (
        Annotated[Literal["sequential", "parallel", "hierarchical"], BeforeValidator(_lower)] | None
    ) = None
    inputs: dict[str, InputValue | None] = Field(default_factory=dict)
    agents: dict[str, AgentSpec] = Field(default_factory=dict)
    tasks: dict[str, TaskSpec] = Field(default_factory=dict)
    phases: dict[str, PhaseSpec] = Field(default_factory=dict)
    manager_llm: Model | None = None
    manager_max_iterations: int | None = Field(default=None, gt=0)
    max_delegation_depth: int | None = Field(default=None, gt=0)
    max_concurrency: int | None = Field(default=None, gt=0)
    max_sync_threads: int | None = Field(default=None, gt=0)
    parallel_error_strategy: (
        Annotated[Literal["fail_fast", "continue_on_error"], BeforeValidator(_lower)] | None
    ) = None
    context_format: Annotated[Literal["json", "toon"], BeforeValidator(_lower)] | None = None
    capture_mode: Annotated[Literal["off", "standard", "full"], BeforeValidator(_lower)] | None = (
        None
    )
    review_policy: (
        Annotated[
            Literal["never", "after_every_task", "after_last_task"],
            BeforeValidator(_lower),
        ]
        | None
    ) = None
    review_handler: str | None = Field(
        default=None, description="console, auto_approve, or an import path"
    )
    rate_limit: RateLimitSpec | None = None
    memory: (
        MemorySpec | Annotated[Literal["sqlite", "in_memory"], BeforeValidator(_lower)] | None
    ) = None
    short_term_memory: bool | None = None
    max_tool_output_length: int | None = Field(default=None, ge=-1)
    tool_log_truncate_length: int | None = Field(default=None, ge=-1)
    verbose: bool | None = None
    listeners: list[ImportPath] = Field(default_factory=list)
    hooks: list[ImportPath] = Field(default_factory=list)
    delegation_policies: list[ImportPath] = Field(default_factory=list)


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
