"""API keys never leave the model client: not in traces at any capture mode, not in logs at
DEBUG (ours and the SDK's), not in events or their wire form, not in error messages
(issue 27, secrets). Every artifact of a FULL run, with tools and an error, is searched."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from agentensemble import (
    Agent,
    CaptureMode,
    Ensemble,
    EnsembleListener,
    JsonTraceExporter,
    OpenAIChatModel,
    Task,
    TaskExecutionError,
    tool,
)
from agentensemble.observability import serialize_event

from .openai_server import Error, OpenAIServer, OpenAIStub, ToolCalls

pytestmark = pytest.mark.integration

KEY = "sk-test-9f8e7d6c5b4a-DO-NOT-LEAK"
ENV_KEY = "sk-env-1a2b3c4d5e6f-DO-NOT-LEAK"


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}"


class WireRecorder(EnsembleListener):
    def __init__(self) -> None:
        self.lines: list[str] = []

    def on_event(self, event: object) -> None:
        self.lines.append(json.dumps(serialize_event(event)))  # type: ignore[arg-type]
        self.lines.append(repr(event))


@pytest.mark.parametrize("mode", list(CaptureMode), ids=lambda mode: mode.value)
def test_no_artifact_of_a_run_holds_the_api_key(
    mode: CaptureMode,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
    stub = OpenAIStub(
        [ToolCalls([("c1", "lookup", '{"city": "Oslo"}')]), "Sunny.", Error(401), Error(401)]
    )
    recorder = WireRecorder()
    caplog.set_level(logging.DEBUG)  # every logger: ours, the SDK's, httpx's
    with OpenAIServer(stub) as server:
        by_argument = OpenAIChatModel("m", base_url=server.base_url, api_key=KEY, max_retries=0)
        from_environment = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
        first = Task("Weather in Oslo", agent=Agent("A", "G", llm=by_argument, tools=[lookup]))
        second = Task("Summarise", agent=Agent("B", "G", llm=from_environment), context=[first])
        ensemble = Ensemble(
            tasks=[first, second],
            capture_mode=mode,
            listeners=[recorder],
            trace_exporter=JsonTraceExporter(tmp_path),
        )
        with pytest.raises(TaskExecutionError) as caught:  # the second task's 401
            ensemble.run()
    assert stub.authorizations[0] == f"Bearer {KEY}"  # the key was really used
    assert stub.authorizations[-1] == f"Bearer {ENV_KEY}"

    failure = caught.value
    artifacts = {
        "error": f"{failure}\n{failure!r}\n{getattr(failure, '__cause__', '')!r}",
        "logs": "\n".join(
            f"{record.getMessage()} {record.args!r} {record.exc_text or ''}"
            for record in caplog.records
        ),
        "events": "\n".join(recorder.lines),
        "traces": "\n".join(path.read_text() for path in tmp_path.glob("*.json")),
        "models": f"{by_argument!r} {from_environment!r}",
    }
    assert artifacts["traces"], "a trace was written"
    assert any(record.name.startswith("openai") for record in caplog.records)  # SDK's DEBUG too
    assert "401" in artifacts["error"]
    for name, text in artifacts.items():
        for secret in (KEY, ENV_KEY, KEY[8:20], ENV_KEY[7:19]):
            assert secret not in text, f"the key leaked into the {name}"
