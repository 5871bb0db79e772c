"""ToolPipeline: tools chained within one tool call (BEHAVIOUR 7.5)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentensemble import (
    Agent,
    Ensemble,
    ExitReason,
    ScriptedModel,
    Task,
    TaskExecutionError,
    ToolContext,
    tool,
    tool_call,
)
from agentensemble.errors import ToolConfigurationError, ValidationError
from agentensemble.review import ExitEarlyRequested
from agentensemble.tools import AgentTool, ToolResult
from agentensemble.tools._files import FileReadTool
from agentensemble.tools._pipeline import PipelineErrorStrategy, PipelineStep, ToolPipeline

CONTINUE = PipelineErrorStrategy.CONTINUE_ON_FAILURE


class Prefix:
    """An AgentTool that prefixes its input and records what it received."""

    def __init__(self, name: str, prefix: str) -> None:
        self.name = name
        self.description = f"Prefix with {prefix}"
        self.prefix = prefix
        self.inputs: list[str] = []

    def execute(self, input: str) -> str:
        self.inputs.append(input)
        return f"{self.prefix}{input}"


class Upper:
    """An async AgentTool returning a ToolResult."""

    name = "upper"
    description = "Upper-case the input"

    async def execute(self, input: str) -> ToolResult:
        return ToolResult.success(input.upper())


class Fails:
    """An AgentTool that fails with a message (or raises `error`)."""

    def __init__(self, name: str = "fails", error: BaseException | None = None) -> None:
        self.name = name
        self.description = "Always fails"
        self.error = error

    def execute(self, input: str) -> ToolResult:
        if self.error is not None:
            raise self.error
        return ToolResult.failure(f"cannot handle {input}")


@tool
def shout(text: str) -> str:
    """Add an exclamation mark."""
    return f"{text}!"


def test_steps_are_agent_tools() -> None:
    assert isinstance(ToolPipeline.of(Upper()), AgentTool)


# --- names and validation -------------------------------------------------------------------


def test_of_generates_the_name_and_description() -> None:
    pipeline = ToolPipeline.of(Prefix("a", "A:"), Prefix("b", "B:"), Upper())
    assert pipeline.name == "a_then_b_then_upper"
    assert pipeline.description == "Pipeline: a -> b -> upper"
    assert pipeline.error_strategy is PipelineErrorStrategy.FAIL_FAST
    assert [step.name for step in pipeline.steps] == ["a", "b", "upper"]


def test_a_single_step_pipeline_is_named_after_it() -> None:
    pipeline = ToolPipeline.of(Upper())
    assert (pipeline.name, pipeline.description) == ("upper", "Pipeline: upper")


def test_name_description_and_strategy_can_be_given() -> None:
    pipeline = ToolPipeline(
        Upper(), name="loud", description="Make it loud", error_strategy="CONTINUE_ON_FAILURE"
    )
    assert (pipeline.name, pipeline.description) == ("loud", "Make it loud")
    assert pipeline.error_strategy is CONTINUE


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": ""}, "ToolPipeline name must not be blank"),
        ({"name": "  "}, "ToolPipeline name must not be blank"),
        ({"description": ""}, "ToolPipeline description must not be blank"),
        ({"description": "\n"}, "ToolPipeline description must not be blank"),
        ({"error_strategy": "SOMETIMES"}, "ToolPipeline error_strategy must be one of"),
    ],
)
def test_configuration_errors(kwargs: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ToolPipeline(Upper(), **kwargs)


def test_a_pipeline_without_steps_needs_a_name() -> None:
    with pytest.raises(ValidationError, match="ToolPipeline needs at least one step"):
        ToolPipeline()


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ((Upper(), None), "ToolPipeline step tool at index 1 must not be None"),
        ((PipelineStep(None),), "ToolPipeline step tool at index 0 must not be None"),  # type: ignore[arg-type]
        (("upper",), r"step at index 0 \(str\) is neither an AgentTool nor a @tool"),
        ((Upper,), r"step at index 0 \(type\) is neither"),
        ((FileReadTool,), r"step at index 0 \(type\) is neither"),
        ((PipelineStep(Upper(), adapter="x"),), "adapter of step 'upper' must be callable"),  # type: ignore[arg-type]
    ],
)
def test_bad_steps_are_refused(steps: tuple[object, ...], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ToolPipeline(*steps, name="p", description="d")  # type: ignore[arg-type]


def test_an_object_with_tool_methods_is_refused_with_a_hint(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match=r"pass one of its methods"):
        ToolPipeline.of(FileReadTool(tmp_path))  # type: ignore[arg-type]


def test_tool_functions_must_take_one_string_and_no_context() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    @tool
    def count(n: int) -> int:
        """Count."""
        return n

    @tool
    def aware(context: ToolContext, text: str) -> str:
        """Needs a context."""
        return text

    with pytest.raises(ValidationError, match="'add' must take exactly one string parameter"):
        ToolPipeline.of(add)
    with pytest.raises(ValidationError, match="'count' must take exactly one string parameter"):
        ToolPipeline.of(count)
    with pytest.raises(ValidationError, match="'aware' takes a ToolContext"):
        ToolPipeline.of(aware)


# --- running --------------------------------------------------------------------------------


async def test_no_steps_return_the_input() -> None:
    result = await ToolPipeline(name="nothing", description="Does nothing").execute("as is")
    assert result == ToolResult.success("as is")


async def test_each_output_is_the_next_input_and_the_last_result_is_returned() -> None:
    a, b = Prefix("a", "A:"), Prefix("b", "B:")
    result = await ToolPipeline.of(a, b, Upper(), shout).execute("x")
    assert result.is_success
    assert result.output == "B:A:X!"
    assert (a.inputs, b.inputs) == (["x"], ["A:x"])


async def test_a_tool_method_is_a_step(tmp_path: Path) -> None:
    (tmp_path / "name.txt").write_text("notes.txt")
    (tmp_path / "notes.txt").write_text("the notes")
    reader = FileReadTool(tmp_path).file_read
    pipeline = ToolPipeline.of(reader, reader)
    assert pipeline.name == "file_read_then_file_read"
    assert (await pipeline.execute("name.txt")).output == "the notes"


async def test_an_adapter_reshapes_a_successful_result_for_the_next_step() -> None:
    seen: list[ToolResult] = []

    def adapter(result: ToolResult) -> str:
        seen.append(result)
        return f"[{result.output}]"

    b = Prefix("b", "B:")
    pipeline = ToolPipeline(PipelineStep(Prefix("a", "A:"), adapter=adapter), b, name="p")
    assert (await pipeline.execute("x")).output == "B:[A:x]"
    assert seen == [ToolResult.success("A:x")]
    assert b.inputs == ["[A:x]"]


async def test_async_adapters_are_awaited() -> None:
    async def adapter(result: ToolResult) -> str:
        return result.output * 2

    pipeline = ToolPipeline.of(PipelineStep(Upper(), adapter=adapter), shout)
    assert (await pipeline.execute("ab")).output == "ABAB!"


async def test_the_adapter_of_the_last_step_does_not_run() -> None:
    def adapter(result: ToolResult) -> str:
        raise AssertionError("the last step's adapter ran")

    pipeline = ToolPipeline.of(Upper(), PipelineStep(shout, adapter=adapter))
    assert (await pipeline.execute("hi")).output == "HI!"


async def test_the_adapter_of_a_failed_step_does_not_run() -> None:
    def adapter(result: ToolResult) -> str:
        raise AssertionError("the failed step's adapter ran")

    pipeline = ToolPipeline(
        PipelineStep(Fails(), adapter=adapter), Upper(), name="p", error_strategy=CONTINUE
    )
    assert (await pipeline.execute("x")).output == "CANNOT HANDLE X"


async def test_fail_fast_returns_the_failed_step_result_and_stops() -> None:
    after = Prefix("after", ">")
    result = await ToolPipeline.of(Upper(), Fails(), after).execute("x")
    assert result == ToolResult.failure("cannot handle X")
    assert after.inputs == []


async def test_continue_on_failure_passes_the_error_message_on() -> None:
    after = Prefix("after", ">")
    pipeline = ToolPipeline(Fails(), after, name="p", error_strategy=CONTINUE)
    result = await pipeline.execute("x")
    assert result == ToolResult.success(">cannot handle x")
    assert after.inputs == ["cannot handle x"]


async def test_continue_on_failure_returns_a_failing_last_step() -> None:
    pipeline = ToolPipeline(Upper(), Fails(), name="p", error_strategy=CONTINUE)
    assert await pipeline.execute("x") == ToolResult.failure("cannot handle X")


async def test_text_that_starts_with_error_is_passed_on_like_any_text() -> None:
    after = Prefix("after", ">")
    result = await ToolPipeline.of(Prefix("bad", "Error: "), after).execute("no luck")
    assert result.is_success  # a step that failed says so (ToolResult.failure or raising)
    assert after.inputs == ["Error: no luck"]


@pytest.mark.parametrize(
    ("error", "message"),
    [
        (RuntimeError("disk on fire"), "Step 'boom' threw: disk on fire"),
        (RuntimeError(), "Step 'boom' threw: RuntimeError"),
    ],
)
async def test_a_step_that_raises_becomes_a_failure(error: Exception, message: str) -> None:
    after = Prefix("after", ">")
    assert await ToolPipeline.of(Fails("boom", error), after).execute("x") == (
        ToolResult.failure(message)
    )
    assert after.inputs == []
    pipeline = ToolPipeline(Fails("boom", error), after, name="p", error_strategy=CONTINUE)
    assert (await pipeline.execute("x")).output == f">{message}"


async def test_a_tool_function_step_reports_its_error_as_it_does_to_the_model() -> None:
    @tool
    def broken(text: str) -> str:
        """Break."""
        raise ValueError(f"bad input {text}")

    assert await ToolPipeline.of(broken).execute("x") == ToolResult.failure("bad input x")


async def test_an_adapter_that_raises_fails_its_step() -> None:
    def adapter(result: ToolResult) -> str:
        raise KeyError("title")

    after = Prefix("after", ">")
    pipeline = ToolPipeline.of(PipelineStep(Upper(), adapter=adapter), after)
    result = await pipeline.execute("x")
    assert result == ToolResult.failure("Adapter of step 'upper' threw: 'title'")
    assert after.inputs == []


async def test_an_adapter_must_return_text() -> None:
    pipeline = ToolPipeline(
        PipelineStep(Upper(), adapter=lambda result: 42),  # type: ignore[arg-type, return-value]
        Prefix("after", ">"),
        name="p",
        error_strategy=CONTINUE,
    )
    result = await pipeline.execute("x")
    assert result.output == ">Adapter of step 'upper' must return a string, got: int"


@pytest.mark.parametrize(
    "error",
    [ToolConfigurationError("misconfigured"), ExitEarlyRequested("stop")],
    ids=["configuration", "exit-early"],
)
async def test_configuration_errors_and_control_flow_propagate(error: BaseException) -> None:
    with pytest.raises(type(error)):
        await ToolPipeline.of(Fails("step", error)).execute("x")
    with pytest.raises(type(error)):
        await ToolPipeline(Fails("step", error), name="p", error_strategy=CONTINUE).execute("x")

    def adapter(result: ToolResult) -> str:
        raise error

    with pytest.raises(type(error)):
        await ToolPipeline.of(PipelineStep(Upper(), adapter=adapter), Upper()).execute("x")


async def test_pipelines_nest() -> None:
    inner = ToolPipeline.of(Prefix("a", "A:"), Upper())
    outer = ToolPipeline.of(inner, shout)
    assert outer.name == "a_then_upper_then_shout"
    assert (await outer.execute("x")).output == "A:X!"


# --- in a run -------------------------------------------------------------------------------


def test_an_agent_calls_a_pipeline_as_one_tool() -> None:
    pipeline = ToolPipeline(Prefix("a", "A:"), Upper(), name="shape", description="Shape it")
    model = ScriptedModel([tool_call("shape", input="data"), "Shaped."])
    agent = Agent("Shaper", "Shape data", llm=model, tools=[pipeline])
    output = Ensemble(tasks=[Task("Shape the data", agent=agent)]).run()
    assert output.raw == "Shaped."
    (spec,) = model.requests[0].tools
    assert (spec.name, spec.description) == ("shape", "Shape it")
    assert spec.parameters["required"] == ["input"]
    assert model.requests[1].messages[-1].text == "A:DATA"


def test_a_failing_pipeline_is_an_error_for_the_model() -> None:
    pipeline = ToolPipeline(Upper(), Fails(), name="shape", description="Shape it")
    model = ScriptedModel([tool_call("shape", input="data"), "Gave up."])
    agent = Agent("Shaper", "Shape data", llm=model, tools=[pipeline])
    assert Ensemble(tasks=[Task("Shape the data", agent=agent)]).run().raw == "Gave up."
    assert model.requests[1].messages[-1].text == "Error: cannot handle DATA"


def test_exit_early_from_a_step_ends_the_run() -> None:
    pipeline = ToolPipeline.of(Fails("stop", ExitEarlyRequested("stop now")))
    model = ScriptedModel([tool_call("stop", input="x"), "never"])
    agent = Agent("Shaper", "Shape data", llm=model, tools=[pipeline])
    output = Ensemble(tasks=[Task("Shape the data", agent=agent)]).run()
    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert len(model.requests) == 1


def test_a_pipeline_is_a_task_handler() -> None:
    first = Task("Produce data", handler=lambda context: "raw data")
    second = Task("Shape it", context=[first], handler=ToolPipeline.of(Upper(), shout))
    output = Ensemble(tasks=[first, second]).run()
    assert output.raw == "RAW DATA!"


def test_a_handler_pipeline_without_context_gets_the_description() -> None:
    output = Ensemble(tasks=[Task("shout this", handler=ToolPipeline.of(shout))]).run()
    assert output.raw == "shout this!"


def test_a_failing_handler_pipeline_fails_the_task() -> None:
    with pytest.raises(TaskExecutionError, match="Deterministic task failed: cannot handle x"):
        Ensemble(tasks=[Task("x", handler=ToolPipeline.of(Fails()))]).run()


async def test_a_pipeline_advertises_its_first_steps_parameter() -> None:
    from agentensemble.tools._agent_tool import AgentToolAdapter

    @tool
    def find_order(order_id: str) -> str:
        """Find an order by its id."""
        return f"order {order_id}: shipped"

    @tool
    def shout(text: str) -> str:
        """Upper-case a text."""
        return text.upper()

    adapter = AgentToolAdapter(ToolPipeline(find_order, shout))
    assert adapter.spec.parameters == {
        "type": "object",
        "properties": {"order_id": find_order.spec.parameters["properties"]["order_id"]},
        "required": ["order_id"],
    }
    assert (await adapter.invoke('{"order_id": "A-1"}')).output == "ORDER A-1: SHIPPED"
    missing = await adapter.invoke('{"input": "A-1"}')
    assert "missing required parameter 'order_id'" in missing.text_for_model
