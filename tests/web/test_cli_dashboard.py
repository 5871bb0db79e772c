"""``agentensemble dashboard TRACE.json``: a saved run's page, served until Ctrl-C."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
from pathlib import Path

import httpx
import pytest

from agentensemble import Ensemble, ScriptedModel, Task
from agentensemble.cli import main
from agentensemble.observability import JsonTraceExporter
from tests.web.helpers import DEADLINE


async def saved_trace(directory: Path) -> Path:
    ensemble = Ensemble(
        tasks=[Task(description="Say hi", expected_output="A greeting")],
        llm=ScriptedModel(["Hi."]),
        trace_exporter=JsonTraceExporter(str(directory)),
    )
    await ensemble.arun()
    [path] = await asyncio.to_thread(lambda: list(directory.glob("*.json")))
    return path


async def test_serves_a_saved_trace_until_interrupted(tmp_path: Path) -> None:
    trace = await saved_trace(tmp_path)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "agentensemble.cli",
        "dashboard",
        str(trace),
        "--port",
        "0",
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        async with asyncio.timeout(DEADLINE):
            line = (await process.stderr.readline()).decode()
        url = re.search(r"http://\S+", line)
        assert url is not None, line
        async with httpx.AsyncClient(base_url=url.group(0)) as http:
            runs = (await http.get("/api/runs")).json()
            page = await http.get("/")
    finally:
        process.send_signal(signal.SIGINT)
        async with asyncio.timeout(DEADLINE):
            code = await process.wait()
    assert [run["status"] for run in runs] == ["completed"]
    assert "text/html" in page.headers["content-type"]
    assert code == 130


def test_a_file_that_is_not_a_trace_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text('{"hello": 1}')
    assert main(["dashboard", str(bad)]) == 2
    assert "is not an agentensemble trace" in capsys.readouterr().err
    assert main(["dashboard", str(tmp_path / "missing.json")]) == 2
    assert "cannot read" in capsys.readouterr().err
