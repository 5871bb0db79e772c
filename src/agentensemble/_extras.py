"""Lazy imports of optional dependencies with an install hint."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require", "require_installed"]


def require_installed(module: str, extra: str) -> None:
    """Raise `require`'s ImportError when `module` is not installed, without importing it
    (an SDK can take half a second to import; the first call imports it)."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ImportError(
            f'{module!r} is required for this feature: pip install "agentensemble[{extra}]"'
        )


def require(module: str, extra: str) -> ModuleType:
    """Import `module`, or raise ImportError naming the extra that provides it when it is not
    installed. A module that is installed but fails to import (a dependency of its own
    missing, a broken install) raises its own error: the extra would not help."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as error:
        if not _is_the_module(error, module):
            raise
        raise ImportError(
            f'{module!r} is required for this feature: pip install "agentensemble[{extra}]"'
        ) from error


def _is_the_module(error: ModuleNotFoundError, module: str) -> bool:
    """Whether `error` says `module` itself (or its top-level package) is not installed."""
    missing = error.name or ""
    top = module.split(".")[0]
    return missing in (module, top) or module.startswith(f"{missing}.")
