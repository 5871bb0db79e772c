from pathlib import Path

import pytest

from agentensemble._demo import search_notes
from agentensemble.cli import main

from .integration.openai_server import OpenAIServer, OpenAIStub, ToolCalls


def test_demo_runs_offline_and_says_so_first(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTENSEMBLE_MODEL", raising=False)
    assert main(["demo"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Running offline on a built-in simulated model")
    text = "\n".join(lines)
    assert "== Researcher: Research honeybees using the search_notes tool" in text
    assert "- Foragers tell nest-mates where flowers are with the waggle dance." in text
    assert "== Writer: Write a short article about honeybees from the research" in text
    assert lines[-1].startswith("2 tasks, 1 tool call, 3 model calls, ")


def test_demo_topic_flows_through_the_template(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--topic", "solar power"]) == 0
    assert "Photovoltaic module prices fell" in capsys.readouterr().out


@pytest.mark.integration
def test_demo_against_a_provider_named_by_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stub = OpenAIStub(
        [ToolCalls([("c1", "search_notes", '{"query": "honeybees"}')]), "- fact one", "An article."]
    )
    with OpenAIServer(stub) as server:
        monkeypatch.setenv("AGENTENSEMBLE_MODEL", f"openai-compatible:stub@{server.base_url}")
        assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"Running on openai-compatible:stub@{server.base_url}."
    assert "An article." in out
    assert stub.requests[1]["messages"][3]["content"].startswith("A colony has one queen")


def test_a_bad_model_string_is_a_clear_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "gpt-4o"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "error: --model string must look like 'provider:model'" in captured.err


def test_search_notes_tool() -> None:
    assert search_notes("Honeybees").startswith("A colony")
    assert search_notes("volcanoes").startswith("No notes found for 'volcanoes'")


def test_trace_show_prints_a_readable_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--trace", str(tmp_path)]) == 0
    (trace_file,) = tmp_path.iterdir()
    capsys.readouterr()
    assert main(["trace", "show", str(trace_file)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith(f"Run {trace_file.stem} · PARALLEL · COMPLETED · ")
    assert lines[0].endswith("· capture OFF · schema 1.5")
    assert "Inputs: topic=honeybees" in lines
    assert "Agent: Researcher (tools: search_notes)" in lines
    assert "  1. Researcher: Research honeybees using the search_notes tool" in lines
    assert any(
        line.startswith('     ↳ search_notes({"query": "honeybees"}) SUCCESS') for line in lines
    )
    assert lines[-1].startswith("Totals: 3 model calls · 1 tool call · ")


def test_trace_show_of_a_missing_or_broken_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trace", "show", str(tmp_path / "absent.json")]) == 2
    absent = capsys.readouterr().err
    assert absent.startswith("error: cannot read")
    assert "No such file" in absent
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": "1.2"}')
    assert main(["trace", "show", str(broken)]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1  # one line, not a list of pydantic errors
    assert "is not an agentensemble trace (ensemble_id: Field required, and" in lines[0]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import agentensemble

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"agentensemble {agentensemble.__version__}"
