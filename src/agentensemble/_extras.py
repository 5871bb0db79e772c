"""Lazy imports of optional dependencies with an install hint."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require"]


def require(module: str, extra: str) -> ModuleType:
    """Import `module`, or raise ImportError naming the extra that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError as error:
        raise ImportError(
            f'{module!r} is required for this feature: pip install "agentensemble[{extra}]"'
        ) from error
