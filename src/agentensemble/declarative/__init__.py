"""Ensembles declared in YAML (`Ensemble.from_yaml`), their JSON Schema, and converting a
CrewAI project's ``agents.yaml`` and ``tasks.yaml``.

Loading goes in three stages, each adding problems with the file, line and column: the
YAML is read with the position of every value (`_source`), each value's type is checked
against the file's schema (`_schema`, pydantic), and the entries are built into agents,
tasks and phases, checking the names they refer to and their import paths (`_build`).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel

from agentensemble.declarative._build import Builder, model_from_text
from agentensemble.declarative._problems import ProblemList
from agentensemble.declarative._reference import yaml_reference
from agentensemble.declarative._schema import ENTRY_MODELS, EnsembleSpec, ensemble_file_schema
from agentensemble.declarative._source import Path_, Source, read_source
from agentensemble.declarative._spec_errors import schema_problems
from agentensemble.declarative._tools import (
    McpServers,
    ToolProblem,
    make_tool,
    mcp_entries,
    omit_mcp,
    refuse_mcp,
)
from agentensemble.errors import AgentEnsembleError, EnsembleFileError, FileProblem

__all__ = [
    "DIRECTORY_FILES",
    "ensemble_file_schema",
    "load_ensemble",
    "model_from_text",
    "omit_mcp",
    "open_ensemble",
    "yaml_reference",
]

if TYPE_CHECKING:
    from agentensemble.tools import McpTools

E = TypeVar("E")
M = TypeVar("M", bound=BaseModel)

DIRECTORY_FILES = ("ensemble.yaml", "agents.yaml", "tasks.yaml")
"""What a directory holds: the ensemble's settings (optional), and its agents and tasks as
CrewAI projects keep them, each a mapping from a name to the entry."""


def load_ensemble(
    path: str | PathLike[str],
    make: Callable[..., E],
    *,
    tools: Mapping[str, object] | None = None,
    llm: object | None = None,
    environ: Mapping[str, str] | None = None,
    mcp: McpServers = refuse_mcp,
) -> E:
    """``make(**fields)`` for the ensemble the file (or directory) at `path` declares.
    Raises `EnsembleFileError` with every problem found. `mcp` says what the file's MCP
    servers become (by default they are refused: see `open_ensemble`)."""
    try:
        loaded = _Loaded.of(Path(path), environ)
        return loaded.build(make, tools=tools, llm=llm, mcp=mcp)
    except ProblemList as problems:
        raise EnsembleFileError(_in_file_order(problems.problems)) from None


@contextlib.asynccontextmanager
async def open_ensemble(
    path: str | PathLike[str],
    make: Callable[..., E],
    *,
    tools: Mapping[str, object] | None = None,
    llm: object | None = None,
    environ: Mapping[str, str] | None = None,
) -> AsyncIterator[E]:
    """`load_ensemble`, with the file's MCP servers connected until the block ends."""
    try:
        loaded = _Loaded.of(Path(path), environ)
        servers = loaded.mcp_servers()
    except ProblemList as problems:
        raise EnsembleFileError(_in_file_order(problems.problems)) from None
    async with contextlib.AsyncExitStack() as stack:
        for server in servers.values():
            await stack.enter_async_context(server)
        try:
            ensemble = loaded.build(
                make, tools=tools, llm=llm, mcp=lambda where, _: servers.get(where)
            )
        except ProblemList as problems:
            raise EnsembleFileError(_in_file_order(problems.problems)) from None
        yield ensemble


@dataclass(frozen=True, slots=True)
class _Loaded:
    """A file read and its entries checked one by one: ready to build."""

    source: Source
    spec: EnsembleSpec
    declared: dict[str, list[str]]
    problems: list[FileProblem]

    @classmethod
    def of(cls, path: Path, environ: Mapping[str, str] | None) -> _Loaded:
        source = _read(path, environ)
        return cls(source, *_checked(source))

    def build(
        self,
        make: Callable[..., E],
        *,
        tools: Mapping[str, object] | None,
        llm: object | None,
        mcp: McpServers,
    ) -> E:
        builder = Builder(
            self.source, self.spec, dict(tools or {}), llm, list(self.problems), mcp, self.declared
        )
        arguments = builder.ensemble_arguments()
        if builder.problems:
            raise ProblemList(builder.problems)
        made = builder.construct((), lambda: make(**arguments))
        if builder.problems or made is None:
            raise ProblemList(builder.problems)
        return made

    def mcp_servers(self) -> dict[Path_, McpTools]:
        """Every ``mcp`` entry of the file's tools lists, by its path, as an `McpTools`
        not yet connected (an entry that cannot be made is left to the build to report)."""
        servers: dict[Path_, McpTools] = {}
        base_dir = Path(self.source.file).resolve().parent
        owners = [("agents", name, spec.tools) for name, spec in self.spec.agents.items()]
        owners += [("tasks", name, spec.tools) for name, spec in self.spec.tasks.items()]
        for kind, name, entries in owners:
            for index, settings in mcp_entries(entries):
                where: Path_ = (kind, name, "tools", index)
                with contextlib.suppress(ToolProblem, AgentEnsembleError, ImportError):
                    made = make_tool(
                        {"mcp": settings}, {}, base_dir, path=where, mcp=lambda _, server: server
                    )
                    servers[where] = cast("McpTools", made)
        return servers


def _read(path: Path, environ: Mapping[str, str] | None) -> Source:
    if not path.is_dir():
        return read_source(path, environ)
    parts = {name: path / name for name in DIRECTORY_FILES if (path / name).is_file()}
    if "agents.yaml" not in parts and "tasks.yaml" not in parts and "ensemble.yaml" not in parts:
        raise ProblemList(
            [FileProblem(str(path), 0, 0, "", f"holds none of {', '.join(DIRECTORY_FILES)}")]
        )
    sources = {name: read_source(file, environ) for name, file in parts.items()}
    combined = sources.get("ensemble.yaml") or Source(str(parts.get("tasks.yaml", path)), {})
    if not isinstance(combined.data, dict):
        return combined  # the schema check reports it
    for name in ("agents", "tasks"):
        part = sources.get(f"{name}.yaml")
        if part is None:
            continue
        if name in combined.data:
            raise ProblemList(
                [
                    FileProblem(
                        combined.file,
                        *combined.values[(name,)],
                        name,
                        f"{name} are declared here and in {part.file}: keep one",
                    )
                ]
            )
        combined.include(name, part)
    return combined


def _checked(source: Source) -> tuple[EnsembleSpec, dict[str, list[str]], list[FileProblem]]:
    """The file's settings and each of its entries checked on their own, so that one bad
    task does not hide the problems of the others; raises when the settings fail."""
    data = source.data
    if not isinstance(data, dict):
        kind = type(data).__name__
        raise ProblemList(
            [
                FileProblem(
                    source.file, 1, 1, "", f"must be a mapping (agents:, tasks:, ...), got: {kind}"
                )
            ]
        )
    problems = list(source.problems)
    settings = {
        key: value
        for key, value in data.items()
        if key not in ENTRY_MODELS and not key.startswith("x-")  # x-*: a home for anchors
    }
    entries: dict[str, dict[str, Any]] = {}
    declared: dict[str, list[str]] = {}
    for kind, model in ENTRY_MODELS.items():
        raw = data.get(kind)
        if raw is None:
            continue
        if not isinstance(raw, dict):
            settings[kind] = raw  # the settings' check reports it
            continue
        declared[kind] = [str(name) for name in raw]
        entries[kind] = {}
        for name, value in raw.items():
            checked = _validated(source, model, value, (kind, str(name)), problems)
            if checked is not None:
                entries[kind][str(name)] = checked
    spec = _validated(source, EnsembleSpec, settings, (), problems)
    problems = _without_echoes(problems, source.problems)
    if spec is None:
        raise ProblemList(problems)
    return spec.model_copy(update=entries), declared, problems


def _without_echoes(problems: list[FileProblem], first: list[FileProblem]) -> list[FileProblem]:
    """`problems` without the schema's complaints about values reading already reported
    (a value that could not be read is None, which the schema then refuses again)."""
    reported = {item.field for item in first}
    return [
        item
        for item in problems
        if item in first or not any(_within(item.field, field) for field in reported)
    ]


def _within(field: str, outer: str) -> bool:
    return field == outer or field.startswith((f"{outer}.", f"{outer}["))


def _validated(
    source: Source, model: type[M], value: object, prefix: Path_, problems: list[FileProblem]
) -> M | None:
    import pydantic

    try:
        return model.model_validate(value)
    except pydantic.ValidationError as error:
        problems.extend(schema_problems(source, error, prefix))
        return None


def _in_file_order(problems: tuple[FileProblem, ...]) -> list[FileProblem]:
    unique = list(dict.fromkeys(problems))
    return sorted(unique, key=lambda item: (item.file, item.line, item.column))
