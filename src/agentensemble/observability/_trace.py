"""Execution traces: everything a run did, as immutable data that round-trips through JSON.

Instants serialise as ISO-8601 UTC timestamps, durations as ISO-8601 durations
(``PT12.345S``), costs as decimal strings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

from agentensemble._frozen import direct_init
from agentensemble.observability._metrics import ExecutionMetrics, TaskMetrics

__all__ = [
    "SCHEMA_VERSION",
    "AgentSummary",
    "CapturedMessage",
    "CapturedToolCall",
    "DelegationTrace",
    "ErrorTrace",
    "ExecutionTrace",
    "LlmInteraction",
    "MapReduceLevelSummary",
    "MemoryOperationTrace",
    "PromptTrace",
    "TaskTrace",
    "ToolCallTrace",
    "load_trace",
]

SCHEMA_VERSION = "1.5"

ToolOutcome = Literal["SUCCESS", "FAILURE", "ERROR", "SKIPPED_MAX_ITERATIONS"]


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CapturedToolCall:
    """A tool call inside a captured message."""

    id: str
    name: str
    arguments: str


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class CapturedMessage:
    """One message of the conversation sent to the model (capture mode STANDARD and up)."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None
    tool_calls: tuple[CapturedToolCall, ...] = ()
    tool_name: str | None = None
    tool_call_id: str | None = None


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallTrace:
    """One tool call the model requested, run or skipped."""

    tool_call_id: str
    tool_name: str
    arguments: str
    """The arguments exactly as the model wrote them."""
    parsed_input: dict[str, Any] | None = None
    """The arguments parsed (capture mode FULL; ``{}`` when unparseable)."""
    result: str
    """The full result text (before truncation for the model)."""
    structured_output: Any = None
    started_at: datetime
    completed_at: datetime
    duration: timedelta
    outcome: ToolOutcome


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class LlmInteraction:
    """One model call and the tool calls it requested."""

    iteration_index: int
    started_at: datetime
    completed_at: datetime
    latency: timedelta
    input_tokens: int
    output_tokens: int
    response_type: Literal["TOOL_CALLS", "FINAL_ANSWER"]
    response_text: str | None
    """The answer's text. For the final answer: kept under capture mode FULL (what
    `ReplayModel` answers with); otherwise None here, as it is the task's `final_output`."""
    tool_calls: tuple[ToolCallTrace, ...] = ()
    messages: tuple[CapturedMessage, ...] = ()
    """The whole conversation sent (capture mode STANDARD and up)."""


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class PromptTrace:
    """The prompts an agent task started from."""

    system: str
    user: str


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryOperationTrace:
    """One memory operation of a task (see `MemoryOperationEvent` for the operations)."""

    operation: str
    scope: str | None
    entry_count: int
    started_at: datetime
    duration: timedelta


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class DelegationTrace:
    """A subtask handed to another agent, with the worker's own trace when it ran."""

    delegation_id: str
    worker_role: str
    task_description: str
    status: Literal["SUCCESS", "FAILURE", "PARTIAL"]
    raw_output: str | None
    """The worker's answer (None when the attempt failed)."""
    duration: timedelta
    worker_trace: TaskTrace | None = None
    """What the worker did (None when it did not run or failed)."""
    error: str | None = None
    """Why the attempt failed: the text the delegating model was shown."""


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TaskTrace:
    """Everything one task did."""

    task_index: int
    agent_role: str
    task_description: str
    expected_output: str
    started_at: datetime
    completed_at: datetime
    duration: timedelta
    prompts: PromptTrace | None = None
    """None for a deterministic (handler) task."""
    llm_interactions: tuple[LlmInteraction, ...] = ()
    delegations: tuple[DelegationTrace, ...] = ()
    memory_operations: tuple[MemoryOperationTrace, ...] = ()
    """Memory reads and writes, in order (runs with memory)."""
    final_output: str
    parsed_output: Any = None
    metrics: TaskMetrics
    node_type: str | None = None
    """In a `MapReduceEnsemble` run: ``map``, ``reduce``, ``final-reduce`` or ``direct``."""
    map_reduce_level: int | None = None
    """In a `MapReduceEnsemble` run: 0 for map (and direct) tasks, then one per reduce
    level."""
    error: ErrorTrace | None = None
    """Why the task failed or was cancelled (None for a task that completed); its trace
    then holds what it did until then."""
    name: str | None = None
    """The task's `name`, when it has one (schema 1.3)."""
    restored: bool = False
    """True when the output came from the run's checkpoint: a resumed run did not execute
    the task again (schema 1.5)."""


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class MapReduceLevelSummary:
    """One level of a `MapReduceEnsemble` run."""

    level: int
    """0 for the map level (or the direct task), then one per reduce level."""
    node_type: str
    """``map``, ``reduce``, ``final-reduce`` or ``direct``."""
    task_count: int
    """Tasks the level had."""
    failed_count: int
    """Of those, how many failed or were skipped."""
    duration: timedelta
    """From the first of its tasks starting to the last completing."""
    workflow: str = "PARALLEL"


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentSummary:
    """An agent that took part in the run."""

    role: str
    goal: str
    background: str | None
    tool_names: tuple[str, ...]
    allow_delegation: bool


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorTrace:
    """A task failure recorded in the trace of a run that failed."""

    task_description: str
    agent_role: str
    error_type: str
    message: str


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class LoopIterationTrace:
    """One iteration of a `Loop` in the run."""

    loop_name: str
    iteration: int
    """1-based."""
    outputs: dict[str, str]
    """Each body task's text, by body task name (else description)."""
    completed_at: datetime


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class GraphStepTrace:
    """One step of a `Graph`'s walk in the run."""

    graph_name: str
    step: int
    """1-based."""
    state: str
    next_state: str
    task_id: str
    """The state's task execution."""
    completed_at: datetime


@direct_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ExecutionTrace:
    """The trace of one run. ``to_json()`` writes it; ``ExecutionTrace.from_json`` reads it."""

    schema_version: str = SCHEMA_VERSION
    ensemble_id: str
    workflow: str
    capture_mode: str
    started_at: datetime
    completed_at: datetime
    total_duration: timedelta
    exit_reason: str
    inputs: dict[str, str]
    agents: tuple[AgentSummary, ...]
    task_traces: tuple[TaskTrace, ...]
    metrics: ExecutionMetrics
    total_cost_estimate: Decimal | None = None
    errors: tuple[ErrorTrace, ...] = ()
    agent_synthesis: tuple[LlmInteraction, ...] = ()
    """Model calls made while planning, to synthesise agents (`LLMAgentSynthesizer`)."""
    map_reduce_levels: tuple[MapReduceLevelSummary, ...] = ()
    loop_iterations: tuple[LoopIterationTrace, ...] = ()
    """Every loop iteration of the run, in order."""
    graph_steps: tuple[GraphStepTrace, ...] = ()
    """The graph's walk, for a run of a graph."""
    warnings: tuple[str, ...] = ()
    """What a user should know about the run though it did not fail it."""
    """Per-level summaries of a `MapReduceEnsemble` run (workflow ``MAP_REDUCE_STATIC`` or
    ``MAP_REDUCE_ADAPTIVE``)."""
    failed_tasks: tuple[TaskTrace, ...] = ()
    """The run's tasks that failed or were cancelled, as far as they got (prompts, model and
    tool calls), each with its `error` (schema 1.3)."""

    def to_json(self, *, indent: int | None = 2) -> str:
        """The trace as JSON text (ASCII-escaped when some text cannot be UTF-8 encoded,
        such as a lone surrogate from a badly decoded input)."""
        from pydantic_core import PydanticSerializationError

        try:
            data: bytes = _adapter().dump_json(self, indent=indent, fallback=repr)
        except PydanticSerializationError:
            import json

            plain = _adapter().dump_python(self, mode="json", fallback=repr)
            return json.dumps(plain, indent=indent, ensure_ascii=True)
        return data.decode()

    def to_toon(self, path: str | Path | None = None) -> str:
        """The trace as TOON text (needs the ``toon`` extra): the same data as `to_json`,
        in fewer tokens, for handing a trace to a model. With `path`, also written there
        (atomically)."""
        from agentensemble._formats import encode_toon
        from agentensemble.observability._exporters import write_atomically

        text = encode_toon(_adapter().dump_python(self, mode="json", fallback=repr))
        if path is not None:
            write_atomically(Path(path), text)
        return text

    @classmethod
    def from_events(cls, events: Iterable[Any]) -> ExecutionTrace:
        """The trace of a run folded from its events (live ones, or read back with
        `parse_event`): equal to the trace the run itself returned."""
        from agentensemble.observability._trace_fold import TraceFold

        return TraceFold.of(events)

    @classmethod
    def from_json(cls, text: str | bytes) -> ExecutionTrace:
        """Read a trace written by `to_json` (escaped lone surrogates included)."""
        import pydantic

        try:
            trace: ExecutionTrace = _adapter().validate_json(text)
        except pydantic.ValidationError as error:
            if not any("surrogate" in item["msg"] for item in error.errors()):
                raise
            import json

            trace = _adapter().validate_python(json.loads(text))
        return trace


def load_trace(path: str | Path) -> ExecutionTrace:
    """Read a trace file written by `JsonTraceExporter`."""
    return ExecutionTrace.from_json(Path(path).read_bytes())


def _adapter() -> Any:
    from pydantic import TypeAdapter

    global _ADAPTER
    if _ADAPTER is None:
        _ADAPTER = TypeAdapter(ExecutionTrace)
    return _ADAPTER


_ADAPTER: Any = None
