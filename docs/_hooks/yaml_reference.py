"""An mkdocs hook: the YAML reference page, generated from the ensemble file's JSON Schema
at every build (so it cannot drift from the code)."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

PAGE = "reference/yaml.md"


def on_files(files: Files, config: Any) -> Files:
    from agentensemble.declarative import yaml_reference

    files.append(File.generated(config, PAGE, content=yaml_reference()))
    return files
