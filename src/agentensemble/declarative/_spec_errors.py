"""pydantic's validation errors as problems at the file, line and column of the value."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import ErrorDetails

from agentensemble.declarative._problems import did_you_mean, dotted, problem
from agentensemble.declarative._schema import (
    ENTRY_MODELS,
    EnsembleSpec,
    MemorySpec,
    ModelSettingsSpec,
    ModelSpec,
    RateLimitSpec,
    ReviewSpec,
)
from agentensemble.declarative._source import Path_, Source
from agentensemble.errors import FileProblem

__all__ = ["schema_problems"]

_NESTED: Mapping[str, type[BaseModel]] = {
    "llm": ModelSpec,
    "manager_llm": ModelSpec,
    "rate_limit": RateLimitSpec,
    "model_settings": ModelSettingsSpec,
    "review": ReviewSpec,
    "before_review": ReviewSpec,
    "memory": MemorySpec,
}

_FROM_CREWAI: Mapping[str, str] = {
    "backstory": "write background (CrewAI's backstory)",
    "output_pydantic": "write output_type: package.module:Model",
    "output_json": "write output_type: package.module:Model",
    "human_input": "write review: required",
    "async_execution": "write workflow: parallel on the ensemble (tasks run as a DAG)",
    "process": "write workflow: sequential, parallel or hierarchical",
    "max_iter": "write max_iterations",
    "max_rpm": "write rate_limit: {requests: N, period: 60}",
}

_KINDS: Mapping[str, str] = {
    "string_type": "must be text",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be a mapping (key: value lines)",
    "model_type": "must be a mapping (key: value lines)",
    "model_attributes_type": "must be a mapping (key: value lines)",
    "list_type": "must be a list",
    "string_pattern_mismatch": "must be an import path, package.module:Name",
}


def schema_problems(source: Source, error: Any, prefix: Path_ = ()) -> list[FileProblem]:
    """Each of a pydantic `ValidationError`'s errors (of the value at `prefix`), located in
    `source`."""
    found: dict[Path_, FileProblem] = {}
    start = source.data
    for part in prefix:
        start = start[part]
    for detail in error.errors(include_url=False):
        loc = detail["loc"]
        path = (*prefix, *_data_path(start, loc, missing=detail["type"] == "missing"))
        if path not in found:  # a union reports each member; the first says enough
            found[path] = _problem(source, path, detail)
    return [
        found[path]
        for path in found
        if not any(len(other) > len(path) and other[: len(path)] == path for other in found)
    ]  # a value that failed inside a union's mapping member: its inner problems say more


def _problem(source: Source, path: Path_, detail: ErrorDetails) -> FileProblem:
    kind = detail["type"]
    if kind == "extra_forbidden":
        name = str(path[-1])
        return problem(source.at(path, key=True), dotted(path), _unknown_key(name, path[:-1]))
    if kind == "missing":
        name = str(detail["loc"][-1])
        where = source.at(path[:-1], key=True)  # the entry that lacks it
        return problem(where, dotted(path), f"missing required key '{name}'")
    value = detail.get("input")
    message = _KINDS.get(kind) or _pydantic_message(detail)
    if path[:1] == ("inputs",) and len(path) == 2:
        message = "must be text, a number or true/false"
    return problem(source.at(path), dotted(path), f"{message}, got: {source.shown(path, value)}")


def _pydantic_message(detail: ErrorDetails) -> str:
    text = detail["msg"]
    for prefix in ("Input should be ", "String should "):
        if text.startswith(prefix):
            rest = text[len(prefix) :]
            return ("must " if prefix.startswith("String") else "must be ") + rest
    return text[:1].lower() + text[1:]


def _unknown_key(name: str, parent: Path_) -> str:
    translated = _FROM_CREWAI.get(name)
    fields = list(_model_of(parent).model_fields)
    hint = f"; {translated}" if translated else did_you_mean(name, fields)
    return f"unknown key '{name}'{hint}"


def _model_of(parent: Path_) -> type[BaseModel]:
    if not parent:
        return EnsembleSpec
    if len(parent) == 2 and parent[0] in ENTRY_MODELS:
        return ENTRY_MODELS[str(parent[0])]
    return _NESTED.get(str(parent[-1]), EnsembleSpec)


def _data_path(data: Any, loc: tuple[int | str, ...], *, missing: bool) -> Path_:
    """The part of `loc` that names places in `data` (pydantic adds union members' and
    validators' names, which are not keys)."""
    path: list[str | int] = []
    current = data
    for part in loc:
        if _holds(current, part):
            current = current[part]
            path.append(part)
    if missing and isinstance(loc[-1], str):
        path.append(loc[-1])
    return tuple(path)


def _holds(container: Any, part: int | str) -> bool:
    if isinstance(container, dict):
        return part in container
    return isinstance(container, list) and isinstance(part, int) and 0 <= part < len(container)
