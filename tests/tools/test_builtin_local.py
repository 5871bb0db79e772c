"""The local built-in tools: calculator, datetime and json_parser (BEHAVIOUR §7.7)."""

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentensemble import Agent, Ensemble, ScriptedModel, Task, tool_call
from agentensemble.errors import ToolConfigurationError, ValidationError
from agentensemble.observability._trace import ToolCallTrace
from agentensemble.tools import ToolResult
from agentensemble.tools._calculator import MAX_EXPRESSION_LENGTH, CalculatorTool
from agentensemble.tools._datetime import UNRECOGNIZED, DateTimeTool
from agentensemble.tools._json_parser import JsonParserTool
from agentensemble.tools._resolve import tool_methods

CLOCK_READING = datetime(2024, 3, 15, 10, 30, 0, 123456, tzinfo=UTC)


def fixed_clock() -> datetime:
    return CLOCK_READING


def calculate(expression: str) -> ToolResult:
    result = CalculatorTool().calculator(expression)
    assert isinstance(result, ToolResult)
    return result


def date_time(command: str) -> ToolResult:
    result = DateTimeTool(clock=fixed_clock).datetime(command)
    assert isinstance(result, ToolResult)
    return result


def parse_json(path: str, document: str) -> ToolResult:
    result = JsonParserTool().json_parser(path, document)
    assert isinstance(result, ToolResult)
    return result


def assert_fails(result: ToolResult, message: str) -> None:
    assert (result.is_success, result.error_message) == (False, message)
    assert result.text_for_model == f"Error: {message}"


# --- calculator ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("-2^2", "-4"),
        ("(-2)^2", "4"),
        ("2^-3", "0.125"),
        ("2^3^2", "512"),
        ("--5", "5"),
        ("+-3", "-3"),
        ("2+3*4", "14"),
        ("10 - 8 / 4", "8"),
        ("17 % 5", "2"),
        ("1.5 + 2.5", "4"),
        ("10 / 3", "3.3333333333333335"),
        ("0 - 12", "-12"),
        ("-7 % 3", "-1"),  # sign of the dividend, as Java's %
        ("7 % -3", "1"),
        ("5.5 % 2", "1.5"),
        ("  ( 1 + 2 )\t* 3 ", "9"),
        ("((2))", "2"),
        ("5.", "5"),
        (".5", "0.5"),
        ("2^0.5", "1.4142135623730951"),
        ("10^15", "1000000000000000.0"),  # integral but not below 1e15
        ("10^15 - 1", "999999999999999"),
        ("0 * -1", "0"),
    ],
)
def test_calculator_evaluates(expression: str, expected: str) -> None:
    result = calculate(expression)
    assert result.is_success, result.error_message
    assert result.output == expected
    assert result.structured_output == float(expected)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("", "Expression must not be blank"),
        ("  \t", "Expression must not be blank"),
        ("1/0", "Division by zero"),
        ("1 / (2 - 2)", "Division by zero"),
        ("5%0", "Modulo by zero"),
        ("2 + a", "Invalid expression: Unexpected character 'a'"),
        ("()", "Invalid expression: Unexpected character ')'"),
        ("(2 + 3", "Invalid expression: Missing closing parenthesis"),
        ("2 +", "Invalid expression: Unexpected end of expression"),
        ("-", "Invalid expression: Unexpected end of expression"),
        ("2 f", "Invalid expression: Unexpected character 'f' at position 2"),
        ("(1))", "Invalid expression: Unexpected character ')' at position 3"),
        ("2 3", "Invalid expression: Unexpected character '3' at position 2"),
        ("1.2.3", "Invalid expression: Invalid number: 1.2.3"),
        (".", "Invalid expression: Invalid number: ."),
        ("2**3", "Invalid expression: Unexpected character '*'"),
        ("0^-1", "Division by zero"),
        ("(-8)^(1/3)", "Result is not a real number"),
    ],
)
def test_calculator_failures(expression: str, message: str) -> None:
    assert_fails(calculate(expression), message)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("9^9^9", "Result is too large"),
        ("2^1023 * 2", "Result is too large"),
        ("1" + "0" * 308 + " * 10", "Result is too large"),
        ("1" + "0" * 308 + " / 0.1", "Result is too large"),
        ("1" + "0" * 308 + " + 1" + "0" * 308, "Result is too large"),
        ("9" * 400, "Number is too large"),
        ("(" * 200 + "1" + ")" * 200, "Expression is nested too deeply (more than 100 levels)"),
        ("-" * 300 + "1", "Expression is nested too deeply (more than 100 levels)"),
        ("2^" * 300 + "1", "Expression is nested too deeply (more than 100 levels)"),
        ("1+" * 600 + "1", "Expression is too long (1201 characters; the limit is 1000)"),
    ],
)
def test_calculator_refuses_abuse_without_raising(expression: str, message: str) -> None:
    assert_fails(calculate(expression), message)


def test_calculator_accepts_moderate_nesting_and_length() -> None:
    assert calculate("(" * 50 + "1" + ")" * 50).output == "1"
    longest = "1+" * ((MAX_EXPRESSION_LENGTH - 1) // 2) + "1"
    assert len(longest) <= MAX_EXPRESSION_LENGTH
    assert calculate(longest).output == str(longest.count("1"))


def _integer_expressions() -> st.SearchStrategy[str]:
    """Texts of + - * expressions over small integers, with and without parentheses."""
    leaves = st.integers(min_value=0, max_value=20).map(str)

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        binary = st.builds("{} {} {}".format, children, st.sampled_from(["+", "-", "*"]), children)
        return st.one_of(binary, children.map("({})".format), children.map("-{}".format))

    return st.recursive(leaves, extend, max_leaves=8)


@given(_integer_expressions())
def test_calculator_agrees_with_python_integer_arithmetic(expression: str) -> None:
    # Python's precedence of + - * and unary minus matches the grammar; values stay < 2^53.
    expected = eval(expression, {"__builtins__": {}})
    assert calculate(expression).output == str(expected)


# --- datetime -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("now", "2024-03-15T10:30:00 UTC"),
        ("NOW", "2024-03-15T10:30:00 UTC"),
        ("now in Asia/Tokyo", "2024-03-15T19:30:00+09:00 Asia/Tokyo"),
        ("now in America/New_York", "2024-03-15T06:30:00-04:00 America/New_York"),
        ("now in UTC", "2024-03-15T10:30:00+00:00 UTC"),
        ("today", "2024-03-15"),
        ("today in Pacific/Kiritimati", "2024-03-16"),
        ("today in America/Los_Angeles", "2024-03-15"),
        ("2024-03-15 + 10 days", "2024-03-25"),
        ("2024-03-15 - 1 day", "2024-03-14"),
        ("2024-03-15 - 2 weeks", "2024-03-01"),
        ("2024-01-31 + 1 month", "2024-02-29"),
        ("2023-01-31 + 1 months", "2023-02-28"),
        ("2024-01-15 - 1 months", "2023-12-15"),
        ("2024-02-29 + 1 years", "2025-02-28"),
        ("2024-02-29 + 4 YEARS", "2028-02-29"),
        ("2024-03-15 +3 days", "2024-03-18"),
        ("today + 1 day", "2024-03-16"),
        ("2024-03-15T10:30:00 + 2 hours", "2024-03-15T12:30:00Z"),
        ("2024-03-15T10:30:00 - 90 minutes", "2024-03-15T09:00:00Z"),
        ("2024-03-15T23:59:30 + 45 seconds", "2024-03-16T00:00:15Z"),
        ("2024-03-15T10:30:00+02:00 + 1 hour", "2024-03-15T09:30:00Z"),
        ("2024-03-15T10:30:00Z + 1 hour", "2024-03-15T11:30:00Z"),
        ("2024-03-15 + 3 hours", "2024-03-15T03:00:00Z"),
        ("2024-01-31T08:00:00 + 1 month", "2024-02-29T08:00:00Z"),
        ("now - 30 minutes", "2024-03-15T10:00:00Z"),
        (
            "convert 2024-03-15T10:30:00 from UTC to America/New_York",
            "2024-03-15T06:30:00-04:00 America/New_York",
        ),
        (
            "Convert 2024-07-01T09:00 FROM Europe/London TO Asia/Kolkata",
            "2024-07-01T13:30:00+05:30 Asia/Kolkata",
        ),
        (  # 02:30 does not exist that night in New York: moved forward by the gap
            "convert 2024-03-10T02:30:00 from America/New_York to UTC",
            "2024-03-10T07:30:00+00:00 UTC",
        ),
    ],
)
def test_datetime_commands(command: str, expected: str) -> None:
    result = date_time(command)
    assert result.is_success, result.error_message
    assert result.output == expected


@pytest.mark.parametrize(
    ("command", "message"),
    [
        ("", "Command must not be blank"),
        ("   ", "Command must not be blank"),
        ("what time is it", UNRECOGNIZED),
        ("2024-03-15 + 1.5 days", UNRECOGNIZED),
        ("now in Mars/Olympus_Mons", "Unknown timezone: 'Mars/Olympus_Mons'"),
        ("today in ../../etc/passwd", "Unknown timezone: '../../etc/passwd'"),
        ("convert 2024-03-15T10:30:00 from Nowhere to UTC", "Unknown timezone: 'Nowhere'"),
        ("convert 2024-03-15T10:30:00 from UTC to utc/x", "Unknown timezone: 'utc/x'"),
        (
            "2024-02-30 + 1 days",
            "Invalid date or date-time: '2024-02-30'. Use YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS",
        ),
        (
            "2024-03-15 + 2 fortnights",
            "Unknown unit: 'fortnights'. Use days, weeks, months, years, hours, minutes or seconds",
        ),
        ("9999-12-31 + 1 days", "Result is outside the supported years 1-9999"),
        ("0001-01-01T00:00:00 - 1 seconds", "Result is outside the supported years 1-9999"),
        ("2024-01-01 + " + "9" * 400 + " days", "Result is outside the supported years 1-9999"),
        (
            "convert 2024-03-15T10:30:00Z from UTC to Asia/Tokyo",
            "Give the date-time to convert without an offset, got: '2024-03-15T10:30:00Z' "
            "(the 'from' zone says where it is)",
        ),
        ("now " * 200, "Command is too long (799 characters; the limit is 500)"),
    ],
)
def test_datetime_failures(command: str, message: str) -> None:
    assert_fails(date_time(command), message)


def test_datetime_unrecognized_message_lists_every_form() -> None:
    assert UNRECOGNIZED.startswith("Unrecognized command. Supported: 'now', 'now in <timezone>'")
    for form in ("'today in <timezone>'", "days|weeks|months|years", "hours|minutes|seconds"):
        assert form in UNRECOGNIZED
    assert "'convert <YYYY-MM-DDTHH:MM:SS> from <timezone> to <timezone>'" in UNRECOGNIZED


def test_datetime_reads_a_clock_in_any_zone_as_utc() -> None:
    tokyo = CLOCK_READING.astimezone(timezone(timedelta(hours=9)))
    assert DateTimeTool(clock=lambda: tokyo).datetime("now").output == "2024-03-15T10:30:00 UTC"


def test_datetime_default_clock_is_the_system_clock() -> None:
    output = DateTimeTool().datetime("now").output
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d UTC", output)


def test_datetime_rejects_a_clock_that_is_not_callable() -> None:
    with pytest.raises(ValidationError, match="DateTimeTool clock must be a callable"):
        DateTimeTool(clock="2024-03-15")  # type: ignore[arg-type]


async def test_datetime_clock_returning_a_naive_datetime_fails_the_task() -> None:
    tool = DateTimeTool(clock=lambda: datetime(2024, 3, 15)).datetime
    with pytest.raises(ToolConfigurationError, match="must return an aware datetime"):
        await tool.invoke('{"command": "now"}')


# --- json_parser --------------------------------------------------------------------------

DOCUMENT = json.dumps(
    {
        "user": {
            "name": "Ann",
            "age": 30,
            "score": 2.5,
            "active": True,
            "banned": False,
            "nickname": None,
            "address": {"city": "Oslo", "zip": "0150"},
            "tags": ["a", "b"],
        },
        "items": [{"title": "First"}, {"title": "Second"}],
        "users": [{"name": "Bo"}, {"name": "Cy"}],
        "matrix": [[1, 2], [3, 4]],
        "big": 1e20,
        "huge": 12345678901234567890,
        "città": "Milano ü",
    }
)


@pytest.mark.parametrize(
    ("path", "expected", "structured"),
    [
        ("user.address.city", "Oslo", "Oslo"),
        ("items[0].title", "First", "First"),
        ("users[1].name", "Cy", "Cy"),
        ("user.address.zip", "0150", "0150"),
        ("user.age", "30", 30),
        ("huge", "12345678901234567890", 12345678901234567890),
        ("user.score", "2.5", 2.5),
        ("big", "1e+20", 1e20),
        ("user.active", "true", True),
        ("user.banned", "false", False),
        ("user.nickname", "null", None),
        ("user.address", '{"city":"Oslo","zip":"0150"}', {"city": "Oslo", "zip": "0150"}),
        ("user.tags", '["a","b"]', ["a", "b"]),
        ("matrix[1][0]", "3", 3),
        ("matrix[0]", "[1,2]", [1, 2]),
        ("città", "Milano ü", "Milano ü"),
        ("$.users[0].name", "Bo", "Bo"),
        ("  user.age  ", "30", 30),
    ],
)
def test_json_parser_extracts(path: str, expected: str, structured: Any) -> None:
    result = parse_json(path, DOCUMENT)
    assert result.is_success, result.error_message
    assert (result.output, result.structured_output) == (expected, structured)


@pytest.mark.parametrize(
    ("path", "document", "expected"),
    [
        ("[0]", '[{"a": 1}, 2]', '{"a":1}'),
        ("[1]", '[{"a": 1}, 2]', "2"),
        ("[0].a", '[{"a": 1}, 2]', "1"),
        ("[0][1]", "[[1, 2]]", "2"),
        ("$", '{"a": [1, {"b": null}]}', '{"a":[1,{"b":null}]}'),
    ],
)
def test_json_parser_paths_from_the_root(path: str, document: str, expected: str) -> None:
    assert parse_json(path, document).output == expected


@pytest.mark.parametrize(
    ("path", "document", "message"),
    [
        ("", DOCUMENT, "Path expression must not be blank"),
        ("   ", DOCUMENT, "Path expression must not be blank"),
        ("user", "", "JSON content must not be blank"),
        ("user", " \n", "JSON content must not be blank"),
        ("a", '{"a": ', "Invalid JSON: Expecting value: line 1 column 7 (char 6)"),
        (
            "a",
            "{'a': 1}",
            "Invalid JSON: Expecting property name enclosed in double quotes: "
            "line 1 column 2 (char 1)",
        ),
        ("a", '{"a": NaN}', "Invalid JSON: NaN is not a JSON value"),
        ("a", '{"a": 1e400}', "Invalid JSON: number 1e400 is out of range"),
        ("a", "[" * 100_000, "Invalid JSON: nested too deeply"),
        ("user.email", DOCUMENT, "Path not found: 'email'"),
        ("account.id", DOCUMENT, "Path not found: 'account'"),
        ("user.name.first", DOCUMENT, "Path not found: 'user.name.first'"),
        ("user[0]", DOCUMENT, "Path not found: 'user[0]'"),
        ("items.title", DOCUMENT, "Path not found: 'items.title'"),
        (
            "items[5].title",
            DOCUMENT,
            "Array index out of bounds: index 5 is out of bounds for array of size 2",
        ),
        (
            "matrix[0][2]",
            DOCUMENT,
            "Array index out of bounds: index 2 is out of bounds for array of size 2",
        ),
        ("a..b", DOCUMENT, "Invalid path expression: empty key in 'a..b'"),
        (".a", DOCUMENT, "Invalid path expression: empty key in '.a'"),
        ("a.", DOCUMENT, "Invalid path expression: empty key in 'a.'"),
        (
            "a[x]",
            DOCUMENT,
            "Invalid path expression: array index must be a non-negative integer, got '[x]' "
            "in 'a[x]'",
        ),
        (
            "a[-1]",
            DOCUMENT,
            "Invalid path expression: array index must be a non-negative integer, got '[-1]' "
            "in 'a[-1]'",
        ),
        ("a[", DOCUMENT, "Invalid path expression: '[' without a closing ']' in 'a['"),
        ("a]", DOCUMENT, "Invalid path expression: unexpected ']' at position 1 in 'a]'"),
        ("a[0]b", DOCUMENT, "Invalid path expression: unexpected 'b' at position 4 in 'a[0]b'"),
        (
            "a" * 1001,
            DOCUMENT,
            "Path expression is too long (1001 characters; the limit is 1000)",
        ),
    ],
)
def test_json_parser_failures(path: str, document: str, message: str) -> None:
    assert_fails(parse_json(path, document), message)


async def test_json_parser_missing_argument_is_an_argument_failure() -> None:
    result = await JsonParserTool().json_parser.invoke('{"json_path": "a"}')
    assert not result.is_success
    assert result.error_message is not None
    assert result.error_message.startswith("Invalid arguments for tool 'json_parser': json:")


# --- schemas and agent runs ---------------------------------------------------------------


def test_each_tool_offers_one_method_with_its_schema() -> None:
    specs = {
        spec.name: spec.parameters
        for owner in (CalculatorTool(), DateTimeTool(), JsonParserTool())
        for spec in (method.spec for method in tool_methods(owner))
    }
    assert specs == {
        "calculator": {
            "type": "object",
            "properties": {
                "expression": {
                    "type": "string",
                    "description": ("Arithmetic expression, for example '(2 + 3) * 4 ^ 2 / 7 % 3'"),
                }
            },
            "required": ["expression"],
        },
        "datetime": {
            "type": "object",
            "properties": {
                "command": {
                    "type": "string",
                    "description": (
                        "One of: 'now', 'now in Europe/Paris', 'today', 'today in Asia/Tokyo', "
                        "'2024-01-31 + 1 months', '2024-03-15T10:30:00 - 2 hours', "
                        "'convert 2024-03-15T10:30:00 from UTC to America/New_York'"
                    ),
                }
            },
            "required": ["command"],
        },
        "json_parser": {
            "type": "object",
            "properties": {
                "json_path": {
                    "type": "string",
                    "description": (
                        "Path to the value, e.g. 'user.address.city' or 'items[0].title'"
                    ),
                },
                "json": {"type": "string", "description": "The JSON document, as a string"},
            },
            "required": ["json_path", "json"],
        },
    }
    assert CalculatorTool().calculator.spec.description.startswith(
        "Evaluate an arithmetic expression"
    )
    assert DateTimeTool().datetime.spec.description.startswith("Get the current date or time")
    assert JsonParserTool().json_parser.spec.description.startswith("Extract one value")


def first_tool_call(tool_object: object, name: str, **arguments: Any) -> ToolCallTrace:
    llm = ScriptedModel([tool_call(name, **arguments), "done"])
    agent = Agent("Worker", "Work", llm=llm, tools=[tool_object])
    output = Ensemble(tasks=[Task("Use the tool", agent=agent)]).run()
    trace = output.task_outputs[0].trace
    assert trace is not None
    return trace.llm_interactions[0].tool_calls[0]


def test_an_agent_uses_the_calculator() -> None:
    call = first_tool_call(CalculatorTool(), "calculator", expression="2+3*4")
    assert (call.outcome, call.result, call.structured_output) == ("SUCCESS", "14", 14.0)


def test_an_agent_sees_a_calculator_error() -> None:
    call = first_tool_call(CalculatorTool(), "calculator", expression="1/0")
    assert (call.outcome, call.result) == ("FAILURE", "Error: Division by zero")


def test_an_agent_uses_the_datetime_tool() -> None:
    tool_object = DateTimeTool(clock=fixed_clock)
    call = first_tool_call(tool_object, "datetime", command="today in Asia/Tokyo")
    assert (call.outcome, call.result) == ("SUCCESS", "2024-03-15")


def test_an_agent_uses_the_json_parser() -> None:
    call = first_tool_call(
        JsonParserTool(), "json_parser", json_path="items[1].title", json=DOCUMENT
    )
    assert (call.outcome, call.result, call.structured_output) == ("SUCCESS", "Second", "Second")


async def test_deeply_nested_values_come_back_as_text_only() -> None:
    from agentensemble.tools._json_parser import MAX_STRUCTURED_DEPTH

    deep = "[" * 300 + "]" * 300
    (resolved,) = tool_methods(JsonParserTool())
    result = await resolved.invoke(json.dumps({"json_path": "a", "json": '{"a": ' + deep + "}"}))
    assert result.is_success
    assert result.output == deep
    assert result.structured_output is None
    shallow = "[" * MAX_STRUCTURED_DEPTH + "]" * MAX_STRUCTURED_DEPTH
    result = await resolved.invoke(json.dumps({"json_path": "a", "json": '{"a": ' + shallow + "}"}))
    assert result.structured_output is not None
