"""Reading a YAML file into plain data that remembers where each value was written.

PyYAML composes the file into nodes that carry their line and column; walking the nodes
ourselves (instead of `yaml.safe_load`) keeps those positions for every key and value,
refuses duplicate keys (PyYAML keeps the last silently) and substitutes ``${VARIABLE}``
references from the environment while remembering the text as written, so a message
about a substituted value shows the reference, never the secret.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentensemble.declarative._problems import Located, ProblemList, dotted, problem
from agentensemble.errors import FileProblem

__all__ = ["Source", "read_source"]

Path_ = tuple[str | int, ...]

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(slots=True)
class Source:
    """One YAML file's data and where each part of it was written."""

    file: str
    data: Any
    values: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    """Path -> (line, column), 1-based, of each value."""
    keys: dict[Path_, tuple[int, int]] = field(default_factory=dict)
    """Path -> (line, column) of the key that holds each mapping entry."""
    written: dict[Path_, str] = field(default_factory=dict)
    """Path -> the text as written, for values that referenced environment variables."""
    problems: list[FileProblem] = field(default_factory=list)
    """Duplicate keys and unset variables, found while reading (the rest still loads)."""
    files: dict[Path_, str] = field(default_factory=dict)
    """Top-level key -> the file it came from, when it is not `file` (a directory's parts)."""

    def at(self, path: Path_, *, key: bool = False) -> Located:
        """Where `path` was written: its key (for unknown or misnamed keys) or its value;
        the nearest enclosing part when the path itself is absent."""
        places = self.keys if key else self.values
        file = self.file_of(path)
        probe = path
        while probe:
            if probe in places:
                return Located(file, *places[probe])
            if probe in self.values:
                return Located(file, *self.values[probe])
            probe = probe[:-1]
        return Located(file, *self.values.get((), (1, 1)))

    def include(self, name: str, part: Source) -> None:
        """Take `part` (``agents.yaml``, say) as this source's key `name`, keeping the
        file each position came from."""
        self.data[name] = part.data
        for own, theirs in ((self.values, part.values), (self.keys, part.keys)):
            for path, place in theirs.items():
                own[(name, *path)] = place
        self.written.update({(name, *path): text for path, text in part.written.items()})
        self.files[(name,)] = part.file
        self.problems.extend(part.problems)

    def file_of(self, path: Path_) -> str:
        """The file `path` was written in."""
        return self.files.get(path[:1], self.file)

    def shown(self, path: Path_, value: object) -> str:
        """`value` as a message may show it: a substituted value as its reference."""
        return repr(self.written[path]) if path in self.written else repr(value)


def read_source(path: Path, environ: Mapping[str, str] | None = None) -> Source:
    """The YAML file at `path` as data with positions; raises `ProblemList` (file, line and
    column) for a file that cannot be read or parsed. Duplicate keys and unset variables
    are in the source's `problems`."""
    import yaml

    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ProblemList([problem(Located(file, 0, 0), "", "no such file")]) from None
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise ProblemList([problem(Located(file, 0, 0), "", f"cannot read: {reason}")]) from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as error:
        raise ProblemList([_syntax_problem(file, error)]) from None
    finally:
        loader.dispose()
    source = Source(file, None)
    if node is None:
        source.data = {}
        return source
    walker = _Walker(source, loader, os.environ if environ is None else environ)
    source.data = walker.value(node, ())
    source.problems = walker.problems
    return source


def _syntax_problem(file: str, error: Any) -> FileProblem:
    mark = error.problem_mark or error.context_mark
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
    what = " ".join(part for part in (error.context, error.problem) if part)
    if "flow mapping" in what or "flow sequence" in what:
        what += " (text with {placeholders} inside { } or [ ] must be quoted: 'Research {topic}')"
    return problem(Located(file, line, column), "", f"not valid YAML: {what}")


class _Walker:
    """Turns composed nodes into dicts, lists and scalars, recording positions."""

    def __init__(self, source: Source, loader: Any, environ: Mapping[str, str]) -> None:
        self.source = source
        self.loader = loader
        self.environ = environ
        self.problems: list[FileProblem] = []

    def value(self, node: Any, path: Path_) -> Any:
        import yaml

        self.source.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path)
        if isinstance(node, yaml.SequenceNode):
            return [self.value(item, (*path, index)) for index, item in enumerate(node.value)]
        scalar = self.loader.construct_object(node)
        if isinstance(scalar, str) and "$" in scalar:
            return self._substituted(scalar, path)
        return scalar

    def _mapping(self, node: Any, path: Path_) -> dict[Any, Any]:
        self.loader.flatten_mapping(node)  # YAML merge keys (<<: *defaults)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = self.loader.construct_object(key_node)
            here = (*path, str(key))
            where = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in result:
                first_line = self.source.keys[here][0]
                self.problems.append(
                    problem(
                        Located(self.source.file, *where),
                        dotted(here),
                        f"duplicate key '{key}' (first written on line {first_line})",
                    )
                )
                continue
            self.source.keys[here] = where
            result[key] = self.value(value_node, here)
        return result

    def _substituted(self, text: str, path: Path_) -> str:
        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name is None:  # "$$" writes one "$"
                return "$"
            value = self.environ.get(name)
            if value is None:
                self.problems.append(
                    problem(
                        self.source.at(path),
                        dotted(path),
                        f"environment variable {name} is not set",
                    )
                )
                return ""
            return value

        substituted = _REFERENCE.sub(replace, text)
        if substituted != text:
            self.source.written[path] = text
        return substituted
