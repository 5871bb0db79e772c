"""Tools named in an ensemble file: built-in ones by name, with their settings as keyword
arguments; tools given to `from_yaml(tools=...)` by name; others by import path; MCP
servers by command or URL."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agentensemble.declarative._imports import ImportFailed, import_object
from agentensemble.declarative._problems import did_you_mean

__all__ = [
    "BUILTIN_TOOLS",
    "McpServers",
    "ToolProblem",
    "make_tool",
    "mcp_entries",
    "mcp_server",
    "omit_mcp",
    "refuse_mcp",
]

BUILTIN_TOOLS: dict[str, str] = {
    "calculator": "agentensemble.tools._calculator:CalculatorTool",
    "datetime": "agentensemble.tools._datetime:DateTimeTool",
    "file_read": "agentensemble.tools._files:FileReadTool",
    "file_write": "agentensemble.tools._files:FileWriteTool",
    "http": "agentensemble.tools._http:HttpTool",
    "json_parser": "agentensemble.tools._json_parser:JsonParserTool",
    "web_scraper": "agentensemble.tools._web:WebScraperTool",
    "web_search": "agentensemble.tools._web:WebSearchTool",
    "human_input": "agentensemble.tools._human_input:HumanInputTool",
}
"""Built-in tool name -> the class it makes."""

_SEARCH_PROVIDERS = {
    "tavily": "agentensemble.tools._web:TavilySearch",
    "brave": "agentensemble.tools._web:BraveSearch",
    "serpapi": "agentensemble.tools._web:SerpApiSearch",
}
_PATH_SETTINGS = frozenset({"base_dir", "cwd"})
"""Settings that name a directory: relative ones are relative to the ensemble file."""


class ToolProblem(Exception):
    """A tool entry that cannot be made; the message says why."""


McpServers = Callable[[tuple[str | int, ...], object], object | None]
"""What an ``mcp`` entry becomes, given its path in the file and its `McpTools` (made from
its settings, not connected): the connected server, None to leave it out (checking a file
without running it), or a `ToolProblem` raised."""


def refuse_mcp(path: tuple[str | int, ...], server: object) -> object | None:
    """`McpServers` for `Ensemble.from_yaml`, which cannot hold a connection open."""
    raise ToolProblem(
        "an MCP server connects while the ensemble is in use: open the file with "
        "`async with Ensemble.open_yaml(path) as ensemble:` or run it with `agentensemble run`"
    )


def mcp_entries(entries: list[Any]) -> list[tuple[int, dict[str, Any]]]:
    """The ``mcp`` entries of a tools list: their index and settings."""
    found = []
    for index, entry in enumerate(entries):
        if isinstance(entry, dict) and list(entry) == ["mcp"] and isinstance(entry["mcp"], dict):
            found.append((index, entry["mcp"]))
    return found


def make_tool(
    entry: object,
    given: Mapping[str, object],
    base_dir: Path,
    *,
    path: tuple[str | int, ...] = (),
    mcp: McpServers = refuse_mcp,
) -> object | None:
    """The tool (or MCP server) an entry of a `tools` list names; None for an MCP server
    left out (see `McpServers`)."""
    name, settings = _name_and_settings(entry)
    if name in given:
        if settings:
            raise ToolProblem(f"'{name}' was given to from_yaml(tools=...) and takes no settings")
        return given[name]
    settings = {
        key: str(base_dir / value) if key in _PATH_SETTINGS and isinstance(value, str) else value
        for key, value in settings.items()
    }
    if name == "mcp":
        return mcp(path, mcp_server(settings))
    if name == "web_search":
        return _web_search(settings)
    if name in BUILTIN_TOOLS:
        return _call(import_object(BUILTIN_TOOLS[name]), settings, name)
    if ":" in name:
        try:
            target = import_object(name)
        except ImportFailed as error:
            raise ToolProblem(str(error)) from None
        if settings or isinstance(target, type):
            return _call(target, settings, name)
        imported: object = target
        return imported
    known = [*BUILTIN_TOOLS, *given, "mcp"]
    raise ToolProblem(
        f"unknown tool '{name}'{did_you_mean(name, known)} (built-in tools: "
        f"{', '.join(BUILTIN_TOOLS)}; give others by import path, package.module:name, or "
        "to from_yaml(tools=...))"
    )


def _name_and_settings(entry: object) -> tuple[str, dict[str, Any]]:
    if isinstance(entry, str):
        return entry, {}
    if not isinstance(entry, dict) or len(entry) != 1:
        keys = ", ".join(map(str, entry)) if isinstance(entry, dict) else type(entry).__name__
        raise ToolProblem(
            "a tool with settings is a mapping of one tool name to its settings "
            f"(file_read: {{base_dir: ./data}}), got: {keys}"
        )
    name, settings = next(iter(entry.items()))
    if settings is None:
        settings = {}
    if not isinstance(settings, dict):
        raise ToolProblem(f"the settings of '{name}' must be a mapping, got: {settings!r}")
    return str(name), settings


def mcp_server(settings: dict[str, Any]) -> object:
    """An `McpTools` (not connected) from an ``mcp`` entry's settings."""
    from agentensemble.tools import McpTools

    if ("command" in settings) == ("url" in settings):
        raise ToolProblem("an MCP server needs either command (a subprocess) or url")
    factory = McpTools.stdio if "command" in settings else McpTools.http
    return _call(factory, settings, "mcp")


def omit_mcp(path: tuple[str | int, ...], server: object) -> object | None:
    """`McpServers` for checking a file: the entry's settings are checked, the server is
    neither connected nor kept."""
    return None


def _web_search(settings: dict[str, Any]) -> object:
    provider_name = settings.pop("provider", None)
    if provider_name not in _SEARCH_PROVIDERS:
        raise ToolProblem(
            f"web_search needs provider: one of {', '.join(_SEARCH_PROVIDERS)}, "
            f"got: {provider_name!r}"
        )
    provider_settings: dict[str, Any] = {
        key: settings.pop(key) for key in ("api_key", "base_url") if key in settings
    }
    provider = _call(
        import_object(_SEARCH_PROVIDERS[provider_name]), provider_settings, "web_search"
    )
    return _call(
        import_object(BUILTIN_TOOLS["web_search"]), {"provider": provider, **settings}, "web_search"
    )


def _call(factory: Callable[..., Any], settings: dict[str, Any], name: str) -> object:
    """`factory(**settings)`, an unknown setting named with the ones it takes."""
    parameters = _keywords(factory)
    for key in settings:
        if parameters is not None and key not in parameters:
            raise ToolProblem(
                f"{name} has no setting '{key}'{did_you_mean(key, parameters)} "
                f"(it takes: {', '.join(parameters) or 'none'})"
            )
    return factory(**settings)


def _keywords(factory: Callable[..., Any]) -> list[str] | None:
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return None
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()):
        return None
    return [p.name for p in signature.parameters.values() if p.kind in kinds]
