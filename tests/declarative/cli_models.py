"""Models the CLI tests name with ``--model tests.declarative.cli_models:NAME`` (the CLI
runs in a subprocess, so the model is found by import path)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from agentensemble import FunctionModel, ScriptedModel, tool_call
from agentensemble.models import Message, ToolSpec


def _first_line(messages: Sequence[Message]) -> str:
    """The task's description: the first line after the prompt's ``## Task`` heading."""
    lines = (messages[-1].text or "").splitlines()
    after = lines.index("## Task") + 1 if "## Task" in lines else 0
    return next(line for line in lines[after:] if line.strip())


def echo() -> FunctionModel:
    """Answers each task with the first line of its prompt."""
    return FunctionModel(lambda messages, tools: f"done: {_first_line(messages)}")


def stuck_on_second_task() -> FunctionModel:
    """Answers the first call; every later call waits until the run is cancelled."""
    calls = 0

    async def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal calls
        calls += 1
        if calls > 1:
            await asyncio.Event().wait()  # released only by the run's cancellation
        return f"done: {_first_line(messages)}"

    return FunctionModel(answer)


def fails_on_second_task() -> FunctionModel:
    calls = 0

    def answer(messages: Sequence[Message], tools: Sequence[ToolSpec]) -> str:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise ConnectionError("the provider went away")
        return f"done: {_first_line(messages)}"

    return FunctionModel(answer)


def adds_two_and_three() -> ScriptedModel:
    """Calls the MCP test server's ``add`` tool, then answers with what it said."""
    return ScriptedModel([tool_call("add", a=2, b=3), "2 + 3 = 5"])
