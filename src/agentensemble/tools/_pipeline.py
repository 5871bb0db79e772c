"""`ToolPipeline`: several tools run one after another as one tool call (BEHAVIOUR 7.5).

The model calls the pipeline once with one string; each step's output becomes the next
step's input, with no model round trip in between, and the last step's result is the
pipeline's. An adapter attached to a step reshapes its successful result into the next
step's input::

    pipeline = ToolPipeline(
        search,
        PipelineStep(extract, adapter=lambda result: result.output.upper()),
        FileReadTool(workdir).file_read,
        name="search_and_read",
        description="Search, then read the file the search names",
    )
    agent = Agent("Researcher", "Find things", llm=model, tools=[pipeline])

``ToolPipeline.of(a, b)`` names the pipeline ``a_then_b`` and describes it as
``Pipeline: a -> b``. A pipeline is an `AgentTool`, so it can be a step of another pipeline
or a task's handler (``Task(..., handler=pipeline)``: its input is then the last context
output, or the task description).

Steps are `AgentTool` objects or ``@tool`` functions and methods with exactly one string
parameter (``FileReadTool(dir).file_read`` is one); a ``@tool`` step reports its own errors
as it does to the model (the exception's message, without the ``Step '...' threw:`` prefix
that an `AgentTool` step's exception gets). The engine gives an `AgentTool` no
`ToolContext`, so neither does a pipeline to its steps: a ``@tool`` step that takes a
`ToolContext` is refused when the pipeline is built.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

from agentensemble._calling import call_user_code
from agentensemble._checks import require_text
from agentensemble.errors import ToolConfigurationError, ValidationError, describe_error
from agentensemble.tools._agent_tool import AgentTool
from agentensemble.tools._function import FunctionTool
from agentensemble.tools._result import ToolResult, coerce_result

__all__ = ["PipelineErrorStrategy", "PipelineStep", "StepTool", "ToolPipeline"]

StepTool: TypeAlias = AgentTool | FunctionTool
"""What a pipeline step runs: an `AgentTool`, or a ``@tool`` with one string parameter."""

Adapter: TypeAlias = Callable[[ToolResult], str | Awaitable[str]]
"""Turns a step's successful result into the next step's input (sync or async)."""


class PipelineErrorStrategy(StrEnum):
    """What a pipeline does when a step fails."""

    FAIL_FAST = "FAIL_FAST"
    """Stop and return the failed step's result."""
    CONTINUE_ON_FAILURE = "CONTINUE_ON_FAILURE"
    """Pass the failed step's error message to the next step as its input, and go on; the
    pipeline's result is the last step's."""


@dataclass(frozen=True, slots=True)
class PipelineStep:
    """A step with an adapter: ``PipelineStep(tool, adapter=fn)``. A bare tool given to
    `ToolPipeline` is a step without one.

    The adapter runs only when the step succeeds and another step follows; without one the
    next step's input is the result's ``output``. An adapter that raises fails the step.
    """

    tool: StepTool
    adapter: Adapter | None = None

    @property
    def name(self) -> str:
        """The step tool's name."""
        return self.tool.name


class ToolPipeline:
    """An `AgentTool` running `steps` in order within one call.

    `name` and `description` default to ``"{a}_then_{b}"`` and ``"Pipeline: a -> b"`` from
    the step names (a pipeline without steps needs a name; it returns its input). Each step
    is a tool or a `PipelineStep`. A step that raises gives the failure
    ``"Step '{name}' threw: {message}"``; `ToolConfigurationError` and run-ending signals
    (exit early) propagate. Raises `ValidationError` for a blank name or description, a
    None step, or a step that is not a usable tool.
    """

    def __init__(
        self,
        *steps: StepTool | PipelineStep,
        name: str | None = None,
        description: str | None = None,
        error_strategy: PipelineErrorStrategy | str = PipelineErrorStrategy.FAIL_FAST,
    ) -> None:
        self._steps = tuple(_check_step(step, index) for index, step in enumerate(steps))
        if not steps and name is None:
            raise ValidationError(
                "ToolPipeline needs at least one step (a pipeline without steps needs a name, "
                "and returns its input)"
            )
        names = [step.name for step in self._steps]
        self._name = require_text(
            "_then_".join(names) if name is None else name, "ToolPipeline name must not be blank"
        )
        self._description = require_text(
            f"Pipeline: {' -> '.join(names)}" if description is None else description,
            "ToolPipeline description must not be blank",
        )
        self._error_strategy = _check_strategy(error_strategy)

    @classmethod
    def of(cls, *steps: StepTool | PipelineStep) -> ToolPipeline:
        """A fail-fast pipeline of `steps` with the generated name and description."""
        return cls(*steps)

    @property
    def name(self) -> str:
        """The tool name shown to the model."""
        return self._name

    @property
    def description(self) -> str:
        """What the pipeline does, shown to the model."""
        return self._description

    @property
    def steps(self) -> tuple[PipelineStep, ...]:
        """The steps, in order."""
        return self._steps

    @property
    def error_strategy(self) -> PipelineErrorStrategy:
        """What happens when a step fails."""
        return self._error_strategy

    @property
    def input_parameter(self) -> tuple[str, dict[str, Any]] | None:
        """The parameter the pipeline advertises to models: its first step's, when that
        step is a ``@tool`` function (else the plain ``input``)."""
        if not self._steps:
            return None
        first = self._steps[0].tool
        if not isinstance(first, FunctionTool):
            return None
        name = _single_parameter(first)
        return name, dict(first.spec.parameters["properties"][name])

    async def execute(self, input: str) -> ToolResult:
        """Run the steps on `input`; the result is the last step's (`input` itself when
        there are no steps)."""
        result = ToolResult.success(input)
        text = input
        for index, step in enumerate(self._steps):
            result = await _run_step(step, text)
            if result.is_success and index + 1 < len(self._steps):
                result = await _adapt(step, result)
            if result.is_success:
                text = result.output
            elif self._error_strategy is PipelineErrorStrategy.FAIL_FAST:
                return result
            else:
                text = result.error_message or ""
        return result

    def __repr__(self) -> str:
        steps = ", ".join(step.name for step in self._steps)
        return f"ToolPipeline({self._name!r}, steps=[{steps}])"


async def _run_step(step: PipelineStep, text: str) -> ToolResult:
    """One step's result; an exception from the step becomes a failure."""
    tool = step.tool
    try:
        if isinstance(tool, FunctionTool):
            return await tool.invoke(json.dumps({_single_parameter(tool): text}))
        return coerce_result(await call_user_code(tool.execute, text))
    except ToolConfigurationError:
        raise
    except Exception as error:
        return ToolResult.failure(f"Step '{step.name}' threw: {describe_error(error)}")


async def _adapt(step: PipelineStep, result: ToolResult) -> ToolResult:
    """The next step's input, from a step's successful `result`: `result` itself without an
    adapter, else a success holding the adapter's text, or a failure when the adapter raises
    or returns something other than a string."""
    if step.adapter is None:
        return result
    try:
        text = await call_user_code(step.adapter, result)
    except ToolConfigurationError:
        raise
    except Exception as error:
        return ToolResult.failure(f"Adapter of step '{step.name}' threw: {describe_error(error)}")
    if not isinstance(text, str):
        return ToolResult.failure(
            f"Adapter of step '{step.name}' must return a string, got: {type(text).__name__}"
        )
    return ToolResult.success(text)


def _check_step(step: object, index: int) -> PipelineStep:
    if not isinstance(step, PipelineStep):
        return PipelineStep(_check_tool(step, index))
    _check_tool(step.tool, index)
    if step.adapter is not None and not callable(step.adapter):
        raise ValidationError(
            f"ToolPipeline adapter of step '{step.name}' must be callable, got: {step.adapter!r}"
        )
    return step


def _check_tool(tool: object, index: int) -> StepTool:
    if tool is None:
        raise ValidationError(f"ToolPipeline step tool at index {index} must not be None")
    if isinstance(tool, FunctionTool):
        _check_function_step(tool)
        return tool
    if isinstance(tool, AgentTool) and not isinstance(tool, type):
        return tool
    raise ValidationError(
        f"ToolPipeline step at index {index} ({type(tool).__name__}) is neither an AgentTool "
        "nor a @tool with one string parameter; for an object with @tool methods, pass one of "
        "its methods (e.g. FileReadTool(dir).file_read)"
    )


def _check_function_step(step: FunctionTool) -> None:
    if step._wants_context:
        raise ValidationError(
            f"ToolPipeline step '{step.name}' takes a ToolContext, which pipeline steps do not "
            "receive"
        )
    _single_parameter(step)


def _single_parameter(step: FunctionTool) -> str:
    """The name of the one string parameter of a ``@tool`` step."""
    properties = step.spec.parameters.get("properties", {})
    if len(properties) == 1:
        (parameter, schema), *_ = properties.items()
        if schema.get("type") == "string":
            return str(parameter)
    raise ValidationError(
        f"ToolPipeline step '{step.name}' must take exactly one string parameter to receive "
        f"the previous step's output, got: {', '.join(properties) or 'none'}"
    )


def _check_strategy(value: PipelineErrorStrategy | str) -> PipelineErrorStrategy:
    try:
        return PipelineErrorStrategy(value)
    except ValueError:
        choices = ", ".join(strategy.value for strategy in PipelineErrorStrategy)
        raise ValidationError(
            f"ToolPipeline error_strategy must be one of {choices}, got: {value!r}"
        ) from None
