"""Exceptions raised by agentensemble.

The hierarchy is shallow and separates three kinds of failure::

    AgentEnsembleError             every error the library raises
    ├── ValidationError            misconfiguration (also a ValueError); before any model call
    ├── PromptTemplateError        a {variable} in a task has no input
    ├── TaskExecutionError         a task failed; carries every output completed before it
    ├── ParallelExecutionError     parallel tasks failed; carries outputs and causes
    ├── AgentExecutionError        the model (or a handler) failed while running an agent
    │   ├── HookVetoError          a hook vetoed a model call
    │   └── BudgetExceededError    a task's budget was spent before one of its model calls
    ├── MaxIterationsExceededError the model kept calling tools in three STOP turns
    ├── OutputParsingError         the answer did not parse as the output type, retries included
    ├── GuardrailViolationError    a guardrail rejected a task's input or output
    ├── ConstraintViolationError   a hierarchical run broke its HierarchicalConstraints
    ├── RateLimitTimeoutError      no rate-limit token became available in time
    ├── CheckpointError            the checkpoint store failed to record a completed task
    └── ToolExecutionError         a tool failed in a way the model cannot be told about

Errors carry their context as attributes (``task_description``, ``agent_role``,
``completed_outputs``...) and the original exception in ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentensemble.enums import GuardrailType
    from agentensemble.outputs import TaskOutput
    from agentensemble.task import Task

__all__ = [
    "AgentEnsembleError",
    "AgentExecutionError",
    "BudgetExceededError",
    "CheckpointError",
    "ConstraintViolationError",
    "EnsembleFileError",
    "FileProblem",
    "GraphNoEdgeMatchedError",
    "GuardrailViolationError",
    "HookVetoError",
    "MaxGraphStepsExceededError",
    "MaxIterationsExceededError",
    "MaxLoopIterationsExceededError",
    "OutputParsingError",
    "ParallelExecutionError",
    "PromptTemplateError",
    "RateLimitTimeoutError",
    "ReviewTimeoutError",
    "TaskExecutionError",
    "ToolConfigurationError",
    "ToolExecutionError",
    "UnknownKeywordError",
    "ValidationError",
]


class AgentEnsembleError(Exception):
    """Base class of every error raised by agentensemble.

    Errors pickle and copy with their attributes (to cross a process pool or a task
    queue), although their constructors take keyword arguments.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


def _rebuild(
    cls: type[AgentEnsembleError], args: tuple[Any, ...], state: dict[str, Any]
) -> AgentEnsembleError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class CheckpointError(AgentEnsembleError):
    """The run's checkpoint store failed to record a completed task (a full disk, a file
    another program locked): the run stops, the task's output is in its error's
    completed outputs, and what the store holds is still resumable."""


class ValidationError(AgentEnsembleError, ValueError):
    """The configuration is invalid. Raised before any model call; the message names the field."""


class EnsembleFileError(ValidationError):
    """An ensemble file (`Ensemble.from_yaml`) is wrong: every problem found, one per line,
    each as ``file:line:column: field: what is wrong``. Raised before any model call."""

    def __init__(self, problems: Sequence[FileProblem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems: tuple[FileProblem, ...] = tuple(problems)
        """Every problem, in the order of the file."""


@dataclass(frozen=True, slots=True)
class FileProblem:
    """One mistake in an ensemble file: where (1-based `line` and `column`, 0 when the
    whole file is meant), the `field` (``tasks.write.context[0]``) and what is wrong."""

    file: str
    line: int
    column: int
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        return (
            f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"
        )


class UnknownKeywordError(ValidationError, TypeError):
    """`Task`, `Agent` or `Ensemble` was given a keyword it does not take; the message names
    the field to use (CrewAI's names translated). A `TypeError` too, as Python's own is."""


class PromptTemplateError(AgentEnsembleError):
    """A task description or expected output references template variables with no input."""

    def __init__(self, missing_variables: Sequence[str], template: str) -> None:
        shown = template if len(template) <= 100 else template[:100] + "..."
        names = ", ".join(missing_variables)
        super().__init__(
            f"Missing template variables: [{names}]. Provide them in ensemble.run(inputs). "
            f"Template: '{shown}'"
        )
        self.missing_variables: tuple[str, ...] = tuple(missing_variables)
        """Every missing variable, in order of first appearance."""
        self.template: str = template
        """The full template text."""


def describe_error(error: BaseException) -> str:
    """An exception's message, or its class name when it has none."""
    try:
        return str(error) or type(error).__name__
    except Exception:  # a __str__ that fails
        return type(error).__name__


class TaskExecutionError(AgentEnsembleError):
    """A task failed. ``completed_outputs`` holds every output finished before the failure;
    the cause is in ``__cause__`` and its message ends this one's."""

    @classmethod
    def of(
        cls,
        cause: BaseException,
        *,
        task_description: str,
        agent_role: str,
        completed_outputs: Sequence[TaskOutput[Any]] = (),
    ) -> TaskExecutionError:
        """``Task '<description>' failed: <cause>``; raise it ``from cause``."""
        return cls(
            f"Task '{task_description}' failed: {describe_error(cause)}",
            task_description=task_description,
            agent_role=agent_role,
            completed_outputs=completed_outputs,
        )

    def __init__(
        self,
        message: str,
        *,
        task_description: str,
        agent_role: str,
        completed_outputs: Sequence[TaskOutput[Any]] = (),
    ) -> None:
        super().__init__(message)
        self.task_description = task_description
        self.agent_role = agent_role
        self.completed_outputs: tuple[TaskOutput[Any], ...] = tuple(completed_outputs)


class ParallelExecutionError(AgentEnsembleError):
    """Tasks of a parallel run failed (``CONTINUE_ON_ERROR``). The message names each failed
    task with its cause."""

    def __init__(
        self,
        *,
        completed_outputs: Sequence[TaskOutput[Any]],
        failed_tasks: Mapping[Task[Any], BaseException],
        total_tasks: int | None = None,
    ) -> None:
        self.completed_outputs: tuple[TaskOutput[Any], ...] = tuple(completed_outputs)
        self.failed_tasks: dict[Task[Any], BaseException] = dict(failed_tasks)
        """Failure cause of each failed task (your own `Task` objects)."""
        self.failed_task_causes: dict[str, BaseException] = {
            task.description: cause for task, cause in self.failed_tasks.items()
        }
        """Failure cause by task description (the spec's view: tasks sharing a description
        share an entry; `failed_tasks` has them all)."""
        self.failed_count = len(self.failed_tasks)
        self.completed_count = len(self.completed_outputs)
        total = total_tasks if total_tasks is not None else self.failed_count + self.completed_count
        causes = "; ".join(
            f"'{task.description}': {describe_error(cause)}"
            for task, cause in self.failed_tasks.items()
        )
        super().__init__(f"{self.failed_count} of {total} tasks failed: {causes}")


class AgentExecutionError(AgentEnsembleError):
    """The model, a handler or the tool machinery failed while an agent ran a task."""

    def __init__(self, message: str, *, agent_role: str, task_description: str) -> None:
        super().__init__(message)
        self.agent_role = agent_role
        self.task_description = task_description


class HookVetoError(AgentExecutionError):
    """A hook's ``before_model_call`` vetoed a model call: the task fails with this error
    as its cause (a vetoed tool call does not raise: the model is told instead)."""

    def __init__(self, *, hook: str, reason: str, agent_role: str, task_description: str) -> None:
        super().__init__(
            f"Hook {hook} vetoed the model call of agent '{agent_role}': {reason}",
            agent_role=agent_role,
            task_description=task_description,
        )
        self.hook = hook
        """The hook's class name."""
        self.reason = reason
        """The reason the hook gave."""


class BudgetExceededError(AgentExecutionError):
    """A task's budget (`Task` ``max_tokens``, ``max_cost`` or ``max_model_calls``) was
    spent before one of its model calls: the call is not made and the task fails with this
    error as its cause; the workflow's error strategy applies. (A spent `RunOptions` budget
    does not raise: the run returns its completed outputs with ``ExitReason.BUDGET``.)"""

    def __init__(
        self,
        *,
        budget: str,
        limit: int | Decimal,
        used: int | Decimal,
        spent: str,
        agent_role: str,
        task_description: str,
    ) -> None:
        super().__init__(
            f"Budget spent: {spent}; agent '{agent_role}' may make no more model calls for "
            "this task",
            agent_role=agent_role,
            task_description=task_description,
        )
        self.budget = budget
        """Which budget: ``max_tokens``, ``max_cost`` or ``max_model_calls``."""
        self.limit = limit
        """The budget's value."""
        self.used = used
        """What the task had used when the call was refused (tokens, cost or calls)."""


class MaxIterationsExceededError(AgentEnsembleError):
    """The model asked for tools three more times after being told to stop."""

    def __init__(
        self, *, agent_role: str, task_description: str, max_iterations: int, tool_calls_made: int
    ) -> None:
        super().__init__(
            f"Agent '{agent_role}' exceeded maximum iterations ({max_iterations}). "
            f"Tool calls made: {tool_calls_made}. Task: '{_headline(task_description)}'. "
            "Consider increasing max_iterations or simplifying the task."
        )
        self.agent_role = agent_role
        self.task_description = task_description
        self.max_iterations = max_iterations
        self.tool_calls_made = tool_calls_made


class RateLimitTimeoutError(AgentEnsembleError):
    """No rate-limit token became available within the wait timeout."""

    def __init__(self, *, requests: int, period: timedelta, wait_timeout: timedelta) -> None:
        timeout_ms = round(wait_timeout.total_seconds() * 1000)
        super().__init__(
            f"Rate limit exceeded: no token became available within the {timeout_ms}ms wait "
            f"timeout. Limit: {requests} requests per {period}. "
            "Increase wait_timeout or reduce concurrency."
        )
        self.requests = requests
        self.period = period
        self.wait_timeout = wait_timeout


class ToolExecutionError(AgentEnsembleError):
    """A tool failed in a way that cannot be reported back to the model as text."""

    def __init__(self, message: str, *, tool_name: str, tool_input: str) -> None:
        super().__init__(message)
        self.tool_name = tool_name
        self.tool_input = tool_input


class ToolConfigurationError(AgentEnsembleError):
    """A tool is set up in a way the model cannot fix (a delegation policy that returns no
    verdict, a tool that may not delegate). Unlike other tool errors it is not shown to the
    model: it fails the task (as `AgentExecutionError`, then `TaskExecutionError`)."""


class OutputParsingError(AgentEnsembleError):
    """The model's answer could not be parsed as the task's ``output_type``, even after the
    correction retries. ``raw_output`` is the last answer; ``parse_errors`` has one entry
    per attempt.

    A sequential run raises it as it is (as the reference implementation does), with
    ``completed_outputs``; a parallel run reports it as the cause of its task's failure."""

    def __init__(
        self,
        message: str,
        *,
        raw_output: str,
        parse_errors: Sequence[str],
        attempt_count: int,
        output_type: object,
        task_description: str = "",
        agent_role: str = "",
    ) -> None:
        super().__init__(message)
        self.raw_output = raw_output
        """The last answer that failed to parse."""
        self.parse_errors: tuple[str, ...] = tuple(parse_errors)
        """Why each attempt failed, in order."""
        self.attempt_count = attempt_count
        """Answers parsed: the first one plus the retries."""
        self.output_type = output_type
        self.task_description = task_description
        self.agent_role = agent_role
        self.completed_outputs: tuple[TaskOutput[Any], ...] = ()
        """Outputs the run completed before this task failed (set by a sequential run)."""


class GuardrailViolationError(AgentEnsembleError):
    """A guardrail rejected a task's input (before any model call) or its output."""

    def __init__(
        self,
        *,
        guardrail_type: GuardrailType,
        violation_message: str,
        task_description: str,
        agent_role: str,
    ) -> None:
        super().__init__(
            f"{guardrail_type} guardrail violation on agent '{agent_role}' task "
            f"'{task_description}': {violation_message}"
        )
        self.guardrail_type = guardrail_type
        """INPUT or OUTPUT."""
        self.violation_message = violation_message
        """The reason the guardrail gave (or, when it raised, what it raised)."""
        self.task_description = task_description
        self.agent_role = agent_role


class ConstraintViolationError(AgentEnsembleError):
    """A hierarchical run ended without honouring its `HierarchicalConstraints` (a required
    worker never completed a delegation). Carries every violation and the completed
    worker outputs."""

    def __init__(
        self, violations: Sequence[str], *, completed_outputs: Sequence[TaskOutput[Any]] = ()
    ) -> None:
        listed = tuple(violations)
        if not listed:
            raise ValueError("violations must not be null or empty")
        if len(listed) == 1:
            message = f"Hierarchical constraint violated: {listed[0]}"
        else:
            message = f"Hierarchical constraints violated ({len(listed)}): {'; '.join(listed)}"
        super().__init__(message)
        self.violations = listed
        """One message per violated rule."""
        self.completed_outputs: tuple[TaskOutput[Any], ...] = tuple(completed_outputs)


class ReviewTimeoutError(AgentEnsembleError):
    """A review gate whose `Review.on_timeout` is ``FAIL`` got no decision in time. Carries
    every output the run completed; the task under review is not among them."""

    def __init__(
        self,
        message: str,
        *,
        task_description: str,
        timeout: timedelta,
        completed_outputs: Sequence[TaskOutput[Any]] = (),
    ) -> None:
        super().__init__(message)
        self.task_description = task_description
        self.timeout = timeout
        """How long the gate waited."""
        self.completed_outputs: tuple[TaskOutput[Any], ...] = tuple(completed_outputs)


class MaxLoopIterationsExceededError(TaskExecutionError):
    """A `Loop` with ``on_max_iterations=THROW`` ran `max_iterations` iterations without its
    `until` predicate holding. Carries every output the run completed."""

    raised_as_is = True
    """Workflows raise it as it is, not wrapped in a `TaskExecutionError` of the loop."""

    def __init__(
        self, loop_name: str, max_iterations: int, *, completed_outputs: Sequence[Any] = ()
    ) -> None:
        super().__init__(
            f"Loop '{loop_name}' did not converge after {max_iterations} iterations",
            task_description=f"$loop:{loop_name}",
            agent_role="(loop)",
            completed_outputs=completed_outputs,
        )
        self.loop_name = loop_name
        self.max_iterations = max_iterations


class MaxGraphStepsExceededError(TaskExecutionError):
    """A `Graph` with ``on_max_steps=THROW`` ran `max_steps` steps without reaching
    `Graph.END`. Carries every output the run completed."""

    def __init__(
        self,
        graph_name: str,
        max_steps: int,
        last_state: str,
        *,
        completed_outputs: Sequence[Any] = (),
    ) -> None:
        super().__init__(
            f"Graph '{graph_name}' did not reach a terminal state after {max_steps} step(s). "
            f"Last state: '{last_state}'.",
            task_description=f"$graph:{graph_name}",
            agent_role="(graph)",
            completed_outputs=completed_outputs,
        )
        self.graph_name = graph_name
        self.max_steps = max_steps
        self.last_state = last_state


class GraphNoEdgeMatchedError(TaskExecutionError):
    """No edge leaving a graph state matched the output the state produced."""

    def __init__(
        self,
        graph_name: str,
        current_state: str,
        output_preview: str,
        *,
        details: str = "",
        completed_outputs: Sequence[Any] = (),
    ) -> None:
        preview = output_preview if len(output_preview) <= 200 else f"{output_preview[:200]}…"
        super().__init__(
            f"Graph '{graph_name}' state '{current_state}' has no matching outgoing edge for "
            f"the produced output. {details} Output preview: {preview}".replace("  ", " "),
            task_description=f"$graph:{graph_name}",
            agent_role="(graph)",
            completed_outputs=completed_outputs,
        )
        self.graph_name = graph_name
        self.current_state = current_state
        self.output_preview = output_preview


def _headline(text: str, limit: int = 120) -> str:
    """A long description in one line of a message (a manager's whole prompt, say): its first
    line, cut at `limit` characters."""
    first = text.strip().splitlines()[0] if text.strip() else text
    if first == text and len(text) <= limit:
        return text
    return f"{first[:limit]}..."
