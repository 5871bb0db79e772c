"""`{variable}` substitution in task text, with `{{variable}}` as an escape."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping

from agentensemble.errors import PromptTemplateError

__all__ = ["resolve_template", "template_variables"]

_VARIABLE = re.compile(r"\{(\w+)\}", re.ASCII)
_ESCAPED = re.compile(r"\{\{(\w+)\}\}", re.ASCII)


def template_variables(template: str) -> list[str]:
    """Unescaped variable names in order of first appearance, without duplicates."""
    unescaped = _ESCAPED.sub("", template)
    return list(dict.fromkeys(_VARIABLE.findall(unescaped)))


def resolve_template(template: str, inputs: Mapping[str, str | None] | None) -> str:
    """Substitute every ``{name}`` from `inputs`; ``{{name}}`` becomes a literal ``{name}``.

    Raises `PromptTemplateError` listing every missing variable. Text that is not a
    ``{word}`` placeholder (``{}``, ``{a b}``, JSON) is left untouched, and substituted values
    are never scanned again.
    """
    if not template.strip():
        return template
    values = inputs or {}
    sentinel = f"\x00{uuid.uuid4().hex}\x00"
    escaped: list[str] = []

    def hide(match: re.Match[str]) -> str:
        escaped.append(match.group(1))
        return f"{sentinel}{len(escaped) - 1}{sentinel}"

    hidden = _ESCAPED.sub(hide, template)
    names = list(dict.fromkeys(_VARIABLE.findall(hidden)))
    missing = [name for name in names if name not in values]
    if missing:
        raise PromptTemplateError(missing, template)
    substituted = _VARIABLE.sub(lambda match: values[match.group(1)] or "", hidden)
    restore = re.compile(re.escape(sentinel) + r"(\d+)" + re.escape(sentinel))
    return restore.sub(lambda match: "{" + escaped[int(match.group(1))] + "}", substituted)
