"""The ensemble file's reference as Markdown, written from its JSON Schema (the docs site
builds its YAML reference page with it)."""

from __future__ import annotations

import json
from typing import Any

from agentensemble.declarative._schema import ensemble_file_schema

__all__ = ["yaml_reference"]

_SECTIONS = {
    "EnsembleSpec": "The file",
    "AgentSpec": "An entry of `agents`",
    "TaskSpec": "An entry of `tasks`",
    "PhaseSpec": "An entry of `phases`",
    "ModelSpec": "`llm` as a mapping",
    "ModelSettingsSpec": "`model_settings`",
    "RateLimitSpec": "`rate_limit`",
    "ReviewSpec": "`review` and `before_review` as a mapping",
    "MemorySpec": "`memory` as a mapping",
}


_KINDS = {"string": "text", "integer": "whole number", "number": "number", "boolean": "bool"}


def yaml_reference() -> str:
    """Every key of an ensemble file: its type, default and meaning, one table per kind of
    entry."""
    schema = ensemble_file_schema()
    definitions: dict[str, Any] = schema.get("$defs", {})
    lines = [
        "# YAML reference",
        "",
        "Generated from the ensemble file's JSON Schema (`agentensemble schema` prints it).",
        "Keys are the Python field names; unknown keys are errors. See",
        "[YAML and the command line](../yaml-and-cli.md) for examples.",
    ]
    for name, title in _SECTIONS.items():
        model = schema if name == "EnsembleSpec" else definitions.get(name)
        if model is None:
            continue
        lines += ["", f"## {title}", "", model.get("description", "").replace("\n", " "), ""]
        lines += ["| key | type | default | |", "|---|---|---|---|"]
        required = set(model.get("required", ()))
        for key, field in model.get("properties", {}).items():
            default = "required" if key in required else _default(field)
            description = field.get("description", "")
            lines.append(f"| `{key}` | {_type(field)} | {default} | {description} |")
    return "\n".join(lines) + "\n"


def _type(field: dict[str, Any]) -> str:
    if "$ref" in field:
        name = field["$ref"].rsplit("/", 1)[-1]
        title = _SECTIONS.get(name, name)
        return f"{title[:1].lower()}{title[1:]} (below)"
    if "enum" in field:
        return " \\| ".join(f"`{value}`" for value in field["enum"])
    if "const" in field:
        return f"`{field['const']}`"
    if "anyOf" in field:
        options = [_type(option) for option in field["anyOf"] if option.get("type") != "null"]
        return " or ".join(options)
    kind = str(field.get("type", "any"))
    if kind == "array":
        return f"list of {_type(field.get('items', {}))}"
    if kind == "object":
        values = field.get("additionalProperties")
        return f"mapping of name to {_type(values)}" if isinstance(values, dict) else "mapping"
    if "pattern" in field:
        return "import path `package.module:Name`"
    return _KINDS.get(kind, kind)


def _default(field: dict[str, Any]) -> str:
    if "default" not in field:
        return ""
    value = field["default"]
    return "" if value is None else f"`{json.dumps(value)}`"
