"""Find the JSON in a model's answer and validate it as the task's output type (BEHAVIOUR 5.1,
5.2).

Models wrap JSON in markdown fences and prose, leave trailing commas, stop mid-object or
answer with a bare value. They also reason first (``<think>...</think>``), write a draft and
then "Wait, corrected:", show an example while refusing, echo the template (``"<str>"``),
and write Python literals or comments. So: reasoning blocks are dropped; `json_candidates`
yields every plausible JSON text, the last first (fenced blocks, the whole answer, then each
balanced ``{...}`` or ``[...]`` span in the prose: nested objects survive); a candidate
introduced as an example ("for example", "would look like") is not an answer; one whose text
values are placeholders is not either; a candidate that is not JSON is tried again without
trailing commas and comments, then as a Python literal. `parse_answer` takes the first
candidate that validates (issue 27, item 22: the reference takes the first in the text).
"""

from __future__ import annotations

import ast
import contextlib
import enum
import json
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from agentensemble._checks import describe_validation_error

if TYPE_CHECKING:
    from agentensemble._output_types import OutputSpec

__all__ = ["ParseFailure", "json_candidates", "parse_answer"]

_FENCE = re.compile(r"```[^\n`]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_STRUCTURE = re.compile(r'[{}\[\]"\\]')
_TRAILING_COMMA = re.compile(r',(\s*[}\]])|"(?:[^"\\]|\\.)*(?:"|\Z)', re.DOTALL)
_MAX_SPANS = 64
"""Balanced spans tried per answer (prose with thousands of brackets stays cheap)."""
_MAX_RESCANS = 8
"""Unclosed spans rescanned from inside per answer (each rescan reads the rest of the text)."""
_SHOWN = 200
_REASONING = re.compile(
    r"<(think|thinking|scratchpad|reasoning)>.*?(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE
)
_EXAMPLE = re.compile(
    r"(for example|e\.g\.|such as|would look like|should look like|example:|an example)"
    r"[^.\n]*$",
    re.IGNORECASE,
)
"""Words that introduce what follows as an example, in the same sentence. Deliberately
narrow: "in JSON format:" or "using your template:" introduce real answers."""
_CONTEXT = 80
"""Characters before a candidate searched for words that make it an example."""
_PLACEHOLDER = re.compile(
    r'"(<[^"<>]{1,40}>|\.\.\.|…|(?:your|the) [^"]{1,30} here|'
    r'string|str|integer|int|number|float|boolean|bool|text|value)"(?!\s*:)',
    re.IGNORECASE,
)
"""A JSON string value (not a key) that is a placeholder of a format."""
_PLACEHOLDER_HINTS = (
    '"<',
    '..."',
    '…"',
    ' here"',
    *(
        f'"{name}"'
        for name in (
            "string",
            "str",
            "integer",
            "int",
            "number",
            "float",
            "boolean",
            "bool",
            "text",
            "value",
        )
    ),
)
"""Texts one of which a candidate holds when it may hold a placeholder (searching for these
is several times faster than the pattern, and almost no answer holds one)."""
_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.DOTALL)


class ParseFailure(ValueError):
    """The answer holds no value of the output type; the message says why."""


def parse_answer(raw: str, spec: OutputSpec) -> Any:
    """The value of `spec`'s type found in `raw`; raises `ParseFailure` with the reference's
    messages ("LLM produced an empty response", "Could not find valid JSON in response: ...",
    "JSON could not be deserialized as {Type}: ...")."""
    text = raw.strip()
    if not text:
        raise ParseFailure("LLM produced an empty response")
    answer = _REASONING.sub("", text).strip() if "<" in text else text
    if not answer:
        raise ParseFailure(f"Could not find valid JSON in response: {_shown(text)}")
    try:
        return _parse(answer, spec)
    except ParseFailure:
        loose = _loose_scalar(answer, spec.type_)
        if loose is _NO_VALUE:
            raise
        return loose


def _shown(text: str) -> str:
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "..."


_NO_VALUE = object()
_TRUE = frozenset({"true", "yes", "y", "1"})
_FALSE = frozenset({"false", "no", "n", "0"})
_DECORATION = re.compile(r"^[\s*_`\"'.:]+|[\s*_`\"'.!]+$")


def _loose_scalar(text: str, type_: Any) -> Any:
    """An enum member or a bool as people write it: ``HIGH``, ``High``, ``**high**``, a
    member's name, ``Priority: high`` (one member named in the text); ``True``, ``yes``,
    ``No.``. `_NO_VALUE` when the text is none of these."""
    cleaned = _DECORATION.sub("", text).casefold()
    if type_ is bool:
        if cleaned in _TRUE:
            return True
        return False if cleaned in _FALSE else _NO_VALUE
    if not (isinstance(type_, type) and issubclass(type_, enum.Enum)):
        return _NO_VALUE
    spellings = {
        spelling: member
        for member in type_
        for spelling in (member.name.casefold(), str(member.value).casefold())
    }
    if cleaned in spellings:
        return spellings[cleaned]
    named = {
        member
        for spelling, member in spellings.items()
        if re.search(rf"(?<!\w){re.escape(spelling)}(?!\w)", cleaned)
    }
    return named.pop() if len(named) == 1 else _NO_VALUE


def _parse(text: str, spec: OutputSpec) -> Any:
    first_failure: ParseFailure | None = None
    shaped_failure: ParseFailure | None = None  # from a candidate of the expected shape
    examples = 0
    opening = _opening_of(spec)
    for candidate, start in _candidates(text):
        if start > 0 and _EXAMPLE.search(text[max(0, start - _CONTEXT) : start]):
            examples += 1
            continue
        try:
            return _validate(candidate, spec)
        except ParseFailure as failure:
            first_failure = first_failure or failure
            if shaped_failure is None and candidate[0] == opening:
                shaped_failure = failure
    if spec.text_is_value:
        return _validate_text(text, spec)
    if first_failure is not None:
        raise shaped_failure or first_failure
    if examples:
        raise ParseFailure(
            f"Could not find valid JSON in response: only an example of one: {_shown(text)}"
        )
    for scalar in (text, *_fenced_blocks(text)):  # a bare scalar: 42, true, "quoted"
        with contextlib.suppress(ValueError):
            return spec.adapter.validate_json(scalar)
    raise ParseFailure(f"Could not find valid JSON in response: {_shown(text)}")


def json_candidates(text: str) -> Iterator[str]:
    """Every plausible JSON text in `text`, best first, each once: see `_candidates`."""
    return (candidate for candidate, _ in _candidates(text))


def _candidates(text: str) -> Iterator[tuple[str, int]]:
    """Every plausible JSON text in `text` with where it starts (0: the whole text), best
    first, each once: fenced blocks, the last first; the whole text; balanced spans in
    prose, the last first; and finally an unclosed one (so that a truncated answer fails
    with the parser's "EOF" detail rather than "no JSON")."""
    seen: set[str] = set()
    for block, start in reversed(_fences_with_starts(text)):
        if _looks_like_json(block) and block not in seen:
            seen.add(block)
            yield block, start
    if _looks_like_json(text) and text not in seen:
        seen.add(text)
        yield text, 0
    unclosed = None
    spans: list[tuple[int, int]] = []
    for start, end in _balanced_spans(text):
        if end < 0:
            unclosed = start
        else:
            spans.append((start, end))
    for start, end in reversed(spans):
        span = text[start:end]
        if span not in seen:
            seen.add(span)
            yield span, start
    if unclosed is not None and not seen:
        yield text[unclosed:], unclosed


def _fences_with_starts(text: str) -> list[tuple[str, int]]:
    if "```" not in text:
        return []
    return [(match.group(1).strip(), match.start()) for match in _FENCE.finditer(text)]


def _fenced_blocks(text: str) -> list[str]:
    """The stripped contents of each markdown code fence (an unclosed one runs to the end)."""
    if "```" not in text:
        return []
    return [match.group(1).strip() for match in _FENCE.finditer(text)]


def _looks_like_json(text: str) -> bool:
    return len(text) >= 2 and (
        (text[0] == "{" and text[-1] == "}") or (text[0] == "[" and text[-1] == "]")
    )


def _balanced_spans(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each top-level balanced bracket span, in order; a final (start, -1)
    when a span is still open at the end of the text.

    One pass over the brackets and quotes (quotes count only inside a span). A closing
    bracket that does not match drops the span it was in; an unclosed span is rescanned
    from its next character, so JSON after a stray ``[`` or ``"`` in the prose is still
    found. Rescans are bounded, so the cost stays linear in the text."""
    position, emitted, rescans = 0, 0, 0
    first_unclosed = -1
    while emitted < _MAX_SPANS:
        span_start, end = _next_span(text, position)
        if span_start < 0:
            break
        if end >= 0:
            yield span_start, end
            emitted += 1
            position = end
            continue
        if first_unclosed < 0:
            first_unclosed = span_start
        if rescans == _MAX_RESCANS or _next_opening(text, span_start + 1) < 0:
            break
        rescans += 1
        position = span_start + 1
    if first_unclosed >= 0:
        yield first_unclosed, -1


def _next_opening(text: str, position: int) -> int:
    braces, brackets = text.find("{", position), text.find("[", position)
    if braces < 0 or brackets < 0:
        return max(braces, brackets)
    return min(braces, brackets)


def _next_span(text: str, position: int) -> tuple[int, int]:
    """The next balanced span from `position`: (start, end), (start, -1) when the text ends
    inside it, (-1, -1) when no bracket opens."""
    stack: list[str] = []
    start = -1
    in_string = escaped = False
    for match in _STRUCTURE.finditer(text, position):
        char = match.group()
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char in "{[":
            if not stack:
                start = match.start()
            stack.append("}" if char == "{" else "]")
        elif not stack:
            continue  # quotes and closers in prose
        elif char == '"':
            in_string = True
        elif char == "\\":
            continue  # outside a string a backslash is not JSON; the parser will say so
        elif stack.pop() != char:
            stack.clear()  # mismatched: drop this span, look for the next one
        elif not stack:
            return start, match.end()
    return (start, -1) if stack else (-1, -1)


def _opening_of(spec: OutputSpec) -> str:
    """The bracket the expected JSON starts with ("" for scalars)."""
    if spec.is_object:
        return "{"
    return "[" if spec.is_array else ""


def _validate(candidate: str, spec: OutputSpec) -> Any:
    import pydantic

    try:
        value = spec.adapter.validate_json(candidate)
    except pydantic.ValidationError as first_error:
        if not _is_syntax_error(first_error):
            raise _undeserializable(spec, first_error) from None
        return _validate_repaired(candidate, spec, first_error)
    _refuse_placeholders(candidate, spec)
    return value


def _validate_repaired(candidate: str, spec: OutputSpec, error: Any) -> Any:
    """`candidate`, which is not JSON, as JSON without trailing commas and comments, or as
    a Python literal (``True``, ``None``, single quotes); `error` when neither validates."""
    import pydantic

    repaired = _without_trailing_commas(_without_comments(candidate))
    if repaired != candidate:
        try:
            value = spec.adapter.validate_json(repaired)
        except pydantic.ValidationError as repaired_error:
            if not _is_syntax_error(repaired_error):
                raise _undeserializable(spec, repaired_error) from None
        else:
            _refuse_placeholders(repaired, spec)
            return value
    literal = _python_literal(candidate)
    if literal is None:
        raise _undeserializable(spec, error)
    try:
        value = spec.adapter.validate_json(literal)
    except pydantic.ValidationError as literal_error:
        raise _undeserializable(spec, literal_error) from None
    _refuse_placeholders(literal, spec)
    return value


def _without_comments(candidate: str) -> str:
    """`candidate` without ``//`` and ``/* */`` comments (strings left alone)."""
    if "/" not in candidate:
        return candidate
    return _COMMENT.sub(lambda m: m.group() if m.group().startswith('"') else "", candidate)


def _python_literal(candidate: str) -> str | None:
    """A Python dict or list literal as JSON, None for anything else."""
    try:
        value = ast.literal_eval(candidate)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, dict | list):
        return None
    try:
        return json.dumps(value)
    except (TypeError, ValueError):  # sets, bytes, complex numbers: not JSON
        return None


def _refuse_placeholders(candidate: str, spec: OutputSpec) -> None:
    """A candidate with a text value that is a placeholder (``"<str>"``, ``"..."``,
    ``"YOUR TITLE HERE"``, a type name) is the template echoed, not an answer."""
    if spec.text_is_value:
        return
    lowered = candidate.lower()
    if not any(hint in lowered for hint in _PLACEHOLDER_HINTS):
        return
    found = _PLACEHOLDER.search(candidate)
    if found is not None:
        raise ParseFailure(
            f"JSON could not be deserialized as {spec.name}: {found.group(1)!r} is a "
            "placeholder of the format, not a value"
        )


def _validate_text(text: str, spec: OutputSpec) -> Any:
    """A string-typed answer, as JSON (``"Paris"``) or as bare text (``Paris``), possibly
    in a fence of its own."""
    import pydantic

    blocks = _fenced_blocks(text)
    if blocks and text.startswith("```") and blocks[0]:
        text = blocks[0]

    with contextlib.suppress(pydantic.ValidationError):
        return spec.adapter.validate_json(text)
    try:
        return spec.adapter.validate_python(text)
    except pydantic.ValidationError as error:
        raise _undeserializable(spec, error) from None


def _is_syntax_error(error: Any) -> bool:
    return any(item["type"] == "json_invalid" for item in error.errors())


def _without_trailing_commas(candidate: str) -> str:
    """`candidate` without commas right before a closing bracket (strings left alone)."""
    return _TRAILING_COMMA.sub(
        lambda m: m.group(1) if m.group(1) is not None else m.group(), candidate
    )


def _undeserializable(spec: OutputSpec, error: Any) -> ParseFailure:
    """The reference's message for JSON that does not validate, with pydantic's reasons."""
    return ParseFailure(
        f"JSON could not be deserialized as {spec.name}: "
        f"{describe_validation_error(error, limit=5)}"
    )
