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
import reprlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentensemble.declarative._problems import Located, ProblemList, dotted, problem
from agentensemble.errors import FileProblem

__all__ = ["Source", "read_source"]

Path_ = tuple[str | int, ...]

_REFERENCE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_VALUES = 100_000
"""Most values a file may hold once its aliases are expanded (a few lines of nested
aliases can otherwise expand to millions)."""
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 80
_SHORT.maxlist = _SHORT.maxdict = 6


class _TooLarge(Exception):
    """The file expands past `MAX_VALUES`."""


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
        """`value` as a message may show it: a substituted value as its reference, a long
        one shortened."""
        return repr(self.written[path]) if path in self.written else _SHORT.repr(value)


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
    source = Source(file, None)
    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as error:  # a character YAML does not allow
        line = text.count("\n", 0, error.position) + 1
        column = error.position - text.rfind("\n", 0, error.position)
        message = f"not valid YAML: character #x{error.character:04x} is not allowed"
        raise ProblemList([problem(Located(file, line, column), "", message)]) from None
    try:
        node = loader.get_single_node()
        walker = _Walker(source, loader, os.environ if environ is None else environ)
        source.data = {} if node is None else walker.value(node, ())
    except yaml.YAMLError as error:
        raise ProblemList([_syntax_problem(file, error)]) from None
    except _TooLarge:
        message = f"holds more than {MAX_VALUES} values once its aliases are expanded"
        raise ProblemList([problem(Located(file, 0, 0), "", message)]) from None
    finally:
        loader.dispose()
    source.problems = walker.problems
    return source


def _syntax_problem(file: str, error: Any) -> FileProblem:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
    parts = (getattr(error, "context", None), getattr(error, "problem", None))
    what = " ".join(part for part in parts if part) or str(error)
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
        self._open: set[int] = set()
        """The nodes being walked (an alias back to one of them is a cycle)."""
        self._count = 0

    def value(self, node: Any, path: Path_) -> Any:
        import yaml

        self._count += 1
        if self._count > MAX_VALUES:
            raise _TooLarge
        self.source.values[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if id(node) in self._open:
            self._fail(path, "an alias refers to a mapping or list that contains it")
            return None
        if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
            self._open.add(id(node))
            try:
                if isinstance(node, yaml.MappingNode):
                    return self._mapping(node, path)
                return [self.value(item, (*path, index)) for index, item in enumerate(node.value)]
            finally:
                self._open.discard(id(node))
        return self._scalar(node, path)

    def _scalar(self, node: Any, path: Path_) -> Any:
        import yaml

        try:
            scalar = self.loader.construct_object(node)
        except (yaml.YAMLError, ValueError, TypeError) as error:
            what = getattr(error, "problem", None) or str(error)
            self._fail(path, f"not a value: {what}")
            return None
        if isinstance(scalar, str) and "$" in scalar:
            return self._substituted(scalar, path)
        return scalar

    def _mapping(self, node: Any, path: Path_) -> dict[str, Any]:
        """The mapping, keys as text; explicit keys override merged ones (``<<: *base``)
        and may not repeat."""
        explicit = [pair for pair in node.value if pair[0].tag != "tag:yaml.org,2002:merge"]
        self.loader.flatten_mapping(node)
        merged = node.value[: len(node.value) - len(explicit)]
        result: dict[str, Any] = {}
        for key_node, value_node in merged:
            key = self._key(key_node, path)
            if key is not None and key not in result:
                result[key] = self.value(value_node, (*path, key))
        written: set[str] = set()
        for key_node, value_node in explicit:
            key = self._key(key_node, path)
            if key is None:
                continue
            here = (*path, key)
            where = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            if key in written:
                first_line = self.source.keys[here][0]
                self.problems.append(
                    problem(
                        Located(self.source.file, *where),
                        dotted(here),
                        f"duplicate key '{key}' (first written on line {first_line})",
                    )
                )
                continue
            written.add(key)
            self.source.keys[here] = where
            result[key] = self.value(value_node, here)
        return result

    def _key(self, node: Any, path: Path_) -> str | None:
        """A key as text (names are text: ``1:`` is the name ``"1"``); None for a key that
        is a list or a mapping."""
        import yaml

        if not isinstance(node, yaml.ScalarNode):
            where = (node.start_mark.line + 1, node.start_mark.column + 1)
            self.problems.append(
                problem(Located(self.source.file, *where), dotted(path), "a key must be a name")
            )
            return None
        return str(node.value)

    def _fail(self, path: Path_, message: str) -> None:
        self.problems.append(problem(self.source.at(path), dotted(path), message))

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
