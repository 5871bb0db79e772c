"""The ``agentensemble`` command driven as a user's script drives it: a subprocess, its
exit code, stdout (the result only) and stderr (everything else)."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
EXAMPLES = ROOT / "examples" / "yaml"
CRAFT = ROOT / "examples" / "yaml" / "research_crew.yaml"
MODELS = "tests.declarative.cli_models"
COMMAND = (sys.executable, "-m", "agentensemble.cli")
WAIT = 60.0
"""Seconds a test waits for the command before failing (a deadline, never a sleep)."""


def agentensemble(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_environment(),
        stdin=subprocess.DEVNULL,
        timeout=WAIT,
        check=False,
    )


def _environment() -> dict[str, str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    environment.pop("AGENTENSEMBLE_MODEL", None)
    return environment


def test_run_prints_the_final_output_on_stdout_and_progress_on_stderr() -> None:
    result = agentensemble("run", CRAFT, "--model", f"{MODELS}:echo", "--input", "topic=kelp")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "done: Write a short report about kelp for readers aged 12.\n"
    assert "✓ [2/2] Science Writer done" in result.stderr
    assert "\x1b[" not in result.stderr  # plain lines when not a terminal


def test_json_output_parses_back() -> None:
    result = agentensemble("run", CRAFT, "--model", f"{MODELS}:echo", "--json", "-q")
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    assert output["exit_reason"] == "COMPLETED"
    assert [task["name"] for task in output["task_outputs"]] == ["research", "report"]
    assert output["raw"] == output["task_outputs"][-1]["raw"]
    assert output["metrics"]["model_calls"] == 2
    assert result.stderr == ""


def test_validate_a_good_file_and_a_bad_one(tmp_path: Path) -> None:
    good = agentensemble("validate", CRAFT)
    assert (good.returncode, good.stdout) == (0, "")
    assert good.stderr.endswith(": ok, 2 tasks\n")

    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "tasks:\n  a: {description: A, context: [b]}\n  c: {description: C, timeout: x}\n",
        encoding="utf-8",
    )
    result = agentensemble("validate", bad)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.splitlines() == [
        f"{bad}:2:33: tasks.a.context[0]: no task named 'b'",
        f"{bad}:3:32: tasks.c.timeout: must be a number, got: 'x'",
        f"2 problems in {bad}",
    ]


def test_validate_says_which_inputs_a_run_will_need(tmp_path: Path) -> None:
    path = tmp_path / "needs.yaml"
    path.write_text("llm: openai:gpt-4o-mini\ntasks:\n  a:\n    description: Do {thing}\n")
    result = agentensemble("validate", path)
    assert result.returncode == 0
    assert result.stderr.endswith("ok, 1 tasks (needs --input for: thing)\n")


def test_validate_names_agent_inputs_and_warns_like_a_run(tmp_path: Path) -> None:
    path = tmp_path / "crew.yaml"
    path.write_text(
        "workflow: sequential\nagents:\n  a: {role: '{field} Analyst', goal: Analyse}\n"
        "tasks:\n  one: {description: One, agent: a}\n  two: {description: Two, agent: a}\n"
    )
    result = agentensemble("validate", path, "--model", f"{MODELS}:echo")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("warning: In this SEQUENTIAL run, 'two' sees no earlier")
    assert lines[-1].endswith("ok, 2 tasks (needs --input for: field)")


def test_bad_input_exits_2_before_any_model_call(tmp_path: Path) -> None:
    needs = tmp_path / "needs.yaml"
    needs.write_text("tasks:\n  a:\n    description: Do {thing}\n")
    missing = agentensemble("run", needs, "--model", f"{MODELS}:echo")
    assert missing.returncode == 2
    assert "need inputs it does not set: thing (pass --input thing=...)" in missing.stderr
    malformed = agentensemble("run", CRAFT, "--model", f"{MODELS}:echo", "--input", "topic")
    assert malformed.returncode == 2
    assert "--input must look like NAME=VALUE, got: 'topic'" in malformed.stderr
    no_model = agentensemble("run", CRAFT, "--model", "nowhere.models:fast")
    assert no_model.returncode == 2
    assert "error: --model: 'nowhere.models:fast' names no known provider" in no_model.stderr
    zero = agentensemble("run", CRAFT, "--model", f"{MODELS}:echo", "--timeout", "0")
    assert zero.returncode == 2
    assert "error: --timeout must be a positive number of seconds, got: 0.0" in zero.stderr
    a_file = tmp_path / "trace.json"
    a_file.write_text("{}")
    trace = agentensemble("run", CRAFT, "--model", f"{MODELS}:echo", "--trace", a_file)
    assert trace.returncode == 2
    assert f"--trace must be a directory, got a file: {a_file}" in trace.stderr
    outputs = {missing.stdout, malformed.stdout, no_model.stdout, zero.stdout, trace.stdout}
    assert outputs == {""}


def test_a_failed_run_exits_1_with_what_completed() -> None:
    result = agentensemble("run", CRAFT, "--model", f"{MODELS}:fails_on_second_task", "--json")
    assert result.returncode == 1
    output = json.loads(result.stdout)
    assert output["exit_reason"] == "ERROR"
    assert [task["name"] for task in output["task_outputs"]] == ["research"]
    assert "the provider went away" in output["error"]
    assert "error: " in result.stderr


def test_a_run_stopped_by_its_timeout_exits_3_with_partial_output() -> None:
    result = agentensemble(
        "run", CRAFT, "--model", f"{MODELS}:stuck_on_second_task", "--timeout", "1", "--json"
    )
    assert result.returncode == 3, result.stderr
    output = json.loads(result.stdout)
    assert output["exit_reason"] == "TIMEOUT"
    assert [task["name"] for task in output["task_outputs"]] == ["research"]
    assert "Stopped early (TIMEOUT): 1 tasks completed" in result.stderr


def test_ctrl_c_stops_the_run_cleanly_and_prints_what_completed() -> None:
    process = subprocess.Popen(
        [*COMMAND, "run", str(CRAFT), "--model", f"{MODELS}:stuck_on_second_task"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
        env=_environment(),
    )
    try:
        seen = _read_stderr_until(process, "● [2/2]")
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=WAIT)
    finally:
        process.kill()
    assert process.returncode == 130, seen + err
    assert "Stopped by Ctrl-C." in err
    fact = "Find the five most interesting facts about honeybees."
    assert out == f"== {fact}\ndone: {fact}\n\n"
    assert "1 task completed" in err


def _read_stderr_until(process: subprocess.Popen[str], marker: str) -> str:
    """stderr up to the line holding `marker` (fails after `WAIT` seconds). It reads the
    pipe's file descriptor itself: a buffered ``readline`` may take in several lines at
    once, and `select` then waits for more while the marker sits in the buffer."""
    assert process.stderr is not None
    descriptor = process.stderr.fileno()
    deadline = time.monotonic() + WAIT
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(descriptor, selectors.EVENT_READ)
        while marker.encode() not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or not selector.select(timeout=left):
                pytest.fail(f"no {marker!r} on stderr within {WAIT}s: {seen.decode()!r}")
            chunk = os.read(descriptor, 65536)
            if not chunk:
                pytest.fail(f"the command ended before {marker!r}: {seen.decode()!r}")
            seen += chunk
    return seen.decode()


def test_new_creates_a_project_whose_test_passes_as_created(tmp_path: Path) -> None:
    created = agentensemble("new", "bee_report", cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    project = tmp_path / "bee_report"
    assert sorted(path.name for path in project.iterdir()) == [
        "README.md",
        "custom_tools.py",
        "ensemble.schema.json",
        "ensemble.yaml",
        "test_ensemble.py",
    ]
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=project,
        env=_environment(),
        timeout=WAIT,
        check=False,
    )
    assert tests.returncode == 0, tests.stdout + tests.stderr
    assert "1 passed" in tests.stdout
    validated = agentensemble("validate", project / "ensemble.yaml", cwd=tmp_path)
    assert validated.returncode == 0, validated.stderr
    odd = agentensemble("new", "#odd: name", cwd=tmp_path)
    assert odd.returncode == 0, odd.stderr
    assert 'name: "#odd: name"' in (tmp_path / "#odd: name" / "ensemble.yaml").read_text()
    again = agentensemble("new", "bee_report", cwd=tmp_path)
    assert again.returncode == 2
    assert "already exists" in again.stderr


def test_a_crewai_project_is_converted_then_runs(tmp_path: Path) -> None:
    converted = agentensemble(
        "new", "ported", "--from-crewai", EXAMPLES / "crewai_project", cwd=tmp_path
    )
    assert converted.returncode == 0, converted.stderr
    assert (
        "note: task 'reporting_task': 'output_file' was left out (write the output"
        in converted.stderr
    )
    ensemble_file = tmp_path / "ported" / "ensemble.yaml"
    text = ensemble_file.read_text(encoding="utf-8")
    assert "background: You're a seasoned researcher" in text
    assert "backstory" not in text
    assert "llm: openai:gpt-4o-mini" in text
    result = agentensemble(
        "run",
        ensemble_file,
        "--model",
        f"{MODELS}:echo",
        "--input",
        "topic=AI agents",
        "--input",
        "current_year=2026",
        "--json",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    output = json.loads(result.stdout)
    research, report = output["task_outputs"]
    assert research["agent_role"] == "AI agents Senior Data Researcher"
    assert report["description"].startswith("Review the context you got")
    assert "sees no earlier task's output" not in result.stderr  # the context chain is kept


def test_trace_export_prints_the_trace_and_its_events(tmp_path: Path) -> None:
    ran = agentensemble("run", CRAFT, "--model", f"{MODELS}:echo", "--trace", tmp_path, "-q")
    assert ran.returncode == 0, ran.stderr
    (trace_file,) = tmp_path.glob("*.json")
    exported = agentensemble("trace", "export", trace_file)
    assert json.loads(exported.stdout)["ensemble_id"] == trace_file.stem
    events = agentensemble("trace", "export", trace_file, "--format", "events")
    types = [json.loads(line)["type"] for line in events.stdout.splitlines()]
    assert types[0] == "ensemble_started"
    assert types[-1] == "ensemble_completed"
    assert types.count("task_completed") == 2


def test_dashboard_serves_during_the_run_and_stops_after_it() -> None:
    result = agentensemble("run", CRAFT, "--model", f"{MODELS}:echo", "--dashboard", "-q")
    assert result.returncode == 0, result.stderr  # the process ended: the server stopped
    assert result.stderr.startswith("Dashboard: http://127.0.0.1:")
    assert result.stdout.startswith("done: Write a short report")


def test_run_connects_the_files_mcp_servers_and_validate_does_not(tmp_path: Path) -> None:
    server = ROOT / "tests" / "tools" / "mcp_server.py"
    crew = tmp_path / "crew.yaml"
    crew.write_text(
        "agents:\n  adder:\n    role: Adder\n    goal: Add\n    tools:\n"
        f"      - mcp: {{command: {sys.executable}, args: ['{server}']}}\n"
        "tasks:\n  add: {description: Add 2 and 3, agent: adder}\n",
        encoding="utf-8",
    )
    validated = agentensemble("validate", crew, "--model", f"{MODELS}:echo")
    assert validated.returncode == 0, validated.stderr
    ran = agentensemble("run", crew, "--model", f"{MODELS}:adds_two_and_three", "--json", "-q")
    assert ran.returncode == 0, ran.stderr
    (task,) = json.loads(ran.stdout)["task_outputs"]
    assert (task["raw"], task["tool_calls"]) == ("2 + 3 = 5", 1)

    crew.write_text(crew.read_text().replace(sys.executable, "/nonexistent/mcp-server"))
    failed = agentensemble("run", crew, "--model", f"{MODELS}:adds_two_and_three", "-q")
    assert failed.returncode == 1  # connecting fails, clearly
    assert failed.stderr.startswith("error: Could not connect to MCP server /nonexistent/")
    assert "Traceback" not in failed.stderr


def test_a_failed_run_resumes_from_the_files_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "crew.yaml"
    path.write_text(
        CRAFT.read_text(encoding="utf-8").replace(
            "workflow: sequential", "workflow: sequential\ncheckpoint: runs.db"
        ),
        encoding="utf-8",
    )
    failed = agentensemble("run", path, "--model", f"{MODELS}:fails_on_second_task", "-q")
    assert failed.returncode == 1
    hint = next(line for line in failed.stderr.splitlines() if line.startswith("resume with:"))
    assert hint.startswith(f"resume with: agentensemble run {path} --resume ")
    run_id = hint.rsplit(" ", 1)[1]
    assert (tmp_path / "runs.db").exists()

    resumed = agentensemble("run", path, "--model", f"{MODELS}:echo", "--resume", run_id, "--json")
    assert resumed.returncode == 0, resumed.stderr
    output = json.loads(resumed.stdout)
    assert output["run_id"] == run_id
    assert output["raw"] == "done: Write a short report about honeybees for readers aged 12."
    assert output["metrics"]["model_calls"] == 2  # one restored, one made now

    bad = agentensemble("run", path, "--model", f"{MODELS}:echo", "--resume", "nope", "-q")
    assert bad.returncode == 2
    assert "no run with that id" in bad.stderr
    wrong = agentensemble(
        "run", path, "--model", f"{MODELS}:echo", "--resume", run_id, "--decision", "maybe"
    )
    assert wrong.returncode == 2
    assert "--decision must be continue, exit or edit:TEXT, got: 'maybe'" in wrong.stderr
