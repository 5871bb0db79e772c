"""Running the run's before-hooks (DESIGN 4b) before a model call or a tool call.

`RunHooks` is built once per run (None when the run has no hooks, so that the agent loop
builds no call object and awaits nothing extra); it holds each hook method with whether it
is async, and the run's model usage so far. The hooks run in order, a change feeding the
next; the first veto wins. A hook that raises or answers nonsense fails its task.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from agentensemble._calling import call_user_code
from agentensemble.errors import AgentExecutionError, HookVetoError, describe_error
from agentensemble.hooks import (
    HookDecision,
    PendingModelCall,
    PendingToolCall,
    UsageSoFar,
)
from agentensemble.models import Message, ModelSettings, ToolCall, model_name_of
from agentensemble.tools import ToolContext, ToolResult

if TYPE_CHECKING:
    from agentensemble.execution._agent_loop import AgentLoop
    from agentensemble.execution._context import TaskContext

__all__ = ["RunHooks", "before_model_call", "before_tool_call"]


@dataclass(frozen=True, slots=True)
class _Method:
    """One hook method, bound to its hook."""

    hook: str
    """The hook's class name (in errors and veto texts)."""
    name: str
    fn: Callable[[Any], Any]
    is_async: bool


class RunHooks:
    """The hooks of one run, by method."""

    __slots__ = ("model", "tool")

    def __init__(self, hooks: Sequence[object]) -> None:
        self.model = _methods(hooks, "before_model_call")
        self.tool = _methods(hooks, "before_tool_call")

    @classmethod
    def of(cls, hooks: Sequence[object]) -> RunHooks | None:
        """The run's hooks (checked already), or None when there are none."""
        return cls(hooks) if hooks else None


def _methods(hooks: Sequence[object], name: str) -> tuple[_Method, ...]:
    found = []
    for hook in hooks:
        if callable(getattr(type(hook), name, None)):
            fn = getattr(hook, name)
            found.append(_Method(type(hook).__name__, name, fn, inspect.iscoroutinefunction(fn)))
    return tuple(found)


async def before_model_call(
    loop: AgentLoop, index: int, messages: tuple[Message, ...]
) -> tuple[tuple[Message, ...], ModelSettings | None]:
    """The messages and settings to send after every ``before_model_call`` hook; raises
    `HookVetoError` at the first veto."""
    hooks, task = loop.task.run.hooks, loop.task
    if hooks is None:  # the loop checks first
        raise AssertionError("hooks asked in a run without hooks")
    settings = loop.settings
    task_usage, run_usage = _usage_so_far(task)
    call = PendingModelCall(
        run_id=task.run.run_id,
        task_id=task.task_id,
        parent_task_id=task.parent_task_id,
        agent_role=task.planned.role,
        task_description=task.planned.description,
        depth=task.depth,
        messages=messages,
        settings=settings,
        iteration_index=index,
        model_name=model_name_of(loop.model),
        task_usage=task_usage,
        run_usage=run_usage,
    )
    for method in hooks.model:
        decision = await _ask(method, call, loop)
        if decision.kind == "veto":
            raise HookVetoError(
                hook=method.hook,
                reason=decision.reason,
                agent_role=loop.role,
                task_description=task.planned.description,
            )
        if decision.kind == "change":
            if decision.arguments is not None:
                raise _misused(
                    method,
                    loop,
                    "changed arguments; a model call's change takes messages or settings",
                )
            call = replace(
                call,
                messages=call.messages if decision.messages is None else decision.messages,
                settings=call.settings if decision.settings is None else decision.settings,
            )
    return call.messages, call.settings


async def before_tool_call(
    loop: AgentLoop, call: ToolCall, context: ToolContext
) -> tuple[ToolCall, ToolResult | None]:
    """The call to run after every ``before_tool_call`` hook (its arguments maybe changed),
    and, when a hook vetoed it, the failure to answer the model with instead."""
    hooks = loop.task.run.hooks
    if hooks is None:  # the caller checks first
        raise AssertionError("hooks asked in a run without hooks")
    task_usage, run_usage = _usage_so_far(loop.task)
    pending = PendingToolCall(
        tool_name=call.name,
        arguments=call.arguments,
        tool_call_id=call.id,
        context=context,
        task_usage=task_usage,
        run_usage=run_usage,
    )
    for method in hooks.tool:
        decision = await _ask(method, pending, loop)
        if decision.kind == "veto":
            refusal = f"Tool call vetoed by hook {method.hook}: {decision.reason}"
            return replace(call, arguments=pending.arguments), ToolResult.failure(refusal)
        if decision.kind == "change":
            if decision.arguments is None:
                raise _misused(
                    method,
                    loop,
                    "changed messages or settings; a tool call's change takes arguments",
                )
            pending = replace(pending, arguments=decision.arguments)
    return replace(call, arguments=pending.arguments), None


async def _ask(method: _Method, call: object, loop: AgentLoop) -> HookDecision:
    """One hook's decision (None is allow); a hook that raises fails the task."""
    try:
        answer = await call_user_code(method.fn, call, is_async=method.is_async)
    except Exception as error:
        raise AgentExecutionError(
            f"Agent '{loop.role}' failed: hook {method.hook}.{method.name} raised "
            f"{type(error).__name__}: {describe_error(error)}",
            agent_role=loop.role,
            task_description=loop.task.planned.description,
        ) from error
    if answer is None:
        return HookDecision.allow()
    if isinstance(answer, HookDecision):
        return answer
    raise _misused(
        method,
        loop,
        f"returned {answer!r}; a hook returns HookDecision.allow(), HookDecision.change(...), "
        "HookDecision.veto(reason) or None",
    )


def _misused(method: _Method, loop: AgentLoop, problem: str) -> AgentExecutionError:
    return AgentExecutionError(
        f"Agent '{loop.role}' failed: hook {method.hook}.{method.name} {problem}",
        agent_role=loop.role,
        task_description=loop.task.planned.description,
    )


def _usage_so_far(task: TaskContext) -> tuple[UsageSoFar, UsageSoFar]:
    """The task's and the run's model usage so far, as the run's trace fold counted it."""
    fold = task.run.trace
    task_usage, run_usage = fold.usage(task.task_id), fold.run_usage
    return (
        UsageSoFar(
            input_tokens=task_usage.input_tokens,
            output_tokens=task_usage.output_tokens,
            model_calls=task_usage.model_calls,
        ),
        UsageSoFar(
            input_tokens=run_usage.input_tokens,
            output_tokens=run_usage.output_tokens,
            model_calls=run_usage.model_calls,
        ),
    )
