"""`{variable}` substitution in task text, with `{{variable}}` as an escape."""

from __future__ import annotations

import re
from collections.abc import Mapping

from agentensemble._logging import get_logger
from agentensemble.errors import PromptTemplateError

__all__ = ["escape_template", "resolve_template", "template_variables"]

logger = get_logger("agentensemble.templates")

# One left-to-right pass: an escaped `{{name}}` is matched before the `{name}` inside it. A
# name starts with a letter or `_` (any script: `{thème}`) and goes on with letters, digits
# and `_`; a name with `-` or `.` (`{my-var}`, `{user.name}`) is a variable when an input has
# that name, and otherwise stays as it is (code, dates, other template languages), with a
# warning, never silently.
_NAME = r"[^\W\d]\w*"
_DOTTED = r"[^\W\d][\w.-]*"
_PLACEHOLDER = re.compile(rf"\{{\{{({_NAME})\}}\}}|\{{({_DOTTED})\}}")


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
    followed by letters, digits or ``_`` (``{thème}`` too); a name with ``-`` or ``.``
    (``{my-var}``, ``{user.name}``) is substituted when an input has it and otherwise kept,
    with a warning. Other braces (``{}``, ``{a b}``, ``{1}``, JSON) are left untouched, and
    substituted values are never scanned again.
    """
    if "{" not in template:
        return template
    values = inputs or {}
    names = template_variables(template)
    missing = [name for name in names if name not in values and _is_plain(name)]
    if missing:
        raise PromptTemplateError(missing, template)
    kept = [name for name in names if name not in values]
    if kept:
        logger.warning(
            "Template text %s kept as it is: no input has %s (give one, or write {{%s}})",
            ", ".join(f"{{{name}}}" for name in kept),
            "that name" if len(kept) == 1 else "those names",
            kept[0],
        )

    def replace(match: re.Match[str]) -> str:
        escaped, name = match.groups()
        if escaped:
            return "{" + escaped + "}"
        return values[name] or "" if name in values else match.group(0)

    return _PLACEHOLDER.sub(replace, template)


def _is_plain(name: str) -> bool:
    """A name without `-` or `.`: always a variable."""
    return "-" not in name and "." not in name
