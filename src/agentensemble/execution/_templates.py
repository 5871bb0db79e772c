"""`{variable}` substitution in task text, with `{{variable}}` as an escape."""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentensemble.errors import PromptTemplateError

__all__ = ["escape_template", "resolve_template", "template_variables"]

# One left-to-right pass: an escaped `{{name}}` is matched before the `{name}` inside it. A
# name starts with a letter or `_` (any script) and goes on with letters, digits, `_`, `-`
# and `.`: `{thème}`, `{my-var}` and `{user.name}` are variables (never left silently).
_NAME = r"[^\W\d][\w.-]*"
_PLACEHOLDER = re.compile(rf"\{{\{{({_NAME})\}}\}}|\{{({_NAME})\}}")


def template_variables(template: str) -> list[str]:
    """Unescaped variable names in order of first appearance, without duplicates."""
    return list(dict.fromkeys(name for _, name in _PLACEHOLDER.findall(template) if name))


def escape_template(text: str) -> str:
    """`text` escaped so that it resolves to itself: every ``{name}`` in it is kept literal
    (for data, such as a map item, put into a task's text)."""
    if "{" not in text:
        return text
    return _PLACEHOLDER.sub(lambda match: "{" + match.group(0) + "}", text)


def resolve_template(template: str, inputs: Mapping[str, str | None] | None) -> str:
    """Substitute every ``{name}`` from `inputs`; ``{{name}}`` becomes a literal ``{name}``.

    Raises `PromptTemplateError` listing every missing variable. A name is a letter or ``_``
    followed by letters, digits, ``_``, ``-`` or ``.`` (``{thème}``, ``{my-var}``,
    ``{user.name}``); other braces (``{}``, ``{a b}``, ``{1}``, JSON) are left untouched, and
    substituted values are never scanned again.
    """
    if "{" not in template:
        return template
    values = inputs or {}
    missing = [name for name in template_variables(template) if name not in values]
    if missing:
        raise PromptTemplateError(missing, template)

    def replace(match: re.Match[str]) -> str:
        escaped, name = match.groups()
        return "{" + escaped + "}" if escaped else values[name] or ""

    return _PLACEHOLDER.sub(replace, template)
