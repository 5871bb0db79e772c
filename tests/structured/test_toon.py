"""ContextFormat.TOON (BEHAVIOUR 15): the encoder against the TOON specification's examples,
and where a run uses it: structured context, JSON tool results, traces."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import toon_format

from agentensemble import (
    Agent,
    ContextFormat,
    Ensemble,
    ScriptedModel,
    Task,
    ToolCall,
    ValidationError,
    tool,
)
from agentensemble._formats import encode_toon, format_json_text, format_value
from agentensemble.models import ToolResultMessage

from .models import Report

# examples/conversions/users.{json,toon} of the TOON specification repository
USERS = {
    "users": [
        {"id": 1, "name": "Alice", "role": "admin", "active": True},
        {"id": 2, "name": "Bob", "role": "developer", "active": True},
        {"id": 3, "name": "Charlie", "role": "designer", "active": False},
    ]
}
USERS_TOON = (
    "users[3]{id,name,role,active}:\n"
    "  1,Alice,admin,true\n"
    "  2,Bob,developer,true\n"
    "  3,Charlie,designer,false"
)
SPEC_CASES = json.loads(
    (Path(__file__).parent.parent / "data" / "toon_spec_encode.json").read_text()
)["cases"]


def test_uniform_records_match_the_specification_example() -> None:
    assert encode_toon(USERS) == USERS_TOON


@pytest.mark.parametrize("case", SPEC_CASES, ids=[case["name"] for case in SPEC_CASES])
def test_nested_and_tabular_data_match_the_specification_fixtures(case: dict[str, Any]) -> None:
    assert encode_toon(case["input"]) == case["expected"]


def test_the_fixtures_cover_nesting_and_uniform_records() -> None:
    names = " ".join(case["name"] for case in SPEC_CASES)
    assert "deeply nested objects" in names
    assert "arrays of uniform objects in tabular format" in names


def test_the_reference_guide_example() -> None:
    data = {
        "items": [{"sku": "A1", "qty": 2, "price": 9.99}, {"sku": "B2", "qty": 1, "price": 14.5}]
    }
    assert encode_toon(data) == "items[2]{sku,qty,price}:\n  A1,2,9.99\n  B2,1,14.5"


def test_models_encode_through_their_json_form() -> None:
    report = Report(title="Q3, final", score=8, tags=["a", "b"])
    assert encode_toon(report) == 'title: "Q3, final"\nscore: 8\ntags[2]: a,b'


def test_format_value_and_format_json_text_follow_the_reference_formatter() -> None:
    assert format_value(None, ContextFormat.TOON) == "null"
    assert format_value("as is", ContextFormat.TOON) == "as is"
    assert format_value({"a": [1, 2]}, ContextFormat.JSON) == '{"a":[1,2]}'
    assert format_json_text(json.dumps(USERS), ContextFormat.TOON) == USERS_TOON
    assert format_json_text(json.dumps(USERS), ContextFormat.JSON) == json.dumps(USERS)
    for unchanged in ("", "plain text", "{not json", "42"):
        assert format_json_text(unchanged, ContextFormat.TOON) == unchanged


def test_structured_context_is_shown_in_toon_and_text_context_as_it_is() -> None:
    writer = ScriptedModel(['{"title": "Q3", "score": 8, "tags": ["a"]}'])
    notes = ScriptedModel(["plain notes"])
    reader = ScriptedModel(["done"])
    report = Task("Write", agent=Agent("Writer", "Write", llm=writer), output_type=Report)
    text = Task("Note", agent=Agent("Noter", "Note", llm=notes))
    read = Task("Read", agent=Agent("Reader", "Read", llm=reader), context=[report, text])
    Ensemble(tasks=[report, text, read], context_format=ContextFormat.TOON).run()

    prompt = str(reader.requests[0].messages[1].text)
    assert "### Writer: Write\ntitle: Q3\nscore: 8\ntags[1]: a\n---" in prompt
    assert "### Noter: Note\nplain notes\n---" in prompt


@tool
def list_users() -> str:
    """Every user, as JSON."""
    return json.dumps(USERS)


def test_json_tool_results_reach_the_model_in_toon_and_the_trace_keeps_json() -> None:
    model = ScriptedModel([ToolCall(id="c1", name="list_users", arguments="{}"), "3 users"])
    agent = Agent("Admin", "Count users", llm=model, tools=[list_users])
    task = Task("How many users?", agent=agent)
    output = Ensemble(tasks=[task], context_format=ContextFormat.TOON).run()

    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResultMessage)
    assert result.text == USERS_TOON
    trace = output.task_outputs[0].trace
    assert trace is not None
    assert trace.llm_interactions[0].tool_calls[0].result == json.dumps(USERS)


def test_the_json_format_leaves_tool_results_alone() -> None:
    model = ScriptedModel([ToolCall(id="c1", name="list_users", arguments="{}"), "3 users"])
    agent = Agent("Admin", "Count users", llm=model, tools=[list_users])
    Ensemble(tasks=[Task("How many users?", agent=agent)]).run()
    assert model.requests[1].messages[-1].text == json.dumps(USERS)


def test_a_trace_renders_as_toon_with_the_same_data(tmp_path: Path) -> None:
    task = Task("Compute", handler=lambda ctx: "42")
    trace = Ensemble(tasks=[task]).run().trace
    assert trace is not None

    path = tmp_path / "trace.toon"
    text = trace.to_toon(path)
    assert path.read_text() == text
    assert toon_format.decode(text) == json.loads(trace.to_json())
    assert len(text) < len(trace.to_json())


def test_toon_without_the_package_is_a_validation_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "toon_format", None)  # import now raises ImportError
    with pytest.raises(ValidationError) as raised:
        Ensemble(tasks=[Task("x", handler=lambda ctx: "x")], context_format=ContextFormat.TOON)
    assert str(raised.value) == (
        "Ensemble context_format TOON requires the toon-format package: "
        'pip install "agentensemble[toon]"'
    )


def test_context_format_must_be_a_context_format_or_its_name() -> None:
    with pytest.raises(ValidationError) as raised:
        Ensemble(tasks=[Task("x", handler=lambda ctx: "x")], context_format="YAML")  # type: ignore[arg-type]
    assert str(raised.value) == "Ensemble context_format must be one of [JSON, TOON], got: 'YAML'"
    named = Ensemble(tasks=[Task("x", handler=lambda ctx: "x")], context_format="toon")  # type: ignore[arg-type]
    assert named.context_format is ContextFormat.TOON
