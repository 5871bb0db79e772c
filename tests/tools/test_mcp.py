"""`McpTools`: an MCP server's tools as agent tools, over stdio, streamable HTTP and in-process
(the server is `tests/tools/mcp_server.py`)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from agentensemble import Agent, Ensemble, ScriptedModel, Task, tool_call
from agentensemble.errors import ToolConfigurationError, ValidationError
from agentensemble.models import ToolResultMessage
from agentensemble.tools._mcp import McpTool, McpTools, tool_names

from .mcp_server import server as in_process_server

pytestmark = pytest.mark.integration

SERVER = Path(__file__).with_name("mcp_server.py")


def stdio_server(**options: Any) -> McpTools:
    return McpTools.stdio(sys.executable, [str(SERVER)], **options)


def by_name(mcp: McpTools) -> dict[str, McpTool]:
    return {tool.spec.name: tool for tool in mcp.tools}


async def server_pid(mcp: McpTools) -> int:
    result = await by_name(mcp)["pid"].invoke("{}")
    pid: int = result.structured_output["result"]
    return pid


def assert_gone(pid: int) -> None:
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--http"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        port = process.stdout.readline().strip()  # printed once the server listens
        assert port.isdigit(), f"the MCP test server exited with {process.wait(timeout=30)}"
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


# Listing: names, descriptions, schemas


async def test_tools_carry_the_servers_descriptions_and_input_schemas() -> None:
    expected = {tool.name: tool for tool in await in_process_server.list_tools()}
    async with stdio_server() as mcp:
        tools = mcp.tools
    assert {tool.server_name for tool in tools} == set(expected)
    for tool in tools:
        assert tool.spec.parameters == expected[tool.server_name].input_schema
        assert tool.spec.description == expected[tool.server_name].description


async def test_names_are_made_acceptable_to_providers_and_map_back() -> None:
    async with stdio_server(prefix="test") as mcp:
        names = mcp.names
    assert names["test_text_reverse"] == "text.reverse"
    assert names["test_add"] == "add"


def test_tool_names_are_sanitised_cut_and_unique() -> None:
    long = "x" * 70
    assert tool_names(["a.b", "a_b", "a b", long, long]) == [
        "a_b",
        "a_b_2",
        "a_b_3",
        "x" * 64,
        "x" * 62 + "_2",
    ]
    assert tool_names(["get/item"], prefix="my server") == ["my_server_get_item"]


# Calls


async def test_a_call_returns_the_text_and_the_structured_content() -> None:
    async with stdio_server() as mcp:
        tools = by_name(mcp)
        added = await tools["add"].invoke('{"a": 2, "b": 3}')
        shouted = await tools["shout"].invoke('{"text": "hi"}')
        reversed_ = await tools["text_reverse"].invoke('{"text": "abc"}')
    assert (added.is_success, added.output, added.structured_output) == (True, "5", {"result": 5})
    assert (shouted.output, shouted.structured_output) == ("HI!", None)
    assert reversed_.output == "cba"


async def test_a_tool_error_is_a_failure_the_model_reads() -> None:
    async with stdio_server() as mcp:
        result = await by_name(mcp)["explode"].invoke('{"reason": "boom"}')
    assert not result.is_success
    assert result.text_for_model.startswith("Error: ")
    assert "exploded: boom" in result.text_for_model


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{not json", "Invalid JSON arguments"),
        ("[1, 2]", "Tool arguments must be a JSON object"),
        ('{"a": "two"}', "validation error"),  # the server's own validation, as isError
    ],
)
async def test_bad_arguments_are_failures(arguments: str, message: str) -> None:
    async with McpTools(in_process_server) as mcp:
        result = await by_name(mcp)["add"].invoke(arguments)
    assert not result.is_success
    assert message in result.text_for_model


async def test_an_image_is_described() -> None:
    async with McpTools(in_process_server) as mcp:
        result = await by_name(mcp)["pixel"].invoke("")
    assert result.is_success
    assert result.output.startswith("[image: image/png, ")


async def test_a_call_that_takes_too_long_is_a_failure_and_the_connection_survives() -> None:
    async with stdio_server(timeout=0.5) as mcp:
        tools = by_name(mcp)
        hung = await tools["hang"].invoke("{}")
        added = await tools["add"].invoke('{"a": 1, "b": 1}')
    assert not hung.is_success
    assert hung.error_message == "MCP tool 'hang' timed out after 0.5s"
    assert added.output == "2"


# Lifetime


async def test_the_server_process_is_gone_after_the_block() -> None:
    async with stdio_server() as mcp:
        pid = await server_pid(mcp)
    assert not mcp.connected
    assert_gone(pid)


async def test_the_server_process_is_gone_when_the_block_raises() -> None:
    pids: list[int] = []

    async def fail_inside() -> None:
        async with stdio_server() as mcp:
            pids.append(await server_pid(mcp))
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        await fail_inside()
    (pid,) = pids
    assert_gone(pid)


async def test_the_server_process_is_gone_when_the_block_is_cancelled() -> None:
    pids: list[int] = []
    inside = asyncio.Event()

    async def wait_inside() -> None:
        async with stdio_server() as mcp:
            pids.append(await server_pid(mcp))
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(wait_inside())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (pid,) = pids
    assert_gone(pid)


async def test_a_server_that_never_answers_fails_to_connect_and_is_stopped(
    tmp_path: Path,
) -> None:
    pid_file = tmp_path / "pid"
    silent = (
        f"import os, sys; open({str(pid_file)!r}, 'w').write(str(os.getpid())); sys.stdin.read()"
    )
    mcp = McpTools.stdio(sys.executable, ["-S", "-c", silent], connect_timeout=2)
    with pytest.raises(ToolConfigurationError, match="did not connect within 2s"):
        await mcp.__aenter__()
    assert_gone(int(pid_file.read_text()))


async def test_nested_blocks_share_one_connection() -> None:
    mcp = stdio_server()
    async with mcp:
        pid = await server_pid(mcp)
        async with mcp:
            assert await server_pid(mcp) == pid
        assert mcp.connected
    assert not mcp.connected
    assert_gone(pid)


async def test_tools_used_outside_the_block_raise_a_clear_error() -> None:
    mcp = stdio_server()
    with pytest.raises(ToolConfigurationError, match="is not connected"):
        _ = mcp.tools
    async with mcp:
        add = by_name(mcp)["add"]
    with pytest.raises(ToolConfigurationError, match="is not connected"):
        await add.invoke('{"a": 1, "b": 2}')


async def test_a_command_that_does_not_exist_fails_to_connect_clearly() -> None:
    mcp = McpTools.stdio("/nonexistent/agentensemble-mcp-server")
    with pytest.raises(ToolConfigurationError, match="Could not connect to MCP server") as caught:
        await mcp.__aenter__()
    assert "/nonexistent/agentensemble-mcp-server" in str(caught.value)
    assert isinstance(caught.value.__cause__, OSError)
    assert not mcp.connected


def test_settings_are_checked() -> None:
    with pytest.raises(ValidationError, match="McpTools timeout"):
        stdio_server(timeout=0)
    with pytest.raises(ValidationError, match="McpTools prefix"):
        stdio_server(prefix=" ")
    with pytest.raises(ValidationError, match="McpTools command"):
        McpTools.stdio("")


# Streamable HTTP


@pytest.mark.parametrize("headers", [None, {"X-Agent": "agentensemble"}])
async def test_over_streamable_http(http_url: str, headers: dict[str, str] | None) -> None:
    async with McpTools.http(http_url, headers) as mcp:
        result = await by_name(mcp)["add"].invoke('{"a": 20, "b": 22}')
    assert (result.output, result.structured_output) == ("42", {"result": 42})


async def test_an_unreachable_url_fails_to_connect_clearly() -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(ToolConfigurationError, match=f"Could not connect to MCP server {url}"):
        async with McpTools.http(url):
            pass


# In an agent's run


async def test_an_agent_calls_an_mcp_tool_and_the_model_sees_the_result() -> None:
    model = ScriptedModel([tool_call("add", a=2, b=3), "The sum is 5."])
    async with stdio_server() as mcp:
        agent = Agent("Calculator", "Add numbers", llm=model, tools=mcp.tools)
        output = await Ensemble(tasks=[Task("Add 2 and 3", agent=agent)]).arun()
        offered = {spec.name: spec for spec in model.requests[0].tools}
        assert offered["add"] == by_name(mcp)["add"].spec
    assert output.raw == "The sum is 5."
    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_name, result.text) == ("add", "5")


async def test_an_agent_sees_an_mcp_tool_error() -> None:
    model = ScriptedModel([tool_call("explode", reason="boom"), "It failed."])
    async with stdio_server() as mcp:
        agent = Agent("Tester", "Try tools", llm=model, tools=mcp.tools)
        await Ensemble(tasks=[Task("Try explode", agent=agent)]).arun()
    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert result.text.startswith("Error: ")
    assert "exploded: boom" in result.text
