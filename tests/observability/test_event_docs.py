"""docs/observability.md lists every event with its fields: the list is checked against the
`Event` union, so a new kind of event (or field) that is not documented fails here."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

from agentensemble.observability import _events, _trace
from agentensemble.observability._events import EVENT_TYPES, EventBase, TaskEvent

DOC = Path(__file__).parents[2] / "docs" / "observability.md"
START, END = "<!-- events:start -->", "<!-- events:end -->"


def _type_name(hint: Any) -> str:
    """A field's type, short: ``str?`` for ``str | None``, ``A/B`` for a literal."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return "/".join(str(arg) for arg in args)
    if origin in (Union, UnionType) and type(None) in args:
        rest = [arg for arg in args if arg is not type(None)]
        return f"{_type_name(rest[0])}?"
    if origin is tuple:
        return f"tuple[{_type_name(args[0])}]"
    if origin is dict:
        return f"dict[{_type_name(args[0])}, {_type_name(args[1])}]"
    if origin in (Union, UnionType):
        return "message"
    return getattr(hint, "__name__", repr(hint))


def _own_fields(kind: type[Any]) -> list[str]:
    inherited = {field.name for field in dataclasses.fields(TaskEvent)}
    base = {field.name for field in dataclasses.fields(EventBase)}
    common = inherited if issubclass(kind, TaskEvent) else base
    hints = get_type_hints(kind, {**vars(_events), **vars(_trace)})
    return [
        f"`{field.name}`: {_type_name(hints[field.name])}"
        for field in dataclasses.fields(kind)
        if field.name not in common and field.name != "type"
    ]


def event_table() -> str:
    """The documented list, made from the union."""
    rows = ["| `type` | class | listener method | fields (besides the common ones) |"]
    rows.append("|---|---|---|---|")
    for kind in EVENT_TYPES:
        wire = kind.__dataclass_fields__["type"].default
        scope = " (task)" if issubclass(kind, TaskEvent) else ""
        rows.append(
            f"| `{wire}` | `{kind.__name__}`{scope} | `{kind.listener_method}` | "
            f"{', '.join(_own_fields(kind))} |"
        )
    return "\n".join(rows)


def test_the_event_list_in_the_docs_matches_the_union() -> None:
    text = DOC.read_text()
    documented = text.split(START, 1)[1].split(END, 1)[0].strip()
    expected = event_table()
    assert documented == expected, f"docs/observability.md should list:\n{expected}"
