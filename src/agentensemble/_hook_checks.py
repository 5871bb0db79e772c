"""`check_hooks`: what `Ensemble(hooks=...)` and `RunOptions(hooks=...)` accept (the hook
types themselves load with `agentensemble.hooks`, on first use)."""

from __future__ import annotations

from agentensemble._checks import as_tuple, unknown_methods
from agentensemble.errors import ValidationError

__all__ = ["HOOK_METHODS", "check_hooks"]

HOOK_METHODS = ("before_model_call", "before_tool_call")
"""The methods a hook may have."""


def check_hooks(hooks: object, field: str) -> tuple[object, ...]:
    """`hooks` as a tuple, each with at least one hook method and no misspelt one (a
    ``before_*`` method no call uses would silently never run); else a `ValidationError`
    naming `field`, the index and the value."""
    checked = as_tuple(hooks, field)
    known = " or ".join(HOOK_METHODS)
    for index, hook in enumerate(checked):
        misspelt = unknown_methods(hook, "before_", HOOK_METHODS)
        if misspelt:
            raise ValidationError(
                f"{field}[{index}] defines {', '.join(misspelt)}, which is not a hook "
                f"method (known: {', '.join(HOOK_METHODS)}), got: {hook!r}"
            )
        if not any(callable(getattr(type(hook), name, None)) for name in HOOK_METHODS):
            raise ValidationError(f"{field}[{index}] must have a {known} method, got: {hook!r}")
    return checked
