"""Objects named by import path, ``package.module:Name``."""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["ImportFailed", "import_object"]


class ImportFailed(Exception):
    """The path does not name an importable object; the message says why."""


def import_object(path: str) -> Any:
    """The object `path` names (``package.module:Name``, ``Name`` may be dotted)."""
    module_name, sep, attribute = path.partition(":")
    if not sep or not module_name or not attribute:
        raise ImportFailed(f"'{path}' is not an import path (write package.module:Name)")
    try:
        target: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        raise ImportFailed(f"cannot import '{path}': no module named '{error.name}'") from None
    except Exception as error:  # the module's own code failed while importing
        raise ImportFailed(
            f"cannot import '{path}': importing {module_name} raised "
            f"{type(error).__name__}: {error}"
        ) from None
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise ImportFailed(f"cannot import '{path}': {module_name} has no attribute '{part}'")
        target = getattr(target, part)
    return target
