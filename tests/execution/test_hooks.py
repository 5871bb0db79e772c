"""Before-hooks (DESIGN 4b): allow, change, veto, order, validation and broken hooks."""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from agentensemble import (
    Agent,
    AgentExecutionError,
    Ensemble,
    EnsembleOutput,
    ExitEarlyRequested,
    ExitReason,
    FunctionModel,
    HookDecision,
    HookVetoError,
    ModelSettings,
    PendingModelCall,
    PendingToolCall,
    RunOptions,
    ScriptedModel,
    SystemMessage,
    Task,
    TaskExecutionError,
    ToolResultMessage,
    Usage,
    UsageSoFar,
    UserMessage,
    ValidationError,
    tool,
    tool_call,
)
from agentensemble.execution._hooks import RunHooks
from agentensemble.models import ChatModel, Message, ModelRequest, ToolSpec

received: list[str] = []


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    received.append(key)
    return f"value of {key}"


@pytest.fixture(autouse=True)
def _reset() -> None:
    received.clear()


def ensemble_of(
    llm: ChatModel, hooks: Sequence[object] = (), *, settings: ModelSettings | None = None
) -> Ensemble:
    agent = Agent("Worker", "Work", llm=llm, tools=[lookup], model_settings=settings)
    return Ensemble(tasks=[Task("Do the work", agent=agent)], hooks=hooks)


def run_one(llm: ChatModel, *hooks: object, options: RunOptions | None = None) -> EnsembleOutput:
    return ensemble_of(llm, hooks).run(options=options)


def tool_results(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, ToolResultMessage)]


class Recorder:
    """Allows everything, remembering what it was asked (sync: runs in a thread)."""

    def __init__(self) -> None:
        self.model_calls: list[PendingModelCall] = []
        self.tool_calls: list[PendingToolCall] = []

    def before_model_call(self, call: PendingModelCall) -> HookDecision:
        self.model_calls.append(call)
        return HookDecision.allow()

    def before_tool_call(self, call: PendingToolCall) -> None:
        self.tool_calls.append(call)


class Named:
    """A hook with a readable repr, for validation messages."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# ---- allow --------------------------------------------------------------------------------


def test_an_allowing_hook_sees_each_call_with_its_identity_and_usage_so_far() -> None:
    llm = ScriptedModel([tool_call("lookup", key="k"), "done"], usage=Usage(10, 4))
    hook = Recorder()
    output = run_one(llm, hook)

    assert output.raw == "done"
    assert received == ["k"]
    first, second = hook.model_calls
    assert (first.agent_role, first.task_description, first.depth) == ("Worker", "Do the work", 0)
    assert first.parent_task_id is None
    assert output.trace is not None
    assert first.run_id == output.trace.ensemble_id
    assert first.model_name == "ScriptedModel"
    assert (first.iteration_index, second.iteration_index) == (0, 1)
    assert first.messages == llm.requests[0].messages
    assert second.messages == llm.requests[1].messages
    assert first.task_usage == first.run_usage == UsageSoFar()
    assert second.task_usage == UsageSoFar(input_tokens=10, output_tokens=4, model_calls=1)
    assert second.run_usage == second.task_usage

    (pending,) = hook.tool_calls
    call = llm.requests[1].messages[2].tool_calls[0]  # type: ignore[union-attr]
    assert (pending.tool_name, pending.arguments, pending.tool_call_id) == (
        "lookup",
        '{"key": "k"}',
        call.id,
    )
    assert pending.context.tool_name == "lookup"
    assert pending.context.tool_call_id == call.id
    assert (pending.run_id, pending.task_id, pending.agent_role) == (
        first.run_id,
        first.task_id,
        "Worker",
    )
    assert pending.task_usage == UsageSoFar(input_tokens=10, output_tokens=4, model_calls=1)


def test_without_hooks_the_run_has_no_hook_state() -> None:
    assert RunHooks.of(()) is None
    hooks = RunHooks.of([Recorder()])
    assert hooks is not None
    assert (len(hooks.model), len(hooks.tool)) == (1, 1)


def test_a_hook_with_only_one_method_is_asked_only_about_that_call() -> None:
    seen: list[str] = []

    class ToolsOnly:
        async def before_tool_call(self, call: PendingToolCall) -> None:
            seen.append(call.tool_name)

    assert run_one(ScriptedModel([tool_call("lookup", key="k"), "done"]), ToolsOnly()).raw == "done"
    assert seen == ["lookup"]


# ---- change -------------------------------------------------------------------------------


def test_a_change_of_messages_applies_to_that_call_only() -> None:
    note = UserMessage("Be brief.")

    class AddNote:
        def before_model_call(self, call: PendingModelCall) -> HookDecision:
            return HookDecision.change(messages=[*call.messages, note])

    llm = ScriptedModel([tool_call("lookup", key="k"), "done"])
    output = run_one(llm, AddNote())

    assert output.raw == "done"
    first, second = (request.messages for request in llm.requests)
    assert [type(m).__name__ for m in first] == ["SystemMessage", "UserMessage", "UserMessage"]
    assert first[-1] == note
    assert [type(m).__name__ for m in second] == [
        "SystemMessage",
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "UserMessage",
    ]
    assert second[-1] == note  # once: the conversation itself never had it


def test_a_change_of_settings_is_sent_to_the_model_for_that_call() -> None:
    agent_settings = ModelSettings(temperature=0.9)
    seen: list[ModelSettings | None] = []

    class Cap:
        async def before_model_call(self, call: PendingModelCall) -> HookDecision:
            seen.append(call.settings)
            return HookDecision.change(settings=ModelSettings(temperature=0.0, max_tokens=50))

    llm = ScriptedModel([tool_call("lookup", key="k"), "done"])
    ensemble_of(llm, [Cap()], settings=agent_settings).run()

    assert [request.settings for request in llm.requests] == [
        ModelSettings(temperature=0.0, max_tokens=50)
    ] * 2
    assert seen == [agent_settings, agent_settings]  # the agent's, each call


def test_a_changed_settings_timeout_is_enforced() -> None:
    import asyncio

    class Hurry:
        def before_model_call(self, call: PendingModelCall) -> HookDecision:
            return HookDecision.change(settings=ModelSettings(timeout=0.05))

    async def never(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> Any:
        await asyncio.Event().wait()

    with pytest.raises(TaskExecutionError) as caught:
        run_one(FunctionModel(never), Hurry())
    assert "the model call timed out after 0.05s (ModelSettings timeout)" in str(caught.value)


@pytest.mark.parametrize("arguments", ['{"key": "safe"}', {"key": "safe"}])
def test_a_change_of_tool_arguments_reaches_the_tool(arguments: Any) -> None:
    class Sanitize:
        def before_tool_call(self, call: PendingToolCall) -> HookDecision:
            assert json.loads(call.arguments) == {"key": "secret"}
            return HookDecision.change(arguments=arguments)

    llm = ScriptedModel([tool_call("lookup", key="secret"), "done"])
    output = run_one(llm, Sanitize())

    assert output.raw == "done"
    assert received == ["safe"]
    assert tool_results(llm.requests[1]) == ["value of safe"]


# ---- veto ---------------------------------------------------------------------------------


class NoLookups:
    def before_tool_call(self, call: PendingToolCall) -> HookDecision:
        return HookDecision.veto("lookups are off during maintenance")


def test_a_vetoed_tool_call_is_answered_with_the_reason_and_the_run_goes_on() -> None:
    llm = ScriptedModel([tool_call("lookup", key="k"), "done anyway"])
    output = run_one(llm, NoLookups())

    assert output.raw == "done anyway"
    assert received == []
    assert tool_results(llm.requests[1]) == [
        "Error: Tool call vetoed by hook NoLookups: lookups are off during maintenance"
    ]


class Budget:
    """Vetoes model calls once the run has made `max_calls`."""

    def __init__(self, max_calls: int) -> None:
        self.max_calls = max_calls

    async def before_model_call(self, call: PendingModelCall) -> HookDecision | None:
        if call.run_usage.model_calls >= self.max_calls:
            return HookDecision.veto(f"budget of {self.max_calls} model call spent")
        return None


def test_a_vetoed_model_call_fails_the_task_with_hook_veto_error() -> None:
    llm = ScriptedModel(["first done", "never sent"])
    agent = Agent("Worker", "Work", llm=llm)
    ensemble = Ensemble(
        tasks=[Task("First", agent=agent), Task("Second", agent=agent)], hooks=[Budget(1)]
    )
    with pytest.raises(TaskExecutionError) as caught:
        ensemble.run()

    error = caught.value
    assert str(error) == (
        "Task 'Second' failed: Hook Budget vetoed the model call of agent 'Worker': "
        "budget of 1 model call spent"
    )
    cause = error.__cause__
    assert isinstance(cause, HookVetoError)
    assert isinstance(cause, AgentExecutionError)
    assert (cause.hook, cause.reason) == ("Budget", "budget of 1 model call spent")
    assert (cause.agent_role, cause.task_description) == ("Worker", "Second")
    assert [output.raw for output in error.completed_outputs] == ["first done"]
    assert len(llm.requests) == 1


def test_the_run_usage_counts_every_task_of_the_run_and_starts_again_each_run() -> None:
    seen: list[tuple[int, int]] = []

    class Watch:
        def before_model_call(self, call: PendingModelCall) -> None:
            seen.append((call.task_usage.model_calls, call.run_usage.model_calls))

    llm = FunctionModel(lambda messages, tools: "ok", usage=Usage(3, 2))
    agent = Agent("Worker", "Work", llm=llm)
    ensemble = Ensemble(tasks=[Task("First", agent=agent), Task("Second", agent=agent)])
    ensemble.run(options=RunOptions(hooks=[Watch()]))
    ensemble.run(options=RunOptions(hooks=[Watch()]))
    assert seen == [(0, 0), (0, 1), (0, 0), (0, 1)]


# ---- sync, async, order -------------------------------------------------------------------


async def test_sync_hooks_run_in_a_worker_thread_and_async_hooks_on_the_loop() -> None:
    threads: dict[str, int] = {}

    class Sync:
        def before_model_call(self, call: PendingModelCall) -> None:
            threads["sync"] = threading.get_ident()

    class Async:
        async def before_model_call(self, call: PendingModelCall) -> None:
            threads["async"] = threading.get_ident()

    output = await ensemble_of(ScriptedModel(["done"]), [Sync(), Async()]).arun()
    assert output.raw == "done"
    assert threads["async"] == threading.get_ident()
    assert threads["sync"] != threading.get_ident()


class Append:
    """Appends its letter to the key (sync or async), recording the key it saw."""

    def __init__(self, letter: str, seen: list[str]) -> None:
        self.letter, self.seen = letter, seen

    def before_tool_call(self, call: PendingToolCall) -> HookDecision:
        key = json.loads(call.arguments)["key"]
        self.seen.append(key)
        return HookDecision.change(arguments={"key": key + self.letter})


class AsyncAppend(Append):
    async def before_tool_call(self, call: PendingToolCall) -> HookDecision:  # type: ignore[override]
        return Append.before_tool_call(self, call)


def test_hooks_run_in_order_each_seeing_the_previous_change() -> None:
    seen: list[str] = []
    hooks = [Append("a", seen), AsyncAppend("b", seen), Append("c", seen)]
    run_one(ScriptedModel([tool_call("lookup", key="k"), "done"]), *hooks)
    assert seen == ["k", "ka", "kab"]
    assert received == ["kabc"]


def test_the_first_veto_wins_and_later_hooks_are_not_asked() -> None:
    class Veto:
        def __init__(self, reason: str) -> None:
            self.reason = reason

        def before_tool_call(self, call: PendingToolCall) -> HookDecision:
            return HookDecision.veto(self.reason)

    later = Recorder()
    llm = ScriptedModel([tool_call("lookup", key="k"), "done"])
    run_one(llm, Veto("first"), Veto("second"), later)
    assert tool_results(llm.requests[1]) == ["Error: Tool call vetoed by hook Veto: first"]
    assert later.tool_calls == []
    assert len(later.model_calls) == 2


def test_run_option_hooks_run_after_the_ensemble_hooks() -> None:
    seen: list[str] = []
    llm = ScriptedModel([tool_call("lookup", key="k"), "done"])
    options = RunOptions(hooks=[Append("r", seen)])
    run_one(llm, Append("e", seen), options=options)
    assert seen == ["k", "ke"]
    assert received == ["ker"]

    run_one(ScriptedModel([tool_call("lookup", key="k"), "done"]), Append("e", seen))
    assert received == ["ker", "ke"]  # the run's hooks belonged to that run only


# ---- validation ---------------------------------------------------------------------------


def test_an_object_without_hook_methods_is_rejected_naming_the_field() -> None:
    class Nothing(Named):
        def before(self) -> None:
            """Not a hook method, and not before_*-named either."""

    with pytest.raises(ValidationError) as caught:
        Ensemble(tasks=[Task("x")], hooks=[Recorder(), Nothing()])
    assert str(caught.value) == (
        "Ensemble hooks[1] must have a before_model_call or before_tool_call method, got: Nothing()"
    )


def test_a_misspelt_hook_method_is_rejected_naming_it() -> None:
    class Typo(Named):
        def before_model_call(self, call: PendingModelCall) -> None: ...

        def before_tool_cal(self, call: PendingToolCall) -> None: ...

    with pytest.raises(ValidationError) as caught:
        RunOptions(hooks=[Typo()])
    assert str(caught.value) == (
        "RunOptions hooks[0] defines before_tool_cal, which is not a hook method "
        "(known: before_model_call, before_tool_call), got: Typo()"
    )


def test_hooks_must_be_a_list() -> None:
    with pytest.raises(ValidationError, match=r"^Ensemble hooks must be a list, got: Recorder$"):
        Ensemble(tasks=[Task("x")], hooks=Recorder())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: HookDecision.veto("  "), "HookDecision.veto reason must not be blank"),
        (
            lambda: HookDecision.change(),
            "HookDecision.change needs messages, settings or arguments (use "
            "HookDecision.allow() to change nothing)",
        ),
        (
            lambda: HookDecision.change(messages=[]),
            "HookDecision.change messages must not be empty",
        ),
        (
            lambda: HookDecision.change(messages=["hi"]),  # type: ignore[list-item]
            "HookDecision.change messages[0] must be a message (SystemMessage, UserMessage, "
            "AssistantMessage or ToolResultMessage), got: 'hi'",
        ),
        (
            lambda: HookDecision.change(settings={"temperature": 0}),  # type: ignore[arg-type]
            "HookDecision.change settings must be a ModelSettings, got: {'temperature': 0}",
        ),
        (
            lambda: HookDecision.change(arguments=5),  # type: ignore[arg-type]
            "HookDecision.change arguments must be JSON text or a dict, got: int",
        ),
    ],
)
def test_malformed_decisions_are_rejected(build: Any, message: str) -> None:
    with pytest.raises(ValidationError) as caught:
        build()
    assert str(caught.value) == message


# ---- broken hooks -------------------------------------------------------------------------


def test_a_hook_that_raises_fails_the_task_before_the_model_is_called() -> None:
    failure = RuntimeError("budget store down")

    class Broken:
        def before_model_call(self, call: PendingModelCall) -> None:
            raise failure

    llm = ScriptedModel(["never"])
    with pytest.raises(TaskExecutionError) as caught:
        run_one(llm, Broken())
    assert str(caught.value) == (
        "Task 'Do the work' failed: Agent 'Worker' failed: hook Broken.before_model_call "
        "raised RuntimeError: budget store down"
    )
    cause = caught.value.__cause__
    assert isinstance(cause, AgentExecutionError)
    assert cause.__cause__ is failure
    assert llm.requests == []


def test_a_tool_hook_that_raises_fails_the_task_without_running_the_tool() -> None:
    class Broken:
        async def before_tool_call(self, call: PendingToolCall) -> None:
            raise KeyError("limits")

    with pytest.raises(TaskExecutionError) as caught:
        run_one(ScriptedModel([tool_call("lookup", key="k"), "done"]), Broken())
    assert str(caught.value).endswith(
        "Agent 'Worker' failed: hook Broken.before_tool_call raised KeyError: 'limits'"
    )
    assert isinstance(caught.value.__cause__, AgentExecutionError)
    assert isinstance(caught.value.__cause__.__cause__, KeyError)
    assert received == []


def test_a_hook_answering_something_else_fails_the_task() -> None:
    class Chatty:
        def before_tool_call(self, call: PendingToolCall) -> str:
            return "sure"

    with pytest.raises(TaskExecutionError) as caught:
        run_one(ScriptedModel([tool_call("lookup", key="k"), "done"]), Chatty())
    assert str(caught.value).endswith(
        "hook Chatty.before_tool_call returned 'sure'; a hook returns HookDecision.allow(), "
        "HookDecision.change(...), HookDecision.veto(reason) or None"
    )


@pytest.mark.parametrize(
    ("hook_method", "decision", "problem"),
    [
        (
            "before_model_call",
            HookDecision.change(arguments="{}"),
            "changed arguments; a model call's change takes messages or settings",
        ),
        (
            "before_tool_call",
            HookDecision.change(messages=[SystemMessage("x")]),
            "changed messages or settings; a tool call's change takes arguments",
        ),
    ],
)
def test_a_change_of_the_wrong_kind_fails_the_task(
    hook_method: str, decision: HookDecision, problem: str
) -> None:
    hook_class = type("Wrong", (), {hook_method: lambda self, call: decision})
    with pytest.raises(TaskExecutionError) as caught:
        run_one(ScriptedModel([tool_call("lookup", key="k"), "done"]), hook_class())
    assert str(caught.value).endswith(f"hook Wrong.{hook_method} {problem}")


def test_a_hook_may_end_the_run_early_keeping_the_completed_outputs() -> None:
    class StopButton:
        def __init__(self) -> None:
            self.pressed = False

        def before_model_call(self, call: PendingModelCall) -> None:  # sync: from a thread
            if self.pressed:
                raise ExitEarlyRequested("stopped from the dashboard")
            self.pressed = True

    llm = ScriptedModel(["first done", "never sent"])
    agent = Agent("Worker", "Work", llm=llm)
    ensemble = Ensemble(tasks=[Task("First", agent=agent), Task("Second", agent=agent)])
    output = ensemble.run(options=RunOptions(hooks=[StopButton()]))

    assert output.exit_reason is ExitReason.USER_EXIT_EARLY
    assert [o.raw for o in output.task_outputs] == ["first done"]
    assert len(llm.requests) == 1


def test_a_map_reduce_ensemble_passes_its_hooks_to_every_level() -> None:
    from agentensemble import MapReduceEnsemble

    class Counting:
        def __init__(self) -> None:
            self.calls = 0

        def before_model_call(self, call: PendingModelCall) -> None:
            self.calls += 1

    counting = Counting()
    llm = ScriptedModel(["a", "b", "c", "merged"])
    output = MapReduceEnsemble.of(
        llm, ["x", "y", "z"], "Note", "Merge", chunk_size=3, hooks=[counting]
    ).run()
    assert output.raw == "merged"
    assert counting.calls == 4
    with pytest.raises(ValidationError, match=r"^MapReduceEnsemble hooks\[0\]"):
        MapReduceEnsemble.of(llm, ["x"], "Note", "Merge", hooks=[object()])
