"""`Task`: a unit of work with an expected output, optionally bound to an agent."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Generic, TypeAlias, TypeVar, overload

from agentensemble._checks import (
    as_tuple,
    check_budget,
    require_int,
    require_seconds,
    require_text,
)
from agentensemble._hints import KeywordHints
from agentensemble._output_types import OutputSpec, output_spec
from agentensemble.agent import Agent
from agentensemble.errors import ValidationError
from agentensemble.memory import MemoryScope
from agentensemble.models import (
    ChatModel,
    ModelSettings,
    RateLimit,
    RateLimitedChatModel,
    resolve_model,
)
from agentensemble.models._settings import check_settings
from agentensemble.review import Review
from agentensemble.tools._agent_tool import AgentTool
from agentensemble.tools._resolve import check_tools

if TYPE_CHECKING:
    from typing import TypedDict, Unpack

    from agentensemble.execution._handler import HandlerContext
    from agentensemble.guardrails import InputGuardrail, OutputGuardrail
    from agentensemble.tools import ToolResult

    class _TaskOptions(TypedDict, total=False):
        """The keyword parameters every `Task.__init__` overload shares (the overloads
        differ only in `output_type`, which types the task); their defaults are on the
        implementation."""

        agent: Agent | None
        llm: Any
        tools: Sequence[object]
        max_iterations: int | None
        context: Iterable[Task[Any]]
        name: str | None
        handler: Handler | None
        rate_limit: RateLimit | None
        model_settings: ModelSettings | None
        timeout: timedelta | float | None
        max_output_retries: int
        input_guardrails: Sequence[InputGuardrail]
        output_guardrails: Sequence[OutputGuardrail]
        review: Review | None
        before_review: Review | None
        memory: Iterable[str | MemoryScope]
        max_tokens: int | None
        max_cost: Decimal | float | None
        max_model_calls: int | None


__all__ = ["DEFAULT_EXPECTED_OUTPUT", "Handler", "Task"]

Handler: TypeAlias = (
    "Callable[[HandlerContext], ToolResult | str | Awaitable[ToolResult | str]] | AgentTool"
)
"""A deterministic task body: a sync or async callable taking a `HandlerContext`, or an
`AgentTool` (which receives the last context output, else the description)."""

DEFAULT_EXPECTED_OUTPUT = "Produce a complete and accurate response to the task."

T = TypeVar("T")
Out = TypeVar("Out", covariant=True)


@dataclass(frozen=True, slots=True, init=False, eq=False)
class Task(Generic[Out], metaclass=KeywordHints):
    """What to do and what the result should look like.

    Without an `agent`, one is synthesised at run time from the description, using the
    task's `llm` (or the ensemble's), `tools` and `max_iterations`. Tasks compare by identity:
    two tasks with the same text are different tasks. `description` and `expected_output`
    may contain ``{variables}`` resolved from the run's inputs.

    A task is generic in its output type: ``Task("...", output_type=Report)`` is a
    ``Task[Report]``, and its output's ``parsed_output`` is typed ``Report`` for a checker.
    """

    description: str
    """What the agent should do."""
    expected_output: str
    """What the result should look like; part of the prompt."""
    agent: Agent | None
    """The agent that runs the task; synthesised when None."""
    llm: ChatModel | None
    """Model for a synthesised agent (overrides the ensemble's)."""
    tools: tuple[object, ...]
    """Tools for a synthesised agent (ignored when `agent` is set)."""
    max_iterations: int | None
    """Tool-call limit for a synthesised agent (default 25; ignored when `agent` is set)."""
    context: tuple[Task[Any], ...]
    """Tasks whose outputs are given to this task, in this order."""
    name: str | None
    """Optional short name, used in logs and traces."""
    handler: Handler | None
    """Run this code instead of an agent: no model, no tools, no iteration loop."""
    rate_limit: RateLimit | None
    """Limit on this task's model calls, in a bucket of its own."""
    model_settings: ModelSettings | None
    """Request options for this task's model calls; they win over the agent's, field by field."""
    timeout: float | None
    """Seconds the whole task may take (every model call, tool call and retry); past it the
    task fails. Given as seconds or a timedelta; None: no limit."""
    output_type: Any
    """The type of the structured result (a pydantic model, dataclass, TypedDict,
    ``list[X]``, ``dict[str, X]``, Enum, Literal, int, str...); None: text only."""
    max_output_retries: int
    """Correction requests after an answer that does not parse as `output_type`."""
    input_guardrails: tuple[InputGuardrail, ...]
    """Checks of the task's input, in order, before any model call."""
    output_guardrails: tuple[OutputGuardrail, ...]
    """Checks of the task's output (after structured parsing), in order."""
    review: Review | None
    """The gate after the task: `Review.required()` (or ``Review(...)``) always fires,
    `Review.skip()` never does; None follows the ensemble's `review_policy`."""
    before_review: Review | None
    """A gate before the task starts (its Edit counts as Continue)."""
    memory: tuple[MemoryScope, ...]
    """Memory scopes the task reads before it runs and stores its output in (names or
    `MemoryScope` objects); the ensemble needs a `memory_store`."""
    max_tokens: int | None
    """Most tokens (input and output, as the model reports them) one execution of the task
    may use. Checked before each of its model calls: once spent, the task fails with
    `BudgetExceededError` and the workflow's error strategy applies. Counts the task's own
    calls (structured-output corrections too); agents it delegates to count in the run's
    `RunOptions` budget. None: no limit."""
    max_cost: Decimal | None
    """Most one execution of the task may cost, in the currency of the ensemble's
    `cost_configuration` (which it needs); spent like `max_tokens`. Given as a number, kept
    as the Decimal written. None: no limit."""
    max_model_calls: int | None
    """Most model calls one execution of the task may make; spent like `max_tokens`.
    None: no limit."""
    output_spec: OutputSpec | None = field(init=False, repr=False)
    """`output_type` checked, with its schemas (None without an output type)."""

    @overload
    def __init__(
        self: Task[None],
        description: str,
        expected_output: str = ...,
        *,
        output_type: None = ...,
        **options: Unpack[_TaskOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Task[T],
        description: str,
        expected_output: str = ...,
        *,
        output_type: type[T],
        **options: Unpack[_TaskOptions],
    ) -> None: ...

    @overload
    def __init__(
        self: Task[Any],
        description: str,
        expected_output: str = ...,
        *,
        output_type: Any,
        **options: Unpack[_TaskOptions],
    ) -> None: ...

    def __init__(
        self,
        description: str,
        expected_output: str = DEFAULT_EXPECTED_OUTPUT,
        *,
        agent: Agent | None = None,
        llm: Any = None,
        tools: Sequence[object] = (),
        max_iterations: int | None = None,
        context: Iterable[Task[Any]] = (),
        name: str | None = None,
        handler: Handler | None = None,
        rate_limit: RateLimit | None = None,
        model_settings: ModelSettings | None = None,
        timeout: timedelta | float | None = None,
        output_type: Any = None,
        max_output_retries: int = 3,
        input_guardrails: Sequence[InputGuardrail] = (),
        output_guardrails: Sequence[OutputGuardrail] = (),
        review: Review | None = None,
        before_review: Review | None = None,
        memory: Iterable[str | MemoryScope] = (),
        max_tokens: int | None = None,
        max_cost: Decimal | float | None = None,
        max_model_calls: int | None = None,
    ) -> None:
        _check_texts_and_agent(description, expected_output, name, agent)
        checked_tools, _ = check_tools(tools, owner="Task tool")
        _check_max_iterations(max_iterations)
        context_tasks = _check_context(context, description, expected_output, agent)
        spec = None if output_type is None else _check_output_type(output_type)
        if require_int(max_output_retries, "Task max_output_retries") < 0:
            raise ValidationError(
                f"Task max_output_retries must be >= 0, got: {max_output_retries}"
            )
        checked_input = _check_guardrails(input_guardrails, "input_guardrails")
        checked_output = _check_guardrails(output_guardrails, "output_guardrails")
        budget = check_budget("Task", max_tokens, max_cost, max_model_calls)
        if handler is not None:
            _check_handler(handler, agent, llm, checked_tools, max_iterations, rate_limit, budget)
        model = _task_model(llm, rate_limit)
        set_ = object.__setattr__
        set_(self, "description", description)
        set_(self, "expected_output", expected_output)
        set_(self, "agent", agent)
        set_(self, "llm", model)
        set_(self, "tools", checked_tools)
        set_(self, "max_iterations", max_iterations)
        set_(self, "context", context_tasks)
        set_(self, "name", name)
        set_(self, "handler", handler)
        set_(self, "rate_limit", rate_limit)
        set_(self, "model_settings", check_settings(model_settings, "Task"))
        set_(self, "timeout", None if timeout is None else require_seconds(timeout, "Task timeout"))
        set_(self, "output_type", output_type)
        set_(self, "max_output_retries", max_output_retries)
        set_(self, "input_guardrails", checked_input)
        set_(self, "output_guardrails", checked_output)
        set_(self, "review", _check_review(review, "review"))
        set_(self, "before_review", _check_review(before_review, "before_review"))
        set_(self, "memory", _check_memory(memory))
        set_(self, "max_tokens", budget[0])
        set_(self, "max_cost", budget[1])
        set_(self, "max_model_calls", budget[2])
        set_(self, "output_spec", spec)

    @classmethod
    def of(cls, description: str, expected_output: str | None = None) -> Task[None]:
        """A task with only a description (and the default expected output)."""
        return cls(description, expected_output or DEFAULT_EXPECTED_OUTPUT)

    def __repr__(self) -> str:
        text = self.description if len(self.description) <= 60 else self.description[:57] + "..."
        return f"Task({text!r})"

    @property
    def label(self) -> str:
        """The name if set, else the description: how logs and errors refer to the task."""
        return self.name or self.description

    def copy(self, **changes: Any) -> Task[Any]:
        """A new, validated task with `changes` applied. The original is unchanged."""
        llm = self.llm
        if "llm" not in changes and self.rate_limit and isinstance(llm, RateLimitedChatModel):
            changes["llm"] = llm.model  # renew the bucket this object made, not a shared one
        return dataclasses.replace(self, **changes)


def _check_texts_and_agent(
    description: object, expected_output: object, name: object, agent: object
) -> None:
    if name is not None:
        require_text(name, "Task name must not be blank when set")
    require_text(description, "Task description must not be blank")
    require_text(expected_output, "Task expected_output must not be blank")
    if agent is not None and not isinstance(agent, Agent):
        raise ValidationError(f"Task agent must be an Agent, got: {type(agent).__name__}")


def _check_max_iterations(max_iterations: object) -> None:
    if max_iterations is not None and require_int(max_iterations, "Task max_iterations") <= 0:
        raise ValidationError(f"Task max_iterations must be > 0 when set, got: {max_iterations}")


def _task_model(llm: object, rate_limit: object) -> ChatModel | None:
    """The task's own model (None: its agent's or the ensemble's), in a bucket of its own
    when the task has a `rate_limit`."""
    if rate_limit is not None and not isinstance(rate_limit, RateLimit):
        raise ValidationError(f"Task rate_limit must be a RateLimit, got: {rate_limit!r}")
    model = resolve_model(llm, field="Task llm") if llm is not None else None
    if model is not None and rate_limit is not None:
        return RateLimitedChatModel(model, rate_limit)
    return model


_HANDLER_CONFLICTS = (
    ("an explicit agent", "A handler runs deterministically without an LLM; remove the agent."),
    ("an llm", "A handler runs deterministically without an LLM; remove the llm."),
    ("tools", "A handler runs deterministically; configure tools inside the handler instead."),
    (
        "max_iterations",
        "A handler runs deterministically without an iteration loop; remove the max_iterations.",
    ),
    ("a rate_limit", "A handler runs deterministically without an LLM; remove the rate_limit."),
    (
        "a budget (max_tokens, max_cost or max_model_calls)",
        "A handler runs deterministically without an LLM; remove the budget.",
    ),
)


def _check_handler(
    handler: object,
    agent: object,
    llm: object,
    tools: tuple[object, ...],
    max_iterations: object,
    rate_limit: object,
    budget: tuple[object, ...],
) -> None:
    present = (
        agent is not None,
        llm is not None,
        bool(tools),
        max_iterations is not None,
        rate_limit is not None,
        any(value is not None for value in budget),
    )
    for (what, advice), clash in zip(_HANDLER_CONFLICTS, present, strict=True):
        if clash:
            raise ValidationError(f"Task cannot have both a handler and {what}. {advice}")
    if not callable(handler) and not isinstance(handler, AgentTool):
        raise ValidationError(
            f"Task handler must be a callable or an AgentTool, got: {type(handler).__name__}"
        )


def _check_review(review: object, field_name: str) -> Review | None:
    if review is None or isinstance(review, Review):
        return review
    raise ValidationError(
        f"Task {field_name} must be a Review (Review.required(), Review.skip() or "
        f"Review(...)), got: {review!r}"
    )


def _check_memory(memory: object) -> tuple[MemoryScope, ...]:
    if isinstance(memory, (str, MemoryScope)):
        memory = (memory,)
    scopes: dict[str, MemoryScope] = {}
    for index, item in enumerate(as_tuple(memory, "Task memory")):
        if isinstance(item, str):
            if not item.strip():
                raise ValidationError(
                    f"Task memory[{index}] scope name must not be blank, got: {item!r}"
                )
            item = MemoryScope(item)
        if not isinstance(item, MemoryScope):
            raise ValidationError(
                f"Task memory[{index}] must be a scope name or a MemoryScope, got: {item!r}"
            )
        if item.name in scopes:
            raise ValidationError(f"Task memory lists scope '{item.name}' twice")
        scopes[item.name] = item
    return tuple(scopes.values())


def _check_output_type(output_type: Any) -> OutputSpec:
    if isinstance(output_type, type) and issubclass(output_type, Task):
        raise ValidationError("Task output_type must be the type of the result, got: Task")
    return output_spec(output_type, "Task output_type")


def _check_guardrails(guardrails: Sequence[Any], field_name: str) -> tuple[Any, ...]:
    checked = as_tuple(guardrails, f"Task {field_name}")
    kind = f"Guardrail{'Input' if field_name.startswith('input') else 'Output'}"
    for index, guardrail in enumerate(checked):
        if not callable(guardrail) or not _takes_one_argument(guardrail):
            raise ValidationError(
                f"Task {field_name} element at index {index} must be a callable taking a "
                f"{kind}, got: {guardrail!r}{_signature_of(guardrail)}"
            )
    return checked


def _takes_one_argument(function: Any) -> bool:
    """Whether `function` can be called with one positional argument (unknown: yes)."""
    import inspect

    try:
        inspect.signature(function, follow_wrapped=False).bind(None)
    except TypeError:
        return False
    except ValueError:  # no signature to read (some builtins): let the call decide
        return True
    return True


def _signature_of(function: Any) -> str:
    import inspect

    try:
        signature = inspect.signature(function, follow_wrapped=False)
        return f" (parameters {signature})" if callable(function) else ""
    except (TypeError, ValueError):
        return ""


def _check_context(
    context: Iterable[Task[Any]], description: str, expected_output: str, agent: Agent | None
) -> tuple[Task[Any], ...]:
    if isinstance(context, Task):
        raise ValidationError("Task context must be a list of tasks, got a single Task")
    tasks: list[Task[Any]] = []
    for index, item in enumerate(as_tuple(context, "Task context")):
        if item is None:
            raise ValidationError(f"Task context element at index {index} must not be null")
        if not isinstance(item, Task):
            raise ValidationError(
                f"Task context element at index {index} must be a Task, got: {type(item).__name__}"
            )
        if (
            agent is not None
            and item.agent is agent
            and item.description == description
            and item.expected_output == expected_output
        ):
            raise ValidationError("Task cannot reference itself in context")
        tasks.append(item)
    return tuple(tasks)
